"""The command line, in-process through ``main(argv)`` (one subprocess for ``python -m``)."""

import subprocess
import sys

import pytest

from recloop._cli import main
from recloop._scenario import builtin_scenarios, load_scenario

TINY = """
[run]
name = "tiny"
description = "a tiny run"

[[agents]]
name = "a0"
kind = "fixed_arm"

[[evaluations]]
kind = "selfcheck"
ticks = 3
sweep = { n = [10, 20] }
"""


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    return path


def test_validate_ok(tiny, capsys):
    assert main(["validate", str(tiny)]) == 0
    assert f"{tiny}: ok (2 cells)" in capsys.readouterr().out


def test_validate_reports_every_problem_of_every_file(tmp_path, tiny, capsys):
    bad1 = tmp_path / "bad1.toml"
    bad1.write_text(TINY.replace("ticks = 3", "tiks = 3").replace('"a0"\nkind', '"a0"\nkimd'))
    bad2 = tmp_path / "bad2.toml"
    bad2.write_text("[run\n")
    assert main(["validate", str(bad1), str(tiny), str(bad2)]) == 2
    err = capsys.readouterr().err
    assert f"{bad1}: evaluations[0].tiks: expected one of the keys" in err
    assert "(did you mean 'ticks'?)" in err
    assert f"{bad1}: agents[0].kimd: expected one of the keys" in err
    assert f"{bad2}: toml: expected valid TOML" in err
    assert "Traceback" not in err


def test_run_with_bad_input_creates_nothing(tmp_path, tiny, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text(TINY.replace("n = [10, 20]", "n = [10, -1]"))
    out = tmp_path / "out"
    assert main(["run", str(tiny), str(bad), "--out", str(out), "-q"]) == 2
    assert not out.exists()
    assert f"{bad}: evaluations[0].sweep.n[1]: expected an integer" in capsys.readouterr().err
    assert main(["run", str(tiny), "--out", str(out), "--workers", "0"]) == 2
    assert main(["run", str(tiny), "--out", str(out), "--scheduler", "tcp://x:1"]) == 2
    assert main(["run", "no_such_scenario", "--out", str(out)]) == 2
    assert not out.exists()


def test_run_writes_a_complete_run_directory(tmp_path, tiny, capsys):
    out = tmp_path / "out"
    assert main(["run", str(tiny), "--out", str(out), "--workers", "1", "-q",
                 "--seed", "7"]) == 0
    run_dir = out / "tiny"
    names = {p.name for p in run_dir.iterdir()}
    assert {"scenario.toml", "environment.json", "results.csv", "results.jsonl", "report.md",
            "figures", "cells"} <= names
    resolved = load_scenario(run_dir / "scenario.toml")
    assert resolved.seeds == [7] and resolved.data["evaluations"][0]["delay"] == 0.0
    report = (run_dir / "report.md").read_text()
    figures = sorted((run_dir / "figures").glob("*.png"))
    assert figures and all(p.read_bytes()[:4] == b"\x89PNG" for p in figures)
    for fig in figures:
        assert f"figures/{fig.name}" in report
    assert "| selfcheck | a0 |" in report and "## Timing" in report
    err = capsys.readouterr().err
    assert "Traceback" not in err and "cell/s" not in err  # -q: no progress bar
    # `recloop report` rebuilds it
    (run_dir / "report.md").unlink()
    assert main(["report", str(run_dir)]) == 0
    assert (run_dir / "report.md").read_text() == report
    assert main(["report", str(tmp_path)]) == 2


def test_progress_bar_unless_quiet(tmp_path, tiny, capsys):
    assert main(["run", str(tiny), "--out", str(tmp_path), "--workers", "1"]) == 0
    captured = capsys.readouterr()
    assert "2/2" in captured.err and "running tiny: 2 cells" in captured.out


def test_dry_run_lists_cells_without_writing(tmp_path, tiny, capsys):
    assert main(["run", str(tiny), "--dry-run", "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "selfcheck/a0/seed=0/n=10" in out and "selfcheck/a0/seed=0/n=20" in out
    assert not (tmp_path / "o").exists()


def test_list_shows_builtin_scenarios_with_descriptions(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    from tests.builtin_data import load_builtin

    for name, path in builtin_scenarios().items():
        assert name in out
        assert load_builtin(name, path).description[:30] in out
    # a scenario whose data is not shipped is listed with what it needs
    assert "calibrated_campaign_bias" in out and "--set world.calibrate_from=PATH" in out


def test_builtin_scenario_found_by_name(capsys):
    assert main(["validate", "quickstart"]) == 0
    assert "quickstart.toml: ok" in capsys.readouterr().out


def test_usage_errors_exit_2(capsys):
    assert main([]) == 2
    assert main(["frobnicate"]) == 2
    assert main(["run"]) == 2
    assert main(["run", "x", "--executor", "spark"]) == 2


def test_python_dash_m(tmp_path, tiny):
    proc = subprocess.run([sys.executable, "-m", "recloop", "validate", str(tiny)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0 and "ok (2 cells)" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "recloop", "--version"], capture_output=True,
                          text=True)
    assert proc.returncode == 0 and proc.stdout.startswith("recloop ")


def test_resume_flag_completes_a_run(tmp_path, tiny):
    out = tmp_path / "out"
    assert main(["run", str(tiny), "--out", str(out), "--workers", "1", "-q"]) == 0
    before = (out / "tiny" / "results.csv").read_bytes()
    cells = sorted((out / "tiny" / "cells").glob("*.json"))
    cells[0].unlink()
    (out / "tiny" / "results.csv").unlink()
    assert main(["run", str(tiny), "--out", str(out), "--workers", "1", "-q", "--resume"]) == 0
    assert (out / "tiny" / "results.csv").read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == ["tiny"]


@pytest.mark.parametrize("exc, code", [(RuntimeError("kaput"), 1), (KeyboardInterrupt(), 130)])
def test_failing_or_interrupted_cells(tmp_path, tiny, monkeypatch, capsys, exc, code):
    import dataclasses

    from recloop._registry import registry

    calls = []
    kind = registry().evaluations["selfcheck"]

    def flaky(cell):
        calls.append(cell)
        if len(calls) == 2:
            raise exc
        return kind.run(cell)

    monkeypatch.setitem(registry().evaluations, "selfcheck", dataclasses.replace(kind, run=flaky))
    out = tmp_path / "out"
    assert main(["run", str(tiny), "--out", str(out), "--workers", "1", "-q"]) == code
    err = capsys.readouterr().err
    assert "Traceback" not in err and "--resume" in err
    assert len(list((out / "tiny" / "cells").glob("*.json"))) == 1  # the first cell is kept
    monkeypatch.setitem(registry().evaluations, "selfcheck", kind)
    assert main(["run", str(tiny), "--out", str(out), "--workers", "1", "-q", "--resume"]) == 0
