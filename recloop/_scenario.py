"""Scenario files: loading, defaults, strict validation and sweep expansion.

A scenario is a TOML file with the tables ``[run]``, ``[world]`` (optional, with
``[[world.campaigns]]``), ``[[agents]]`` and ``[[evaluations]]``; the keys each accepts are
declared in :data:`RUN_PARAMS`, :data:`AGENT_KEYS`, :data:`EVALUATION_KEYS` and, per ``kind``,
in the registry (:func:`recloop._registry.registry`). ``scenarios/README.md`` documents
them all.

Validation collects *every* problem before anything runs, each as
``FILE: key.path: expected ..., got ...``; :class:`ScenarioError` carries the list.
"""

from __future__ import annotations

import difflib
import itertools
import json
import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recloop import _calibrated_world as _calibrated
from recloop import _schema as sch
from recloop._plugins import PYTHON_KIND
from recloop._registry import PluginError, registry
from recloop._schema import (
    NAME_PATTERN,
    REQUIRED,
    Bool,
    EstimatorList,
    Float,
    Int,
    ListOf,
    Param,
    Reference,
    Str,
    Table,
)

__all__ = [
    "Scenario", "ScenarioError", "builtin_scenarios", "dumps_toml", "find_scenario",
    "load_scenario", "scenario_keys",
]

_NAME = Str(pattern=NAME_PATTERN,
            pattern_text="a name of letters, digits, '_', '-', '.' (at most 64, starting "
                         "with a letter or digit)")
_IDENT = Str(pattern=r"[A-Za-z_][A-Za-z0-9_]{0,63}",
             pattern_text="an identifier (letters, digits, '_'; at most 64)")

#: The most ticks a world may simulate (``world.n_ticks`` and ``run.horizon`` alike).
MAX_TICKS = 10**6

RUN_PARAMS: tuple[Param, ...] = (
    Param("name", _NAME, REQUIRED, "Name of the scenario; the run directory is `OUT/NAME` "
          "(`NAME-2`, `NAME-3`, ... when it exists)."),
    Param("description", Str(), "", "One line shown by `recloop list`."),
    Param("seed", Int(low=0, high=2**63 - 1), 0, "First replicate seed when `seeds` is not "
          "given (`--seed` overrides it)."),
    Param("replicates", Int(low=1, high=100_000), 1, "Number of replicates: seeds `seed`, "
          "`seed + 1`, ..."),
    Param("seeds", ListOf(Int(low=0, high=2**63 - 1), unique=True), None,
          "Explicit replicate seeds (instead of `seed` and `replicates`)."),
    Param("horizon", Int(low=0, high=MAX_TICKS), 0, "Ticks the world is simulated: sets "
          "`world.n_ticks` for world presets that have it (0: the preset's value)."),
    Param("plugin_timeout", Float(low=0.0, high=7 * 86400.0, low_open=True), 600.0,
          "Seconds a cell running your agents or estimators (plugins) may go without a sign "
          "of progress -- a step of its loops, a call of your code returning -- before it is "
          "stopped and recorded as failed (the run goes on; `--resume` retries it). At "
          "validation each trial call of your code has min(60, this) seconds. How the run "
          "executes, not what it computes: it is left out of `scenario.toml` and recorded in "
          "`environment.json`, so raising it and resuming keeps the finished cells."),
)

#: ``[run]`` keys that say how a run executes, not what it computes: kept out of the
#: resolved scenario (whose text is the scenario's identity in its cells) in
#: :attr:`Scenario.options`.
EXECUTION_KEYS = ("plugin_timeout",)

AGENT_KEYS: tuple[Param, ...] = (
    Param("name", _IDENT, REQUIRED, "Name of the agent in results and in evaluations' "
          "`agents` lists (unique)."),
    Param("kind", Str(), REQUIRED, "Agent kind (see the agent kinds below), or `\"python\"` "
          "for your own agent named by `factory`."),
)

#: The keys of an agent of kind "python" (besides `name` and `kind`).
PYTHON_AGENT_KEYS: tuple[Param, ...] = (
    Param("factory", Reference(), REQUIRED, "`kind = \"python\"`: your agent's class or "
          "function, `\"package.module:attribute\"` (its folder on the path: `--path DIR`)."),
    Param("params", Table(), {}, "`kind = \"python\"`: keyword arguments of the factory."),
)

EVALUATION_KEYS: tuple[Param, ...] = (
    Param("kind", Str(), REQUIRED, "Evaluation kind (see the evaluation kinds below)."),
    Param("name", _IDENT, None, "Name in the results' `evaluation` column (default: the "
          "kind; unique)."),
    Param("agents", ListOf(_IDENT, min_len=0, unique=True), None, "Names of the agents it "
          "evaluates (default: every agent of the family the kind accepts)."),
    Param("sweep", Table(), None, "Table `{parameter = [values, ...]}`: each combination of "
          "values is a separate cell (cartesian product)."),
)

WORLD_KEYS: tuple[Param, ...] = (
    Param("preset", Str(), REQUIRED, "World preset of the simulator; the other keys of "
          "`[world]` override the preset's fields."),
    Param("campaigns", ListOf(Table(), min_len=0), None, "`[[world.campaigns]]`: campaigns "
          "that replace the preset's (fields of the simulator's campaign type)."),
)

TOP_KEYS = ("run", "world", "agents", "evaluations")
MAX_CELLS = 200_000


class ScenarioError(Exception):
    """A scenario file failed validation; ``problems`` lists every message."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


@dataclass(frozen=True)
class Scenario:
    """A validated scenario with every default filled in (``data`` is plain TOML data:
    what determines the results); ``options`` holds the ``[run]`` keys of
    :data:`EXECUTION_KEYS` (how the run executes)."""

    path: str
    data: dict
    options: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.data["run"]["name"]

    @property
    def description(self) -> str:
        return self.data["run"]["description"]

    @property
    def seeds(self) -> list[int]:
        return list(self.data["run"]["seeds"])

    def with_seed(self, seed: int) -> "Scenario":
        """The same scenario with its replicate seeds moved to ``seed, seed + 1, ...``."""
        data = json.loads(json.dumps(self.data))
        data["run"]["seeds"] = [seed + i for i in range(len(data["run"]["seeds"]))]
        return Scenario(self.path, data, dict(self.options))

    def to_toml(self) -> str:
        return dumps_toml(self.data)


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


# --- validation ---------------------------------------------------------------------------------

class _Problems:
    """The problems found so far, and what the checks of users' code need to know: the
    time limit of a trial call (:data:`recloop._guard.TRIAL_TIMEOUT`, or a smaller
    ``run.plugin_timeout``)."""

    def __init__(self, file: str):
        from recloop._guard import TRIAL_TIMEOUT

        self.file = file
        self.items: list[str] = []
        self.trial_timeout = TRIAL_TIMEOUT

    def add(self, path: str, message: str) -> None:
        self.items.append(f"{self.file}: {path}: {message}" if path else f"{self.file}: {message}")


def _unknown(problems: _Problems, prefix: str, key: str, valid) -> None:
    valid = sorted(valid)
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    problems.add(f"{prefix}{_key(key)}", f"expected one of the keys {', '.join(valid)}{hint}, "
                 f"got unknown key {key!r}")


def _key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _toml_string(key)


def _toml_string(text: str) -> str:
    # JSON's escapes are TOML's, except that TOML wants no surrogate pairs (hence
    # ensure_ascii=False) and no raw DEL
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _check_table(problems: _Problems, prefix: str, table: dict, params, *, extra=(),
                 provided=()) -> dict:
    """Validate ``table`` against ``params``; returns the resolved table (defaults filled)."""
    known = {p.name for p in params} | set(extra)
    for key in table:
        if key not in known:
            _unknown(problems, prefix, key, known)
    out = {}
    for p in params:
        if p.name in table:
            msg = p.type.check(table[p.name])
            if msg is None and isinstance(p.type, sch.FilePath):
                msg, table = _resolve_file(problems.file, table, p.name)
            if msg is not None:
                # list item problems come back as "[j]: expected ..." and extend the path
                head, _, rest = msg.partition(": ") if msg.startswith("[") else ("", "", msg)
                problems.add(f"{prefix}{p.name}{head}", rest)
            else:
                out[p.name] = table[p.name]
        elif p.required and p.name not in provided:
            problems.add(f"{prefix}{p.name}", f"expected {p.type.describe()}, got nothing "
                         "(required key missing)")
        elif not p.required and p.default is not None:
            out[p.name] = p.default
    return out


def _resolve_file(scenario_file: str, table: dict, key: str):
    """Resolve a file key relative to the scenario file; (problem or None, updated table)."""
    path = Path(table[key]).expanduser()
    if not path.is_absolute():
        path = Path(scenario_file).resolve().parent / path
    if not path.is_file():
        hint = (f"; give your copy with --set world.{key}=PATH"
                if key in ("calibrate_from", "file") else "")
        return (f"expected {sch.FilePath().describe()}, got {table[key]!r} (no file "
                f"{path}{hint})"), table
    return None, {**table, key: str(path)}


def _expect_table(problems, path, value, what="a table") -> bool:
    if not isinstance(value, dict):
        problems.add(path, f"expected {what}, got {sch.fmt(value)}")
        return False
    return True


def _expect_tables(problems, path, value) -> list:
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        problems.add(path, f"expected an array of tables ([[{path}]]), got {sch.fmt(value)}")
        return []
    return value


def _validate_run(problems, raw) -> dict:
    """The resolved ``[run]`` table: the replicate seeds as ``seeds`` (from ``seeds``, or
    ``seed`` and ``replicates``; both ways at once are refused)."""
    if not _expect_table(problems, "run", raw, "a [run] table"):
        return {}
    run = _check_table(problems, "run.", raw, RUN_PARAMS)
    if "seeds" in raw:
        for key in ("seed", "replicates"):
            if key in raw:
                problems.add(f"run.{key}", f"expected either `seeds` or `seed` and "
                             f"`replicates`, got both `seeds` and `{key}` (`seeds` lists the "
                             "replicate seeds itself)")
    elif "seed" in run and "replicates" in run:
        if run["seed"] + run["replicates"] - 1 > 2**63 - 1:
            problems.add("run.seed", f"expected seed + replicates - 1 <= {2**63 - 1}, got "
                         f"{run['seed']}")
        else:
            run["seeds"] = [run["seed"] + i for i in range(run["replicates"])]
    return {k: run[k] for k in ("name", "description", "seeds", "horizon") + EXECUTION_KEYS
            if k in run}


def _validate_world(problems, raw, horizon: int) -> dict:
    if not _expect_table(problems, "world", raw, "a [world] table"):
        return {}
    return validate_world(problems, raw, horizon)


def _world_sizes(world: dict | None) -> dict:
    """Problem sizes for checking users' bandit agents: the world's arms and features."""
    if not world:
        return {}
    try:
        config = world_config(world)
    except Exception:
        return {}
    if hasattr(config, "n_arms") and hasattr(config, "dim"):
        return {"n_actions": config.n_arms, "context_dim": config.dim}
    return {}


def _validate_agents(problems, raw, world: dict | None = None) -> tuple[list[dict], dict]:
    """Agent tables resolved, and each agent's family (``{name: family}``). Users' agents
    (plugins, import paths) are built and checked here, before anything runs."""
    agents = []
    families: dict = {}
    names: set[str] = set()
    reg = registry()
    for j, table in enumerate(_expect_tables(problems, "agents", raw)):
        prefix = f"agents[{j}]."
        kind_name = table.get("kind")
        kind = None
        if isinstance(kind_name, str) and kind_name != PYTHON_KIND:
            try:
                kind = reg.get("agents", kind_name)
            except PluginError as exc:
                problems.add(f"{prefix}kind", f"expected a usable agent kind, got {exc}")
                agents.append(_check_table(problems, prefix, table, AGENT_KEYS,
                                           extra=set(table)))
                continue
        if kind_name == PYTHON_KIND:
            resolved = _check_table(problems, prefix, table, AGENT_KEYS + PYTHON_AGENT_KEYS)
        elif kind is None:
            # kind unknown: accept any kind's parameter, still catch typos of the rest
            head = _check_table(problems, prefix, table, AGENT_KEYS,
                                extra={p.name for k in reg.agents.values()
                                       for p in k.params or ()})
            if isinstance(kind_name, str):
                problems.add(f"{prefix}kind", Str(tuple(sorted(reg.agents)) + (PYTHON_KIND,))
                             .check(kind_name))
            resolved = head
        elif kind.params is None:  # a plugin without a declared schema: its factory decides
            resolved = _check_table(problems, prefix, table, AGENT_KEYS,
                                    extra=set(table) - {"name", "kind"})
            resolved.update({k: v for k, v in table.items() if k not in resolved})
        else:
            resolved = _check_table(problems, prefix, table, AGENT_KEYS + kind.params)
        if "name" in resolved and resolved["name"] in names:
            problems.add(f"{prefix}name", f"expected a name not used by another agent, got "
                         f"{resolved['name']!r} again")
        names.add(resolved.get("name"))
        agents.append(resolved)
        if kind is not None and kind.origin == "built-in":
            families[resolved.get("name")] = kind.family
        elif {"name", "kind"} <= set(resolved) and (kind is not None or "factory" in resolved):
            family, problem = _try_agent(resolved, world, problems.trial_timeout)
            if problem:
                key = "factory" if kind_name == PYTHON_KIND else "kind"
                problems.add(f"{prefix}{key}", problem)
            else:
                families[resolved["name"]] = family
    return agents, families


def _try_agent(table, world, timeout):
    from recloop._plugins import try_agent

    return try_agent(table, **_world_sizes(world), timeout=timeout)


def _validate_estimators(problems, path: str, entries: list, family: str) -> None:
    """Resolve and try every entry of an ``estimators`` list (kinds, import paths,
    tables); results names must be distinct."""
    from recloop._plugins import estimator_entry, try_estimator

    seen: set = set()
    for i, entry in enumerate(entries):
        here = f"{path}[{i}]"
        try:
            resolved = estimator_entry(entry, family)
        except PluginError as exc:
            problems.add(f"{here}.{exc.key}" if exc.key else here, str(exc))
            continue
        if resolved.name in seen:
            problems.add(here, f"expected distinct estimator names, got {resolved.name!r} "
                         "again (give the table a `name`)")
        seen.add(resolved.name)
        if resolved.kind.origin != "built-in" or resolved.params:
            problem = try_estimator(resolved, family, timeout=problems.trial_timeout)
            if problem:
                problems.add(f"{here}.factory" if isinstance(entry, dict) else here, problem)


def _validate_evaluations(problems, raw, agents: list[dict], world: dict | None,
                          agent_family: dict) -> list[dict]:
    evaluations = []
    names: set[str] = set()
    tables = _expect_tables(problems, "evaluations", raw)
    if isinstance(raw, list) and not raw:
        problems.add("evaluations", "expected at least one [[evaluations]] table, got none")
    kinds = registry().evaluations
    for j, table in enumerate(tables):
        prefix = f"evaluations[{j}]."
        kind_name = table.get("kind")
        kind = kinds.get(kind_name) if isinstance(kind_name, str) else None
        if kind is None:
            _check_table(problems, prefix, table, EVALUATION_KEYS,
                         extra={p.name for k in kinds.values() for p in k.params})
            if isinstance(kind_name, str):
                problems.add(f"{prefix}kind", Str(tuple(sorted(kinds))).check(kind_name))
            continue
        sweep_raw = table.get("sweep", {})
        ev = _check_table(problems, prefix, table, EVALUATION_KEYS + kind.params,
                          provided=tuple(sweep_raw) if isinstance(sweep_raw, dict) else ())
        sweep = {}
        if isinstance(sweep_raw, dict):
            for key, values in sweep_raw.items():
                p = kind.param(key)
                path = f"{prefix}sweep.{_key(key)}"
                if p is None or not p.sweepable:
                    _unknown(problems, f"{prefix}sweep.", key,
                             [q.name for q in kind.params if q.sweepable])
                    continue
                if key in table:
                    problems.add(path, f"expected the parameter either swept or set, got both "
                                 f"{prefix}{key} and {path}")
                if not isinstance(values, list) or not values:
                    problems.add(path, f"expected a non-empty list of values, each "
                                 f"{p.type.describe()}, got {sch.fmt(values)}")
                    continue
                bad = False
                for i, v in enumerate(values):
                    msg = p.type.check(v)
                    if msg is not None:
                        problems.add(f"{path}[{i}]", msg)
                        bad = True
                if len({json.dumps(v, sort_keys=True) for v in values}) != len(values):
                    problems.add(path, f"expected distinct values, got {values!r}")
                    bad = True
                if not bad:
                    sweep[key] = values
                    ev.pop(key, None)
            if sweep:
                ev["sweep"] = sweep
            else:
                ev.pop("sweep", None)
        name = ev.get("name") or kind.name
        ev["name"] = name
        if name in names:
            problems.add(f"{prefix}name", f"expected a name not used by another evaluation, got "
                         f"{name!r} again (set `name`)")
        names.add(name)
        if not kind.agent_family:
            if ev.get("agents"):
                problems.add(f"{prefix}agents", f"expected no agents (kind {kind.name!r} "
                             f"evaluates no agents), got {ev['agents']!r}")
            ev["agents"] = []
        elif "agents" in ev:
            defined = {t.get("name") for t in agents}
            for i, a in enumerate(ev["agents"]):
                if a in defined and a not in agent_family:
                    continue  # an agent whose own problem is already reported
                if a not in agent_family:
                    known = sorted(n for n in agent_family if isinstance(n, str))
                    close = difflib.get_close_matches(a, known, n=1)
                    hint = f" (did you mean {close[0]!r}?)" if close else ""
                    problems.add(f"{prefix}agents[{i}]", f"expected the name of an agent "
                                 f"defined in [[agents]]{hint}, got {a!r}")
                elif agent_family[a] != kind.agent_family:
                    problems.add(f"{prefix}agents[{i}]", f"expected a {kind.agent_family} agent "
                                 f"(kind {kind.name!r} evaluates those), got {a!r}, a "
                                 f"{agent_family[a]} agent")
        else:
            ev["agents"] = [n for n, f in agent_family.items() if f == kind.agent_family]
        if len(ev["agents"]) < kind.min_agents and not any(
                m.startswith(f"{problems.file}: agents") for m in problems.items):
            problems.add(f"{prefix}agents", f"expected at least {kind.min_agents} "
                         f"{kind.agent_family} agent(s), got {len(ev['agents'])}")
        if kind.needs_world and world is None:
            problems.add("world", f"expected a [world] table (evaluation kind {kind.name!r} "
                         "runs on a simulated world), got nothing")
        order = ["kind", "name", "agents"] + [p.name for p in kind.params] + ["sweep"]
        ev = {k: ev[k] for k in order if k in ev}
        for p in kind.params:
            if isinstance(p.type, EstimatorList) and isinstance(ev.get(p.name), list):
                _validate_estimators(problems, f"{prefix}{p.name}", ev[p.name], p.type.family)
        evaluations.append(ev)
        _check_cross(problems, prefix, kind, ev, agents, world)
    return evaluations


def _check_cross(problems, prefix, kind, ev, agents, out_world) -> None:
    """Constraints that involve several keys, declared by the kind (optional ``check``)."""
    funcs = [kind.check] if kind.check else []
    if not funcs:
        return
    swept = ev.get("sweep") or {}
    if any(p.name not in ev and p.name not in swept and (p.required or p.default is not None)
           for p in kind.params):
        return  # a parameter is invalid (already reported): cross-key rules cannot apply
    # keys without a default (e.g. an optional data file) reach the rules as None
    base = {p.name: ev.get(p.name) for p in kind.params if p.name not in swept}
    chosen = [a for a in agents if a.get("name") in ev["agents"]]
    before = len(problems.items)
    for combo in sweep_values(ev):
        params = {**base, **combo}
        for func in funcs:
            try:
                found = list(func(params, chosen, out_world))
            except Exception as exc:  # a rule that cannot be evaluated is itself a problem
                found = [("", f"expected parameters the kind's rules can check, got "
                              f"{type(exc).__name__}: {exc}")]
            for path, msg in found:
                problems.add(f"{prefix}{path}".rstrip("."), msg)
        if len(problems.items) > before:
            return  # the same rule would fail again for the other sweep values


def sweep_values(ev: dict) -> list[dict]:
    """The cartesian product of an evaluation's sweep, as a list of ``{param: value}``."""
    sweep = ev.get("sweep") or {}
    keys = list(sweep)
    return [dict(zip(keys, combo, strict=True))
            for combo in itertools.product(*(sweep[k] for k in keys))]


def validate(data: Any, file: str, *, fitted: bool = False) -> Scenario:
    """Validate parsed TOML ``data``; raises :class:`ScenarioError` listing every problem.

    A world to be fitted to a log (``[world] calibrate_from``) is read but not fitted: the
    rules that need the fitted world (ticks within its horizon, ...) wait for ``fitted=True``,
    which the runner passes once it has fitted the world (before anything is written)."""
    problems = _Problems(file)
    if not isinstance(data, dict):
        problems.add("", f"expected a TOML document, got {sch.fmt(data)}")
        raise ScenarioError(problems.items)
    for key in data:
        if key not in TOP_KEYS:
            _unknown(problems, "", key, TOP_KEYS)
    out: dict[str, Any] = {}
    if "run" not in data:
        problems.add("run", "expected a [run] table with at least `name`, got nothing")
    else:
        out["run"] = _validate_run(problems, data["run"])
    options = {k: out.get("run", {}).pop(k) for k in EXECUTION_KEYS if k in out.get("run", {})}
    if "plugin_timeout" in options:
        problems.trial_timeout = min(problems.trial_timeout, options["plugin_timeout"])
    if "world" in data:
        out["world"] = _validate_world(problems, data["world"],
                                       out.get("run", {}).get("horizon", 0))
    rules_world = out.get("world") or None
    if rules_world and "calibrate_from" in rules_world and not fitted:
        rules_world = {}  # known once fitted: the runner validates again then
    out["agents"], families = _validate_agents(problems, data.get("agents", []), rules_world)
    if "evaluations" not in data:
        problems.add("evaluations", "expected at least one [[evaluations]] table, got nothing")
    world_ok = "world" in out and not any(m.startswith(f"{file}: world") for m in problems.items)
    out["evaluations"] = _validate_evaluations(problems, data.get("evaluations", []),
                                               out["agents"], rules_world if world_ok
                                               else ({} if "world" in data else None),
                                               families)
    if not problems.items:
        n_cells = count_cells(out)
        if n_cells > MAX_CELLS:
            problems.add("evaluations", f"expected at most {MAX_CELLS} cells in all, got "
                         f"{n_cells} (seeds x agents x sweep values)")
    if problems.items:
        raise ScenarioError(problems.items)
    return Scenario(file, out, options)


def count_cells(data: dict) -> int:
    total = 0
    for ev in data["evaluations"]:
        kind = registry().evaluations[ev["kind"]]
        n = math.prod(len(v) for v in (ev.get("sweep") or {}).values())
        total += n * (len(ev["agents"]) if kind.per_agent else 1)
    return total * len(data["run"]["seeds"])


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


# --- the key reference (used by the README test and `scenarios/README.md`) ---------------------

def scenario_keys() -> list[str]:
    """Every key path the loader accepts, e.g. ``evaluations.selfcheck.n``."""
    keys = [f"run.{p.name}" for p in RUN_PARAMS]
    keys += [f"agents.{p.name}" for p in AGENT_KEYS]
    keys += [f"evaluations.{p.name}" for p in EVALUATION_KEYS]
    keys += [f"world.{p.name}" for p in WORLD_KEYS]
    keys += [f"world.{p.name}" for p in world_params()]
    keys += [f"world.campaigns.{p.name}" for p in campaign_params()]
    keys += [f"agents.{PYTHON_KIND}.{p.name}" for p in PYTHON_AGENT_KEYS]
    for kind in _builtin("agents"):
        keys += [f"agents.{kind.name}.{p.name}" for p in kind.params or ()]
    for kind in _builtin("evaluations"):
        keys += [f"evaluations.{kind.name}.{p.name}" for p in kind.params]
    return keys


def _builtin(table: str) -> list:
    """The built-in kinds of a registry table (the documented ones; plugins vary by
    installation)."""
    return [k for k in getattr(registry(), table).values() if k.origin == "built-in"]


# --- writing TOML (the resolved scenario.toml) -------------------------------------------------

def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return _toml_string(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def _is_tables(v) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)


def dumps_toml(data: dict, *, inline=("sweep",)) -> str:
    """Write plain data (tables, arrays of tables, scalars, lists) as TOML."""
    lines: list[str] = []

    def table(d: dict, path: list[str]) -> None:
        for k, v in d.items():
            if (isinstance(v, dict) and k not in inline) or _is_tables(v):
                continue
            lines.append(f"{_key(k)} = {_toml_value(v)}")
        for k, v in d.items():
            sub = path + [_key(k)]
            if isinstance(v, dict) and k not in inline:
                lines.extend(["", f"[{'.'.join(sub)}]"])
                table(v, sub)
            elif _is_tables(v):
                for item in v:
                    lines.extend(["", f"[[{'.'.join(sub)}]]"])
                    table(item, sub)

    table(data, [])
    return "\n".join(lines).strip() + "\n"


# --- the [world] section: a simulator preset plus overrides --------------------------------------

def _presets() -> dict:
    """The simulator's world presets (name -> config factory)."""
    import simulator

    return dict(simulator.PRESETS)


#: Upper bounds the harness puts on world sizes (the simulator has none): a scenario must not
#: be able to ask validation itself for terabytes.
_SIZE_LIMITS = {"n_users": 10**8, "n_items": 10**6, "n_ticks": MAX_TICKS, "dim": 10**4,
                "n_arms": 10**6, "n_universal": 10**6, "n_nonzero": 10**4, "drift_terms": 10**4,
                "n_alive": 10**6, "lifetime": 10**9}


def _field_type(fs, name: str = ""):
    """The scenario type of a config field from its declaration
    (``recloop_base.fields.FieldSpec``: Python type, range, choices); None: not settable."""
    import typing

    if not fs.settable:
        return None
    base = fs.base
    cap = _SIZE_LIMITS.get(name)
    if base is int:
        high = fs.high if fs.high is not None else (cap if cap is not None else 2**63 - 1)
        return Int(low=fs.low, high=min(high, cap) if cap is not None else high)
    if base is float:
        return sch.Float(low=fs.low, high=fs.high, low_open=fs.low_open,
                         high_open=fs.high_open)
    if base is bool:
        return Bool()
    if base is str:
        return Str(choices=fs.choices)
    if typing.get_origin(base) is tuple and len(typing.get_args(base)) == 2 \
            and Ellipsis not in typing.get_args(base):
        item = Int() if typing.get_args(base)[0] is int else sch.Float()
        return ListOf(item, min_len=2, max_len=2)
    if base is tuple or typing.get_origin(base) is tuple:
        return ListOf(sch.OneOf((Int(), sch.Float())), min_len=0, max_len=10**6)
    return None


def _config_fields(config) -> list[Param]:
    """The settable fields of a config, as scenario parameters (the config's own values as
    defaults, its declared docs)."""
    from recloop_base.fields import field_specs

    out = []
    for fs in field_specs(type(config)):
        t = _field_type(fs, fs.name)
        if t is not None:
            out.append(Param(fs.name, t, getattr(config, fs.name), fs.doc))
    return out


def world_params() -> tuple[Param, ...]:
    """The override keys of ``[world]``: fields of the presets' config types (union)."""
    seen: dict[str, Param] = {}
    users: dict[str, list[str]] = {}
    for name, factory in _presets().items():
        for p in _config_fields(factory()):
            seen.setdefault(p.name, p)
            users.setdefault(p.name, []).append(name)
    return tuple(Param(p.name, p.type, None, f"{p.doc} (presets {', '.join(users[p.name])})")
                 for p in seen.values())


def campaign_params() -> tuple[Param, ...]:
    """The keys of ``[[world.campaigns]]``: the settable fields of
    ``simulator.CampaignConfig``. In a scenario ``items`` is required (a campaign policy
    object cannot be named in a file)."""
    import dataclasses

    import simulator
    from recloop_base.fields import field_specs

    out = []
    for fs in field_specs(simulator.CampaignConfig):
        t = _field_type(fs, fs.name)
        if t is None:
            continue
        if fs.name == "items":
            t = ListOf(Int(low=0), unique=True)
        default = REQUIRED if fs.default is dataclasses.MISSING or fs.name == "items" \
            else fs.default
        out.append(Param(fs.name, t, default, fs.doc))
    return tuple(out)


def _config_problem(problems: _Problems, prefix: str, exc: Exception) -> None:
    """A config's structured error (``ArgumentError``: field, rule, value) as a scenario
    problem naming the key."""
    from recloop_base.validation import ArgumentError

    if isinstance(exc, ArgumentError):
        problems.add(f"{prefix}{exc.name}", f"expected {exc.rule}, got {exc.got}")
    else:
        problems.add(prefix.rstrip("."), f"expected a valid world, got {type(exc).__name__}: "
                     f"{exc}")


def world_config(world: dict):
    """The simulator config of a resolved ``[world]`` table (a preset with overrides, or a
    world fitted to a log or loaded from a file: :mod:`recloop._calibrated_world`)."""
    import simulator

    if _calibrated.is_calibrated(world):
        return _calibrated.config_of(world)

    overrides = {k: tuple(v) if isinstance(v, list) else v for k, v in world.items()
                 if k not in ("preset", "campaigns")}
    if "campaigns" in world:
        overrides["campaigns"] = tuple(
            simulator.CampaignConfig(**{k: tuple(v) if isinstance(v, list) else v
                                        for k, v in c.items()}) for c in world["campaigns"])
    return simulator.preset(world["preset"], **overrides)


def validate_world(problems: _Problems, raw: dict, horizon: int = 0) -> dict:
    if _calibrated.is_calibrated(raw):
        if horizon:
            problems.add("run.horizon", "expected no horizon with a fitted world (its horizon "
                         f"is the log's span), got {horizon}")
        return _calibrated.validate(problems, raw, _check_table)
    presets = _presets()
    name = raw.get("preset")
    msg = Str(tuple(sorted(presets))).check(name) if "preset" in raw else None
    if msg is not None:
        problems.add("world.preset", msg)
    if not isinstance(name, str) or name not in presets:
        if "preset" not in raw:
            problems.add("world.preset", f"expected one of {', '.join(map(repr, sorted(presets)))}"
                         ", got nothing (required key missing)")
        close = (difflib.get_close_matches(name, list(presets), n=1)
                 if isinstance(name, str) else [])
        if close:  # report the other keys' problems too, as if the suggestion were taken
            validate_world(problems, {**raw, "preset": close[0]}, horizon)
        else:  # no guess: check the other keys against every preset's fields
            _check_table(problems, "world.", {k: v for k, v in raw.items() if k != "preset"},
                         tuple(Param(p.name, p.type, None) for p in world_params())
                         + WORLD_KEYS[1:])
        return {}
    base = presets[name]()
    fields = _config_fields(base)
    has_campaigns = hasattr(base, "campaigns")
    before = len(problems.items)
    resolved = _check_table(problems, "world.", raw,
                            tuple(Param(p.name, p.type, None) for p in fields)
                            + (WORLD_KEYS if has_campaigns else WORLD_KEYS[:1]))
    campaigns = raw.get("campaigns")
    if has_campaigns and isinstance(campaigns, list):
        resolved["campaigns"] = [
            _check_table(problems, f"world.campaigns[{j}].", c, campaign_params())
            for j, c in enumerate(campaigns) if isinstance(c, dict)]
    if len(problems.items) > before:
        return resolved
    if horizon and hasattr(base, "n_ticks"):
        if "n_ticks" in resolved and resolved["n_ticks"] != horizon:
            problems.add("world.n_ticks", f"expected {horizon} (run.horizon) or no key, got "
                         f"{resolved['n_ticks']!r}")
            return resolved
        resolved["n_ticks"] = horizon
    import simulator

    for j, c in enumerate(resolved.get("campaigns", [])):
        try:
            simulator.CampaignConfig(**{k: tuple(v) if isinstance(v, list) else v
                                        for k, v in c.items()})
        except (ValueError, TypeError) as exc:
            _config_problem(problems, f"world.campaigns[{j}].", exc)
    if len(problems.items) > before:
        return resolved
    try:
        config = world_config(resolved)
    except (ValueError, TypeError, OverflowError, MemoryError) as exc:
        _config_problem(problems, "world.", exc)
        return resolved
    if hasattr(config, "mean_profile_size") and config.mean_profile_size >= config.n_items:
        # the world's rate calibration would refuse it when the run builds the world
        problems.add("world.mean_profile_size", f"expected less than n_items = "
                     f"{config.n_items} (a user adopts each item once), got "
                     f"{config.mean_profile_size!r}")
        return resolved
    out = {"preset": name}
    for p in _config_fields(config):
        value = getattr(config, p.name)
        if value is not None:
            out[p.name] = list(value) if isinstance(value, tuple) else value
    if has_campaigns and all(c.items is not None for c in config.campaigns):
        out["campaigns"] = [{"start": c.start, "duration": c.duration, "reach": c.reach,
                             "items": list(c.items), "k": c.k, "boost": c.boost}
                            for c in config.campaigns]
    return out


# --- scenarios/README.md ---------------------------------------------------------------------

_README_HEAD = """\
# Scenario files

A scenario is a TOML file: what world to simulate, which agents act in it, and which
evaluations to run. `recloop validate FILE` checks it, `recloop run FILE` runs it (a built-in
scenario also by name: `recloop run quickstart`; `recloop list` shows them).

```toml
[run]
name = "my_study"            # run directory: runs/my_study
replicates = 3               # seeds 0, 1, 2 (or: seeds = [7, 11, 13])

[[agents]]
name = "a"
kind = "fixed_arm"
arm = 1

[[evaluations]]
kind = "selfcheck"
n = 1000
sweep = { n_arms = [2, 10] } # one cell per value (cartesian product over keys)
```

**Cells.** A run is cut into cells: seeds x evaluations x sweep values, and x agents for the
evaluation kinds marked *per agent* (the others run all their agents together on one world,
so that they meet the same users and draws). Cell `c` of seed `s` draws its random streams
from `SeedSequence(s, spawn_key=hash(evaluation name, swept values))`: results do not depend
on worker count or executor, and agents of the same replicate share the world (common random
numbers).

**Validation.** Every problem is reported at once as `FILE: key.path: expected ..., got ...`
(unknown keys get the closest valid key suggested); `recloop` exits with code 2 and creates
nothing. A parameter may be set in the evaluation table or swept in its `sweep` table, not
both. A scenario file is a regular UTF-8 file of at most 4 MiB (a FIFO, a device or a larger
file is refused unread). Rules that involve several keys (`k` at most the world's items, a
synthetic rating set that fits its shape, ...) are checked here too, not by the run.

**Memory.** `recloop run` estimates the peak memory of each evaluation's largest cell from
the sizes that drive it (e.g. `world.n_items x world.dim` item features) and refuses a run
whose cells need more than the machine has available, naming those keys; `--force` runs it
anyway, `recloop run --dry-run` prints the estimates.

The tables below list every key the loader accepts, with its type, range and default
(*required* when there is none). This file is checked against the loader by
`tests/recloop/test_scenario.py`; regenerate the tables with
`python -c "from recloop._scenario import reference_markdown as r; print(r())"`.
"""


def _param_table(params, none_text: str = "*derived*") -> list[str]:
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for p in params:
        if p.required:
            default = "*required*"
        elif p.default is None:
            default = none_text
        else:
            default = f"`{_toml_value(p.default)}`"
        rows.append(f"| `{p.name}` | {p.type.describe()} | {default} | {p.doc} |")
    return rows


def reference_markdown() -> str:
    """The text of ``scenarios/README.md``: every key, type, range and default."""
    out = [_README_HEAD, "## Tables", "", "### `run`", "", "The `[run]` table.", ""]
    out += _param_table(RUN_PARAMS)
    out += ["", "### `world`", "", "The `[world]` table (needed by evaluation kinds that "
            "simulate a world).", ""]
    out += _param_table(WORLD_KEYS[:1]) + _param_table(WORLD_KEYS[1:] + world_params(),
                                                       none_text="the preset's")[2:]
    if campaign_params():
        out += ["", "### `world.campaigns`", "", "Each `[[world.campaigns]]` table.", ""]
        out += _param_table(campaign_params())
    out += ["", "### `agents`", "", "Each `[[agents]]` table: these keys, plus the keys of "
            "its kind (below).", ""]
    out += _param_table(AGENT_KEYS)
    out += ["", "### `evaluations`", "", "Each `[[evaluations]]` table: these keys, plus the "
            "keys of its kind (below).", ""]
    out += _param_table(EVALUATION_KEYS)
    out += ["", "## Agent kinds", ""]
    out += [f"### `agents.{PYTHON_KIND}`", "", f"`kind = \"{PYTHON_KIND}\"`: your own agent "
            "(a bandit policy or a recommender), built by a class or function named by import "
            "path and checked with `agents.check_agent` when the scenario is validated. "
            "Installed packages may also declare agent kinds under the entry-point group "
            "`recloop.agents`; they are named by `kind` like the built-ins below (their "
            "keyword arguments as keys of the agent table) and `recloop list` shows them.", ""]
    out += _param_table(PYTHON_AGENT_KEYS)
    out.append("")
    for kind in _builtin("agents"):
        out += [f"### `agents.{kind.name}`", "", f"`kind = \"{kind.name}\"` ({kind.family} "
                f"agent): {kind.summary}", ""]
        out += _param_table(kind.params) if kind.params else ["No parameters."]
        out.append("")
    out += ["## Estimator kinds", "", "Names an evaluation's `estimators` list may hold. "
            "Besides these: an import path `\"package.module:attribute\"` (a function called "
            "with the table's `params` as keyword arguments, or a class built with them whose "
            "instances are called), an installed package's entry point of the group "
            "`recloop.estimators`, or a table `{name = ..., factory = ..., params = {...}}` "
            "whose `factory` is any of these and whose `name` labels the results' `variant`. "
            "Static estimators are called `estimator(log, action_dist, *, rng)`, "
            "learning-policy evaluators `evaluator(log, make_agent, *, rng)` (`rng` only when "
            "the signature takes it); each may return an `evaluators.Estimate` or a float, "
            "and is tried once on a small log when the scenario is validated.", ""]
    for kind in _builtin("estimators"):
        out.append(f"- `{kind.name}` ({kind.family}): {kind.summary}")
    out += ["", "## Evaluation kinds", ""]
    for kind in _builtin("evaluations"):
        cells = "one cell per agent" if kind.per_agent else "all its agents in one cell"
        world = "; needs `[world]`" if kind.needs_world else ""
        who = (f"Evaluates {kind.agent_family} agents ({cells}{world})." if kind.agent_family
               else f"Takes no agents{world}.")
        out += [f"### `evaluations.{kind.name}`", "",
                f"`kind = \"{kind.name}\"`: {kind.summary} {who}", ""]
        out += _param_table(kind.params) if kind.params else ["No parameters."]
        out.append("")
    return "\n".join(out).rstrip() + "\n"
