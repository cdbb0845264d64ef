"""The examples the README points to keep working."""

import runpy
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_my_estimator_example_passes():
    # ``pytest examples/`` as the README says, in a fresh interpreter
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    str(EXAMPLES / "test_my_estimator.py")], check=True, capture_output=True)


@pytest.mark.slow
def test_bred_jitter_sweep_quick_run(capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["bred_jitter_sweep.py", "--quick"])
    runpy.run_path(str(EXAMPLES / "bred_jitter_sweep.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert out.count("BRED c=100") == 2 and "exact value" in out
    learner, static = out.split("Static greedy policy")
    bias = {}  # the T = 500 block of each part (--quick has no other)
    for part, name in ((learner, "linucb"), (static, "static")):
        for line in part.splitlines():
            if "bias" in line:
                label = line.split("bias")[0].strip()
                bias[name, label] = float(line.split("bias")[1].split()[0])
    # the documented trade-off: c = 1 leaves LinUCB's memorisation bias, c = 100 cancels it
    # but biases the static policy, which c = 1 estimates as well as replay does
    assert bias["linucb", "BRED c=1"] > 0.15
    assert abs(bias["linucb", "BRED c=100"]) < 0.05
    assert bias["static", "BRED c=100"] < -0.08
    assert abs(bias["static", "BRED c=1"] - bias["static", "replay"]) < 0.02


def test_bring_your_own_estimator_study_runs(tmp_path):
    # the README's "Bring your own estimator" command, at a small size
    from recloop._cli import main

    text = (EXAMPLES / "my_study.toml").read_text()
    small = text.replace("n_logs = 100", "n_logs = 4").replace("[500, 1000, 5000]", "[300]")
    assert small != text
    (tmp_path / "my_study.toml").write_text(small)
    try:
        assert main(["run", str(tmp_path / "my_study.toml"), "--path", str(EXAMPLES),
                     "--out", str(tmp_path / "runs"), "-q"]) == 0
    finally:
        sys.modules.pop("my_estimators", None)
        while str(EXAMPLES) in sys.path:
            sys.path.remove(str(EXAMPLES))
    report = (tmp_path / "runs" / "my_study" / "report.md").read_text()
    for name in ("clipped_ips", "clipped_ips_3", "optimist", "doubly_robust"):
        assert f"| {name} |" in report


def run_example(name, *args, monkeypatch):
    """Run ``examples/NAME`` top to bottom as ``python examples/NAME ARGS`` would."""
    monkeypatch.setattr(sys, "argv", [name, *args])
    monkeypatch.syspath_prepend(str(EXAMPLES))  # the script's folder, as python puts it
    try:
        runpy.run_path(str(EXAMPLES / name), run_name="__main__")
    finally:
        for module in ("my_bandit_agent", "my_estimators"):
            sys.modules.pop(module, None)


def test_check_your_estimator_script(capsys, monkeypatch):
    # the README's "Test your own estimator", run as a script: a correct IPS passes, a
    # classic mistake fails with the failing log given back
    run_example("test_my_estimator.py", "--quick", monkeypatch=monkeypatch)
    out = capsys.readouterr().out
    good, bad = out.split("logged_mean fails, as it should")
    assert "[ok] unbiased" in good and "FAIL" not in good
    assert "[FAIL] unbiased" in bad and "`unbiased` failed on logs like this one" in bad


def _estimates(out: str) -> dict:
    """``{estimator: value}`` of the lines on the user's log."""
    mine = out.split("On the simulated twin")[0]
    return {ln.split()[0]: float(ln.split()[1]) for ln in mine.splitlines()
            if "95% interval" in ln}


def test_compare_estimators_on_a_simulated_log_and_on_its_twin(capsys, monkeypatch):
    run_example("compare_estimators.py", "--quick", monkeypatch=monkeypatch)
    out = capsys.readouterr().out
    names = ["ips", "snips", "direct_method", "doubly_robust"]
    assert list(_estimates(out)) == names
    twin = out.split("On the simulated twin (uniform logging)")[1].splitlines()
    assert twin[0].endswith("over 10 logs:")
    assert twin[1].split() == ["variant", "estimate", "truth", "bias", "rmse", "coverage"]
    assert [ln.split()[0] for ln in twin[2:6]] == names
    for ln in twin[2:6]:  # bias = estimate - truth, as printed
        est, truth, bias = map(float, ln.split()[1:4])
        assert bias == pytest.approx(est - truth, abs=1.5e-4)


def test_compare_estimators_reads_your_log_and_the_open_bandit_layout(tmp_path, capsys,
                                                                     monkeypatch):
    import simulator
    from tests.evaluators.test_real_data import _rows, _write

    log, _ = simulator.collect_log(simulator.preset("bred_linear"), 300, rng=5)
    path = log.save(tmp_path / "mine.npz")
    run_example("compare_estimators.py", str(path), "--quick", monkeypatch=monkeypatch)
    out = capsys.readouterr().out
    assert "Your log: 300 records, 10 arms. The target's value on 150 of them" in out
    # the Open Bandit Dataset's layout (a stand-in of 5 items), uniformly logged
    root = _write(tmp_path / "obd", rows=[dict(r, propensity_score=0.2) for r in _rows()])
    run_example("compare_estimators.py", str(root), "--quick", monkeypatch=monkeypatch)
    out = capsys.readouterr().out
    assert "5 arms" in out and "(uniform logging)" in out


def test_gymnasium_quickstart_runs(capsys):
    runpy.run_path(str(EXAMPLES / "gymnasium_quickstart.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "cascade clicks" in out and "LinearBandit-v0" in out and "64 environments" in out


def test_evaluate_your_bandit_agent(capsys, monkeypatch):
    run_example("my_bandit_agent.py", "--quick", monkeypatch=monkeypatch)
    out = capsys.readouterr().out
    assert "honours the bandit protocol" in out and "V(200)" in out
    table = out.split("each one used:")[1].splitlines()[1:]
    # Results.summary() is the first screen: the headline `value` first (issue 34)
    assert [ln.split()[:2] for ln in table[1:5]] == [
        ["replay", "value"], ["bred_once", "value"], ["replay", "value_at_matches"],
        ["bred_once", "value_at_matches"]]
