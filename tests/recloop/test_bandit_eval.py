"""Issue 6's experiment functions: replay and BRED against the simulator's ground truth."""

import math

import numpy as np
import pytest

import agents
import simulator
from evaluators import Estimate
from recloop._selfcheck import FixedArm
from recloop.experiments._bandit_eval import (
    ZeroTruthWarning,
    bred_vs_replay,
    compare_to_truth,
    dynamic_news,
    plot_bred_vs_replay,
)

DYN = simulator.LinearBanditConfig(n_arms=40, n_universal=16, lifetime=60, n_alive=6,
                                   half_life=30.0)


def make_ucb1(rng):
    a = agents.UCB1()
    a.reset(rng)
    return a


def test_compare_to_truth_single_and_many():
    e = Estimate(0.5, 0.1, 0.3, 0.7, 10)
    c = compare_to_truth(e, 0.4)
    assert c.error == pytest.approx(0.1) and c.relative_error == pytest.approx(0.25) and c.covers
    many = compare_to_truth([e, Estimate(0.2, 0.01, 0.18, 0.22, 5)], [0.4, 0.4])
    np.testing.assert_allclose(many.error, [0.1, -0.2])
    np.testing.assert_array_equal(many.covers, [True, False])
    ov = simulator.online_value("bred_linear", lambda g: FixedArm(1), 20, n_runs=3, rng=0)
    assert compare_to_truth(e, ov).error == pytest.approx(0.5 - ov.value)


def test_compare_to_truth_bad_input():
    e = Estimate(0.5, 0.1, 0.3, 0.7, 10)
    with pytest.warns(ZeroTruthWarning):
        assert math.isnan(compare_to_truth(e, 0.0).relative_error)
    with pytest.raises(ValueError, match="one value per estimate"):
        compare_to_truth([e, e], [0.1, 0.2, 0.3])
    with pytest.raises(TypeError, match="`truth`"):
        compare_to_truth(e, "0.4")
    with pytest.raises(TypeError, match=r"`estimates\[0\]`"):
        compare_to_truth([0.5], 0.4)


def test_bred_vs_replay_rows_and_determinism():
    kw = dict(T=200, n_logs=3, n_bootstrap=4, n_truth_runs=6, rng=1)
    rows = bred_vs_replay("bred_linear", {"ucb1": make_ucb1}, **kw)
    again = bred_vs_replay("bred_linear", {"ucb1": make_ucb1}, **kw)
    assert [(r.variant, r.metric, r.estimate) for r in rows] == \
        [(r.variant, r.metric, r.estimate) for r in again]
    assert {r.evaluation for r in rows} == {"bred_vs_replay"}
    got = {(r.variant, r.metric) for r in rows}
    for v in ("replay", "bred", "bred_nojitter", "bred_once"):
        for m in ("value", "bias", "rmse", "coverage", "width", "bias_at_matches",
                  "rmse_at_matches", "coverage_at_matches", "mean_matches"):
            assert (v, m) in got
    assert ("T", "online_value") in got and ("T_over_K", "online_value") in got
    assert all(dict(r.params) == {"T": 200} for r in rows)
    by = {(r.variant, r.metric): r for r in rows}
    truth = by["T", "online_value"].estimate
    assert by["replay", "value"].truth == truth
    assert by["replay", "bias"].estimate == pytest.approx(by["replay", "value"].estimate - truth)
    assert by["replay", "rmse"].estimate >= abs(by["replay", "bias"].estimate)
    assert 0 <= by["bred", "coverage"].estimate <= 1 and by["bred", "width"].estimate > 0
    # horizons: replay ~T/K matches, bred ~T, bred_once in between (each record once)
    mm = {v: by[v, "mean_matches"].estimate for v in ("replay", "bred", "bred_once")}
    assert mm["replay"] < mm["bred_once"] < mm["bred"]
    assert mm["bred_once"] <= 200
    # scored at its own horizon, a variant's bias differs from its bias at T
    for v in ("replay", "bred_once"):
        assert by[v, "bias_at_matches"].estimate != by[v, "bias"].estimate
        assert by[v, "rmse_at_matches"].estimate >= abs(by[v, "bias_at_matches"].estimate)
    # adding an agent leaves the first agent's numbers unchanged (seeds keyed by name)
    both = bred_vs_replay("bred_linear", {"ucb1": make_ucb1, "other": make_ucb1}, **kw)
    assert [r.estimate for r in both if r.agent == "ucb1"] == [r.estimate for r in rows]


def test_plot_bred_vs_replay(tmp_path):
    rows = [r for T in (100, 200) for r in bred_vs_replay(
        "bred_linear", {"ucb1": make_ucb1}, T=T, n_logs=2, n_bootstrap=2, n_truth_runs=3,
        rng=0)]
    paths = plot_bred_vs_replay(rows, tmp_path)
    # the figure of record (estimates against the online value), then the errors per agent
    assert [p.name for p in paths] == ["bred_vs_replay__value.png", "bred_vs_replay_ucb1.png"]
    assert all(p.stat().st_size > 1000 for p in paths)


@pytest.mark.slow
def test_replay_of_a_static_policy_is_unbiased():
    rows = bred_vs_replay("bred_linear", {"arm4": lambda g: FixedArm(4)}, T=300, n_logs=30,
                          n_bootstrap=2, n_truth_runs=50, rng=3)
    by = {(r.variant, r.metric): r for r in rows}
    static = simulator.static_policy_value(
        "bred_linear", lambda x, a: np.tile(np.eye(10)[4], (len(x), 1)))
    assert by["T", "online_value"].estimate == pytest.approx(static, abs=4 * by[
        "T", "online_value"].stderr + 1e-12)
    bias = by["replay", "bias"]
    assert abs(bias.estimate) < 4 * bias.stderr


def test_dynamic_news_rows():
    rows = dynamic_news(DYN, {"ucb1": make_ucb1}, T=120, window=40, n_logs=2, n_bootstrap=3,
                        n_truth_runs=4, rng=0)
    got = {(r.variant, r.metric) for r in rows}
    for v in ("replay", "bred_window", "bred_window_local"):
        for m in ("value", "bias", "rmse", "coverage", "width"):
            assert (v, m) in got
    assert all(dict(r.params) == {"T": 120, "window": 40} for r in rows)
    local = {r.metric: r for r in rows if r.variant == "bred_window_local"}
    assert local["value"].n == 2 * 3  # logs x windows
    assert local["bias"].estimate == pytest.approx(local["value"].estimate
                                                   - local["value"].truth)


@pytest.mark.parametrize("kw, exc, match", [
    pytest.param({"T": 0}, ValueError, "`T` must be >= 1; got 0", id="T"),
    pytest.param({"n_logs": 0}, ValueError, "`n_logs` must be >= 1", id="n_logs"),
    pytest.param({"n_truth_runs": 1}, ValueError, "`n_truth_runs` must be >= 2", id="runs"),
    pytest.param({"window": 500}, ValueError, r"`window` must be in \[1, T = 100\]",
                 id="window"),
    pytest.param({"T": 10_000}, ValueError, "`T` must be <= the horizon", id="horizon"),
    pytest.param({"agents": {}}, TypeError, "`agents` must be a non-empty mapping",
                 id="agents"),
])
def test_bad_arguments(kw, exc, match):
    args = dict(T=100, window=50, agents={"ucb1": make_ucb1}) | kw
    with pytest.raises(exc, match=match):
        dynamic_news(DYN, args.pop("agents"), **args)


def test_own_evaluators_and_the_ab_test_beside_the_builtins():
    kw = dict(T=200, n_logs=3, n_bootstrap=4, n_truth_runs=6, rng=1)
    base = bred_vs_replay("bred_linear", {"ucb1": make_ucb1}, **kw)

    def constant(log, make_agent, *, rng):
        return 0.3  # a float: no interval, hence no coverage or width rows

    rows = bred_vs_replay("bred_linear", {"ucb1": make_ucb1}, **kw,
                          estimators=["replay", ("const", constant)], ab_users=300)
    by = {(r.variant, r.metric): r for r in rows}
    assert by["const", "value"].estimate == pytest.approx(0.3)
    assert ("const", "coverage") not in by and ("const", "width") not in by
    assert ("const", "bias_at_matches") not in by  # its horizon is unknown
    # the A/B test: the agent's mean reward over its ~150 users, scored at V(its users)
    ab = by["ab_test", "value"]
    assert 0.0 <= ab.estimate <= 1.0 and ab.n == 3
    assert 100 < by["ab_test", "mean_matches"].estimate < 200
    assert ("ab_test", "coverage_at_matches") in by
    # the built-in replay's numbers do not depend on what else is compared
    old = {(r.variant, r.metric): r.estimate for r in base if r.variant == "replay"}
    assert all(by[k].estimate == v for k, v in old.items())
    with pytest.raises(ValueError, match="`ab_users`"):
        bred_vs_replay("bred_linear", {"ucb1": make_ucb1}, **kw, ab_users=1)
