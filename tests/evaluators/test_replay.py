"""Replay (Li et al. 2011) and its rejection variant (Dudik et al. 2012)."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import agents
from evaluators import NoMatchWarning, ReplayEstimate, replay
from simulator.logs import BanditLog

# -- a small synthetic world with known expected rewards ------------------------------------


def make_world(seed, K=4, d=3, M=12):
    """Contexts uniform on M fixed points; CTR P[m, k] known exactly."""
    g = np.random.default_rng(seed)
    contexts = g.random((M, d))
    W = g.normal(size=(K, d)) * 0.4
    P = np.clip(g.uniform(0.2, 0.6, K) + (contexts - 0.5) @ W.T, 0.05, 0.95)
    return contexts, P


def logging_probs(world, kind):
    contexts, P = world
    M, K = P.shape
    if kind == "uniform":
        return np.full((M, K), 1.0 / K)
    q = np.exp(3.0 * P)  # non-uniform, full support
    return q / q.sum(axis=1, keepdims=True)


def make_log(world, T, rng, *, kind="uniform", avail=None):
    contexts, P = world
    M, K = P.shape
    g = np.random.default_rng(rng)
    m = g.integers(0, M, T)
    probs = logging_probs(world, kind)[m]
    if avail is not None:  # uniform over the available arms
        probs = avail / avail.sum(axis=1, keepdims=True)
    a = (g.random(T)[:, None] > np.cumsum(probs, axis=1)).sum(axis=1)
    a = np.minimum(a, K - 1)
    r = (g.random(T) < P[m, a]).astype(float)
    log = BanditLog(context=contexts[m], action=a, reward=r, pscore=probs[np.arange(T), a],
                    n_actions=K, available=avail)
    return log, m


class StaticPolicy:
    """Deterministic policy: argmax of V @ x among the available arms (lowest index on ties)."""

    def __init__(self, V):
        self.V = V

    def choose(self, x, avail):
        s = np.where(avail, self.V @ x, -np.inf)
        return int(np.argmax(s))

    def act(self, observation):
        return self.choose(observation["context"], observation["available"])

    def update(self, observation, action, reward):
        pass

    def action_dist(self, log):
        out = np.zeros((log.n_rounds, log.n_actions))
        av = log.available_mask()
        for j in range(log.n_rounds):
            out[j, self.choose(log.context[j], av[j])] = 1.0
        return out


def static_truth(world, policy):
    contexts, P = world
    return float(np.mean([P[m, policy.choose(contexts[m], np.ones(P.shape[1], bool))]
                          for m in range(contexts.shape[0])]))


class Hidden:
    """Delegates act/update only: hides ``replay_arrays`` and ``batch`` (forces the plain loop)."""

    def __init__(self, agent):
        self.agent = agent

    def act(self, observation):
        return self.agent.act(observation)

    def update(self, observation, action, reward):
        self.agent.update(observation, action, reward)


COMPILED = {
    "uniform": agents.UniformRandom,
    "ucb1": lambda: agents.UCB1(0.5),
    "egreedy": lambda: agents.EpsilonGreedy(0.2),
    "linucb": lambda: agents.LinUCB(0.7),
}


# -- fast path == plain loop ------------------------------------------------------------------

@pytest.mark.parametrize("name", list(COMPILED))
@pytest.mark.parametrize("method", ["uniform", "rejection"])
@settings(max_examples=6)
@given(seed=st.integers(0, 2**32 - 1), T=st.integers(1, 400), masked=st.booleans())
def test_fast_path_equals_plain_loop(name, method, seed, T, masked):
    world = make_world(seed % 1000)
    g = np.random.default_rng(seed)
    avail = None
    if masked:
        avail = g.random((T, 4)) < 0.6
        avail[np.arange(T), g.integers(0, 4, T)] = True
    log, _ = make_log(world, T, g, kind="uniform", avail=avail)
    a1, a2 = COMPILED[name](), COMPILED[name]()
    a1.reset(seed)
    a2.reset(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoMatchWarning)
        e1 = replay(log, a1, method=method, rng=seed)
        e2 = replay(log, Hidden(a2), method=method, rng=seed)
    assert isinstance(e1, ReplayEstimate)
    assert (e1.n, e1.n_matches, e1.n_records) == (e2.n, e2.n_matches, e2.n_records)
    np.testing.assert_equal([e1.value, e1.stderr, e1.ci_low], [e2.value, e2.stderr, e2.ci_low])


def test_same_rng_same_result_and_rejection_uses_rng():
    world = make_world(1)
    log, _ = make_log(world, 500, 2, kind="nonuniform")
    pol = StaticPolicy(np.random.default_rng(0).normal(size=(4, 3)))
    e1 = replay(log, pol, method="rejection", rng=5)
    e2 = replay(log, pol, method="rejection", rng=5)
    e3 = replay(log, pol, method="rejection", rng=6)
    assert e1 == e2
    assert e1.n_matches == e3.n_matches and e1.n <= e1.n_matches
    assert e1.n != e3.n or e1.value != e3.value


def test_replay_of_static_policy_is_mean_matched_reward():
    world = make_world(2)
    log, _ = make_log(world, 300, 3)
    pol = StaticPolicy(np.random.default_rng(1).normal(size=(4, 3)))
    est = replay(log, pol)
    match = log.action == pol.action_dist(log).argmax(axis=1)
    assert est.n == est.n_matches == match.sum()
    assert est.value == pytest.approx(log.reward[match].mean())
    assert est.ci_low < est.value < est.ci_high


def test_learner_agent_learns_from_matches_only():
    world = make_world(3)
    log, _ = make_log(world, 400, 4)
    ag = agents.UCB1()
    ag.reset(0)
    est = replay(log, ag)
    assert ag.counts.sum() == est.n_matches == est.n


# -- statistics ------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("kind, method", [("uniform", "uniform"), ("nonuniform", "rejection")])
def test_replay_unbiased_with_coverage_for_static_policy(kind, method):
    world = make_world(7)
    pol = StaticPolicy(np.random.default_rng(7).normal(size=(4, 3)))
    truth = static_truth(world, pol)
    errors, covered = [], 0
    root = np.random.default_rng(2024)
    for child in root.spawn(200):
        log, _ = make_log(world, 400, child, kind=kind)
        est = replay(log, pol, method=method, rng=child)
        errors.append(est.value - truth)
        covered += est.covers(truth)
    errors = np.array(errors)
    assert abs(errors.mean()) < 2.5 * errors.std(ddof=1) / np.sqrt(errors.size)
    assert stats.binomtest(covered, 200, 0.95).pvalue > 0.001


# -- degenerate and bad input ------------------------------------------------------------------

class Always:
    def __init__(self, a):
        self.a = a

    def act(self, observation):
        return self.a

    def update(self, observation, action, reward):
        pass


def test_no_match_is_nan_with_named_warning():
    world = make_world(4)
    log, _ = make_log(world, 50, 5)
    log = log.take(np.flatnonzero(log.action != 0))
    with pytest.warns(NoMatchWarning, match="no record"):
        est = replay(log, Always(0))
    assert np.isnan(est.value) and est.n == 0 and est.n_records == log.n_rounds


def small_log():
    return BanditLog(context=np.zeros((3, 1)), action=[0, 1, 1], reward=[1.0, 0.0, 1.0],
                     pscore=[0.5, 0.5, 0.5], n_actions=2,
                     available=[[True, True], [True, True], [True, True]])


@pytest.mark.parametrize("log, agent, kw, exc, msg", [
    pytest.param("not a log", Always(0), {}, TypeError, "BanditLog", id="log-type"),
    pytest.param(small_log(), object(), {}, TypeError, "act", id="agent-no-act"),
    pytest.param(small_log(), Always(0), {"method": "ips"}, ValueError, "method",
                 id="unknown-method"),
    pytest.param(BanditLog(context=np.zeros((2, 1)), action=[0, 1], reward=[1.0, 0.0],
                           pscore=[0.5, 0.3], n_actions=2), Always(0), {}, ValueError,
                 "rejection", id="non-uniform-pscore"),
    pytest.param(small_log(), Always(2), {}, ValueError, "record 0", id="out-of-range-action"),
    pytest.param(small_log(), Always(np.int64(-1)), {}, ValueError, "outside",
                 id="negative-action"),
    pytest.param(small_log(), Always("a"), {}, ValueError, "record 0", id="non-int-action"),
    pytest.param(BanditLog(context=np.zeros((0, 1)), action=np.zeros(0, int), reward=[],
                           pscore=[], n_actions=2), Always(0), {}, ValueError, "empty",
                 id="empty-log"),
    pytest.param(small_log(), Always(0), {"ci": 1.0}, ValueError, "ci", id="ci-1"),
])
def test_bad_input(log, agent, kw, exc, msg):
    with pytest.raises(exc, match=msg):
        replay(log, agent, **kw)


def test_unavailable_action_names_the_record():
    log = BanditLog(context=np.zeros((3, 1)), action=[0, 0, 0], reward=[1.0, 0.0, 1.0],
                    pscore=[0.5, 0.5, 1.0], n_actions=2,
                    available=[[True, True], [True, True], [True, False]])
    with pytest.raises(ValueError, match="record 2.*not available"):
        replay(log, Always(1))
