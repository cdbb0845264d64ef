"""Hypothesis strategies that draw small problems *with their ground truth*.

Every strategy is seeded through hypothesis (no hidden randomness) and shrinks towards
small examples. Example::

    from hypothesis import given
    from recloop.testing.strategies import bandit_problems

    @given(bandit_problems())
    def test_ips_is_finite(case):
        est = evaluators.ips(case.log, case.action_dist)
        assert 0 <= est.value <= 1 / case.log.pscore.min()
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from hypothesis import strategies as st

from recloop.testing._problems import LOGGING_POLICIES, BanditProblem
from simulator.logs import BanditLog

__all__ = ["BanditCase", "GraphCase", "bandit_problems", "profile_graphs", "rating_triples",
           "worlds"]

_floats = dict(allow_nan=False, allow_infinity=False)


@dataclass(frozen=True, eq=False)
class BanditCase:
    """A drawn problem, one log of it, and the truth: ``value`` of the target policy and
    ``expected_reward`` (n_rounds, n_actions) per record."""

    problem: BanditProblem
    log: BanditLog
    action_dist: np.ndarray
    expected_reward: np.ndarray
    value: float


@st.composite
def bandit_problems(draw, *, max_actions: int = 5, max_dim: int = 3, min_rounds: int = 1,
                    max_rounds: int = 50, logging=LOGGING_POLICIES,
                    deficient: bool | None = False) -> BanditCase:
    """A contextual bandit problem with a logging and a target policy, and a log from it.

    ``deficient=None`` lets hypothesis choose whether one action is never logged.
    """
    k = draw(st.integers(2, max_actions))
    d = draw(st.integers(1, max_dim))
    m = draw(st.integers(1, 6))
    arr = lambda shape, lo=-2.0, hi=2.0: np.array(  # noqa: E731
        draw(st.lists(st.floats(lo, hi, **_floats), min_size=int(np.prod(shape)),
                      max_size=int(np.prod(shape)))), dtype=np.float64).reshape(shape)
    defic = draw(st.booleans()) if deficient is None else deficient
    problem = BanditProblem(
        support=arr((m, d)), theta=arr((k, d)), bias=arr((k,), -3.0, 1.0),
        logging=draw(st.sampled_from(tuple(logging))), logging_scores=arr((k, d)),
        target_scores=arr((k, d)), target_temperature=draw(st.floats(0.1, 5.0)),
        epsilon=draw(st.floats(0.05, 1.0)), deficient=k - 1 if defic else None,
    )
    n = draw(st.integers(min_rounds, max_rounds))
    seed = draw(st.integers(0, 2**32 - 1))
    log, action_dist = problem.sample(n, np.random.default_rng(seed))
    return BanditCase(problem, log, action_dist, problem.expected_reward(log.context),
                      problem.value)


@dataclass(frozen=True, eq=False)
class GraphCase:
    """A reference profile graph and a campaign-shifted one (``pushed`` items added)."""

    reference: sp.csr_matrix
    current: sp.csr_matrix
    pushed: np.ndarray


@st.composite
def profile_graphs(draw, *, max_users: int = 12, max_items: int = 8) -> GraphCase:
    """Binary users x items graphs with empty rows, items nobody holds and a dominant item."""
    n_users = draw(st.integers(1, max_users))
    n_items = draw(st.integers(1, max_items))
    cells = draw(st.lists(st.booleans(), min_size=n_users * n_items, max_size=n_users * n_items))
    dense = np.array(cells, dtype=bool).reshape(n_users, n_items)
    if draw(st.booleans()):  # a dominant item
        dense[:, draw(st.integers(0, n_items - 1))] |= np.array(
            draw(st.lists(st.booleans(), min_size=n_users, max_size=n_users)))
    pushed = np.unique(np.array(draw(st.lists(st.integers(0, n_items - 1), max_size=3)),
                                dtype=np.int64))
    reached = np.array(draw(st.lists(st.booleans(), min_size=n_users, max_size=n_users)))
    shifted = dense.copy()
    shifted[np.ix_(reached, pushed)] = True
    as_csr = lambda a: sp.csr_matrix(a.astype(np.float64))  # noqa: E731
    return GraphCase(as_csr(dense), as_csr(shifted), pushed)


@st.composite
def rating_triples(draw, *, max_users: int = 8, max_items: int = 8,
                   jester: bool | None = None):
    """(users, items, ratings) arrays with unique (user, item) pairs.

    Draws ties, single-rating users, items rated once; with ``jester`` (or when hypothesis
    chooses) ratings in [-10, 10] with stored zeros, otherwise integers 1-5.
    """
    n_users = draw(st.integers(1, max_users))
    n_items = draw(st.integers(1, max_items))
    pairs = draw(st.lists(st.tuples(st.integers(0, n_users - 1), st.integers(0, n_items - 1)),
                          min_size=1, max_size=n_users * n_items, unique=True))
    users = np.array([p[0] for p in pairs], dtype=np.int64)
    items = np.array([p[1] for p in pairs], dtype=np.int64)
    if draw(st.booleans()) if jester is None else jester:
        values = st.one_of(st.just(0.0), st.integers(-10, 10).map(float),
                           st.floats(-10, 10, **_floats))
    else:
        values = st.integers(1, 5).map(float)
    ratings = np.array(draw(st.lists(values, min_size=len(pairs), max_size=len(pairs))))
    return users, items, ratings


@st.composite
def worlds(draw, *, max_users: int = 60, max_items: int = 12, max_ticks: int = 12):
    """Small ``simulator.WorldConfig`` objects with zero to two campaigns."""
    from simulator import CampaignConfig, WorldConfig

    n_items = draw(st.integers(2, max_items))
    n_ticks = draw(st.integers(2, max_ticks))
    campaigns = []
    for _ in range(draw(st.integers(0, 2))):
        start = draw(st.integers(0, n_ticks - 1))
        items = tuple(sorted(set(draw(st.lists(st.integers(0, n_items - 1), min_size=1,
                                               max_size=min(3, n_items))))))
        campaigns.append(CampaignConfig(
            start=start, duration=draw(st.integers(1, n_ticks - start)),
            reach=draw(st.floats(0.0, 1.0)), items=items,
            k=draw(st.integers(1, len(items))), boost=draw(st.floats(1.0, 10.0))))
    return WorldConfig(
        n_users=draw(st.integers(1, max_users)), n_items=n_items, n_ticks=n_ticks,
        dim=draw(st.integers(1, 4)),
        mean_profile_size=draw(st.floats(0.0, min(6.0, n_items / 2))),
        n_universal=draw(st.integers(0, min(2, n_items))), campaigns=tuple(campaigns))
