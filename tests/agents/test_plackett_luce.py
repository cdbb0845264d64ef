"""agents.PlackettLuce: exact probabilities against enumeration, sampling against them, the
compiled kernels against their Python versions, bad input."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents import PlackettLuce
from agents import _pl_kernels as kernels
from agents._plackett_luce import _grid, pl_enumerate, pl_marginals, pl_position_expectations


@st.composite
def pl_rows(draw, max_items=7, max_k=4):
    """Logits of a few contexts (some items unavailable, spreads up to e^30) and k."""
    m = draw(st.integers(2, max_items))
    k = draw(st.integers(1, min(m, max_k)))
    seed = draw(st.integers(0, 2**32 - 1))
    spread = draw(st.sampled_from([0.0, 0.5, 2.0, 8.0, 30.0]))
    rng = np.random.default_rng(seed)
    L = rng.normal(0.0, 1.0, (2, m)) * spread
    for r in range(2):
        hide = rng.random(m) < 0.25
        hide[rng.permutation(m)[:k]] = False  # at least k available
        L[r, hide] = -np.inf
    return L, k


def literal_probability(w, slate):
    """The product formula, the remaining weight summed afresh at every position."""
    p = 1.0
    for j, a in enumerate(slate):
        left = math.fsum(w[b] for b in range(w.size) if b not in slate[:j])
        p *= w[a] / left
    return p


@settings(max_examples=60)
@given(rows=pl_rows())
def test_marginals_integral_equals_enumeration(rows):
    L, k = rows
    got = pl_marginals(L, k, method="integral")
    ref = pl_marginals(L, k, method="enumerate")
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-13)
    np.testing.assert_allclose(got.sum(axis=1), 1.0, atol=1e-13)  # each position: one item


@settings(max_examples=60)
@given(rows=pl_rows(), seed=st.integers(0, 1000))
def test_position_expectations_integral_equals_enumeration(rows, seed):
    L, k = rows
    rng = np.random.default_rng(seed)
    g, d = rng.random(L.shape), rng.random(L.shape)
    got = pl_position_expectations(L, g, d, k, method="integral")
    ref = pl_position_expectations(L, g, d, k, method="enumerate")
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-13)


@settings(max_examples=40)
@given(rows=pl_rows(max_items=6, max_k=3))
def test_prefix_probabilities_equal_the_product_formula(rows):
    L, k = rows
    pol = PlackettLuce(np.zeros(L.shape[1]), k=k)  # shape only; logits given below
    w = np.exp(L[0] - L[0].max())
    slates, probs = pl_enumerate(w, k)
    assert abs(probs.sum() - 1.0) < 1e-12
    from agents._plackett_luce import pl_prefix_probabilities

    got = pl_prefix_probabilities(np.repeat(L[:1], len(slates), axis=0), slates)
    ref = np.array([[literal_probability(w, tuple(s[:j + 1])) for j in range(k)]
                    for s in slates.tolist()])
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-300)
    assert pol.k == k


def test_prefix_probabilities_keep_their_digits_at_low_temperature():
    """The heaviest items hold all but 1e-30 of the weight: W - sum(shown) would be 0."""
    scores = np.array([70.0, 0.0, -1.0, -2.0, -3.0])
    pol = PlackettLuce(scores, k=3, temperature=1.0)
    obs = {"available": np.ones(5, bool)}
    got = pol.prefix_probabilities(obs, [0, 1, 2])
    w = np.exp(scores - scores.max())
    ref = [literal_probability(w, (0,)), literal_probability(w, (0, 1)),
           literal_probability(w, (0, 1, 2))]
    np.testing.assert_allclose(got, ref, rtol=1e-13)
    assert 0.5 < got[1] < 1.0


def test_conditional_and_marginal_views_agree():
    rng = np.random.default_rng(0)
    scores = rng.normal(0, 1, (3, 8))
    pol = PlackettLuce(scores, k=4, temperature=0.7)
    obs = {"user": np.array([0, 1, 2, 1]), "available": np.ones((4, 8), bool)}
    obs["available"][2, [3, 5]] = False
    slates = pol.sample(obs, rng=1)
    D = pol.conditional_probabilities(obs, slates)
    np.testing.assert_allclose(D.sum(axis=2), 1.0, atol=1e-14)
    chosen = np.take_along_axis(D, slates[:, :, None], axis=2)[:, :, 0]
    np.testing.assert_allclose(np.cumprod(chosen, axis=1),
                               pol.prefix_probabilities(obs, slates), rtol=1e-13)
    for j in range(1, 4):  # items shown above cannot come again
        assert np.all(D[np.arange(4)[:, None], j, slates[:, :j]] == 0)
    assert np.all(D[2, :, [3, 5]] == 0)
    M = pol.marginals(obs)
    IM = pol.item_marginals(obs, slates)
    np.testing.assert_array_equal(IM, M[np.arange(4)[:, None], slates])
    np.testing.assert_array_equal(pol.item_position_probabilities(obs, slates),
                                  np.diagonal(IM, axis1=1, axis2=2))
    np.testing.assert_array_equal(M[1], M[3])  # same user, same context
    E = pol.position_expectations(obs, np.ones(8))
    np.testing.assert_allclose(E, 1.0, atol=1e-13)


def dense_from_factors(W, row, R, slates):
    """The (n, k, n_items) conditionals the factors stand for, written out."""
    n, k = slates.shape
    D = W[row][:, None, :] / R[:, :, None]
    for j in range(1, k):
        D[np.arange(n)[:, None], j, slates[:, :j]] = 0.0
    return D


@settings(max_examples=40)
@given(seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(["users", "vector", "callable"]),
       masked=st.booleans(), spread=st.sampled_from([0.5, 2.0, 8.0]))
def test_conditional_factors_are_the_conditional_probabilities(seed, kind, masked, spread):
    rng = np.random.default_rng(seed)
    n, m, k = 12, 7, 3
    table = rng.normal(0, spread, (4, m))
    scores = {"users": table, "vector": table[0],
              "callable": lambda obs: table[obs["user"]] + obs["context"][:, :1]}[kind]
    pol = PlackettLuce(scores, k=k, temperature=0.8)
    avail = np.ones((n, m), bool)
    if masked:
        avail[rng.random((n, m)) < 0.3] = False
        avail[np.arange(n)[:, None], np.argsort(rng.random((n, m)))[:, :k]] = True
    obs = {"user": rng.integers(0, 4, n), "available": avail,
           "context": rng.integers(0, 2, (n, 1)).astype(float)}
    slates = pol.sample(obs, rng=rng)
    W, row, R = pol.conditional_factors(obs, slates)
    assert W.shape[0] <= n and row.shape == (n,) and R.shape == (n, k)
    np.testing.assert_allclose(dense_from_factors(W, row, R, slates),
                               pol.conditional_probabilities(obs, slates), rtol=1e-13,
                               atol=1e-300)
    # one observation: a row, the same numbers
    W1, row1, R1 = pol.conditional_factors({key: v[5] for key, v in obs.items()}, slates[5])
    np.testing.assert_array_equal(W1[row1] / R1[:, None], W[row[5]] / R[5][:, None])


def test_uniform_policy():
    pol = PlackettLuce(np.arange(6.0), k=3, temperature=math.inf)
    obs = {"available": np.ones(6, bool)}
    assert pol.slate_probability(obs, [5, 0, 2]) == pytest.approx(1 / (6 * 5 * 4), rel=1e-14)
    np.testing.assert_allclose(pol.marginals(obs), 1 / 6, atol=1e-14)


@pytest.mark.slow
def test_sampling_follows_the_slate_probabilities():
    from scipy.stats import chisquare

    pol = PlackettLuce(np.log([5.0, 3.0, 1.5, 1.0, 0.5]), k=2, temperature=1.0)
    n = 60_000
    obs = {"available": np.ones((n, 5), bool)}
    S = pol.sample(obs, rng=3)
    slates = list(itertools.permutations(range(5), 2))
    counts = np.array([np.sum((S[:, 0] == a) & (S[:, 1] == b)) for a, b in slates])
    one = {"available": np.ones((len(slates), 5), bool)}
    expected = n * pol.slate_probability(one, np.array(slates))
    assert chisquare(counts, expected).pvalue > 1e-4
    assert counts.sum() == n


def test_same_rng_same_slates_and_act_uses_reset():
    pol = PlackettLuce(np.random.default_rng(0).normal(size=(4, 20)), k=5)
    obs = {"user": np.arange(4).repeat(3), "available": np.ones((12, 20), bool)}
    np.testing.assert_array_equal(pol.sample(obs, rng=7), pol.sample(obs, rng=7))
    pol.reset(3)
    a = pol.act({"user": 2, "available": np.ones(20, bool)})
    pol.reset(3)
    b = pol.act({"user": 2, "available": np.ones(20, bool)})
    assert a.shape == (5,) and np.array_equal(a, b) and np.unique(a).size == 5


def test_inputs_are_not_mutated_and_callable_scores():
    feats = np.random.default_rng(1).normal(size=(10, 3))
    pol = PlackettLuce(lambda o: o["context"] @ feats.T, k=3, temperature=2.0)
    ctx = np.random.default_rng(2).normal(size=(6, 3))
    obs = {"context": ctx, "available": np.ones((6, 10), bool)}
    before = {key: v.copy() for key, v in obs.items()}
    S = pol.sample(obs, rng=0)
    pol.marginals(obs)
    pol.prefix_probabilities(obs, S)
    for key in obs:
        np.testing.assert_array_equal(obs[key], before[key])


def test_large_problem_sums_and_consistency():
    """1,000 items, k = 10: every position's marginals sum to 1, and the expectation
    integral (another integrand) agrees with the marginals."""
    rng = np.random.default_rng(4)
    L = rng.normal(0, 2, (2, 1000))
    M = pl_marginals(L, 10)
    np.testing.assert_allclose(M.sum(axis=1), 1.0, atol=1e-12)
    assert np.all(M.sum(axis=2) <= 1 + 1e-12) and np.all(M >= 0)
    g = rng.random((2, 1000))
    E = pl_position_expectations(L, g, np.ones_like(g), 10)
    np.testing.assert_allclose(E, np.einsum("rm,rmj->rj", g, M), rtol=1e-11)


def test_compiled_kernels_equal_their_python_versions():
    rng = np.random.default_rng(5)
    w = np.exp(rng.normal(0, 1, (3, 6)))
    w[1, 2] = 0.0
    t, dt, _ = _grid(w, 3)
    out_py = np.empty((3, 6, 3))
    kernels.marginals_py(w, t, dt, 3, out_py)
    np.testing.assert_allclose(kernels.marginals(w, t, dt, 3), out_py, rtol=1e-13, atol=1e-16)
    g, d = rng.random((2, 3, 6))
    e_py = np.empty((3, 3))
    kernels.expectations_py(w, g, d, t, dt, 3, e_py)
    np.testing.assert_allclose(kernels.expectations(w, g, d, t, dt, 3), e_py, rtol=1e-13,
                               atol=1e-16)
    one = kernels.marginals(w, t, dt, 3, threads=1)
    np.testing.assert_array_equal(one, kernels.marginals(w, t, dt, 3, threads=2))


@pytest.mark.parametrize("kw,err,match", [
    pytest.param({"temperature": 0.0}, ValueError, "temperature", id="temperature-zero"),
    pytest.param({"temperature": float("nan")}, ValueError, "temperature", id="temperature-nan"),
    pytest.param({"k": 0}, ValueError, "`k`", id="k-zero"),
    pytest.param({"k": 9}, ValueError, "`k`", id="k-above-items"),
    pytest.param({"scores": [0.0, np.nan, 1.0, 2.0]}, ValueError, "scores", id="nan-scores"),
    pytest.param({"scores": np.zeros((2, 2, 2))}, ValueError, "scores", id="3d-scores"),
])
def test_bad_construction(kw, err, match):
    args = {"scores": np.zeros(4), "k": 2} | kw
    with pytest.raises(err, match=match):
        PlackettLuce(**args)


def test_bad_calls():
    pol = PlackettLuce(np.zeros((3, 5)), k=3)
    obs = {"user": np.array([0, 1]), "available": np.ones((2, 5), bool)}
    with pytest.raises(ValueError, match="distinct"):
        pol.prefix_probabilities(obs, [[0, 0, 1], [1, 2, 3]])
    with pytest.raises(ValueError, match="shape"):
        pol.prefix_probabilities(obs, [[0, 1], [1, 2]])
    with pytest.raises(ValueError, match=r"items in \[0, 4\]"):
        pol.slate_probability(obs, [[0, 1, 7], [1, 2, 3]])
    with pytest.raises(ValueError, match="user"):
        pol.sample({"user": np.array([3]), "available": np.ones((1, 5), bool)})
    few = {"user": np.array([0]), "available": np.array([[True, True, False, False, False]])}
    with pytest.raises(ValueError, match="available items"):
        pol.sample(few)
    with pytest.raises(ValueError, match="method"):
        pol.marginals(obs, method="exact")
    with pytest.raises(TypeError, match="observations"):
        pol.sample([0, 1])
    with pytest.raises(ValueError, match="`user`"):
        pol.sample({"available": np.ones((2, 5), bool)})
