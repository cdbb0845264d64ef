"""``report.md`` and ``figures/*.png`` of a run directory, rebuilt from its results.

Rows are aggregated over seeds per (evaluation, agent, variant, metric, tick, params) while
``results.jsonl`` is streamed, so memory grows with the number of groups, not of rows.
matplotlib (Agg backend) is imported only here, when a report is written.

How rows are shown:

* each evaluation's summary leads with its headline metric (its kind's ``headline``), with or
  without a truth (``kendall_tau`` has none);
* coverage is computed only over intervals of positive width: an exact computation (e.g.
  exhaustive LOO, stderr 0) has nothing to cover, and its coverage is left blank;
* rows that are errors already (``bias``, ``rmse``, ``coverage``, ``width``, ... with a truth
  of 0 or none) are listed as such, never with an "error of the error";
* rows whose estimate is the truth itself (the twin's score, an online value) are listed once
  as the ground truth, not as an estimate with error 0;
* rows of agent ``world`` compare the world with its counterfactual twin: their error is the
  campaigns' effect, labelled so.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
import traceback
from dataclasses import dataclass
from pathlib import Path

from recloop import _rundir

__all__ = ["rebuild_report", "summary_lines", "write_report"]

#: Metrics that are already errors against the truth (suffixes such as ``_at_matches``
#: allowed): shown as they are when their truth is 0 or missing.
ERROR_METRICS = ("bias", "rmse", "relative_rmse", "coverage", "width", "nan_rate", "mse",
                 "mae")

MAX_TABLE_ROWS = 200
MAX_FIGURES = 24
MAX_LINES = 12


@dataclass
class _Group:
    n: int = 0
    est: float = 0.0
    est2: float = 0.0
    truth: float = 0.0
    n_truth: int = 0
    err: float = 0.0
    err2: float = 0.0
    stderr: float = 0.0
    n_stderr: int = 0
    covered: int = 0
    n_ci: int = 0
    ci_low: float = 0.0
    ci_high: float = 0.0
    truth_abs: float = 0.0
    n_exact_ci: int = 0

    def add(self, row: dict) -> None:
        e = row["estimate"]
        if math.isnan(e):
            return
        self.n += 1
        self.est += e
        self.est2 += e * e
        t = row["truth"]
        if not math.isnan(t):
            self.n_truth += 1
            self.truth += t
            self.truth_abs += abs(t)
            self.err += e - t
            self.err2 += (e - t) ** 2
        if not math.isnan(row["stderr"]):
            self.n_stderr += 1
            self.stderr += row["stderr"]
        lo, hi = row["ci_low"], row["ci_high"]
        if not (math.isnan(lo) or math.isnan(hi)):
            if hi > lo:  # a sampling interval: coverage means something
                self.n_ci += 1
                self.ci_low += lo
                self.ci_high += hi
                if not math.isnan(t):
                    self.covered += lo <= t <= hi
            else:  # zero width: an exact value, nothing to cover
                self.n_exact_ci += 1

    def merge(self, other: "_Group") -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    @property
    def mean(self) -> float:
        return self.est / self.n if self.n else math.nan

    @property
    def spread(self) -> float:
        """Standard error of the mean over seeds, or the mean reported stderr for one seed."""
        if self.n > 1:
            var = max(self.est2 / self.n - self.mean ** 2, 0.0) * self.n / (self.n - 1)
            return math.sqrt(var / self.n)
        return self.stderr / self.n_stderr if self.n_stderr else math.nan

    @property
    def truth_mean(self) -> float:
        return self.truth / self.n_truth if self.n_truth else math.nan

    @property
    def bias(self) -> float:
        return self.err / self.n_truth if self.n_truth else math.nan

    @property
    def rmse(self) -> float:
        return math.sqrt(self.err2 / self.n_truth) if self.n_truth else math.nan

    @property
    def coverage(self) -> float:
        """Share of the sampling intervals (positive width) that contain the truth."""
        return self.covered / self.n_ci if self.n_ci and self.n_truth else math.nan

    @property
    def is_truth_itself(self) -> bool:
        """Every estimate equals its truth exactly: the truth reported against itself."""
        return self.n_truth == self.n > 0 and self.err2 == 0.0


def _num(x: float, digits: int = 4) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}g}"


def _aggregate(run_dir: Path):
    groups: dict[tuple, _Group] = {}
    for row in _rundir.read_results(run_dir):
        key = (row["evaluation"], row["agent"], row["variant"] or "", row["metric"],
               row["tick"], json.dumps(row["params"], sort_keys=True))
        groups.setdefault(key, _Group()).add(row)
    return groups


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


def _is_error_row(key: tuple, g: _Group) -> bool:
    """An error already (bias, RMSE, coverage, ...): no truth, or a truth of 0 to which
    an "error of the error" would be computed."""
    return _is_error_metric(key[3]) and (g.n_truth == 0 or g.truth_abs == 0.0)


def _metric_label(agent: str, metric: str) -> str:
    """``world`` rows compare the world with its twin: their error is the campaigns'
    effect, not an estimator's bias."""
    return f"{metric} [world - twin]" if agent == "world" else metric


def _merge(groups: dict) -> dict[tuple, _Group]:
    """Groups merged over ticks and swept parameters: one per (evaluation, agent, variant,
    metric)."""
    merged: dict[tuple, _Group] = {}
    for key, g in groups.items():
        merged.setdefault(key[:4], _Group()).merge(g)
    return merged


@dataclass
class _Summary:
    """The summary's parts: estimates against the truth (headline first, per evaluation),
    headline metrics without a truth, and the truth reported against itself."""

    rows: list            # ((evaluation, agent, variant, metric), group), in display order
    truths: list          # the truth against itself


def _summary(groups: dict, scenario: dict | None) -> _Summary:
    heads = _headlines(scenario)
    merged = _merge(groups)
    order = [ev.get("name") for ev in (scenario or {}).get("evaluations", ())]
    order += [k[0] for k in merged if k[0] not in order]
    rows, truths = [], []
    for evaluation in dict.fromkeys(order):
        items = [(k, g) for k, g in merged.items() if k[0] == evaluation]
        head = [(k, g) for k, g in items if _is_headline(k[3], heads.get(evaluation, ()))
                and not _is_error_row(k, g)]
        rest = [(k, g) for k, g in items if (k, g) not in head and g.n_truth
                and not _is_error_row(k, g)]
        for k, g in head + rest:
            (truths if g.is_truth_itself else rows).append((k, g))
    return _Summary(rows, truths)


def _summary_table(summary: _Summary) -> list[str]:
    out = ["| evaluation | agent | variant | metric | rows | mean estimate | mean truth | "
           "mean error (bias) | RMSE | coverage |", "|---|---|---|---|---|---|---|---|---|---|"]
    for (evaluation, agent, variant, metric), g in summary.rows:
        est = _num(g.mean) + (f" ± {_num(g.spread, 2)}" if not g.n_truth
                              and not math.isnan(g.spread) else "")
        out.append(f"| {evaluation} | {agent} | {variant} | {_metric_label(agent, metric)} | "
                   f"{g.n} | {est} | {_num(g.truth_mean)} | {_num(g.bias, 3)} | "
                   f"{_num(g.rmse, 3)} | {_num(g.coverage, 3)} |")
    notes = ["", "Each evaluation's headline metric comes first (without a truth, the "
             "estimate is shown ± its standard error). Coverage is the share of 95% "
             "intervals that contain the truth; it is blank where the intervals have zero "
             "width (an exact computation, such as the exhaustive LOO score, has nothing to "
             "cover) or where there is no truth. Rows that are errors already (bias, RMSE, "
             "coverage, width) are listed under *Error summaries*."]
    if any(k[1] == "world" for k, _ in summary.rows):
        notes.append("")
        notes.append("Rows `[world - twin]` compare the simulated world with its "
                     "counterfactual twin: their error is the campaigns' effect on that "
                     "quantity, not the bias of an estimator.")
    if summary.truths:
        notes += ["", "The truth itself (estimates that are the ground truth, e.g. the twin's "
                  "score or an online value; error 0 by construction):", ""]
        notes += ["| evaluation | agent | variant | metric | rows | truth |",
                  "|---|---|---|---|---|---|"]
        notes += [f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {g.n} | {_num(g.truth_mean)} |"
                  for k, g in summary.truths]
    return out + notes


def summary_lines(run_dir, *, limit: int = 30) -> list[str]:
    """The summary of a run's estimates against the truth, as plain text lines (each
    evaluation's headline first; the truth against itself on one line per evaluation), and
    the evaluation kinds' notes (e.g. why BRED is optimistic for LinUCB)."""
    run_dir = Path(run_dir)
    scenario = _read_scenario(run_dir)[0]
    summary = _summary(_aggregate(run_dir), scenario)
    rows = [("evaluation", "agent", "variant", "metric", "estimate", "truth", "bias", "RMSE")]
    for key, g in summary.rows[:limit]:
        est = _num(g.mean) + (f" ± {_num(g.spread, 2)}" if not g.n_truth
                              and not math.isnan(g.spread) else "")
        rows.append((key[0], key[1], key[2], _metric_label(key[1], key[3]), est,
                     _num(g.truth_mean), _num(g.bias, 3), _num(g.rmse, 3)))
    widths = [max(len(r[j]) for r in rows) for j in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    if len(summary.rows) > limit:
        lines.append(f"({len(summary.rows) - limit} more in report.md)")
    by_ev: dict[str, list[str]] = {}
    for (evaluation, agent, variant, metric), g in summary.truths:
        label = " ".join(x for x in (agent, variant) if x)
        by_ev.setdefault(f"{evaluation} {metric}", []).append(f"{label} {_num(g.truth_mean)}")
    if by_ev:
        lines.append("truth itself: " + "; ".join(f"{k}: {', '.join(v)}"
                                                  for k, v in by_ev.items()))
    if scenario is None:
        return lines
    notes = [line[2:] for line in _kind_sections(run_dir, scenario) if line.startswith("> ")]
    return lines + ([""] + notes if notes else [])


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")[:80] or "figure"


def _disk_error(exc: BaseException) -> bool:
    """A file that cannot be written (full disk, quota, read-only or failing device): the
    run's failure, not one odd figure (issue 25, section 3: exit 1, not a report that
    quietly lacks its figures)."""
    import errno

    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS,
                                                      errno.EIO)


def _log_error(run_dir: Path, what: str, exc: BaseException) -> None:
    """Append a failure of the report's own drawing or writing to ``errors.log``."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    try:
        with open(run_dir / "errors.log", "a", encoding="utf-8") as f:
            f.write(f"report: {what}: {type(exc).__name__}: {exc}\n{text}\n")
    except OSError:
        pass


def _kind_figures(run_dir: Path, scenario: dict, folder: Path) -> tuple[list, set]:
    """Figures drawn by the evaluation kinds themselves (rows of the first seed; the title
    names the seed when there are several)."""
    from recloop._registry import registry
    from recloop._results import Measurement

    made, covered = [], set()
    seeds = scenario["run"]["seeds"]
    first_seed = seeds[0]
    which = f" (seed {first_seed})" if len(seeds) > 1 else ""
    for ev in scenario["evaluations"]:
        kind = registry().evaluations.get(ev["kind"])
        if kind is None or not kind.figures:
            continue
        try:
            rows = [Measurement(evaluation=r["evaluation"], agent=r["agent"],
                                metric=r["metric"], estimate=r["estimate"], stderr=r["stderr"],
                                ci_low=r["ci_low"], ci_high=r["ci_high"], truth=r["truth"],
                                n=r["n"], tick=r["tick"], variant=r["variant"] or "",
                                params=r["params"] or {})
                    for r in _rundir.read_results(run_dir)
                    if r["evaluation"] == ev["name"] and r["seed"] == first_seed]
            if not rows:
                continue
            paths = kind.figures(rows, folder, scenario.get("world"))
        except Exception as exc:  # a figure must not cost the report
            if _disk_error(exc):
                raise
            _log_error(run_dir, f"figures of {ev['name']}", exc)
            made.append((f"{ev['name']}: figures failed ({type(exc).__name__}, see "
                         "errors.log)", None))
            continue
        for path in paths:
            made.append((f"{ev['name']}: {Path(path).stem}{which}", f"figures/{Path(path).name}"))
        if kind.figures_only:
            covered.add(ev["name"])
    return made, covered


def _kind_sections(run_dir: Path, scenario: dict) -> list[str]:
    """The evaluation kinds' own sections (e.g. the ``ope`` leaderboard), all seeds."""
    from recloop._registry import registry

    out = []
    for ev in scenario["evaluations"]:
        kind = registry().evaluations.get(ev["kind"])
        if kind is None or kind.report is None:
            continue
        try:
            rows = [r for r in _rundir.read_results(run_dir) if r["evaluation"] == ev["name"]]
            lines = kind.report(rows, scenario) if rows else []
        except Exception as exc:
            _log_error(run_dir, f"section of {ev['name']}", exc)
            lines = [f"(this section failed: {type(exc).__name__}, see errors.log)"]
        if lines:
            out += ["", f"## {ev['name']}", ""] + list(lines)
    return out


def _figures(run_dir: Path, groups: dict, scenario: dict | None) -> list[tuple[str, str]]:
    """Draw the kinds' own figures, then one per (evaluation, metric) for the others."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    folder = run_dir / "figures"
    folder.mkdir(exist_ok=True)
    for old in folder.glob("*.png"):
        old.unlink()
    made, covered = _kind_figures(run_dir, scenario, folder) if scenario else ([], set())
    by_plot: dict[tuple, list] = {}
    for key, g in groups.items():
        if key[0] not in covered:
            by_plot.setdefault((key[0], key[3]), []).append((key, g))
    for (evaluation, metric), items in list(by_plot.items())[:MAX_FIGURES]:
        try:
            ticks = [k[4] for k, _ in items if k[4] is not None]
            params = [json.loads(k[5]) for k, _ in items]
            # x axis: a numeric parameter that varies (a swept one, typically)
            values: dict[str, set] = {}
            for d in params:
                for p, v in d.items():
                    if isinstance(v, (int, float)) and not isinstance(v, bool):
                        values.setdefault(p, set()).add(v)
            numeric = sorted((p for p, vs in values.items() if len(vs) > 1),
                             key=lambda p: (-len(values[p]), p))
            fig, ax = plt.subplots(figsize=(7, 4.2))
            lines: dict[str, list] = {}
            if ticks:
                xlabel = "tick"
                for k, g in items:
                    label = " / ".join(x for x in (k[1], k[2]) if x)
                    if len({k[5] for k, _ in items}) > 1:
                        label += f" {k[5]}"
                    lines.setdefault(label, []).append((k[4] if k[4] is not None else 0, g))
            elif numeric:
                xlabel = numeric[0]
                for (k, g), p in zip(items, params, strict=True):
                    rest = {a: b for a, b in p.items() if a != xlabel}
                    label = " / ".join(x for x in (k[1], k[2]) if x) + (f" {rest}" if rest else "")
                    lines.setdefault(label, []).append((p.get(xlabel, math.nan), g))
            else:
                xlabel = ""
            if lines:
                for j, (label, pts) in enumerate(list(lines.items())[:MAX_LINES]):
                    pts.sort(key=lambda t: t[0])
                    xs = [x for x, _ in pts]
                    color = f"C{j % 10}"
                    ys = [g.mean for _, g in pts]
                    yerr = [1.96 * g.spread if not math.isnan(g.spread) else 0.0 for _, g in pts]
                    ax.errorbar(xs, ys, yerr=yerr, color=color, marker="o", ms=3, capsize=2,
                                label=label)
                    truths = [g.truth_mean for _, g in pts]
                    if any(not math.isnan(t) for t in truths):
                        ax.plot(xs, truths, color=color, ls="--", lw=1)
                ax.set_xlabel(xlabel)
                xs_all = [x for pts in lines.values() for x, _ in pts if not math.isnan(x)]
                if xs_all and min(xs_all) > 0 and max(xs_all) / min(xs_all) >= 20:
                    ax.set_xscale("log")
            else:
                labels = [" / ".join(x for x in (k[1], k[2]) if x) or k[3] for k, _ in items]
                xs = list(range(len(items)))
                ax.errorbar(xs, [g.mean for _, g in items],
                            yerr=[1.96 * g.spread if not math.isnan(g.spread) else 0.0
                                  for _, g in items],
                            fmt="o", capsize=3, label="estimate (95% interval)")
                truths = [g.truth_mean for _, g in items]
                if any(not math.isnan(t) for t in truths):
                    ax.plot(xs, truths, "k_", ms=18, mew=2, label="truth")
                ax.set_xticks(xs, labels, rotation=30, ha="right", fontsize=8)
            ax.set_ylabel(metric)
            ax.set_title(f"{evaluation}: {metric} ({'dashed' if lines else 'bars'}: truth)")
            ax.legend(fontsize=7, loc="best")
            fig.tight_layout()
            name = f"{_slug(evaluation)}__{_slug(metric)}.png"
            _rundir.atomic_savefig(fig, folder / name, dpi=100)
            plt.close(fig)
            made.append((f"{evaluation}: {metric}", f"figures/{name}"))
        except Exception as exc:  # one odd figure must not cost the report
            plt.close("all")
            if _disk_error(exc):
                raise
            _log_error(run_dir, f"figure {evaluation}: {metric}", exc)
            made.append((f"{evaluation}: {metric}: figure failed ({type(exc).__name__}, see "
                         "errors.log)", None))
    return made


def _table(items, *, truth: bool, limit: int = MAX_TABLE_ROWS) -> list[str]:
    head = "| evaluation | agent | variant | metric | tick | params | seeds | estimate |"
    rule = "|---|---|---|---|---|---|---|---|"
    if truth:
        head += " truth | error (bias) | RMSE | coverage |"
        rule += "---|---|---|---|"
    out = [head, rule]
    for j, (key, g) in enumerate(items):
        if j == limit:
            out += ["", f"({len(items) - limit} more rows in results.csv)"]
            break
        evaluation, agent, variant, metric, tick, params = key
        est = _num(g.mean) + (f" ± {_num(g.spread, 2)}" if not math.isnan(g.spread) else "")
        line = (f"| {evaluation} | {agent} | {variant} | {_metric_label(agent, metric)} | "
                f"{'' if tick is None else tick} | {'' if params == '{}' else params} | {g.n} | "
                f"{est} |")
        if truth:
            line += (f" {_num(g.truth_mean)} | {_num(g.bias, 3)} | {_num(g.rmse, 3)} | "
                     f"{_num(g.coverage, 3)} |")
        out.append(line)
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


def _rebuild_results(run_dir: Path, scenario: dict, text: str) -> str | None:
    """Rewrite ``results.*`` from the cell files (verified); ``None``, or why it cannot."""
    from recloop._runner import iter_rows, plan_cells

    try:
        cells = plan_cells(scenario)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return f"scenario.toml does not say which cells there are ({type(exc).__name__})"
    digest = _rundir.scenario_hash(text)
    bad = [c for c in cells if _rundir.check_cell(
        _rundir.cell_path(run_dir, c.filename), cell_id=c.id, seed=c.seed,
        scenario=digest)[1] is not None]
    if bad:
        return (f"{len(bad)} of {len(cells)} cell files are missing or damaged (first: "
                f"{bad[0].id}); continue the run with `recloop run SCENARIO --resume`")
    _rundir.write_results(run_dir, iter_rows(run_dir, cells, scenario=digest))
    return None


def rebuild_report(run_dir, *, on_damage=None) -> Path | None:
    """``recloop report``: check a run directory, repair what it can, rewrite the report.

    Takes the directory's lock (:class:`recloop._rundir.RunDirError` if a run uses it),
    removes temporary files, checks ``scenario.toml``, ``environment.json`` and
    ``results.jsonl``; a damaged ``results.jsonl`` is rebuilt from the cell files (when they
    are all there and intact), a damaged ``scenario.toml`` or ``environment.json`` gives a
    report without the parts they hold. Each problem goes to ``on_damage`` as a
    :class:`recloop._rundir.Damage`. Returns the report's path, or ``None`` when there is
    no results table to report on.
    """
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
        scenario, text, problem = _read_scenario(run_dir)
        if problem is not None:
            report(Damage(str(run_dir / "scenario.toml"), problem, "the report lacks what was "
                          "run and the evaluations' own figures and sections"))
        _, problem = _rundir.check_json_object(run_dir / "environment.json")
        if problem is not None:
            report(Damage(str(run_dir / "environment.json"), problem, "the report lacks the "
                          "command, times and timing"))
        problem = _rundir.check_results(run_dir)
        if problem is not None:
            path = str(run_dir / "results.jsonl")
            if scenario is None:
                report(Damage(path, problem, "cannot be rebuilt without scenario.toml"))
                return None
            why = _rebuild_results(run_dir, scenario, text)
            if why is not None:
                report(Damage(path, problem, f"cannot be rebuilt: {why}"))
                return None
            report(Damage(path, problem, "rebuilt (with results.csv) from the cell files"))
        return write_report(run_dir)
    finally:
        lock.release()


def write_report(run_dir) -> Path:
    """(Re)write ``report.md`` and ``figures/`` of ``run_dir`` from its results files.

    A missing or damaged ``scenario.toml`` or ``environment.json`` leaves out the parts
    they hold (what was run, the kinds' own figures and sections; command, times and
    timing); see :func:`rebuild_report` for the checks and repairs.
    """
    run_dir = Path(run_dir)
    scenario = _read_scenario(run_dir)[0]
    env = _rundir.check_json_object(run_dir / "environment.json")[0] or {}
    groups = _aggregate(run_dir)
    figures = _figures(run_dir, groups, scenario)
    run = scenario["run"] if scenario else {"name": run_dir.name}
    out = [f"# {run['name']}", ""]
    if run.get("description"):
        out += [str(run["description"]), ""]
    out += ["## What was run", ""]
    if scenario is None:
        out += ["scenario.toml is missing or damaged: what was run is unknown; the tables "
                "below come from results.jsonl.", ""]
    else:
        command = env.get("command")
        out += [f"- seeds: {', '.join(map(str, run['seeds']))}",
                "- agents: " + ", ".join(f"`{a['name']}` ({a['kind']})"
                                         for a in scenario["agents"]),
                f"- cells: {env.get('cells', '?')}, rows: {env.get('rows', '?')}",
                f"- command: `{' '.join(map(str, command)) if isinstance(command, list) else '?'}`",
                f"- started {env.get('start', '?')}, finished {env.get('end', '?')}"
                + (f" (resumed {len(env['resumed'])} time(s))"
                   if isinstance(env.get("resumed"), list) and env["resumed"] else ""),
                "- full scenario with defaults: [scenario.toml](scenario.toml); every row: "
                "[results.csv](results.csv)", ""]
        for ev in scenario["evaluations"]:
            params = ", ".join(f"{k} = {json.dumps(v)}" for k, v in ev.items()
                               if k not in ("kind", "name", "agents", "sweep"))
            sweep = ev.get("sweep")
            out.append(f"- evaluation `{ev['name']}` ({ev['kind']}) on "
                       f"{', '.join(map(str, ev.get('agents', [])))}: {params}"
                       + (f"; swept {json.dumps(sweep)}" if sweep else ""))
        out += _kind_sections(run_dir, scenario)
    fidelity = run_dir / "fidelity.md"
    if fidelity.is_file():  # a world fitted to a real log: how faithful it is
        env_hash = env.get("world_sha256") if isinstance(env, dict) else None
        fitted_to = (scenario.get("world") or {}).get("calibrate_from", "?")
        out += ["", "## The fitted world", "",
                f"The world was fitted to `{fitted_to}`"
                + (f" (sha256 {env_hash})" if env_hash else "") + "; saved as "
                "[world.npz](world.npz). How faithful it is to the log:", ""]
        # its own headings one level down, inside this section
        out += [("#" + line if line.startswith("#") else line)
                for line in fidelity.read_text(encoding="utf-8").strip().splitlines()]
    summary = _summary(groups, scenario)
    if summary.rows or summary.truths:
        out += ["", "## Summary", "",
                "Per evaluation, merged over ticks and swept parameters (the tables below have "
                "them one by one): error is estimate - truth, RMSE its root mean square.", ""]
        out += _summary_table(summary)
    with_truth = [(k, g) for k, g in groups.items() if g.n_truth and not _is_error_row(k, g)]
    errors = [(k, g) for k, g in groups.items() if _is_error_row(k, g)]
    others = [(k, g) for k, g in groups.items() if not g.n_truth and not _is_error_row(k, g)]
    out += ["", "## Estimates against the truth", "",
            "Mean over seeds; `±` is the standard error over seeds (or the estimator's own "
            "standard error for one seed); error is estimate - truth (its mean: the bias); "
            "coverage is the share of 95% intervals of positive width that contain the "
            "truth (blank for exact values).", ""]
    out += _table(with_truth, truth=True) if with_truth else ["No measurement has a ground "
                                                               "truth in this run."]
    if errors:
        out += ["", "## Error summaries", "",
                "Rows that are already errors against the truth, computed by the evaluation "
                "(bias, RMSE, coverage of intervals, their width, ...): shown as they are.", ""]
        out += _table(errors, truth=False, limit=MAX_TABLE_ROWS // 2)
    if others:
        out += ["", "## Other measurements (no ground truth)", ""]
        out += _table(others, truth=False, limit=MAX_TABLE_ROWS // 2)
    out += ["", "## Figures", ""]
    for title, path in figures:
        out += [f"### {title}", ""] + ([f"![{title}]({path})"] if path else []) + [""]
    timing = env.get("cell_seconds")
    out += ["## Timing", "", "| evaluation | seconds (sum over its cells) |", "|---|---|"]
    for name, seconds in (timing.items() if isinstance(timing, dict) else ()):
        out.append(f"| {name} | {seconds:.2f} |" if isinstance(seconds, (int, float))
                   else f"| {name} | ? |")
    out.append("")
    _rundir.atomic_write(run_dir / "report.md", "\n".join(out))
    return run_dir / "report.md"
