"""recloop/Recommendation-v0 on top of the World: contract, seeding, CRN, vector env."""

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st

import simulator
from simulator import AppealShock, World, WorldConfig, preset
from simulator._envs import RecModel, RecommendationConfig, RecommendationEnv, top_k_sum
from simulator._vector import RecommendationVectorEnv

SMALL = preset("viadeo_like", n_users=400, n_items=30, n_ticks=40, mean_profile_size=3.0,
               campaigns=(), n_universal=3)


def dynamic_world(seed=0, model="logistic"):
    rng = np.random.default_rng(seed)
    n_items, n_ticks = 25, 30
    birth = rng.integers(0, 12, n_items)
    birth[:6] = 0          # at least 6 items alive at every tick
    death = np.minimum(birth + rng.integers(8, 40, n_items), n_ticks)
    death[:6] = n_ticks
    return WorldConfig(n_users=300, n_items=n_items, n_ticks=n_ticks, dim=4,
                       mean_profile_size=2.0, n_universal=2, ctr_halflife=7.0,
                       drift_rate=0.3, item_birth=tuple(birth.tolist()),
                       item_death=tuple(death.tolist()), click_model=model,
                       appeal_mean=-1.5 if model == "logistic" else 0.1,
                       appeal_std=0.5 if model == "logistic" else 0.05,
                       taste_scale=1.0 if model == "logistic" else 0.05,
                       shocks=(AppealShock(item=7, start=3, duration=5, delta=1.0),),
                       user_weights=tuple(rng.uniform(0.5, 2, 300).tolist()))


CONFIGS = {
    "static-k1": RecommendationConfig(world=SMALL, visits_per_tick=10),
    "static-k3": RecommendationConfig(world=SMALL, k=3, visits_per_tick=10),
    "dynamic-k1": RecommendationConfig(world=dynamic_world(), visits_per_tick=7),
    "dynamic-k4": RecommendationConfig(world=dynamic_world(), k=4, visits_per_tick=7,
                                       start_tick=2),
}


def rollout(env, seed, n, policy):
    obs, _ = env.reset(seed=seed)
    rec = {"user": [], "context": [], "available": [], "reward": [], "ctr": [], "tick": []}
    for _ in range(n):
        a = policy(obs)
        rec["user"].append(int(obs["user"])), rec["tick"].append(int(obs["tick"]))
        rec["context"].append(obs["context"]), rec["available"].append(obs["available"])
        obs, r, term, trunc, info = env.step(a)
        rec["reward"].append(r), rec["ctr"].append(info["item_ctr"])
        assert not term
        if trunc:
            break
    return {k: np.array(v) for k, v in rec.items()}


def first_k(k):
    def policy(obs):
        idx = np.flatnonzero(obs["available"])[:k]
        return int(idx[0]) if k == 1 else idx
    return policy


@pytest.mark.parametrize("name", [*CONFIGS, "default"])
def test_check_env(name):
    kw = {} if name == "default" else {"config": CONFIGS[name]}  # default: viadeo_like
    env = gym.make("recloop/Recommendation-v0", **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", message=".*infinity.*")  # context Box is unbounded
        check_env(env.unwrapped, skip_render_check=True)


@pytest.mark.parametrize("name", ["static-k3", "dynamic-k1"])
def test_same_seed_same_trajectory(name):
    env = RecommendationEnv(CONFIGS[name])
    k = CONFIGS[name].k
    a = rollout(env, 3, 150, first_k(k))
    b = rollout(env, 3, 150, first_k(k))
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    c = rollout(env, 4, 150, first_k(k))
    assert not np.array_equal(a["user"], c["user"])


def test_common_random_numbers_across_agents():
    env = RecommendationEnv(CONFIGS["dynamic-k1"])
    rng = np.random.default_rng(0)

    def random_policy(obs):
        return int(rng.choice(np.flatnonzero(obs["available"])))

    a = rollout(env, 9, 200, random_policy)
    b = rollout(env, 9, 200, random_policy)
    np.testing.assert_array_equal(a["user"], b["user"])
    np.testing.assert_array_equal(a["context"], b["context"])
    # clicks: the coin of (user, item, tick) is shared; check through the env's own draw
    env.reset(seed=9)
    key = env.key
    from simulator import _bandit as B
    from simulator._envs import _STREAM_REC_CLICK
    skey = B._stream_key(key, _STREAM_REC_CLICK)
    n_items = env.model.n_items
    obs, _ = env.reset(seed=9)
    for _ in range(100):
        item = int(np.flatnonzero(obs["available"])[-1])
        u, t = int(obs["user"]), int(obs["tick"])
        obs, r, *_, info = env.step(item)
        assert r == float(B._uniform2_int(skey, t, u * n_items + item) < info["ctr"][0])


@settings(max_examples=20)
@given(seed=st.integers(0, 50), model=st.sampled_from(["logistic", "linear"]),
       n=st.integers(1, 40))
def test_fast_ctr_equals_world_true_ctr(seed, model, n):
    cfg = RecommendationConfig(world=dynamic_world(seed, model), world_seed=seed)
    world = World(cfg.world, seed=seed)
    m = RecModel(cfg, world)
    rng = np.random.default_rng(seed)
    users = rng.integers(0, cfg.world.n_users, n)
    ticks = rng.integers(0, cfg.world.n_ticks, n)
    P, X, A = m.ctr(users, ticks)
    ref = world.true_ctr(users[:, None], np.arange(cfg.world.n_items)[None, :], ticks[:, None])
    np.testing.assert_allclose(P, ref, rtol=0, atol=1e-12)
    for j in range(n):
        np.testing.assert_allclose(X[j], world.user_taste(int(ticks[j]))[users[j]], atol=1e-14)
        np.testing.assert_array_equal(A[j], world.alive(int(ticks[j])))


def test_static_table_path_equals_direct_path():
    cfg = CONFIGS["static-k3"]
    world = World(cfg.world, seed=0)
    fast, slow = RecModel(cfg, world), RecModel(cfg, world)
    slow._table = None  # force the per-tick computation
    users = np.arange(0, 400, 7)
    ticks = np.full(users.size, 5)
    slate = np.tile([2, 9, 4], (users.size, 1))
    A = np.ones((users.size, 30), bool)
    pf, bf = fast.shown_and_best(users, ticks, slate, A)
    ps, bs = slow.shown_and_best(users, ticks, slate, A)
    np.testing.assert_allclose(pf, ps, atol=1e-15)
    np.testing.assert_allclose(bf, bs, atol=1e-15)
    P = world.true_ctr(users[:, None], np.arange(30)[None, :], 5)
    np.testing.assert_allclose(bf, np.sort(P, axis=1)[:, -3:].sum(axis=1), atol=1e-12)


def test_info_truth_and_regret():
    env = RecommendationEnv(CONFIGS["dynamic-k4"])
    obs, _ = env.reset(seed=1)
    world = env.world
    for _ in range(60):
        slate = first_k(4)(obs)
        u, t = int(obs["user"]), int(obs["tick"])
        obs, r, *_, info = env.step(slate)
        ref = world.true_ctr(u, np.arange(env.model.n_items), t)
        np.testing.assert_allclose(info["item_ctr"], ref, atol=1e-12)
        np.testing.assert_allclose(info["ctr"], ref[slate], atol=1e-12)
        best = np.sort(np.where(world.alive(t), ref, -1))[-4:].sum()
        assert info["best_expected_reward"] == pytest.approx(best, abs=1e-12)
        assert info["best_expected_reward"] >= info["expected_reward"] - 1e-12
        assert r == info["clicks"].sum() and 0 <= r <= 4


@pytest.mark.slow
def test_clicks_follow_true_probabilities():
    env = RecommendationEnv(CONFIGS["static-k3"])
    obs, _ = env.reset(seed=2)
    rewards, expected = [], []
    for _ in range(CONFIGS["static-k3"].n_steps):
        obs, r, term, trunc, info = env.step(np.array([0, 1, 2]))
        rewards.append(r), expected.append(info["expected_reward"])
        if trunc:
            break
    rewards, expected = np.array(rewards), np.array(expected)
    se = np.sqrt(np.sum(expected)) / len(rewards)  # clicks are sums of Bernoullis
    assert abs(rewards.mean() - expected.mean()) < 4 * se


def test_truncation_at_the_horizon():
    cfg = RecommendationConfig(world=dynamic_world(), visits_per_tick=3, start_tick=25)
    env = RecommendationEnv(cfg)
    obs, _ = env.reset(seed=0)
    n = 0
    while True:
        obs, r, term, trunc, info = env.step(first_k(1)(obs))
        n += 1
        if trunc:
            break
    assert n == cfg.n_steps == 15 and info["tick"] == 29
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)


def test_add_clicks_enter_profiles_and_reset_restores():
    cfg = RecommendationConfig(world=SMALL, visits_per_tick=10, add_clicks=True, k=2)
    env = RecommendationEnv(cfg)
    obs, _ = env.reset(seed=0)
    clicked = []
    for _ in range(100):
        u, t = int(obs["user"]), int(obs["tick"])
        slate = np.array([0, 1])
        obs, r, *_, info = env.step(slate)
        clicked += [(u, int(i), t) for i in slate[info["clicks"]]]
    edges = env.world.edges
    rec = edges.source == simulator.SOURCES.index("recommended")
    got = set(zip(edges.user[rec].tolist(), edges.item[rec].tolist(), edges.tick[rec].tolist(),
                  strict=True))
    assert got and got <= set(clicked)
    env.reset(seed=0)
    assert len(env.world.edges) == 0


@pytest.mark.parametrize("action, match", [
    pytest.param(np.array([1, 1, 2]), "distinct", id="duplicate"),
    pytest.param(np.array([1, 2, 30]), r"in \[0, 30\); got 30", id="out-of-range"),
    pytest.param(np.array([1, 2]), "slate of 3", id="short"),
    pytest.param(np.array([1.0, 2.0, 3.0]), "slate of 3 integer", id="float"),
])
def test_invalid_slates_raise(action, match):
    env = RecommendationEnv(CONFIGS["static-k3"])
    env.reset(seed=0)
    with pytest.raises(ValueError, match=match):
        env.step(action)


def test_unavailable_item_raises():
    env = RecommendationEnv(CONFIGS["dynamic-k1"])
    for seed in range(50):
        obs, _ = env.reset(seed=seed)
        if not obs["available"].all():
            break
    dead = int(np.flatnonzero(~obs["available"])[0])
    with pytest.raises(ValueError, match=f"`action` {dead} is not an available arm"):
        env.step(dead)


@pytest.mark.parametrize("kw, exc, match", [
    pytest.param({"k": 31}, ValueError, r"`k` must be <= .*\(30\); got 31", id="k-too-large"),
    pytest.param({"k": 0}, ValueError, r"`k` must be an int >= 1; got 0", id="k-zero"),
    pytest.param({"visits_per_tick": 0}, ValueError, "`visits_per_tick` must be an int >= 1",
                 id="visits"),
    pytest.param({"start_tick": 40}, ValueError,
                 r"`start_tick` must be an int in \[0, 39\]; got 40", id="start"),
    pytest.param({"world": "nope"}, ValueError, "unknown preset", id="preset"),
    pytest.param({"world": 3}, TypeError, "`world` must be", id="world-type"),
    pytest.param({"add_clicks": 1}, TypeError, "`add_clicks` must be a bool", id="add_clicks"),
])
def test_invalid_config_raises(kw, exc, match):
    base = {"world": SMALL}
    with pytest.raises(exc, match=match):
        RecommendationConfig(**(base | kw))


# -- vector environment -----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["static-k1", "static-k3", "dynamic-k4"])
def test_vector_env_equals_single_envs(name):
    cfg, N = CONFIGS[name], 4
    venv = gym.make_vec("recloop/Recommendation-v0", num_envs=N, config=cfg,
                        max_episode_steps=60)
    assert isinstance(venv, RecommendationVectorEnv)
    obs, _ = venv.reset(seed=30)
    venv.action_space.seed(0)
    singles = [RecommendationEnv(cfg) for _ in range(N)]
    sobs = [e.reset(seed=30 + i)[0] for i, e in enumerate(singles)]
    for _ in range(60):
        acts = venv.action_space.sample()
        assert venv.action_space.contains(acts)
        for i in range(N):
            for key in ("user", "context", "available", "tick"):
                np.testing.assert_array_equal(obs[key][i], sobs[i][key])
        obs, r, term, trunc, info = venv.step(acts)
        for i, e in enumerate(singles):
            sobs[i], sr, _, _, sinfo = e.step(acts[i])
            assert sr == r[i]
            np.testing.assert_allclose(sinfo["ctr"], info["ctr"][i], atol=1e-14)
            assert sinfo["best_expected_reward"] == pytest.approx(
                info["best_expected_reward"][i], abs=1e-14)
    assert trunc.all()
    obs, r, *_ = venv.step(venv.action_space.sample())  # autoreset step
    assert np.all(r == 0) and np.all(obs["tick"] == cfg.start_tick)


def test_vector_env_rejects_bad_actions_and_add_clicks():
    venv = RecommendationVectorEnv(3, CONFIGS["static-k3"])
    venv.reset(seed=0)
    acts = np.tile([0, 1, 2], (3, 1))
    acts[1] = [4, 4, 5]
    with pytest.raises(ValueError, match="distinct items per slate; got \\[4, 4, 5\\] in "
                                         "sub-environment 1"):
        venv.step(acts)
    with pytest.raises(ValueError, match=r"shape \(3, 3\)"):
        venv.step(np.zeros(3, np.int64))
    with pytest.raises(ValueError, match="add_clicks"):
        RecommendationVectorEnv(2, RecommendationConfig(world=SMALL, add_clicks=True))


def test_collect_log_on_recommendation_env():
    env = gym.make("recloop/Recommendation-v0", config=CONFIGS["dynamic-k1"])
    log, truth = simulator.collect_log(env, 120, rng=0)
    assert log.user is not None and log.n_actions == 25
    np.testing.assert_allclose(log.pscore, 1 / log.available.sum(axis=1))
    world = env.unwrapped.world
    ref = world.true_ctr(log.user[:, None], np.arange(25)[None, :], log.tick[:, None])
    np.testing.assert_allclose(truth.expected_reward, np.where(log.available, ref, 0),
                               atol=1e-12)


def test_top_k_sum_matches_sorting():
    rng = np.random.default_rng(0)
    P = rng.random((50, 12))
    A = rng.random((50, 12)) < 0.7
    A[:, :3] = True
    for k in (1, 2, 3):
        ref = np.sort(np.where(A, P, -1), axis=1)[:, -k:].sum(axis=1)
        np.testing.assert_allclose(top_k_sum(P, A, k), ref)
