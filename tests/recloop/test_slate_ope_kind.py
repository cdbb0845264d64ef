"""The slate_ope evaluation kind through the harness: a scenario runs, k is checked."""

import json

import pytest

from recloop._runner import run_scenario
from recloop._scenario import ScenarioError, loads_scenario

TEXT = """
[run]
name = "slates"

[world]
preset = "viadeo_like"
n_users = 200
n_items = 30
campaigns = []

[[evaluations]]
kind = "slate_ope"
k = 3
n_rounds = 200
n_logs = 2
sweep = { click_model = ["pbm", "cascade"] }
"""


def test_a_small_slate_scenario_runs_with_its_figures(tmp_path):
    run_dir = run_scenario(loads_scenario(TEXT), out=tmp_path, workers=1, quiet=True)
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    variants = {r["variant"] for r in rows if r["metric"] == "value"}
    assert {"slate_ips", "independent_ips", "reward_interaction_ips", "cascade_dr"} <= variants
    assert {r["params"]["click_model"] for r in rows} == {"pbm", "cascade"}
    truth = {r["truth"] for r in rows if r["metric"] == "value" and r["variant"] == "slate_ips"}
    assert len(truth) == 2 and all(t > 0 for t in truth)  # one exact value per click model
    assert list((run_dir / "figures").glob("slate_ope_*.png"))


def test_k_above_the_alive_items_is_a_validation_error():
    with pytest.raises(ScenarioError, match=r"evaluations\[0\]\.k: expected k <= the 5 items"):
        loads_scenario(TEXT.replace("k = 3", "k = 8").replace(
            "n_items = 30", "n_items = 5\nmean_profile_size = 2.0"))
