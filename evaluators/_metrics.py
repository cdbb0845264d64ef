"""Evaluation measures: regression, classification, top-k ranking and beyond-accuracy.

Definitions follow the course notes (DESIGN.md, source 3); ranking measures follow the
standard IR tool trec_eval (``P``, ``recall``, ``ndcg_cut``, ``map_cut``, ``recip_rank``),
with the one documented exception of :func:`map_at_k`'s default normalisation, which the
issue fixes to ``min(#relevant, k)``.
"""

from __future__ import annotations

import math
import operator
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

__all__ = [
    "UndefinedMetricWarning",
    "RankingResult",
    # regression
    "mae", "mse", "rmse", "mape", "tre",
    # classification
    "precision", "recall", "accuracy", "f1",
    # ranking
    "hits_at_k", "hit_rate_at_k", "precision_at_k", "recall_at_k", "dcg_at_k", "ndcg_at_k",
    "map_at_k", "mrr_at_k",
    # beyond accuracy
    "catalog_coverage", "item_popularity", "novelty", "cooccurrence_similarity",
    "intra_list_diversity", "serendipity",
]


class UndefinedMetricWarning(RuntimeWarning):
    """A metric is undefined on this (legal) input and ``nan`` was returned."""


def _undefined(message: str, stacklevel: int = 3) -> float:
    # 3: the caller of the public function that calls _undefined (4 through _result)
    warnings.warn(message, UndefinedMetricWarning, stacklevel=stacklevel)
    return math.nan


@dataclass(frozen=True, eq=False)
class RankingResult:
    """Mean of a per-user (per-list) measure, with the per-user values and the skip count.

    Attributes
    ----------
    value : float
        Mean of ``per_user`` over the evaluated users (``nan``, with an
        :class:`UndefinedMetricWarning`, when no user could be evaluated).
    per_user : ndarray of float64, shape (n_users,)
        The measure for each row of ``recommended``; ``nan`` for a skipped user (read-only).
    n_evaluated : int
        Number of users that enter the mean.
    n_skipped : int
        Number of users left out of the mean (ranking measures: users with no relevant item).
    """

    value: float
    per_user: np.ndarray
    n_evaluated: int
    n_skipped: int

    def __float__(self) -> float:
        return float(self.value)


def _result(per_user: np.ndarray, keep: np.ndarray, name: str) -> RankingResult:
    per_user = np.where(keep, per_user, np.nan).astype(np.float64)
    per_user.setflags(write=False)
    n_eval = int(keep.sum())
    if n_eval == 0:
        value = _undefined(f"`{name}` is undefined: no user could be evaluated "
                           f"({per_user.size} users, all skipped); returning nan.",
                           stacklevel=4)
    else:
        value = float(per_user[keep].mean())
    return RankingResult(value, per_user, n_eval, int(per_user.size - n_eval))


# -- validation helpers ------------------------------------------------------------------

def _real_1d(x, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"`{name}` must hold real numbers; got dtype {arr.dtype}.")
    if arr.ndim != 1:
        raise ValueError(f"`{name}` must be 1-dimensional; got shape {arr.shape}.")
    arr = arr.astype(np.float64)
    bad = ~np.isfinite(arr)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"`{name}` must be finite; got {arr[i]} at index {i}.")
    return arr


def _pair(y_true, y_pred) -> tuple[np.ndarray, np.ndarray]:
    t = _real_1d(y_true, "y_true")
    p = _real_1d(y_pred, "y_pred")
    if t.shape != p.shape:
        raise ValueError(f"`y_true` and `y_pred` must have the same length; "
                         f"got {t.size} and {p.size}.")
    return t, p


def _positive_int(k, name: str) -> int:
    if isinstance(k, bool):
        raise TypeError(f"`{name}` must be an integer; got bool {k}.")
    try:
        k = operator.index(k)
    except TypeError:
        raise TypeError(f"`{name}` must be an integer; got {type(k).__name__} {k!r}.") from None
    if k < 1:
        raise ValueError(f"`{name}` must be >= 1; got {k}.")
    return int(k)


def _recommended(recommended, *, n_items: int | None = None) -> np.ndarray:
    rec = np.asarray(recommended)
    if rec.dtype.kind not in "iu":
        raise TypeError(f"`recommended` must be an integer array of item ids; "
                        f"got dtype {rec.dtype}.")
    if rec.ndim != 2:
        raise ValueError(f"`recommended` must be 2-dimensional (n_users, n_ranked); "
                         f"got shape {rec.shape}.")
    if rec.shape[1] == 0:
        raise ValueError(f"`recommended` must rank at least one item per user; "
                         f"got shape {rec.shape}.")
    rec = rec.astype(np.int64)
    if rec.size:
        neg = rec < 0
        if neg.any():
            u, j = np.argwhere(neg)[0]
            raise ValueError(f"`recommended` item ids must be >= 0; got {rec[u, j]} "
                             f"at [{u}, {j}].")
        if n_items is not None and rec.max() >= n_items:
            u, j = np.argwhere(rec >= n_items)[0]
            raise ValueError(f"`recommended` item ids must be < n_items = {n_items}; "
                             f"got {rec[u, j]} at [{u}, {j}].")
        s = np.sort(rec, axis=1)
        dup = s[:, 1:] == s[:, :-1]
        if dup.any():
            u, j = np.argwhere(dup)[0]
            raise ValueError(f"`recommended` rows must not repeat an item; row {u} "
                             f"contains item {s[u, j]} more than once.")
    return rec


def _top(rec: np.ndarray, k: int | None) -> np.ndarray:
    return rec if k is None else rec[:, : min(k, rec.shape[1])]


def _pairs_from_relevant(relevant, n_users: int, name: str):
    """(user, item) arrays of the relevant pairs and the per-user count; validates."""
    if sp.issparse(relevant):
        if relevant.ndim != 2 or relevant.shape[0] != n_users:
            raise ValueError(f"`{name}` must have one row per row of `recommended` "
                             f"({n_users}); got shape {relevant.shape}.")
        coo = sp.coo_array(relevant)
        data = np.asarray(coo.data)
        if data.dtype.kind not in "biuf":
            raise TypeError(f"`{name}` must hold 0/1 values; got dtype {data.dtype}.")
        bad = (data != 0) & (data != 1)
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"`{name}` must be binary (0/1); got {data[i]} at "
                             f"({coo.row[i]}, {coo.col[i]}).")
        # A stored 0 is "not relevant"; duplicate stored entries are summed by scipy.
        keep = data != 0
        u = np.asarray(coo.row[keep], dtype=np.int64)
        i = np.asarray(coo.col[keep], dtype=np.int64)
        order = np.lexsort((i, u))
        u, i = u[order], i[order]
        dup = (u[1:] == u[:-1]) & (i[1:] == i[:-1])
        if dup.any():
            j = int(np.argmax(dup))
            raise ValueError(f"`{name}` stores ({u[j]}, {i[j]}) more than once.")
        return u, i, int(relevant.shape[1])
    if isinstance(relevant, (str, bytes)) or not hasattr(relevant, "__len__"):
        raise TypeError(f"`{name}` must be a sequence of per-user id arrays or a scipy.sparse "
                        f"matrix; got {type(relevant).__name__}.")
    if len(relevant) != n_users:
        raise ValueError(f"`{name}` must have one entry per row of `recommended` "
                         f"({n_users}); got {len(relevant)}.")
    us, its = [], []
    for u, r in enumerate(relevant):
        a = np.fromiter(r, dtype=np.int64) if isinstance(r, (set, frozenset)) else np.asarray(r)
        if a.size == 0:
            continue
        if a.dtype.kind not in "iu":
            raise TypeError(f"`{name}[{u}]` must hold integer item ids; got dtype {a.dtype}.")
        if a.ndim != 1:
            raise ValueError(f"`{name}[{u}]` must be 1-dimensional; got shape {a.shape}.")
        a = a.astype(np.int64)
        if (a < 0).any():
            raise ValueError(f"`{name}[{u}]` item ids must be >= 0; got {a[a < 0][0]}.")
        s = np.sort(a)
        d = s[1:] == s[:-1]
        if d.any():
            raise ValueError(f"`{name}[{u}]` must not repeat an item; got item "
                             f"{s[1:][d][0]} more than once.")
        us.append(np.full(a.size, u, dtype=np.int64))
        its.append(a)
    if not us:
        return np.empty(0, np.int64), np.empty(0, np.int64), None
    return np.concatenate(us), np.concatenate(its), None


def _member(top: np.ndarray, set_u: np.ndarray, set_i: np.ndarray) -> np.ndarray:
    """Boolean array shaped like ``top``: is (row, top[row, j]) one of the (set_u, set_i)?"""
    if set_u.size == 0 or top.size == 0:
        return np.zeros(top.shape, dtype=bool)
    # Compact the item ids first so that user * m + item cannot overflow for any id range.
    uniq, inv = np.unique(np.concatenate([top.ravel(), set_i]), return_inverse=True)
    m = np.int64(uniq.size)
    top_c = inv[: top.size].reshape(top.shape)
    keys = np.sort(set_u * m + inv[top.size:])
    q = np.arange(top.shape[0], dtype=np.int64)[:, None] * m + top_c
    pos = np.minimum(np.searchsorted(keys, q), keys.size - 1)
    return keys[pos] == q


def _ranking_setup(recommended, relevant, k):
    k = _positive_int(k, "k")
    rec = _recommended(recommended)
    u, i, n_items = _pairs_from_relevant(relevant, rec.shape[0], "relevant")
    if n_items is not None and rec.size and rec.max() >= n_items:
        uu, jj = np.argwhere(rec >= n_items)[0]
        raise ValueError(f"`recommended` item ids must be < {n_items} (columns of "
                         f"`relevant`); got {rec[uu, jj]} at [{uu}, {jj}].")
    top = _top(rec, k)
    hits = _member(top, u, i)
    n_rel = np.bincount(u, minlength=rec.shape[0]).astype(np.int64)
    return hits, n_rel, k


_RANKING_PARAMS = """
    Parameters
    ----------
    recommended : array_like of int, shape (n_users, n_ranked)
        Item ids in rank order, best first; no id may repeat within a row.
    relevant : sequence of array_like of int, or scipy.sparse matrix (n_users, n_items)
        Relevant item ids per user (one entry per row of ``recommended``), or a binary
        user x item matrix whose non-zero entries are the relevant pairs.
    k : int
        Cut-off, ``k >= 1``. When ``k > n_ranked`` the missing ranks count as non-relevant
        (trec_eval's convention).
"""

_RANKING_RETURNS = """
    Returns
    -------
    RankingResult
        ``value`` is the mean over users with at least one relevant item; ``per_user`` holds
        every user's value, ``nan`` for the ``n_skipped`` users without a relevant item.

    Raises
    ------
    TypeError
        ``recommended`` not integer, ``relevant`` of the wrong kind, ``k`` not an integer.
    ValueError
        Negative ids, an id repeated in a row of ``recommended`` or in ``relevant``, row
        counts that differ, non-binary ``relevant``, ``k < 1``.
"""


def _doc(f):
    # The placeholders stand indented in the docstring: the sections' first lines take
    # that indentation, so their own is stripped with the newlines.
    f.__doc__ = (f.__doc__.replace("{params}", _RANKING_PARAMS.strip())
                 .replace("{returns}", _RANKING_RETURNS.strip()))
    return f
# (called after the ranking measures, not as their decorator: mutmut does not mutate
# decorated functions, and these are the measures its runs must reach)


# -- regression ----------------------------------------------------------------------------

def mae(y_true, y_pred) -> float:
    """Mean absolute error, ``(1/n) sum_i |y_i - yhat_i|``.

    Parameters
    ----------
    y_true, y_pred : array_like of float, shape (n,)
        Observed and predicted values (finite).

    Returns
    -------
    float
        ``nan`` with an :class:`UndefinedMetricWarning` when ``n == 0``.

    Raises
    ------
    TypeError
        Non-numeric input.
    ValueError
        Non-finite values, arrays not 1-D or of different lengths.

    Examples
    --------
    >>> mae([1, 2, 3], [1, 2, 5])
    0.6666666666666666
    """
    t, p = _pair(y_true, y_pred)
    if t.size == 0:
        return _undefined("`mae` of 0 observations is undefined; returning nan.")
    return float(np.mean(np.abs(t - p)))


def mse(y_true, y_pred) -> float:
    """Mean squared error, ``(1/n) sum_i (y_i - yhat_i)^2``.

    Parameters, returns and errors as :func:`mae`.

    Examples
    --------
    >>> mse([1, 2, 3], [1, 2, 5])
    1.3333333333333333
    """
    t, p = _pair(y_true, y_pred)
    if t.size == 0:
        return _undefined("`mse` of 0 observations is undefined; returning nan.")
    return float(np.mean((t - p) ** 2))


def rmse(y_true, y_pred) -> float:
    """Root mean squared error, ``sqrt((1/n) sum_i (y_i - yhat_i)^2)``.

    Parameters, returns and errors as :func:`mae`.

    Examples
    --------
    >>> rmse([0, 0], [3, 4])
    3.5355339059327378
    """
    t, p = _pair(y_true, y_pred)
    if t.size == 0:
        return _undefined("`rmse` of 0 observations is undefined; returning nan.")
    return float(np.sqrt(np.mean((t - p) ** 2)))


def mape(y_true, y_pred) -> float:
    """Mean absolute percentage error as a fraction, ``(1/n) sum_i |y_i - yhat_i| / |y_i|``.

    Parameters
    ----------
    y_true, y_pred : array_like of float, shape (n,)
        Observed and predicted values (finite). Every ``y_true`` must be non-zero.

    Returns
    -------
    float
        A fraction (multiply by 100 for per cent); ``nan`` with an
        :class:`UndefinedMetricWarning` when ``n == 0``.

    Raises
    ------
    ValueError
        A zero target (the relative error of that point is undefined, and skipping it would
        silently change the population; rescale or use :func:`tre`), plus the errors of
        :func:`mae`.

    Examples
    --------
    >>> mape([2, 4], [1, 5])
    0.375
    """
    t, p = _pair(y_true, y_pred)
    if t.size == 0:
        return _undefined("`mape` of 0 observations is undefined; returning nan.")
    zero = t == 0
    if zero.any():
        raise ValueError(f"`y_true` must be non-zero for `mape` (relative error); got 0.0 at "
                         f"index {int(np.argmax(zero))}. Use `tre` for data with zero targets.")
    return float(np.mean(np.abs(t - p) / np.abs(t)))


def tre(y_true, y_pred) -> float:
    """Total relative error, ``sum_i |y_i - yhat_i| / sum_i |y_i|``.

    Parameters
    ----------
    y_true, y_pred : array_like of float, shape (n,)
        Observed and predicted values (finite), not all ``y_true`` zero.

    Returns
    -------
    float
        ``nan`` with an :class:`UndefinedMetricWarning` when ``n == 0``.

    Raises
    ------
    ValueError
        All targets zero (the denominator vanishes), plus the errors of :func:`mae`.

    Notes
    -----
    Unlike :func:`mape`, individual zero targets are fine: only the total must be non-zero.

    Examples
    --------
    >>> tre([2, 0, 2], [1, 1, 2])
    0.5
    """
    t, p = _pair(y_true, y_pred)
    if t.size == 0:
        return _undefined("`tre` of 0 observations is undefined; returning nan.")
    denom = np.abs(t).sum()
    if denom == 0:
        raise ValueError(f"`y_true` must not be all zero for `tre` (sum |y_true| is the "
                         f"denominator); got {t.size} zeros.")
    return float(np.abs(t - p).sum() / denom)


# -- classification ------------------------------------------------------------------------

def _labels(y_true, y_pred):
    out = []
    for name, y in (("y_true", y_true), ("y_pred", y_pred)):
        a = np.asarray(y)
        if a.dtype.kind not in "biufUS":
            raise TypeError(f"`{name}` must hold labels (bool, int, float or str); "
                            f"got dtype {a.dtype}.")
        if a.ndim != 1:
            raise ValueError(f"`{name}` must be 1-dimensional; got shape {a.shape}.")
        if a.dtype.kind == "f" and not np.isfinite(a).all():
            j = int(np.argmax(~np.isfinite(a)))
            raise ValueError(f"`{name}` must not contain nan or inf; got {a[j]} at index {j}.")
        out.append(a)
    t, p = out
    if t.shape != p.shape:
        raise ValueError(f"`y_true` and `y_pred` must have the same length; "
                         f"got {t.size} and {p.size}.")
    if (t.dtype.kind in "US") != (p.dtype.kind in "US"):  # "1" never equals 1: all would miss
        raise TypeError(f"`y_true` and `y_pred` must hold labels of the same kind (both "
                        f"strings or both numbers); got dtype {t.dtype} and {p.dtype}.")
    return t, p


def _confusion(y_true, y_pred, positive):
    t, p = _labels(y_true, y_pred)
    tp_ = t == positive
    pp = p == positive
    return int((tp_ & pp).sum()), int((~tp_ & pp).sum()), int((tp_ & ~pp).sum()), t.size


def precision(y_true, y_pred, *, positive=1) -> float:
    """Precision ``TP / (TP + FP)`` of the label ``positive``.

    Parameters
    ----------
    y_true, y_pred : array_like, shape (n,)
        True and predicted labels (bool, int, float or str).
    positive : scalar, default 1
        The label treated as positive (``1`` also matches ``True``).

    Returns
    -------
    float
        ``nan`` with an :class:`UndefinedMetricWarning` when nothing is predicted positive
        (scikit-learn's ``zero_division=np.nan``; never a silent 0).

    Raises
    ------
    TypeError
        Labels of an unsupported dtype (e.g. object).
    ValueError
        Arrays not 1-D, of different lengths, or with nan.

    Examples
    --------
    >>> precision([1, 0, 1, 1], [1, 1, 0, 1])
    0.6666666666666666
    """
    tp, fp, fn, n = _confusion(y_true, y_pred, positive)
    if tp + fp == 0:
        return _undefined(f"`precision` is undefined: no prediction equals the positive "
                          f"label {positive!r}; returning nan.")
    return tp / (tp + fp)


def recall(y_true, y_pred, *, positive=1) -> float:
    """Recall ``TP / (TP + FN)`` of the label ``positive``.

    Parameters as :func:`precision`. Returns ``nan`` with an :class:`UndefinedMetricWarning`
    when no true label is positive.

    Examples
    --------
    >>> recall([1, 0, 1, 1], [1, 1, 0, 0])
    0.3333333333333333
    """
    tp, fp, fn, n = _confusion(y_true, y_pred, positive)
    if tp + fn == 0:
        return _undefined(f"`recall` is undefined: no true label equals the positive "
                          f"label {positive!r}; returning nan.")
    return tp / (tp + fn)


def f1(y_true, y_pred, *, positive=1) -> float:
    """F1 score, the harmonic mean of precision and recall: ``2 TP / (2 TP + FP + FN)``.

    Parameters as :func:`precision`.

    Returns
    -------
    float
        ``nan`` with an :class:`UndefinedMetricWarning` only when ``TP + FP + FN == 0``
        (no positive anywhere). When precision alone is undefined (nothing predicted
        positive) but positives exist, F1 is 0 by the formula above, as in scikit-learn.

    Examples
    --------
    >>> f1([1, 0, 1, 1], [1, 1, 0, 1])
    0.6666666666666666
    """
    tp, fp, fn, n = _confusion(y_true, y_pred, positive)
    if tp + fp + fn == 0:
        return _undefined(f"`f1` is undefined: neither `y_true` nor `y_pred` contains the "
                          f"positive label {positive!r}; returning nan.")
    return 2 * tp / (2 * tp + fp + fn)


def accuracy(y_true, y_pred) -> float:
    """Accuracy, the share of positions where ``y_true == y_pred``.

    Parameters as :func:`precision` (no ``positive``: any number of classes). Returns
    ``nan`` with an :class:`UndefinedMetricWarning` when ``n == 0``.

    Examples
    --------
    >>> accuracy([1, 0, 2, 2], [1, 1, 2, 0])
    0.5
    """
    t, p = _labels(y_true, y_pred)
    if t.size == 0:
        return _undefined("`accuracy` of 0 observations is undefined; returning nan.")
    return float(np.mean(t == p))


# -- ranking ---------------------------------------------------------------------------------

def hits_at_k(recommended, relevant, *, k) -> RankingResult:
    """Number of relevant items among the top ``k``: ``sum_{j<=k} rel(j)``.

    {params}

    {returns}

    Examples
    --------
    >>> hits_at_k([[3, 1, 2]], [[1, 2, 9]], k=2).value
    1.0
    """
    hits, n_rel, k = _ranking_setup(recommended, relevant, k)
    return _result(hits.sum(axis=1), n_rel > 0, "hits_at_k")


def hit_rate_at_k(recommended, relevant, *, k) -> RankingResult:
    """Hit rate (HR@k): per user 1 if a relevant item is in the top ``k``, else 0.

    The mean is the share of users (with at least one relevant item) who got a hit.

    {params}

    {returns}

    Examples
    --------
    >>> hit_rate_at_k([[3, 1], [4, 5]], [[1], [6]], k=2).value
    0.5
    """
    hits, n_rel, k = _ranking_setup(recommended, relevant, k)
    return _result(hits.any(axis=1).astype(np.float64), n_rel > 0, "hit_rate_at_k")


def precision_at_k(recommended, relevant, *, k) -> RankingResult:
    """Precision at k, ``hits@k / k`` (trec_eval ``P_k``; the divisor is always ``k``).

    {params}

    {returns}

    Examples
    --------
    >>> precision_at_k([[3, 1, 2, 0]], [[1, 2]], k=4).value
    0.5
    """
    hits, n_rel, k = _ranking_setup(recommended, relevant, k)
    return _result(hits.sum(axis=1) / k, n_rel > 0, "precision_at_k")


def recall_at_k(recommended, relevant, *, k) -> RankingResult:
    """Recall at k, ``hits@k / #relevant`` (trec_eval ``recall_k``).

    {params}

    {returns}

    Examples
    --------
    >>> recall_at_k([[3, 1, 2, 0]], [[1, 2, 7, 8]], k=2).value
    0.25
    """
    hits, n_rel, k = _ranking_setup(recommended, relevant, k)
    return _result(hits.sum(axis=1) / np.maximum(n_rel, 1), n_rel > 0, "recall_at_k")


def _discounts(n: int) -> np.ndarray:
    return 1.0 / np.log2(np.arange(2, n + 2, dtype=np.float64))


def dcg_at_k(recommended, relevant, *, k) -> RankingResult:
    """Discounted cumulative gain, ``sum_{j<=k} rel(j) / log2(j + 1)`` (binary gain).

    {params}

    {returns}

    Notes
    -----
    Ranks ``j`` start at 1, so the first item has discount 1 (trec_eval ``ndcg_cut``
    before normalisation, Jarvelin and Kekalainen 2002).

    Examples
    --------
    >>> round(dcg_at_k([[3, 1, 2]], [[1, 2]], k=3).value, 6)
    1.13093
    """
    hits, n_rel, k = _ranking_setup(recommended, relevant, k)
    return _result(hits @ _discounts(hits.shape[1]), n_rel > 0, "dcg_at_k")


def ndcg_at_k(recommended, relevant, *, k) -> RankingResult:
    """Normalised DCG, ``DCG@k / IDCG@k`` with ``IDCG@k = sum_{j<=min(#relevant, k)} 1/log2(j+1)``.

    {params}

    {returns}

    Notes
    -----
    Binary gain and ``log2(rank + 1)`` discount; the ideal list puts ``min(#relevant, k)``
    relevant items first (trec_eval ``ndcg_cut_k``). Values lie in [0, 1].

    Examples
    --------
    >>> ndcg_at_k([[1, 2, 3]], [[1, 2]], k=3).value
    1.0
    """
    hits, n_rel, k = _ranking_setup(recommended, relevant, k)
    dcg = hits @ _discounts(hits.shape[1])
    m = int(min(k, n_rel.max(initial=0)))
    ideal = np.concatenate([[0.0], np.cumsum(_discounts(m))])[np.minimum(n_rel, m)]
    return _result(dcg / np.where(ideal > 0, ideal, 1.0), n_rel > 0, "ndcg_at_k")


def map_at_k(recommended, relevant, *, k, normalization="truncated") -> RankingResult:
    """Mean average precision at k: ``AP@k = sum_{j<=k, rel(j)} P@j / D``.

    {params}
    normalization : {"truncated", "trec"}, default "truncated"
        The divisor ``D``: ``min(#relevant, k)`` ("truncated", so that a perfect list scores
        1 even when a user has more than ``k`` relevant items), or ``#relevant`` as in
        trec_eval's ``map_cut_k`` ("trec"). Both agree when ``#relevant <= k``.

    {returns}

    Examples
    --------
    >>> map_at_k([[1, 9, 2]], [[1, 2]], k=3).value
    0.8333333333333333
    """
    if normalization not in ("truncated", "trec"):
        raise ValueError(f"`normalization` must be 'truncated' or 'trec'; "
                         f"got {normalization!r}.")
    hits, n_rel, k = _ranking_setup(recommended, relevant, k)
    prec = np.cumsum(hits, axis=1) / np.arange(1, hits.shape[1] + 1)
    num = (prec * hits).sum(axis=1)
    denom = np.minimum(n_rel, k) if normalization == "truncated" else n_rel
    return _result(num / np.maximum(denom, 1), n_rel > 0, "map_at_k")


def mrr_at_k(recommended, relevant, *, k) -> RankingResult:
    """Reciprocal rank at k: ``1 / rank`` of the first relevant item in the top ``k``, else 0.

    {params}

    {returns}

    Notes
    -----
    trec_eval's ``recip_rank`` without a cut-off is ``mrr_at_k`` with ``k = n_ranked``.

    Examples
    --------
    >>> mrr_at_k([[4, 5, 1]], [[1]], k=3).value
    0.3333333333333333
    """
    hits, n_rel, k = _ranking_setup(recommended, relevant, k)
    first = np.argmax(hits, axis=1)
    rr = np.where(hits.any(axis=1), 1.0 / (first + 1), 0.0)
    return _result(rr, n_rel > 0, "mrr_at_k")


for _f in (hits_at_k, hit_rate_at_k, precision_at_k, recall_at_k, dcg_at_k, ndcg_at_k,
           map_at_k, mrr_at_k):
    _doc(_f)
del _f


# -- beyond accuracy ------------------------------------------------------------------------

def _optional_k(k):
    return None if k is None else _positive_int(k, "k")


def catalog_coverage(recommended, *, n_items, k=None) -> float:
    """Catalogue coverage: share of the ``n_items`` items that appear in some top-``k`` list.

    Parameters
    ----------
    recommended : array_like of int, shape (n_users, n_ranked)
        Item ids in rank order; ids in ``[0, n_items)``, none repeated within a row.
    n_items : int
        Catalogue size, ``>= 1``.
    k : int, optional
        Cut-off (default: whole rows).

    Returns
    -------
    float
        ``|union_u top_k(u)| / n_items`` in [0, 1] (0 when there are no users).

    Raises
    ------
    TypeError, ValueError
        As for the ranking measures; ids outside ``[0, n_items)``.

    Examples
    --------
    >>> catalog_coverage([[0, 1], [1, 2]], n_items=10)
    0.3
    """
    n_items = _positive_int(n_items, "n_items")
    k = _optional_k(k)
    rec = _recommended(recommended, n_items=n_items)
    return float(np.unique(_top(rec, k)).size / n_items)


def _binary_interactions(interactions, name: str) -> sp.csr_array:
    if not sp.issparse(interactions):
        raise TypeError(f"`{name}` must be a scipy.sparse users x items matrix; "
                        f"got {type(interactions).__name__}.")
    m = sp.csr_array(interactions, dtype=np.float64)
    if m.ndim != 2:
        raise ValueError(f"`{name}` must be 2-dimensional; got shape {m.shape}.")
    bad = ~np.isfinite(m.data)
    if bad.any():
        j = int(np.argmax(bad))
        row = int(np.searchsorted(m.indptr, j, side="right") - 1)
        raise ValueError(f"`{name}` must be finite; got {m.data[j]} at ({row}, "
                         f"{m.indices[j]}).")
    # Any stored entry, even a rating of 0, is an interaction.
    m = sp.csr_array((np.ones(m.nnz), m.indices, m.indptr), shape=m.shape)
    m.sum_duplicates()
    m.data[:] = 1.0
    return m


def item_popularity(interactions) -> np.ndarray:
    """Share of users who interacted with each item, ``p(i) = |U_i| / n_users``.

    Parameters
    ----------
    interactions : scipy.sparse matrix, shape (n_users, n_items)
        Every stored entry (including a stored 0, e.g. a Jester rating of 0) is an
        interaction.

    Returns
    -------
    ndarray of float64, shape (n_items,)

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> item_popularity(sp.csr_array([[1, 0], [1, 1]])).tolist()
    [1.0, 0.5]
    """
    m = _binary_interactions(interactions, "interactions")
    if m.shape[0] == 0:
        raise ValueError("`interactions` must have at least one user; got shape "
                         f"{m.shape}.")
    return np.asarray(m.sum(axis=0)).ravel() / m.shape[0]


def novelty(recommended, popularity, *, k=None) -> RankingResult:
    """Novelty of each list, the mean self-information ``-log2 p(i)`` of its top-``k`` items.

    Parameters
    ----------
    recommended : array_like of int, shape (n_users, n_ranked)
        Item ids in rank order, none repeated within a row.
    popularity : array_like of float, shape (n_items,)
        ``p(i)`` in [0, 1], e.g. from :func:`item_popularity`; every recommended item must
        have ``p(i) > 0``.
    k : int, optional
        Cut-off (default: whole rows).

    Returns
    -------
    RankingResult
        Per-user novelty and its mean over all users (nobody is skipped).

    Raises
    ------
    ValueError
        ``popularity`` outside [0, 1] or zero for a recommended item; ids ``>= n_items``.

    Notes
    -----
    Self-information novelty (Zhou et al. 2010; Vargas and Castells 2011), as in the course
    notes: ``novelty(L) = (1/|L|) sum_{i in L} -log2 p(i)``.

    Examples
    --------
    >>> novelty([[0, 1]], [0.5, 0.25]).value
    1.5
    """
    k = _optional_k(k)
    pop = _real_1d(popularity, "popularity")
    bad = (pop < 0) | (pop > 1)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"`popularity` must be in [0, 1]; got {pop[i]} at index {i}.")
    top = _top(_recommended(recommended, n_items=pop.size), k)
    p = pop[top]
    if (p == 0).any():
        u, j = np.argwhere(p == 0)[0]
        raise ValueError(f"`popularity` must be > 0 for every recommended item (-log2 0 is "
                         f"infinite); item {top[u, j]} at [{u}, {j}] has popularity 0.")
    return _result(np.mean(-np.log2(p), axis=1), np.ones(top.shape[0], bool), "novelty")


def cooccurrence_similarity(interactions) -> sp.csr_array:
    """Item-item co-occurrence (binary cosine) similarity, ``|U_i & U_j| / sqrt(|U_i| |U_j|)``.

    Parameters
    ----------
    interactions : scipy.sparse matrix, shape (n_users, n_items)
        Every stored entry is an interaction.

    Returns
    -------
    scipy.sparse.csr_array, shape (n_items, n_items)
        Symmetric, in [0, 1]; rows and columns of never-seen items are empty.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> cooccurrence_similarity(sp.csr_array([[1, 1], [1, 0]])).toarray()[0, 1].round(4)
    np.float64(0.7071)
    """
    b = _binary_interactions(interactions, "interactions")
    c = sp.csr_array(b.T @ b)
    deg = c.diagonal()
    inv = np.zeros_like(deg)
    inv[deg > 0] = 1.0 / np.sqrt(deg[deg > 0])
    d = sp.diags_array(inv)
    return sp.csr_array(d @ c @ d)


_CHUNK = 2048  # users per block: bounds the (chunk, L, L) or (chunk, L, d) temporaries


def intra_list_diversity(recommended, *, item_vectors=None, similarity=None,
                         k=None) -> RankingResult:
    """Intra-list diversity, ``1 - mean_{i != j in L} sim(i, j)`` of each top-``k`` list.

    Parameters
    ----------
    recommended : array_like of int, shape (n_users, n_ranked)
        Item ids in rank order, none repeated within a row; lists of at least 2 items.
    item_vectors : array_like of float, shape (n_items, d), optional
        Item features; ``sim`` is their cosine. A recommended item must not have a zero
        vector.
    similarity : array_like or scipy.sparse matrix, shape (n_items, n_items), optional
        A precomputed similarity, e.g. :func:`cooccurrence_similarity`. Exactly one of
        ``item_vectors`` and ``similarity`` must be given.
    k : int, optional
        Cut-off (default: whole rows); ``min(k, n_ranked) >= 2``.

    Returns
    -------
    RankingResult
        Per-list diversity and its mean over all users (nobody is skipped).

    Notes
    -----
    Ziegler et al. (2005), with the mean over the ``L (L - 1)`` ordered pairs so that a
    non-symmetric similarity counts both directions. For unit vectors the pair sum is
    ``||sum_i x_i||^2 - L``, computed with one sparse product.

    Examples
    --------
    >>> intra_list_diversity([[0, 1]], item_vectors=[[1.0, 0.0], [0.0, 2.0]]).value
    1.0
    """
    k = _optional_k(k)
    if (item_vectors is None) == (similarity is None):
        raise ValueError("Exactly one of `item_vectors` and `similarity` must be given; got "
                         f"{'both' if item_vectors is not None else 'neither'}.")
    if item_vectors is not None:
        v = np.asarray(item_vectors)
        if v.dtype.kind not in "biuf":
            raise TypeError(f"`item_vectors` must hold real numbers; got dtype {v.dtype}.")
        if v.ndim != 2:
            raise ValueError(f"`item_vectors` must be 2-dimensional (n_items, d); "
                             f"got shape {v.shape}.")
        v = v.astype(np.float64)
        if not np.isfinite(v).all():
            i, j = np.argwhere(~np.isfinite(v))[0]
            raise ValueError(f"`item_vectors` must be finite; got {v[i, j]} at [{i}, {j}].")
        n_items = v.shape[0]
    else:
        if sp.issparse(similarity):
            s = sp.csr_array(similarity, dtype=np.float64)
            vals = s.data
        else:
            s = np.asarray(similarity)
            if s.dtype.kind not in "biuf":
                raise TypeError(f"`similarity` must hold real numbers; got dtype {s.dtype}.")
            s = s.astype(np.float64)
            vals = s.ravel()
        if s.ndim != 2 or s.shape[0] != s.shape[1]:
            raise ValueError(f"`similarity` must be square (n_items, n_items); "
                             f"got shape {s.shape}.")
        if not np.isfinite(vals).all():
            raise ValueError(f"`similarity` must be finite; got "
                             f"{vals[~np.isfinite(vals)][0]}.")
        n_items = s.shape[0]
    top = _top(_recommended(recommended, n_items=n_items), k)
    n_users, L = top.shape
    if L < 2:
        raise ValueError(f"`intra_list_diversity` needs lists of at least 2 items; got "
                         f"min(k, n_ranked) = {L}.")
    if item_vectors is not None:
        norms = np.linalg.norm(v, axis=1)
        zero = norms[top] == 0
        if zero.any():
            u, j = np.argwhere(zero)[0]
            raise ValueError(f"`item_vectors` must be non-zero for recommended items (cosine "
                             f"is undefined); item {top[u, j]} at [{u}, {j}] is zero.")
        unit = v / np.where(norms > 0, norms, 1.0)[:, None]
        ind = sp.csr_array((np.ones(top.size), top.ravel(), np.arange(0, top.size + 1, L)),
                           shape=(n_users, n_items))
        total = np.asarray(ind @ unit)
        pair_sum = np.einsum("ij,ij->i", total, total) - L
    else:
        iu, ju = np.nonzero(~np.eye(L, dtype=bool))
        if sp.issparse(s):
            # scipy's element-wise fancy indexing is slow; look the pairs up in the sorted
            # CSR keys instead (absent key = similarity 0).
            s = s.copy()
            s.sum_duplicates()
            keys = (np.repeat(np.arange(n_items, dtype=np.int64), np.diff(s.indptr))
                    * n_items + s.indices)
        pair_sum = np.empty(n_users)
        for lo in range(0, n_users, _CHUNK):
            blk = top[lo:lo + _CHUNK]
            r, c = blk[:, iu].ravel(), blk[:, ju].ravel()
            if sp.issparse(s):
                q = r * n_items + c
                # Sorted needles make the binary searches cache-friendly (~10x here).
                order = np.argsort(q, kind="stable")
                pos = np.empty(q.size, dtype=np.intp)
                pos[order] = np.searchsorted(keys, q[order])
                pos = np.minimum(pos, max(keys.size - 1, 0))
                vals = (np.where(keys[pos] == q, s.data[pos], 0.0) if keys.size
                        else np.zeros(q.size))
            else:
                vals = s[r, c]
            pair_sum[lo:lo + _CHUNK] = vals.reshape(blk.shape[0], -1).sum(axis=1)
    return _result(1.0 - pair_sum / (L * (L - 1)), np.ones(n_users, bool),
                   "intra_list_diversity")


def serendipity(recommended, relevant, baseline, *, k) -> RankingResult:
    """Serendipity: share of each top-``k`` list that is relevant and unexpected.

    ``serendipity(u) = |{i in top_k(u) : i relevant, i not in top_k(baseline_u)}| / k``.

    Parameters
    ----------
    recommended : array_like of int, shape (n_users, n_ranked)
        Item ids in rank order, none repeated within a row.
    relevant : sequence of array_like of int, or scipy.sparse matrix (n_users, n_items)
        As for the ranking measures.
    baseline : array_like of int, shape (n_base,) or (n_users, n_base)
        The "primitive" recommender's ranking (usually popularity), shared by all users
        (1-D) or per user (2-D). Its top ``k`` items are the expected ones.
    k : int
        Cut-off, ``k >= 1``.

    Returns
    -------
    RankingResult
        Mean over users with at least one relevant item; others are skipped (``nan``).

    Raises
    ------
    TypeError, ValueError
        As for the ranking measures, and for ``baseline`` (integer ids, no repeats).

    Notes
    -----
    Ge, Delgado-Battenfeld and Jannach (2010): unexpected = recommended minus the primitive
    model's list; serendipity = |unexpected and useful| / |list|. The divisor is ``k``, as
    for :func:`precision_at_k`.

    Examples
    --------
    >>> serendipity([[5, 0, 6]], [[5, 0]], [0, 1, 2], k=3).value
    0.3333333333333333
    """
    hits, n_rel, k = _ranking_setup(recommended, relevant, k)
    rec = np.asarray(recommended)[:, : hits.shape[1]]
    n_users = hits.shape[0]
    base = np.asarray(baseline)
    if base.ndim == 1:
        base = np.broadcast_to(base, (n_users, base.shape[0]))
    elif base.ndim != 2 or base.shape[0] != n_users:
        raise ValueError(f"`baseline` must be 1-D or have one row per row of `recommended` "
                         f"({n_users}); got shape {np.asarray(baseline).shape}.")
    try:
        base = _recommended(base)
    except (TypeError, ValueError) as exc:
        raise type(exc)(str(exc).replace("`recommended`", "`baseline`")) from None
    btop = _top(base, k)
    bu = np.repeat(np.arange(n_users, dtype=np.int64), btop.shape[1])
    expected = _member(rec.astype(np.int64), bu, btop.ravel())
    return _result((hits & ~expected).sum(axis=1) / k, n_rel > 0, "serendipity")
