"""recloop.summarize's edges, each number by hand (issue 27, section 1: the survivors of the
mutation run of recloop/_summary.py, docs/testing.md): every field of a row, the grouping
keys (missing agent and variant, params in any order), interval bounds that touch the truth,
half-open intervals, a truth repeated over units reported exactly, the derived properties."""

import math
import warnings

import pytest

from recloop import Measurement, SummaryRow, summarize

NAN = math.nan


def est(value, *, truth=NAN, lo=NAN, hi=NAN, stderr=NAN, variant="v", metric="value",
        tick=None, params=None, agent="a", evaluation="ev"):
    return {"evaluation": evaluation, "agent": agent, "variant": variant, "metric": metric,
            "tick": tick, "params": {} if params is None else params, "estimate": value,
            "stderr": stderr, "ci_low": lo, "ci_high": hi, "truth": truth}


def test_every_field_of_a_row_from_measurements_by_hand():
    """Measurement objects (attributes, not keys), one group: estimates 0.2, nan, 0.6, 0.7
    against a truth of 0.5. n = 3, n_nan = 1; mean 0.5; errors -0.3, 0.1, 0.2: bias 0,
    RMSE sqrt(0.14 / 3); sd sqrt((0.09 + 0.01 + 0.04) / 2); intervals [0.1, 0.4] (misses),
    [0.5, 0.9] (touches), [0.6, 0.8] (misses): 1 of 3 (the nan estimate's interval, which
    covers, is left out with its estimate)."""
    def m(value, lo, hi, log):
        return Measurement(evaluation="ope", agent="ucb", metric="reward", estimate=value,
                           stderr=0.05, ci_low=lo, ci_high=hi, truth=0.5, tick=7,
                           variant="snips", params={"T": 10}, log=log)

    rows = [m(0.2, 0.1, 0.4, 0), m(NAN, 0.4, 0.6, 1), m(0.6, 0.5, 0.9, 2), m(0.7, 0.6, 0.8, 3)]
    (s,) = summarize(rows)
    assert (s.evaluation, s.agent, s.variant, s.metric, s.tick) == ("ope", "ucb", "snips",
                                                                    "reward", 7)
    assert dict(s.params) == {"T": 10}
    assert (s.n, s.n_nan, s.n_logs, s.n_ci) == (3, 1, 4, 3)
    assert s.nan_rate == 0.25
    assert s.estimate == pytest.approx(0.5, abs=1e-15)
    assert s.truth == 0.5
    assert s.bias == pytest.approx(0.0, abs=1e-15)
    assert s.rmse == pytest.approx(math.sqrt((0.09 + 0.01 + 0.04) / 3), rel=1e-14)
    assert s.sd == pytest.approx(math.sqrt((0.09 + 0.01 + 0.04) / 2), rel=1e-14)
    assert s.se == pytest.approx(s.sd / math.sqrt(3), rel=1e-14)
    assert s.coverage == 1 / 3
    assert s.key == ("ope", "ucb", "snips", "reward", 7, '{"T": 10}')


def test_a_missing_agent_variant_or_params_is_empty_and_groups_with_empty():
    """``None`` for agent, variant or params is the same group as ``""`` / ``{}`` and is
    reported as such (not as None, not as a placeholder)."""
    rows = [est(0.4, truth=0.5, agent=None, variant=None, params=None),
            est(0.7, truth=0.5, agent="", variant="", params={})]
    rows[0]["params"] = None
    (s,) = summarize(rows)
    assert (s.agent, s.variant, dict(s.params), s.n) == ("", "", {}, 2)
    assert s.bias == pytest.approx(0.05, abs=1e-15)  # errors -0.1 and 0.2
    assert s.key == ("ev", "", "", "value", None, "{}")


def test_params_in_another_order_are_the_same_group():
    """A swept setting is one group whatever the order of its keys: errors 0.1 and 0.3, bias
    0.2 over two logs -- not two groups of one log each."""
    rows = [est(0.6, truth=0.5, params={"b": 1, "a": 2}),
            est(0.8, truth=0.5, params={"a": 2, "b": 1})]
    (s,) = summarize(rows)
    assert s.n == 2 and s.bias == pytest.approx(0.2, abs=1e-15)
    assert dict(s.params) == {"a": 2, "b": 1}
    assert s.key[-1] == '{"a": 2, "b": 1}'
    other = summarize([est(0.6, truth=0.5, params={"a": 2, "b": 3})])[0]
    assert other.key != s.key and other.key[-1] == '{"a": 2, "b": 3}'


def test_an_interval_that_touches_the_truth_covers_it():
    """``l <= t <= h``, both ends closed: truth 0.5 in [0.5, 0.7] and [0.3, 0.5] is covered,
    in [0.51, 0.9] and [0.1, 0.49] not: coverage 2 / 4."""
    rows = [est(0.6, truth=0.5, lo=0.5, hi=0.7), est(0.4, truth=0.5, lo=0.3, hi=0.5),
            est(0.7, truth=0.5, lo=0.51, hi=0.9), est(0.3, truth=0.5, lo=0.1, hi=0.49)]
    (s,) = summarize(rows)
    assert (s.n_ci, s.coverage) == (4, 0.5)
    (s,) = summarize([est(0.6, truth=0.5, lo=0.5, hi=0.7)])
    assert s.coverage == 1.0
    (s,) = summarize([est(0.4, truth=0.5, lo=0.3, hi=0.5)])
    assert s.coverage == 1.0


def test_an_interval_with_a_missing_end_is_no_interval():
    """Only units with both ends finite count: [0.4, 0.6] covers 0.5; [0.0, nan] and
    [nan, 1.0] are left out (n_ci = 1, coverage 1), not counted as misses."""
    rows = [est(0.5, truth=0.5, lo=0.4, hi=0.6), est(0.45, truth=0.5, lo=0.0, hi=NAN),
            est(0.55, truth=0.5, lo=NAN, hi=1.0)]
    (s,) = summarize(rows)
    assert (s.n, s.n_ci, s.coverage) == (3, 1, 1.0)
    (s,) = summarize(rows[1:])
    assert (s.n_ci, math.isnan(s.coverage)) == (0, True)


def test_a_truth_repeated_over_units_is_reported_exactly():
    """The same truth on every unit is that truth to the last digit (the mean of three
    0.1s is 0.10000000000000002); differing truths are averaged (0.1, 0.2, 0.6: 0.3)."""
    (s,) = summarize([est(e, truth=0.1) for e in (0.0, 0.1, 0.3)])
    assert s.truth == 0.1
    (s,) = summarize([est(0.3, truth=0.7) for _ in range(3)])
    assert s.truth == 0.7
    (s,) = summarize([est(0.3, truth=t) for t in (0.1, 0.2, 0.6)])
    assert s.truth == pytest.approx(0.3, rel=1e-15)


def test_one_log_reports_its_own_stderr_and_warns_nothing():
    """A group of one unit: sd nan, se the unit's own standard error, and no numpy warning
    (a standard deviation of one value with n - 1 would print 'Degrees of freedom <= 0')."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (s,) = summarize([est(0.3, truth=0.25, stderr=0.05, lo=0.2, hi=0.4)])
        (e,) = summarize([est(NAN, truth=0.25, stderr=0.05)])
    assert math.isnan(s.sd) and s.se == 0.05 and s.coverage == 1.0
    assert s.rmse == pytest.approx(0.05, rel=1e-14)
    assert (e.n, e.n_nan) == (0, 1)
    assert all(math.isnan(x) for x in (e.estimate, e.sd, e.se, e.truth, e.bias, e.rmse,
                                       e.coverage))


def test_relative_rmse_by_hand():
    """Estimates -1.2 and -1.9 against -1.5: RMSE sqrt((0.09 + 0.16) / 2), over |truth| =
    1.5 (positive); nan for a truth of 0 and without a truth."""
    (s,) = summarize([est(-1.2, truth=-1.5), est(-1.9, truth=-1.5)])
    assert s.relative_rmse == pytest.approx(math.sqrt(0.125) / 1.5, rel=1e-14)
    (z,) = summarize([est(0.1, truth=0.0), est(-0.3, truth=0.0)])
    assert z.rmse == pytest.approx(math.sqrt(0.05), rel=1e-14) and math.isnan(z.relative_rmse)
    (u,) = summarize([est(0.1), est(0.3)])
    assert not u.has_truth and math.isnan(u.relative_rmse)


def test_intervals_without_a_truth_are_not_counted():
    """Nothing to cover: n_ci = 0 and coverage nan, however many intervals there are."""
    (s,) = summarize([est(0.1, lo=0.0, hi=0.2), est(0.3, lo=0.1, hi=0.5)])
    assert (s.n, s.n_ci) == (2, 0) and math.isnan(s.coverage) and math.isnan(s.truth)


def test_is_truth_itself_only_when_every_estimate_is_its_truth():
    assert summarize([est(0.25, truth=0.25)])[0].is_truth_itself  # one unit is enough
    assert summarize([est(0.25, truth=0.25), est(1.5, truth=1.5)])[0].is_truth_itself
    assert not summarize([est(0.25, truth=0.25), est(1.0, truth=1.5)])[0].is_truth_itself
    assert not summarize([est(0.25)])[0].is_truth_itself  # no truth
    assert not summarize([est(NAN, truth=0.25)])[0].is_truth_itself  # no estimate


def test_rows_are_frozen():
    """Summary rows are shared by the terminal, the reports and the API: not writable."""
    (s,) = summarize([est(0.25, truth=0.25)])
    assert isinstance(s, SummaryRow)
    with pytest.raises(AttributeError):
        s.bias = 0.0
    with pytest.raises(TypeError):
        s.params["T"] = 1


def test_a_row_built_by_hand_with_no_unit_and_no_estimate():
    """SummaryRow is public: a row with no unit has no nan rate (not a ZeroDivisionError),
    and a row without an estimate is not "the truth itself" even with an RMSE of 0. (The
    properties are mutated by hand: mutmut skips decorated functions, docs/testing.md.)"""
    def row(n, n_nan, rmse):
        return SummaryRow("e", "a", "", "m", None, {}, n=n, n_nan=n_nan, estimate=math.nan,
                          sd=math.nan, se=math.nan, truth=1.0, bias=math.nan, rmse=rmse,
                          coverage=math.nan, n_ci=0)
    assert math.isnan(row(0, 0, math.nan).nan_rate) and row(0, 0, math.nan).n_logs == 0
    assert row(0, 3, 0.0).nan_rate == 1.0 and not row(0, 3, 0.0).is_truth_itself
    assert row(2, 0, 0.0).is_truth_itself
