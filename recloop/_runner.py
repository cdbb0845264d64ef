"""The runner: plan a scenario's cells, execute them on an executor, resume.

The cells themselves -- their identity and seeds (the same results with 1 or N workers,
locally or on Dask), what an evaluation receives for one, running one -- are
:mod:`recloop._cells`'; this module runs them in this process, on local worker processes
(:mod:`recloop._workers`) or on Dask, writes each finished one to the run directory
(:mod:`recloop._rundir`), then the tables and the report (:mod:`recloop._report`).
"""

from __future__ import annotations

import contextlib
import os
import platform
import sys
import tomllib
import traceback
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Callable

from recloop import _rundir
from recloop._cells import (
    Cell,
    CellError,
    Chunk,
    combine_parts,
    execute_cell,
    execute_unit,
    iter_cells,
    merge_chunks,
    plan_cells,
    plan_units,
    split_cell,
    split_cells,
)
from recloop._validate import Scenario

__all__ = ["Damage", "ExecutorError", "ReportError", "Verdict", "VerifyError", "choose_cells",
           "code_version", "out_problem", "run_scenario", "scenario_limits", "verify_run",
           "workers_problem"]


# --- executors --------------------------------------------------------------------------------

class _Assembly:
    """Units of work to finished cells: wraps the run's ``on_done(cell, *result)``,
    ``on_failed(cell, CellError)`` and progress so that the executors run units and the run
    sees cells.

    A unit is a cell, a part of a cell that runs users' code (``cell.role``: recloop's part
    ``"clean"`` and the guests' part ``"guest"``, see :func:`recloop._cells.split_cell`) or
    a chunk of either. A part's chunks are merged in log order
    (:func:`recloop._cells.merge_chunks`, in this process) when the last one is in; a cell's
    parts are combined (:func:`recloop._cells.combine_parts`) when both are in. The first
    unit that fails fails its cell (once; its other units are then skipped). The progress
    of a cell is its units' fractions weighted by their logs, averaged over its parts."""

    def __init__(self, data, units, on_done, on_failed, reporter=None):
        self.data, self.on_done, self.on_failed, self.reporter = (
            data, on_done, on_failed, reporter)
        self.parts: dict[Cell, dict[int, tuple]] = {}
        self.fractions: dict[Cell, dict[int, float]] = {}
        self.roles: dict[Cell, dict[str, tuple]] = {}
        self.role_fraction: dict[Cell, dict[str, float]] = {}
        self.failed: set[Cell] = set()
        self.chunks = {(u.cell, u.index): u for u in units if isinstance(u, Chunk)}
        self.by_id = {(u.cell.id, u.cell.role, u.index) if isinstance(u, Chunk)
                      else (u.id, u.role, None): u for u in units}

    def done(self, unit, *result) -> None:
        if not isinstance(unit, Chunk):
            self._part_done(unit, result)
            return
        cell = unit.cell
        if cell.whole in self.failed:
            return
        parts = self.parts.setdefault(cell, {})
        parts[unit.index] = result
        self.fractions.setdefault(cell, {})[unit.index] = 1.0
        if len(parts) < unit.count:
            self._progress(unit)
            return
        del self.parts[cell]
        self.fractions.pop(cell, None)
        try:
            merged = merge_chunks(self.data, cell, [parts[k] for k in range(unit.count)])
        except CellError as exc:
            self._fail(cell, exc)
            return
        self._part_done(cell, merged)

    def _part_done(self, cell: Cell, result: tuple) -> None:
        whole = cell.whole
        if whole in self.failed:
            return
        if not cell.role:
            self.on_done(cell, *result)
            return
        roles = self.roles.setdefault(whole, {})
        roles[cell.role] = result
        split = split_cell(self.data, whole)
        if len(roles) < (2 if split is not None and split.twin else 1):
            self._role_progress(cell, 1.0)
            return
        del self.roles[whole]
        self.role_fraction.pop(whole, None)
        try:
            combined = combine_parts(self.data, whole, roles.get("clean"), roles["guest"])
        except CellError as exc:
            self._fail(whole, exc)
            return
        self.on_done(whole, *combined)

    def skip(self, unit) -> bool:
        """Whether ``unit`` belongs to a cell that has already failed (not worth running: a
        hanging plugin would otherwise hang every chunk in turn)."""
        cell = unit.cell if isinstance(unit, Chunk) else unit
        return (isinstance(unit, Chunk) or bool(cell.role)) and cell.whole in self.failed

    def _fail(self, cell: Cell, exc: CellError) -> None:
        whole = cell.whole
        if whole in self.failed:
            return
        self.failed.add(whole)
        for table in (self.parts, self.fractions):
            for key in [k for k in table if k.whole == whole]:
                del table[key]
        self.roles.pop(whole, None)
        self.role_fraction.pop(whole, None)
        self.on_failed(whole, exc)

    def failed_unit(self, unit, exc: CellError) -> None:
        if not isinstance(unit, Chunk):
            self._fail(unit, exc)
            return
        if exc.cell_id != unit.cell.id or not exc.tb:  # the pool's words: name the logs
            exc = CellError(unit.cell.id, f"{exc.message} (in logs {unit.start}-"
                            f"{unit.stop - 1}, chunk {unit.index + 1} of {unit.count})",
                            exc.tb)
        self._fail(unit.cell, exc)

    def progress(self, unit, fraction, label) -> None:
        if self.reporter is None:
            return
        if not isinstance(unit, Chunk):
            self._role_progress(unit, fraction or 0.0, label)
            return
        if unit.cell.whole in self.failed:
            return
        self.fractions.setdefault(unit.cell, {})[unit.index] = fraction or 0.0
        self._progress(unit)

    def event(self, cell_id: str, role: str, index: int | None, fraction, label) -> None:
        """:meth:`progress` of the unit a Dask event names: chunk ``index`` (``None``: the
        whole) of the part ``role`` of cell ``cell_id``."""
        unit = self.by_id.get((cell_id, role, index))
        if unit is not None:
            self.progress(unit, fraction, label)

    def _progress(self, unit: Chunk) -> None:
        if self.reporter is None:
            return
        cell = unit.cell
        n = self._logs(cell)
        done = sum(f * self._size(cell, k) for k, f in self.fractions.get(cell, {}).items())
        self._role_progress(cell, done / n if n else 0.0,
                            f"logs {int(done)}/{n} in {unit.count} chunks")

    def _role_progress(self, cell: Cell, fraction: float, label: str | None = None) -> None:
        if self.reporter is None:
            return
        if not cell.role:
            self.reporter.cell_progress(cell.id, fraction, label)
            return
        whole = cell.whole
        split = split_cell(self.data, whole)
        n = 2 if split is not None and split.twin else 1
        mine = self.role_fraction.setdefault(whole, {})
        mine[cell.role] = fraction
        self.reporter.cell_progress(whole.id, sum(mine.values()) / n,
                                    label if n == 1 or label is None else
                                    f"{'recloop' if cell.role == 'clean' else 'plugins'}: "
                                    f"{label}")

    def _size(self, cell, k) -> int:
        u = self.chunks[cell, k]
        return u.stop - u.start

    def _logs(self, cell) -> int:
        return max(u.stop for (c, _), u in self.chunks.items() if c == cell)


def _run_inline(data, todo, on_done, on_failed, reporter=None, paths=()):
    """The cells in this process, one after the other (recloop's own code only: cells that
    run users' code go to worker processes, see :func:`_executes_users_code`)."""
    from recloop_base.progress import reporting_to

    for cell in todo:
        receiver = (None if reporter is None or reporter.quiet else
                    lambda f, label, cell=cell: reporter.cell_progress(cell.id, f, label))
        with reporting_to(receiver) if receiver else contextlib.nullcontext():
            try:
                result = execute_cell(data, cell, receiver is not None, paths)
            except CellError as exc:
                on_failed(cell, exc)
                continue
        on_done(cell, *result)


def _executes_users_code(data, todo) -> bool:
    return any(split_cell(data, c) is not None for c in todo)


def _is_guest(unit) -> bool:
    """Whether a unit runs users' code (the guests' part of a cell, or a chunk of it)."""
    cell = unit.cell if isinstance(unit, Chunk) else unit
    return cell.role == "guest"


def _worker_env(workers: int) -> dict:
    """Environment of worker processes: kernels (recloop's and BLAS's) get ``CPUs //
    workers`` threads each, so that the workers do not oversubscribe the machine. Variables
    the user has set are kept. (Dask's nanny applies ``env`` after the worker has imported
    numpy, so there only ``RECLOOP_THREADS`` takes effect; Dask itself already gives BLAS
    one thread per worker.)"""
    from recloop_base.threads import THREADS_ENV, cpus

    n = str(max(1, cpus() // max(1, workers)))
    names = (THREADS_ENV, "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
    return {k: n for k in names if k not in os.environ}


def _run_pool(data, todo, workers, on_done, on_failed, *, reporter=None, paths=(),
              limits=None, note=lambda line: None, on_progress=None,
              skip=lambda unit: False):
    """The units (cells, their parts, chunks) on local worker processes
    (:class:`recloop._workers.WorkerPool`): recloop's workers for the units that run
    recloop's code only, a guest process each for the units that run users' code;
    ``limits`` the run's :class:`_Limits`; ``on_progress(unit, fraction, label)``; units
    for which ``skip(unit)`` is true when their turn comes are dropped."""
    from recloop._plugins import users_code
    from recloop._workers import WorkerPool

    limits = limits or _Limits()

    def progress(cell, fraction, label):
        if reporter is not None:
            reporter.cell_progress(cell.id, fraction, label)

    def code(unit):
        cell = unit.cell if isinstance(unit, Chunk) else unit
        return users_code(data, cell.evaluation, cell.agent) if _is_guest(unit) else []

    pool = WorkerPool(data, workers, paths=paths, note=note, guest=_is_guest, users_code=code,
                      limit=lambda u: limits.of(_is_guest(u)),
                      limit_name=lambda u: limits.name(_is_guest(u)),
                      on_progress=on_progress or progress, env=_worker_env(workers))
    pool.run(todo, on_done, on_failed, skip)


class _UsageError(Exception):
    """A problem with the command line or the run directory (exit code 2)."""


#: Seconds a cell running users' code may go without a sign of progress (``[run]
#: plugin_timeout``'s default).
DEFAULT_PLUGIN_TIMEOUT = 600.0
#: Seconds any unit of work may go without a sign of progress (``[run] cell_timeout``'s and
#: ``--cell-timeout``'s default): generous, since a built-in cell reports from its loops
#: at least every few seconds, and a step that is silent for an hour is a stopped or a
#: dead-locked worker, not a slow one.
DEFAULT_CELL_TIMEOUT = 3600.0


class _Limits:
    """The liveness limits of a run: ``cell`` seconds for every unit, and at most
    ``plugin`` seconds for the units that run users' code (each counted in the worker's
    own time, see :mod:`recloop._workers`)."""

    def __init__(self, cell: float = DEFAULT_CELL_TIMEOUT,
                 plugin: float = DEFAULT_PLUGIN_TIMEOUT, cell_name: str = "run.cell_timeout"):
        self.cell, self.plugin, self.cell_name = float(cell), float(plugin), cell_name

    def of(self, guest: bool) -> float:
        return min(self.cell, self.plugin) if guest else self.cell

    def name(self, guest: bool) -> str:
        return "run.plugin_timeout" if guest and self.plugin < self.cell else self.cell_name

#: Local workers per CPU above which a run is refused without ``force``: each worker is a
#: process of about 256 MiB running its own kernels, and beyond a few per CPU they only
#: compete for the same cores.
MAX_WORKERS_PER_CPU = 4


def workers_problem(workers: int, executor: str, scheduler: str | None) -> str | None:
    """``None``, or the rule that ``workers`` local processes break (a remote Dask
    scheduler's workers are not this machine's)."""
    if executor == "dask" and scheduler:
        return None
    from recloop_base.threads import cpus

    most = MAX_WORKERS_PER_CPU * cpus()
    if workers > most:
        return (f"at most {MAX_WORKERS_PER_CPU} per CPU ({most} on the {cpus()} CPU(s) "
                f"here), got {workers}")
    return None


def scenario_limits(scenario, workers: int, executor: str = "local",
                    scheduler: str | None = None) -> tuple[list[str], list[str]]:
    """``(lines, problems)``: each evaluation's largest cell against the memory this machine
    has available, and the run's estimated time (:mod:`recloop._limits`) against
    :data:`recloop._limits.MAX_RUN_SECONDS` -- ``lines`` for ``--dry-run``, ``problems``
    for what is refused without ``--force`` (memory is not checked for a remote Dask
    scheduler: its workers run elsewhere)."""
    from recloop._cells import _context
    from recloop._limits import (
        MAX_RUN_SECONDS,
        PROCESS_BYTES,
        available_memory,
        cell_seconds,
        drivers,
        evaluation_bytes,
        format_bytes,
        format_seconds,
    )
    from recloop._registry import registry

    avail = None if (executor == "dask" and scheduler) else available_memory()
    lines, problems = [], []
    cells = plan_cells(scenario.data)
    per_ev: dict[str, int] = {}
    seconds: dict[str, float] = {}
    for c in cells:
        per_ev[c.evaluation] = per_ev.get(c.evaluation, 0) + 1
        kind = registry().evaluations[next(e["kind"] for e in scenario.data["evaluations"]
                                           if e["name"] == c.evaluation)]
        if kind.chunks is not None:
            found = cell_seconds(kind, _context(scenario.data, c, False))
            if found is not None:
                seconds[c.evaluation] = seconds.get(c.evaluation, 0.0) + found
    total = sum(seconds.values())
    wall = total / max(1, min(workers, len(cells)))
    for j, ev in enumerate(scenario.data["evaluations"]):
        kind = registry().evaluations[ev["kind"]]
        found = evaluation_bytes(kind, ev, scenario.data.get("world"))
        n = per_ev.get(ev["name"], 0)
        cells_text = f"{n} cell{'' if n == 1 else 's'}"
        time_text = (f"; about {format_seconds(seconds[ev['name']])} of CPU in all"
                     if ev["name"] in seconds else "")
        if found is None:
            lines.append(f"  evaluation {ev['name']} ({ev['kind']}): {cells_text}, memory not "
                         f"estimated (the kind declares no estimate){time_text}")
            continue
        est, breakdown = found
        why = drivers(breakdown)
        lines.append(f"  evaluation {ev['name']} ({ev['kind']}): {cells_text}, each up to "
                     f"about {format_bytes(est)}" + (f" ({why})" if why else "") + time_text)
        parallel = max(1, min(workers, n))
        # each worker process: its cell's arrays and the process itself
        if avail is not None and (est + PROCESS_BYTES) * parallel > avail:
            times = f" x {parallel} workers at once" if parallel > 1 else ""
            problems.append(
                f"{scenario.path}: evaluations[{j}]: expected cells that fit in the "
                f"{format_bytes(avail)} of memory available, got about {format_bytes(est)} "
                f"per cell{times}" + (f" ({why})" if why else "") + ", plus about "
                f"{format_bytes(PROCESS_BYTES)} per process; lower those keys"
                + (" or --workers" if parallel > 1 else "") + ", or pass --force to run "
                "anyway")
    if seconds:
        lines.append(f"  time: about {format_seconds(total)} of CPU on an idle machine, "
                     f"{format_seconds(wall)} on {max(1, min(workers, len(cells)))} "
                     "worker(s) (the kinds that estimate their cost; within a factor of 2 to 5)")
    if wall > MAX_RUN_SECONDS:
        j, name = max(((j, ev["name"]) for j, ev in enumerate(scenario.data["evaluations"])
                       if ev["name"] in seconds), key=lambda x: seconds[x[1]])
        problems.append(
            f"{scenario.path}: evaluations[{j}]: expected a run of at most "
            f"{format_seconds(MAX_RUN_SECONDS)} (estimated on an idle machine), got about "
            f"{format_seconds(wall)} on {max(1, min(workers, len(cells)))} worker(s) "
            f"({format_seconds(seconds[name])} of CPU in evaluation {name}: its n_logs, "
            "n_rounds, targets and estimators); lower those keys, or pass --force to run "
            "anyway")
    if avail is not None:
        lines.append(f"  memory available: {format_bytes(avail)} (each process also needs "
                     f"about {format_bytes(PROCESS_BYTES)} for Python and the compiled "
                     "kernels)")
    return lines, problems


#: What the run directory adds below ``--out``: NAME-NNN/cells/quarantine/<24 hex>.json and
#: the suffix of a temporary file being written.
_RUN_DIR_TAIL = 64 + 5 + len("/cells/quarantine/") + 24 + len(".json") + 40


def out_problem(out, name: str) -> str | None:
    """``None``, or why the run directory under ``out`` cannot be written: a folder name
    longer than the file system allows (``NAME_MAX`` bytes, 255 on most), or a path longer
    than ``PATH_MAX`` with the run's files inside -- said before anything is created."""
    path = Path(os.path.abspath(os.path.expanduser(str(out))))
    probe = path
    while probe != probe.parent:
        try:
            if probe.exists():
                break
        except OSError:  # a name too long for the file system is not there either
            pass
        probe = probe.parent
    try:
        name_max = os.pathconf(probe, "PC_NAME_MAX")
        path_max = os.pathconf(probe, "PC_PATH_MAX")
    except (OSError, ValueError, AttributeError):
        name_max, path_max = 255, 4096
    for part in [*path.parts[1:], name]:
        size = len(os.fsencode(part))
        if size > name_max:
            shown = part if len(part) <= 40 else part[:37] + "..."
            return (f"--out {_short(path)}: expected folder names of at most {name_max} "
                    f"bytes (the file system's limit), got {shown!r} of {size} bytes")
    total = len(os.fsencode(str(path))) + _RUN_DIR_TAIL
    if total > path_max:
        return (f"--out {_short(path)}: expected a path short enough for the run's files "
                f"below it (at most {path_max} bytes in all, the file system's limit; the "
                f"run directory adds up to {_RUN_DIR_TAIL}), got {total - _RUN_DIR_TAIL} "
                "bytes")
    return None


def _short(path) -> str:
    text = str(path)
    return text if len(text) <= 80 else text[:38] + "..." + text[-38:]


class ExecutorError(Exception):
    """The executor failed under the run (the Dask scheduler went away, a worker process
    died): finished cells are kept, ``--resume`` continues (exit code 1)."""


def _dask_problem(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200] if text else ''}".rstrip(": ")


class _DaskLog:
    """Dask's own log records while recloop's client runs: kept (the last 200) for
    ``errors.log`` instead of printed -- its tracebacks would bury recloop's one line."""

    def __init__(self):
        import logging
        from collections import deque

        self.records: deque = deque(maxlen=200)
        outer = self

        class Keep(logging.Handler):
            def emit(self, record):
                outer.records.append(self.format(record))

        self.handler = Keep()
        self.handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s "
                                                    "%(message)s"))
        # Dask gives several of its loggers their own stream handler (propagate off)
        names = ["distributed"] + [n for n in list(logging.root.manager.loggerDict)
                                   if n.startswith("distributed.")]
        self.saved = {}
        for name in names:
            logger = logging.getLogger(name)
            if name == "distributed" or logger.handlers:
                self.saved[name] = (list(logger.handlers), logger.propagate)
                logger.handlers = [self.handler]
                logger.propagate = False

    def text(self) -> str:
        return "\n".join(self.records)

    def close(self) -> None:
        import logging

        for name, (handlers, propagate) in self.saved.items():
            logger = logging.getLogger(name)
            logger.handlers, logger.propagate = handlers, propagate
        self.saved = {}


def _probe_scheduler(address: str, timeout: float) -> None:
    """Refuse, within ``timeout`` seconds, a TCP address that does not answer like a Dask
    scheduler: one that cannot be reached, or that accepts the connection and stays silent
    (a scheduler sends its handshake as soon as it accepts; dask's own ``Client(timeout=)``
    waits forever for it). Other schemes (tls, ws, ucx) are left to the client."""
    import socket

    scheme, sep, rest = address.partition("://")
    if sep and scheme != "tcp":
        return
    host, _, port = (rest if sep else address).rstrip("/").rpartition(":")
    host = host.strip("[]")
    try:
        sock = socket.create_connection((host, int(port)), timeout=timeout)
    except (OSError, ValueError) as exc:
        raise ExecutorError(f"cannot reach the Dask scheduler at {address}: "
                            f"{_dask_problem(exc)}") from None
    try:
        sock.settimeout(timeout)
        first = sock.recv(1)
    except socket.timeout:
        raise ExecutorError(f"the Dask scheduler at {address} accepted the connection but "
                            f"did not answer within {timeout:g} s (--scheduler-timeout)"
                            ) from None
    except OSError as exc:
        raise ExecutorError(f"the Dask scheduler at {address} dropped the connection: "
                            f"{_dask_problem(exc)}") from None
    finally:
        sock.close()
    if not first:
        raise ExecutorError(f"the Dask scheduler at {address} closed the connection without "
                            "a word (not a Dask scheduler?)")


#: Topic of the Dask events that carry the cells' progress to the client.
_PROGRESS_TOPIC = "recloop-progress"


def _dask_cell(data, cell, progress, paths):
    """A unit (a cell or a chunk) as a Dask task: :func:`execute_unit`, its progress sent
    to the client as events of :data:`_PROGRESS_TOPIC` (when ``progress``)."""
    if not progress:
        return execute_unit(data, cell, False, paths)
    from distributed import get_worker

    from recloop_base.progress import reporting_to

    worker = get_worker()
    whole = cell.cell if isinstance(cell, Chunk) else cell
    chunk = cell.index if isinstance(cell, Chunk) else None

    def send(fraction, label):
        worker.log_event(_PROGRESS_TOPIC, {"cell": whole.id, "role": whole.role,
                                           "chunk": chunk, "fraction": fraction,
                                           "label": label})

    with reporting_to(send):
        return execute_unit(data, cell, True, paths)


class _Dask:
    """A Dask client: on ``scheduler`` when given, else on a LocalCluster of ``workers``.
    Dask's own log records go to :class:`_DaskLog` while it runs."""

    def __init__(self, workers: int, scheduler: str | None, timeout: float = 30.0):
        try:
            from dask.distributed import Client, LocalCluster
        except ImportError:
            raise _UsageError("the dask executor needs the dask extra: pip install "
                              "'recloop[dask]'") from None
        self.cluster = self.client = None
        self.log = _DaskLog()
        try:
            if scheduler:
                self.client = self._connect(Client, scheduler, timeout)
            else:
                import logging

                # the workers' own log records (a task that raised: "Compute Failed" and its
                # traceback) would bury recloop's lines: recloop names each failed cell
                # itself, with its traceback in errors.log
                self.cluster = LocalCluster(n_workers=workers, threads_per_worker=1,
                                            processes=True, dashboard_address=None,
                                            env=_worker_env(workers),
                                            silence_logs=logging.CRITICAL,
                                            # no dashboard; the scheduler's HTTP server
                                            # (/health) on any free port, not 8787 (taken:
                                            # a warning on the user's terminal)
                                            scheduler_kwargs={"dashboard_address": ":0"})
                self.client = Client(self.cluster)
            try:
                n = len(self.client.scheduler_info().get("workers", {}))
            except Exception as exc:
                raise ExecutorError(f"the Dask scheduler {scheduler} does not answer: "
                                    f"{_dask_problem(exc)}") from None
        except BaseException:
            self.close()
            raise
        self.workers = max(workers, n, 1)
        self.window = 2 * self.workers

    @staticmethod
    def _connect(Client, scheduler: str, timeout: float):
        _probe_scheduler(scheduler, timeout)
        try:
            return Client(scheduler, timeout=timeout)
        except (ValueError, TypeError) as exc:
            raise _UsageError(f"--scheduler: expected a Dask scheduler address like "
                              f"tcp://HOST:8786, got {scheduler!r} ({exc})") from None
        except (OSError, TimeoutError) as exc:
            raise ExecutorError(f"cannot reach the Dask scheduler at {scheduler}: "
                                f"{_dask_problem(exc)}") from None
        except Exception as exc:  # e.g. "Unable to allocate 3 EiB": not Dask's protocol
            raise _UsageError(f"--scheduler: expected a Dask scheduler at {scheduler}, got "
                              f"a service that does not answer like one "
                              f"({_dask_problem(exc)})") from None

    def run(self, data, todo, on_done, on_failed, paths=(), reporter=None, assembly=None):
        try:
            if reporter is not None and not reporter.quiet:
                def on_event(event):
                    msg = event[1] if isinstance(event, tuple) else event
                    with contextlib.suppress(Exception):
                        if assembly is not None:
                            assembly.event(msg["cell"], msg.get("role", ""), msg["chunk"],
                                           msg["fraction"], msg["label"])
                        else:
                            reporter.cell_progress(msg["cell"], msg["fraction"], msg["label"])

                self.client.subscribe_topic(_PROGRESS_TOPIC, on_event)
            self._run(data, todo, on_done, on_failed, paths, reporter, assembly)
        except (CellError, KeyboardInterrupt, _rundir.RunDirError, _UsageError):
            raise
        except OSError as exc:
            if isinstance(exc, (ConnectionError, TimeoutError)) or exc.errno is None:
                raise ExecutorError(f"the Dask scheduler or its workers went away: "
                                    f"{_dask_problem(exc)}") from None
            raise  # the run directory's disk (full, read-only): the caller reports it
        except Exception as exc:  # CancelledError, CommClosedError, a lost worker, ...
            raise ExecutorError(f"the Dask scheduler or its workers went away: "
                                f"{_dask_problem(exc)}") from None

    def _run(self, data, todo, on_done, on_failed, paths=(), reporter=None, assembly=None):
        from dask.distributed import as_completed
        from distributed import KilledWorker

        from recloop_base.progress import reporting_to

        progress = reporter is not None and not reporter.quiet
        if len(todo) == 1 and isinstance(todo[0], Cell) and not todo[0].role:
            # the only cell: run it here, its inner work partitioned over the cluster
            # (never tasks inside tasks: no nested deadlock, the same numbers); users' code
            # never runs in this process (an os._exit would end the run)
            cell = todo[0]
            receiver = (lambda f, label: reporter.cell_progress(cell.id, f, label)) \
                if progress else None
            with reporting_to(receiver) if receiver else contextlib.nullcontext():
                try:
                    result = execute_cell(data, cell, progress, paths, self.client)
                except CellError as exc:
                    on_failed(cell, exc)
                    return
            on_done(cell, *result)
            return

        def submit(cell):
            return self.client.submit(_dask_cell, data, cell, progress, paths, pure=False)

        it = iter(todo)
        futures = {}
        for cell in it:  # bounded window: thousands of cells are submitted as others finish
            futures[submit(cell)] = cell
            if len(futures) >= self.window:
                break
        queue = as_completed(list(futures))
        for fut in queue:
            cell = futures.pop(fut)
            try:
                result = fut.result()
            except CellError as exc:
                on_failed(cell, exc)
            except KilledWorker as exc:  # the task's workers died, each time it ran
                on_failed(cell, CellError(cell.id, f"the Dask workers running it died ("
                                          f"{_dask_problem(exc)})", ""))
            else:
                on_done(cell, *result)
            fut.release()
            nxt = next(it, None)
            while nxt is not None and assembly is not None and assembly.skip(nxt):
                nxt = next(it, None)  # a chunk of a cell that has failed: not worth a task
            if nxt is not None:
                f = submit(nxt)
                futures[f] = nxt
                queue.add(f)

    def close(self):
        with contextlib.suppress(Exception):
            if getattr(self, "client", None) is not None:
                self.client.close(timeout=5)
        if self.cluster is not None:
            with contextlib.suppress(Exception):
                self.cluster.close(timeout=10)
        self.log.close()


# --- the run ------------------------------------------------------------------------------------

def _versions() -> dict:
    out = {"python": platform.python_version()}
    for dist in ("recloop", "numpy", "scipy", "gymnasium", "numba", "matplotlib", "tqdm",
                 "dask", "distributed"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


Damage = _rundir.Damage


def _print_damage(damage: Damage) -> None:
    print(f"recloop: {damage}", file=sys.stderr)



def run_scenario(scenario: Scenario, *, out, workers: int = 1, executor: str = "local",
                 scheduler: str | None = None, resume: bool = False, quiet: bool = False,
                 argv: list[str] | None = None, report: bool = True, paths=(),
                 echo: Callable[[str], None] = print,
                 on_damage: Callable[[Damage], None] | None = None,
                 scheduler_timeout: float = 30.0, force: bool = False,
                 cell_timeout: float | None = None) -> Path:
    """Run (or resume) ``scenario`` into a run directory under ``out``; returns its path.

    Parameters
    ----------
    scenario : Scenario
        A validated scenario (:func:`recloop.load_scenario`).
    out : str or Path
        Folder receiving the run directory ``OUT/NAME`` (``NAME-2``, ... if it exists).
    workers : int
        Parallel workers (local processes, or LocalCluster workers for Dask); 1 runs the
        cells in this process.
    executor : {"local", "dask"}
        Local process pool or Dask (``scheduler`` address, or a LocalCluster).
    resume : bool
        Continue the newest run directory of this scenario: every cell file found is
        verified (damaged ones are moved to ``cells/quarantine/``), then only missing cells
        run.
    quiet : bool
        No progress (a bar on a terminal, else a line every 30 s with the fraction done and
        an ETA, see :mod:`recloop._progress`) and no messages.
    argv : list of str, optional
        The command line recorded in ``environment.json`` (default ``sys.argv``).
    report : bool
        Write ``report.md`` and ``figures/`` at the end.
    paths : sequence of str
        Folders put first on the import path of this process and of every worker (users'
        agents and estimators named by import path); a remote Dask worker needs them at the
        same path, or the plugin package installed.
    echo : callable
        Receives the progress messages (default ``print``).
    on_damage : callable, optional
        Receives a :class:`Damage` for each problem found in the run directory and what was
        done about it (default: one line on standard error, even when ``quiet``).
    scheduler_timeout : float
        Seconds the Dask ``scheduler`` has to answer before the run gives up (one that
        accepts the connection and stays silent included).
    force : bool
        Run with more than :data:`MAX_WORKERS_PER_CPU` local workers per CPU, or a scenario
        whose estimated memory or time exceeds the bounds of :mod:`recloop._limits`.
    cell_timeout : float, optional
        Seconds any unit of work may go without a sign of progress before it is stopped and
        its cell recorded as failed (default: ``[run] cell_timeout``, else
        :data:`DEFAULT_CELL_TIMEOUT`); units that run users' code have at most ``[run]
        plugin_timeout``. Counted in the worker's own time (``docs/running.md``). Cells run
        in this process (one worker, recloop's code only) have no such limit.

    Raises
    ------
    ValueError
        Unknown ``executor``, ``workers`` < 1 or above :data:`MAX_WORKERS_PER_CPU` times the
        CPUs (without ``force``), or an environment variable ``RECLOOP_THREADS`` that is not
        an integer in [1, 1024].
    CellError
        A cell failed: it raised, its worker died (the signal is named), it made no
        progress for ``cell_timeout`` seconds (``[run] plugin_timeout`` for users' code),
        or its users' code changed what recloop computes. The other cells run first and
        are kept; every failure and its traceback are in ``errors.log``; ``resume=True``
        retries them.
    ExecutorError
        The Dask scheduler could not be reached or went away during the run (finished
        cells are kept).
    ReportError
        The report could not be written (a full disk): cells and results are kept.

    Notes
    -----
    One process at a time may use a run directory: a second one (e.g. a second
    ``--resume``) gets an error naming the first one's process id; the lock of a process
    that died is taken over.
    """
    if executor not in ("local", "dask"):
        raise ValueError(f"`executor` must be 'local' or 'dask'; got {executor!r}.")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"`workers` must be an integer >= 1; got {workers!r}.")
    problem = None if force else workers_problem(workers, executor, scheduler)
    if problem:
        raise ValueError(f"`workers` must be {problem}.")
    from recloop_base.threads import n_threads

    n_threads()  # a RECLOOP_THREADS out of [1, 1024]: refused before anything
    problem = out_problem(out, scenario.name)
    if problem:
        raise _UsageError(problem)
    if not force:  # memory and time (the command line checked them already)
        problems = scenario_limits(scenario, workers, executor, scheduler)[1]
        if problems:
            raise _UsageError("; ".join(problems))
    from recloop._plugins import path_problems

    shadowing = path_problems(paths)
    if shadowing:
        raise _UsageError("; ".join(shadowing))
    data = scenario.data
    cells = plan_cells(data)
    # a world fitted to a log: fitted here, once, and checked against the scenario's rules
    # before anything is written; the cells then load it from the run directory
    world = _fitted_world(scenario, quiet=quiet, echo=echo)
    # connect before anything is written: an unreachable scheduler leaves no run directory
    dask = _Dask(workers, scheduler, scheduler_timeout) if executor == "dask" else None
    try:
        return _run(scenario, cells, dask, out=out, workers=workers, executor=executor,
                    scheduler=scheduler, resume=resume, quiet=quiet, argv=argv, report=report,
                    paths=[str(Path(p).resolve()) for p in paths], echo=echo,
                    on_damage=on_damage or _print_damage, world=world,
                    cell_timeout=cell_timeout)
    finally:
        if dask is not None:
            dask.close()


def _fitted_world(scenario, *, quiet, echo):
    """The :class:`simulator.CalibratedWorld` of a scenario whose world is fitted to a log
    or loaded from a file (``None`` for a preset); the scenario's rules that need the fitted
    world are checked here (``_UsageError`` listing their problems)."""
    from recloop import _calibrated_world
    from recloop._scenario import ScenarioError, validate

    world = scenario.data.get("world")
    if not _calibrated_world.is_calibrated(world):
        return None
    if "calibrate_from" in world and not quiet:
        echo(f"{scenario.name}: fitting a world to {world['calibrate_from']} ...")
    try:
        cal = _calibrated_world.calibrated_world(world)
        validate(scenario.data, str(scenario.path), fitted=True)
    except ScenarioError as exc:
        raise _UsageError("the fitted world does not suit the scenario:\n"
                          + "\n".join(exc.problems)) from None
    except (ValueError, TypeError, OSError) as exc:
        raise _UsageError(f"world: {type(exc).__name__}: {exc}") from None
    return cal


def _save_world(run_dir: Path, cal, resuming: bool, echo, quiet, seed: int = 0) -> dict:
    """``world.npz`` in the run directory (on resume: the same world, or an error) and its
    fidelity report ``fidelity.md``; returns the world table the cells load."""
    path = run_dir / "world.npz"
    old = None
    if resuming and path.is_file():
        import simulator

        try:
            old = simulator.CalibratedWorld.load(path).sha256
        except Exception:  # damaged: rewritten below
            old = None
        if old is not None and old != cal.sha256:
            raise _UsageError(f"{path} holds another world (sha256 {old[:12]}..., the log "
                              f"now gives {cal.sha256[:12]}...): the log or the calibration "
                              "options changed; run without --resume to start a new run")
    if old is None:
        cal.save(path)  # atomic: a temporary file renamed into place
    fidelity = run_dir / "fidelity.md"
    if not fidelity.is_file():
        from recloop.calibration import fidelity_of_fit

        report = fidelity_of_fit(cal, seed)  # the figures of `recloop calibrate --seed`
        _rundir.atomic_write(fidelity, report.to_markdown())
        if not quiet:
            echo(report.verdict_line)
    return path


def _run(scenario, cells, dask, *, out, workers, executor, scheduler, resume, quiet, argv,
         report, paths, echo, on_damage, world=None, cell_timeout=None) -> Path:
    try:
        run_dir, resuming = _rundir.new_run_dir(Path(out), scenario.name, resume=resume)
        lock = _rundir.RunLock(run_dir).acquire()
    except (_rundir.RunDirError, OSError) as exc:
        raise _UsageError(_os_message(exc)) from None
    try:
        if lock.stale is not None:
            on_damage(Damage(str(lock.path), f"left by process {lock.stale}, which is no "
                             "longer running", "taken over", "note"))
        return _run_locked(scenario, cells, dask, run_dir, resuming, out=out, workers=workers,
                           executor=executor, scheduler=scheduler, quiet=quiet, argv=argv,
                           report=report, paths=paths, echo=echo, on_damage=on_damage,
                           world=world, cell_timeout=cell_timeout)
    finally:
        lock.release()


def _os_message(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        return f"{exc.filename}: {exc.strerror}"
    return str(exc)


def _check_scenario_file(run_dir: Path, text: str, digest: str, on_damage) -> None:
    """On resume: the directory's ``scenario.toml`` must be this scenario. A damaged or
    missing one is rewritten if the cell files (which carry the scenario's hash) agree; a
    different scenario is refused."""
    path = run_dir / "scenario.toml"
    old, problem = _rundir.read_small_text(path)
    if old == text:
        return
    if problem is None:
        try:
            tomllib.loads(old)
        except (tomllib.TOMLDecodeError, ValueError, RecursionError) as exc:
            problem = f"not valid TOML ({str(exc)[:80]})"
    ours, theirs = _cell_hashes(run_dir, digest)
    if problem is None and not ours:
        raise _UsageError(f"{run_dir} holds a different scenario (its scenario.toml differs "
                          "from this one); run without --resume to start a new run")
    if problem is None:
        problem = "differs from the scenario its cell files were computed for"
    elif theirs and not ours:
        raise _UsageError(f"{path}: {problem}, and the cell files of {run_dir} belong to a "
                          "different scenario; run without --resume to start a new run")
    on_damage(Damage(str(path), problem, "rewritten from the scenario given"))


def _cell_hashes(run_dir: Path, digest: str) -> tuple[bool, bool]:
    """Whether some cell file carries the scenario hash ``digest``, and whether some
    carries another (read until both are known)."""
    ours = theirs = False
    for p in sorted((run_dir / "cells").glob("*.json")):
        value, _ = _rundir.check_json_object(p)
        h = (value or {}).get("scenario")
        if isinstance(h, str):
            ours |= h == digest
            theirs |= h != digest
        if ours and theirs:
            break
    return ours, theirs


def _fresh_env(scenario, cells, *, argv, executor, workers, scheduler, paths) -> dict:
    return {"scenario": scenario.name, "scenario_file": str(scenario.path),
            "seeds": scenario.data["run"]["seeds"],
            "command": argv if argv is not None else sys.argv, "cwd": os.getcwd(),
            "executor": executor, "workers": workers, "scheduler": scheduler, "paths": paths,
            "platform": platform.platform(), "versions": _versions(), "code": code_version(),
            "cells": len(cells), "start": _now(), "end": None}


#: The packages whose source is the code version of a run (:func:`code_version`).
CODE_PACKAGES = ("recloop", "recloop_base", "simulator", "agents", "evaluators")


def code_version() -> str:
    """SHA-256 of the source of recloop's packages (every ``.py`` file, by its path within
    its package, and its bytes): what computed a run, recorded in ``environment.json`` as
    ``code`` -- the version number alone does not change with every change of the code.
    ``recloop verify`` recomputes a run's cells only with the same code."""
    import hashlib
    import importlib.util

    h = hashlib.sha256()
    for name in CODE_PACKAGES:
        root = Path(importlib.util.find_spec(name).submodule_search_locations[0])
        for path in sorted(root.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            h.update(f"{name}/{path.relative_to(root).as_posix()}\0".encode())
            h.update(path.read_bytes())
            h.update(b"\0")
    return h.hexdigest()


def _run_locked(scenario, cells, dask, run_dir, resuming, *, out, workers, executor,
                scheduler, quiet, argv, report, paths, echo, on_damage, world=None,
                cell_timeout=None) -> Path:
    data = scenario.data
    wrong = _rundir.layout_problems(run_dir)
    if wrong:
        raise _UsageError(f"{wrong[0]} (move it away; the run directory {run_dir} cannot be "
                          "used as it is)")
    removed = _rundir.remove_temporary(run_dir)
    if removed:
        on_damage(Damage(str(run_dir), f"{len(removed)} temporary file(s) of an interrupted "
                         f"write (e.g. {removed[0].name})", "removed", "note"))
    text = scenario.to_toml()
    digest = _rundir.scenario_hash(text)
    env_path = run_dir / "environment.json"
    fresh = dict(argv=argv, executor=executor, workers=workers, scheduler=scheduler,
                 paths=paths)
    limits = _Limits(cell_timeout if cell_timeout is not None else
                     scenario.options.get("cell_timeout", DEFAULT_CELL_TIMEOUT),
                     scenario.options.get("plugin_timeout", DEFAULT_PLUGIN_TIMEOUT),
                     "--cell-timeout" if cell_timeout is not None else "run.cell_timeout")
    if resuming:
        _check_scenario_file(run_dir, text, digest, on_damage)
        env, problem = _rundir.check_json_object(env_path)
        if problem is not None:
            on_damage(Damage(str(env_path), problem, "rewritten (the first run's start time "
                             "and command are lost)"))
            env = _fresh_env(scenario, cells, **fresh)
            env["repaired"] = _now()
        if (run_dir / "results.jsonl").exists() or (run_dir / "results.jsonl").is_symlink():
            problem = _rundir.check_results(run_dir)  # missing is normal: written at the end
            if problem is not None:
                on_damage(Damage(str(run_dir / "results.jsonl"), problem, "rebuilt from the "
                                 "cell files at the end of the run"))
        if not isinstance(env.get("resumed"), list):
            env["resumed"] = []
        env["resumed"].append({"time": _now(), "command": argv or sys.argv,
                               "code": code_version()})
    else:
        env = _fresh_env(scenario, cells, **fresh)
    if world is not None:  # the cells load the fitted world from the run directory
        npz = _save_world(run_dir, world, resuming, echo, quiet,
                          seed=data["world"].get("seed", 0))
        env["world_sha256"] = world.sha256
        data = {**data, "world": {"file": str(npz),
                                  "campaigns": data["world"].get("campaigns", [])}}
    env["options"] = dict(scenario.options)  # how it executes (not in scenario.toml)
    _rundir.atomic_write(run_dir / "scenario.toml", text)
    _rundir.atomic_write(env_path, _rundir.to_jsonable(env))

    if resuming:
        expected = {c.filename: (c.id, c.seed) for c in cells}
        for path, problem, moved in _rundir.verify_cells(run_dir, expected, digest):
            cell = expected.get(path.name, ("",))[0]
            what = f"cell {cell}: " if cell else ""
            on_damage(Damage(str(path), what + problem, f"moved to {moved.parent.name}/"
                             + ("; recomputed" if cell else ""), "cell"))
    done = _rundir.done_cells(run_dir)
    todo = [c for c in cells if c.filename not in done]
    if not quiet:
        verb = "resuming" if resuming else "running"
        echo(f"{verb} {scenario.name}: {len(cells)} cells ({len(cells) - len(todo)} done) "
             f"-> {run_dir}")
    from recloop._progress import Reporter

    progress = Reporter(len(cells), len(cells) - len(todo), name=scenario.name, quiet=quiet)
    failed: list[CellError] = []

    def on_done(cell: Cell, rows: list[dict], seconds: float, errors: list[str],
                estimates: list[dict]) -> None:
        _rundir.write_cell(run_dir, cell.filename, cell.id, rows, seconds, errors,
                           seed=cell.seed, scenario=digest, estimates=estimates)
        progress.cell_done(cell.id)

    def on_failed(cell: Cell, exc: CellError) -> None:
        # the run goes on with the other cells; this one is missing, --resume retries it
        failed.append(exc)
        progress.cell_gone(cell.id)
        if not quiet:
            echo(f"{scenario.name}: cell {cell.id} failed: {exc.message.splitlines()[0]} "
                 "(the other cells go on)")

    # units of work: a cell that runs users' code is two parts, recloop's and the
    # guests', combined here; with several workers, large cells of kinds that declare
    # chunks are cut into chunks of logs (merged here, in log order, into their cell's file)
    units = plan_units(data, split_cells(data, todo),
                       dask.workers if dask is not None else workers)
    assembly = _Assembly(data, units, on_done, on_failed, progress)
    try:
        if dask is not None:
            dask.run(data, units, assembly.done, assembly.failed_unit, paths, progress,
                     assembly)
        elif (workers <= 1 or len(units) <= 1) and not _executes_users_code(data, todo):
            _run_inline(data, todo, on_done, on_failed, progress, paths)  # no pool start-up
        else:  # users' code never runs in this process (os._exit, a hang, a segfault)
            _run_pool(data, units, workers, assembly.done, assembly.failed_unit,
                      reporter=progress, paths=paths, limits=limits,
                      note=lambda line: echo(f"recloop: {line}"),
                      on_progress=assembly.progress, skip=assembly.skip)
    except ExecutorError as exc:
        log = dask.log.text() if dask is not None else ""
        _rundir.atomic_write(run_dir / "errors.log", "".join(
            f"{e}\n{e.tb}\n" for e in failed) + f"{exc}\n{log}\n")
        raise
    finally:
        progress.close()
    if failed:
        _rundir.atomic_write(run_dir / "errors.log", "".join(f"{e}\n{e.tb}\n" for e in failed))
        first = failed[0]
        more = f" (and {len(failed) - 1} more cell(s))" if len(failed) > 1 else ""
        raise CellError(first.cell_id, first.message + more, first.tb)

    timing: dict[str, float] = {}
    errors: list[str] = []
    tables = _rundir.write_tables(run_dir, iter_cells(run_dir, cells, timing, errors,
                                                      scenario=digest))
    if errors:  # users' code that failed without failing its cell (e.g. one estimator)
        _rundir.atomic_write(run_dir / "errors.log", "\n".join(errors) + "\n")
        if not quiet:
            echo(f"{scenario.name}: {len(errors)} error(s) of your code were recorded as nan "
                 f"(see {run_dir / 'errors.log'}); first: {errors[0].splitlines()[0]}")
    env["end"] = _now()
    env["rows"] = tables.rows
    env["estimates"] = tables.estimates
    env["errors"] = len(errors)
    env["cell_seconds"] = {k: round(v, 3) for k, v in timing.items()}
    _rundir.atomic_write(env_path, _rundir.to_jsonable(env))
    if report:
        _write_report(run_dir)
    return run_dir


class ReportError(Exception):
    """The report or its figures could not be written (a full disk, a read-only folder):
    the cells and results are kept, ``recloop report DIR`` writes it again (exit code 1)."""


def _write_report(run_dir: Path) -> None:
    """``report.md`` and its figures; a failure to write them is a :class:`ReportError`,
    named in ``errors.log`` when that can still be written."""
    from recloop._report import write_report

    try:
        write_report(run_dir)
    except OSError as exc:
        message = (f"the report could not be written: {_os_message(exc)} (the cells and "
                   f"results are kept: `recloop report {run_dir}` writes it again)")
        with contextlib.suppress(OSError):
            old, _ = _rundir.read_small_text(run_dir / "errors.log")
            _rundir.atomic_write(run_dir / "errors.log",
                                 (old or "") + message + "\n" + traceback.format_exc())
        raise ReportError(message) from None


# --- recloop verify ------------------------------------------------------------------------------

class VerifyError(Exception):
    """A run directory ``recloop verify`` cannot use (not a run directory, a damaged or
    invalid ``scenario.toml`` or ``environment.json``, another code version): exit code 2."""


@dataclass(frozen=True)
class Verdict:
    """What :func:`verify_run` found for one cell: ``ok`` when its recomputed rows and
    per-log estimates are the stored ones byte for byte; else ``detail`` says how not."""

    cell: str
    ok: bool
    detail: str = ""


def choose_cells(cells: list[Cell], n: int | None, seed: int = 0) -> list[Cell]:
    """``n`` of ``cells`` (all when ``None``), spread over the evaluations: each
    evaluation's cells in a random order drawn from ``seed``, then taken in turn, one
    evaluation after the other, until ``n`` are chosen; returned in the cells' order."""
    import numpy as np

    if n is None or n >= len(cells):
        return list(cells)
    rng = np.random.default_rng(seed)
    groups: dict[str, list[Cell]] = {}
    for c in cells:
        groups.setdefault(c.evaluation, []).append(c)
    queues = [[g[i] for i in rng.permutation(len(g))] for g in groups.values()]
    chosen: list[Cell] = []
    while len(chosen) < n:
        for q in queues:
            if q and len(chosen) < n:
                chosen.append(q.pop(0))
    order = {c: i for i, c in enumerate(cells)}
    return sorted(chosen, key=order.__getitem__)


def _canonical(value) -> str:
    import json

    return json.dumps(json.loads(json.dumps(value, allow_nan=True)), sort_keys=True,
                      allow_nan=True)


def _difference(stored: dict, rows: list, estimates: list) -> str:
    """How a cell's recomputed rows and per-log estimates differ from the stored ones
    (``""``: they do not)."""
    import json

    for what, mine, theirs in (("rows", rows, stored["rows"]),
                               ("per-log estimates", estimates, stored["estimates"])):
        mine = json.loads(_canonical(mine))
        if _canonical(mine) == _canonical(theirs):
            continue
        if len(mine) != len(theirs):
            return f"{len(theirs)} {what} stored, {len(mine)} recomputed"
        j = next(j for j, (a, b) in enumerate(zip(mine, theirs, strict=True))
                 if _canonical(a) != _canonical(b))
        a, b = mine[j], theirs[j]
        keys = [k for k in sorted(set(a) | set(b)) if _canonical(a.get(k)) != _canonical(b.get(k))]
        n = sum(_canonical(x) != _canonical(y) for x, y in zip(mine, theirs, strict=True))
        where = ", ".join(f"{k} {b.get(k)!r}" for k in ("agent", "variant", "metric", "log")
                          if b.get(k) not in (None, ""))
        first = keys[0] if keys else "?"
        return (f"{n} of {len(theirs)} {what} differ; the first, {what[:-1]} {j} ({where}): "
                f"{first} {b.get(first)!r} stored, {a.get(first)!r} recomputed")
    return ""


def verify_run(run_dir, *, cells: int | None = None, seed: int = 0, workers: int = 1,
               paths=(), any_code: bool = False, echo: Callable[[str], None] = print,
               cell_timeout: float | None = None) -> list[Verdict]:
    """``recloop verify``: recompute ``cells`` chosen cells of a finished run directory
    (all when ``None``; :func:`choose_cells` with ``seed``) from its ``scenario.toml``,
    seeds and code, and compare their rows and per-log estimates byte for byte with the
    stored cell files.

    A cell file's checksum (SHA-256 of its content) shows damage, not forgery: anyone can
    recompute it. A recomputation shows that the stored numbers are those this code gives
    for this scenario and these seeds. It proves nothing when the code differs from the
    one that ran (``environment.json``'s ``code``, :func:`code_version`): refused then
    (:class:`VerifyError`) unless ``any_code``. ``paths``: the ``--path`` folders of the
    plugins the scenario names (run in guest processes, as in a run; a run directory's own
    record of paths is not used). Cells run on ``workers`` processes.

    Returns a :class:`Verdict` per chosen cell (a missing or damaged stored file, or a cell
    that fails to recompute, is not ok); :class:`VerifyError` for unusable input.
    """
    import tomllib

    from recloop import _calibrated_world
    from recloop._scenario import ScenarioError, validate

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise VerifyError(f"{run_dir}: expected a run directory, got "
                          f"{'no such folder' if not run_dir.exists() else 'a file'}")
    text, problem = _rundir.read_small_text(run_dir / "scenario.toml")
    if problem is not None:
        raise VerifyError(f"{run_dir / 'scenario.toml'}: {problem}; nothing can be recomputed "
                          "without the scenario")
    try:
        raw = tomllib.loads(text)
        scenario = validate(raw, str(run_dir / "scenario.toml"))
    except (tomllib.TOMLDecodeError, ValueError, RecursionError) as exc:
        raise VerifyError(f"{run_dir / 'scenario.toml'}: not valid TOML ({str(exc)[:80]})"
                          ) from None
    except ScenarioError as exc:
        raise VerifyError(f"{run_dir / 'scenario.toml'}: not a valid scenario: "
                          f"{exc.problems[0]}" + (f" (and {len(exc.problems) - 1} more)"
                                                  if len(exc.problems) > 1 else "")) from None
    if scenario.to_toml() != text:
        raise VerifyError(f"{run_dir / 'scenario.toml'}: not a resolved scenario as recloop "
                          "writes it (edited?); its cells cannot be matched to it")
    env, problem = _rundir.check_json_object(run_dir / "environment.json")
    if problem is not None:
        raise VerifyError(f"{run_dir / 'environment.json'}: {problem}; the code that computed "
                          "the run is unknown")
    codes = [env.get("code")] + [r.get("code") for r in env.get("resumed") or ()
                                 if isinstance(r, dict)]
    here = code_version()
    if not any_code and any(c != here for c in codes):
        found = sorted({str(c)[:12] if c else "none recorded" for c in codes})
        raise VerifyError(f"{run_dir} was computed by other code ({', '.join(found)}; this is "
                          f"{here[:12]}): a recomputation would compare two codes, not check "
                          "the run; run verify with the code that computed it, or pass "
                          "--any-code to compare anyway")
    data = scenario.data
    if _calibrated_world.is_calibrated(data.get("world")):
        npz = run_dir / "world.npz"
        if not npz.is_file():
            raise VerifyError(f"{npz}: missing; the run's fitted world is needed")
        data = {**data, "world": {"file": str(npz),
                                  "campaigns": data["world"].get("campaigns", [])}}
    digest = _rundir.scenario_hash(text)
    plan = plan_cells(data)
    chosen = choose_cells(plan, cells, seed)
    echo(f"verify {run_dir}: {len(chosen)} of {len(plan)} cells"
         + (f" (spread over the evaluations, seed {seed})" if len(chosen) < len(plan) else ""))
    stored, verdicts = {}, {}
    for c in chosen:
        payload, problem = _rundir.check_cell(_rundir.cell_path(run_dir, c.filename),
                                              cell_id=c.id, seed=c.seed, scenario=digest)
        if problem is None:
            stored[c] = payload
        else:
            verdicts[c] = Verdict(c.id, False, f"its file is {problem}"
                                  if problem in ("missing", "empty") else f"its file: {problem}")
    todo = [c for c in chosen if c in stored]

    def on_done(cell, rows, seconds, errors, estimates):
        detail = _difference(stored[cell], rows, estimates)
        verdicts[cell] = Verdict(cell.id, not detail, detail)

    def on_failed(cell, exc):
        verdicts[cell] = Verdict(cell.id, False, f"could not be recomputed: "
                                 f"{exc.message.splitlines()[0]}")

    limits = _Limits(cell_timeout if cell_timeout is not None else
                     scenario.options.get("cell_timeout", DEFAULT_CELL_TIMEOUT),
                     scenario.options.get("plugin_timeout", DEFAULT_PLUGIN_TIMEOUT),
                     "--cell-timeout" if cell_timeout is not None else "run.cell_timeout")
    lock = _rundir.RunLock(run_dir)
    try:
        lock.acquire()  # a run that writes its cells meanwhile: refused
    except _rundir.RunDirError as exc:
        if "is in use by" in str(exc):
            raise VerifyError(str(exc)) from None
        lock = None  # a directory we may not write (received read-only): read it as it is
    try:
        units = plan_units(data, split_cells(data, todo), workers)
        assembly = _Assembly(data, units, on_done, on_failed)
        if (workers <= 1 or len(units) <= 1) and not _executes_users_code(data, todo):
            _run_inline(data, todo, on_done, on_failed)
        elif todo:
            _run_pool(data, units, workers, assembly.done, assembly.failed_unit,
                      paths=[str(Path(p).resolve()) for p in paths], limits=limits,
                      skip=assembly.skip)
    finally:
        if lock is not None:
            lock.release()
    out = [verdicts[c] for c in chosen]
    for v in out:
        echo(f"  {'ok' if v.ok else 'DIFFERS'} {v.cell}" + (f": {v.detail}" if v.detail else ""))
    return out
