"""Offline leave-one-out (LOO) score of a recommender on a profile graph.

Source: de Myttenaere, Le Grand, Golden, Rossi (2014/2015), "Reducing offline evaluation bias
in recommendation systems". The score of recommender ``g`` on the profiles at time ``t`` is

    L_t(g) = sum_u P(u) sum_{i in I_u} P(i|u,w) l(g(u_-i), i),
    P(i|u,w) = w_i / sum_{j in I_u} w_j,

where ``u_-i`` is u's profile without ``i`` and ``l`` a quality function of the top-k list.
"""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from evaluators._estimate import Estimate, normal_estimate, wilson_estimate
from recloop_base.executors import check_executor, executor_threads, run_partitions, split_evenly
from recloop_base.validation import ArgumentTypeError, ArgumentValueError, as_generator, check_int

__all__ = ["EmptyProfilesWarning", "LooQuality", "loo_quality", "offline_score"]

QUALITIES = ("hit", "reciprocal_rank")
_DEFAULT_BATCH = 4096


class EmptyProfilesWarning(UserWarning):
    """The profiles hold no edge, so the LOO score is undefined (``nan``)."""


# ---------------------------------------------------------------------------------------------
# input validation (shared with evaluators._weights)
# ---------------------------------------------------------------------------------------------

def _as_profiles(profiles, name: str = "profiles") -> sp.csr_array:
    """Canonical binary CSR copy of a users x items matrix (stored non-zeros are edges).

    The values must be real, finite and >= 0 (a nan or a negative entry is no edge count)."""
    if sp.issparse(profiles):
        values = np.asarray(profiles.data)
    elif isinstance(profiles, np.ndarray):
        if profiles.ndim != 2:
            raise ValueError(f"`{name}` must be a 2-D users x items matrix; "
                             f"got shape {profiles.shape}.")
        values = profiles
    else:
        raise TypeError(f"`{name}` must be a scipy.sparse matrix or a 2-D numpy array; "
                        f"got {type(profiles).__name__}.")
    if values.dtype.kind not in "biuf":
        raise ArgumentTypeError(name, "a matrix of real numbers (non-zeros are edges)",
                                f"dtype {values.dtype}")
    bad = values < 0 if values.dtype.kind in "biu" else ~np.isfinite(values) | (values < 0)
    if bad.any():
        j = tuple(int(i) for i in np.argwhere(bad)[0])
        where = f"stored entry {j[0]}" if len(j) == 1 else f"{j}"
        raise ArgumentValueError(name, "finite and >= 0 (its non-zeros are edges)",
                                 f"{values[j]} at {where}")
    m = sp.csr_array(profiles, copy=True)
    if m.ndim != 2:
        raise ValueError(f"`{name}` must be a 2-D users x items matrix; got shape {m.shape}.")
    m.sum_duplicates()
    m.data = (m.data != 0).astype(np.float64)
    m.eliminate_zeros()
    m.sort_indices()
    m.indices = m.indices.astype(np.int64, copy=False)
    m.indptr = m.indptr.astype(np.int64, copy=False)
    return m


def _check_k(k, n_items: int) -> int:
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise TypeError(f"`k` must be an integer; got {type(k).__name__}.")
    if not 1 <= k <= n_items:
        raise ValueError(f"`k` must be in [1, n_items={n_items}]; got {k}.")
    return int(k)


def _check_quality(quality) -> str:
    if not isinstance(quality, str):
        raise TypeError(f"`quality` must be a string; got {type(quality).__name__}.")
    if quality not in QUALITIES:
        raise ValueError(f"`quality` must be one of {QUALITIES}; got {quality!r}.")
    return quality


def _check_positive_vector(x, n: int, name: str, *, allow_zero: bool) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype.kind not in "biuf":  # strings such as "1.0" and complex numbers too
        raise ArgumentTypeError(name, "an array of numbers",
                                f"{type(x).__name__} of dtype {a.dtype}")
    a = np.array(a, dtype=np.float64, copy=True)
    if a.shape != (n,):
        raise ValueError(f"`{name}` must have shape ({n},); got {a.shape}.")
    bad = ~np.isfinite(a) | ((a < 0) if allow_zero else (a <= 0))
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        rule = "finite and >= 0" if allow_zero else "finite and > 0"
        raise ValueError(f"`{name}` must be {rule}; got {float(a[j])!r} at index {j}.")
    return a


def _user_probabilities(m: sp.csr_array, user_weights, name: str = "profiles"):
    """P(u): uniform over users holding at least one item, or normalised ``user_weights``.

    ``None`` when ``m`` holds no edge at all (nothing to score: degenerate but legal).
    """
    has_items = np.diff(m.indptr) > 0
    if user_weights is None:
        pu = has_items.astype(np.float64)
    else:
        pu = _check_positive_vector(user_weights, m.shape[0], "user_weights", allow_zero=True)
        pu[~has_items] = 0.0  # an empty profile holds no (u, i) pair to score
    if not has_items.any():
        return None
    total = pu.sum()
    if total <= 0:
        raise ValueError(f"`user_weights` must be positive for at least one user holding an "
                         f"item in `{name}`; got 0 for all {int(has_items.sum())} of them.")
    return pu / total


def _empty_estimate() -> Estimate:
    warnings.warn("`profiles` hold no edge: there is no (user, item) pair to score; "
                  "returning nan.", EmptyProfilesWarning, stacklevel=3)
    return Estimate(math.nan, math.nan, math.nan, math.nan, 0)


def _item_weights(item_weights, n_items: int) -> np.ndarray:
    if item_weights is None:
        return np.ones(n_items)
    return _check_positive_vector(item_weights, n_items, "item_weights", allow_zero=False)


def _check_n_samples(n_samples):
    if n_samples is None:
        return None
    if isinstance(n_samples, bool) or not isinstance(n_samples, numbers.Integral):
        raise TypeError(f"`n_samples` must be an integer or None; got {type(n_samples).__name__}.")
    if n_samples < 1:
        raise ValueError(f"`n_samples` must be >= 1 or None; got {n_samples}.")
    return int(n_samples)


def _check_batch_size(batch_size) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral):
        raise TypeError(f"`batch_size` must be an integer; got {type(batch_size).__name__}.")
    if batch_size < 1:
        raise ValueError(f"`batch_size` must be >= 1; got {batch_size}.")
    return int(batch_size)


def _check_recommender(recommender) -> None:
    if not callable(getattr(recommender, "recommend", None)):
        raise TypeError("`recommender` must have a `recommend(users, k, *, removed=None)` "
                        f"method; got {type(recommender).__name__}.")


# ---------------------------------------------------------------------------------------------
# the computation
# ---------------------------------------------------------------------------------------------

def _edge_users(m: sp.csr_array) -> np.ndarray:
    return np.repeat(np.arange(m.shape[0], dtype=np.int64), np.diff(m.indptr))


def _edge_probabilities(m: sp.csr_array, pu: np.ndarray, w: np.ndarray) -> np.ndarray:
    """P(u) P(i|u,w) for every edge, in CSR order."""
    ew = w[m.indices]
    lengths = np.diff(m.indptr)
    wu = m @ w
    wu[lengths == 0] = 1.0  # rows without edges contribute nothing; avoid 0/0
    return np.repeat(pu / wu, lengths) * ew


def _weighted_sum(p: np.ndarray, q: np.ndarray) -> float:
    # Pairwise summation, not BLAS dot: as exact, and BLAS threads stall on a loaded machine.
    return float(np.sum(p * q))


def _draw_edges(m: sp.csr_array, pu: np.ndarray, w: np.ndarray, n: int,
                rng: np.random.Generator) -> np.ndarray:
    """Draw ``n`` edges: u from P(u), then i from P(i|u,w) (the paper's sampling)."""
    cu = np.cumsum(pu)
    users = np.searchsorted(cu, rng.random(n) * cu[-1], side="right")
    users = np.minimum(users, m.shape[0] - 1)
    ew = w[m.indices]
    c = np.cumsum(ew)
    start, stop = m.indptr[users], m.indptr[users + 1]
    before = np.where(start > 0, c[np.maximum(start - 1, 0)], 0.0)
    total = c[stop - 1] - before
    target = before + rng.random(n) * total
    e = np.searchsorted(c, target, side="right")
    # rounding can step one edge outside the user's row; the row bounds are the truth.
    return np.clip(e, start, stop - 1)


def _quality_of(recommended: np.ndarray, items: np.ndarray, k: int, quality: str) -> np.ndarray:
    match = recommended[:, :k] == items[:, None]
    found = match.any(axis=1)
    if quality == "hit":
        return found.astype(np.float64)
    rank = match.argmax(axis=1) + 1
    return np.where(found, 1.0 / rank, 0.0)


class _BadOutput(ValueError):
    """The recommender returned an item id out of range or twice in a list."""


def _check_output(recommender, rec, users, items, n_items, offset):
    """ValueError naming the recommender and the first row with an item id outside
    ``[0, n_items)`` or a repeated item (rows are numbered over all evaluated pairs)."""
    out = (rec < 0) | (rec >= n_items)
    srt = np.sort(rec, axis=1)
    rep = np.zeros(rec.shape[0], dtype=bool)
    if rec.shape[1] > 1:
        rep = np.any(srt[:, 1:] == srt[:, :-1], axis=1)
    bad = out.any(axis=1) | rep
    if not bad.any():
        return
    j = int(np.argmax(bad))
    row = f"row {offset + j} (user {users[j]}, item {items[j]} removed): {rec[j].tolist()}"
    if out[j].any():
        v = int(rec[j][np.argmax(out[j])])
        why = f"item id {v} outside [0, {n_items})"
    else:
        v = int(srt[j, 1:][np.argmax(srt[j, 1:] == srt[j, :-1])])
        why = f"item {v} more than once"
    raise _BadOutput(f"`recommender` {recommender!r} returned {why} in {row}; a list must "
                     f"hold distinct item ids in [0, {n_items}).")


def _evaluate_pairs(recommender, users: np.ndarray, items: np.ndarray, k: int, quality: str,
                    batch_size: int, n_items: int, offset: int = 0) -> np.ndarray:
    """l(g(u_-i), i) for the given pairs, calling ``recommend`` once per batch. ``offset``:
    the number of the first pair among all evaluated (in messages)."""
    out = np.empty(users.size, dtype=np.float64)
    for lo in range(0, users.size, batch_size):
        hi = min(lo + batch_size, users.size)
        rec = np.asarray(recommender.recommend(users[lo:hi], k, removed=items[lo:hi]))
        if rec.ndim != 2 or rec.shape[0] != hi - lo or rec.shape[1] < k:
            raise ValueError(f"`recommender.recommend` must return an array of shape "
                             f"({hi - lo}, {k}); got {rec.shape}.")
        if rec.size and not np.issubdtype(rec.dtype, np.integer):
            raise TypeError(f"`recommender.recommend` must return item ids (integers); "
                            f"got dtype {rec.dtype}.")
        _check_output(recommender, rec[:, :k], users[lo:hi], items[lo:hi], n_items,
                      offset + lo)
        out[lo:hi] = _quality_of(rec, items[lo:hi], k, quality)
    return out


def _score_partition(recommender, users, items, part):
    """Qualities of pairs ``lo:hi`` (a whole number of batches); a bad list is returned, not
    raised, when ``defer`` (a cluster: the first bad row over all partitions is named)."""
    lo, hi, k, quality, batch_size, n_items, defer = part
    try:
        return _evaluate_pairs(recommender, users[lo:hi], items[lo:hi], k, quality,
                               batch_size, n_items, lo)
    except _BadOutput as err:
        if defer:
            return err
        raise


def _score_pairs(recommender, users, items, k, quality, batch_size, n_items, executor,
                 n_partitions, progress) -> np.ndarray:
    """Qualities of all pairs, in partitions of whole batches (the ``recommend`` calls are
    those of one pass over the pairs, so the partitions change nothing), here or on a
    cluster with the fitted recommender and the pairs scattered once."""
    n_batches = -(-users.size // batch_size)
    if n_partitions is None:
        n_partitions = 32 if executor is None else 4 * executor_threads(executor)
    parts = [(r.start * batch_size, min(users.size, r.stop * batch_size), k, quality,
              batch_size, n_items, executor is not None)
             for r in split_evenly(n_batches, n_partitions)]
    done = run_partitions(_score_partition, parts, shared=(recommender, users, items),
                          executor=executor, progress=progress, desc="offline_score")
    for q in done:
        if isinstance(q, _BadOutput):
            raise q
    return np.concatenate(done) if done else np.empty(0)


def _estimate(values: np.ndarray, quality: str) -> Estimate:
    if quality == "hit":
        return wilson_estimate(int(values.sum()), values.size)
    return normal_estimate(values)


def _exact_estimate(value: float, n: int) -> Estimate:
    # An exhaustive score is the exact value of L_t(g): no sampling error.
    return Estimate(value, 0.0, value, value, n)


@dataclass(frozen=True, eq=False)
class LooQuality:
    """Per-edge LOO quality ``l(g(u_-i), i)`` of one recommender on one profile graph.

    Computing it once lets many weightings be scored without calling the recommender again
    (the recommendations do not depend on the weights).

    Attributes
    ----------
    profiles : scipy.sparse.csr_array, shape (n_users, n_items)
        The canonical binary profiles (sorted indices); edge ``e`` is the ``e``-th stored entry.
    users, items : ndarray of int64, shape (n_edges,)
        The user and item of every edge, in CSR order.
    quality : ndarray of float64, shape (n_edges,)
        ``l(g(u_-i), i)`` for every edge.
    k : int
        Length of the recommended list.
    quality_name : str
        ``"hit"`` or ``"reciprocal_rank"``.
    """

    profiles: sp.csr_array
    users: np.ndarray
    items: np.ndarray
    quality: np.ndarray
    k: int
    quality_name: str

    def score(self, *, n_samples=None, user_weights=None, item_weights=None,
              rng=None) -> Estimate:
        """The LOO score under the given weights, exhaustive or by sampling stored edges.

        Same parameters and result as :func:`offline_score`; with the same ``rng`` the sampled
        edges are the ones :func:`offline_score` draws, so both agree exactly for a
        deterministic recommender.
        """
        m = self.profiles
        n_samples = _check_n_samples(n_samples)
        pu = _user_probabilities(m, user_weights)
        w = _item_weights(item_weights, m.shape[1])
        if pu is None:
            return _empty_estimate()
        if n_samples is None:
            value = _weighted_sum(_edge_probabilities(m, pu, w), self.quality)
            return _exact_estimate(value, self.quality.size)
        e = _draw_edges(m, pu, w, n_samples, as_generator(rng))
        return _estimate(self.quality[e], self.quality_name)


def loo_quality(profiles, recommender, *, k: int = 5, quality: str = "hit", fit: bool = True,
                batch_size: int = _DEFAULT_BATCH) -> LooQuality:
    """Compute ``l(g(u_-i), i)`` for every edge (u, i) of ``profiles``.

    Parameters
    ----------
    profiles : sparse matrix or ndarray, shape (n_users, n_items)
        Profiles; every stored non-zero is an edge (values are ignored).
    recommender : object
        Has ``recommend(users, k, *, removed) -> int array (n, k)`` and, if ``fit`` is true,
        ``fit(profiles)``.
    k : int
        Length of the recommended list, ``1 <= k <= n_items``.
    quality : {"hit", "reciprocal_rank"}
        ``hit``: 1 if ``i`` is in the top ``k``; ``reciprocal_rank``: 1 / rank within the top
        ``k``, else 0.
    fit : bool
        Fit ``recommender`` on ``profiles`` first (in place, as scikit-learn's ``fit`` does).
    batch_size : int
        Number of (user, removed item) pairs per ``recommend`` call.

    Returns
    -------
    LooQuality
    """
    m = _as_profiles(profiles)
    k = _check_k(k, m.shape[1])
    quality = _check_quality(quality)
    batch_size = _check_batch_size(batch_size)
    _check_recommender(recommender)
    if fit:
        recommender.fit(m)
    users, items = _edge_users(m), m.indices.copy()
    q = _evaluate_pairs(recommender, users, items, k, quality, batch_size, m.shape[1])
    for a in (users, items, q):
        a.setflags(write=False)
    return LooQuality(m, users, items, q, k, quality)


def offline_score(profiles, recommender, *, k: int = 5, quality: str = "hit", n_samples=None,
                  user_weights=None, item_weights=None, rng=None, fit: bool = True,
                  batch_size: int = _DEFAULT_BATCH, executor=None, n_partitions=None,
                  progress: bool = False) -> Estimate:
    """Offline leave-one-out score ``L_t(g)`` of a recommender, exhaustive or sampled.

    Parameters
    ----------
    profiles : sparse matrix or ndarray, shape (n_users, n_items)
        Profiles at time t; every stored non-zero is an edge (values are ignored).
    recommender : object
        Follows the agents' recommender protocol: ``fit(profiles)`` and
        ``recommend(users, k, *, removed) -> int array (n, k)`` of item ids in rank order for
        ``users[j]``'s profile with ``removed[j]`` taken out. Called in batches of
        ``batch_size`` pairs, never once per pair.
    k : int
        Length of the recommended list, ``1 <= k <= n_items``.
    quality : {"hit", "reciprocal_rank"}
        ``hit``: 1 if ``i`` is in the top ``k`` of ``g(u_-i)``; ``reciprocal_rank``: 1/rank
        of ``i`` within the top ``k``, else 0.
    n_samples : int or None
        ``None``: exhaustive, every (u, i) edge, the exact value. An int: draw that many
        pairs, ``u`` from ``P(u)`` then ``i`` from ``P(i|u,w)``, with replacement.
    user_weights : array (n_users,) or None
        Non-negative; ``P(u)`` proportional to them over users holding at least one item.
        Default: uniform over those users.
    item_weights : array (n_items,) or None
        Positive ``w``; ``P(i|u,w) = w_i / sum_{j in I_u} w_j``. Default: uniform.
    rng : None, int, SeedSequence or Generator
        Randomness of the sampled score (unused when exhaustive).
    fit : bool
        Fit ``recommender`` on ``profiles`` first (in place). Pass ``False`` when it is
        already fitted on these profiles.
    batch_size : int
        Number of (user, removed item) pairs per ``recommend`` call.
    executor : None or dask.distributed.Client
        ``None``: this process. A client: the (user, removed item) pairs -- grouped by
        user, in whole batches -- are partitioned over the cluster's workers; the fitted
        recommender and the pairs are scattered once to every worker (the recommender must
        pickle). The ``recommend`` calls are the same batches as here, so the result is the
        same, bit for bit.
    n_partitions : int >= 1, optional
        Parts of the pairs, in whole batches (default: 32 here, 4 per worker thread on a
        cluster). Changes nothing but the schedule.
    progress : bool, default False
        A tqdm bar over the parts.

    Returns
    -------
    Estimate
        Exhaustive: the exact value with ``stderr = 0``, a degenerate interval
        ``[value, value]`` and ``n`` = number of edges. Sampled: the mean quality with a 95%
        Wilson interval (``hit``) or normal interval (``reciprocal_rank``), ``n = n_samples``.

    Raises
    ------
    TypeError
        ``profiles`` not a matrix, ``recommender`` without ``recommend``, non-integer ``k``
        or ``n_partitions``, ``executor`` neither None nor a ``dask.distributed.Client``.
    ValueError
        ``k`` outside ``[1, n_items]``, unknown ``quality``, non-positive ``item_weights``,
        negative ``user_weights`` or none positive on a user holding an item,
        ``n_samples < 1``, ``n_partitions < 1``; a recommender returning an item id outside
        ``[0, n_items)`` or an item twice in a list (the recommender and the first bad row
        are named); a closed or unreachable client (before any work is sent).

    Warns
    -----
    EmptyProfilesWarning
        ``profiles`` hold no edge: the score is undefined and returned as ``nan``.

    Notes
    -----
    de Myttenaere et al. (2014), equation of the LOO score:
    ``L_t(g) = sum_u P(u) sum_{i in I_u} P(i|u,w) l(g(u_-i), i)``. For a constant
    recommender ``L_t(g) = sum_i P_t(i|w) l(g, i)`` where ``P_t(i|w) = sum_u P(u) P(i|u,w)``,
    which is why matching item marginals with weights removes its campaign bias.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> class Fixed:
    ...     def fit(self, profiles): return self
    ...     def recommend(self, users, k, *, removed=None):
    ...         return np.tile(np.arange(k), (len(users), 1))
    >>> B = sp.csr_array(np.array([[1, 1, 0], [0, 1, 1]]))
    >>> offline_score(B, Fixed(), k=1).value   # item 0 is 1/4 of the LOO mass
    0.25
    """
    m = _as_profiles(profiles)
    k = _check_k(k, m.shape[1])
    quality = _check_quality(quality)
    n_samples = _check_n_samples(n_samples)
    batch_size = _check_batch_size(batch_size)
    _check_recommender(recommender)
    if n_partitions is not None:
        n_partitions = check_int(n_partitions, "n_partitions", low=1)
    executor = check_executor(executor)
    pu = _user_probabilities(m, user_weights)
    w = _item_weights(item_weights, m.shape[1])
    if pu is None:
        return _empty_estimate()
    if fit:
        recommender.fit(m)
    score = dict(k=k, quality=quality, batch_size=batch_size, n_items=m.shape[1],
                 executor=executor, n_partitions=n_partitions, progress=bool(progress))
    if n_samples is None:
        q = _score_pairs(recommender, _edge_users(m), m.indices, **score)
        value = _weighted_sum(_edge_probabilities(m, pu, w), q)
        return _exact_estimate(value, q.size)
    e = _draw_edges(m, pu, w, n_samples, as_generator(rng))
    # np.searchsorted on indptr maps an edge back to its user.
    users = np.searchsorted(m.indptr, e, side="right") - 1
    q = _score_pairs(recommender, users, m.indices[e], **score)
    return _estimate(q, quality)
