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


@pytest.mark.slow
def test_calibrated_campaign_bias_quick_run(tmp_path, capsys, monkeypatch):
    """The README's calibrated campaign-bias command, on a small generated MovieLens-format
    file (the real data is not shipped): report, table and figures are written."""
    import numpy as np

    import simulator

    config = simulator.WorldConfig(n_users=150, n_items=40, n_ticks=40, dim=2,
                                   mean_profile_size=8.0, n_universal=0, appeal_mean=-2.0)
    world = simulator.World(config, seed=0)
    world.simulate(39)
    e = world.edges
    rng = np.random.default_rng(0)
    data = tmp_path / "u.data"
    data.write_text("".join(f"{u + 1}\t{i + 1}\t{int(rng.integers(1, 6))}\t"
                            f"{880_000_000 + 86400 * t}\n"
                            for u, i, t in zip(e.user, e.item, e.tick, strict=True)))
    out = tmp_path / "run"
    monkeypatch.setattr(sys, "argv", ["calibrated_campaign_bias.py", str(data), "--out",
                                      str(out), "--quick", "--n-factors", "2"])
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(EXAMPLES / "calibrated_campaign_bias.py"), run_name="__main__")
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert "VERDICT" in text and "| g1 |" in text
    for name in ("fidelity.md", "bias.md", "world.npz", "figures/calibrated_g1.png"):
        assert (out / name).is_file()
    back = simulator.CalibratedWorld.load(out / "world.npz")
    assert back.sha256 in (out / "fidelity.md").read_text()


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
