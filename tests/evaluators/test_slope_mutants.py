"""SLOPE's edges (issue 27, section 1: the survivors of the mutation run of
evaluators/_slope.py, docs/testing.md): every refusal of the candidates and of ``delta`` word
for word, each family's range of candidates, the Student-t width on two records (t with one
degree of freedom is tan(pi (p - 1/2))), one record (no width), no support, and the model-based
families' candidates against the estimators themselves on the same reward model."""

import math
import re

import numpy as np
import pytest

from evaluators import (
    NoSupportWarning,
    doubly_robust,
    dr_os,
    ips,
    select_estimator,
    subgaussian_ips,
    switch_dr,
)
from simulator.logs import BanditLog


def small_log(n=8, K=3, seed=0):
    g = np.random.default_rng(seed)
    return BanditLog(context=g.normal(size=(n, 2)), action=g.integers(0, K, n),
                     reward=g.random(n), pscore=np.full(n, 1.0 / K), n_actions=K)


def target(n, K, seed=1):
    p = np.random.default_rng(seed).random((n, K)) + 0.05
    return p / p.sum(axis=1, keepdims=True)


class MeanRegressor:
    """The smallest duck-typed regressor: predicts the mean of what it was fitted on."""

    def fit(self, X, y):
        self.mean_ = float(np.mean(y))
        return self

    def predict(self, X):
        return np.full(len(X), self.mean_)


def message(err, text):
    return pytest.raises(err, match="^" + re.escape(text) + "$")


# -- refusals, word for word --------------------------------------------------------------------

def test_candidates_refused_with_their_rule_and_what_was_received():
    log, pi = small_log(), target(8, 3)
    for values, got in (("12", "str"), (3.0, "float"), (b"ab", "bytes")):
        with message(TypeError, f"`values` must be a sequence of candidate `clip` values; "
                                f"got {got}.") as err:
            select_estimator(log, pi, values=values)
        assert (err.value.name, err.value.got) == ("values", got)
    with message(TypeError, "`values` must be a sequence of candidate `lambda_` values; "
                            "got int."):
        select_estimator(log, pi, estimator="subgaussian_ips", values=7)
    for values in ([], [2.0], iter([2.0])):
        n = len(list(values)) if not hasattr(values, "__next__") else 1
        with message(ValueError, f"`values` must be at least 2 candidates; got {n}."):
            select_estimator(log, pi, values=values)


def test_each_family_has_its_range_of_candidates():
    log, pi = small_log(), target(8, 3)
    # clip: > 0, unbounded, inf allowed (no clipping)
    with message(ValueError, "`values[1]` must be a number > 0.0; got 0.0."):
        select_estimator(log, pi, values=[1.0, 0.0])
    with message(ValueError, "`values[2]` must be a number > 0.0; got -1.0."):
        select_estimator(log, pi, estimator="doubly_robust", values=[2.0, 1.0, -1.0],
                         model=np.zeros((8, 3)))
    est = select_estimator(log, pi, values=[math.inf, 0.5, 0.25])
    assert est.candidates == (math.inf, 0.5, 0.25)
    # tau and lambda_ of DR-OS: >= 0 (0 is a valid value: all model, no weights)
    for family, param in (("switch_dr", "tau"), ("dr_os", "lambda_")):
        est = select_estimator(log, pi, estimator=family, values=[0.0, 3.0],
                               model=np.zeros((8, 3)))
        assert est.parameter == param and est.candidates == (3.0, 0.0)
        with message(ValueError, "`values[0]` must be a number >= 0.0; got -0.5."):
            select_estimator(log, pi, estimator=family, values=[-0.5, 3.0],
                             model=np.zeros((8, 3)))
    # subgaussian lambda_: in [0, 1], both ends included
    est = select_estimator(log, pi, estimator="subgaussian_ips", values=[0.0, 1.0])
    assert est.candidates == (1.0, 0.0)
    for bad in (1.5, 1.0000001, -0.1):
        with message(ValueError, f"`values[1]` must be a number in [0.0, 1.0]; got {bad!r}."):
            select_estimator(log, pi, estimator="subgaussian_ips", values=[0.5, bad])
    # a number, not a string; nan is no candidate
    with message(TypeError, "`values[0]` must be a number > 0.0; got str '2'."):
        select_estimator(log, pi, values=["2", 1.0])
    with message(ValueError, "`values[1]` must be a number > 0.0; got nan."):
        select_estimator(log, pi, values=[1.0, math.nan])


def test_two_candidates_are_enough_and_ints_become_floats():
    log, pi = small_log(), target(8, 3)
    est = select_estimator(log, pi, values=[1, 2])
    assert est.candidates == (2.0, 1.0)
    assert all(type(v) is float for v in est.candidates) and type(est.selected) is float
    assert est.selected in (2.0, 1.0)


def test_delta_is_refused_outside_the_open_unit_interval():
    log, pi = small_log(), target(8, 3)
    for bad in (0.0, 1.0, -0.5, 2.0):
        with message(ValueError, f"`delta` must be a finite number in (0.0, 1.0); "
                                 f"got {bad!r}."):
            select_estimator(log, pi, delta=bad)
    with message(ValueError, "`ci` must be a finite number in (0.0, 1.0); got 1.0."):
        select_estimator(log, pi, ci=1.0)
    with message(ValueError, "`estimator` must be one of 'ips', 'doubly_robust', 'switch_dr', "
                             "'dr_os', 'subgaussian_ips'; got 'snips'."):
        select_estimator(log, pi, estimator="snips")


def test_action_dist_values_are_checked_for_the_weight_only_families():
    log = small_log()
    pi = target(8, 3)
    pi[3] = [1.5, -0.5, 0.0]  # rows sum to 1, one negative probability
    for family in ("ips", "subgaussian_ips"):
        with pytest.raises(ValueError, match="`action_dist`"):
            select_estimator(log, pi, estimator=family)


# -- the width's Student t ---------------------------------------------------------------------

@pytest.mark.parametrize("delta, accepted", [(0.1, True), (0.3, True), (0.45, False)])
def test_two_records_width_is_t_with_one_degree_of_freedom(delta, accepted):
    # two records, both weights 1/(1/2)*(1/2) = 1 unclipped: w r = (1, 0)
    log = BanditLog(context=np.zeros((2, 1)), action=[0, 1], reward=[1.0, 0.0],
                    pscore=[0.5, 0.5], n_actions=2)
    pi = np.full((2, 2), 0.5)
    est = select_estimator(log, pi, values=[4.0, 0.5], delta=delta)
    # clip 4: terms (1, 0), mean 1/2, stderr = sd/sqrt(2) = (1/sqrt(2))/sqrt(2) = 1/2;
    # clip 0.5: terms (1/2, 0), mean 1/4, stderr 1/4
    t = math.tan(math.pi * (0.5 - delta))  # the (1 - delta) quantile of t with 1 dof
    assert est.candidate_values == (0.5, 0.25)
    assert est.candidate_widths == pytest.approx((t / 2, t / 4), rel=1e-12)
    # clip 0.5 is accepted iff |1/2 - 1/4| <= t/4 + (sqrt 6 - 1) t/2, i.e. t >= 0.2565...
    # (t = 3.08 at delta 0.1, 1.38 at 0.3, 0.158 at 0.45)
    assert (t >= 0.25 / (0.25 + (math.sqrt(6) - 1) / 2)) == accepted
    z = 1.959963984540054
    if accepted:
        assert est.selected == 0.5 and est.value == 0.25 and est.stderr == 0.25
    else:
        assert est.selected == 4.0 and est.value == 0.5 and est.stderr == 0.5
    # the interval is the union of the accepted candidates' (95%, normal): clip 4's here
    assert est.ci_low == pytest.approx(0.5 - z * 0.5, rel=1e-12)
    assert est.ci_high == pytest.approx(0.5 + z * 0.5, rel=1e-12)


def test_one_record_has_no_width():
    log = BanditLog(context=np.zeros((1, 1)), action=[0], reward=[1.0], pscore=[0.5],
                    n_actions=2)
    with pytest.warns(Warning):
        est = select_estimator(log, np.full((1, 2), 0.5), values=[2.0, 0.5])
    assert est.n == 1 and est.candidate_values == (1.0, 0.5)
    assert all(math.isnan(c) for c in est.candidate_widths) and len(est.candidate_widths) == 2
    assert math.isnan(est.stderr) and est.selected in (2.0, 0.5)


# -- no support -------------------------------------------------------------------------------

def test_no_support_is_nan_with_the_candidates_as_given():
    log = BanditLog(context=np.zeros((3, 1)), action=[0, 0, 0], reward=[1.0, 0.0, 1.0],
                    pscore=[0.5, 0.5, 0.5], n_actions=2)
    pi = np.tile([0.0, 1.0], (3, 1))
    with pytest.warns(NoSupportWarning) as rec:
        est = select_estimator(log, pi, values=[1, 5.0], ci=0.8)
    assert [str(w.message) for w in rec] == [
        "select_estimator: every importance weight is 0 (the target policy never takes a "
        "logged action); returning nan."]
    assert all(math.isnan(x) for x in (est.value, est.stderr, est.ci_low, est.ci_high,
                                       est.selected))
    assert (est.n, est.level, est.ess, est.estimator, est.parameter) == (
        3, 0.8, 0.0, "select_estimator", "clip")
    assert est.candidates == (1.0, 5.0) and type(est.candidates[0]) is float
    assert est.candidate_values == () and est.candidate_widths == ()


# -- the model-based families: the estimators themselves on the same model ---------------------

@pytest.mark.parametrize("family, func, param", [
    ("doubly_robust", doubly_robust, "clip"), ("switch_dr", switch_dr, "tau"),
    ("dr_os", dr_os, "lambda_")])
@pytest.mark.parametrize("per_action", [False, True])
@pytest.mark.parametrize("model", ["ridge", "regressor"])
def test_model_based_candidates_are_the_estimators_values(family, func, param, per_action,
                                                          model):
    n, K = 40, 3
    log, pi = small_log(n, K, seed=3), target(n, K, seed=4)
    values = (5.0, 1.5, 0.5)
    # a regressor predicting its training mean: per action, each action's own mean
    model = MeanRegressor() if model == "regressor" else model
    est = select_estimator(log, pi, estimator=family, values=values, model=model,
                           per_action=per_action, n_folds=3, rng=7)
    direct = [func(log, pi, **{param: v}, model=model, per_action=per_action, n_folds=3,
                   rng=7).value for v in values]
    assert est.candidate_values == pytest.approx(direct, rel=1e-12, abs=1e-15)
    assert est.value == est.candidate_values[values.index(est.selected)]


def test_weight_only_families_candidates_are_the_estimators_values():
    n, K = 30, 3
    log, pi = small_log(n, K, seed=5), target(n, K, seed=6)
    est = select_estimator(log, pi, estimator="subgaussian_ips", values=(0.0, 0.5, 1.0))
    direct = [subgaussian_ips(log, pi, lambda_=v).value for v in (1.0, 0.5, 0.0)]
    assert est.candidate_values == pytest.approx(direct, rel=1e-12)
    direct = [ips(log, pi, clip=v).value for v in (3.0, 1.0)]
    assert select_estimator(log, pi, values=(1.0, 3.0)).candidate_values == pytest.approx(
        direct, rel=1e-12)


@pytest.mark.parametrize("family, func", [("doubly_robust", doubly_robust),
                                          ("switch_dr", switch_dr), ("dr_os", dr_os)])
def test_model_based_families_refuse_as_their_estimator_does(family, func):
    # a bad model and a bad action_dist at once: the estimator's own first complaint (the
    # model-based estimators check the distributions' values in the model's pass)
    log = small_log()
    pi = target(8, 3)
    pi[3] = [1.5, -0.5, 0.0]
    for model in (np.zeros((8, 2)), np.full((8, 3), np.nan)):
        with pytest.raises(ValueError) as want:
            func(log, pi, model=model)
        with message(ValueError, str(want.value)):
            select_estimator(log, pi, estimator=family, model=model)
