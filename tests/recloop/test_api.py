"""The Python API (issue 22, section 2): recloop.run, Results' DataFrames, load_results, and
bad input named as the CLI names it."""

import gc
import gzip
import math
from pathlib import Path

import pytest

import recloop
from recloop import summarize
from recloop._cli import main

TINY = {
    "run": {"name": "tiny", "replicates": 2},
    "agents": [{"name": "a0", "kind": "fixed_arm"}, {"name": "a1", "kind": "fixed_arm",
                                                      "arm": 1}],
    "evaluations": [{"kind": "selfcheck", "ticks": 2, "sweep": {"n": [10, 40]}}],
}

#: ope_static, a built-in, at a size that runs in a second or two.
SMALL_OPE = {f"evaluations.{j}.{k}": v for j in range(3)
             for k, v in (("n_logs", 3), ("sweep", {"n_rounds": [100]}))}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return recloop.run(TINY, out=tmp_path_factory.mktemp("api"), workers=1, progress=False)


def test_results_frames(tiny):
    assert tiny.report_path == tiny.run_dir / "report.md" and tiny.report_path.is_file()
    assert (tiny.run_dir / "report.html").is_file()
    frame = tiny.frame()
    # 2 seeds x 2 agents x 2 values of n x 2 ticks, params expanded into columns; the swept
    # `n` meets the column `n` (pulls per estimate) and is named params.n
    assert len(frame) == 16 and "params" not in frame
    assert sorted(frame["params.n"].unique()) == [10, 40]
    assert list(frame.columns[:3]) == ["scenario", "cell", "seed"]
    assert frame["tick"].dtype == "Int64" and set(frame["agent"]) == {"a0", "a1"}
    per_log = tiny.per_log()
    assert len(per_log) == 16 and (per_log["log"] == 0).all()  # the seed is the log
    assert per_log["estimate"].tolist() == frame["estimate"].tolist()
    summary = tiny.full_summary()
    assert len(summary) == 8 and (summary["n"] == 2).all()  # two seeds per row
    want = summarize(tiny._estimates)
    for (_, got), s in zip(summary.iterrows(), want, strict=True):
        assert (got["agent"], got["tick"], got["params.n"]) == (s.agent, s.tick, s.params["n"])
        for name in ("estimate", "sd", "se", "truth", "bias", "rmse", "coverage"):
            a, b = got[name], getattr(s, name)
            assert (math.isnan(a) and math.isnan(b)) or a == b
    # the frames are the tables of the run directory, row for row
    assert len((tiny.run_dir / "results.csv").read_text().splitlines()) == 1 + len(frame)
    lines = gzip.decompress((tiny.run_dir / "estimates.csv.gz").read_bytes()).splitlines()
    assert len(lines) == 1 + len(per_log)
    assert repr(tiny).startswith("<Results 'tiny': 16 rows, 16 per-log estimates")


def test_load_results_reads_what_run_wrote(tiny):
    again = recloop.load_results(tiny.run_dir)
    assert again.frame().equals(tiny.frame())
    assert again.summary().equals(tiny.summary())
    assert again.full_summary().equals(tiny.full_summary())


def test_out_none_is_a_temporary_directory_that_lives_with_the_results():
    res = recloop.run(TINY, workers=1, progress=False)
    run_dir = res.run_dir
    assert run_dir.is_dir() and len(res.frame()) == 16
    del res
    gc.collect()
    assert not run_dir.exists()


@pytest.mark.slow
def test_a_builtin_by_name_gives_the_bytes_of_the_cli(tmp_path, capsys):
    res = recloop.run("ope_static", out=tmp_path / "api", workers=1, progress=False,
                      set=SMALL_OPE, seed=5)
    sets = [f"--set={k}={recloop._toml.toml_value(v)}" for k, v in SMALL_OPE.items()]
    assert main(["run", "ope_static", "--out", str(tmp_path / "cli"), "--workers", "1",
                 "-q", "--seed", "5", *sets]) == 0
    capsys.readouterr()
    for name in ("results.csv", "estimates.csv.gz"):
        assert (res.run_dir / name).read_bytes() == \
            (tmp_path / "cli" / "ope_static" / name).read_bytes()
    per_log = res.per_log()
    assert set(per_log["evaluation"]) == {"ope_uniform", "ope_skewed", "ope_adversarial"}
    assert (per_log["seed"] == 5).all() and sorted(set(per_log["log"])) == [0, 1, 2]
    assert set(per_log["n_rounds"]) == {100} and per_log["truth"].notna().all()
    assert recloop.load_scenario("quickstart").name == "quickstart"  # a name, not a path


@pytest.mark.parametrize("scenario, kwargs, needles", [
    pytest.param("no_such_scenario", {}, ["no_such_scenario", "quickstart", "no such file"],
                 id="unknown-name"),
    pytest.param({"run": {"name": "x", "replicates": 0}, "evaluations": [{"kind": "nope"}]},
                 {}, ["run.replicates", "evaluations[0].kind"], id="bad-dict-every-problem"),
    pytest.param(TINY, {"set": {"evaluations.0.n": -1, "run.horizon": "soon"}},
                 ["evaluations[0].n", "run.horizon"], id="bad-set-values"),
    pytest.param(TINY, {"set": ["evaluations.0.n=5", 3]}, ["set[1]", "KEY=VALUE"],
                 id="bad-set-item"),
    pytest.param(TINY, {"set": "evaluations.0.n=5"}, ["set: expected a mapping"],
                 id="set-a-string"),
    pytest.param(TINY, {"set": ["evaluations.9.n=5"]}, ["--set evaluations.9.n"],
                 id="bad-set-path"),
])
def test_bad_scenarios_raise_scenario_error_listing_every_problem(tmp_path, scenario, kwargs,
                                                                  needles):
    with pytest.raises(recloop.ScenarioError) as info:
        recloop.run(scenario, out=tmp_path / "out", workers=1, progress=False, **kwargs)
    text = "\n".join(info.value.problems)
    for needle in needles:
        assert needle in text, text
    assert not (tmp_path / "out").exists()  # nothing written


@pytest.mark.parametrize("kwargs, exc, match", [
    pytest.param({"seed": "1"}, TypeError, "`seed`", id="seed-type"),
    pytest.param({"seed": -1}, ValueError, "`seed`", id="seed-range"),
    pytest.param({"workers": 0}, ValueError, "`workers`", id="workers"),
    pytest.param({"workers": 1.5}, TypeError, "`workers`", id="workers-type"),
    pytest.param({"executor": "threads"}, ValueError, "`executor`", id="executor"),
    pytest.param({"out": 3}, TypeError, "`out`", id="out"),
])
def test_bad_arguments_are_named(tmp_path, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        recloop.run(TINY, **{"workers": 1, "progress": False, **kwargs})
    with pytest.raises(TypeError, match="`scenario`"):
        recloop.run(3.5)


def test_load_results_names_what_is_wrong(tiny, tmp_path):
    import shutil

    with pytest.raises(recloop.RunDirError, match="no such folder"):
        recloop.load_results(tmp_path / "nothing")
    (tmp_path / "f").write_text("x")
    with pytest.raises(recloop.RunDirError, match="a file"):
        recloop.load_results(tmp_path / "f")
    with pytest.raises(recloop.RunDirError, match="without them"):
        recloop.load_results(tmp_path)
    with pytest.raises(TypeError, match="`run_dir`"):
        recloop.load_results(3)
    run_dir = tmp_path / "copy"
    shutil.copytree(tiny.run_dir, run_dir)
    cell = sorted((run_dir / "cells").glob("*.json"))[2]
    cell.write_text(cell.read_text()[:-10])
    with pytest.raises(recloop.RunDirError) as info:
        recloop.load_results(run_dir)
    assert str(info.value).startswith(f"{cell}: not JSON") and "--resume" in str(info.value)
    (run_dir / "scenario.toml").unlink()
    with pytest.raises(recloop.RunDirError, match="scenario.toml: missing"):
        recloop.load_results(run_dir)
    assert Path(tiny.run_dir / "report.md").is_file()


def test_summary_is_the_first_screen_in_its_order(tiny):
    """`Results.summary()` is what the terminal shows after a run, row for row."""
    from recloop._report import summary_lines

    lines = [ln.split() for ln in summary_lines(tiny.run_dir)[1:] if ln.startswith("tiny")
             or ln.startswith(tiny.scenario["evaluations"][0]["name"] + " ")]
    summary = tiny.summary()
    assert len(summary) == len(lines) > 0
    for (_, got), line in zip(summary.iterrows(), lines, strict=True):
        assert line[1] == got["agent"] and got["metric"] in line and str(got["tick"]) in line
    assert len(tiny.full_summary()) >= len(summary)


def test_a_parameter_named_like_a_column_never_breaks_a_frame(tmp_path):
    """calibrated_loo_cf labels its rows with the parameter ``log`` ("real", "simulated"),
    the name of estimates.csv.gz's integer column: ``frame()`` cast that text to Int64 and
    raised ``ValueError: invalid literal for int() with base 10: 'real'``. A parameter that
    meets a column of any frame is ``params.NAME`` in every frame; only recloop's own
    columns are cast."""
    from tests.builtin_data import overrides
    from tests.recloop.smallest import smallest

    res = recloop.run(smallest("calibrated_loo_cf"), out=tmp_path, workers=1, progress=False,
                      set=overrides("calibrated_loo_cf"))
    logs = {"real", "simulated", "simulated vs real"}
    frame = res.frame()
    assert set(frame["params.log"]) == logs and "log" not in frame
    assert frame["n"].dtype == "Int64"
    per_log = res.per_log()
    assert per_log["log"].dtype == "Int64" and set(per_log["params.log"]) <= logs
    for summary in (res.summary(), res.full_summary()):
        assert set(summary["params.log"]) <= logs and summary["n"].dtype == "Int64"
