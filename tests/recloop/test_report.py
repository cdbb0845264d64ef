"""The report and the CLI tell the truth plainly (issue 16, section 6; issue 22, section 1)."""

import io
import math

import pytest

from recloop._cli import main
from recloop._report import summary_lines, write_report
from recloop._rundir import COLUMNS, atomic_savefig, to_jsonable, write_tables
from recloop._scenario import dumps_toml

NAN = math.nan


def row(evaluation, agent, metric, estimate, *, truth=NAN, lo=NAN, hi=NAN, stderr=NAN,
        variant="", tick=None, seed=0, log=None):
    r = dict.fromkeys(COLUMNS)
    r.update(scenario="s", cell=f"{evaluation}/*/seed={seed}", seed=seed, evaluation=evaluation,
             agent=agent, tick=tick, variant=variant, metric=metric, estimate=estimate,
             stderr=stderr, ci_low=lo, ci_high=hi, truth=truth, error=estimate - truth, n=1,
             params={})
    if log is not None:
        r["log"] = log
    return r


def make_run(tmp_path, rows, evaluations=(("ev", "selfcheck"),), seeds=(0,), estimates=None):
    """A run directory of ``rows``; its per-log estimates are ``estimates`` (default: the
    rows themselves, one per seed, as for a kind whose unit is the seed)."""
    scenario = {"run": {"name": "s", "description": "", "seed": seeds[0],
                        "replicates": len(seeds), "seeds": list(seeds), "horizon": 0},
                "agents": [{"name": "a", "kind": "fixed_arm", "arm": 0}],
                "evaluations": [{"kind": kind, "name": name, "agents": ["a"]}
                                for name, kind in evaluations]}
    (tmp_path / "scenario.toml").write_text(dumps_toml(scenario))
    (tmp_path / "environment.json").write_text(to_jsonable({"command": ["recloop"]}))
    if estimates is None:
        estimates = [dict(r, log=0) for r in rows]
    write_tables(tmp_path, [{"rows": rows, "estimates": estimates}])
    return tmp_path


def summary_table(report: str) -> list[dict]:
    """The rows of the report's first table, as {column: cell}."""
    part = report.split("## Summary", 1)[1].split("\n## ", 1)[0]
    lines = [ln for ln in part.splitlines() if ln.startswith("| ")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    out = []
    for ln in lines[1:]:
        if ln.startswith("| evaluation |"):
            break  # the table of the truth itself
        out.append(dict(zip(header, (c.strip() for c in ln.strip("|").split("|")),
                            strict=True)))
    return out


def test_coverage_is_blank_for_exact_estimates(tmp_path):
    """Exhaustive LOO: zero-width intervals beside a small bias showed "coverage 0.2"."""
    rows = [row("ev", "g1", "loo_hit@5", 0.35 + 0.001, truth=0.35, lo=0.351, hi=0.351,
                stderr=0.0, seed=s) for s in range(5)]
    rows += [row("ev", "g1", "loo_hit@5_sampled", 0.36, truth=0.35, lo=0.30, hi=0.40 if s else
                 0.34, seed=s) for s in range(5)]
    report = write_report(make_run(tmp_path, rows, (("ev", "campaign_bias"),),
                                   seeds=range(5))).read_text()
    lines = {r["metric"]: r for r in summary_table(report)}
    assert lines["loo_hit@5"]["coverage"] == ""  # exact: no coverage
    assert lines["loo_hit@5_sampled"]["coverage"] == "0.8 (4/5)"  # 4 of 5 intervals cover
    assert lines["loo_hit@5_sampled"]["logs"] == "5"  # the seeds are the logs
    assert "zero width" in report


def test_coverage_is_blank_without_intervals(tmp_path):
    """An estimator without intervals (`optimist`) showed a coverage of 0.333."""
    rows = [row("ev", "t", "value", 0.3, truth=0.32, variant="optimist")]
    est = [row("ev", "t", "value", v, truth=0.32, variant="optimist", log=j)
           for j, v in enumerate((0.2, 0.3, 0.4))]
    report = write_report(make_run(tmp_path, rows, (("ev", "ope"),),
                                   estimates=est)).read_text()
    (line,) = summary_table(report)
    assert line["coverage"] == "" and line["logs"] == "3" and line["bias"] == "-0.02"


def test_errors_are_not_compared_with_a_truth_of_zero(tmp_path):
    rows = [row("ev", "a", "loo_hit@5", 0.3, truth=0.32, variant="unweighted"),
            row("ev", "a", "bias", -0.02, truth=0.0, lo=-0.05, hi=0.01, variant="replay"),
            row("ev", "a", "rmse", 0.03, variant="replay")]
    report = write_report(make_run(tmp_path, rows, (("ev", "campaign_bias"),))).read_text()
    assert [r["metric"] for r in summary_table(report)] == ["loo_hit@5"]
    measurements = report.split("## Measurements", 1)[1].split("\n## ", 1)[0]
    for m in ("| bias |", "| rmse |"):
        assert m in measurements
    text = "\n".join(summary_lines(tmp_path))
    assert "bias " not in text.split("\n", 1)[1] and "loo_hit@5" in text


def test_world_rows_are_the_campaigns_effect(tmp_path):
    rows = [row("ev", "world", "item_marginal", 0.09, truth=0.07, variant="item0", tick=1)]
    report = write_report(make_run(tmp_path, rows, (("ev", "campaign_bias"),))).read_text()
    assert "item_marginal (world vs twin)" in report and "campaigns' effect" in report
    assert any("item_marginal (world vs twin)" in ln for ln in summary_lines(tmp_path))


def test_the_headline_metric_leads_even_without_a_truth(tmp_path):
    rows = [row("ev", "u", "value", 0.3, truth=0.31, variant="replay"),
            row("ev", "replay", "kendall_tau", 0.6, variant="T")]
    est = [row("ev", "u", "value", v, truth=0.31, variant="replay", log=j)
           for j, v in enumerate((0.2, 0.4))]
    est += [row("ev", "replay", "kendall_tau", v, variant="T", log=j)
            for j, v in enumerate((0.5, 0.7))]
    report = write_report(make_run(tmp_path, rows, (("ev", "offline_vs_online"),),
                                   estimates=est)).read_text()
    table = summary_table(report)
    # mean 0.6, standard error over the two logs 0.1
    assert table[0]["metric"] == "kendall_tau" and table[0]["estimate"] == "0.6 ± 0.1"
    assert table[1]["metric"] == "value"
    lines = summary_lines(tmp_path)
    assert "kendall_tau" in lines[1] and "value" in lines[2]


def test_truth_against_itself_is_collapsed(tmp_path):
    rows = [row("ev", "a", "loo_hit@5", v, truth=v, lo=v, hi=v, variant="twin", tick=t)
            for t, v in ((0, 0.4), (1, 0.35))]
    rows += [row("ev", "a", "loo_hit@5", 0.3, truth=0.4, lo=0.3, hi=0.3, variant="unweighted",
                 tick=0)]
    # equal to the truth at one tick only (nothing pushed yet): an estimate, error 0
    rows += [row("ev", "a", "loo_hit@5", 0.35, truth=0.35, lo=0.35, hi=0.35,
                 variant="unweighted", tick=1)]
    report = write_report(make_run(tmp_path, rows, (("ev", "campaign_bias"),))).read_text()
    assert all(r["variant"] != "twin" for r in summary_table(report))
    assert [(r["variant"], r["tick"], r["bias"]) for r in summary_table(report)] == [
        ("unweighted", "0", "-0.1"), ("unweighted", "1", "0")]
    assert "The truth itself" in report and "| ev | a | twin | loo_hit@5 | 0 | 1 | 0.4 |" in report
    text = summary_lines(tmp_path)
    assert text[-1].startswith("truth itself: ev loo_hit@5: a twin 0.4, a twin 0.35")


def test_kind_figures_name_the_seed_they_show(tmp_path, monkeypatch):
    import dataclasses

    from recloop._registry import registry

    def figures(rows, out_dir, world):
        path = out_dir / "mine.png"
        path.write_bytes(b"\x89PNG\r\n\x1a\n")
        return [path]

    kind = dataclasses.replace(registry().evaluations["selfcheck"], figures=figures)
    monkeypatch.setitem(registry().evaluations, "selfcheck", kind)
    rows = [row("ev", "a", "mean_reward", 0.5, truth=0.5, seed=s) for s in (3, 4)]
    report = write_report(make_run(tmp_path, rows, seeds=(3, 4))).read_text()
    assert "**ev: mine (seed 3)**\n\n![ev: mine (seed 3)](figures/mine.png)" in report


def test_a_failing_figure_costs_a_line_not_the_report(tmp_path, monkeypatch):
    import dataclasses

    from recloop._registry import registry

    def figures(rows, out_dir, world):
        raise RuntimeError("no ink")

    kind = dataclasses.replace(registry().evaluations["selfcheck"], figures=figures)
    monkeypatch.setitem(registry().evaluations, "selfcheck", kind)
    rows = [row("ev", "a", "mean_reward", 0.5, truth=0.5)]
    report = write_report(make_run(tmp_path, rows)).read_text()
    assert "figures failed (RuntimeError, see errors.log)" in report
    assert "no ink" in (tmp_path / "errors.log").read_text()


def test_figures_are_written_atomically(tmp_path, monkeypatch):
    """A full disk left a 0-byte PNG under its final name."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig = plt.figure()
    target = tmp_path / "f.png"

    def full_disk(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("os.replace", full_disk)
    with pytest.raises(OSError):
        atomic_savefig(fig, target)
    plt.close(fig)
    assert list(tmp_path.iterdir()) == []  # neither the PNG nor its temporary file


class _Stream(io.StringIO):
    def __init__(self, tty):
        super().__init__()
        self.tty = tty

    def isatty(self):
        return self.tty


def test_progress_writes_no_escape_codes_when_not_a_terminal(tmp_path, monkeypatch):
    (tmp_path / "t.toml").write_text("""
[run]
name = "t"
[[agents]]
name = "a"
kind = "fixed_arm"
[[evaluations]]
kind = "selfcheck"
sweep = { n = [10, 20, 30] }
""")
    err = _Stream(tty=False)
    monkeypatch.setattr("sys.stderr", err)
    assert main(["run", str(tmp_path / "t.toml"), "--out", str(tmp_path / "o"),
                 "--workers", "1"]) == 0
    text = err.getvalue()
    assert "t: 3/3 cells" in text and "\r" not in text and "\x1b" not in text
    err = _Stream(tty=True)  # a terminal gets the bar
    monkeypatch.setattr("sys.stderr", err)
    assert main(["run", str(tmp_path / "t.toml"), "--out", str(tmp_path / "o"),
                 "--workers", "1"]) == 0
    assert "\r" in err.getvalue()


def test_linear_bandit_episode_lengths():
    """DynamicNews-v0 declares its horizon; LinearBandit-v0 is a continuing task, and says
    so: an episode ends only at the max_episode_steps the user gives."""
    import gymnasium as gym
    import numpy as np

    import simulator
    import simulator._registration as registration

    assert gym.spec("recloop/DynamicNews-v0").max_episode_steps == \
        simulator.preset("dynamic_news").horizon == 7520
    assert gym.spec("recloop/LinearBandit-v0").max_episode_steps is None
    assert "continuing task" in registration.__doc__
    env = gym.make("recloop/LinearBandit-v0", max_episode_steps=30)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    for step in range(1, 31):
        obs, _, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))
        assert not terminated and truncated == (step == 30)


def test_a_categorical_sweep_shows_the_last_numeric_value_of_each_category(tmp_path):
    """`recloop run ope_real` showed "n_rounds = 898 only": the digits rows, none of the
    other data sets (each data set has its own sizes)."""
    sizes = {"digits": (300, 898), "wine": (60, 178), "iris": (50, 150)}
    est = []
    for source, ns in sizes.items():
        for n in ns:
            for v in range(6):
                for j, e in enumerate((0.4, 0.6)):
                    r = row("ev", "t", "value", e + v / 100, truth=0.5, variant=f"e{v}", log=j)
                    r["params"] = {"source": source, "n_rounds": n}
                    est.append(r)
    make_run(tmp_path, [dict(r, log=None) for r in est[:1]], (("ev", "ope"),), estimates=est)
    import re

    lines = summary_lines(tmp_path)
    shown = [re.search(r"n_rounds=([0-9]+), source=([a-z]+)", ln).groups() for ln in lines
             if ln.startswith("ev ")]
    assert set(shown) == {(str(ns[-1]), s) for s, ns in sizes.items()}
    assert len(shown) == 18 and "18 of 36" in "\n".join(lines)
