"""Literal leave-one-out for user-based kNN: the slow reference of :func:`loo_knn`.

Every held-out rating rebuilds what it needs from the remaining data, one candidate at a
time, exactly as the "Exact definition" of issue 5 reads; nothing is shared between held-out
ratings except read-only per-user and per-item arrays. It is ``method="naive"`` of
:func:`evaluators.loo_knn`, the reference of the tests (fast == naive) and of the benchmark's
speed-up figure.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ZERO_REL", "ROUND_DECIMALS", "SIMILARITIES", "loo_knn_naive"]

SIMILARITIES = ("pearson", "cosine", "adjusted_cosine", "pearson_corated", "cosine_corated")

# Neighbours are ranked by the similarity rounded to this many decimals (and must be > 0
# after rounding), so that two exact implementations that differ in the last bits of a
# floating-point sum rank -- and select -- the same neighbours.
ROUND_DECIMALS = 10

# A denominator factor D (a sum of squares) is treated as zero when D <= ZERO_REL * M, M being
# the sum of the squared magnitudes D is computed from (documented per similarity in
# ``_factors``). In exact arithmetic D >= 0; the fast method computes D by subtracting running
# sums, which leaves a rounding residue of a few ulps of M where D is truly zero. Both methods
# apply the same rule so that they drop the same candidates.
ZERO_REL = 1e-12

# Kinds of prediction, reported per rating.
KIND_NEIGHBOURS, KIND_USER_MEAN, KIND_GLOBAL_MEAN = 0, 1, 2


def _factors(name, x, y, xo, a, yo, b, m_u, m_v, ex, ey, exo, euk, eyo, evk, evk_new):
    """Return ``(num, du, mu, dv, mv)`` of one candidate pair, literally from the definition.

    ``x``/``y``: co-rated ratings of u and v over C; ``xo``: u's remaining profile (without
    k), ``a = r_uk``; ``yo``: v's whole profile, ``b = r_vk``. ``ex``/``ey``/``exo``: the same
    minus the remaining item means; ``euk``/``evk``: deviations of r_uk/r_vk from the full
    item mean of k, ``evk_new``: of r_vk from the mean of k without r_uk.
    """
    if name == "pearson":
        dx, dy = x - m_u, y - m_v
        return (np.sum(dx * dy), np.sum(dx * dx), np.sum(x * x) + x.size * m_u * m_u,
                np.sum(dy * dy), np.sum(y * y) + y.size * m_v * m_v)
    if name == "pearson_corated":
        dx, dy = x - np.mean(x), y - np.mean(y)
        return (np.sum(dx * dy), np.sum(dx * dx), np.sum(x * x),
                np.sum(dy * dy), np.sum(y * y))
    if name == "cosine":
        du, dv = np.sum(xo * xo), np.sum(yo * yo)
        return np.sum(x * y), du, du + a * a, dv, dv
    if name == "cosine_corated":
        du, dv = np.sum(x * x), np.sum(y * y)
        return np.sum(x * y), du, du + a * a, dv, dv + b * b
    # adjusted_cosine: v's profile includes k, whose item mean changed with r_uk removed.
    du = np.sum(exo * exo)
    dv_rest = np.sum(eyo * eyo)
    return (np.sum(ex * ey), du, du + euk * euk,
            dv_rest + evk_new * evk_new, dv_rest + evk_new * evk_new + evk * evk)


def loo_knn_naive(user, item, rating, n_users, n_items, held, allowed, *, similarity, k,
                  min_support):
    """Exact LOO predictions by the literal definition.

    Parameters
    ----------
    user, item : int arrays (n,)
        Dense indices (users sorted as their ids, so "lower index" means "lower id").
    rating : float array (n,)
    n_users, n_items : int
    held : bool array (n,)
        Ratings to hold out.
    allowed : bool array (n_users,)
        Users that may be neighbours.
    similarity : str
    k, min_support : int

    Returns
    -------
    prediction : float array (n_held,), n_neighbours : int array (n_held,),
    kind : int array (n_held,)
        In the order of ``np.flatnonzero(held)``.
    """
    n = rating.size
    total = float(np.sum(rating))
    order_u = np.lexsort((item, user))
    prof_items, prof_r = [], []
    starts = np.searchsorted(user[order_u], np.arange(n_users + 1))
    for w in range(n_users):
        sl = order_u[starts[w]:starts[w + 1]]
        prof_items.append(item[sl])  # sorted by item
        prof_r.append(rating[sl])
    order_i = np.lexsort((user, item))
    istarts = np.searchsorted(item[order_i], np.arange(n_items + 1))
    raters = [user[order_i[istarts[i]:istarts[i + 1]]] for i in range(n_items)]
    raters_r = [rating[order_i[istarts[i]:istarts[i + 1]]] for i in range(n_items)]
    item_mean = np.array([np.mean(raters_r[i]) if raters_r[i].size else np.nan
                          for i in range(n_items)])
    adjusted = similarity == "adjusted_cosine"

    held_idx = np.flatnonzero(held)
    pred = np.empty(held_idx.size)
    n_nb = np.zeros(held_idx.size, dtype=np.int64)
    kind = np.zeros(held_idx.size, dtype=np.int8)
    for t, j in enumerate(held_idx):
        u, kk, a = user[j], item[j], rating[j]
        keep = prof_items[u] != kk
        iu, xo = prof_items[u][keep], prof_r[u][keep]
        if xo.size == 0:
            pred[t] = (total - a) / (n - 1) if n > 1 else np.nan
            kind[t] = KIND_GLOBAL_MEAN
            continue
        m_u = np.mean(xo)
        if adjusted:
            others_k = raters_r[kk][raters[kk] != u]
            mean_k_new = np.mean(others_k) if others_k.size else np.nan
            exo = xo - item_mean[iu]  # items of u other than k keep their means
            euk = a - item_mean[kk]
        cand, sims, devs = [], [], []
        for v, b in zip(raters[kk], raters_r[kk], strict=True):
            if v == u or not allowed[v]:
                continue
            iv, yo = prof_items[v], prof_r[v]
            common, cu, cv = np.intersect1d(iu, iv, assume_unique=True, return_indices=True)
            # an empty C has a zero denominator (or similarity 0 for the cosines): dropped
            if common.size < max(min_support, 1):
                continue
            x, y = xo[cu], yo[cv]
            m_v = np.mean(yo)
            if adjusted:
                not_k = iv != kk
                eyo = yo[not_k] - item_mean[iv[not_k]]
                ex, ey = exo[cu], y - item_mean[common]
                evk, evk_new = b - item_mean[kk], b - mean_k_new
            else:
                ex = ey = eyo = exo = euk = evk = evk_new = None
            num, du, mu, dv, mv = _factors(similarity, x, y, xo, a, yo, b, m_u, m_v,
                                           ex, ey, exo if adjusted else None, euk, eyo,
                                           evk, evk_new)
            if du <= ZERO_REL * mu or dv <= ZERO_REL * mv:
                continue
            cand.append(v)
            sims.append(num / np.sqrt(du * dv))
            devs.append(b - m_v)
        sims = np.asarray(sims, dtype=np.float64)
        key = np.round(sims, ROUND_DECIMALS)
        pos = np.flatnonzero(key > 0)
        # rank: larger rounded similarity first, then lower user index
        pos = pos[np.lexsort((np.asarray(cand, dtype=np.int64)[pos], -key[pos]))][:k]
        if pos.size == 0:
            pred[t] = m_u
            kind[t] = KIND_USER_MEAN
            continue
        w = sims[pos]
        pred[t] = m_u + np.sum(w * np.asarray(devs)[pos]) / np.sum(w)
        n_nb[t] = pos.size
    return pred, n_nb, kind
