"""The runner: cells seeded by key, 1 vs N workers, local vs Dask, resume after a kill."""

import csv
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from recloop._cells import Cell, CellError, plan_cells
from recloop._rundir import COLUMNS, RunDirError, atomic_write, new_run_dir
from recloop._runner import run_scenario
from recloop._scenario import loads_scenario

TINY = """
[run]
name = "tiny"
replicates = 2

[[agents]]
name = "a0"
kind = "fixed_arm"

[[agents]]
name = "a1"
kind = "fixed_arm"
arm = 2

[[evaluations]]
kind = "selfcheck"
ticks = 2
sweep = { n = [10, 50] }
"""


def results(run_dir: Path) -> tuple[bytes, bytes]:
    return (run_dir / "results.csv").read_bytes(), (run_dir / "results.jsonl").read_bytes()


def test_cells_cover_seeds_agents_evaluations_and_sweep():
    sc = loads_scenario(TINY + '\n[[evaluations]]\nkind = "selfcheck"\nname = "other"\n'
                        'agents = ["a1"]\n')
    cells = plan_cells(sc.data)
    assert len(cells) == 2 * (2 * 2 + 1)
    assert len({c.id for c in cells}) == len(cells)
    assert len({c.filename for c in cells}) == len(cells)
    assert Cell(0, "selfcheck", "a0", (("n", 10),)).id == 'selfcheck/a0/seed=0/n=10'


def test_cell_seed_depends_on_key_not_on_order_or_agent():
    a = Cell(3, "ev", "x", (("n", 10),))
    same_world = Cell(3, "ev", "y", (("n", 10),))
    other = [Cell(4, "ev", "x", (("n", 10),)), Cell(3, "ev", "x", (("n", 11),)),
             Cell(3, "ev2", "x", (("n", 10),))]

    def draw(c):
        return np.random.default_rng(c.seed_sequence()).integers(0, 2**62, 4).tolist()

    assert draw(a) == draw(Cell(3, "ev", "x", (("n", 10),)))
    assert draw(a) == draw(same_world)  # common random numbers across agents
    assert all(draw(a) != draw(c) for c in other)
    assert a.seed_sequence().entropy == 3


def test_results_rows_and_columns(tmp_path):
    run_dir = run_scenario(loads_scenario(TINY), out=tmp_path, workers=1, quiet=True,
                           report=False)
    with open(run_dir / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0]) == COLUMNS
    assert len(rows) == 2 * 2 * 2 * 2  # seeds x agents x sweep x ticks
    for row in rows:
        assert row["scenario"] == "tiny" and row["evaluation"] == "selfcheck"
        assert row["variant"] == ""  # empty where not applicable
        assert json.loads(row["params"]) == {"n": int(row["n"])}
        est, truth = float(row["estimate"]), float(row["truth"])
        assert math.isclose(float(row["error"]), est - truth, abs_tol=1e-12)
        assert float(row["ci_low"]) <= est <= float(row["ci_high"])
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    assert len(lines) == len(rows)
    first = json.loads(lines[0])
    assert list(first) == list(COLUMNS) and isinstance(first["params"], dict)
    # the truth of a cell is the same for both agents' cells only if they play the same arm;
    # same seed and sweep value means the same world: arm means equal across agents' cells
    env = json.loads((run_dir / "environment.json").read_text())
    assert env["seeds"] == [0, 1] and env["start"] and env["end"] and env["versions"]["numpy"]
    assert not list(run_dir.rglob(".*.tmp"))


def test_one_and_two_workers_give_identical_results(tmp_path):
    sc = loads_scenario(TINY)
    one = run_scenario(sc, out=tmp_path / "one", workers=1, quiet=True, report=False)
    two = run_scenario(sc, out=tmp_path / "two", workers=2, quiet=True, report=False)
    assert results(one) == results(two)


@pytest.mark.slow
def test_dask_local_cluster_matches_local_run_row_for_row(tmp_path):
    pytest.importorskip("dask.distributed")
    sc = loads_scenario(TINY)
    local = run_scenario(sc, out=tmp_path / "local", workers=1, quiet=True, report=False)
    dask = run_scenario(sc, out=tmp_path / "dask", workers=2, executor="dask", quiet=True,
                        report=False)
    assert results(local) == results(dask)


@pytest.mark.slow
def test_the_only_cell_of_a_dask_run_partitions_its_inner_work_over_the_cluster(
        tmp_path, monkeypatch):
    pytest.importorskip("dask.distributed")
    import evaluators

    sc = loads_scenario("""
[run]
name = "one"
[[evaluations]]
kind = "fast_loo_cf"
similarities = ["pearson"]
n_users = 60
n_items = 40
n_ratings = 900
""")
    seen = []
    real = evaluators.loo_knn

    def spy(*args, executor=None, **kw):
        seen.append(type(executor).__name__)
        return real(*args, executor=executor, **kw)

    monkeypatch.setattr(evaluators, "loo_knn", spy)
    local = run_scenario(sc, out=tmp_path / "local", workers=1, quiet=True, report=False)
    dask = run_scenario(sc, out=tmp_path / "dask", workers=2, executor="dask", quiet=True,
                        report=False)
    # the cell ran in this process (the driver) and handed the run's client to loo_knn,
    # whose partitions were the cluster's tasks: the same rows
    assert seen == ["NoneType", "Client"]
    assert results(local) == results(dask)


def test_resume_recomputes_only_missing_cells(tmp_path):
    sc = loads_scenario(TINY)
    full = run_scenario(sc, out=tmp_path / "a", workers=1, quiet=True, report=False)
    partial = run_scenario(sc, out=tmp_path / "b", workers=1, quiet=True, report=False)
    cells = sorted((partial / "cells").iterdir())
    for p in cells[::2]:
        p.unlink()
    kept = {p.name: p.stat().st_mtime_ns for p in cells[1::2]}
    (partial / "results.csv").unlink()
    again = run_scenario(sc, out=tmp_path / "b", workers=1, quiet=True, resume=True,
                         report=False)
    assert again == partial
    assert results(full) == results(again)
    assert {p.name: p.stat().st_mtime_ns for p in cells[1::2]} == kept  # not recomputed


def test_resume_refuses_a_different_scenario(tmp_path):
    from recloop._runner import _UsageError

    run_scenario(loads_scenario(TINY), out=tmp_path, workers=1, quiet=True, report=False)
    with pytest.raises(_UsageError, match="different scenario"):
        run_scenario(loads_scenario(TINY.replace("ticks = 2", "ticks = 3")), out=tmp_path,
                     workers=1, quiet=True, resume=True, report=False)


def test_a_new_run_never_overwrites_an_old_one(tmp_path):
    sc = loads_scenario(TINY)
    first = run_scenario(sc, out=tmp_path, workers=1, quiet=True, report=False)
    second = run_scenario(sc, out=tmp_path, workers=1, quiet=True, report=False)
    assert first.name == "tiny" and second.name == "tiny-2"
    assert results(first) == results(second)
    path, resuming = new_run_dir(tmp_path, "tiny", resume=True)
    assert path == second and resuming


def test_run_dir_names_cannot_escape_out(tmp_path):
    for bad in ("../x", "/etc", "a/b", "..", ""):
        with pytest.raises(RunDirError):
            new_run_dir(tmp_path / "out", bad, resume=False)
    assert not (tmp_path / "out").exists() and not (tmp_path / "x").exists()


def test_atomic_write_replaces_whole_files(tmp_path):
    target = tmp_path / "f.txt"
    atomic_write(target, "old")
    atomic_write(target, "new content")
    assert target.read_text() == "new content"
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]


def test_a_failing_cell_is_reported_with_its_id(tmp_path, monkeypatch):
    import dataclasses

    from recloop._registry import registry

    def boom(cell):
        raise RuntimeError("kaput")

    kind = dataclasses.replace(registry().evaluations["selfcheck"], run=boom)
    monkeypatch.setitem(registry().evaluations, "selfcheck", kind)
    with pytest.raises(CellError, match=r"cell selfcheck/a0/seed=0/n=10 failed: RuntimeError: "
                                        r"kaput"):
        run_scenario(loads_scenario(TINY), out=tmp_path, workers=1, quiet=True, report=False)
    assert "kaput" in (tmp_path / "tiny" / "errors.log").read_text()
    assert not (tmp_path / "tiny" / "results.csv").exists()


@pytest.mark.slow
def test_killed_run_resumes_to_identical_results(tmp_path):
    text = TINY.replace("ticks = 2", "ticks = 2\ndelay = 0.2")
    path = tmp_path / "slow.toml"
    path.write_text(text)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "recloop", "run", str(path), "--workers", "1", "-q"]
    proc = subprocess.Popen(cmd + ["--out", str(tmp_path / "killed")], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cells_dir = tmp_path / "killed" / "tiny" / "cells"
    deadline = time.time() + 60
    while time.time() < deadline and len(list(cells_dir.glob("*.json"))) < 2:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    n_done = len(list(cells_dir.glob("*.json")))
    assert 2 <= n_done < 8, "the kill should land mid-run"
    assert not (tmp_path / "killed" / "tiny" / "results.csv").exists()
    # resumed in-process (the subprocess above already showed the real kill)
    run_scenario(loads_scenario(text), out=tmp_path / "killed", workers=1, quiet=True,
                 resume=True, report=False)
    fresh = run_scenario(loads_scenario(text), out=tmp_path / "fresh", workers=1, quiet=True,
                         report=False)
    assert results(tmp_path / "killed" / "tiny") == results(fresh)
    assert not (tmp_path / "killed" / "tiny-2").exists()


@pytest.mark.slow
def test_quickstart_puts_every_estimate_beside_the_truth(tmp_path):
    """The quickstart's pipeline (simulator, agents, LOO evaluator) at a tenth of its size."""
    from recloop._scenario import Scenario, builtin_scenarios, load_scenario

    sc = load_scenario(builtin_scenarios()["quickstart"])
    data = json.loads(json.dumps(sc.data))
    data["world"]["n_users"] = 300
    data["evaluations"][0].update(ticks=[300, 500], n_samples=200, p_values=["all"])
    run_dir = run_scenario(Scenario(sc.path, data), out=tmp_path, workers=1, quiet=True)
    with open(run_dir / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    scores = [r for r in rows if r["metric"].startswith("loo_hit@5")
              and r["variant"] != "bias"]
    assert {r["agent"] for r in scores} == {"g1", "g2", "user_cosine_cf"}
    assert {r["variant"] for r in scores} == {"unweighted", "weighted_pall", "twin"}
    assert all(r["truth"] != "" and r["error"] != "" for r in scores)
    # at the reference tick nothing has been pushed yet: every exact score is the truth
    exact_t0 = [r for r in scores if r["metric"] == "loo_hit@5" and r["tick"] == "300"]
    assert all(float(r["estimate"]) == pytest.approx(float(r["truth"]), abs=1e-12)
               for r in exact_t0)
    report = (run_dir / "report.md").read_text()
    assert "offline_bias_g1.png" in report
    assert (run_dir / "figures" / "offline_bias_g1.png").exists()
    # the summary never merges ticks (issue 22): one row per (agent, variant, metric, tick),
    # its estimate the score at that tick
    from recloop._report import summary_lines

    lines = summary_lines(run_dir, limit=1000)
    g1_unweighted = [ln.split() for ln in lines
                     if ln.split()[1:4] == ["g1", "unweighted", "loo_hit@5"]]
    ticks = {r["tick"]: r for r in scores if r["agent"] == "g1" and r["variant"] == "unweighted"
             and r["metric"] == "loo_hit@5"}
    assert sorted(row[4] for row in g1_unweighted) == sorted(ticks) == ["300", "500"]
    for row in g1_unweighted:
        assert row[6] == f"{float(ticks[row[4]]['estimate']):.4g}"
    assert "## Summary" in report and "| offline_bias | g1 | unweighted | loo_hit@5 | 500 | 1 |" \
        in report


@pytest.mark.parametrize("kind, function", [("bred_vs_replay", "bred_vs_replay"),
                                            ("dynamic_news", "dynamic_news")])
def test_bandit_adapters_pass_the_cell_to_the_experiment(tmp_path, monkeypatch, kind, function):
    """The registry's adapters (a real run of these experiments is too slow for this suite)."""
    import inspect

    import agents
    import recloop.experiments._bandit_eval as bandit_eval
    import simulator
    from recloop._results import Measurement

    seen = {}
    signature = inspect.signature(getattr(bandit_eval, function))

    def fake(config, makers, **kw):
        signature.bind(config, makers, **kw)  # the adapter calls the real signature
        seen.update(config=config, makers=makers, **kw)
        return [Measurement(evaluation="x", agent=name, metric="value", estimate=0.5,
                            truth=0.25) for name in makers]

    monkeypatch.setattr(bandit_eval, function, fake)
    extra = "window = 50\n" if kind == "dynamic_news" else ""
    sc = loads_scenario(f"""
[run]
name = "b"
seeds = [4]
[world]
preset = "bred_linear"
dim = 6
[[agents]]
name = "lin"
kind = "linucb"
alpha = 0.25
[[evaluations]]
kind = "{kind}"
n_logs = 2
{extra}sweep = {{ T = [100] }}
""")
    run_dir = run_scenario(sc, out=tmp_path, workers=1, quiet=True, report=False)
    assert isinstance(seen["config"], simulator.LinearBanditConfig) and seen["config"].dim == 6
    assert seen["T"] == 100 and seen["n_logs"] == 2
    assert seen["rng"].entropy == 4  # the cell's SeedSequence, keyed by the cell
    agent = seen["makers"]["lin"](np.random.default_rng(0))
    assert isinstance(agent, agents.LinUCB) and agent.alpha == 0.25
    rows = (run_dir / "results.csv").read_text().splitlines()
    assert rows[1].startswith(f"b,{kind}/lin/seed=4/T=100,4,{kind},lin,")


def test_fast_loo_cf_adapter_reads_a_file_next_to_the_scenario(tmp_path, monkeypatch):
    """``data`` resolves against the scenario's folder; the ratings reach the experiment."""
    import recloop.experiments._loo_cf as loo_cf
    from recloop._results import Measurement
    from recloop._scenario import ScenarioError, load_scenario

    (tmp_path / "u.data").write_text("1\t10\t4\t881250949\n2\t10\t3\t881250950\n"
                                     "1\t20\t5\t881250951\n")
    import inspect

    seen = {}
    signature = inspect.signature(loo_cf.fast_loo_cf)

    def fake(ratings, **kw):
        signature.bind(ratings, **kw)  # the adapter calls the real signature
        seen.update(ratings=ratings, **kw)
        return [Measurement(evaluation="x", agent=s, metric="mae", estimate=1.0, truth=1.0)
                for s in kw["similarities"]]

    monkeypatch.setattr(loo_cf, "fast_loo_cf", fake)
    text = """
[run]
name = "cf"
[[evaluations]]
kind = "fast_loo_cf"
similarities = ["cosine"]
data = "u.data"
clip = [1.0, 5.0]
"""
    (tmp_path / "s.toml").write_text(text)
    sc = load_scenario(tmp_path / "s.toml")
    assert sc.data["evaluations"][0]["data"] == str((tmp_path / "u.data").resolve())
    run_scenario(sc, out=tmp_path / "out", workers=1, quiet=True, report=False)
    users, items, ratings = seen["ratings"]
    assert sorted(ratings.tolist()) == [3.0, 4.0, 5.0] and len(users) == len(items) == 3
    assert seen["similarities"] == ["cosine"] and seen["clip"] == (1.0, 5.0)
    (tmp_path / "bad.toml").write_text(text.replace("u.data", "missing.data")
                                       + 'agents = ["a"]\n')
    with pytest.raises(ScenarioError) as info:
        load_scenario(tmp_path / "bad.toml")
    joined = "\n".join(info.value.problems)
    assert "evaluations[0].data: expected a path to an existing file" in joined
    assert "evaluations[0].agents: expected no agents" in joined


def test_offline_vs_online_adapter_runs_all_agents_in_one_cell(tmp_path, monkeypatch):
    import inspect

    import recloop.experiments._offline_vs_online as ovo
    from recloop._results import Measurement

    seen = {}
    signature = inspect.signature(ovo.offline_vs_online)

    def fake(config, makers, **kw):
        signature.bind(config, makers, **kw)  # the adapter calls the real signature
        seen.update(makers=makers, **kw)
        return [Measurement(evaluation="x", agent="replay", metric="kendall_tau",
                            estimate=1.0)]

    monkeypatch.setattr(ovo, "offline_vs_online", fake)
    sc = loads_scenario("""
[run]
name = "o"
[world]
preset = "bred_linear"
[[agents]]
name = "u"
kind = "uniform_random"
[[agents]]
name = "e"
kind = "epsilon_greedy"
epsilon = 0.2
[[evaluations]]
kind = "offline_vs_online"
T = 50
estimators = ["replay"]
""")
    assert len(plan_cells(sc.data)) == 1
    run_scenario(sc, out=tmp_path, workers=1, quiet=True, report=False)
    assert list(seen["makers"]) == ["u", "e"] and seen["T"] == 50
    assert seen["estimators"] == ["replay"] and seen["evaluation"] == "offline_vs_online"


# -- cells that run users' code: recloop's part apart, the same numbers ---------------------------

SPLIT = """
[run]
name = "split"

[world]
preset = "bred_linear"

[[agents]]
name = "lin"
kind = "epsilon_greedy"

[[agents]]
name = "ucb"
kind = "ucb1"

[[agents]]
name = "mine"
kind = "python"
factory = "agents:UniformRandom"

[[evaluations]]
kind = "ope"
n_logs = 2
n_rounds = 150
n_train = 40
ab_users = 50
estimators = ["ips", "direct_method", "evaluators:snips",
              { name = "my_dr", factory = "evaluators:doubly_robust" }]

[[evaluations]]
kind = "ope"
name = "only_mine"
agents = []
n_logs = 2
n_rounds = 150
estimators = [{ name = "my_ips", factory = "evaluators:ips" }]

[[evaluations]]
kind = "bred_vs_replay"
agents = ["lin", "mine"]
T = 30
n_logs = 2
n_bootstrap = 2
n_truth_runs = 2
estimators = ["replay", { name = "my_replay", factory = "recloop._builtins:replay" }]
"""


@pytest.mark.slow
def test_a_cell_with_users_code_gives_the_numbers_of_the_whole_cell(tmp_path):
    """A cell that runs users' code is computed apart -- recloop's part in a process that
    never imports it, the users' part in a guest -- and combined: every row and per-log
    estimate is the one the whole cell gives in one process (here: plugins that are
    recloop's own estimators and agent named by import path), whatever the kind."""
    from recloop._cells import execute_cell, split_cell, split_cells
    from recloop._rundir import read_cell, scenario_hash

    scenario = loads_scenario(SPLIT)
    data = scenario.data
    cells = plan_cells(data)
    splits = {c.id: split_cell(data, c) for c in cells}
    # ope: both parts; only_mine: recloop's part runs the probe (ips) for the truth only;
    # bred_vs_replay of `mine`: its own agent is the users' -- one part, the whole cell
    assert splits["ope/*/seed=0"].twin and splits["ope/*/seed=0"].probe is None
    assert splits["only_mine/*/seed=0"].probe == "ips"
    assert not splits["bred_vs_replay/mine/seed=0"].twin
    assert splits["bred_vs_replay/lin/seed=0"].twin
    assert len(split_cells(data, cells)) == 2 * len(cells) - 1
    # a kind whose rows rank its agents runs whole in the guest
    ranked = loads_scenario(SPLIT.split("[[evaluations]]")[0] + """
[[evaluations]]
kind = "offline_vs_online"
T = 30
""").data
    assert not split_cell(ranked, plan_cells(ranked)[0]).twin
    run_dir = run_scenario(scenario, out=tmp_path, workers=2, quiet=True, report=False)
    digest = scenario_hash(scenario.to_toml())
    for cell in cells:
        stored = read_cell(run_dir, cell.filename, cell_id=cell.id, seed=cell.seed,
                           scenario=digest)
        rows, _, _, estimates = execute_cell(data, cell)
        for got, want in ((stored["rows"], rows), (stored["estimates"], estimates)):
            assert sorted(map(_canonical, got)) == sorted(map(_canonical, want)), cell.id
            assert got, cell.id
        if splits[cell.id] is not None and splits[cell.id].twin:  # recloop's rows first
            mine = [r for r in stored["rows"] if r["agent"] in ("mine", None) or (
                r["variant"] or "").startswith("my_") or r["variant"] == "snips"]
            assert stored["rows"][-len(mine):] == mine if mine else True


def _canonical(row: dict) -> str:
    return json.dumps(row, sort_keys=True, allow_nan=True)
