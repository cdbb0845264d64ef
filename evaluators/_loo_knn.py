"""Fast exact leave-one-out (LOO) error of user-based kNN collaborative filtering.

Libraries compute the user-user similarities once and reuse them for every held-out rating,
which leaks the held-out rating into its own prediction. :func:`loo_knn` computes the exact
LOO -- as if the model were refitted without each rating -- from running sums per user pair
(Zhang et al., 2016): removing ``r_uk`` only removes the term of item ``k`` from sums over the
co-rated set (and shifts ``mean_u``), an O(1) correction per candidate neighbour.
"""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from evaluators._loo_knn_naive import (
    KIND_GLOBAL_MEAN,
    KIND_USER_MEAN,
    SIMILARITIES,
    ZERO_REL,
    loo_knn_naive,
)
from recloop_base.executors import check_executor, executor_threads, run_partitions, split_by_cost
from recloop_base.threads import n_threads, thread_map
from recloop_base.validation import ArgumentValueError, as_generator, check_int

__all__ = ["LooKnnWarning", "LooResult", "kfold_loo_knn", "loo_knn"]

_METHODS = ("fast", "naive")


class LooKnnWarning(UserWarning):
    """Degenerate but legal input in :func:`loo_knn` (nothing held out, one rating in all)."""


@dataclass(frozen=True, eq=False)
class LooResult:
    """Exact leave-one-out predictions of user-based kNN.

    Attributes
    ----------
    user, item : ndarray (n_held,)
        Ids of the held-out ratings (as given; row/column indices for sparse input).
    rating : float ndarray (n_held,)
        The held-out ratings.
    prediction : float ndarray (n_held,)
        Prediction of each rating from the data without it (clipped if ``clip`` was given).
    n_neighbours : int ndarray (n_held,)
        Neighbours used (0 for a fallback).
    index : int ndarray (n_held,)
        Position of each held-out rating in the input (tuple input: the arrays' order;
        sparse input: row-major (user, item) order of the stored entries). Increasing.
    fallback : int8 ndarray (n_held,)
        0 = neighbours, 1 = no neighbour (user mean), 2 = no other rating of the user
        (mean of all remaining ratings).
    mae, rmse : float
        Mean absolute and root mean squared error (``nan`` when nothing was held out).
    n_fallback, n_fallback_user_mean, n_fallback_global_mean : int
        Count of fallbacks, in total and per kind.
    similarity : str
    k : int
    fold : int ndarray (n_held,) or None
        Fold of each rating (:func:`kfold_loo_knn` only).
    """

    user: np.ndarray
    item: np.ndarray
    rating: np.ndarray
    prediction: np.ndarray
    n_neighbours: np.ndarray
    index: np.ndarray
    fallback: np.ndarray
    mae: float
    rmse: float
    n_fallback: int
    n_fallback_user_mean: int
    n_fallback_global_mean: int
    similarity: str
    k: int
    fold: np.ndarray | None = None

    @property
    def n(self) -> int:
        """Number of held-out ratings."""
        return int(self.rating.size)


# --------------------------------------------------------------------------- validation


@dataclass(frozen=True, eq=False)
class _Data:
    """Validated observations: dense indices plus the ids they stand for."""

    user: np.ndarray      # (n,) dense user index, users ordered by id
    item: np.ndarray      # (n,) dense item index
    rating: np.ndarray    # (n,) float64
    user_ids: np.ndarray  # (n_users,) id of each dense user index
    item_ids: np.ndarray  # (n_items,)
    sparse: bool
    n_rows: int           # rows of a sparse input (valid user ids are 0..n_rows-1)


def _as_data(ratings) -> _Data:
    if sp.issparse(ratings):
        coo = ratings.tocoo()
        if coo.ndim != 2:
            raise ValueError(f"`ratings` must be a 2-D sparse matrix; got ndim={coo.ndim}.")
        order = np.lexsort((coo.col, coo.row))  # row-major, stable
        users = np.asarray(coo.row)[order].astype(np.int64)
        items = np.asarray(coo.col)[order].astype(np.int64)
        values = np.asarray(coo.data)[order]
        sparse, n_rows = True, coo.shape[0]
    elif isinstance(ratings, (tuple, list)):
        if len(ratings) != 3:
            raise ValueError(
                "`ratings` must be a (users, items, ratings) tuple of three arrays; "
                f"got a {type(ratings).__name__} of length {len(ratings)}."
            )
        users, items, values = (np.asarray(a) for a in ratings)
        for name, a in (("users", users), ("items", items), ("ratings", values)):
            if a.ndim != 1:
                raise ValueError(f"`ratings`: the {name} array must be 1-D; got shape {a.shape}.")
        if not users.size == items.size == values.size:
            raise ValueError(
                "`ratings`: users, items and ratings must have equal lengths; got "
                f"{users.size}, {items.size} and {values.size}."
            )
        for name, a in (("users", users), ("items", items)):
            if a.dtype.kind not in "iu":
                raise TypeError(f"`ratings`: the {name} array must hold integer ids; "
                                f"got dtype {a.dtype}.")
            if a.size and a.min() < 0:
                j = int(np.argmax(a < 0))
                raise ValueError(f"`ratings`: the {name} array must hold ids >= 0; got "
                                 f"{a[j]} at index {j}.")
        sparse, n_rows = False, 0
    else:
        raise TypeError(
            "`ratings` must be a (users, items, ratings) tuple of arrays or a scipy.sparse "
            f"matrix; got {type(ratings).__name__}."
        )
    if values.dtype.kind not in "iuf" or values.dtype.kind == "b":
        raise TypeError(f"`ratings`: ratings must be real numbers; got dtype {values.dtype}.")
    values = values.astype(np.float64)
    if values.size == 0:
        raise ValueError("`ratings` must hold at least one observation; got none.")
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        where = "entry" if sparse else "index"
        raise ValueError(f"`ratings` must be finite; got {values[bad[0]]} at {where} {bad[0]}.")
    user_ids, user = np.unique(users, return_inverse=True)
    item_ids, item = np.unique(items, return_inverse=True)
    user, item = user.astype(np.int64), item.astype(np.int64)
    order = np.lexsort((np.arange(user.size), item, user))
    same = (np.diff(user[order]) == 0) & (np.diff(item[order]) == 0)
    if same.any():
        # the duplicate whose repetition comes first in the input
        dup = np.flatnonzero(same)
        second = order[dup + 1]
        j = np.argmin(second)
        # walk back to the first occurrence of the pair
        g = dup[j]
        while g > 0 and same[g - 1]:
            g -= 1
        first = order[g]
        raise ValueError(
            f"`ratings` has a duplicate (user, item) pair ({users[second[j]]}, "
            f"{items[second[j]]}) at positions {first} and {second[j]}; each pair may be "
            "rated once."
        )
    return _Data(user, item, values, user_ids, item_ids, sparse, n_rows)


def _user_mask(data: _Data, ids, name: str) -> np.ndarray:
    """Boolean mask over dense users from an array of user ids (None = all)."""
    n_users = data.user_ids.size
    if ids is None:
        return np.ones(n_users, dtype=bool)
    a = np.asarray(ids)
    if a.ndim != 1:
        raise ValueError(f"`{name}` must be a 1-D array of user ids; got shape {a.shape}.")
    if a.size and a.dtype.kind not in "iu":
        raise TypeError(f"`{name}` must hold integer user ids; got dtype {a.dtype}.")
    a = a.astype(np.int64)
    pos = np.searchsorted(data.user_ids, a)
    found = (pos < n_users) & (data.user_ids[np.minimum(pos, n_users - 1)] == a)
    if data.sparse:
        out = (a < 0) | (a >= data.n_rows)
        if out.any():
            raise ValueError(f"`{name}` must be row indices in [0, {data.n_rows}); got "
                             f"{a[np.argmax(out)]}.")
    elif not found.all():
        raise ValueError(f"`{name}` must be ids of users with ratings; got {a[np.argmax(~found)]}, "
                         "which has none.")
    mask = np.zeros(n_users, dtype=bool)
    mask[pos[found]] = True  # rows of a sparse matrix without ratings hold nothing out
    return mask


def _check_options(similarity, k, min_support, method, clip):
    if not isinstance(similarity, str) or similarity not in SIMILARITIES:
        raise ValueError(f"`similarity` must be one of {', '.join(map(repr, SIMILARITIES))}; "
                         f"got {similarity!r}.")
    for name, value, low in (("k", k, 1), ("min_support", min_support, 0)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"`{name}` must be an integer; got {type(value).__name__} {value!r}.")
        if value < low:
            raise ValueError(f"`{name}` must be >= {low}; got {value}.")
    if method not in _METHODS:
        raise ValueError(f"`method` must be one of {', '.join(map(repr, _METHODS))}; "
                         f"got {method!r}.")
    if clip is not None:
        try:
            lo, hi = (float(c) for c in clip)
        except (TypeError, ValueError):
            raise TypeError("`clip` must be None or a (low, high) pair of numbers; "
                            f"got {clip!r}.") from None
        if not (np.isfinite(lo) and np.isfinite(hi) and lo <= hi):
            raise ValueError(f"`clip` must be finite with low <= high; got {clip!r}.")
        return lo, hi
    return None


#: Bound on ``max|r|^2 * m^3`` (m: the largest number of ratings of a user): the largest
#: intermediate of the similarities is the product of pearson's two scaled sums of squares,
#: at most ``m^6 max|r|^4``, which must stay below float64's maximum (1.8e308).
_MAGNITUDE_LIMIT = 1e150


def _check_magnitude(data: _Data) -> None:
    """ValueError when the ratings are so large that the similarity sums overflow float64."""
    r = data.rating
    m = float(np.bincount(data.user).max())
    limit = math.sqrt(_MAGNITUDE_LIMIT / m ** 3)
    big = np.flatnonzero(np.abs(r) > limit)
    if big.size:
        j = int(big[0])
        where = "entry" if data.sparse else "index"
        raise ValueError(f"`ratings` must have magnitudes <= {limit:.3g} here (squared, times "
                         f"the cube of the largest profile, {int(m)} ratings, they must stay "
                         f"below 1e150, or the similarity sums overflow float64); got "
                         f"{r[j]:g} at {where} {j}.")


# --------------------------------------------------------------------------- fast method


class _Prepared:
    """Per-user and per-item sums and orderings of the full data, shared by k-fold runs."""

    def __init__(self, data: _Data):
        self.data = data
        u, i, r = data.user, data.item, data.rating
        self.n_users, self.n_items = data.user_ids.size, data.item_ids.size
        nu, ni = self.n_users, self.n_items
        self.total = float(np.sum(r))
        self.cnt_u = np.bincount(u, minlength=nu).astype(np.float64)
        self.sum_u = np.bincount(u, weights=r, minlength=nu)
        self.sq_u = np.bincount(u, weights=r * r, minlength=nu)
        self.cnt_i = np.bincount(i, minlength=ni).astype(np.float64)
        self.sum_i = np.bincount(i, weights=r, minlength=ni)
        self.mean_u = self.sum_u / self.cnt_u
        with np.errstate(invalid="ignore", divide="ignore"):
            self.mean_i = self.sum_i / self.cnt_i
        # raters of each item, sorted by user index (ties go to the lower index)
        self.order_i = np.lexsort((u, i))
        self.istart = np.searchsorted(i[self.order_i], np.arange(ni + 1))
        # each user's ratings, items ascending, with their input positions
        self.u_pos = np.lexsort((i, u))
        self.u_ptr = np.searchsorted(u[self.u_pos], np.arange(nu + 1))
        self.u_item, self.u_rating = i[self.u_pos], r[self.u_pos]

    @property
    def dev(self) -> np.ndarray:
        """Deviation of every rating from its (full-data) item mean."""
        return self.data.rating - self.mean_i[self.data.item]


def _kernel_args(prep: _Prepared, allowed, similarity, k, min_support) -> tuple:
    """The kernel's read-only inputs, shared by every partition (scattered once to a cluster).

    Ids as int32 when they fit (half the memory of the two largest arrays); deviations only
    for adjusted cosine. Per rating: 24 bytes (40 with adjusted cosine).
    """
    d = prep.data
    ids = np.int32 if max(prep.n_users, prep.n_items) < 2**31 else np.int64
    if similarity == "adjusted_cosine":
        dev = prep.dev
        dev_sq_u = np.bincount(d.user, weights=dev * dev, minlength=prep.n_users)
        u_dev, i_dev = dev[prep.u_pos], dev[prep.order_i]
    else:  # never read by the kernel
        u_dev = i_dev = np.zeros(1)
        dev_sq_u = prep.sq_u
    return (prep.u_ptr, prep.u_item.astype(ids), prep.u_rating, u_dev, prep.istart,
            d.user[prep.order_i].astype(ids), d.rating[prep.order_i], i_dev,
            np.ascontiguousarray(allowed, dtype=np.bool_), prep.cnt_u, prep.sum_u, prep.sq_u,
            dev_sq_u, prep.cnt_i, prep.sum_i, prep.mean_i, SIMILARITIES.index(similarity), k,
            min_support, ZERO_REL, prep.total, d.rating.size)


def _loo_partition(args, part):
    """Predictions, neighbour counts and kinds of the ratings of the users ``part[0]`` (sorted),
    compact: user by user, items ascending. ``part[1]``: threads (None: this worker's budget);
    ``part[2]``: run the kernel's Python version (tests only)."""
    from evaluators._loo_kernels import loo_users  # numba: imported on first use only

    held, threads, python = part
    kernel = loo_users.py_func if python else loo_users
    u_ptr = args[0]
    off = np.zeros(held.size + 1, dtype=np.int64)
    np.cumsum(u_ptr[held + 1] - u_ptr[held], out=off[1:])
    m = int(off[-1])
    pred = np.empty(m)
    n_nb = np.empty(m, dtype=np.int64)
    kind = np.empty(m, dtype=np.int8)
    threads = n_threads() if threads is None else threads
    if threads == 1 or held.size < 2:
        kernel(held, off, *args, pred, n_nb, kind)
    else:
        # many small chunks balance heavy and light users over the threads; outputs are
        # disjoint, so the result does not depend on the schedule
        chunks = np.array_split(np.arange(held.size), min(held.size, 16 * threads))
        thread_map(lambda c: kernel(held[c], off[c], *args, pred, n_nb, kind), chunks,
                   threads)
    return pred, n_nb, kind


def _fast(prep: _Prepared, held_user, allowed, similarity, k, min_support, *, python=False,
          executor=None, n_partitions=None, progress=False):
    """Predictions of all ratings (nan where not held out), neighbour counts and kinds.

    The held-out users are cut into partitions of near-equal work (contiguous in user
    order), run on this process's threads or as tasks of a Dask client (``executor``), and
    put back in place: each rating is computed by one kernel call from the same read-only
    inputs, so neither the executor nor the number of partitions changes a bit.
    ``python=True`` runs the kernel's pure-Python version (tests only).
    """
    d = prep.data
    n = d.rating.size
    held = np.flatnonzero(held_user)
    args = _kernel_args(prep, allowed, similarity, k, min_support)
    # work of a held-out user: both passes scan the raters of each of its items
    cost = np.bincount(d.user, weights=prep.cnt_i[d.item], minlength=prep.n_users)[held]
    if executor is None:
        threads = 1 if python else n_threads()
        default = 1 if threads == 1 else 16 * threads
        parts = split_by_cost(cost, n_partitions or default)
        items = [(held[r], 1, python) for r in parts]
    else:
        threads = 1
        parts = split_by_cost(cost, n_partitions or 4 * executor_threads(executor))
        items = [(held[r], None, False) for r in parts]
    done = run_partitions(_loo_partition, items, shared=(args,), executor=executor,
                          threads=threads, progress=progress, desc="loo_knn")
    pred = np.full(n, np.nan)
    n_nb = np.zeros(n, dtype=np.int64)
    kind = np.zeros(n, dtype=np.int8)
    if done:
        # the partitions' outputs, in order, follow the held users' ratings in CSR order
        pos = prep.u_pos[np.flatnonzero(held_user[prep.data.user[prep.u_pos]])]
        pred[pos] = np.concatenate([p[0] for p in done])
        n_nb[pos] = np.concatenate([p[1] for p in done])
        kind[pos] = np.concatenate([p[2] for p in done])
    return pred, n_nb, kind


# --------------------------------------------------------------------------- public API


def _run(prep, held_user, allowed, similarity, k, min_support, method, *, executor=None,
         n_partitions=None, progress=False):
    d = prep.data
    if method == "fast":
        pred, n_nb, kind = _fast(prep, held_user, allowed, similarity, k, min_support,
                                 executor=executor, n_partitions=n_partitions,
                                 progress=progress)
        idx = np.flatnonzero(held_user[d.user])
        return idx, pred[idx], n_nb[idx], kind[idx]
    held = held_user[d.user]
    pred, n_nb, kind = loo_knn_naive(d.user, d.item, d.rating, prep.n_users, prep.n_items, held,
                                     allowed, similarity=similarity, k=k,
                                     min_support=min_support)
    return np.flatnonzero(held), pred, n_nb, kind


def _result(d: _Data, idx, pred, n_nb, kind, clip, similarity, k, fold=None) -> LooResult:
    if clip is not None:
        pred = np.clip(pred, clip[0], clip[1])
    r = d.rating[idx]
    if idx.size == 0:
        warnings.warn("loo_knn: no rating was held out; mae and rmse are nan.", LooKnnWarning,
                      stacklevel=3)
        mae = rmse = np.nan
    else:
        err = pred - r
        mae = float(np.mean(np.abs(err)))
        rmse = float(np.sqrt(np.mean(err * err)))
        if np.isnan(mae):
            warnings.warn("loo_knn: the data hold a single rating, which cannot be predicted "
                          "from the rest; mae and rmse are nan.", LooKnnWarning, stacklevel=3)
    arrays = dict(user=d.user_ids[d.user[idx]], item=d.item_ids[d.item[idx]], rating=r,
                  prediction=pred, n_neighbours=n_nb, index=idx, fallback=kind, fold=fold)
    for a in arrays.values():
        if a is not None:
            a.flags.writeable = False
    n_user_mean = int(np.sum(kind == KIND_USER_MEAN))
    n_global = int(np.sum(kind == KIND_GLOBAL_MEAN))
    return LooResult(**arrays, mae=mae, rmse=rmse, n_fallback=n_user_mean + n_global,
                     n_fallback_user_mean=n_user_mean, n_fallback_global_mean=n_global,
                     similarity=similarity, k=int(k))


def loo_knn(ratings, *, similarity="pearson", k=20, min_support=1, users=None,
            neighbours=None, method="fast", clip=None, executor=None, n_partitions=None,
            progress=False) -> LooResult:
    r"""Exact leave-one-out error of user-based kNN rating prediction.

    Each observed rating ``r_uk`` is removed in turn and predicted from the remaining data
    alone, exactly as if the model were refitted without it.

    Parameters
    ----------
    ratings : tuple of three arrays (n,) or scipy.sparse matrix (n_users, n_items)
        ``(users, items, ratings)``: integer user ids, integer item ids, finite real ratings;
        or a sparse matrix whose *stored* entries are the observations (an explicitly stored
        0 is a rating of 0, as in Jester). Each (user, item) pair at most once.
    similarity : {"pearson", "cosine", "adjusted_cosine", "pearson_corated", "cosine_corated"}
        See Notes.
    k : int, default 20
        Maximum number of neighbours, >= 1.
    min_support : int, default 1
        Candidates with fewer co-rated items are dropped (0 acts as 1: an empty co-rated set
        has similarity 0 or a zero denominator).
    users : array of user ids, optional
        Only these users' ratings are held out (default: all users).
    neighbours : array of user ids, optional
        Only these users may be neighbours (default: all). With ``users`` this gives the
        k-fold protocol of the paper; see :func:`kfold_loo_knn`. Every user's ratings still
        count in means and item means.
    method : {"fast", "naive"}
        ``"fast"``: running sums per user pair, vectorised per item. ``"naive"``: the literal
        definition, one candidate at a time (slow reference).
    clip : (low, high), optional
        Clip the predictions (fallbacks included) to this range. No clipping by default.
    executor : None or dask.distributed.Client
        ``None``: this process, on its threads (``RECLOOP_THREADS``). A client: the
        held-out users are partitioned over the cluster's workers, the shared inputs
        scattered once to each (see Notes for the memory per worker). Same result, bit for
        bit, whatever the executor. ``method="fast"`` only.
    n_partitions : int >= 1, optional
        Partitions of the held-out users, of near-equal work (default: 16 per thread here,
        4 per worker thread on a cluster). Changes nothing but the schedule.
    progress : bool, default False
        A tqdm bar over the partitions.

    Returns
    -------
    LooResult
        Per held-out rating (in input order): ids, rating, prediction, neighbour count,
        fallback kind; ``mae``, ``rmse`` and fallback counts.

    Raises
    ------
    TypeError
        Wrong type of ``ratings``, ids, ``k``, ``min_support``, ``clip``, ``n_partitions``;
        ``executor`` neither None nor a ``dask.distributed.Client``.
    ValueError
        Mismatched array lengths, a duplicate (user, item) pair (the first is named), a NaN
        or infinite rating, ratings so large that the similarity sums would overflow float64
        (``max|r|^2 * m^3 > 1e150``, m the largest number of ratings of a user), ``k <= 0``,
        an unknown ``similarity`` or ``method``, ids in ``users``/``neighbours`` without
        ratings, ``n_partitions < 1``, an ``executor`` with ``method="naive"``, a closed or
        unreachable client (before any work is sent).

    Notes
    -----
    Definition (issue 5). For a held-out ``(u, k)``, ``mean_w`` is the mean of w's
    remaining ratings (u's without k). Candidates are the users ``v != u`` (in
    ``neighbours``) who rated k; ``C = (I_u \ {k}) ∩ I_v``.

    * pearson: :math:`\sum_C (r_{ui}-\bar r_u)(r_{vi}-\bar r_v) /
      \sqrt{\sum_C (r_{ui}-\bar r_u)^2 \sum_C (r_{vi}-\bar r_v)^2}`
    * cosine: :math:`\sum_C r_{ui} r_{vi} / \sqrt{\sum_{I_u \setminus k} r_{ui}^2
      \sum_{I_v} r_{vi}^2}`
    * adjusted_cosine: cosine of the deviations from the item means, the item means
      recomputed without ``r_uk``.
    * pearson_corated / cosine_corated: as pearson / cosine with means / norms over C only
      (the convention of the Surprise library).

    A candidate with ``|C| < min_support`` or a zero denominator factor is dropped; a factor
    ``D`` (a sum of squares) counts as zero when ``D <= 1e-12 M``, ``M`` the sum of the squared
    magnitudes it is computed from, so that rounding residues of exactly-zero variances do not
    produce arbitrary similarities. Neighbours: the candidates whose similarity rounded to 10
    decimals is > 0, the k largest by that rounded value, ties to the lower user id.
    Prediction: :math:`\bar r_u + \sum_N s_v (r_{vk} - \bar r_v) / \sum_N s_v`; with no
    neighbour, :math:`\bar r_u`; when u has no other rating, the mean of all remaining
    ratings.

    The fast method follows the running-sums idea of Zhang et al. (2016), fast exact LOO for
    kNN collaborative filtering (``DESIGN.md``, source 2): for a held-out user u, one pass over
    the raters of u's items accumulates, for every other user v at once, the sums over
    ``I_u ∩ I_v`` of ``r_ui r_vi``, ``r_ui``, ``r_vi``, ``r_ui^2``, ``r_vi^2`` and the count;
    removing ``r_uk`` then subtracts the term of item k (and shifts ``mean_u``) in O(1) per
    candidate. Pearson is evaluated scaled by ``(|I_u| - 1) |I_v|``, which makes its numerator
    and denominators exact integers for integer ratings. Where a Pearson factor is a small
    difference of large sums (below a thousandth of its magnitude: ratings nearly equal over
    ``C`` and far from their mean, as Jester's continuous ratings often are), the running sums
    lose the digits that decide a tie at the 10th decimal; the factors are then computed again
    over ``C`` from centred ratings, as the definition does. Time
    ``O(sum_k |raters(k)|^2)`` (a numba kernel, run over partitions of users in threads or on
    a Dask cluster).

    Memory. No users x users or users x items array is ever built. With ``n`` ratings,
    ``U`` users, ``I`` items and ``t`` threads per process:

    * this process (the driver) holds the input, its validated and sorted copies and the
      outputs: about ``90 n`` bytes beyond the input arrays at its peak (measured: +339 MB
      for n = 4,000,000);
    * each Dask worker holds the shared kernel inputs, ``24 n + 41 U + 32 I`` bytes (``40 n
      + ...`` for adjusted cosine; ids as int32), the outputs of the partitions it is
      running, 17 bytes per held-out rating, and one accumulator row of 64 bytes per user
      for each thread, ``64 U t``: measured 27 bytes per rating above the worker's ~215 MB
      runtime (+103 MB at n = 4,000,000). For MovieLens-25M (n = 25,000,095,
      U = 162,541, I = 59,047) that is about 0.65 GB per worker, 0.85 GB with the runtime.

    Examples
    --------
    >>> import numpy as np
    >>> from evaluators import loo_knn
    >>> users = np.array([0, 0, 0, 1, 1, 1, 2, 2])
    >>> items = np.array([0, 1, 2, 0, 1, 2, 0, 1])
    >>> r = np.array([5.0, 3.0, 4.0, 4.0, 2.0, 4.0, 1.0, 5.0])
    >>> res = loo_knn((users, items, r), similarity="cosine", k=2)
    >>> res.prediction.shape, res.n
    ((8,), 8)
    """
    data = _as_data(ratings)
    clip = _check_options(similarity, k, min_support, method, clip)
    if n_partitions is not None:
        n_partitions = check_int(n_partitions, "n_partitions", low=1)
    executor = check_executor(executor)
    if executor is not None and method != "fast":
        raise ValueError(f"`executor` runs method='fast' only; got method={method!r} (the "
                         f"naive reference runs in this process).")
    held_user = _user_mask(data, users, "users")
    allowed = _user_mask(data, neighbours, "neighbours")
    if not allowed.any():
        raise ArgumentValueError("neighbours", "ids of at least one user with ratings (without "
                                 "a neighbour every prediction is the user's mean)",
                                 "none" if np.size(neighbours) == 0 else
                                 "only rows without ratings")
    _check_magnitude(data)
    prep = _Prepared(data)
    idx, pred, n_nb, kind = _run(prep, held_user, allowed, similarity, int(k),
                                 int(min_support), method, executor=executor,
                                 n_partitions=n_partitions, progress=bool(progress))
    return _result(data, idx, pred, n_nb, kind, clip, similarity, k)


def kfold_loo_knn(ratings, n_folds=10, *, rng=None, similarity="pearson", k=20, min_support=1,
                  method="fast", clip=None) -> LooResult:
    """Exact LOO by user folds: active users in the test fold, neighbours from the others.

    The users are shuffled with ``rng`` and split into ``n_folds`` folds of near-equal size.
    For each fold, every rating of its users is held out (exact LOO: the user's other
    ratings stay) and predicted from neighbours outside the fold. Each rating is predicted
    once; the result covers all ratings in input order, with ``fold`` set.

    Parameters
    ----------
    ratings : tuple of three arrays (n,) or scipy.sparse matrix
        As in :func:`loo_knn`.
    n_folds : int, default 10
        Between 2 and the number of users with ratings.
    rng : None, int, SeedSequence or Generator
        Source of the fold assignment; same seed, same folds.
    similarity, k, min_support, method, clip
        As in :func:`loo_knn`.

    Returns
    -------
    LooResult
        With ``fold`` (n,) giving each rating's fold; ``mae``/``rmse`` over all ratings.

    Raises
    ------
    TypeError, ValueError
        As :func:`loo_knn`; ``n_folds`` not an integer in [2, n_users].

    Notes
    -----
    The k-fold protocol of Zhang et al. (2016): folds of users, the active users
    of a fold are evaluated by LOO on their own ratings, neighbours come from the other folds.
    The pair sums are computed once and shared by all folds.
    """
    data = _as_data(ratings)
    clip = _check_options(similarity, k, min_support, method, clip)
    n_users = data.user_ids.size
    if isinstance(n_folds, bool) or not isinstance(n_folds, numbers.Integral):
        raise TypeError(f"`n_folds` must be an integer; got {type(n_folds).__name__} {n_folds!r}.")
    if not 2 <= n_folds <= n_users:
        raise ValueError(f"`n_folds` must be in [2, {n_users}] (the number of users with "
                         f"ratings); got {n_folds}.")
    rng = as_generator(rng)
    fold_of_user = np.empty(n_users, dtype=np.int64)
    for f, part in enumerate(np.array_split(rng.permutation(n_users), n_folds)):
        fold_of_user[part] = f
    _check_magnitude(data)
    prep = _Prepared(data)
    n = data.rating.size
    pred = np.empty(n)
    n_nb = np.empty(n, dtype=np.int64)
    kind = np.empty(n, dtype=np.int8)
    for f in range(n_folds):
        in_fold = fold_of_user == f
        idx, p, c, kd = _run(prep, in_fold, ~in_fold, similarity, int(k), int(min_support), method)
        pred[idx], n_nb[idx], kind[idx] = p, c, kd
    fold = fold_of_user[data.user]
    return _result(data, np.arange(n), pred, n_nb, kind, clip, similarity, k, fold=fold)
