"""Input checks shared by the evaluators: one home, so that every estimator says the same
thing about the same mistake (the generic checkers -- ints, floats, levels, generators -- live
in :mod:`recloop_base.validation`)."""

from __future__ import annotations

import numpy as np

from recloop_base.validation import ArgumentTypeError, ArgumentValueError
from simulator.logs import BanditLog

__all__ = ["check_actions", "check_agent", "check_log", "check_one_action", "check_slate_log",
           "check_uniform"]


def check_log(log) -> BanditLog:
    """A non-empty :class:`simulator.logs.BanditLog`."""
    if not isinstance(log, BanditLog):
        raise ArgumentTypeError("log", "a simulator.logs.BanditLog", type(log).__name__)
    if log.n_rounds == 0:
        raise ArgumentValueError("log", "a log with at least one record (nothing to "
                                 "evaluate)", "an empty log")
    return log


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
