"""The Pearson factors' vanishing-variance guard of the fast LOO kernel (issue 33).

``loo_users`` computes a Pearson candidate's factors ``D_u``, ``D_v`` from running sums; a
factor that is a small difference of large sums loses digits there, so when ``D`` is at or
below a thousandth of its magnitude ``M`` (and above the zero rule's ``1e-12 M``) the kernel
computes the factors again over the co-rated set ``C`` from centred ratings
(``centred_sums``). The fast == naive tests elsewhere meet either exact zero variances
(dropped before the guard) or well-conditioned factors, where running sums are accurate to
~1e-16: neither sees whether the recomputation happens, nor whether it is right.

Here some users rate every item nearly alike (user u ``3 + u + 1e-4 z``: ``D / M`` from
2e-12 to 6e-4, inside the guard, where running sums lose 3 to 12 of their 16 digits): their
candidates reach the guard through ``D_u`` alone, through ``D_v`` alone, or both, and the
predictions must still be the definition's (the naive reference) to 1e-10. Without the
recomputation they differ by up to 4e-6 to 7e-6 (per similarity and k). ``centred_sums``
itself is compared with numpy's sums over ``C`` on profiles that interleave, start and end
apart, for every user pair.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from evaluators import LooKnnWarning, loo_knn

FLAT = (0, 3, 6)  # users who rate every item nearly alike (the last user among them)


def near_constant(seed, n_users=7, n_items=10, delta=1e-4):
    """(users, items, ratings): users of ``FLAT`` rate ``3 + u + delta z``, the others
    Normal(3, 1); each cell rated with probability 0.7, item 0 by everyone."""
    g = np.random.default_rng(seed)
    D = g.normal(3.0, 1.0, (n_users, n_items))
    for u in FLAT:
        D[u] = 3.0 + u + delta * g.normal(size=n_items)
    M = g.random((n_users, n_items)) < 0.7
    M[:, 0] = True
    u, i = np.nonzero(M)
    return u, i, D[u, i]


SEEDS = (0, 1, 2, 3)


@pytest.fixture(scope="module")
def cases():
    return {seed: near_constant(seed) for seed in SEEDS}


def factors(data, similarity):
    """(D_u / M_u, D_v / M_v) of every Pearson candidate (held-out rating (u, k), rater v of
    k, C = co-rated items without k), from the definition: centred sums over C and the
    magnitudes the kernel compares them with (``_loo_knn_naive._factors``)."""
    users, items, r = data
    prof = {u: dict(zip(items[users == u].tolist(), r[users == u].tolist(), strict=True))
            for u in np.unique(users).tolist()}
    out = []
    for u, pu in prof.items():
        for k in pu:
            rest = {i: x for i, x in pu.items() if i != k}
            if not rest:
                continue
            for v, pv in prof.items():
                if v == u or k not in pv:
                    continue
                C = sorted(set(rest) & set(pv))
                if not C:
                    continue
                x = np.array([rest[i] for i in C])
                y = np.array([pv[i] for i in C])
                if similarity == "pearson":
                    mx, my = np.mean(list(rest.values())), np.mean(list(pv.values()))
                    mu, mv = np.sum(x * x) + x.size * mx * mx, np.sum(y * y) + y.size * my * my
                else:
                    mx, my = x.mean(), y.mean()
                    mu, mv = np.sum(x * x), np.sum(y * y)
                out.append((np.sum((x - mx) ** 2) / mu, np.sum((y - my) ** 2) / mv))
    return np.array(out)


@pytest.mark.parametrize("similarity", ["pearson", "pearson_corated"])
def test_the_data_reach_the_guard_through_either_factor(cases, similarity):
    """The precondition of the test below: candidates whose D_u alone, D_v alone, or both
    sit in (1e-12 M, 1e-3 M], and well-conditioned ones beside them."""
    ratio = np.concatenate([factors(cases[s], similarity) for s in SEEDS])
    inside = (ratio > 1e-12) & (ratio <= 1e-3)
    assert np.any(inside[:, 0] & (ratio[:, 1] > 1e-3))
    assert np.any(inside[:, 1] & (ratio[:, 0] > 1e-3))
    assert np.any(inside[:, 0] & inside[:, 1])
    assert np.any((ratio > 1e-3).all(axis=1))


@pytest.mark.parametrize("similarity", ["pearson", "pearson_corated"])
@pytest.mark.parametrize("k", [2, 3])
def test_near_constant_raters_get_the_definitions_predictions(cases, similarity, k):
    """Several neighbours, weighted by their similarities: a similarity off by 1e-7 (running
    sums instead of the recomputed factors, or factors recomputed with the wrong centres or
    over the wrong items) moves the prediction by about as much; the definition is kept to
    1e-10 (measured: 2.9e-11 at most)."""
    for seed in SEEDS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LooKnnWarning)
            warnings.simplefilter("error", RuntimeWarning)
            fast = loo_knn(cases[seed], similarity=similarity, k=k)
            naive = loo_knn(cases[seed], similarity=similarity, k=k, method="naive")
        np.testing.assert_array_equal(fast.n_neighbours, naive.n_neighbours)
        np.testing.assert_array_equal(fast.fallback, naive.fallback)
        np.testing.assert_allclose(fast.prediction, naive.prediction, rtol=0, atol=1e-10,
                                   err_msg=f"seed {seed}")


def test_centred_sums_against_numpy_over_the_co_rated_items():
    """``centred_sums(u, v, kk, ...)``: sum (x - cx)(y - cy), sum (x - cx)^2 and
    sum (y - cy)^2 over C = (I_u minus kk) and I_v, by a merge of the two CSR rows; with
    ``corated`` the centres are C's own means. Profiles that interleave, one starting or
    ending before the other, kk anywhere in C, C of one item; every ordered pair of users
    of three random graphs, against numpy's intersect1d."""
    from evaluators._loo_kernels import centred_sums

    centred = centred_sums.py_func  # the same function numba compiles
    g = np.random.default_rng(7)
    checked = 0
    for _ in range(3):
        n_users, n_items = 6, 9
        M = g.random((n_users, n_items)) < 0.6
        M[:, 4] = True  # a shared item: kk
        R = np.round(g.normal(3.0, 1.5, (n_users, n_items)), 3)
        u_ptr = np.concatenate([[0], np.cumsum(M.sum(axis=1))]).astype(np.int64)
        u_item = np.nonzero(M)[1].astype(np.int32)
        u_rating = R[M]
        for u in range(n_users):
            for v in range(n_users):
                if u == v:
                    continue
                for kk in np.flatnonzero(M[u] & M[v]).tolist():
                    C = np.flatnonzero(M[u] & M[v] & (np.arange(n_items) != kk))
                    if C.size == 0:
                        continue
                    x, y = R[u, C], R[v, C]
                    cx, cy = 2.5, 3.25
                    got = centred(u, v, kk, u_ptr, u_item, u_rating, cx, cy, False)
                    want = (np.sum((x - cx) * (y - cy)), np.sum((x - cx) ** 2),
                            np.sum((y - cy) ** 2))
                    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
                    got = centred(u, v, kk, u_ptr, u_item, u_rating, 99.0, -99.0, True)
                    dx, dy = x - x.mean(), y - y.mean()
                    want = (np.sum(dx * dy), np.sum(dx * dx), np.sum(dy * dy))
                    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
                    checked += 1
    assert checked > 100


@pytest.mark.parametrize("similarity", ["pearson", "pearson_corated"])
def test_a_neighbour_rating_everything_0_is_dropped_without_a_numpy_warning(similarity):
    """User 1 rates every item 0: its factor D_v and its magnitude M_v are both 0 (no
    variance, no size), which the zero rule ``D <= 1e-12 M`` drops (0 <= 0) before any
    division; no numpy warning on the way. The others' predictions are the definition's."""
    D = np.array([[2.0, 4.0, 1.0, 5.0, 3.0],
                  [0.0, 0.0, 0.0, 0.0, 0.0],
                  [1.0, 3.5, 2.0, 4.0, 2.5],
                  [3.0, 2.0, 4.5, 1.0, 2.0]])
    u, i = np.nonzero(np.ones_like(D))
    data = (u, i, D[u, i])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        fast = loo_knn(data, similarity=similarity, k=3)
    naive = loo_knn(data, similarity=similarity, k=3, method="naive")
    np.testing.assert_array_equal(fast.n_neighbours, naive.n_neighbours)
    np.testing.assert_allclose(fast.prediction, naive.prediction, rtol=0, atol=1e-12)
    # k = 3, but user 1 is nobody's neighbour (users 0, 2, 3: two others each at most), and
    # its own ratings (no variance) have none
    assert fast.n_neighbours.max() <= 2 and not fast.n_neighbours[5:10].any()
