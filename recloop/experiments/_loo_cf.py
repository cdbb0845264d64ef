"""The leak of "fit once" kNN evaluation, measured against the exact leave-one-out (issue 5).

Libraries compute the user-user similarity once, on all the data, and reuse it to predict
every held-out rating: the held-out rating has then already shaped the similarities (and the
means) that predict it. :func:`evaluators.loo_knn` computes the exact leave-one-out -- as if
the model were refitted without each rating -- which is the truth of this experiment. Beside
it, :func:`fit_once_knn` computes the two leaky protocols with the same neighbour rules:

* ``fit_once``: similarities and means from all the data, the user excluded from its own
  neighbours;
* ``fit_once_self``: the same, the user counted as its own neighbour (what a library returns
  when asked to predict its training ratings; Surprise's convention).

:func:`fast_loo_cf` puts their MAE and RMSE beside the exact LOO's, per similarity, on a
synthetic MovieLens-100K-shaped set (:func:`synthetic_ratings`) or on a rating file.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import scipy.sparse as sp

from recloop._registry import EvaluationKind
from recloop._results import Measurement
from recloop._schema import Bool, FilePath, Float, Int, ListOf, Param, Str
from recloop_base.validation import as_generator, check_int

__all__ = ["DATA_FORMATS", "FitOnceResult", "KIND", "SIMILARITIES", "fast_loo_cf", "fit_once_knn",
           "load_ratings", "plot_fast_loo_cf", "synthetic_ratings"]

EVALUATION = "fast_loo_cf"

#: The similarities of :func:`evaluators.loo_knn` (same names, same definitions).
SIMILARITIES = ("pearson", "cosine", "adjusted_cosine", "pearson_corated", "cosine_corated")

# The neighbour rules of evaluators.loo_knn, repeated here so that the leaky protocols differ
# from the exact LOO only by the leak: similarities ranked after rounding to 10 decimals, a
# denominator factor D (a sum of squares) treated as zero when D <= 1e-12 * M (M: the sum of
# squared magnitudes D is computed from), which absorbs the rounding residue of the
# difference-of-sums formulas.
_ROUND = 10
_ZERO_REL = 1e-12
_Z = 1.959963984540054


# -- validation ---------------------------------------------------------------------------------


def _check_similarity(name, value):
    if not isinstance(value, str) or value not in SIMILARITIES:
        raise ValueError(f"`{name}` must be one of {', '.join(map(repr, SIMILARITIES))}; got "
                         f"{value!r}.")
    return value


def _check_clip(clip):
    if clip is None:
        return None
    try:
        lo, hi = (float(c) for c in clip)
    except (TypeError, ValueError):
        raise TypeError(f"`clip` must be None or a (low, high) pair of numbers; got {clip!r}."
                        ) from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
        raise ValueError(f"`clip` must be finite with low <= high; got {clip!r}.")
    return lo, hi


def _check_ratings(ratings):
    """(users, items, ratings) arrays, validated; ids may be any integers."""
    if not isinstance(ratings, (tuple, list)) or len(ratings) != 3:
        raise TypeError("`ratings` must be a (users, items, ratings) tuple of three arrays; got "
                        f"{type(ratings).__name__}.")
    users, items, values = (np.asarray(a) for a in ratings)
    for name, a in (("users", users), ("items", items), ("ratings", values)):
        if a.ndim != 1:
            raise ValueError(f"`ratings`: the {name} array must be 1-D; got shape {a.shape}.")
    if not users.size == items.size == values.size:
        raise ValueError(f"`ratings`: users, items and ratings must have equal lengths; got "
                         f"{users.size}, {items.size} and {values.size}.")
    if users.size == 0:
        raise ValueError("`ratings` must hold at least one observation; got none.")
    for name, a in (("users", users), ("items", items)):
        if a.dtype.kind not in "iu":
            raise TypeError(f"`ratings`: the {name} array must hold integer ids; got dtype "
                            f"{a.dtype}.")
    if values.dtype.kind not in "iuf":
        raise TypeError(f"`ratings`: ratings must be real numbers; got dtype {values.dtype}.")
    values = values.astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        raise ValueError(f"`ratings` must be finite; got {values[bad[0]]} at index {bad[0]}.")
    _, u = np.unique(users, return_inverse=True)
    _, i = np.unique(items, return_inverse=True)
    u, i = u.astype(np.int64).ravel(), i.astype(np.int64).ravel()
    order = np.lexsort((np.arange(u.size), i, u))
    dup = np.flatnonzero((np.diff(u[order]) == 0) & (np.diff(i[order]) == 0))
    if dup.size:
        j = order[dup[0] + 1]
        raise ValueError(f"`ratings` has a duplicate (user, item) pair ({users[j]}, {items[j]}) "
                         f"at index {j}; each pair may be rated once.")
    return u, i, values


# -- the leaky protocols ------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class FitOnceResult:
    """Predictions of user-based kNN fitted once on all the ratings (leaky protocols).

    Attributes
    ----------
    rating, prediction : float ndarray (n,)
        Every rating and its prediction, in input order.
    n_neighbours : int ndarray (n,)
        Neighbours used (0: the user's mean was returned).
    mae, rmse : float
    similarity : str
    k : int
    include_self : bool
        Whether the user could be its own neighbour (``fit_once_self``).
    """

    rating: np.ndarray
    prediction: np.ndarray
    n_neighbours: np.ndarray
    mae: float
    rmse: float
    similarity: str
    k: int
    include_self: bool


def _similarity_matrix(u, i, r, n_users, n_items, similarity, min_support):
    """Dense (n_users, n_users) similarities on all the data and which of them are usable."""
    R = sp.csr_array((r, (u, i)), shape=(n_users, n_items))
    B = sp.csr_array((np.ones_like(r), (u, i)), shape=(n_users, n_items))
    R2 = sp.csr_array((r * r, (u, i)), shape=(n_users, n_items))
    cnt_u = np.bincount(u, minlength=n_users).astype(np.float64)
    mean_u = np.bincount(u, weights=r, minlength=n_users) / cnt_u
    N = (B @ B.T).toarray()  # |I_u ∩ I_v|
    if similarity == "pearson":  # full-profile means, sums over the co-rated set
        dev = r - mean_u[u]
        Dc = sp.csr_array((dev, (u, i)), shape=R.shape)
        D2 = sp.csr_array((dev * dev, (u, i)), shape=R.shape)
        num = (Dc @ Dc.T).toarray()
        du = (D2 @ B.T).toarray()
        dv = du.T
        mu = (R2 @ B.T).toarray() + N * mean_u[:, None] ** 2
        mv = mu.T
    elif similarity == "pearson_corated":  # means over the co-rated set only
        SX = (R @ B.T).toarray()    # sum over C of u's ratings
        QX = (R2 @ B.T).toarray()   # sum over C of u's squared ratings
        with np.errstate(invalid="ignore", divide="ignore"):
            num = (R @ R.T).toarray() - SX * SX.T / N
            du = QX - SX * SX / N
        dv, mu, mv = du.T, QX, QX.T
    elif similarity == "cosine":
        sq = np.bincount(u, weights=r * r, minlength=n_users)
        num = (R @ R.T).toarray()
        du = mu = np.broadcast_to(sq[:, None], num.shape)
        dv = mv = np.broadcast_to(sq[None, :], num.shape)
    elif similarity == "cosine_corated":
        num = (R @ R.T).toarray()
        du = mu = (R2 @ B.T).toarray()
        dv = mv = du.T
    else:  # adjusted_cosine: deviations from the item means, full-profile norms
        cnt_i = np.bincount(i, minlength=n_items).astype(np.float64)
        mean_i = np.bincount(i, weights=r, minlength=n_items) / np.maximum(cnt_i, 1.0)
        e = r - mean_i[i]
        E = sp.csr_array((e, (u, i)), shape=R.shape)
        num = (E @ E.T).toarray()
        esq = np.bincount(u, weights=e * e, minlength=n_users)
        du = mu = np.broadcast_to(esq[:, None], num.shape)
        dv = mv = np.broadcast_to(esq[None, :], num.shape)
    usable = (N >= max(min_support, 1)) & (du > _ZERO_REL * mu) & (dv > _ZERO_REL * mv)
    with np.errstate(invalid="ignore", divide="ignore"):
        S = np.where(usable, num / np.sqrt(np.where(usable, du * dv, 1.0)), 0.0)
    return S, usable, mean_u


def fit_once_knn(ratings, *, similarity="pearson", k=20, min_support=1, include_self=False,
                 clip=None) -> FitOnceResult:
    r"""User-based kNN predictions of every rating from similarities fitted once on all data.

    The leaky protocol of most libraries: the rating being predicted took part in the
    similarities and means that predict it. Compare with :func:`evaluators.loo_knn`.

    Parameters
    ----------
    ratings : tuple of three arrays (n,)
        ``(users, items, ratings)``: integer ids, finite real ratings, each pair once.
    similarity : {"pearson", "cosine", "adjusted_cosine", "pearson_corated", "cosine_corated"}
        As in :func:`evaluators.loo_knn`, computed on all the data (full profiles, full
        means, full item means).
    k : int, default 20
        Maximum number of neighbours, >= 1.
    min_support : int, default 1
        Candidates with fewer co-rated items are dropped (0 acts as 1).
    include_self : bool, default False
        Whether user u is a candidate neighbour for its own ratings (``fit_once_self``);
        its similarity to itself follows the formula (1 unless a denominator is zero).
    clip : (low, high), optional
        Clip the predictions.

    Returns
    -------
    FitOnceResult
        Predictions in input order, neighbour counts, ``mae`` and ``rmse``.

    Raises
    ------
    TypeError
        ``ratings`` not a tuple of arrays, non-integer ids, wrong option types.
    ValueError
        Mismatched lengths, a duplicate pair, a non-finite rating, an unknown
        ``similarity``, ``k < 1``, ``min_support < 0``, a bad ``clip``.

    Notes
    -----
    For each observed ``(u, k)``: candidates are the users ``v`` who rated ``k`` (``v != u``
    unless ``include_self``) with at least ``min_support`` co-rated items and non-zero
    denominators; neighbours are those whose similarity rounded to 10 decimals is > 0, the
    ``k`` largest, ties to the lower user index; the prediction is
    :math:`\bar r_u + \sum_N s_{uv} (r_{vk} - \bar r_v) / \sum_N s_{uv}` with all means over
    the full data, :math:`\bar r_u` when there is no neighbour -- the rules of
    :func:`evaluators.loo_knn` (issue 5) without the refit. Zhang, Liu & Zhang (2016) show
    how much this under-states the error; the similarity matrix is dense (users x users).

    Examples
    --------
    >>> from recloop.experiments._loo_cf import fit_once_knn, synthetic_ratings
    >>> data = synthetic_ratings(30, 40, 600, rng=0)
    >>> once = fit_once_knn(data, similarity="pearson_corated", k=5)
    >>> self_ = fit_once_knn(data, similarity="pearson_corated", k=5, include_self=True)
    >>> bool(self_.rmse < once.rmse)
    True
    """
    u, i, r = _check_ratings(ratings)
    similarity = _check_similarity("similarity", similarity)
    k = check_int(k, "k", low=1)
    min_support = check_int(min_support, "min_support", low=0)
    if not isinstance(include_self, bool):
        raise TypeError(f"`include_self` must be a bool; got {include_self!r}.")
    clip = _check_clip(clip)
    n_users, n_items = int(u.max()) + 1, int(i.max()) + 1
    S, usable, mean_u = _similarity_matrix(u, i, r, n_users, n_items, similarity, min_support)
    key = np.where(usable, np.round(S, _ROUND), 0.0)
    eligible = key > 0
    if not include_self:
        np.fill_diagonal(eligible, False)
    # -inf sorts last: only eligible candidates can become neighbours
    key = np.where(eligible, key, -np.inf)
    dev = r - mean_u[u]
    pred = np.empty(r.size)
    n_nb = np.zeros(r.size, dtype=np.int64)
    order_i = np.lexsort((u, i))  # raters of each item, by user index (ties -> lower index)
    starts = np.searchsorted(i[order_i], np.arange(n_items + 1))
    for item in range(n_items):
        pos = order_i[starts[item]:starts[item + 1]]
        if pos.size == 0:
            continue
        V = u[pos]
        sub = key[np.ix_(V, V)]
        chosen = np.isfinite(sub)
        if V.size > k:
            # the k largest keys without a full sort: all keys above the k-th largest, then
            # keys equal to it in ascending user order (the lower index wins a tie)
            kth = np.partition(sub, V.size - k, axis=1)[:, V.size - k][:, None]
            above = sub > kth
            tied = sub == kth
            room = k - above.sum(axis=1, keepdims=True)
            chosen &= above | (tied & (np.cumsum(tied, axis=1) <= room))
        w = np.where(chosen, S[np.ix_(V, V)], 0.0)
        count = chosen.sum(axis=1)
        base = mean_u[V]
        has = count > 0
        pred[pos] = np.where(has, base + (w @ dev[pos]) / np.where(has, w.sum(axis=1), 1.0),
                             base)
        n_nb[pos] = count
    if clip is not None:
        pred = np.clip(pred, clip[0], clip[1])
    err = pred - r
    for a in (r, pred, n_nb):
        a.flags.writeable = False
    return FitOnceResult(rating=r, prediction=pred, n_neighbours=n_nb,
                         mae=float(np.mean(np.abs(err))), rmse=float(np.sqrt(np.mean(err * err))),
                         similarity=similarity, k=k, include_self=include_self)


# -- synthetic data -------------------------------------------------------------------------------


# moved to evaluators.datasets (issue 17), same numbers; kept importable from here
from evaluators.datasets import synthetic_ratings  # noqa: E402

# -- rating files ------------------------------------------------------------------------------

#: Formats :func:`load_ratings` reads (``csv``: header ``userId,itemId,rating``, or the
#: ``columns`` given).
DATA_FORMATS = ("movielens_100k", "movielens_1m", "jester", "csv")


def load_ratings(path, *, format="movielens_100k", columns=("userId", "itemId", "rating")):
    """A local rating file as the ``(users, items, ratings)`` triple of :func:`fast_loo_cf`.

    Parameters
    ----------
    path : str or os.PathLike
        A local file (nothing is downloaded).
    format : {"movielens_100k", "movielens_1m", "jester", "csv"}
        The loader of :mod:`evaluators.datasets` to use.
    columns : (str, str, str)
        Header names of the user, item and rating columns (``csv`` only).

    Returns
    -------
    tuple of three arrays
        Integer user and item ids (dense indices for ``csv`` files with string ids),
        float ratings.

    Raises
    ------
    ValueError
        An unknown ``format``; malformed files as the loaders raise them.
    """
    from evaluators import datasets

    if format not in DATA_FORMATS:
        raise ValueError(f"`format` must be one of {', '.join(map(repr, DATA_FORMATS))}; got "
                         f"{format!r}.")
    if format == "movielens_100k":
        data = datasets.load_movielens_100k(path)
    elif format == "movielens_1m":
        data = datasets.load_movielens_1m(path)
    elif format == "jester":
        data = datasets.load_jester(path)
    else:
        user, item, rating = columns
        data = datasets.load_csv(path, user=user, item=item, rating=rating)
    users, items, ratings = data.triple()
    # string ids (csv) become dense indices: loo_knn takes integer ids
    users = np.unique(users, return_inverse=True)[1].ravel() if users.dtype.kind not in "iu" \
        else users
    items = np.unique(items, return_inverse=True)[1].ravel() if items.dtype.kind not in "iu" \
        else items
    return users, items, np.asarray(ratings, dtype=np.float64)


# -- the experiment --------------------------------------------------------------------------------


def _error_rows(err, *, evaluation, agent, variant, truth_mae, truth_rmse, params):
    """mae and rmse rows of per-rating errors (stderr: CLT; RMSE by the delta method)."""
    n = err.size
    a = np.abs(err)
    mae = float(a.mean())
    se_mae = float(a.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
    sq = err * err
    mse = float(sq.mean())
    rmse = math.sqrt(mse)
    se_mse = float(sq.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
    # delta method: d sqrt(m) = dm / (2 sqrt(m)); the interval is the MSE's, square-rooted
    se_rmse = se_mse / (2.0 * rmse) if rmse > 0 else math.nan
    kw = dict(evaluation=evaluation, agent=agent, variant=variant, n=n, params=params)
    return [
        Measurement(metric="mae", estimate=mae, stderr=se_mae, ci_low=mae - _Z * se_mae,
                    ci_high=mae + _Z * se_mae, truth=truth_mae, **kw),
        Measurement(metric="rmse", estimate=rmse, stderr=se_rmse,
                    ci_low=math.sqrt(max(0.0, mse - _Z * se_mse)),
                    ci_high=math.sqrt(mse + _Z * se_mse), truth=truth_rmse, **kw),
    ]


def _pair_work(u, i, held):
    """Sum over held-out (u, k) and candidates v (other raters of k) of |I_u| + |I_v|."""
    n_u = np.bincount(u).astype(np.float64)
    c_k = np.bincount(i).astype(np.float64)
    sum_nv = np.bincount(i, weights=n_u[u])
    nu, ck, sk = n_u[u[held]], c_k[i[held]], sum_nv[i[held]]
    return float(np.sum((ck - 1) * nu + (sk - nu)))


def _timing_rows(ratings, u, i, similarity, k, min_support, fast_s, naive_users, rng, *,
                 evaluation, params):
    """fast_s, naive_s_estimated and speedup: the naive LOO on a few light users, scaled."""
    from evaluators import loo_knn

    counts = np.bincount(u)
    light = np.flatnonzero(counts <= np.median(counts[counts > 0]))
    chosen = np.sort(rng.choice(light, size=min(naive_users, light.size), replace=False))
    ids = np.unique(ratings[0])[chosen]
    start = time.perf_counter()
    loo_knn(ratings, similarity=similarity, k=k, min_support=min_support, users=ids,
            method="naive")
    naive_s = time.perf_counter() - start
    held = np.isin(u, chosen)
    scale = _pair_work(u, i, np.ones(u.size, dtype=bool)) / max(_pair_work(u, i, held), 1.0)
    naive_est = naive_s * scale
    kw = dict(evaluation=evaluation, agent=similarity, variant="exact_loo", params=params)
    return [
        Measurement(metric="fast_s", estimate=fast_s, n=u.size, **kw),
        Measurement(metric="naive_s_estimated", estimate=naive_est, n=int(held.sum()), **kw),
        Measurement(metric="speedup", estimate=naive_est / fast_s, **kw),
    ]


def fast_loo_cf(ratings=None, *, similarities: Sequence[str] = SIMILARITIES, k=20,
                min_support=1, clip=None, shape=(943, 1682, 100_000), naive_users=0,
                rng=None, progress=False, evaluation=EVALUATION,
                executor=None) -> list[Measurement]:
    """Exact LOO error of user-based kNN beside the leaky "fit once" protocols.

    Parameters
    ----------
    ratings : tuple of three arrays (n,), optional
        ``(users, items, ratings)`` (e.g. ``RatingData.triple()`` of a loaded file). Default:
        :func:`synthetic_ratings` of ``shape`` drawn from ``rng``.
    similarities : sequence of str, default all of :data:`SIMILARITIES`
        Similarities to evaluate (names of :func:`evaluators.loo_knn`), at least one, no
        repeats.
    k : int, default 20
    min_support : int, default 1
    clip : (low, high), optional
        Clip every prediction (exact and leaky alike).
    shape : (n_users, n_items, n_ratings)
        Size of the synthetic set when ``ratings`` is not given.
    naive_users : int, default 0
        Users whose ratings the literal (naive) LOO also predicts, to time it against the
        fast one (rows ``fast_s``, ``naive_s_estimated``, ``speedup``); 0 skips the timing.
        Timing rows differ from run to run; every other row is reproducible.
    rng : None, int, SeedSequence or Generator
        Source of the synthetic set and of the timing subsample.
    progress : bool
        A progress bar over the similarities.
    evaluation : str
        The ``evaluation`` column of the rows.
    executor : None or dask.distributed.Client
        Where the exact LOO's held-out users are computed (partitioned over the cluster's
        workers; the same numbers).

    Returns
    -------
    list of Measurement
        Per similarity (``agent``) and variant (``exact_loo``, ``fit_once``,
        ``fit_once_self``): metrics ``mae`` and ``rmse``, with ``truth`` the exact LOO's
        (so ``error`` is the leak; negative means optimistic), standard errors over the
        ratings (RMSE by the delta method) and 95% intervals; ``n`` = number of ratings;
        ``params`` holds ``k``. Plus the timing rows when ``naive_users > 0``.

    Raises
    ------
    TypeError, ValueError
        Bad ``similarities`` (named), ``k``, ``min_support``, ``clip``, ``shape``,
        ``naive_users`` or ratings.

    Notes
    -----
    Zhang, Liu & Zhang (2016): a model fitted once on all the data and scored on its own
    training ratings (even with the user excluded from its neighbours) under-states the
    error; the exact LOO refits without each rating. With the user counted as its own
    neighbour, its own rating (with similarity 1) enters its prediction: the error falls
    further.

    Examples
    --------
    >>> from recloop.experiments._loo_cf import fast_loo_cf
    >>> rows = fast_loo_cf(similarities=["cosine"], shape=(40, 50, 800), naive_users=0, rng=0)
    >>> sorted({(m.variant, m.metric) for m in rows})[:2]
    [('exact_loo', 'mae'), ('exact_loo', 'rmse')]
    """
    from evaluators import loo_knn

    if isinstance(similarities, str) or not isinstance(similarities, Sequence):
        raise TypeError(f"`similarities` must be a sequence of names; got "
                        f"{type(similarities).__name__}.")
    if not similarities:
        raise ValueError("`similarities` must name at least one similarity; got none.")
    for j, s in enumerate(similarities):
        _check_similarity(f"similarities[{j}]", s)
    if len(set(similarities)) != len(similarities):
        raise ValueError(f"`similarities` must not repeat a name; got {list(similarities)}.")
    k = check_int(k, "k", low=1)
    min_support = check_int(min_support, "min_support", low=0)
    clip = _check_clip(clip)
    naive_users = check_int(naive_users, "naive_users", low=0)
    rng = as_generator(rng)
    data_rng, timing_rng = rng.spawn(2)
    if ratings is None:
        if not isinstance(shape, (tuple, list)) or len(shape) != 3:
            raise TypeError(f"`shape` must be (n_users, n_items, n_ratings); got {shape!r}.")
        ratings = synthetic_ratings(*shape, rng=data_rng)
    u, i, _ = _check_ratings(ratings)
    params = {"k": k}
    rows = []
    from recloop_base.progress import bar

    sims = bar(similarities, desc="similarities", show=progress)
    warmed = False
    for s in sims:
        if naive_users and not warmed:
            # compile the numba kernel on a tiny set first, so fast_s is the run time
            loo_knn((np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]),
                     np.array([1.0, 2.0, 2.0, 1.0])), similarity=s, k=1)
            warmed = True
        start = time.perf_counter()
        exact = loo_knn(ratings, similarity=s, k=k, min_support=min_support, clip=clip,
                        executor=executor)
        fast_s = time.perf_counter() - start
        err = exact.prediction - exact.rating
        truth = (exact.mae, exact.rmse)
        rows += _error_rows(err, evaluation=evaluation, agent=s, variant="exact_loo",
                            truth_mae=truth[0], truth_rmse=truth[1], params=params)
        for variant, self_ in (("fit_once", False), ("fit_once_self", True)):
            leaky = fit_once_knn(ratings, similarity=s, k=k, min_support=min_support,
                                 include_self=self_, clip=clip)
            rows += _error_rows(leaky.prediction - leaky.rating, evaluation=evaluation,
                                agent=s, variant=variant, truth_mae=truth[0],
                                truth_rmse=truth[1], params=params)
        if naive_users:
            rows += _timing_rows(ratings, u, i, s, k, min_support, fast_s, naive_users,
                                 timing_rng, evaluation=evaluation, params=params)
    return rows


def plot_fast_loo_cf(rows, out_dir, *, prefix: str = EVALUATION, title: str = "") -> list:
    """The LOO leak: MAE and RMSE per similarity, the two leaky protocols (dots with 95%
    bars) beside the exact LOO error (the truth, a black mark per similarity); a panel per
    metric across, and per log down when the rows compare logs (a fitted world's ``real``
    and ``simulated``, parameter ``log``: each column shares its x axis, so that the
    simulated log's errors stand under the real ones); one legend.

    Parameters
    ----------
    rows : iterable of Measurement
        Rows of :func:`fast_loo_cf` (one cell; other rows are ignored). Rows of a fitted
        world's comparison carry ``params["log"]``; its ``rmse_rank_tau`` and
        ``mae_rank_tau`` rows go into the caption.
    out_dir : str or Path
        Created if missing.
    prefix : str
        File name prefix: ``{prefix}_errors.png``.
    title : str
        Prefixed to the figure's caption (e.g. which log).

    Returns
    -------
    list of Path
        The PNG written (none when there is no error row).
    """
    from pathlib import Path

    from recloop import _plots

    rows = list(rows)
    taus = {m.metric: m.estimate for m in rows if m.metric.endswith("_rank_tau")}
    rows = [r for r in rows if r.metric in ("mae", "rmse")]
    if not rows:
        return []
    logs = list(dict.fromkeys(r.params.get("log") for r in rows))
    sims = list(dict.fromkeys(r.agent for r in rows))
    leaky = ("fit_once", "fit_once_self")
    got = {(r.params.get("log"), r.agent, r.variant, r.metric): r for r in rows}
    fig, axes = _plots.figure(len(logs), 2, width=_plots.RECORD_WIDTH,
                              height=(0.32 * len(sims) + 0.9) * len(logs) + 1.3,
                              sharex="col")
    for i, log in enumerate(logs):
        for ax, metric in zip(axes[i], ("mae", "rmse"), strict=True):
            series = []
            for j, variant in enumerate(leaky):
                ms = [got.get((log, s, variant, metric)) for s in sims]
                est = [m.estimate if m else math.nan for m in ms]
                half = [1.96 * m.stderr if m and math.isfinite(m.stderr) else math.nan
                        for m in ms]
                series.append(_plots.Dots(variant, est,
                                          [e - h for e, h in zip(est, half, strict=True)],
                                          [e + h for e, h in zip(est, half, strict=True)],
                                          j=j + 1))
            exact = [got.get((log, s, "exact_loo", metric)) for s in sims]
            _plots.dot_plot(ax, sims, series, truths=[m.estimate if m else math.nan
                                                      for m in exact],
                            truth_label="exact LOO (the truth)")
            if i == len(logs) - 1:
                ax.set_xlabel(metric.upper(), fontsize=8)
            ax.set_title(metric.upper() if log is None else f"{log} log: {metric.upper()}",
                         fontsize=8)
            ax.tick_params(labelsize=7)
        axes[i, 1].tick_params(labelleft=False)  # the similarities once, on the left
    _plots.legend(fig)
    what = "The LOO leak: exact leave-one-out against the fit-once protocols (kNN)"
    note = ("Dots: the protocols' errors, 95% bars (±1.96 standard errors over the held-out "
            "ratings); black: the exact LOO error, the truth.")
    if taus:
        note += " The similarities ranked by exact LOO, real against simulated: Kendall " \
                "tau " + ", ".join(f"{v:.2f} ({k.split('_')[0].upper()})" for k, v in
                                   sorted(taus.items(), reverse=True)) + "."
    _plots.caption(fig, f"{title}: {what}" if title else what, note)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return [_plots.save(fig, out / f"{prefix}_errors.png", dpi=100)]


# -- the scenario kind ------------------------------------------------------------------------

def _python_kwargs(params: dict) -> dict:
    """Scenario values -> :func:`fast_loo_cf` keyword arguments (the data file is read by
    the cell)."""
    p = dict(params)
    out = {k: p[k] for k in ("similarities", "k", "min_support", "naive_users") if k in p}
    if "clip" in p:
        out["clip"] = tuple(p["clip"]) if p["clip"] is not None else None
    if {"n_users", "n_items", "n_ratings"} <= set(p):
        out["shape"] = (p["n_users"], p["n_items"], p["n_ratings"])
    return out


def _check_kind(params, agents, world):
    """Cross-key rules: a synthetic set that fits its shape, an ordered clip, a fitted
    world for ``world = true``."""
    if params.get("world"):
        from recloop._calibrated_world import is_calibrated

        if params.get("data") is not None:
            yield "data", ("expected no `data` with `world = true` (the fitted world's log is "
                           f"the data), got {params['data']!r}")
        if world == {}:
            return  # a world to fit: the runner checks again once it is fitted
        if not is_calibrated(world):
            yield "world", ("expected a fitted [world] (`calibrate_from` or `file`) for "
                            "`world = true`, got " + ("none" if not world else
                                                      f"preset {world.get('preset')!r}"))
        return
    if params.get("data") is None and params["n_ratings"] > params["n_users"] * params["n_items"]:
        yield "n_ratings", (f"expected at most n_users x n_items = "
                            f"{params['n_users'] * params['n_items']}, got {params['n_ratings']}")
    if params.get("clip") is not None and params["clip"][0] > params["clip"][1]:
        yield "clip", f"expected [low, high] with low <= high, got {params['clip']}"


def _resources(params, world):
    """The leaky fit-once protocols' dense ``(n_users, n_users)`` similarity tables (about
    eight at once) and the ratings; with a `data` file, the ratings from its size."""
    import os

    if params.get("data"):
        try:
            size = os.path.getsize(params["data"])
        except OSError:
            size = 0
        return {"data: ratings (from the file's size)": size * 8}
    n_users = params["n_users"]
    return {"n_users x n_users: fit-once similarities": 8 * n_users * n_users * 8,
            "n_ratings: ratings and predictions": params["n_ratings"] * 12 * 8,
            "n_items: the synthetic items' popularity": params["n_items"] * 3 * 8}


def _world_logs(world, seed):
    """The ``(users, items, ratings)`` of a fitted world's real log and of one simulated log
    (the world run to its last tick, its rated adoptions)."""
    from recloop import _calibrated_world

    cal = _calibrated_world.calibrated_world(world)
    if cal.config.fitted.ratings is None:
        raise ValueError("`world` = true needs a fitted world with ratings (fitted to a log "
                         "with ratings, `ratings = true`); this one has no rating model.")
    o = cal.observed
    e = cal.world(seed).simulate(cal.config.n_ticks - 1).edges
    return {"real": (o.user, o.item, o.rating), "simulated": (e.user, e.item, e.rating)}


def _similarity_of(m) -> str:
    """The similarity of a row of a fitted world's comparison (agent ``"name (log)"``)."""
    log = m.params.get("log")
    return m.agent[:-len(f" ({log})")] if log and m.agent.endswith(f" ({log})") else m.agent


def _rank_taus(rows, evaluation, k):
    """Kendall's tau between the similarities' exact-LOO errors on the real and the
    simulated log (rows of both), one row per metric."""
    from scipy.stats import kendalltau

    out = []
    for metric in ("rmse", "mae"):
        got = {(_similarity_of(m), m.params["log"]): m.estimate for m in rows
               if m.metric == metric and m.variant == "exact_loo"}
        sims = sorted({a for a, _ in got})
        real = [got[(a, "real")] for a in sims]
        sim = [got[(a, "simulated")] for a in sims]
        tau = float(kendalltau(real, sim).statistic) if len(sims) > 1 else math.nan
        out.append(Measurement(evaluation=evaluation, agent="similarities",
                               metric=f"{metric}_rank_tau", estimate=tau, n=len(sims),
                               variant="exact_loo",
                               params={"k": k, "log": "simulated vs real"}))
    return out


def _run_kind(cell):
    p = cell.params
    kwargs = _python_kwargs(p)
    if p.get("world"):
        import dataclasses

        seed = int(cell.seed_sequence.generate_state(1)[0])
        rows = []
        for log, ratings in _world_logs(cell.world, seed).items():
            # the log in the agent's name too: a summary that merges rows by agent must
            # never average the real log's errors with the simulated one's
            rows += [dataclasses.replace(m, agent=f"{m.agent} ({log})",
                                         params={**m.params, "log": log})
                     for m in fast_loo_cf(ratings, **kwargs, rng=cell.seed_sequence,
                                          progress=cell.progress, evaluation=cell.evaluation,
                                          executor=cell.executor)]
        return rows + _rank_taus(rows, cell.evaluation, kwargs.get("k", 20))
    ratings = None
    if p.get("data") is not None:
        ratings = load_ratings(p["data"], format=p["format"], columns=tuple(p["columns"]))
    return fast_loo_cf(ratings, **kwargs, rng=cell.seed_sequence,
                       progress=cell.progress, evaluation=cell.evaluation,
                       executor=cell.executor)


def _figures_kind(measurements, out_dir, world):
    import dataclasses

    prefix = measurements[0].evaluation if measurements else EVALUATION
    # a fitted world's rows name their log in the agent too ("pearson (real)"): the figure
    # sets the logs apart by their `log` parameter
    return plot_fast_loo_cf([dataclasses.replace(m, agent=_similarity_of(m))
                             for m in measurements], out_dir, prefix=prefix)


KIND = EvaluationKind(
    name="fast_loo_cf",
    summary="Exact leave-one-out MAE/RMSE of user-based kNN rating prediction (the truth, "
            "fast algorithm after Zhang et al. 2016) beside the leaky protocols that fit the "
            "similarities once on all the data (`fit_once`, `fit_once_self`); one row group "
            "per similarity (the `agent` column).",
    run=_run_kind,
    params=(
        Param("similarities", ListOf(Str(choices=SIMILARITIES), unique=True),
              list(SIMILARITIES), "Similarities compared (the `agent` column)."),
        Param("k", Int(low=1, high=100_000), 20, "Neighbours per prediction."),
        Param("min_support", Int(low=0, high=100_000), 1, "Fewest co-rated items for a "
              "neighbour."),
        Param("clip", ListOf(Float(), min_len=2, max_len=2), None, "Clip every prediction "
              "to [low, high] (default: no clipping)."),
        Param("data", FilePath(), None, "A local rating file (default: a synthetic set of "
              "`n_users` x `n_items` with `n_ratings` ratings drawn from the cell's seed)."),
        Param("world", Bool(), False, "Compare on the scenario's fitted [world] instead: its "
              "real log and one simulated log (the world run to its last tick, its rated "
              "adoptions), rows labelled by the log (agent `pearson (real)`, `pearson "
              "(simulated)`, ...; `log` in `params`), plus the Kendall tau between the "
              "similarities' exact-LOO errors on the two (`rmse_rank_tau`, `mae_rank_tau`)."),
        Param("format", Str(choices=DATA_FORMATS), "movielens_100k", "Format of `data`."),
        Param("columns", ListOf(Str(), min_len=3, max_len=3), ["userId", "itemId", "rating"],
              "User, item and rating column names of a `csv` file."),
        Param("n_users", Int(low=2, high=10**7), 943, "Users of the synthetic set."),
        Param("n_items", Int(low=1, high=10**7), 1682, "Items of the synthetic set."),
        Param("n_ratings", Int(low=1, high=10**9), 100_000, "Ratings of the synthetic set "
              "(at most n_users x n_items)."),
        Param("naive_users", Int(low=0, high=100_000), 0, "Users also predicted by the "
              "literal (naive) LOO to time it against the fast one (rows `fast_s`, "
              "`naive_s_estimated`, `speedup`); 0 skips it. Timing rows are not "
              "reproducible."),
    ),
    per_agent=False,
    agent_family="",
    min_agents=0,
    check=_check_kind,
    figures=_figures_kind,
    resources=_resources,
    headline=("rmse", "mae"),
    function=fast_loo_cf,
    python_kwargs=_python_kwargs,
)

#: The kinds this module declares (the registry reads them: recloop._registry.BUILTIN_MODULES).
KINDS = (KIND,)
