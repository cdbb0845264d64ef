"""Ground truth of slate OPE: the value of a slate policy on the world's users at a tick.

``V(pi) = sum_u P(u) E_{s ~ pi(. | u)} [R(u, s, t)]`` with ``R`` the click model's expected
reward of a slate (:func:`simulator._click_models.expected_reward`) and ``P(u)`` the world's
user weights. Estimators never import this module.
"""

from __future__ import annotations

import itertools
import math
import numbers
from dataclasses import dataclass

import numpy as np

from recloop_base.validation import as_generator, check_choice, check_int
from simulator._envs import RecModel
from simulator._slate_logging import _config
from simulator._world import World

__all__ = ["SlateValue", "slate_policy_value"]

_METHODS = ("auto", "exact", "enumerate", "monte_carlo")
#: ``method="enumerate"`` refuses contexts with more ordered slates than this.
ENUMERATION_LIMIT = 200_000
_CHUNK = 2048  # users per call of the policy


@dataclass(frozen=True, eq=False)
class SlateValue:
    """The value of a slate policy and how it was computed.

    Attributes
    ----------
    value : float
        ``V(pi)``.
    stderr : float
        0.0 for ``"exact"`` and ``"enumerate"`` (deterministic; the exponential-race
        integral behind ``"exact"`` agrees with enumeration to about 1e-14); the Monte Carlo
        standard error for ``"monte_carlo"``.
    method : {"exact", "enumerate", "monte_carlo"}
    n : int
        Users summed over (exact, enumerate) or (user, slate) draws (Monte Carlo).
    per_user : array (n_users,) or None
        ``E_s[R(u, s, t)]`` of every user (``None`` for Monte Carlo).
    user_weights : array (n_users,)
        ``P(u)``, normalised.
    """

    value: float
    stderr: float
    method: str
    n: int
    per_user: np.ndarray | None
    user_weights: np.ndarray

    def conditional(self, users) -> float:
        """Mean of ``per_user`` over ``users`` (e.g. a log's users): the truth conditional on
        the visits, which an unbiased estimator also has as its expectation."""
        if self.per_user is None:
            raise ValueError("`conditional` needs per-user values; this value was computed "
                             "by Monte Carlo.")
        return float(self.per_user[np.asarray(users, dtype=np.int64)].mean())


def _exact_factors(config, theta, lam):
    """``(position weights (k,), carry(p))`` of the exact path, or a reason it has none."""
    model, reward = config.click_model, config.reward
    ones = np.ones(config.k)
    if reward == "any_click":
        if model == "pbm":
            return None, "the PBM's P(any click) depends on the order of the whole slate"
        return ones, lambda p: 1.0 - p            # 1 - prod(1 - p) = cascade clicks
    if model == "independent":
        return ones, None
    if model == "pbm":
        return np.asarray(theta, dtype=np.float64), None
    if model == "cascade":
        return ones, lambda p: 1.0 - p
    c = 1.0 - float(lam[0])  # the config's continuation is the same at every position
    return ones, lambda p: 1.0 - c * p


def slate_policy_value(config, policy, *, tick=None, method: str = "auto",
                       n_samples: int = 200_000, rng=None) -> SlateValue:
    """Exact (or Monte Carlo) value of a static slate policy at a tick.

    Parameters
    ----------
    config : RecommendationConfig or recloop/Recommendation-v0 environment
        World, slate length ``k``, click model and reward.
    policy : slate policy
        Duck-typed, on batched observations (``user``, ``context``, ``available``,
        ``tick``): ``position_expectations(observations, gain, carry)`` for ``"exact"``
        (``agents.PlackettLuce`` has it), ``slate_probability(observations, slates)`` for
        ``"enumerate"``, ``sample(observations, rng)`` for ``"monte_carlo"``.
    tick : int, optional
        Default ``config.start_tick``.
    method : {"auto", "exact", "enumerate", "monte_carlo"}
        ``"exact"``: ``sum_j w_j E[p(s_j) prod_{l<j} d(s_l)]`` per user through the policy's
        ``position_expectations``; available for every click model with reward
        ``"clicks"``, and for ``"any_click"`` except under the PBM (whose ``P(any click)``
        depends on the order of the whole slate). ``"enumerate"``: every
        ordered slate of every user (at most ``ENUMERATION_LIMIT`` per user).
        ``"monte_carlo"``: ``n_samples`` draws of a user (by ``P(u)``) and a slate, each
        scored by its closed-form expected reward (the clicks are integrated out), with the
        standard error of the mean. ``"auto"``: ``"exact"`` when available, else Monte Carlo.
    n_samples : int
        Draws of ``"monte_carlo"``.
    rng : None, int, SeedSequence or Generator
        For ``"monte_carlo"`` only.

    Returns
    -------
    SlateValue

    Raises
    ------
    TypeError
        ``config`` of the wrong kind; a policy without the method the ``method`` needs.
    ValueError
        ``tick`` out of range; ``"exact"`` where it is not available (the message says
        why); ``"enumerate"`` on too many slates.

    Examples
    --------
    >>> import numpy as np, agents, simulator
    >>> cfg = simulator.RecommendationConfig(world=simulator.preset("viadeo_like",
    ...     n_users=50, n_items=8, campaigns=()), k=3, click_model="cascade")
    >>> pol = agents.PlackettLuce(np.linspace(0, 1, 8), k=3)
    >>> a = simulator.slate_policy_value(cfg, pol)
    >>> b = simulator.slate_policy_value(cfg, pol, method="enumerate")
    >>> a.method, abs(a.value - b.value) < 1e-12
    ('exact', True)
    """
    config = _config(config)
    method = check_choice(method, "method", _METHODS)
    w = config.world
    t = config.start_tick if tick is None else check_int(tick, "tick", low=0, high=w.n_ticks - 1)
    model = RecModel(config, World(w, seed=config.world_seed))
    pu = np.asarray(model.world.user_weights, dtype=np.float64)
    pu = pu / pu.sum()
    weights, carry = _exact_factors(config, model.theta, model.lam)
    if method in ("auto", "exact"):
        has = callable(getattr(policy, "position_expectations", None))
        if method == "exact" and (weights is None or not has):
            why = carry if weights is None else ("the policy has no `position_expectations` "
                                                 "method")
            raise ValueError(f"`method` 'exact' is not available here: {why}; use "
                             "'enumerate' (small problems) or 'monte_carlo'.")
        method = "exact" if (weights is not None and has) else "monte_carlo"
    if method == "monte_carlo":
        return _monte_carlo(model, policy, t, pu, n_samples, rng)
    per_user = np.empty(w.n_users)
    users = np.arange(w.n_users)
    for lo in range(0, w.n_users, _CHUNK):
        U = users[lo:lo + _CHUNK]
        P, X, A = model.ctr(U, np.full(U.size, t))
        obs = {"user": U, "context": X.copy(), "available": A.copy(),
               "tick": np.full(U.size, t, dtype=np.int64)}
        if method == "exact":
            E = np.asarray(policy.position_expectations(
                obs, P, None if carry is None else carry(P)), dtype=np.float64)
            per_user[lo:lo + U.size] = E @ weights
        else:
            per_user[lo:lo + U.size] = _enumerate(model, policy, obs, P)
    return SlateValue(float(pu @ per_user), 0.0, method, int(w.n_users), per_user, pu)


def _enumerate(model, policy, obs, P) -> np.ndarray:
    if not callable(getattr(policy, "slate_probability", None)):
        raise TypeError("`method` 'enumerate' needs a policy with `slate_probability`; got "
                        f"{type(policy).__name__}.")
    k = model.config.k
    out = np.empty(P.shape[0])
    for r in range(P.shape[0]):
        items = np.flatnonzero(obs["available"][r])
        count = math.perm(items.size, k)
        if count > ENUMERATION_LIMIT:
            raise ValueError(f"`method` 'enumerate' would visit {count} slates per user (more "
                             f"than {ENUMERATION_LIMIT}); use 'exact' or 'monte_carlo'.")
        slates = np.array(list(itertools.permutations(items.tolist(), k)), dtype=np.int64)
        one = {key: np.repeat(v[r:r + 1], slates.shape[0], axis=0) for key, v in obs.items()}
        probs = np.asarray(policy.slate_probability(one, slates), dtype=np.float64)
        if abs(probs.sum() - 1.0) > 1e-9:
            raise ValueError(f"the policy's slate probabilities of user {obs['user'][r]} sum "
                             f"to {probs.sum()}, not 1.")
        out[r] = probs @ model.expected(P[r][slates])
    return out


def _monte_carlo(model, policy, t, pu, n_samples, rng) -> SlateValue:
    if not callable(getattr(policy, "sample", None)):
        raise TypeError("`method` 'monte_carlo' needs a policy with `sample`; got "
                        f"{type(policy).__name__}.")
    if isinstance(n_samples, bool) or not isinstance(n_samples, numbers.Integral) \
            or n_samples < 2:
        raise ValueError(f"`n_samples` must be an int >= 2; got {n_samples!r}.")
    rng = as_generator(rng)
    vals = np.empty(int(n_samples))
    block = max(1, (1 << 22) // model.n_items)
    for lo in range(0, vals.size, block):
        b = min(block, vals.size - lo)
        U = rng.choice(pu.size, size=b, p=pu)
        P, X, A = model.ctr(U, np.full(b, t))
        obs = {"user": U, "context": X.copy(), "available": A.copy(),
               "tick": np.full(b, t, dtype=np.int64)}
        S = np.asarray(policy.sample(obs, rng), dtype=np.int64)
        vals[lo:lo + b] = model.expected(P[np.arange(b)[:, None], S])
    se = float(vals.std(ddof=1) / math.sqrt(vals.size))
    return SlateValue(float(vals.mean()), se, "monte_carlo", int(vals.size), None, pu)
