"""recloop/LinearBandit-v0 and its dynamic variant: contract, seeding, common random numbers."""

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st

import simulator
from simulator import LinearBanditConfig, LinearBanditEnv
from simulator import _bandit as B

DYN = LinearBanditConfig(n_arms=40, n_universal=16, lifetime=60, n_alive=6, half_life=30.0)


def rollout(env, seed, actions_fn, n):
    obs, _ = env.reset(seed=seed)
    out = {"context": [], "available": [], "reward": [], "ctr": [], "action": []}
    for _ in range(n):
        a = actions_fn(obs)
        out["context"].append(obs["context"]), out["available"].append(obs["available"])
        obs, r, term, trunc, info = env.step(a)
        out["reward"].append(r), out["ctr"].append(info["ctr"]), out["action"].append(a)
        assert not term
        if trunc:
            break
    return {k: np.array(v) for k, v in out.items()}


def first_available(obs):
    return int(np.flatnonzero(obs["available"])[0])


def last_available(obs):
    return int(np.flatnonzero(obs["available"])[-1])


@pytest.mark.parametrize("env_id, kwargs", [
    pytest.param("recloop/LinearBandit-v0", {}, id="bred_linear"),
    pytest.param("recloop/DynamicNews-v0", {}, id="dynamic_news"),
    pytest.param("recloop/LinearBandit-v0", {"config": DYN}, id="small-dynamic"),
])
def test_check_env(env_id, kwargs):
    env = gym.make(env_id, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped, skip_render_check=True)


def test_module_colon_id_and_presets():
    env = gym.make("simulator:recloop/LinearBandit-v0", config="dynamic_news")
    assert env.unwrapped.config == simulator._presets.preset("dynamic_news")
    assert simulator._presets.preset("bred_linear") == LinearBanditConfig()


def test_default_arms_match_the_paper_test_bed():
    c = LinearBanditConfig()
    tab = B.arm_table(c)
    assert tab.universal.sum() == 4 and c.n_arms == 10 and c.dim == 10
    assert np.all(tab.weights[tab.universal] == 0)
    assert np.all((tab.weights[~tab.universal] != 0).sum(axis=1) == c.n_nonzero)
    assert np.all(tab.weights[:, 0] == 0)  # never on the intercept
    # universal CTRs are higher than the specific arms' constant part
    assert tab.base[tab.universal].min() > tab.base[~tab.universal].max()


@settings(max_examples=25)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 80))
def test_same_seed_same_trajectory(seed, n):
    env = LinearBanditEnv(DYN)
    a = rollout(env, seed, last_available, n)
    b = rollout(env, seed, last_available, n)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


def test_common_random_numbers_across_agents():
    """Two agents on one seed meet the same contexts and the same click for the same arm."""
    env = LinearBanditEnv()
    rng = np.random.default_rng(1)
    a = rollout(env, 7, lambda o: int(rng.integers(10)), 3000)
    b = rollout(env, 7, lambda o: int(rng.integers(10)), 3000)
    np.testing.assert_array_equal(a["context"], b["context"])
    np.testing.assert_array_equal(a["ctr"], b["ctr"])
    same = a["action"] == b["action"]
    assert 100 < same.sum() < 3000
    np.testing.assert_array_equal(a["reward"][same], b["reward"][same])
    assert np.any(a["reward"][~same] != b["reward"][~same])
    c = rollout(env, 8, lambda o: 0, 50)
    assert not np.array_equal(a["context"][:50], c["context"])


def test_block_boundaries_do_not_change_draws():
    env = LinearBanditEnv()
    r = rollout(env, 3, first_available, 1100)  # crosses two precomputed blocks
    ticks = np.arange(1100)
    np.testing.assert_array_equal(r["context"], B.contexts(env.config, env.key, ticks))
    p = B.true_ctr(env.config, r["context"], ticks)
    np.testing.assert_array_equal(r["ctr"], p)
    clicks = B.click_uniforms(env.key, ticks, r["action"]) < p[ticks, r["action"]]
    np.testing.assert_array_equal(r["reward"], clicks.astype(float))


@given(key=st.integers(0, 2**63 - 1), stream=st.integers(0, 10),
       first=st.integers(0, 2**40), second=st.integers(0, 2**20))
def test_hash_numpy_equals_python_reference(key, stream, first, second):
    skey = B._stream_key(key, stream)
    assert skey == int(B._stream_keys(key, stream))
    assert B._uniform2_int(skey, first, second) == B._uniform2(skey, first, second)[()]


def test_uniforms_look_uniform():
    u = B.click_uniforms(12345, np.arange(20000)[:, None], np.arange(5)).ravel()
    from scipy import stats
    assert stats.kstest(u, "uniform").pvalue > 1e-3
    # neighbouring counters are not correlated
    assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < 0.03


def test_clicks_follow_the_true_ctr():
    env = LinearBanditEnv()
    r = rollout(env, 11, first_available, 20000)
    p = r["ctr"][np.arange(20000), r["action"]]
    se = np.sqrt(np.sum(p * (1 - p))) / 20000
    assert abs(r["reward"].mean() - p.mean()) < 4 * se


@settings(max_examples=30)
@given(lo=st.floats(-1, 1), width=st.floats(0, 1), p=st.floats(0, 1), hl=st.floats(1, 100),
       seed=st.integers(0, 1000))
def test_ctr_in_unit_interval(lo, width, p, hl, seed):
    hi = min(1.0, lo + width)
    c = LinearBanditConfig(weight=(lo, hi), context_p=p, half_life=hl, n_nonzero=5,
                           lifetime=50, arm_seed=seed)
    x = B.contexts(c, seed, np.arange(60))
    ctr = B.true_ctr(c, x, np.arange(60))
    assert np.all((ctr >= 0) & (ctr <= 1))
    assert np.all(ctr[50:] == 0)  # dead arms never click


def test_dynamic_availability_and_truncation():
    c = DYN
    alive = B.alive(c, np.arange(c.horizon))
    assert np.all(alive.sum(axis=1) == c.n_alive)
    tab = B.arm_table(c)
    assert np.all(tab.death - tab.birth == c.lifetime)
    env = LinearBanditEnv(c)
    obs, _ = env.reset(seed=0)
    n = 0
    while True:
        np.testing.assert_array_equal(obs["available"], alive[n])
        obs, r, term, trunc, info = env.step(first_available(obs))
        n += 1
        # decay: CTR of a universal arm halves every half_life ticks of its age
        if trunc:
            break
    assert n == c.horizon


def test_decay_halves_ctr():
    c = LinearBanditConfig(n_universal=10, half_life=10.0, lifetime=100)
    x = B.contexts(c, 0, [0])
    p0 = B.true_ctr(c, x, [0])
    p10 = B.true_ctr(c, x, [10])
    np.testing.assert_allclose(p10, p0 / 2)


@pytest.mark.parametrize("action, match", [
    pytest.param(10, r"`action` must be in \[0, 10\); got 10", id="too-large"),
    pytest.param(-1, r"got -1", id="negative"),
    pytest.param(1.5, r"integer arm index; got 1.5", id="float"),
    pytest.param(True, r"integer arm index", id="bool"),
])
def test_invalid_action_raises(action, match):
    env = LinearBanditEnv()
    env.reset(seed=0)
    with pytest.raises(ValueError, match=match):
        env.step(action)


def test_unavailable_arm_raises():
    env = LinearBanditEnv(DYN)
    obs, _ = env.reset(seed=0)
    dead = int(np.flatnonzero(~obs["available"])[0])
    with pytest.raises(ValueError, match=rf"`action` {dead} is not an available arm at tick 0"):
        env.step(dead)


@pytest.mark.parametrize("field, value, match", [
    pytest.param("dim", 0, r"`dim` must be an int in \[1, 21\]; got 0", id="dim"),
    pytest.param("n_arms", -3, r"`n_arms` must be an int >= 1; got -3", id="n_arms"),
    pytest.param("n_universal", 11, r"`n_universal` must be an int in \[0, 10\]; got 11",
                 id="n_universal"),
    pytest.param("n_nonzero", 10, r"`n_nonzero` must be an int in \[1, 9\]; got 10",
                 id="n_nonzero"),
    pytest.param("universal_ctr", (0.5, 1.2), r"`universal_ctr` must be a \(low, high\) pair",
                 id="ctr-range"),
    pytest.param("specific_ctr", (0.3, 0.1), r"`specific_ctr` must be a \(low, high\) pair",
                 id="ctr-order"),
    pytest.param("context_p", 1.5, r"`context_p` must be a finite number in \[0.0, 1.0\]; "
                 r"got 1.5", id="context_p"),
    pytest.param("lifetime", 0, r"`lifetime` must be an int >= 1; got 0", id="lifetime"),
    pytest.param("n_alive", 3, r"`n_alive` must be None unless `lifetime` is set",
                 id="n_alive-alone"),
    pytest.param("half_life", -1.0, r"`half_life` must be a finite number > 0", id="half_life"),
    pytest.param("arm_seed", -1, r"`arm_seed` must be", id="arm_seed"),
])
def test_invalid_config_raises(field, value, match):
    from recloop_base.validation import ArgumentError

    with pytest.raises(ValueError, match=match) as info:
        LinearBanditConfig(**{field: value})
    assert isinstance(info.value, ArgumentError) and info.value.name == field  # as data


@pytest.mark.parametrize("field, value", [("dim", 2.0), ("intercept", 1), ("weight", 0.2),
                                          ("config", 3)])
def test_wrong_types_raise_type_error(field, value):
    with pytest.raises(TypeError, match=f"`{field}`"):
        if field == "config":
            LinearBanditEnv(value)
        else:
            LinearBanditConfig(**{field: value})


def test_unknown_preset_raises():
    with pytest.raises(ValueError, match="unknown preset 'nope'"):
        LinearBanditEnv("nope")


# -- vector environment ---------------------------------------------------------------------


@pytest.mark.parametrize("config", [LinearBanditConfig(), DYN], ids=["static", "dynamic"])
def test_vector_env_equals_single_envs(config):
    N, n = 5, 150
    venv = gym.make_vec("recloop/LinearBandit-v0", num_envs=N, config=config)
    assert isinstance(venv, simulator.LinearBanditVectorEnv)
    obs, _ = venv.reset(seed=20)
    singles = [LinearBanditEnv(config) for _ in range(N)]
    sobs = [e.reset(seed=20 + i)[0] for i, e in enumerate(singles)]
    rng = np.random.default_rng(0)
    for _ in range(n):
        acts = np.array([rng.choice(np.flatnonzero(o["available"])) for o in sobs])
        for i in range(N):
            np.testing.assert_array_equal(obs["context"][i], sobs[i]["context"])
            np.testing.assert_array_equal(obs["available"][i], sobs[i]["available"])
        obs, r, term, trunc, info = venv.step(acts)
        for i, e in enumerate(singles):
            sobs[i], sr, _, _, sinfo = e.step(int(acts[i]))
            assert sr == r[i]
            np.testing.assert_array_equal(sinfo["ctr"], info["ctr"][i])
            assert sinfo["best_expected_reward"] == info["best_expected_reward"][i]
    assert venv.observation_space.contains(obs)


def test_vector_env_autoreset_next_step():
    venv = simulator.LinearBanditVectorEnv(3, max_episode_steps=4)
    obs, _ = venv.reset(seed=1)
    for _ in range(4):
        obs, r, term, trunc, info = venv.step(np.zeros(3, np.int64))
    assert trunc.all() and np.all(obs["tick"] == 4)
    keys = venv.keys
    obs, r, term, trunc, info = venv.step(np.full(3, 99))  # ignored: this step resets
    assert np.all(r == 0) and np.all(obs["tick"] == 0) and not trunc.any()
    assert np.all(venv.keys != keys)


def test_vector_env_rejects_bad_actions():
    venv = simulator.LinearBanditVectorEnv(4, config=DYN)
    obs, _ = venv.reset(seed=0)
    with pytest.raises(ValueError, match=r"shape \(4,\)"):
        venv.step(np.zeros(3, np.int64))
    acts = np.array([first_available({"available": a}) for a in obs["available"]])
    acts[2] = int(np.flatnonzero(~obs["available"][2])[0])
    with pytest.raises(ValueError, match="sub-environment 2 is not an available arm"):
        venv.step(acts)


# -- large action spaces with embeddings -----------------------------------------------------
def test_embedded_arms_share_their_embedding_parameters_up_to_the_residual():
    import simulator
    from simulator._bandit import arm_table

    for residual in (0.0, 0.2):
        config = simulator.preset("large_actions", n_arms=500, residual=residual)
        tab = arm_table(config)
        assert tab.embeddings.shape == (500, 2) and tab.embeddings.max() < 10
        _, groups = np.unique(tab.embeddings, axis=0, return_inverse=True)
        groups = groups.reshape(-1)
        for g in range(3):
            rows = np.flatnonzero(groups == g)
            assert np.allclose(tab.weights[rows], tab.weights[rows[0]])
            spread = np.ptp(tab.base[rows])
            assert spread == 0.0 if residual == 0 else 0 < spread <= 2 * residual
    assert arm_table(simulator.LinearBanditConfig()).embeddings is None  # BRED world unchanged


def test_static_value_exact_at_ten_thousand_arms():
    import simulator
    from simulator._bandit import true_ctr
    from simulator._truth import context_atoms

    config = simulator.preset("large_actions", n_arms=10_000, residual=0.1)
    g = np.random.default_rng(0)
    logits = g.normal(size=(config.dim, config.n_arms))

    def policy(x, avail):
        z = x @ logits
        p = np.exp(z - z.max(axis=1, keepdims=True))
        return p / p.sum(axis=1, keepdims=True)

    x, prob, _ = context_atoms(config)  # all 512 atoms at once: the plain sum
    plain = sum(prob[m] * float(policy(x[m:m + 1], None)[0] @ true_ctr(config, x[m:m + 1], 0)[0])
                for m in range(0, x.shape[0]))
    assert simulator.static_policy_value(config, policy) == pytest.approx(plain, rel=1e-12)


def test_collect_log_records_embeddings_and_pi_b_in_embedded_worlds():
    import simulator

    log, _ = simulator.collect_log("large_actions", 50, rng=0)
    assert log.action_embeddings.shape == (1000, 2)
    assert np.allclose(log.pi_b, 1 / 1000)
    plain, _ = simulator.collect_log("bred_linear", 50, rng=0)
    assert plain.action_embeddings is None and plain.pi_b is None


@pytest.mark.parametrize("kw, msg", [
    pytest.param({"n_embedding_features": -1}, "n_embedding_features", id="features"),
    pytest.param({"n_categories": 0}, "n_categories", id="categories"),
    pytest.param({"residual": 1.5}, "residual", id="residual"),
])
def test_bad_embedding_config(kw, msg):
    import simulator

    with pytest.raises((TypeError, ValueError), match=msg):
        simulator.LinearBanditConfig(**kw)
