"""recloop.testing: the checks pass on recloop's estimators and catch deliberately broken ones."""

import math
import warnings

import numpy as np
import pytest
from hypothesis import assume, given, settings

import evaluators
from recloop.testing import (check_learning_policy_evaluator, check_offline_metric,
                             check_ope_estimator, random_bandit_problem)
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


# -- recloop's own estimators pass -------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("estimator, unbiased, n_rounds", [
    pytest.param(evaluators.ips, True, 200, id="ips"),
    pytest.param(evaluators.snips, False, 200, id="snips"),
    # DR's interval ignores the variance of the reward model fitted on the same log, so it
    # covers less than nominal on small logs (0.915 at 200 records): checked at 1,000.
    pytest.param(evaluators.doubly_robust, True, 1000, id="doubly_robust"),
])
def test_recloop_ope_estimators_pass(estimator, unbiased, n_rounds):
    report = check_ope_estimator(estimator, n_problems=4, n_logs=150, n_rounds=n_rounds,
                                 unbiased=unbiased, rng=1)
    assert report.passed
    assert {r.name for r in report.results} >= {"deterministic", "permutation_invariant",
                                                 "empty_log_rejected", "no_support_rejected"}
    assert "coverage" in report.figures  # recloop's estimators return intervals


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
    pytest.param(lambda: check_ope_estimator("ips"), TypeError, "`estimator` must be callable", id="not-callable"),
    pytest.param(lambda: check_ope_estimator(evaluators.ips, n_problems=0), ValueError, "`n_problems` must be >= 1", id="n-problems"),
    pytest.param(lambda: check_ope_estimator(lambda log, ad: "0.5"), TypeError, "must return an Estimate or a real number", id="non-number"),
    pytest.param(lambda: check_offline_metric(None), TypeError, "`metric` must be callable", id="metric"),
    pytest.param(lambda: check_learning_policy_evaluator(evaluators.bred, n_logs=0), ValueError, "`n_logs` must be >= 1", id="n-logs"),
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
    assert 0 <= case.value <= 1 and case.expected_reward.shape == (case.log.n_rounds, case.log.n_actions)


@settings(max_examples=30)
@given(case=profile_graphs())
def test_uniform_item_weights_change_nothing(case):
    assume(case.current.nnz > 0)
    rec = type("Const", (), {"fit": lambda self, p: self,
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
    assert len({(u, i) for u, i in zip(users, items)}) == len(users) == len(ratings)
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
