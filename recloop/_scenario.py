"""Scenario files: finding them, reading them, ``--set`` overrides, and loading them.

A scenario is a TOML file (``scenarios/README.md`` lists every key). Loading one is three
steps, each in its own module: this one finds the file (a path, or a built-in scenario by
name), reads it -- a regular UTF-8 file of at most :data:`MAX_SCENARIO_BYTES`, refused
unread otherwise -- parses the TOML and applies ``--set KEY=VALUE`` overrides;
:mod:`recloop._validate` then checks every key, fills in the defaults and returns the
:class:`Scenario` (or raises :class:`ScenarioError` listing every problem), with users'
agents and estimators resolved and tried by :mod:`recloop._plugins`. The resolved scenario
is written back as TOML by :func:`dumps_toml` (:mod:`recloop._toml`).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from recloop import _schema as sch
from recloop._reference import reference_markdown, scenario_keys
from recloop._toml import dumps_toml
from recloop._validate import Scenario, ScenarioError, validate

__all__ = [
    "MAX_SCENARIO_BYTES", "Scenario", "ScenarioError", "apply_overrides", "builtin_scenarios",
    "dumps_toml", "find_scenario", "load_scenario", "loads_scenario", "reference_markdown",
    "scenario_keys", "scenarios_dir", "validate",
]


# --- finding scenario files -------------------------------------------------------------------

def scenarios_dir() -> Path:
    """The built-in scenarios: the repository's top-level ``scenarios/`` folder (a source
    checkout or an editable install), which a wheel ships as ``recloop/scenarios/`` (the
    package-dir mapping of ``pyproject.toml``)."""
    package = Path(__file__).resolve().parent
    shipped = package / "scenarios"
    return shipped if shipped.is_dir() else package.parent / "scenarios"


def builtin_scenarios() -> dict[str, Path]:
    """Built-in scenario names and paths."""
    folder = scenarios_dir()
    if not folder.is_dir():
        return {}
    return {p.stem: p for p in sorted(folder.glob("*.toml"))}


def find_scenario(arg: str) -> Path:
    """A scenario path from a command-line argument: an existing file, else a built-in name."""
    path = Path(arg)
    if path.is_file():
        return path
    builtin = builtin_scenarios()
    if arg in builtin:
        return builtin[arg]
    return path  # loading it reports the problem


# --- reading ------------------------------------------------------------------------------------

#: Largest scenario file read (a scenario is a few KiB; a sweep of thousands of values is
#: still far below this): anything larger is refused before it is read.
MAX_SCENARIO_BYTES = 4 * 2**20


def _read_scenario_file(path: Path, file: str) -> str:
    """The text of a scenario file, refusing at once what is not a regular file of at most
    :data:`MAX_SCENARIO_BYTES` (a FIFO, ``/dev/zero``, a device, a huge file): opened
    without blocking, checked with ``fstat``, read up to the limit."""
    import os
    import stat

    def refuse(got: str):
        return ScenarioError([f"{file}: expected a scenario file (a regular UTF-8 TOML file "
                              f"of at most {MAX_SCENARIO_BYTES // 2**20} MiB), got {got}"])

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        known = ", ".join(builtin_scenarios()) or "none"
        raise ScenarioError([f"{file}: expected a scenario file or a built-in scenario name "
                             f"({known}), got no such file"]) from None
    except IsADirectoryError:
        raise refuse("a directory") from None
    except OSError as exc:
        raise refuse(f"{type(exc).__name__}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise refuse("a directory")
        if not stat.S_ISREG(st.st_mode):
            what = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a socket"
                    if stat.S_ISSOCK(st.st_mode) else "a device"
                    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
                    else "not a regular file")
            raise refuse(what)
        if st.st_size > MAX_SCENARIO_BYTES:
            raise refuse(f"a file of {st.st_size} bytes")
        chunks, size = [], 0
        while size <= MAX_SCENARIO_BYTES:  # st_size may lie (/proc): read at most the limit
            chunk = os.read(fd, MAX_SCENARIO_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_SCENARIO_BYTES:
            raise refuse(f"more than {MAX_SCENARIO_BYTES} bytes")
    except OSError as exc:
        raise refuse(f"{type(exc).__name__}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    raw = b"".join(chunks)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError([f"{file}: {_not_utf8(raw, exc)}"]) from None


def _not_utf8(raw: bytes, exc: UnicodeDecodeError) -> str:
    """What is wrong with a scenario file that is not UTF-8: where, and the likely encoding
    (TOML is UTF-8 by definition; guessing another encoding would misread values)."""
    head = raw[:exc.start]
    line = head.count(b"\n") + 1
    column = exc.start - (head.rfind(b"\n") + 1) + 1
    byte = raw[exc.start]
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        guess = "UTF-16 text with its byte-order mark"
    elif byte >= 0x80 and b"\x00" not in raw:
        guess = "Latin-1 or Windows-1252 text"
    else:
        guess = "a binary file"
    return (f"expected a UTF-8 TOML file, got byte 0x{byte:02x} at line {line}, column "
            f"{column}, which is not UTF-8 (it looks like {guess}; save it as UTF-8)")


def load_scenario(path, *, overrides=()) -> Scenario:
    """Read and validate a scenario file, or a built-in scenario by name (``"quickstart"``:
    :func:`builtin_scenarios`; a file of that name in the current folder comes first, as on
    the command line); raises :class:`ScenarioError` listing every problem (also when the
    path is not a regular file or is larger than :data:`MAX_SCENARIO_BYTES`: refused before
    anything is read). ``overrides`` are ``KEY=VALUE`` strings applied before validation
    (see :func:`apply_overrides`)."""
    path = find_scenario(str(path)) if isinstance(path, str) else Path(path)
    file = str(path)
    return loads_scenario(_read_scenario_file(path, file), file, overrides=overrides)


def apply_overrides(data: dict, overrides, file: str = "<string>") -> dict:
    """``data`` with ``KEY=VALUE`` overrides (``recloop run --set``): KEY a dotted key path
    into the scenario (``world.calibrate_from``, ``run.replicates``, ``evaluations.0.n_logs``:
    a number picks an entry of an array of tables), VALUE a TOML value (``[1, 2]``, ``true``,
    ``"x"``) or else a plain string. Relative file paths given this way are relative to the
    current directory, not to the scenario file."""
    import copy
    import os

    data = copy.deepcopy(data)
    problems = []
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            problems.append(f"--set: expected KEY=VALUE, got {item!r}")
            continue
        try:
            value = tomllib.loads(f"v = {text}")["v"]
        except (tomllib.TOMLDecodeError, ValueError, RecursionError):
            value = text
        if isinstance(value, str) and key.strip().rsplit(".", 1)[-1] in _PATH_KEYS \
                and not os.path.isabs(os.path.expanduser(value)):
            value = os.path.abspath(os.path.expanduser(value))
        parts = key.strip().split(".")
        node = data
        for j, part in enumerate(parts[:-1]):
            nxt = None
            if isinstance(node, list) and part.isdigit() and int(part) < len(node):
                nxt = node[int(part)]
            elif isinstance(node, dict):
                nxt = node.setdefault(part, {})
            if not isinstance(nxt, (dict, list)):
                problems.append(f"--set {key}: expected a table or an array of tables at "
                                f"{'.'.join(parts[:j + 1])!r}, got {fmt_value(nxt)}")
                node = None
                break
            node = nxt
        if node is None:
            continue
        last = parts[-1]
        if isinstance(node, list):
            problems.append(f"--set {key}: expected a key of a table, got an array at "
                            f"{'.'.join(parts[:-1])!r} (add the entry's number)")
            continue
        if "preset" in node and last in ("calibrate_from", "file"):
            node.pop("preset")  # a fitted world replaces the preset
        if last == "preset":
            node.pop("calibrate_from", None), node.pop("file", None)
        node[last] = value
    if problems:
        raise ScenarioError([f"{file}: {p}" for p in problems])
    return data


#: Keys whose values are file paths (a ``--set`` value is resolved against the current
#: directory, where the user typed it).
_PATH_KEYS = ("calibrate_from", "file", "data")


def fmt_value(v) -> str:
    return sch.fmt(v) if v is not None else "nothing"


def loads_scenario(text: str, file: str = "<string>", *, overrides=()) -> Scenario:
    """Parse and validate scenario ``text`` (with ``KEY=VALUE`` ``overrides``)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError([f"{file}: toml: expected valid TOML, got {exc}"]) from None
    except ValueError as exc:  # e.g. an integer of thousands of digits (int() refuses it)
        raise ScenarioError([f"{file}: toml: expected valid TOML, got a value the parser "
                             f"cannot read ({str(exc)[:120]})"]) from None
    except RecursionError:
        raise ScenarioError([f"{file}: toml: expected valid TOML, got arrays or tables "
                             "nested too deeply to read"]) from None
    except MemoryError:
        raise ScenarioError([f"{file}: toml: expected valid TOML, got a document too large "
                             "to parse"]) from None
    if overrides:
        data = apply_overrides(data, overrides, file)
    return validate(data, file)

