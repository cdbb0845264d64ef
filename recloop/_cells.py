"""Cells: the units of work of a run -- their identity, seeds and plan, what an evaluation
receives for one (:class:`CellContext`), running one in any process (:func:`execute_cell`)
and reading the finished ones back (:func:`iter_cells`).

A *cell* is one (seed, evaluation, agent, sweep values) combination -- or (seed, evaluation,
sweep values) for evaluation kinds that run all their agents together on one world
(``per_agent=False`` in the registry). Each cell draws its random streams from
``SeedSequence(seed, spawn_key=K)`` where ``K`` is derived from the cell's *key* (evaluation
name and swept values), never from the order in which cells are submitted or finish, so the
results are the same with 1 or N workers, locally or on Dask. The agent is deliberately not
part of ``K``: agents evaluated in separate cells of the same replicate meet the same world and
the same draws (common random numbers), so their comparison is paired.

A cell that runs users' code (agents or estimators named by import path or entry point)
is computed in two *parts*, each a :class:`Cell` with a ``role`` (:func:`split_cell`):
recloop's part (``"clean"``: the cell without the users' code, in a process that never
imports it) and the guests' part (``"guest"``: the users' code, in a guest process of its
own); :func:`combine_parts` then takes recloop's rows from the clean part, the users' rows
from the guests' part, and refuses the cell when the guests' part disagrees with recloop's
on anything both computed (the truth beside a plugin's estimate, a row of recloop's own).
See ``docs/plugins.md``.

The runner (:mod:`recloop._runner`) schedules cells on executors; the worker processes
(:mod:`recloop._workers`) and Dask tasks run them with :func:`execute_cell`; the report
(:mod:`recloop._report`) reads them with :func:`iter_cells`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import math
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from recloop import _rundir
from recloop._registry import registry
from recloop._schema import sweep_values

__all__ = ["Cell", "CellContext", "CellError", "Chunk", "Split", "combine_parts", "execute_cell",
           "execute_unit", "iter_cells", "merge_chunks", "plan_cells", "plan_units", "role_data",
           "split_cell", "split_cells", "use_paths"]

#: Spawn key (under the cell's seed sequence) of the streams :meth:`CellContext.agent_rng`
#: gives; far from the small keys the experiments use for their own streams.
_AGENT_STREAM = 0x5EED


@dataclass(frozen=True)
class Cell:
    """The identity of one unit of work. ``role`` names a part of a cell that runs users'
    code (``"clean"``, ``"guest"``: see :func:`split_cell`); ``""`` is the whole cell. A
    part has its cell's id, file name and seeds."""

    seed: int
    evaluation: str
    agent: str | None
    swept: tuple[tuple[str, Any], ...] = ()
    role: str = ""

    @property
    def whole(self) -> "Cell":
        """The cell this is a part of (itself when whole)."""
        return dataclasses.replace(self, role="") if self.role else self

    @property
    def id(self) -> str:
        parts = [self.evaluation, self.agent or "*", f"seed={self.seed}"]
        parts += [f"{k}={json.dumps(v)}" for k, v in self.swept]
        return "/".join(parts)

    @property
    def filename(self) -> str:
        return hashlib.sha256(self.id.encode()).hexdigest()[:24] + ".json"

    def seed_sequence(self) -> np.random.SeedSequence:
        """``SeedSequence(seed)`` spawned by the cell's key (evaluation and swept values)."""
        key = json.dumps([self.evaluation, sorted(self.swept)], sort_keys=True)
        digest = hashlib.sha256(key.encode()).digest()
        words = tuple(int.from_bytes(digest[i:i + 4], "little") for i in range(0, 16, 4))
        return np.random.SeedSequence(self.seed, spawn_key=words)


@dataclass(frozen=True)
class Chunk:
    """Logs ``start`` to ``stop - 1`` of a cell whose kind declares
    :class:`recloop._registry.Chunks`: chunk ``index`` of ``count``. A unit of work, not of
    storage: the runner merges a cell's chunks, in log order, into its one cell file."""

    cell: Cell
    index: int
    count: int
    start: int
    stop: int

    @property
    def id(self) -> str:
        return f"{self.cell.id} [logs {self.start}-{self.stop - 1}]"

    @property
    def evaluation(self) -> str:
        return self.cell.evaluation

    @property
    def agent(self) -> str | None:
        return self.cell.agent


#: A chunk holds at least this many logs (each chunk repeats the cell's set-up: policies,
#: truth, agents fitted).
MIN_CHUNK_LOGS = 2
#: ... and at least this many seconds of estimated work: a chunk's set-up and messages cost
#: milliseconds, but cutting the only cell of a run also starts the worker processes (each
#: imports recloop: about a second on an idle machine), which a smaller cell does not repay.
MIN_CHUNK_SECONDS = 1.0
#: Units of work per worker the planner aims at: a few per worker, so that the last ones
#: to finish leave little idle time.
UNITS_PER_WORKER = 4


def plan_units(data: dict, cells: list[Cell], workers: int, *,
               min_logs: int | None = None, min_seconds: float | None = None,
               per_worker: int = UNITS_PER_WORKER) -> list:
    """The units of work of ``cells`` on ``workers`` workers: cells, and chunks of the
    cells whose kind declares :class:`recloop._registry.Chunks`, largest first.

    A chunkable cell's cost is its logs times the kind's estimated seconds of a log. With
    one worker every cell is one unit, in cell order. Else a cell is cut into ``ceil(cost
    / target)`` chunks of consecutive logs, ``target`` being the chunkable cells' total
    cost over ``workers x per_worker`` -- one large cell becomes ``workers x per_worker``
    chunks, many small ones stay whole -- but at most one chunk per ``min_logs`` logs
    (:data:`MIN_CHUNK_LOGS`) and per ``min_seconds`` of estimated work
    (:data:`MIN_CHUNK_SECONDS`). The units are then ordered by decreasing cost (cells
    without a cost estimate first, in cell order), the longest-processing-time-first rule
    that keeps the last ones short. The results do not depend on any of it: a chunk's logs
    are computed as in the whole cell and merged in log order.
    """
    min_logs = MIN_CHUNK_LOGS if min_logs is None else min_logs
    min_seconds = MIN_CHUNK_SECONDS if min_seconds is None else min_seconds
    if workers <= 1:
        return list(cells)
    sized = {}
    for cell in cells:
        kind = registry().evaluations[_evaluation(data, cell)["kind"]]
        if kind.chunks is not None:
            ctx = _context(role_data(data, cell), cell, False)
            try:
                n = int(kind.chunks.n_logs(ctx))
                cost = n * float(kind.chunks.cost(ctx))
            except Exception:  # an estimate that fails must not stop a run: a whole cell
                continue
            if n > 0 and math.isfinite(cost) and cost >= 0:
                sized[cell] = (n, cost)
    total = sum(cost for _, cost in sized.values())
    if total <= 0:
        return list(cells)
    target = total / (workers * per_worker)
    units: list[tuple[float, int, Any]] = []
    for j, cell in enumerate(cells):
        if cell not in sized:
            units.append((float("inf"), j, cell))
            continue
        n, cost = sized[cell]
        m = min(math.ceil(cost / target), n // max(1, min_logs),
                int(cost // min_seconds) if min_seconds > 0 else n)
        if m <= 1:
            units.append((cost, j, cell))
            continue
        bounds = [n * k // m for k in range(m + 1)]
        units += [(cost * (bounds[k + 1] - bounds[k]) / n, j,
                   Chunk(cell, k, m, bounds[k], bounds[k + 1])) for k in range(m)]
    units.sort(key=lambda u: (-u[0], u[1]))  # stable: a cell's chunks stay in log order
    return [u for _, _, u in units]


def plan_cells(data: dict) -> list[Cell]:
    """All cells of a resolved scenario, in their canonical order."""
    cells = []
    for seed in data["run"]["seeds"]:
        for ev in data["evaluations"]:
            kind = registry().evaluations[ev["kind"]]
            agents = ev["agents"] if kind.per_agent else [None]
            for combo in sweep_values(ev):
                for agent in agents:
                    cells.append(Cell(seed, ev["name"], agent, tuple(combo.items())))
    return cells


# --- cells that run users' code: recloop's part and the guests' part --------------------------

@dataclass(frozen=True)
class Split:
    """How a cell that runs users' code is computed (:func:`split_cell`).

    ``estimators``: the names of its evaluation's estimators that are users' code;
    ``agents``: its agents that are. A results row is the guests' when its ``variant`` is
    one of ``estimators`` or its ``agent`` one of ``agents`` -- or it has no ``agent`` (a row
    of the cell's agents together, e.g. their ranking) and ``agents`` is not empty; every
    other row is recloop's.
    ``twin``: recloop's part runs apart (role ``"clean"``: the cell without the users'
    code), else the guests' part is the whole cell (the cell's own agent is users' code,
    nothing of recloop's is left once the users' code is taken out, or the kind's rows
    compare its agents with each other: ``EvaluationKind.apart`` is false). ``probe``: a
    built-in estimator recloop's part runs when the cell has none of its own, so that the truth
    beside the plugins' estimates is computed apart too (its rows are not kept).
    """

    estimators: frozenset
    agents: frozenset
    twin: bool
    probe: str | None = None


def _estimator_params(kind) -> list:
    from recloop._schema import EstimatorList

    return [p for p in kind.params if isinstance(p.type, EstimatorList)]


def _is_plugin_entry(entry) -> bool:
    from recloop._plugins import is_plugin_entry

    return is_plugin_entry(entry)


def _is_plugin_agent(data: dict, name: str) -> bool:
    from recloop._plugins import is_plugin_agent

    return is_plugin_agent(next((a for a in data.get("agents") or ()
                                 if a.get("name") == name), None))


@functools.lru_cache(maxsize=4096)
def _split_cached(text: str, evaluation: str, agent: str | None) -> Split | None:
    from recloop._schema import entry_name

    data = json.loads(text)
    ev = next(e for e in data["evaluations"] if e["name"] == evaluation)
    kind = registry().evaluations[ev["kind"]]
    names = [agent] if agent is not None else list(ev.get("agents") or ())
    agents = frozenset(n for n in names if _is_plugin_agent(data, n))
    estimators = frozenset(entry_name(e) for p in _estimator_params(kind)
                           for e in ev.get(p.name) or () if _is_plugin_entry(e))
    if not agents and not estimators:
        return None
    # recloop's part: the evaluation without the users' code, if the kind's rules accept it
    kept = [n for n in names if n not in agents]
    twin = (kind.apart and not (agent is not None and agent in agents)
            and len(kept) >= kind.min_agents)
    probe = None
    if twin:
        clean = _clean_evaluation(ev, kind, agents, None)
        probe = next((p.default[0] for p in _estimator_params(kind)
                      if not clean.get(p.name) and p.default
                      and p.default[0] not in estimators), None)
        twin = _kind_accepts(kind, _clean_evaluation(ev, kind, agents, probe), data, kept)
    return Split(estimators, agents, twin, probe if twin else None)


def split_cell(data: dict, cell: Cell) -> Split | None:
    """How cell ``cell`` of a resolved scenario runs users' code (:class:`Split`); ``None``
    when it runs recloop's code only."""
    return _split_cached(json.dumps(data, sort_keys=True), cell.evaluation, cell.agent)


def split_cells(data: dict, cells: list[Cell]) -> list[Cell]:
    """``cells`` as the parts that run (:func:`split_cell`): a cell that runs users' code
    becomes its ``"clean"`` part (when it has one) followed by its ``"guest"`` part."""
    out = []
    for cell in cells:
        split = split_cell(data, cell)
        if split is None:
            out.append(cell)
            continue
        if split.twin:
            out.append(dataclasses.replace(cell, role="clean"))
        out.append(dataclasses.replace(cell, role="guest"))
    return out


def _clean_evaluation(ev: dict, kind, agents: frozenset, probe: str | None) -> dict:
    """An evaluation table without the users' code: its plugin agents and estimators taken
    out (``probe`` in an estimator list left empty)."""
    out = dict(ev)
    if agents and "agents" in out:
        out["agents"] = [a for a in out["agents"] if a not in agents]
    for p in _estimator_params(kind):
        if p.name in out:
            kept = [e for e in out[p.name] if not _is_plugin_entry(e)]
            out[p.name] = kept or ([probe] if probe else [])
    return out


def _kind_accepts(kind, ev: dict, data: dict, agents: list) -> bool:
    """Whether the kind's cross-key rules accept an evaluation (recloop's part of a cell)."""
    if kind.check is None:
        return True
    swept = ev.get("sweep") or {}
    base = {p.name: ev.get(p.name) for p in kind.params if p.name not in swept}
    chosen = [a for a in data.get("agents") or () if a.get("name") in agents]
    try:
        for combo in sweep_values(ev):
            if next(iter(kind.check({**base, **combo}, chosen, data.get("world"))), None):
                return False
    except Exception:
        return False
    return True


def role_data(data: dict, cell: Cell) -> dict:
    """The scenario a part of a cell runs (:func:`split_cell`): the whole scenario for a
    whole cell and for a guests' part that is the whole cell; for recloop's part, the cell's
    evaluation without the users' code; for the guests' part beside it, without recloop's
    estimators (computed in recloop's part) when the cell's agents are all recloop's."""
    if not cell.role:
        return data
    split = split_cell(data, cell)
    if split is None or (cell.role == "guest" and not split.twin):
        return data
    ev = _evaluation(data, cell)
    kind = registry().evaluations[ev["kind"]]
    if cell.role == "clean":
        new = _clean_evaluation(ev, kind, split.agents, split.probe)
    elif split.agents:  # recloop's estimators evaluate the users' agents: they run here too
        return data
    else:
        new = dict(ev)
        for p in _estimator_params(kind):
            if p.name in new:
                new[p.name] = [e for e in new[p.name] if _is_plugin_entry(e)]
    return {**data, "evaluations": [new if e is ev else e for e in data["evaluations"]]}


#: The columns that identify a row within its cell, and those that identify its truth.
_ROW_KEY = ("agent", "tick", "variant", "metric", "params", "log")
_TRUTH_KEY = ("agent", "tick", "metric", "params", "log")


def _key(row: dict, columns) -> str:
    return json.dumps([row.get(c) for c in columns], sort_keys=True, allow_nan=True)


def _text(row: dict) -> str:
    return json.dumps(row, sort_keys=True, allow_nan=True)


def _row_problem(row, columns, cell: Cell, scenario: str) -> str | None:
    """Why a row a guests' part sent cannot be one of the cell's, or ``None``."""
    import numbers

    if not isinstance(row, dict) or set(row) != set(columns):
        return "a row without the results' columns"
    if (row["scenario"], row["cell"], row["seed"], row["evaluation"]) != (
            scenario, cell.id, cell.seed, cell.evaluation):
        return f"a row of another cell ({str(row['cell'])[:80]!r})"
    for c in ("estimate", "stderr", "ci_low", "ci_high", "truth", "error"):
        if row[c] is not None and (isinstance(row[c], bool)
                                   or not isinstance(row[c], numbers.Real)):
            return f"a row whose {c} is not a number"
    for c in ("agent", "variant", "metric"):
        if row[c] is not None and not isinstance(row[c], str):
            return f"a row whose {c} is not a string"
    for c in ("tick", "n", "log"):
        if c in row and row[c] is not None and (isinstance(row[c], bool)
                                                or not isinstance(row[c], int)):
            return f"a row whose {c} is not an integer"
    if not isinstance(row["params"], dict):
        return "a row whose params are not a table"
    return None


def combine_parts(data: dict, cell: Cell, clean: tuple | None, guest: tuple
                  ) -> tuple[list[dict], float, list[str], list[dict]]:
    """A cell's result (as :func:`execute_cell` gives it) from its parts' results: recloop's
    rows and per-log estimates from ``clean`` (``None``: no such part), the guests' own from
    ``guest``; a :class:`CellError` when the guests' part disagrees with recloop's.

    Checked: every row the guests' part sent has the results' columns and is of this cell;
    a row of recloop's it also computed (the A/B test, rows of no estimator, recloop's
    estimators of recloop's targets beside a users' agent) is there in recloop's part, the
    same byte for byte; the truth beside each of the guests' per-log estimates of the kind's
    headline metric (``value``: the numbers every summary of bias, RMSE and coverage is
    computed from) is the truth recloop's part gives the same target, setting and log.
    The guests' rows' ``error`` is recomputed as ``estimate - truth``. Recloop's rows come
    first, in their order, then the guests' in theirs (the same order on every run).
    """
    from recloop._rundir import COLUMNS, ESTIMATE_COLUMNS

    split = split_cell(data, cell) or Split(frozenset(), frozenset(), False)
    whole = cell.whole
    scenario = data["run"]["name"]
    users = ", ".join(sorted(f"estimator {e!r}" for e in split.estimators)
                      + sorted(f"agent {a!r}" for a in split.agents))

    def refuse(detail: str) -> CellError:
        return CellError(whole.id, f"the part of the cell that runs users' code ({users}) "
                         f"sent {detail}; the cell is not recorded (users' code must not "
                         "change what recloop computes)", "")

    rows_g, seconds_g, errors_g, est_g = _result_shape(guest, refuse)
    if clean is None:
        rows_c, seconds_c, errors_c, est_c = [], 0.0, [], []
    else:
        rows_c, seconds_c, errors_c, est_c = clean
    headline = registry().evaluations[_evaluation(data, whole)["kind"]].headline

    def headlined(row) -> bool:
        m = row["metric"]
        return isinstance(m, str) and any(m == h or m.startswith(h + "@") for h in headline)

    out = []
    for rows, ours, columns in ((rows_g, rows_c, COLUMNS), (est_g, est_c, ESTIMATE_COLUMNS)):
        by_key = {_key(r, _ROW_KEY): _text(r) for r in ours}
        truth: dict = {}
        for r in ours if columns is ESTIMATE_COLUMNS else ():
            if headlined(r):
                truth.setdefault(_key(r, _TRUTH_KEY), set()).add(json.dumps(r["truth"],
                                                                             allow_nan=True))
        theirs = []
        for r in rows:
            problem = _row_problem(r, columns, whole, scenario)
            if problem:
                raise refuse(problem)
            if _theirs(r, split) or clean is None:
                known = truth.get(_key(r, _TRUTH_KEY))
                if (known is not None and len(known) == 1
                        and json.dumps(r["truth"], allow_nan=True) not in known):
                    who = r["variant"] or r["agent"]
                    raise refuse(f"the truth {r['truth']!r} beside {who!r} ({r['metric']}"
                                 f"{_where(r)}) where recloop computes "
                                 f"{json.loads(next(iter(known)))!r}")
                r = dict(r)
                r["error"] = (None if r["estimate"] is None or r["truth"] is None
                              else r["estimate"] - r["truth"])
                theirs.append(r)
            else:
                mine = by_key.get(_key(r, _ROW_KEY))
                if mine != _text(r):
                    who = r["variant"] or r["agent"] or "recloop"
                    raise refuse(f"a row of {who!r} ({r['metric']}{_where(r)}) "
                                 + ("that recloop does not compute" if mine is None else
                                    "different from what recloop computes apart from it"))
        kept = [r for r in ours if not _theirs(r, split)
                and (split.probe is None or r["variant"] != split.probe)]
        out.append(kept + theirs)
    return out[0], seconds_c + seconds_g, list(errors_c) + errors_g, out[1]


def _theirs(row: dict, split: Split) -> bool:
    """Whether a row is the guests': one of their estimators' or agents', or a row of the
    cell's agents together (no ``agent``) when one of them is theirs."""
    return (row["variant"] in split.estimators or row["agent"] in split.agents
            or (bool(split.agents) and not row["agent"]))


def _where(row: dict) -> str:
    """``", agent uniform, log 3"``: where a row is in its cell."""
    return "".join(f", {k} {row[k]}" for k in ("agent", "log", "tick") if row.get(k) is not None)


def _result_shape(result, refuse) -> tuple:
    import numbers

    if not isinstance(result, tuple) or len(result) != 4:
        raise refuse("a result that is not (rows, seconds, errors, estimates)")
    rows, seconds, errors, estimates = result
    if not isinstance(rows, list) or not isinstance(estimates, list):
        raise refuse("rows that are not a list")
    if not isinstance(seconds, numbers.Real) or isinstance(seconds, bool):
        raise refuse("a time that is not a number")
    if not isinstance(errors, list) or not all(isinstance(e, str) for e in errors):
        raise refuse("errors that are not lines of text")
    return rows, float(seconds), list(errors), estimates


@dataclass(frozen=True)
class CellContext:
    """What an evaluation callable receives for one cell."""

    scenario: str
    evaluation: str
    kind: str
    seed: int
    seed_sequence: np.random.SeedSequence
    params: dict
    swept: dict
    agents: tuple[dict, ...]
    world: dict | None
    horizon: int
    progress: bool = False
    errors: list = field(default_factory=list)
    #: The per-log estimates the experiment recorded (:meth:`per_log`).
    estimates: list = field(default_factory=list)
    #: ``None``, or the run's ``dask.distributed.Client`` when the cell is the only one of a
    #: Dask run: its large inner work (``loo_knn``, ``bred``, ``online_value``, ...) is then
    #: partitioned over the cluster (the rule: the cell runs in the driver process, its inner
    #: partitions are the cluster's tasks -- never tasks inside tasks).
    executor: Any = None

    @property
    def agent_names(self) -> list[str]:
        return [a["name"] for a in self.agents]

    def agent_params(self, name: str) -> dict:
        from recloop._plugins import agent_params

        return agent_params(self._agent_table(name))

    def _agent_table(self, name: str) -> dict:
        return next(a for a in self.agents if a["name"] == name)

    def make_agent(self, name: str) -> Callable:
        """The factory ``factory(rng) -> agent`` of agent ``name`` (built from its kind --
        built-in, plugin or import path -- then ``reset(rng)``)."""
        from recloop._plugins import agent_factory

        return agent_factory(self._agent_table(name))

    def agent_rng(self, name: str) -> np.random.Generator:
        """A stream of the cell for agent ``name`` (keyed by its name), for experiments that
        build an agent instance once."""
        from recloop.experiments._common import child_rng, name_key

        return child_rng(self.seed_sequence, _AGENT_STREAM, name_key(name))

    def estimators(self, entries: list, family: str, *, builtins=()) -> list:
        """An evaluation's ``estimators`` for its experiment function: plain names of the
        experiment's own ``builtins`` as they are, every other entry as a ``(name,
        call)`` pair, ``call(log, x, *, rng)`` (see :mod:`recloop._plugins`)."""
        from recloop._plugins import bind_estimator, estimator_entry

        out = []
        for entry in entries:
            if isinstance(entry, str) and entry in builtins:
                out.append(entry)
                continue
            resolved = estimator_entry(entry, family)
            out.append((resolved.name, bind_estimator(resolved, on_problem=self.report_error)))
        return out

    def per_log(self, measurement) -> None:
        """Record one per-log estimate (a :class:`recloop.Measurement` whose ``log`` is the
        log's index): the cell file keeps it, the run directory's ``estimates.csv.gz``
        lists it, and every summary of the run is computed from these (evaluation kinds
        whose ``unit`` is ``"log"`` pass this method to their experiment)."""
        if measurement.log is None:
            raise ValueError(f"a per-log estimate must say which log it comes from; got "
                             f"`log` = None in {measurement!r}")
        self.estimates.append(measurement)

    def report_error(self, what: str, exc: BaseException) -> None:
        """Record a user's code failing inside the cell without failing the cell (e.g. one
        estimator of many): the text and traceback go to the run's ``errors.log``."""
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        self.errors.append(f"{what}: {type(exc).__name__}: {exc}\n{tb}")

    def rng(self) -> np.random.Generator:
        """A Generator on the cell's seed sequence."""
        return np.random.default_rng(self.seed_sequence)

    def bar(self, iterable, *, desc: str | None = None, total: int | None = None):
        """Iterate over a long loop of the cell, reporting its progress to the run's
        display (:mod:`recloop_base.progress`: whatever process runs the cell)."""
        from recloop_base.progress import bar

        return bar(iterable, desc=desc, total=total, show=self.progress)


class CellError(Exception):
    """A cell raised; carries the cell id and the formatted traceback."""

    def __init__(self, cell_id: str, message: str, tb: str):
        self.cell_id, self.message, self.tb = cell_id, message, tb
        super().__init__(f"cell {cell_id} failed: {message}")

    def __reduce__(self):  # raised in worker processes: must cross back whole
        return type(self), (self.cell_id, self.message, self.tb)


def _evaluation(data: dict, cell: Cell) -> dict:
    return next(e for e in data["evaluations"] if e["name"] == cell.evaluation)


def _context(data: dict, cell: Cell, progress: bool, executor=None) -> CellContext:
    ev = _evaluation(data, cell)
    kind = registry().evaluations[ev["kind"]]
    params = {p.name: ev[p.name] for p in kind.params if p.name in ev}
    params.update(cell.swept)
    names = [cell.agent] if cell.agent is not None else ev["agents"]
    agents = tuple(next(a for a in data["agents"] if a["name"] == n) for n in names)
    return CellContext(
        scenario=data["run"]["name"], evaluation=cell.evaluation, kind=ev["kind"],
        seed=cell.seed, seed_sequence=cell.seed_sequence(), params=params,
        swept=dict(cell.swept), agents=agents, world=data.get("world"),
        horizon=data["run"]["horizon"], progress=progress, executor=executor)


def _row(m, *, scenario: str, cell: Cell, log: int | None = None) -> dict:
    """A results row of a measurement; with ``log``, a row of the per-log estimates."""
    params = {**dict(cell.swept), **dict(m.params)}
    n = m.n if m.n is None else int(m.n)
    row = {
        "scenario": scenario, "cell": cell.id, "seed": cell.seed, "evaluation": cell.evaluation,
        "agent": m.agent, "tick": m.tick, "variant": m.variant, "metric": m.metric,
        "estimate": m.estimate, "stderr": m.stderr, "ci_low": m.ci_low, "ci_high": m.ci_high,
        "truth": m.truth, "error": m.error, "n": n, "params": params,
    }
    if log is not None:
        row["log"] = log
    return row


def use_paths(paths) -> None:
    """Put ``paths`` (``--path DIR``) first on ``sys.path`` of this process, once each."""
    for p in reversed([str(p) for p in paths or ()]):
        if p not in sys.path:
            sys.path.insert(0, p)


def execute_cell(data: dict, cell: Cell, progress: bool = False, paths=(), executor=None
                 ) -> tuple[list[dict], float, list[str], list[dict]]:
    """Run one cell (in any process): its rows as plain dicts, the seconds it took, the
    errors of users' code it survived (see :meth:`CellContext.report_error`) and its
    per-log estimates (:meth:`CellContext.per_log`; for a kind whose ``unit`` is
    ``"seed"``, its rows themselves, as log 0: the seed is the log). ``paths`` are put on
    the import path first (users' plugins); ``executor`` is the client that runs the
    cell's inner partitions (see :attr:`CellContext.executor`)."""
    start = time.perf_counter()
    with _failing_as(cell.id):
        use_paths(paths)
        ctx = _context(role_data(data, cell), cell, progress, executor)
        kind = registry().evaluations[ctx.kind]
        rows, per_log = _rows(kind, ctx, cell, kind.run(ctx))
    return (rows, time.perf_counter() - start, [f"{cell.id}: {e}" for e in ctx.errors],
            per_log)


def execute_chunk(data: dict, chunk: Chunk, progress: bool = False, paths=()
                  ) -> tuple[Any, float, list[str]]:
    """Run one chunk (in any process): its part (``Chunks.run`` of its logs), the seconds
    it took and the errors of users' code it survived, named by its cell like a whole
    cell's; a failure is a :class:`CellError` of the cell, naming the chunk's logs."""
    start = time.perf_counter()
    cell = chunk.cell
    with _failing_as(cell.id, f" (in logs {chunk.start}-{chunk.stop - 1}, chunk "
                     f"{chunk.index + 1} of {chunk.count})"):
        use_paths(paths)
        ctx = _context(role_data(data, cell), cell, progress)
        part = registry().evaluations[ctx.kind].chunks.run(ctx, chunk.start, chunk.stop)
    return part, time.perf_counter() - start, [f"{cell.id}: {e}" for e in ctx.errors]


def execute_unit(data: dict, unit, progress: bool = False, paths=()) -> tuple:
    """:func:`execute_cell` of a :class:`Cell`, :func:`execute_chunk` of a :class:`Chunk`."""
    if isinstance(unit, Chunk):
        return execute_chunk(data, unit, progress, paths)
    return execute_cell(data, unit, progress, paths)


def merge_chunks(data: dict, cell: Cell, results: list[tuple]
                 ) -> tuple[list[dict], float, list[str], list[dict]]:
    """A cell's result, as :func:`execute_cell` gives it, from the results of
    :func:`execute_chunk` of its chunks in log order (recloop's ``Chunks.merge``, in the
    runner's process): the same rows, per-log estimates and errors, in the same order, as
    the whole cell; its seconds are the chunks' added up."""
    start = time.perf_counter()
    with _failing_as(cell.id):
        ctx = _context(role_data(data, cell), cell, False)
        kind = registry().evaluations[ctx.kind]
        measurements = kind.chunks.merge(ctx, [part for part, _, _ in results])
        rows, per_log = _rows(kind, ctx, cell, measurements)
    errors = [e for _, _, errs in results for e in errs]
    errors += [f"{cell.id}: {e}" for e in ctx.errors]
    seconds = sum(s for _, s, _ in results) + time.perf_counter() - start
    return rows, seconds, errors, per_log


def _rows(kind, ctx: CellContext, cell: Cell, measurements) -> tuple[list[dict], list[dict]]:
    rows = [_row(m, scenario=ctx.scenario, cell=cell) for m in measurements]
    if kind.unit == "seed":
        per_log = [_row(m, scenario=ctx.scenario, cell=cell, log=0) for m in measurements]
    else:
        per_log = [_row(m, scenario=ctx.scenario, cell=cell, log=m.log) for m in ctx.estimates]
    return rows, per_log


@contextlib.contextmanager
def _failing_as(cell_id: str, where: str = ""):
    """Whatever the block raises becomes a :class:`CellError` of cell ``cell_id`` (its
    message followed by ``where``)."""
    from recloop_base.guard import UserCodeError, last_section

    try:
        yield
    except UserCodeError as exc:  # a plugin ended the process or changed shared inputs
        raise CellError(cell_id, f"{exc}{where}", traceback.format_exc()) from None
    except SystemExit as exc:  # a user's sys.exit() fails its cell, not the run's process
        last = last_section()
        raise CellError(cell_id, f"SystemExit: {exc.code!r}: users' code called sys.exit("
                        f"{exc.code!r})" + (f" (the users' code called last: {last})" if last
                                            else "") + where,
                        traceback.format_exc()) from None
    except Exception as exc:  # reported by the parent with the cell's id
        raise CellError(cell_id, f"{type(exc).__name__}: {exc}{where}",
                        traceback.format_exc()) from None
    except BaseException as exc:  # KeyboardInterrupt, GeneratorExit, ... of users' code
        from recloop_base.guard import exception_line, in_guest

        if not in_guest():  # recloop's own process: Ctrl-C, SIGTERM stop the run
            raise
        last = last_section()
        raise CellError(cell_id, f"{exception_line(exc)}: raised by users' code"
                        + (f" (the users' code called last: {last})" if last else "") + where,
                        traceback.format_exc()) from None


def iter_cells(run_dir: Path, cells: list[Cell], timing: dict | None = None,
               errors: list | None = None, *, scenario: str) -> Iterator[dict]:
    """The finished cells' files in cell order, one at a time (bounded memory), each
    verified against its cell and the scenario hash ``scenario``
    (:class:`recloop._rundir.RunDirError` otherwise); adds each evaluation's cell seconds
    to ``timing`` and the errors of users' code the cells survived to ``errors``."""
    for cell in cells:
        stored = _rundir.read_cell(run_dir, cell.filename, cell_id=cell.id, seed=cell.seed,
                                   scenario=scenario)
        if timing is not None:
            timing[cell.evaluation] = timing.get(cell.evaluation, 0.0) + stored["seconds"]
        if errors is not None:
            errors.extend(str(e) for e in stored.get("errors", ()))
        yield stored

