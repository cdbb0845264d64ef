"""numba kernels of the world's simulation (loops that carry state: the profile matrix).

Each kernel is written once as a plain Python function (``*_py``, the reference the tests run
in the interpreter) and compiled with ``numba.njit`` (cached on disk: ``recloop_base.kernels``)
on first use by :func:`organic_span`; importing this module neither imports numba nor
compiles anything. Kernels take arrays and pre-drawn uniforms, never Generators, so the random
streams (and therefore the common random numbers of a world and its twin) are the caller's
business.
"""

from __future__ import annotations

import math

import numpy as np

from recloop_base.kernels import compiled
from recloop_base.threads import n_threads

__all__ = ["organic_span", "organic_span_py", "compact_py", "campaign_offers",
           "campaign_offers_py"]


def organic_span_py(users, r, coins, starts, prob, alias, has, taste0, drift_z, basis,
                    drift_rate, origin, theta, span_ticks, features, appeal, decay, logistic,
                    block, u_lo, u_hi, flag, out_u, out_i):
    """Process the exposure events of several ticks, user block by user block.

    Parameters
    ----------
    users : (n,) int64
        The visiting user of each event of ticks ``0 .. s - 1`` of the span, tick after
        tick, non-decreasing within a tick.
    r, coins : (n,) float64
        ``r`` picks the item by the alias method; ``coins`` are the adoption coins.
    starts : (s + 1,) int64
        Events of span tick ``j`` are ``starts[j]:starts[j + 1]``.
    prob, alias : (s, n_items) float64, int64
        The alias tables of the span's ticks.
    has : (n_users, n_items) bool
        The profiles; updated in place with the adoptions.
    taste0 : (n_users, dim); drift_z : (n_users, dim, K) (or (0, 0, 0) without drift);
    drift_rate : float
        Taste ``x_u = taste0[u] + drift_rate * drift_z[u] @ basis[j]``.
    origin : (n_users,) int64; theta : float; span_ticks : (s,) int64
        With ``theta > 0`` (an Ornstein-Uhlenbeck drift) ``taste0[u]`` is first scaled by
        ``exp(-theta |span_ticks[j] - origin[u]|)``; ``origin`` is unused (may be empty)
        when ``theta`` is 0.
    features : (n_items, dim); logistic : bool
        ``p = g(appeal[j, i] + x_u . f_i) * decay[j, i]``, ``g`` logistic if ``logistic``
        else clipping to [0, 1]; the dot product is summed in index order.
    basis : (s, K); appeal, decay : (s, n_items)
        Per span tick.
    block : int
        Users per block (a block's profile rows and tastes stay in cache).
    u_lo, u_hi : int
        Only the events of users ``u_lo <= u < u_hi`` are processed (callers run disjoint
        ranges concurrently).
    flag : (n,) uint8, zeros
        Set to 1 for the events that are adoptions.
    out_u, out_i : (n,) int64
        ``out_u[e]``, ``out_i[e]`` receive the user and item of event ``e`` where ``flag[e]``
        is set.

    Notes
    -----
    Event by event, as ``World._organic_naive``: an exposure to an item the user already
    holds (including one adopted earlier in the span) is skipped; otherwise the user adopts
    when ``coin < p(u, i, t)``. A user's adoptions depend only on that user's events (its
    row of ``has``), so processing the users of one block through all the span's ticks, then
    the next block, meets every user's events in tick order, like the tick-by-tick pass,
    while the block's rows of ``has`` and ``taste0`` stay in cache instead of being fetched
    from memory once per event.
    """
    n_ticks = starts.shape[0] - 1
    dim = taste0.shape[1]
    n_terms = basis.shape[1]
    drift = drift_z.shape[0] > 0
    n_col = prob.shape[1]
    x = np.empty(dim)
    ptr = starts[:-1].copy()
    if u_lo > 0:  # first event of each tick whose user is >= u_lo
        for j in range(n_ticks):
            ptr[j] = starts[j] + np.searchsorted(users[starts[j]:starts[j + 1]], u_lo)
    for lo in range(u_lo, u_hi, block):
        hi = min(lo + block, u_hi)
        for j in range(n_ticks):
            e = ptr[j]
            end = starts[j + 1]
            while e < end and users[e] < hi:
                u = users[e]
                xr = r[e] * n_col
                col = int(xr)
                if col > n_col - 1:
                    col = n_col - 1
                i = col if xr - col < prob[j, col] else alias[j, col]
                if not has[u, i]:
                    for d in range(dim):
                        x[d] = taste0[u, d]
                    if drift:
                        if theta > 0.0:
                            m = math.exp(-theta * abs(span_ticks[j] - origin[u]))
                            for d in range(dim):
                                x[d] *= m
                        for d in range(dim):
                            s = 0.0
                            for k in range(n_terms):
                                s += drift_z[u, d, k] * basis[j, k]
                            x[d] += drift_rate * s
                    score = 0.0
                    for d in range(dim):
                        score += x[d] * features[i, d]
                    score += appeal[j, i]
                    if logistic:
                        p = 1.0 / (1.0 + math.exp(-score))
                    else:
                        p = min(max(score, 0.0), 1.0)
                    p *= decay[j, i]
                    if coins[e] < p:
                        has[u, i] = True
                        flag[e] = 1
                        out_u[e] = u
                        out_i[e] = i
                e += 1
            ptr[j] = e


def compact_py(flag, out_u, out_i, starts, ticks, users, items, when):
    """Gather the flagged events' ``(user, item, tick)`` in event order into ``users``,
    ``items``, ``when`` (sized ``flag.sum()``); ``ticks[j]`` is the tick of span tick ``j``."""
    m = 0
    for j in range(starts.shape[0] - 1):
        t = ticks[j]
        for e in range(starts[j], starts[j + 1]):
            if flag[e]:
                users[m] = out_u[e]
                items[m] = out_i[e]
                when[m] = t
                m += 1


_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_C_USER = np.uint64(0xD1B54A32D192ED03)
_C_ITEM = np.uint64(0xABC98388FB8FAC03)
_C_TICK = np.uint64(0x8CB92BA72F3D8DD7)
_S11, _S27, _S30, _S31 = np.uint64(11), np.uint64(27), np.uint64(30), np.uint64(31)


def campaign_offers_py(users, slate, k, t, boost, key, has, alive, taste0, drift_z, basis,
                       drift_rate, origin, theta, features, appeal, decay, logistic, offered,
                       accepted):
    """One campaign's offers at one tick: which are made, which are accepted.

    Parameters
    ----------
    users : (n,) int64, distinct
        Users pushed at this tick.
    slate : (n, L) int64
        Items proposed to each user (distinct within a row).
    k : int
        Offers per user: the first ``k`` items of the row that are alive and not held.
    t : int; boost : float; key : uint64
        Tick, boost exponent and the ``campaign_accept`` stream key of ``hash_uniforms``.
    has : (n_users, n_items) bool
        Profiles; accepted offers are marked.
    alive : (n_items,) bool; appeal, decay : (n_items,) at tick ``t``; basis : (K,) at ``t``
    taste0, drift_z, drift_rate, origin, theta, features, logistic
        As in :func:`organic_span_py` (the tick is ``t``).
    offered, accepted : (n, L) uint8, zeros
        Set to 1 where an offer is made / accepted (``accepted`` implies ``offered``).

    Notes
    -----
    As ``World._campaign_naive``: an offer of item ``i`` to user ``u`` is accepted when
    ``hash_uniforms(key, u, i, t) < 1 - (1 - p(u, i, t)) ** boost``; the hash is
    :func:`simulator._crn.hash_uniforms` written out on uint64 scalars.
    """
    dim = taste0.shape[1]
    n_terms = basis.shape[0]
    drift = drift_z.shape[0] > 0
    x = np.empty(dim)
    tick_mix = np.uint64(t) * _C_TICK
    for r in range(users.shape[0]):
        u = users[r]
        n_off = 0
        for j in range(slate.shape[1]):
            if n_off == k:
                break
            i = slate[r, j]
            if not alive[i] or has[u, i]:
                continue
            n_off += 1
            offered[r, j] = 1
            for d in range(dim):
                x[d] = taste0[u, d]
            if drift:
                if theta > 0.0:
                    m = math.exp(-theta * abs(t - origin[u]))
                    for d in range(dim):
                        x[d] *= m
                for d in range(dim):
                    s = 0.0
                    for q in range(n_terms):
                        s += drift_z[u, d, q] * basis[q]
                    x[d] += drift_rate * s
            score = 0.0
            for d in range(dim):
                score += x[d] * features[i, d]
            score += appeal[i]
            if logistic:
                p = 1.0 / (1.0 + math.exp(-score))
            else:
                p = min(max(score, 0.0), 1.0)
            p *= decay[i]
            # SplitMix64's finaliser, twice (written out: numba compiles this function alone)
            h = np.uint64(u) * _C_USER + np.uint64(i) * _C_ITEM + key
            h ^= h >> _S30
            h *= _M1
            h ^= h >> _S27
            h *= _M2
            h ^= h >> _S31
            h += tick_mix
            h ^= h >> _S30
            h *= _M1
            h ^= h >> _S27
            h *= _M2
            h ^= h >> _S31
            coin = np.float64(h >> _S11) * (1.0 / 9007199254740992.0)
            if coin < 1.0 - (1.0 - p) ** boost:
                accepted[r, j] = 1
                has[u, i] = True


_POOL: list = []
#: Below this many events a tick runs on one thread (a thread hand-off costs ~50 us).
_MIN_SPLIT = 8192
#: Below this many pushed users a campaign tick runs on one thread.
_MIN_SPLIT_ROWS = 2048
#: Users per block of the span kernel: a block's profile rows (n_items bytes each) and
#: tastes stay in a core's cache while the span's ticks go by.
_BLOCK = 256


def _compiled(name: str, py_fn):
    """The compiled ``py_fn`` (``name`` kept for the call sites' readability)."""
    return compiled(py_fn)


def _default_threads(threads):
    return min(2, n_threads()) if threads is None else threads


def _pool(name: str = "kernel"):
    """A one-worker executor per ``name``, made on first use. Its tasks never wait on other
    tasks (no deadlock whatever the callers do). A forked child (multiprocessing, dask)
    inherits the executor but not its thread, so it makes its own."""
    import os

    pid, pools = _POOL[0] if _POOL else (None, {})
    if pid != os.getpid():
        pools = {}
        _POOL[:] = [(os.getpid(), pools)]
    if name not in pools:
        from concurrent.futures import ThreadPoolExecutor

        pools[name] = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"simulator-{name}")
    return pools[name]


def organic_span(users, r, coins, starts, prob, alias, has, taste0, drift_z, basis,
                 drift_rate, features, appeal, decay, logistic, ticks, *, block=None,
                 threads=None, min_split=None, origin=None, theta=0.0):
    """:func:`organic_span_py` compiled with numba (on the first call) over all users;
    returns the adoptions ``(users, items, ticks)`` in event order (``ticks[j]``: the tick
    of span tick ``j``).

    With ``threads >= 2`` (default: 2 unless :func:`recloop_base.threads.n_threads` says 1)
    and enough events the users are cut in two ranges run concurrently (GIL released): they
    touch disjoint rows of ``has`` and disjoint events, so the result is the same as one
    pass.
    """
    fn = _compiled("organic_span", organic_span_py)
    threads = _default_threads(threads)
    block = _BLOCK if block is None else block
    min_split = _MIN_SPLIT if min_split is None else min_split
    n = users.shape[0]
    n_users = has.shape[0]
    flag = np.zeros(n, np.uint8)
    out_u = np.empty(n, np.int64)
    out_i = np.empty(n, np.int64)
    ticks = np.asarray(ticks, np.int64)
    origin = np.zeros(0, np.int64) if origin is None else origin
    args = (users, r, coins, starts, prob, alias, has, taste0, drift_z, basis,
            float(drift_rate), origin, float(theta), ticks, features, appeal, decay,
            bool(logistic), int(block))
    if threads > 1 and n >= min_split and n_users >= 2:
        mid = n_users // 2
        later = _pool().submit(fn, *args, mid, n_users, flag, out_u, out_i)
        fn(*args, 0, mid, flag, out_u, out_i)
        later.result()
    else:
        fn(*args, 0, n_users, flag, out_u, out_i)
    m = int(np.count_nonzero(flag))
    users, items, when = np.empty(m, np.int64), np.empty(m, np.int64), np.empty(m, np.int64)
    _compiled("compact", compact_py)(flag, out_u, out_i, starts, ticks, users, items, when)
    return users, items, when


def campaign_offers(users, slate, k, t, boost, key, has, alive, taste0, drift_z, basis,
                    drift_rate, features, appeal, decay, logistic, *, threads=None,
                    min_split=None, origin=None, theta=0.0):
    """:func:`campaign_offers_py` compiled with numba (on the first call); returns
    ``(offered, accepted)`` boolean (n, L) masks. With ``threads >= 2`` (default as in
    :func:`organic_span`) and enough users the rows are cut in two halves run concurrently
    (distinct users: disjoint rows of ``has``).
    """
    fn = _compiled("campaign_offers", campaign_offers_py)
    threads = _default_threads(threads)
    min_split = _MIN_SPLIT_ROWS if min_split is None else min_split
    n = users.shape[0]
    offered = np.zeros(slate.shape, np.uint8)
    accepted = np.zeros(slate.shape, np.uint8)
    origin = np.zeros(0, np.int64) if origin is None else origin
    rest = (int(k), int(t), float(boost), np.uint64(key), has, alive, taste0, drift_z, basis,
            float(drift_rate), origin, float(theta), features, appeal, decay, bool(logistic))
    if threads > 1 and n >= min_split:
        h = n // 2
        later = _pool().submit(fn, users[h:], slate[h:], *rest, offered[h:], accepted[h:])
        fn(users[:h], slate[:h], *rest, offered[:h], accepted[:h])
        later.result()
    else:
        fn(users, slate, *rest, offered, accepted)
    return offered.view(bool), accepted.view(bool)
