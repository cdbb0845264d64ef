"""The result type every evaluator returns: a value with its uncertainty."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri

__all__ = ["Estimate", "normal_estimate", "wilson_estimate"]


@dataclass(frozen=True)
class Estimate:
    """An estimate with its standard error and confidence interval.

    Attributes
    ----------
    value : float
        The point estimate (``nan`` when the input carried no information).
    stderr : float
        Estimated standard error of ``value`` (``nan`` when unknown).
    ci_low, ci_high : float
        Bounds of the confidence interval at level ``level``.
    n : int
        Number of observations the estimate rests on (samples, matches, replicates).
    level : float
        Confidence level of ``[ci_low, ci_high]``.
    """

    value: float
    stderr: float
    ci_low: float
    ci_high: float
    n: int
    level: float = 0.95

    def covers(self, truth: float) -> bool:
        """Whether the confidence interval contains ``truth``."""
        return bool(self.ci_low <= truth <= self.ci_high)

    def __str__(self) -> str:
        return (
            f"{self.value:.6g} ± {self.stderr:.2g} "
            f"[{self.ci_low:.6g}, {self.ci_high:.6g}] (n={self.n})"
        )


def _z(level: float) -> float:
    return float(ndtri(0.5 + level / 2))  # the normal quantile, without importing scipy.stats


def normal_estimate(samples, *, level: float = 0.95) -> Estimate:
    """Mean of i.i.d. ``samples`` with a normal-approximation interval."""
    x = np.asarray(samples, dtype=np.float64)
    n = x.size
    if n == 0:
        return Estimate(math.nan, math.nan, math.nan, math.nan, 0, level)
    mean = float(x.mean())
    se = float(x.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
    half = _z(level) * se
    return Estimate(mean, se, mean - half, mean + half, n, level)


def wilson_estimate(successes, n: int, *, level: float = 0.95) -> Estimate:
    """Proportion ``successes / n`` with the Wilson score interval."""
    n = int(n)
    if n == 0:
        return Estimate(math.nan, math.nan, math.nan, math.nan, 0, level)
    p = float(successes) / n
    z = _z(level)
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    se = math.sqrt(p * (1 - p) / n)
    return Estimate(p, se, max(0.0, centre - half), min(1.0, centre + half), n, level)
