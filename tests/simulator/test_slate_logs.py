"""SlateLog, collect_slate_log and slate_policy_value."""

import numpy as np
import pytest

import simulator
from agents import PlackettLuce
from simulator import RecommendationConfig, SlateLog, preset
from simulator._envs import RecommendationEnv

WORLD = preset("viadeo_like", n_users=40, n_items=7, n_ticks=20, mean_profile_size=2.0,
               campaigns=(), n_universal=2, appeal_mean=-1.0)
SCORES = np.random.default_rng(0).normal(0, 1, (40, 7))


def cfg(model="cascade", reward="clicks", k=3, **kw):
    return RecommendationConfig(world=WORLD, k=k, visits_per_tick=25, click_model=model,
                                reward=reward, **kw)


def policy(k=3, temperature=1.0):
    return PlackettLuce(SCORES, k=k, temperature=temperature)


# -- collect_slate_log ---------------------------------------------------------------------------

@pytest.mark.parametrize("model", ["independent", "pbm", "cascade", "dcm"])
def test_log_clicks_are_the_environment_clicks(model):
    """Replaying the logged slates in the environment with the log's episode key gives the
    logged users, clicks and rewards."""
    c = cfg(model, dcm_lambda=0.3) if model == "dcm" else cfg(model)
    log, truth = simulator.collect_slate_log(c, 120, policy=policy(), rng=5)
    env = RecommendationEnv(c)
    env.reset(seed=0)
    # the log's episode: force its key (reset draws the key from the seed's generator)
    env._key = log.metadata["episode_key"]
    from simulator import _bandit as B
    from simulator._envs import _STREAM_REC_CLICK, _STREAM_REC_CONTINUE

    env._click_skey = B._stream_key(env._key, _STREAM_REC_CLICK)
    env._cont_skey = B._stream_key(env._key, _STREAM_REC_CONTINUE)
    env._fill_block(0)
    for j in range(log.n_rounds):
        obs = env._obs()
        assert int(obs["user"]) == log.user[j] and int(obs["tick"]) == log.tick[j]
        _, r, _, _, info = env.step(log.action[j])
        np.testing.assert_array_equal(info["clicks"], log.reward[j] > 0)
        assert r == log.slate_reward[j]
        assert info["expected_reward"] == pytest.approx(truth.expected_reward[j], abs=1e-12)
        np.testing.assert_allclose(info["ctr"], truth.ctr[j], atol=1e-15)


def test_log_propensities_are_the_policy_probabilities():
    pol = policy()
    log, _ = simulator.collect_slate_log(cfg(), 200, policy=pol, rng=1)
    obs = log.observations()
    np.testing.assert_array_equal(log.pscore_cascade, pol.prefix_probabilities(obs, log.action))
    np.testing.assert_array_equal(log.pscore, log.pscore_cascade[:, -1])
    M = pol.marginals(obs, method="enumerate")
    np.testing.assert_allclose(log.pscore_item_position,
                               M[np.arange(200)[:, None], log.action, np.arange(3)], atol=1e-13)
    assert log.reward_type == "clicks" and log.metadata["config_class"] == "RecommendationConfig"


def test_same_rng_same_log_bytes(tmp_path):
    a, _ = simulator.collect_slate_log(cfg("dcm"), 150, policy=policy(), rng=9)
    b, _ = simulator.collect_slate_log(cfg("dcm"), 150, policy=policy(), rng=9)
    pa, pb = a.save(tmp_path / "a"), b.save(tmp_path / "b.npz")
    assert pa.name == "a.npz" and pa.read_bytes() == pb.read_bytes()
    c, _ = simulator.collect_slate_log(cfg("dcm"), 150, policy=policy(), rng=10)
    assert not np.array_equal(a.action, c.action)


def test_any_click_reward_and_slate_reward():
    log, truth = simulator.collect_slate_log(cfg("independent", reward="any_click"), 300,
                                             policy=policy(), rng=2)
    assert log.reward_type == "any_click"
    np.testing.assert_array_equal(log.slate_reward, (log.reward > 0).any(axis=1))
    assert np.all(truth.expected_reward <= 1.0)


def test_save_load_and_obp_round_trips(tmp_path):
    log, _ = simulator.collect_slate_log(cfg("pbm"), 80, policy=policy(), rng=3)
    back = SlateLog.load(log.save(tmp_path / "log"))
    fb = log.to_obp()
    assert fb["slate_id"].shape == (240,) and fb["n_unique_action"] == 7
    assert np.array_equal(fb["pscore"], np.repeat(log.pscore, 3))
    shuffled = np.random.default_rng(0).permutation(240)
    fb2 = {key: (v[shuffled] if isinstance(v, np.ndarray) and v.shape == (240,) else v)
           for key, v in fb.items()}
    for other in (back, SlateLog.from_obp(fb), SlateLog.from_obp(fb2)):
        for name in ("action", "reward", "pscore", "pscore_cascade", "pscore_item_position",
                     "context", "available", "tick", "user"):
            np.testing.assert_array_equal(getattr(other, name), getattr(log, name))
    assert dict(back.metadata) == dict(log.metadata)
    assert back.action.flags.writeable is False


def test_load_refuses_another_kind(tmp_path):
    blog, _ = simulator.collect_log("bred_linear", 20, rng=0)
    path = blog.save(tmp_path / "bandit")
    with pytest.raises(simulator.LogFormatError, match="SlateLog"):
        SlateLog.load(path)


def _valid():
    return dict(context=np.zeros((2, 1)), action=[[0, 1], [2, 1]], reward=[[1.0, 0.0], [0, 0]],
                pscore=[0.25, 0.2], pscore_cascade=[[0.5, 0.25], [0.4, 0.2]],
                pscore_item_position=[[0.5, 0.4], [0.4, 0.3]], n_items=3)


@pytest.mark.parametrize("change,err,match", [
    pytest.param({"action": [[0, 0], [2, 1]]}, ValueError, "distinct", id="repeated-items"),
    pytest.param({"action": [[0, 3], [2, 1]]}, ValueError, "action", id="item-out-of-range"),
    pytest.param({"action": [[0.5, 1], [2, 1]]}, TypeError, "integers", id="float-actions"),
    pytest.param({"pscore": [0.0, 0.2], "pscore_cascade": [[0.5, 0.0], [0.4, 0.2]]},
                 ValueError, r"\(0, 1\]", id="zero-pscore"),
    pytest.param({"pscore_item_position": [[0.5, 1.2], [0.4, 0.3]]}, ValueError,
                 "pscore_item_position", id="marginal-above-one"),
    pytest.param({"pscore": [0.25, 0.3]}, ValueError, "last column", id="inconsistent-pscore"),
    pytest.param({"pscore_cascade": [[0.2, 0.25], [0.4, 0.2]]}, ValueError, "non-increasing",
                 id="increasing-cascade"),
    pytest.param({"reward": [[1.0, np.nan], [0, 0]]}, ValueError, "finite", id="nan-reward"),
    pytest.param({"reward": [[1.0, 0.0]]}, ValueError, "shape", id="reward-rows"),
    pytest.param({"reward_type": "ctr"}, ValueError, "reward_type", id="reward-type"),
    pytest.param({"available": [[True, False, True], [True, True, True]]}, ValueError,
                 "not available", id="unavailable-item"),
    pytest.param({"n_items": 0}, ValueError, "n_items", id="no-items"),
])
def test_bad_logs(change, err, match):
    with pytest.raises(err, match=match):
        SlateLog(**(_valid() | change))


def test_from_obp_bad_feedback():
    fb = SlateLog(**_valid()).to_obp()
    with pytest.raises(ValueError, match="lacks"):
        SlateLog.from_obp({key: v for key, v in fb.items() if key != "pscore_cascade"})
    bad = dict(fb, position=np.array([0, 0, 0, 1]))
    with pytest.raises(ValueError, match="position"):
        SlateLog.from_obp(bad)
    bad = dict(fb, pscore=np.array([0.25, 0.3, 0.2, 0.2]))
    with pytest.raises(ValueError, match="same at every position"):
        SlateLog.from_obp(bad)


@pytest.mark.parametrize("kw,err,match", [
    pytest.param({"n_rounds": 0}, ValueError, "n_rounds", id="no-rounds"),
    pytest.param({"n_rounds": 10**6}, ValueError, "n_rounds", id="beyond-episode"),
    pytest.param({"n_rounds": 5.0}, TypeError, "n_rounds", id="float-rounds"),
    pytest.param({"policy": object()}, TypeError, "policy", id="not-a-slate-policy"),
    pytest.param({"env_or_config": "viadeo_like"}, TypeError, "env_or_config", id="preset"),
])
def test_collect_bad_input(kw, err, match):
    args = {"env_or_config": cfg(), "n_rounds": 10, "policy": policy()} | kw
    with pytest.raises(err, match=match):
        simulator.collect_slate_log(args.pop("env_or_config"), args.pop("n_rounds"), **args)


def test_collect_refuses_a_policy_returning_bad_slates():
    class Repeats:
        def sample(self, obs, rng):
            return np.zeros((obs["user"].size, 3), dtype=np.int64)

        def prefix_probabilities(self, obs, slates):
            return np.ones(slates.shape)

        item_position_probabilities = prefix_probabilities

    with pytest.raises(ValueError, match="repeated"):
        simulator.collect_slate_log(cfg(), 10, policy=Repeats(), rng=0)


# -- slate_policy_value ------------------------------------------------------------------------

@pytest.mark.parametrize("model,reward", [
    ("independent", "clicks"), ("pbm", "clicks"), ("cascade", "clicks"), ("dcm", "clicks"),
    ("independent", "any_click"), ("cascade", "any_click"), ("dcm", "any_click"),
])
def test_exact_value_equals_enumeration(model, reward):
    c = cfg(model, reward, k=3, **({"eta": 0.6} if model == "pbm" else {}))
    pol = policy(temperature=0.8)
    exact = simulator.slate_policy_value(c, pol)
    ref = simulator.slate_policy_value(c, pol, method="enumerate")
    assert exact.method == "exact" and ref.method == "enumerate"
    assert exact.value == pytest.approx(ref.value, abs=1e-13)
    np.testing.assert_allclose(exact.per_user, ref.per_user, atol=1e-13)
    assert exact.stderr == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("model,reward", [("pbm", "any_click"), ("dcm", "clicks")])
def test_monte_carlo_value_within_its_error(model, reward):
    c = cfg(model, reward, k=3)
    pol = policy(temperature=0.8)
    ref = simulator.slate_policy_value(c, pol, method="enumerate")
    mc = simulator.slate_policy_value(c, pol, method="monte_carlo", n_samples=100_000, rng=3)
    assert mc.method == "monte_carlo" and mc.per_user is None
    assert abs(mc.value - ref.value) < 4.5 * mc.stderr
    auto = simulator.slate_policy_value(c, pol, n_samples=1000, rng=3)
    assert auto.method == ("monte_carlo" if model == "pbm" else "exact")


def test_exact_value_refused_where_it_has_no_form():
    with pytest.raises(ValueError, match="PBM"):
        simulator.slate_policy_value(cfg("pbm", "any_click"), policy(), method="exact")


def test_logging_value_is_the_mean_reward_of_its_log():
    """On-policy: the mean slate reward of a long log of the logging policy estimates its
    exact value (the truth conditional on the visiting users, to use every visit)."""
    # visits spread over many ticks: repeated (user, item, tick) pairs would share a coin
    c = RecommendationConfig(world=preset("viadeo_like", n_users=40, n_items=7, n_ticks=800,
                                          mean_profile_size=2.0, campaigns=(), n_universal=2,
                                          appeal_mean=-1.0),
                             k=3, visits_per_tick=5, click_model="dcm")
    pol = policy()
    value = simulator.slate_policy_value(c, pol)
    log, truth = simulator.collect_slate_log(c, 4000, policy=pol, rng=4)
    r = log.slate_reward
    assert abs(r.mean() - value.conditional(log.user)) < 4.5 * r.std() / np.sqrt(r.size)
    assert truth.expected_reward.mean() == pytest.approx(value.conditional(log.user), abs=0.03)
