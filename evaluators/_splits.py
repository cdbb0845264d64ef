"""Testing schemes: seeded index splits of a ratings table (course notes, DESIGN.md source 3).

Every function returns index arrays into the ratings (sorted, int64, read-only) so that one
split can be applied to any number of aligned arrays. Splits partition ``range(n_ratings)``:
no index is in two parts and every index is in one.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass

import numpy as np

from recloop_base.validation import as_generator

__all__ = [
    "TrainTestSplit",
    "TrainValidationTestSplit",
    "train_test_split",
    "temporal_split",
    "train_validation_test_split",
    "kfold",
    "kfold_by_user",
    "leave_one_out",
]


def _frozen_index(a) -> np.ndarray:
    arr = np.sort(np.asarray(a, dtype=np.int64))
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class TrainTestSplit:
    """Indices of the training and test ratings (sorted, disjoint, covering all ratings).

    Attributes
    ----------
    train, test : ndarray of int64
        Read-only index arrays into the ratings.
    """

    train: np.ndarray
    test: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "train", _frozen_index(self.train))
        object.__setattr__(self, "test", _frozen_index(self.test))


@dataclass(frozen=True, eq=False)
class TrainValidationTestSplit:
    """Indices of the training, validation and test ratings (sorted, disjoint, covering).

    Attributes
    ----------
    train, validation, test : ndarray of int64
        Read-only index arrays into the ratings.
    """

    train: np.ndarray
    validation: np.ndarray
    test: np.ndarray

    def __post_init__(self):
        for name in ("train", "validation", "test"):
            object.__setattr__(self, name, _frozen_index(getattr(self, name)))


# -- validation ------------------------------------------------------------------------------

def _count(n, name: str) -> int:
    if isinstance(n, bool):
        raise TypeError(f"`{name}` must be an integer; got bool {n}.")
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"`{name}` must be an integer; got {type(n).__name__} {n!r}.") from None
    return int(n)


def _fraction(f, name: str) -> float:
    if isinstance(f, bool) or not isinstance(f, (int, float, np.integer, np.floating)):
        raise TypeError(f"`{name}` must be a number; got {type(f).__name__} {f!r}.")
    f = float(f)
    if not 0.0 < f < 1.0:
        raise ValueError(f"`{name}` must be in (0, 1); got {f}.")
    return f


def _size(f: float, n: int) -> int:
    # Round half up (Python's round() would round half to even).
    return int(math.floor(f * n + 0.5))


def _ids(users, name: str = "users") -> np.ndarray:
    a = np.asarray(users)
    if a.size == 0:
        raise ValueError(f"`{name}` must not be empty; got 0 ratings.")
    if a.dtype.kind not in "iuUS":
        raise TypeError(f"`{name}` must hold integer or string ids; got dtype {a.dtype}.")
    if a.ndim != 1:
        raise ValueError(f"`{name}` must be 1-dimensional; got shape {a.shape}.")
    return a


def _times(timestamps, n: int | None = None) -> np.ndarray:
    t = np.asarray(timestamps)
    if t.dtype.kind not in "iuf" and t.dtype.kind != "M":
        raise TypeError(f"`timestamps` must hold numbers or datetime64; got dtype {t.dtype}.")
    if t.ndim != 1:
        raise ValueError(f"`timestamps` must be 1-dimensional; got shape {t.shape}.")
    if n is not None and t.size != n:
        raise ValueError(f"`timestamps` must have one entry per rating ({n}); got {t.size}.")
    if t.dtype.kind == "f" and not np.isfinite(t).all():
        i = int(np.argmax(~np.isfinite(t)))
        raise ValueError(f"`timestamps` must be finite; got {t[i]} at index {i}.")
    if t.dtype.kind == "M" and np.isnat(t).any():
        raise ValueError(f"`timestamps` must not contain NaT; got NaT at index "
                         f"{int(np.argmax(np.isnat(t)))}.")
    return t


def _n_folds(n_folds, n_units: int, unit: str) -> int:
    n_folds = _count(n_folds, "n_folds")
    if n_folds < 2:
        raise ValueError(f"`n_folds` must be >= 2; got {n_folds}.")
    if n_folds > n_units:
        raise ValueError(f"`n_folds` must be <= the number of {unit} ({n_units}) so that no "
                         f"fold is empty; got {n_folds}.")
    return n_folds


# -- splits ----------------------------------------------------------------------------------

def train_test_split(n_ratings, *, test_fraction=0.2, rng=None) -> TrainTestSplit:
    """Random train/test split of ``n_ratings`` ratings.

    Parameters
    ----------
    n_ratings : int
        Number of ratings, ``>= 2``.
    test_fraction : float, default 0.2
        Share of ratings in the test set, in (0, 1); the test set holds
        ``round(test_fraction * n_ratings)`` ratings (half rounded up), at least 1 and at
        most ``n_ratings - 1``.
    rng : None, int, SeedSequence or Generator
        Passed once to :func:`numpy.random.default_rng`.

    Returns
    -------
    TrainTestSplit

    Raises
    ------
    TypeError
        ``n_ratings`` not an integer, ``test_fraction`` not a number.
    ValueError
        ``test_fraction`` outside (0, 1), or a part that would be empty.

    Examples
    --------
    >>> s = train_test_split(10, test_fraction=0.3, rng=0)
    >>> len(s.train), len(s.test)
    (7, 3)
    """
    n = _count(n_ratings, "n_ratings")
    f = _fraction(test_fraction, "test_fraction")
    n_test = _size(f, n)
    if n_test < 1 or n_test > n - 1:
        raise ValueError(f"`test_fraction` * `n_ratings` = {f} * {n} gives {n_test} test "
                         f"ratings; both parts must be non-empty (need 1 <= {n_test} <= "
                         f"{n - 1}).")
    perm = as_generator(rng).permutation(n)
    return TrainTestSplit(train=perm[n_test:], test=perm[:n_test])


def temporal_split(timestamps, *, test_fraction=None, cutoff=None) -> TrainTestSplit:
    """Temporal train/test split: the latest ratings are the test set (deterministic).

    Parameters
    ----------
    timestamps : array_like of int, float or datetime64, shape (n_ratings,)
        Time of each rating.
    test_fraction : float, optional
        Share of ratings, in (0, 1), that goes to the test set: the
        ``round(test_fraction * n_ratings)`` latest. Default 0.2 when ``cutoff`` is not given.
    cutoff : scalar, optional
        Instead of a fraction: ratings with ``timestamp >= cutoff`` are the test set.

    Returns
    -------
    TrainTestSplit
        No training rating is later than a test rating. With ``test_fraction``, ratings
        sharing the boundary time are ordered by their index (earlier index to train).

    Raises
    ------
    ValueError
        Both ``test_fraction`` and ``cutoff`` given, non-finite timestamps, an empty part.

    Examples
    --------
    >>> temporal_split([5, 1, 4, 2, 3], test_fraction=0.4).test.tolist()
    [0, 2]
    """
    t = _times(timestamps)
    n = t.size
    if test_fraction is not None and cutoff is not None:
        raise ValueError(f"Give at most one of `test_fraction` and `cutoff`; got "
                         f"test_fraction={test_fraction!r} and cutoff={cutoff!r}.")
    if cutoff is not None:
        try:
            test = t >= cutoff
        except TypeError:
            raise TypeError(f"`cutoff` must be comparable with `timestamps` ({t.dtype}); "
                            f"got {type(cutoff).__name__} {cutoff!r}.") from None
        if test.all() or not test.any():
            raise ValueError(f"`cutoff` = {cutoff!r} puts {int(test.sum())} of {n} ratings in "
                             f"the test set; both parts must be non-empty.")
        idx = np.arange(n)
        return TrainTestSplit(train=idx[~test], test=idx[test])
    f = _fraction(0.2 if test_fraction is None else test_fraction, "test_fraction")
    n_test = _size(f, n)
    if n_test < 1 or n_test > n - 1:
        raise ValueError(f"`test_fraction` * n_ratings = {f} * {n} gives {n_test} test "
                         f"ratings; both parts must be non-empty.")
    order = np.argsort(t, kind="stable")
    return TrainTestSplit(train=order[: n - n_test], test=order[n - n_test:])


def train_validation_test_split(n_ratings, *, validation_fraction=0.1, test_fraction=0.2,
                                rng=None) -> TrainValidationTestSplit:
    """Random train/validation/test split of ``n_ratings`` ratings.

    Parameters
    ----------
    n_ratings : int
        Number of ratings, ``>= 3``.
    validation_fraction, test_fraction : float, default 0.1 and 0.2
        Shares in (0, 1) with a sum below 1; each part holds ``round(fraction * n)`` ratings
        (half rounded up) and must be non-empty, as must the training part.
    rng : None, int, SeedSequence or Generator
        Passed once to :func:`numpy.random.default_rng`.

    Returns
    -------
    TrainValidationTestSplit

    Raises
    ------
    TypeError, ValueError
        As :func:`train_test_split`; fractions summing to 1 or more.

    Examples
    --------
    >>> s = train_validation_test_split(10, rng=0)
    >>> len(s.train), len(s.validation), len(s.test)
    (7, 1, 2)
    """
    n = _count(n_ratings, "n_ratings")
    fv = _fraction(validation_fraction, "validation_fraction")
    ft = _fraction(test_fraction, "test_fraction")
    if fv + ft >= 1:
        raise ValueError(f"`validation_fraction` + `test_fraction` must be < 1; got "
                         f"{fv} + {ft} = {fv + ft}.")
    n_val, n_test = _size(fv, n), _size(ft, n)
    if n_val < 1 or n_test < 1 or n - n_val - n_test < 1:
        raise ValueError(f"With n_ratings = {n}, validation_fraction = {fv} and "
                         f"test_fraction = {ft} the parts hold {n - n_val - n_test}, {n_val} "
                         f"and {n_test} ratings; every part must be non-empty.")
    perm = as_generator(rng).permutation(n)
    return TrainValidationTestSplit(train=perm[n_val + n_test:], validation=perm[:n_val],
                                    test=perm[n_val:n_val + n_test])


def kfold(n_ratings, *, n_folds=5, rng=None) -> tuple[TrainTestSplit, ...]:
    """K-fold cross-validation by rating: each rating is in exactly one test fold.

    Parameters
    ----------
    n_ratings : int
        Number of ratings.
    n_folds : int, default 5
        ``2 <= n_folds <= n_ratings``; fold sizes differ by at most one.
    rng : None, int, SeedSequence or Generator
        Passed once to :func:`numpy.random.default_rng`.

    Returns
    -------
    tuple of TrainTestSplit
        ``n_folds`` splits; fold ``f``'s test set is the ``f``-th block of a random
        permutation, its training set everything else.

    Raises
    ------
    TypeError, ValueError
        Non-integer arguments, ``n_folds`` out of range.

    Examples
    --------
    >>> [len(s.test) for s in kfold(10, n_folds=3, rng=0)]
    [4, 3, 3]
    """
    n = _count(n_ratings, "n_ratings")
    k = _n_folds(n_folds, n, "ratings")
    perm = as_generator(rng).permutation(n)
    return _folds(perm, k, lambda block: block, n)


def _folds(perm, k, to_ratings, n):
    out = []
    for block in np.array_split(perm, k):
        test = to_ratings(block)
        mask = np.ones(n, dtype=bool)
        mask[test] = False
        out.append(TrainTestSplit(train=np.flatnonzero(mask), test=test))
    return tuple(out)


def kfold_by_user(users, *, n_folds=5, rng=None) -> tuple[TrainTestSplit, ...]:
    """K-fold cross-validation by user: all of a user's ratings fall in the same test fold.

    This is the protocol of Zhang et al. (2016): the active users of a fold are held out,
    the neighbours come from the other folds.

    Parameters
    ----------
    users : array_like of int or str, shape (n_ratings,)
        User id of each rating.
    n_folds : int, default 5
        ``2 <= n_folds <= number of distinct users``; folds hold numbers of users that differ
        by at most one.
    rng : None, int, SeedSequence or Generator
        Passed once to :func:`numpy.random.default_rng`.

    Returns
    -------
    tuple of TrainTestSplit
        Index arrays into the ratings.

    Raises
    ------
    TypeError, ValueError
        ``users`` not 1-D ids, ``n_folds`` out of range.

    Examples
    --------
    >>> folds = kfold_by_user([7, 7, 8, 9], n_folds=3, rng=0)
    >>> sorted(len(f.test) for f in folds)
    [1, 1, 2]
    """
    u = _ids(users)
    uniq, inv = np.unique(u, return_inverse=True)
    k = _n_folds(n_folds, uniq.size, "distinct users")
    perm = as_generator(rng).permutation(uniq.size)
    # Ratings sorted by user once, so each fold's ratings are a few slices of one array.
    order = np.argsort(inv, kind="stable")
    starts = np.concatenate([[0], np.cumsum(np.bincount(inv, minlength=uniq.size))])

    def to_ratings(block):
        if block.size == 0:
            return np.empty(0, np.int64)
        return np.concatenate([order[starts[b]:starts[b + 1]] for b in block])

    return _folds(perm, k, to_ratings, u.size)


def leave_one_out(users, *, which="random", timestamps=None, min_ratings=2,
                  rng=None) -> TrainTestSplit:
    """Leave-one-out per user: one rating of each user is the test set.

    Parameters
    ----------
    users : array_like of int or str, shape (n_ratings,)
        User id of each rating.
    which : {"random", "last"}, default "random"
        Hold out a uniformly random rating of each user, or the latest one by
        ``timestamps`` (ties: the one with the larger index).
    timestamps : array_like, shape (n_ratings,), optional
        Required for ``which="last"``, not allowed otherwise.
    min_ratings : int, default 2
        Users with fewer ratings keep them all in the training set (holding out a user's
        only rating leaves nothing to learn from).
    rng : None, int, SeedSequence or Generator
        Passed once to :func:`numpy.random.default_rng` (``which="random"``).

    Returns
    -------
    TrainTestSplit
        ``test`` has one index per user with at least ``min_ratings`` ratings.

    Raises
    ------
    TypeError, ValueError
        Unknown ``which``, missing or superfluous ``timestamps``, ``min_ratings < 1``,
        mismatched lengths.

    Examples
    --------
    >>> leave_one_out([1, 1, 2, 2], which="last", timestamps=[5, 3, 1, 2]).test.tolist()
    [0, 3]
    """
    u = _ids(users)
    n = u.size
    if which not in ("random", "last"):
        raise ValueError(f"`which` must be 'random' or 'last'; got {which!r}.")
    if which == "last" and timestamps is None:
        raise ValueError("`timestamps` are required for which='last'; got None.")
    if which == "random" and timestamps is not None:
        raise ValueError("`timestamps` are only used with which='last'; got timestamps with "
                         "which='random'.")
    m = _count(min_ratings, "min_ratings")
    if m < 1:
        raise ValueError(f"`min_ratings` must be >= 1; got {m}.")
    _, inv = np.unique(u, return_inverse=True)
    if which == "last":
        key = _times(timestamps, n)
    else:
        key = as_generator(rng).random(n)
    # Sort by (user, key, index); the last row of each user's block is the held-out rating.
    order = np.lexsort((np.arange(n), key, inv))
    gu = inv[order]
    last = np.flatnonzero(np.r_[gu[1:] != gu[:-1], True])
    counts = np.bincount(inv)
    test = order[last[counts[gu[last]] >= m]]
    mask = np.ones(n, dtype=bool)
    mask[test] = False
    return TrainTestSplit(train=np.flatnonzero(mask), test=test)
