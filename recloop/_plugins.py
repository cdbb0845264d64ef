"""Users' agents and estimators in scenarios: resolving, building and trying them.

An agent table names its kind -- a built-in, a plugin's entry point, or ``kind = "python"``
with ``factory = "package.module:attribute"`` and ``params = {...}`` -- and an estimator
entry names a kind or an import path, or is a table ``{name, factory, params}``. The scenario
loader calls :func:`try_agent` and :func:`try_estimator` on every user-supplied one before
anything is written (so that a broken reference is one line at validation, not a traceback
an hour into a run); the runner calls :func:`agent_factory` and :func:`bind_estimator` in
the cells, with the cell's random streams.
"""

from __future__ import annotations

import inspect
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

__all__ = ["PYTHON_KIND", "EstimatorEntry", "agent_factory", "agent_kind", "agent_params",
           "bind_estimator", "estimator_entry", "try_agent", "try_estimator"]

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

    def factory(rng=None):
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


def try_agent(table: dict, *, n_actions: int = 5, context_dim: int = 3) -> tuple[str, str | None]:
    """Build a user's agent from its table and run ``agents.check_agent`` on it.

    Returns ``(family, problem)``: the family found by duck typing, and ``None`` or a line
    saying what failed (the key path is the caller's). Bandit agents are checked on
    problems of the world's size (``n_actions`` arms, ``context_dim`` features).
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
    try:
        agent = agent_factory(table)(np.random.default_rng(0))
    except Exception as exc:
        return "", f"expected a factory that builds an agent from {params!r}, got " \
                   f"{type(exc).__name__}: {exc}"
    family = agent_family_of(agent)
    if not family:
        return "", (f"expected an agent with act/update (a bandit) or fit/recommend (a "
                    f"recommender), got a {type(agent).__name__}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            check_agent(agent, n_actions=n_actions, context_dim=context_dim, rng=0)
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


def entry_name(entry) -> str | None:
    """The results name of an entry without resolving it (``None``: malformed)."""
    if isinstance(entry, str):
        return entry.rpartition(":")[2].rpartition(".")[2] if ":" in entry else entry
    if isinstance(entry, dict):
        if isinstance(entry.get("name"), str):
            return entry["name"]
        if isinstance(entry.get("factory"), str):
            return entry_name(entry["factory"])
    return None


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


def bind_estimator(entry: EstimatorEntry) -> Callable:
    """``call(log, x, *, rng)`` of an entry: the estimator function with its params (``rng``
    passed when it takes it), or an instance of its class built once with the params."""
    factory = entry.kind.factory
    if inspect.isclass(factory):
        fn, kw = factory(**entry.params), {}
    else:
        fn, kw = factory, dict(entry.params)
    takes_rng = _accepts(fn, "rng")

    def call(log, x, *, rng=None):
        return fn(log, x, **kw, rng=rng) if takes_rng else fn(log, x, **kw)

    call.__name__ = entry.name
    call.func, call.keywords = fn, kw  # like functools.partial: what the harness calls
    return call


_WHAT = {"static": "an estimator callable as estimator(log, action_dist, *, rng, **params)",
         "learning": "an evaluator callable as evaluator(log, make_agent, *, rng, **params)"}


def try_estimator(entry: EstimatorEntry, family: str) -> str | None:
    """Call a user's estimator once on a small problem; ``None`` or what failed."""
    import math

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
    try:
        call = bind_estimator(entry)
    except Exception as exc:
        return (f"expected a class that builds an estimator from {entry.params!r}, got "
                f"{type(exc).__name__}: {exc}")
    log, x = _small_problem(family)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = as_estimate(call(log, x, rng=np.random.default_rng(0)), "the estimator")
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
