"""The Estimate helpers against their formulas written out by hand (statistics.NormalDist for
the quantile), their degenerate cases, and bad input."""

import math
import statistics

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from evaluators import (
    EmptySampleWarning,
    Estimate,
    UndefinedStderrWarning,
    normal_estimate,
    wilson_estimate,
)

CLOSE = dict(rel=1e-12, abs=1e-15)


def z_of(level):
    return statistics.NormalDist().inv_cdf(0.5 + level / 2)


@given(xs=st.lists(st.floats(-1e3, 1e3), min_size=2, max_size=30),
       level=st.sampled_from([0.5, 0.9, 0.95, 0.99]))
def test_normal_estimate_is_the_textbook_mean_and_interval(xs, level):
    n = len(xs)
    mean = sum(xs) / n
    se = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1)) / math.sqrt(n)
    est = normal_estimate(xs, level=level)
    assert est.value == pytest.approx(mean, rel=1e-12, abs=1e-9)
    assert est.stderr == pytest.approx(se, rel=1e-9, abs=1e-9)
    half = z_of(level) * est.stderr
    assert est.ci_low == pytest.approx(est.value - half, rel=1e-12, abs=1e-9)
    assert est.ci_high == pytest.approx(est.value + half, rel=1e-12, abs=1e-9)
    assert (est.n, est.level) == (n, level)


def test_normal_estimate_by_hand():
    est = normal_estimate(np.array([1, 2, 3, 6]))  # ints and the default level
    assert est.value == 3.0 and est.level == 0.95
    assert est.stderr == pytest.approx(math.sqrt(14 / 3) / 2, **CLOSE)  # sum sq dev 14, n-1 3
    assert est.ci_high - est.value == pytest.approx(1.959963984540054 * est.stderr, **CLOSE)
    assert normal_estimate([True, False, True, True]).value == 0.75  # bools are 0/1


@given(n=st.integers(1, 500), data=st.data(), level=st.sampled_from([0.8, 0.95, 0.999]))
def test_wilson_estimate_is_the_wilson_score_interval(n, data, level):
    s = data.draw(st.integers(0, n))
    z = z_of(level)
    p = s / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    est = wilson_estimate(s, n, level=level)
    assert est.value == p and (est.n, est.level) == (n, level)
    assert est.stderr == pytest.approx(math.sqrt(p * (1 - p) / n), **CLOSE)
    assert est.ci_low == pytest.approx(centre - half, rel=1e-12, abs=1e-12)
    assert est.ci_high == pytest.approx(centre + half, rel=1e-12, abs=1e-12)
    # the score interval contains p: exactly, at the edges too (round-off missed 0 by 6e-17)
    assert 0.0 <= est.ci_low <= p <= est.ci_high <= 1.0


def test_wilson_estimate_by_hand_and_at_the_edges():
    # 9/10 at 95%: z^2 = 3.8415, centre (0.9 + 0.19207) / 1.38415, the textbook [0.5958, 0.9821]
    est = wilson_estimate(9, 10)
    assert (round(est.ci_low, 4), round(est.ci_high, 4)) == (0.5958, 0.9821)
    assert wilson_estimate(0, 7).ci_low == 0.0 and wilson_estimate(0, 7).ci_high > 0
    assert wilson_estimate(7, 7).ci_high == 1.0 and wilson_estimate(7, 7).ci_low < 1
    assert wilson_estimate(3.0, 10.0) == wilson_estimate(3, 10)  # integral floats are counts
    assert wilson_estimate(np.int64(3), np.uint8(10)) == wilson_estimate(3, 10)


def test_estimate_covers_its_bounds_and_prints_them():
    est = Estimate(1.5, 0.25, 1.0, 2.0, 3)
    assert est.level == 0.95
    assert est.covers(1.0) and est.covers(2.0) and est.covers(1.5)
    assert not est.covers(0.999) and not est.covers(2.001)
    assert not Estimate(math.nan, math.nan, math.nan, math.nan, 0).covers(0.0)
    assert str(est) == "1.5 ± 0.25 [1, 2] (n=3)"


# -- degenerate but legal: nan with a named warning ------------------------------------------
def _one_warning(record, category, message):
    """The call warned once, with ``category`` and exactly ``message``, pointing at the
    caller's line (this file), not at evaluators' own."""
    got = [w for w in record if issubclass(w.category, category)]
    assert len(got) == 1 and str(got[0].message) == message, [str(w.message) for w in got]
    # under mutation testing the caller is mutmut's trampoline, one frame between
    assert got[0].filename == __file__ or "mutmut" in got[0].filename, got[0].filename


def test_no_samples_is_nan_with_a_named_warning():
    with pytest.warns(EmptySampleWarning) as record:
        est = normal_estimate([], level=0.9)
    _one_warning(record, EmptySampleWarning, "normal_estimate: no samples, the mean of nothing "
                 "is undefined; returning nan.")
    assert math.isnan(est.value) and math.isnan(est.stderr) and math.isnan(est.ci_low)
    assert math.isnan(est.ci_high) and (est.n, est.level) == (0, 0.9)
    with pytest.warns(EmptySampleWarning) as record:
        est = wilson_estimate(0, 0, level=0.9)
    _one_warning(record, EmptySampleWarning, "wilson_estimate: a proportion of 0 trials is "
                 "undefined; returning nan.")
    assert math.isnan(est.value) and math.isnan(est.ci_high) and (est.n, est.level) == (0, 0.9)


def test_one_sample_gives_the_value_and_a_nan_stderr_with_a_warning():
    with pytest.warns(UndefinedStderrWarning) as record:
        est = normal_estimate([4.0], level=0.8)
    _one_warning(record, UndefinedStderrWarning, "normal_estimate: the standard error needs at "
                 "least 2 samples (got 1); stderr and interval are nan.")
    assert est.value == 4.0 and math.isnan(est.stderr)
    assert math.isnan(est.ci_low) and math.isnan(est.ci_high) and (est.n, est.level) == (1, 0.8)


# -- bad input: the argument named, the rule, what was received --------------------------------
@pytest.mark.parametrize("call, exc, msg", [
    pytest.param(lambda: normal_estimate(["a", "b"]), TypeError,
                 r"`samples` must be an array of real numbers; got dtype <U1", id="strings"),
    pytest.param(lambda: normal_estimate([1 + 2j, 0j]), TypeError,
                 r"`samples` must be an array of real numbers; got dtype complex128",
                 id="complex"),
    pytest.param(lambda: normal_estimate([None, 1.0]), TypeError, r"`samples` must be an array "
                 r"of real numbers; got dtype object", id="object"),
    pytest.param(lambda: normal_estimate(2.0), ValueError,
                 r"`samples` must be a 1-d array; got shape \(\)", id="0-d"),
    pytest.param(lambda: normal_estimate(np.ones((2, 3))), ValueError,
                 r"`samples` must be a 1-d array; got shape \(2, 3\)", id="2-d"),
    pytest.param(lambda: normal_estimate([1.0, math.nan]), ValueError,
                 r"`samples` must be finite; got nan at index 1", id="nan"),
    pytest.param(lambda: normal_estimate([0.0, 1.0, -math.inf]), ValueError,
                 r"`samples` must be finite; got -inf at index 2", id="inf"),
    pytest.param(lambda: normal_estimate([1.0, 2.0], level=2), ValueError,
                 r"`level` must be a finite number in \(0.0, 1.0\); got 2.0", id="level-2"),
    pytest.param(lambda: normal_estimate([1.0, 2.0], level="0.9"), TypeError, r"`level`",
                 id="level-str"),
    pytest.param(lambda: wilson_estimate(1.5, 3), TypeError,
                 r"`successes` must be an int in \[0, 3\]; got float 1.5", id="successes-fraction"),
    pytest.param(lambda: wilson_estimate(math.nan, 3), TypeError,
                 r"`successes` must be an int in \[0, 3\]; got float nan", id="successes-nan"),
    pytest.param(lambda: wilson_estimate(math.inf, 3), TypeError,
                 r"`successes` must be an int in \[0, 3\]; got float inf", id="successes-inf"),
    pytest.param(lambda: wilson_estimate(True, 3), TypeError,
                 r"`successes` must be an int in \[0, 3\]; got bool True", id="successes-bool"),
    pytest.param(lambda: wilson_estimate(4, 3), ValueError,
                 r"`successes` must be an int in \[0, 3\]; got 4", id="successes-above-n"),
    pytest.param(lambda: wilson_estimate(-1, 3), ValueError,
                 r"`successes` must be an int in \[0, 3\]; got -1", id="successes-negative"),
    pytest.param(lambda: wilson_estimate(1, 2.5), TypeError,
                 r"`n` must be an int >= 0; got float 2.5", id="n-fraction"),
    pytest.param(lambda: wilson_estimate(0, -2), ValueError, r"`n` must be an int >= 0; got -2",
                 id="n-negative"),
    pytest.param(lambda: wilson_estimate(1, "3"), TypeError, r"`n` must be an int >= 0; got str",
                 id="n-str"),
    pytest.param(lambda: wilson_estimate(1, 3, level=1.0), ValueError, r"`level`",
                 id="wilson-level"),
])
def test_bad_input(call, exc, msg):
    with pytest.raises(exc, match=msg):
        call()
