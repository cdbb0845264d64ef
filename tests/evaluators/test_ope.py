"""Static-policy estimators: IPS, SNIPS, direct method, doubly robust."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from evaluators import NoSupportWarning, OPEEstimate, direct_method, doubly_robust, ips, snips
from simulator.logs import BanditLog
from tests.evaluators.test_replay import (
    StaticPolicy,
    logging_probs,
    make_log,
    make_world,
    static_truth,
)


@settings(max_examples=30)
@given(seed=st.integers(0, 2**32 - 1), T=st.integers(1, 300),
       kind=st.sampled_from(["uniform", "nonuniform"]))
def test_ips_with_logging_policy_as_target_is_mean_reward(seed, T, kind):
    world = make_world(seed % 101)
    log, m = make_log(world, T, seed, kind=kind)
    action_dist = logging_probs(world, kind)[m]
    for est in (ips(log, action_dist), snips(log, action_dist)):
        assert est.value == pytest.approx(log.reward.mean(), rel=1e-12, abs=1e-12)
    assert ips(log, action_dist).ess == pytest.approx(T)


@settings(max_examples=20)
@given(seed=st.integers(0, 2**32 - 1))
def test_obp_shape_accepted(seed):
    world = make_world(seed % 101)
    log, _ = make_log(world, 100, seed, kind="nonuniform")
    ad = StaticPolicy(np.random.default_rng(seed).normal(size=(4, 3))).action_dist(log)
    for f in (ips, snips):
        assert f(log, ad) == f(log, ad[:, :, None])
    for f in (direct_method, doubly_robust):  # fitted models draw folds / resamples
        assert f(log, ad, rng=seed) == f(log, ad[:, :, None], rng=seed)


def test_ips_formula_and_clip():
    log = BanditLog(context=np.zeros((4, 1)), action=[0, 1, 1, 0], reward=[1.0, 1.0, 0.0, 0.0],
                    pscore=[0.5, 0.25, 0.25, 0.5], n_actions=2)
    ad = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [1.0, 0.0]])
    w = np.array([2.0, 4.0, 4.0, 2.0])
    r = log.reward
    est = ips(log, ad)
    assert est.value == pytest.approx(np.mean(w * r))
    assert est.stderr == pytest.approx(np.std(w * r, ddof=1) / 2)
    assert est.ess == pytest.approx(w.sum() ** 2 / (w * w).sum())
    assert ips(log, ad, clip=3.0).value == pytest.approx(np.mean(np.minimum(w, 3) * r))
    assert snips(log, ad).value == pytest.approx(np.sum(w * r) / w.sum())


def test_direct_method_mean_model_and_dr_with_exact_model_terms():
    log = BanditLog(context=np.zeros((4, 1)), action=[0, 0, 1, 2], reward=[1.0, 0.0, 1.0, 1.0],
                    pscore=[0.5] * 4, n_actions=3)
    ad = np.tile([0.25, 0.25, 0.5], (4, 1))
    # arm means 0.5, 1.0, 1.0
    dm = direct_method(log, ad, model="mean").value
    assert dm == pytest.approx(0.25 * 0.5 + 0.25 * 1.0 + 0.5 * 1.0)
    # DR cross-fits a fitted model; with the in-sample arm means given as an array:
    dr = doubly_robust(log, ad, model=np.tile([0.5, 1.0, 1.0], (4, 1)))
    w = np.array([0.5, 0.5, 0.5, 1.0])
    q = np.array([0.5, 0.5, 1.0, 1.0])
    assert dr.value == pytest.approx(dm + np.mean(w * (log.reward - q)))


@pytest.mark.parametrize("f", [ips, snips, direct_method, doubly_robust])
def test_no_support_is_nan_with_named_warning(f):
    # all target mass on arm 2, which the log never shows
    log = BanditLog(context=np.zeros((4, 1)), action=[0, 0, 1, 1], reward=[1.0, 0.0, 1.0, 1.0],
                    pscore=[0.5] * 4, n_actions=3)
    ad = np.tile([0.0, 0.0, 1.0], (4, 1))
    with pytest.warns(NoSupportWarning):
        est = f(log, ad)
    assert math.isnan(est.value)


def test_ridge_model_recovers_linear_rewards():
    g = np.random.default_rng(0)
    T, K = 3000, 3
    X = g.normal(size=(T, 2))
    a = g.integers(0, K, T)
    W = np.array([[1.0, -1.0], [0.5, 0.5], [0.0, 2.0]])
    r = 0.3 + (X * W[a]).sum(axis=1)
    log = BanditLog(context=X, action=a, reward=r, pscore=np.full(T, 1 / 3), n_actions=K)
    ad = np.zeros((T, K))
    ad[:, 2] = 1.0
    truth = np.mean(0.3 + X @ W[2])
    assert direct_method(log, ad, model="ridge").value == pytest.approx(truth, abs=5e-3)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["uniform", "nonuniform"])
def test_unbiased_with_coverage_for_static_policy(kind):
    world = make_world(11)
    pol = StaticPolicy(np.random.default_rng(11).normal(size=(4, 3)))
    truth = static_truth(world, pol)
    res = {"ips": [], "snips": [], "dr": []}
    cov = {k: 0 for k in res}
    for child in np.random.default_rng(7).spawn(200):
        log, _ = make_log(world, 400, child, kind=kind)
        ad = pol.action_dist(log)
        for name, est in (("ips", ips(log, ad)), ("snips", snips(log, ad)),
                          ("dr", doubly_robust(log, ad, model="mean", rng=child))):
            res[name].append(est.value - truth)
            cov[name] += est.covers(truth)
    for name in ("ips", "snips", "dr"):
        e = np.array(res[name])
        assert abs(e.mean()) < 2.5 * e.std(ddof=1) / np.sqrt(e.size), name
        assert stats.binomtest(cov[name], 200, 0.95).pvalue > 0.001, (name, cov[name])


def test_results_are_ope_estimates():
    log, m = make_log(make_world(0), 50, 0)
    ad = logging_probs(make_world(0), "uniform")[m]
    for f in (ips, snips, direct_method, doubly_robust):
        est = f(log, ad)
        assert isinstance(est, OPEEstimate) and est.n == 50
        assert est.ci_low <= est.value <= est.ci_high


def tiny():
    return BanditLog(context=np.zeros((2, 1)), action=[0, 1], reward=[1.0, 0.0],
                     pscore=[0.5, 0.5], n_actions=2)


@pytest.mark.parametrize("f, log, ad, kw, exc, msg", [
    pytest.param(ips, "x", np.ones((2, 2)) / 2, {}, TypeError, "BanditLog", id="log-type"),
    pytest.param(ips, tiny(), np.ones((3, 2)) / 2, {}, ValueError, "shape", id="rows"),
    pytest.param(ips, tiny(), np.ones((2, 2, 2)) / 4, {}, ValueError, "len_list",
                 id="len_list-2"),
    pytest.param(ips, tiny(), np.array([[1.5, -0.5], [0.5, 0.5]]), {}, ValueError,
                 "negative", id="negative-prob"),
    pytest.param(ips, tiny(), np.array([[0.6, 0.6], [0.5, 0.5]]), {}, ValueError,
                 "sum to 1", id="not-normalised"),
    pytest.param(ips, tiny(), np.array([[np.nan, 1], [0.5, 0.5]]), {}, ValueError,
                 "finite", id="nan"),
    pytest.param(ips, tiny(), np.array([["a", "b"], ["c", "d"]]), {}, TypeError, "float",
                 id="strings"),
    pytest.param(ips, tiny(), np.ones((2, 2)) / 2, {"clip": 0}, ValueError, "clip",
                 id="clip-0"),
    pytest.param(direct_method, tiny(), np.ones((2, 2)) / 2, {"model": "forest"}, ValueError,
                 "model", id="unknown-model"),
    pytest.param(doubly_robust, tiny(), np.ones((2, 2)) / 2, {"ci": 2}, ValueError, "ci",
                 id="ci-2"),
])
def test_bad_input(f, log, ad, kw, exc, msg):
    with pytest.raises(exc, match=msg):
        f(log, ad, **kw)


def test_snips_all_zero_weights_is_nan_with_warning():
    ad = np.array([[0.0, 1.0], [1.0, 0.0]])
    with pytest.warns(NoSupportWarning):
        est = snips(tiny(), ad)
    assert math.isnan(est.value)
