"""Item weights: gradient against finite differences and the per-coordinate reference,
optimiser properties, unmatched items, bad input."""

import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluators import (
    ItemWeights,
    UnmatchedItemsWarning,
    fit_item_weights,
    kl_objective,
    offline_score,
    reference_gradient,
)


def random_graph(rng, n_users, n_items, density):
    B = sp.random_array((n_users, n_items), density=density, rng=rng, format="csr")
    # every user holds at least one item and every item is held: a clean, matched problem
    D = B.toarray() != 0
    D[np.arange(n_users), rng.integers(0, n_items, n_users)] = True
    D[rng.integers(0, n_users, n_items), np.arange(n_items)] = True
    return sp.csr_array(D.astype(float))


def marginal(B, w=None):
    D = B.toarray() != 0
    w = np.ones(D.shape[1]) if w is None else w
    has = D.any(axis=1)
    pu = has / has.sum()
    Wu = D @ w
    return w * ((pu / np.where(Wu > 0, Wu, 1)) @ D)


@st.composite
def problems(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    n_users = draw(st.integers(3, 30))
    n_items = draw(st.integers(2, 12))
    R = random_graph(rng, n_users, n_items, 0.3)
    C = random_graph(rng, n_users, n_items, 0.3)
    w = np.exp(rng.uniform(-1.5, 1.5, n_items))
    return R, C, w


@settings(max_examples=40)
@given(problems())
def test_vectorised_gradient_equals_per_coordinate_reference(problem):
    R, C, w = problem
    g_ref = reference_gradient(R, C, w, method="per_coordinate")
    g_vec = reference_gradient(R, C, w, method="vectorised")
    # relative error; the floor only matters at a stationary point (gradient ~ round-off)
    scale = max(np.max(np.abs(g_ref)), 1e-9)
    assert np.max(np.abs(g_vec - g_ref)) / scale < 1e-6


@settings(max_examples=25)
@given(problems())
def test_gradient_matches_finite_differences(problem):
    R, C, w = problem
    g = reference_gradient(R, C, w, method="vectorised")
    n = w.size
    fd = np.empty(n)
    for k in range(n):
        h = 1e-6 * w[k]
        e = np.zeros(n)
        e[k] = h
        fd[k] = (kl_objective(R, C, w + e) - kl_objective(R, C, w - e)) / (2 * h)
    # relative error, with the central difference's own round-off (~1e-10) as a floor
    scale = max(np.max(np.abs(g)), 1e-4)
    assert np.max(np.abs(fd - g)) / scale < 1e-6


def test_kl_objective_is_kl_of_marginals():
    rng = np.random.default_rng(0)
    R, C = random_graph(rng, 50, 8, 0.3), random_graph(rng, 50, 8, 0.3)
    w = rng.uniform(0.5, 2, 8)
    pr, pc = marginal(R), marginal(C, w)
    assert math.isclose(kl_objective(R, C, w), float(np.sum(pr * np.log(pr / pc))),
                        rel_tol=1e-12)


@settings(max_examples=20)
@given(problems(), st.sampled_from([None, 0, 1, 3]))
def test_fit_never_increases_kl(problem, p):
    R, C, _ = problem
    p = p if p is None else min(p, C.shape[1])
    res = fit_item_weights(R, C, p=p, max_iter=200)  # tiny graphs: minima often at infinity
    assert isinstance(res, ItemWeights)
    assert res.kl_after <= res.kl_before + 1e-15
    assert np.all(res.weights > 0)
    assert math.isclose(res.kl_after, kl_objective(R, C, res.weights), rel_tol=1e-9,
                        abs_tol=1e-15)
    # items not selected keep weight 1
    others = np.setdiff1d(np.arange(C.shape[1]), res.selected)
    assert np.all(res.weights[others] == 1.0)


def test_identical_graphs_uniform_weights_change_nothing():
    rng = np.random.default_rng(1)
    B = random_graph(rng, 200, 15, 0.2)
    res = fit_item_weights(B, B)
    assert res.kl_before < 1e-15
    assert np.allclose(res.weights, 1.0)
    assert res.kl_after <= res.kl_before


def test_p_all_matches_the_reference_marginal_and_fixes_constant_scores():
    rng = np.random.default_rng(2)
    R = random_graph(rng, 400, 12, 0.2)
    # current: the same users, plus a campaign pushing items 0 and 1 to many profiles
    D = R.toarray()
    D[rng.random(400) < 0.5, 0] = 1
    D[rng.random(400) < 0.4, 1] = 1
    C = sp.csr_array(D)
    res = fit_item_weights(R, C)
    assert res.converged and res.kl_before > 1e-2 and res.kl_after < 1e-10  # tol = 1e-10
    assert np.allclose(marginal(C, res.weights), marginal(R), atol=1e-6)
    assert res.weights[0] < 1 and res.weights[1] < 1  # pushed items lose weight

    class Const:
        def fit(self, profiles):
            return self

        def recommend(self, users, k, *, removed=None):
            return np.tile(np.arange(k), (len(users), 1))

    before = offline_score(R, Const(), k=2).value
    biased = offline_score(C, Const(), k=2).value
    fixed = offline_score(C, Const(), k=2, item_weights=res.weights).value
    assert biased > before * 1.2
    assert abs(fixed - before) < 1e-6


def test_selection_is_by_largest_marginal_gap_and_nested():
    rng = np.random.default_rng(3)
    R = random_graph(rng, 300, 20, 0.2)
    D = R.toarray()
    D[rng.random(300) < 0.5, 7] = 1
    D[rng.random(300) < 0.3, 3] = 1
    C = sp.csr_array(D)
    gap = np.abs(marginal(R) - marginal(C))
    r5, r10 = fit_item_weights(R, C, p=5), fit_item_weights(R, C, p=10)
    assert list(r5.selected) == list(np.argsort(-gap, kind="stable")[:5])
    assert list(r10.selected[:5]) == list(r5.selected)
    assert set(r5.selected[:2]) == {3, 7}
    assert r10.kl_after <= r5.kl_after + 1e-12
    r0 = fit_item_weights(R, C, p=0)
    assert r0.selected.size == 0 and np.all(r0.weights == 1) and r0.kl_after == r0.kl_before


def campaign_problem(seed, n_users=60, n_items=6):
    """Reference profiles and the same profiles after a campaign pushed two items."""
    rng = np.random.default_rng(seed)
    R = random_graph(rng, n_users, n_items, 0.35)
    D = R.toarray()
    pushed = rng.choice(n_items, 2, replace=False)
    D[rng.random(n_users) < 0.4, pushed[0]] = 1
    D[rng.random(n_users) < 0.3, pushed[1]] = 1
    return R, sp.csr_array(D)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("p", [None, 2])
def test_gradient_descent_reference_agrees_with_lbfgs(seed, p):
    # On problems whose minimum is attained (a campaign on top of the reference), the paper's
    # plain gradient descent and L-BFGS-B reach the same minimum.
    R, C = campaign_problem(seed)
    a = fit_item_weights(R, C, p=p)
    b = fit_item_weights(R, C, p=p, method="gradient_descent", tol=1e-12, max_iter=2000)
    assert b.method == "gradient_descent" and a.method == "lbfgs"
    assert a.converged and b.converged
    assert b.kl_after <= b.kl_before
    assert abs(a.kl_after - b.kl_after) < 1e-6 * a.kl_before
    # D is invariant to a common scale of w: compare normalised weights where it is identified
    if p is None:
        assert np.allclose(a.weights / a.weights.sum(), b.weights / b.weights.sum(), rtol=1e-3)


def test_unmatched_items_are_warned_listed_and_left_out():
    rng = np.random.default_rng(4)
    R = random_graph(rng, 100, 10, 0.3)
    D = R.toarray()
    D[:, [2, 5]] = 0  # nobody holds items 2 and 5 now
    D[D.sum(axis=1) == 0, 0] = 1
    C = sp.csr_array(D)
    with pytest.warns(UnmatchedItemsWarning, match=r"2 item\(s\).*\[2, 5\]"):
        res = fit_item_weights(R, C)
    assert list(res.unmatched) == [2, 5]
    assert 2 not in res.selected and 5 not in res.selected
    assert np.isfinite(res.kl_before) and res.kl_after <= res.kl_before


def test_reference_given_as_marginal_equals_reference_as_profiles():
    rng = np.random.default_rng(5)
    R, C = random_graph(rng, 150, 9, 0.3), random_graph(rng, 150, 9, 0.3)
    a = fit_item_weights(R, C)
    b = fit_item_weights(marginal(R), C)
    assert np.allclose(a.weights, b.weights, rtol=1e-8)
    assert math.isclose(a.kl_before, b.kl_before, rel_tol=1e-12)


def test_inputs_untouched_and_deterministic():
    rng = np.random.default_rng(6)
    R, C = random_graph(rng, 80, 7, 0.3), random_graph(rng, 80, 7, 0.3)
    R0, C0 = R.copy(), C.copy()
    a, b = fit_item_weights(R, C), fit_item_weights(R, C)
    assert a.weights.tobytes() == b.weights.tobytes()
    assert (R != R0).nnz == 0 and (C != C0).nnz == 0
    with pytest.raises(ValueError):
        a.weights[0] = 2.0  # read-only result


# --- bad input -------------------------------------------------------------------------------

_R = sp.csr_array(np.array([[1, 1, 0], [0, 1, 1]]))
_C = sp.csr_array(np.array([[1, 0, 1], [1, 1, 1]]))


@pytest.mark.parametrize("reference, current, kwargs, exc, match", [
    pytest.param(_R, sp.csr_array(np.ones((2, 4))), {}, ValueError,
                 r"`reference` and `current` must have the same number of items; got 3 and 4",
                 id="item-count"),
    pytest.param(np.array([0.5, 0.5]), _C, {}, ValueError,
                 r"same number of items; got 2 and 3", id="marginal-length"),
    pytest.param(np.array([0.5, -0.1, 0.6]), _C, {}, ValueError,
                 r"`reference` must be finite and >= 0; got -0.1 at index 1",
                 id="negative-marginal"),
    pytest.param(sp.csr_array((2, 3)), _C, {}, ValueError, r"`reference` must hold at least",
                 id="empty-reference"),
    pytest.param(_R, _C, {"p": 4}, ValueError, r"`p` must be in \[0, n_items=3\] or None; got 4",
                 id="p-too-large"),
    pytest.param(_R, _C, {"p": -1}, ValueError, r"`p`.*got -1", id="p-negative"),
    pytest.param(_R, _C, {"p": 1.5}, TypeError, r"`p` must be an integer", id="p-float"),
    pytest.param(_R, _C, {"method": "newton"}, ValueError, r"`method` must be one of .*'newton'",
                 id="method"),
    pytest.param(_R, _C, {"tol": 0.0}, ValueError, r"`tol` must be a number > 0; got 0.0",
                 id="tol"),
    pytest.param(_R, _C, {"max_iter": 0}, ValueError, r"`max_iter` must be >= 1; got 0",
                 id="max_iter"),
    pytest.param("profiles", _C, {}, TypeError, r"`reference` must be a scipy.sparse",
                 id="reference-type"),
    pytest.param(_R, _C, {"user_weights": [1.0, -1.0]}, ValueError,
                 r"`user_weights` must be finite and >= 0; got -1.0 at index 1", id="user-weights"),
])
def test_bad_input(reference, current, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        fit_item_weights(reference, current, **kwargs)


@pytest.mark.parametrize("weights, match", [
    pytest.param([1.0, 0.0, 1.0], r"`weights` must be finite and > 0; got 0.0 at index 1",
                 id="zero"),
    pytest.param([1.0, 1.0, -3.0], r"`weights`.*got -3.0 at index 2", id="negative"),
    pytest.param([1.0, np.nan, 1.0], r"`weights`.*got nan at index 1", id="nan"),
])
def test_bad_weights(weights, match):
    with pytest.raises(ValueError, match=match):
        kl_objective(_R, _C, weights)
    with pytest.raises(ValueError, match=match):
        reference_gradient(_R, _C, weights)


def test_no_warning_when_everything_matches():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit_item_weights(_R, _C)


def test_empty_current_leaves_everything_unmatched():
    with pytest.warns(UnmatchedItemsWarning, match=r"3 item\(s\)"):
        res = fit_item_weights(_R, sp.csr_array((2, 3)))
    assert list(res.unmatched) == [0, 1, 2] and res.selected.size == 0
    assert math.isnan(res.kl_before) and math.isnan(res.kl_after)
    assert np.all(res.weights == 1.0)


def test_item_absent_from_reference_goes_to_the_lower_bound():
    R = sp.csr_array(np.array([[1, 1, 0], [1, 0, 0], [0, 1, 0]]))
    C = sp.csr_array(np.array([[1, 1, 1], [1, 0, 1], [0, 1, 1]]))  # item 2 is new
    res = fit_item_weights(R, C, p=1)
    assert list(res.selected) == [2] and res.n_iter == 0
    assert res.weights[2] == pytest.approx(math.exp(-30)) and res.weights[0] == 1.0
    assert res.kl_after < 1e-10 < res.kl_before
    full = fit_item_weights(R, C)
    assert full.kl_after <= res.kl_after + 1e-12


def test_user_weights_apply_to_both_graphs():
    rng = np.random.default_rng(8)
    R = random_graph(rng, 120, 8, 0.3)
    D = R.toarray()
    D[rng.random(120) < 0.5, 3] = 1
    C = sp.csr_array(D)
    uw = rng.uniform(0.1, 3.0, 120)

    def weighted_marginal(B, w):
        X = B.toarray() != 0
        pu = uw * X.any(axis=1) / np.sum(uw * X.any(axis=1))
        return w * ((pu / (X @ w)) @ X)

    res = fit_item_weights(R, C, user_weights=uw)
    target = weighted_marginal(R, np.ones(8))
    assert np.allclose(weighted_marginal(C, res.weights), target, atol=1e-6)
    assert math.isclose(res.kl_before, float(np.sum(target * np.log(
        target / weighted_marginal(C, np.ones(8))))), rel_tol=1e-12)
    # the same fit without user weights lands elsewhere
    assert not np.allclose(fit_item_weights(R, C).weights, res.weights, rtol=1e-3)
