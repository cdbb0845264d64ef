"""Bandit policies: protocol properties, kernels against their Python versions, bad input."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agents
from agents import _kernels as kn

FACTORIES = {
    "uniform": lambda: agents.UniformRandom(),
    "ucb1": lambda: agents.UCB1(alpha=0.7),
    "linucb": lambda: agents.LinUCB(alpha=0.5, ridge=2.0),
    "egreedy": lambda: agents.EpsilonGreedy(epsilon=0.3),
    "thompson": lambda: agents.ThompsonSampling(),
}
WITH_PROBS = ["uniform", "ucb1", "linucb", "egreedy"]
COMPILED = ["uniform", "ucb1", "linucb", "egreedy"]


def random_stream(seed, T, K, d, p_avail=0.7):
    g = np.random.default_rng(seed)
    X = g.normal(size=(T, d))
    avail = g.random((T, K)) < p_avail
    avail[np.arange(T), g.integers(0, K, T)] = True  # at least one arm
    R = (g.random((T, K)) < 0.3 + 0.4 * (np.arange(K) / K)).astype(float)
    return X, avail, R


def run(agent, X, avail, R, learn):
    acts = []
    for t in range(X.shape[0]):
        obs = {"context": X[t], "available": avail[t]}
        a = agent.act(obs)
        acts.append(a)
        if learn[t]:
            agent.update(obs, a, R[t, a])
    return np.array(acts)


@pytest.mark.parametrize("name", list(FACTORIES))
@settings(max_examples=15)
@given(seed=st.integers(0, 2**32 - 1), K=st.integers(1, 6), d=st.integers(1, 4))
def test_act_returns_available_arm_and_same_seed_same_actions(name, seed, K, d):
    X, avail, R = random_stream(seed, 60, K, d)
    runs = []
    for _ in range(2):
        ag = FACTORIES[name]()
        ag.reset(seed)
        runs.append(run(ag, X, avail, R, np.ones(60, bool)))
    assert np.array_equal(runs[0], runs[1])
    assert np.all(avail[np.arange(60), runs[0]])


@pytest.mark.parametrize("name", WITH_PROBS)
@settings(max_examples=15)
@given(seed=st.integers(0, 2**32 - 1), K=st.integers(1, 6))
def test_action_probabilities_are_a_distribution_on_available_arms(name, seed, K):
    X, avail, R = random_stream(seed, 40, K, 3)
    ag = FACTORIES[name]()
    ag.reset(seed)
    for t in range(40):
        obs = {"context": X[t], "available": avail[t]}
        p = ag.action_probabilities(obs)
        assert p.shape == (K,)
        assert np.all(p >= 0) and np.isclose(p.sum(), 1.0)
        assert np.all(p[~avail[t]] == 0)
        a = ag.act(obs)
        assert p[a] > 0  # act only plays arms the policy gives mass to
        ag.update(obs, a, R[t, a])


def test_uniform_random_probabilities_exact():
    ag = agents.UniformRandom()
    ag.reset(0)
    p = ag.action_probabilities({"context": np.zeros(2), "available": np.array([1, 0, 1, 1], bool)})
    assert np.array_equal(p, np.array([1, 0, 1, 1]) / 3)


def test_uniform_random_frequencies_match_probabilities():
    ag = agents.UniformRandom()
    ag.reset(1)
    avail = np.array([True, False, True, True, False])
    obs = {"context": np.zeros(1), "available": avail}
    counts = np.bincount([ag.act(obs) for _ in range(6000)], minlength=5)
    assert counts[1] == counts[4] == 0
    assert np.all(np.abs(counts[avail] / 6000 - 1 / 3) < 0.03)


@settings(max_examples=25)
@given(seed=st.integers(0, 2**32 - 1), K=st.integers(1, 12), alpha=st.floats(0, 3))
def test_ucb1_plays_every_arm_once_before_repeating(seed, K, alpha):
    g = np.random.default_rng(seed)
    ag = agents.UCB1(alpha)
    ag.reset(seed)
    obs = {"context": np.zeros(2), "available": np.ones(K, bool)}
    first = []
    for _ in range(K):
        a = ag.act(obs)
        first.append(a)
        ag.update(obs, a, float(g.random()))
    assert sorted(first) == list(range(K))


def test_ucb1_ties_broken_at_random_across_seeds():
    firsts = set()
    for s in range(40):
        ag = agents.UCB1()
        ag.reset(s)
        firsts.add(ag.act({"context": np.zeros(1), "available": np.ones(4, bool)}))
    assert firsts == {0, 1, 2, 3}


@settings(max_examples=20)
@given(seed=st.integers(0, 2**32 - 1), K=st.integers(2, 6), d=st.integers(2, 5))
def test_linucb_alpha0_noiseless_converges_to_best_arm(seed, K, d):
    # contexts x = [1, z], z in [0, 1]^(d-1), so x.x' >= 1: an arm's ridge prediction has the
    # sign of its rewards. Best arm: rewards > 0; the others: rewards < 0.
    g = np.random.default_rng(seed)
    best = int(g.integers(K))
    slopes = g.uniform(0, 0.1, size=(K, d - 1))
    icpt = -g.uniform(0.3, 1.0, size=K)
    icpt[best] = g.uniform(0.1, 1.0)
    ag = agents.LinUCB(alpha=0.0)
    ag.reset(seed)
    acts = []
    for _ in range(300):
        x = np.concatenate([[1.0], g.random(d - 1)])
        obs = {"context": x, "available": np.ones(K, bool)}
        a = ag.act(obs)
        acts.append(a)
        ag.update(obs, a, float(icpt[a] + slopes[a] @ x[1:]))
    assert all(a == best for a in acts[-200:])


def test_linucb_state_equals_direct_ridge_solution():
    g = np.random.default_rng(3)
    K, d, ridge = 3, 4, 1.5
    ag = agents.LinUCB(alpha=1.0, ridge=ridge)
    ag.reset(0)
    Xs = {k: [] for k in range(K)}
    rs = {k: [] for k in range(K)}
    for _ in range(200):
        x = g.normal(size=d)
        obs = {"context": x, "available": np.ones(K, bool)}
        a = ag.act(obs)
        r = float(g.random())
        ag.update(obs, a, r)
        Xs[a].append(x)
        rs[a].append(r)
    for k in range(K):
        Xk = np.array(Xs[k]).reshape(-1, d)
        A = ridge * np.eye(d) + Xk.T @ Xk
        np.testing.assert_allclose(ag.theta[k], np.linalg.solve(A, Xk.T @ np.array(rs[k])),
                                   rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(ag._Ainv[k], np.linalg.inv(A), rtol=1e-8, atol=1e-10)
        assert np.array_equal(ag._Ainv[k], ag._Ainv[k].T)  # kept exactly symmetric


def test_linucb_scores_equal_formula():
    g = np.random.default_rng(5)
    ag = agents.LinUCB(alpha=0.8)
    ag.reset(1)
    K, d = 4, 3
    for _ in range(50):
        x = g.normal(size=d)
        obs = {"context": x, "available": np.ones(K, bool)}
        ag.update(obs, ag.act(obs), float(g.random()))
    x = g.normal(size=d)
    want = np.array([ag.theta[k] @ x + 0.8 * np.sqrt(x @ ag._Ainv[k] @ x) for k in range(K)])
    np.testing.assert_allclose(ag._scores(x, np.ones(K, bool)), want, rtol=1e-12)


# -- kernels against their Python versions -------------------------------------------------

@settings(max_examples=40)
@given(seed=st.integers(0, 2**32 - 1), K=st.integers(1, 8), ties=st.booleans())
def test_pick_kernel_equals_python(seed, K, ties):
    g = np.random.default_rng(seed)
    score = g.integers(0, 3, K).astype(float) if ties else g.normal(size=K)
    avail = g.random(K) < 0.6
    u = g.random()
    got = kn.pick(score, avail, u)
    assert got == kn.pick.py_func(score, avail, u)
    if avail.any():
        best = score[avail].max()
        tied = np.flatnonzero(avail & (score == best))
        assert got == tied[int(u * tied.size)]
    else:
        assert got == -1


@settings(max_examples=30)
@given(seed=st.integers(0, 2**32 - 1), K=st.integers(1, 5), d=st.integers(1, 5))
def test_linucb_kernels_equal_python(seed, K, d):
    g = np.random.default_rng(seed)
    M = g.normal(size=(K, d, d))
    Ainv = np.linalg.inv(M @ M.transpose(0, 2, 1) + np.eye(d))
    Ainv = (Ainv + Ainv.transpose(0, 2, 1)) / 2
    b = g.normal(size=(K, d))
    theta = np.einsum("kij,kj->ki", Ainv, b)
    x = g.normal(size=d)
    avail = g.random(K) < 0.7
    avail[0] = True
    s1, s2 = np.empty(K), np.empty(K)
    a1 = kn.linucb_act_one(Ainv, theta, 0.6, x, avail, 0.4, s1, np.empty(d))
    a2 = kn.linucb_act_one.py_func(Ainv, theta, 0.6, x, avail, 0.4, s2, np.empty(d))
    assert a1 == a2 and np.array_equal(s1, s2)
    st1 = [Ainv.copy(), b.copy(), theta.copy()]
    st2 = [Ainv.copy(), b.copy(), theta.copy()]
    kn.linucb_update_one(*st1, x, a1, 0.7, np.empty(d))
    kn.linucb_update_one.py_func(*st2, x, a1, 0.7, np.empty(d))
    for p, q in zip(st1, st2, strict=True):
        assert np.array_equal(p, q)


@pytest.mark.parametrize("name", COMPILED)
@settings(max_examples=10)
@given(seed=st.integers(0, 2**32 - 1), K=st.integers(1, 5), T=st.integers(1, 300),
       once=st.booleans(), walk=st.sampled_from(["all", "index", "index+jitter"]))
def test_replay_arrays_equals_act_update_loop(name, seed, K, T, once, walk):
    X, avail, R = random_stream(seed, T, K, 3)
    g = np.random.default_rng(seed + 1)
    logged = np.array([g.choice(np.flatnonzero(row)) for row in avail], dtype=np.int64)
    reward = R[np.arange(T), logged]
    # a walk with repeated records (reveal once then matters), rejected steps, BRED's jitter
    n = T if walk == "all" else int(g.integers(0, 2 * T + 1))
    index = None if walk == "all" else g.integers(0, T, n)
    eligible = g.random(n) < 0.8
    jitter = scale = None
    if walk == "index+jitter":
        jitter = g.standard_normal((n, 3), dtype=np.float32)
        scale = g.random(3) * 0.2
    fast = FACTORIES[name]()
    fast.reset(seed)
    rev_fast = np.zeros(T, dtype=bool) if once else None
    got = fast.replay_arrays(X, avail, logged, reward, index=index, eligible=eligible,
                             jitter=jitter, jitter_scale=scale, revealed=rev_fast)
    slow = FACTORIES[name]()
    slow.reset(seed)
    rev_slow = np.zeros(T, dtype=bool)
    want = []
    for j in range(n):
        r = j if index is None else index[j]
        x = X[r] if jitter is None else X[r] + jitter[j].astype(np.float64) * scale
        obs = {"context": x, "available": avail[r]}
        a = slow.act(obs)
        want.append(a)
        if a == logged[r] and eligible[j]:
            if once:
                if rev_slow[r]:
                    continue
                rev_slow[r] = True
            slow.update(obs, a, reward[r])
    assert np.array_equal(got, np.array(want, dtype=np.int64).reshape(n))
    if once:
        assert np.array_equal(rev_fast, rev_slow)
    # same state afterwards, generator included: the next actions agree
    if T:
        obs = {"context": X[0], "available": avail[0]}
        assert [fast.act(obs) for _ in range(5)] == [slow.act(obs) for _ in range(5)]


def test_generator_random_streams_concatenate():
    # the buffer design relies on it: random(a) then random(b) == random(a + b)
    g1, g2 = np.random.default_rng(11), np.random.default_rng(11)
    a = np.concatenate([g1.random(3), g1.random(300), [g1.random()], g1.random(7)])
    assert np.array_equal(a, g2.random(311))


# -- bad input ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(FACTORIES))
def test_no_available_arm_is_an_error(name):
    ag = FACTORIES[name]()
    ag.reset(0)
    with pytest.raises(ValueError, match="no available arm"):
        ag.act({"context": np.zeros(2), "available": np.zeros(3, bool)})


@pytest.mark.parametrize("name", list(FACTORIES))
def test_shape_change_is_an_error(name):
    ag = FACTORIES[name]()
    ag.reset(0)
    ag.act({"context": np.zeros(2), "available": np.ones(3, bool)})
    with pytest.raises(ValueError, match="3 arms"):
        ag.act({"context": np.zeros(2), "available": np.ones(4, bool)})


@pytest.mark.parametrize("name", list(FACTORIES))
def test_update_checks_action_and_reward(name):
    ag = FACTORIES[name]()
    ag.reset(0)
    obs = {"context": np.zeros(2), "available": np.ones(3, bool)}
    ag.act(obs)
    with pytest.raises(ValueError, match="`action` must be in"):
        ag.update(obs, 3, 1.0)
    with pytest.raises(TypeError, match="`action` must be an int"):
        ag.update(obs, 1.5, 1.0)
    with pytest.raises(ValueError, match="`reward` must be finite"):
        ag.update(obs, 0, float("nan"))


@pytest.mark.parametrize("make, exc, msg", [
    pytest.param(lambda: agents.UCB1(-1.0), ValueError, "alpha", id="ucb1-negative-alpha"),
    pytest.param(lambda: agents.LinUCB(ridge=0.0), ValueError, "ridge", id="linucb-ridge-0"),
    pytest.param(lambda: agents.LinUCB("1"), TypeError, "alpha", id="linucb-alpha-str"),
    pytest.param(lambda: agents.EpsilonGreedy(1.5), ValueError, "epsilon", id="eps>1"),
    pytest.param(lambda: agents.ThompsonSampling(a0=0), ValueError, "a0", id="ts-a0-0"),
])
def test_bad_hyper_parameters(make, exc, msg):
    with pytest.raises(exc, match=msg):
        make()


def test_thompson_rejects_reward_outside_unit_interval():
    ag = agents.ThompsonSampling()
    ag.reset(0)
    obs = {"context": np.zeros(1), "available": np.ones(2, bool)}
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        ag.update(obs, ag.act(obs), 2.0)


def test_observation_must_be_a_dict_with_keys():
    ag = agents.UCB1()
    ag.reset(0)
    with pytest.raises(TypeError, match="observation"):
        ag.act(np.zeros(3))
    with pytest.raises(ValueError, match="available"):
        ag.act({"context": np.zeros(3)})


@settings(max_examples=20)
@given(seed=st.integers(0, 2**32 - 1), K=st.integers(1, 4), d=st.integers(1, 6),
       G=st.integers(1, 9))
def test_generated_lane_scores_equal_single_copy_scores(seed, K, d, G):
    # the unrolled lane kernel must reproduce linucb_act_one's scores bit for bit
    g = np.random.default_rng(seed)
    M = g.normal(size=(G, K, d, d))
    A = np.linalg.inv(M @ M.transpose(0, 1, 3, 2) + np.eye(d))
    A = (A + A.transpose(0, 1, 3, 2)) / 2
    th = g.normal(size=(G, K, d))
    x = g.normal(size=(G, d))
    x[0, 0] = -0.0 if d > 0 else x[0, 0]
    score_t = np.empty((K, G))
    kn.linucb_scores_kernel(d)(np.ascontiguousarray(np.moveaxis(A, 0, -1)),
                               np.ascontiguousarray(np.moveaxis(th, 0, -1)), 0.9,
                               np.ascontiguousarray(x.T), score_t)
    for c in range(G):
        s = np.empty(K)
        kn.linucb_act_one(A[c], th[c], 0.9, x[c], np.ones(K, bool), 0.5, s, np.empty(d))
        assert np.array_equal(s, score_t[:, c])
