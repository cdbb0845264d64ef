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


class NoBatch(Hidden):
    """Hides ``batch`` only: replicate after replicate through the compiled single replay."""

    def replay_arrays(self, *args, **kw):
        return self.agent.replay_arrays(*args, **kw)


def maker(name, hide=False):
    def make(gen):
        ag = MAKERS[name]()
        ag.reset(gen)
        if hide == "nobatch" and callable(getattr(ag, "replay_arrays", None)):
            return NoBatch(ag)
        return Hidden(ag) if hide else ag
    return make


@pytest.mark.parametrize("name", list(MAKERS))
@pytest.mark.parametrize("reveal", ["every", "once"])
@settings(max_examples=4)
@given(seed=st.integers(0, 2**32 - 1), T=st.integers(5, 120), B=st.integers(1, 12),
       jitter=st.sampled_from(["auto", 0.0, 0.3]), masked=st.booleans())
def test_batched_equals_plain_loop(name, reveal, seed, T, B, jitter, masked):
    world = make_world(seed % 997)
    g = np.random.default_rng(seed)
    avail = None
    if masked:
        avail = g.random((T, 4)) < 0.6
        avail[np.arange(T), g.integers(0, 4, T)] = True
    log, _ = make_log(world, T, g, avail=avail)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoMatchWarning)
        e1 = bred(log, maker(name), n_bootstrap=B, jitter=jitter, reveal=reveal, rng=seed)
        e2 = bred(log, maker(name, hide=True), n_bootstrap=B, jitter=jitter, reveal=reveal,
                  rng=seed)
        e3 = bred(log, maker(name, hide="nobatch"), n_bootstrap=B, jitter=jitter,
                  reveal=reveal, rng=seed)
    assert isinstance(e1, BredEstimate) and e1.reveal == reveal
    for e in (e2, e3):
        np.testing.assert_array_equal(e1.replicate_values, e.replicate_values)
        np.testing.assert_array_equal(e1.replicate_matches, e.replicate_matches)
        np.testing.assert_equal([e1.value, e1.stderr, e1.ci_low, e1.ci_high, e1.mean_matches],
                                [e.value, e.stderr, e.ci_low, e.ci_high, e.mean_matches])


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
    # a constant feature (intercept) is never jittered, with "auto" or a float
    ctx = np.column_stack([np.ones(log.n_rounds), log.context])
    log1 = BanditLog(context=ctx, action=log.action, reward=log.reward, pscore=log.pscore,
                     n_actions=log.n_actions)
    for jitter in ("auto", 0.2):
        h = bred(log1, maker("uniform"), n_bootstrap=2, jitter=jitter, rng=0).bandwidth
        assert h[0] == 0 and np.all(h[1:] > 0)
    # an array is used as given, feature by feature: c = 1 reproduces "auto" exactly
    c1 = log.context.std(axis=0) / 20.0
    e1 = bred(log, maker("linucb"), n_bootstrap=3, jitter=c1, rng=0)
    e_auto = bred(log, maker("linucb"), n_bootstrap=3, rng=0)
    np.testing.assert_array_equal(e1.bandwidth, c1)
    np.testing.assert_array_equal(e1.replicate_values, e_auto.replicate_values)


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
    pytest.param(uniform_log(), maker("ucb1"), {"jitter": [0.1, 0.1]}, ValueError,
                 r"one float >= 0 per context feature \(3 here\)", id="jitter-wrong-length"),
    pytest.param(uniform_log(), maker("ucb1"), {"jitter": [0.1, -0.1, 0.1]}, ValueError,
                 "per context feature", id="jitter-array-negative"),
    pytest.param(uniform_log(), maker("ucb1"), {"expansion": 0}, ValueError, "expansion",
                 id="expansion-0"),
    pytest.param(uniform_log(), maker("ucb1"), {"ci": 0}, ValueError, "ci", id="ci-0"),
    pytest.param(uniform_log(), maker("ucb1"), {"reveal": "twice"}, ValueError,
                 r"`reveal` must be one of \('every', 'once'\); got 'twice'",
                 id="unknown-reveal"),
    pytest.param(uniform_log(), maker("ucb1"), {"reveal": None}, ValueError, "`reveal`",
                 id="reveal-none"),
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
@pytest.mark.parametrize("reveal", ["every", "once"])
def test_batched_equals_plain_loop_across_chunks(name, reveal):
    # expansion * T > the 4096-record chunk of the batched path (revealed records carry over)
    log, _ = make_log(make_world(9), 1100, 9)
    e1 = bred(log, maker(name), n_bootstrap=2, reveal=reveal, rng=1)
    e2 = bred(log, maker(name, hide=True), n_bootstrap=2, reveal=reveal, rng=1)
    np.testing.assert_array_equal(e1.replicate_values, e2.replicate_values)
    np.testing.assert_array_equal(e1.replicate_matches, e2.replicate_matches)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("reveal", ["every", "once"])
def test_same_numbers_whatever_the_threads_and_lane_groups(monkeypatch, threads, reveal):
    # B = 130 copies on one thread run as lane groups of 44, 44, 42 (the last one padded);
    # on 2 or 3 threads each thread's twin has its own groups. The plain loop is the truth.
    import evaluators._bred as bred_module

    log, _ = make_log(make_world(5), 30, 5)
    plain = bred(log, maker("linucb", hide=True), n_bootstrap=130, reveal=reveal, rng=4)
    monkeypatch.setattr(bred_module, "n_threads", lambda: threads)
    fast = bred(log, maker("linucb"), n_bootstrap=130, reveal=reveal, rng=4)
    np.testing.assert_array_equal(plain.replicate_values, fast.replicate_values)
    np.testing.assert_array_equal(plain.replicate_matches, fast.replicate_matches)


@pytest.mark.parametrize("threads", [1, 2])
def test_mixed_hyper_parameters_are_rejected_whatever_the_threads(monkeypatch, threads):
    import evaluators._bred as bred_module

    monkeypatch.setattr(bred_module, "n_threads", lambda: threads)
    log, _ = make_log(make_world(5), 30, 5)
    alphas = iter([1.0, 1.0, 2.0, 2.0])

    def make(gen):
        ag = agents.LinUCB(next(alphas))
        ag.reset(gen)
        return ag

    with pytest.raises(ValueError, match="agent 2 has"):
        bred(log, make, n_bootstrap=4, rng=0)


# -- reveal once ------------------------------------------------------------------------------

class Recorder(Hidden):
    """Plain-loop agent that records the (context, reward) of every update."""

    def __init__(self, agent):
        super().__init__(agent)
        self.seen = []

    def update(self, observation, action, reward):
        self.seen.append((tuple(observation["context"]), reward))
        super().update(observation, action, reward)


def distinct_log(T, seed, K=3):
    """Uniform log whose records all have different contexts (a context names its record)."""
    g = np.random.default_rng(seed)
    return BanditLog(context=g.normal(size=(T, 2)), action=g.integers(0, K, T),
                     reward=(g.random(T) < 0.4).astype(float), pscore=np.full(T, 1 / K),
                     n_actions=K)


@pytest.mark.parametrize("reveal", ["every", "once"])
def test_reveal_once_uses_each_record_at_most_once_per_replicate(reveal):
    log = distinct_log(60, 0)
    made = []

    def make(gen):
        ag = agents.LinUCB(0.3)
        ag.reset(gen)
        made.append(Recorder(ag))
        return made[-1]

    est = bred(log, make, n_bootstrap=6, jitter=0.0, reveal=reveal, rng=2)
    repeats = 0
    for i, rec in enumerate(made):
        contexts = [c for c, _ in rec.seen]
        repeats += len(contexts) - len(set(contexts))
        # what the agent was given is exactly what was counted
        assert len(rec.seen) == est.replicate_matches[i]
        assert np.mean([r for _, r in rec.seen]) == pytest.approx(est.replicate_values[i])
    if reveal == "once":
        assert repeats == 0 and np.all(est.replicate_matches <= log.n_rounds)
    else:  # the paper's algorithm does give repeated copies (the test can tell)
        assert repeats > 0


def test_reveal_once_counts_every_record_of_the_always_played_arm_once():
    # Always(0) matches every copy of the records logged with arm 0; a large expansion
    # resamples every record, so reveal once counts each of them exactly once.
    log = distinct_log(30, 1)
    mine = log.action == 0
    est = bred(log, lambda g: Always(0), n_bootstrap=3, expansion=40.0, reveal="once", rng=0)
    np.testing.assert_array_equal(est.replicate_matches, np.full(3, mine.sum()))
    np.testing.assert_allclose(est.replicate_values, log.reward[mine].mean())
    every = bred(log, lambda g: Always(0), n_bootstrap=3, expansion=40.0, rng=0)
    assert np.all(every.replicate_matches > 20 * mine.sum())


# -- statistical behaviour on the linear test bed ----------------------------------------------

STAT_T = 300


def make_linucb(gen):
    ag = agents.LinUCB(0.5)
    ag.reset(gen)
    return ag


@pytest.fixture(scope="module")
def linucb_truth():
    import simulator

    cfg = simulator.LinearBanditConfig()  # the BRED test bed: K = 10, d = 10
    truth = simulator.online_value(cfg, make_linucb, STAT_T, n_runs=600, rng=11)
    logs = [simulator.collect_log(cfg, STAT_T, rng=[12, i])[0] for i in range(50)]
    return truth, logs


@pytest.mark.slow
def test_reveal_once_is_nearly_unbiased_for_the_value_at_its_match_count(linucb_truth):
    # each replicate is scored against V(m_i), m_i its own number of matches; the small
    # selection bias documented in bred's Notes (~ -0.005) is below this test's resolution,
    # the paper variant's (+0.3, next test) far above it
    truth, logs = linucb_truth
    err, tse = [], []
    for i, log in enumerate(logs):
        e = bred(log, make_linucb, n_bootstrap=10, reveal="once", rng=[13, i])
        t = e.replicate_matches.astype(int) - 1
        assert np.all(e.replicate_matches < STAT_T)  # a shorter horizon than T
        err.append(np.mean(e.replicate_values - truth.curve[t]))
        tse.append(truth.curve_stderr[t].mean())
    err = np.array(err)
    se = math.sqrt(err.var(ddof=1) / err.size + np.mean(tse) ** 2)
    assert abs(err.mean()) < 3 * se, (err.mean(), se)


@pytest.mark.slow
def test_paper_bred_overestimates_a_context_learner(linucb_truth):
    # Documented finding (see bred's Notes): with every copy revealed, LinUCB memorises the
    # repeated records and BRED lands far above V(T), even above every policy's value.
    truth, logs = linucb_truth
    est = [bred(log, make_linucb, n_bootstrap=10, rng=[14, i]) for i, log in
           enumerate(logs[:10])]
    err = np.array([e.value for e in est]) - truth.value
    assert err.mean() > 0.1 and err.mean() > 5 * err.std(ddof=1) / math.sqrt(err.size)
    assert np.mean([e.ci_low > truth.value for e in est]) >= 0.9  # intervals miss the truth


@pytest.mark.parametrize("name", ["linucb", "thompson", "ucb1"])
def test_partitions_change_nothing(name, monkeypatch):
    import evaluators._bred as impl

    world = make_world(3)
    log, _ = make_log(world, 90, np.random.default_rng(3))
    one = bred(log, maker(name), n_bootstrap=9, reveal="once", rng=2, n_partitions=1)
    monkeypatch.setattr(impl, "_INDEX_BYTES", 8 * 4 * 360)  # twins of 4 replicates
    for p in (2, 9, 50):
        other = bred(log, maker(name), n_bootstrap=9, reveal="once", rng=2, n_partitions=p,
                     progress=p == 2)
        np.testing.assert_array_equal(other.replicate_values, one.replicate_values)
        np.testing.assert_array_equal(other.replicate_matches, one.replicate_matches)
    with pytest.raises(ValueError, match=r"`n_partitions` must be an int >= 1; got 0"):
        bred(log, maker(name), n_bootstrap=2, n_partitions=0)
