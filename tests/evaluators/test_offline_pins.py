"""Sampled LOO scores (issue 33): the reported interval against its formula.

``offline_score(..., n_samples=n)`` reports a hit rate with the Wilson score interval and a
reciprocal rank with the normal interval of a mean. The problems here make every sampled
quality take two known values, so that the sample's mean fixes its count and its standard
deviation, and the interval follows by hand.
"""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
import scipy.sparse as sp

from evaluators import loo_quality, offline_score
from tests.evaluators.test_offline import ConstantRec

Z = statistics.NormalDist().inv_cdf(0.975)


def two_item_profiles(n_users=30):
    """Every user holds items 0 and 1 (and item 2 for every third user)."""
    D = np.zeros((n_users, 3))
    D[:, :2] = 1
    D[::3, 2] = 1
    return sp.csr_array(D)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("n", [50, 400])
def test_sampled_hit_rate_reports_wilsons_interval(seed, n):
    """Constant list [0] at k = 1: a sampled edge is a hit when it is item 0."""
    est = offline_score(two_item_profiles(), ConstantRec([0, 1, 2]), k=1, n_samples=n, rng=seed)
    k = round(est.value * n)
    assert est.value == k / n and est.n == n
    p = k / n
    centre = (k + Z * Z / 2) / (n + Z * Z)
    half = Z / (n + Z * Z) * math.sqrt(k * (n - k) / n + Z * Z / 4)
    close = dict(rel=1e-12, abs=1e-15)
    assert est.stderr == pytest.approx(math.sqrt(p * (1 - p) / n), **close)
    assert (est.ci_low, est.ci_high) == pytest.approx((centre - half, centre + half), **close)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sampled_reciprocal_rank_reports_the_normal_interval_of_its_mean(seed):
    """Constant list [0, 1] at k = 2, users holding {0, 1} (and 2): a sampled edge scores 1
    (item 0), 1/2 (item 1) or 0 (item 2); the score's standard error is the sample's
    standard deviation over sqrt(n), reconstructed from the counts of each value."""
    n = 300
    B = two_item_profiles()
    est = offline_score(B, ConstantRec([0, 1, 2]), k=2, quality="reciprocal_rank",
                        n_samples=n, rng=seed)
    hit = offline_score(B, ConstantRec([0, 1, 2]), k=2, n_samples=n, rng=seed)
    first = offline_score(B, ConstantRec([0, 1, 2]), k=1, n_samples=n, rng=seed)
    # the same draws (same rng): hits at k = 2 are items 0 and 1, at k = 1 item 0
    c1 = round(first.value * n)
    c_half = round(hit.value * n) - c1
    xs = [1.0] * c1 + [0.5] * c_half + [0.0] * (n - c1 - c_half)
    m = statistics.fmean(xs)
    se = statistics.stdev(xs) / math.sqrt(n)
    close = dict(rel=1e-12, abs=1e-15)
    assert (est.value, est.stderr) == pytest.approx((m, se), **close)
    assert (est.ci_low, est.ci_high) == pytest.approx((m - Z * se, m + Z * se), **close)
    # and the exhaustive score against the definition: P(0) + P(1) / 2 over edges
    exact = loo_quality(B, ConstantRec([0, 1, 2]), k=2, quality="reciprocal_rank").score()
    per_user = [(1 + 0.5 + (0 if u % 3 else 0)) / (3 if u % 3 == 0 else 2) for u in range(30)]
    assert exact.value == pytest.approx(statistics.fmean(per_user), rel=1e-12)
