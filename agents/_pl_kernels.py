"""numba kernels of the Plackett-Luce exponential-race integrals (see ``agents._plackett_luce``).

The recursion over items (a polynomial product, one linear factor per item, at every node
of the quadrature) is a loop that carries state: compiled, it needs a few scalars of
scratch per node instead of (items x nodes x positions) temporary arrays. Each kernel is a
plain Python function (``*_py``, the version the tests run in the interpreter) compiled
with ``numba.njit(nogil=True)`` on first use; importing this module neither imports numba
nor compiles anything. Rows are independent: :func:`marginals` and :func:`expectations`
split them over :func:`recloop_base.threads.n_threads` threads (same numbers whatever the
thread count).
"""

from __future__ import annotations

import math

import numpy as np

from recloop_base.kernels import compiled
from recloop_base.threads import n_threads, thread_map

__all__ = ["marginals_py", "expectations_py", "marginals", "expectations"]

_MIN_ROWS_PER_THREAD = 8


def marginals_py(w, t, dt, k, out):
    """Position marginals of rows of Plackett-Luce weights, integrated over the nodes.

    Parameters
    ----------
    w : (B, m) float64
        Weights (0 for items that cannot be shown).
    t, dt : (B, N) float64
        Nodes and trapezoidal weights (``h t``) of each row.
    k : int
        Positions.
    out : (B, m, k) float64
        Receives ``sum_n dt[n] w_l e^{-w_l t_n} [z^j] prod_{l' != l} (e_l' + a_l' z)`` with
        ``e = e^{-w t}``, ``a = 1 - e``: item ``l`` arrives at ``t`` after exactly ``j``
        others. Prefix and suffix products over the items give the leave-one-out products
        without division (every term is non-negative).
    """
    B, m = w.shape
    N = t.shape[1]
    P = np.empty((m + 1, k))
    S = np.empty((m + 1, k))
    e = np.empty(m)
    a = np.empty(m)
    for b in range(B):
        for i in range(m):
            for j in range(k):
                out[b, i, j] = 0.0
        for n in range(N):
            tt = t[b, n]
            for i in range(m):
                x = w[b, i] * tt
                e[i] = math.exp(-x)
                a[i] = -math.expm1(-x)
            for j in range(k):
                P[0, j] = 0.0
                S[m, j] = 0.0
            P[0, 0] = 1.0
            S[m, 0] = 1.0
            for i in range(m):
                P[i + 1, 0] = P[i, 0] * e[i]
                for j in range(1, k):
                    P[i + 1, j] = P[i, j] * e[i] + P[i, j - 1] * a[i]
            for i in range(m - 1, -1, -1):
                S[i, 0] = S[i + 1, 0] * e[i]
                for j in range(1, k):
                    S[i, j] = S[i + 1, j] * e[i] + S[i + 1, j - 1] * a[i]
            for i in range(m):
                if w[b, i] == 0.0:
                    continue
                c = dt[b, n] * w[b, i] * e[i]
                for j in range(k):
                    g = 0.0
                    for r in range(j + 1):
                        g += P[i, r] * S[i + 1, j - r]
                    out[b, i, j] += c * g


def expectations_py(w, gain, carry, t, dt, k, out):
    """``E[g(s_j) prod_{l<j} d(s_l)]`` of rows of Plackett-Luce weights, over the nodes.

    Parameters
    ----------
    w, gain, carry : (B, m) float64
    t, dt : (B, N) float64
    k : int
    out : (B, k) float64
        Receives ``sum_n dt[n] [y^1 z^j] prod_l (e_l + a_l d_l z + y w_l e_l g_l)``: the
        ``y`` marks the item arriving at ``t``, ``z^j`` the ``j`` items before it.
    """
    B, m = w.shape
    N = t.shape[1]
    Y0 = np.empty(k)
    Y1 = np.empty(k)
    for b in range(B):
        for j in range(k):
            out[b, j] = 0.0
        for n in range(N):
            tt = t[b, n]
            for j in range(k):
                Y0[j] = 0.0
                Y1[j] = 0.0
            Y0[0] = 1.0
            for i in range(m):
                wl = w[b, i]
                if wl == 0.0:
                    continue
                x = wl * tt
                ee = math.exp(-x)
                aa = -math.expm1(-x) * carry[b, i]
                pick = wl * ee * gain[b, i]
                for j in range(k - 1, 0, -1):  # descending: j - 1 still holds old values
                    Y1[j] = Y1[j] * ee + Y1[j - 1] * aa + Y0[j] * pick
                    Y0[j] = Y0[j] * ee + Y0[j - 1] * aa
                Y1[0] = Y1[0] * ee + Y0[0] * pick
                Y0[0] = Y0[0] * ee
            for j in range(k):
                out[b, j] += dt[b, n] * Y1[j]


def _compiled(name: str, py_fn):
    """The compiled ``py_fn`` (``name`` kept for the call sites' readability)."""
    return compiled(py_fn)


def _split(fn, B: int, threads):
    threads = n_threads() if threads is None else threads
    parts = max(1, min(threads, B // _MIN_ROWS_PER_THREAD))
    bounds = np.linspace(0, B, parts + 1).astype(np.int64)
    thread_map(fn, list(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)), parts)


def marginals(w, t, dt, k: int, *, threads=None) -> np.ndarray:
    """:func:`marginals_py` compiled, rows split over threads: (B, m, k)."""
    fn = _compiled("marginals", marginals_py)
    w, t, dt = (np.ascontiguousarray(a, dtype=np.float64) for a in (w, t, dt))
    out = np.empty(w.shape + (k,))
    _split(lambda r: fn(w[r[0]:r[1]], t[r[0]:r[1]], dt[r[0]:r[1]], int(k), out[r[0]:r[1]]),
           w.shape[0], threads)
    return out


def expectations(w, gain, carry, t, dt, k: int, *, threads=None) -> np.ndarray:
    """:func:`expectations_py` compiled, rows split over threads: (B, k)."""
    fn = _compiled("expectations", expectations_py)
    w, g, d, t, dt = (np.ascontiguousarray(a, dtype=np.float64)
                      for a in (w, gain, carry, t, dt))
    out = np.empty((w.shape[0], k))
    _split(lambda r: fn(w[r[0]:r[1]], g[r[0]:r[1]], d[r[0]:r[1]], t[r[0]:r[1]],
                        dt[r[0]:r[1]], int(k), out[r[0]:r[1]]), w.shape[0], threads)
    return out
