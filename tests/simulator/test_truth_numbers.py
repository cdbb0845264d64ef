"""Truth figures against hand computations, and the online loop's contract with its agents
(the survivors of the mutation run of simulator/_truth.py, docs/testing.md)."""

import itertools

import numpy as np
import pytest

from simulator import LinearBanditConfig, online_value, oracle_value, static_policy_value
from simulator import _bandit as B

DYN = LinearBanditConfig(n_arms=40, n_universal=16, lifetime=60, n_alive=6, half_life=30.0)


def atoms(c):
    """Every context of the binary distribution with its probability, by itertools."""
    p = c.context_p
    for bits in itertools.product([0.0, 1.0], repeat=c.dim - 1):
        yield np.array([1.0, *bits]), float(np.prod([p if b else 1 - p for b in bits]))


@pytest.mark.parametrize("c, ticks", [(LinearBanditConfig(dim=5), 0),
                                      (DYN, 0), (DYN, [0, 7, 33])],
                         ids=["static", "dynamic-t0", "dynamic-3-ticks"])
def test_oracle_value_is_the_mean_over_ticks_of_the_best_arm_per_context(c, ticks):
    ts = np.atleast_1d(ticks)
    per_tick = [sum(prob * float(np.max(B.true_ctr(c, x[None], np.array([t])))) for x, prob
                    in atoms(c)) for t in ts]
    assert oracle_value(c, ticks=ticks) == pytest.approx(sum(per_tick) / len(ts), rel=1e-12)


class ContextGreedy:
    """A static policy that reads the context and checks the tick it is shown."""

    def __init__(self, rng=None, start=0):
        self.t = start

    def act(self, obs):
        assert obs["tick"] == self.t, (obs["tick"], self.t)
        avail = obs["available"]
        score = obs["context"] @ np.linspace(-1, 1, obs["context"].size * avail.size).reshape(
            obs["context"].size, avail.size)
        return int(np.argmax(np.where(avail, score, -np.inf)))

    def update(self, obs, action, reward):
        self.t += 1


def greedy_probs(context, available):
    score = context @ np.linspace(-1, 1, context.shape[1] * available.shape[1]).reshape(
        context.shape[1], available.shape[1])
    p = np.zeros(available.shape)
    p[np.arange(len(p)), np.argmax(np.where(available, score, -np.inf), axis=1)] = 1.0
    return p


@pytest.mark.slow
def test_online_value_of_a_context_reading_agent_equals_its_static_value():
    c, T = DYN, 30
    v = online_value(c, lambda g: ContextGreedy(g, start=5), T, start=5, n_runs=200, rng=4,
                     method="loop")
    truth = static_policy_value(c, greedy_probs, ticks=np.arange(5, 5 + T))
    assert 0 < v.stderr and abs(v.value - truth) < 4 * v.stderr, (v.value, truth, v.stderr)


class Fixed:
    def __init__(self, arm):
        self.arm = arm

    def act(self, obs):
        return self.arm

    def update(self, obs, action, reward):
        pass


class Scribbler(Fixed):
    """Writes into the observation it was given."""

    def act(self, obs):
        obs["context"][0] = 99.0
        return 0


def test_the_online_loop_checks_every_action_and_lends_read_only_observations():
    c = LinearBanditConfig()  # 10 arms, all available
    with pytest.raises(ValueError, match="returned action 10 at step 0, which is out of range"):
        online_value(c, lambda g: Fixed(10), 3, n_runs=1, rng=0, method="loop")
    with pytest.raises(ValueError, match="non-integer action True"):
        online_value(c, lambda g: Fixed(True), 3, n_runs=1, rng=0, method="loop")
    with pytest.raises(ValueError, match="non-integer action 1.0"):
        online_value(c, lambda g: Fixed(1.0), 3, n_runs=1, rng=0, method="loop")
    # a 0-d integer array is an int
    a = online_value(c, lambda g: Fixed(np.array(3)), 4, n_runs=2, rng=0, method="loop")
    b = online_value(c, lambda g: Fixed(3), 4, n_runs=2, rng=0, method="loop")
    np.testing.assert_array_equal(a.curve, b.curve)
    with pytest.raises(ValueError, match="read-only"):
        online_value(c, lambda g: Scribbler(0), 3, n_runs=1, rng=0, method="loop")


@pytest.mark.parametrize("n_runs", [2, 5])
def test_online_curve_and_stderr_are_the_mean_and_its_stderr_over_runs(n_runs):
    """Run by run with the loop (run i on child i of rng.spawn(n_runs), as documented), then
    the mean of the running averages and std(ddof=1) / sqrt(n_runs), step by step."""
    from simulator._truth import _run_loop

    c, T, start = DYN, 12, 3
    v = online_value(c, lambda g: ContextGreedy(g, start=start), T, start=start, n_runs=n_runs,
                     rng=9, method="loop", n_partitions=2)
    runs = []
    for i, child in enumerate(np.random.default_rng(9).spawn(n_runs)):
        env_gen, _ = child.spawn(2)
        r = _run_loop(c, ContextGreedy(start=start), int(B.episode_key(env_gen)), T, i, start)
        runs.append([sum(r[:t]) / t for t in range(1, T + 1)])
    for t in range(T):
        col = [run[t] for run in runs]
        mean = sum(col) / n_runs
        se = (sum((x - mean) ** 2 for x in col) / (n_runs - 1)) ** 0.5 / n_runs ** 0.5
        assert v.curve[t] == pytest.approx(mean, rel=1e-12)
        assert v.curve_stderr[t] == pytest.approx(se, rel=1e-9, abs=1e-15)
    assert (v.value, v.stderr, v.n_runs) == (v.curve[-1], v.curve_stderr[-1], n_runs)
    assert v.at(1) == (v.curve[0], v.curve_stderr[0]) and v.at(T) == (v.value, v.stderr)
    with pytest.raises(ValueError, match=rf"`t` must be in \[1, {T}\]; got 0"):
        v.at(0)
    with pytest.raises(ValueError, match=rf"`t` must be in \[1, {T}\]; got {T + 1}"):
        v.at(T + 1)


def test_one_run_has_no_stderr_and_says_so():
    from simulator._truth import DegenerateTruthWarning

    with pytest.warns(DegenerateTruthWarning, match="`n_runs` == 1: standard errors are nan"):
        v = online_value(DYN, lambda g: Fixed(0), 4, n_runs=1, rng=0)
    assert np.isnan(v.curve_stderr).all() and np.isnan(v.stderr) and np.isfinite(v.value)
