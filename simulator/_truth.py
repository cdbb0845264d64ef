"""Ground truth of the bandit test bed: value of a static policy, online value of a learner.

Estimators never import this module; the harness and the tests put its numbers next to the
estimates (DESIGN.md: "ground truth next to every estimate").
"""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass

import numpy as np

from recloop_base.executors import check_executor, executor_threads, run_partitions, split_evenly
from recloop_base.fast_paths import fast_path, why_no_fast_path
from recloop_base.validation import as_generator, check_int
from simulator import _bandit as _b
from simulator._logging import policy_probabilities

__all__ = ["OnlineValue", "online_value", "oracle_value", "static_policy_value"]

_CHUNK_ATOMS = 1 << 15
_CHUNK_TICKS = 256


class DegenerateTruthWarning(UserWarning):
    """A ground-truth quantity could not be computed (e.g. a standard error from one run)."""


def _config_of(config) -> _b.LinearBanditConfig:
    if hasattr(config, "unwrapped") and isinstance(config.unwrapped, _b.LinearBanditEnv):
        return config.unwrapped.config
    return _b.resolve_config(config)


def _ticks_arg(config, ticks) -> np.ndarray:
    t = np.atleast_1d(np.asarray(ticks))
    if t.ndim != 1 or t.size == 0 or not np.issubdtype(t.dtype, np.integer):
        raise ValueError(f"`ticks` must be an int or a non-empty 1-d array of ints; got {ticks!r}.")
    if np.any(t < 0):
        raise ValueError(f"`ticks` must be >= 0; got {int(t.min())}.")
    if np.any(t > np.iinfo(np.int64).max):  # uint64 ticks: int64 would wrap them negative
        raise ValueError(f"`ticks` must be < 2**63; got {int(t.max())}.")
    h = config.horizon
    if h is not None and np.any(t >= h):
        raise ValueError(f"`ticks` must be < the horizon {h}; got {int(t.max())}.")
    return t.astype(np.int64)


def context_atoms(config: _b.LinearBanditConfig, start: int = 0, stop: int | None = None):
    """Atoms ``start:stop`` of a linear bandit's context distribution and their probabilities.

    The contexts are binary: atom ``m`` sets feature ``j`` (coordinate ``j + intercept``) to
    bit ``j`` of ``m``, so the distribution has ``n = 2^(d - intercept)`` atoms.

    Returns
    -------
    x : array (stop - start, d) float
        The atoms' contexts.
    prob : array (stop - start,) float
        Their probabilities (independent bits with probability ``context_p``).
    n : int
        The number of atoms in all.
    """
    f = config.dim - int(config.intercept)
    n = 1 << f
    stop = n if stop is None else min(stop, n)
    m = np.arange(start, stop, dtype=np.int64)
    bits = ((m[:, None] >> np.arange(f)) & 1).astype(np.float64)
    k = bits.sum(axis=1)
    p = float(config.context_p)
    with np.errstate(divide="ignore", invalid="ignore"):
        prob = np.exp(k * np.log(p) + (f - k) * np.log1p(-p)) if 0 < p < 1 else \
            ((k == f) if p == 1 else (k == 0)).astype(np.float64)
    x = np.ones((m.size, config.dim)) if config.intercept else np.empty((m.size, config.dim))
    x[:, int(config.intercept):] = bits
    return x, prob, n


def static_policy_value(config, policy=None, *, ticks=0) -> float:
    """Exact expected reward of a static policy on the context distribution.

    Parameters
    ----------
    config : LinearBanditConfig, preset name or LinearBanditEnv
        The test bed.
    policy : None, callable or object
        ``None``: uniform over the available arms. A callable
        ``policy(context (n, d), available (n, K)) -> (n, K)`` of action probabilities, or an
        object with ``action_probabilities(observation)`` (called once per atom).
    ticks : int or 1-d array of ints, default 0
        Tick(s) at which to evaluate; the result is the mean over them (only matters for the
        dynamic variant).

    Returns
    -------
    float
        ``mean_t sum_x P(x) sum_a pi(a | x, t) p(a, x, t)``.

    Raises
    ------
    TypeError, ValueError
        Bad config, policy or ticks; policy probabilities that are negative, do not sum to 1
        or put mass on an unavailable arm.

    Notes
    -----
    Exact (up to float round-off, about 1e-15): the context distribution is discrete with
    ``2^(d - intercept)`` atoms (512 by default), and the sum runs over all of them. Cost
    ``O(len(ticks) 2^(d-1) K)``, in chunks of at most ~4 million (atom, arm) cells (a callable
    policy is called once per chunk): about 0.1 s at K = 10,000 (``benchmarks/ope.py``).
    """
    config = _config_of(config)
    t_arr = _ticks_arg(config, ticks)
    total = 0.0
    # atoms per chunk: at most ~4 million (atom, arm) cells, so K = 10,000 stays in memory
    chunk = max(1, min(_CHUNK_ATOMS, (1 << 22) // config.n_arms))
    for t in t_arr:
        start, n = 0, None
        v = 0.0
        while n is None or start < n:
            x, prob, n = context_atoms(config, start, start + chunk)
            tick = np.full(x.shape[0], t, np.int64)
            avail = _b.alive(config, tick)
            pi = policy_probabilities(policy, x, avail, {"tick": tick})
            v += float(prob @ np.einsum("ij,ij->i", pi, _b.true_ctr(config, x, tick)))
            start += chunk
        total += v
    return total / t_arr.size


def oracle_value(config, *, ticks=0) -> float:
    """Exact expected reward of the oracle that plays the best arm of every context."""
    config = _config_of(config)
    t_arr = _ticks_arg(config, ticks)
    total = 0.0
    for t in t_arr:
        x, prob, _ = context_atoms(config)
        total += float(prob @ _b.true_ctr(config, x, np.full(x.shape[0], t)).max(axis=1))
    return total / t_arr.size


@dataclass(frozen=True, eq=False)
class OnlineValue:
    """Monte-Carlo online value of a learning agent.

    Attributes
    ----------
    curve : array (T,)
        ``curve[t-1] = V(t)``, the expected average reward of the first ``t`` online steps.
    curve_stderr : array (T,)
        Standard error of each ``V(t)`` over the runs.
    value, stderr : float
        ``V(T)`` and its standard error (the paper's per-trial payoff over horizon T).
    n_runs : int
        Number of independent runs.
    """

    curve: np.ndarray
    curve_stderr: np.ndarray
    value: float
    stderr: float
    n_runs: int

    @property
    def T(self) -> int:
        return int(self.curve.shape[0])

    def at(self, t: int) -> tuple[float, float]:
        """``(V(t), stderr)`` for ``1 <= t <= T``."""
        if not 1 <= t <= self.T:
            raise ValueError(f"`t` must be in [1, {self.T}]; got {t}.")
        return float(self.curve[t - 1]), float(self.curve_stderr[t - 1])


def _check_action(a, avail_row, run, t):
    if isinstance(a, np.ndarray) and a.shape == ():
        a = a.item()
    if isinstance(a, (bool, np.bool_)) or not isinstance(a, numbers.Integral):
        raise ValueError(f"the agent of run {run} returned a non-integer action {a!r} at step {t}.")
    a = int(a)
    if not (0 <= a < avail_row.shape[0]) or not avail_row[a]:
        raise ValueError(f"the agent of run {run} returned action {a} at step {t}, which is "
                         "out of range or not available.")
    return a


def _run_loop(config, agent, key, T, run, start=0):
    """One online run over ticks ``start .. start + T - 1``; expected reward per step (T,)."""
    skey = _b._stream_key(key, _b._STREAM_CLICK)
    out = np.empty(T)
    for t0 in range(start, start + T, _CHUNK_TICKS):
        ticks = np.arange(t0, min(start + T, t0 + _CHUNK_TICKS), dtype=np.int64)
        X = _b.contexts(config, key, ticks)
        X.setflags(write=False)
        P = _b.true_ctr(config, X, ticks, _b.arms_alive_between(config, t0, t0 + ticks.size))
        A = _b.alive(config, ticks)
        A.setflags(write=False)
        for i, t in enumerate(ticks.tolist()):
            obs = {"context": X[i], "available": A[i], "tick": t}
            a = _check_action(agent.act(obs), A[i], run, t)
            p = float(P[i, a])
            reward = 1.0 if _b._uniform2_int(skey, t, a) < p else 0.0
            agent.update(obs, a, reward)
            out[t - start] = p
    return out


def _run_batched(config, batched, keys, T, start=0, first=0):
    """All runs in lockstep through the agents' batched twin; returns (T, B). ``first``:
    the number of the first run (in messages)."""
    B = keys.shape[0]
    rows = np.arange(B)
    active = np.ones(B, dtype=bool)
    out = np.empty((T, B))
    for t0 in range(start, start + T, _CHUNK_TICKS):
        ticks = np.arange(t0, min(start + T, t0 + _CHUNK_TICKS), dtype=np.int64)
        X = _b.contexts(config, keys[:, None], ticks[None, :])      # (B, n, d)
        P = _b.true_ctr(config, X, ticks[None, :],                  # (B, n, K)
                        _b.arms_alive_between(config, t0, t0 + ticks.size))
        A = _b.alive(config, ticks)                                 # (n, K)
        for i, t in enumerate(ticks.tolist()):
            avail = np.ascontiguousarray(np.broadcast_to(A[i], (B, A.shape[1])))
            x = np.ascontiguousarray(X[:, i])
            a = np.asarray(batched.act(x, avail))
            if a.shape != (B,) or not np.issubdtype(a.dtype, np.integer):
                raise ValueError(f"the batched agent must return ({B},) integer actions; got "
                                 f"shape {a.shape}, dtype {a.dtype} at step {t}.")
            bad = np.flatnonzero((a < 0) | (a >= A.shape[1]))
            if bad.size == 0:
                bad = np.flatnonzero(~A[i][a])
            if bad.size:
                raise ValueError(f"the agent of run {first + bad[0]} returned action "
                                 f"{a[bad[0]]} at step {t}, which is out of range or not "
                                 f"available.")
            p = P[rows, i, a]
            reward = (_b.click_uniforms(keys, t, a) < p).astype(np.float64)
            batched.update(active, x, a, reward)
            out[t - start] = p
    return out


def _batch_of(agents):
    """The agents' ``batch`` when it provably implements their act/update (the rule of
    :func:`agents.fast_path`) and they share one class; else the reason, as a string."""
    cls = type(agents[0])
    other = next((type(a) for a in agents if type(a) is not cls), None)
    if other is not None:
        return f"`make_agent` returned both {cls.__name__} and {other.__name__}."
    return fast_path(agents[0], "batch") or why_no_fast_path(agents[0], "batch")


def _online_partition(config, part):
    """Expected rewards (T, n_p) of a contiguous part of the runs (a batched twin of its
    agents, or the loop run by run)."""
    agents, keys, first, batched, T, start = part
    if batched:
        return _run_batched(config, type(agents[0]).batch(agents), keys, T, start, first)
    return np.column_stack([_run_loop(config, ag, int(k), T, first + i, start)
                            for i, (ag, k) in enumerate(zip(agents, keys, strict=True))])


def online_value(config, make_agent, T: int, *, n_runs: int = 200, start: int = 0, rng=None,
                 method: str = "auto", executor=None, n_partitions=None,
                 progress: bool = False) -> OnlineValue:
    """Expected average reward of a learning agent's first ``t`` online steps, ``t <= T``.

    Parameters
    ----------
    config : LinearBanditConfig, preset name or LinearBanditEnv
        The test bed.
    make_agent : callable
        ``make_agent(rng)`` returns a fresh agent with ``act(observation) -> int`` and
        ``update(observation, action, reward)``; ``rng`` is a Generator of its own.
    T : int
        Horizon, >= 1 (and <= ``config.horizon`` when that is set).
    n_runs : int, default 200
        Independent online runs, >= 1.
    start : int, default 0
        Tick of the first step: a fresh agent plays ticks ``start .. start + T - 1`` (for
        the dynamic variant, the value of an agent launched at ``start``).
    rng : None, int, SeedSequence or Generator
        Run ``i`` uses child ``i`` of ``rng.spawn(n_runs)``, itself split into the episode key
        and the agent's generator, so results do not depend on ``method``.
    method : {"auto", "loop", "batched"}
        ``"batched"`` steps all runs in lockstep through ``type(agent).batch(agents)``;
        ``"loop"`` runs them one after another; ``"auto"`` batches when the agent class offers
        a ``batch`` that implements its ``act`` / ``update`` (the rule of
        :func:`agents.fast_path`: a subclass overriding them runs the loop). Both give the
        same numbers when the batched twin is exact.
    executor : None or dask.distributed.Client
        ``None``: this process. A client: the runs are partitioned over the cluster's
        workers (contiguous parts; the config scattered once, each part's agents and
        episode keys sent with its task, so ``make_agent``'s agents must pickle). Same
        result, bit for bit.
    n_partitions : int >= 1, optional
        Parts of the runs (default: 1 here when batched, else 8; on a cluster one per
        worker thread when batched, else four). Changes nothing but the schedule.
    progress : bool, default False
        A tqdm bar over the parts.

    Returns
    -------
    OnlineValue
        ``curve`` (T,), ``curve_stderr`` (T,), ``value = curve[-1]``, ``stderr``, ``n_runs``.

    Raises
    ------
    TypeError, ValueError
        Bad arguments; an agent returning an out-of-range or unavailable action (named by run
        and step); ``executor`` neither None nor a ``dask.distributed.Client`` (TypeError),
        or a closed or unreachable client (ValueError, before any work is sent).

    Notes
    -----
    ``V(t) = E[(1/t) sum_{s<=t} p(a_s, x_s, s)]`` (Li et al. 2011's per-trial payoff;
    Mary et al. 2014 score replay and BRED against it). Each run averages the *expected*
    reward ``p(a_s, x_s, s)`` of its actions rather than the Bernoulli clicks: the same
    expectation with less variance. The agent still learns from the clicks, which are the
    environment's common random numbers. Standard errors are ``std(ddof=1) / sqrt(n_runs)``
    over runs (``nan`` with a :class:`DegenerateTruthWarning` when ``n_runs == 1``).
    """
    config = _config_of(config)
    if not callable(make_agent):
        raise TypeError(f"`make_agent` must be callable; got {type(make_agent).__name__}.")
    for name, v in (("T", T), ("n_runs", n_runs)):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise TypeError(f"`{name}` must be an int; got {type(v).__name__}.")
        if v < 1:
            raise ValueError(f"`{name}` must be >= 1; got {v}.")
    if isinstance(start, bool) or not isinstance(start, numbers.Integral):
        raise TypeError(f"`start` must be an int; got {type(start).__name__}.")
    if start < 0:
        raise ValueError(f"`start` must be >= 0; got {start}.")
    if config.horizon is not None and start + T > config.horizon:
        raise ValueError(f"`start + T` must be <= the horizon {config.horizon}; got "
                         f"{start} + {T} = {start + T}.")
    if method not in ("auto", "loop", "batched"):
        raise ValueError(f"`method` must be 'auto', 'loop' or 'batched'; got {method!r}.")
    if n_partitions is not None:
        n_partitions = check_int(n_partitions, "n_partitions", low=1)
    executor = check_executor(executor)
    T, n_runs = int(T), int(n_runs)
    rng = as_generator(rng)
    keys = np.empty(n_runs, dtype=np.uint64)
    agents = []
    for i, child in enumerate(rng.spawn(n_runs)):
        env_gen, agent_gen = child.spawn(2)
        keys[i] = _b.episode_key(env_gen)
        agents.append(make_agent(agent_gen))
    batch = _batch_of(agents)
    if method == "batched" and not callable(batch):
        raise ValueError(f"`method='batched'` needs a batched twin of "
                         f"{type(agents[0]).__name__}: {batch}")
    batched = method == "batched" or (method == "auto" and callable(batch))
    if n_partitions is None:
        width = 1 if executor is None else executor_threads(executor)
        n_partitions = width if batched else 4 * width if executor is not None else 8
    parts = [(agents[r.start:r.stop], keys[r.start:r.stop], r.start, batched, T, int(start))
             for r in split_evenly(n_runs, n_partitions)]
    R = np.concatenate(run_partitions(_online_partition, parts, shared=(config,),
                                      executor=executor, progress=bool(progress),
                                      desc="online_value"), axis=1)
    steps = np.arange(1, T + 1, dtype=np.float64)[:, None]
    cum = np.cumsum(R, axis=0) / steps                      # (T, n_runs)
    curve = cum.mean(axis=1)
    if n_runs > 1:
        se = cum.std(axis=1, ddof=1) / math.sqrt(n_runs)
    else:
        warnings.warn("`n_runs` == 1: standard errors are nan.", DegenerateTruthWarning,
                      stacklevel=2)
        se = np.full(T, np.nan)
    for arr in (curve, se):
        arr.setflags(write=False)
    return OnlineValue(curve=curve, curve_stderr=se, value=float(curve[-1]),
                       stderr=float(se[-1]), n_runs=n_runs)
