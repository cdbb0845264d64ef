"""Progress of long loops: a tqdm bar for a caller who asked for one, and the harness's
receiver when the loop runs inside one of its cells.

:func:`bar` wraps a loop, :class:`Bar` counts work by hand (``update(n)``, ``close()``;
``run_partitions`` uses it). Outside a cell a bar is a tqdm bar when ``show`` is true, else
nothing. Inside a cell (the harness installs a receiver with :func:`reporting_to` around
each cell, in whatever process runs it) every bar reports to the receiver, whatever ``show``
says, and the bars open at a time form a stack: bred's replicates inside the logs of an
experiment. The fraction of the work done is then ``(i + f) / n`` at each level -- ``i`` of
``n`` steps done, ``f`` the fraction of the step in progress, from the bar below -- and the
receiver gets it with a label such as ``"logs 3/20 > bred 40/100"``, at most every
:data:`MIN_INTERVAL` seconds (the harness shows it; it never changes a number).
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Callable, Iterable

__all__ = ["MIN_INTERVAL", "Bar", "bar", "reporting_to"]

#: Seconds between two reports to the receiver (bars step as often as they like).
MIN_INTERVAL = 0.25

_lock = threading.RLock()
_receiver: Callable[[float | None, str], None] | None = None
_stack: list["Bar"] = []
_last = [0.0]


@contextlib.contextmanager
def reporting_to(receiver: Callable[[float | None, str], None]):
    """Send every bar of this process to ``receiver(fraction, label)`` while the block runs
    (``fraction`` in [0, 1], or ``None`` while the outermost bar's total is unknown)."""
    global _receiver
    with _lock:
        previous, saved = _receiver, list(_stack)
        _receiver = receiver
        _stack.clear()
        _last[0] = -float("inf")
    try:
        yield
    finally:
        with _lock:
            _receiver = previous
            _stack[:] = saved


class Bar:
    """Progress of ``total`` steps counted by hand: ``update(n)`` after each, ``close()`` at
    the end (or use it as a context manager). A tqdm bar outside a cell when ``show``."""

    def __init__(self, total: int | None = None, *, desc: str | None = None, show: bool = False,
                 unit: str = "it"):
        self.total, self.desc, self.n = total, desc or "", 0
        self._tqdm = None
        with _lock:
            self._reporting = _receiver is not None
            if self._reporting:
                _stack.append(self)
                _send(force=True)
        if not self._reporting and show:
            from tqdm.auto import tqdm

            self._tqdm = tqdm(total=total, desc=desc, unit=unit, leave=False)

    def update(self, n: int = 1) -> None:
        with _lock:  # partitions may step from several threads
            self.n += n
            if self._reporting:
                _send()
        if self._tqdm is not None:
            self._tqdm.update(n)

    def close(self) -> None:
        if self._tqdm is not None:
            self._tqdm.close()
            self._tqdm = None
        elif self._reporting:
            with _lock:
                if self in _stack:
                    _stack.remove(self)
            self._reporting = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def bar(iterable: Iterable, *, total: int | None = None, desc: str | None = None,
        show: bool = False, unit: str = "it"):
    """Iterate over ``iterable`` with a :class:`Bar` (``total`` defaults to its length)."""
    if total is None:
        try:
            total = len(iterable)  # type: ignore[arg-type]
        except TypeError:
            total = None
    with Bar(total, desc=desc, show=show, unit=unit) as b:
        for x in iterable:
            yield x
            b.update()


def _fraction() -> float | None:
    done, scale = 0.0, 1.0
    for b in _stack:
        if not b.total:
            return done if b is not _stack[0] else None
        done += scale * min(b.n, b.total) / b.total
        scale /= b.total
    return min(done, 1.0)


def _label() -> str:
    return " > ".join(f"{b.desc or 'step'} {b.n}/{b.total if b.total else '?'}"
                      for b in _stack)


def _send(force: bool = False) -> None:
    """Report the stack to the receiver (the lock held), at most every MIN_INTERVAL s."""
    now = time.monotonic()
    if _receiver is None or (not force and now - _last[0] < MIN_INTERVAL):
        return
    _last[0] = now
    _receiver(_fraction(), _label())
