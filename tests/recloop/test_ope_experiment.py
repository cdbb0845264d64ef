"""The ope evaluation: estimators of static targets against the exact policy value."""

import math

import numpy as np
import pytest

import agents
import simulator
from recloop.experiments._ope import (
    EstimatorErrorWarning,
    _atom_index,
    _lookup,
    leaderboard,
    ope,
    policy_table,
)

SMALL = dict(n_rounds=300, n_logs=30)


def by_key(rows):
    return {(m.agent, m.variant, m.metric): m for m in rows}


@pytest.fixture(scope="module")
def run():
    return ope("bred_linear", rng=3, **SMALL)


def test_truth_is_the_exact_static_value(run):
    config = simulator.preset("bred_linear")
    got = by_key(run)
    for spec in ({"name": "uniform", "policy": "uniform"},
                 {"name": "greedy_eps0.1", "policy": "epsilon_greedy", "epsilon": 0.1}):
        exact = simulator.static_policy_value(config, _lookup(config, policy_table(config, spec)))
        assert got[spec["name"], "ips", "value"].truth == exact
    # uniform target: the simulator's own uniform value
    assert got["uniform", "ips", "value"].truth == pytest.approx(
        simulator.static_policy_value(config), abs=1e-14)


def test_records_map_to_their_atoms():
    config = simulator.preset("bred_linear")
    log, _ = simulator.collect_log(config, 500, rng=0)
    x, _, _ = simulator.context_atoms(config)
    assert np.array_equal(x[_atom_index(config, log.context)], log.context)


def test_same_rng_same_rows_and_paired_estimators(run):
    assert repr(ope("bred_linear", rng=3, **SMALL)) == repr(run)
    fewer = by_key(ope("bred_linear", rng=3, estimators=["snips"], **SMALL))
    full = by_key(run)
    # streams are keyed by name: removing estimators leaves the others' numbers unchanged
    assert fewer["uniform", "snips", "value"].estimate == full["uniform", "snips", "value"].estimate


def test_summary_rows(run):
    got = by_key(run)
    for t in ("uniform", "greedy_eps0.1", "softmax_beta20"):
        for e in ("ips", "snips", "direct_method", "doubly_robust"):
            v, b, r = got[t, e, "value"], got[t, e, "bias"], got[t, e, "rmse"]
            assert v.n == 30 and got[t, e, "nan_rate"].estimate == 0.0
            assert b.estimate == pytest.approx(v.estimate - v.truth, abs=1e-12)
            assert r.estimate >= abs(b.estimate) - 1e-12
            assert got[t, e, "relative_rmse"].estimate == pytest.approx(r.estimate / v.truth)
            assert 0.0 <= got[t, e, "coverage"].estimate <= 1.0
            assert math.isnan(b.truth)  # an error row carries no truth of its own


@pytest.mark.slow
def test_ips_is_unbiased_and_a_misspecified_direct_method_is_not():
    rows = by_key(ope("bred_linear", [{"name": "eps", "policy": "epsilon_greedy",
                                       "epsilon": 0.1}], logging="softmax", beta=5.0,
                      estimators=["ips", "doubly_robust",
                                  ("dm_mean", _dm_mean), ("dr_mean", _dr_mean)],
                      n_rounds=500, n_logs=300, rng=11))
    for e in ("ips", "dr_mean"):  # unbiased: propensities are exact
        b = rows["eps", e, "bias"]
        assert abs(b.estimate) < 4 * b.stderr, (e, b)
    b = rows["eps", "dm_mean", "bias"]  # per-arm means ignore the context: biased
    assert abs(b.estimate) > 6 * b.stderr


def _dm_mean(log, action_dist):
    from evaluators import direct_method

    return direct_method(log, action_dist, model="mean")


def _dr_mean(log, action_dist):
    from evaluators import doubly_robust

    return doubly_robust(log, action_dist, model="mean")


def test_estimator_failures_are_nan_and_reported():
    seen = []

    def broken(log, action_dist, *, rng):
        raise RuntimeError("kaput")

    rows = by_key(ope("bred_linear", [{"name": "u", "policy": "uniform"}],
                      estimators=["ips", ("broken", broken), ("inf", lambda log, a: math.inf),
                                  ("text", lambda log, a: "high")],
                      n_rounds=50, n_logs=3, rng=0,
                      on_error=lambda what, exc: seen.append((what, str(exc)))))
    for e in ("broken", "inf", "text"):
        assert rows["u", e, "nan_rate"].estimate == 1.0
        assert math.isnan(rows["u", e, "value"].estimate)
    assert rows["u", "ips", "nan_rate"].estimate == 0.0
    assert len(seen) == 9 and any("kaput" in s for _, s in seen)
    assert any("returned inf" in s for _, s in seen)
    with pytest.warns(EstimatorErrorWarning, match="kaput"):
        ope("bred_linear", [{"name": "u", "policy": "uniform"}],
            estimators=[("broken", broken)], n_rounds=50, n_logs=1, rng=0)


class BadProbabilities(agents.UniformRandom):
    def action_probabilities(self, observation):
        return super().action_probabilities(observation) * 0.5


def test_agent_targets_are_fitted_then_frozen_and_checked():
    def make_linucb(rng=None):
        a = agents.LinUCB(alpha=0.0)
        a.reset(rng)
        return a

    rows = by_key(ope("bred_linear", [], agents={"lin": make_linucb}, n_rounds=200,
                      n_logs=5, n_train=3000, rng=0))
    config = simulator.preset("bred_linear")
    # fitted on 3,000 uniform records, greedy LinUCB is near the oracle value
    assert rows["lin", "ips", "value"].truth > simulator.static_policy_value(config) + 0.05

    def make_bad(rng=None):
        a = BadProbabilities()
        a.reset(rng)
        return a

    with pytest.raises(ValueError, match="target agent 'bad'.*sum to 1"):
        ope("bred_linear", [], agents={"bad": make_bad}, n_rounds=50, n_logs=1, rng=0)


@pytest.mark.parametrize("kwargs, exc, match", [
    pytest.param(dict(n_rounds=0), ValueError, "`n_rounds`", id="n_rounds"),
    pytest.param(dict(logging="greedy"), ValueError, "`logging.policy`", id="logging"),
    pytest.param(dict(logging="epsilon_greedy", epsilon=1.5), ValueError, "epsilon",
                 id="epsilon"),
    pytest.param(dict(reward_noise=-1.0), ValueError, "`reward_noise`", id="noise"),
    pytest.param(dict(estimators=["replay"]), ValueError, r"`estimators\[0\]`",
                 id="not-static"),
    pytest.param(dict(targets=[{"name": "a", "policy": "softmax"}]), ValueError,
                 r"`targets\[0\].beta`", id="target-param"),
    pytest.param(dict(config="dynamic_news"), ValueError, "static world", id="dynamic"),
])
def test_bad_arguments_are_named(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        ope(**{"config": "bred_linear", "n_logs": 1, "n_rounds": 20, **kwargs})


def test_per_log_estimates_give_the_cells_own_numbers_and_the_leaderboard(run):
    """Issue 22, section 1: one computation. With one seed, recloop.summarize of the per-log
    estimates gives the experiment's own rows to the last digit, and the leaderboard shows
    those numbers ranked by RMSE."""
    from recloop import summarize

    per_log = []
    rows = ope("bred_linear", rng=3, per_log=per_log.append, **SMALL)
    assert repr(rows) == repr(run)  # recording them changes nothing
    assert len(per_log) == 3 * 4 * SMALL["n_logs"]
    assert sorted({m.log for m in per_log}) == list(range(SMALL["n_logs"]))
    got = by_key(rows)
    summary = summarize(per_log)
    assert len(summary) == 12
    for s in summary:
        key = (s.agent, s.variant)
        assert s.estimate == got[key + ("value",)].estimate
        assert s.se == got[key + ("value",)].stderr
        assert s.truth == got[key + ("value",)].truth
        assert s.bias == got[key + ("bias",)].estimate
        assert s.rmse == got[key + ("rmse",)].estimate
        assert s.coverage == got[key + ("coverage",)].estimate
        assert s.nan_rate == got[key + ("nan_rate",)].estimate
    from recloop import _document as D

    blocks = leaderboard(summary)
    tables = [b for b in blocks if isinstance(b, D.Table)]
    assert [len(t.rows) for t in tables] == [4, 4, 4]  # 3 targets x 4 estimators
    first_block = [[D.plain(c) for c in r] for r in tables[0].rows]
    rmses = [float(r[2]) for r in first_block]
    assert rmses == sorted(rmses)
    target = next(b for b in blocks if isinstance(b, D.Paragraph)).parts[2].text
    for cells in first_block:
        estimator = cells[1].strip("`")
        assert cells[2] == f"{got[target, estimator, 'rmse'].estimate:.3g}"
        assert cells[3] == f"{got[target, estimator, 'bias'].estimate:.3g}"


def test_the_ab_test_beside_the_offline_estimators():
    rows = by_key(ope("bred_linear", [{"name": "u", "policy": "uniform"}], n_rounds=200,
                      n_logs=40, ab_users=1000, rng=2))
    ab = rows["u", "ab_test", "value"]
    assert ab.truth == rows["u", "ips", "value"].truth
    assert abs(rows["u", "ab_test", "bias"].estimate) < 4 * rows["u", "ab_test", "bias"].stderr
    assert 0.8 <= rows["u", "ab_test", "coverage"].estimate <= 1.0
    with pytest.raises(ValueError, match="`ab_users`"):
        ope("bred_linear", n_rounds=20, n_logs=1, ab_users=1)


def test_mips_on_a_large_action_world_and_the_residual():
    kw = dict(n_actions=500, n_rounds=1000, n_logs=30, rng=0,
              estimators=["ips", "mips"])
    target = [{"name": "eps", "policy": "epsilon_greedy", "epsilon": 0.2}]
    held = by_key(ope("large_actions", target, residual=0.0, **kw))
    broken = by_key(ope("large_actions", target, residual=1.0, **kw))
    # MIPS's assumption holds: unbiased and well below IPS's RMSE
    b = held["eps", "mips", "bias"]
    assert abs(b.estimate) < 4 * b.stderr
    assert held["eps", "mips", "rmse"].estimate < held["eps", "ips", "rmse"].estimate
    # the arms' own residual breaks it: biased
    b = broken["eps", "mips", "bias"]
    assert abs(b.estimate) > 4 * b.stderr
    assert dict(broken["eps", "mips", "value"].params)["residual"] == 1.0
    with pytest.raises(ValueError, match="`residual` needs a world"):
        ope("bred_linear", target, residual=0.1, n_rounds=20, n_logs=1)


def test_estimator_selection_against_the_oracle():
    from recloop.experiments._selection import estimator_selection

    rows = estimator_selection("bred_linear", family="ips", logging="softmax", beta=-10.0,
                               n_rounds=300, n_logs=30, n_actions=20, rng=0,
                               n_resamples=200)
    got = {(m.variant, m.metric): m for m in rows}
    oracle = got["oracle", "rmse"].estimate
    candidates = [m.estimate for m in rows if m.metric == "rmse" and "=" in m.variant]
    assert len(candidates) == 10 and oracle == min(candidates)
    assert got["untuned", "rmse"].estimate == candidates[0]  # clip = inf: plain IPS
    regret = got["slope", "regret"]
    assert regret.estimate == pytest.approx(got["slope", "rmse"].estimate - oracle)
    assert regret.estimate >= -1e-12  # no fixed choice beats the oracle on these logs
    assert regret.ci_low <= regret.estimate <= regret.ci_high
    assert 0.0 <= got["slope", "within"].estimate <= 1.0
    assert got["slope", "value"].truth == got["slope", "value"].truth  # an exact, finite truth
    with pytest.raises(ValueError, match="`family`"):
        estimator_selection("bred_linear", family="snips", n_rounds=20, n_logs=2)


def test_the_figure_follows_the_swept_parameter(tmp_path):
    from recloop.experiments._ope import plot_ope

    rows = []
    for K in (5, 20):
        rows += ope("bred_linear", [{"name": "u", "policy": "uniform"}], n_actions=K,
                    n_rounds=100, n_logs=3, rng=0, estimators=["ips"])
    paths = plot_ope(rows, tmp_path)  # n_actions swept, n_rounds fixed: one figure
    assert len(paths) == 1 and paths[0].stat().st_size > 0
    rows += ope("bred_linear", [{"name": "u", "policy": "uniform"}], n_actions=5,
                n_rounds=300, n_logs=3, rng=0, estimators=["ips"])
    # n_rounds now varies too: it is the x axis, a panel per number of actions (one figure
    # while they make at most four panels)
    (path,) = plot_ope(rows, tmp_path / "b")
    assert path.name == "ope_rmse_0.png" and path.stat().st_size > 0


def _counting_fits(monkeypatch):
    import evaluators

    fits, real = [], evaluators.fit_reward_model

    def counting(log, model="ridge", **kw):
        fits.append(model)
        return real(log, model, **kw)

    monkeypatch.setattr(evaluators, "fit_reward_model", counting)
    return fits


def test_one_reward_model_per_log_for_every_estimator_and_target(monkeypatch):
    import functools

    import evaluators
    from recloop.experiments._common import child_rng, seed_sequence
    from recloop.experiments._ope import DEFAULT_TARGETS, logged

    fits = _counting_fits(monkeypatch)
    mean_dm = functools.partial(evaluators.direct_method, model="mean")
    ests = ["ips", "direct_method", "doubly_robust", "switch_dr", ("dm_mean", mean_dm),
            ("dr_mean", functools.partial(evaluators.doubly_robust, model="mean"))]
    rows = by_key(ope("bred_linear", estimators=ests, n_rounds=200, n_logs=3, rng=1))
    assert sorted(fits) == ["mean"] * 3 + ["ridge"] * 3  # per log: one per specification
    # the same numbers as each estimator fitting its own model from the log's stream
    config = simulator.preset("bred_linear")
    root = seed_sequence(1)
    logger = _lookup(config, policy_table(config, {"policy": "uniform"}))
    table = policy_table(config, DEFAULT_TARGETS[1])
    for name, f, kw in (("switch_dr", evaluators.switch_dr, {}),
                        ("dm_mean", evaluators.direct_method, {"model": "mean"})):
        own = []
        for i in range(3):
            log, atoms = logged(config, 200, logger, root, i, 0.0)
            own.append(f(log, table[atoms], **kw, rng=child_rng(root, 7, i)).value)
        assert rows[DEFAULT_TARGETS[1]["name"], name, "value"].estimate == float(np.mean(own))


def test_the_harness_shares_the_model_of_a_scenario_table():
    import evaluators
    from recloop._plugins import bind_estimator, estimator_entry
    from recloop.experiments._ope import model_spec

    call = bind_estimator(estimator_entry({"name": "dr_mean", "factory": "doubly_robust",
                                           "params": {"model": "mean", "n_folds": 3}}, "static"))
    assert model_spec(call) == (evaluators.doubly_robust, {"model": "mean", "n_folds": 3},
                                {"model": "mean", "n_folds": 3})
    assert model_spec(bind_estimator(estimator_entry("ips", "static"))) is None
    assert model_spec(evaluators.select_estimator) is None  # SLOPE over IPS: no model
    q = np.zeros((3, 2))
    assert model_spec(lambda log, x, rng=None: evaluators.direct_method(log, x, model=q)) is None


def test_estimator_selection_fits_one_model_per_log(monkeypatch):
    from recloop.experiments._selection import estimator_selection

    fits = _counting_fits(monkeypatch)
    targets = [{"name": "u", "policy": "uniform"}, {"name": "s", "policy": "softmax",
                                                    "beta": 5.0}]
    estimator_selection("bred_linear", targets, family="dr_os", n_rounds=100, n_logs=4,
                        rng=0, n_resamples=10)
    assert fits == ["ridge"] * 4  # shared by both targets and all ten candidates
    fits.clear()
    estimator_selection("bred_linear", targets, family="ips", n_rounds=100, n_logs=2, rng=0,
                        n_resamples=10)
    assert fits == []
