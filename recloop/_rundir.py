"""Run directories: atomic writes, one file per finished cell, and the results tables.

Layout of a run directory::

    scenario.toml      the resolved scenario (every default filled in)
    environment.json   versions, seed, command line, start and end times
    cells/             one JSON file per finished cell (written atomically; resume skips them)
    results.csv        long format, one row per measurement, in cell order
    results.jsonl      the same rows as JSON objects
    figures/*.png      figures of the report
    report.md          the report

Every file is written to a temporary name in the same folder and renamed into place
(``os.replace`` is atomic on POSIX and Windows), so a killed run leaves either the old file or
the new one, never half of one. ``results.*`` are assembled from the cell files at the end of a
run, streaming one cell at a time, in the order of the cells' keys -- never in completion
order -- so the tables do not depend on the executor or the number of workers.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
from pathlib import Path
from typing import Iterable, Iterator

__all__ = [
    "COLUMNS", "RunDirError", "atomic_savefig", "atomic_write", "cell_path", "done_cells", "new_run_dir",
    "read_cell", "read_results", "to_jsonable", "write_cell", "write_results",
]

COLUMNS = ("scenario", "cell", "seed", "evaluation", "agent", "tick", "variant", "metric",
           "estimate", "stderr", "ci_low", "ci_high", "truth", "error", "n", "params")
FLOAT_COLUMNS = ("estimate", "stderr", "ci_low", "ci_high", "truth", "error")


class RunDirError(Exception):
    """A run directory cannot be created or resumed (message for the user)."""


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
        path.mkdir(parents=True, exist_ok=False)
    (path / "cells").mkdir(exist_ok=True)
    return path, resuming


def _suffix(path: Path, name: str) -> int:
    rest = path.name[len(name):]
    return 1 if rest == "" else int(rest[1:])


def _existing(out: Path, name: str) -> list[Path]:
    if not out.is_dir():
        return []
    found = [p for p in out.iterdir()
             if p.is_dir() and (p.name == name or re.fullmatch(re.escape(name) + r"-[0-9]+", p.name))]
    return sorted(found, key=lambda p: _suffix(p, name))


# --- cells ------------------------------------------------------------------------------------

def cell_path(run_dir: Path, filename: str) -> Path:
    return Path(run_dir) / "cells" / filename


def write_cell(run_dir: Path, filename: str, cell_id: str, rows: list[dict], seconds: float,
               errors: list[str] = ()) -> None:
    """Store one finished cell (atomic); ``errors``: users' code the cell survived."""
    payload = {"cell": cell_id, "seconds": seconds, "rows": rows}
    if errors:
        payload["errors"] = list(errors)
    atomic_write(cell_path(run_dir, filename), json.dumps(payload, allow_nan=True))


def read_cell(run_dir: Path, filename: str) -> dict:
    with open(cell_path(run_dir, filename), encoding="utf-8") as f:
        return json.load(f)


def done_cells(run_dir: Path) -> set[str]:
    """File names of the finished cells (temporary files of a killed run are ignored)."""
    folder = Path(run_dir) / "cells"
    return {p.name for p in folder.glob("*.json")} if folder.is_dir() else set()


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

