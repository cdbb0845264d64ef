"""The reward model's bootstrap (issue 33): resamples drawn uniformly over *all* records.

``model_variance="bootstrap"`` refits the model on resamples of the log's records. With the
"mean" model and one action, the direct method's value on a resample is the resample's mean
reward, whose bootstrap distribution is known exactly: a resample of n records drawn with
replacement has a mean of standard deviation ``sqrt(mean((r - mean r)^2) / n)``, and each
record appears ``Binomial(n, 1/n)`` times. A bootstrap drawing ``integers(0, n - 1)`` never
resamples the last record: its standard errors were 0.5-2% off on ordinary logs, and 0 on a
log whose last record is the only rewarded one.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from evaluators import direct_method
from simulator.logs import BanditLog

B = 4000  # resamples: the bootstrap's standard deviation to about 2% (relative)


def one_action_log(reward) -> BanditLog:
    reward = np.asarray(reward, dtype=float)
    n = reward.size
    return BanditLog(context=np.zeros((n, 1)), action=np.zeros(n, dtype=np.int64),
                     reward=reward, pscore=np.ones(n), n_actions=1)


def bootstrap_se(reward, seed=0) -> float:
    log = one_action_log(reward)
    return direct_method(log, np.ones((log.n_rounds, 1)), model="mean",
                         model_variance="bootstrap", n_bootstrap=B, rng=seed).stderr


def exact_sd(reward) -> float:
    """The standard deviation of a resample's mean over all n^n resamples."""
    r = np.asarray(reward, dtype=float)
    return math.sqrt(float(np.mean((r - r.mean()) ** 2)) / r.size)


@pytest.mark.parametrize("n", [3, 5, 8])
def test_every_record_is_resampled_binomially(n):
    """A log rewarded at record j only: the bootstrap standard error is the standard
    deviation of Binomial(n, 1/n) / n, sqrt((1/n)(1 - 1/n) / n), for every j, the last one
    included (the bug: 0 for the last record, and sqrt(n p (1 - p)) / n with p = 1/(n - 1)
    for the others, 5-10% above at these n)."""
    expected = math.sqrt((1 / n) * (1 - 1 / n) / n)
    for j in range(n):
        reward = np.zeros(n)
        reward[j] = 1.0
        assert bootstrap_se(reward, seed=j) == pytest.approx(expected, rel=0.05), j


@pytest.mark.parametrize("seed", [0, 1])
def test_bootstrap_se_of_the_mean_model_is_the_exact_bootstrap_sd(seed):
    """Unequal rewards, the largest last: the bootstrap standard error against the exact
    standard deviation of a resample's mean (within 5%: B = 4000 resamples)."""
    reward = np.random.default_rng(seed).random(12)
    reward[-1] = 3.0
    assert bootstrap_se(reward, seed) == pytest.approx(exact_sd(reward), rel=0.05)


def test_the_bootstrap_follows_its_seed():
    """Same rng, the same standard error to the last bit; another rng, another one."""
    reward = np.random.default_rng(3).random(10)
    assert bootstrap_se(reward, 5) == bootstrap_se(reward, 5)
    assert bootstrap_se(reward, 5) != bootstrap_se(reward, 6)
