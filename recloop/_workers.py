"""The local worker processes of a run: cells run in them, tell their parent how far they are
and which users' code they are in, and a worker that dies or hangs fails its cell, never the
run (issue 25, sections 1 and 3).

Each worker is a ``spawn`` process with its own pipe to the parent (no lock shared between
workers: one killed mid-message harms no other) and the scenario sent once. The parent sends
a cell, the worker answers with messages:

* ``("start",)`` -- the cell starts (a worker's own start-up, spawning and importing,
  is not the cell's time);
* ``("progress", fraction, label)`` -- its loops (:mod:`recloop_base.progress`), at most
  every 0.25 s; also the heartbeat of the time limit;
* ``("enter", what)`` / ``("enter", None)`` -- a call of users' code starts / returns
  (:func:`recloop_base.guard.section`);
* ``("done", *result)`` (:func:`recloop._cells.execute_unit`'s) or ``("failed",
  CellError)``.

A unit is a cell or a chunk of a cell's logs (:class:`recloop._cells.Chunk`): the pool runs
both alike -- the time limit, the users' code named on a death -- and the runner merges a
cell's chunks.

The parent waits on every pipe and every process sentinel at once. A worker that exits in the
middle of a cell (``os._exit`` in users' code, a segfault, the OOM killer's SIGKILL) fails
that cell with the signal's name, the cell and the users' code it was in; a cell that runs
users' code and shows no sign of progress for ``plugin_timeout`` seconds is stopped the same
way. The worker is replaced and the other cells go on. A worker dies with its parent
(:func:`_die_with_parent`) and ignores Ctrl-C (the parent stops it).
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["WorkerPool", "death_message"]

#: Seconds the parent waits for messages before it looks at the clocks again.
POLL_SECONDS = 0.5


def death_message(exitcode: int | None) -> str:
    """How a worker process ended: ``"was killed by SIGSEGV (signal 11: a crash in compiled
    code)"``, ``"exited with code 0"``."""
    if exitcode is None:
        return "stopped answering"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        why = {"SIGKILL": ": out of memory? the kernel's OOM killer sends it",
               "SIGSEGV": ": a crash in compiled code", "SIGBUS": ": a crash in compiled code",
               "SIGABRT": ": an abort, e.g. a failed assertion in compiled code"}.get(name, "")
        return f"was killed by {name} (signal {-exitcode}{why})"
    return f"exited with code {exitcode} in the middle of the cell (os._exit in users' code?)"


# --- the worker's side --------------------------------------------------------------------------

def _worker_main(conn, data: dict, paths, parent_pid: int) -> None:
    """The loop of a worker process: receive a cell, run it, send its messages."""
    import threading

    from recloop._cells import CellError, execute_unit
    from recloop_base import guard as _guard
    from recloop_base.progress import reporting_to

    _worker_init(parent_pid)
    lock = threading.Lock()

    def send(*msg) -> None:
        with lock:
            try:
                conn.send(msg)
            except (OSError, EOFError):  # the parent is gone: nothing left to do
                os._exit(1)

    _guard.set_section_hook(lambda what: send("enter", what))
    while True:
        try:
            cell = conn.recv()
        except (EOFError, OSError):
            return
        if cell is None:
            return
        send("start")
        with reporting_to(lambda fraction, label: send("progress", fraction, label)):
            try:
                result = execute_unit(data, cell, True, paths)
            except CellError as exc:
                send("failed", exc)
                continue
        send("done", *result)


#: Seconds between two looks of a worker's watcher thread at its parent (where the kernel
#: cannot signal a parent's death, see :func:`_die_with_parent`).
PARENT_POLL_SECONDS = 1.0
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _worker_init(parent_pid: int) -> None:
    """Initializer of the local pool's workers: Ctrl-C is the parent's business (it stops
    the workers itself), and a worker dies with its parent (:func:`_die_with_parent`)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(parent_pid)


def _die_with_parent(parent_pid: int) -> str:
    """Make this process end when ``parent_pid`` (its parent) does; returns the mechanism.

    On Linux the kernel sends SIGKILL the moment the parent dies
    (``prctl(PR_SET_PDEATHSIG)``): immediate, and it works while the worker is inside a
    compiled kernel that holds the GIL, where a Python thread could not run. Elsewhere a
    daemon thread compares ``os.getppid()`` with the parent's id every
    :data:`PARENT_POLL_SECONDS` and exits the process when it changed. Either way the
    worker writes no file of its own (only the parent writes cell files), so dying
    abruptly loses nothing but the cell in flight.
    """
    import threading

    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0:
                if os.getppid() != parent_pid:  # the parent died before the prctl
                    os._exit(1)
                return "pdeathsig"
        except (OSError, AttributeError):
            pass

    def watch():
        while True:
            time.sleep(PARENT_POLL_SECONDS)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watch, name="recloop-parent-watch", daemon=True).start()
    return "poll"


# --- the parent's side ----------------------------------------------------------------------------

@dataclass
class _Worker:
    process: Any
    conn: Any
    cell: Any = None
    users: list = field(default_factory=list)  # the users' code of the cell in flight
    beat: float = 0.0                          # the last sign of progress
    started: bool = False                      # the worker has begun the cell
    section: str | None = None                 # users' code running now
    last: str = ""                             # users' code called last


class WorkerPool:
    """Runs cells on ``workers`` local processes (see the module's docstring).

    ``users_code(cell)`` lists the users' code a cell runs (its time limit applies only to
    those); ``on_done(cell, rows, seconds, errors, estimates)`` and ``on_failed(cell,
    CellError)`` are called in this process as cells end; ``on_progress(cell, fraction,
    label)`` as they report; ``note(line)`` receives a one-line remark (a resource tracker
    that had died).
    """

    def __init__(self, data: dict, workers: int, *, paths=(), timeout: float = 600.0,
                 users_code: Callable = lambda cell: [], on_progress: Callable | None = None,
                 note: Callable[[str], None] = lambda line: None, clock=time.monotonic):
        import multiprocessing

        self.data, self.n, self.paths, self.timeout = data, max(1, workers), list(paths), timeout
        self.users_code, self.on_progress, self.note, self.clock = (
            users_code, on_progress, note, clock)
        self.ctx = multiprocessing.get_context("spawn")
        self.idle: list[_Worker] = []
        self.busy: list[_Worker] = []

    def run(self, todo, on_done: Callable, on_failed: Callable,
            skip: Callable = lambda unit: False) -> None:
        """Run the units of ``todo``; those for which ``skip(unit)`` is true when their turn
        comes are dropped (the chunks of a cell that has already failed)."""
        from multiprocessing.connection import wait

        queue = collections.deque(todo)
        try:
            while queue or self.busy:
                while queue and len(self.busy) < self.n:
                    unit = queue.popleft()
                    if not skip(unit):
                        self._assign(unit)
                waits = [w.conn for w in self.busy] + [w.process.sentinel for w in self.busy]
                wait(waits, timeout=POLL_SECONDS)
                for w in list(self.busy):
                    self._drain(w, on_done, on_failed)
                now = self.clock()
                for w in list(self.busy):
                    if w.users and w.started and now - w.beat > self.timeout:
                        self._fail(w, on_failed, self._timeout_message(w), stop=True)
            self.close()
        except BaseException:
            self.stop()
            raise

    # -- one worker ---------------------------------------------------------------------------
    def _start(self) -> _Worker:
        parent, child = self.ctx.Pipe(duplex=True)
        process = self.ctx.Process(target=_worker_main, name="recloop-worker", daemon=True,
                                   args=(child, self.data, self.paths, os.getpid()))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            process.start()
        child.close()
        if any("resource_tracker" in str(w.message) for w in caught):
            self.note("multiprocessing's resource tracker had died (killed?); a new one was "
                      "started and the run goes on")
        return _Worker(process, parent)

    def _assign(self, cell) -> None:
        while self.idle and not self.idle[-1].process.is_alive():  # killed while idle
            self._discard(self.idle.pop())
        w = self.idle.pop() if self.idle else self._start()
        w.cell, w.users, w.section, w.last = cell, self.users_code(cell), None, ""
        w.beat, w.started = self.clock(), False
        try:
            w.conn.send(cell)
        except (OSError, EOFError):  # it died idle: start another
            self._discard(w)
            w2 = self._start()
            w2.cell, w2.users, w2.beat, w2.started = cell, w.users, self.clock(), False
            w2.conn.send(cell)
            w = w2
        self.busy.append(w)

    def _drain(self, w: _Worker, on_done, on_failed) -> None:
        """Handle every message the worker has sent; then, if it died, fail its cell."""
        while w.cell is not None:
            try:
                if not w.conn.poll():
                    break
                msg = w.conn.recv()
            except (EOFError, OSError):
                break
            kind = msg[0]
            w.beat = self.clock()
            if kind == "start":
                w.started = True
            elif kind == "progress":
                if self.on_progress is not None:
                    self.on_progress(w.cell, msg[1], msg[2])
            elif kind == "enter":
                w.section = msg[1]
                if msg[1]:
                    w.last = msg[1]
            elif kind in ("done", "failed"):
                cell, w.cell = w.cell, None
                self.busy.remove(w)
                self.idle.append(w)
                if kind == "done":
                    on_done(cell, *msg[1:])
                else:
                    on_failed(cell, msg[1])
                return
        if w.cell is not None and not w.process.is_alive():
            w.process.join(1)
            if not w.started and w.process.exitcode == 1:  # it died importing, not running
                self._fail(w, on_failed, "the worker running it exited with code 1 while "
                           "starting, before the cell began: a script that calls recloop.run "
                           "must do so under `if __name__ == \"__main__\":` (each worker "
                           "imports the script); otherwise an import of the worker failed")
                return
            self._fail(w, on_failed, f"the worker running it {death_message(w.process.exitcode)}"
                       + self._where(w))

    def _where(self, w: _Worker) -> str:
        if w.section:
            return f", in {w.section}"
        if w.last:
            return f" (the users' code called last: {w.last})"
        if w.users:
            return f" (its users' code: {', '.join(w.users)})"
        return ""

    def _timeout_message(self, w: _Worker) -> str:
        where = f"{w.section} did not return" if w.section else "no sign of progress came"
        return (f"{where} within {self.timeout:g} s (run.plugin_timeout); the cell was stopped"
                + ("" if w.section else self._where(w))
                + "; raise run.plugin_timeout if it needs longer")

    def _fail(self, w: _Worker, on_failed, message: str, stop: bool = False) -> None:
        from recloop._cells import CellError

        cell = w.cell
        self.busy.remove(w)
        if stop:
            self._kill(w)
        self._discard(w)
        on_failed(cell, CellError(cell.id, message, ""))

    # -- stopping ------------------------------------------------------------------------------
    @staticmethod
    def _kill(w: _Worker) -> None:
        with contextlib.suppress(Exception):
            w.process.kill()
            w.process.join(5)

    @staticmethod
    def _discard(w: _Worker) -> None:
        with contextlib.suppress(Exception):
            w.conn.close()
        with contextlib.suppress(Exception):
            if w.process.is_alive():
                w.process.terminate()
            w.process.join(5)

    def close(self) -> None:
        """Ask idle workers to finish, then make sure every one has."""
        for w in self.idle:
            with contextlib.suppress(Exception):
                w.conn.send(None)
        for w in self.idle:
            with contextlib.suppress(Exception):
                w.process.join(5)
            self._discard(w)
        self.idle = []

    def stop(self) -> None:
        """Stop every worker now (a cell in flight is abandoned; only the parent writes
        files, so nothing is left half-written)."""
        for w in self.busy + self.idle:
            with contextlib.suppress(Exception):
                w.process.terminate()
        for w in self.busy + self.idle:
            with contextlib.suppress(Exception):
                w.process.join(5)
                if w.process.is_alive():
                    w.process.kill()
                    w.process.join(1)
            with contextlib.suppress(Exception):
                w.conn.close()
        self.busy, self.idle = [], []
