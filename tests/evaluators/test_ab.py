"""The online A/B test: assignment, estimates against the truth, Welch's test, bad input."""

import math

import gymnasium as gym
import numpy as np
import pytest
from scipy import stats

import agents
import simulator
from evaluators import ab_test
from recloop._selfcheck import FixedArm


def env():
    return gym.make("recloop/LinearBandit-v0")


def fixed(arm):
    return FixedArm(arm)


def test_users_are_split_and_the_same_rng_gives_the_same_test():
    a, b = agents.UniformRandom(), agents.UCB1()
    a.reset(0)
    b.reset(1)
    res = ab_test(env(), a, b, n_steps=500, split=0.3, rng=4)
    assert res.a.n + res.b.n == res.n == 500
    assert abs(res.b.n / 500 - 0.3) < 0.1
    assert res.value == pytest.approx(res.b.value - res.a.value)
    assert res.ci_low < res.value < res.ci_high and 0.0 <= res.p_value <= 1.0
    a2, b2 = agents.UniformRandom(), agents.UCB1()
    a2.reset(0)
    b2.reset(1)
    again = ab_test(env(), a2, b2, n_steps=500, split=0.3, rng=4)
    assert repr(again) == repr(res)


@pytest.mark.slow
def test_static_arms_are_unbiased_and_the_interval_covers_the_true_difference():
    config = simulator.preset("bred_linear")

    def value(arm):
        return simulator.static_policy_value(
            config, lambda x, avail: np.eye(config.n_arms)[np.full(len(x), arm)])

    truth = value(1) - value(7)
    diffs, covered, pvals = [], 0, []
    for seed in range(120):
        res = ab_test(env(), fixed(7), fixed(1), n_steps=400, rng=seed)
        diffs.append(res.value)
        covered += res.ci_low <= truth <= res.ci_high
        pvals.append(res.p_value)
    diffs = np.array(diffs)
    t = (diffs.mean() - truth) / (diffs.std(ddof=1) / math.sqrt(diffs.size))
    assert abs(t) < 4
    # 95% intervals: not significantly below nominal (one-sided binomial test at 1e-3)
    assert stats.binomtest(covered, 120, 0.95, alternative="less").pvalue > 1e-3
    # identical arms: Welch's p-values are uniform, not piled up near 0
    same = [ab_test(env(), fixed(1), fixed(1), n_steps=300, rng=s).p_value for s in range(60)]
    assert np.mean(np.array(same) < 0.05) < 0.2


@pytest.mark.parametrize("kwargs, exc, match", [
    pytest.param(dict(n_steps=1), ValueError, "`n_steps`", id="n_steps"),
    pytest.param(dict(n_steps=10, split=1.0), ValueError, "`split`", id="split"),
    pytest.param(dict(n_steps=10, ci=2), ValueError, "`ci`", id="ci"),
])
def test_bad_arguments_are_named(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        ab_test(env(), fixed(0), fixed(1), **kwargs)


def test_a_non_agent_and_a_short_episode_are_errors():
    with pytest.raises(TypeError, match="`policy_b`"):
        ab_test(env(), fixed(0), object(), n_steps=10)
    config = simulator.LinearBanditConfig(lifetime=30)  # arms die at tick 30: horizon 30
    assert config.horizon == 30
    short = simulator.LinearBanditEnv(config)
    with pytest.raises(ValueError, match="`n_steps`.*ended after 30 of 40"):
        ab_test(short, agents.UniformRandom(), agents.UniformRandom(), n_steps=40, rng=0)
