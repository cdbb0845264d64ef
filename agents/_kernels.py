"""numba kernels of the bandit agents (state-carrying loops; see ``agents._bandits``).

Every kernel takes arrays only -- state, contexts and *pre-drawn uniforms* -- never a
Generator. The single agents and their batched twins call the very same per-copy functions
(``*_act_one`` / ``*_update_one``), in the same floating-point order, which is what makes a
batched copy bit-for-bit identical to a single agent. Plain Python versions are available as
``kernel.py_func`` and the tests compare the two.

Lazy: importing this module imports neither numba nor compiles anything. The kernels are
plain functions registered by ``@_kernel``; the first access to one of them as a module
attribute (``kn.pick``) imports numba and wraps them all (``recloop_base.kernels.jit``:
cached on disk), before any of them is compiled, so that kernels calling one another resolve
to the compiled versions. Each compiles on its first call.

LinUCB's lane kernels are generated for each context dimension ``d`` (:func:`linucb_kernels`):
a module written once to ``__pycache__/generated/`` beside this file, so that numba caches
them on disk as the others, and each new process (a worker, a guest) loads them instead of
compiling them again (4 s of CPU at d = 10).
"""

from __future__ import annotations

import math

import numpy as np

import recloop_base.kernels
from recloop_base.kernels import LazyKernels

_KERNELS = LazyKernels(globals())  # the one lazy mechanism (recloop_base.kernels)


def _source_of(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


#: The source this process runs, read as it is imported (not when a kernel is generated,
#: which may be after the file was edited): the bodies of the generated steps come from it,
#: and its hash, with that of ``recloop_base.kernels`` (the compiler's options), names them.
_SOURCE = _source_of(__file__)
_JIT_SOURCE = _source_of(recloop_base.kernels.__file__)
_kernel = _KERNELS.kernel
_compile_all = _KERNELS.compile_all
_LOCK = _KERNELS.lock  # compilation, and the generated modules' cache


# --------------------------------------------------------------------------------------
# tie-breaking argmax


@_kernel
def pick(score, avail, u):
    """Index of the largest ``score`` among available arms; ties resolved by ``u`` in [0, 1).

    With ``n`` tied arms the ``floor(u * n)``-th of them (in index order) is returned, so a
    uniform ``u`` picks uniformly among ties. Returns -1 when no arm is available.
    """
    best = -np.inf
    n = 0
    for k in range(score.shape[0]):
        if avail[k]:
            s = score[k]
            if n == 0 or s > best:
                best = s
                n = 1
            elif s == best:
                n += 1
    if n == 0:
        return -1
    target = int(u * n)
    if target >= n:  # u < 1 always, but guard against rounding
        target = n - 1
    c = 0
    for k in range(score.shape[0]):
        if avail[k] and score[k] == best:
            if c == target:
                return k
            c += 1
    return -1


# --------------------------------------------------------------------------------------
# UniformRandom: one uniform per act


@_kernel
def uniform_act_one(avail, u):
    n = 0
    for k in range(avail.shape[0]):
        if avail[k]:
            n += 1
    if n == 0:
        return -1
    target = int(u * n)
    if target >= n:
        target = n - 1
    c = 0
    for k in range(avail.shape[0]):
        if avail[k]:
            if c == target:
                return k
            c += 1
    return -1


# --------------------------------------------------------------------------------------
# UCB1: counts (K,), sums (K,); one uniform per act (tie-break)


@_kernel
def ucb1_act_one(counts, sums, alpha, x, avail, u, score):
    K = counts.shape[0]
    t = 0.0
    for k in range(K):
        t += counts[k]
    logt = math.log(t) if t > 1.0 else 0.0
    for k in range(K):
        if counts[k] == 0.0:
            score[k] = np.inf
        else:
            score[k] = sums[k] / counts[k] + alpha * math.sqrt(2.0 * logt / counts[k])
    return pick(score, avail, u)


@_kernel
def count_update_one(counts, sums, a, r):
    counts[a] += 1.0
    sums[a] += r


# --------------------------------------------------------------------------------------
# EpsilonGreedy: two uniforms per act (explore?, which arm / tie-break)


@_kernel
def egreedy_act_one(counts, sums, epsilon, x, avail, u1, u2, score):
    if u1 < epsilon:
        return uniform_act_one(avail, u2)
    for k in range(counts.shape[0]):
        score[k] = np.inf if counts[k] == 0.0 else sums[k] / counts[k]
    return pick(score, avail, u2)


# --------------------------------------------------------------------------------------
# LinUCB (disjoint): Ainv (K, d, d), b (K, d), theta (K, d); one uniform per act


@_kernel
def linucb_act_one(Ainv, theta, alpha, x, avail, u, score, y):
    K = Ainv.shape[0]
    d = Ainv.shape[1]
    for k in range(K):
        if not avail[k]:
            score[k] = -np.inf
            continue
        # x^T Ainv_k x from the upper triangle (Ainv is kept exactly symmetric): half the
        # multiplications of a full product.
        w = 0.0
        for i in range(d):
            s = 0.0
            for j in range(i):
                s += Ainv[k, j, i] * x[j]
            w += x[i] * (Ainv[k, i, i] * x[i] + 2.0 * s)
        m = 0.0
        for i in range(d):
            m += theta[k, i] * x[i]
        if w < 0.0:  # rounding only: Ainv is positive definite
            w = 0.0
        score[k] = m + alpha * math.sqrt(w)
    return pick(score, avail, u)


@_kernel
def linucb_update_one(Ainv, b, theta, x, a, r, y):
    """Sherman-Morrison: (A + x x^T)^-1 = Ainv - (Ainv x)(Ainv x)^T / (1 + x^T Ainv x);
    theta follows by the matching rank-one step."""
    d = Ainv.shape[1]
    for i in range(d):
        y[i] = 0.0
    for j in range(d):
        xj = x[j]
        for i in range(d):
            y[i] += Ainv[a, j, i] * xj
    den = 1.0
    for i in range(d):
        den += x[i] * y[i]
    rden = 1.0 / den
    for i in range(d):  # symmetric update keeps Ainv bitwise symmetric
        for j in range(i, d):
            v = y[i] * y[j] * rden
            Ainv[a, i, j] -= v
            if j != i:
                Ainv[a, j, i] -= v
    for i in range(d):
        b[a, i] += r * x[i]
    # theta' = Ainv' b' = theta + y (r - x.theta) / den: O(d) instead of recomputing Ainv' b'
    e = r
    for i in range(d):
        e -= x[i] * theta[a, i]
    e *= rden
    for i in range(d):
        theta[a, i] += y[i] * e


# --------------------------------------------------------------------------------------
# batched steps: B copies, same per-copy functions


@_kernel
def uniform_act_batch(avail, u, out):
    for i in range(avail.shape[0]):
        out[i] = uniform_act_one(avail[i], u[i])


@_kernel
def ucb1_act_batch(counts, sums, alpha, X, avail, u, out):
    score = np.empty(counts.shape[1])
    for i in range(counts.shape[0]):
        out[i] = ucb1_act_one(counts[i], sums[i], alpha, X[i], avail[i], u[i], score)


@_kernel
def egreedy_act_batch(counts, sums, epsilon, X, avail, u1, u2, out):
    score = np.empty(counts.shape[1])
    for i in range(counts.shape[0]):
        out[i] = egreedy_act_one(counts[i], sums[i], epsilon, X[i], avail[i], u1[i], u2[i],
                                 score)


@_kernel
def count_update_batch(counts, sums, active, action, reward):
    for i in range(counts.shape[0]):
        if active[i]:
            count_update_one(counts[i], sums[i], action[i], reward[i])


# --------------------------------------------------------------------------------------
# replay over arrays of records: act on every record, update where the action matches the
# logged one and the record is eligible (rejection sampling already decided)
#
# Single copy: records (T, ...), uniforms (T,) or (T, 2). Batched: copy i walks records
# index[i, :] of the base arrays, with context X[index[i, j]] + jitter[i, j].
#
# "Reveal once" (BRED on a resample that repeats records): step j of copy i comes from source
# record source[i, j]; with a non-empty revealed (B, n_source) bool array, a match is used
# only if that source record is not yet revealed for the copy, and then marks it. An empty
# revealed array (shape (0, 0)) uses every eligible match.


@_kernel
def _reveal(source, revealed, i, j):
    """True if the match at step j of copy i is used (and marks its source record)."""
    if revealed.shape[0] == 0:
        return True
    s = source[i, j]
    if revealed[i, s]:
        return False
    revealed[i, s] = True
    return True


@_kernel
def _ctx(X, index, jitter, scale, i, j, x):
    """Context of step j of copy i: ``X[index[i, j]] + jitter[i, j] * scale`` (in float64;
    ``jitter`` may be float32 draws), or the plain row when ``jitter`` is empty."""
    r = index[i, j]
    if jitter.shape[0] == 0:
        for m in range(X.shape[1]):
            x[m] = X[r, m]
    else:
        for m in range(X.shape[1]):
            x[m] = X[r, m] + np.float64(jitter[i, j, m]) * scale[m]
    return r


@_kernel
def linucb_replay(Ainv, b, theta, alpha, X, avail, logged, reward, eligible, source, revealed,
                  index, jitter, scale, u, out):
    """Batched LinUCB replay; state arrays have a leading copy axis (B, ...)."""
    B, n = index.shape
    K = Ainv.shape[1]
    d = Ainv.shape[2]
    score = np.empty(K)
    y = np.empty(d)
    x = np.empty(d)
    for i in range(B):
        for j in range(n):
            r = _ctx(X, index, jitter, scale, i, j, x)
            a = linucb_act_one(Ainv[i], theta[i], alpha, x, avail[r], u[i, j], score, y)
            out[i, j] = a
            if a == logged[r] and eligible[i, j] and _reveal(source, revealed, i, j):
                linucb_update_one(Ainv[i], b[i], theta[i], x, a, reward[r], y)


@_kernel
def ucb1_replay(counts, sums, alpha, X, avail, logged, reward, eligible, source, revealed, index,
                jitter, scale, u, out):
    B, n = index.shape
    score = np.empty(counts.shape[1])
    x = np.empty(X.shape[1])
    for i in range(B):
        for j in range(n):
            r = _ctx(X, index, jitter, scale, i, j, x)
            a = ucb1_act_one(counts[i], sums[i], alpha, x, avail[r], u[i, j], score)
            out[i, j] = a
            if a == logged[r] and eligible[i, j] and _reveal(source, revealed, i, j):
                count_update_one(counts[i], sums[i], a, reward[r])


@_kernel
def egreedy_replay(counts, sums, epsilon, X, avail, logged, reward, eligible, source, revealed,
                   index, jitter, scale, u1, u2, out):
    B, n = index.shape
    score = np.empty(counts.shape[1])
    x = np.empty(X.shape[1])
    for i in range(B):
        for j in range(n):
            r = _ctx(X, index, jitter, scale, i, j, x)
            a = egreedy_act_one(counts[i], sums[i], epsilon, x, avail[r], u1[i, j], u2[i, j],
                                score)
            out[i, j] = a
            if a == logged[r] and eligible[i, j] and _reveal(source, revealed, i, j):
                count_update_one(counts[i], sums[i], a, reward[r])


@_kernel
def uniform_replay(avail, logged, eligible, source, revealed, index, u, out):
    B, n = index.shape
    for i in range(B):
        for j in range(n):
            r = index[i, j]
            a = uniform_act_one(avail[r], u[i, j])
            out[i, j] = a
            if a == logged[r] and eligible[i, j]:
                _reveal(source, revealed, i, j)  # nothing to learn; marks the record


@_kernel
def pick_batch(score, avail, u, out):
    for i in range(score.shape[0]):
        out[i] = pick(score[i], avail[i], u[i])


# --------------------------------------------------------------------------------------
# LinUCB across copies ("lanes"): state stored copy-last, Ainv (K, d, d, B), b and theta
# (K, d, B), so the loops over the B copies vectorise (scoring: ``linucb_scores_kernel``
# below). Every copy performs exactly the operations of ``linucb_act_one`` /
# ``linucb_update_one`` in the same order (no reassociation: numba does not enable
# fast-math), hence the same bits.


@_kernel
def linucb_update_lane(Ainv, b, theta, x, c, a, r, y):
    """``linucb_update_one`` for copy c of lane-stored state; x is (d, B)."""
    d = Ainv.shape[1]
    for i in range(d):
        y[i] = 0.0
    for j in range(d):
        xj = x[j, c]
        for i in range(d):
            y[i] += Ainv[a, j, i, c] * xj
    den = 1.0
    for i in range(d):
        den += x[i, c] * y[i]
    rden = 1.0 / den
    for i in range(d):
        for j in range(i, d):
            v = y[i] * y[j] * rden
            Ainv[a, i, j, c] -= v
            if j != i:
                Ainv[a, j, i, c] -= v
    for i in range(d):
        b[a, i, c] += r * x[i, c]
    e = r
    for i in range(d):
        e -= x[i, c] * theta[a, i, c]
    e *= rden
    for i in range(d):
        theta[a, i, c] += y[i] * e


@_kernel
def linucb_update_lanes(Ainv, b, theta, active, X, action, reward):
    B = Ainv.shape[3]
    x = np.ascontiguousarray(X.T)
    y = np.empty(Ainv.shape[1])
    for c in range(B):
        if active[c]:
            linucb_update_lane(Ainv, b, theta, x, c, action[c], reward[c], y)


# Replay runs the copies in groups of ``group`` lanes: a group's state (K*d*d*group
# doubles) stays in cache while the group walks all its records; the copies are
# independent, so grouping changes nothing but speed.
LANE_GROUP = 64  # at most; the copies are split into equal groups


@_kernel
def linucb_replay_lanes(Ainv, b, theta, alpha, X, avail, logged, reward, eligible, source,
                        revealed, index, jitter, scale, u, out, _G, scores, update):
    """Batched LinUCB replay; copy c walks records ``index[c]``; state stored copy-last.

    ``scores`` and ``update`` are the lane kernels for this ``d``
    (:func:`linucb_scores_kernel`, :func:`linucb_update_lanes_kernel`): each step scores the
    group's copies at once, picks per copy, then updates the matching copies in one call.
    ``update`` may leave the lower triangles of ``Ainv`` stale (see
    :func:`linucb_mirror_lanes`)."""
    K, d, _, B = Ainv.shape
    n = index.shape[1]
    A = np.empty((K, d, d, _G))
    bb = np.empty((K, d, _G))
    th = np.empty((K, d, _G))
    x = np.zeros((d, _G))  # contexts copy-last, for the scores
    xr = np.zeros((_G, d))  # and copy-first, for the update
    score_t = np.empty((K, _G))
    sc = np.empty(K)
    active = np.zeros(_G, dtype=np.bool_)
    action = np.zeros(_G, dtype=np.int64)
    rew = np.zeros(_G)
    has_jitter = jitter.shape[0] > 0
    for c0 in range(0, B, _G):
        nc = min(_G, B - c0)
        active[:] = False  # padding lanes (c >= nc) are never updated
        # load the group (padding lanes: identity matrices, zero context)
        for k in range(K):
            for i in range(d):
                for c in range(_G):
                    bb[k, i, c] = b[k, i, c0 + c] if c < nc else 0.0
                    th[k, i, c] = theta[k, i, c0 + c] if c < nc else 0.0
                for j in range(d):
                    for c in range(_G):
                        if c < nc:
                            A[k, i, j, c] = Ainv[k, i, j, c0 + c]
                        else:
                            A[k, i, j, c] = 1.0 if i == j else 0.0
        for j in range(n):
            for c in range(nc):
                r = index[c0 + c, j]
                for q in range(d):
                    if has_jitter:
                        v = X[r, q] + np.float64(jitter[c0 + c, j, q]) * scale[q]
                    else:
                        v = X[r, q]
                    x[q, c] = v
                    xr[c, q] = v
            scores(A, th, alpha, x, score_t)
            for c in range(nc):
                r = index[c0 + c, j]
                for k in range(K):
                    sc[k] = score_t[k, c]
                a = pick(sc, avail[r], u[c0 + c, j])
                out[c0 + c, j] = a
                active[c] = (a == logged[r] and eligible[c0 + c, j]
                             and _reveal(source, revealed, c0 + c, j))
                action[c] = a
                rew[c] = reward[r]
            update(A, bb, th, active, xr, action, rew)
        for k in range(K):
            for i in range(d):
                for c in range(nc):
                    b[k, i, c0 + c] = bb[k, i, c]
                    theta[k, i, c0 + c] = th[k, i, c]
                for j in range(d):
                    for c in range(nc):
                        Ainv[k, i, j, c0 + c] = A[k, i, j, c]


# --------------------------------------------------------------------------------------
# LinUCB lane scoring with the loops over the context dimension unrolled (source generated
# for each d on first use): the per-copy work is then straight-line code inside the loop
# over copies, which LLVM vectorises with the accumulators in registers. Same operations,
# same order as ``linucb_act_one`` (``0.0 + ...`` included: x + 0.0 is not an identity for
# x = -0.0, so the compiler keeps it).

def _scores_source(d):
    L = ["def linucb_scores_unrolled(A, th, alpha, x, score_t):",
         "    K = A.shape[0]",
         "    G = A.shape[3]",
         "    for k in range(K):",
         "        for c in range(G):"]
    L += [f"            x{j} = x[{j}, c]" for j in range(d)]
    for i in range(1, d):
        terms = " + ".join(f"A[k, {j}, {i}, c] * x{j}" for j in range(i))
        L.append(f"            s{i} = 0.0 + {terms}")
    L.append("            w = 0.0 + x0 * (A[k, 0, 0, c] * x0 + 2.0 * 0.0)")
    L += [f"            w = w + x{i} * (A[k, {i}, {i}, c] * x{i} + 2.0 * s{i})"
          for i in range(1, d)]
    L.append("            m = 0.0 + " + " + ".join(f"th[k, {i}, c] * x{i}" for i in range(d)))
    L += ["            if w < 0.0:",
          "                w = 0.0",
          "            score_t[k, c] = m + alpha * math.sqrt(w)"]
    return "\n".join(L) + "\n"


def linucb_scores_kernel(d):
    """Compiled scoring of G copies, ``(A (K,d,d,G), th (K,d,G), alpha, x (d,G), score_t
    (K,G))``, for context dimension ``d`` (generated and compiled on first use)."""
    return linucb_kernels(d).linucb_scores_unrolled


def linucb_act_lanes_kernel(d):
    """Compiled step of B copies for context dimension ``d`` (generated on first use)::

        (Ainv, theta, alpha, X (B, d), avail (B, K), buf (B, n), ptr (B,), out (B,)) -> status

    Copy c uses the uniform ``buf[c, ptr[c]]`` and advances ``ptr[c]``. Nothing is touched
    unless every copy has an available arm (else status 1) and an unused uniform (else status
    2: the caller refills the exhausted buffers and calls again); status 0 is success. The
    scoring kernel is bound at compile time (passing it as an argument costs ~10 us of
    dispatch per call)."""
    return linucb_kernels(d).act_lanes


@_kernel
def linucb_act_lanes(Ainv, theta, alpha, X, avail, buf, ptr, out, scores):
    """The step of :func:`linucb_act_lanes_kernel` with its scoring kernel ``scores``."""
    K, _, _, B = Ainv.shape
    for c in range(B):
        n = 0
        for k in range(K):
            if avail[c, k]:
                n += 1
        if n == 0:
            return 1
    for c in range(B):
        if ptr[c] >= buf.shape[1]:
            return 2
    x = np.ascontiguousarray(X.T)
    score_t = np.empty((K, B))
    sc = np.empty(K)
    scores(Ainv, theta, alpha, x, score_t)
    for c in range(B):
        for k in range(K):
            sc[k] = score_t[k, c]
        p = ptr[c]
        out[c] = pick(sc, avail[c], buf[c, p])
        ptr[c] = p + 1
    return 0


# --------------------------------------------------------------------------------------
# LinUCB lane update with the loops over the context dimension unrolled (source generated
# for each d <= _UNROLL_MAX on first use): each copy's Sherman-Morrison step becomes
# straight-line code with y, x and theta in registers. The operations and their order are
# those of ``linucb_update_one`` (``0.0 + ...`` and ``1.0 + ...`` included), hence the same
# bits. Validation comes first, so a bad call changes nothing.
#
# Only the upper triangle (i <= j) is read and written: Ainv is exactly symmetric, so
# Ainv[a, j, i] can be read as Ainv[a, i, j], and the lower triangle would receive the very
# same subtraction. That halves the memory the step touches (scoring reads the upper
# triangle only too); ``linucb_mirror_lanes`` restores the lower triangle when the full
# matrices are needed.

_UNROLL_MAX = 24  # larger d: the source (O(d^2) lines) would take long to compile


def _update_source(d):
    L = ["def linucb_update_unrolled(Ainv, b, theta, active, X, action, reward):",
         "    K = Ainv.shape[0]",
         "    B = Ainv.shape[3]",
         "    for c in range(B):",
         "        if active[c]:",
         "            if action[c] < 0 or action[c] >= K:",
         "                return 1",
         "            if not math.isfinite(reward[c]):",
         "                return 2",
         "    for c in range(B):",
         "        if not active[c]:",
         "            continue",
         "        a = action[c]",
         "        r = reward[c]"]
    L += [f"        x{j} = X[c, {j}]" for j in range(d)]
    for i in range(d):
        terms = " + ".join(f"Ainv[a, {min(i, j)}, {max(i, j)}, c] * x{j}" for j in range(d))
        L.append(f"        y{i} = 0.0 + {terms}")
    L.append("        den = 1.0 + " + " + ".join(f"x{i} * y{i}" for i in range(d)))
    L.append("        rden = 1.0 / den")
    for i in range(d):
        for j in range(i, d):
            L.append(f"        v = y{i} * y{j} * rden")
            L.append(f"        Ainv[a, {i}, {j}, c] -= v")
    L += [f"        b[a, {i}, c] += r * x{i}" for i in range(d)]
    L.append("        e = r - " + " - ".join(f"x{i} * theta[a, {i}, c]" for i in range(d)))
    L.append("        e = e * rden")
    L += [f"        theta[a, {i}, c] += y{i} * e" for i in range(d)]
    L.append("    return 0")
    return "\n".join(L) + "\n"


@_kernel
def linucb_update_lanes_checked(Ainv, b, theta, active, X, action, reward):
    """Loop version of the generated update (any d): status 1 bad action, 2 bad reward."""
    K = Ainv.shape[0]
    B = Ainv.shape[3]
    for c in range(B):
        if active[c]:
            if action[c] < 0 or action[c] >= K:
                return 1
            if not math.isfinite(reward[c]):
                return 2
    linucb_update_lanes(Ainv, b, theta, active, X, action, reward)
    return 0


@_kernel
def linucb_mirror_lanes(Ainv):
    """Copy the upper triangle of every (K, d, d, B) lane matrix onto its lower triangle."""
    K, d, _, B = Ainv.shape
    for k in range(K):
        for i in range(d):
            for j in range(i + 1, d):
                for c in range(B):
                    Ainv[k, j, i, c] = Ainv[k, i, j, c]


def linucb_update_lanes_kernel(d):
    """Compiled update of B copies, ``(Ainv, b, theta, active (B,), X (B, d), action (B,),
    reward (B,)) -> status`` (0 done; 1 an active copy's action is outside [0, K); 2 an
    active copy's reward is not finite; nothing is changed then), for context dimension
    ``d``. May update the upper triangle of ``Ainv`` only: call
    :func:`linucb_mirror_lanes` before using the lower one."""
    return linucb_kernels(d).linucb_update_unrolled


# --------------------------------------------------------------------------------------
# The generated module of one d: the unrolled kernels and the steps that call them, bound
# at compile time. Numba caches a kernel on disk only when it is written in a file, and a
# kernel that takes another as an argument, or closes over one, is compiled again in each
# process (and its cache grows by an entry each time); so the module is written to a file
# and its steps name the unrolled kernels as globals.

_MODULES = {}


def _module_source(d: int) -> str:
    """The source of the generated module for ``d``. Its steps are the bodies of
    :func:`linucb_act_lanes` and :func:`linucb_replay_lanes` with the kernels they take as
    arguments made globals (a kernel passed as a value is an address numba cannot cache).
    It names the SHA-256 of this module's source and of ``recloop_base.kernels``' as this
    process imported them, so that a change of any kernel its steps call, or of the
    compiler's options, gives another module, never the cached code of the old one."""
    import hashlib

    if _SOURCE is None:
        raise RuntimeError(f"LinUCB's batched kernels are generated from the source of "
                           f"{__file__}, which cannot be read")
    digest = hashlib.sha256(f"{_SOURCE}\0{_JIT_SOURCE}".encode()).hexdigest()
    unrolled = d <= _UNROLL_MAX
    steps = [_bound("linucb_act_lanes", "act_lanes", ("scores",)),
             _bound("linucb_replay_lanes", "replay_lanes", ("scores", "update"))]
    called = sorted({n for kernel in ("linucb_act_lanes", "linucb_replay_lanes")
                     for n in _KERNELS.py[kernel].__code__.co_names if n in _KERNELS.py})
    if not unrolled:
        called = sorted(set(called) | {"linucb_update_lanes_checked"})
    lines = [f"# LinUCB's lane kernels for d = {d}, generated by agents/_kernels.py; the",
             f"# sha256 of its source and recloop_base/kernels.py's: {digest}",
             "import math", "", "import numpy as np", "",
             f"from agents._kernels import {', '.join(called)}",
             "from recloop_base.kernels import jit", "", "",
             "@jit", _scores_source(d)]
    if unrolled:
        lines += ["@jit", _update_source(d)]
    else:
        lines += ["linucb_update_unrolled = linucb_update_lanes_checked", ""]
    lines += ["scores = linucb_scores_unrolled", "update = linucb_update_unrolled", "", ""]
    for step in steps:
        lines += ["@jit", step, "", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def _bound(kernel: str, name: str, bound: tuple) -> str:
    """The source of the kernel ``kernel`` (found by its name in :data:`_SOURCE`) renamed
    ``name``, without its last parameters ``bound`` (globals of the generated module)."""
    import ast

    fn = next(node for node in ast.parse(_SOURCE).body
              if isinstance(node, ast.FunctionDef) and node.name == kernel)
    if [a.arg for a in fn.args.args[-len(bound):]] != list(bound):
        raise RuntimeError(f"{kernel} must end with the parameters {bound}")
    fn.args.args = fn.args.args[:-len(bound)]
    fn.decorator_list = []
    fn.name = name
    return ast.unparse(fn)


def _folders() -> list:
    """Where generated modules are written: beside this file, else the user's cache (as
    numba's own cache falls back to it where the package cannot be written). The code run
    is always the source in memory: a file is only compared with it."""
    import os

    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"),
                                                             ".cache")
    return [os.path.join(os.path.dirname(os.path.abspath(__file__)), "__pycache__",
                         "generated"), os.path.join(cache, "recloop", "generated")]


def _module_file(name: str, source: str):
    """The path of the generated module ``name`` holding exactly ``source``, written in the
    first of :func:`_folders` that can be written (a new file is linked into place, so that
    processes writing at once leave one file, never rewritten, which numba's cache checks);
    None where none can. Writing a module removes the older ones of its ``d`` and their
    cache."""
    import os
    import tempfile

    for folder in _folders():
        path = os.path.join(folder, name + ".py")
        if _source_of(path) == source:
            return path
        try:
            os.makedirs(folder, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".py")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(source)
                os.chmod(tmp, 0o644)  # readable as the package's own files
                try:
                    os.link(tmp, path)  # fails if another process wrote it first
                    _remove_older(folder, name)
                except FileExistsError:
                    if _source_of(path) != source:  # not what it must hold: replaced
                        os.replace(tmp, path)
                        tmp = None
            finally:
                if tmp is not None:
                    os.unlink(tmp)
        except OSError:
            continue
        return path
    return None


def _remove_older(folder: str, name: str) -> None:
    """Remove the generated modules of ``name``'s ``d`` other than ``name`` (made by an
    older ``_kernels.py``) and numba's cache of them; what cannot be removed stays."""
    import glob
    import os

    prefix = name.rsplit("_", 1)[0] + "_"  # linucb_d{d}_
    old = {os.path.basename(p)[:-3] for p in glob.glob(os.path.join(folder, prefix + "*.py"))}
    for other in old - {name}:
        for path in [os.path.join(folder, other + ".py"),
                     *glob.glob(os.path.join(folder, "__pycache__", other + ".*"))]:
            try:
                os.unlink(path)
            except OSError:
                pass


def linucb_kernels(d: int):
    """The generated module of LinUCB's lane kernels for context dimension ``d``:
    ``linucb_scores_unrolled``, ``linucb_update_unrolled`` (:func:`linucb_update_lanes_checked`
    above :data:`_UNROLL_MAX`), ``act_lanes`` and ``replay_lanes`` (:func:`linucb_act_lanes`,
    :func:`linucb_replay_lanes` bound to the first two). Written to a file and cached on
    disk by numba (:func:`_module_file`); where no file can be written, compiled in memory
    in each process. Made once per ``d`` (under ``_LOCK``, after :func:`_compile_all`, so one
    module even when threads ask at once); the hit -- every batched ``act`` and ``update`` --
    is a plain dict lookup."""
    d = int(d)
    module = _MODULES.get(d)
    if module is None:
        _compile_all()
        with _LOCK:
            module = _MODULES.get(d)
            if module is None:
                module = _MODULES[d] = _load_module(d)
    return module


def _load_module(d: int):
    import hashlib
    import sys
    import types

    source = _module_source(d)
    name = f"linucb_d{d}_{hashlib.sha256(source.encode()).hexdigest()[:16]}"
    path = _module_file(name, source)
    module = types.ModuleType(f"agents._generated.{name}")
    module.__file__ = path
    # numba's cache finds a kernel's module by name when it loads the kernel in a new process
    sys.modules[module.__name__] = module
    exec(compile(source, path or f"<{name}>", "exec"), module.__dict__)
    return module


__getattr__ = _KERNELS.install()  # first access compiles them all (see the module doc)
