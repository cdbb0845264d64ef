"""``report.md``, ``report.html`` and ``figures/*.png`` of a run directory.

What the report prints comes from two tables the run directory holds, both written from its
verified cell files (:func:`recloop._rundir.write_tables`):

* the **summary** -- the first table of the report, of ``report.html`` and of the terminal
  -- is :func:`recloop.summarize` over ``estimates.csv.gz``, the per-log estimates: per
  (evaluation, agent, variant, metric, tick, setting) the mean estimate, the truth, the
  bias, the RMSE and the coverage of the intervals over independent logs. The kinds'
  leaderboards (``ope``, ``estimator_selection``) are built from the same rows. Nothing is
  ever averaged across ticks or swept values.
* the **measurements** -- every row of ``results.csv`` (the cells' own statistics: their
  bias, RMSE, coverage over their logs, BRED's matches, the truth's online values, ...) as
  a mean over seeds with its standard error over seeds.

How the summary shows rows:

* each evaluation's headline metric (its kind's ``headline``) first, with or without a
  truth (``kendall_tau`` has none: then the estimate is shown ± its standard error);
* coverage is blank where the estimator gives no interval, and where every interval has
  zero width (an exact computation, e.g. exhaustive LOO, has nothing to cover);
* rows that are errors already (``bias``, ``rmse``, ``coverage``, ``width``, ... with a truth
  of 0 or none) are not compared with a truth again;
* rows whose estimate is the truth itself (the twin's score, an exact LOO) are listed once
  as the ground truth, not as an estimate with error 0;
* rows of agent ``world`` compare the world with its counterfactual twin: their error is
  the campaigns' effect, labelled so.

Figures (``figures/*.png``): each evaluation kind's own, an estimates-with-intervals chart
per evaluation that estimates per log (each estimator's mean estimate over the logs with
its interval and the spread of the single logs, beside the truth), and one generic figure
per (evaluation, metric) for kinds without figures of their own -- all drawn with the
helpers of :mod:`recloop._plots` (matplotlib's Agg canvas, imported when figures are drawn).
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import stat
import tomllib
import traceback
from dataclasses import dataclass
from pathlib import Path

from recloop import _document as D
from recloop import _rundir
from recloop._summary import SummaryRow, summarize

__all__ = ["rebuild_report", "screen_rows", "summary_lines", "write_report"]

#: Metrics that are already errors against the truth (suffixes such as ``_at_matches``
#: allowed): never compared with a truth of 0 or none.
ERROR_METRICS = ("bias", "rmse", "relative_rmse", "coverage", "width", "nan_rate", "mse",
                 "mae")

MAX_TABLE_ROWS = 200
MAX_FIGURES = 24
MAX_LINES = 16
#: Rows of the summary the terminal shows at most.
SCREEN_ROWS = 30
#: The kinds' notes (BRED's caveat, a leaderboard's ties) the terminal shows at most.
MAX_NOTES = 6
#: The line of ``errors.log`` after which the report writes its own errors (everything
#: after it is replaced by each report; what the run wrote before it stays).
REPORT_ERRORS = "--- errors of the report (rewritten by each `recloop report`) ---"


def _num(x: float, digits: int = 4) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}g}"


# --- which summary rows are shown, and how -----------------------------------------------------

def _headlines(scenario: dict | None) -> dict[str, tuple[str, ...]]:
    """Headline metrics per evaluation name (its kind's ``headline``)."""
    from recloop._registry import registry

    out = {}
    for ev in (scenario or {}).get("evaluations", ()):
        kind = registry().evaluations.get(ev.get("kind"))
        out[ev.get("name")] = tuple(kind.headline) if kind is not None else ()
    return out


def _is_headline(metric: str, names) -> bool:
    return any(metric == h or re.fullmatch(re.escape(h) + r"@[0-9]+", metric) for h in names)


def _is_error_metric(metric: str) -> bool:
    return any(metric == m or metric.startswith(m + "_") for m in ERROR_METRICS)


def _is_error_row(s: SummaryRow) -> bool:
    """An error already (bias, RMSE, coverage, ...): no truth, or a truth of 0 to which an
    "error of the error" would be computed."""
    return _is_error_metric(s.metric) and (not s.has_truth or s.truth == 0.0)


def _metric_label(agent: str, metric: str) -> str:
    """``world`` rows compare the world (the estimate column) with its twin (the truth
    column): their error is the campaigns' effect, not an estimator's bias."""
    return f"{metric} (world vs twin)" if agent == "world" else metric


@dataclass
class _View:
    """The summary as shown: estimates against the truth and headline metrics (display
    order), the truth reported against itself, and per evaluation the parameters whose
    values differ between its rows (the swept ones)."""

    rows: list
    truths: list
    varying: dict


def _view(summary: list[SummaryRow], scenario: dict | None) -> _View:
    heads = _headlines(scenario)
    order = [ev.get("name") for ev in (scenario or {}).get("evaluations", ())]
    order += [s.evaluation for s in summary if s.evaluation not in order]
    rows, truths, varying = [], [], {}
    for evaluation in dict.fromkeys(order):
        mine = [s for s in summary if s.evaluation == evaluation]
        values: dict[str, set] = {}
        for s in mine:
            for k, v in s.params.items():
                values.setdefault(k, set()).add(json.dumps(v, sort_keys=True))
        varying[evaluation] = [k for k, vs in values.items() if len(vs) > 1]
        head = [s for s in mine if _is_headline(s.metric, heads.get(evaluation, ()))
                and not _is_error_row(s)]
        rest = [s for s in mine if s not in head and s.has_truth and not _is_error_row(s)]
        # the truth itself: a series (agent, variant, metric) equal to its truth everywhere
        # (the twin's score); an estimate that happens to equal it at one tick is an estimate
        exact: dict[tuple, bool] = {}
        for s in mine:
            key = (s.agent, s.variant, s.metric)
            exact[key] = exact.get(key, True) and s.is_truth_itself
        for s in head + rest:
            (truths if exact[s.agent, s.variant, s.metric] else rows).append(s)
    return _View(rows, truths, varying)


def _value_text(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _setting(s: SummaryRow, varying: dict) -> str:
    return ", ".join(f"{k}={_value_text(s.params[k])}" for k in varying.get(s.evaluation, ())
                     if k in s.params)


#: Columns of the summary table; ``setting`` and ``tick`` are left out when empty.
_SUMMARY_COLUMNS = ("evaluation", "agent", "variant", "metric", "setting", "tick", "logs",
                    "estimate", "truth", "bias", "RMSE", "coverage")


def _coverage(s: SummaryRow) -> str:
    """The coverage, with its counts where they are few (``0 (0/1)``: one interval, which
    missed the truth)."""
    if math.isnan(s.coverage):
        return ""
    if s.n_ci <= 10:
        return f"{_num(s.coverage, 3)} ({round(s.coverage * s.n_ci)}/{s.n_ci})"
    return _num(s.coverage, 3)


def _summary_cells(s: SummaryRow, varying: dict) -> list[str]:
    est = _num(s.estimate)
    if not s.has_truth and not math.isnan(s.se):
        est += f" ± {_num(s.se, 2)}"
    logs = str(s.n) + (f" ({s.n_nan} nan)" if s.n_nan else "")
    return [s.evaluation, s.agent, s.variant, _metric_label(s.agent, s.metric),
            _setting(s, varying), "" if s.tick is None else str(s.tick), logs, est,
            _num(s.truth), _num(s.bias, 3), _num(s.rmse, 3), _coverage(s)]


def _term(name: str, named: dict | None = None):
    """A name with its glossary definition (shown on hover), or the name (``named``: the
    scenario's own estimator names, :func:`recloop._glossary.scenario_names`)."""
    from recloop._glossary import define

    base = name.split(" (world vs twin)")[0]
    definition = define(base) or (named or {}).get(base)
    return D.Term(name, definition) if definition else name


def _summary_grid(view: _View, rows: list) -> tuple[list[str], list[list[str]]]:
    """Header and cells of the summary table (optional columns dropped when empty)."""
    cells = [_summary_cells(s, view.varying) for s in rows]
    keep = [j for j, c in enumerate(_SUMMARY_COLUMNS)
            if c not in ("setting", "tick") or any(r[j] for r in cells)]
    return [_SUMMARY_COLUMNS[j] for j in keep], [[r[j] for j in keep] for r in cells]


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _key_rows(rows: list, varying: dict) -> tuple[list, list[str]]:
    """The key rows of a summary: per evaluation and value of each categorical swept
    parameter (a data set, a logger, a click model), the largest value of each numeric
    swept parameter and the last tick. Returns the rows kept and what was chosen
    (``["n_rounds = 898 (source = digits)", ...]``), empty when nothing is swept."""
    def group(s):
        cats = [k for k in varying.get(s.evaluation, ())
                if not all(_is_number(r.params.get(k)) for r in rows
                           if r.evaluation == s.evaluation and k in r.params)]
        return (s.evaluation,) + tuple(json.dumps(s.params.get(k), sort_keys=True)
                                       for k in cats)

    largest: dict = {}
    for s in rows:
        g = group(s)
        for k in varying.get(s.evaluation, ()):
            v = s.params.get(k)
            if _is_number(v) and all(_is_number(r.params.get(k)) for r in rows
                                     if r.evaluation == s.evaluation and k in r.params):
                largest[g, k] = max(largest.get((g, k), v), v)
        if s.tick is not None and len({r.tick for r in rows
                                       if r.evaluation == s.evaluation}) > 1:
            largest[g, "tick"] = max(largest.get((g, "tick"), s.tick), s.tick)
    if not largest:
        return rows, []

    def shown(s):
        g = group(s)
        return all((s.tick if k == "tick" else s.params.get(k)) == v
                   for (gg, k), v in largest.items() if gg == g)

    what = {}
    for (g, k), v in largest.items():
        what.setdefault((k, v), []).append(g)
    chosen = []
    for (k, v), groups in what.items():
        where = [", ".join(x for x in g[1:]) for g in groups if len(g) > 1]
        chosen.append(f"{k} = {_value_text(v)}"
                      + (f" ({'; '.join(w.replace(chr(34), '') for w in where)})"
                         if where and len(what) > 1 else ""))
    return [s for s in rows if shown(s)], chosen


def _screen(view: _View, limit: int) -> tuple[list, list, str | None]:
    """At most ``limit`` rows for a terminal: when there are more, the key rows
    (:func:`_key_rows`: the largest value of each numeric swept parameter and the last
    tick, within each value of a categorical one), with a line saying so."""
    rows = view.rows
    if len(rows) <= limit:
        return rows, view.truths, None
    kept, chosen = _key_rows(rows, view.varying)
    if not chosen:
        return rows, view.truths, None
    truths = _key_rows(view.truths, view.varying)[0] if view.truths else []
    return (kept, truths, f"(showing {', '.join(chosen)} only, the key rows: {len(kept)} "
            f"of {len(rows)}; report.md has them all)")


def _truth_line(truths: list) -> str | None:
    by_ev: dict[str, list[str]] = {}
    for s in truths:
        label = " ".join(x for x in (s.agent, s.variant) if x)
        by_ev.setdefault(f"{s.evaluation} {s.metric}", []).append(f"{label} {_num(s.truth)}")
    if not by_ev:
        return None
    return "truth itself: " + "; ".join(f"{k}: {', '.join(v)}" for k, v in by_ev.items())


def _read_summary(run_dir: Path) -> list[SummaryRow]:
    return summarize(_rundir.read_estimates(run_dir))


def screen_rows(estimates, scenario: dict | None, *, limit: int = SCREEN_ROWS) -> list:
    """The summary rows of the first screen (:func:`summary_lines`'s table), in order."""
    rows, _, _ = _screen(_view(summarize(estimates), scenario), limit)
    return rows[:limit]


def summary_lines(run_dir, *, limit: int = SCREEN_ROWS) -> list[str]:
    """The summary of a run for a terminal: per estimator and setting, over the logs, the
    mean estimate, the truth, the bias, the RMSE and the coverage (the first table of
    ``report.md``, at most ``limit`` rows: the largest swept value when there are more),
    then the evaluation kinds' notes (e.g. why BRED is optimistic for LinUCB)."""
    run_dir = Path(run_dir)
    scenario = _read_scenario(run_dir)[0]
    summary = _read_summary(run_dir)
    view = _view(summary, scenario)
    rows, truths, note = _screen(view, limit)
    header, cells = _summary_grid(view, rows[:limit])
    table = [header] + [[D.clean(c, 60) for c in r] for r in cells]
    widths = [max(len(r[j]) for r in table) for j in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
             for r in table]
    if note:
        lines.append(note)
    if len(rows) > limit:
        lines.append(f"({len(rows) - limit} more rows in report.md)")
    truth = _truth_line(truths)
    if truth:
        lines.append(truth)
    if scenario is None:
        return lines
    notes = [D.plain(b.parts) for b in _kind_sections(run_dir, scenario,
                                                      _read_results(run_dir), summary, [])
             if isinstance(b, D.Note)]
    if len(notes) > MAX_NOTES:  # e.g. a tie per setting and target of a large sweep
        notes = notes[:MAX_NOTES] + [f"({len(notes) - MAX_NOTES} more notes in report.md)"]
    return lines + ([""] + notes if notes else [])


def _summary_section(view: _View, seed_units: list[str], named: dict | None = None) -> list:
    out = [D.Heading("Summary")]
    if not view.rows and not view.truths:
        return out + [D.Paragraph("No per-log estimate has a ground truth in this run (see "
                                  "the measurements below).")]
    units = []
    if seed_units:
        units = ["; for "] + _joined([D.Code(e) for e in seed_units]) + [" each seed is one log"]
    out.append(D.Paragraph(
        "Each row summarises one estimator's estimates over independent logs (the logs of "
        "every seed pooled", *units, "): ", D.Em("estimate"), " is their mean (± its standard "
        "error where there is no truth), ", D.Em("bias"), " the mean of estimate - truth, ",
        D.Em("RMSE"), " the root mean square of estimate - truth, ", D.Em("coverage"),
        " the share of the 95% intervals that contain the truth -- blank where the estimator "
        "gives no interval, or where the intervals have zero width (an exact computation has "
        "nothing to cover). Never averaged across ticks or swept values; every log is in ",
        D.Link("estimates.csv.gz", "estimates.csv.gz"), "."))
    if view.rows:
        from recloop._glossary import COLUMNS

        shown = view.rows[:MAX_TABLE_ROWS]
        header, cells = _summary_grid(view, shown)
        key = {id(s) for s in _key_rows(shown, view.varying)[0]}
        for j in (header.index("metric"), header.index("variant")):
            for r in cells:
                r[j] = _term(r[j], named) if r[j] else r[j]
        out.append(D.Table(header, cells, key_rows=[j for j, s in enumerate(shown)
                                                    if id(s) in key],
                           tips=[COLUMNS.get(h, "") for h in header]))
        if len(view.rows) > MAX_TABLE_ROWS:
            out.append(D.Paragraph(f"({len(view.rows) - MAX_TABLE_ROWS} more rows: ",
                                   D.Code("recloop.load_results(RUN_DIR).summary()"), ")"))
    if any(s.agent == "world" for s in view.rows):
        out.append(D.Paragraph(
            "Rows ", D.Code("(world vs twin)"), " compare the simulated world (the estimate "
            "column) with its counterfactual twin (the truth column): their error is the "
            "campaigns' effect on that quantity, not the bias of an estimator."))
    if view.truths:
        out.append(D.Paragraph("The truth itself (estimates that are the ground truth, e.g. "
                               "the twin's score or an exact computation; error 0 by "
                               "construction):"))
        out.append(D.Table(
            ("evaluation", "agent", "variant", "metric", "tick", "logs", "truth"),
            [[s.evaluation, s.agent, s.variant, s.metric, "" if s.tick is None else
              str(s.tick), str(s.n), _num(s.truth)] for s in view.truths[:MAX_TABLE_ROWS]]))
    return out


def _joined(parts: list, sep: str = ", ") -> list:
    """``parts`` with ``sep`` between them (inline marks)."""
    out: list = []
    for j, p in enumerate(parts):
        out += ([sep] if j else []) + [p]
    return out


def _varying(groups: list) -> dict[str, list[str]]:
    """Per evaluation, the parameters whose values differ between its rows."""
    values: dict[tuple, set] = {}
    for g in groups:
        for k, v in g.params.items():
            values.setdefault((g.evaluation, k), set()).add(json.dumps(v, sort_keys=True))
    out: dict[str, list[str]] = {}
    for (evaluation, k), vs in values.items():
        if len(vs) > 1:
            out.setdefault(evaluation, []).append(k)
    return out


def _measurements_section(rows: list[dict]) -> list:
    """Every row of ``results.csv``, mean over seeds."""
    groups = summarize(rows)
    varying = _varying(groups)
    out = [D.Heading("Measurements"), D.Paragraph(
        "Every row of ", D.Link("results.csv", "results.csv"), ", mean over seeds (± the "
        "standard error over seeds, or the row's own standard error for one seed); ",
        D.Em("setting"), ": the parameters that differ between an evaluation's rows (the "
        "others are under ", D.Em("What was run"), "). Rows such as ", D.Code("bias"), ", ",
        D.Code("rmse"), " and ", D.Code("coverage"), " are the cells' own statistics over "
        "their logs; the summary above computes them from the per-log estimates, the logs "
        "of every seed pooled (with one seed they are the same numbers).")]
    cells = []
    for g in groups[:MAX_TABLE_ROWS]:
        est = _num(g.estimate) + (f" ± {_num(g.se, 2)}" if not math.isnan(g.se) else "")
        seeds = str(g.n) + (f" ({g.n_nan} nan)" if g.n_nan else "")
        cells.append([g.evaluation, g.agent, g.variant, _metric_label(g.agent, g.metric),
                      _setting(g, varying), "" if g.tick is None else str(g.tick), seeds, est,
                      _num(g.truth)])
    out.append(D.Table(("evaluation", "agent", "variant", "metric", "setting", "tick",
                        "seeds", "estimate", "truth"), cells))
    if len(groups) > MAX_TABLE_ROWS:
        out.append(D.Paragraph(f"({len(groups) - MAX_TABLE_ROWS} more rows in ",
                               D.Link("results.csv", "results.csv"), ")"))
    return out


# --- errors of the report -------------------------------------------------------------------

def _disk_error(exc: BaseException) -> bool:
    """A file that cannot be written (full disk, quota, read-only or failing device): the
    run's failure, not one odd figure (issue 25, section 3: exit 1, not a report that
    quietly lacks its figures)."""
    import errno

    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS,
                                                      errno.EIO)


def _error(errors: list, what: str, exc: BaseException) -> None:
    """Note a failure of the report's own drawing or writing (for ``errors.log``)."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    errors.append(f"report: {what}: {type(exc).__name__}: {exc}\n{text}")


def _write_errors(run_dir: Path, errors: list) -> None:
    """``errors.log``: what the run wrote, then this report's errors (an earlier report's
    are dropped)."""
    path = run_dir / "errors.log"
    text, problem = _rundir.read_small_text(path)
    if problem is not None and problem != "missing":
        # not ours to rewrite (too large, not text): this report's errors go at its end --
        # of a regular file only, never through a link or into a FIFO (a received run
        # directory's errors.log may point at the reader's files)
        if errors:
            try:
                fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:
                return
            with os.fdopen(fd, "a", encoding="utf-8") as f:
                if stat.S_ISREG(os.fstat(fd).st_mode):
                    f.write("\n" + REPORT_ERRORS + "\n" + "\n".join(errors))
        return
    text = text or ""
    kept = text.split(REPORT_ERRORS, 1)[0]
    if not errors and kept == text:
        return
    new = kept + (("" if not kept or kept.endswith("\n") else "\n") + REPORT_ERRORS + "\n"
                  + "\n".join(errors) if errors else "")
    if new:
        _rundir.atomic_write(path, new)
    else:
        path.unlink(missing_ok=True)


# --- figures ----------------------------------------------------------------------------------

def _measurements(rows: list[dict], evaluation: str, seed: int | None = None) -> list:
    from recloop._results import Measurement

    return [Measurement(evaluation=r["evaluation"], agent=r["agent"], metric=r["metric"],
                        estimate=r["estimate"], stderr=r["stderr"], ci_low=r["ci_low"],
                        ci_high=r["ci_high"], truth=r["truth"], n=r["n"], tick=r["tick"],
                        variant=r["variant"] or "", params=r["params"] or {})
            for r in rows if r["evaluation"] == evaluation and (seed is None
                                                                 or r["seed"] == seed)]


def _world_table(run_dir: Path, world: dict | None) -> dict | None:
    """The ``[world]`` the kinds' figures see: a world fitted to a log is read from the
    run's ``world.npz`` (what the cells ran on), not fitted again."""
    from recloop._calibrated_world import is_calibrated

    path = run_dir / "world.npz"
    if world and is_calibrated(world) and path.is_file() and not path.is_symlink():
        return {"file": str(path), "campaigns": world.get("campaigns", [])}
    return world


def _kind_figures(rows: list[dict], scenario: dict, folder: Path,
                  errors: list) -> tuple[list, set, bool]:
    """Figures drawn by the evaluation kinds themselves (rows of the first seed; the title
    names the seed when there are several): ``(made, evaluations covered, any failed)``."""
    from recloop._registry import registry

    made, covered, failed = [], set(), False
    world = _world_table(folder.parent, scenario.get("world"))
    seeds = scenario["run"]["seeds"]
    first_seed = seeds[0]
    which = f" (seed {first_seed})" if len(seeds) > 1 else ""
    for ev in scenario["evaluations"]:
        kind = registry().evaluations.get(ev["kind"])
        if kind is None or not kind.figures:
            continue
        try:
            mine = _measurements(rows, ev["name"], first_seed)
            if not mine:
                continue
            paths = kind.figures(mine, folder, world)
        except Exception as exc:  # a figure must not cost the report
            if _disk_error(exc):
                raise
            _error(errors, f"figures of {ev['name']}", exc)
            made.append((ev["name"], f"{ev['name']}: figures failed "
                         f"({type(exc).__name__}, see errors.log)", None))
            failed = True
            continue
        for path in paths:  # titled by what follows the evaluation's name in the file name
            stem = Path(path).stem
            what = stem[len(ev["name"]):].strip("_") if stem.startswith(ev["name"]) else stem
            made.append((ev["name"], f"{ev['name']}: {what or stem}{which}",
                         f"figures/{Path(path).name}"))
        if kind.figures_only and paths:  # none drawn (no selectors): the generic ones
            covered.add(ev["name"])
    return made, covered, failed


#: What the figure of a fitted world's fidelity is filed under (not an evaluation).
FITTED_WORLD = "the fitted world"


def _fidelity_figure(run_dir: Path, folder: Path) -> list:
    """A world fitted to a log: its fidelity figure, drawn from the noise bands of
    ``fidelity.md`` (numbers only, :func:`recloop._fidelity_plot.bands_from_markdown`)."""
    text, problem = _rundir.read_small_text(run_dir / "fidelity.md", limit=2**20)
    if problem is not None:
        return []
    from recloop._fidelity_plot import bands_from_markdown, plot_fidelity

    path = plot_fidelity(bands_from_markdown(text), folder / "fitted_world_fidelity.png")
    if path is None:
        return []
    return [(FITTED_WORLD, f"{FITTED_WORLD}: fidelity against the data's own noise",
             f"figures/{path.name}")]


def _constant(items: list) -> float | None:
    """The one value of a metric that is the same in every row (no truth beside it):
    a line of text, not a panel of a flat line (``nan_rate`` 0 everywhere)."""
    values = {g.estimate for g in items}
    if len(values) == 1 and all(not g.has_truth for g in items):
        (v,) = values
        return v if math.isfinite(v) else None
    return None


def _figures(run_dir: Path, rows: list[dict], scenario: dict | None, summary: list,
             errors: list) -> list[tuple[str, str, str | None]]:
    """Draw the kinds' own figures, the estimates-with-intervals charts of the evaluations
    that estimate per log, then one figure per (evaluation, metric) for the others, from the
    measurements' mean over seeds: ``(evaluation, title, path or None)``, the kind's own
    first (its figure of record). A metric with one value everywhere is a line of text.
    Figures of an earlier report are removed once every figure of this one is drawn (never
    when one failed: what cannot be redrawn stays)."""
    folder = run_dir / "figures"
    folder.mkdir(exist_ok=True)
    before = {p.name for p in folder.glob("*.png")}
    made, covered, failed = (_kind_figures(rows, scenario, folder, errors) if scenario
                             else ([], set(), False))
    try:
        made += _fidelity_figure(run_dir, folder)
    except Exception as exc:  # a figure must not cost the report
        if _disk_error(exc):
            raise
        _error(errors, "figure of the fitted world", exc)
        made.append((FITTED_WORLD, f"{FITTED_WORLD}: figure failed ({type(exc).__name__}, "
                     "see errors.log)", None))
        failed = True
    drawings = [(evaluation, f"{evaluation}: estimates", functools.partial(
                    _estimates_figures, run_dir, folder, evaluation, chosen))
                for evaluation, chosen in _estimate_rows(summary, scenario).items()]
    # an evaluation with its own figures or an estimates chart: no generic figure of the
    # errors (bias, RMSE, coverage, ...) again -- the summary table has them
    charted = {e for e, _, _ in made} | {e for e, _, _ in drawings}
    by_plot: dict[tuple, list] = {}
    for g in summarize(rows):
        if g.evaluation not in covered and not (g.evaluation in charted
                                                and _is_error_metric(g.metric)):
            by_plot.setdefault((g.evaluation, g.metric), []).append(g)
    plots = list(by_plot.items())
    for (evaluation, metric), items in plots:
        value = _constant(items)
        if value is not None:
            made.append((evaluation, f"{evaluation}: {metric} is {_num(value)} in every row "
                         f"({len(items)}): not drawn", None))
    drawings += [(evaluation, f"{evaluation}: {metric}", functools.partial(
                     _generic_figure, folder, evaluation, metric, items))
                 for (evaluation, metric), items in
                 [p for p in plots if _constant(p[1]) is None][:MAX_FIGURES]]
    for evaluation, what, draw in drawings:
        try:
            made += [(evaluation, t, p) for t, p in draw()]
        except Exception as exc:  # one odd figure must not cost the report
            if _disk_error(exc):
                raise
            _error(errors, f"figure {what}", exc)
            made.append((evaluation, f"{what}: figure failed ({type(exc).__name__}, see "
                         "errors.log)", None))
            failed = True
    if not failed:
        drawn = {Path(p).name for _, _, p in made if p}
        for name in before - drawn:
            (folder / name).unlink(missing_ok=True)
    order = [ev["name"] for ev in (scenario or {}).get("evaluations", ())]
    order += [e for e, _, _ in made if e not in order]
    return sorted(made, key=lambda m: order.index(m[0]))


# --- the generic figure: one (evaluation, metric) ---------------------------------------------

def _differing(items: list, keys=None) -> list[str]:
    """Parameters whose values differ between ``items`` (rows with ``params``)."""
    values: dict[str, set] = {}
    for g in items:
        for k, v in g.params.items():
            values.setdefault(k, set()).add(json.dumps(v, sort_keys=True))
    return [k for k, vs in values.items() if len(vs) > 1 and (keys is None or k in keys)]


def _x_key(items: list, varying: list[str]) -> str | None:
    """The x axis: the tick when it varies, else the numeric varying parameter with the
    most values (``None``: nothing to put on an x axis)."""
    if len({g.tick for g in items if g.tick is not None}) > 1:
        return "tick"
    numeric = [k for k in varying if all(
        isinstance(g.params.get(k), (int, float)) and not isinstance(g.params.get(k), bool)
        for g in items if k in g.params)]
    categorical = [k for k in varying if k not in numeric]
    if categorical:  # a size fixed by a data set is a property of it, not a sweep
        def fixed(k):
            values: dict = {}
            for g in items:
                cat = tuple(json.dumps(g.params.get(c), sort_keys=True) for c in categorical)
                values.setdefault(cat, set()).add(g.params.get(k))
            return all(len(v) == 1 for v in values.values())
        numeric = [k for k in numeric if not fixed(k)]
    if not numeric:
        return None
    return max(numeric, key=lambda k: (len({g.params.get(k) for g in items}), k))


def _x_of(g, x_key: str | None):
    return g.tick if x_key == "tick" else g.params.get(x_key) if x_key else None


def _bars_note(items: list) -> str:
    """What the error bars of the measurements' mean over seeds are."""
    if all(math.isnan(g.se) for g in items):
        return "no interval (no standard error)"
    seeds = max(g.n for g in items)
    if seeds > 1:
        return (f"bars: 95% intervals of the mean over {seeds} seeds (±1.96 standard errors "
                "over seeds)")
    return "bars: 95% intervals (±1.96 x each measurement's own standard error; one seed)"


def _fixed_by(items: list, key: str, categorical: list[str]) -> bool:
    """``key`` takes one value per value of the categorical parameters (a data set's own
    size): a property of the category, not a sweep."""
    values: dict = {}
    for g in items:
        cat = tuple(json.dumps(g.params.get(c), sort_keys=True) for c in categorical)
        values.setdefault(cat, set()).add(json.dumps(g.params.get(key), sort_keys=True))
    return bool(categorical) and all(len(v) == 1 for v in values.values())


def _estimators_figure(folder: Path, evaluation: str, metric: str, items: list,
                       varying: list[str]) -> list:
    """A single setting per category, several estimators (variants) and agents (targets):
    one row per estimator, one mark per target (a legend of at most 6), one panel per value
    of the categorical sweep (a data set, a logger), titled with what that value fixes (its
    n_rounds, n_actions)."""
    from recloop import _plots

    def is_cat(k):
        return not all(isinstance(g.params.get(k), (int, float))
                       and not isinstance(g.params.get(k), bool) for g in items
                       if k in g.params)

    cats = [k for k in varying if is_cat(k)]
    fixed = [k for k in varying if k not in cats and _fixed_by(items, k, cats)]
    panel_key = min(cats, key=lambda k: (len({json.dumps(g.params.get(k)) for g in items}),
                                         k)) if cats else None
    panels = list(dict.fromkeys(json.dumps(g.params.get(panel_key), sort_keys=True)
                                for g in items)) if panel_key else [""]
    variants = list(dict.fromkeys(g.variant for g in items))[:MAX_LINES]
    agents = list(dict.fromkeys(g.agent for g in items))[:6]
    ncols = min(3, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig, axes = _plots.figure(nrows, ncols, width=3.6 * ncols + 1.6,
                              height=(0.32 * len(variants) + 1.3) * nrows + 0.9)
    flat = list(axes.flat)
    shown = []  # per panel: drawn (False: one value, said in a line of text)
    for ax, panel in zip(flat, panels, strict=False):
        mine = [g for g in items if not panel_key
                or json.dumps(g.params.get(panel_key), sort_keys=True) == panel]
        series = []
        for j, agent in enumerate(agents):
            by_variant = {g.variant: g for g in mine if g.agent == agent}
            est = [by_variant[v].estimate if v in by_variant else math.nan for v in variants]
            half = [1.96 * by_variant[v].se if v in by_variant else math.nan
                    for v in variants]
            series.append(_plots.Dots(agent, est, [e - h for e, h in zip(est, half,
                                                                         strict=True)],
                                      [e + h for e, h in zip(est, half, strict=True)], j=j))
        truths = None
        if len(agents) == 1:
            by_variant = {g.variant: g for g in mine}
            truths = [by_variant[v].truth if v in by_variant else math.nan for v in variants]
        values = [g.estimate for g in mine if g.variant in variants and g.agent in agents]
        if _plots.is_constant(values) and not any(g.has_truth for g in mine):  # one value
            shown.append(False)
            _plots.constant_text(ax, f"{metric} is {_num(values[0])} for every estimator"
                                 + (" and target" if len(agents) > 1 else ""))
        else:
            shown.append(True)
            _plots.dot_plot(ax, variants, series, truths=truths)
            ax.set_xlabel(metric)
        if panel_key:
            first = mine[0] if mine else None
            what = ", ".join(f"{k} = {_value_text(first.params[k])}" for k in fixed
                             if first is not None and k in first.params)
            ax.set_title(f"{panel_key} = {_value_text(json.loads(panel))}"
                         + (f"\n({what})" if what else ""), fontsize=9)
    for ax in flat[len(panels):]:
        ax.set_visible(False)
    for n, ax in enumerate(flat[1:len(panels)]):
        if shown[n] and n % ncols != ncols - 1:  # the names once, on the left (where drawn)
            ax.tick_params(labelleft=False)
    _plots.legend(fig, title="target" if len(agents) > 1 else None)
    n_more = len(dict.fromkeys(g.variant for g in items)) - len(variants)
    _plots.caption(fig, f"{evaluation}: {metric}", _bars_note(items)
                   + (f"; {n_more} more estimators in the summary" if n_more else ""))
    name = f"{_slug(evaluation)}__{_slug(metric)}.png"
    _plots.save(fig, folder / name, dpi=100)
    return [(f"{evaluation}: {metric}", f"figures/{name}")]


def _generic_figure(folder: Path, evaluation: str, metric: str, items: list) -> list:
    """One (evaluation, metric), mean over seeds: lines against the tick or the swept
    parameter with the most values, one series per variant (and value of the other swept
    parameters), one panel per agent when there are several (a shared legend); the truth
    black and dashed; a dot plot with intervals when there is a single x."""
    from recloop import _plots

    varying = _differing(items)
    x_key = _x_key(items, varying)
    xs_all = sorted({_x_of(g, x_key) for g in items if _x_of(g, x_key) is not None})
    if len(xs_all) <= 1 and len({g.variant for g in items}) > 1 and len(
            {g.agent for g in items}) > 1:
        return _estimators_figure(folder, evaluation, metric, items, varying)
    panel_key = _panel_key(items, varying, x_key)
    panels = list(dict.fromkeys(_panel_of(g, panel_key) for g in items))
    several_agents = len({g.agent for g in items}) > 1
    others = [k for k in varying if k not in (x_key, panel_key)]

    def label(g) -> str:
        parts = ([g.agent] if several_agents and panel_key != "agent" else []) + (
            [g.variant] if g.variant else []) + [
            f"{k}={_value_text(g.params[k])}" for k in others if k in g.params]
        return " / ".join(parts) or g.agent or metric

    labels = list(dict.fromkeys(label(g) for g in items))
    in_panel = {p: list(dict.fromkeys(label(g) for g in items if _panel_of(g, panel_key) == p))
                for p in panels}
    cut = {p: labs[MAX_LINES:] for p, labs in in_panel.items() if len(labs) > MAX_LINES}
    note = _bars_note(items) + ("" if not cut else
                                f"; at most {MAX_LINES} series per panel, "
                                f"{sum(map(len, cut.values()))} not drawn")
    ncols = min(3, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    dots = len(xs_all) <= 1
    height = (0.32 * max(min(len(v), MAX_LINES) for v in in_panel.values()) + 1.4) \
        if dots else 3.4
    fig, axes = _plots.figure(nrows, ncols, width=4.6 * ncols + 1.0,
                              height=height * nrows + 0.9)
    flat = list(axes.flat)
    for ax, panel in zip(flat, panels, strict=False):
        series = []
        for lab in in_panel[panel][:MAX_LINES]:
            pts = [g for g in items if _panel_of(g, panel_key) == panel and label(g) == lab]
            if not dots:
                pts = [g for g in pts if _x_of(g, x_key) is not None]
            series.append(_plots.Series(
                lab, [_x_of(g, x_key) if not dots else 0 for g in pts],
                [g.estimate for g in pts], [1.96 * g.se for g in pts],
                [g.truth for g in pts], j=labels.index(lab)))
        values = [v for s in series for v in s.y]
        truths = [t for s in series for t in (s.truth or ()) if math.isfinite(t)]
        if dots and not truths and _plots.is_constant(values):  # a line of text says it
            _plots.constant_text(ax, f"{metric} is {_num(values[0])} in every row")
        else:
            _plots.series_plot(ax, series, x_label=x_key or "", y_label=metric,
                               log_x=None if x_key != "tick" else False,
                               dot_label="mean (95% interval)")
        if panel_key is not None:
            ax.set_title(panel, fontsize=9)
    for ax in flat[len(panels):]:
        ax.set_visible(False)
    _plots.legend(fig)
    _plots.caption(fig, f"{evaluation}: {metric}" + (f" against {x_key}" if not dots else ""),
                   note)
    name = f"{_slug(evaluation)}__{_slug(metric)}.png"
    _plots.save(fig, folder / name, dpi=100)
    return [(f"{evaluation}: {metric}", f"figures/{name}")]


def _panel_key(items: list, varying: list[str], x_key: str | None) -> str | None:
    """What splits a figure into panels: the agent when there are several (2 to 6) and
    variants within them, else the varying parameter off the x axis with the fewest
    values (2 to 6) that is not numeric (``family``, ``click_model``); ``None``: one
    panel."""
    agents = {g.agent for g in items}
    if 1 < len(agents) <= 6 and any(g.variant for g in items):
        return "agent"
    cats = []
    for k in varying:
        vals = {json.dumps(g.params.get(k), sort_keys=True) for g in items}
        if k != x_key and 1 < len(vals) <= 6 and not all(
                isinstance(g.params.get(k), (int, float)) for g in items if k in g.params):
            cats.append((len(vals), k))
    return min(cats)[1] if cats else None


def _panel_of(g, panel_key: str | None) -> str:
    if panel_key is None:
        return ""
    if panel_key == "agent":
        return g.agent
    return f"{panel_key} = {_value_text(g.params.get(panel_key))}"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")[:80] or "figure"


# --- the estimates-with-intervals charts --------------------------------------------------------

#: Swept values shown as rows of an estimates chart, and panels across, at most.
ESTIMATE_ROWS, ESTIMATE_COLUMNS, ESTIMATE_FIGURES = 3, 4, 8


def _estimate_rows(summary: list, scenario: dict | None) -> dict[str, list]:
    """Per evaluation whose kind estimates per log (``unit = "log"``: ``ope``,
    ``slate_ope``, the bandit kinds, ...), its summary rows of a headline metric with a
    truth -- an estimator against the truth -- in the order of the summary."""
    from recloop._registry import registry

    if scenario is None:
        return {}
    heads = _headlines(scenario)
    out: dict[str, list] = {}
    for ev in scenario["evaluations"]:
        kind = registry().evaluations.get(ev["kind"])
        if kind is None or kind.unit != "log":
            continue
        chosen = [s for s in summary if s.evaluation == ev["name"] and s.has_truth
                  and s.n > 0 and _is_headline(s.metric, heads.get(ev["name"], ()))
                  and not _is_error_row(s)]
        if chosen:
            out[ev["name"]] = chosen
    return out


def _log_spreads(run_dir: Path, keys: set) -> dict[tuple, tuple[float, float]]:
    """Per summary key, the 2.5th and 97.5th percentiles of the single logs' estimates."""
    import numpy as np

    from recloop._summary import _key as group_key

    values: dict[tuple, list] = {}
    for r in _rundir.read_estimates(run_dir):
        key = group_key(r)
        if key in keys and not math.isnan(r["estimate"]):
            values.setdefault(key, []).append(r["estimate"])
    return {k: tuple(float(q) for q in np.percentile(v, [2.5, 97.5]))
            for k, v in values.items()}


def _spaced(values: list, at_most: int) -> list:
    """``at_most`` of the sorted ``values``, evenly spaced, the first and the last kept."""
    if len(values) <= at_most:
        return values
    idx = sorted({round(j * (len(values) - 1) / (at_most - 1)) for j in range(at_most)})
    return [values[j] for j in idx]


def _estimates_figures(run_dir: Path, folder: Path, evaluation: str, rows: list) -> list:
    """Each estimator's mean estimate over the logs with the 95% interval of that mean and
    the spread of the single logs' estimates, beside the truth (OBP's
    ``visualize_off_policy_estimates`` over many logs): a panel per target (or per value of
    a second swept parameter) across, rows of panels for up to three values of the swept
    parameter with the most values, one figure per setting of the others."""
    from matplotlib.lines import Line2D

    from recloop import _plots

    spreads = _log_spreads(run_dir, {s.key for s in rows})
    varying = _differing(rows)
    x_key = _x_key(rows, varying)
    agents = list(dict.fromkeys(s.agent for s in rows))
    rest = [k for k in varying if k != x_key]
    col_key = "agent" if len(agents) > 1 else (
        max(rest, key=lambda k: (len({json.dumps(s.params.get(k)) for s in rows}), k))
        if rest else None)
    fig_keys = [k for k in rest if k != col_key]
    variants = list(dict.fromkeys(s.variant or s.agent for s in rows))

    def col_of(s):
        return s.agent if col_key == "agent" else json.dumps(s.params.get(col_key))

    def setting_of(s):
        return ", ".join(f"{k}={_value_text(s.params[k])}" for k in fig_keys
                         if k in s.params)

    settings = list(dict.fromkeys(setting_of(s) for s in rows))
    out = []
    for setting in settings[:ESTIMATE_FIGURES]:
        mine = [s for s in rows if setting_of(s) == setting]
        xs = sorted({_x_of(s, x_key) for s in mine if _x_of(s, x_key) is not None})
        x_shown = _spaced(xs, ESTIMATE_ROWS) or [None]
        cols = list(dict.fromkeys(col_of(s) for s in mine))
        cols_shown = cols[:ESTIMATE_COLUMNS]
        n_cat = max(len({s.variant for s in mine if col_of(s) == c}) for c in cols_shown)
        fig, axes = _plots.figure(len(x_shown), len(cols_shown),
                                  width=3.9 * len(cols_shown) + 1.4,
                                  height=(0.3 * n_cat + 1.0) * len(x_shown) + 1.2,
                                  sharex="col")
        for r, x in enumerate(x_shown):
            for c, col in enumerate(cols_shown):
                ax = axes[r, c]
                panel = [s for s in mine if col_of(s) == col and _x_of(s, x_key) == x]
                if not panel:
                    ax.set_visible(False)
                    continue
                cats = [s.variant or s.agent for s in panel]
                est = [s.estimate for s in panel]
                half = [1.96 * s.se if not math.isnan(s.se) else math.nan for s in panel]
                spread = [spreads.get(s.key, (math.nan, math.nan)) for s in panel]
                _plots.dot_plot(ax, cats, [_plots.Dots(
                    "mean", est, [e - h for e, h in zip(est, half, strict=True)],
                    [e + h for e, h in zip(est, half, strict=True)],
                    [a for a, _ in spread], [b for _, b in spread], by_row=True)],
                    truths=[s.truth for s in panel],
                    row_styles=[variants.index(c) for c in cats])
                head = (panel[0].agent if col_key in ("agent", None) else
                        f"{col_key} = {_value_text(json.loads(col))}")
                where = f"{x_key} = {_plots.number(x)}" if x_key and x is not None else ""
                ax.set_title(", ".join(t for t in (head, where) if t), fontsize=9)
                if r == len(x_shown) - 1:
                    ax.set_xlabel(panel[0].metric)
        n_logs = sorted({s.n for s in mine})
        logs = (f"{n_logs[0]:,}" if len(n_logs) == 1 else f"{n_logs[0]:,}-{n_logs[-1]:,}")
        note = (f"Dot: mean estimate over {logs} logs; thick bar: its 95% interval (±1.96 "
                "standard errors over the logs); thin line: 2.5th-97.5th percentile of the "
                "single logs' estimates; black: the truth.")
        if len(xs) > len(x_shown):
            note += (f" {x_key} = {', '.join(_plots.number(v) for v in x_shown)} of "
                     f"{len(xs)} swept values.")
        if len(cols) > len(cols_shown):
            note += f" The first {len(cols_shown)} of {len(cols)} panels across."
        gray = "0.35"
        _plots.legend(fig, handles=[
            Line2D([], [], color=gray, marker="o", markerfacecolor="none", lw=2.4),
            Line2D([], [], color=gray, lw=1.0), _plots.truth_handle()], labels=[
            "mean estimate, 95% interval", "single logs (2.5-97.5%)", "truth"])
        _plots.caption(fig, f"{evaluation}: estimates beside the truth"
                       + (f" ({setting})" if setting else ""), note)
        name = f"{_slug(evaluation)}__estimates" + (f"_{_slug(setting)}" if setting else "")
        _plots.save(fig, folder / f"{name}.png", dpi=100)
        out.append((f"{evaluation}: estimates" + (f" ({setting})" if setting else ""),
                    f"figures/{name}.png"))
    if len(settings) > ESTIMATE_FIGURES:
        out.append((f"{evaluation}: estimates of {len(settings) - ESTIMATE_FIGURES} more "
                    "settings not drawn (their numbers are in the summary table)", None))
    return out


# --- the kinds' own sections -----------------------------------------------------------------

def _kind_sections(run_dir: Path, scenario: dict, rows: list[dict], summary: list,
                   errors: list) -> list:
    """The evaluation kinds' own sections (e.g. the ``ope`` leaderboard), all seeds: blocks
    of :mod:`recloop._document` (a kind's strings are lines of simple Markdown, read as
    text: :func:`recloop._document.from_lines`)."""
    import inspect

    from recloop._registry import registry

    out = []
    estimates = None
    for ev in scenario["evaluations"]:
        kind = registry().evaluations.get(ev["kind"])
        if kind is None or kind.report is None:
            continue
        try:
            mine = [r for r in rows if r["evaluation"] == ev["name"]]
            more = {}
            if "estimates" in inspect.signature(kind.report).parameters:
                # a leaderboard's paired comparisons over the same logs
                if estimates is None:
                    estimates = list(_rundir.read_estimates(run_dir))
                more["estimates"] = [e for e in estimates if e["evaluation"] == ev["name"]]
            blocks = D.from_lines(kind.report(mine, scenario, [
                s for s in summary if s.evaluation == ev["name"]], **more) if mine else [])
        except Exception as exc:
            _error(errors, f"section of {ev['name']}", exc)
            blocks = [D.Paragraph(f"(this section failed: {type(exc).__name__}, see ",
                                  D.Link("errors.log", "errors.log"), ")")]
        if blocks:
            out += [D.Heading(str(ev["name"]))] + blocks
    return out


# --- reading a run directory ------------------------------------------------------------------

def _scenario_problem(data) -> str | None:
    """What the report needs of ``scenario.toml`` and is missing (``None``: usable)."""
    run = data.get("run") if isinstance(data, dict) else None
    if not isinstance(run, dict) or not isinstance(run.get("name"), str):
        return "no [run] table with a name"
    seeds = run.get("seeds")
    if not isinstance(seeds, list) or not seeds or not all(
            isinstance(x, int) and not isinstance(x, bool) for x in seeds):
        return "no run.seeds list"
    for table in ("agents", "evaluations"):
        items = data.get(table, [])
        if not isinstance(items, list) or not all(
                isinstance(t, dict) and isinstance(t.get("name"), str)
                and isinstance(t.get("kind"), str) for t in items):
            return f"[[{table}]] tables without a name and a kind"
    for ev in data.get("evaluations", []):
        if not isinstance(ev.get("agents", []), list) or not isinstance(ev.get("sweep", {}),
                                                                        dict):
            return f"evaluation {ev['name']!r} has a malformed `agents` or `sweep`"
    return None


def _read_scenario(run_dir: Path) -> tuple[dict | None, str | None, str | None]:
    """``(scenario, its text, None)`` or ``(None, None, problem)``."""
    text, problem = _rundir.read_small_text(run_dir / "scenario.toml")
    if problem is not None:
        return None, None, problem
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError, RecursionError) as exc:
        return None, None, f"not valid TOML ({str(exc)[:80]})"
    problem = _scenario_problem(data)
    if problem is not None:
        return None, None, f"not a resolved scenario ({problem})"
    data.setdefault("agents", [])
    data.setdefault("evaluations", [])
    return data, text, None


def _read_results(run_dir: Path) -> list[dict]:
    return list(_rundir.read_results(run_dir))


def _check_cells(run_dir: Path) -> tuple[tuple | None, tuple[str, str] | None]:
    """``((scenario, cells, digest), None)`` when ``scenario.toml`` and every cell file are
    sound, else ``(None, (path, problem))`` naming the first file at fault."""
    from recloop._cells import plan_cells

    scenario, text, problem = _read_scenario(run_dir)
    if problem is not None:
        return None, (str(run_dir / "scenario.toml"), f"{problem}; the cell files cannot be "
                      "verified without it (`recloop run SCENARIO --resume` rewrites it from "
                      "the scenario file)")
    try:
        cells = plan_cells(scenario)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return None, (str(run_dir / "scenario.toml"), "does not say which cells there are "
                      f"({type(exc).__name__}: {exc})")
    digest = _rundir.scenario_hash(text)
    bad = []
    for c in cells:
        path = _rundir.cell_path(run_dir, c.filename)
        problem = _rundir.check_cell(path, cell_id=c.id, seed=c.seed, scenario=digest)[1]
        if problem is not None:
            bad.append((path, c, problem))
    if bad:
        path, c, problem = bad[0]
        return None, (str(path), f"{problem} (cell {c.id}); {len(bad)} of {len(cells)} cell "
                      "files are missing or damaged: continue the run with `recloop run "
                      "SCENARIO --resume`")
    return (scenario, cells, digest), None


def verified_cells(run_dir) -> tuple[dict, list, str]:
    """The scenario of a finished run directory, its cells and its scenario hash, after
    checking every cell file; :class:`recloop._rundir.RunDirError` naming the file at fault
    (``scenario.toml`` missing or damaged, a cell file missing or damaged)."""
    found, bad = _check_cells(Path(run_dir))
    if bad is not None:
        raise _rundir.RunDirError(f"{bad[0]}: {bad[1]}")
    return found


def rebuild_report(run_dir, *, on_damage=None) -> Path | None:
    """``recloop report``: verify a run directory, rebuild its tables from the cell files,
    rewrite the report.

    Takes the directory's lock (:class:`recloop._rundir.RunDirError` if a run uses it),
    removes temporary files and verifies every cell file against ``scenario.toml`` (their
    identity, the scenario's hash, their checksum). The tables -- ``results.csv``,
    ``results.jsonl``, ``estimates.csv.gz`` -- are then rewritten from the cells every time,
    never trusted: one that differed (a changed value, a dropped line, half the lines, a
    truncated or deleted file) is named. When the cells cannot be verified (``scenario.toml``
    or a cell file missing or damaged) nothing is rewritten -- report, figures and tables
    stay as they were -- and ``None`` is returned. Each problem goes to ``on_damage`` as a
    :class:`recloop._rundir.Damage`. Returns the report's path.
    """
    from recloop._cells import iter_cells

    run_dir = Path(run_dir)
    report = on_damage or (lambda d: None)
    Damage = _rundir.Damage
    lock = _rundir.RunLock(run_dir).acquire()
    try:
        if lock.stale is not None:
            report(Damage(str(lock.path), f"left by process {lock.stale}, which is no longer "
                          "running", "taken over", "note"))
        wrong = _rundir.layout_problems(run_dir)
        if wrong:
            raise _rundir.RunDirError(f"{wrong[0]} (move it away; the report cannot be "
                                      "written as it is)")
        removed = _rundir.remove_temporary(run_dir)
        if removed:
            report(Damage(str(run_dir), f"{len(removed)} temporary file(s) of an interrupted "
                          f"write (e.g. {removed[0].name})", "removed", "note"))
        found, bad = _check_cells(run_dir)
        if bad is not None:
            report(Damage(bad[0], bad[1], "nothing was rewritten (tables, report and figures "
                          "are as they were)"))
            return None
        scenario, cells, digest = found
        _, problem = _rundir.check_json_object(run_dir / "environment.json")
        if problem is not None:
            report(Damage(str(run_dir / "environment.json"), problem, "the report lacks the "
                          "command, times and timing"))
        tables = _rundir.write_tables(run_dir, iter_cells(run_dir, cells, scenario=digest))
        for name, problem in tables.differed.items():
            report(Damage(str(run_dir / name), problem, "rewritten from the verified cell "
                          "files"))
        return write_report(run_dir)
    finally:
        lock.release()


def _what_was_run(run_dir: Path, scenario: dict | None, env: dict) -> list:
    """What was run: seeds, agents, cells, command, times, the evaluations' parameters."""
    if scenario is None:
        return [D.Paragraph("scenario.toml is missing or damaged: what was run is unknown.")]
    run = scenario["run"]
    command = env.get("command")
    resumed = env.get("resumed")
    items = [
        ["seeds: " + ", ".join(map(str, run["seeds"]))],
        ["agents: "] + ([p for j, a in enumerate(scenario["agents"]) for p in (
            ", " if j else "", D.Code(str(a["name"])), f" ({a['kind']})")]
            or ["none"]),
        [f"cells: {env.get('cells', '?')}, rows: {env.get('rows', '?')}, per-log estimates: "
         f"{env.get('estimates', '?')}"],
        ["command: ", D.Code(" ".join(map(str, command)) if isinstance(command, list)
                             else "?")],
        [f"started {env.get('start', '?')}, finished {env.get('end', '?')}"
         + (f" (resumed {len(resumed)} time(s))" if isinstance(resumed, list) and resumed
            else "")],
        ["full scenario with defaults: ", D.Link("scenario.toml", "scenario.toml"),
         "; every row: ", D.Link("results.csv", "results.csv"), "; every log's estimates: ",
         D.Link("estimates.csv.gz", "estimates.csv.gz")],
    ]
    for ev in scenario["evaluations"]:
        params = ", ".join(f"{k} = {json.dumps(v)}" for k, v in ev.items()
                           if k not in ("kind", "name", "agents", "sweep"))
        sweep = ev.get("sweep")
        agents = ", ".join(map(str, ev.get("agents", [])))
        items.append(["evaluation ", D.Code(str(ev["name"])), f" ({ev['kind']})"
                      + (f" on {agents}" if agents else "") + f": {params}"
                      + (f"; swept {json.dumps(sweep)}" if sweep else "")])
    # the run's items, then the evaluations' (a list each)
    return [D.Bullets(items[:6]), D.Bullets(items[6:])] if len(items) > 6 \
        else [D.Bullets(items)]


def _fitted_world(run_dir: Path, scenario: dict | None, env: dict) -> list:
    """A world fitted to a real log: how faithful it is (``fidelity.md``, read as text)."""
    text, problem = _rundir.read_small_text(run_dir / "fidelity.md", limit=2**20)
    if problem is not None:
        return []
    env_hash = env.get("world_sha256")
    fitted_to = ((scenario or {}).get("world") or {}).get("calibrate_from", "?")
    return [D.Heading("The fitted world"), D.Paragraph(
        "The world was fitted to ", D.Code(str(fitted_to)),
        (f" (the world's sha256 {env_hash})" if env_hash else "") + "; saved as ",
        D.Link("world.npz", "world.npz"), ". How faithful it is to the log:")] \
        + D.from_lines(text.strip().splitlines())


# --- the first screen: findings, the figure of record -----------------------------------------

#: Findings per evaluation at most.
MAX_FINDINGS = 4


def _pct(x: float) -> str:
    return f"{x:+.1%}" if abs(x) < 0.995 else f"{x:+.0%}"


def _findings(view: _View, heads: dict) -> list[list]:
    """Sentences computed from the run's own numbers, at the key rows (the last tick, the
    largest swept value): per evaluation and agent (or target), the estimate furthest from
    the truth and the closest one, relative to the truth (of the headline metric where
    there is one); the world against its twin (the largest difference)."""
    rows = [s for s in _key_rows(view.rows, view.varying)[0]
            if s.has_truth and math.isfinite(s.estimate) and math.isfinite(s.truth)
            and not _is_error_row(s)]
    headline = [s for s in rows if s.agent == "world"
                or _is_headline(s.metric, heads.get(s.evaluation, ()))]
    rows = [s for s in rows if s in headline or not any(
        h.evaluation == s.evaluation and h.agent != "world" for h in headline)]
    out = []
    for evaluation in dict.fromkeys(s.evaluation for s in rows):
        mine = [s for s in rows if s.evaluation == evaluation]
        groups: dict = {}
        for s in mine:
            groups.setdefault((s.agent, s.metric, s.tick, _setting(s, view.varying)),
                              []).append(s)
        said = []
        for (agent, metric, tick, setting), items in groups.items():
            where = ", ".join(x for x in (setting, f"tick {tick}" if tick is not None
                                           else "") if x)
            where = f" ({where})" if where else ""

            def rel(s):
                return (s.estimate - s.truth) / abs(s.truth) if s.truth else math.nan

            if agent == "world":
                worst = max(items, key=lambda s: abs(s.estimate - s.truth))
                if worst.truth:
                    said.append((-1.0, [
                        D.Code(evaluation), ": the campaigns move ", D.Code(metric), " of ",
                        D.Code(worst.variant), f" most{where}: {_num(worst.estimate)} in the "
                        f"world, {_num(worst.truth)} in its twin without campaigns "
                        f"({_pct(rel(worst))})."]))
                continue
            ranked = sorted(items, key=lambda s: abs(s.estimate - s.truth))
            worst, best = ranked[-1], ranked[0]
            if not worst.truth:
                continue
            sentence = [D.Code(evaluation), ": ", D.Code(agent), " ", D.Code(metric), where,
                        " -- "]
            sentence += ([D.Code(worst.variant), " "] if worst.variant else []) + [
                f"is off by {_pct(rel(worst))} ({_num(worst.estimate)} against the truth "
                f"{_num(worst.truth)})"]
            if len(ranked) > 1 and best is not worst:
                sentence += ["; the closest, ", D.Code(best.variant or best.agent),
                             f", by {_pct(rel(best))}"]
            scored = [x for x in ranked if x.n > 1 and math.isfinite(x.rmse)]
            if len(scored) > 1:  # over many logs the RMSE says more than the mean
                low = min(scored, key=lambda x: x.rmse)
                sentence += [f"; lowest RMSE over {low.n} logs: ",
                             D.Code(low.variant or low.agent), f" ({_num(low.rmse, 3)})"]
            said.append((abs(rel(worst)), sentence + ["."]))
        said.sort(key=lambda x: -x[0] if math.isfinite(x[0]) else 0)  # the world's last
        out += [s for _, s in said[:MAX_FINDINGS]]
        if len(said) > MAX_FINDINGS:
            out.append([f"... {len(said) - MAX_FINDINGS} more of ", D.Code(evaluation),
                        " in the summary below."])
    return out


def _one_line(scenario: dict | None, env: dict) -> list:
    """What was run, in one line."""
    if scenario is None:
        return ["scenario.toml is missing or damaged: what was run is unknown."]
    seeds = scenario["run"]["seeds"]
    parts: list = ["Ran "]
    for j, ev in enumerate(scenario["evaluations"]):
        parts += ([", "] if j else []) + [D.Code(str(ev["name"])), f" ({ev['kind']})"]
    agents = [str(a["name"]) for a in scenario["agents"]]
    if agents:
        parts += [" on "] + _joined([D.Code(a) for a in agents])
    parts.append(f", seed{'s' if len(seeds) > 1 else ''} "
                 f"{', '.join(map(str, seeds[:6]))}{', ...' if len(seeds) > 6 else ''}")
    if isinstance(env.get("cells"), int):
        parts.append(f", {env['cells']} cell{'s' if env['cells'] != 1 else ''}")
    if env.get("end"):
        parts.append(f", finished {env['end']}")
    return parts + ["."]


def _figure_blocks(figures: list, done: set, view: _View) -> list:
    """The figures of each evaluation, under its name (those at the top left out), the
    first beside the key rows of the evaluation's summary, which it draws."""
    out: list = []
    for evaluation in dict.fromkeys(e for e, _, _ in figures):
        mine = [(t, p) for e, t, p in figures if e == evaluation and (t, p) not in done]
        if not mine:
            continue
        out.append(D.Heading(str(evaluation), level=3))
        blocks = [D.Figure(str(t), Path(p).name) if p else D.Paragraph(f"({t})")
                  for t, p in mine]
        key = [s for s in _key_rows(view.rows, view.varying)[0] if s.evaluation == evaluation]
        first = next((j for j, b in enumerate(blocks) if isinstance(b, D.Figure)), None)
        if key and first is not None:
            header, cells = _summary_grid(view, key[:12])
            drop = [j for j, h in enumerate(header) if h in ("evaluation", "logs", "RMSE",
                                                             "coverage")]
            table = D.Table([h for j, h in enumerate(header) if j not in drop],
                            [[c for j, c in enumerate(r) if j not in drop] for r in cells],
                            caption="Key rows of the summary" + (
                                f" (the first 12 of {len(key)})" if len(key) > 12 else ""))
            blocks[first] = D.Side(blocks[first], table)
        out += blocks
    return out


def _record(figures: list, scenario: dict | None) -> list:
    """The figure of record of each evaluation -- its kind's first figure (each kind draws
    the one designed to answer its question first), else its estimates chart, else its
    first generic figure -- then the fitted world's fidelity figure, if any."""
    out = []
    for name in [ev["name"] for ev in (scenario or {}).get("evaluations", ())] + [
            FITTED_WORLD]:
        drawn = [(t, p) for e, t, p in figures if e == name and p]
        if drawn:
            out.append(drawn[0])
    return out


def write_report(run_dir) -> Path:
    """(Re)write ``report.md``, ``report.html`` and ``figures/`` of ``run_dir`` from its
    tables (``results.jsonl`` and ``estimates.csv.gz``, which the caller has just written
    from the verified cells: the end of a run, :func:`rebuild_report`).

    The report opens with the answer: what was run in one line, the findings (sentences
    computed from the run's numbers, :func:`_findings`), the figure of record of each
    evaluation, then the contents. A damaged ``environment.json`` leaves out what it holds
    (command, times, timing). Every string of the run directory is rendered as text
    (:mod:`recloop._document`); figures are embedded only from the PNGs this report drew
    under ``figures/``.
    """
    from recloop._registry import registry

    run_dir = Path(run_dir)
    scenario = _read_scenario(run_dir)[0]
    env = _rundir.check_json_object(run_dir / "environment.json")[0] or {}
    rows = _read_results(run_dir)
    summary = _read_summary(run_dir)
    view = _view(summary, scenario)
    errors: list[str] = []
    figures = _figures(run_dir, rows, scenario, summary, errors)
    run = scenario["run"] if scenario else {"name": run_dir.name}
    out: list = [D.Heading(str(run["name"]), level=1)]
    if run.get("description"):
        out.append(D.Paragraph(str(run["description"])))
    out.append(D.Paragraph(*_one_line(scenario, env)))
    findings = _findings(view, _headlines(scenario))
    if findings:
        out += [D.Paragraph(D.Strong("Findings"), " (at the last tick and the largest swept "
                            "value; every row is in the summary):"), D.Bullets(findings)]
    record = _record(figures, scenario)
    if record:
        out.append(D.Gallery([D.Figure(str(t), Path(p).name) for t, p in record]))
    out.append(D.Contents())
    seed_units = [ev["name"] for ev in (scenario or {}).get("evaluations", ())
                  if getattr(registry().evaluations.get(ev["kind"]), "unit", "") == "seed"]
    from recloop._glossary import scenario_names

    named = scenario_names(scenario)
    out += _summary_section(view, seed_units, named)
    if scenario is not None:
        out += _kind_sections(run_dir, scenario, rows, summary, errors)
    out += _fitted_world(run_dir, scenario, env)
    rest = _figure_blocks(figures, set(record), view)
    if rest:
        out += [D.Heading("Figures")] + rest
    out += [D.Heading("What was run")] + _what_was_run(run_dir, scenario, env)
    out += _measurements_section(rows)
    out += _glossary_section(view, rows, named)
    timing = env.get("cell_seconds")
    out += [D.Heading("Timing"), D.Table(
        ("evaluation", "seconds (sum over its cells)"),
        [[str(name), f"{seconds:.2f}" if isinstance(seconds, (int, float)) else "?"]
         for name, seconds in (timing.items() if isinstance(timing, dict) else ())])]
    D.write_document(run_dir, out, title=str(run["name"]))
    _write_errors(run_dir, errors)
    return run_dir / "report.md"


def _glossary_section(view: _View, rows: list[dict], named: dict) -> list:
    """The definitions of the metrics and variants of this report (``recloop._glossary``;
    docs/results.md has them all)."""
    from recloop._glossary import COLUMNS, define, entry

    names = dict.fromkeys([s.metric for s in view.rows + view.truths]
                          + [s.variant for s in view.rows + view.truths if s.variant]
                          + [r["metric"] for r in rows] + [r["variant"] for r in rows
                                                            if r["variant"]])
    seen: dict = {}
    for n in names:
        pattern = entry(str(n))
        if pattern is not None:
            seen.setdefault(pattern, define(str(n)))
        elif str(n) in named:
            seen.setdefault(str(n), named[str(n)])
    if not seen:
        return []
    return [D.Heading("Glossary"), D.Paragraph(
        "The names of this report (hover over one in the summary to read it there); ",
        D.Code("<K>"), " stands for a number. Columns: ") ,
        D.Table(("column", "definition"), [[D.Code(k), v] for k, v in COLUMNS.items()]),
        D.Table(("name", "definition"), [[D.Code(p), d] for p, d in seen.items()])]
