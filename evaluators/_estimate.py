"""The result type every evaluator returns: a value with its uncertainty."""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri

from recloop_base.validation import ArgumentTypeError, ArgumentValueError, check_int, check_level

__all__ = ["EmptySampleWarning", "Estimate", "UndefinedStderrWarning", "normal_estimate",
           "wilson_estimate"]


class EmptySampleWarning(UserWarning):
    """An estimate of nothing: no sample (or a proportion of 0 trials) was given, so value,
    standard error and interval are ``nan``."""


class UndefinedStderrWarning(UserWarning):
    """The standard error (and so the interval) cannot be estimated from the data, e.g. from
    a log of one record: it is ``nan``; the point estimate is still given."""


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


def _samples(samples) -> np.ndarray:
    """``samples`` as a 1-d float64 array of finite real numbers (bools count as 0/1)."""
    x = np.asarray(samples)
    if x.dtype.kind not in "biuf":
        raise ArgumentTypeError("samples", "an array of real numbers", f"dtype {x.dtype}")
    if x.ndim != 1:
        raise ArgumentValueError("samples", "a 1-d array", f"shape {x.shape}")
    x = x.astype(np.float64, copy=False)
    bad = np.flatnonzero(~np.isfinite(x))
    if bad.size:
        raise ArgumentValueError("samples", "finite", f"{x[bad[0]]} at index {int(bad[0])}")
    return x


def _empty(level: float, what: str) -> Estimate:
    warnings.warn(f"{what}; returning nan.", EmptySampleWarning, stacklevel=3)
    return Estimate(math.nan, math.nan, math.nan, math.nan, 0, level)


def normal_estimate(samples, *, level: float = 0.95) -> Estimate:
    """Mean of i.i.d. ``samples`` with a normal-approximation interval.

    Parameters
    ----------
    samples : array_like of real numbers, shape (n,)
        Finite values (bools count as 0/1).
    level : float in (0, 1), default 0.95
        Level of the interval.

    Returns
    -------
    Estimate
        ``mean``, ``stderr = std(samples, ddof=1) / sqrt(n)`` and ``mean -/+ z stderr`` with
        ``z`` the normal quantile of ``(1 + level) / 2``. With one sample the standard error
        is undefined: ``nan`` with an :class:`UndefinedStderrWarning` (the mean is given).
        With no sample (legal but degenerate: a replay that matched nothing, an arm that
        drew no user) everything is ``nan``, with an :class:`EmptySampleWarning`.

    Raises
    ------
    TypeError
        ``samples`` not real numbers (strings, complex, objects), ``level`` not a number.
    ValueError
        ``samples`` not 1-d (a scalar, a matrix) or with nan/inf; ``level`` outside (0, 1).

    Examples
    --------
    >>> normal_estimate([1.0, 2.0, 3.0]).value, normal_estimate([1.0, 2.0, 3.0]).stderr
    (2.0, 0.5773502691896258)
    """
    level = check_level(level, "level")
    x = _samples(samples)
    n = x.size
    if n == 0:
        return _empty(level, "normal_estimate: no samples, the mean of nothing is undefined")
    mean = float(x.mean())
    if n == 1:
        warnings.warn("normal_estimate: the standard error needs at least 2 samples (got 1); "
                      "stderr and interval are nan.", UndefinedStderrWarning, stacklevel=2)
        return Estimate(mean, math.nan, math.nan, math.nan, 1, level)
    se = float(x.std(ddof=1) / math.sqrt(n))
    half = _z(level) * se
    return Estimate(mean, se, mean - half, mean + half, n, level)


def _count(value, name: str, high=None) -> int:
    """A count: an int >= 0 (an integral float such as ``3.0`` from a sum is accepted)."""
    if (isinstance(value, (numbers.Real, np.floating)) and not isinstance(value, numbers.Integral)
            and math.isfinite(value) and float(value).is_integer()):
        value = int(value)
    return check_int(value, name, low=0, high=high)


def wilson_estimate(successes, n, *, level: float = 0.95) -> Estimate:
    """Proportion ``successes / n`` with the Wilson score interval.

    Parameters
    ----------
    successes : int in [0, n]
        Number of successes (an integral float such as ``3.0`` is accepted).
    n : int >= 0
        Number of trials.
    level : float in (0, 1), default 0.95
        Level of the interval.

    Returns
    -------
    Estimate
        ``p = successes / n``, ``stderr = sqrt(p (1 - p) / n)`` and the Wilson score
        interval ``(p + z^2/2n -/+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)``, which
        contains ``p`` (exactly 0 and 1 at the edges: round-off would miss them). ``n == 0``
        is a proportion of nothing: ``nan`` with an :class:`EmptySampleWarning`.

    Raises
    ------
    TypeError
        Counts that are not integers (``1.5``, ``nan``, strings), ``level`` not a number.
    ValueError
        ``n < 0``, ``successes`` outside ``[0, n]``, ``level`` outside (0, 1).

    Notes
    -----
    Wilson (1927), "Probable inference, the law of succession, and statistical inference".

    Examples
    --------
    >>> e = wilson_estimate(9, 10)
    >>> e.value, round(e.ci_low, 4), round(e.ci_high, 4)
    (0.9, 0.5958, 0.9821)
    """
    level = check_level(level, "level")
    n = _count(n, "n")
    successes = _count(successes, "successes", high=n)
    if n == 0:
        return _empty(level, "wilson_estimate: a proportion of 0 trials is undefined")
    p = successes / n
    z = _z(level)
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    se = math.sqrt(p * (1 - p) / n)
    # the interval contains p (exactly 0 or 1 at the edges, where round-off would miss them)
    low, high = max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half))
    return Estimate(p, se, low, high, n, level)
