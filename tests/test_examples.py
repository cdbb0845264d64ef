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


def _table(out: str) -> dict:
    """``{estimator: (value, selected)}`` of the example's printed frame."""
    lines = out.splitlines()
    head = lines.index(next(ln for ln in lines if ln.split()[:2] == ["estimator", "value"]))
    rows = {}
    for ln in lines[head + 1:]:
        if ln.startswith("Use "):
            break
        f = ln.split()
        rows[f[0]] = (float(f[1]), f[-1] == "True")
    return rows


def test_compare_estimators_on_your_csv_and_policy(tmp_path, capsys, monkeypatch):
    # the user's files: a CSV log in their own ids and their policy as a CSV
    import csv

    import numpy as np

    g = np.random.default_rng(3)
    items = ["hat", "scarf", "shoes"]
    with open(tmp_path / "log.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "click", "propensity_score", "country", "age"])
        for _ in range(300):
            a = int(g.integers(0, 3))
            w.writerow([items[a], int(g.random() < 0.1 + 0.2 * (a == 1)), 1 / 3,
                        g.choice(["fr", "de"]), int(g.integers(18, 70))])
    with open(tmp_path / "policy.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["record", "action", "probability"])
        for j in range(300):
            w.writerows([[j, "hat", 0.2], [j, "scarf", 0.7], [j, "shoes", 0.1]])
    monkeypatch.chdir(tmp_path)
    run_example("compare_estimators.py", "log.csv", "policy.csv", monkeypatch=monkeypatch)
    out = capsys.readouterr().out
    import evaluators
    from evaluators.datasets import read_bandit_log

    rows = _table(out)
    assert list(rows) == [label for label, _ in evaluators.CANDIDATES]
    assert sum(sel for _, sel in rows.values()) == 1
    log = read_bandit_log(tmp_path / "log.csv")
    ips = evaluators.ips(log, np.tile([0.2, 0.7, 0.1], (300, 1)))  # ids sorted: hat, scarf, ..
    assert rows["ips"][0] == pytest.approx(ips.value, rel=1e-3)
    assert "Use " in out and "How sure:" in out and (tmp_path / "estimates.png").stat().st_size


def test_compare_estimators_on_the_open_bandit_layout(tmp_path, capsys, monkeypatch):
    from tests.evaluators.test_real_data import K, _rows, _write

    # the Open Bandit Dataset's layout (a stand-in of K items, uniformly logged) and a prior
    root = _write(tmp_path / "obd", rows=[dict(r, propensity_score=1 / K) for r in _rows()])
    (root / "prior_bts.yaml").write_text(
        "all:\n  alpha:\n" + "".join(f"    - {a}\n" for a in range(1, K + 1))
        + "  beta:\n" + "".join("    - 40.0\n" for _ in range(K)))
    monkeypatch.chdir(tmp_path)
    run_example("compare_estimators.py", str(root), monkeypatch=monkeypatch)
    out = capsys.readouterr().out
    assert len(_table(out)) == 10 and "Use " in out


def test_compare_estimators_without_files_says_how(monkeypatch):
    with pytest.raises(SystemExit) as exc:
        run_example("compare_estimators.py", monkeypatch=monkeypatch)
    assert "LOG.csv TARGET" in str(exc.value.code)


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
