"""Users' agents and estimators in scenarios: resolving, building and trying them.

An agent table names its kind -- a built-in, a plugin's entry point, or ``kind = "python"``
with ``factory = "package.module:attribute"`` and ``params = {...}`` -- and an estimator
entry names a kind or an import path, or is a table ``{name, factory, params}``. The scenario
validator (:mod:`recloop._validate`) tries every user-supplied one before anything is written
(so that a broken reference is one line at validation, not a traceback an hour into a run):
in a guest process (:class:`GuestTrials`), never in recloop's own, where users' code is
never imported; the runner calls :func:`agent_factory` and :func:`bind_estimator` in the
cells' guest processes, with the cell's random streams. Users' code runs behind the guards
of :mod:`recloop_base.guard` (exits, time limits, read-only inputs, implausible results).
"""

from __future__ import annotations

import contextlib
import inspect
import math
import warnings
from dataclasses import dataclass
from typing import Any, Callable

from recloop._registry import (
    AgentKind,
    EstimatorKind,
    PluginError,
    agent_family_of,
    kind_from_reference,
    registry,
)
from recloop._schema import entry_name
from recloop_base.guard import (
    TRIAL_TIMEOUT,
    UserCodeError,
    implausible,
    inputs_after,
    inputs_before,
    read_only,
    run_guarded,
    section,
)

__all__ = ["PYTHON_KIND", "EstimatorEntry", "GuestTrials", "agent_factory", "agent_kind",
           "agent_params", "bind_estimator", "check_estimators", "estimator_entry",
           "guest_paths", "is_plugin_agent", "is_plugin_entry", "problem_sizes",
           "set_guest_paths", "try_agent", "try_estimator", "users_code"]

#: The agent kind whose table names a factory by import path.
PYTHON_KIND = "python"

_AGENT_HEAD = ("name", "kind")


def agent_kind(table: dict) -> AgentKind:
    """The kind of a (valid) agent table; :class:`PluginError` when it cannot be loaded."""
    if table["kind"] == PYTHON_KIND:
        return kind_from_reference("agents", table["factory"])
    kind = registry().get("agents", table["kind"])
    if kind is None:
        raise PluginError(f"unknown agent kind {table['kind']!r}")
    return kind


def agent_params(table: dict, kind: AgentKind | None = None) -> dict:
    """The factory's keyword arguments of an agent table."""
    if table["kind"] == PYTHON_KIND:
        return dict(table.get("params") or {})
    return {k: v for k, v in table.items() if k not in _AGENT_HEAD}


def agent_factory(table: dict) -> Callable:
    """``factory(rng) -> agent``: builds the agent from its parameters, then ``reset(rng)``
    (the protocol's seeding; a factory whose agents have no ``reset`` gets ``rng=`` itself
    when its signature takes it)."""
    kind = agent_kind(table)
    params = agent_params(table, kind)
    build = kind.factory
    takes_rng = _accepts(build, "rng") and not _has_reset(build)
    what = f"agent {table['name']!r} ({kind.origin})"
    guest = kind.origin != "built-in"

    def factory(rng=None):
        with section(what) if guest else contextlib.nullcontext():
            agent = build(**params, rng=rng) if takes_rng else build(**params)
            if callable(getattr(agent, "reset", None)):
                agent.reset(rng)
        return agent

    return factory


def _has_reset(build) -> bool:
    return inspect.isclass(build) and callable(getattr(build, "reset", None))


def _accepts(fn, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is p.VAR_KEYWORD for p in params)


def _signature_problem(fn, args: tuple, kwargs: dict, what: str) -> str | None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None  # builtins without a signature: the trial call decides
    try:
        sig.bind(*args, **kwargs)
    except TypeError as exc:
        return f"expected {what}, got the signature {sig} ({exc})"
    return None


def problem_sizes(world: dict | None) -> dict:
    """Problem sizes for checking users' bandit agents on a resolved ``[world]``: its arms
    and features as :func:`try_agent`'s ``n_actions`` and ``context_dim`` (``{}``: none)."""
    if not world:
        return {}
    from recloop._worlds import world_config

    try:
        config = world_config(world)
    except Exception:
        return {}
    if hasattr(config, "n_arms") and hasattr(config, "dim"):
        return {"n_actions": config.n_arms, "context_dim": config.dim}
    return {}


def try_agent(table: dict, *, n_actions: int = 5, context_dim: int = 3,
              timeout: float = TRIAL_TIMEOUT) -> tuple[str, str | None]:
    """Build a user's agent from its table and run ``agents.check_agent`` on it.

    Returns ``(family, problem)``: the family found by duck typing, and ``None`` or a line
    saying what failed (the key path is the caller's). Bandit agents are checked on
    problems of the world's size (``n_actions`` arms, ``context_dim`` features). The agent's
    code runs guarded (:func:`recloop_base.guard.run_guarded`): ``sys.exit``, ``os._exit`` and a
    call past ``timeout`` seconds are problems, not the end of the process.
    """
    import numpy as np

    from agents import AgentCheckError, check_agent

    try:
        kind = agent_kind(table)
    except PluginError as exc:
        return "", str(exc)
    params = agent_params(table, kind)
    problem = _signature_problem(kind.factory, (), params, "a factory that takes the "
                                 "table's params as keyword arguments")
    if problem:
        return "", problem
    what = f"agent {table.get('name')!r} ({kind.origin})"
    try:
        agent = run_guarded(agent_factory(table), np.random.default_rng(0), what=what,
                            timeout=timeout)
    except UserCodeError as exc:
        return "", f"expected a factory that builds an agent from {params!r}, got: {exc}"
    except Exception as exc:
        return "", f"expected a factory that builds an agent from {params!r}, got " \
                   f"{type(exc).__name__}: {exc}"
    family = agent_family_of(agent)
    if not family:
        return "", (f"expected an agent with act/update (a bandit) or fit/recommend (a "
                    f"recommender), got a {type(agent).__name__}")

    def trial():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            check_agent(agent, n_actions=n_actions, context_dim=context_dim, rng=0)

    try:
        run_guarded(trial, what=what, timeout=timeout)
    except UserCodeError as exc:
        return family, f"expected an agent that passes agents.check_agent, got: {exc}"
    except AgentCheckError as exc:
        return family, f"expected an agent that passes agents.check_agent, got: {exc}"
    except Exception as exc:
        return family, (f"expected an agent that passes agents.check_agent, got "
                        f"{type(exc).__name__}: {exc}")
    return family, None


@dataclass(frozen=True)
class EstimatorEntry:
    """One resolved entry of an evaluation's ``estimators`` list: the results' ``variant``
    name, the kind and the keyword parameters."""

    name: str
    kind: EstimatorKind
    params: dict
    builtin_name: str | None  # the entry was a plain built-in name (no params)


def estimator_entry(entry, family: str) -> EstimatorEntry:
    """Resolve an ``estimators`` entry; :class:`PluginError` whose ``key`` is the sub-key
    at fault (``""``, ``"factory"``, ``"params"``, ``"name"``)."""
    import re

    from recloop._schema import NAME_PATTERN

    if isinstance(entry, str):
        factory, params, name, builtin = entry, {}, entry_name(entry), entry
    elif isinstance(entry, dict):
        unknown = sorted(set(entry) - {"name", "factory", "params"})
        if unknown:
            raise PluginError(f"expected the keys name, factory, params, got unknown key "
                              f"{unknown[0]!r}", key=unknown[0])
        factory = entry.get("factory")
        if not isinstance(factory, str):
            raise PluginError("expected a kind name or an import path \"package.module:"
                              f"attribute\", got {factory!r}", key="factory")
        params = entry.get("params", {})
        if not isinstance(params, dict):
            raise PluginError(f"expected a table of keyword arguments, got {params!r}",
                              key="params")
        name, builtin = entry_name(entry), None
        if not isinstance(name, str) or not re.fullmatch(NAME_PATTERN, name):
            raise PluginError(f"expected a name of letters, digits, '_', '-', '.', got "
                              f"{entry.get('name')!r}", key="name")
    else:
        raise PluginError(f"expected a name, an import path or a table, got {entry!r}")
    key = "factory" if isinstance(entry, dict) else ""
    if ":" in factory:
        try:
            kind = kind_from_reference("estimators", factory)
        except PluginError as exc:
            raise PluginError(str(exc), key=key) from None
    else:
        try:
            kind = registry().get("estimators", factory)
        except PluginError as exc:
            raise PluginError(str(exc), key=key) from None
        if kind is None:
            import difflib

            known = sorted(k for k, v in registry().estimators.items()
                           if v.family in ("", family))
            close = difflib.get_close_matches(factory, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise PluginError(f"expected one of {', '.join(map(repr, known))} or an import "
                              f"path \"package.module:attribute\"{hint}, got {factory!r}",
                              key=key)
    if kind.family and kind.family != family:
        raise PluginError(f"expected a {family} estimator, got {factory!r}, a {kind.family} "
                          "one", key=key)
    return EstimatorEntry(name=name, kind=kind, params=dict(params),
                          builtin_name=builtin if kind.origin == "built-in" else None)


def check_estimators(problems, path: str, entries: list, family: str) -> None:
    """Resolve and try every entry of an evaluation's ``estimators`` list (kinds, import
    paths, tables): each problem goes to ``problems.add(key_path, message)``; results
    names must be distinct. recloop's own kinds are resolved here (those with ``params``
    tried on a small problem); users' code (:func:`is_plugin_entry`) is resolved and tried
    in the guest process ``problems.trials`` (:class:`GuestTrials`), a call having
    ``problems.trial_timeout`` seconds."""
    import re

    from recloop._schema import NAME_PATTERN

    seen: set = set()
    for i, entry in enumerate(entries):
        here = f"{path}[{i}]"
        if is_plugin_entry(entry):
            name = entry_name(entry)
            if isinstance(entry, dict) and not (isinstance(name, str)
                                                and re.fullmatch(NAME_PATTERN, name)):
                problems.add(f"{here}.name", f"expected a name of letters, digits, '_', '-', "
                             f"'.', got {entry.get('name')!r}")
                continue
            for key, message in problems.trials.estimator(entry, family,
                                                           problems.trial_timeout):
                problems.add(f"{here}.{key}" if key else here, message)
        else:
            try:
                resolved = estimator_entry(entry, family)
            except PluginError as exc:
                problems.add(f"{here}.{exc.key}" if exc.key else here, str(exc))
                continue
            name = resolved.name
            if resolved.params:  # recloop's own code: tried here
                problem = try_estimator(resolved, family, guarded=False)
                if problem:
                    problems.add(f"{here}.factory" if isinstance(entry, dict) else here,
                                 problem)
        if name in seen:
            problems.add(here, f"expected distinct estimator names, got {name!r} "
                         "again (give the table a `name`)")
        seen.add(name)


def check_estimator_entry(entry, family: str, timeout: float) -> list[tuple[str, str]]:
    """In a guest process: resolve and try one entry of users' code; its problems as
    ``(sub-key, message)`` (``""``: the entry itself)."""
    try:
        resolved = estimator_entry(entry, family)
    except PluginError as exc:
        return [(exc.key, str(exc))]
    problem = try_estimator(resolved, family, timeout=timeout)
    if problem:
        return [("factory" if isinstance(entry, dict) else "", problem)]
    return []


def bind_estimator(entry: EstimatorEntry, *, on_problem: Callable | None = None) -> Callable:
    """``call(log, x, *, rng)`` of an entry: the estimator function with its params (``rng``
    passed when it takes it), or an instance of its class built once with the params.

    A plugin (any origin but built-in) is called as a guest (:mod:`recloop_base.guard`): on
    read-only views of ``log`` and ``x``, inside a :func:`~recloop_base.guard.section`; a change
    of the shared inputs raises :class:`~recloop_base.guard.UserCodeError` naming it, and an
    implausible estimate is reported to ``on_problem(what, ValueError)`` and replaced by
    ``nan`` (without ``on_problem``: the ``ValueError`` is raised).
    """
    factory = entry.kind.factory
    guest = entry.kind.origin != "built-in"
    what = f"estimator {entry.name!r} ({entry.kind.origin})"
    with section(what) if guest else contextlib.nullcontext():
        if inspect.isclass(factory):
            fn, kw = factory(**entry.params), {}
        else:
            fn, kw = factory, dict(entry.params)
    takes_rng = _accepts(fn, "rng")

    def plain(log, x, *, rng=None):
        return fn(log, x, **kw, rng=rng) if takes_rng else fn(log, x, **kw)

    def guarded(log, x, *, rng=None):
        before = inputs_before(log, x)
        with section(what):
            out = plain(read_only(log), read_only(x), rng=rng)
        if inputs_after(log, x) != before:
            raise UserCodeError(f"{what} changed the inputs it shares with the other "
                                "estimators (the log or action_dist, in place): every estimate "
                                "after it would be computed on changed data")
        problem = _implausible(out, log)
        if problem is None:
            return out
        exc = ValueError(f"returned {problem}")
        if on_problem is None:
            raise exc
        from evaluators import Estimate

        on_problem(what, exc)
        return Estimate(math.nan, math.nan, math.nan, math.nan, int(getattr(out, "n", 0) or 0))

    call = guarded if guest else plain
    call.__name__ = entry.name
    call.func, call.keywords = fn, kw  # like functools.partial: what the harness calls
    return call


def _implausible(out, log) -> str | None:
    """:func:`recloop_base.guard.implausible` of what an estimator returned (an Estimate-like
    object or a number; anything else is the caller's ``TypeError``)."""
    value = getattr(out, "value", out)
    try:
        numbers = [float(value)] + [float(getattr(out, k, math.nan))
                                    for k in ("stderr", "ci_low", "ci_high")]
    except (TypeError, ValueError, OverflowError):
        return None
    return implausible(*numbers, log)


_WHAT = {"static": "an estimator callable as estimator(log, action_dist, *, rng, **params)",
         "learning": "an evaluator callable as evaluator(log, make_agent, *, rng, **params)"}


def try_estimator(entry: EstimatorEntry, family: str, *, timeout: float = TRIAL_TIMEOUT,
                  guarded: bool = True) -> str | None:
    """Call an estimator once on a small problem (users' code guarded, see
    :func:`try_agent`; ``guarded=False``: recloop's own, called as it is); ``None`` or what
    failed."""
    import numpy as np

    from recloop.experiments._common import as_estimate

    factory = entry.kind.factory
    if not inspect.isclass(factory):
        kw = dict(entry.params)
        if _accepts(factory, "rng"):
            kw["rng"] = None
        problem = _signature_problem(factory, (None, None), kw, _WHAT[family])
        if problem:
            return problem
    what = f"estimator {entry.name!r} ({entry.kind.origin})"

    def run(fn, *args):
        if not guarded:
            return fn(*args)
        return run_guarded(fn, *args, what=what, timeout=timeout)

    try:
        call = run(bind_estimator, entry)
    except UserCodeError as exc:
        return f"expected a class that builds an estimator from {entry.params!r}, got: {exc}"
    except Exception as exc:
        return (f"expected a class that builds an estimator from {entry.params!r}, got "
                f"{type(exc).__name__}: {exc}")
    log, x = _small_problem(family)

    def trial():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return as_estimate(call(log, x, rng=np.random.default_rng(0)), "the estimator")

    try:
        est = run(trial)
    except UserCodeError as exc:
        return f"expected {_WHAT[family]} that runs on a small log, got: {exc}"
    except Exception as exc:
        return f"expected {_WHAT[family]} that runs on a small log, got " \
               f"{type(exc).__name__}: {exc}"
    if math.isinf(est.value):
        return f"expected a finite estimate on a small log, got {est.value}"
    return None


def _small_problem(family: str) -> tuple[Any, Any]:
    import numpy as np

    if family == "static":
        from recloop.testing import random_bandit_problem

        problem = random_bandit_problem(np.random.default_rng(0), n_actions=3, dim=2)
        return problem.sample(50, 1)
    import agents
    import simulator

    log, _ = simulator.collect_log(simulator.preset("bred_linear"), 50, rng=0)

    def make_agent(rng=None):
        agent = agents.UniformRandom()
        agent.reset(rng)
        return agent

    return log, make_agent


def is_plugin_entry(entry) -> bool:
    """Whether an ``estimators`` entry is users' code (an import path, or a kind that is not
    recloop's), read without importing anything."""
    ref = entry.get("factory") if isinstance(entry, dict) else entry
    if not isinstance(ref, str):
        return False
    if ":" in ref:
        return True
    kind = registry().estimators.get(ref)
    return kind is not None and kind.origin != "built-in"


def is_plugin_agent(table) -> bool:
    """Whether an agent table is users' code (``kind = "python"`` or a plugin's kind), read
    without importing anything."""
    if not isinstance(table, dict):
        return False
    ref = table.get("kind")
    if not isinstance(ref, str):  # the validator names a kind that is not a string
        return False
    if ref == PYTHON_KIND:
        return True
    kind = registry().agents.get(ref)
    return kind is not None and kind.origin != "built-in"


def users_code(data: dict, evaluation: str, agent: str | None = None) -> list[str]:
    """What users' code a cell of a resolved scenario runs -- its agents and estimators that
    are plugins (import paths, entry points), each as ``"agent 'mine' (import path
    m:Cls)"`` -- without importing anything (``[]``: the cell runs recloop's code only)."""
    reg = registry()
    ev = next(e for e in data["evaluations"] if e["name"] == evaluation)
    names = [agent] if agent is not None else list(ev.get("agents") or ())
    found = []
    for table in data.get("agents") or ():
        if table.get("name") not in names or not is_plugin_agent(table):
            continue
        if table.get("kind") == PYTHON_KIND:
            found.append(f"agent {table['name']!r} (import path {table.get('factory')})")
        else:
            found.append(f"agent {table['name']!r} ({reg.agents[table['kind']].origin})")
    for entry in ev.get("estimators") or ():
        if not is_plugin_entry(entry):
            continue
        ref = entry.get("factory") if isinstance(entry, dict) else entry
        origin = f"import path {ref}" if ":" in ref else reg.estimators[ref].origin
        found.append(f"estimator {entry_name(entry)!r} ({origin})")
    return found


# --- validation's guest process -------------------------------------------------------------------

#: Folders put first on the import path of guest processes (``--path``): the command line's.
_GUEST_PATHS: list = []


def set_guest_paths(paths) -> None:
    """The folders (``--path``) guest processes put first on their import path; recloop's own
    process never has them on its own."""
    _GUEST_PATHS[:] = [str(p) for p in paths]


def guest_paths() -> list:
    return list(_GUEST_PATHS)


#: Seconds of its own time a guest has to start (a fresh interpreter importing recloop).
_GUEST_STARTUP = 120.0


class GuestTrials:
    """Validation's guest process: users' agents and estimators are imported and tried
    there, one request at a time (:func:`recloop._validate.trial_server` answers), never in
    this process. Started on the first request, ended with every process it started by
    :meth:`close` (``with GuestTrials() as trials:``).

    A call of users' code has ``timeout`` seconds of the guest's own time
    (:meth:`recloop_base.guard.Guest.own_seconds`); a guest that runs past it, or whose
    process ends (``os._exit`` from a thread of its own, a crash), is killed and the
    request answered with a problem naming the users' code it was in; the next request
    starts a fresh guest.
    """

    def __init__(self, paths=None):
        self.paths = guest_paths() if paths is None else [str(p) for p in paths]
        self.proc = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc = None

    def _ask(self, request: tuple, timeout: float, what: str):
        """``("answer", value)``, or ``("problem", line)`` when the guest ran past
        ``timeout`` or ended."""
        from multiprocessing.connection import wait

        from recloop_base.guard import Guest, UnsafeMessage, death_message

        if self.proc is not None and not self.proc.alive():
            self.close()
        if self.proc is None:
            self.proc = Guest("recloop._validate:trial_server", guest=True, paths=self.paths)
        proc = self.proc
        proc.send(request)
        proc.mark()
        started, section, last = False, None, ""
        while True:
            wait(proc.waitables, timeout=0.5)
            try:
                while proc.poll():
                    msg = proc.recv()
                    proc.mark()
                    if not isinstance(msg, tuple) or not msg:
                        raise UnsafeMessage("a message that is not one of the protocol's")
                    if msg[0] == "start":
                        started = True
                    elif msg[0] == "enter":
                        section = str(msg[1])[:300] if msg[1] else None
                        last = section or last
                    elif msg[0] == "answer" and len(msg) == 2:
                        return "answer", msg[1]
                    else:
                        raise UnsafeMessage("a message that is not one of the protocol's")
            except (EOFError, OSError):
                pass
            except UnsafeMessage as exc:
                self.close()
                return "problem", f"{section or last or what}: its process sent {exc}"
            who = section or last or what
            if not proc.alive():
                code = proc.exitcode
                self.close()
                return "problem", (f"{who} ended its process: it "
                                   f"{death_message(code, guest=True)}".replace(
                                       " in the middle of the cell", ""))
            limit = timeout if started else max(timeout, _GUEST_STARTUP)
            if proc.own_seconds() > limit:
                self.close()
                if not started:
                    return "problem", f"the guest process for {what} did not start within " \
                                      f"{limit:g} s"
                return "problem", (f"{who} did not return within {timeout:g} s (the time "
                                   "limit of a trial call at validation)")

    def agent(self, table: dict, sizes: dict, timeout: float):
        """``(resolved table or None, family, [(key, message), ...])`` of a user's agent
        table: its kind loaded, its keys checked against the kind's parameters when it
        declares them, the agent built and checked (:func:`try_agent`)."""
        what = f"agent {table.get('name')!r}"
        status, value = self._ask(("agent", table, sizes, timeout), timeout, what)
        key = "factory" if table.get("kind") == PYTHON_KIND else "kind"
        if status == "problem":
            return None, "", [(key, f"expected an agent that passes agents.check_agent, "
                                    f"got: {value}")]
        try:
            resolved, family, problems = value
            problems = [(str(k), str(m)) for k, m in problems]
            assert resolved is None or isinstance(resolved, dict)
            assert family in ("", "bandit", "recommender", "test")
        except (TypeError, ValueError, AssertionError):
            return None, "", [(key, "expected an agent, got an answer of the wrong shape "
                                    "from its guest process")]
        return resolved, family, problems

    def estimator(self, entry, family: str, timeout: float) -> list[tuple[str, str]]:
        """The problems of one estimator entry of users' code
        (:func:`check_estimator_entry`, in the guest)."""
        what = f"estimator {entry_name(entry)!r}"
        status, value = self._ask(("estimator", entry, family, timeout), timeout, what)
        key = "factory" if isinstance(entry, dict) else ""
        if status == "problem":
            return [(key, f"expected {_WHAT[family]} that runs on a small log, got: {value}")]
        try:
            return [(str(k), str(m)) for k, m in value]
        except (TypeError, ValueError):
            return [(key, "expected an estimator, got an answer of the wrong shape from its "
                          "guest process")]

    def describe(self, table: str, name: str, timeout: float = TRIAL_TIMEOUT):
        """``(family, summary, problem)`` of a plugin's kind (``recloop list``)."""
        status, value = self._ask(("describe", table, name), timeout,
                                  f"the {table[:-1]} kind {name!r}")
        if status == "problem":
            return "", "", value
        try:
            family, summary, problem = (str(v) if v is not None else None for v in value)
        except (TypeError, ValueError):
            return "", "", "an answer of the wrong shape from its guest process"
        return family, summary, problem


def path_problems(paths) -> list[str]:
    """Problems of ``--path`` folders: a module of the folder that would shadow a module
    recloop or its dependencies import (``logging.py``, ``csv.py``, ``numpy/``): put first
    on the import path, it would replace theirs in recloop and in every worker. One line per
    shadowing file, naming it and what it shadows."""
    import importlib.machinery
    import sys
    from pathlib import Path

    problems = []
    needed = None
    for folder in paths:
        try:
            entries = sorted(Path(folder).iterdir())
        except OSError:
            continue  # a missing folder is the caller's problem
        for entry in entries:
            name = _module_name(entry)
            if name is None:
                continue
            if name not in sys.stdlib_module_names and name not in _OURS:
                # importable from elsewhere (installed)? most plugin modules are not
                here = Path(folder).resolve()
                others = [p for p in sys.path if _resolved(p) != here]
                try:
                    spec = importlib.machinery.PathFinder.find_spec(name, others)
                except (ImportError, ValueError):
                    spec = None
                if spec is None:
                    continue
            if needed is None:
                needed = _needed_modules()
            if name in needed:
                problems.append(f"--path {folder}: expected a folder whose modules do not "
                                f"shadow those recloop needs, got {entry.name} (it would "
                                f"replace {needed[name]}); rename it or move it elsewhere")
    return problems


def _module_name(entry) -> str | None:
    """The top-level module a folder entry provides on the import path, if any."""
    if entry.is_dir():
        return entry.name if (entry / "__init__.py").is_file() else None
    if entry.suffix == ".py":
        return entry.stem
    if entry.suffix in (".so", ".pyd"):
        return entry.name.split(".")[0]
    return None


def _needed_modules() -> dict[str, str]:
    """Top-level module names recloop may import, and whose they are: the standard
    library, recloop's own packages, and the modules of every installed distribution that
    recloop requires (directly or through its requirements, extras included)."""
    import re
    import sys
    from importlib import metadata

    found = {m: f"Python's {m!r}" for m in sys.stdlib_module_names}
    seen, todo = set(), ["recloop"]
    while todo:
        dist = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if dist in seen:
            continue
        seen.add(dist)
        try:
            requires = metadata.requires(dist) or []
        except metadata.PackageNotFoundError:
            continue
        todo += [re.split(r"[\s;<>=!~\[(]", r, maxsplit=1)[0] for r in requires]
    for module, dists in metadata.packages_distributions().items():
        owner = next((d for d in dists if re.sub(r"[-_.]+", "-", d).lower() in seen), None)
        if owner is not None and module not in found:
            found[module] = f"{owner}'s {module!r}"
    for ours in _OURS:
        found[ours] = f"recloop's own {ours!r}"
    return found


_OURS = ("recloop", "recloop_base", "simulator", "agents", "evaluators")


def _resolved(entry: str):
    from pathlib import Path

    try:
        return Path(entry or ".").resolve()
    except (OSError, RuntimeError):
        return None
