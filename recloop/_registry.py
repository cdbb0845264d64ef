"""The registry: one table of everything a scenario may name.

Three kinds of entries, each a frozen dataclass:

* :class:`EvaluationKind` -- an evaluation (``[[evaluations]] kind = ...``): its parameters,
  the callable that runs one cell, cross-key rules and figures. Each experiment module
  declares its own (``recloop.experiments``), next to the function it runs.
* :class:`AgentKind` -- an agent (``[[agents]] kind = ...``): a class or function building
  the agent from keyword parameters.
* :class:`EstimatorKind` -- an estimator an evaluation may take in its ``estimators`` list:
  a static-policy estimator ``estimator(log, action_dist, *, rng)`` or a learning-policy
  evaluator ``evaluator(log, make_agent, *, rng)``.

Built-ins and plugins enter the table the same way, through :meth:`Registry.add`: the
built-in kinds are declared in the modules of :data:`BUILTIN_MODULES` (``recloop._builtins``,
``recloop._selfcheck`` and the experiments), which the registry reads by name; installed
packages add theirs under the entry-point groups ``recloop.agents`` and
``recloop.estimators`` (:data:`ENTRY_POINT_GROUPS`), whose object is a class or function (or
an :class:`AgentKind` / :class:`EstimatorKind` for a declared parameter schema). A plugin
kind whose name is already taken is an error. The third door, an import path
``package.module:attribute`` in a scenario file, builds the same kinds on the fly
(:func:`kind_from_reference`).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from recloop._schema import REFERENCE_PATTERN, Param

__all__ = [
    "AGENT_FAMILIES", "BUILTIN_MODULES", "ENTRY_POINT_GROUPS", "ESTIMATOR_FAMILIES", "AgentKind",
    "Chunks", "EstimatorKind", "EvaluationKind", "PluginError", "Registry", "agent_family_of",
    "kind_from_reference", "registry", "resolve_reference",
]

#: Families of agents (an evaluation accepts one family).
AGENT_FAMILIES = ("bandit", "recommender", "test")
#: Families of estimators: ``static`` estimate a fixed policy from ``action_dist``,
#: ``learning`` evaluate a learning agent from its factory.
ESTIMATOR_FAMILIES = ("static", "learning")
#: Entry-point group of installed plugins, per table.
ENTRY_POINT_GROUPS = {"agents": "recloop.agents", "estimators": "recloop.estimators"}


class PluginError(Exception):
    """A plugin or import path cannot be used; the message says why in one line, ``key``
    names the sub-key at fault (``""``: the entry itself)."""

    def __init__(self, message: str, *, key: str = ""):
        super().__init__(message)
        self.key = key


@dataclass(frozen=True)
class AgentKind:
    """An agent a scenario can name by ``kind``.

    ``factory(**params)`` builds the agent (a class or a function); the harness then calls
    ``agent.reset(rng)`` with a stream of the cell. ``params`` declares the keys of the agent
    table (``None``: whatever keyword arguments the factory accepts, checked by building the
    agent at validation). ``family`` is ``"bandit"``, ``"recommender"`` or ``"test"``
    (``""``: found by duck typing on the built agent). ``by_evaluation``: the evaluation
    builds the agent itself from its world (``constant_agreeing``).
    """

    name: str
    factory: Callable | None
    family: str = ""
    summary: str = ""
    params: tuple[Param, ...] | None = ()
    origin: str = "built-in"
    by_evaluation: bool = False

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params or () if p.name == name), None)


@dataclass(frozen=True)
class EstimatorKind:
    """An estimator an evaluation can name in its ``estimators`` list.

    ``factory`` is the estimator itself (a function, called with the table's ``params`` as
    keyword arguments on every call) or a class built once per cell with ``params`` whose
    instances are called. Static estimators are called ``estimator(log, action_dist, *,
    rng)``, learning-policy evaluators ``evaluator(log, make_agent, *, rng)``; ``rng`` is
    passed when the signature takes it. Either may return an ``evaluators.Estimate`` or a
    float.
    """

    name: str
    factory: Callable | None
    family: str = ""
    summary: str = ""
    params: tuple[Param, ...] | None = None
    origin: str = "built-in"


@dataclass(frozen=True)
class Chunks:
    """How the cells of an evaluation kind split into chunks of logs that run apart (on
    every worker of a run) and merge into the cell's result, bit for bit the whole cell's.

    Each function takes the cell's :class:`recloop._cells.CellContext`. ``n_logs(cell)``:
    the number of logs of the cell; ``cost(cell)``: the estimated seconds of one of its
    logs on one core of an idle machine (rough -- the built-in kinds' are within a factor
    of 2 to 5: it decides how the cells are cut, never a number; see
    :func:`recloop._cells.plan_units`);
    ``run(cell, start, stop)``: a picklable *part* holding the per-log
    values of logs ``start`` to ``stop - 1`` (in a worker: the users' code runs here);
    ``merge(cell, parts)``: the cell's ``Measurement`` rows from the parts of consecutive
    ranges covering every log, in log order (in the runner's process: recloop's code only;
    it records the per-log estimates with :meth:`CellContext.per_log`).

    The contract that makes chunking exact: log ``i``'s values depend on ``i`` and the
    cell alone (its random streams keyed by ``i``, never by its position in a chunk), and
    ``merge`` reads the parts as one list of logs, so that any boundaries give the same
    bytes. A whole cell is ``merge(cell, [run(cell, 0, n_logs)])`` (:meth:`whole`): one
    code path whether a cell runs whole or in chunks.
    """

    n_logs: Callable
    cost: Callable
    run: Callable
    merge: Callable

    def whole(self, cell) -> list:
        """The cell's rows computed in one piece (``EvaluationKind.run`` of such a kind)."""
        return self.merge(cell, [self.run(cell, 0, self.n_logs(cell))])


@dataclass(frozen=True)
class EvaluationKind:
    """An evaluation a scenario can run, declared once beside the function that runs it.

    ``run(cell)`` runs one cell (a :class:`recloop._cells.CellContext`) and returns
    ``Measurement`` rows. ``per_agent``: cells are split by agent (else one cell runs all the
    evaluation's agents on one world, so they meet the same draws). ``agent_family``: the
    family of agents it accepts (``""``: none). ``check(params, agents, world)`` yields
    ``(key, message)`` for cross-key rules; ``figures(rows, out_dir, world)`` returns PNG
    paths, the kind's figure of record first -- the one designed to answer its question,
    shown on the report's first screen (``figures_only``: where it draws any, they replace
    the report's generic figures of that evaluation); ``report(rows, scenario, summary)``
    returns Markdown lines of the kind's own section of ``report.md``
    (e.g. a leaderboard; ``rows`` are the evaluation's result rows as dicts, ``scenario``
    the resolved scenario, ``summary`` the :func:`recloop.summarize` rows of its per-log
    estimates: a leaderboard shows those numbers, the ones of every other summary).
    ``unit``: what one estimate is computed from -- ``"log"``: the experiment records its
    per-log estimates itself (it receives :meth:`CellContext.per_log`); ``"seed"``: each
    row of a cell is one estimate, the seed is the log. ``function`` is the
    Python function behind it and ``python_kwargs(params)`` turns scenario values into its
    keyword arguments (identity when ``None``): the tests check that the function's defaults
    are the parameters' defaults. ``resources(params, world)`` estimates the peak memory of
    one cell's largest arrays from the sizes that drive it (``params``: one sweep
    combination): bytes, or a mapping ``"keys: what" -> bytes`` naming the keys behind each
    part (see :mod:`recloop._limits`); ``recloop run`` refuses a scenario whose cells need
    more than the machine has (``--force`` runs it anyway). ``headline``: the per-log
    metric(s) the summaries of the report and of the CLI show first (a name, or a name
    followed by ``@k``: ``loo_hit`` matches ``loo_hit@5``). ``chunks``: a :class:`Chunks`
    when the kind's cells are loops over independent logs that may run in chunks on
    several workers (``None``: a cell always runs whole). ``apart``: each row is one
    agent's (column ``agent``) for one estimator (``variant``) or for none, and computed
    without the others' -- so that the harness may compute recloop's agents and estimators
    in a process apart from users' (:func:`recloop._cells.split_cell`); ``False`` for a
    kind whose rows compare its agents or estimators with each other (a ranking): a cell of
    it that runs users' code runs whole in their guest process.
    """

    name: str
    summary: str
    run: Callable
    params: tuple[Param, ...] = ()
    per_agent: bool = True
    agent_family: str = "bandit"
    needs_world: bool = False
    min_agents: int = 1
    check: Callable | None = None
    figures: Callable | None = None
    figures_only: bool = True
    report: Callable | None = None
    function: Callable | None = None
    python_kwargs: Callable[[dict], dict] | None = None
    origin: str = "built-in"
    resources: Callable | None = None
    headline: tuple[str, ...] = ()
    unit: str = "seed"
    chunks: Chunks | None = None
    apart: bool = True

    def __post_init__(self):
        if self.unit not in ("log", "seed"):
            raise ValueError(f"`unit` must be 'log' or 'seed'; got {self.unit!r}.")

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)


_TABLES = {AgentKind: "agents", EstimatorKind: "estimators", EvaluationKind: "evaluations"}


@dataclass
class Registry:
    """The one table: ``evaluations``, ``agents`` and ``estimators`` by name; ``problems``
    lists plugin entries that could not be added (one line each)."""

    evaluations: dict[str, EvaluationKind] = field(default_factory=dict)
    agents: dict[str, AgentKind] = field(default_factory=dict)
    estimators: dict[str, EstimatorKind] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    _lazy: dict[tuple[str, str], Any] = field(default_factory=dict, repr=False)

    def add(self, kind) -> None:
        """Add a kind; a name already taken raises :class:`PluginError`."""
        table = getattr(self, _TABLES[type(kind)])
        if kind.name in table:
            raise PluginError(f"{_TABLES[type(kind)][:-1]} kind {kind.name!r} from "
                              f"{kind.origin} clashes with the {table[kind.name].origin} kind "
                              f"of the same name")
        table[kind.name] = kind

    def get(self, table: str, name: str):
        """The kind ``name`` of ``table``, loading a plugin's object on first use;
        ``None`` if there is no such kind. A plugin that fails to load raises
        :class:`PluginError`."""
        kind = getattr(self, table).get(name)
        if kind is not None and getattr(kind, "factory", True) is None:
            kind = self._load(table, kind)
        return kind

    def _load(self, table: str, kind):
        from recloop_base.guard import UserCodeError, run_guarded

        ep = self._lazy[table, kind.name]
        what = f"entry point {kind.name!r} ({ep.value}) of group {ep.group!r}"
        try:
            obj = run_guarded(ep.load, what=what)
        except UserCodeError as exc:  # sys.exit or os._exit at import, or an import that hangs
            raise PluginError(f"{exc} while loading") from None
        except Exception as exc:
            raise PluginError(f"{what} failed to load: {type(exc).__name__}: {exc}") from None
        loaded = _as_kind(table, kind.name, obj, origin=kind.origin)
        getattr(self, table)[kind.name] = loaded
        return loaded


def _as_kind(table: str, name: str, obj, *, origin: str):
    """The kind of a plugin object: a declared kind as is (renamed), else a class or
    function wrapped with an open parameter schema."""
    cls = AgentKind if table == "agents" else EstimatorKind
    if isinstance(obj, cls):
        return replace(obj, name=name, origin=origin)
    if not callable(obj):
        raise PluginError(f"{origin} is a {type(obj).__name__}, not a class or a function")
    summary = (inspect.getdoc(obj) or "").strip().split("\n")[0]
    family = agent_family_of(obj) if cls is AgentKind and inspect.isclass(obj) else ""
    return cls(name=name, factory=obj, family=family, summary=summary, params=None,
               origin=origin)


def agent_family_of(obj) -> str:
    """``"bandit"`` or ``"recommender"`` by duck typing (a class or an instance); ``""``."""
    if all(callable(getattr(obj, m, None)) for m in ("act", "update")):
        return "bandit"
    if all(callable(getattr(obj, m, None)) for m in ("fit", "recommend")):
        return "recommender"
    return ""


def resolve_reference(reference: str):
    """The object named by ``package.module:attribute``; :class:`PluginError` saying which
    part is missing."""
    import re

    if not isinstance(reference, str) or not re.fullmatch(REFERENCE_PATTERN, reference):
        raise PluginError(f"expected an import path \"package.module:attribute\", got "
                          f"{reference!r}")
    from recloop_base.guard import UserCodeError, run_guarded

    module_name, _, attr = reference.partition(":")
    try:
        obj = sys.modules.get(module_name) or run_guarded(
            importlib.import_module, module_name, what=f"module {module_name!r} of "
            f"{reference!r}")
    except UserCodeError as exc:  # sys.exit or os._exit at import, or an import that hangs
        raise PluginError(f"expected an importable module, got {reference!r}: {exc} while "
                          "being imported") from None
    except ModuleNotFoundError as exc:
        missing = exc.name or module_name
        raise PluginError(f"expected an importable module, got {reference!r}: no module "
                          f"named {missing!r} (is its folder on the path? use --path DIR)"
                          ) from None
    except Exception as exc:
        raise PluginError(f"expected an importable module, got {reference!r}: importing "
                          f"{module_name!r} raised {type(exc).__name__}: {exc}") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise PluginError(f"expected an attribute of module {module_name!r}, got "
                              f"{reference!r}: it has no attribute {part!r}") from None
    if not callable(obj):
        raise PluginError(f"expected a class or a function, got {reference!r}: a "
                          f"{type(obj).__name__}")
    return obj


def kind_from_reference(table: str, reference: str):
    """An :class:`AgentKind` or :class:`EstimatorKind` for an import path (third door)."""
    return _as_kind(table, reference, resolve_reference(reference),
                    origin=f"import path {reference}")


#: The modules that declare the built-in kinds, each in a tuple ``KINDS`` beside the code it
#: runs, in the order ``scenarios/README.md`` lists them. The registry reads them by name
#: when it is first built, as it reads installed plugins' entry points: they import the
#: registry to declare their kinds, the registry imports none of them (a leaf of the import
#: graph; ``tests/test_imports.py`` checks that every module declaring kinds is listed).
BUILTIN_MODULES = (
    "recloop._selfcheck",
    "recloop.experiments._campaign_bias",
    "recloop.experiments._bandit_eval",
    "recloop.experiments._loo_cf",
    "recloop.experiments._offline_vs_online",
    "recloop.experiments._ope",
    "recloop.experiments._ope_real",
    "recloop.experiments._selection",
    "recloop.experiments._slate_ope",
    "recloop._builtins",
)


def _builtin_kinds():
    for name in BUILTIN_MODULES:
        yield from importlib.import_module(name).KINDS


def _entry_points(group: str):
    from importlib.metadata import entry_points

    return sorted(entry_points(group=group), key=lambda ep: (ep.name, ep.value))


@functools.lru_cache(maxsize=1)
def registry() -> Registry:
    """The process's registry: the built-in kinds, then the installed plugins' entry points
    (their objects load when first named). Plugins that clash are left out and listed in
    ``problems``."""
    reg = Registry()
    for kind in _builtin_kinds():
        reg.add(kind)
    for table, group in ENTRY_POINT_GROUPS.items():
        cls = AgentKind if table == "agents" else EstimatorKind
        for ep in _entry_points(group):
            dist = getattr(getattr(ep, "dist", None), "name", None)
            origin = f"entry point {ep.value} of {dist or 'an installed package'}"
            try:
                reg.add(cls(name=ep.name, factory=None, origin=origin))
            except PluginError as exc:
                reg.problems.append(f"{group}: {exc}")
                continue
            reg._lazy[table, ep.name] = ep
    return reg
