"""Guests that reach for recloop (issue 36, item 3): plugins that patch recloop's code or
the truth, move the working directory, fork children, start a timer that ends their
process, raise the ``BaseException`` family, or write code into their channel to recloop.

Each case runs ``recloop`` in a subprocess under a timeout (a plugin that reached recloop's
process could end or hang it) with the plugins of ``tests/fixtures/plugins``, on an ``ope``
evaluation of 3 logs of 200 records (a few seconds).
"""

import csv
import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

PLUGINS = Path(__file__).resolve().parents[1] / "fixtures" / "plugins"

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(),
                                reason="guests are POSIX processes; the cases read /proc")

SCENARIO = """
[run]
name = "g"
plugin_timeout = 60

[world]
preset = "bred_linear"
{agents}
[[evaluations]]
kind = "ope"
agents = [{targets}]
n_logs = 3
n_rounds = 200
estimators = [{estimators}]
"""


def scenario(tmp_path, estimators, agents=(), name="s.toml"):
    tables = "".join(f'\n[[agents]]\nname = "{n}"\nkind = "python"\nfactory = "{f}"\n'
                     for n, f in agents)
    text = SCENARIO.format(agents=tables, targets=", ".join(f'"{n}"' for n, _ in agents),
                           estimators=", ".join(f'"{e}"' for e in estimators))
    (tmp_path / name).write_text(text)
    return name


def recloop(tmp_path, *args, env=None, timeout=240):
    return subprocess.run([sys.executable, "-m", "recloop", *map(str, args)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def run(tmp_path, file, *more, env=None, out="runs", timeout=240):
    return recloop(tmp_path, "run", file, "--path", PLUGINS, "--out", out, "--workers", "2",
                   "-q", *more, env=env, timeout=timeout)


def per_log(run_dir: Path) -> dict:
    with gzip.open(run_dir / "estimates.csv.gz", "rt", newline="") as f:
        return {(r["agent"], r["variant"], r["log"]): r for r in csv.DictReader(f)}


def one_line(proc) -> str:
    assert "Traceback" not in proc.stderr and "_Exited" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


# -- recloop's own numbers ----------------------------------------------------------------------

@pytest.mark.slow
def test_estimator_wrapping_mean_estimate_cannot_move_recloops_ips(tmp_path):
    """A plugin estimator wrapped ``evaluators._ope._mean_estimate`` inside its worker: the
    built-in IPS row moved from 0.3033 to 0.3283, exit 0. recloop's estimators now run in a
    process that never imports users' code."""
    base = run(tmp_path, scenario(tmp_path, ["ips"], name="base.toml"), out="base")
    hostile = run(tmp_path, scenario(tmp_path, ["ips", "hostile:patches_mean_estimate"]))
    assert base.returncode == 0 and hostile.returncode == 0, (base, hostile)
    ours = per_log(tmp_path / "base" / "g")
    theirs = per_log(tmp_path / "runs" / "g")
    assert {k: v["estimate"] for k, v in theirs.items() if k[1] == "ips"} == \
        {k: v["estimate"] for k, v in ours.items()}
    # the plugin itself ran (its own rows are there, beside the truth recloop computes)
    mine = [v for k, v in theirs.items() if k[1] == "patches_mean_estimate"]
    assert len(mine) == 9 and all(v["truth"] == ours[(v["agent"], "ips", v["log"])]["truth"]
                                  for v in mine)


@pytest.mark.slow
def test_agent_wrapping_mean_estimate_beside_recloops_targets_is_caught(tmp_path):
    """A users' agent must run beside recloop's estimators (they evaluate it): what it does
    to them is caught -- the built-in targets' estimates computed beside it differ from
    those computed apart -- and the cell fails naming it; nothing is recorded."""
    file = scenario(tmp_path, ["ips"], agents=[("shifty", "hostile:PatchesMeanEstimateAgent")])
    proc = run(tmp_path, file)
    assert proc.returncode == 1, proc
    line = one_line(proc)
    assert "cell ope/*/seed=0 failed: the part of the cell that runs users' code (agent " \
           "'shifty') sent a row of 'ips' (value" in line, line
    assert "different from what recloop computes apart from it" in line
    assert not list((tmp_path / "runs" / "g" / "cells").glob("*.json"))


@pytest.mark.slow
def test_module_replacing_the_truth_is_caught(tmp_path):
    file = scenario(tmp_path, ["ips", "reaches_recloop:ips_of_mine"])
    proc = run(tmp_path, file, env={"RECLOOP_TEST_DEEDS": "truth"})
    assert proc.returncode == 1, proc
    line = one_line(proc)
    assert "(estimator 'ips_of_mine') sent the truth 0.4242 beside 'ips_of_mine'" in line, line
    assert "(value, agent greedy_eps0.1, log 0) where recloop computes 0.4375" in line


@pytest.mark.slow
def test_module_replacing_summarize_and_moving_the_cwd_at_import_changes_nothing(tmp_path):
    """At validation the import happened in recloop's own process: report.md's every row
    became 0.4242 and ``--out runs`` went to ``/runs``. Now no process of recloop's imports
    it (each importer notes its pid), the run directory is where it was asked, and the
    summary is recloop's."""
    notes = tmp_path / "notes"
    notes.mkdir()
    file = scenario(tmp_path, ["ips", "reaches_recloop:ips_of_mine"])
    env = {"RECLOOP_TEST_NOTES": str(notes), "RECLOOP_TEST_DEEDS": "summary,chdir,env"}
    proc = subprocess.Popen([sys.executable, "-m", "recloop", "run", file, "--path", PLUGINS,
                             "--out", "runs", "--workers", "2"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **env})
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, (out, err)
    importers = {int(p.name.split("-")[1]) for p in notes.glob("imported-*")}
    assert importers and proc.pid not in importers
    run_dir = tmp_path / "runs" / "g"
    assert (run_dir / "report.md").is_file() and not Path("/runs/g").exists()
    assert "0.4242" not in (run_dir / "report.md").read_text() and "0.4242" not in out
    from recloop._summary import summarize

    rows = [dict(r, estimate=float(r["estimate"]), truth=float(r["truth"]), params={},
                 tick=None, stderr=float(r["stderr"] or "nan"),
                 ci_low=float(r["ci_low"] or "nan"), ci_high=float(r["ci_high"] or "nan"))
            for r in per_log(run_dir).values()]
    means = {(s.agent, s.variant): s.estimate for s in summarize(rows)}
    assert f"{means['uniform', 'ips']:.4g}" in out


@pytest.mark.slow
@pytest.mark.parametrize("command", ["validate", "run"])
def test_children_a_plugin_forks_end_with_it(tmp_path, command):
    """Children forked by a plugin outlived the run and ``recloop validate``: a plain child
    and a detached grandchild (its own session, its parent gone)."""
    notes = tmp_path / "notes"
    notes.mkdir()
    file = scenario(tmp_path, ["ips", "reaches_recloop:ips_of_mine"])
    env = {"RECLOOP_TEST_NOTES": str(notes), "RECLOOP_TEST_DEEDS": "fork"}
    try:  # (a child left alive holds recloop's standard output open: a time-out, then)
        proc = (recloop(tmp_path, "validate", file, "--path", PLUGINS, env=env, timeout=60)
                if command == "validate" else run(tmp_path, file, env=env))
        assert proc.returncode == 0, proc
        children = [int(pid) for p in notes.glob("children-*") for pid in p.read_text().split()]
        assert len(children) >= 2
        alive = [pid for pid in children if _alive(pid)]
        assert alive == [], f"{len(alive)} of {len(children)} children outlived recloop"
    finally:
        for pid in (int(pid) for p in notes.glob("children-*") for pid in p.read_text().split()):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
def test_timer_that_ends_the_process_prints_no_traceback_in_recloop(tmp_path):
    """``threading.Timer(7, os._exit)`` started at import printed recloop_base.guard's
    ``_Exited`` traceback in recloop's own process. Now it ends a guest: validation names it
    as the plugin whose process ended, in one line."""
    file = scenario(tmp_path, ["ips", "reaches_recloop:ips_of_mine", "hostile:hangs_in_cell"])
    proc = recloop(tmp_path, "validate", file, "--path", PLUGINS,
                   env={"RECLOOP_TEST_DEEDS": "exit", "RECLOOP_TEST_EXIT_AFTER": "0.5"})
    assert "Traceback" not in proc.stderr and "_Exited" not in proc.stderr, proc.stderr
    if proc.returncode == 2:  # the timer ended the guest during a trial: named
        assert "ended its process: it exited with code 7 (os._exit in users' code?)" in \
            proc.stderr, proc.stderr
    else:  # the trials finished first: nothing of it reached recloop
        assert proc.returncode == 0, proc


# -- the BaseException family -------------------------------------------------------------------

@pytest.mark.slow
def test_base_exception_family_in_a_cell_is_one_line_naming_the_plugin(tmp_path):
    """``BaseException``, ``KeyboardInterrupt`` and ``GeneratorExit`` in a plugin printed
    the worker's traceback and were reported as "os._exit in users' code?"."""
    names = ["keyboard_interrupt_in_cell", "generator_exit_in_cell", "base_exception_in_cell"]
    text = "".join(SCENARIO.format(agents="", targets="", estimators=f'"ips", "hostile:{n}"')
                   .split("[[evaluations]]")[1].join(["[[evaluations]]", ""]).replace(
                       'kind = "ope"', f'kind = "ope"\nname = "{n}"') for n in names)
    head = SCENARIO.split("[[evaluations]]")[0].format(agents="")
    (tmp_path / "s.toml").write_text(head + text)
    proc = run(tmp_path, "s.toml")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc
    assert "(and 2 more cell(s))" in one_line(proc)
    log = (tmp_path / "runs" / "g" / "errors.log").read_text()
    for name, raised in zip(names, ["KeyboardInterrupt", "GeneratorExit",
                                    "BaseException: bare"], strict=True):
        assert (f"cell {name}/*/seed=0 failed: estimator '{name}' (import path "
                f"hostile:{name}) raised {raised}\n") in log, (name, log)
    assert "os._exit" not in log


def test_keyboard_interrupt_at_validation_names_the_plugin(tmp_path):
    file = scenario(tmp_path, ["ips", "hostile:keyboard_interrupt"])
    proc = recloop(tmp_path, "validate", file, "--path", PLUGINS)
    assert proc.returncode == 2
    assert one_line(proc).endswith(
        "got: estimator 'keyboard_interrupt' (import path hostile:keyboard_interrupt) raised "
        "KeyboardInterrupt")


# -- the channel ----------------------------------------------------------------------------

@pytest.mark.slow
def test_code_sent_through_the_channel_is_not_run_by_recloop(tmp_path):
    """A plugin finds its process's channel to recloop and sends a pickle whose loading
    would run a command in recloop's process: refused, the cell fails naming it."""
    pwned = tmp_path / "pwned"
    file = scenario(tmp_path, ["ips", "hostile:sends_code_to_its_parent_in_cell"])
    proc = run(tmp_path, file, env={"RECLOOP_TEST_PWNED": str(pwned)})
    assert proc.returncode == 1, proc
    assert not pwned.exists()
    line = one_line(proc)
    assert "its process sent a message named posix.system, which it may not" in line, line
    assert "in estimator 'sends_code_to_its_parent_in_cell'" in line


@pytest.mark.slow
def test_messages_outside_the_protocol_and_forged_rows_fail_the_cell(tmp_path):
    """A guest that writes its own messages to recloop: one outside the protocol, and a
    result of its own making that claims a row of recloop's IPS."""
    names = ["sends_junk_to_its_parent_in_cell", "sends_forged_rows_in_cell"]
    head = SCENARIO.split("[[evaluations]]")[0].format(agents="")
    text = "".join(SCENARIO.format(agents="", targets="", estimators=f'"ips", "hostile:{n}"')
                   .split("[[evaluations]]")[1].join(["[[evaluations]]", ""]).replace(
                       'kind = "ope"', f'kind = "ope"\nname = "{n}"') for n in names)
    (tmp_path / "s.toml").write_text(head + text)
    proc = run(tmp_path, "s.toml")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc
    log = (tmp_path / "runs" / "g" / "errors.log").read_text()
    assert "cell sends_junk_to_its_parent_in_cell/*/seed=0 failed: its process sent a " \
           "message that is not one of the protocol's ('progress'), in estimator " \
           "'sends_junk_to_its_parent_in_cell'" in log, log
    assert "cell sends_forged_rows_in_cell/*/seed=0 failed: the part of the cell that runs " \
           "users' code (estimator 'sends_forged_rows_in_cell') sent a row of 'ips' (value, " \
           "agent uniform) that recloop does not compute" in log, log


@pytest.mark.parametrize("protocol", [4, 5])  # 5: the channel's, where numpy pickles an
def test_safe_loads_reads_results_and_refuses_code(protocol):  # array by _frombuffer
    import pickle

    import numpy as np

    from evaluators import Estimate
    from recloop_base.guard import UnsafeMessage, safe_loads

    data = ("done", [{"estimate": 0.5, "params": {"n": 3}}], np.arange(3.0), np.float64(2),
            Estimate(0.1, 0.2, 0.0, 0.3, 4), {1, 2}, complex(1, 2))
    back = safe_loads(pickle.dumps(data, protocol=protocol))
    assert back[0:2] == data[0:2] and back[2].tolist() == [0.0, 1.0, 2.0]
    assert back[4] == data[4] and back[5] == {1, 2}

    class Evil:
        def __reduce__(self):
            return os.system, ("true",)

    for bad in [Evil(), json.loads, time.sleep, subprocess.Popen, Path("x")]:
        with pytest.raises(UnsafeMessage, match="which it may not"):
            safe_loads(pickle.dumps(bad, protocol=protocol))
    with pytest.raises(UnsafeMessage, match="damaged"):
        safe_loads(b"\x80\x05junk")
