"""Check your own off-policy estimator on problems whose truth is known exactly.

    python examples/test_my_estimator.py [--quick]   # prints what was checked
    pytest examples/                                 # the same check as a test, in your CI

``recloop.testing.check_ope_estimator`` draws random problems (reward model, logging and
target policies), runs the estimator on many logs of each, and checks determinism, that the
inputs are not mutated, unbiasedness, the coverage of its intervals, and what it does on an
empty log or a target without support. A failure raises ``CheckFailed`` (an
``AssertionError``) listing every failed property; ``failure.problem.draw_log(seed)`` returns
the failing ``(log, action_dist)`` to debug it with.
"""

import sys
import warnings

import numpy as np

from evaluators import Estimate, normal_estimate
from recloop.testing import CheckFailed, check_ope_estimator


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


def test_my_ips(n_logs=100):
    report = check_ope_estimator(my_ips, n_problems=3, n_logs=n_logs, rng=0)
    print(report)  # every property; a failure raises CheckFailed naming the smallest example


def logged_mean(log, action_dist) -> float:
    """A classic mistake: the mean reward of the log, whatever the target."""
    return float(np.mean(log.reward)) if log.n_rounds else float("nan")


if __name__ == "__main__":
    n_logs = 40 if "--quick" in sys.argv else 100
    test_my_ips(n_logs)
    try:
        check_ope_estimator(logged_mean, n_problems=3, n_logs=n_logs, rng=0)
    except CheckFailed as failed:
        print(f"\nlogged_mean fails, as it should:\n{failed.report}")
        f = next(f for f in failed.report.failures if f.name == "unbiased")
        log, action_dist = f.problem.draw_log(f.seeds[0])  # one of the logs it failed on
        print(f"\n`unbiased` failed on logs like this one: {log.n_rounds} records, "
              f"{log.n_actions} arms, mean reward {log.reward.mean():.3f}; the target's "
              f"action_dist has shape {action_dist.shape}")
