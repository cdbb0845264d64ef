"""Logging slates: run a slate policy in ``recloop/Recommendation-v0`` and keep a ``SlateLog``.

The log holds what a real system records (the slates, the clicks at each position, the
logging policy's exact propensities); the ground truth of each record (the click model's
probabilities) comes back separately as a :class:`SlateLogTruth`, so that estimators never
receive it.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from recloop_base.validation import as_generator
from simulator import _bandit as _b
from simulator import _click_models as _cm
from simulator._envs import (
    _STREAM_REC_CLICK,
    _STREAM_REC_CONTINUE,
    RecModel,
    RecommendationConfig,
    RecommendationEnv,
)
from simulator._logging import _config_metadata
from simulator._slate_log import SlateLog
from simulator._world import World

__all__ = ["SlateLogTruth", "collect_slate_log"]

_BLOCK_CELLS = 1 << 22  # records x items per block (32 MiB of float64)


@dataclass(frozen=True, eq=False)
class SlateLogTruth:
    """Ground truth of a slate log (never handed to estimators).

    Attributes
    ----------
    ctr : array (n_rounds, len_list)
        ``p(u, s_j, t)``, the world's click (attraction) probability of each shown item.
    position_click_probability : array (n_rounds, len_list)
        ``P(click at j | slate)`` under the click model.
    expected_reward : array (n_rounds,)
        The expected reward of each logged slate (the click model's closed form).
    tick, user : array (n_rounds,)
    """

    ctr: np.ndarray
    position_click_probability: np.ndarray
    expected_reward: np.ndarray
    tick: np.ndarray
    user: np.ndarray

    def __post_init__(self):
        for name in ("ctr", "position_click_probability", "expected_reward", "tick", "user"):
            arr = np.array(getattr(self, name), copy=True)
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)


def _config(env_or_config) -> RecommendationConfig:
    if isinstance(env_or_config, RecommendationConfig):
        return env_or_config
    inner = getattr(env_or_config, "unwrapped", env_or_config)
    if isinstance(inner, (RecommendationEnv, gym.vector.VectorEnv)) and isinstance(
            getattr(inner, "config", None), RecommendationConfig):
        return inner.config
    raise TypeError("`env_or_config` must be a RecommendationConfig or a "
                    "recloop/Recommendation-v0 environment; got "
                    f"{type(env_or_config).__name__}.")


def _check_policy(policy) -> None:
    for meth in ("sample", "prefix_probabilities", "item_position_probabilities"):
        if not callable(getattr(policy, meth, None)):
            raise TypeError(f"`policy` must have a `{meth}` method (a slate policy such as "
                            f"agents.PlackettLuce); got {type(policy).__name__}.")


def _check_sampled(S, n: int, k: int, A: np.ndarray) -> np.ndarray:
    S = np.asarray(S)
    if S.shape != (n, k) or not np.issubdtype(S.dtype, np.integer):
        raise ValueError(f"`policy.sample` must return integer slates of shape ({n}, {k}); "
                         f"got shape {S.shape} dtype {S.dtype}.")
    S = S.astype(np.int64)
    m = A.shape[1]
    bad = np.flatnonzero(np.any((S < 0) | (S >= m), axis=1))
    if bad.size:
        raise ValueError(f"`policy.sample` returned items out of [0, {m}): {S[bad[0]].tolist()}.")
    srt = np.sort(S, axis=1)
    bad = np.flatnonzero(np.any(srt[:, 1:] == srt[:, :-1], axis=1))
    if bad.size:
        raise ValueError(f"`policy.sample` returned a slate with repeated items: "
                         f"{S[bad[0]].tolist()}.")
    bad = np.flatnonzero(~A[np.arange(n)[:, None], S].all(axis=1))
    if bad.size:
        raise ValueError(f"`policy.sample` returned an unavailable item in {S[bad[0]].tolist()}.")
    return S


def collect_slate_log(env_or_config, n_rounds: int, *, policy, rng=None):
    """Run a slate logging policy for ``n_rounds`` visits; return the log and its truth.

    Parameters
    ----------
    env_or_config : RecommendationConfig or recloop/Recommendation-v0 environment
        The world, the slate length ``k`` and the click model (only the configuration of an
        environment is used; the log is produced with array operations).
    n_rounds : int
        Number of records (visits), in [1, the episode's length ``config.n_steps``].
    policy : slate policy
        An object with ``sample(observations, rng) -> (n, k)``,
        ``prefix_probabilities(observations, slates) -> (n, k)`` and
        ``item_position_probabilities(observations, slates) -> (n, k)`` on batched
        observations (``user``, ``context``, ``available``, ``tick``), such as
        ``agents.PlackettLuce``. It must be static (never updated).
    rng : None, int, SeedSequence or Generator
        Source of the episode key (the visiting users and the clicks' coins) and of the
        policy's draws.

    Returns
    -------
    log : SlateLog
        ``action`` (n, k), ``reward`` (n, k) the clicks at each position, the logging
        propensities ``pscore``, ``pscore_cascade``, ``pscore_item_position``, ``context``
        (the users' tastes), ``available``, ``user``, ``tick``; ``reward_type`` the config's
        ``reward``; ``metadata`` the config, its hash, the episode key.
    truth : SlateLogTruth
        ``ctr``, the click model's ``position_click_probability`` and ``expected_reward``
        of each logged slate.

    Raises
    ------
    TypeError
        ``env_or_config`` or ``policy`` of the wrong kind, ``n_rounds`` not an int.
    ValueError
        ``n_rounds`` out of range; a policy returning invalid slates or propensities.

    Notes
    -----
    Record ``j`` is step ``j`` of the episode of ``recloop/Recommendation-v0`` whose key is
    drawn from ``rng``: the same visiting user, and the same clicks as the environment gives
    to the same slate (the click coins are the environment's common random numbers, under
    every click model). Same ``rng``, same log, byte for byte.

    Examples
    --------
    >>> import numpy as np, agents, simulator
    >>> cfg = simulator.RecommendationConfig(world=simulator.preset("viadeo_like",
    ...     n_users=200, n_items=20, campaigns=()), k=3, click_model="cascade")
    >>> pol = agents.PlackettLuce(np.zeros(20), k=3)
    >>> log, truth = simulator.collect_slate_log(cfg, 500, policy=pol, rng=0)
    >>> log.action.shape, bool(np.isclose(log.pscore[0], 1 / (20 * 19 * 18)))
    ((500, 3), True)
    """
    config = _config(env_or_config)
    _check_policy(policy)
    if isinstance(n_rounds, bool) or not isinstance(n_rounds, numbers.Integral):
        raise TypeError(f"`n_rounds` must be an int; got {type(n_rounds).__name__}.")
    if not 1 <= n_rounds <= config.n_steps:
        raise ValueError(f"`n_rounds` must be in [1, {config.n_steps}] (the episode's length); "
                         f"got {n_rounds}.")
    rng = as_generator(rng)
    n, k = int(n_rounds), config.k
    model = RecModel(config, World(config.world, seed=config.world_seed))
    m = model.n_items
    key = _b.episode_key(rng)
    click_skey = _b._stream_key(key, _STREAM_REC_CLICK)
    cont_skey = _b._stream_key(key, _STREAM_REC_CONTINUE)
    parts = {name: [] for name in ("action", "reward", "ctr", "pcp", "cascade", "ipos",
                                   "context", "available", "user", "tick")}
    block = max(1, _BLOCK_CELLS // m)
    for lo in range(0, n, block):
        steps = np.arange(lo, min(lo + block, n), dtype=np.int64)
        T = model.ticks(steps)
        U = model.users(key, steps)
        P, X, A = model.ctr(U, T)
        obs = {"user": U.copy(), "context": X.copy(), "available": A.copy(), "tick": T.copy()}
        S = _check_sampled(policy.sample(obs, rng), steps.size, k, A)
        p = P[np.arange(steps.size)[:, None], S]
        counter = U[:, None] * m + S
        u = _b._uniform2(click_skey, T[:, None], counter)
        v = _b._uniform2(cont_skey, T[:, None], counter) if config.click_model == "dcm" else None
        clicks = _cm.simulate_clicks(p, u, config.click_model, theta=model.theta,
                                     lam=model.lam, v=v)
        for name, arr in (("cascade", policy.prefix_probabilities(obs, S)),
                          ("ipos", policy.item_position_probabilities(obs, S))):
            arr = np.asarray(arr, dtype=np.float64)
            if arr.shape != (steps.size, k):
                raise ValueError(f"the policy's {name} propensities must have shape "
                                 f"({steps.size}, {k}); got {arr.shape}.")
            parts[name].append(arr)
        parts["action"].append(S)
        parts["reward"].append(clicks.astype(np.float64))
        parts["ctr"].append(p)
        parts["pcp"].append(_cm.position_click_probabilities(
            p, config.click_model, theta=model.theta, lam=model.lam))
        parts["context"].append(X)
        parts["available"].append(A)
        parts["user"].append(U)
        parts["tick"].append(T)
    cat = {name: np.concatenate(arrs) for name, arrs in parts.items()}
    meta = {"episode_key": key, "logging_policy": repr(policy)}
    try:
        meta |= _config_metadata(config)
    except (TypeError, ValueError):  # the world holds non-JSON values (campaign policies)
        pass
    cascade = cat["cascade"]
    log = SlateLog(context=cat["context"], action=cat["action"], reward=cat["reward"],
                   pscore=cascade[:, -1], pscore_cascade=cascade,
                   pscore_item_position=cat["ipos"], n_items=m, reward_type=config.reward,
                   available=cat["available"], tick=cat["tick"], user=cat["user"],
                   metadata=meta)
    truth = SlateLogTruth(ctr=cat["ctr"], position_click_probability=cat["pcp"],
                          expected_reward=model.expected(cat["ctr"]), tick=cat["tick"],
                          user=cat["user"])
    return log, truth
