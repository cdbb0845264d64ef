"""Validation that knows what a run will cost (issue 16, section 3) and a command line that
never shows a traceback for the user's situation (section 4)."""

import os
import pickle
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from recloop._cells import CellError
from recloop._cli import main

SELFCHECK = """
[run]
name = "tiny"

[[agents]]
name = "a0"
kind = "fixed_arm"

[[evaluations]]
kind = "selfcheck"
sweep = { n = [10, 20] }
"""

CAMPAIGNS = """
[run]
name = "cb"

[world]
preset = "viadeo_like"
n_users = 200
n_items = 20
n_ticks = 60
campaigns = [{{ start = 25, duration = 5, reach = 0.5, items = [1, 2, 3], k = 3 }}]

[[agents]]
name = "{agent}"
kind = "{kind}"
{extra}

[[evaluations]]
kind = "campaign_bias"
ticks = [20, 40]
n_samples = 10
{params}
"""


def write(tmp_path: Path, text: str, name: str = "s.toml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def validate(path, capsys, *extra) -> tuple[int, str]:
    code = main(["validate", str(path), *extra])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


# --- section 3: rules that only the run found --------------------------------------------------

@pytest.mark.parametrize("agent, kind, extra, params, key, message", [
    pytest.param("pop", "popularity", "", "k = 50\np_values = [0]", "evaluations[0].k",
                 "expected k <= n_items = 20", id="k-above-items"),
    pytest.param("pop", "popularity", "", "p_values = [0, 50]", "evaluations[0].p_values[1]",
                 "expected a number of items <= n_items = 20", id="p-above-items"),
    pytest.param("c", "constant", "items = [1, 2]", "k = 5\np_values = [0]",
                 "evaluations[0].k", "expected k <= 2, the length of constant agent 'c''s items",
                 id="constant-list-shorter-than-k"),
    pytest.param("g1", "constant_agreeing", "", "k = 5\np_values = [0]", "evaluations[0].k",
                 "expected k <= 3, the items pushed by the world's campaigns",
                 id="g1-needs-k-pushed"),
])
def test_campaign_bias_rules_are_checked_before_the_run(tmp_path, capsys, agent, kind, extra,
                                                         params, key, message):
    path = write(tmp_path, CAMPAIGNS.format(agent=agent, kind=kind, extra=extra,
                                            params=params))
    code, err = validate(path, capsys)
    assert code == 2 and f"{path}: {key}: {message}" in err


def test_rules_of_keys_without_default_apply(tmp_path, capsys):
    """fast_loo_cf's n_ratings rule and ope's target rules were skipped because `data`,
    `clip` and `n_actions` have no default: the run found them instead."""
    path = write(tmp_path, """
        [run]
        name = "cf"
        [[evaluations]]
        kind = "fast_loo_cf"
        n_users = 10
        n_items = 10
        n_ratings = 200
        """)
    code, err = validate(path, capsys)
    assert code == 2 and "evaluations[0].n_ratings: expected at most n_users x n_items = 100" in err
    path = write(tmp_path, """
        [run]
        name = "o"
        [world]
        preset = "bred_linear"
        [[evaluations]]
        kind = "ope"
        targets = [{ name = "t", policy = "nope" }]
        """)
    code, err = validate(path, capsys)
    assert code == 2 and "evaluations[0].targets[0].policy: expected one of" in err


BANDIT = """
[run]
name = "b"
[world]
preset = "{preset}"
[[agents]]
name = "u"
kind = "uniform_random"
[[agents]]
name = "e"
kind = "epsilon_greedy"
[[evaluations]]
kind = "{kind}"
T = 50
{params}
"""


@pytest.mark.parametrize("preset, kind, params, key, message", [
    pytest.param("bred_linear", "bred_vs_replay", "ab_users = 1", "ab_users",
                 "expected 0 (no A/B test) or at least 2 users, got 1", id="bvr-one-user"),
    pytest.param("dynamic_news", "bred_vs_replay", "ab_users = 9000", "ab_users",
                 "expected at most the world's horizon 7520", id="bvr-beyond-horizon"),
    pytest.param("bred_linear", "bred_vs_replay",
                 'ab_users = 10\nestimators = ["replay", '
                 '{ name = "ab_test", factory = "replay" }]', "estimators[1]",
                 "expected no estimator named 'ab_test'", id="bvr-name-clash"),
    pytest.param("bred_linear", "offline_vs_online", "ab_users = 1", "ab_users",
                 "expected 0 (no A/B test) or at least 2 users, got 1", id="ovo-one-user"),
])
def test_ab_test_rules_are_checked_before_the_run(tmp_path, capsys, preset, kind, params, key,
                                                   message):
    path = write(tmp_path, BANDIT.format(preset=preset, kind=kind, params=params))
    code, err = validate(path, capsys)
    assert code == 2 and f"evaluations[0].{key}: {message}" in err


def test_a_world_whose_profiles_cannot_be_that_large(tmp_path, capsys):
    path = write(tmp_path, CAMPAIGNS.format(agent="pop", kind="popularity", extra="",
                                            params="").replace(
        "n_items = 20", "n_items = 5\nmean_profile_size = 6.0").replace(
        "items = [1, 2, 3], k = 3", "items = [1, 2], k = 2"))
    code, err = validate(path, capsys)
    assert code == 2 and "world.mean_profile_size: expected less than n_items = 5" in err


def test_horizon_cannot_bypass_the_tick_cap(tmp_path, capsys):
    path = write(tmp_path, CAMPAIGNS.format(agent="pop", kind="popularity", extra="",
                                            params="").replace('name = "cb"',
                                                               'name = "cb"\nhorizon = 1000000000'))
    code, err = validate(path, capsys)
    assert code == 2 and "run.horizon: expected an integer in [0, 1000000], got 1000000000" in err


def test_a_misspelled_preset_does_not_hide_the_other_problems(tmp_path, capsys):
    path = write(tmp_path, """
        [run]
        name = "p"
        [world]
        preset = "bred_lineer"
        n_arms = 0
        [[agents]]
        name = "u"
        kind = "ucb1"
        [[evaluations]]
        kind = "bred_vs_replay"
        T = 10
        """)
    code, err = validate(path, capsys)
    assert code == 2
    assert "world.preset: expected one of" in err and "(did you mean 'bred_linear'?)" in err
    assert "world.n_arms: expected an integer in [1, 1000000], got 0" in err


def test_a_scenario_that_asks_for_more_memory_than_there_is(tmp_path, capsys):
    """The dim x n_items embedding table that asked for 74.5 GiB at run time."""
    path = write(tmp_path, CAMPAIGNS.format(agent="pop", kind="popularity", extra="",
                                            params="").replace(
        "n_items = 20", "n_items = 1000000\ndim = 10000"))
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "-q"]) == 2
    err = capsys.readouterr().err
    assert "evaluations[0]: expected cells that fit in the" in err and "--force" in err
    assert "world.n_items x world.dim: item features (world and twin) 149 GiB" in err
    assert not out.exists()
    assert main(["run", str(path), "--dry-run", "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert "evaluation campaign_bias (campaign_bias): 1 cell, each up to about" in captured.out
    assert "memory available:" in captured.out and not out.exists()


def test_force_runs_anyway_and_dry_run_prints_the_estimate(tmp_path, capsys, monkeypatch):
    import recloop._limits as limits

    path = write(tmp_path, SELFCHECK)
    out = tmp_path / "out"
    assert main(["run", str(path), "--dry-run", "--out", str(out)]) == 0
    dry = capsys.readouterr().out
    assert ("evaluation selfcheck (selfcheck): 2 cells, each up to about 320 B "
            "(n: pulls 320 B)") in dry
    monkeypatch.setattr(limits, "available_memory", lambda: 100)  # a machine of 100 bytes
    assert main(["run", str(path), "--out", str(out), "-q", "--workers", "1"]) == 2
    assert "evaluations[0]: expected cells that fit in the 100 B" in capsys.readouterr().err
    assert not out.exists()
    assert main(["run", str(path), "--out", str(out), "-q", "--workers", "1", "--force"]) == 0


def test_every_builtin_kind_declares_a_memory_estimate_and_a_headline():
    from recloop._registry import registry

    kinds = [k for k in registry().evaluations.values() if k.origin == "built-in"]
    assert [k.name for k in kinds if k.resources is None] == []
    assert [k.name for k in kinds if not k.headline] == []


def test_n_samples_enters_the_memory_estimate(tmp_path, capsys, monkeypatch):
    """``n_samples = 1e8`` passed validation and then grew past 4 GiB (issue 25, section 3)."""
    import recloop._limits as limits

    monkeypatch.setattr(limits, "available_memory", lambda: 4 * 2**30)
    path = write(tmp_path, CAMPAIGNS.format(agent="pop", kind="popularity", extra="",
                                            params="").replace("n_samples = 10\n",
                                                               "n_samples = 100000000\n"))
    # --dry-run: were the estimate to miss n_samples again, nothing would run for an hour
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "evaluations[0]: expected cells that fit in the 4 GiB" in err
    assert "n_samples: the sampled edges 7.45 GiB" in err
    assert not (tmp_path / "out").exists()


#: Integer keys of the built-in kinds that do not scale a cell's memory, and why. Every other
#: one must raise the kind's memory estimate when it grows.
NOT_MEMORY = {
    ("selfcheck", "n_arms"): "a few numbers per arm",
    ("selfcheck", "ticks"): "a loop count",
    ("dynamic_news", "window"): "at most T, and T is counted",
    ("fast_loo_cf", "k"): "neighbours kept per prediction inside the kernels' buffers",
    ("fast_loo_cf", "min_support"): "a threshold",
    ("fast_loo_cf", "naive_users"): "users of the naive timing, one at a time",
    ("slate_ope", "tick"): "a time, not a size",
    ("slate_ope", "world_seed"): "a seed",
    ("slate_ope", "n_folds"): "the folds cut the same records",
}


def test_every_size_key_enters_the_memory_estimate():
    """Each integer key of each built-in kind, at ten times its value in a built-in scenario
    (or its default), raises the estimate -- unless NOT_MEMORY says why it cannot."""
    import tomllib

    from recloop._limits import evaluation_bytes
    from recloop._registry import registry
    from recloop._scenario import builtin_scenarios, loads_scenario
    from recloop._schema import Int
    from tests.builtin_data import load_builtin

    examples = {"selfcheck": (loads_scenario(SELFCHECK).data["evaluations"][0], None)}

    for name, path in builtin_scenarios().items():
        world = tomllib.loads(path.read_text()).get("world", {})
        if "calibrate_from" in world or "file" in world:  # fitted worlds: slow, same kinds
            continue
        sc = load_builtin(name, path)  # data not shipped: a small stand-in
        for ev in sc.data["evaluations"]:
            examples.setdefault(ev["kind"], (ev, sc.data.get("world")))
    kinds = {k.name: k for k in registry().evaluations.values() if k.origin == "built-in"}
    assert set(examples) == set(kinds)
    flat = []
    for name, (ev, world) in examples.items():
        kind = kinds[name]
        for p in kind.params:
            if not isinstance(p.type, Int) or (name, p.name) in NOT_MEMORY:
                continue
            sweep = dict(ev.get("sweep") or {})
            value = max(sweep.pop(p.name, None) or [ev.get(p.name, p.default) or 10])
            low, high = max(p.type.low or 1, value // 10), min(p.type.high or 10**9,
                                                               10 * max(value, 1))
            sizes = [evaluation_bytes(kind, {**ev, "sweep": sweep, p.name: v}, world)[0]
                     for v in (low, high)]
            if not sizes[1] > sizes[0]:
                flat.append(f"{name}.{p.name}")
    assert flat == [], "size keys missing from the memory estimate (or from NOT_MEMORY)"


def test_builtin_scenarios_fit_in_a_few_gib():
    """The estimates are not absurd: every built-in scenario's cells are below 4 GiB."""
    from recloop._limits import evaluation_bytes
    from recloop._registry import registry
    from recloop._scenario import builtin_scenarios
    from tests.builtin_data import load_builtin

    for name, path in builtin_scenarios().items():
        sc = load_builtin(name, path)
        for ev in sc.data["evaluations"]:
            est, _ = evaluation_bytes(registry().evaluations[ev["kind"]], ev,
                                      sc.data.get("world"))
            assert 0 < est < 4 * 2**30, (name, ev["name"], est)


@pytest.mark.parametrize("make, got", [
    pytest.param(lambda p: os.mkfifo(p), "a FIFO", id="fifo"),
    pytest.param(lambda p: p.mkdir(), "a directory", id="directory"),
    pytest.param(lambda p: p.symlink_to("/dev/zero"), "a device", id="dev-zero"),
    pytest.param(lambda p: p.write_bytes(b"#" * (5 * 2**20)), "a file of", id="too-large"),
])
def test_a_scenario_file_that_is_no_regular_file_exits_at_once(tmp_path, make, got):
    path = tmp_path / "s.toml"
    make(path)
    # a subprocess: a regression would hang (FIFO) or fill the memory (/dev/zero)
    proc = subprocess.run([sys.executable, "-m", "recloop", "validate", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"{path}: expected a scenario file" in proc.stderr and got in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("text, got", [
    ("[run]\nname = \"x\"\nseed = " + "9" * 5000 + "\n", "a value the parser cannot read"),
    ("[run]\nname = \"x\"\nseed = " + "[" * 20000 + "]" * 20000 + "\n",
     "arrays or tables nested too deeply"),
], ids=["5000-digit-integer", "arrays-nested-20000-deep"])
def test_scenarios_that_break_the_toml_parser(tmp_path, capsys, text, got):
    path = tmp_path / "s.toml"
    path.write_text(text)
    code, err = validate(path, capsys)
    assert code == 2 and f"{path}: toml: expected valid TOML, got {got}" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("value", ["abc", "0", "-3", "", "12345678901234567890", "1025",
                                   "\u00b2"])
def test_recloop_threads_must_be_a_positive_integer(tmp_path, capsys, monkeypatch, value):
    monkeypatch.setenv("RECLOOP_THREADS", value)
    code = main(["run", str(write(tmp_path, SELFCHECK)), "--out", str(tmp_path / "o"), "-q"])
    err = capsys.readouterr().err
    if value == "":  # unset in effect: the default
        assert code == 0
    else:
        assert code == 2 and (f"RECLOOP_THREADS: expected an integer in [1, 1024], got "
                              f"{value!r}") in err
        assert not (tmp_path / "o").exists()


# --- section 4: one line, never a traceback ----------------------------------------------------

@pytest.mark.parametrize("address", ["not an address", "tcp://127.0.0.1:notaport",
                                     "foo://bar:1", "tcp://[::1", "", "tcp://h:70000"])
def test_a_malformed_scheduler_address_is_a_usage_error(tmp_path, capsys, address):
    code = main(["run", str(write(tmp_path, SELFCHECK)), "--executor", "dask", "--scheduler",
                 address, "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "--scheduler: expected a Dask scheduler address" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.fixture
def not_dask():
    """A TCP service on a local port that answers like a web server, not like Dask."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    stop = threading.Event()

    def serve():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            try:
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n" * 50)
            except OSError:
                pass
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    server.close()


@pytest.mark.slow
def test_a_service_that_is_not_dask_on_the_scheduler_port(tmp_path, capsys, not_dask):
    pytest.importorskip("dask.distributed")
    code = main(["run", str(write(tmp_path, SELFCHECK)), "--executor", "dask", "--scheduler",
                 not_dask, "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and f"expected a Dask scheduler at {not_dask}, got a service" in err
    assert "Traceback" not in err and "EiB" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_the_scheduler_dying_mid_run_keeps_the_finished_cells(tmp_path):
    pytest.importorskip("dask.distributed")
    bindir = Path(sys.executable).parent
    if not (bindir / "dask").exists():
        pytest.skip("the dask command is not installed")
    info = tmp_path / "scheduler.json"
    scheduler = subprocess.Popen([bindir / "dask", "scheduler", "--scheduler-file", info,
                                  "--host", "127.0.0.1", "--port", "0", "--no-dashboard"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    worker = run = None
    try:
        deadline = time.monotonic() + 60
        while not info.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        import json

        time.sleep(0.2)
        address = json.loads(info.read_text())["address"]
        worker = subprocess.Popen([bindir / "dask", "worker", address, "--nworkers", "1",
                                   "--nthreads", "1", "--no-dashboard"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        path = write(tmp_path, SELFCHECK.replace(
            "sweep = { n = [10, 20] }",
            "sweep = { delay = [0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4] }"))
        run = subprocess.Popen([sys.executable, "-m", "recloop", "run", str(path), "-q",
                                "--executor", "dask", "--scheduler", address, "--out",
                                str(tmp_path / "o")], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        cells = tmp_path / "o" / "tiny" / "cells"
        while time.monotonic() < deadline + 60 and len(list(cells.glob("*.json"))) < 2:
            assert run.poll() is None, run.communicate()
            time.sleep(0.1)
        scheduler.kill()
        out, err = run.communicate(timeout=120)
    finally:
        for proc in (scheduler, worker, run):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    assert run.returncode == 1, err
    assert "the Dask scheduler or its workers went away" in err and "--resume" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert 2 <= len(list(cells.glob("*.json"))) < 10  # finished cells are kept


def test_cell_errors_cross_process_boundaries_whole():
    exc = pickle.loads(pickle.dumps(CellError("ev/a/seed=0", "RuntimeError: kaput", "tb...")))
    assert (exc.cell_id, exc.tb, str(exc)) == ("ev/a/seed=0", "tb...",
                                              "cell ev/a/seed=0 failed: RuntimeError: kaput")


BOOM = """
import traceback

class Boom:
    \"\"\"A bandit agent that works when validated and fails in its cells.\"\"\"

    def reset(self, rng=None):
        pass

    def act(self, observation):
        if any(frame.name == "execute_unit" for frame in traceback.extract_stack()):
            {fail}
        arms = [i for i, a in enumerate(observation["available"]) if a]
        if not arms:
            raise ValueError("no arm is available")
        return arms[0]

    def update(self, observation, action, reward):
        pass
"""


@pytest.mark.slow
@pytest.mark.parametrize("fail, message", [
    ("raise RuntimeError('kaput')", "RuntimeError: kaput"),
    ("raise SystemExit(3)", "SystemExit: 3"),
    ("raise KeyboardInterrupt", "KeyboardInterrupt: raised by users' code (the users' code "
                                "called last: agent 'boom"),
    ("raise GeneratorExit('stop')", "GeneratorExit: stop: raised by users' code"),
])
def test_a_users_agent_failing_in_a_worker_is_one_line(tmp_path, capsys, monkeypatch, fail,
                                                       message):
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "boom.py").write_text(BOOM.replace("{fail}", fail))
    path = write(tmp_path, """
        [run]
        name = "b"
        [world]
        preset = "bred_linear"
        [[agents]]
        name = "boom"
        kind = "python"
        factory = "boom:Boom"
        [[agents]]
        name = "boom2"
        kind = "python"
        factory = "boom:Boom"
        [[evaluations]]
        kind = "bred_vs_replay"
        T = 20
        n_logs = 1
        n_bootstrap = 1
        n_truth_runs = 2
        estimators = ["replay"]
        """)
    code = main(["run", str(path), "--path", str(tmp_path / "plugins"), "--workers", "2",
                 "--out", str(tmp_path / "o"), "-q"])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert f"failed: {message}" in err and "errors.log" in err
    assert "Traceback" in (tmp_path / "o" / "b" / "errors.log").read_text()


def test_an_unexpected_error_is_one_line_with_the_traceback_in_a_file(tmp_path, capsys,
                                                                      monkeypatch):
    import recloop._cli as cli

    def broken(*a, **k):
        raise ZeroDivisionError("oops")

    monkeypatch.setattr(cli, "_load_all", broken)
    assert main(["validate", str(write(tmp_path, SELFCHECK))]) == 1
    err = capsys.readouterr().err
    assert err.startswith("recloop: ZeroDivisionError: oops (traceback in ")
    log = Path(err.split("(traceback in ")[1].split(")")[0])
    assert "Traceback" in log.read_text() and "Traceback" not in err
    log.unlink()


def test_ctrl_c_during_validation_is_one_line(tmp_path, capsys, monkeypatch):
    import recloop._cli as cli

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_load_all", interrupted)
    assert main(["validate", str(write(tmp_path, SELFCHECK))]) == 130
    err = capsys.readouterr().err
    assert "interrupted" in err and "Traceback" not in err


def test_run_scenario_refuses_a_bad_recloop_threads_before_writing(tmp_path, monkeypatch):
    from recloop._runner import run_scenario
    from recloop._scenario import loads_scenario

    monkeypatch.setenv("RECLOOP_THREADS", "many")
    with pytest.raises(ValueError, match=r"RECLOOP_THREADS must be an integer in \[1, 1024\]"):
        run_scenario(loads_scenario(SELFCHECK), out=tmp_path / "o", quiet=True)
    assert not (tmp_path / "o").exists()


# --- issue 25, section 4: values that must be refused ------------------------------------------

VIADEO = """
[run]
name = "v"

[world]
preset = "viadeo_like"
{world}

[[agents]]
name = "pop"
kind = "popularity"

[[evaluations]]
kind = "campaign_bias"
ticks = [10]
"""

OPE = """
[run]
name = "o"

[world]
preset = "bred_linear"
{world}

[[evaluations]]
kind = "ope"
n_logs = 2
{params}
"""


@pytest.mark.parametrize("text, line", [
    pytest.param(VIADEO.format(world="appeal_mean = 1e308"),
                 "world.appeal_mean: expected a number in [-100.0, 100.0], got 1e+308",
                 id="appeal-mean"),
    pytest.param(VIADEO.format(world="taste_scale = 1e308"),
                 "world.taste_scale: expected a number in [0.0, 100.0], got 1e+308",
                 id="taste-scale"),
    pytest.param(VIADEO.format(world="universal_appeal = -1e308"),
                 "world.universal_appeal: expected a number in [-100.0, 100.0], got -1e+308",
                 id="universal-appeal"),
    pytest.param(OPE.format(world="", params="n_actions = 11"),
                 "evaluations[0].n_actions: expected at most the world's n_arms = 10 (an "
                 "evaluation uses the world's arms or fewer: raise world.n_arms for more), "
                 "got 11", id="ope-n-actions-above-the-arms"),
    pytest.param(OPE.format(world="n_arms = 20", params="sweep = { n_actions = [5, 30] }"),
                 "evaluations[0].n_actions: expected at most the world's n_arms = 20",
                 id="ope-swept-n-actions"),
])
def test_values_beyond_their_range_are_refused(tmp_path, capsys, text, line):
    code, err = validate(write(tmp_path, text), capsys)
    assert code == 2 and line in err
    assert len(err.strip().splitlines()) == 1


def test_ope_may_use_fewer_arms_than_the_world():
    from recloop._scenario import loads_scenario

    assert loads_scenario(OPE.format(world="n_arms = 20", params="n_actions = 20"))


@pytest.mark.parametrize("raw, byte, where, looks", [
    pytest.param('[run]\nname = "caf\xe9"\n'.encode("latin-1"), "0xe9", "line 2, column 12",
                 "Latin-1 or Windows-1252 text", id="latin-1"),
    pytest.param("# caf\xe9\n[run]\n".encode("cp1252"), "0xe9", "line 1, column 6",
                 "Latin-1 or Windows-1252 text", id="windows-1252"),
    pytest.param('[run]\nname = "x"\n'.encode("utf-16"), "0xff", "line 1, column 1",
                 "UTF-16 text with its byte-order mark", id="utf-16"),
])
def test_a_file_that_is_not_utf8_is_named_with_where_and_why(tmp_path, capsys, raw, byte,
                                                             where, looks):
    path = tmp_path / "s.toml"
    path.write_bytes(raw)
    code, err = validate(path, capsys)
    assert code == 2
    assert err.strip() == (f"{path}: expected a UTF-8 TOML file, got byte {byte} at {where}, "
                           f"which is not UTF-8 (it looks like {looks}; save it as UTF-8)")


# --- issue 25, section 3: inputs that hang or eat memory (the harness's side) -------------------

@pytest.fixture
def silent_server():
    """A TCP service on a local port that accepts connections and never says a word."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    held, stop = [], threading.Event()

    def serve():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


def test_a_scheduler_that_accepts_and_stays_silent_is_given_up(tmp_path, capsys,
                                                               silent_server):
    pytest.importorskip("dask.distributed")
    started = time.monotonic()
    code = main(["run", str(write(tmp_path, SELFCHECK)), "--executor", "dask", "--scheduler",
                 silent_server, "--scheduler-timeout", "1", "--out", str(tmp_path / "o"), "-q"])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert (f"the Dask scheduler at {silent_server} accepted the connection but did not "
            "answer within 1 s (--scheduler-timeout)") in err
    assert time.monotonic() - started < 30  # it hung forever before
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_scheduler_timeout_must_be_a_positive_number_of_seconds(tmp_path, capsys, value):
    code = main(["run", str(write(tmp_path, SELFCHECK)), "--scheduler-timeout", value,
                 "--out", str(tmp_path / "o"), "-q"])
    assert code == 2
    assert "--scheduler-timeout: expected seconds in (0, 86400]" in capsys.readouterr().err


def test_more_workers_than_a_few_per_cpu_need_force(tmp_path, capsys):
    from recloop_base.threads import cpus

    path = write(tmp_path, SELFCHECK)
    many = 4 * cpus() + 1
    assert main(["run", str(path), "--workers", str(many), "--out", str(tmp_path / "o"),
                 "-q"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (f"recloop run: --workers: expected at most 4 per CPU ({4 * cpus()} "
                           f"on the {cpus()} CPU(s) here), got {many} (pass --force to run "
                           "anyway)")
    assert not (tmp_path / "o").exists()
    assert main(["run", str(path), "--workers", str(many), "--force", "--dry-run"]) == 0
    assert main(["run", str(path), "--workers", str(4 * cpus()), "--dry-run"]) == 0


@pytest.mark.parametrize("suffix", [".png", ".md"], ids=["figures", "report"])
def test_a_full_disk_at_the_report_step_fails_the_run_and_keeps_the_cells(tmp_path, capsys,
                                                                          monkeypatch, suffix):
    import errno

    import recloop._rundir as rundir

    real = rundir.atomic_write

    def full(path, data):
        if Path(path).suffix == suffix:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, data)

    monkeypatch.setattr(rundir, "atomic_write", full)
    out = tmp_path / "o"
    code = main(["run", str(write(tmp_path, SELFCHECK)), "--out", str(out), "-q",
                 "--workers", "1"])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "the report could not be written" in err and "No space left on device" in err
    run_dir = out / "tiny"
    assert "No space left on device" in (run_dir / "errors.log").read_text()
    assert len(list((run_dir / "cells").glob("*.json"))) == 2  # the cells are kept
    assert (run_dir / "results.jsonl").is_file()
    monkeypatch.setattr(rundir, "atomic_write", real)  # room again: the report is written
    assert main(["report", str(run_dir)]) == 0 and (run_dir / "report.md").is_file()


def test_out_paths_beyond_the_file_systems_limits_are_named(tmp_path, capsys):
    path = write(tmp_path, SELFCHECK)
    long_name = tmp_path / ("a" * 300)
    assert main(["run", str(path), "--out", str(long_name), "-q"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "expected folder names of at most 255 bytes (the file system's limit), got " \
           f"'{'a' * 37}...' of 300 bytes" in err
    deep = tmp_path.joinpath(*["b" * 200] * 25)
    assert main(["run", str(path), "--out", str(deep), "-q"]) == 2
    err = capsys.readouterr().err
    assert "expected a path short enough for the run's files below it (at most 4096 bytes " \
           "in all, the file system's limit" in err
    assert len(err) < 500  # the 5,000-byte path is shortened
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.toml"]


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds processes in /proc")
def test_a_killed_worker_fails_its_cell_and_keeps_the_run(tmp_path):
    """A worker killed by a signal was a bare exit code (and ``kill -KILL`` of
    multiprocessing's resource tracker, which recloop's workers no longer use, gave
    tracebacks): the killed worker's cell fails naming SIGKILL, the others are kept."""
    from tests.recloop.test_signals import SLOW, _sleeping, _workers

    path = tmp_path / "slow.toml"
    path.write_text(SLOW.format(delays="0.0, 5.0, 5.1, 0.2"))
    proc = subprocess.Popen([sys.executable, "-m", "recloop", "run", str(path), "--out",
                             str(tmp_path / "out"), "--workers", "2", "-q"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 180
    victim = None
    while time.monotonic() < deadline and proc.poll() is None and victim is None:
        if list((tmp_path / "out" / "slow" / "cells").glob("*.json")):
            victim = next((w for w in _workers(proc.pid) if _sleeping(w)), None)
        time.sleep(0.05)
    assert victim, "a worker should be inside a 5 s cell"
    os.kill(victim, signal.SIGKILL)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, (out, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    log = (tmp_path / "out" / "slow" / "errors.log").read_text()
    assert "the worker running it was killed by SIGKILL (signal 9: out of memory? the " \
           "kernel's OOM killer sends it)" in log
    assert len(list((tmp_path / "out" / "slow" / "cells").glob("*.json"))) == 3
