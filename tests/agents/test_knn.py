"""KNNRating: fast == literal definition, exact LOO, agreement with evaluators.loo_knn."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from agents import KNNRating

SIMS = ["pearson", "adjusted_cosine", "cosine"]


@st.composite
def rating_tables(draw, max_users=7, max_items=6):
    """Small rating tables with few distinct values (ties, zero variances) and empty rows."""
    n_users = draw(st.integers(1, max_users))
    n_items = draw(st.integers(1, max_items))
    cells = draw(st.lists(st.one_of(st.none(), st.integers(1, 4)),
                          min_size=n_users * n_items, max_size=n_users * n_items))
    rows = [i // n_items for i, c in enumerate(cells) if c is not None]
    cols = [i % n_items for i, c in enumerate(cells) if c is not None]
    vals = [float(c) for c in cells if c is not None]
    return sp.csr_array((vals, (rows, cols)), shape=(n_users, n_items))


def _edges(table):
    return np.repeat(np.arange(table.shape[0]), np.diff(table.indptr)), table.indices


@pytest.mark.parametrize("similarity", SIMS)
@settings(max_examples=25)
@given(table=rating_tables(), k=st.integers(1, 4), data=st.data())
def test_fast_equals_literal_definition(similarity, table, k, data):
    fast = KNNRating(similarity, k).fit(table)
    naive = KNNRating(similarity, k, method="naive").fit(table)
    n_users, n_items = table.shape
    users, items = _edges(table)
    cases = [(np.arange(n_users), None)] + ([(users, items)] if table.nnz else [])
    for who, removed in cases:
        for t in range(n_items):
            target = np.full(who.size, t)
            np.testing.assert_allclose(fast.predict(who, target, removed=removed),
                                       naive.predict(who, target, removed=removed),
                                       rtol=0, atol=1e-9, equal_nan=True)
        n = data.draw(st.integers(1, n_items))
        np.testing.assert_array_equal(fast.recommend(who, n, removed=removed),
                                      naive.recommend(who, n, removed=removed))


@pytest.mark.parametrize("similarity", SIMS)
@settings(max_examples=15)
@given(table=rating_tables(), k=st.integers(1, 4))
def test_removed_equals_refit_without_the_rating(similarity, table, k):
    if not table.nnz:
        return
    users, items = _edges(table)
    agent = KNNRating(similarity, k).fit(table)
    for j in range(min(table.nnz, 4)):
        dense, mask = table.toarray(), np.zeros(table.shape, bool)
        mask[users, items] = True
        mask[users[j], items[j]] = False
        rows, cols = np.nonzero(mask)
        refit = KNNRating(similarity, k).fit(
            sp.csr_array((dense[rows, cols], (rows, cols)), shape=table.shape))
        every = np.arange(table.shape[1])
        np.testing.assert_allclose(
            agent.predict(np.full(every.size, users[j]), every,
                          removed=np.full(every.size, items[j])),
            refit.predict(np.full(every.size, users[j]), every), atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("similarity", SIMS)
def test_loo_prediction_matches_evaluators_loo_knn(similarity):
    """The agent and the fast LOO evaluator implement one definition (issue 5)."""
    from evaluators import loo_knn

    rng = np.random.default_rng(7)
    dense = np.where(rng.random((25, 12)) < 0.5, rng.integers(1, 6, (25, 12)), 0).astype(float)
    table = sp.csr_array(dense)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # their literal reference: same definition, no numba compilation in this test
        res = loo_knn(table, similarity=similarity, k=4, method="naive")
    mine = KNNRating(similarity, 4).fit(table).predict(res.user, res.item, removed=res.item)
    np.testing.assert_allclose(mine, res.prediction, rtol=0, atol=1e-9)


def test_pearson_hand_computed():
    # u0 = {0: 5, 1: 3}; u1 = {0: 4, 1: 2, 2: 5}; u2 = {0: 1, 1: 5, 2: 1}
    table = sp.csr_array(np.array([[5, 3, 0], [4, 2, 5], [1, 5, 1]], dtype=float))
    # mean_u0 = 4, mean_u1 = 11/3; sim(u0, u1) = 2 / sqrt(2 * 26/9) > 0 and sim(u0, u2) < 0,
    # so u1 is the only neighbour: p = 4 + (5 - 11/3) = 16/3.
    agent = KNNRating("pearson", 2).fit(table)
    assert agent.predict([0], [2])[0] == pytest.approx(16 / 3, abs=1e-12)
    # cosine: both neighbours are positive
    s1, s2 = 26 / np.sqrt(34 * 45), 20 / np.sqrt(34 * 27)
    want = 4 + (s1 * (5 - 11 / 3) + s2 * (1 - 7 / 3)) / (s1 + s2)
    assert KNNRating("cosine", 2).fit(table).predict([0], [2])[0] == pytest.approx(want)
    # k = 1 keeps only the most similar one
    s_max = max(s1, s2)
    dev = (5 - 11 / 3) if s1 == s_max else (1 - 7 / 3)
    assert KNNRating("cosine", 1).fit(table).predict([0], [2])[0] == pytest.approx(4 + dev)
    # LOO: u0 without item 0 = {1: 3} -> mean 3
    assert KNNRating("pearson", 2).fit(table).predict([0], [0], removed=[0])[0] \
        == pytest.approx(3.0)  # every pearson denominator over one co-rated item is 0


def test_recommend_ranks_unrated_items_by_prediction():
    table = sp.csr_array(np.array([[5, 3, 0, 0], [4, 2, 5, 1], [5, 3, 4, 2]], dtype=float))
    agent = KNNRating("pearson", 2).fit(table)
    preds = agent.predict([0, 0], [2, 3])
    assert preds[0] > preds[1]
    assert agent.recommend([0], 2).tolist() == [[2, 3]]
    # with item 0 left out, it competes again
    out = agent.recommend([0], 3, removed=[0])[0]
    assert set(out) == {0, 2, 3}


def test_stored_zero_is_a_rating():
    rows, cols, vals = [0, 0, 1, 1], [0, 1, 0, 1], [0.0, 4.0, 1.0, 5.0]
    table = sp.coo_array((vals, (rows, cols)), shape=(2, 3))
    agent = KNNRating("cosine", 2).fit(table)
    # item 0 is rated (0.0) by user 0: it is held, only item 2 is free
    assert agent.recommend([0], 1).tolist() == [[2]]
    assert agent.predict([0], [2])[0] == pytest.approx(2.0)  # mean of {0, 4}


@pytest.mark.parametrize("kwargs, exc, match", [
    pytest.param(dict(similarity="jaccard"), ValueError,
                 "'pearson', 'adjusted_cosine', 'cosine'; got 'jaccard'", id="similarity"),
    pytest.param(dict(k=0), ValueError, r"`k` must be an int >= 1; got 0", id="k-zero"),
    pytest.param(dict(k=2.5), TypeError, "`k` must be an int", id="k-float"),
    pytest.param(dict(min_support=0), ValueError, "`min_support` must be an int >= 1",
                 id="support"),
    pytest.param(dict(method="quick"), ValueError, "'fast', 'naive'", id="method"),
])
def test_bad_constructor_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        KNNRating(**kwargs)


def test_bad_data_and_calls():
    with pytest.raises(RuntimeError, match="call `fit"):
        KNNRating().predict([0], [0])
    dup = sp.coo_array(([1.0, 2.0], ([0, 0], [1, 1])), shape=(2, 2))
    with pytest.raises(ValueError, match="at most once; got 1 duplicate"):
        KNNRating().fit(dup)
    agent = KNNRating().fit(sp.csr_array(np.array([[1.0, 2.0], [3.0, 0.0]])))
    with pytest.raises(ValueError, match=r"`items` must be item ids in \[0, 2\); got 2"):
        agent.predict([0], [2])
    with pytest.raises(ValueError, match="`items` must have one item per user"):
        agent.predict([0, 1], [0])
    with pytest.raises(ValueError, match=r"`removed\[0\]` = 1 is not in the profile of user 1"):
        agent.predict([1], [0], removed=[1])
