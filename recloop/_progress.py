"""What a person watching a run sees: the cells done and, inside the cells running, how far
their long loops are (issue 22, section 5).

The cells report their loops through :mod:`recloop_base.progress` (in this process, or in a
worker that passes the reports on, see :mod:`recloop._workers`); :class:`Reporter` puts them
together: the fraction of the run done is ``(cells done + the running cells' fractions) /
cells``, and the ETA extrapolates the rate since the start. On a terminal it is one tqdm bar
(the plain line, then the bar); elsewhere -- a log file, a pipe,
CI -- one plain line every :attr:`Reporter.every` seconds (30) and a last one at the end,
without escape codes. ``quiet`` shows nothing.
"""

from __future__ import annotations

import math
import sys
import threading
import time

__all__ = ["Reporter", "format_seconds"]


def format_seconds(s: float) -> str:
    """``75`` -> ``"1m15s"``, ``4000`` -> ``"1h06m"``."""
    if not math.isfinite(s):
        return "?"
    s = max(0, int(round(s)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


class Reporter:
    """Progress of a run: ``cell_done()`` as cells finish, ``cell_progress(cell, fraction,
    label)`` from inside running cells (any thread). ``clock`` and ``stream`` may be given
    (tests: a fake clock)."""

    #: Seconds between two plain lines (no terminal).
    every = 30.0

    def __init__(self, total: int, initial: int, *, name: str, quiet: bool, stream=None,
                 clock=time.monotonic, tty: bool | None = None):
        self.stream = stream if stream is not None else sys.stderr
        self.total, self.done, self.name, self.quiet = total, initial, name, quiet
        self.clock = clock
        self.tty = _isatty(self.stream) if tty is None else tty
        self.running: dict[str, tuple[float, str]] = {}  # cell id -> (fraction, label)
        self.ended: set[str] = set()  # late reports of these (Dask's events) are ignored
        self.start = clock()
        self.start_fraction = initial / total if total else 1.0
        self.last_line = self.start
        self.lock = threading.Lock()
        self.bar = None
        if not quiet and self.tty:
            from tqdm.auto import tqdm

            # the plain line, then the bar (tqdm fits the bar to the terminal's width)
            self.bar = tqdm(total=total, initial=initial, file=self.stream, desc=self.line(),
                            bar_format="{desc} |{bar}|")

    # -- what the cells say --------------------------------------------------------------------
    def cell_progress(self, cell: str, fraction: float | None, label: str) -> None:
        with self.lock:
            if cell in self.ended:
                return
            old = self.running.get(cell, (0.0, ""))[0]
            # a cell's later loop (the truth after the logs) never moves the run backwards
            self.running[cell] = (max(old, fraction or 0.0), label)
            self._show()

    def cell_done(self, cell: str | None = None) -> None:
        with self.lock:
            self.done += 1
            self.running.pop(cell, None)
            self.ended.add(cell)
            self._show(final=self.done >= self.total)

    def cell_gone(self, cell: str) -> None:
        """A cell that ended without finishing (failed): its fraction no longer counts."""
        with self.lock:
            self.running.pop(cell, None)
            self.ended.add(cell)

    def tick(self) -> None:
        """Let a plain line out when it is due (called by executors that wait)."""
        with self.lock:
            self._show()

    def close(self) -> None:
        with self.lock:
            if self.bar is not None:
                self.bar.close()
                self.bar = None

    # -- figures ---------------------------------------------------------------------------
    def fraction(self) -> float:
        """The run's fraction done: cells done plus the running cells' fractions."""
        if not self.total:
            return 1.0
        partial = sum(f for f, _ in self.running.values())
        return min(1.0, (self.done + partial) / self.total)

    def eta(self) -> float:
        """Seconds left at the rate since the start (nan before any progress)."""
        f = self.fraction()
        gained = f - self.start_fraction
        elapsed = self.clock() - self.start
        if f >= 1.0:
            return 0.0
        if gained <= 0 or elapsed <= 0:
            return math.nan
        return elapsed * (1.0 - f) / gained

    def _slowest(self) -> str:
        if not self.running:
            return ""
        cell, (_, label) = min(self.running.items(), key=lambda kv: kv[1][0])
        return f"{cell}: {label}" if label else cell

    def _postfix(self) -> str:
        parts = [f"{self.done}/{self.total} cells"]
        slowest = self._slowest()
        if slowest:
            parts.append(slowest)
        eta = self.eta()
        parts.append(f"ETA {format_seconds(eta)}" if math.isfinite(eta) else "ETA ?")
        return "; ".join(parts)

    def line(self) -> str:
        """The plain line: ``NAME: 42% (3/10 cells; CELL: logs 4/20), ETA 1m20s``; at the
        end ``NAME: 10/10 cells in 4m05s``."""
        if self.done >= self.total:
            return (f"{self.name}: {self.done}/{self.total} cells in "
                    f"{format_seconds(self.clock() - self.start)}")
        eta = self.eta()
        head, _, _ = self._postfix().rpartition("; ETA")
        return (f"{self.name}: {100 * self.fraction():.0f}% ({head}), ETA "
                f"{format_seconds(eta) if math.isfinite(eta) else 'not known yet'}")

    def _show(self, final: bool = False) -> None:
        if self.quiet:
            return
        if self.bar is not None:
            self.bar.n = round(self.done + sum(f for f, _ in self.running.values()), 3)
            self.bar.set_description_str(self.line(), refresh=True)
            return
        now = self.clock()
        if final or now - self.last_line >= self.every:
            self.last_line = now
            print(self.line(), file=self.stream, flush=True)
