"""check_ope_estimator's interval_coverage property is two-sided: intervals too narrow and
intervals too wide both fail it, and the right ones pass."""

import dataclasses

import pytest

from evaluators import ips
from recloop.testing import CheckFailed, check_ope_estimator


def scaled_ips(factor):
    """IPS whose interval is ``factor`` times as wide as the right one."""
    def estimator(log, action_dist):
        e = ips(log, action_dist)
        half = factor * (e.ci_high - e.ci_low) / 2
        return dataclasses.replace(e, ci_low=e.value - half, ci_high=e.value + half)
    return estimator


SMALL = dict(n_problems=3, n_logs=100, rng=5)


def coverage_result(estimator):
    try:
        report = check_ope_estimator(estimator, **SMALL)
    except CheckFailed as exc:
        report = exc.report
    (result,) = [r for r in report.results if r.name == "interval_coverage"]
    return result, report.figures["coverage"]


@pytest.mark.slow
def test_coverage_is_tested_both_ways():
    right, cov = coverage_result(scaled_ips(1.0))
    assert right.passed and 0.85 <= cov <= 0.99, (right.detail, cov)
    wide, cov_wide = coverage_result(scaled_ips(3.0))
    assert not wide.passed and "above their level 0.95" in wide.detail, wide.detail
    assert cov_wide > 0.99
    narrow, cov_narrow = coverage_result(scaled_ips(0.5))
    assert not narrow.passed and "below 0.95 - 0.1" in narrow.detail, narrow.detail
    assert cov_narrow < 0.85
