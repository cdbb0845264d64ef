"""Run directories that check themselves (issue 16, section 1): cell identity and checksums,
damaged files on resume and report, the lock, temporary files of a crash."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from recloop._cells import plan_cells
from recloop._cli import main
from recloop._rundir import (
    RunDirError,
    RunLock,
    check_cell,
    remove_temporary,
    scenario_hash,
    verify_cells,
)
from recloop._scenario import load_scenario

TINY = """
[run]
name = "tiny"
replicates = 2

[[agents]]
name = "a0"
kind = "fixed_arm"

[[evaluations]]
kind = "selfcheck"
ticks = 2
sweep = { n = [10, 20, 30] }
"""


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """A finished run of TINY (never modified: tests copy it)."""
    base = tmp_path_factory.mktemp("fresh")
    (base / "tiny.toml").write_text(TINY)
    assert main(["run", str(base / "tiny.toml"), "--out", str(base / "out"), "--workers", "1",
                 "-q"]) == 0
    return base


@pytest.fixture
def run(tmp_path, fresh):
    """A copy of the fresh run: (scenario file, run directory)."""
    shutil.copytree(fresh / "out", tmp_path / "out")
    shutil.copy(fresh / "tiny.toml", tmp_path / "tiny.toml")
    return tmp_path / "tiny.toml", tmp_path / "out" / "tiny"


def resume(scenario: Path, run_dir: Path, capsys) -> tuple[int, str]:
    code = main(["run", str(scenario), "--out", str(run_dir.parent), "--workers", "1", "-q",
                 "--resume"])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


def cells_of(run_dir: Path) -> list[Path]:
    return sorted((run_dir / "cells").glob("*.json"))


def test_a_cell_file_carries_its_identity_and_a_checksum(run):
    scenario, run_dir = run
    sc = load_scenario(scenario)
    digest = scenario_hash((run_dir / "scenario.toml").read_text())
    assert digest == scenario_hash(sc.to_toml())
    for cell in plan_cells(sc.data):
        path = run_dir / "cells" / cell.filename
        payload = json.loads(path.read_text())
        assert payload["cell"] == cell.id and payload["seed"] == cell.seed
        assert payload["scenario"] == digest and len(payload["checksum"]) == 64
        assert check_cell(path, cell_id=cell.id, seed=cell.seed, scenario=digest) == (
            payload, None)
        # identity and checksum are checked, each on its own
        assert "not " in check_cell(path, cell_id="x", seed=cell.seed, scenario=digest)[1]
        assert "seed" in check_cell(path, cell_id=cell.id, seed=99, scenario=digest)[1]
        assert "scenario" in check_cell(path, cell_id=cell.id, seed=cell.seed,
                                        scenario="0" * 64)[1]


def _truncate(p, others):
    p.write_bytes(p.read_bytes()[:100])


def _empty(p, others):
    p.write_bytes(b"")


def _not_json(p, others):
    p.write_bytes(b"\x00\xff garbage")


def _wrong_shape(p, others):
    p.write_text("[1, 2, 3]")


def _old_format(p, others):
    payload = json.loads(p.read_text())
    p.write_text(json.dumps({k: payload[k] for k in ("cell", "seconds", "rows")}))


def _copied_over(p, others):
    shutil.copy(others[0], p)  # another cell's content under this cell's name


def _altered(p, others):
    payload = json.loads(p.read_text())
    payload["rows"][0]["estimate"] += 0.5
    p.write_text(json.dumps(payload))


def _altered_estimate(p, others):
    payload = json.loads(p.read_text())
    payload["estimates"][0]["estimate"] += 0.5
    p.write_text(json.dumps(payload))


def _missing_rows_column(p, others):
    payload = json.loads(p.read_text())
    del payload["rows"][0]["truth"]
    payload.pop("checksum")
    from recloop._rundir import _checksum

    payload["checksum"] = _checksum(payload)  # a consistent checksum of a wrong shape
    p.write_text(json.dumps(payload))


def _a_directory(p, others):
    p.unlink()
    p.mkdir()


def _a_device(p, others):
    p.unlink()
    p.symlink_to("/dev/zero")  # reading it would never end


@pytest.mark.parametrize("damage, problem", [
    (_truncate, "truncated"), (_empty, "empty"), (_not_json, "not UTF-8"),
    (_wrong_shape, "wrong shape"), (_old_format, "no identity or checksum"),
    (_copied_over, "copied over"), (_altered, "checksum mismatch"),
    (_altered_estimate, "checksum mismatch"),
    (_missing_rows_column, "columns"), (_a_directory, "not a regular file"),
    (_a_device, "not a regular file"),
], ids=lambda x: getattr(x, "__name__", "")[1:] or None)
def test_resume_quarantines_and_recomputes_a_damaged_cell(run, capsys, damage, problem):
    scenario, run_dir = run
    before = (run_dir / "results.csv").read_bytes()
    files = cells_of(run_dir)
    victim = files[2]
    damage(victim, [f for f in files if f != victim])
    code, err = resume(scenario, run_dir, capsys)
    assert code == 0
    line = next(ln for ln in err.splitlines() if victim.name in ln)
    assert problem in line and "quarantine" in line and "recomputed" in line
    assert (run_dir / "cells" / "quarantine" / victim.name).exists() or \
        (run_dir / "cells" / "quarantine" / victim.name).is_symlink()
    # recomputed: every row once, byte for byte the fresh run's
    assert (run_dir / "results.csv").read_bytes() == before
    assert len(cells_of(run_dir)) == len(files)


def test_resume_sets_aside_files_that_are_no_cell_of_the_scenario(run, capsys):
    scenario, run_dir = run
    (run_dir / "cells" / "stray.json").write_text("{}")
    (run_dir / "cells" / "notes.txt").write_text("hello")
    code, err = resume(scenario, run_dir, capsys)
    assert code == 0 and "stray.json: not a cell of this scenario" in err
    assert "notes.txt: not a cell file" in err
    assert sorted(p.name for p in (run_dir / "cells" / "quarantine").iterdir()) == [
        "notes.txt", "stray.json"]


def test_quarantine_never_overwrites_an_earlier_file(run, capsys):
    scenario, run_dir = run
    victim = cells_of(run_dir)[0]
    for _ in range(2):
        victim.write_text("{")
        assert resume(scenario, run_dir, capsys)[0] == 0
    assert sorted(p.name for p in (run_dir / "cells" / "quarantine").iterdir()) == [
        victim.name, victim.name + ".1"]


@pytest.mark.parametrize("content, problem", [
    (None, "missing"), ("{not json", "not valid JSON"), ("[1]", "not a JSON object"),
    ("", "empty")])
def test_resume_with_a_damaged_environment_json(run, capsys, content, problem):
    scenario, run_dir = run
    before = (run_dir / "results.csv").read_bytes()
    env = run_dir / "environment.json"
    env.unlink() if content is None else env.write_text(content)
    code, err = resume(scenario, run_dir, capsys)
    assert code == 2  # said, and done what could be done:
    assert f"{env}: {problem}" in err and "rewritten" in err
    assert json.loads(env.read_text())["end"] and (run_dir / "results.csv").read_bytes() == before


@pytest.mark.parametrize("content, problem", [
    (None, "missing"), ("[run\n", "not valid TOML"), ("x = 1\n", "differs from the scenario")])
def test_resume_with_a_damaged_scenario_toml(run, capsys, content, problem):
    scenario, run_dir = run
    before = (run_dir / "results.csv").read_bytes()
    toml = run_dir / "scenario.toml"
    toml.unlink() if content is None else toml.write_text(content)
    code, err = resume(scenario, run_dir, capsys)
    assert code == 2 and f"{toml}: {problem}" in err and "rewritten" in err
    assert toml.read_text() == load_scenario(scenario).to_toml()
    assert (run_dir / "results.csv").read_bytes() == before
    assert "quarantine" not in err  # the cells carry the scenario's hash: all kept


def test_resume_says_when_results_jsonl_is_damaged(run, capsys):
    scenario, run_dir = run
    before = (run_dir / "results.jsonl").read_bytes()
    (run_dir / "results.jsonl").write_bytes(before[:-40])
    code, err = resume(scenario, run_dir, capsys)
    assert code == 2 and "results.jsonl: line" in err and "rebuilt" in err
    assert (run_dir / "results.jsonl").read_bytes() == before
    (run_dir / "results.jsonl").unlink()  # missing: the normal state of an interrupted run
    assert resume(scenario, run_dir, capsys) == (0, "")


def test_resume_refuses_a_damaged_scenario_toml_over_another_scenarios_cells(run, capsys):
    scenario, run_dir = run
    (run_dir / "scenario.toml").write_text("[run")
    other = scenario.with_name("other.toml")
    other.write_text(TINY.replace("ticks = 2", "ticks = 3"))
    code, err = resume(other, run_dir, capsys)
    assert code == 2 and "different scenario" in err
    assert not (run_dir / "cells" / "quarantine").exists()


def _change_a_value(run_dir):
    """A number of results.jsonl edited by hand (still valid JSON)."""
    path = run_dir / "results.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    row = json.loads(lines[3])
    row["estimate"] += 0.25
    lines[3] = json.dumps(row) + "\n"
    path.write_text("".join(lines))
    return "results.jsonl", "line 4 differs from the cell files"


def _drop_a_line(run_dir):
    path = run_dir / "results.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:2] + lines[3:]))
    return "results.jsonl", "line 3 differs from the cell files"


def _keep_half_the_lines(run_dir):
    path = run_dir / "results.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:len(lines) // 2]))
    return "results.jsonl", f"truncated: {len(lines) // 2} of {len(lines)} lines"


def _empty_results_jsonl(run_dir):  # issue 22, section 6: wiped report.md, exited 0
    (run_dir / "results.jsonl").write_text("")
    return "results.jsonl", "empty"


def _extra_line(run_dir):
    path = run_dir / "results.jsonl"
    path.write_text(path.read_text() + path.read_text().splitlines(keepends=True)[0])
    return "results.jsonl", "has lines the cell files do not give"


def _truncate_results_csv(run_dir):
    path = run_dir / "results.csv"
    path.write_bytes(path.read_bytes()[:300])
    return "results.csv", "line "


def _delete_results_csv(run_dir):
    (run_dir / "results.csv").unlink()
    return "results.csv", "missing"


def _change_an_estimate(run_dir):
    import gzip

    path = run_dir / "estimates.csv.gz"
    lines = gzip.decompress(path.read_bytes()).decode().splitlines(keepends=True)
    lines[2] = lines[2].replace(",0.", ",0.9", 1)
    path.write_bytes(gzip.compress("".join(lines).encode()))
    return "estimates.csv.gz", "line 3 differs from the cell files"


def _corrupt_estimates(run_dir):
    path = run_dir / "estimates.csv.gz"
    path.write_bytes(path.read_bytes()[:40])
    return "estimates.csv.gz", "unreadable"


@pytest.mark.parametrize("damage", [
    _change_a_value, _drop_a_line, _keep_half_the_lines, _empty_results_jsonl, _extra_line,
    _truncate_results_csv, _delete_results_csv, _change_an_estimate, _corrupt_estimates,
], ids=lambda f: f.__name__[1:])
def test_report_rebuilds_every_table_from_the_cells_and_names_what_differed(run, capsys,
                                                                             damage):
    """Issue 25, section 2: `recloop report` trusted results.jsonl and results.csv."""
    _, run_dir = run
    tables = ("results.jsonl", "results.csv", "estimates.csv.gz", "report.md")
    before = {name: (run_dir / name).read_bytes() for name in tables}
    figures = sorted(p.name for p in (run_dir / "figures").glob("*.png"))
    name, problem = damage(run_dir)
    assert main(["report", str(run_dir)]) == 2
    captured = capsys.readouterr()
    assert f"{run_dir / name}: {problem}" in captured.err, captured.err
    assert "rewritten from the verified cell files" in captured.err
    assert captured.err.count("recloop report:") == 1  # only the damaged file is named
    assert f"tiny: {run_dir / 'report.md'}" in captured.out  # the path it wrote
    for t in tables:  # every table back as the cells give it, the report the same
        assert (run_dir / t).read_bytes() == before[t], t
    assert sorted(p.name for p in (run_dir / "figures").glob("*.png")) == figures
    assert main(["report", str(run_dir)]) == 0  # nothing to say any more
    assert capsys.readouterr().err == ""


def _remove_a_cell(run_dir):
    cells_of(run_dir)[0].unlink()
    return "missing", "1 of 6 cell files are missing or damaged"


def _damage_a_cell(run_dir):
    cells_of(run_dir)[1].write_text("{")
    return "not JSON", "1 of 6 cell files are missing or damaged"


def _damage_scenario(run_dir):
    (run_dir / "scenario.toml").write_text("[run")
    return "not valid TOML", "the cell files cannot be verified without it"


def _scenario_without_seeds(run_dir):
    (run_dir / "scenario.toml").write_text("[run]\nname = 3\n")
    return "not a resolved scenario", "cannot be verified"


@pytest.mark.parametrize("damage", [_remove_a_cell, _damage_a_cell, _damage_scenario,
                                    _scenario_without_seeds], ids=lambda f: f.__name__[1:])
def test_report_rewrites_nothing_it_cannot_verify(run, capsys, damage):
    """A run directory whose cells cannot be verified: exit 2 naming the file, and the
    report, its figures and the tables stay as they were (an empty results.jsonl once
    wiped report.md and deleted a figure)."""
    _, run_dir = run
    (run_dir / "results.jsonl").write_text("")
    files = ("results.csv", "estimates.csv.gz", "report.md", "report.html")
    before = {name: (run_dir / name).read_bytes() for name in files}
    figures = {p.name: p.read_bytes() for p in (run_dir / "figures").glob("*.png")}
    problem, why = damage(run_dir)
    assert main(["report", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert problem in err and why in err and "nothing was rewritten" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert {name: (run_dir / name).read_bytes() for name in files} == before
    assert {p.name: p.read_bytes() for p in (run_dir / "figures").glob("*.png")} == figures
    assert (run_dir / "results.jsonl").read_text() == ""


def test_report_without_environment_json_says_what_it_lacks(run, capsys):
    _, run_dir = run
    (run_dir / "environment.json").write_text("{")
    assert main(["report", str(run_dir)]) == 2
    captured = capsys.readouterr()
    assert f"{run_dir / 'environment.json'}: " in captured.err
    assert "Traceback" not in captured.err
    report = (run_dir / "report.md").read_text()
    assert "## Summary" in report and "| selfcheck | a0 |" in report
    assert "- command: `?`" in report


def test_stale_errors_of_an_earlier_report_go(run, capsys, monkeypatch):
    """errors.log kept every report's failures, one after the other."""
    import dataclasses

    from recloop._registry import registry

    _, run_dir = run
    (run_dir / "errors.log").write_text("a cell's error, written by the run\n")

    def figures(rows, out_dir, world):
        raise RuntimeError("no ink")

    kind = dataclasses.replace(registry().evaluations["selfcheck"], figures=figures)
    monkeypatch.setitem(registry().evaluations, "selfcheck", kind)
    for _ in range(3):
        assert main(["report", str(run_dir)]) == 0
    log = (run_dir / "errors.log").read_text()
    assert log.startswith("a cell's error, written by the run\n")
    assert log.count("RuntimeError: no ink") == 2  # its line and its traceback, once
    monkeypatch.undo()
    assert main(["report", str(run_dir)]) == 0
    assert (run_dir / "errors.log").read_text() == "a cell's error, written by the run\n"
    capsys.readouterr()


def _hold_lock(run_dir: Path):
    """A process that takes the lock of ``run_dir`` and waits (killed by the test)."""
    code = ("import sys, time\nfrom recloop._rundir import RunLock\n"
            f"RunLock({str(run_dir)!r}).acquire()\nprint('locked', flush=True)\n"
            "time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_a_second_process_on_the_same_directory_exits_2_naming_the_first(run, capsys):
    scenario, run_dir = run
    holder = _hold_lock(run_dir)
    try:
        code, err = resume(scenario, run_dir, capsys)
        assert code == 2 and f"in use by process {holder.pid}" in err
        assert main(["report", str(run_dir)]) == 2
        assert f"in use by process {holder.pid}" in capsys.readouterr().err
    finally:
        holder.kill()
        holder.wait()
    # its process is gone: the lock is stale and taken over, with a message
    assert (run_dir / ".lock").read_text().strip() == str(holder.pid)
    code, err = resume(scenario, run_dir, capsys)
    assert code == 0 and f"left by process {holder.pid}, which is no longer running" in err
    assert not (run_dir / ".lock").exists()  # released at the end


def test_run_lock_in_process(tmp_path):
    with RunLock(tmp_path) as lock:
        assert lock.stale is None and (tmp_path / ".lock").read_text() == f"{os.getpid()}\n"
        with pytest.raises(RunDirError, match=f"in use by process {os.getpid()}"):
            RunLock(tmp_path).acquire()
    assert not (tmp_path / ".lock").exists()


def test_temporary_files_of_a_crash_are_removed_on_resume(run, capsys):
    scenario, run_dir = run
    tmps = [run_dir / "cells" / f".{'0a' * 12}.json.recloop-4242.tmp",
            run_dir / ".results.csv.17.tmp",  # (the name before 0.1.1)
            run_dir / "figures" / ".x.png.recloop-99.tmp"]
    for p in tmps:
        p.write_text("half")
    # not ours: a user's files, however they are named, are left alone (issue 36, item 7)
    keep = [run_dir / "cells" / ".hidden", run_dir / ".notes.2024.tmp",
            run_dir / ".notes.recloop-2024.tmp", run_dir / "cells" / ".abc.json.4242.tmp"]
    for p in keep:
        p.write_text("x")
    code, err = resume(scenario, run_dir, capsys)
    assert code == 0 and "3 temporary file(s)" in err
    assert not any(p.exists() for p in tmps) and all(p.exists() for p in keep)


def test_remove_temporary_and_verify_cells_on_an_empty_directory(tmp_path):
    assert remove_temporary(tmp_path) == [] and verify_cells(tmp_path, {}, "x") == []
