"""Ground truth of the bandit test bed and the logging helper."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simulator
from simulator import LinearBanditConfig, collect_log, online_value, static_policy_value
from simulator import _bandit as B
from simulator._logging import _collect_env

DYN = LinearBanditConfig(n_arms=40, n_universal=16, lifetime=60, n_alive=6, half_life=30.0)


# -- tiny agents defined here (simulator must not import agents) ----------------------------


class Greedy:
    """Epsilon-greedy on per-arm means, its own generator; has an exact batched twin."""

    def __init__(self, rng, eps=0.2):
        self.rng, self.eps = rng, eps
        self.n = self.s = None

    def act(self, obs):
        avail = np.asarray(obs["available"], bool)
        if self.n is None:
            self.n, self.s = np.zeros(avail.size), np.zeros(avail.size)
        u, v = self.rng.random(2)
        idx = np.flatnonzero(avail)
        if u < self.eps:
            return int(idx[int(v * idx.size)])
        mean = np.where(self.n > 0, self.s / np.maximum(self.n, 1), 1.0)
        return int(idx[np.argmax(mean[idx])])

    def update(self, obs, action, reward):
        self.n[action] += 1
        self.s[action] += reward

    @classmethod
    def batch(cls, agents):
        return _GreedyBatch(agents)


class _GreedyBatch:
    def __init__(self, agents):
        self.agents = agents
        self.n = self.s = None

    def act(self, context, available):
        B, K = available.shape
        if self.n is None:
            self.n, self.s = np.zeros((B, K)), np.zeros((B, K))
        out = np.empty(B, np.int64)
        for b, ag in enumerate(self.agents):   # same draws, same order as the single agent
            u, v = ag.rng.random(2)
            idx = np.flatnonzero(available[b])
            if u < ag.eps:
                out[b] = idx[int(v * idx.size)]
            else:
                mean = np.where(self.n[b] > 0, self.s[b] / np.maximum(self.n[b], 1), 1.0)
                out[b] = idx[np.argmax(mean[idx])]
        return out

    def update(self, active, context, action, reward):
        rows = np.flatnonzero(active)
        self.n[rows, action[rows]] += 1
        self.s[rows, action[rows]] += reward[rows]


class Plain(Greedy):
    batch = None  # no batched twin: online_value must loop


class FixedArm:
    def __init__(self, arm):
        self.arm = arm

    def act(self, obs):
        return self.arm

    def update(self, obs, action, reward):
        pass


def linear_greedy_probs(context, available):
    """A deterministic static policy: argmax of a fixed score among available arms."""
    score = context @ np.linspace(-1, 1, context.shape[1] * available.shape[1]).reshape(
        context.shape[1], available.shape[1])
    score = np.where(available, score, -np.inf)
    p = np.zeros(available.shape)
    p[np.arange(len(p)), score.argmax(axis=1)] = 1.0
    return p


class ProbsPolicy:
    def action_probabilities(self, obs):
        return linear_greedy_probs(obs["context"][None], np.asarray(obs["available"])[None])[0]


# -- static policies ------------------------------------------------------------------------


def test_uniform_and_constant_policies_match_the_closed_form():
    """No clipping with the default weights, so E[p_a(x)] = b_a + w_a . E[x] exactly."""
    c = LinearBanditConfig()
    tab = B.arm_table(c)
    ex = np.r_[1.0, np.full(c.dim - 1, c.context_p)]
    arm_means = tab.base + tab.weights @ ex
    assert static_policy_value(c) == pytest.approx(arm_means.mean(), abs=1e-14)
    for a in range(c.n_arms):
        onehot = lambda x, av, a=a: np.tile(np.eye(c.n_arms)[a], (len(x), 1))  # noqa: E731
        assert static_policy_value(c, onehot) == pytest.approx(arm_means[a], abs=1e-14)
    assert simulator.oracle_value(c) > arm_means.max()


@settings(max_examples=20)
@given(p=st.floats(0.05, 0.95), seed=st.integers(0, 100), dim=st.integers(2, 8))
def test_static_value_equals_direct_sum_over_atoms(p, seed, dim):
    c = LinearBanditConfig(dim=dim, context_p=p, arm_seed=seed, n_nonzero=1,
                           weight=(-0.5, 0.9))
    # obviously correct: enumerate atoms with itertools, probability by product
    import itertools
    total = 0.0
    for bits in itertools.product([0.0, 1.0], repeat=dim - 1):
        x = np.array([1.0, *bits])
        prob = np.prod([p if b else 1 - p for b in bits])
        pi = linear_greedy_probs(x[None], np.ones((1, c.n_arms), bool))[0]
        total += prob * pi @ B.true_ctr(c, x, 0)
    assert static_policy_value(c, linear_greedy_probs) == pytest.approx(total, abs=1e-12)


def test_policy_object_and_callable_agree():
    c = DYN
    v1 = static_policy_value(c, linear_greedy_probs, ticks=[0, 17, 59])
    v2 = static_policy_value(c, ProbsPolicy(), ticks=[0, 17, 59])
    assert v1 == pytest.approx(v2, abs=1e-14)


@pytest.mark.slow
def test_static_value_matches_monte_carlo_on_logs():
    c = LinearBanditConfig()
    log, truth = collect_log(c, 200_000, rng=5)
    pi = linear_greedy_probs(log.context, log.available)
    per_record = np.sum(pi * truth.expected_reward, axis=1)
    se = per_record.std() / np.sqrt(len(per_record))
    assert abs(per_record.mean() - static_policy_value(c, linear_greedy_probs)) < 4 * se
    assert truth.policy_value(pi) == pytest.approx(per_record.mean())


def test_static_value_rejects_bad_policies_and_ticks():
    with pytest.raises(ValueError, match="sum to 1"):
        static_policy_value(LinearBanditConfig(), lambda x, a: np.full(a.shape, 0.5))
    with pytest.raises(ValueError, match="unavailable action"):
        static_policy_value(DYN, lambda x, a: np.full(a.shape, 1 / a.shape[1]))
    with pytest.raises(ValueError, match="`ticks` must be < the horizon"):
        static_policy_value(DYN, ticks=DYN.horizon)
    with pytest.raises(TypeError, match="`policy`"):
        static_policy_value(DYN, policy=3)


# -- online value ---------------------------------------------------------------------------


def test_online_batched_equals_loop_and_is_reproducible():
    c = LinearBanditConfig()
    kw = dict(n_runs=6, rng=11)
    vb = online_value(c, Greedy, 300, method="batched", **kw)
    vl = online_value(c, Greedy, 300, method="loop", **kw)
    np.testing.assert_array_equal(vb.curve, vl.curve)
    np.testing.assert_array_equal(vb.curve_stderr, vl.curve_stderr)
    va = online_value(c, Plain, 300, **kw)  # auto falls back to the loop
    np.testing.assert_array_equal(va.curve, vl.curve)
    assert vl.value == vl.curve[-1] and vl.stderr == vl.curve_stderr[-1] and vl.T == 300
    with pytest.raises(ValueError, match="batch"):
        online_value(c, Plain, 10, method="batched", **kw)


def test_online_run_sees_the_env_episode():
    """The loop's run equals stepping LinearBanditEnv with the same episode key."""
    c = DYN
    # rebuild run 0 by hand: child 0 of rng.spawn(1), split into (env, agent) generators
    env_gen, agent_gen = np.random.default_rng(4).spawn(1)[0].spawn(2)
    key = B.episode_key(env_gen)
    agent = Greedy(agent_gen)
    env = simulator.LinearBanditEnv(c)
    env.reset(seed=0)
    env._key, env._click_skey = key, B._stream_key(key, B._STREAM_CLICK)
    env._fill_block(0)
    obs = env._obs()
    exp = []
    for _ in range(50):
        a = agent.act(obs)
        nobs, r, *_, info = env.step(a)
        agent.update(obs, a, r)
        exp.append(info["expected_reward"])
        obs = nobs
    with pytest.warns(simulator._truth.DegenerateTruthWarning):
        v = online_value(c, Greedy, 50, n_runs=1, rng=4)
    np.testing.assert_allclose(v.curve, np.cumsum(exp) / np.arange(1, 51), rtol=0, atol=1e-15)
    assert np.isnan(v.stderr)


def test_online_value_with_a_start_tick():
    kw = dict(n_runs=5, rng=3)
    late = online_value(DYN, Greedy, 40, start=200, method="loop", **kw)
    np.testing.assert_array_equal(
        late.curve, online_value(DYN, Greedy, 40, start=200, method="batched", **kw).curve)
    # a static agent's value from tick 200 is its static value over ticks 200..239
    arm = int(np.flatnonzero(B.alive(DYN, 200) & B.alive(DYN, 239))[0])
    v = online_value(DYN, lambda g: FixedArm(arm), 40, start=200, n_runs=200, rng=1)
    truth = static_policy_value(DYN, lambda x, a: np.tile(np.eye(DYN.n_arms)[arm], (len(x), 1)),
                                ticks=np.arange(200, 240))
    assert abs(v.value - truth) < 4 * v.stderr + 1e-12


@pytest.mark.slow
def test_online_value_of_static_agents_equals_static_value():
    c = DYN
    T = 40
    arm = 4  # a specific arm (context-dependent CTR), alive on [-10, 50)
    assert not B.arm_table(c).universal[arm]
    v = online_value(c, lambda g: FixedArm(arm), T, n_runs=300, rng=2)
    truth = static_policy_value(c, lambda x, a: np.tile(np.eye(c.n_arms)[arm], (len(x), 1)),
                                ticks=np.arange(T))
    assert 0 < v.stderr and abs(v.value - truth) < 4 * v.stderr


def test_online_rejects_bad_agents_and_arguments():
    with pytest.raises(ValueError, match=r"run 0 returned action 12 at step 0"):
        online_value(LinearBanditConfig(), lambda g: FixedArm(12), 5, n_runs=2, rng=0)
    with pytest.raises(ValueError, match="not available"):
        online_value(DYN, lambda g: FixedArm(39), 5, n_runs=2, rng=0)
    with pytest.raises(ValueError, match="`start \\+ T` must be <= the horizon"):
        online_value(DYN, Greedy, DYN.horizon + 1)
    with pytest.raises(ValueError, match="`start` must be >= 0; got -1"):
        online_value(DYN, Greedy, 5, start=-1)
    with pytest.raises(ValueError, match="`n_runs` must be >= 1; got 0"):
        online_value(DYN, Greedy, 5, n_runs=0)
    with pytest.raises(TypeError, match="`make_agent` must be callable"):
        online_value(DYN, 3, 5)


# -- logging helper -------------------------------------------------------------------------


@pytest.mark.parametrize("config", [LinearBanditConfig(), DYN], ids=["static", "dynamic"])
def test_collect_log_uniform(config):
    n = min(2000, config.horizon or 2000)
    log, truth = collect_log(config, n, rng=3)
    again, _ = collect_log(config, n, rng=3)
    for name in ("context", "action", "reward", "pscore", "available"):
        np.testing.assert_array_equal(getattr(log, name), getattr(again, name))
    np.testing.assert_allclose(log.pscore, 1 / log.available.sum(axis=1))
    assert log.available[np.arange(n), log.action].all()
    # truth: expected rewards of every action, clicks drawn from the logged action's
    P = B.true_ctr(config, log.context, log.tick)
    np.testing.assert_array_equal(truth.expected_reward, P)
    key = log.metadata["episode_key"]
    clicks = B.click_uniforms(key, log.tick, log.action) < P[np.arange(n), log.action]
    np.testing.assert_array_equal(log.reward, clicks)
    assert log.metadata["config_hash"] and "recloop_version" in log.metadata
    obp = log.to_obp(expected_reward=truth.expected_reward)
    assert obp["expected_reward"].shape == (n, config.n_arms)


@pytest.mark.slow
def test_uniform_log_mean_reward_is_the_uniform_value():
    c = LinearBanditConfig()
    log, truth = collect_log(c, 100_000, rng=8)
    se = log.reward.std() / np.sqrt(log.n_rounds)
    assert abs(log.reward.mean() - static_policy_value(c)) < 4 * se


def test_collect_log_with_a_policy():
    log, truth = collect_log(DYN, 300, policy=linear_greedy_probs, rng=1)
    np.testing.assert_array_equal(log.pscore, 1.0)
    np.testing.assert_array_equal(
        log.action, linear_greedy_probs(log.context, log.available).argmax(axis=1))
    log2, _ = collect_log(DYN, 300, policy=ProbsPolicy(), rng=1)
    np.testing.assert_array_equal(log.action, log2.action)
    assert truth.regime[0] == 0 and truth.regime[-1] == B.regime(DYN, 299)


def test_collect_log_generic_env_path():
    env = simulator.LinearBanditEnv(DYN)
    log, truth = _collect_env(env, 55, None, np.random.default_rng(0))
    ticks = np.arange(55)
    np.testing.assert_array_equal(log.context, B.contexts(DYN, env.key, ticks))
    P = B.true_ctr(DYN, log.context, ticks)
    np.testing.assert_array_equal(truth.expected_reward, P)
    clicks = B.click_uniforms(env.key, ticks, log.action) < P[ticks, log.action]
    np.testing.assert_array_equal(log.reward, clicks)


def test_collect_log_rejects_bad_input():
    with pytest.raises(ValueError, match="`n_rounds` must be >= 1; got 0"):
        collect_log(DYN, 0)
    with pytest.raises(ValueError, match="`n_rounds` must be <= the horizon"):
        collect_log(DYN, DYN.horizon + 1)
    with pytest.raises(TypeError, match="`n_rounds` must be an int"):
        collect_log(DYN, 10.0)
    with pytest.raises(ValueError, match="unavailable action"):
        collect_log(DYN, 10, policy=lambda x, a: np.full(a.shape, 1 / a.shape[1]))
