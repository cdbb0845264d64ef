"""Run directories: atomic writes, one file per finished cell, and the results tables.

Layout of a run directory::

    scenario.toml      the resolved scenario (every default filled in)
    environment.json   versions, seed, command line, start and end times
    cells/             one JSON file per finished cell (written atomically; resume skips them)
    cells/quarantine/  cell files found damaged by a resume (moved aside, then recomputed)
    results.csv        long format, one row per measurement, in cell order
    results.jsonl      the same rows as JSON objects
    figures/*.png      figures of the report
    report.md          the report
    errors.log         tracebacks: a failed cell, errors of users' code a cell survived
    .lock              the process id of the run using the directory (while it runs)

Every file is written to a temporary name in the same folder and renamed into place
(``os.replace`` is atomic on POSIX and Windows), so a killed run leaves either the old file or
the new one, never half of one. ``results.*`` are assembled from the cell files at the end of a
run, streaming one cell at a time, in the order of the cells' keys -- never in completion
order -- so the tables do not depend on the executor or the number of workers.

A directory checks itself: each cell file carries its cell id, its seed, the hash of the
scenario and a SHA-256 checksum of its content (:func:`write_cell`), and a resume verifies
every one (:func:`verify_cells`): a truncated, empty, foreign or altered file is named, moved
to ``cells/quarantine/`` and recomputed. One process at a time uses a directory
(:class:`RunLock`); temporary files a crash left behind are removed when the next process
takes the lock (:func:`remove_temporary`).
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

__all__ = [
    "COLUMNS", "Damage", "LOCK", "RunDirError", "RunLock", "atomic_savefig", "atomic_write",
    "cell_path",
    "check_cell", "check_json_object", "check_results", "done_cells", "layout_problems",
    "new_run_dir",
    "quarantine", "read_cell", "read_results", "read_small_text", "remove_temporary",
    "scenario_hash",
    "to_jsonable", "verify_cells", "write_cell", "write_results",
]

COLUMNS = ("scenario", "cell", "seed", "evaluation", "agent", "tick", "variant", "metric",
           "estimate", "stderr", "ci_low", "ci_high", "truth", "error", "n", "params")
FLOAT_COLUMNS = ("estimate", "stderr", "ci_low", "ci_high", "truth", "error")


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
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
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


class _AtomicFile:
    """A text file written through a temporary name and renamed on success only."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")

    def __enter__(self):
        self.f = open(self.tmp, "w", encoding="utf-8", newline="")
        return self.f

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.f.flush()
            os.fsync(self.f.fileno())
            self.f.close()
            os.replace(self.tmp, self.path)
        else:
            self.f.close()
            self.tmp.unlink(missing_ok=True)
        return False


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
CELL_FORMAT = 1
_CELL_KEYS = {"format": int, "cell": str, "seed": int, "scenario": str, "seconds": (int, float),
              "rows": list, "checksum": str}
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
               errors: list[str] = (), *, seed: int, scenario: str) -> None:
    """Store one finished cell (atomic) with what identifies it -- its id, its seed, the
    hash of the scenario (:func:`scenario_hash`) -- and a checksum of its content;
    ``errors``: users' code the cell survived."""
    payload = {"format": CELL_FORMAT, "cell": cell_id, "seed": seed, "scenario": scenario,
               "seconds": seconds, "rows": rows}
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
    for j, row in enumerate(payload["rows"]):
        if not isinstance(row, dict) or set(row) != set(COLUMNS):
            return None, f"wrong shape (row {j} has not the results' columns)"
        if row["cell"] != cell_id:
            return None, f"row {j} belongs to cell {str(row['cell'])[:120]!r}"
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

#: Temporary files of :func:`atomic_write` and :class:`_AtomicFile`: ``.NAME.PID.tmp``.
_TMP = re.compile(r"\..+\.[0-9]+\.tmp")


def remove_temporary(run_dir: Path) -> list[Path]:
    """Remove the temporary files a crash or a full disk left in ``run_dir``, ``cells/`` and
    ``figures/`` (call it holding the run's lock); returns them."""
    removed = []
    for folder in (Path(run_dir), Path(run_dir) / "cells", Path(run_dir) / "figures"):
        if not folder.is_dir():
            continue
        for p in folder.iterdir():
            if _TMP.fullmatch(p.name) and (p.is_file() or p.is_symlink()):
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
_FILES = ("scenario.toml", "environment.json", "results.csv", "results.jsonl", "report.md",
          "errors.log")


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


def write_results(run_dir: Path, rows: Iterable[dict]) -> int:
    """Stream ``rows`` into ``results.csv`` and ``results.jsonl`` (atomic); returns the count."""
    run_dir = Path(run_dir)
    n = 0
    with _AtomicFile(run_dir / "results.csv") as fc, _AtomicFile(run_dir / "results.jsonl") as fj:
        writer = csv.writer(fc, lineterminator="\n")
        writer.writerow(COLUMNS)
        for row in rows:
            writer.writerow([_csv_value(c, row.get(c)) for c in COLUMNS])
            fj.write(json.dumps({c: _json_value(row.get(c)) for c in COLUMNS}) + "\n")
            n += 1
    return n


def read_results(run_dir: Path) -> Iterator[dict]:
    """Rows of ``results.jsonl`` (missing numbers as ``nan``), one at a time."""
    with open(Path(run_dir) / "results.jsonl", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            for c in FLOAT_COLUMNS:
                v = row.get(c)
                row[c] = math.nan if v is None else float(v)
            yield row


def to_jsonable(obj) -> str:
    return json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n"

