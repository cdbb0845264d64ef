"""The local worker processes of a run: units of work (cells, parts of cells, chunks of their
logs) run in them, tell their parent how far they are and which users' code they are in, and
a worker that dies, hangs or stops fails its unit, never the run (issues 25 and 36).

Two kinds of processes, both fresh interpreters (:class:`recloop_base.guard.Guest`: never a
fork of the parent, never a re-run of the caller's script, each its own process group):

* **recloop's workers** run the units that run recloop's code only (whole cells of built-in
  kinds, and recloop's part of a cell that runs users' code, see
  :func:`recloop._cells.split_cell`). They never import users' code (``--path`` is not on
  their import path) and are reused from unit to unit.
* **guests** run the units that run users' code: one process per unit, with ``--path``
  first on its import path, ended with every process it started when the unit ends
  (:meth:`~recloop_base.guard.Guest.kill`), so that a plugin's ``chdir``, environment
  changes, threads and forked children end with its unit.

The parent sends the scenario, then units; a worker answers with messages (read with
:func:`recloop_base.guard.safe_loads`: data, never code):

* ``("start",)`` -- the unit starts (a worker's own start-up is not the unit's time);
* ``("progress", fraction, label)`` -- its loops (:mod:`recloop_base.progress`), at most
  every 0.25 s; also the heartbeat of the time limit;
* ``("enter", what)`` / ``("enter", None)`` -- a call of users' code starts / returns
  (:func:`recloop_base.guard.section`);
* ``("done", *result)`` (:func:`recloop._cells.execute_unit`'s) or ``("failed",
  CellError)``.

**Liveness.** Every unit has a time limit (``limit(unit)`` seconds): a worker that sends no
message for that long -- counted in its own time, :meth:`~recloop_base.guard.Guest.
own_seconds`, so that a loaded machine does not trip it, while a stopped or sleeping worker
does -- is killed and its unit fails with a message naming the unit, the users' code it was
in and whether the process was stopped (``kill -STOP``). The worker is replaced and the
other units go on. The parent waits on every channel and every process's end at once.
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from recloop_base.guard import death_message

__all__ = ["STARTUP_SECONDS", "WorkerPool", "death_message"]

#: Seconds the parent waits for messages before it looks at the clocks again.
POLL_SECONDS = 0.5
#: Seconds of its own time a worker has to start (import recloop, announce its unit) before
#: the unit's own limit applies: the start-up of a fresh interpreter is not the unit's.
STARTUP_SECONDS = 120.0
#: The longest ``what`` of users' code a worker may announce (characters).
_MAX_WHAT = 300


# --- the worker's side --------------------------------------------------------------------------

def _worker_main(conn, args) -> None:
    """The loop of a worker process (started by :class:`recloop_base.guard.Guest`): receive
    the scenario, then units; run each, send its messages."""
    import pickle

    from recloop._cells import CellError, execute_unit
    from recloop_base import guard as _guard
    from recloop_base.progress import reporting_to

    _worker_init(args["parent"])
    lock = threading.Lock()

    def send(*msg) -> None:
        data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
        with lock:
            try:
                conn.send_bytes(data)
            except (OSError, EOFError):  # the parent is gone: nothing left to do
                os._exit(1)

    _guard.set_section_hook(lambda what: send("enter", what))
    _warm_up()
    data = None
    while True:
        try:
            msg = pickle.loads(conn.recv_bytes())  # the parent's: recloop's own objects
        except (EOFError, OSError):
            return
        if msg is None:
            return
        if msg[0] == "data":
            data = msg[1]
            continue
        unit = msg[1]
        send("start")
        with reporting_to(lambda fraction, label: send("progress", fraction, label)):
            try:
                result = execute_unit(data, unit, True)
            except CellError as exc:
                send("failed", CellError(exc.cell_id, exc.message, exc.tb))
                continue
        send("done", *result)


def _warm_up() -> None:
    """Import recloop's packages and build the registry before the first unit: a worker's
    start-up, not its first unit's time (counted against the unit's limit)."""
    import agents  # noqa: F401
    import evaluators  # noqa: F401
    import simulator  # noqa: F401
    from recloop._registry import registry

    registry()


def _worker_init(parent_pid: int) -> None:
    """What a worker does first: Ctrl-C is the parent's business (it stops the workers
    itself), and a worker dies with its parent (:func:`_die_with_parent`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(parent_pid)


#: Seconds between two looks of a worker's watcher thread at its parent (where the kernel
#: cannot signal a parent's death, see :func:`_die_with_parent`).
PARENT_POLL_SECONDS = 1.0
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _die_with_parent(parent_pid: int) -> str:
    """Make this process end when ``parent_pid`` (its parent) does; returns the mechanism.

    On Linux the kernel sends SIGKILL the moment the parent dies
    (``prctl(PR_SET_PDEATHSIG)``): immediate, and it works while the worker is inside a
    compiled kernel that holds the GIL, where a Python thread could not run. Elsewhere a
    daemon thread compares ``os.getppid()`` with the parent's id every
    :data:`PARENT_POLL_SECONDS` and exits the process when it changed. Either way the
    worker writes no file of its own (only the parent writes cell files), so dying
    abruptly loses nothing but the unit in flight.
    """
    if sys.platform.startswith("linux"):
        try:
            import ctypes

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
    proc: Any                                  # recloop_base.guard.Guest
    guest: bool                                # runs users' code: one unit, then killed
    cell: Any = None
    users: list = field(default_factory=list)  # the users' code of the unit in flight
    started: bool = False                      # the worker has begun the unit
    section: str | None = None                 # users' code running now
    last: str = ""                             # users' code called last


class WorkerPool:
    """Runs units of work on at most ``workers`` local processes at once (see the module's
    docstring).

    ``guest(unit)``: whether a unit runs users' code (a guest process of its own);
    ``users_code(unit)`` lists that code for messages; ``limit(unit)`` is its time limit
    in seconds and ``limit_name(unit)`` the option that sets it (``"run.plugin_timeout"``);
    ``on_done(unit, *result)`` and ``on_failed(unit, CellError)`` are called in this
    process as units end; ``on_progress(unit, fraction, label)`` as they report;
    ``note(line)`` receives a one-line remark. ``env``: variables added to the workers'
    environment.
    """

    def __init__(self, data: dict, workers: int, *, paths=(), limit: Callable = lambda u: 600.0,
                 limit_name: Callable = lambda u: "--cell-timeout",
                 guest: Callable = lambda unit: False,
                 users_code: Callable = lambda unit: [], on_progress: Callable | None = None,
                 note: Callable[[str], None] = lambda line: None, env: dict | None = None):
        self.data, self.n, self.paths = data, max(1, workers), [str(p) for p in paths]
        self.limit, self.limit_name, self.guest = limit, limit_name, guest
        self.users_code, self.on_progress, self.note = users_code, on_progress, note
        self.env = {**os.environ, **(env or {})}
        self.idle: list[_Worker] = []
        self.busy: list[_Worker] = []

    def run(self, todo, on_done: Callable, on_failed: Callable,
            skip: Callable = lambda unit: False) -> None:
        """Run the units of ``todo``; those for which ``skip(unit)`` is true when their turn
        comes are dropped (the units of a cell that has already failed)."""
        from multiprocessing.connection import wait

        queue = collections.deque(todo)
        try:
            while queue or self.busy:
                while queue and len(self.busy) < self.n:
                    unit = queue.popleft()
                    if not skip(unit):
                        self._assign(unit)
                if not self.busy:
                    continue
                wait([x for w in self.busy for x in w.proc.waitables], timeout=POLL_SECONDS)
                for w in list(self.busy):
                    self._drain(w, on_done, on_failed)
                for w in list(self.busy):
                    limit = self.limit(w.cell) if w.started else max(self.limit(w.cell),
                                                                     STARTUP_SECONDS)
                    if w.proc.own_seconds() > limit:
                        self._fail(w, on_failed, self._timeout_message(w, limit))
            self.close()
        except BaseException:
            self.stop()
            raise

    # -- one worker ---------------------------------------------------------------------------
    def _start(self, guest: bool) -> _Worker:
        from recloop_base.guard import Guest

        proc = Guest("recloop._workers:_worker_main", args={"parent": os.getpid()},
                     guest=guest, paths=self.paths if guest else (), env=self.env)
        w = _Worker(proc, guest)
        proc.send(("data", self.data))
        return w

    def _assign(self, unit) -> None:
        guest = bool(self.guest(unit))
        while self.idle and not self.idle[-1].proc.alive():  # killed while idle
            self._discard(self.idle.pop())
        if guest:
            w = self._start(True)
        else:
            w = self.idle.pop() if self.idle else self._start(False)
        w.cell, w.users, w.section, w.last, w.started = unit, self.users_code(unit), None, "", False
        try:
            w.proc.send(("unit", unit))
        except (OSError, EOFError):  # it died idle: start another
            self._discard(w)
            w2 = self._start(guest)
            w2.cell, w2.users = unit, w.users
            w2.proc.send(("unit", unit))
            w = w2
        w.proc.mark()
        self.busy.append(w)

    def _drain(self, w: _Worker, on_done, on_failed) -> None:
        """Handle every message the worker has sent; then, if it died, fail its unit."""
        from recloop._cells import CellError
        from recloop_base.guard import UnsafeMessage

        while w.cell is not None:
            try:
                if not w.proc.poll():
                    break
                msg = w.proc.recv()
            except (EOFError, OSError):
                break
            except UnsafeMessage as exc:
                self._fail(w, on_failed, f"its process sent {exc}" + self._where(w))
                return
            problem = _message_problem(msg)
            if problem:
                self._fail(w, on_failed, f"its process sent {problem}" + self._where(w))
                return
            kind = msg[0]
            w.proc.mark()
            if kind == "start":
                w.started = True
            elif kind == "progress":
                if self.on_progress is not None:
                    self.on_progress(w.cell, msg[1], msg[2])
            elif kind == "enter":
                w.section = msg[1][:_MAX_WHAT] if msg[1] else None
                if w.section:
                    w.last = w.section
            elif kind in ("done", "failed"):
                cell, w.cell = w.cell, None
                self.busy.remove(w)
                if w.guest:
                    self._discard(w)  # its process group and descendants end with it
                else:
                    self.idle.append(w)
                if kind == "done":
                    on_done(cell, *msg[1:])
                else:
                    exc = msg[1]
                    on_failed(cell, CellError(str(exc.cell_id), str(exc.message), str(exc.tb)))
                return
        if w.cell is not None and not w.proc.alive():
            self._fail(w, on_failed, f"the worker running it "
                       f"{death_message(w.proc.exitcode, guest=w.guest)}" + self._where(w))

    def _where(self, w: _Worker) -> str:
        if w.section:
            return f", in {w.section}"
        if w.last:
            return f" (the users' code called last: {w.last})"
        if w.users:
            return f" (its users' code: {', '.join(w.users)})"
        return ""

    def _timeout_message(self, w: _Worker, limit: float) -> str:
        stopped = " (its process was stopped: SIGSTOP?)" if w.proc.stopped() else ""
        if not w.started:
            return (f"its worker did not start within {limit:g} s{stopped}; the unit was "
                    "stopped")
        name = self.limit_name(w.cell)
        where = f"{w.section} did not return" if w.section else "no sign of progress came"
        return (f"{where} within {limit:g} s ({name}){stopped}; the cell was stopped"
                + ("" if w.section else self._where(w))
                + f"; raise {name} if it needs longer")

    def _fail(self, w: _Worker, on_failed, message: str) -> None:
        from recloop._cells import CellError

        cell = w.cell
        w.cell = None
        self.busy.remove(w)
        self._discard(w)
        on_failed(cell, CellError(cell.id, message, ""))

    # -- stopping ------------------------------------------------------------------------------
    @staticmethod
    def _discard(w: _Worker) -> None:
        w.proc.kill()

    def close(self) -> None:
        """Ask idle workers to finish, then make sure every one has (with every process they
        started)."""
        for w in self.idle:
            with contextlib.suppress(Exception):
                w.proc.send(None)
        deadline = time.monotonic() + 5
        for w in self.idle:
            with contextlib.suppress(Exception):
                w.proc.process.wait(max(0.0, deadline - time.monotonic()))
            self._discard(w)
        self.idle = []

    def stop(self) -> None:
        """Stop every worker now (a unit in flight is abandoned; only the parent writes
        files, so nothing is left half-written)."""
        for w in self.busy + self.idle:
            with contextlib.suppress(Exception):
                self._discard(w)
        self.busy, self.idle = [], []


def _message_problem(msg) -> str | None:
    """Why a worker's message is not one of the protocol's, or ``None``."""
    import numbers

    if not isinstance(msg, tuple) or not msg or not isinstance(msg[0], str):
        return "a message that is not one of the protocol's"
    kind = msg[0]
    if kind == "start" and len(msg) == 1:
        return None
    if kind == "progress" and len(msg) == 3 and isinstance(msg[2], str) and (
            msg[1] is None or (isinstance(msg[1], numbers.Real)
                               and not isinstance(msg[1], bool))):
        return None
    if kind == "enter" and len(msg) == 2 and (msg[1] is None or isinstance(msg[1], str)):
        return None
    if kind == "done" and len(msg) >= 2:
        return None
    if kind == "failed" and len(msg) == 2 and type(msg[1]).__name__ == "CellError":
        return None
    return f"a message that is not one of the protocol's ({kind[:40]!r})"
