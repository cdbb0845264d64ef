"""Processes that die with their parent (issue 16, section 2).

The main process of ``recloop run --workers 2`` is killed while its workers are inside long
cells; no worker may survive it (before: they finished the cell in flight, then sat idle).
SIGTERM and SIGHUP stop a run as cleanly as Ctrl-C: finished cells kept, one message, exit
code 128 + the signal, and the workers stopped.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from recloop._workers import _die_with_parent, _worker_init

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(),
                                reason="finds the workers through /proc (Linux)")

SLOW = """
[run]
name = "slow"

[[agents]]
name = "a0"
kind = "fixed_arm"

[[evaluations]]
kind = "selfcheck"
n = 10
sweep = {{ delay = [{delays}] }}
"""


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process, None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return fields[0], int(fields[1])


def _children(pid: int) -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            st = _stat(int(p.name))
            if st is not None and st[1] == pid and st[0] != "Z":
                out.append(int(p.name))
    return out


def _workers(pid: int) -> list[int]:
    """The pool's worker processes of ``pid``."""
    found = []
    for child in _children(pid):
        try:
            cmd = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        if b"recloop._workers:_worker_main" in cmd:
            found.append(child)
    return found


def _sleeping(pid: int) -> bool:
    """Whether ``pid`` sleeps in ``time.sleep`` (the ``delay`` of a selfcheck cell): inside
    its cell, not starting up nor waiting for one."""
    try:
        return "nanosleep" in Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return False


def _alive(pids) -> list[int]:
    return [p for p in pids if (st := _stat(p)) is not None and st[0] != "Z"]


def _default_signals() -> None:
    """In the child before exec: the dispositions a terminal gives a command. Ignored
    signals are inherited across exec, and recloop keeps an ignored hangup or interrupt
    ignored (``nohup``, a background job: as it should); a test of this process that left
    one ignored must not make the command deaf to it."""
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def _start(tmp_path, delays="30.0, 30.1, 30.2, 30.3", first_quick=False):
    if first_quick:
        delays = "0.0, " + delays
    scenario = tmp_path / "slow.toml"
    scenario.write_text(SLOW.format(delays=delays))
    proc = subprocess.Popen(
        [sys.executable, "-m", "recloop", "run", str(scenario), "--out", str(tmp_path / "out"),
         "--workers", "2", "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_default_signals)
    # wait for what the tests need: both workers inside a long cell (sleeping in its delay)
    deadline = time.monotonic() + 180
    workers: list[int] = []
    while time.monotonic() < deadline and proc.poll() is None and not (
            len(workers) == 2 and all(_sleeping(w) for w in workers)):
        time.sleep(0.05)
        workers = _workers(proc.pid)
    if proc.poll() is not None:
        pytest.fail(f"recloop run ended early: {proc.communicate()}")
    assert len(workers) == 2 and all(_sleeping(w) for w in workers), \
        "the pool's two workers should be inside their cells"
    return proc, workers


def _gone_within(pids, seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and _alive(pids):
        time.sleep(0.1)
    return _alive(pids)


@pytest.mark.slow
def test_no_worker_survives_a_killed_main_process(tmp_path):
    proc, workers = _start(tmp_path)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    try:
        assert _gone_within(workers, 10) == [], "workers outlived their parent"
    finally:
        for p in _alive(workers):
            os.kill(p, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129),
                                       (signal.SIGINT, 130)])
def test_sigterm_stops_like_ctrl_c(tmp_path, sig, code):
    proc, workers = _start(tmp_path, first_quick=True)
    cells = tmp_path / "out" / "slow" / "cells"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not list(cells.glob("*.json")):
        time.sleep(0.1)
    proc.send_signal(sig)
    try:
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == code
    assert "Traceback" not in err and "--resume" in err
    assert len(err.strip().splitlines()) == 1, err
    assert _gone_within(workers, 10) == []
    assert len(list(cells.glob("*.json"))) == 1  # the finished cell is kept
    assert not (tmp_path / "out" / "slow" / ".lock").exists()


def test_worker_initializer_ignores_ctrl_c_and_watches_its_parent(monkeypatch):
    import threading

    calls = []
    monkeypatch.setattr(signal, "signal", lambda s, h: calls.append((s, h)))
    monkeypatch.setattr("recloop._workers._die_with_parent", lambda pid: calls.append(pid))
    _worker_init(12345)
    assert calls == [(signal.SIGINT, signal.SIG_IGN), 12345]
    # the portable fallback: a daemon thread polling the parent's id
    monkeypatch.setattr(sys, "platform", "darwin")
    before = {t.name for t in threading.enumerate()}
    assert _die_with_parent(os.getppid()) == "poll"
    assert "recloop-parent-watch" in {t.name for t in threading.enumerate()} - before


def test_an_ignored_hangup_stays_ignored(monkeypatch):
    """``nohup recloop run ...`` must survive its terminal."""
    from recloop._cli import _StopSignals

    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with _StopSignals():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)
