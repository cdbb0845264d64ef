"""Input checks shared by the evaluators: one home, so that every estimator says the same
thing about the same mistake (the generic checkers -- ints, floats, levels, generators -- live
in :mod:`recloop_base.validation`)."""

from __future__ import annotations

import numpy as np

from recloop_base.validation import ArgumentTypeError, ArgumentValueError
from simulator.logs import BanditLog

__all__ = ["action_dist_at_position", "as_probability_array", "check_actions", "check_agent",
           "check_log", "check_one_action", "check_positioned", "check_slate_log",
           "check_uniform", "rows_at_position"]

_SUM_TOL = 1e-6  # how far a row of action_dist may sum from 1 (float64)


def _sum_tol(a) -> float:
    """How far a row of ``a`` may sum from 1: the estimators' tolerance, one definition."""
    return _SUM_TOL if a.dtype == np.float64 else max(_SUM_TOL,
                                                      8 * a.shape[1] * np.finfo(a.dtype).eps)


def check_log(log) -> BanditLog:
    """A non-empty :class:`simulator.logs.BanditLog`."""
    if not isinstance(log, BanditLog):
        raise ArgumentTypeError("log", "a simulator.logs.BanditLog", type(log).__name__)
    if log.n_rounds == 0:
        raise ArgumentValueError("log", "a log with at least one record (nothing to "
                                 "evaluate)", "an empty log")
    return log


def as_probability_array(action_dist, name: str = "action_dist") -> np.ndarray:
    """``action_dist`` as a float array: float32 and float64 as they are (no copy), integers
    and float16 as float64; ``ArgumentTypeError`` for anything else. (The same rule as
    ``_ope._check_action_dist``, which can call this when it moves here.)"""
    a = np.asarray(action_dist)
    if a.dtype.kind not in "fiu":
        raise ArgumentTypeError(name, "a float array of action probabilities",
                                f"dtype {a.dtype}")
    if a.dtype.kind != "f" or a.dtype.itemsize < 4:
        a = a.astype(np.float64)
    return a


def action_dist_at_position(log: BanditLog, action_dist, name: str = "action_dist"):
    """The target's probabilities at each record's position: ``(n_rounds, n_actions)``.

    ``action_dist`` is OBP's ``(n_rounds, n_actions, len_list)`` (``len_list`` the log's);
    a one-slot log also takes ``(n_rounds, n_actions)``. Every position's rows must be
    distributions (not only the logged ones: a policy that is not one somewhere is a bug
    worth naming). float32 stays float32; a one-slot array comes back as a view.

    Raises
    ------
    ArgumentTypeError
        A non-numeric array.
    ValueError
        A wrong shape, or a row that is negative, not finite or does not sum to 1 (within
        1e-6 in float64), naming the record and the position.
    """
    a = check_positioned(log, action_dist, name)
    if a.shape[2] == 1:
        return a[:, :, 0]
    return rows_at_position(a, log.positions())


def check_positioned(log: BanditLog, action_dist, name: str = "action_dist") -> np.ndarray:
    """``action_dist`` as a validated ``(n_rounds, n_actions, len_list)`` array (a view; a
    one-slot log's ``(n_rounds, n_actions)`` gets a third axis): the checks of
    :func:`action_dist_at_position` without the gather.

    One pass in cache-sized row blocks: a min and one product with a 0/1 matrix that sums
    each position's column (a reduction over the middle axis reads memory with a stride and
    is 10x slower); an array broadcast over the records (stride 0, e.g. a context-free
    policy as ``np.broadcast_to(dist, (n, K, L))``) is checked on its one row.
    """
    from recloop_base.threads import blas_threads

    a = as_probability_array(action_dist, name)
    n, K, L = log.n_rounds, log.n_actions, log.len_list
    if a.ndim == 2 and L == 1:
        a = a[:, :, None]
    if a.shape != (n, K, L):
        one = f" or ({n}, {K})" if L == 1 else ""
        raise ValueError(f"`{name}` must have shape (n_rounds, n_actions, len_list) = "
                         f"({n}, {K}, {L}){one}; got {np.shape(action_dist)}.")
    tol = _sum_tol(a[:, :, 0])  # a view: the dtype and n_actions decide
    rows = n if (n == 0 or a.strides[0] != 0) else 1  # broadcast over records: one row
    step = max(1, (1 << 18) // max(1, K * L))
    pick = np.zeros((K * L, L), dtype=a.dtype)  # column l sums position l of a flat row
    pick[np.arange(K * L), np.arange(K * L) % L] = 1
    for s in range(0, rows, step):
        c = a[s:min(s + step, rows)]
        # one BLAS thread: several thrash on these small products on a busy machine (18x
        # slower measured on 2 shared cores)
        with blas_threads(1):
            sums = c.reshape(c.shape[0], K * L) @ pick  # (rows, L); nan or inf fail too
        if bool(c.min() >= 0) and bool(np.abs(sums - 1).max() <= tol):
            continue
        # the record is found with the same sums as the verdict: sums computed otherwise
        # (c.sum(axis=1)) differ in their last bits, and a float32 row at the tolerance was
        # then judged bad here and fine there, and no record was found (an IndexError)
        ok = (c.min(axis=1) >= 0) & (np.abs(sums - 1) <= tol)
        j, pos = (int(v) for v in np.argwhere(~ok)[0])
        row = c[j, :, pos]
        why = ("must be finite" if not np.isfinite(row).all() else
               "must be >= 0" if (row < 0).any() else
               f"rows must sum to 1; got {float(sums[j, pos])}")
        raise ValueError(f"`{name}` {why} at every position: record {s + j}, "
                         f"position {pos}.")
    return a


def rows_at_position(a: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """``a[j, :, pos[j]]`` for every record j, ``(n, K)`` of ``a``'s dtype, gathered in
    cache-sized row blocks (numpy's fancy index over the whole array is 10x slower); an
    array broadcast over the records is read from its one row."""
    n, K, L = a.shape
    out = np.empty((n, K), dtype=a.dtype)
    step = max(1, (1 << 16) // max(1, K))
    if n and a.strides[0] == 0:
        table = np.ascontiguousarray(a[0].T)  # (L, K)
        for s in range(0, n, step):
            out[s:s + step] = table[pos[s:s + step]]
        return out
    for s in range(0, n, step):
        c = a[s:s + step]
        out[s:s + step] = c[np.arange(c.shape[0]), :, pos[s:s + step]]
    return out


def check_slate_log(log):
    """A non-empty :class:`simulator.logs.SlateLog`."""
    from simulator.logs import SlateLog

    if not isinstance(log, SlateLog):
        raise ArgumentTypeError("log", "a simulator.logs.SlateLog", type(log).__name__)
    if log.n_rounds < 1:
        raise ArgumentValueError("log", "a log with at least one record", "an empty log")
    return log


def check_uniform(log: BanditLog, fn: str) -> None:
    """Plain replay needs uniform logging: ``pscore == 1 / n_available`` on every record."""
    n_avail = log.available_mask().sum(axis=1)
    bad = np.flatnonzero(np.abs(log.pscore * n_avail - 1.0) > 1e-6)
    if bad.size:
        j = int(bad[0])
        raise ValueError(
            f"`{fn}` requires uniform logging propensities (pscore == 1 / number of available "
            f"actions); got pscore {log.pscore[j]} at index {j} with {n_avail[j]} available "
            f"actions. For known non-uniform propensities use replay(..., method=\"rejection\")."
        )


def check_actions(actions, available, logged_index=None) -> None:
    """Agent's choices must be ints in range and available; name the first bad record."""
    K = available.shape[1]
    rows = np.arange(actions.shape[0]) if logged_index is None else logged_index
    inrange = (actions >= 0) & (actions < K)
    ok = inrange.copy()
    ok[inrange] = available[rows[inrange], actions[inrange]]
    bad = np.flatnonzero(~ok)
    if bad.size:
        j = int(bad[0])
        raise ValueError(f"the agent returned action {actions[j]} at record {j}, which is "
                         f"{'not available' if inrange[j] else f'outside [0, {K})'}.")


def check_one_action(a, j, avail) -> None:
    """One action of the plain replay loop: an int, in range, available."""
    K = avail.shape[0]
    if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
        raise ValueError(f"the agent returned {a!r} at record {j}; an action must be an int.")
    if not 0 <= a < K:
        raise ValueError(f"the agent returned action {a} at record {j}, which is outside "
                         f"[0, {K}).")
    if not avail[a]:
        raise ValueError(f"the agent returned action {a} at record {j}, which is not "
                         f"available.")


def check_agent(agent) -> None:
    """A bandit agent: ``act`` and ``update``."""
    for name in ("act", "update"):
        if not callable(getattr(agent, name, None)):
            raise TypeError(f"`agent` must have `act` and `update` methods (the bandit "
                            f"protocol); {type(agent).__name__} has no `{name}`.")
