"""The slate_ope experiment, called directly at a tiny size: its rows, determinism, figures."""

import inspect
import math

import numpy as np
import pytest

import simulator
from recloop.experiments import SLATE_OPE_PARAMS, plot_slate_ope, slate_ope
from recloop.experiments._slate_ope import SLATE_ESTIMATORS

WORLD = simulator.preset("viadeo_like", n_users=50, n_items=10, campaigns=())
SMALL = dict(k=3, n_rounds=300, n_logs=4)
METRICS = {"value", "bias", "rmse", "relative_rmse", "sd", "coverage", "width", "nan_rate"}


def by_key(rows):
    return {(r.agent, r.variant, r.metric): r for r in rows}


@pytest.fixture(scope="module")
def cascade_rows():
    return slate_ope(WORLD, click_model="cascade", rng=3, **SMALL)


def test_rows(cascade_rows):
    got = by_key(cascade_rows)
    assert len(got) == len(cascade_rows)
    truth = got["pl_T0.5", "slate_ips", "value"].truth
    names = [n for n in SLATE_ESTIMATORS if n != "pseudoinverse"]  # logging is not uniform
    assert {r.variant for r in cascade_rows} == set(names) | {"on_policy"}
    for name in names:
        rows = {m: got["pl_T0.5", name, m] for m in METRICS}
        assert rows["value"].truth == truth and 0 < truth < 3  # at most 3 clicks
        assert rows["value"].n == 4 and rows["nan_rate"].estimate == 0.0
        assert rows["bias"].estimate == pytest.approx(rows["value"].estimate - truth)
        assert rows["bias"].truth == 0.0
        assert rows["rmse"].estimate >= abs(rows["bias"].estimate)
        assert rows["relative_rmse"].estimate == pytest.approx(rows["rmse"].estimate / truth)
        assert 0.0 <= rows["coverage"].estimate <= 1.0 and rows["width"].estimate > 0
        assert math.isnan(rows["rmse"].truth)  # an RMSE is already an error
    on = got["pl_T2", "on_policy", "value"]
    assert on.truth > 0 and abs(on.estimate - on.truth) < 5 * on.stderr + 0.02
    params = got["pl_T0.5", "slate_ips", "value"].params
    assert params == {"click_model": "cascade", "k": 3, "n_rounds": 300, "n_logs": 4,
                      "logging_temperature": 2.0, "target_temperature": 0.5,
                      "score_noise": 1.0, "tick": 0, "world_seed": 0}


def test_truth_is_the_exact_value(cascade_rows):
    """The experiment's truth equals an independent enumeration of the same cell's target."""
    from agents import PlackettLuce
    from recloop.experiments._slate_ope import _NOISE

    world = simulator.World(WORLD, seed=0)
    p = world.true_ctr(np.arange(50)[:, None], np.arange(10)[None, :], 0)
    noise = np.random.default_rng(np.random.SeedSequence(0, spawn_key=(_NOISE,)))
    scores = np.log(p / (1 - p)) + noise.normal(0.0, 1.0, p.shape)
    cfg = simulator.RecommendationConfig(world=WORLD, world_seed=0, k=3, click_model="cascade")
    ref = simulator.slate_policy_value(cfg, PlackettLuce(scores, k=3, temperature=0.5),
                                       method="enumerate")
    truth = by_key(cascade_rows)["pl_T0.5", "slate_ips", "value"].truth
    assert truth == pytest.approx(ref.value, abs=1e-12)


def test_same_rng_same_rows(cascade_rows):
    again = slate_ope(WORLD, click_model="cascade", rng=3, **SMALL)
    assert repr(again) == repr(cascade_rows)
    other = slate_ope(WORLD, click_model="cascade", rng=4, **SMALL)
    assert repr(other) != repr(cascade_rows)
    # the world, the policies and the truth belong to the setting, not to the cell's seed
    truth = {r.truth for r in cascade_rows if r.metric == "value" and r.variant != "on_policy"}
    assert truth == {r.truth for r in other if r.metric == "value" and r.variant != "on_policy"}
    longer = slate_ope(WORLD, click_model="cascade", rng=5, k=3, n_rounds=600, n_logs=2,
                       estimators=["slate_ips"])
    assert {r.truth for r in longer if r.metric == "value" and r.variant == "slate_ips"} == truth
    elsewhere = slate_ope(WORLD, click_model="cascade", rng=3, world_seed=1, **SMALL)
    assert {r.truth for r in elsewhere if r.metric == "value"} != truth


def test_adding_an_estimator_leaves_the_others_unchanged(cascade_rows):
    only = slate_ope(WORLD, click_model="cascade", rng=3,
                     estimators=["reward_interaction_ips"], **SMALL)
    full = by_key(cascade_rows)
    for r in only:
        assert repr(r) == repr(full[r.agent, r.variant, r.metric])


def test_uniform_logging_adds_the_pseudoinverse(tmp_path):
    rows = slate_ope(WORLD, click_model="pbm", logging_temperature=math.inf,
                     estimators=["pseudoinverse", "independent_ips"], rng=0, eta=0.5, **SMALL)
    got = by_key(rows)
    assert ("pl_T0.5", "pseudoinverse", "bias") in got
    assert got["uniform", "on_policy", "value"].params["eta"] == 0.5
    paths = plot_slate_ope(rows, tmp_path, prefix="x")
    # the figure of record (the bias per click model), then the click model's own
    assert [p.name for p in paths] == ["x__bias.png", "x_pbm.png"]
    assert all(p.stat().st_size > 10_000 for p in paths)


def test_figures_one_per_click_model(tmp_path, cascade_rows):
    dcm = slate_ope(WORLD, click_model="dcm", rng=1, estimators=["slate_ips"], **SMALL)
    paths = plot_slate_ope(cascade_rows + dcm, tmp_path / "figs")
    assert sorted(p.name for p in paths) == ["slate_ope__bias.png", "slate_ope_cascade.png",
                                             "slate_ope_dcm.png"]


def test_params_table_matches_the_signature():
    sig = inspect.signature(slate_ope)
    names = [n for n, p in sig.parameters.items()
             if p.kind is p.KEYWORD_ONLY
             and n not in ("rng", "progress", "evaluation", "per_log")]
    assert [name for name, _, _ in SLATE_OPE_PARAMS] == names
    for name, default, doc in SLATE_OPE_PARAMS:
        assert sig.parameters[name].default == default or (
            isinstance(default, list) and list(sig.parameters[name].default) == default)
        assert isinstance(doc, str) and doc


@pytest.mark.parametrize("kw,err,match", [
    pytest.param({"click_model": "cascad"}, ValueError, "click_model", id="model"),
    pytest.param({"k": 11}, ValueError, "`k`", id="k-above-10"),
    pytest.param({"k": 3, "n_logs": 1}, ValueError, "n_logs", id="one-log"),
    pytest.param({"target_temperature": math.inf}, ValueError, "target_temperature",
                 id="uniform-target"),
    pytest.param({"logging_temperature": 0}, ValueError, "logging_temperature",
                 id="zero-temperature"),
    pytest.param({"estimators": ["sips"]}, ValueError, "estimators", id="estimator-name"),
    pytest.param({"estimators": []}, ValueError, "estimators", id="no-estimator"),
    pytest.param({"dcm_lambda": 2.0}, ValueError, "dcm_lambda", id="lambda"),
    pytest.param({"tick": 10_000}, ValueError, "tick", id="tick"),
])
def test_bad_arguments(kw, err, match):
    with pytest.raises(err, match=match):
        slate_ope(WORLD, **({"n_rounds": 10, "n_logs": 2} | kw))


def test_bad_config():
    with pytest.raises(TypeError, match="config"):
        slate_ope("bred_linear", n_rounds=10, n_logs=2)
    with pytest.raises(ValueError, match="`k` must be <="):
        slate_ope(simulator.preset("viadeo_like", n_users=20, n_items=4, n_universal=2,
                                   campaigns=()), k=5,
                  n_rounds=10, n_logs=2)
