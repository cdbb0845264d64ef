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
    n_tests = 400
    for seed in range(n_tests):
        res = ab_test(env(), fixed(7), fixed(1), n_steps=400, rng=seed)
        diffs.append(res.value)
        covered += res.ci_low <= truth <= res.ci_high
        pvals.append(res.p_value)
    diffs = np.array(diffs)
    t = (diffs.mean() - truth) / (diffs.std(ddof=1) / math.sqrt(diffs.size))
    assert abs(t) < 4
    # 95% intervals, both ways (binomial test at 1e-3): not below nominal (too narrow) and not
    # above it (too wide: a standard error of sa + sb instead of sqrt(sa^2 + sb^2) covered
    # 398 of these 400 differences)
    assert stats.binomtest(covered, n_tests, 0.95).pvalue > 1e-3, covered
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


# -- every number of the result against its formula, from the rewards each arm saw ------------
class GaussianArms:
    """A bandit environment with continuous rewards: arm a pays Normal(mu[a], sd[a]), so the
    two arms of a test have unequal variances (where Welch's standard error differs from a
    pooled one) and unequal sizes (split != 0.5)."""

    def __init__(self, mu, sd):
        self.mu, self.sd = np.asarray(mu, float), np.asarray(sd, float)

    def reset(self, *, seed=None):
        self.gen = np.random.default_rng(seed)
        return {"context": np.zeros(1), "available": np.ones(self.mu.size, bool)}, {}

    def step(self, action):
        obs = {"context": np.zeros(1), "available": np.ones(self.mu.size, bool)}
        return obs, float(self.gen.normal(self.mu[action], self.sd[action])), False, False, {}


class Recorder(FixedArm):
    """FixedArm that keeps the rewards it is updated with: the arm's own users, in order."""

    def __init__(self, arm):
        super().__init__(arm)
        self.rewards = []

    def update(self, observation, action, reward):
        self.rewards.append(reward)


def normal_interval(xs, level):
    """(mean, standard error, low, high) of a sample, by the statistics module."""
    import statistics

    m = statistics.fmean(xs)
    se = statistics.stdev(xs) / math.sqrt(len(xs))
    z = statistics.NormalDist().inv_cdf(0.5 + level / 2)
    return m, se, m - z * se, m + z * se


@pytest.mark.parametrize("make_env, arms, split, ci, n_steps", [
    pytest.param(lambda: GaussianArms([0.2, 0.5], [1.0, 3.0]), (0, 1), 0.3, 0.9, 300,
                 id="gaussian-unequal-variances"),
    pytest.param(lambda: GaussianArms([1.0, 1.0], [0.5, 0.5]), (1, 0), 0.5, 0.95, 41,
                 id="gaussian-equal-means"),
    pytest.param(env, (7, 1), 0.7, 0.99, 500, id="linear-bandit-clicks"),
])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_number_is_welchs_formula_on_the_rewards_each_arm_saw(make_env, arms, split, ci,
                                                                    n_steps, seed):
    """value = mean_B - mean_A; stderr = sqrt(s_A^2/n_A + s_B^2/n_B) (sample variances);
    interval value -+ z stderr; each arm's own normal interval; the p-value of Welch's t with
    the Welch-Satterthwaite degrees of freedom: each computed here from the rewards the arms
    were updated with (statistics module, scipy's t law), not by the module's code."""
    a, b = Recorder(arms[0]), Recorder(arms[1])
    res = ab_test(make_env(), a, b, n_steps=n_steps, split=split, ci=ci, rng=seed)
    ra, rb = np.array(a.rewards), np.array(b.rewards)
    assert res.n == n_steps == ra.size + rb.size and res.level == ci
    assert (res.a.n, res.b.n) == (ra.size, rb.size)
    ma, sa, la, ha = normal_interval(ra.tolist(), ci)
    mb, sb, lb, hb = normal_interval(rb.tolist(), ci)
    close = dict(rel=1e-10, abs=1e-12)
    assert (res.a.value, res.a.stderr, res.a.ci_low, res.a.ci_high) == pytest.approx(
        (ma, sa, la, ha), **close)
    assert (res.b.value, res.b.stderr, res.b.ci_low, res.b.ci_high) == pytest.approx(
        (mb, sb, lb, hb), **close)
    se = math.sqrt(sa ** 2 + sb ** 2)
    z = stats.norm.ppf(0.5 + ci / 2)
    assert res.value == pytest.approx(mb - ma, **close)
    assert res.stderr == pytest.approx(se, **close)
    assert (res.ci_low, res.ci_high) == pytest.approx((mb - ma - z * se, mb - ma + z * se),
                                                      **close)
    va, vb = sa ** 2, sb ** 2
    df = (va + vb) ** 2 / (va ** 2 / (ra.size - 1) + vb ** 2 / (rb.size - 1))
    p = 2 * stats.t.sf(abs(mb - ma) / se, df)
    assert res.p_value == pytest.approx(p, rel=1e-8, abs=1e-300)


def test_the_assignment_follows_split_and_the_seed():
    """Users go to B with probability split (binomial test over 4,000 users); two seeds
    assign them differently, the same seed the same way."""
    a, b = Recorder(0), Recorder(1)
    res = ab_test(GaussianArms([0.0, 0.0], [1.0, 1.0]), a, b, n_steps=4000, split=0.2, rng=3)
    assert stats.binomtest(res.b.n, 4000, 0.2).pvalue > 1e-4
    again = ab_test(GaussianArms([0.0, 0.0], [1.0, 1.0]), Recorder(0), Recorder(1),
                    n_steps=4000, split=0.2, rng=3)
    other = ab_test(GaussianArms([0.0, 0.0], [1.0, 1.0]), Recorder(0), Recorder(1),
                    n_steps=4000, split=0.2, rng=4)
    assert repr(again) == repr(res)
    assert other.b.n != res.b.n or other.value != res.value


# -- the edges: refusals word for word, the episode's end, constant arms, the stream --------
def test_refusals_word_for_word():
    with pytest.raises(TypeError) as e:
        ab_test(env(), object(), fixed(1), n_steps=10)
    assert str(e.value) == "`policy_a` must be a bandit agent (with act and update); got object."
    with pytest.raises(TypeError) as e:
        ab_test(env(), fixed(0), 3, n_steps=10)
    assert str(e.value) == "`policy_b` must be a bandit agent (with act and update); got int."
    for split in (0.0, 1.0, -0.5):
        with pytest.raises(ValueError) as e:
            ab_test(env(), fixed(0), fixed(1), n_steps=10, split=split)
        assert str(e.value) == f"`split` must be a finite number in (0.0, 1.0); got {split!r}."
    with pytest.raises(ValueError) as e:
        ab_test(env(), fixed(0), fixed(1), n_steps=1)
    assert str(e.value) == "`n_steps` must be an int >= 2; got 1."
    from evaluators import UndefinedStderrWarning

    with pytest.warns(UndefinedStderrWarning):  # two users: legal, one per arm here
        res = ab_test(GaussianArms([0.0, 1.0], [1.0, 1.0]), fixed(0), fixed(1), n_steps=2,
                      split=0.5, rng=1)
    assert res.n == 2 and res.a.n == res.b.n == 1
    assert math.isnan(res.stderr) and math.isnan(res.p_value) and math.isnan(res.ci_low)


class Ending(GaussianArms):
    """Ends its episode (terminated) at step ``length``."""

    def __init__(self, length):
        super().__init__([0.0, 1.0], [1.0, 1.0])
        self.length = length

    def reset(self, *, seed=None):
        self.t = 0
        return super().reset(seed=seed)

    def step(self, action):
        self.t += 1
        obs, r, _, _, info = super().step(action)
        return obs, r, self.t >= self.length, False, info


def test_an_episode_may_end_at_the_last_step_but_not_before():
    res = ab_test(Ending(30), fixed(0), fixed(1), n_steps=30, rng=0)
    assert res.n == 30
    with pytest.raises(ValueError) as e:
        ab_test(Ending(29), fixed(0), fixed(1), n_steps=30, rng=0)
    assert str(e.value) == ("`n_steps` must be within the environment's episode; it ended "
                            "after 29 of 30 steps.")


def test_constant_arms_have_no_p_value_and_no_warning():
    """Both arms' rewards constant (0 and 1): the standard error is 0, the p-value nan (the
    t statistic is undefined), without a warning from the t-test."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = ab_test(GaussianArms([0.0, 1.0], [0.0, 0.0]), fixed(0), fixed(1), n_steps=50,
                      rng=0)
    assert res.stderr == 0.0 and res.value == 1.0 and math.isnan(res.p_value)
    assert res.ci_low == res.ci_high == 1.0


class SeedRecorder(GaussianArms):
    def reset(self, *, seed=None):
        self.seed = seed
        return super().reset(seed=seed)


@pytest.mark.parametrize("seed", [0, 1, 2, 18])
def test_the_random_stream_the_environment_seed_then_one_coin_per_user(seed):
    """The documented use of ``rng`` (same seed, same bytes): the environment is reset with
    the stream's first draw in [0, 2^63), then user t goes to B when the t-th uniform is
    below ``split``. (Seeds 2 and 18: numpy's draw in [1, 2^63) differs from the one in
    [0, 2^63) for about a quarter of the seeds, these among them.)"""
    e = SeedRecorder([0.0, 1.0], [0.0, 0.0])  # arm 1 pays 1: the rewards say who played
    a, b = Recorder(0), Recorder(1)
    ab_test(e, a, b, n_steps=200, split=0.4, rng=seed)
    gen = np.random.default_rng(seed)
    assert e.seed == int(gen.integers(0, 2**63))
    to_b = gen.random(200) < 0.4
    assert (len(b.rewards), len(a.rewards)) == (int(to_b.sum()), int((~to_b).sum()))
    again = SeedRecorder([0.0, 1.0], [0.0, 0.0])
    ab_test(again, Recorder(0), Recorder(1), n_steps=200, split=0.4, rng=seed + 100)
    assert again.seed != e.seed
