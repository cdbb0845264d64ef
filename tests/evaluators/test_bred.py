"""BRED (Mary, Preux, Nicol 2014): batched == plain, replicate i depends on child i only."""

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agents
from evaluators import JITTER_C, BredEstimate, NoMatchWarning, bred
from simulator.logs import BanditLog
from tests.evaluators.test_replay import Always, Hidden, make_log, make_world

MAKERS = {
    "linucb": lambda: agents.LinUCB(0.5),
    "ucb1": lambda: agents.UCB1(1.0),
    "egreedy": lambda: agents.EpsilonGreedy(0.1),
    "uniform": agents.UniformRandom,
    "thompson": agents.ThompsonSampling,
}


def maker(name, hide=False):
    def make(gen):
        ag = MAKERS[name]()
        ag.reset(gen)
        return Hidden(ag) if hide else ag
    return make


@pytest.mark.parametrize("name", list(MAKERS))
@settings(max_examples=4)
@given(seed=st.integers(0, 2**32 - 1), T=st.integers(5, 120), B=st.integers(1, 12),
       jitter=st.sampled_from(["auto", 0.0, 0.3]), masked=st.booleans())
def test_batched_equals_plain_loop(name, seed, T, B, jitter, masked):
    world = make_world(seed % 997)
    g = np.random.default_rng(seed)
    avail = None
    if masked:
        avail = g.random((T, 4)) < 0.6
        avail[np.arange(T), g.integers(0, 4, T)] = True
    log, _ = make_log(world, T, g, avail=avail)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoMatchWarning)
        e1 = bred(log, maker(name), n_bootstrap=B, jitter=jitter, rng=seed)
        e2 = bred(log, maker(name, hide=True), n_bootstrap=B, jitter=jitter, rng=seed)
    assert isinstance(e1, BredEstimate)
    np.testing.assert_array_equal(e1.replicate_values, e2.replicate_values)
    np.testing.assert_equal([e1.value, e1.stderr, e1.ci_low, e1.ci_high, e1.mean_matches],
                            [e2.value, e2.stderr, e2.ci_low, e2.ci_high, e2.mean_matches])


def test_replicate_i_uses_child_i_whatever_b():
    log, _ = make_log(make_world(1), 200, 1)
    e3 = bred(log, maker("linucb"), n_bootstrap=3, rng=42)
    e7 = bred(log, maker("linucb"), n_bootstrap=7, rng=42)
    np.testing.assert_array_equal(e3.replicate_values, e7.replicate_values[:3])
    e3b = bred(log, maker("linucb"), n_bootstrap=3, rng=43)
    assert not np.array_equal(e3.replicate_values, e3b.replicate_values)


def test_summary_is_mean_std_and_percentiles_of_replicates():
    log, _ = make_log(make_world(2), 300, 2)
    est = bred(log, maker("ucb1"), n_bootstrap=40, ci=0.9, rng=1)
    v = est.replicate_values
    assert est.n == 40 and est.level == 0.9
    assert est.value == pytest.approx(v.mean())
    assert est.stderr == pytest.approx(v.std(ddof=1))
    assert (est.ci_low, est.ci_high) == pytest.approx(tuple(np.quantile(v, [0.05, 0.95])))
    # default expansion K: each replicate matches about T records
    assert est.expansion == 4
    assert 0.8 * 300 < est.mean_matches < 1.2 * 300


def test_bandwidth_rule():
    log, _ = make_log(make_world(3), 400, 3)
    auto = bred(log, maker("uniform"), n_bootstrap=2, rng=0)
    np.testing.assert_allclose(auto.bandwidth, JITTER_C * log.context.std(axis=0) / 20.0)
    assert np.all(bred(log, maker("uniform"), n_bootstrap=2, jitter=0, rng=0).bandwidth == 0)
    assert np.all(bred(log, maker("uniform"), n_bootstrap=2, jitter=0.2, rng=0).bandwidth
                  == 0.2)


def test_jitter_changes_a_context_learner_but_zero_jitter_is_exact_resampling():
    log, _ = make_log(make_world(4), 300, 4)
    e0 = bred(log, maker("linucb"), n_bootstrap=5, jitter=0.0, rng=3)
    e1 = bred(log, maker("linucb"), n_bootstrap=5, jitter=0.5, rng=3)
    assert not np.array_equal(e0.replicate_values, e1.replicate_values)


def test_static_policy_bred_close_to_truth():
    # UniformRandom's value is the mean CTR; BRED's replicates average around it
    world = make_world(5)
    log, m = make_log(world, 2000, 5)
    est = bred(log, maker("uniform"), n_bootstrap=30, rng=0)
    truth = world[1].mean()
    assert abs(est.value - truth) < 4 * est.stderr + 0.02


def test_no_replicate_matching_is_nan_with_warning():
    log, _ = make_log(make_world(6), 60, 6)
    log = log.take(np.flatnonzero(log.action != 0))
    with pytest.warns(NoMatchWarning):
        est = bred(log, lambda g: Always(0), n_bootstrap=3, rng=0)
    assert math.isnan(est.value) and est.n == 0


def uniform_log():
    return make_log(make_world(0), 30, 0)[0]


@pytest.mark.parametrize("log, make, kw, exc, msg", [
    pytest.param("x", maker("ucb1"), {}, TypeError, "BanditLog", id="log-type"),
    pytest.param(uniform_log(), 3, {}, TypeError, "make_agent", id="make-not-callable"),
    pytest.param(uniform_log(), lambda g: 3, {}, TypeError, "make_agent", id="make-returns-int"),
    pytest.param(uniform_log(), maker("ucb1"), {"n_bootstrap": 0}, ValueError, "n_bootstrap",
                 id="n_bootstrap-0"),
    pytest.param(uniform_log(), maker("ucb1"), {"n_bootstrap": 2.0}, TypeError, "n_bootstrap",
                 id="n_bootstrap-float"),
    pytest.param(uniform_log(), maker("ucb1"), {"jitter": -0.1}, ValueError, "jitter",
                 id="negative-jitter"),
    pytest.param(uniform_log(), maker("ucb1"), {"jitter": "silverman"}, ValueError, "jitter",
                 id="unknown-jitter"),
    pytest.param(uniform_log(), maker("ucb1"), {"expansion": 0}, ValueError, "expansion",
                 id="expansion-0"),
    pytest.param(uniform_log(), maker("ucb1"), {"ci": 0}, ValueError, "ci", id="ci-0"),
    pytest.param(BanditLog(context=np.zeros((2, 1)), action=[0, 1], reward=[1.0, 0.0],
                           pscore=[0.5, 0.3], n_actions=2), maker("ucb1"), {}, ValueError,
                 "uniform logging", id="non-uniform"),
    pytest.param(uniform_log(), lambda g: Always(7), {}, ValueError, "action 7",
                 id="agent-out-of-range"),
])
def test_bad_input(log, make, kw, exc, msg):
    with pytest.raises(exc, match=msg):
        bred(log, make, **kw)


@pytest.mark.parametrize("name", ["linucb", "ucb1"])
def test_batched_equals_plain_loop_across_chunks(name):
    # expansion * T > the 4096-record chunk of the batched path
    log, _ = make_log(make_world(9), 1100, 9)
    e1 = bred(log, maker(name), n_bootstrap=2, rng=1)
    e2 = bred(log, maker(name, hide=True), n_bootstrap=2, rng=1)
    np.testing.assert_array_equal(e1.replicate_values, e2.replicate_values)
