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
    assert out.count("BRED c=100") == 4 and "exact value" in out
    learner, static = out.split("Static greedy policy")
    bias = {}  # the first (T = 500) block of each part
    for part, name in ((learner, "linucb"), (static, "static")):
        for line in part.split("T = 2000")[0].splitlines():
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


def test_readme_test_your_own_estimator_snippet_passes():
    # the README's snippet, as a user would paste it into a test file
    import re

    readme = (EXAMPLES.parent / "README.md").read_text()
    section = readme.split("## Test your own estimator", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    namespace["test_my_ips"]()


def test_gymnasium_quickstart_runs(capsys):
    runpy.run_path(str(EXAMPLES / "gymnasium_quickstart.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "cascade clicks" in out and "LinearBandit-v0" in out and "64 environments" in out


def test_bring_your_own_bandit_agent_runs(capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["my_bandit_agent.py", "--quick"])
    runpy.run_path(str(EXAMPLES / "my_bandit_agent.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "honours the bandit protocol" in out and "bred_once" in out and "V(400)" in out
