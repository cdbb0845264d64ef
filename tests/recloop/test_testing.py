"""recloop.testing: the checks pass on recloop's estimators and catch deliberately broken ones."""

import math
import warnings

import numpy as np
import pytest
from hypothesis import assume, given, settings

import evaluators
from recloop.testing import (
    CheckFailed,
    check_learning_policy_evaluator,
    check_offline_metric,
    check_ope_estimator,
    random_bandit_problem,
)
from recloop.testing.strategies import bandit_problems, profile_graphs, rating_triples, worlds


# -- broken estimators, each meant to be caught by one property ----------------------------
def ips_ignoring_propensity(log, action_dist):
    a = np.asarray(action_dist)[:, :, 0]
    return float(np.mean(a[np.arange(log.n_rounds), log.action] * log.reward))


def ips_mutating_input(log, action_dist):
    est = evaluators.ips(log, action_dist)
    action_dist *= 0.5  # "normalising" in place
    return est


def ips_global_random_state(log, action_dist, *, rng=None):
    est = evaluators.ips(log, action_dist)
    return est.value + 1e-3 * np.random.standard_normal()  # noqa: NPY002 -- the bug on purpose


def ips_narrow_interval(log, action_dist):
    est = evaluators.ips(log, action_dist)
    return evaluators.Estimate(est.value, est.stderr / 4, est.value - 0.5 * est.stderr,
                               est.value + 0.5 * est.stderr, est.n)


def offline_score_ignoring_weights(profiles, recommender, *, k, item_weights=None):
    return evaluators.offline_score(profiles, recommender, k=k)


# -- recloop's own estimators pass at the checker's defaults -------------------------------
def textbook_ips(log, action_dist):
    """IPS as the textbook writes it: 0 when no logged action has target support."""
    if log.n_rounds == 0:
        raise ValueError("`log` is empty.")
    w = np.asarray(action_dist)[np.arange(log.n_rounds), log.action, 0] / log.pscore
    return evaluators.normal_estimate(w * log.reward)


@pytest.mark.slow
def test_recloop_ope_estimators_pass():
    # the biased-by-design ones and the catalogue are in tests/evaluators/test_ope_catalogue.py
    report = check_ope_estimator(evaluators.ips, strict=True, rng=1)
    assert report.passed
    assert {r.name for r in report.results} >= {"deterministic", "permutation_invariant",
                                                 "empty_log_rejected", "no_support_rejected",
                                                 "unbiased", "interval_coverage"}
    assert 0.85 < report.figures["coverage"] <= 1  # measured coverage always reported
    assert report.figures["coverage_of"] == "the truth"


def test_skip_reports_skipped_never_passed():
    report = check_ope_estimator(textbook_ips, n_problems=1, n_logs=20,
                                 skip=("no_support_rejected",), strict=True, rng=0)
    assert report.passed
    (skipped,) = report.skipped
    assert skipped.name == "no_support_rejected" and not skipped.passed
    assert "[skip] no_support_rejected" in str(report) and "1 skipped" in str(report)


def textbook_ips_nan(log, action_dist):
    """A correct textbook IPS that says "nan" with a plain UserWarning on degenerate logs."""
    if log.n_rounds == 0:
        warnings.warn("empty log", stacklevel=2)
        return math.nan
    w = np.asarray(action_dist)[np.arange(log.n_rounds), log.action, 0] / log.pscore
    if not w.any():
        warnings.warn("no support", stacklevel=2)
        return math.nan
    return evaluators.normal_estimate(w * log.reward)


def _examples():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "my_estimators.py"
    spec = importlib.util.spec_from_file_location("my_estimators_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("estimator, kw, advice", [
    # the README's my_ips: 0 without support
    pytest.param(textbook_ips, {}, {"no_support_rejected"}, id="readme-my-ips"),
    pytest.param(textbook_ips_nan, {}, {"empty_log_rejected", "no_support_rejected"},
                 id="textbook-ips-nan-userwarning"),
    # biased by design (weights above 10 are clipped), as its docstring says; on an empty
    # log normal_estimate returns nan with an EmptySampleWarning, a named category
    pytest.param(lambda log, ad, rng=None: _examples().clipped_ips(log, ad), {"unbiased": False},
                 {"no_support_rejected"}, id="examples-clipped-ips"),
])
def test_correct_estimators_pass_at_the_defaults_with_hygiene_as_advice(estimator, kw, advice):
    report = check_ope_estimator(estimator, n_problems=2, n_logs=60, rng=3, **kw)
    assert report.passed and not report.failures
    assert {r.name for r in report.advice} == advice
    assert all(r.hygiene for r in report.advice)
    for name in advice:
        assert f"[advice] {name}:" in str(report)
    assert f"{len(advice)} with advice" in str(report).splitlines()[0]
    # strict: the same advice fails the check
    with pytest.raises(CheckFailed) as info:
        check_ope_estimator(estimator, n_problems=2, n_logs=60, rng=3, strict=True, **kw)
    assert {r.name for r in info.value.report.failures} == advice
    assert not info.value.report.advice


def test_a_deliberately_biased_example_still_fails_its_correctness_claim():
    # examples/my_estimators.py's optimist: hygiene advice never hides a correctness failure
    with pytest.raises(CheckFailed) as info:
        check_ope_estimator(_examples().optimist, n_problems=3, n_logs=100, rng=4)
    assert "unbiased" in {r.name for r in info.value.report.failures}


def test_skip_names_are_checked():
    with pytest.raises(ValueError, match="`skip` must be property names among .*no_support"):
        check_ope_estimator(evaluators.ips, skip=("no_support",))


def test_failure_carries_report_and_reproducible_problem():
    with pytest.raises(CheckFailed) as info:
        check_ope_estimator(ips_mutating_input, n_problems=2, n_logs=5, unbiased=False, rng=7)
    report = info.value.report
    assert isinstance(info.value, AssertionError) and not report.passed
    (failure,) = [f for f in report.failures if f.name == "inputs_not_mutated"]
    drawn = failure.problem.draw_log(failure.seed)
    log, ad = drawn  # a named pair: the estimator's input
    assert drawn.log is log and drawn.action_dist is ad
    assert ad.shape == (log.n_rounds, log.n_actions, 1)
    assert log.n_rounds == 8  # the smallest failing example, drawn back from its seed
    before = ad.copy()
    ips_mutating_input(log, ad)
    assert not np.array_equal(ad, before)  # the failure happens again on that very input


def test_statistical_failure_names_problem_and_seeds():
    with pytest.raises(CheckFailed) as info:
        check_ope_estimator(ips_ignoring_propensity, n_problems=3, n_logs=100, rng=4)
    (bias,) = [f for f in info.value.report.failures if f.name == "unbiased"]
    assert bias.problem is not None and len(bias.seeds) == 100
    log, ad = bias.problem.draw_log(bias.seeds[0])
    assert log.n_rounds == 200


def clipped_ips(log, action_dist):
    return evaluators.ips(log, action_dist, clip=1.5)


def test_biased_by_design_passes_with_unbiased_false_and_reports_bias():
    with pytest.raises(AssertionError) as info:
        check_ope_estimator(clipped_ips, n_problems=3, n_logs=100, rng=8)
    assert "unbiased" in _failing_names(str(info.value))
    report = check_ope_estimator(clipped_ips, n_problems=3, n_logs=100, unbiased=False, rng=8)
    assert "unbiased" not in {r.name for r in report.results}
    assert report.figures["coverage_of"].startswith("the estimator's own expectation")
    assert len(report.figures["bias"]) == len(report.figures["rmse"]) == 3
    assert min(report.figures["bias"]) < -0.01  # clipping biases downwards, and it is said


def test_bias_and_rmse_bounds_can_fail_and_pass():
    kw = dict(n_problems=3, n_logs=100, unbiased=False, rng=8)
    with pytest.raises(CheckFailed) as info:
        check_ope_estimator(clipped_ips, max_abs_bias=0.001, max_rmse=0.001, **kw)
    assert {"max_abs_bias", "max_rmse"} <= _failing_names(str(info.value))
    report = check_ope_estimator(clipped_ips, max_abs_bias=0.5, max_rmse=0.5, **kw)
    assert {"max_abs_bias", "max_rmse"} <= {r.name for r in report.results if r.passed}


def ips_empty_mean_warning(log, action_dist):
    # an empty log gives numpy's "Mean of empty slice" RuntimeWarning and nan: an accident
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        if log.n_rounds == 0:
            return float(np.mean(np.zeros(0)))
    return evaluators.ips(log, action_dist)


def test_empty_log_needs_value_error_or_named_warning():
    with pytest.raises(AssertionError) as info:
        check_ope_estimator(ips_empty_mean_warning, n_problems=1, n_logs=10, strict=True,
                            rng=0)
    assert "empty_log_rejected" in _failing_names(str(info.value))
    assert "RuntimeWarning" in str(info.value)


def test_recloop_offline_score_passes():
    report = check_offline_metric(evaluators.offline_score, rng=2)
    assert report.passed and len(report.results) == 6


@pytest.mark.slow
def test_recloop_bred_passes_and_reports_error_against_truth():
    def bred(log, make_agent, *, rng=None):
        return evaluators.bred(log, make_agent, n_bootstrap=5, rng=rng)

    report = check_learning_policy_evaluator(bred, n_logs=3, n_rounds=500, rng=3)
    assert report.passed
    assert math.isfinite(report.figures["error_at_T_over_K"])


# -- the checks catch what they are meant to catch -----------------------------------------
def _failed(check, fn, **kw):
    with pytest.raises(AssertionError) as info:
        check(fn, **kw)
    return str(info.value)


def _failing_names(message):
    return {line.split("]")[1].split(":")[0].strip() for line in message.splitlines()
            if "[FAIL]" in line}


@pytest.mark.slow
@pytest.mark.parametrize("broken, caught_by", [
    pytest.param(ips_ignoring_propensity, "unbiased", id="ignores-propensity"),
    pytest.param(ips_mutating_input, "inputs_not_mutated", id="mutates-input"),
    pytest.param(ips_global_random_state, "global_random_state_untouched", id="global-rng"),
    pytest.param(ips_narrow_interval, "interval_coverage", id="narrow-interval"),
])
def test_broken_ope_estimators_are_caught(broken, caught_by):
    message = _failed(check_ope_estimator, broken, n_problems=3, n_logs=150, rng=4)
    assert caught_by in _failing_names(message)


def test_global_random_state_also_breaks_determinism():
    message = _failed(check_ope_estimator, ips_global_random_state, n_problems=1, n_logs=5,
                      unbiased=False, rng=5)
    assert "deterministic" in _failing_names(message)


def test_offline_metric_ignoring_weights_is_caught():
    message = _failed(check_offline_metric, offline_score_ignoring_weights, rng=6)
    assert "constant_recommender_identity" in _failing_names(message)


def test_smallest_failing_example_is_reported():
    message = _failed(check_ope_estimator, ips_mutating_input, n_problems=2, n_logs=5,
                      unbiased=False, rng=7)
    assert "n_rounds=8" in message  # the smallest log size tried


# -- bad input ----------------------------------------------------------------------------
@pytest.mark.parametrize("call, error, match", [
    pytest.param(lambda: check_ope_estimator("ips"), TypeError, "`estimator` must be callable",
                 id="not-callable"),
    pytest.param(lambda: check_ope_estimator(evaluators.ips, n_problems=0), ValueError,
                 "`n_problems` must be an int >= 1", id="n-problems"),
    pytest.param(lambda: check_ope_estimator(evaluators.ips, coverage_tol=1.0), ValueError,
                 "`coverage_tol` must be", id="coverage-tol"),
    pytest.param(lambda: check_ope_estimator(evaluators.ips, max_abs_bias=-1), ValueError,
                 "`max_abs_bias` must be", id="max-abs-bias"),
    pytest.param(lambda: check_ope_estimator(evaluators.ips, unbiased="yes"), TypeError,
                 "`unbiased` must be a bool", id="unbiased"),
    pytest.param(lambda: check_ope_estimator(lambda log, ad: "0.5"), TypeError,
                 "must return an Estimate or a real number", id="non-number"),
    pytest.param(lambda: check_offline_metric(None), TypeError, "`metric` must be callable",
                 id="metric"),
    pytest.param(lambda: check_learning_policy_evaluator(evaluators.bred, n_logs=0), ValueError,
                 "`n_logs` must be an int >= 1", id="n-logs"),
])
def test_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()


# -- strategies ---------------------------------------------------------------------------
@settings(max_examples=30)
@given(case=bandit_problems())
def test_ips_with_logging_policy_as_target_equals_mean_reward(case):
    logging = case.problem.logging_probs(case.log.context)
    est = evaluators.ips(case.log, logging)
    assert est.value == pytest.approx(case.log.reward.mean(), abs=1e-12)
    assert (0 <= case.value <= 1
            and case.expected_reward.shape == (case.log.n_rounds, case.log.n_actions))


@settings(max_examples=30)
@given(case=profile_graphs())
def test_uniform_item_weights_change_nothing(case):
    assume(case.current.nnz > 0)
    rec = type("Const", (), {
        "fit": lambda self, p: self,
        "recommend": lambda self, u, k, removed=None: np.zeros((len(u), k), np.int64)})()
    a = evaluators.offline_score(case.current, rec, k=1)
    b = evaluators.offline_score(case.current, rec, k=1,
                                 item_weights=np.full(case.current.shape[1], 3.0))
    assert a.value == pytest.approx(b.value, abs=1e-12)
    assert (case.current.toarray() >= case.reference.toarray()).all()  # campaigns only add edges


@settings(max_examples=30)
@given(triples=rating_triples())
def test_rating_triples_are_unique_pairs(triples):
    users, items, ratings = triples
    assert len({(u, i) for u, i in zip(users, items, strict=True)}) == len(users) == len(ratings)
    assert np.all(np.isfinite(ratings))


@settings(max_examples=10)
@given(config=worlds())
def test_small_worlds_simulate(config):
    from simulator import World

    world = World(config, seed=0)
    p = world.profiles(config.n_ticks - 1)
    assert p.shape == (config.n_users, config.n_items)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = world.item_marginal(config.n_ticks - 1)
    assert m.sum() == pytest.approx(1.0) or p.nnz == 0


def test_random_bandit_problem_value_is_exact():
    p = random_bandit_problem(0, n_actions=3, dim=2)
    x = p.support
    manual = np.mean([p.target_probs(x[j:j + 1])[0] @ p.expected_reward(x[j:j + 1])[0]
                      for j in range(x.shape[0])])
    assert p.value == pytest.approx(manual, abs=1e-15)


@pytest.mark.slow
def test_the_documented_example_passes():
    import runpy
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "test_my_estimator.py"
    runpy.run_path(str(example))["test_my_ips"]()


# -- the false-alarm rate the docstring states ---------------------------------------------
def hand_written_ips(log, action_dist):
    """A correct IPS written by a user: ValueError on an empty log, nan with a named warning
    without support, normal interval."""
    if log.n_rounds == 0:
        raise ValueError("`log` is empty.")
    w = np.asarray(action_dist)[np.arange(log.n_rounds), log.action, 0] / log.pscore
    if not w.any():
        warnings.warn("no support", evaluators.NoSupportWarning, stacklevel=2)
        return math.nan
    return evaluators.normal_estimate(w * log.reward)


@pytest.mark.slow
@pytest.mark.parametrize("estimator, n_seeds, kw", [
    # about 0.25 s a check for IPS, 0.8 s for DR on a quiet machine: 20 s in all
    pytest.param(evaluators.ips, 30, {}, id="recloop-ips"),
    pytest.param(hand_written_ips, 15, {}, id="hand-written-ips"),
    pytest.param(evaluators.doubly_robust, 6, {}, id="recloop-dr"),
    pytest.param(lambda log, ad: evaluators.ips(log, ad, clip=2.0), 6, {"unbiased": False},
                 id="clipped-ips-unbiased-false"),
])
def test_false_alarm_rate_of_every_property_matches_the_docstring(estimator, n_seeds, kw):
    # the docstring: each statistical property fails a correct estimator with probability
    # about alpha = 1e-3 at the defaults; the deterministic ones never
    from scipy import stats

    alarms = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", evaluators.UndefinedStderrWarning)
        for seed in range(n_seeds):
            try:
                check_ope_estimator(estimator, rng=10_000 + seed, strict=True, **kw)
            except CheckFailed as exc:
                for f in exc.report.failures:
                    alarms[f.name] = alarms.get(f.name, 0) + 1
    for name, k in alarms.items():
        assert name in ("unbiased", "interval_coverage"), (name, k)
        assert stats.binomtest(k, n_seeds, 1e-3, alternative="greater").pvalue > 1e-3, alarms
