"""Issue 25's reproductions on the Python API, one test per class: values that must be refused
with a TypeError/ValueError naming the argument, the rule and what was received."""

import math

import numpy as np
import pytest
import scipy.sparse as sp

import evaluators
from evaluators import metrics
from simulator.logs import BanditLog

REF = np.array([[1, 1, 0], [0, 1, 1], [1, 0, 1]], dtype=float)
CUR = np.array([[1, 1, 1], [1, 1, 1], [1, 0, 1]], dtype=float)
LOG = BanditLog(context=np.zeros((6, 1)), action=[0, 1, 0, 1, 0, 1], reward=[1.0, 0, 1, 1, 0, 0],
                pscore=[0.5] * 6, n_actions=2)
PI = np.full((6, 2), 0.5)
RATINGS = (np.array([0, 0, 1, 1, 2, 2]), np.array([0, 1, 0, 1, 0, 1]),
           np.array([4.0, 3, 5, 2, 1, 4]))


def with_entry(m, value, at=(1, 2)):
    m = m.copy()
    m[at] = value
    return m


@pytest.mark.parametrize("call, exc, msg", [
    # fit_item_weights: every stored value of a profile matrix is an edge count, so it must
    # be finite and >= 0 (a nan or a -1 was counted as an edge)
    pytest.param(lambda: evaluators.fit_item_weights(REF, with_entry(CUR, np.nan)), ValueError,
                 r"`current` must be finite and >= 0 \(its non-zeros are edges\); got nan at "
                 r"\(1, 2\)", id="current-nan"),
    pytest.param(lambda: evaluators.fit_item_weights(REF, with_entry(CUR, -1.0)), ValueError,
                 r"`current` must be finite and >= 0 .*; got -1.0 at \(1, 2\)",
                 id="current-negative"),
    pytest.param(lambda: evaluators.fit_item_weights(REF, sp.csr_array(with_entry(CUR, -2.0))),
                 ValueError, r"`current` must be finite and >= 0 .*; got -2.0 at stored entry 5",
                 id="current-sparse-negative"),
    pytest.param(lambda: evaluators.fit_item_weights(with_entry(REF, np.inf), CUR), ValueError,
                 r"`reference` must be finite and >= 0 .*; got inf at \(1, 2\)",
                 id="reference-inf"),
    pytest.param(lambda: evaluators.fit_item_weights(REF, CUR.astype(complex)), TypeError,
                 r"`current` must be a matrix of real numbers .*; got dtype complex128",
                 id="current-complex"),
    pytest.param(lambda: evaluators.kl_objective(REF, CUR, np.array(["1", "1", "1"])),
                 TypeError, r"`weights` must be an array of numbers; got ndarray of dtype <U1",
                 id="weights-strings"),
    # normal_estimate / wilson_estimate (more in test_estimate.py)
    pytest.param(lambda: evaluators.normal_estimate(np.ones((2, 2))), ValueError,
                 r"`samples` must be a 1-d array; got shape \(2, 2\)", id="samples-2d"),
    pytest.param(lambda: evaluators.wilson_estimate(1.5, 4), TypeError,
                 r"`successes` must be an int in \[0, 4\]; got float 1.5", id="wilson-fraction"),
    # rewards as strings or complex numbers, wherever evaluators take them as an array
    pytest.param(lambda: evaluators.normal_estimate(np.array(["1", "0"])), TypeError,
                 r"`samples` must be an array of real numbers; got dtype <U1", id="samples-str"),
    pytest.param(lambda: metrics.rmse(np.array([1 + 0j, 2]), np.array([1.0, 2])), TypeError,
                 r"`y_true` must hold real numbers; got dtype complex128", id="rmse-complex"),
    pytest.param(lambda: evaluators.loo_knn((RATINGS[0], RATINGS[1], RATINGS[2].astype(str))),
                 TypeError, r"`ratings`: ratings must be real numbers; got dtype <U32",
                 id="ratings-str"),
    # more folds than records
    pytest.param(lambda: evaluators.doubly_robust(LOG, PI, n_folds=10**6), ValueError,
                 r"`n_folds` must be an int in \[2, 6\]; got 1000000", id="dr-n_folds"),
    pytest.param(lambda: evaluators.select_estimator(LOG, PI, estimator="doubly_robust",
                                                     n_folds=7), ValueError,
                 r"`n_folds` must be an int in \[2, 6\]; got 7", id="slope-n_folds"),
    # negative ids in loo_knn
    pytest.param(lambda: evaluators.loo_knn((RATINGS[0] - 1, RATINGS[1], RATINGS[2])),
                 ValueError, r"`ratings`: the users array must hold ids >= 0; got -1 at index 0",
                 id="loo-negative-user"),
    pytest.param(lambda: evaluators.loo_knn((RATINGS[0], RATINGS[1] - 3, RATINGS[2])),
                 ValueError, r"`ratings`: the items array must hold ids >= 0; got -3 at index 0",
                 id="loo-negative-item"),
    pytest.param(lambda: evaluators.loo_knn(RATINGS, neighbours=np.array([], dtype=int)),
                 ValueError, r"`neighbours` must be ids of at least one user with ratings .*; "
                 r"got none", id="loo-no-neighbour"),
])
def test_refused_with_the_argument_named(call, exc, msg):
    with pytest.raises(exc, match=msg):
        call()


def test_as_many_folds_as_records_is_fine_and_a_one_record_log_keeps_two():
    assert math.isfinite(evaluators.doubly_robust(LOG, PI, n_folds=6, rng=0).value)
    one = BanditLog(context=np.zeros((1, 1)), action=[1], reward=[1.0], pscore=[0.5],
                    n_actions=2)
    with pytest.warns(evaluators.UndefinedStderrWarning):
        assert math.isfinite(evaluators.doubly_robust(one, PI[:1], n_folds=2, rng=0).value)


def test_empty_metric_inputs_are_nan_with_a_named_warning():
    # degenerate but legal: the mean error of nothing (documented in metrics.mae)
    with pytest.warns(metrics.UndefinedMetricWarning, match="`rmse` of 0 observations"):
        assert math.isnan(metrics.rmse([], []))
