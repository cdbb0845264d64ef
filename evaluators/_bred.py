"""BRED: Bootstrapped Replay on Expanded Data (Mary, Preux, Nicol 2014)."""

from __future__ import annotations

import math
import threading
import warnings
from dataclasses import dataclass, field

import numpy as np

from evaluators._estimate import Estimate
from evaluators._replay import NoMatchWarning, _walk
from evaluators._validation import check_actions as _check_actions
from evaluators._validation import check_log as _check_log
from evaluators._validation import check_uniform as _check_uniform
from recloop_base.executors import check_executor, executor_threads, run_partitions, split_evenly
from recloop_base.fast_paths import fast_path
from recloop_base.threads import n_threads
from recloop_base.validation import as_generator, check_int, check_level

__all__ = ["bred", "BredEstimate", "JITTER_C"]

#: ``c`` of the automatic jitter bandwidth ``h = c * std(context) / sqrt(T)``.
JITTER_C = 1.0

_REVEALS = ("every", "once")

# records per chunk of jitter noise: bounds memory at B * _CHUNK * d floats
_CHUNK = 4096


@dataclass(frozen=True)
class BredEstimate(Estimate):
    """:class:`Estimate` of BRED with its bootstrap diagnostics.

    ``value`` is the mean of the replicates' replay values, ``stderr`` their standard
    deviation, ``[ci_low, ci_high]`` their percentile interval, ``n`` the number of
    replicates with at least one match. ``replicate_values`` (B,) holds every replicate
    (``nan`` where it matched nothing), ``mean_matches`` the mean number of (counted)
    matches per replicate -- the horizon the estimate measures --, ``bandwidth`` (d,) the
    jitter standard deviation used per context feature, ``reveal`` the reveal rule,
    ``replicate_matches`` (B,) each replicate's number of counted matches.
    """

    replicate_values: np.ndarray = field(default=None, compare=False, repr=False)
    mean_matches: float = math.nan
    bandwidth: np.ndarray = field(default=None, compare=False, repr=False)
    expansion: float = math.nan
    reveal: str = "every"
    replicate_matches: np.ndarray = field(default=None, compare=False, repr=False)


_JITTER_EXPECTED = "\"auto\", a float >= 0 or one float >= 0 per context feature"


def _bandwidth(log, jitter) -> np.ndarray:
    std = log.context.std(axis=0)
    if isinstance(jitter, str):
        if jitter != "auto":
            raise ValueError(f"`jitter` must be {_JITTER_EXPECTED}; got {jitter!r}.")
        return JITTER_C * std / math.sqrt(log.n_rounds)
    if isinstance(jitter, (list, tuple, np.ndarray)):
        h = np.array(jitter, dtype=float) if np.ndim(jitter) == 1 else None
        if h is None or h.shape != std.shape or not np.all(np.isfinite(h) & (h >= 0)):
            raise ValueError(f"`jitter` must be {_JITTER_EXPECTED} ({std.size} here); got "
                             f"{jitter!r}.")
        return h
    if isinstance(jitter, bool) or not isinstance(jitter, (int, float, np.integer, np.floating)):
        raise TypeError(f"`jitter` must be {_JITTER_EXPECTED}; got {type(jitter).__name__}.")
    if not (math.isfinite(jitter) and jitter >= 0):
        raise ValueError(f"`jitter` must be {_JITTER_EXPECTED}; got {jitter}.")
    # constant features (an intercept) stay exact, as with "auto"
    return np.where(std > 0, float(jitter), 0.0)


def _draw_noise(gen, c, d, out=None):
    """Standard normal draws for the jitter of ``c`` records, float32 (faster to draw, ample
    precision for a jitter); a record's jitter is ``draw.astype(float64) * h``."""
    return gen.standard_normal((c, d), dtype=np.float32, out=out)


def _noise(gen, n, h):
    """Unscaled float32 jitter draws (n, d) of ``n`` records, drawn in the chunks of the
    batched path (``None`` when ``h == 0``); record j's jitter is ``draws[j] * h``."""
    if not np.any(h > 0):
        return None
    d = h.shape[0]
    return np.concatenate([_draw_noise(gen, min(_CHUNK, n - s), d) for s in range(0, n, _CHUNK)])


def bred(log, make_agent, *, n_bootstrap=100, expansion=None, jitter="auto", ci=0.95,
         reveal="every", rng=None, executor=None, n_partitions=None,
         progress=False) -> BredEstimate:
    """Bootstrapped Replay on Expanded Data: replay on B jittered bootstrap resamples.

    Parameters
    ----------
    log : simulator.logs.BanditLog
        ``T`` uniformly logged records (``pscore == 1 / n_available``).
    make_agent : callable ``Generator -> agent``
        Returns a fresh, reset bandit agent using the given generator; called once per
        replicate.
    n_bootstrap : int >= 1
        Number of replicates B.
    expansion : float > 0, optional
        Each replicate has ``round(expansion * T)`` records drawn with replacement;
        default ``n_actions`` (so a replay matches about ``T`` records, as on the real log).
    jitter : "auto", float >= 0 or array (d,) of floats >= 0
        Standard deviation of the Gaussian noise added to the resampled contexts.
        ``"auto"``: ``h_m = c * std(context[:, m]) / sqrt(T)`` per feature with
        ``c = JITTER_C = 1``; a float sets ``h`` for every non-constant feature
        (constant ones, e.g. an intercept, are never jittered); an array sets ``h_m`` per
        feature as given (e.g. another ``c``: ``c * log.context.std(axis=0) /
        sqrt(T)``); 0 disables jitter.
    ci : float in (0, 1)
        Level of the percentile interval.
    reveal : {"every", "once"}
        ``"every"`` (the paper's algorithm): every match of a resampled record is counted
        and given to the agent. ``"once"``: within a replicate, a logged record's reward is
        counted and given to the agent only at its first match; later matches of copies of
        the same record are skipped (not counted, no update). See Notes.
    rng : None, int, SeedSequence or Generator
    executor : None or dask.distributed.Client
        ``None``: this process (batched twins on its threads when their replay is compiled).
        A client: the replicates are partitioned over the cluster's workers (contiguous
        parts; the log scattered once to every worker; each part's agents and generators
        sent with its task, so ``make_agent``'s agents must pickle). Same result, bit for
        bit.
    n_partitions : int >= 1, optional
        Parts of the replicates (default: one per thread here or per worker thread of the
        cluster for agents with a compiled batched twin, four per thread otherwise). Changes
        nothing but the schedule.
    progress : bool, default False
        A tqdm bar over the parts.

    Returns
    -------
    BredEstimate
        Mean of the replicates' replay values, their standard deviation as standard error,
        the percentile interval; ``nan`` with a :class:`NoMatchWarning` if no replicate
        matched anything.

    Raises
    ------
    TypeError
        ``log`` not a BanditLog, ``make_agent`` not callable or returning a non-agent,
        ``n_bootstrap`` or ``n_partitions`` not an int, ``jitter`` of a wrong type,
        ``executor`` neither None nor a ``dask.distributed.Client``.
    ValueError
        Empty log, non-uniform propensities, ``n_bootstrap < 1``, ``expansion <= 0``,
        negative ``jitter``, ``reveal`` not "every" or "once", an agent returning an
        unavailable or out-of-range action, ``n_partitions < 1``, a closed or unreachable
        client (before any work is sent).

    Notes
    -----
    Mary, Preux, Nicol (2014), "Improving offline evaluation of contextual bandit
    algorithms via bootstrapping techniques". Replay of a learner on ``T`` records lets it
    learn on only ``~T/K`` of them; resampling ``K * T`` records restores a horizon of about
    ``T`` steps, the bootstrap distribution gives the uncertainty, and the jitter (a
    smoothed bootstrap) keeps the learner from seeing exact repeats of a context.

    Memorisation bias (``reveal="every"``). A resample of ``K * T`` records holds about
    ``K`` copies of each logged record. A learner that uses the context memorises them:
    after matching a copy with reward 1 it tends to pick the same arm on the next copies
    (and matches again, reward 1), after reward 0 it switches arm and the later copies are
    skipped. Rewarded records are thereby over-counted and the estimate is biased upwards,
    possibly above the best achievable per-trial payoff. In recloop's measurements on
    the BRED linear test bed (K = 10, d = 10, binary contexts), LinUCB at T = 1000 has
    true V(T) = 0.37 and the paper's BRED gives about 0.6 (the best policy earns 0.45, so
    no learner can earn more); the bias shrinks with T (+0.32 at T = 500, +0.05 at
    T = 10,000) and only at T = 10,000 does the RMSE match replay's (0.048 against 0.050;
    the ``bred_vs_replay`` scenario). Context-free learners (UCB1) are hardly affected: they
    cannot tell the copies apart from other records. Jitter cannot remove the bias for a
    context-using learner: with ``h = c * std / sqrt(T)`` a copy's context moves by
    ``O(1/sqrt(T))``, and a linear (hence smooth) score changes by as little, so the
    learner still recognises the record (binary contexts: the jittered copy is still
    nearest to its own point). A much wider jitter trades the memorisation bias for a
    blurring bias (``examples/bred_jitter_sweep.py``: 20 logs, B = 50): LinUCB's bias
    against V(T) is +0.33 / +0.17 / +0.047 at T = 500 / 2000 / 10,000 with c = 1 (c = 3:
    no change), +0.05 / +0.07 / +0.035 with c = 30, and -0.02 / -0.02 / -0.016 with
    c = 100 -- where ``h`` is 4.5, 2.2 and 1 context standard deviations, so the learner
    mostly sees noise. The same c = 100 biases BRED of a static context-using policy (a
    frozen ridge-greedy policy, exact value 0.448) by -0.145 / -0.110 at T = 500 / 2000,
    against +0.005 / -0.000 with c = 1 (replay: +0.006 / -0.001): the two biases cancel for
    one learner on one test bed, not in general. ``JITTER_C = 1`` is
    kept (static policies stay unbiased); use ``reveal="once"`` for learners.

    Reveal once (``reveal="once"``). Each logged record is revealed at most once per
    replicate (at its first match), as on the real log, where a record is seen once. The
    matched stream is then a stream of distinct uniformly-logged records in random order,
    and the replicate's value estimates the learner's online per-trial payoff ``V(m)``
    over its first ``m`` matches, ``m`` the replicate's match count (``replicate_matches``).
    A first match is a match of a uniformly logged action, as in replay; a later copy of
    a record not matched yet matches more often where the learner has changed its choice
    for that context, a selection effect that leaves a small negative bias: against
    ``V(m)``, -0.004 +- 0.004 (T = 500) and -0.008 +- 0.003 (T = 1000) for LinUCB, -0.002
    and -0.004 (+- 0.003) for UCB1 on the BRED test bed over 50 logs (about 2% of the
    value; the paper's variant: +0.34 and +0.26 for LinUCB). The
    horizon is shorter than ``T``: once a record is revealed its copies no longer count, so
    ``mean_matches`` is about ``T / 4`` for LinUCB and ``T / 2`` for UCB1 at ``K = 10``
    (against ``~T/K`` for replay on the log, ``~T`` for ``"every"``); score it against
    ``V(mean_matches)``, not ``V(T)``. It removes the memorisation bias; for LinUCB its
    RMSE is below replay's even against ``V(T)`` at every T from 500 to 10,000 (0.038 to
    0.045 against 0.050 to 0.087, 50 logs per T) and its 95% interval covered ``V(m)`` in
    86% to 98% of the logs.

    Randomness: ``rng`` is converted once and spawns B children; child ``i`` spawns two
    streams, the first for replicate i's resampling indices then its jitter, the second
    is passed to ``make_agent``. Replicate ``i`` therefore depends on child ``i`` only,
    whatever the batching, the partitions and the executor. Agents whose ``batch`` twin
    implements their ``act`` / ``update`` (recloop's bandits and their subclasses that do
    not override these; see :func:`agents.fast_path`) run as batched twins of many copies
    (compiled when the twin's ``replay_arrays`` is a fast path); others run replicate after
    replicate, through the agent's own compiled replay when it has one -- with identical
    numbers. Memory: the log, plus for each running twin the resampling indices of its
    replicates, ``8 n`` bytes each (``n = round(expansion * T)``), at most 512 MiB per twin
    (further replicates run in successive twins), and ``T`` bytes per replicate with
    ``reveal="once"``.
    """
    log = _check_log(log)
    _check_uniform(log, "bred")
    if not callable(make_agent):
        raise TypeError(f"`make_agent` must be callable (Generator -> agent); got "
                        f"{type(make_agent).__name__}.")
    if isinstance(n_bootstrap, bool) or not isinstance(n_bootstrap, (int, np.integer)):
        raise TypeError(f"`n_bootstrap` must be an int; got {type(n_bootstrap).__name__}.")
    if n_bootstrap < 1:
        raise ValueError(f"`n_bootstrap` must be >= 1; got {n_bootstrap}.")
    if expansion is None:
        expansion = float(log.n_actions)
    elif isinstance(expansion, bool) or not isinstance(expansion, (int, float, np.integer,
                                                                   np.floating)):
        raise TypeError(f"`expansion` must be a float > 0; got {type(expansion).__name__}.")
    if not (math.isfinite(expansion) and expansion > 0):
        raise ValueError(f"`expansion` must be > 0; got {expansion}.")
    h = _bandwidth(log, jitter)
    level = check_level(ci)
    if not (isinstance(reveal, str) and reveal in _REVEALS):
        raise ValueError(f"`reveal` must be one of {_REVEALS}; got {reveal!r}.")
    once = reveal == "once"
    if n_partitions is not None:
        n_partitions = check_int(n_partitions, "n_partitions", low=1)
    executor = check_executor(executor)
    T, B = log.n_rounds, int(n_bootstrap)
    n = max(1, int(round(expansion * T)))

    children = as_generator(rng).spawn(B)
    streams = [c.spawn(2) for c in children]
    data_gens = [s[0] for s in streams]
    agents_ = [make_agent(s[1]) for s in streams]
    for i, ag in enumerate(agents_):
        if not (callable(getattr(ag, "act", None)) and callable(getattr(ag, "update", None))):
            raise TypeError(f"`make_agent` must return a bandit agent (with `act` and "
                            f"`update`); got {type(ag).__name__} for replicate {i}.")
    cls = type(agents_[0])
    twins = fast_path(agents_[0], "batch") is not None and all(type(a) is cls for a in agents_)
    compiled = False
    if twins:  # checks all B agents together (errors name the replicate); then discarded:
        # each partition builds the twin of its replicates from their (untouched) agents
        compiled = fast_path(cls.batch(agents_), "replay_arrays") is not None
    local = n_threads() if compiled else 1  # a compiled replay releases the GIL
    if n_partitions is None:
        width = executor_threads(executor) if executor is not None else local
        n_partitions = width if compiled else 4 * width
    stop = threading.Event() if executor is None else None
    parts = [(agents_[r.start:r.stop], data_gens[r.start:r.stop], n, h, once, twins, stop)
             for r in split_evenly(B, n_partitions)]
    arrays = (log.context, log.available_mask(), log.action, log.reward)
    done = run_partitions(_bred_partition, parts, shared=(arrays,), executor=executor,
                          threads=local, progress=progress, desc="bred", stop=stop)
    sums = np.concatenate([d[0] for d in done])
    matches = np.concatenate([d[1] for d in done])

    with np.errstate(invalid="ignore", divide="ignore"):
        values = sums / matches
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        warnings.warn(f"no BRED replicate matched any record (B={B}); returning nan.",
                      NoMatchWarning, stacklevel=2)
        value = se = lo = hi = math.nan
    else:
        if finite.size < B:
            warnings.warn(f"{B - finite.size} of {B} BRED replicates matched no record and "
                          f"were left out.", NoMatchWarning, stacklevel=2)
        value = float(finite.mean())
        se = float(finite.std(ddof=1)) if finite.size > 1 else math.nan
        lo, hi = (float(q) for q in np.quantile(finite, [(1 - level) / 2, (1 + level) / 2]))
    values.setflags(write=False)
    matches.setflags(write=False)
    h.setflags(write=False)
    return BredEstimate(value, se, lo, hi, int(finite.size), level, replicate_values=values,
                        mean_matches=float(matches.mean()), bandwidth=h,
                        expansion=float(expansion), reveal=reveal,
                        replicate_matches=matches)


def _revealed_totals(revealed, reward):
    """Reward sums and match counts (B,) of reveal-once replicates: each revealed source
    record was counted exactly once, at its first match (same summation on every path)."""
    B = revealed.shape[0]
    sums, matches = np.zeros(B), np.zeros(B)
    for i in range(B):
        sums[i] = np.where(revealed[i], reward, 0.0).sum()
        matches[i] = revealed[i].sum()
    return sums, matches


#: Bytes of resampling indices held at once by one batched twin (8 per record and replicate):
#: replicates beyond it run in successive twins, which changes nothing but memory.
_INDEX_BYTES = 1 << 29


def _bred_partition(arrays, part):
    """Reward sums and match counts (B_p,) of a contiguous part of the replicates.

    ``arrays``: the log's (context, available, action, reward), shared by every part;
    ``part``: the part's agents and data generators (replicate i's stream draws its
    resampling indices, then its jitter chunk by chunk), ``n``, ``h``, reveal once, whether
    to run batched twins, and a stop event (local threads only). Twins of at most
    ``_INDEX_BYTES / (8 n)`` replicates run one after another.
    """
    agents_, data_gens, n, h, once, twins, stop = part
    T = arrays[0].shape[0]
    if not twins:
        return _run_plain(arrays, agents_, data_gens, n, h, once, stop)
    cls = type(agents_[0])
    step = max(1, min(len(agents_), _INDEX_BYTES // (8 * n)))
    out = []
    for lo in range(0, len(agents_), step):
        gens = data_gens[lo:lo + step]
        index = np.empty((len(gens), n), dtype=np.int64)
        for j, g in enumerate(gens):  # row by row: np.stack of a list would hold two copies
            index[j] = g.integers(0, T, size=n)
        out.append(_run_batched(arrays, cls.batch(agents_[lo:lo + step]), index, gens, h,
                                once, stop))
    return tuple(np.concatenate(col) for col in zip(*out, strict=True))


def _run_plain(arrays, agents_, data_gens, n, h, once=False, stop=None):
    """Replicate after replicate through the replay walk (compiled walk if the agent has it)."""
    context, avail_all, action, reward_all = arrays
    T = context.shape[0]
    B = len(agents_)
    sums, matches = np.zeros(B), np.zeros(B)
    for i in range(B):
        if stop is not None and stop.is_set():
            raise RuntimeError("stopped: another part of the replicates failed")
        idx = data_gens[i].integers(0, T, size=n)
        walk = dict(index=idx, jitter=_noise(data_gens[i], n, h), jitter_scale=h)
        if once:
            revealed = np.zeros(T, dtype=bool)
            _walk(agents_[i], context, avail_all, action, reward_all, revealed=revealed,
                  **walk)
            sums[i], matches[i] = (x[0] for x in _revealed_totals(revealed[None], reward_all))
            continue
        actions = _walk(agents_[i], context, avail_all, action, reward_all, **walk)
        logged = action[idx]
        reward = reward_all[idx]
        for s in range(0, n, _CHUNK):  # the batched path's summation order, chunk by chunk
            m = actions[s:s + _CHUNK] == logged[s:s + _CHUNK]
            sums[i] += np.where(m, reward[s:s + _CHUNK], 0.0).sum()
            matches[i] += m.sum()
    return sums, matches


def _run_batched(arrays, batched, index, data_gens, h, once=False, stop=None):
    """All replicates in lockstep on the batched twin, chunk by chunk of records; gives up
    between chunks once ``stop`` is set (another part failed, or an interrupt)."""
    context, avail_all, action, reward_all = arrays
    B, n = index.shape
    fast = fast_path(batched, "replay_arrays")
    sums, matches = np.zeros(B), np.zeros(B)
    jit = any(h > 0)
    buf = None
    revealed = np.zeros((B, context.shape[0]), dtype=bool) if once else None
    rows = np.arange(B)
    for s in range(0, n, _CHUNK):
        if stop is not None and stop.is_set():
            raise RuntimeError("stopped: another part of the replicates failed")
        idx = index[:, s:s + _CHUNK]
        c = idx.shape[1]
        noise = None
        if jit:  # one buffer for all chunks: a fresh 15 MB array per chunk page-faults
            if buf is None or buf.shape[1] != c:
                buf = np.empty((B, c, h.shape[0]), dtype=np.float32)
            for i, g in enumerate(data_gens):
                _draw_noise(g, c, h.shape[0], out=buf[i])
            noise = buf
        logged = action[idx]
        reward = reward_all[idx]
        if fast is not None:
            opts = {"revealed": revealed} if once else {}
            if noise is not None:
                opts.update(jitter=noise, jitter_scale=h)
            actions = fast(context, avail_all, action, reward_all, index=idx, **opts)
            for i in range(B):
                _check_actions(actions[i], avail_all, idx[i])
        else:
            actions = np.empty((B, c), dtype=np.int64)
            for j in range(c):
                x = context[idx[:, j]]
                if jit:
                    x = x + noise[:, j] * h
                av = avail_all[idx[:, j]]
                a = np.asarray(batched.act(x, av))
                _check_actions(a, av)
                actions[:, j] = a
                active = a == logged[:, j]
                if once:  # first match of the source record only, then mark it
                    active &= ~revealed[rows, idx[:, j]]
                    revealed[rows[active], idx[active, j]] = True
                batched.update(active, x, a, reward[:, j])
        m = actions == logged
        for i in range(B):
            sums[i] += np.where(m[i], reward[i], 0.0).sum()
            matches[i] += m[i].sum()
    if once:
        return _revealed_totals(revealed, reward_all)
    return sums, matches
