"""Click models of recloop/Recommendation-v0: closed forms against Monte Carlo, single against
vector environment, the independent model unchanged, bad input."""

import itertools
import warnings

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator import WorldConfig, preset
from simulator import _bandit as B
from simulator import _click_models as cm
from simulator._envs import (
    _STREAM_REC_CLICK,
    _STREAM_REC_CONTINUE,
    RecommendationConfig,
    RecommendationEnv,
)
from simulator._vector import RecommendationVectorEnv

# high CTRs, so that position effects are large
WORLD = preset("viadeo_like", n_users=60, n_items=9, n_ticks=30, mean_profile_size=2.0,
               campaigns=(), n_universal=2, appeal_mean=-0.5)
MODELS = [
    ("independent", {}),
    ("pbm", {}),
    ("pbm", {"theta": (0.9, 0.3, 0.6, 0.1)}),
    ("cascade", {}),
    ("dcm", {}),
    ("dcm", {"dcm_lambda": 0.2}),
]
IDS = ["independent", "pbm-eta", "pbm-theta", "cascade", "dcm", "dcm-0.2"]


def config(model, kw, reward="clicks", k=4, **extra):
    return RecommendationConfig(world=WORLD, k=k, visits_per_tick=10, click_model=model,
                                reward=reward, **kw, **extra)


# -- closed forms ------------------------------------------------------------------------------

def literal_clicks(p, model, theta, lam, u, v):
    """The click models as the literal story, position by position (the reference)."""
    clicks = []
    scanning = True
    for j, q in enumerate(p):
        if model == "independent":
            clicks.append(u[j] < q)
        elif model == "pbm":
            clicks.append(u[j] < theta[j] * q)
        else:
            hit = scanning and u[j] < q
            clicks.append(hit)
            if hit and (model == "cascade" or not v[j] < lam[j]):
                scanning = False
    return np.array(clicks)


@settings(max_examples=60)
@given(seed=st.integers(0, 10_000), k=st.integers(1, 6),
       model=st.sampled_from(["independent", "pbm", "cascade", "dcm"]))
def test_vectorised_clicks_equal_the_literal_story(seed, k, model):
    rng = np.random.default_rng(seed)
    p, theta, lam = rng.random((3, 50, k))
    u, v = rng.random((2, 50, k))
    got = cm.simulate_clicks(p, u, model, theta=theta[0], lam=lam[0], v=v)
    for r in range(50):
        np.testing.assert_array_equal(got[r], literal_clicks(p[r], model, theta[0], lam[0],
                                                             u[r], v[r]))


@pytest.mark.parametrize("model", ["independent", "pbm", "cascade", "dcm"])
@pytest.mark.parametrize("reward", ["clicks", "any_click"])
def test_closed_forms_against_monte_carlo(model, reward):
    rng = np.random.default_rng(7)
    k, n = 5, 400_000
    p = rng.uniform(0.05, 0.9, k)
    theta, lam = rng.uniform(0.1, 1.0, k), rng.uniform(0.0, 1.0, k)
    clicks = cm.simulate_clicks(np.broadcast_to(p, (n, k)), rng.random((n, k)), model,
                                theta=theta, lam=lam, v=rng.random((n, k)))
    per_pos = cm.position_click_probabilities(p, model, theta=theta, lam=lam)
    se = np.sqrt(per_pos * (1 - per_pos) / n)
    assert np.all(np.abs(clicks.mean(axis=0) - per_pos) < 4.5 * se + 1e-12)
    r = clicks.sum(axis=1) if reward == "clicks" else clicks.any(axis=1)
    value = cm.expected_reward(p, model, reward, theta=theta, lam=lam)
    assert abs(r.mean() - value) < 4.5 * r.std() / np.sqrt(n)


@pytest.mark.parametrize("model,kw", MODELS, ids=IDS)
@pytest.mark.parametrize("reward", ["clicks", "any_click"])
def test_best_reward_is_the_best_slate(model, kw, reward):
    cfg = config(model, kw, reward=reward)
    rng = np.random.default_rng(3)
    p = rng.uniform(0.0, 1.0, 8)
    theta, lam = cfg.examination, cfg.continuation
    slates = np.array(list(itertools.permutations(range(8), cfg.k)))
    brute = cm.expected_reward(p[slates], model, reward, theta=theta, lam=lam).max()
    best = cm.best_reward(np.sort(p)[::-1][:cfg.k], model, reward, theta=theta, lam=lam)
    assert best == pytest.approx(brute, abs=1e-12)


def test_best_reward_of_a_varying_continuation_is_not_computed():
    # with lambda varying over positions the best slate may mix the best and worst items
    p = np.array([0.5] * 9 + [0.01])
    lam = np.array([0.0] + [1.0] * 9)
    slates_value = cm.expected_reward(np.r_[0.01, [0.5] * 9], "dcm", "clicks", lam=lam)
    top_value = cm.expected_reward(np.sort(p)[::-1], "dcm", "clicks", lam=lam)
    assert slates_value > top_value + 1.0
    assert np.isnan(cm.best_reward(np.sort(p)[::-1], "dcm", "clicks", lam=lam))


# -- environments ------------------------------------------------------------------------------

@pytest.mark.parametrize("model,kw", MODELS, ids=IDS)
def test_check_env(model, kw):
    env = RecommendationEnv(config(model, kw))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", message=".*infinity.*")
        check_env(env, skip_render_check=True)


@pytest.mark.parametrize("model,kw", MODELS, ids=IDS)
@pytest.mark.parametrize("reward", ["clicks", "any_click"])
def test_single_and_vector_env_give_the_same_clicks(model, kw, reward):
    cfg = config(model, kw, reward=reward)
    N, steps = 6, 25
    venv = RecommendationVectorEnv(N, cfg)
    venv.reset(seed=11)
    rng = np.random.default_rng(0)
    actions = [np.array([rng.permutation(9)[:4] for _ in range(N)]) for _ in range(steps)]
    vec = [venv.step(a) for a in actions]
    for i in range(N):
        env = RecommendationEnv(cfg)
        env.reset(seed=11 + i)
        for t, a in enumerate(actions):
            _, r, _, _, info = env.step(a[i])
            _, vr, _, _, vinfo = vec[t]
            assert r == vr[i]
            np.testing.assert_array_equal(info["clicks"], vinfo["clicks"][i])
            assert info["expected_reward"] == pytest.approx(vinfo["expected_reward"][i],
                                                            abs=1e-12)
            assert info["expected_reward"] == pytest.approx(
                env.true_slate_value(info["user"], a[i], info["tick"]), abs=1e-12)
            assert info["best_expected_reward"] == pytest.approx(
                vinfo["best_expected_reward"][i], abs=1e-12)
            assert info["best_expected_reward"] >= info["expected_reward"] - 1e-12
            if reward == "any_click":
                assert r == float(info["clicks"].any())
            else:
                assert r == info["clicks"].sum()


@pytest.mark.parametrize("model,kw", MODELS[1:], ids=IDS[1:])
def test_clicks_come_from_the_world_coins(model, kw):
    """The click of each position is the environment's coin of (user, item, tick) read by the
    click model (the DCM's continuation from its own stream)."""
    cfg = config(model, kw)
    env = RecommendationEnv(cfg)
    obs, _ = env.reset(seed=5)
    ckey = B._stream_key(env.key, _STREAM_REC_CLICK)
    vkey = B._stream_key(env.key, _STREAM_REC_CONTINUE)
    rng = np.random.default_rng(1)
    for _ in range(80):
        slate = rng.permutation(9)[:4]
        u, t = int(obs["user"]), int(obs["tick"])
        obs, r, *_, info = env.step(slate)
        coins = [B._uniform2_int(ckey, t, u * 9 + s) for s in slate.tolist()]
        cont = [B._uniform2_int(vkey, t, u * 9 + s) for s in slate.tolist()]
        np.testing.assert_array_equal(
            info["clicks"], literal_clicks(info["ctr"], model, cfg.examination,
                                           cfg.continuation, coins, cont))


def test_independent_model_is_the_default_path():
    """Explicit click_model="independent" is today's environment, step for step."""
    base = RecommendationConfig(world=WORLD, k=3, visits_per_tick=10)
    explicit = RecommendationConfig(world=WORLD, k=3, visits_per_tick=10,
                                    click_model="independent", reward="clicks")
    runs = []
    for cfg in (base, explicit):
        env = RecommendationEnv(cfg)
        env.action_space.seed(2)
        env.reset(seed=4)
        out = []
        for _ in range(120):
            _, r, _, _, info = env.step(env.action_space.sample())
            out.append((r, info["clicks"].tolist(), info["expected_reward"],
                        info["best_expected_reward"]))
            assert info["expected_reward"] == float(info["ctr"].sum())
        runs.append(out)
    assert runs[0] == runs[1]


@pytest.mark.slow
@pytest.mark.parametrize("model,kw", MODELS, ids=IDS)
@pytest.mark.parametrize("reward", ["clicks", "any_click"])
def test_true_slate_value_against_the_environment(model, kw, reward):
    """Mean reward of many independent episodes (the vector environment's sub-environments)
    against the closed form of each visit."""
    cfg = config(model, kw, reward=reward)
    N = 20_000
    venv = RecommendationVectorEnv(N, cfg)
    venv.reset(seed=100)
    slate = np.tile([4, 0, 7, 2], (N, 1))
    rewards, values = [], []
    for _ in range(3):
        _, r, _, _, info = venv.step(slate)
        rewards.append(r)
        values.append(venv.true_slate_value(info["user"], slate, info["tick"]))
    r, v = np.concatenate(rewards), np.concatenate(values)
    assert abs(r.mean() - v.mean()) < 4.5 * r.std() / np.sqrt(r.size)


# -- bad input ---------------------------------------------------------------------------------

@pytest.mark.parametrize("kw,err,match", [
    pytest.param({"click_model": "cascad"}, ValueError, "click_model", id="unknown-model"),
    pytest.param({"reward": "ctr"}, ValueError, "reward", id="unknown-reward"),
    pytest.param({"click_model": "pbm", "theta": (0.5, 0.2)}, ValueError, "`theta` must have k",
                 id="theta-length"),
    pytest.param({"click_model": "pbm", "theta": (0.5, 1.2, 0.1)}, ValueError, r"theta\[1\]",
                 id="theta-range"),
    pytest.param({"click_model": "pbm", "theta": "abc"}, TypeError, "theta", id="theta-type"),
    pytest.param({"click_model": "pbm", "eta": -1.0}, ValueError, "eta", id="eta-negative"),
    pytest.param({"click_model": "pbm", "eta": 1.0, "theta": (1, 1, 1)}, ValueError,
                 "both", id="theta-and-eta"),
    pytest.param({"click_model": "dcm", "dcm_lambda": 1.5}, ValueError, "dcm_lambda",
                 id="lambda-range"),
    pytest.param({"click_model": "dcm", "dcm_lambda": -0.1}, ValueError, "dcm_lambda",
                 id="lambda-negative"),
    pytest.param({"click_model": "dcm", "dcm_lambda": (0.5, 0.2, 0.2)}, TypeError,
                 "same at every position", id="lambda-per-position"),
    pytest.param({"click_model": "cascade", "theta": (1, 1, 1)}, ValueError,
                 "only used by click_model 'pbm'", id="theta-with-cascade"),
    pytest.param({"dcm_lambda": 0.5}, ValueError, "only used by click_model 'dcm'",
                 id="lambda-with-independent"),
    pytest.param({"k": 10}, ValueError, "`k` must be <=", id="k-above-items"),
])
def test_bad_config(kw, err, match):
    args = {"world": WORLD, "k": 3} | kw
    with pytest.raises(err, match=match):
        RecommendationConfig(**args)


@pytest.mark.parametrize("slate,user,tick,match", [
    pytest.param([1, 1, 2, 3], 0, 0, "distinct", id="repeated-items"),
    pytest.param([1, 2, 3], 0, 0, "shape", id="short-slate"),
    pytest.param([1, 2, 3, 99], 0, 0, "slate", id="item-out-of-range"),
    pytest.param([1, 2, 3, 4], 60, 0, "user", id="user-out-of-range"),
    pytest.param([1, 2, 3, 4], 0, 30, "tick", id="tick-out-of-range"),
])
def test_true_slate_value_bad_input(slate, user, tick, match):
    env = RecommendationEnv(config("cascade", {}))
    with pytest.raises(ValueError, match=match):
        env.true_slate_value(user, slate, tick)


def test_true_slate_value_refuses_dead_items():
    w = WorldConfig(n_users=20, n_items=6, n_ticks=10, dim=2, mean_profile_size=1.0,
                    n_universal=0, item_birth=(0, 0, 0, 0, 5, 0),
                    item_death=(10, 10, 10, 10, 10, 10))
    env = RecommendationEnv(RecommendationConfig(world=w, k=3, click_model="cascade"))
    with pytest.raises(ValueError, match="alive"):
        env.true_slate_value(0, [4, 1, 2], 2)
    assert 0 < env.true_slate_value(0, [4, 1, 2], 6) < 1
