"""Logging helper: run a logging policy and return a ``BanditLog`` plus its ground truth.

The log holds what a real system would record (context, action, reward, propensity,
availability, tick); the ground truth (expected reward of every action of every record, drift
regime) comes back separately as a :class:`LogTruth`, so that estimators never receive it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import numbers
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from recloop_base.validation import as_generator
from simulator import _bandit as _b
from simulator.logs import BanditLog

__all__ = ["LogTruth", "collect_log"]


@dataclass(frozen=True, eq=False)
class LogTruth:
    """Ground truth of a log (never handed to estimators).

    Attributes
    ----------
    expected_reward : array (n_rounds, n_actions) float
        Expected reward of every action at every record (0 for unavailable actions); OBP's
        ``expected_reward``.
    tick : array (n_rounds,) int
        Tick of each record.
    regime : array (n_rounds,) int
        Drift regime of each record (for the dynamic bandit: the number of arm births since
        tick 0; constant 0 for a static world).
    """

    expected_reward: np.ndarray
    tick: np.ndarray
    regime: np.ndarray

    def __post_init__(self):
        for name in ("expected_reward", "tick", "regime"):
            arr = np.array(getattr(self, name), copy=True)
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    @property
    def best_expected_reward(self) -> np.ndarray:
        """Expected reward of the best action of each record, (n_rounds,)."""
        return self.expected_reward.max(axis=1)

    def policy_value(self, action_dist) -> float:
        """Mean expected reward of a static policy on these very records.

        ``action_dist`` is (n_rounds, n_actions) or OBP's (n_rounds, n_actions, 1): the policy's
        probabilities per record. This is the truth *conditional on the logged contexts*; the
        value on the context distribution is :func:`simulator.static_policy_value`.
        """
        pi = np.asarray(action_dist, dtype=np.float64)
        if pi.ndim == 3 and pi.shape[2] == 1:
            pi = pi[:, :, 0]
        if pi.shape != self.expected_reward.shape:
            raise ValueError(f"`action_dist` must have shape {self.expected_reward.shape}; "
                             f"got {pi.shape}.")
        return float(np.mean(np.sum(pi * self.expected_reward, axis=1)))


def _jsonable(obj):
    """JSON stand-in for the arrays of a calibrated world's config: their digest."""
    if isinstance(obj, np.ndarray):
        a = np.ascontiguousarray(obj)
        return {"array_sha256": hashlib.sha256(a.tobytes()).hexdigest(), "shape": list(a.shape)}
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


def _config_metadata(config) -> dict:
    cfg = json.loads(json.dumps(dataclasses.asdict(config), default=_jsonable))
    digest = hashlib.sha256(json.dumps(cfg, sort_keys=True).encode()).hexdigest()[:16]
    try:
        from importlib.metadata import version
        ver = version("recloop")
    except Exception:  # not installed (running from a checkout)
        ver = "unknown"
    return {"config_class": type(config).__name__, "config": cfg, "config_hash": digest,
            "recloop_version": ver}


def _check_probs(probs, available: np.ndarray, source: str) -> np.ndarray:
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim == 3 and p.shape[2] == 1:
        p = p[:, :, 0]
    if p.shape != available.shape:
        raise ValueError(f"{source} must return probabilities of shape {available.shape}; "
                         f"got {p.shape}.")
    bad = np.flatnonzero(~np.all(np.isfinite(p) & (p >= 0), axis=1))
    if bad.size:
        raise ValueError(f"{source} returned negative or non-finite probabilities at record "
                         f"{bad[0]}.")
    bad = np.flatnonzero(np.abs(p.sum(axis=1) - 1.0) > 1e-8)
    if bad.size:
        raise ValueError(f"{source} probabilities must sum to 1; got {p[bad[0]].sum()} at "
                         f"record {bad[0]}.")
    bad = np.flatnonzero(np.any((p > 0) & ~available, axis=1))
    if bad.size:
        raise ValueError(f"{source} gives positive probability to an unavailable action at "
                         f"record {bad[0]}.")
    return p


def policy_probabilities(policy, context: np.ndarray, available: np.ndarray,
                         extra=None) -> np.ndarray:
    """Probabilities (n, K) of ``policy`` on records: ``None`` uniform over available actions,
    a callable ``policy(context (n, d), available (n, K)) -> (n, K)``, or an object with
    ``action_probabilities(observation)`` called record by record."""
    if policy is None:
        avail = available.astype(np.float64)
        return avail / avail.sum(axis=1, keepdims=True)
    if hasattr(policy, "action_probabilities"):
        rows = []
        for j in range(context.shape[0]):
            obs = {"context": context[j], "available": available[j]}
            if extra is not None:
                obs.update({k: v[j] for k, v in extra.items()})
            rows.append(np.asarray(policy.action_probabilities(obs), dtype=np.float64))
        return _check_probs(np.array(rows).reshape(available.shape), available,
                            "`policy.action_probabilities`")
    if callable(policy):
        return _check_probs(policy(context.copy(), available.copy()), available, "`policy`")
    raise TypeError("`policy` must be None, a callable (context, available) -> probabilities "
                    "or an object with `action_probabilities`; got "
                    f"{type(policy).__name__}.")


def _sample(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One action per row by inversion: the first ``a`` with ``cdf[a] > u``; such an ``a`` has
    positive probability, except when round-off makes ``u == cdf[-1]`` (then the last
    action of positive probability)."""
    cdf = np.cumsum(probs, axis=1)
    u = rng.random(probs.shape[0]) * cdf[:, -1]
    a = (cdf <= u[:, None]).sum(axis=1)
    over = a >= probs.shape[1]
    if over.any():
        a[over] = probs.shape[1] - 1 - np.argmax((probs[over] > 0)[:, ::-1], axis=1)
    return a.astype(np.int64)


def _collect_bandit(config, n_rounds, policy, rng):
    key = _b.episode_key(rng)
    ticks = np.arange(n_rounds, dtype=np.int64)
    X = _b.contexts(config, key, ticks)
    P = _b.true_ctr(config, X, ticks)
    A = _b.alive(config, ticks)
    probs = policy_probabilities(policy, X, A, {"tick": ticks})
    action = _sample(probs, rng)
    rows = np.arange(n_rounds)
    reward = (_b.click_uniforms(key, ticks, action) < P[rows, action]).astype(np.float64)
    meta = _config_metadata(config) | {"episode_key": key,
                                       "logging_policy": "uniform" if policy is None
                                       else type(policy).__name__}
    emb = _b.arm_table(config).embeddings
    # worlds with action embeddings also record the logging policy's probabilities (pi_b),
    # which marginalised estimators (MIPS) need; other worlds keep the lean log
    log = BanditLog(context=X, action=action, reward=reward, pscore=probs[rows, action],
                    n_actions=config.n_arms, available=A, tick=ticks, metadata=meta,
                    action_embeddings=emb, pi_b=None if emb is None else probs)
    return log, LogTruth(expected_reward=P, tick=ticks, regime=_b.regime(config, ticks))


def _collect_env(env: gym.Env, n_rounds, policy, rng):
    """Generic path: step any Dict-observation, Discrete-action env with ``info['ctr']``."""
    if not isinstance(env.action_space, gym.spaces.Discrete):
        raise ValueError("`env_or_config` must have a Discrete action space (one action per "
                         f"round) to be logged; got {env.action_space}.")
    obs, _ = env.reset(seed=int(rng.integers(0, 2**63)))
    K = int(env.action_space.n)
    ctx, act, rew, ps, av, tk, us, er = [], [], [], [], [], [], [], []
    for j in range(n_rounds):
        avail = np.asarray(obs["available"], dtype=bool)
        x = np.asarray(obs["context"], dtype=np.float64)
        extra = {k: np.asarray([obs[k]]) for k in ("tick", "user") if k in obs}
        p = policy_probabilities(policy, x[None], avail[None], extra)
        a = int(_sample(p, rng)[0])
        tick = int(obs["tick"]) if "tick" in obs else j
        user = int(obs["user"]) if "user" in obs else None
        nobs, r, term, trunc, info = env.step(a)
        ctx.append(x), act.append(a), rew.append(float(r)), ps.append(p[0, a])
        av.append(avail), tk.append(tick), us.append(user)
        er.append(np.where(avail, np.asarray(info.get("item_ctr", info["ctr"]), dtype=np.float64),
                           0.0))
        if (term or trunc) and j + 1 < n_rounds:
            raise ValueError(f"`n_rounds` ({n_rounds}) exceeds the episode, which ended after "
                             f"{j + 1} rounds.")
        obs = nobs
    user = None if us[0] is None else np.array(us, dtype=np.int64)
    meta = {"env": str(env.spec.id) if env.spec is not None else type(env).__name__}
    cfg = getattr(env.unwrapped, "config", None)
    if dataclasses.is_dataclass(cfg):
        try:
            meta |= _config_metadata(cfg)
        except (TypeError, ValueError):  # config holds non-JSON values (e.g. policies)
            pass
    ticks = np.array(tk, dtype=np.int64)
    log = BanditLog(context=np.array(ctx).reshape(n_rounds, -1), action=np.array(act),
                    reward=np.array(rew), pscore=np.array(ps), n_actions=K,
                    available=np.array(av), tick=ticks, user=user, metadata=meta)
    return log, LogTruth(expected_reward=np.array(er), tick=ticks,
                         regime=np.zeros(n_rounds, np.int64))


def collect_log(env_or_config, n_rounds: int, *, policy=None, rng=None):
    """Run a logging policy for ``n_rounds`` rounds and return the log and its ground truth.

    Parameters
    ----------
    env_or_config : LinearBanditConfig, preset name, or gymnasium.Env
        The world to log. For the linear bandit (a config, a preset name, or a
        ``LinearBanditEnv``) only the configuration is used and the log is produced with array
        operations; any other environment with a ``Dict`` observation holding ``context`` and
        ``available``, a ``Discrete`` action space and the true click probability of every
        action in ``info["item_ctr"]`` (or ``info["ctr"]``) is stepped round by round (such as
        ``recloop/Recommendation-v0`` with ``k=1``).
    n_rounds : int
        Number of records, >= 1 (and within the episode's horizon).
    policy : None, callable or object, optional
        Logging policy. ``None``: uniform over the available actions (propensity
        ``1 / #available``). A callable ``policy(context (n, d), available (n, K)) -> (n, K)``
        of probabilities, or an object with ``action_probabilities(observation)``. The
        policy must be static (it is never updated).
    rng : None, int, SeedSequence or Generator
        Source of the episode key and of the logged actions.

    Returns
    -------
    log : BanditLog
        ``context`` (n, d), ``action``, ``reward`` (clicks), ``pscore``, ``available``
        (n, K), ``tick``; ``metadata`` carries the config, its hash, the episode key and the
        recloop version. Worlds with action embeddings (``n_embedding_features > 0``, e.g.
        the ``large_actions`` preset) add ``action_embeddings`` (K, F) and the logging
        policy's probabilities ``pi_b`` (n, K).
    truth : LogTruth
        Expected reward of every action of every record, ticks and drift regimes.

    Raises
    ------
    TypeError
        For a wrong type of ``env_or_config``, ``n_rounds`` or ``policy``.
    ValueError
        For ``n_rounds < 1`` or beyond the horizon, or invalid policy probabilities.

    Notes
    -----
    With the same ``rng`` the log is the same byte for byte. The clicks use the world's
    common random numbers, so the click of record ``j`` is the click the online environment
    with the same episode key would give to the same arm at the same tick.

    Examples
    --------
    >>> import simulator
    >>> log, truth = simulator.collect_log("bred_linear", 1000, rng=0)
    >>> log.n_rounds, truth.expected_reward.shape
    (1000, (1000, 10))
    """
    if isinstance(n_rounds, bool) or not isinstance(n_rounds, numbers.Integral):
        raise TypeError(f"`n_rounds` must be an int; got {type(n_rounds).__name__}.")
    if n_rounds < 1:
        raise ValueError(f"`n_rounds` must be >= 1; got {n_rounds}.")
    rng = as_generator(rng)
    if isinstance(env_or_config, gym.Env):
        inner = env_or_config.unwrapped
        if isinstance(inner, _b.LinearBanditEnv):
            env_or_config = inner.config
        else:
            return _collect_env(env_or_config, int(n_rounds), policy, rng)
    config = _b.resolve_config(env_or_config)
    if config.horizon is not None and n_rounds > config.horizon:
        raise ValueError(f"`n_rounds` must be <= the horizon {config.horizon} of the "
                         f"config; got {n_rounds}.")
    return _collect_bandit(config, int(n_rounds), policy, rng)
