"""Run directories and runs under attack or accident (issue 36, items 4, 5 and 7): a stopped
worker, a forged cell re-hashed, a ``cells`` that is a file, a user's file named like a
temporary one, a scenario that would run for years, ``recloop.run`` from a plain script.

Cases that could hang run ``recloop`` in a subprocess under a timeout.
"""

import os
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
n_rounds = 100
targets = [{ name = "u", policy = "uniform" }, { name = "g", policy = "epsilon_greedy",
            epsilon = 0.2 }]
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
