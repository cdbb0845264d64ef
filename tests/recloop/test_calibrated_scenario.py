"""A scenario on a world fitted to a log: --set, the fit before the run directory, world.npz
in the run directory and its hash, the fidelity section, resume, [world] file, recloop
calibrate."""

import hashlib
import json
import re

import pytest

import simulator
from recloop._cli import main
from tests.builtin_data import small_movielens

SCENARIO = """
[run]
name = "calib"

[world]
calibrate_from = "{data}"
n_factors = 2

[[world.campaigns]]
start_fraction = 0.7
duration = 5
reach = 0.5
most_popular = 3

[[agents]]
name = "g1"
kind = "constant_agreeing"

[[agents]]
name = "pop"
kind = "popularity"

[[evaluations]]
kind = "campaign_bias"
ticks = [{ticks}]
p_values = [0, "all"]
k = 3
n_samples = 0
"""


def write(tmp_path, data=None, ticks="40, 50, 59", **replace):
    text = SCENARIO.format(data=data or small_movielens(), ticks=ticks)
    for a, b in replace.items():
        text = text.replace(a, b)
    path = tmp_path / "calib.toml"
    path.write_text(text)
    return path


def test_a_scenario_runs_on_a_fitted_world_and_resumes_on_the_same_one(tmp_path, capsys):
    path = write(tmp_path)
    out = tmp_path / "runs"
    assert main(["run", str(path), "--out", str(out), "-q", "--workers", "1"]) == 0
    run_dir = out / "calib"
    env = json.loads((run_dir / "environment.json").read_text())
    saved = simulator.CalibratedWorld.load(run_dir / "world.npz")
    assert env["world_sha256"] == saved.sha256
    report = (run_dir / "report.md").read_text()
    assert "## The fitted world" in report and saved.sha256 in report
    assert "VERDICT" in (run_dir / "fidelity.md").read_text()
    # the data file's hash and the world's, each named in the report
    digest = hashlib.sha256(small_movielens().read_bytes()).hexdigest()
    assert f"data: u.data (sha256 {digest})" in report
    assert f"world sha256: {saved.sha256}" in report
    assert f"(the world's sha256 {saved.sha256})" in report  # not read as the file's
    # `recloop calibrate` with the same seed fits the same world, byte for byte, wherever
    # the file lies
    elsewhere = tmp_path / "copy" / "u.data"
    elsewhere.parent.mkdir()
    elsewhere.write_bytes(small_movielens().read_bytes())
    assert main(["calibrate", str(elsewhere), "--n-factors", "2", "--seed", "0", "--holdout",
                 "0", "--out", str(tmp_path / "cli.npz")]) == 0
    assert simulator.CalibratedWorld.load(tmp_path / "cli.npz").sha256 == saved.sha256
    # ... and the same in-sample figures as the run's fidelity report
    cli_taus = re.findall(r"Kendall tau [-0-9.]+, 95% paired bootstrap interval \[[^]]+\]",
                          capsys.readouterr().out)
    run_taus = re.findall(r"Kendall tau [-0-9.]+, 95% paired bootstrap interval \[[^]]+\]",
                          (run_dir / "fidelity.md").read_text())
    assert cli_taus and cli_taus[0] == run_taus[0]
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    g1 = [r for r in rows if r["agent"] == "g1" and r["variant"] == "twin"]
    assert g1 and all(0.0 <= r["estimate"] <= 1.0 for r in g1)
    # the campaign pushed the log's 3 most popular items at 70% of the fitted horizon
    import numpy as np

    counts = np.bincount(saved.observed.item, minlength=saved.n_items)
    from recloop._scenario import load_scenario
    from recloop._worlds import world_config

    config = world_config(load_scenario(path).data["world"])
    (camp,) = config.campaigns
    assert camp.start == int(0.7 * saved.config.n_ticks)
    assert sorted(camp.items) == sorted(np.argsort(-counts, kind="stable")[:3].tolist())
    # resume: the same world is refitted and reused; results unchanged
    before = (run_dir / "results.csv").read_bytes()
    (run_dir / "results.csv").unlink()
    assert main(["run", str(path), "--out", str(out), "-q", "--resume"]) == 0
    assert (run_dir / "results.csv").read_bytes() == before
    # a damaged world.npz is rewritten on resume, not kept
    (run_dir / "world.npz").write_bytes(b"not a world")
    assert main(["run", str(path), "--out", str(out), "-q", "--resume"]) == 0
    assert simulator.CalibratedWorld.load(run_dir / "world.npz").sha256 == saved.sha256
    # a run on the saved world ([world] file) gives the same numbers
    text = path.read_text().replace(f'calibrate_from = "{small_movielens()}"\nn_factors = 2',
                                    f'file = "{run_dir / "world.npz"}"')
    (tmp_path / "file.toml").write_text(text)
    assert main(["run", str(tmp_path / "file.toml"), "--out", str(tmp_path / "r2"), "-q"]) == 0
    assert (tmp_path / "r2" / "calib" / "results.csv").read_bytes() == before


def test_data_on_the_command_line_and_rules_of_the_fitted_world(tmp_path, capsys):
    path = write(tmp_path, data="nowhere/u.data")
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "world.calibrate_from" in err and "--set world.calibrate_from=PATH" in err
    assert main(["validate", str(path), "--set",
                 f"world.calibrate_from={small_movielens()}"]) == 0
    capsys.readouterr()
    # ticks beyond the fitted horizon: found after the fit, before anything is written
    late = write(tmp_path, ticks="40, 500")
    out = tmp_path / "runs"
    assert main(["run", str(late), "--out", str(out), "-q"]) == 2
    err = capsys.readouterr().err
    assert "evaluations[0].ticks: expected ticks < n_ticks" in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize("replace, key", [
    pytest.param({"n_factors = 2": "n_factors = 2\npreset = \"viadeo_like\""}, "world",
                 id="preset-and-calibrate_from"),
    pytest.param({"most_popular = 3": "most_popular = 3\nitems = [1]"},
                 "world.campaigns[0].items", id="items-and-most_popular"),
    pytest.param({"start_fraction = 0.7": "start_fraction = 1.5"},
                 "world.campaigns[0].start_fraction", id="start_fraction"),
    pytest.param({"n_factors = 2": "n_factors = 2\ncolumns = [\"a\", \"b\", \"c\"]"},
                 "world.columns", id="columns-not-csv"),
])
def test_bad_fitted_world_tables_are_named(tmp_path, capsys, replace, key):
    assert main(["validate", str(write(tmp_path, **replace))]) == 2
    assert f": {key}: " in capsys.readouterr().err


def test_a_file_not_of_its_format_is_a_validation_error(tmp_path, capsys):
    bad = tmp_path / "u.data"
    bad.write_text("1\t2\t5\t880000000\nnot a line\n")
    assert main(["validate", str(write(tmp_path, data=bad))]) == 2
    err = capsys.readouterr().err
    assert "world.calibrate_from: expected a movielens rating file" in err and "u.data:2:" in err


def test_recloop_calibrate(tmp_path, capsys):
    out = tmp_path / "w.npz"
    assert main(["calibrate", str(small_movielens()), "--n-factors", "2", "--out",
                 str(out)]) == 0
    text = capsys.readouterr().out
    assert "VERDICT" in text and "item_popularity" in text
    assert simulator.CalibratedWorld.load(out).sha256 in text
    assert main(["calibrate", str(tmp_path / "missing.data")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such file" in err


@pytest.mark.slow
def test_calibrated_loo_cf_compares_the_similarities_on_the_real_and_simulated_logs(tmp_path):
    from scipy.stats import kendalltau

    from recloop.experiments._loo_cf import fast_loo_cf

    out = tmp_path / "runs"
    assert main(["run", "calibrated_loo_cf", "--set",
                 f"world.calibrate_from={small_movielens()}", "--set", "world.n_factors=2",
                 "--set", 'evaluations.0.similarities=["pearson", "cosine", "adjusted_cosine"]',
                 "--out", str(out), "-q"]) == 0
    run_dir = out / "calibrated_loo_cf"
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    logs = {r["params"]["log"] for r in rows}
    assert logs == {"real", "simulated", "simulated vs real"}
    # the real rows are fast_loo_cf on the fitted world's real log, number for number
    cal = simulator.CalibratedWorld.load(run_dir / "world.npz")
    o = cal.observed
    direct = fast_loo_cf((o.user, o.item, o.rating), similarities=["pearson", "cosine",
                                                                   "adjusted_cosine"],
                         k=20, clip=(1.0, 5.0))
    real = {(r["agent"], r["variant"], r["metric"]): r["estimate"] for r in rows
            if r["params"]["log"] == "real"}
    assert {(f"{m.agent} (real)", m.variant, m.metric): m.estimate for m in direct} == real
    # the rank agreement is Kendall's tau of the exact LOO errors, real against simulated
    exact = {(r["agent"].split(" (")[0], r["params"]["log"]): r["estimate"] for r in rows
             if r["metric"] == "rmse" and r["variant"] == "exact_loo"}
    sims = sorted({a for a, _ in exact})
    tau = kendalltau([exact[(s, "real")] for s in sims],
                     [exact[(s, "simulated")] for s in sims]).statistic
    (row,) = [r for r in rows if r["metric"] == "rmse_rank_tau"]
    assert row["estimate"] == pytest.approx(tau)
    # the real and the simulated log in one figure; the fitted world's fidelity
    assert sorted(p.name for p in (run_dir / "figures").iterdir()) == [
        "fast_loo_cf_errors.png", "fitted_world_fidelity.png"]


def test_world_true_needs_a_fitted_world(tmp_path, capsys):
    path = tmp_path / "s.toml"
    path.write_text('[run]\nname = "x"\n\n[[evaluations]]\nkind = "fast_loo_cf"\nworld = true\n')
    assert main(["validate", str(path)]) == 2
    assert "evaluations[0].world: expected a fitted [world]" in capsys.readouterr().err
