"""Progress where the time goes (issue 22, section 5): the loops inside a cell report how
far they are, from whatever process runs the cell, and the run shows it -- a tqdm bar on a
terminal, one line every 30 s with the fraction done and an ETA elsewhere, nothing with -q."""

import io
import re
import textwrap

import pytest

from recloop._progress import Reporter, format_seconds
from recloop_base import progress


@pytest.fixture
def every_step(monkeypatch):
    monkeypatch.setattr(progress, "MIN_INTERVAL", 0.0)


def test_nested_bars_report_the_fraction_of_the_work_done(every_step):
    seen = []
    with progress.reporting_to(lambda f, label: seen.append((f, label))):
        for _ in progress.bar(range(4), desc="logs"):
            for _ in progress.bar(range(10), desc="bred"):
                pass
    assert seen[0] == (0.0, "logs 0/4")
    # log 1 done, replicate 5 of 10 of log 2: (1 + 5/10) / 4
    assert (0.375, "logs 1/4 > bred 5/10") in seen
    assert seen[-1] == (1.0, "logs 4/4")
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions)  # never backwards


def test_partitions_on_threads_report_to_the_cell(every_step):
    from recloop_base.executors import run_partitions

    seen = []
    with progress.reporting_to(lambda f, label: seen.append((f, label))):
        out = run_partitions(lambda x, part: x * part, range(6), shared=(2,), threads=2,
                             desc="replicates")
    assert out == [0, 2, 4, 6, 8, 10]
    assert seen[0] == (0.0, "replicates 0/6") and seen[-1] == (1.0, "replicates 6/6")


def test_outside_a_cell_a_bar_is_nothing_unless_shown():
    b = progress.Bar(3, desc="x")
    assert b._tqdm is None and not b._reporting
    b.close()
    assert list(progress.bar(iter("abc"), desc="letters")) == ["a", "b", "c"]


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_plain_lines_every_30_s_with_the_fraction_and_an_eta():
    clock, out = Clock(), io.StringIO()
    r = Reporter(4, 0, name="study", quiet=False, stream=out, clock=clock, tty=False)
    clock.t = 10
    r.cell_progress("ope/*/seed=0", 0.5, "logs 10/20")
    clock.t = 29.9
    r.tick()
    assert out.getvalue() == ""  # not before 30 s
    clock.t = 30
    r.tick()
    # (0 + 0.5) / 4 = 12.5% done in 30 s: 30 x 0.875 / 0.125 = 210 s left
    assert out.getvalue().splitlines() == [
        "study: 12% (0/4 cells; ope/*/seed=0: logs 10/20), ETA 3m30s"]
    clock.t = 45
    r.cell_done("ope/*/seed=0")
    r.cell_progress("ope/*/seed=0", 0.9, "late")  # a late report of a finished cell
    assert len(out.getvalue().splitlines()) == 1
    clock.t = 60
    r.tick()
    assert out.getvalue().splitlines()[-1] == "study: 25% (1/4 cells), ETA 3m00s"
    clock.t = 100
    for _ in range(3):
        r.cell_done()
    assert out.getvalue().splitlines()[-1] == "study: 4/4 cells in 1m40s"  # the last, at once
    assert "\x1b" not in out.getvalue()  # no escape codes in a log file


def test_a_resumed_run_estimates_from_what_it_did_itself():
    clock, out = Clock(), io.StringIO()
    r = Reporter(4, 2, name="study", quiet=False, stream=out, clock=clock, tty=False)
    assert r.fraction() == 0.5 and r.line().endswith("ETA not known yet")
    clock.t = 40
    r.cell_done()
    assert r.eta() == pytest.approx(40.0)  # a quarter in 40 s, a quarter left


def test_quiet_shows_nothing_and_a_terminal_gets_one_bar():
    clock, out = Clock(), io.StringIO()
    r = Reporter(2, 0, name="study", quiet=True, stream=out, clock=clock, tty=False)
    clock.t = 100
    r.cell_progress("c", 0.5, "logs 1/2")
    r.cell_done("c")
    r.cell_done()
    assert out.getvalue() == ""
    bar = Reporter(2, 0, name="study", quiet=False, stream=out, clock=clock, tty=True)
    clock.t = 110
    bar.cell_progress("c", 0.5, "logs 1/2")
    bar.close()
    shown = out.getvalue()
    assert shown.startswith("\rstudy: 0% (0/2 cells), ETA not known yet |")
    assert "\rstudy: 25% (0/2 cells; c: logs 1/2), ETA 30s |##5       |" in shown


def test_format_seconds():
    assert [format_seconds(s) for s in (0.4, 59, 75, 3600, 4000, float("nan"))] == [
        "0s", "59s", "1m15s", "1h00m", "1h06m", "?"]


OPE = textwrap.dedent("""
    [run]
    name = "p"

    [world]
    preset = "bred_linear"

    [[evaluations]]
    kind = "ope"
    n_logs = 3
    n_rounds = 100
    n_train = 50
    sweep = { n_rounds = [100, 120] }
    """).replace("n_rounds = 100\n", "")


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["local", "dask"])
def test_a_cell_in_a_worker_reports_its_loops_to_the_parent(tmp_path, capsys, monkeypatch,
                                                           executor):
    from recloop._runner import run_scenario
    from recloop._scenario import loads_scenario

    monkeypatch.setattr(Reporter, "every", 0.0)  # a line for every report
    sc = loads_scenario(OPE)
    run_scenario(sc, out=tmp_path / "a", workers=2, executor=executor, report=False,
                 echo=lambda s: None)
    err = capsys.readouterr().err
    # the cells ran in two worker processes (or Dask workers); their loops reached this one
    assert re.search(r"p: \d+% \([01]/2 cells; ope/\*/seed=0/n_rounds=1[02]0: logs [0-3]/3\), "
                     r"ETA ", err), err
    assert err.strip().splitlines()[-1].startswith("p: 2/2 cells in ")
    if executor == "local":  # -q: nothing (in this process: no workers to start)
        run_scenario(sc, out=tmp_path / "q", workers=1, quiet=True, report=False)
        assert capsys.readouterr().err == ""
