"""Test your own off-policy estimator with recloop in ten lines: ``pytest examples/``."""

import warnings

import numpy as np

from evaluators import Estimate, normal_estimate
from recloop.testing import check_ope_estimator


class NoSupportWarning(UserWarning):
    """The target policy never takes a logged action: the log says nothing about it."""


def my_ips(log, action_dist) -> Estimate:
    """Inverse propensity scoring, honest about degenerate logs."""
    if log.n_rounds == 0:
        raise ValueError("`log` is empty.")
    w = np.asarray(action_dist)[np.arange(log.n_rounds), log.action, 0] / log.pscore
    if not w.any():  # the target never takes a logged action: the log says nothing
        warnings.warn("no logged action has support under the target policy",
                      NoSupportWarning, stacklevel=2)
        return Estimate(np.nan, np.nan, np.nan, np.nan, log.n_rounds)
    return normal_estimate(w * log.reward)


def test_my_ips():
    report = check_ope_estimator(my_ips, n_problems=3, n_logs=100, rng=0)
    print(report)  # every property; a failure raises AssertionError naming the smallest example
