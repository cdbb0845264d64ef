"""Plugins are guests (issue 25, section 1): users' agents and estimators that end the
process, hang, segfault, write into shared inputs or return impossible numbers cannot end,
hang or corrupt a run. The hostile plugins live in ``tests/fixtures/plugins``.

Validation and runs that could end the process if a guard failed run in a subprocess: a
plugin's ``os._exit(0)`` in this process would end pytest with a success.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from recloop._cli import main

PLUGINS = Path(__file__).resolve().parents[1] / "fixtures" / "plugins"

VALIDATION = """
[run]
name = "hostile"
plugin_timeout = 2

[world]
preset = "bred_linear"

[[agents]]
name = "quitter"
kind = "python"
factory = "hostile:ExitsAtValidation"

[[evaluations]]
kind = "ope"
n_logs = 2
n_rounds = 200
estimators = ["ips", "hostile:exits", "hostile:os_exits", "hostile:hangs",
              { name = "imported", factory = "exits_at_import:ips" },
              { name = "os_imported", factory = "os_exits_at_import:ips" },
              "hostile:writes_through_base", "hostile:huge", "hostile:inverted_interval",
              "hostile:negative_stderr", "hostile:writes_action_dist"]
"""


def recloop(*args, cwd, timeout=240, env=None):
    return subprocess.run([sys.executable, "-m", "recloop", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


@pytest.mark.slow
def test_validation_survives_every_hostile_plugin_and_names_each(tmp_path):
    (tmp_path / "s.toml").write_text(VALIDATION)
    proc = recloop("validate", "s.toml", "--path", PLUGINS, cwd=tmp_path)
    assert proc.returncode == 2, proc
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    est = "s.toml: evaluations[0].estimators"
    expected = [
        "s.toml: agents[0].factory: expected a factory that builds an agent from {}, got: agent "
        "'quitter' (import path hostile:ExitsAtValidation) called sys.exit(0)",
        f"{est}[1]: expected an estimator callable as estimator(log, action_dist, *, rng, "
        "**params) that runs on a small log, got: estimator 'exits' (import path "
        "hostile:exits) called sys.exit(0)",
        f"{est}[2]: ", "estimator 'os_exits' (import path hostile:os_exits) called os._exit(0)",
        f"{est}[3]: ", "estimator 'hangs' (import path hostile:hangs) did not return within 2 s",
        f"{est}[4].factory: expected an importable module, got 'exits_at_import:ips': module "
        "'exits_at_import' of 'exits_at_import:ips' called sys.exit(0) while being imported",
        f"{est}[5].factory: ", "called os._exit(0) while being imported",
        f"{est}[6]: ", "estimator 'writes_through_base' (import path "
        "hostile:writes_through_base) changed the inputs it shares with the other estimators",
        f"{est}[7]: ", "ValueError: returned an estimate 1e+308 that no weighted mean of this "
        "log's rewards",
        f"{est}[8]: ", "ValueError: returned an inverted interval [0.7, 0.3]",
        f"{est}[9]: ", "ValueError: returned a negative standard error (-0.1)",
        f"{est}[10]: ", "ValueError: cannot set WRITEABLE flag to True of this array",
    ]
    assert len(lines) == 11, proc.stderr
    text = "\n".join(lines)
    for part in expected:
        assert part in text, (part, text)
    assert not (tmp_path / "runs").exists()


CELLS = """
[run]
name = "cells"
plugin_timeout = 4

[world]
preset = "bred_linear"

[[agents]]
name = "exiter"
kind = "python"
factory = "hostile:ExitsAgent"

[[agents]]
name = "os_exiter"
kind = "python"
factory = "hostile:OsExitsAgent"

[[agents]]
name = "hanger"
kind = "python"
factory = "hostile:HangingAgent"

[[evaluations]]
kind = "bred_vs_replay"
T = 20
n_logs = 1
n_bootstrap = 1
n_truth_runs = 2
estimators = ["replay"]
""" + "".join(f"""
[[evaluations]]
kind = "ope"
name = "{name}"
agents = []
n_logs = 2
n_rounds = 200
estimators = ["ips"{extra}]
""" for name, extra in [("fine", ""), ("exit", ', "hostile:exits_in_cell"'),
                        ("os_exit", ', "hostile:os_exits_in_cell"'),
                        ("hang", ', "hostile:hangs_in_cell"'),
                        ("segv", ', "hostile:segfaults_in_cell"')])


@pytest.mark.slow
def test_plugins_that_exit_hang_or_crash_in_cells_fail_those_cells_only(tmp_path):
    (tmp_path / "s.toml").write_text(CELLS)
    proc = recloop("run", "s.toml", "--path", PLUGINS, "--workers", "2", "--out", "runs",
                   "-q", cwd=tmp_path)
    assert proc.returncode == 1, proc
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "(and 6 more cell(s))" in proc.stderr and "the other cells ran and are kept" in \
        proc.stderr
    run_dir = tmp_path / "runs" / "cells"
    log = (run_dir / "errors.log").read_text()
    agent = "(the users' code called last: agent '{0}' (import path hostile:{1}))"
    for cell, message in [
        ("bred_vs_replay/exiter/seed=0", "SystemExit: 3: users' code called sys.exit(3) "
         + agent.format("exiter", "ExitsAgent")),
        ("bred_vs_replay/os_exiter/seed=0", "the worker running it exited with code 0 in the "
         "middle of the cell (os._exit in users' code?) "
         + agent.format("os_exiter", "OsExitsAgent")),
        ("bred_vs_replay/hanger/seed=0", "no sign of progress came within 4 s "
         "(run.plugin_timeout); the cell was stopped "
         + agent.format("hanger", "HangingAgent")),
        ("exit/*/seed=0", "estimator 'exits_in_cell' (import path hostile:exits_in_cell) "
         "called sys.exit(0)"),
        ("os_exit/*/seed=0", "the worker running it exited with code 0 in the middle of the "
         "cell (os._exit in users' code?), in estimator 'os_exits_in_cell' (import path "
         "hostile:os_exits_in_cell)"),
        ("hang/*/seed=0", "estimator 'hangs_in_cell' (import path hostile:hangs_in_cell) did "
         "not return within 4 s (run.plugin_timeout)"),
        ("segv/*/seed=0", "the worker running it was killed by SIGSEGV (signal 11: a crash in "
         "compiled code), in estimator 'segfaults_in_cell' (import path "
         "hostile:segfaults_in_cell)"),
    ]:
        assert f"cell {cell} failed: {message}" in log, (cell, log)
    # the cell that ran recloop's code only is kept; nothing else was written for the others
    assert list(run_json_cells(run_dir)) == ["fine/*/seed=0"]
    assert not (run_dir / "results.jsonl").exists()


SHARED = """
[run]
name = "shared"

[world]
preset = "bred_linear"

[[evaluations]]
kind = "ope"
agents = []
n_logs = 3
n_rounds = 200
estimators = [{estimators}]
"""


def _run(tmp_path, name, estimators, **kw):
    from recloop._plugins import guest_paths, set_guest_paths
    from recloop._runner import run_scenario
    from recloop._scenario import loads_scenario

    text = SHARED.format(estimators=", ".join(f'"{e}"' for e in estimators))
    saved = guest_paths()
    set_guest_paths([PLUGINS])  # validation's guest process imports them from there
    try:
        scenario = loads_scenario(text)
    finally:
        set_guest_paths(saved)
    return run_scenario(scenario, out=tmp_path / name, quiet=True, report=False,
                        paths=[PLUGINS], **kw)


def _estimates(run_dir):
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    return {(r["agent"], r["variant"], r["metric"]): r["estimate"] for r in rows}


@pytest.mark.slow
def test_estimators_cannot_change_what_the_others_see_nor_record_impossible_values(tmp_path):
    hostile = ["hostile:writes_action_dist_in_cell", "hostile:replaces_log_rewards", "ips",
               "hostile:huge_in_cell", "hostile:inverted_interval_in_cell",
               "hostile:negative_stderr_in_cell", "snips"]
    base = _estimates(_run(tmp_path, "base", ["ips", "snips"]))
    run_dir = _run(tmp_path, "hostile", hostile)
    got = _estimates(run_dir)
    # recloop's estimators, called after each hostile one, see the same logs: same bits
    assert {k: v for k, v in got.items() if k[1] in ("ips", "snips")} == base
    errors = (run_dir / "errors.log").read_text()
    for name, reason in [
        ("writes_action_dist_in_cell", "ValueError: cannot set WRITEABLE flag to True of this "
                                       "array"),
        ("huge_in_cell", "ValueError: returned an estimate 1e+308 that no weighted mean of "
                         "this log's rewards"),
        ("inverted_interval_in_cell", "ValueError: returned an inverted interval [0.7, 0.3]"),
        ("negative_stderr_in_cell", "ValueError: returned a negative standard error (-0.1)"),
    ]:
        assert f"estimator '{name}'" in errors and reason in errors, (name, errors)
        # recorded as nan on every log of every target, like an estimator that raised
        rates = [v for k, v in got.items() if k[1] == name and k[2] == "nan_rate"]
        assert rates and all(r == 1.0 for r in rates), (name, rates)
    # its own copy of the log: object.__setattr__ changed nothing the others see
    assert any(k[1] == "replaces_log_rewards" for k in got)


@pytest.mark.slow
def test_writing_through_a_views_base_fails_the_cell_naming_the_estimator(tmp_path):
    from recloop._cells import CellError

    with pytest.raises(CellError) as info:
        _run(tmp_path, "base", ["ips", "hostile:writes_through_base_in_cell", "snips"])
    assert info.value.message.startswith(
        "estimator 'writes_through_base_in_cell' (import path "
        "hostile:writes_through_base_in_cell) changed the inputs it shares with the other "
        "estimators")


def run_json_cells(run_dir: Path) -> dict:
    out = {}
    for path in (run_dir / "cells").glob("*.json"):
        cell = json.loads(path.read_text())
        out[cell["cell"]] = cell
    return out


def test_path_that_shadows_what_recloop_needs_is_refused(tmp_path, capsys):
    folder = tmp_path / "plugins"
    folder.mkdir()
    for name in ("logging.py", "csv.py", "my_estimators.py"):
        (folder / name).write_text("raise RuntimeError('imported')\n")
    (folder / "numpy").mkdir()
    (folder / "numpy" / "__init__.py").write_text("")
    (tmp_path / "s.toml").write_text(textwrap.dedent("""
        [run]
        name = "s"
        [[agents]]
        name = "a0"
        kind = "fixed_arm"
        [[evaluations]]
        kind = "selfcheck"
        """))
    code = main(["run", str(tmp_path / "s.toml"), "--path", str(folder), "--out",
                 str(tmp_path / "runs"), "-q"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    lines = err.strip().splitlines()
    assert lines == [
        f"recloop: --path {folder}: expected a folder whose modules do not shadow those "
        f"recloop needs, got {name} (it would replace {what}); rename it or move it "
        "elsewhere" for name, what in [("csv.py", "Python's 'csv'"),
                                       ("logging.py", "Python's 'logging'"),
                                       ("numpy", "numpy's 'numpy'")]]
    assert not (tmp_path / "runs").exists()
