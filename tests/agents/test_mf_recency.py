"""ImplicitMF and RecencyPopularity (issue 35): fast paths against their naive references."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from agents import ImplicitMF, Popularity, RecencyPopularity
from agents._mf import _solve_rows


def _profiles(seed, n_users, n_items, density):
    rng = np.random.default_rng(seed)
    m = (rng.random((n_users, n_items)) < density).astype(float)
    m[:, 0] = 1.0  # every user holds something
    return sp.csr_array(m), rng


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 12), st.integers(2, 15), st.integers(1, 5),
       st.floats(0.01, 3.0), st.floats(0.0, 40.0), st.floats(0.05, 0.9))
def test_the_gram_trick_solves_what_the_dense_confidences_say(seed, n_users, n_items, k, reg,
                                                              alpha, density):
    x, rng = _profiles(seed, n_users, n_items, density)
    y = rng.normal(0, 1, (n_items, k))
    rows = np.sort(rng.choice(n_users, max(1, n_users // 2), replace=False))
    fast = _solve_rows(x, y, reg, alpha, rows=rows)
    naive = _solve_rows(x, y, reg, alpha, rows=rows, method="naive")
    assert np.allclose(fast, naive, rtol=1e-8, atol=1e-10)


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 10), st.integers(3, 12))
def test_mf_fast_and_naive_fit_alike_and_rank_alike(seed, n_users, n_items):
    x, _ = _profiles(seed, n_users, n_items, 0.3)
    fast = ImplicitMF(3, n_iter=3, rng=seed).fit(x)
    naive = ImplicitMF(3, n_iter=3, rng=seed, method="naive").fit(x)
    assert np.allclose(fast.user_factors, naive.user_factors, rtol=1e-6, atol=1e-9)
    assert np.allclose(fast.item_factors, naive.item_factors, rtol=1e-6, atol=1e-9)
    users = np.arange(n_users)
    scores = fast.scores(users)
    assert np.allclose(scores, fast.user_factors @ fast.item_factors.T)
    top = fast.recommend(users, 1)
    held = x.toarray() > 0
    for u in users:  # the best item the user does not hold (or a held one if it holds all)
        free = np.flatnonzero(~held[u])
        if free.size:
            assert top[u, 0] == free[np.argmax(scores[u, free])]


def test_mf_leave_one_out_folds_the_user_in_without_the_item():
    x, _ = _profiles(3, 20, 15, 0.3)
    m = ImplicitMF(4, n_iter=4, rng=0).fit(x)
    u, r = 5, int(x[[5]].indices[1])
    reduced = x.toarray()[[u]]
    reduced[0, r] = 0.0
    xu = _solve_rows(sp.csr_array(reduced), m.item_factors, m.reg, m.alpha, method="naive")[0]
    scores = xu @ m.item_factors.T
    scores[reduced[0] > 0] = -np.inf
    expected = np.argsort(-scores, kind="stable")[:5]
    assert np.array_equal(m.recommend(np.array([u]), 5, removed=np.array([r]))[0], expected)
    assert r in m.recommend(np.array([u]), 14, removed=np.array([r]))[0]


def test_recency_popularity_weighs_each_holding_by_its_age():
    x, rng = _profiles(1, 30, 12, 0.3)
    times = x.copy()
    times.data = rng.integers(0, 100, times.nnz).astype(float)
    rec = RecencyPopularity(20.0).fit(x, times=times)
    t = times.toarray()
    held = x.toarray() > 0
    now = t[held].max()
    naive = np.array([sum(2.0 ** (-(now - t[u, i]) / 20.0) for u in range(30) if held[u, i])
                      for i in range(12)])
    assert np.allclose(rec.scores([0])[0], naive)
    # leave-one-out: the edge's weight is taken off its item, as a refit without it
    # (``t_now`` kept), for every held edge of a few users
    for u in range(6):
        for r in np.flatnonzero(held[u]).tolist():
            expected = naive.copy()
            expected[r] -= 2.0 ** (-(now - t[u, r]) / 20.0)
            expected[held[u] & (np.arange(12) != r)] = -np.inf
            order = np.argsort(-np.round(expected / expected.max(), 10), kind="stable")
            got = rec.recommend(np.array([u]), 12, removed=np.array([r]))[0]
            assert np.array_equal(got, order), (u, r)


def test_recency_popularity_without_times_is_popularity():
    x, _ = _profiles(2, 25, 10, 0.4)
    users = np.arange(25)
    assert np.array_equal(RecencyPopularity().fit(x).recommend(users, 4),
                          Popularity().fit(x).recommend(users, 4))


@pytest.mark.parametrize("make, match", [
    pytest.param(lambda: ImplicitMF(0), r"`n_factors` must be an int >= 1", id="n_factors"),
    pytest.param(lambda: ImplicitMF(reg=0.0), r"`reg` must be > 0", id="reg-zero"),
    pytest.param(lambda: ImplicitMF(alpha=-1.0), r"`alpha` must be a finite", id="alpha"),
    pytest.param(lambda: ImplicitMF(method="slow"), r"`method` must be one of", id="method"),
    pytest.param(lambda: RecencyPopularity(0.0), r"`halflife` must be a finite number > 0",
                 id="halflife"),
    pytest.param(lambda: RecencyPopularity().fit(sp.csr_array(np.eye(3)), times=np.eye(3)),
                 r"`times` must be a scipy.sparse matrix", id="times-dense"),
    pytest.param(lambda: RecencyPopularity().fit(sp.csr_array(np.eye(3)),
                                                 times=sp.csr_array(np.eye(4))),
                 r"`times` must have the shape of `profiles`", id="times-shape"),
])
def test_bad_options_are_named(make, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make()
