"""Run directories: atomic writes, one file per finished cell, and the results tables.

Layout of a run directory::

    scenario.toml      the resolved scenario (every default filled in)
    environment.json   versions, seed, command line, start and end times
    cells/             one JSON file per finished cell (written atomically; resume skips them)
    cells/quarantine/  cell files found damaged by a resume (moved aside, then recomputed)
    results.csv        long format, one row per measurement, in cell order
    results.jsonl      the same rows as JSON objects
    estimates.csv.gz   the per-log estimates (one row per estimator and log: estimate,
                       interval, truth), from which every summary is computed
    figures/*.png      figures of the report
    report.md          the report, and report.html (the same, self-contained, sortable)
    errors.log         tracebacks: a failed cell, errors of users' code a cell survived
    .lock              the process id of the run using the directory (while it runs)

Every file is written to a temporary name in the same folder and renamed into place
(``os.replace`` is atomic on POSIX and Windows), so a killed run leaves either the old file or
the new one, never half of one. ``results.*`` and ``estimates.csv.gz`` are assembled from the
cell files at the end of a run, streaming one cell at a time, in the order of the cells' keys
-- never in completion order -- so the tables do not depend on the executor or the number of
workers. They are derived files: ``recloop report`` rewrites them from the verified cell files
every time and names any that differed (:func:`write_tables`).

``estimates.csv.gz`` is gzip-compressed CSV, whatever is installed: the standard library
writes and reads it, pandas reads it with ``pandas.read_csv``, and its bytes are the same on
every machine (no time stamp in the gzip header). Parquet would need pyarrow, which recloop
does not require, and a second format would give two run directories for one run.

A directory checks itself: each cell file carries its cell id, its seed, the hash of the
scenario and a SHA-256 checksum of its content (:func:`write_cell`), and a resume verifies
every one (:func:`verify_cells`): a truncated, empty, foreign or altered file is named, moved
to ``cells/quarantine/`` and recomputed. One process at a time uses a directory
(:class:`RunLock`); temporary files a crash left behind are removed when the next process
takes the lock (:func:`remove_temporary`).
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import math
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

__all__ = [
    "COLUMNS", "Damage", "ESTIMATES", "ESTIMATE_COLUMNS", "LOCK", "RunDirError", "RunLock",
    "Tables", "atomic_savefig", "atomic_write", "cell_path",
    "check_cell", "check_json_object", "check_results", "done_cells", "layout_problems",
    "new_run_dir",
    "quarantine", "read_cell", "read_estimates", "read_results", "read_small_text",
    "remove_temporary", "scenario_hash", "temporary_name",
    "to_jsonable", "verify_cells", "write_cell", "write_tables",
]

COLUMNS = ("scenario", "cell", "seed", "evaluation", "agent", "tick", "variant", "metric",
           "estimate", "stderr", "ci_low", "ci_high", "truth", "error", "n", "params")
#: Columns of ``estimates.csv.gz``: the results' columns and ``log``, the index of the log
#: (within its cell) the estimate comes from.
ESTIMATE_COLUMNS = COLUMNS[:3] + ("log",) + COLUMNS[3:]
FLOAT_COLUMNS = ("estimate", "stderr", "ci_low", "ci_high", "truth", "error")
#: The per-log estimates' file.
ESTIMATES = "estimates.csv.gz"


class RunDirError(Exception):
    """A run directory cannot be created or resumed (message for the user)."""


@dataclass(frozen=True)
class Damage:
    """Something found wrong in a run directory, and what was done about it.

    ``kind``: ``"cell"`` (a cell file, moved to ``cells/quarantine/`` and recomputed),
    ``"file"`` (``scenario.toml``, ``environment.json``, ``results.jsonl``: the command
    exits with code 2 after doing what it still can) or ``"note"`` (a stale lock taken
    over, temporary files removed: nothing was lost).
    """

    path: str
    problem: str
    action: str
    kind: str = "file"

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}; {self.action}"


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and an atomic rename; the
    temporary file is removed when the write fails (a full disk leaves nothing behind)."""
    path = Path(path)
    tmp = temporary_name(path)
    mode = "wb" if isinstance(data, bytes) else "w"
    try:
        with open(tmp, mode, **({} if mode == "wb" else {"encoding": "utf-8",
                                                         "newline": ""})) as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_savefig(fig, path, *, dpi: int = 110) -> None:
    """``fig.savefig(path)`` through a temporary file and an atomic rename: a failed write
    leaves neither a truncated PNG under the final name nor the temporary file."""
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    atomic_write(Path(path), buf.getvalue())


def _inside(child: Path, parent: Path) -> bool:
    try:
        child.resolve().relative_to(parent.resolve())
        return True
    except ValueError:
        return False


def new_run_dir(out: Path, name: str, *, resume: bool) -> tuple[Path, bool]:
    """The run directory for scenario ``name`` under ``out``: ``(path, resuming)``.

    A fresh run takes ``OUT/NAME``, or ``OUT/NAME-2``, ``-3``, ... when that exists; with
    ``resume`` the newest existing one is continued (a fresh one when there is none).
    """
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", name):
        raise RunDirError(f"scenario name {name!r} cannot name a run directory")
    out = Path(out)
    existing = _existing(out, name)
    if resume and existing:
        path = existing[-1]
        resuming = True
    else:
        n = (max(k for k, _ in ((_suffix(p, name), p) for p in existing)) + 1) if existing else 1
        path = out / (name if n == 1 else f"{name}-{n}")
        resuming = False
    if not _inside(path, out) or path.resolve().parent != out.resolve():
        raise RunDirError(f"run directory {path} would be outside --out {out}")
    if not resuming:
        out.mkdir(parents=True, exist_ok=True)
        while True:  # another run may take NAME-n between our listing and our mkdir
            try:
                path.mkdir(exist_ok=False)
                break
            except FileExistsError:
                n += 1
                path = out / f"{name}-{n}"
    elif not path.is_dir():
        raise RunDirError(f"run directory {path} is not a directory")
    (path / "cells").mkdir(exist_ok=True)
    return path, resuming


def _suffix(path: Path, name: str) -> int:
    rest = path.name[len(name):]
    return 1 if rest == "" else int(rest[1:])


def _existing(out: Path, name: str) -> list[Path]:
    if not out.is_dir():
        return []
    found = [p for p in out.iterdir()
             if p.is_dir()
             and (p.name == name or re.fullmatch(re.escape(name) + r"-[0-9]+", p.name))]
    return sorted(found, key=lambda p: _suffix(p, name))


# --- cells ------------------------------------------------------------------------------------

#: Layout version of the cell files (``format`` key); files without it are not trusted.
#: Format 2 added ``estimates``, the cell's per-log estimates.
CELL_FORMAT = 2
_CELL_KEYS = {"format": int, "cell": str, "seed": int, "scenario": str, "seconds": (int, float),
              "rows": list, "estimates": list, "checksum": str}
QUARANTINE = "quarantine"
#: Largest cell file read (the largest built-in cells are below a MiB).
MAX_CELL_BYTES = 2**30


def cell_path(run_dir: Path, filename: str) -> Path:
    return Path(run_dir) / "cells" / filename


def scenario_hash(text: str) -> str:
    """SHA-256 of a resolved scenario's TOML text: the identity of the scenario in its cells."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _checksum(payload: dict) -> str:
    """SHA-256 of a cell's content (every field but ``checksum``), canonical JSON."""
    body = {k: v for k, v in payload.items() if k != "checksum"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, allow_nan=True).encode()).hexdigest()


def write_cell(run_dir: Path, filename: str, cell_id: str, rows: list[dict], seconds: float,
               errors: list[str] = (), *, seed: int, scenario: str,
               estimates: list[dict] = ()) -> None:
    """Store one finished cell (atomic) with what identifies it -- its id, its seed, the
    hash of the scenario (:func:`scenario_hash`) -- and a checksum of its content;
    ``rows``: its results rows, ``estimates``: its per-log estimates (rows of
    :data:`ESTIMATE_COLUMNS`), ``errors``: users' code the cell survived."""
    payload = {"format": CELL_FORMAT, "cell": cell_id, "seed": seed, "scenario": scenario,
               "seconds": seconds, "rows": rows, "estimates": list(estimates)}
    if errors:
        payload["errors"] = list(errors)
    payload["checksum"] = _checksum(payload)
    atomic_write(cell_path(run_dir, filename), json.dumps(payload, allow_nan=True))


def check_cell(path: Path, *, cell_id: str, seed: int, scenario: str) -> tuple[dict | None,
                                                                                   str | None]:
    """Read and verify one cell file: ``(payload, None)``, or ``(None, problem)`` saying in a
    few words what is wrong (empty, truncated, not JSON, wrong shape, another cell's
    content, another scenario's, a checksum mismatch)."""
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None, "missing"
    except OSError as exc:  # cells/ is a file (NotADirectoryError), unreadable, ...
        return None, f"unreadable ({exc.strerror or exc})"
    if not stat.S_ISREG(st.st_mode):
        return None, "not a regular file"
    if st.st_size == 0:
        return None, "empty"
    if st.st_size > MAX_CELL_BYTES:
        return None, f"too large to be a cell file ({st.st_size} bytes)"
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return None, "not UTF-8 text"
    except OSError as exc:
        return None, f"unreadable ({exc.strerror or exc})"
    try:
        payload = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return None, f"not JSON, or truncated ({str(exc)[:80]})"
    if not isinstance(payload, dict):
        return None, f"wrong shape (a JSON {type(payload).__name__}, not an object)"
    if "format" not in payload:
        return None, "no identity or checksum (not written by this version of recloop)"
    for key, types in _CELL_KEYS.items():
        value = payload.get(key)
        if not isinstance(value, types) or isinstance(value, bool):
            return None, f"wrong shape (`{key}` missing or not a {_type_name(types)})"
    if payload["format"] != CELL_FORMAT:
        return None, f"cell format {payload['format']}, expected {CELL_FORMAT}"
    if not isinstance(payload.get("errors", []), list):
        return None, "wrong shape (`errors` not a list)"
    if payload["cell"] != cell_id:
        return None, f"holds cell {payload['cell'][:120]!r}, not {cell_id!r} (copied over?)"
    if payload["seed"] != seed:
        return None, f"holds seed {payload['seed']}, not {seed}"
    if payload["scenario"] != scenario:
        return None, "belongs to another scenario (its scenario hash differs)"
    if _checksum(payload) != payload["checksum"]:
        return None, "checksum mismatch (its content was altered)"
    for what, columns in (("rows", COLUMNS), ("estimates", ESTIMATE_COLUMNS)):
        name = "row" if what == "rows" else "estimate"
        for j, row in enumerate(payload[what]):
            if not isinstance(row, dict) or set(row) != set(columns):
                return None, f"wrong shape ({name} {j} has not the {what}' columns)"
            if row["cell"] != cell_id:
                return None, f"{name} {j} belongs to cell {str(row['cell'])[:120]!r}"
    return payload, None


def _type_name(types) -> str:
    types = types if isinstance(types, tuple) else (types,)
    names = {int: "integer", float: "number", str: "string", list: "list"}
    return " or ".join(dict.fromkeys(names[t] for t in types))


def read_cell(run_dir: Path, filename: str, *, cell_id: str, seed: int, scenario: str) -> dict:
    """A verified cell file (:func:`check_cell`); :class:`RunDirError` naming the file and
    the problem otherwise."""
    path = cell_path(run_dir, filename)
    payload, problem = check_cell(path, cell_id=cell_id, seed=seed, scenario=scenario)
    if problem is not None:
        raise RunDirError(f"{path}: {problem} (cell {cell_id}); run with --resume to "
                          f"recompute it")
    return payload


def done_cells(run_dir: Path) -> set[str]:
    """File names of the finished cells (temporary files of a killed run are ignored)."""
    folder = Path(run_dir) / "cells"
    return {p.name for p in folder.glob("*.json")} if folder.is_dir() else set()


def quarantine(path: Path) -> Path:
    """Move a damaged file of ``cells/`` aside to ``cells/quarantine/`` (never overwriting
    an earlier one); returns its new path."""
    path = Path(path)
    folder = path.parent / QUARANTINE
    folder.mkdir(exist_ok=True)
    target = folder / path.name
    n = 1
    while target.exists() or target.is_symlink():
        target = folder / f"{path.name}.{n}"
        n += 1
    os.replace(path, target)
    return target


def verify_cells(run_dir: Path, expected: dict[str, tuple[str, int]],
                 scenario: str) -> list[tuple[Path, str, Path]]:
    """Check every file of ``cells/`` against ``expected`` (file name -> (cell id, seed)) and
    the scenario hash; damaged, foreign or unexpected files are moved to
    ``cells/quarantine/``. Returns ``(file, problem, moved to)`` for each."""
    folder = Path(run_dir) / "cells"
    found = []
    if not folder.is_dir():
        return found
    for path in sorted(folder.iterdir()):
        if path.name == QUARANTINE or path.name.startswith("."):
            continue  # hidden files are not ours (.nfs*, .DS_Store) or temporary ones
        if path.name not in expected:
            problem = ("not a cell of this scenario" if path.name.endswith(".json")
                       else "not a cell file")
        else:
            cell_id, seed = expected[path.name]
            _, problem = check_cell(path, cell_id=cell_id, seed=seed, scenario=scenario)
        if problem is not None:
            found.append((path, problem, quarantine(path)))
    return found


# --- temporary files and the lock -----------------------------------------------------------

def temporary_name(path: Path) -> Path:
    """The temporary file :func:`atomic_write` and :func:`write_tables` write before the
    rename: ``.NAME.recloop-PID.tmp`` beside ``path`` (recognisably recloop's, see
    :func:`remove_temporary`)."""
    path = Path(path)
    return path.with_name(f".{path.name}.recloop-{os.getpid()}.tmp")


#: A temporary file recloop wrote: ``.NAME.recloop-PID.tmp`` (``.NAME.PID.tmp`` before
#: 0.1.1), NAME one of the files recloop writes in that folder (:data:`_OWN`).
_TMP = re.compile(r"\.(?P<name>.+)\.(recloop-)?[0-9]+\.tmp")
#: The files recloop writes, per folder of a run directory (names, or patterns).
_OWN = {"": re.compile(r"scenario\.toml|environment\.json|results\.csv|results\.jsonl|"
                       r"estimates\.csv\.gz|report\.md|report\.html|errors\.log|"
                       r"fidelity\.md|world\.npz"),
        "cells": re.compile(r"[0-9a-f]{24}\.json"),
        "figures": re.compile(r"[A-Za-z0-9_.-]+\.png")}


def remove_temporary(run_dir: Path) -> list[Path]:
    """Remove the temporary files a crash or a full disk left in ``run_dir``, ``cells/`` and
    ``figures/`` (call it holding the run's lock); returns them. Only recloop's own: named
    as :func:`temporary_name` names them, for a file recloop writes in that folder -- a
    user's ``.notes.2024.tmp`` stays."""
    removed = []
    for sub, own in _OWN.items():
        folder = Path(run_dir) / sub if sub else Path(run_dir)
        if not folder.is_dir() or folder.is_symlink():
            continue
        for p in folder.iterdir():
            m = _TMP.fullmatch(p.name)
            if m and own.fullmatch(m["name"]) and (p.is_file() or p.is_symlink()):
                p.unlink(missing_ok=True)
                removed.append(p)
    return removed


LOCK = ".lock"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # exists, owned by someone else
    return True


class RunLock:
    """The lock of a run directory (its file ``.lock`` holds the owner's process id).

    On POSIX the lock is an ``flock`` on that file, released by the kernel when its process
    dies however it dies: a lock whose process is gone is taken over (``stale`` then holds
    the previous owner's id), a live one raises :class:`RunDirError` naming its process.
    Elsewhere the file is created exclusively and a stale one is recognised by its id.
    """

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / LOCK
        self.fd: int | None = None
        self.stale: int | None = None

    def acquire(self) -> "RunLock":
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            return self._acquire_exclusive()
        for _ in range(10):
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0),
                             0o644)
            except OSError as exc:
                raise RunDirError(f"{self.path}: cannot open the lock file "
                                  f"({exc.strerror or exc})") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                owner = _read_pid(fd)
                os.close(fd)
                raise RunDirError(self._busy(owner)) from None
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # the owner removed the file between our open and our lock
                os.close(fd)
                continue
            previous = _read_pid(fd)
            if previous is not None and previous != os.getpid():
                self.stale = previous
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            self.fd = fd
            return self
        raise RunDirError(f"{self.path}: could not take the lock (it keeps changing)")

    def _acquire_exclusive(self) -> "RunLock":  # pragma: no cover - not POSIX
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                with open(self.path, "rb") as f:
                    owner = _parse_pid(f.read(64))
                if owner is not None and _pid_alive(owner):
                    raise RunDirError(self._busy(owner)) from None
                self.stale = owner
                self.path.unlink(missing_ok=True)
                continue
            os.write(fd, f"{os.getpid()}\n".encode())
            self.fd = fd
            return self
        raise RunDirError(f"{self.path}: could not take the lock")

    def _busy(self, owner: int | None) -> str:
        who = f"process {owner}" if owner is not None else "another process"
        return (f"{self.path.parent} is in use by {who} (lock file {self.path}); wait for it "
                f"to finish or stop it")

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)  # before closing: nobody takes a doomed file
        finally:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> bool:
        self.release()
        return False


def _parse_pid(data: bytes) -> int | None:
    text = data.decode("ascii", "replace").strip().split("\n")[0]
    return int(text) if text.isdigit() and 0 < len(text) < 12 else None


def _read_pid(fd: int) -> int | None:
    try:
        return _parse_pid(os.pread(fd, 64, 0))
    except OSError:
        return None


#: What each entry of a run directory must be when it exists.
_FOLDERS = ("cells", "figures", "cells/" + QUARANTINE)
_FILES = ("scenario.toml", "environment.json", "results.csv", "results.jsonl", ESTIMATES,
          "report.md", "report.html", "errors.log")


def layout_problems(run_dir: Path) -> list[str]:
    """Entries of ``run_dir`` that are of the wrong type (a file where a folder must be, or
    the reverse): ``"PATH: expected a folder, got a file"``, ... (nothing is moved: they
    may be the user's)."""
    run_dir = Path(run_dir)
    out = []
    for name in _FOLDERS:
        p = run_dir / name
        if (p.exists() or p.is_symlink()) and (not p.is_dir() or p.is_symlink()):
            out.append(f"{p}: expected a folder, got {'a link' if p.is_symlink() else 'a file'}")
    for name in _FILES:
        p = run_dir / name
        if p.is_dir():
            out.append(f"{p}: expected a file, got a folder")
    return out


# --- the other files of a run directory ---------------------------------------------------

#: Largest ``scenario.toml`` / ``environment.json`` a run directory may hold (they are a few
#: KiB; anything larger is not one of ours).
MAX_SMALL_FILE = 16 * 2**20


def read_small_text(path: Path, limit: int = MAX_SMALL_FILE) -> tuple[str | None, str | None]:
    """The UTF-8 text of a small regular file: ``(text, None)`` or ``(None, problem)``
    (missing, not a regular file, too large, not UTF-8, unreadable) -- never a hang on a
    FIFO or a device."""
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None, "missing"
    except OSError as exc:
        return None, f"unreadable ({exc.strerror or exc})"
    if not stat.S_ISREG(st.st_mode):
        return None, "not a regular file"
    if st.st_size > limit:
        return None, f"too large ({st.st_size} bytes)"
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        return None, f"unreadable ({exc.strerror or exc})"
    if len(data) > limit:
        return None, "too large"
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return None, "not UTF-8 text"


def check_json_object(path: Path) -> tuple[dict | None, str | None]:
    """``environment.json`` and the like: ``(object, None)`` or ``(None, problem)``."""
    text, problem = read_small_text(path)
    if problem is not None:
        return None, problem
    if not text.strip():
        return None, "empty"
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return None, f"not valid JSON ({str(exc)[:80]})"
    if not isinstance(data, dict):
        return None, f"not a JSON object (a {type(data).__name__})"
    return data, None


def check_results(run_dir: Path) -> str | None:
    """``None`` if ``results.jsonl`` reads as the results table, else what is wrong (the
    first bad line)."""
    path = Path(run_dir) / "results.jsonl"
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "missing"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    try:
        with open(path, encoding="utf-8") as f:
            for j, line in enumerate(f, 1):
                try:
                    row = json.loads(line)
                except (ValueError, RecursionError):
                    return f"line {j} is not JSON (truncated?)"
                problem = _row_problem(row)
                if problem:
                    return f"line {j}: {problem}"
    except UnicodeDecodeError:
        return "not UTF-8 text"
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    return None


def _row_problem(row) -> str | None:
    if not isinstance(row, dict) or set(row) != set(COLUMNS):
        return "not a row of the results' columns"
    for c in FLOAT_COLUMNS:
        v = row[c]
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))) \
                and v not in ("inf", "-inf"):
            return f"`{c}` is not a number"
    for c in ("evaluation", "metric", "cell"):
        if not isinstance(row[c], str):
            return f"`{c}` is not a string"
    for c in ("agent", "variant"):
        if row[c] is not None and not isinstance(row[c], str):
            return f"`{c}` is not a string"
    if row["params"] is not None and not isinstance(row["params"], dict):
        return "`params` is not an object"
    if row["tick"] is not None and (isinstance(row["tick"], bool)
                                    or not isinstance(row["tick"], int)):
        return "`tick` is not an integer"
    return None


# --- results tables ---------------------------------------------------------------------------

def _csv_value(column: str, v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return "" if math.isnan(v) else repr(v)
    if column == "params":
        return json.dumps(v, sort_keys=True)
    return str(v)


def _json_value(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


@dataclass(frozen=True)
class Tables:
    """What :func:`write_tables` wrote: the number of results rows and of per-log estimates,
    and ``differed``: file name -> how the file it replaced differed from the cell files
    (``"missing"``, ``"line 17 differs from the cell files"``, ``"truncated: 3 of 360
    lines"``, ...); empty when every file was already what the cells give."""

    rows: int
    estimates: int
    differed: dict


class _Table:
    """A table file written through a temporary file, line by line, each line compared
    with the line of the file it replaces (read as it goes, never more than needed)."""

    def __init__(self, path: Path, *, gz: bool = False):
        self.path = Path(path)
        self.tmp = temporary_name(self.path)
        self.gz = gz
        self.n = 0
        self.problem: str | None = None
        self.old = None
        self.old_n = 0
        self.old_ended = False
        self._raw = open(self.tmp, "wb")
        if gz:
            import gzip

            # no file name or time stamp in the header: the same rows, the same bytes
            self._gz = gzip.GzipFile(filename="", mode="wb", fileobj=self._raw, mtime=0,
                                     compresslevel=6)
            self.f = io.TextIOWrapper(self._gz, encoding="utf-8", newline="")
        else:
            self.f = io.TextIOWrapper(self._raw, encoding="utf-8", newline="")
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            self.problem = "missing"
            return
        except OSError as exc:
            self.problem = f"unreadable ({exc.strerror or exc})"
            return
        if not stat.S_ISREG(st.st_mode):
            self.problem = "not a regular file"
            return
        try:
            if gz:
                import gzip

                raw = gzip.open(self.path, "rb")
            else:
                raw = open(self.path, "rb")
            self.old = io.TextIOWrapper(raw, encoding="utf-8", newline="")
        except OSError as exc:
            self.problem = f"unreadable ({exc.strerror or exc})"

    def _next_old(self) -> str | None:
        try:
            line = self.old.readline()
        except (OSError, EOFError, ValueError) as exc:  # gzip, zlib and UTF-8 errors
            self.problem = f"unreadable after line {self.old_n} ({type(exc).__name__})"
            return None
        if line:
            self.old_n += 1
        return line or None

    def write(self, line: str) -> None:
        self.f.write(line)
        self.n += 1
        if self.problem is None and self.old is not None and not self.old_ended:
            old = self._next_old()
            if old is None:
                self.old_ended = self.problem is None
            elif old != line:
                self.problem = f"line {self.n} differs from the cell files"

    def close(self) -> str | None:
        """Finish the file (atomic rename); the problem of the file it replaced, or ``None``."""
        self.f.flush()
        self.f.detach()
        if self.gz:
            self._gz.close()
        self._raw.flush()
        os.fsync(self._raw.fileno())
        self._raw.close()
        if self.problem is None and self.old is not None:
            if self.old_ended:
                self.problem = ("empty" if self.old_n == 0
                                else f"truncated: {self.old_n} of {self.n} lines")
            elif self._next_old() is not None:
                self.problem = "has lines the cell files do not give"
        if self.old is not None:
            with contextlib.suppress(Exception):
                self.old.close()
        os.replace(self.tmp, self.path)
        return self.problem

    def abort(self) -> None:
        with contextlib.suppress(Exception):
            self.f.close()
        with contextlib.suppress(Exception):
            self._raw.close()
        if self.old is not None:
            with contextlib.suppress(Exception):
                self.old.close()
        self.tmp.unlink(missing_ok=True)


def _csv_line(values) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(values)
    return buf.getvalue()


def write_tables(run_dir: Path, payloads: Iterable[dict]) -> Tables:
    """Stream the cells' ``rows`` into ``results.csv`` and ``results.jsonl`` and their
    ``estimates`` into ``estimates.csv.gz`` (each file atomic: a temporary file renamed
    into place once complete).

    ``payloads`` are verified cell files (:func:`read_cell`) in cell order. Every line is
    compared with the file it replaces, so that a caller can say which files differed
    from their cells (:attr:`Tables.differed`).
    """
    run_dir = Path(run_dir)
    files = {"results.csv": _Table(run_dir / "results.csv"),
             "results.jsonl": _Table(run_dir / "results.jsonl"),
             ESTIMATES: _Table(run_dir / ESTIMATES, gz=True)}
    n_rows = n_est = 0
    try:
        files["results.csv"].write(_csv_line(COLUMNS))
        files[ESTIMATES].write(_csv_line(ESTIMATE_COLUMNS))
        for payload in payloads:
            for row in payload["rows"]:
                files["results.csv"].write(_csv_line([_csv_value(c, row.get(c))
                                                      for c in COLUMNS]))
                files["results.jsonl"].write(json.dumps({c: _json_value(row.get(c))
                                                         for c in COLUMNS}) + "\n")
                n_rows += 1
            for row in payload.get("estimates", ()):
                files[ESTIMATES].write(_csv_line([_csv_value(c, row.get(c))
                                                  for c in ESTIMATE_COLUMNS]))
                n_est += 1
    except BaseException:
        for t in files.values():
            t.abort()
        raise
    differed = {}
    for name, table in files.items():
        problem = table.close()
        if problem is not None:
            differed[name] = problem
    return Tables(n_rows, n_est, differed)


def read_results(run_dir: Path) -> Iterator[dict]:
    """Rows of ``results.jsonl`` (missing numbers as ``nan``), one at a time."""
    with open(Path(run_dir) / "results.jsonl", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            for c in FLOAT_COLUMNS:
                v = row.get(c)
                row[c] = math.nan if v is None else float(v)
            yield row


def _int_or_none(text: str) -> int | None:
    return None if text == "" else int(text)


def read_estimates(run_dir: Path) -> Iterator[dict]:
    """Rows of ``estimates.csv.gz`` (missing numbers as ``nan``, ``tick`` and ``n`` as
    ``None`` when empty, ``params`` as a dict), one at a time."""
    import gzip

    with gzip.open(Path(run_dir) / ESTIMATES, "rt", encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None or tuple(header) != ESTIMATE_COLUMNS:
            raise ValueError(f"{Path(run_dir) / ESTIMATES}: expected the header "
                             f"{','.join(ESTIMATE_COLUMNS)}, got {header!r}")
        for values in reader:
            row = dict(zip(ESTIMATE_COLUMNS, values, strict=True))
            for c in FLOAT_COLUMNS:
                row[c] = math.nan if row[c] == "" else float(row[c])
            for c in ("seed", "log", "tick", "n"):
                row[c] = _int_or_none(row[c])
            row["params"] = json.loads(row["params"]) if row["params"] else {}
            yield row


def to_jsonable(obj) -> str:
    return json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n"

