"""Exact LOO for user-based kNN: fast == naive (the literal definition), API and bad input."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluators import LooKnnWarning, LooResult, kfold_loo_knn, loo_knn

SIMILARITIES = ("pearson", "cosine", "adjusted_cosine", "pearson_corated", "cosine_corated")


@st.composite
def rating_data(draw, max_users=7, max_items=6):
    """Small rating sets on a grid (integers or halves, negatives and zeros included).

    Grid values are what real data sets hold (MovieLens integers, Jester hundredths) and
    give many exact ties between similarities; tiny sizes give single-rating users and items
    rated once. Ids are arbitrary (gaps, not starting at 0; never negative: refused) and the
    order of the triples random.
    """
    n_users = draw(st.integers(1, max_users))
    n_items = draw(st.integers(1, max_items))
    cells = draw(st.lists(st.tuples(st.integers(0, n_users - 1), st.integers(0, n_items - 1)),
                          min_size=1, max_size=n_users * n_items, unique=True))
    lo, hi = draw(st.sampled_from([(1, 5), (-3, 3), (0, 2), (-10, 10)]))
    step = draw(st.sampled_from([1.0, 0.5]))
    values = draw(st.lists(st.integers(lo, hi), min_size=len(cells), max_size=len(cells)))
    u = np.array([c[0] for c in cells], dtype=np.int64)
    i = np.array([c[1] for c in cells], dtype=np.int64)
    u = u * draw(st.integers(1, 3)) + draw(st.integers(0, 4))
    i = i * draw(st.integers(1, 3)) + draw(st.integers(0, 2))
    return u, i, np.array(values, dtype=np.float64) * step


@st.composite
def loo_case(draw, similarity):
    u, i, r = draw(rating_data())
    ids = np.unique(u).tolist()
    subset = st.none() | st.lists(st.sampled_from(ids), unique=True).map(np.array)
    some = st.none() | st.lists(st.sampled_from(ids), unique=True, min_size=1).map(np.array)
    opts = dict(similarity=similarity, k=draw(st.integers(1, 4)),
                min_support=draw(st.integers(0, 3)), users=draw(subset),
                neighbours=draw(some))  # no neighbour at all is refused
    return (u, i, r), opts


def assert_same(a: LooResult, b: LooResult):
    np.testing.assert_array_equal(a.index, b.index)
    np.testing.assert_array_equal(a.n_neighbours, b.n_neighbours)
    np.testing.assert_array_equal(a.fallback, b.fallback)
    np.testing.assert_allclose(a.prediction, b.prediction, rtol=0, atol=1e-9)
    assert a.n_fallback == b.n_fallback


# tiny random sets often hold a single rating or hold nothing out: legal, warned about
@pytest.mark.filterwarnings("ignore::evaluators.LooKnnWarning")
@pytest.mark.parametrize("similarity", SIMILARITIES)
@settings(max_examples=40)
@given(data=st.data())
def test_fast_equals_naive(similarity, data):
    ratings, opts = data.draw(loo_case(similarity))
    assert_same(loo_knn(ratings, method="fast", **opts), loo_knn(ratings, method="naive", **opts))


@pytest.mark.parametrize("similarity", SIMILARITIES)
def test_fast_equals_naive_continuous_ratings(similarity):
    # off-grid ratings: no exact ties, rounding residues in every running sum
    rng = np.random.default_rng(7)
    for _ in range(3):
        mask = rng.random((12, 9)) < 0.45
        u, i = np.nonzero(mask)
        r = rng.normal(3.0, 1.5, u.size)
        for k in (1, 3, 20):
            assert_same(loo_knn((u, i, r), similarity=similarity, k=k),
                        loo_knn((u, i, r), similarity=similarity, k=k, method="naive"))


@pytest.mark.filterwarnings("ignore::evaluators.LooKnnWarning")
@settings(max_examples=30)
@given(ratings=rating_data(), similarity=st.sampled_from(SIMILARITIES))
def test_sparse_input_with_stored_zeros_matches_tuple(ratings, similarity):
    u, i, r = ratings
    u, i = u - u.min(), i - i.min()
    m = sp.csr_matrix((r, (u, i)), shape=(u.max() + 2, i.max() + 1))
    assert m.nnz == r.size  # stored zeros are kept: they are ratings
    res = loo_knn(m, similarity=similarity, k=3)
    order = np.lexsort((i, u))  # sparse results come in row-major order
    ref = loo_knn((u[order], i[order], r[order]), similarity=similarity, k=3)
    assert res.n == r.size
    np.testing.assert_array_equal(res.user, ref.user)
    np.testing.assert_array_equal(res.item, ref.item)
    np.testing.assert_array_equal(res.prediction, ref.prediction)


def test_zero_ratings_are_ratings_in_sparse_input():
    dense = np.array([[0.0, 2.0, 3.0], [1.0, 2.0, 0.0], [4.0, 0.0, 1.0]])
    stored = sp.csr_matrix(np.ones_like(dense))
    stored.data = dense.ravel().copy()  # all nine entries stored, three of them 0
    implicit = sp.csr_matrix(dense)  # zeros not stored: not observed
    assert loo_knn(stored, k=2).n == 9
    assert loo_knn(implicit, k=2).n == 6


def test_hand_computed_prediction():
    # u=0 rated items 0,1 as (1, 3) and item 2 as 4; v=1 rated (2, 4, 5): over C = {0, 1} the
    # co-rated-mean Pearson similarity is 1, so the prediction of r_02 is
    # mean_0 + (r_12 - mean_1) = 2 + (5 - 11/3).
    users, items = np.array([0, 0, 0, 1, 1, 1]), np.array([0, 1, 2, 0, 1, 2])
    r = np.array([1.0, 3.0, 4.0, 2.0, 4.0, 5.0])
    res = loo_knn((users, items, r), similarity="pearson_corated", k=5)
    assert res.prediction[2] == pytest.approx(2 + (5 - 11 / 3), abs=1e-12)
    assert res.n_neighbours[2] == 1
    # cosine over C: sum x y / (||x_{I_u \ k}|| ||y_{I_v}||)
    res = loo_knn((users, items, r), similarity="cosine", k=5)
    assert res.prediction[2] == pytest.approx(2 + (5 - 11 / 3), abs=1e-12)  # a single neighbour


def test_loo_does_not_leak_the_held_out_rating():
    # If r_uk leaked into mean_u, the prediction would move with r_uk; exact LOO must not.
    rng = np.random.default_rng(3)
    u, i = np.nonzero(rng.random((15, 10)) < 0.6)
    r = rng.integers(1, 6, u.size).astype(float)
    base = loo_knn((u, i, r), similarity="pearson", k=4)
    for j in (0, 5, 17):
        r2 = r.copy()
        r2[j] = 1.0 if r[j] != 1.0 else 5.0
        moved = loo_knn((u, i, r2), similarity="pearson", k=4)
        assert moved.prediction[j] == pytest.approx(base.prediction[j], abs=1e-12)
        assert not np.allclose(moved.prediction, base.prediction)  # others do see it


def test_fallbacks_and_counts():
    # user 9 has a single rating: predicted by the mean of all remaining ratings
    users = np.array([0, 0, 1, 1, 9])
    items = np.array([0, 1, 0, 1, 3])
    r = np.array([1.0, 2.0, 3.0, 5.0, 4.0])
    res = loo_knn((users, items, r), k=3)
    assert res.fallback[4] == 2
    assert res.prediction[4] == pytest.approx(np.mean(r[:4]))
    assert res.n_fallback_global_mean == 1
    # no allowed neighbour: every other rating falls back to the user's remaining mean
    res = loo_knn((users, items, r), k=3, neighbours=np.array([9]))
    assert res.n_fallback_user_mean == 4 and res.n_fallback == 5
    assert res.prediction[0] == r[1] and res.prediction[3] == r[2]
    assert np.all(res.n_neighbours == 0)


def test_input_order_and_users_subset():
    rng = np.random.default_rng(5)
    u, i = np.nonzero(rng.random((20, 12)) < 0.5)
    r = rng.integers(1, 6, u.size).astype(float)
    full = loo_knn((u, i, r), k=5)
    perm = rng.permutation(u.size)
    shuffled = loo_knn((u[perm], i[perm], r[perm]), k=5)
    np.testing.assert_allclose(shuffled.prediction, full.prediction[perm], rtol=0, atol=1e-12)
    sub = loo_knn((u, i, r), k=5, users=np.array([3, 7]))
    held = np.flatnonzero(np.isin(u, [3, 7]))
    np.testing.assert_array_equal(sub.index, held)
    np.testing.assert_array_equal(sub.prediction, full.prediction[held])
    assert set(sub.user.tolist()) == {3, 7}


def test_clip():
    rng = np.random.default_rng(11)
    u, i = np.nonzero(rng.random((15, 10)) < 0.6)
    r = rng.integers(1, 6, u.size).astype(float)
    raw = loo_knn((u, i, r), k=3, similarity="cosine")
    clipped = loo_knn((u, i, r), k=3, similarity="cosine", clip=(2, 4))
    np.testing.assert_array_equal(clipped.prediction, np.clip(raw.prediction, 2, 4))
    assert clipped.mae == pytest.approx(np.mean(np.abs(clipped.prediction - r)))
    assert clipped.rmse == pytest.approx(np.sqrt(np.mean((clipped.prediction - r) ** 2)))


def test_result_is_frozen_and_read_only():
    res = loo_knn((np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]), np.array([1.0, 2, 3, 4])))
    with pytest.raises(AttributeError):
        res.mae = 0.0
    with pytest.raises(ValueError):
        res.prediction[0] = 0.0


def test_kfold_by_users():
    rng = np.random.default_rng(2)
    u, i = np.nonzero(rng.random((30, 15)) < 0.4)
    r = rng.integers(1, 6, u.size).astype(float)
    res = kfold_loo_knn((u, i, r), n_folds=4, rng=1, k=5)
    assert res.n == r.size and res.fold is not None
    # a user's ratings share one fold; the folds are near-equal in users
    for user in np.unique(u):
        assert np.unique(res.fold[u == user]).size == 1
    users_per_fold = np.bincount([res.fold[u == w][0] for w in np.unique(u)])
    assert users_per_fold.max() - users_per_fold.min() <= 1
    for f in range(4):
        fold_users = np.unique(u[res.fold == f])
        others = np.setdiff1d(np.unique(u), fold_users)
        one = loo_knn((u, i, r), k=5, users=fold_users, neighbours=others)
        np.testing.assert_array_equal(res.prediction[one.index], one.prediction)
    again = kfold_loo_knn((u, i, r), n_folds=4, rng=1, k=5)
    assert again.prediction.tobytes() == res.prediction.tobytes()
    np.testing.assert_array_equal(again.fold, res.fold)


def test_kernel_matches_its_python_version():
    from evaluators import _loo_knn as impl

    rng = np.random.default_rng(4)
    u, i = np.nonzero(rng.random((9, 7)) < 0.5)
    r = rng.integers(-2, 6, u.size).astype(float)
    data = impl._as_data((u, i, r))
    prep = impl._Prepared(data)
    held = np.ones(prep.n_users, dtype=bool)
    allowed = rng.random(prep.n_users) < 0.8
    for sim in SIMILARITIES:
        compiled = impl._fast(prep, held, allowed, sim, 2, 1)
        python = impl._fast(prep, held, allowed, sim, 2, 1, python=True)
        for a, b in zip(compiled, python, strict=True):
            np.testing.assert_array_equal(a, b)


def test_degenerate_inputs_warn_and_return_nan():
    one = (np.array([0]), np.array([0]), np.array([3.0]))
    with pytest.warns(LooKnnWarning, match="single rating"):
        res = loo_knn(one)
    assert np.isnan(res.mae) and np.isnan(res.prediction[0])
    two = (np.array([0, 1]), np.array([0, 0]), np.array([3.0, 4.0]))
    with pytest.warns(LooKnnWarning, match="no rating was held out"):
        res = loo_knn(two, users=np.array([], dtype=np.int64))
    assert res.n == 0 and np.isnan(res.rmse)


U, IT, R = np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]), np.array([1.0, 2.0, 3.0, 4.0])


@pytest.mark.parametrize("ratings, opts, exc, match", [
    pytest.param((np.array([0, 1, 0]), np.array([5, 5, 5]), np.array([1.0, 2, 3])), {},
                 ValueError, r"duplicate \(user, item\) pair \(0, 5\) at positions 0 and 2",
                 id="duplicate"),
    pytest.param((U, IT, np.array([1.0, np.nan, 2, 3])), {}, ValueError,
                 r"finite; got nan at index 1", id="nan"),
    pytest.param((U, IT, np.array([1.0, 2, np.inf, 3])), {}, ValueError,
                 r"finite; got inf at index 2", id="inf"),
    pytest.param((U, IT[:3], R), {}, ValueError, r"equal lengths; got 4, 3 and 4",
                 id="lengths"),
    pytest.param((U, IT, R), {"k": 0}, ValueError, r"`k` must be >= 1; got 0", id="k-zero"),
    pytest.param((U, IT, R), {"k": -2}, ValueError, r"`k` must be >= 1; got -2", id="k-neg"),
    pytest.param((U, IT, R), {"k": 2.5}, TypeError, r"`k` must be an integer", id="k-float"),
    pytest.param((U, IT, R), {"similarity": "jaccard"}, ValueError,
                 r"'pearson', 'cosine', 'adjusted_cosine', 'pearson_corated', "
                 r"'cosine_corated'; got 'jaccard'", id="similarity"),
    pytest.param((U, IT, R), {"method": "slow"}, ValueError, r"`method`", id="method"),
    pytest.param((U, IT, R), {"min_support": -1}, ValueError, r"`min_support` must be >= 0",
                 id="min-support"),
    pytest.param((U, IT, R), {"users": np.array([7])}, ValueError,
                 r"`users` must be ids of users with ratings; got 7", id="unknown-user"),
    pytest.param((U, IT, R), {"neighbours": np.array([0.5])}, TypeError, r"`neighbours`",
                 id="float-neighbours"),
    pytest.param((U, IT, R), {"clip": (5, 1)}, ValueError, r"`clip`", id="clip-order"),
    pytest.param((U.astype(float), IT, R), {}, TypeError, r"integer ids; got dtype float64",
                 id="float-ids"),
    pytest.param((U, IT), {}, ValueError, r"tuple of three arrays", id="two-arrays"),
    pytest.param(np.ones((2, 2)), {}, TypeError, r"scipy.sparse", id="dense-matrix"),
    pytest.param((U, IT, np.array(["a", "b", "c", "d"])), {}, TypeError,
                 r"real numbers", id="string-ratings"),
])
def test_bad_input(ratings, opts, exc, match):
    with pytest.raises(exc, match=match):
        loo_knn(ratings, **opts)


def test_kfold_bad_n_folds():
    with pytest.raises(ValueError, match=r"`n_folds` must be in \[2, 2\]"):
        kfold_loo_knn((U, IT, R), n_folds=3)
    with pytest.raises(TypeError, match=r"`n_folds` must be an integer"):
        kfold_loo_knn((U, IT, R), n_folds=2.0)


def test_inputs_not_mutated():
    u, i, r = U.copy(), IT.copy(), R.copy()
    loo_knn((u, i, r), similarity="adjusted_cosine")
    np.testing.assert_array_equal(r, R)
    np.testing.assert_array_equal(u, U)


@pytest.mark.parametrize("similarity", SIMILARITIES)
def test_fast_equals_naive_on_named_edge_cases(similarity):
    # each feature the issue names, present at once: a single-rating user (9), an item rated
    # once (item 8), stored zeros and negative ratings, exact ties (users 1, 2, 3 are copies),
    # and users/neighbours subsets
    users = np.array([0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 9, 4])
    items = np.array([0, 1, 2, 3, 0, 1, 2, 0, 1, 2, 0, 1, 2, 1, 2, 3, 2, 8])
    r = np.array([2.0, 0.0, -1.0, 3.0, 1.0, 0.0, 2.0, 1.0, 0.0, 2.0, 1.0, 0.0, 2.0,
                  -2.0, 0.0, 4.0, 5.0, 1.0])
    for k in (1, 2, 5):
        for users_, nbrs in ((None, None), (np.array([0, 4, 9]), np.array([1, 2, 3, 4]))):
            opts = dict(similarity=similarity, k=k, users=users_, neighbours=nbrs)
            fast = loo_knn((users, items, r), **opts)
            assert_same(fast, loo_knn((users, items, r), method="naive", **opts))
    assert fast.n_fallback_global_mean == 1  # user 9


def test_ratings_whose_sums_overflow_are_a_value_error():
    # today: mae = inf with overflow warnings
    users, items = np.array([0, 0, 1, 1, 2]), np.array([0, 1, 0, 1, 1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing overflows before the check
        with pytest.raises(ValueError, match=r"`ratings` must have magnitudes <= 3.54e\+74 "
                                             r"here .* got 1e\+200 at index 3"):
            loo_knn((users, items, np.array([1.0, 2.0, 3.0, 1e200, 2.0])))
        with pytest.raises(ValueError, match=r"got -1e\+160 at entry 0"):
            loo_knn(sp.csr_array(np.array([[-1e160, 1.0], [2.0, 3.0]])))
        big = loo_knn((users, items, np.array([1.0, 2.0, 3.0, 1e70, 2.0])), k=2)
    assert np.all(np.isfinite(big.prediction))


def test_partitions_and_progress_change_nothing():
    from evaluators.datasets import synthetic_ratings

    u, i, r = synthetic_ratings(120, 80, 2500, rng=3)
    one = loo_knn((u, i, r), k=7, n_partitions=1)
    for p in (2, 9, 500):
        other = loo_knn((u, i, r), k=7, n_partitions=p, progress=p == 9)
        assert other.prediction.tobytes() == one.prediction.tobytes()
        np.testing.assert_array_equal(other.n_neighbours, one.n_neighbours)
    with pytest.raises(ValueError, match=r"`n_partitions` must be an int >= 1; got 0"):
        loo_knn((u, i, r), n_partitions=0)
    with pytest.raises(TypeError, match=r"`executor` must be None or a running dask"):
        loo_knn((u, i, r), executor=2)
