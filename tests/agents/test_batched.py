"""Batched twins: bit-for-bit identical to B single agents with the same generators."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agents
from tests.agents.test_bandits import FACTORIES, random_stream

STATE = {
    "uniform": (),
    "ucb1": ("_counts", "_sums"),
    "egreedy": ("_counts", "_sums"),
    "linucb": ("_Ainv", "_b", "_theta"),
    "thompson": ("_a", "_b"),
}


def singles(name, B, seed):
    out = []
    for i in range(B):
        a = FACTORIES[name]()
        a.reset(np.random.default_rng([seed, i]))
        out.append(a)
    return out


def assert_same_state(name, xs, ys):
    for a, b in zip(xs, ys, strict=True):
        for attr in STATE[name]:
            assert np.array_equal(getattr(a, attr), getattr(b, attr)), attr
        assert a._ptr == b._ptr and np.array_equal(a._buf, b._buf)


@pytest.mark.parametrize("name", list(FACTORIES))
@settings(max_examples=6)
@given(seed=st.integers(0, 2**32 - 1), B=st.integers(1, 9), K=st.integers(1, 5),
       warm=st.integers(0, 300))
def test_batched_equals_single_copies(name, seed, B, K, warm):
    T, d = 50, 3
    alone = singles(name, B, seed)
    twins = singles(name, B, seed)
    # warm-up: the copies start from agents that have already acted a different number of
    # times (their uniform buffers are at different positions)
    X0, av0, _ = random_stream(seed, 1, K, d)
    for i, (a, b) in enumerate(zip(alone, twins, strict=True)):
        for _ in range((warm * (i + 1)) % 301):
            a.act({"context": X0[0], "available": av0[0]})
            b.act({"context": X0[0], "available": av0[0]})
    batched = type(alone[0]).batch(twins)
    g = np.random.default_rng(seed)
    X = g.normal(size=(T, B, d))
    avail = g.random((T, B, K)) < 0.6
    avail[:, :, 0] |= ~avail.any(axis=2)
    R = (g.random((T, B, K)) < 0.4).astype(float)
    active = g.random((T, B)) < 0.7
    for t in range(T):
        want = np.array([a.act({"context": X[t, i], "available": avail[t, i]})
                         for i, a in enumerate(alone)])
        got = batched.act(X[t], avail[t])
        assert np.array_equal(got, want), t
        r = R[t, np.arange(B), got]
        for i, a in enumerate(alone):
            if active[t, i]:
                a.update({"context": X[t, i], "available": avail[t, i]}, int(want[i]), r[i])
        batched.update(active[t], X[t], got, r)
    if name != "thompson":
        assert_same_state(name, alone, batched.unbatch())


@pytest.mark.parametrize("name", ["uniform", "ucb1", "egreedy", "linucb"])
@settings(max_examples=8)
@given(seed=st.integers(0, 2**32 - 1), B=st.integers(1, 40), n=st.integers(0, 120),
       jitter=st.sampled_from([None, "float64", "float32 scaled"]), once=st.booleans())
def test_batched_replay_arrays_equals_single_replays(name, seed, B, n, jitter, once):
    T, K, d = 50, 4, 3
    X, avail, R = random_stream(seed, T, K, d)
    g = np.random.default_rng(seed)
    logged = np.array([g.choice(np.flatnonzero(row)) for row in avail], dtype=np.int64)
    reward = R[np.arange(T), logged]
    index = g.integers(0, T, size=(B, n))
    jit, scale = None, None
    if jitter == "float64":
        jit = g.normal(size=(B, n, d)) * 0.1
    elif jitter == "float32 scaled":  # BRED's way: float32 draws, scaled in float64
        jit = g.standard_normal((B, n, d), dtype=np.float32)
        scale = g.random(d) * 0.2
    eligible = g.random((B, n)) < 0.9
    ref = singles(name, B, seed)
    batched = type(ref[0]).batch(singles(name, B, seed))
    rev_b = np.zeros((B, T), dtype=bool)
    # reveal once: each source record index[i, j] updates copy i at most once
    got = batched.replay_arrays(X, avail, logged, reward, index=index, jitter=jit,
                                eligible=eligible, revealed=rev_b if once else None,
                                jitter_scale=scale)
    for i, a in enumerate(ref):
        # the single agent's replay_arrays has the same signature, without the copy axis
        rev = np.zeros(T, dtype=bool)
        want = a.replay_arrays(X, avail, logged, reward, index=index[i],
                               jitter=None if jit is None else jit[i], jitter_scale=scale,
                               eligible=eligible[i], revealed=rev if once else None)
        assert np.array_equal(got[i], want)
        assert np.array_equal(rev_b[i], rev)
    assert_same_state(name, ref, batched.unbatch())


@pytest.mark.parametrize("bad, msg", [
    ({"jitter_scale": 0.1}, "jitter_scale` must be 3 finite floats"),
    ({"jitter_scale": [0.1, np.nan, 0.1]}, "jitter_scale` must be 3 finite floats"),
    ({"jitter": np.zeros((2, 5, 2))}, r"jitter` must have shape \(B, n, d\) = \(2, 5, 3\)"),
    ({"reward": np.r_[np.zeros(9), np.nan]}, "reward` must be finite; got nan at index 9"),
])
def test_bad_replay_arrays_input_is_named_and_changes_nothing(bad, msg):
    X, avail, _ = random_stream(3, 10, 4, 3)
    args = {"context": X, "available": avail, "logged_action": np.zeros(10, np.int64),
            "reward": np.zeros(10), "index": np.zeros((2, 5), np.int64),
            "jitter": np.zeros((2, 5, 3), np.float32), "eligible": np.ones((2, 5), bool)}
    args.update(bad)
    batched = agents.LinUCB.batch(singles("linucb", 2, 0))
    batched.act(X[:2], avail[:2])
    before = batched.unbatch()
    with pytest.raises(ValueError, match=msg):
        batched.replay_arrays(**args)
    assert_same_state("linucb", before, batched.unbatch())
    assert np.array_equal(batched._ptr, [a._ptr for a in before])
    if "reward" in bad:  # the single agent's compiled replay checks rewards too
        single = singles("linucb", 1, 0)[0]
        with pytest.raises(ValueError, match=msg):
            single.replay_arrays(X, avail, np.zeros(10, np.int64), bad["reward"])


def test_linucb_batched_views_have_b_k_d_d_shape():
    bt = agents.LinUCB.batch([agents.LinUCB() for _ in range(3)])
    bt.act(np.zeros((3, 2)), np.ones((3, 4), bool))
    assert bt.Ainv.shape == (3, 4, 2, 2) and bt.theta.shape == (3, 4, 2)
    assert np.array_equal(bt.Ainv[1, 2], np.eye(2))


# -- bad input ------------------------------------------------------------------------------

def test_batch_needs_one_class():
    with pytest.raises(TypeError, match="must all be UCB1"):
        agents.UCB1.batch([agents.UCB1(), agents.LinUCB()])


def test_batch_needs_equal_hyper_parameters():
    with pytest.raises(ValueError, match="hyper-parameters"):
        agents.UCB1.batch([agents.UCB1(1.0), agents.UCB1(2.0)])


def test_batch_needs_agents():
    with pytest.raises(ValueError, match="at least one"):
        agents.LinUCB.batch([])


def test_batched_no_available_arm_names_the_copy():
    bt = agents.UCB1.batch([agents.UCB1() for _ in range(3)])
    avail = np.ones((3, 4), bool)
    avail[2] = False
    with pytest.raises(ValueError, match="copy 2"):
        bt.act(np.zeros((3, 1)), avail)


def test_batched_update_checks_actions():
    bt = agents.LinUCB.batch([agents.LinUCB() for _ in range(2)])
    bt.act(np.zeros((2, 2)), np.ones((2, 3), bool))
    with pytest.raises(ValueError, match="copy 1"):
        bt.update(np.array([True, True]), np.zeros((2, 2)), np.array([0, 5]), np.zeros(2))


def test_batch_needs_agents_on_the_same_problem():
    a, b = agents.UCB1(), agents.UCB1()
    a.act({"context": np.zeros(1), "available": np.ones(2, bool)})
    b.act({"context": np.zeros(1), "available": np.ones(3, bool)})
    with pytest.raises(ValueError, match="same numbers of arms"):
        agents.UCB1.batch([a, b])


# -- compiled LinUCB step: generated kernels against their loop versions ---------------------

@settings(max_examples=10)
@given(seed=st.integers(0, 2**32 - 1), B=st.integers(1, 12), K=st.integers(1, 4),
       d=st.integers(1, 6))
def test_linucb_generated_update_equals_loop_update(seed, B, K, d):
    from agents import _kernels as kn
    g = np.random.default_rng(seed)
    M = g.normal(size=(K, d, d, B))
    A = np.einsum("kijc,kljc->kilc", M, M) + np.eye(d)[None, :, :, None]
    b, th = g.normal(size=(K, d, B)), g.normal(size=(K, d, B))
    X = g.normal(size=(B, d))
    active = g.random(B) < 0.7
    action = g.integers(0, K, B)
    reward = g.normal(size=B)
    want = [A.copy(), b.copy(), th.copy()]
    kn.linucb_update_lanes.py_func(*want, active, X, action, reward)
    got = [A.copy(), b.copy(), th.copy()]
    assert kn.linucb_update_lanes_kernel(d)(*got, active, X, action, reward) == 0
    kn.linucb_mirror_lanes(got[0])  # the generated update keeps the upper triangle only
    assert kn.linucb_update_lanes_checked(*[A.copy(), b.copy(), th.copy()], active, X,
                                          action, reward) == 0
    for w, v in zip(want, got, strict=True):
        assert np.array_equal(w, v)


def test_linucb_large_d_uses_the_loop_update():
    from agents import _kernels as kn
    d, K, B = kn._UNROLL_MAX + 1, 2, 3
    assert kn.linucb_update_lanes_kernel(d) is kn.linucb_update_lanes_checked
    g = np.random.default_rng(4)
    state = [np.broadcast_to(np.eye(d)[None, :, :, None], (K, d, d, B)).copy(),
             np.zeros((K, d, B)), np.zeros((K, d, B))]
    X, action = g.normal(size=(B, d)), np.array([0, 1, 1])
    want = [s.copy() for s in state]
    kn.linucb_update_lanes.py_func(*want, np.ones(B, bool), X, action, np.ones(B))
    assert kn.linucb_update_lanes_checked(*state, np.ones(B, bool), X, action, np.ones(B)) == 0
    for w, v in zip(want, state, strict=True):
        assert np.array_equal(w, v)
    assert kn.linucb_update_lanes_checked(*state, np.ones(B, bool), X, action + 1,
                                          np.ones(B)) == 1


def test_linucb_batched_refills_buffers_as_single_copies():
    # copy 1 starts one uniform short of a refill: steps 0 and 1 cross its block boundary
    alone, twins = singles("linucb", 3, 9), singles("linucb", 3, 9)
    for a, b in zip(alone, twins, strict=True):
        a._take(1), b._take(1)
    for group in (alone, twins):
        group[1]._take(254)
    batched = agents.LinUCB.batch(twins)
    X = np.random.default_rng(9).normal(size=(300, 3, 2))
    for t in range(300):
        got = batched.act(X[t], np.ones((3, 4), bool))
        want = [a.act({"context": X[t, i], "available": np.ones(4, bool)})
                for i, a in enumerate(alone)]
        assert np.array_equal(got, want), t
    assert_same_state("linucb", alone, batched.unbatch())


def test_linucb_batched_no_available_arm_consumes_nothing():
    bt = agents.LinUCB.batch(singles("linucb", 3, 1))
    bt.act(np.zeros((3, 2)), np.ones((3, 4), bool))
    ptr = bt._ptr.copy()
    avail = np.ones((3, 4), bool)
    avail[1] = False
    with pytest.raises(ValueError, match="copy 1"):
        bt.act(np.zeros((3, 2)), avail)
    assert np.array_equal(bt._ptr, ptr)


def test_linucb_batched_bad_update_changes_nothing():
    bt = agents.LinUCB.batch(singles("linucb", 3, 1))
    bt.act(np.zeros((3, 2)), np.ones((3, 4), bool))
    before = [bt._Ainv.copy(), bt._b.copy(), bt._theta.copy()]
    ones, X = np.ones(3, bool), np.ones((3, 2))
    with pytest.raises(ValueError, match="`reward` must be finite.*copy 2"):
        bt.update(ones, X, np.array([0, 1, 2]), np.array([1.0, 0.0, np.nan]))
    with pytest.raises(ValueError, match=r"`action` must be in \[0, 4\).*copy 0"):
        bt.update(ones, X, np.array([-1, 1, 2]), np.zeros(3))
    with pytest.raises(ValueError, match="shape"):
        bt.update(ones, np.ones((3, 5)), np.zeros(3, int), np.zeros(3))
    for w, v in zip(before, (bt._Ainv, bt._b, bt._theta), strict=True):
        assert np.array_equal(w, v)
    # an inactive copy may carry any action and reward
    bt.update(np.array([True, False, True]), X, np.array([0, 99, 2]),
              np.array([1.0, np.inf, 0.0]))
    assert np.array_equal(bt._Ainv[:, :, :, 1], before[0][:, :, :, 1])
    assert not np.array_equal(bt._Ainv[0, :, :, 0], before[0][0, :, :, 0])


def test_linucb_batched_steps_then_replay_equal_single_copies():
    # update leaves the lower triangles stale; the Ainv view and the replay restore them
    B, T, K, d = 4, 30, 3, 3
    alone, batched = singles("linucb", B, 3), agents.LinUCB.batch(singles("linucb", B, 3))
    g = np.random.default_rng(3)
    X, R = g.normal(size=(T, B, d)), g.random((T, B))
    avail = np.ones(K, bool)
    for t in range(T):
        got = batched.act(X[t], np.ones((B, K), bool))
        for i, a in enumerate(alone):
            obs = {"context": X[t, i], "available": avail}
            assert a.act(obs) == got[i]
            a.update(obs, int(got[i]), R[t, i])
        batched.update(np.ones(B, bool), X[t], got, R[t])
    for i, a in enumerate(alone):
        assert np.array_equal(batched.Ainv[i], a._Ainv)
    Xr, av = g.normal(size=(T, d)), np.ones((T, K), bool)
    logged, reward = g.integers(0, K, T), g.random(T)
    index, eligible = g.integers(0, T, size=(B, 20)), np.ones((B, 20), bool)
    batched.update(np.ones(B, bool), X[0], np.zeros(B, int), R[0])  # stale again
    for i, a in enumerate(alone):
        a.update({"context": X[0, i], "available": avail}, 0, R[0, i])
    got = batched.replay_arrays(Xr, av, logged, reward, index=index, eligible=eligible)
    for i, a in enumerate(alone):
        idx = index[i]
        want = a.replay_arrays(Xr[idx], av[idx], logged[idx], reward[idx],
                               eligible=eligible[i])
        assert np.array_equal(got[i], want)
    assert_same_state("linucb", alone, batched.unbatch())
