"""Exact LOO kNN (issue 33): the neighbour tie rule at the k-th slot, the folds' randomness,
and the summary numbers against independent computations.

"Neighbours: the candidates whose similarity rounded to 10 decimals is > 0, the k largest by
that rounded value, ties to the lower user id." The fast == naive tests of test_loo_knn.py
draw small random rating sets, where two candidates rarely tie *and* straddle the k-th slot
*and* differ in their deviation: a kernel that ranked a tied newcomer before the ones kept
(``<=`` for ``<`` in its insertion) changed 195 of 17,120 MovieLens predictions and passed
them. Here the ties are made on purpose: twin users rate the co-rated items alike and the
held-out item differently (equal similarity, different deviations), and a third user with a
larger similarity arrives after them and pushes one twin out.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from evaluators import LooKnnWarning, kfold_loo_knn, loo_knn

SIMILARITIES = ("pearson", "cosine", "adjusted_cosine", "pearson_corated", "cosine_corated")


def test_a_tie_at_the_kth_slot_keeps_the_lower_user_id():
    """User 0 holds out item 3. Users 1 and 2 rate items 0-2 alike (1, 3, 4): the same
    co-rated Pearson similarity to user 0's (1, 2, 4); user 3 rates them as user 0 does
    (similarity 1) and comes last. With k = 2 the neighbours are 3 and 1 (the tie goes to the
    lower id), and the prediction is mean_0 + (s3 d3 + s1 d1) / (s3 + s1), computed here with
    numpy's correlation, d_v = r_v3 - mean of v's ratings."""
    users = np.repeat([0, 1, 2, 3], 4)
    items = np.tile([0, 1, 2, 3], 4)
    r = np.array([1, 2, 4, 3,
                  1, 3, 4, 5,
                  1, 3, 4, 1,
                  1, 2, 4, 3], dtype=float)
    res = loo_knn((users, items, r), similarity="pearson_corated", k=2)
    s1 = np.corrcoef([1, 2, 4], [1, 3, 4])[0, 1]
    s3 = 1.0
    d1, d3 = 5 - np.mean([1, 3, 4, 5]), 3 - np.mean([1, 2, 4, 3])
    expected = np.mean([1, 2, 4]) + (s3 * d3 + s1 * d1) / (s3 + s1)
    assert res.n_neighbours[3] == 2
    assert res.prediction[3] == pytest.approx(expected, abs=1e-12)
    # user 2's deviation is -1.25, user 1's +1.75: keeping user 2 would move it by 1.5 s1 / 2
    d2 = 1 - np.mean([1, 3, 4, 1])
    wrong = np.mean([1, 2, 4]) + (s3 * d3 + s1 * d2) / (s3 + s1)
    assert abs(expected - wrong) > 0.5
    # the naive reference agrees, and with k = 1 only user 3 is kept
    naive = loo_knn((users, items, r), similarity="pearson_corated", k=2, method="naive")
    assert naive.prediction[3] == pytest.approx(expected, abs=1e-12)
    one = loo_knn((users, items, r), similarity="pearson_corated", k=1)
    assert one.prediction[3] == pytest.approx(np.mean([1, 2, 4]) + d3, abs=1e-12)


@st.composite
def tied_ratings(draw):
    """Rating sets with twins: copies of a user that differ in one rating only (and a copy
    that rates one item more), on a grid of ratings, ids shuffled; many exact ties between
    candidates with different deviations, before and after larger ones."""
    n_users = draw(st.integers(2, 5))
    n_items = draw(st.integers(2, 5))
    grid = draw(st.sampled_from([(1, 5), (-2, 2), (0, 3)]))
    dense = np.full((n_users, n_items), np.nan)
    for u in range(n_users):
        for i in range(n_items):
            if draw(st.booleans()) or i == 0:
                dense[u, i] = draw(st.integers(*grid))
    rows = [dense[u] for u in range(n_users)]
    for _ in range(draw(st.integers(1, 5))):
        twin = rows[draw(st.integers(0, len(rows) - 1))].copy()
        rated = np.flatnonzero(~np.isnan(twin))
        j = draw(st.sampled_from(rated.tolist()))
        if draw(st.booleans()):
            twin[j] = draw(st.integers(*grid))  # another rating of one item
        else:
            twin[draw(st.integers(0, n_items - 1))] = draw(st.integers(*grid))
        rows.insert(draw(st.integers(0, len(rows))), twin)
    D = np.array(rows)
    u, i = np.nonzero(~np.isnan(D))
    return u, i, D[u, i].astype(np.float64)


@pytest.mark.filterwarnings("ignore::evaluators.LooKnnWarning")
@pytest.mark.parametrize("similarity", SIMILARITIES)
@settings(max_examples=40)
@given(ratings=tied_ratings(), k=st.integers(1, 3), min_support=st.integers(0, 2))
def test_fast_equals_naive_where_twins_tie_at_the_kth_slot(similarity, ratings, k, min_support):
    fast = loo_knn(ratings, similarity=similarity, k=k, min_support=min_support)
    naive = loo_knn(ratings, similarity=similarity, k=k, min_support=min_support,
                    method="naive")
    np.testing.assert_array_equal(fast.n_neighbours, naive.n_neighbours)
    np.testing.assert_array_equal(fast.fallback, naive.fallback)
    np.testing.assert_allclose(fast.prediction, naive.prediction, rtol=0, atol=1e-9)


# -- the folds follow rng ----------------------------------------------------------------------
def _fold_data():
    from evaluators.datasets import synthetic_ratings

    return synthetic_ratings(30, 20, 300, rng=5)


def test_the_folds_are_a_random_partition_drawn_from_rng():
    """Same seed, same folds (and bytes); two seeds, different folds and predictions; over
    seeds, each user's fold is uniform over the folds (chi-square over 60 seeds for the
    first and the last user) and neighbouring users do not share folds more than chance."""
    u, i, r = _fold_data()
    users = np.unique(u)
    first = {}
    for seed in range(60):
        res = kfold_loo_knn((u, i, r), n_folds=3, rng=seed, k=3, similarity="cosine")
        fold_of = {int(w): int(res.fold[np.flatnonzero(u == w)[0]]) for w in users}
        first[seed] = fold_of
    again = kfold_loo_knn((u, i, r), n_folds=3, rng=7, k=3, similarity="cosine")
    seven = kfold_loo_knn((u, i, r), n_folds=3, rng=7, k=3, similarity="cosine")
    eight = kfold_loo_knn((u, i, r), n_folds=3, rng=8, k=3, similarity="cosine")
    assert again.prediction.tobytes() == seven.prediction.tobytes()
    np.testing.assert_array_equal(again.fold, seven.fold)
    assert not np.array_equal(seven.fold, eight.fold)
    assert seven.rmse != eight.rmse
    for w in (users[0], users[-1]):
        counts = np.bincount([first[s][int(w)] for s in first], minlength=3)
        assert stats.chisquare(counts).pvalue > 1e-4, (w, counts)
    # contiguous folds would put users 0 and 1 together in about 9 of 10 seeds; at random
    # 9 of 29 (the other users of user 0's fold of 10 among 29 others)
    together = sum(first[s][int(users[0])] == first[s][int(users[1])] for s in first)
    assert stats.binomtest(together, 60, 9 / 29).pvalue > 1e-4, together


def test_kfold_summary_numbers_against_the_predictions():
    """mae, rmse and the fallback counts of a k-fold result from its own per-rating arrays
    (and each fold's ratings predicted from neighbours outside the fold)."""
    u, i, r = _fold_data()
    res = kfold_loo_knn((u, i, r), n_folds=4, rng=1, k=3)
    err = res.prediction - r
    assert res.mae == pytest.approx(float(np.mean(np.abs(err))), rel=1e-12)
    assert res.rmse == pytest.approx(math.sqrt(float(np.mean(err ** 2))), rel=1e-12)
    assert res.n_fallback_user_mean == int(np.sum(res.fallback == 1))
    assert res.n_fallback_global_mean == int(np.sum(res.fallback == 2))
    assert res.n_fallback == res.n_fallback_user_mean + res.n_fallback_global_mean
    assert np.bincount(res.fold).size == 4


def test_loo_summary_numbers_against_a_plain_loop():
    """loo_knn's mae and rmse by a loop over the per-rating arrays, fallback counts by kind,
    and the held-out ratings are the input's."""
    rng = np.random.default_rng(9)
    u, i = np.nonzero(rng.random((12, 8)) < 0.5)
    r = rng.integers(1, 6, u.size).astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LooKnnWarning)
        res = loo_knn((u, i, r), k=2, users=np.unique(u)[::2])
    abs_sum = sq_sum = 0.0
    for p, y in zip(res.prediction, res.rating, strict=True):
        abs_sum += abs(p - y)
        sq_sum += (p - y) ** 2
    assert res.mae == pytest.approx(abs_sum / res.n, rel=1e-12)
    assert res.rmse == pytest.approx(math.sqrt(sq_sum / res.n), rel=1e-12)
    np.testing.assert_array_equal(res.rating, r[res.index])
    np.testing.assert_array_equal(res.user, u[res.index])
    np.testing.assert_array_equal(res.item, i[res.index])


# -- refusals word for word and the users/neighbours masks ---------------------------------------
U3 = (np.array([0, 0, 1, 1, 4, 4]), np.array([0, 1, 0, 1, 0, 1]),
      np.array([1.0, 2.0, 3.0, 4.0, 2.0, 5.0]))


@pytest.mark.parametrize("kwargs, exc, message", [
    pytest.param({"users": np.array([[0, 1]])}, ValueError,
                 "`users` must be a 1-D array of user ids; got shape (1, 2).", id="users-2d"),
    pytest.param({"users": np.array([0.0])}, TypeError,
                 "`users` must hold integer user ids; got dtype float64.", id="users-float"),
    pytest.param({"neighbours": np.array([0, 2, 3])}, ValueError,
                 "`neighbours` must be ids of users with ratings; got 2, which has none.",
                 id="neighbours-missing"),
    pytest.param({"users": np.array([9])}, ValueError,
                 "`users` must be ids of users with ratings; got 9, which has none.",
                 id="users-beyond"),
    pytest.param({"neighbours": np.array([], dtype=np.int64)}, ValueError,
                 "`neighbours` must be ids of at least one user with ratings (without a "
                 "neighbour every prediction is the user's mean); got none.",
                 id="neighbours-empty"),
])
def test_masks_refusals_word_for_word(kwargs, exc, message):
    with pytest.raises(exc) as e:
        loo_knn(U3, **kwargs)
    assert str(e.value) == message


def test_sparse_rows_as_users():
    """Sparse input: users are row indices in [0, n_rows); a row without ratings holds
    nothing out and is no neighbour."""
    import scipy.sparse as sp

    m = sp.csr_array(np.array([[1.0, 2.0, 0.0], [0.0, 0.0, 0.0], [3.0, 1.0, 2.0]]))
    m.eliminate_zeros()
    for bad, shown in ((-1, -1), (3, 3)):
        with pytest.raises(ValueError) as e:
            loo_knn(m, users=np.array([0, bad]))
        assert str(e.value) == f"`users` must be row indices in [0, 3); got {shown}."
    res = loo_knn(m, users=np.array([1, 2]), k=2)
    np.testing.assert_array_equal(res.user, [2, 2, 2])
    with pytest.raises(ValueError) as e:
        loo_knn(m, neighbours=np.array([1]))
    assert str(e.value).endswith("; got only rows without ratings.")
    zero = loo_knn(m, users=np.array([0]), k=2)  # row 0 is a legal index
    np.testing.assert_array_equal(zero.user, [0, 0])


def test_user_ids_beyond_two_to_the_53_stay_distinct():
    """Ids are compared as integers: 2^60 and 2^60 + 1 are two users (as doubles they would
    be one)."""
    big = 2 ** 60
    users = np.array([big, big, big + 1, big + 1, 5, 5], dtype=np.int64)
    items = np.array([0, 1, 0, 1, 0, 1])
    r = np.array([1.0, 2.0, 3.0, 5.0, 2.0, 4.0])
    res = loo_knn((users, items, r), users=np.array([big + 1], dtype=np.int64), k=2)
    np.testing.assert_array_equal(res.index, [2, 3])
    np.testing.assert_array_equal(res.user, [big + 1, big + 1])
    empty = np.array([], dtype=np.float64)  # no ids at all: any dtype, nothing held out
    with pytest.warns(LooKnnWarning, match="no rating was held out"):
        assert loo_knn((users, items, r), users=empty).n == 0


def test_the_executor_runs_the_fast_method_only(monkeypatch):
    from evaluators import _loo_knn

    monkeypatch.setattr(_loo_knn, "check_executor", lambda executor: executor)
    with pytest.raises(ValueError) as e:
        loo_knn(U3, executor=object(), method="naive")
    assert str(e.value) == ("`executor` runs method='fast' only; got method='naive' (the "
                            "naive reference runs in this process).")


def test_kfold_passes_every_option_and_reports_every_field():
    """clip, similarity, k and min_support reach each fold; the neighbour counts, fallback
    kinds and their dtypes are those of the folds' own loo_knn; 2 folds and one fold per
    user are legal bounds, refused outside with the message word for word."""
    u, i, r = _fold_data()
    opts = dict(similarity="cosine", k=3, min_support=2, clip=(2.0, 4.0))
    res = kfold_loo_knn((u, i, r), n_folds=3, rng=4, **opts)
    assert res.similarity == "cosine" and res.k == 3
    assert res.n_neighbours.dtype == np.int64 and res.fallback.dtype == np.int8
    assert res.prediction.min() >= 2.0 and res.prediction.max() <= 4.0
    for f in range(3):
        fold_users = np.unique(u[res.fold == f])
        one = loo_knn((u, i, r), users=fold_users,
                      neighbours=np.setdiff1d(np.unique(u), fold_users), **opts)
        np.testing.assert_array_equal(res.prediction[one.index], one.prediction)
        np.testing.assert_array_equal(res.n_neighbours[one.index], one.n_neighbours)
        np.testing.assert_array_equal(res.fallback[one.index], one.fallback)
    n_users = np.unique(u).size
    assert kfold_loo_knn((u, i, r), n_folds=2, rng=0, k=2).n == r.size
    assert np.unique(kfold_loo_knn((u, i, r), n_folds=n_users, rng=0, k=2).fold).size == n_users
    for bad in (1, n_users + 1):
        with pytest.raises(ValueError) as e:
            kfold_loo_knn((u, i, r), n_folds=bad)
        assert str(e.value) == (f"`n_folds` must be in [2, {n_users}] (the number of users "
                                f"with ratings); got {bad}.")
    with pytest.raises(TypeError) as e:
        kfold_loo_knn((u, i, r), n_folds=2.0)
    assert str(e.value) == "`n_folds` must be an integer; got float 2.0."


# -- options reach the kernel's schedule; defaults; warnings; the magnitude bound ---------------
def test_defaults_are_the_documented_ones():
    u, i, r = _fold_data()
    assert loo_knn((u, i, r)).k == 20
    res = kfold_loo_knn((u, i, r), rng=0)
    assert res.k == 20 and res.similarity == "pearson" and np.unique(res.fold).size == 10
    cos = loo_knn((u, i, r), similarity="cosine", k=4)
    assert (cos.similarity, cos.k) == ("cosine", 4)


def test_the_fast_method_runs_the_kernel_on_its_partitions(monkeypatch, capsys):
    """``n_partitions``, ``progress`` and ``executor`` reach the partitioned run of the
    kernel (``method="fast"``; the naive reference never runs then); k-fold runs show no bar."""
    from evaluators import _loo_knn

    calls = []
    real = _loo_knn.run_partitions

    def spy(fn, items, **kw):
        calls.append((len(items), kw["executor"], kw["progress"]))
        return real(fn, items, **dict(kw, executor=None))

    def no_naive(*args, **kw):
        raise AssertionError("the naive reference ran for method='fast'")

    monkeypatch.setattr(_loo_knn, "run_partitions", spy)
    monkeypatch.setattr(_loo_knn, "loo_knn_naive", no_naive)
    u, i, r = _fold_data()
    base = loo_knn((u, i, r), k=3)
    assert calls[-1][2] is False and capsys.readouterr().err == ""  # no bar by default
    three = loo_knn((u, i, r), k=3, n_partitions=3, progress=True)
    assert calls[-1] == (3, None, True)
    assert "\rloo_knn: " in capsys.readouterr().err  # the bar, with its label
    assert three.prediction.tobytes() == base.prediction.tobytes()
    stand_in = object()
    monkeypatch.setattr(_loo_knn, "check_executor", lambda e: e)
    monkeypatch.setattr(_loo_knn, "executor_threads", lambda e: 2 if e is stand_in else 0)
    there = loo_knn((u, i, r), k=3, executor=stand_in)
    assert calls[-1] == (8, stand_in, False)  # 4 partitions per worker thread
    assert there.prediction.tobytes() == base.prediction.tobytes()
    capsys.readouterr()
    kfold_loo_knn((u, i, r), n_folds=3, rng=1, k=3)
    assert all(progress is False for _, _, progress in calls[-3:])
    assert capsys.readouterr().err == ""


def test_the_degenerate_warnings_word_for_word_at_the_callers_line():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loo_knn((np.array([0]), np.array([0]), np.array([3.0])))
        loo_knn(U3, users=np.array([], dtype=np.int64))
    assert [str(w.message) for w in caught] == [
        "loo_knn: the data hold a single rating, which cannot be predicted from the rest; mae "
        "and rmse are nan.",
        "loo_knn: no rating was held out; mae and rmse are nan."]
    # under mutmut the caller is its trampoline (docs/testing.md)
    assert all(w.category is LooKnnWarning for w in caught)
    assert all(w.filename == __file__ or "mutmut" in w.filename for w in caught)


def test_option_refusals_word_for_word():
    cases = [({"k": 2.5}, TypeError, "`k` must be an integer; got float 2.5."),
             ({"min_support": "1"}, TypeError, "`min_support` must be an integer; got str '1'."),
             ({"method": "slow"}, ValueError,
              "`method` must be one of 'fast', 'naive'; got 'slow'."),
             ({"clip": "ab"}, TypeError,
              "`clip` must be None or a (low, high) pair of numbers; got 'ab'."),
             ({"clip": (1.0, np.inf)}, ValueError,
              "`clip` must be finite with low <= high; got (1.0, inf).")]
    for kwargs, exc, message in cases:
        with pytest.raises(exc) as e:
            loo_knn(U3, **kwargs)
        assert str(e.value) == message
    point = loo_knn(U3, clip=(3.0, 3.0))  # low == high: legal, every prediction is 3
    assert np.all(point.prediction == 3.0)


def test_the_magnitude_bound_is_inclusive():
    """One rating per user (m = 1): magnitudes up to sqrt(1e150) are accepted, the next
    double above is refused."""
    import math

    limit = math.sqrt(1e150)
    users, items = np.arange(3), np.zeros(3, dtype=np.int64)
    ok = loo_knn((users, items, np.array([limit, 1.0, 2.0])))
    assert ok.n == 3
    with pytest.raises(ValueError, match="must have magnitudes <= 1e\\+75"):
        loo_knn((users, items, np.array([np.nextafter(limit, np.inf), 1.0, 2.0])))


def test_results_are_read_only():
    res = kfold_loo_knn(_fold_data(), n_folds=3, rng=0, k=2)
    for a in (res.prediction, res.n_neighbours, res.fallback, res.fold, res.user, res.item,
              res.rating, res.index):
        assert not a.flags.writeable


# -- the ratings' refusals word for word; sparse shapes and dtypes ----------------------------
@pytest.mark.parametrize("ratings, exc, message", [
    pytest.param((np.array([0]), np.array([0])), ValueError,
                 "`ratings` must be a (users, items, ratings) tuple of three arrays; got a "
                 "tuple of length 2.", id="two-arrays"),
    pytest.param([np.array([0])] * 4, ValueError,
                 "`ratings` must be a (users, items, ratings) tuple of three arrays; got a "
                 "list of length 4.", id="four-arrays"),
    pytest.param((np.array([[0]]), np.array([0]), np.array([1.0])), ValueError,
                 "`ratings`: the users array must be 1-D; got shape (1, 1).", id="users-2d"),
    pytest.param((np.array([0]), np.array([[0]]), np.array([1.0])), ValueError,
                 "`ratings`: the items array must be 1-D; got shape (1, 1).", id="items-2d"),
    pytest.param((np.array([0]), np.array([0]), np.array([[1.0]])), ValueError,
                 "`ratings`: the ratings array must be 1-D; got shape (1, 1).",
                 id="ratings-2d"),
    pytest.param((np.array([0.0]), np.array([0]), np.array([1.0])), TypeError,
                 "`ratings`: the users array must hold integer ids; got dtype float64.",
                 id="users-float"),
    pytest.param((np.array([0]), np.array([0.5]), np.array([1.0])), TypeError,
                 "`ratings`: the items array must hold integer ids; got dtype float64.",
                 id="items-float"),
    pytest.param((np.array([0, 3, -2]), np.array([0, 1, 2]), np.array([1.0, 2, 3])), ValueError,
                 "`ratings`: the users array must hold ids >= 0; got -2 at index 2.",
                 id="users-negative"),
    pytest.param((np.array([0, 1, 2]), np.array([0, -1, 2]), np.array([1.0, 2, 3])), ValueError,
                 "`ratings`: the items array must hold ids >= 0; got -1 at index 1.",
                 id="items-negative"),
    pytest.param({"u": 1}, TypeError,
                 "`ratings` must be a (users, items, ratings) tuple of arrays or a scipy.sparse "
                 "matrix; got dict.", id="dict"),
])
def test_ratings_refusals_word_for_word(ratings, exc, message):
    with pytest.raises(exc) as e:
        loo_knn(ratings)
    assert str(e.value) == message


def test_sparse_input_shapes_and_dtypes():
    """A 1-d sparse array is refused; rows of a tall matrix are users (valid row indices up
    to its number of rows, not of columns); ids come back as int64 whatever the matrix's
    index dtype."""
    import scipy.sparse as sp

    with pytest.raises(ValueError) as e:
        loo_knn(sp.coo_array(np.array([1.0, 2.0])))
    assert str(e.value) == "`ratings` must be a 2-D sparse matrix; got ndim=1."
    D = np.array([[1.0, 2.0], [3.0, 0.0], [0.0, 4.0], [5.0, 1.0]])  # 4 users x 2 items
    m = sp.csr_array(D)
    m.eliminate_zeros()
    m.indices = m.indices.astype(np.int32)
    m.indptr = m.indptr.astype(np.int32)
    res = loo_knn(m, users=np.array([3]), k=2)
    np.testing.assert_array_equal(res.user, [3, 3])
    np.testing.assert_array_equal(res.item, [0, 1])
    assert res.user.dtype == np.int64 and res.item.dtype == np.int64
    full = loo_knn(m, k=2)
    assert full.n_neighbours.dtype == np.int64 and full.fallback.dtype == np.int8


def test_a_partition_on_threads_gives_the_serial_bits():
    """A partition of users run on several threads (chunks of users, outputs at their own
    positions) and by its Python kernel gives the serial compiled run's numbers, bit for
    bit; so does the default of this process's threads (``None``)."""
    from evaluators import _loo_knn as impl

    u, i, r = _fold_data()
    prep = impl._Prepared(impl._as_data((u, i, r)))
    allowed = np.ones(prep.n_users, dtype=bool)
    held = np.arange(prep.n_users)
    for sim in ("pearson", "adjusted_cosine"):
        args = impl._kernel_args(prep, allowed, sim, 3, 1)
        serial = impl._loo_partition(args, (held, 1, False))
        for threads, python in ((3, False), (None, False), (2, True)):
            other = impl._loo_partition(args, (held, threads, python))
            for a, b in zip(serial, other, strict=True):
                assert a.tobytes() == b.tobytes(), (sim, threads, python)
        one = impl._loo_partition(args, (held[:1], 4, False))  # one user: no threads needed
        assert one[0].tobytes() == serial[0][:one[0].size].tobytes()


@pytest.mark.parametrize("users, items, named", [
    # the repetition that comes first in the input is named, with its first occurrence
    pytest.param([1, 1, 0, 0], [5, 5, 3, 3], "(1, 5) at positions 0 and 1", id="second-block"),
    pytest.param([1, 0, 1, 1], [5, 3, 5, 5], "(1, 5) at positions 0 and 2", id="triple"),
    pytest.param([0, 0, 1, 1], [3, 3, 5, 5], "(0, 3) at positions 0 and 1", id="first-block"),
])
def test_a_duplicate_pair_is_named_by_its_first_repetition(users, items, named):
    r = np.arange(1.0, len(users) + 1)
    with pytest.raises(ValueError) as e:
        loo_knn((np.array(users), np.array(items), r))
    assert str(e.value) == (f"`ratings` has a duplicate (user, item) pair {named}; each pair "
                            "may be rated once.")


def test_empty_and_non_finite_ratings_word_for_word():
    import scipy.sparse as sp

    with pytest.raises(ValueError) as e:
        loo_knn((np.array([], dtype=np.int64), np.array([], dtype=np.int64), np.array([])))
    assert str(e.value) == "`ratings` must hold at least one observation; got none."
    m = sp.csr_array((np.array([1.0, np.nan]), (np.array([0, 1]), np.array([0, 1]))),
                     shape=(2, 2))
    with pytest.raises(ValueError) as e:
        loo_knn(m)
    assert str(e.value) == "`ratings` must be finite; got nan at entry 1."
    with pytest.raises(ValueError) as e:
        loo_knn((np.array([0, 1]), np.array([0, 1]), np.array([1.0, np.inf])))
    assert str(e.value) == "`ratings` must be finite; got inf at index 1."


# -- the zero-denominator rule at rounding residues ---------------------------------------------
@st.composite
def constant_raters(draw):
    """Continuous ratings where some users rate every co-rated item with one non-dyadic
    value (0.1, 0.7, 1/3, ...): exactly zero variances that the running sums leave as
    rounding residues, the case the rule ``D <= 1e-12 M`` exists for."""
    n_users = draw(st.integers(3, 7))
    n_items = draw(st.integers(3, 6))
    seed = draw(st.integers(0, 2**32 - 1))
    g = np.random.default_rng(seed)
    D = np.where(g.random((n_users, n_items)) < 0.75, g.normal(3.0, 1.2, (n_users, n_items)),
                 np.nan)
    D[:, 0] = g.normal(3.0, 1.2, n_users)  # every user rates item 0
    for u in draw(st.lists(st.integers(0, n_users - 1), min_size=1, max_size=3)):
        c = draw(st.sampled_from([0.1, 0.7, 1 / 3, 2.2, -0.3]))
        D[u, ~np.isnan(D[u])] = c
        if draw(st.booleans()):  # and one different rating, at the item held out
            D[u, 0] = c + draw(st.sampled_from([0.1, 1.0]))
    u, i = np.nonzero(~np.isnan(D))
    return u, i, D[u, i]


@pytest.mark.filterwarnings("ignore::evaluators.LooKnnWarning")
@pytest.mark.parametrize("similarity", SIMILARITIES)
@settings(max_examples=40)
@given(ratings=constant_raters(), k=st.integers(1, 4))
def test_fast_equals_naive_where_variances_vanish(similarity, ratings, k):
    fast = loo_knn(ratings, similarity=similarity, k=k)
    naive = loo_knn(ratings, similarity=similarity, k=k, method="naive")
    np.testing.assert_array_equal(fast.n_neighbours, naive.n_neighbours)
    np.testing.assert_array_equal(fast.fallback, naive.fallback)
    np.testing.assert_allclose(fast.prediction, naive.prediction, rtol=0, atol=1e-9)


def test_similarities_are_ranked_rounded_to_ten_decimals():
    """Cosine neighbours of user 0's rating of item 2, built to sit at the rounding: user 1's
    similarity is 3e-11 (rounds to 0: not a neighbour), user 2's is 7e-11 (rounds to 1e-10:
    a neighbour), user 3's is ordinary. The prediction and the neighbour count follow the
    definition computed here with numpy (similarities rounded by np.round(s, 10))."""
    x = np.array([1.0, 1.0])  # user 0's ratings of items 0 and 1; it rates item 2 as 2

    def user(sim, b):
        """Ratings (1, -1 + d, b) whose cosine with x over items 0-1 is about ``sim``."""
        d = sim * np.sqrt(2.0 * (1.0 + 1.0 + b * b))
        return [1.0, -1.0 + d, b]

    rows = [[1.0, 1.0, 2.0], user(3e-11, 3.0), user(7e-11, 1.0), [2.0, 1.0, 4.0]]
    D = np.array(rows)
    u, i = np.nonzero(np.ones_like(D))
    r = D[u, i]
    res = loo_knn((u, i, r), similarity="cosine", k=5)
    j = 2  # user 0, item 2
    sims, devs = [], []
    for v in (1, 2, 3):
        y = D[v]
        sims.append(float(x @ y[:2] / np.sqrt((x @ x) * (y @ y))))
        devs.append(y[2] - y.mean())
    keys = np.round(sims, 10)
    assert keys.tolist()[:2] == [0.0, 1e-10] and keys[2] > 0
    kept = [s for s, key in zip(sims, keys, strict=True) if key > 0]
    kept_devs = [d for d, key in zip(devs, keys, strict=True) if key > 0]
    expected = x.mean() + np.dot(kept, kept_devs) / np.sum(kept)
    assert res.n_neighbours[j] == 2
    assert res.prediction[j] == pytest.approx(expected, abs=1e-12)
    naive = loo_knn((u, i, r), similarity="cosine", k=5, method="naive")
    np.testing.assert_array_equal(res.n_neighbours, naive.n_neighbours)
    np.testing.assert_allclose(res.prediction, naive.prediction, rtol=0, atol=1e-12)


def test_nearly_equal_ratings_far_from_their_mean_keep_the_tie_rule():
    """A bug the vanishing-variance strategy found (issue 33): user 2 rates items 0 and 2 as
    2.2339... and 2.2262..., so its co-rated Pearson factor is a difference of sums 3e5 times
    larger than itself; from running sums its similarity came out 0.9999999999182, which
    rounds below user 3's 1.0 and took user 2's place at k = 1 (prediction 2.716 instead of
    the definition's 3.122). On Jester's 38,217 ratings the fast method differed from the
    definition in 120 predictions at k = 5 (by up to 7.2 points) and 24 at k = 20."""
    r = np.array([3.4261166400566583, 2.4450407050100473, 3.517408936029253,
                  3.0336915276534664, 3.0932283622603767, 3.656485895764684,
                  1.8261740644810043, 2.467491929462591, 2.2339439128673333,
                  1.7306172268551197, 2.2262197188338138, 2.570742789134527, 0.2, 0.1, 0.1,
                  0.1])
    u = np.array([0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3])
    i = np.array([0, 1, 2, 3, 4, 0, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3])
    fast = loo_knn((u, i, r), similarity="pearson_corated", k=1)
    # the definition: over C = {0, 2} users 2 and 3 both correlate 1 with user 1; the tie
    # goes to user 2, whose deviation on item 3 is 2.5707... - its mean
    expected = np.mean(r[[5, 6]]) + (r[11] - np.mean(r[8:12]))
    assert fast.prediction[7] == pytest.approx(expected, abs=1e-12)
    naive = loo_knn((u, i, r), similarity="pearson_corated", k=1, method="naive")
    np.testing.assert_allclose(fast.prediction, naive.prediction, rtol=0, atol=1e-12)
