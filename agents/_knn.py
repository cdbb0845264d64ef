"""User-based kNN rating prediction (``KNNRating``) with exact leave-one-out.

Definitions follow the exact-LOO contract of ``evaluators.loo_knn`` (Zhang et al. 2016) so that
``KNNRating(s, k).fit(R).predict(u, i, removed=i)`` is the exact leave-one-out prediction of
``r_ui``: every statistic (user means, item means, norms, co-rated sets) is recomputed from the
ratings that remain once ``r_{u, removed}`` is taken out of the whole training data.
"""

from __future__ import annotations

import numpy as np

from agents._recommenders import _check_method, _ids, _Recommender
from recloop_base.validation import check_int

__all__ = ["KNNRating", "SIMILARITIES"]

#: Similarities understood by :class:`KNNRating`.
SIMILARITIES = ("pearson", "adjusted_cosine", "cosine")

# Neighbours are ranked by similarity rounded to this many decimals (ties: lower user id), and
# predictions by predicted rating rounded likewise, so that two exact computations differing
# in the last bits of a sum rank alike. Same convention as evaluators.loo_knn.
_DECIMALS = 10
# A sum of squares D is treated as zero when D <= _ZERO_REL * M, M the sum of the squared
# magnitudes it comes from: an exact zero may come out as a few ulps. As in evaluators.loo_knn.
_ZERO_REL = 1e-12


class KNNRating(_Recommender):
    r"""User-based k-nearest-neighbour rating prediction; recommends by predicted rating.

    Parameters
    ----------
    similarity : {"pearson", "adjusted_cosine", "cosine"}, default "pearson"
    k : int, default 20
        Neighbourhood size (at most ``k`` neighbours per prediction) -- not the list length
        of :meth:`recommend`.
    min_support : int, default 1
        Candidates sharing fewer co-rated items with the user are not neighbours.
    method : {"fast", "naive"}, default "fast"
        ``"naive"``: the literal definition, one target item and one candidate at a time
        (the slow reference of the tests).

    Notes
    -----
    ``fit(ratings)`` takes a users x items sparse matrix whose **stored** entries are the
    ratings (an explicitly stored 0 is a rating of 0; zeros of a dense array are missing).
    For user u (with ``removed`` item r taken out of the data, so ``I_u' = I_u \ {r}``), item t:

    ``p_ut = mean_u + sum_{v in N} sim(u, v) (r_vt - mean_v) / sum_{v in N} |sim(u, v)|``

    where ``N`` holds the (at most k) users ``v != u`` who rated t, share at least
    ``min_support`` co-rated items ``C = I_u' ∩ I_v`` with u, and have ``sim(u, v) > 0``; the
    largest similarities (rounded to 10 decimals; ties: lower user id). Since every neighbour
    has a positive similarity, ``|sim| = sim``. Similarities (``mean_w``: mean of w's
    remaining ratings; ``m_i``: mean of item i's remaining ratings):

    * pearson: ``sum_C (r_ui - mean_u)(r_vi - mean_v) /
      sqrt(sum_C (r_ui - mean_u)^2 sum_C (r_vi - mean_v)^2)``;
    * cosine: ``sum_C r_ui r_vi / sqrt(sum_{I_u'} r_ui^2 sum_{I_v} r_vi^2)``;
    * adjusted_cosine: ``sum_C (r_ui - m_i)(r_vi - m_i) /
      sqrt(sum_{I_u'} (r_ui - m_i)^2 sum_{I_v} (r_vi - m_i)^2)`` (``m_r`` without ``r_ur``).

    A zero denominator drops the candidate. With no neighbour the prediction is ``mean_u``; if
    u has no remaining rating it is the mean of all remaining ratings. Sources: the course
    notes' kNN predictor and the exact LOO of Zhang et al. (2016).

    Cost (``"fast"``): per distinct (user, removed) pair, O(ratings of the users who share an
    item with u + ratings of the positive neighbours), vectorised with ``bincount`` and one
    ``lexsort``; pairs are not batched across users (no speed target for this recommender).

    ``recommend`` ranks the items the reduced profile does not hold by predicted rating
    (rounded to 10 decimals; ties: lower item id); fewer than ``k`` candidates are completed
    with held items, lowest ids first.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> R = sp.csr_array(np.array([[5., 3., 0.], [4., 2., 5.], [1., 5., 1.]]))
    >>> knn = KNNRating("pearson", 2).fit(R)
    >>> round(float(knn.predict([0], [2])[0]), 4)  # only u1 is positively correlated
    5.3333
    >>> knn.recommend([0], 1, removed=[1]).tolist()
    [[1]]
    """

    _binary = False

    def __init__(self, similarity: str = "pearson", k: int = 20, *, min_support: int = 1,
                 method: str = "fast"):
        if not isinstance(similarity, str) or similarity not in SIMILARITIES:
            raise ValueError(f"`similarity` must be one of {', '.join(map(repr, SIMILARITIES))}"
                             f"; got {similarity!r}.")
        method = _check_method(method)
        self.similarity = similarity
        self.k = check_int(k, "k", low=1)
        self.min_support = check_int(min_support, "min_support", low=1)
        self.method = method

    def __repr__(self) -> str:
        return (f"KNNRating(similarity={self.similarity!r}, k={self.k}, "
                f"min_support={self.min_support}, method={self.method!r})")

    # ------------------------------------------------------------------ fit

    def _fit(self, csr) -> None:
        n_users, n_items = csr.shape
        self._csc = csr.tocsc()
        self._csc.sort_indices()
        rows = np.repeat(np.arange(n_users), np.diff(csr.indptr))
        self._rows = rows
        counts = np.diff(csr.indptr).astype(np.float64)
        sums = np.bincount(rows, csr.data, minlength=n_users)
        with np.errstate(invalid="ignore", divide="ignore"):
            self._mean = sums / counts  # nan for users without ratings (never neighbours)
        self._total, self._n = float(csr.data.sum()), csr.nnz
        self._sq = np.bincount(rows, csr.data ** 2, minlength=n_users)
        icount = np.bincount(csr.indices, minlength=n_items).astype(np.float64)
        isum = np.bincount(csr.indices, csr.data, minlength=n_items)
        self._icount, self._isum = icount, isum
        with np.errstate(invalid="ignore", divide="ignore"):
            self._imean = isum / icount
        dev = csr.data - self._imean[csr.indices]
        self._adj_sq = np.bincount(rows, dev ** 2, minlength=n_users)

    # ------------------------------------------------------------------ predictions

    def _predict_all(self, u: int, r: int) -> np.ndarray:
        """Predicted rating of every item for user u with item r (or -1) removed."""
        if self.method == "naive":
            return self._naive_all(u, r)
        csr, csc = self._profiles, self._csc
        n_users, n_items = csr.shape
        lo, hi = csr.indptr[u], csr.indptr[u + 1]
        iu, xo = csr.indices[lo:hi], csr.data[lo:hi]
        a = 0.0
        if r >= 0:
            keep = iu != r
            a = float(xo[~keep][0])
            iu, xo = iu[keep], xo[keep]
        if iu.size == 0:
            n = self._n - (r >= 0)
            return np.full(n_items, (self._total - a) / n if n else np.nan)
        m_u = float(xo.mean())

        # entries (v, item) of the users who rated an item of I_u': the co-rated sets
        sub = csc[:, iu]
        v = sub.indices.astype(np.int64)
        col = np.repeat(np.arange(iu.size), np.diff(sub.indptr))
        y, x = sub.data, xo[col]
        own = v != u
        v, y, x, col = v[own], y[own], x[own], col[own]
        support = np.bincount(v, minlength=n_users)
        m_v = self._mean[v]
        s = self.similarity
        if s == "pearson":
            dx, dy = x - m_u, y - m_v
            num = np.bincount(v, dx * dy, minlength=n_users)
            du = np.bincount(v, dx * dx, minlength=n_users)
            mu = np.bincount(v, x * x, minlength=n_users) + support * m_u * m_u
            dv = np.bincount(v, dy * dy, minlength=n_users)
            mean_sq = np.where(support > 0, np.nan_to_num(self._mean), 0.0) ** 2
            mv = np.bincount(v, y * y, minlength=n_users) + support * mean_sq
        elif s == "cosine":
            num = np.bincount(v, x * y, minlength=n_users)
            du = np.full(n_users, float(np.sum(xo * xo)))
            mu = du + a * a
            dv = mv = self._sq
        else:  # adjusted_cosine: only item r's mean moves when r_ur leaves the data
            im = self._imean[iu]  # r is not in I_u'
            ex, ey = (xo - im)[col], y - im[col]
            num = np.bincount(v, ex * ey, minlength=n_users)
            du = np.full(n_users, float(np.sum((xo - im) ** 2)))
            dv = self._adj_sq.copy()
            mu, mv = du.copy(), dv
            if r >= 0:
                mu += (a - self._imean[r]) ** 2
                lo_r, hi_r = csc.indptr[r], csc.indptr[r + 1]
                raters, b = csc.indices[lo_r:hi_r], csc.data[lo_r:hi_r]
                others = raters != u
                raters, b = raters[others], b[others]
                new_mean = ((self._isum[r] - a) / (self._icount[r] - 1)
                            if raters.size else np.nan)
                # the raters of r: their norm over I_v, recomputed with m_r without r_ur
                sel = csr[raters]
                owner = np.repeat(np.arange(raters.size), np.diff(sel.indptr))
                not_r = sel.indices != r
                rest = np.bincount(owner[not_r], (sel.data[not_r]
                                                  - self._imean[sel.indices[not_r]]) ** 2,
                                   minlength=raters.size)
                dv = dv.copy()
                mv = dv.copy()
                dv[raters] = rest + (b - new_mean) ** 2
                mv[raters] = dv[raters] + (b - self._imean[r]) ** 2

        ok = (support >= self.min_support) & (du > _ZERO_REL * mu) & (dv > _ZERO_REL * mv)
        ok[u] = False
        with np.errstate(invalid="ignore", divide="ignore"):
            sim = np.where(ok, num / np.sqrt(du * dv), 0.0)
        key = np.round(sim, _DECIMALS)
        good = np.flatnonzero(key > 0)
        preds = np.full(n_items, m_u)
        if good.size == 0:
            return preds
        # every rating of a positive neighbour, ranked per item by (key desc, user asc)
        sel = csr[good]
        w = np.repeat(good, np.diff(sel.indptr))
        t, b = sel.indices.astype(np.int64), sel.data
        order = np.lexsort((w, -key[w], t))
        t, w, b = t[order], w[order], b[order]
        first = np.r_[0, np.flatnonzero(t[1:] != t[:-1]) + 1]
        rank = np.arange(t.size) - np.repeat(first, np.diff(np.r_[first, t.size]))
        top = rank < self.k
        t, w, b = t[top], w[top], b[top]
        numer = np.bincount(t, sim[w] * (b - self._mean[w]), minlength=n_items)
        denom = np.bincount(t, sim[w], minlength=n_items)
        has = denom > 0
        preds[has] = m_u + numer[has] / denom[has]
        return preds

    def _naive_all(self, u: int, r: int) -> np.ndarray:
        """The literal definition: a fresh rating table without (u, r), loops everywhere."""
        dense = self._profiles.toarray()
        rated = np.zeros(dense.shape, dtype=bool)
        rated[self._rows, self._profiles.indices] = True
        if r >= 0:
            rated[u, r] = False
        n_users, n_items = dense.shape
        if not rated[u].any():
            return np.full(n_items, dense[rated].mean() if rated.any() else np.nan)
        mean = {w: dense[w, rated[w]].mean() for w in range(n_users) if rated[w].any()}
        imean = {i: dense[rated[:, i], i].mean() for i in range(n_items) if rated[:, i].any()}
        iu = np.flatnonzero(rated[u])

        def sim(v):
            iv = np.flatnonzero(rated[v])
            common = np.intersect1d(iu, iv)
            if common.size < self.min_support:
                return None
            x, y = dense[u, common], dense[v, common]
            if self.similarity == "pearson":
                dx, dy = x - mean[u], y - mean[v]
                num, du, dv = np.sum(dx * dy), np.sum(dx * dx), np.sum(dy * dy)
                mu = np.sum(x * x) + common.size * mean[u] ** 2
                mv = np.sum(y * y) + common.size * mean[v] ** 2
            elif self.similarity == "cosine":
                num = np.sum(x * y)
                du, dv = np.sum(dense[u, iu] ** 2), np.sum(dense[v, iv] ** 2)
                mu, mv = du + (dense[u, r] ** 2 if r >= 0 else 0.0), dv
            else:
                m = np.array([imean[i] for i in common])
                num = np.sum((x - m) * (y - m))
                du = sum((dense[u, i] - imean[i]) ** 2 for i in iu)
                dv = sum((dense[v, i] - imean[i]) ** 2 for i in iv)
                full_r = self._imean[r] if r >= 0 else 0.0
                mu = du + ((dense[u, r] - full_r) ** 2 if r >= 0 else 0.0)
                mv = dv + ((dense[v, r] - full_r) ** 2 if r >= 0 and rated[v, r] else 0.0)
            if du <= _ZERO_REL * mu or dv <= _ZERO_REL * mv:
                return None
            return num / np.sqrt(du * dv)

        sims = {v: sim(v) for v in range(n_users) if v != u and rated[v].any()}
        preds = np.empty(n_items)
        for t in range(n_items):
            cands = [(round(float(sims[v]), _DECIMALS), v) for v in range(n_users)
                     if v != u and rated[v, t] and sims.get(v) is not None]
            cands = sorted((c for c in cands if c[0] > 0), key=lambda c: (-c[0], c[1]))
            nbrs = [v for _, v in cands[:self.k]]
            if not nbrs:
                preds[t] = mean[u]
                continue
            w = np.array([sims[v] for v in nbrs])
            devs = np.array([dense[v, t] - mean[v] for v in nbrs])
            preds[t] = mean[u] + np.sum(w * devs) / np.sum(np.abs(w))
        return preds

    # ------------------------------------------------------------------ public

    def _units(self, users, rem):
        """Distinct (user, removed) pairs and, per input position, its unit index."""
        pairs = np.stack([users, rem], axis=1)
        units, inverse = np.unique(pairs, axis=0, return_inverse=True)
        return units, inverse.reshape(-1)

    def _scores(self, users, removed, pos):
        n_items = self._profiles.shape[1]
        scores = np.empty((users.size, n_items))
        if users.size == 0:
            return scores
        units, inverse = self._units(users, removed)
        for j, (u, r) in enumerate(units):
            preds = self._predict_all(int(u), int(r))
            # nan only when no rating at all remains: every item ties, lower ids first
            scores[inverse == j] = np.round(np.nan_to_num(preds, nan=0.0), _DECIMALS)
        rows, cols, _ = self._held_mask_rows(users, pos)
        scores[rows, cols] = -np.inf
        return scores

    def predict(self, users, items, *, removed=None) -> np.ndarray:
        """Predicted rating of ``items[j]`` by ``users[j]``.

        Parameters
        ----------
        users, items : int arrays (n,)
        removed : int array (n,), optional
            ``removed[j]``, rated by ``users[j]``, is taken out of the whole training data
            first. ``predict(u, i, removed=i)`` is the exact leave-one-out prediction of
            ``r_ui``.

        Returns
        -------
        float ndarray (n,)
            ``nan`` only where no rating at all remains (a one-rating table with it removed).

        Raises
        ------
        RuntimeError
            Before ``fit``.
        ValueError
            Unknown user or item ids, ``removed`` of the wrong length or not rated.
        """
        users, rem, _ = self._validate(users, 1, removed, what="predict")
        items = _ids(items, "items", "item", self._profiles.shape[1], length=users.size)
        out = np.empty(users.size)
        if users.size == 0:
            return out
        units, inverse = self._units(users, rem)
        for j, (u, r) in enumerate(units):
            here = inverse == j
            out[here] = self._predict_all(int(u), int(r))[items[here]]
        return out
