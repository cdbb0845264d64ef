"""Item weights' optimisers at their edges (issue 33): the lower bound of the log-weights,
the Armijo condition, the backtracking floor, and a fit with no item left to optimise.

``test_weights_pins.py`` follows the gradient descent step by step on problems where each
step is accepted at once or after halving from a large step. Here: problems where a step
fails to decrease ``D`` at all (a step that raises ``D`` must never be taken: taken, the
relative-decrease rule ``f - f_new <= tol max(|f|, |f_new|, 1)`` holds at once and the
descent stops early, 10 iterations instead of 200 and log-weights 2 off on the first
problem below), a descent chased into rounding (``tol`` 1e-300), where the step keeps
halving to the floor 1e-20 before a step that changes nothing is accepted, and an optimum
at ``w -> 0`` where the lower bound ``-30`` of the log-weights binds for both optimisers.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from evaluators import UnmatchedItemsWarning, fit_item_weights
from tests.evaluators.test_weights_pins import gradient_descent_by_hand


def random_problem(seed):
    """A reference marginal (Dirichlet) and 0/1 current profiles, every user holding an item."""
    g = np.random.default_rng(seed)
    n_users, n_items = g.integers(3, 8), g.integers(2, 6)
    C = g.random((n_users, n_items)) < g.uniform(0.3, 0.8)
    C[np.arange(n_users), g.integers(0, n_items, n_users)] = True
    R = g.dirichlet(np.full(n_items, g.choice([0.2, 1.0, 5.0])))
    return R, sp.csr_array(C.astype(float))


def fit_and_reference(R, C, *, tol, max_iter, p=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnmatchedItemsWarning)
        fit = fit_item_weights(R, C, p=p, method="gradient_descent", tol=tol,
                               max_iter=max_iter)
        free = fit.selected.tolist()
        assert all(R[i] > 0 for i in free)  # no item at the bound from the start
        w, n_iter, converged = gradient_descent_by_hand(R, C, free, tol=tol,
                                                        max_iter=max_iter)
    return fit, w, n_iter, converged


@pytest.mark.parametrize("seed, tol, max_iter, n_iter", [
    pytest.param(165, 1e-10, 200, 200, id="a-long-crawl"),  # a step raising D: 10 iterations
    pytest.param(2, 1e-300, 80, 37, id="chased-into-rounding"),  # a step raising D: 30
])
def test_a_step_that_does_not_decrease_d_enough_is_never_taken(seed, tol, max_iter, n_iter):
    """Armijo's sufficient decrease ``f_new <= f - 1e-4 g . (theta - cand)``: the descent
    follows the reference step by step (iterations, convergence, weights to 1e-12) and
    never ends above where it started. With the condition's sign flipped (an increase of up
    to 1e-4 of the predicted decrease accepted) the first problem stops after 10
    iterations at log-weights 2.08 away, the second after 30 of 37."""
    R, C = random_problem(seed)
    fit, w, ref_iter, converged = fit_and_reference(R, C, tol=tol, max_iter=max_iter)
    assert (fit.n_iter, fit.converged) == (ref_iter, converged) and ref_iter == n_iter
    np.testing.assert_allclose(fit.weights, w, rtol=1e-12)
    assert fit.kl_after <= fit.kl_before


@pytest.mark.parametrize("R, C, n_iter", [
    pytest.param([0.52, 0.25, 0.23], [[1, 0, 1], [1, 1, 1], [1, 1, 1], [1, 1, 1], [1, 1, 1],
                                      [0, 1, 1], [1, 1, 1]], 31, id="seven-users"),
    pytest.param([0.5, 0.25, 0.25], [[1, 0, 1], [1, 1, 1], [0, 1, 1], [1, 1, 1]], 15,
                 id="four-users"),
])
def test_the_step_halves_down_to_its_floor_of_1e_20(R, C, n_iter):
    """``tol`` 1e-300 chases the optimum until D changes by rounding only: no step then
    decreases D by the Armijo fraction, and the step is halved down to the floor (below
    1e-20) before the last, empty, step is accepted. A floor of 1 instead (accepting a step
    of 0.5 that does not decrease D) ends one iteration earlier, with the weights 1e-9 off
    on the first problem, 2e-10 on the second."""
    R = np.array(R)
    C = sp.csr_array(np.array(C, float))
    fit, w, ref_iter, converged = fit_and_reference(R, C, tol=1e-300, max_iter=80)
    assert (fit.n_iter, fit.converged) == (ref_iter, converged) == (n_iter, True)
    np.testing.assert_allclose(fit.weights, w, rtol=1e-12)


def pushed_item():
    """Item 0: the reference holds it at 0.1, the current profiles give it at least 1/4
    (user 0 holds it alone): D keeps decreasing as w_0 -> 0, an optimum at -infinity in
    log-weights. p = 1 selects item 0 (the largest gap, 0.5 - 0.1)."""
    R = np.array([0.1, 0.45, 0.45])
    C = sp.csr_array(np.array([[1, 0, 0], [1, 1, 0], [0, 1, 1], [1, 0, 1]], float))
    return R, C


@pytest.mark.parametrize("method", ["lbfgs", "gradient_descent"])
def test_the_lower_bound_of_the_log_weights_binds_when_chased(method):
    """Chased with tol 1e-300, item 0's log-weight stops exactly at the lower bound -30
    (w = e^-30), never beyond; the other items keep weight 1. Without the bound the
    optimisers went to -36.97 (L-BFGS-B with the bound -30 / sqrt(P_ref) in its
    preconditioned variables, the gradient descent without a lower clip)."""
    R, C = pushed_item()
    fit = fit_item_weights(R, C, p=1, method=method, tol=1e-300, max_iter=200)
    assert fit.selected.tolist() == [0]
    logw = np.log(fit.weights)
    assert logw[0] == pytest.approx(-30.0, abs=1e-12) and logw[0] >= -30.0 - 1e-12
    assert fit.weights[1:].tolist() == [1.0, 1.0]
