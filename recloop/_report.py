"""``report.md`` and ``figures/*.png`` of a run directory, rebuilt from its results.

Rows are aggregated over seeds per (evaluation, agent, variant, metric, tick, params) while
``results.jsonl`` is streamed, so memory grows with the number of groups, not of rows.
matplotlib (Agg backend) is imported only here, when a report is written.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from recloop import _rundir

__all__ = ["summary_lines", "write_report"]

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
            self.err += e - t
            self.err2 += (e - t) ** 2
        if not math.isnan(row["stderr"]):
            self.n_stderr += 1
            self.stderr += row["stderr"]
        lo, hi = row["ci_low"], row["ci_high"]
        if not (math.isnan(lo) or math.isnan(hi)):
            self.n_ci += 1
            self.ci_low += lo
            self.ci_high += hi
            if not math.isnan(t):
                self.covered += lo <= t <= hi

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
        return self.covered / self.n_ci if self.n_ci and self.n_truth else math.nan


def _num(x: float, digits: int = 4) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}g}"


def _aggregate(run_dir: Path):
    groups: dict[tuple, _Group] = {}
    for row in _rundir.read_results(run_dir):
        key = (row["evaluation"], row["agent"], row["variant"] or "", row["metric"],
               row["tick"], json.dumps(row["params"], sort_keys=True))
        groups.setdefault(key, _Group()).add(row)
    return groups


def _summary(groups: dict) -> list[tuple[tuple, _Group]]:
    """Groups with a truth merged over ticks and swept parameters: one row per
    (evaluation, agent, variant, metric), so a run reads in a screenful."""
    merged: dict[tuple, _Group] = {}
    for key, g in groups.items():
        if g.n_truth:
            merged.setdefault(key[:4], _Group()).merge(g)
    return list(merged.items())


def _summary_table(items) -> list[str]:
    out = ["| evaluation | agent | variant | metric | rows | mean estimate | mean truth | "
           "mean error (bias) | RMSE | coverage |", "|---|---|---|---|---|---|---|---|---|---|"]
    for (evaluation, agent, variant, metric), g in items:
        out.append(f"| {evaluation} | {agent} | {variant} | {metric} | {g.n} | {_num(g.mean)} | "
                   f"{_num(g.truth_mean)} | {_num(g.bias, 3)} | {_num(g.rmse, 3)} | "
                   f"{_num(g.coverage, 3)} |")
    return out


def summary_lines(run_dir, *, limit: int = 30) -> list[str]:
    """The summary of a run's estimates against the truth, as plain text lines (and the
    evaluation kinds' notes, e.g. why BRED is optimistic for LinUCB)."""
    run_dir = Path(run_dir)
    items = _summary(_aggregate(run_dir))
    rows = [("evaluation", "agent", "variant", "metric", "estimate", "truth", "bias", "RMSE")]
    rows += [(*key, _num(g.mean), _num(g.truth_mean), _num(g.bias, 3), _num(g.rmse, 3))
             for key, g in items[:limit]]
    widths = [max(len(r[j]) for r in rows) for j in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    if len(items) > limit:
        lines.append(f"({len(items) - limit} more in report.md)")
    try:
        scenario = tomllib.loads((run_dir / "scenario.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return lines
    notes = [line[2:] for line in _kind_sections(run_dir, scenario) if line.startswith("> ")]
    return lines + ([""] + notes if notes else [])


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")[:80] or "figure"


def _kind_figures(run_dir: Path, scenario: dict, folder: Path) -> tuple[list, set]:
    """Figures drawn by the evaluation kinds themselves (rows of the first seed)."""
    from recloop._registry import registry
    from recloop._results import Measurement

    made, covered = [], set()
    first_seed = scenario["run"]["seeds"][0]
    for ev in scenario["evaluations"]:
        kind = registry().evaluations.get(ev["kind"])
        if kind is None or not kind.figures:
            continue
        rows = [Measurement(evaluation=r["evaluation"], agent=r["agent"], metric=r["metric"],
                            estimate=r["estimate"], stderr=r["stderr"], ci_low=r["ci_low"],
                            ci_high=r["ci_high"], truth=r["truth"], n=r["n"], tick=r["tick"],
                            variant=r["variant"] or "", params=r["params"] or {})
                for r in _rundir.read_results(run_dir)
                if r["evaluation"] == ev["name"] and r["seed"] == first_seed]
        if not rows:
            continue
        for path in kind.figures(rows, folder, scenario.get("world")):
            made.append((f"{ev['name']}: {Path(path).stem}", f"figures/{Path(path).name}"))
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
        rows = [r for r in _rundir.read_results(run_dir) if r["evaluation"] == ev["name"]]
        lines = kind.report(rows, scenario) if rows else []
        if lines:
            out += ["", f"## {ev['name']}", ""] + lines
    return out


def _figures(run_dir: Path, groups: dict, scenario: dict) -> list[tuple[str, str]]:
    """Draw the kinds' own figures, then one per (evaluation, metric) for the others."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    folder = run_dir / "figures"
    folder.mkdir(exist_ok=True)
    for old in folder.glob("*.png"):
        old.unlink()
    made, covered = _kind_figures(run_dir, scenario, folder)
    by_plot: dict[tuple, list] = {}
    for key, g in groups.items():
        if key[0] not in covered:
            by_plot.setdefault((key[0], key[3]), []).append((key, g))
    for (evaluation, metric), items in list(by_plot.items())[:MAX_FIGURES]:
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
            for (k, g), p in zip(items, params):
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
        line = (f"| {evaluation} | {agent} | {variant} | {metric} | "
                f"{'' if tick is None else tick} | {'' if params == '{}' else params} | {g.n} | "
                f"{est} |")
        if truth:
            line += (f" {_num(g.truth_mean)} | {_num(g.bias, 3)} | {_num(g.rmse, 3)} | "
                     f"{_num(g.coverage, 3)} |")
        out.append(line)
    return out


def write_report(run_dir) -> Path:
    """(Re)write ``report.md`` and ``figures/`` of ``run_dir`` from its results files."""
    run_dir = Path(run_dir)
    scenario = tomllib.loads((run_dir / "scenario.toml").read_text(encoding="utf-8"))
    env_path = run_dir / "environment.json"
    env = json.loads(env_path.read_text(encoding="utf-8")) if env_path.exists() else {}
    groups = _aggregate(run_dir)
    figures = _figures(run_dir, groups, scenario)
    run = scenario["run"]
    out = [f"# {run['name']}", ""]
    if run.get("description"):
        out += [run["description"], ""]
    out += ["## What was run", "",
            f"- seeds: {', '.join(map(str, run['seeds']))}",
            f"- agents: " + ", ".join(f"`{a['name']}` ({a['kind']})" for a in scenario["agents"]),
            f"- cells: {env.get('cells', '?')}, rows: {env.get('rows', '?')}",
            f"- command: `{' '.join(env.get('command', []))}`",
            f"- started {env.get('start', '?')}, finished {env.get('end', '?')}"
            + (f" (resumed {len(env['resumed'])} time(s))" if env.get("resumed") else ""),
            "- full scenario with defaults: [scenario.toml](scenario.toml); every row: "
            "[results.csv](results.csv)", ""]
    for ev in scenario["evaluations"]:
        params = ", ".join(f"{k} = {json.dumps(v)}" for k, v in ev.items()
                           if k not in ("kind", "name", "agents", "sweep"))
        sweep = ev.get("sweep")
        out.append(f"- evaluation `{ev['name']}` ({ev['kind']}) on {', '.join(ev['agents'])}: "
                   f"{params}" + (f"; swept {json.dumps(sweep)}" if sweep else ""))
    out += _kind_sections(run_dir, scenario)
    with_truth = [(k, g) for k, g in groups.items() if g.n_truth]
    others = [(k, g) for k, g in groups.items() if not g.n_truth]
    if with_truth:
        out += ["", "## Summary", "",
                "Every estimate that has a ground truth, merged over ticks and swept "
                "parameters (the table below has them one by one): error is estimate - truth, "
                "RMSE its root mean square, coverage the share of 95% intervals that contain "
                "the truth.", ""]
        out += _summary_table(_summary(groups))
    out += ["", "## Estimates against the truth", "",
            "Mean over seeds; `±` is the standard error over seeds (or the estimator's own "
            "standard error for one seed); error is estimate - truth (its mean: the bias); "
            "coverage is the share of 95% intervals that contain the truth.", ""]
    out += _table(with_truth, truth=True) if with_truth else ["No measurement has a ground "
                                                               "truth in this run."]
    if others:
        out += ["", "## Other measurements (no ground truth)", ""]
        out += _table(others, truth=False, limit=MAX_TABLE_ROWS // 2)
    out += ["", "## Figures", ""]
    for title, path in figures:
        out += [f"### {title}", "", f"![{title}]({path})", ""]
    out += ["## Timing", "", "| evaluation | seconds (sum over its cells) |", "|---|---|"]
    for name, seconds in env.get("cell_seconds", {}).items():
        out.append(f"| {name} | {seconds:.2f} |")
    out.append("")
    _rundir.atomic_write(run_dir / "report.md", "\n".join(out))
    return run_dir / "report.md"
