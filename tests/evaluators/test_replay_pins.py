"""Replay (issue 33): every number of a ``ReplayEstimate`` against an independent computation.

The records replay uses are reconstructed here from the log and the documented randomness
(``method="rejection"``: one uniform per record from ``rng``, a match accepted when it is
below ``min(pscore) / pscore``); the value, standard error, interval and counts then follow
from the statistics module.
"""

from __future__ import annotations

import math
import statistics
import warnings

import numpy as np
import pytest

from evaluators import NoMatchWarning, UndefinedStderrWarning, replay
from simulator.logs import BanditLog
from tests.evaluators.test_replay import StaticPolicy, make_log, make_world


class Learner:
    """Plays the arm with the highest running mean reward (ties: lowest arm); records every
    update (the record's context and the reward) so the test sees what it learned from."""

    def __init__(self, K):
        self.sums, self.counts = np.zeros(K), np.zeros(K)
        self.seen = []

    def act(self, observation):
        means = np.where(self.counts > 0, self.sums / np.maximum(self.counts, 1), 1.0)
        means = np.where(observation["available"], means, -np.inf)
        return int(np.argmax(means))

    def update(self, observation, action, reward):
        self.sums[action] += reward
        self.counts[action] += 1
        self.seen.append((observation["context"].copy(), action, reward))


def by_hand(rewards, level):
    m = statistics.fmean(rewards)
    se = statistics.stdev(rewards) / math.sqrt(len(rewards))
    z = statistics.NormalDist().inv_cdf(0.5 + level / 2)
    return m, se, m - z * se, m + z * se


def walk(log, agent, eligible):
    """The plain replay loop, written again: the records used, in order."""
    used, matches = [], 0
    for r in range(log.n_rounds):
        obs = {"context": log.context[r], "available": log.available_mask()[r]}
        a = agent.act(obs)
        if a == log.action[r]:
            matches += 1
            if eligible[r]:
                agent.update(obs, a, float(log.reward[r]))
                used.append(r)
    return np.array(used, dtype=np.int64), matches


@pytest.mark.parametrize("method, kind", [("uniform", "uniform"), ("rejection", "nonuniform"),
                                          ("rejection", "uniform")])
@pytest.mark.parametrize("level", [0.9, 0.95])
@pytest.mark.parametrize("seed", [0, 1])
def test_every_number_from_the_records_used(method, kind, level, seed):
    world = make_world(seed)
    log, _ = make_log(world, 600, seed + 10, kind=kind)
    if method == "rejection":
        eligible = np.random.default_rng(seed + 20).random(log.n_rounds) < (
            log.pscore.min() / log.pscore)
    else:
        eligible = np.ones(log.n_rounds, dtype=bool)
    ref_agent = Learner(log.n_actions)
    used, matches = walk(log, ref_agent, eligible)
    agent = Learner(log.n_actions)
    est = replay(log, agent, method=method, ci=level, rng=seed + 20)
    m, se, lo, hi = by_hand(log.reward[used].tolist(), level)
    close = dict(rel=1e-12, abs=1e-15)
    assert (est.value, est.stderr, est.ci_low, est.ci_high) == pytest.approx((m, se, lo, hi),
                                                                          **close)
    assert (est.n, est.n_matches, est.n_records) == (used.size, matches, log.n_rounds)
    assert est.level == level and est.method == method
    # the agent learned from the used records only, in order, with their own contexts
    assert len(agent.seen) == used.size
    for (x, a, r), j in zip(agent.seen, used, strict=True):
        np.testing.assert_array_equal(x, log.context[j])
        assert (a, r) == (log.action[j], log.reward[j])


def test_rejection_accepts_at_min_pscore_over_pscore():
    """A static policy matching every record: the accepted share of the records with each
    propensity is min(pscore) / pscore (binomial bounds, 20,000 records), and with uniform
    propensities every match is accepted."""
    from scipy import stats

    n = 20000
    p = np.where(np.arange(n) % 2 == 0, 0.25, 0.5)
    log = BanditLog(context=np.zeros((n, 1)), action=np.zeros(n, dtype=np.int64),
                    reward=np.ones(n), pscore=p, n_actions=4)
    est = replay(log, StaticPolicy(np.zeros((4, 1))), method="rejection", rng=3)
    assert est.n_matches == n
    # 10,000 records at p = 0.25 all accepted, 10,000 at p = 0.5 half of them
    k = est.n - n // 2
    assert stats.binomtest(k, n // 2, 0.5).pvalue > 1e-4, k
    uniform = BanditLog(context=np.zeros((50, 1)), action=np.zeros(50, dtype=np.int64),
                        reward=np.ones(50), pscore=np.full(50, 0.25), n_actions=4)
    assert replay(uniform, StaticPolicy(np.zeros((4, 1))), method="rejection", rng=0).n == 50


def test_the_seed_matters_for_rejection_only():
    world = make_world(5)
    log, _ = make_log(world, 400, 6, kind="uniform")
    pol = StaticPolicy(np.random.default_rng(2).normal(size=(4, 3)))
    a, b = replay(log, pol, rng=1), replay(log, pol, rng=2)
    assert repr(a) == repr(b)  # uniform replay draws nothing
    nonuni, _ = make_log(world, 400, 6, kind="nonuniform")
    c, d = (replay(nonuni, pol, method="rejection", rng=s) for s in (1, 1))
    e = replay(nonuni, pol, method="rejection", rng=2)
    assert repr(c) == repr(d)
    assert (c.n, c.value) != (e.n, e.value)


def test_one_record_used_and_none():
    log = BanditLog(context=np.zeros((3, 1)), action=[0, 1, 1], reward=[1.0, 0.0, 1.0],
                    pscore=[0.5, 0.5, 0.5], n_actions=2)
    with pytest.warns(UndefinedStderrWarning):
        one = replay(log, StaticPolicy(np.array([[1.0], [0.0]])))
    assert (one.value, one.n, one.n_matches) == (1.0, 1, 1)
    assert math.isnan(one.stderr) and math.isnan(one.ci_low) and math.isnan(one.ci_high)
    never = BanditLog(context=np.zeros((2, 1)), action=[1, 1], reward=[1.0, 0.0],
                      pscore=[0.5, 0.5], n_actions=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        none = replay(never, StaticPolicy(np.array([[1.0], [0.0]])), ci=0.8)
    assert [w.category for w in caught] == [NoMatchWarning]
    assert str(caught[0].message) == ("replay matched no record of 2 (method='uniform'); "
                                      "returning nan.")
    assert caught[0].filename == __file__ or "mutmut" in caught[0].filename  # trampoline
    assert math.isnan(none.value) and math.isnan(none.stderr) and none.n == 0
    assert math.isnan(none.ci_low) and math.isnan(none.ci_high)
    assert (none.n_records, none.n_matches, none.level, none.method) == (2, 0, 0.8, "uniform")


class Recorder:
    """Plays arm 0 and keeps every observation it is shown and updated with."""

    def __init__(self):
        self.shown, self.updated = [], []

    def act(self, observation):
        self.shown.append(observation)
        return 0

    def update(self, observation, action, reward):
        self.updated.append(observation)


def test_the_agent_sees_the_logs_own_observations():
    """Each record's observation as the log gives it (``BanditLog.observation``): with the
    user and the tick when the log has them, in order, one per record."""
    g = np.random.default_rng(0)
    n = 30
    log = BanditLog(context=g.normal(size=(n, 2)), action=g.integers(0, 3, n),
                    reward=g.random(n), pscore=np.full(n, 1 / 3), n_actions=3,
                    tick=np.arange(n) // 3, user=g.integers(0, 7, n))
    agent = Recorder()
    est = replay(log, agent)
    assert len(agent.shown) == n
    for j, obs in enumerate(agent.shown):
        want = log.observation(j)
        assert set(obs) == set(want) == {"context", "available", "tick", "user"}
        assert obs["tick"] == want["tick"] and obs["user"] == want["user"]
        np.testing.assert_array_equal(obs["context"], want["context"])
    assert len(agent.updated) == est.n == int(np.sum(log.action == 0))


def test_refusals_name_the_function():
    log, _ = make_log(make_world(1), 40, 1, kind="nonuniform")
    with pytest.raises(ValueError) as e:
        replay(log, StaticPolicy(np.eye(4, 3)))
    assert str(e.value).startswith("`replay` requires uniform logging propensities")
    with pytest.raises(ValueError) as e:
        replay(log, StaticPolicy(np.eye(4, 3)), method="rejected")
    assert str(e.value) == "`method` must be one of ('uniform', 'rejection'); got 'rejected'."
