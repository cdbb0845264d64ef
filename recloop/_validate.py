"""Validating a scenario: the keys of its tables, their types and ranges, the rules across
keys, and users' agents and estimators tried before anything runs.

A scenario has the tables ``[run]``, ``[world]`` (optional, with ``[[world.campaigns]]``),
``[[agents]]`` and ``[[evaluations]]``; the keys each accepts are declared here
(:data:`RUN_PARAMS`, :data:`AGENT_KEYS`, :data:`EVALUATION_KEYS`, :data:`WORLD_KEYS`), in
:mod:`recloop._worlds` (a preset's fields) and, per ``kind``, in the registry
(:func:`recloop._registry.registry`). :func:`validate` collects *every* problem before
anything runs, each as ``FILE: key.path: expected ..., got ...``, and raises
:class:`ScenarioError` with the list, or returns the resolved :class:`Scenario` (every default
filled in). Users' agents and estimators are resolved and tried by :mod:`recloop._plugins`;
reading files and ``--set`` overrides are :mod:`recloop._scenario`'s.
"""

from __future__ import annotations

import difflib
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recloop import _calibrated_world as _calibrated
from recloop import _schema as sch
from recloop import _worlds
from recloop._plugins import (
    PYTHON_KIND,
    GuestTrials,
    check_estimators,
    is_plugin_agent,
    problem_sizes,
)
from recloop._registry import PluginError, registry
from recloop._schema import (
    NAME_PATTERN,
    REQUIRED,
    EstimatorList,
    Float,
    Int,
    ListOf,
    Param,
    Reference,
    Str,
    Table,
    sweep_values,
)
from recloop._toml import dumps_toml, toml_key
from recloop._worlds import MAX_TICKS, campaign_params, config_fields, world_config, world_params

__all__ = [
    "AGENT_KEYS", "EVALUATION_KEYS", "EXECUTION_KEYS", "MAX_CELLS", "PYTHON_AGENT_KEYS",
    "RUN_PARAMS", "Scenario", "ScenarioError", "TOP_KEYS", "WORLD_KEYS", "count_cells",
    "trial_server", "validate",
]

_NAME = Str(pattern=NAME_PATTERN,
            pattern_text="a name of letters, digits, '_', '-', '.' (at most 64, starting "
                         "with a letter or digit)")
_IDENT = Str(pattern=r"[A-Za-z_][A-Za-z0-9_]{0,63}",
             pattern_text="an identifier (letters, digits, '_'; at most 64)")

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
    Param("cell_timeout", Float(low=0.0, high=30 * 86400.0, low_open=True), 3600.0,
          "Seconds any cell (recloop's own included) may go without a sign of progress "
          "before its worker is stopped and the cell recorded as failed (the run goes on; "
          "`--resume` retries it); `--cell-timeout` overrides it. Counted in the worker's own "
          "time: waiting for a CPU that other processes hold does not count, a stopped "
          "(`kill -STOP`) or dead-locked worker does. Cells run in recloop's own process "
          "(`--workers 1`, no plugins) have no such limit. Like `plugin_timeout`, left out "
          "of `scenario.toml`."),
)

#: ``[run]`` keys that say how a run executes, not what it computes: kept out of the
#: resolved scenario (whose text is the scenario's identity in its cells) in
#: :attr:`Scenario.options`.
EXECUTION_KEYS = ("plugin_timeout", "cell_timeout")

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



# --- validation ---------------------------------------------------------------------------------


class _Problems:
    """The problems found so far, and what the checks of users' code need to know: the
    time limit of a trial call (:data:`recloop_base.guard.TRIAL_TIMEOUT`, or a smaller
    ``run.plugin_timeout``) and the guest process that runs them (``trials``, started on
    its first request)."""

    def __init__(self, file: str, trials: GuestTrials | None = None):
        from recloop_base.guard import TRIAL_TIMEOUT

        self.file = file
        self.items: list[str] = []
        self.trial_timeout = TRIAL_TIMEOUT
        self.trials = trials if trials is not None else GuestTrials()

    def add(self, path: str, message: str) -> None:
        self.items.append(f"{self.file}: {path}: {message}" if path else f"{self.file}: {message}")


def _unknown(problems: _Problems, prefix: str, key: str, valid) -> None:
    valid = sorted(valid)
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    problems.add(f"{prefix}{toml_key(key)}", f"expected one of the keys {', '.join(valid)}{hint}, "
                 f"got unknown key {key!r}")



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



def _validate_agents(problems, raw, world: dict | None = None) -> tuple[list[dict], dict]:
    """Agent tables resolved, and each agent's family (``{name: family}``). Users' agents
    (plugins, import paths) are loaded, built and checked in validation's guest process
    (``problems.trials``), before anything runs; recloop's process never imports them."""
    agents = []
    families: dict = {}
    names: set[str] = set()
    reg = registry()
    for j, table in enumerate(_expect_tables(problems, "agents", raw)):
        prefix = f"agents[{j}]."
        kind_name = table.get("kind")
        kind = reg.agents.get(kind_name) if isinstance(kind_name, str) else None
        guest = is_plugin_agent(table)
        if kind_name == PYTHON_KIND:
            resolved = _check_table(problems, prefix, table, AGENT_KEYS + PYTHON_AGENT_KEYS)
        elif guest:  # a plugin's kind: its parameters are checked where it is loaded
            resolved = _check_table(problems, prefix, table, AGENT_KEYS,
                                    extra=set(table) - {"name", "kind"})
            resolved.update({k: v for k, v in table.items() if k not in resolved})
        elif kind is None:
            # kind unknown: accept any kind's parameter, still catch typos of the rest
            head = _check_table(problems, prefix, table, AGENT_KEYS,
                                extra={p.name for k in reg.agents.values()
                                       for p in k.params or ()})
            if isinstance(kind_name, str):
                problems.add(f"{prefix}kind", Str(tuple(sorted(reg.agents)) + (PYTHON_KIND,))
                             .check(kind_name))
            resolved = head
        else:
            resolved = _check_table(problems, prefix, table, AGENT_KEYS + kind.params)
        if "name" in resolved and resolved["name"] in names:
            problems.add(f"{prefix}name", f"expected a name not used by another agent, got "
                         f"{resolved['name']!r} again")
        names.add(resolved.get("name"))
        if kind is not None and not guest:
            families[resolved.get("name")] = kind.family
        elif guest and {"name", "kind"} <= set(resolved) and (kind_name != PYTHON_KIND
                                                              or "factory" in resolved):
            loaded, family, found = problems.trials.agent(
                resolved, problem_sizes(world), problems.trial_timeout)
            for key, message in found:
                problems.add(f"{prefix}{key}", message)
            if loaded is not None:
                resolved = _as_toml_data(loaded, resolved)
            if not found:
                families[resolved["name"]] = family
        agents.append(resolved)
    return agents, families


def _as_toml_data(table, fallback: dict) -> dict:
    """An agent table a guest sent back, if it is plain TOML data naming the same agent
    (its kind's defaults filled in); else ``fallback``."""
    try:
        text = dumps_toml({"agents": [table]})
    except (TypeError, ValueError):
        return fallback
    import tomllib

    back = tomllib.loads(text)["agents"][0]
    if back.get("name") != fallback.get("name") or back.get("kind") != fallback.get("kind"):
        return fallback
    return back


# --- validation's guest process: where users' code is imported and tried -------------------------

def trial_server(conn, args) -> None:
    """The loop of validation's guest process (:class:`recloop._plugins.GuestTrials`):
    answer each request -- ``("agent", table, sizes, timeout)``, ``("estimator", entry,
    family, timeout)``, ``("describe", table, name)`` -- with ``("answer", value)``,
    announcing each call of users' code (``("enter", what)``) so that the parent can name
    it when the guest hangs or ends."""
    import pickle
    import threading

    from recloop_base import guard

    lock = threading.Lock()

    def send(*msg) -> None:
        data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
        with lock:
            try:
                conn.send_bytes(data)
            except (OSError, EOFError):
                os._exit(1)

    guard.set_section_hook(lambda what: send("enter", what))
    _warm_up()
    while True:
        try:
            request = pickle.loads(conn.recv_bytes())  # the parent's
        except (EOFError, OSError):
            return
        if request is None:
            return
        send("start")
        try:
            answer = _answer(request)
        except Exception as exc:  # recloop's own code failing on a request: say so
            answer = _failed_answer(request, f"{type(exc).__name__}: {exc}")
        send("answer", answer)


def _warm_up() -> None:
    """Import what recloop's trials and most plugins use (recloop's packages, the registry)
    before the first request: the guest's start-up, not a trial's time (a plugin module's
    import would otherwise be charged with importing numpy, scipy and evaluators)."""
    import agents  # noqa: F401
    import evaluators  # noqa: F401
    import recloop.testing  # noqa: F401
    import simulator  # noqa: F401

    registry()


def _answer(request: tuple):
    from recloop._plugins import check_estimator_entry

    what = request[0]
    if what == "estimator":
        _, entry, family, timeout = request
        return check_estimator_entry(entry, family, _NO_LIMIT)
    if what == "agent":
        _, table, sizes, timeout = request
        return _trial_agent(table, sizes)
    if what == "describe":
        _, table, name = request
        try:
            kind = registry().get(table, name)
        except PluginError as exc:
            return None, None, str(exc)
        family = getattr(kind, "family", "")
        return family, kind.summary, None
    raise ValueError(f"unknown request {what!r}")


#: The guest's own limit of a trial call: none (its parent stops it, counting the guest's
#: own time, see recloop._plugins.GuestTrials).
_NO_LIMIT = 365 * 86400.0


def _failed_answer(request: tuple, text: str):
    if request[0] == "estimator":
        return [("", f"expected a usable estimator, got {text}")]
    if request[0] == "agent":
        return None, "", [("kind", f"expected a usable agent, got {text}")]
    return None, None, text


def _trial_agent(table: dict, sizes: dict):
    """In the guest: ``(resolved table, family, [(key, message)])`` of a user's agent."""
    from recloop._plugins import try_agent

    key = "factory" if table.get("kind") == PYTHON_KIND else "kind"
    resolved = dict(table)
    if table.get("kind") != PYTHON_KIND:
        try:
            kind = registry().get("agents", table["kind"])
        except PluginError as exc:
            return None, "", [("kind", f"expected a usable agent kind, got {exc}")]
        if kind is not None and kind.params is not None:
            local = _Collected()
            resolved = _check_table(local, "", table, AGENT_KEYS + kind.params)
            if local.found:
                return None, "", local.found
    family, problem = try_agent(resolved, **sizes, timeout=_NO_LIMIT)
    if problem:
        return None, family, [(key, problem)]
    return resolved, family, []


class _Collected(_Problems):
    """In a guest: problems kept as ``(key, message)`` pairs for the parent."""

    def __init__(self):
        super().__init__("", trials=False)
        self.found: list = []

    def add(self, path: str, message: str) -> None:
        self.found.append((path, message))


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
                path = f"{prefix}sweep.{toml_key(key)}"
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
                check_estimators(problems, f"{prefix}{p.name}", ev[p.name], p.type.family)
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



def validate(data: Any, file: str, *, fitted: bool = False) -> Scenario:
    """Validate parsed TOML ``data``; raises :class:`ScenarioError` listing every problem.

    A world to be fitted to a log (``[world] calibrate_from``) is read but not fitted: the
    rules that need the fitted world (ticks within its horizon, ...) wait for ``fitted=True``,
    which the runner passes once it has fitted the world (before anything is written)."""
    with GuestTrials() as trials:  # users' code is tried there; ended with its processes
        return _validate(data, file, fitted, _Problems(file, trials))


def _validate(data: Any, file: str, fitted: bool, problems: _Problems) -> Scenario:
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


# --- the [world] section ------------------------------------------------------------------------


def _config_problem(problems: _Problems, prefix: str, exc: Exception) -> None:
    """A config's structured error (``ArgumentError``: field, rule, value) as a scenario
    problem naming the key."""
    from recloop_base.validation import ArgumentError

    if isinstance(exc, ArgumentError):
        problems.add(f"{prefix}{exc.name}", f"expected {exc.rule}, got {exc.got}")
    else:
        problems.add(prefix.rstrip("."), f"expected a valid world, got {type(exc).__name__}: "
                     f"{exc}")


def validate_world(problems: _Problems, raw: dict, horizon: int = 0) -> dict:
    if _calibrated.is_calibrated(raw):
        if horizon:
            problems.add("run.horizon", "expected no horizon with a fitted world (its horizon "
                         f"is the log's span), got {horizon}")
        return _calibrated.validate(problems, raw, _check_table, WORLD_KEYS[1:])
    presets = _worlds.presets()
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
    fields = config_fields(base)
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
    for p in config_fields(config):
        value = getattr(config, p.name)
        if value is not None:
            out[p.name] = list(value) if isinstance(value, tuple) else value
    if has_campaigns and all(c.items is not None for c in config.campaigns):
        out["campaigns"] = [{"start": c.start, "duration": c.duration, "reach": c.reach,
                             "items": list(c.items), "k": c.k, "boost": c.boost}
                            for c in config.campaigns]
    return out

