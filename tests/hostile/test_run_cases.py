"""Run directories and runs under attack or accident (issue 36, items 4, 5 and 7): a stopped
worker, a forged cell re-hashed, a ``cells`` that is a file, a user's file named like a
temporary one, a scenario that would run for years, ``recloop.run`` from a plain script.

Cases that could hang run ``recloop`` in a subprocess under a timeout.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from recloop._cli import main

ON_PROC = Path("/proc/self/stat").exists()


def recloop(cwd, *args, timeout=240, env=None):
    return subprocess.run([sys.executable, "-m", "recloop", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


SMALL = """
[run]
name = "small"

[world]
preset = "bred_linear"

[[evaluations]]
kind = "ope"
agents = []
n_logs = 4
targets = [{ name = "u", policy = "uniform" },
           { name = "g", policy = "epsilon_greedy", epsilon = 0.2 }]
estimators = ["ips", "snips"]
sweep = { n_rounds = [100, 120, 140] }
"""


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """A finished run directory of 3 cells (shared: copy it before changing it)."""
    folder = tmp_path_factory.mktemp("small")
    (folder / "small.toml").write_text(SMALL)
    assert main(["run", str(folder / "small.toml"), "--out", str(folder / "runs"), "-q",
                 "--workers", "1"]) == 0
    return folder / "runs" / "small"


def copy_run(run_dir: Path, tmp_path: Path) -> Path:
    import shutil

    target = tmp_path / run_dir.name
    shutil.copytree(run_dir, target)
    return target


# -- item 4: a stopped worker -------------------------------------------------------------------

def _stat(pid: int):
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[1]), int(fields[11]) + int(fields[12])  # state, ppid, cpu


def _workers(pid: int) -> list[int]:
    found = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            st = _stat(int(p.name))
            if st and st[1] == pid and b"recloop._workers:_worker_main" in \
                    (p / "cmdline").read_bytes():
                found.append(int(p.name))
    return found


STOPPED = """
[run]
name = "stop"

[[agents]]
name = "a0"
kind = "fixed_arm"

[[evaluations]]
kind = "selfcheck"
sweep = { delay = [6.0, 6.1, 6.2] }
"""


@pytest.mark.slow
@pytest.mark.skipif(not ON_PROC, reason="finds the workers in /proc")
def test_a_stopped_worker_fails_its_cell_and_the_run_goes_on(tmp_path):
    """``kill -STOP`` on one worker of a 2-worker run of built-in cells hung the run for
    ever (88% ... ETA 4s until killed at 150 s). Now its cell fails after ``--cell-timeout``
    seconds without progress, named, and the other cells are finished and kept (their
    ``delay`` reports progress every 0.1 s: they are slow, not stuck)."""
    from tests.recloop.test_signals import _sleeping

    (tmp_path / "stop.toml").write_text(STOPPED)
    proc = subprocess.Popen([sys.executable, "-m", "recloop", "run", "stop.toml", "--out",
                             "runs", "--workers", "2", "--cell-timeout", "2", "-q"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    victim = None
    deadline = time.monotonic() + 120
    try:
        while victim is None and time.monotonic() < deadline and proc.poll() is None:
            victim = next((w for w in _workers(proc.pid) if _sleeping(w)), None)
            time.sleep(0.05)
        assert victim, "a worker should be inside a cell"
        os.kill(victim, signal.SIGSTOP)
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, (out, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "failed: no sign of progress came within 2 s (--cell-timeout) (its process was " \
           "stopped: SIGSTOP?); the cell was stopped; raise --cell-timeout if it needs " \
           "longer" in err, err
    assert _stat(victim) is None, "the stopped worker is killed"
    cells = list((tmp_path / "runs" / "stop" / "cells").glob("*.json"))
    assert len(cells) == 2  # the other cells went on and are kept


def test_cell_timeout_is_checked_on_the_command_line(tmp_path, capsys):
    (tmp_path / "s.toml").write_text(SMALL)
    for bad in ("0", "-1", "nan", "1e9"):
        assert main(["run", str(tmp_path / "s.toml"), "--cell-timeout", bad, "--out",
                     str(tmp_path / "runs")]) == 2
        assert "--cell-timeout: expected seconds in (0, 2592000] (30 days), got" in \
            capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


# -- item 5: forged cells -----------------------------------------------------------------------

def forge(cell_file: Path, change) -> None:
    """Change a cell file's content and re-hash it with plain SHA-256, as anyone can."""
    import hashlib

    payload = json.loads(cell_file.read_text())
    change(payload)
    body = {k: v for k, v in payload.items() if k != "checksum"}
    payload["checksum"] = hashlib.sha256(json.dumps(body, sort_keys=True, allow_nan=True)
                                         .encode()).hexdigest()
    cell_file.write_text(json.dumps(payload, allow_nan=True))


def _shift_ips(payload):
    for r in payload["rows"] + payload["estimates"]:
        if r["variant"] == "ips" and r["metric"] == "value":
            r["estimate"] += 0.025


def test_verify_catches_a_forged_rehashed_cell(tmp_path, small_run, capsys):
    """A cell edited and re-hashed with plain SHA-256 loads without error (its checksum
    shows damage, not forgery), and ``recloop report`` rewrites the genuine tables from it.
    ``recloop verify`` recomputes the cells and names the forged one."""
    from recloop import load_results

    run_dir = copy_run(small_run, tmp_path)
    cells = sorted((run_dir / "cells").glob("*.json"))
    forged = cells[1]
    forge(forged, _shift_ips)
    load_results(run_dir)  # the checksum cannot see it
    code = main(["verify", str(run_dir)])
    out, err = capsys.readouterr()
    cell = json.loads(forged.read_text())["cell"]
    assert code == 1, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"recloop verify: cell {cell} does not agree with its recomputation: 2 of 28 rows "
        "differ; the first, row 1 (agent 'u', variant 'ips', metric 'value'): estimate ")
    stored, recomputed = (float(x) for x in re.findall(r"estimate ([0-9.]+) stored, "
                                                        r"([0-9.]+) recomputed", lines[0])[0])
    assert stored - recomputed == pytest.approx(0.025)
    assert out.count("  ok ") == 2 and f"  DIFFERS {cell}: " in out
    # the others agree: a choice of cells that misses the forged one passes
    from recloop._cells import plan_cells
    from recloop._runner import choose_cells
    from recloop._scenario import load_scenario

    plan = plan_cells(load_scenario(run_dir / "scenario.toml").data)
    seed = next(s for s in range(100) if choose_cells(plan, 2, s)[0].id != cell
                and choose_cells(plan, 2, s)[1].id != cell)
    assert main(["verify", str(run_dir), "--cells", "2", "--seed", str(seed)]) == 0
    assert "the 2 cell(s) recomputed agree with the stored ones byte for byte" in \
        capsys.readouterr().out


def test_verify_chooses_cells_over_the_evaluations_seeded_and_says_which(tmp_path, capsys):
    from recloop._cells import Cell
    from recloop._runner import choose_cells

    cells = [Cell(s, ev, None) for ev in ("a", "b", "c") for s in range(10)]
    chosen = choose_cells(cells, 4, seed=0)
    assert len(chosen) == 4 and {c.evaluation for c in chosen} == {"a", "b", "c"}
    assert chosen == choose_cells(cells, 4, seed=0) != choose_cells(cells, 4, seed=1)
    assert chosen == sorted(chosen, key=cells.index)
    assert choose_cells(cells, None) == cells == choose_cells(cells, 99)


def test_verify_refuses_unusable_input(tmp_path, small_run, capsys):
    assert main(["verify", str(tmp_path / "nowhere")]) == 2
    assert "expected a run directory, got no such folder" in capsys.readouterr().err
    run_dir = copy_run(small_run, tmp_path)
    env = json.loads((run_dir / "environment.json").read_text())
    env["code"] = "0" * 64
    (run_dir / "environment.json").write_text(json.dumps(env))
    assert main(["verify", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "was computed by other code (000000000000; this is " in err and "--any-code" in err
    assert main(["verify", str(run_dir), "--any-code"]) == 0
    capsys.readouterr()
    (run_dir / "scenario.toml").write_text("[run]\nname = 'x'\n")
    assert main(["verify", str(run_dir)]) == 2
    assert "scenario.toml: not a valid scenario" in capsys.readouterr().err
    assert main(["verify", str(run_dir), "--cells", "0"]) == 2
    assert "--cells: expected an integer >= 1, got 0" in capsys.readouterr().err


# -- item 7: small holes of the harness ------------------------------------------------------

def test_load_results_on_a_run_whose_cells_is_a_file_names_it(tmp_path, small_run):
    """It raised a bare NotADirectoryError."""
    import shutil

    from recloop import RunDirError, load_results

    run_dir = copy_run(small_run, tmp_path)
    shutil.rmtree(run_dir / "cells")
    (run_dir / "cells").write_text("not a folder")
    with pytest.raises(RunDirError, match=r"cells: expected a folder, got a file"):
        load_results(run_dir)


def test_report_keeps_a_users_file_named_like_a_temporary_one(tmp_path, small_run, capsys):
    """``recloop report`` deleted a user's ``.notes.2024.tmp`` in a run directory: only
    temporary files recloop itself wrote (``.NAME.recloop-PID.tmp`` of a file it writes)
    are removed."""
    run_dir = copy_run(small_run, tmp_path)
    notes = [run_dir / ".notes.2024.tmp", run_dir / "cells" / ".mine.json.17.tmp",
             run_dir / "figures" / ".sketch.recloop-3.tmp"]
    for p in notes:
        p.write_text("my notes")
    ours = run_dir / ".report.md.recloop-4242.tmp"
    ours.write_text("half a report")
    assert main(["report", str(run_dir)]) == 0
    err = capsys.readouterr().err
    assert all(p.read_text() == "my notes" for p in notes)
    assert not ours.exists() and "1 temporary file(s) of an interrupted write (e.g. " \
        ".report.md.recloop-4242.tmp); removed" in err


BIG = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))  # a regression fails fast
import recloop
from recloop._cli import main
if sys.argv[1] == "cli":
    sys.exit(main(["run", "big.toml", "--out", "runs", "-q"]))
try:
    recloop.run("big.toml", out="runs", progress=False)
except ValueError as exc:
    print(exc, file=sys.stderr)
    sys.exit(2)
"""


@pytest.mark.parametrize("how", ["cli", "api"])
def test_a_run_of_years_is_refused_with_its_time_estimate(tmp_path, how):
    """``recloop.run`` accepted ``n_rounds=1e7, n_logs=1e5`` (14.7 of 21.7 GiB estimated)
    with no estimate of its hours: the time estimate beside the memory one, refused past a
    day without --force / force=True. (In a subprocess with 3 GiB of address space: a
    regression that starts the run fails at once instead of taking the machine's memory.)"""
    text = SMALL.replace("sweep = { n_rounds = [100, 120, 140] }",
                         "n_rounds = 10000000").replace("n_logs = 4", "n_logs = 100000")
    (tmp_path / "big.toml").write_text(text)
    (tmp_path / "big.py").write_text(BIG)
    proc = subprocess.run([sys.executable, "big.py", how], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2, proc
    assert "evaluations[0]: expected a run of at most 24 h (estimated on an idle machine), " \
           "got about " in proc.stderr and " days on " in proc.stderr, proc.stderr
    assert ("pass force=True" if how == "api" else "pass --force") in proc.stderr
    assert not (tmp_path / "runs").exists()


SCRIPT = """
import recloop

res = recloop.run({"run": {"name": "plain"},
                   "agents": [{"name": "a0", "kind": "fixed_arm"}],
                   "evaluations": [{"kind": "selfcheck", "sweep": {"n": [10, 20, 30]}}]},
                  workers=2, progress=False)
print("rows", len(res.frame()))
"""


@pytest.mark.slow
def test_recloop_run_from_a_plain_script_without_a_main_guard(tmp_path):
    """``recloop.run(...)`` called from a script without ``if __name__ == "__main__":``
    failed every cell ("the worker running it exited with code 1 ... (os._exit in users'
    code?)"): multiprocessing's spawned workers re-ran the script. recloop's workers are
    fresh interpreters that run recloop's worker loop only."""
    (tmp_path / "plain.py").write_text(SCRIPT)
    proc = subprocess.run([sys.executable, "plain.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 0 and proc.stdout.strip() == "rows 3", proc
    assert "Traceback" not in proc.stderr
