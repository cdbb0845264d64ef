"""Recency-weighted popularity: the most held items, each holding weighted by its age."""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from agents._recommenders import _as_csr, _edge_keys, _Recommender

__all__ = ["RecencyPopularity"]


class RecencyPopularity(_Recommender):
    """The items most held *lately*: each holding counts ``2^(-age / halflife)``.

    Parameters
    ----------
    halflife : float, default 30.0
        Half-life of a holding's weight, in the units of ``times`` (ticks, days).
    exclude_seen : bool, default True
        Leave out the items the (reduced) profile holds.

    Notes
    -----
    ``score(i) = sum_{u holds i} 2^(-(t_now - t_ui) / halflife)``, ``t_ui`` the time the
    holding began and ``t_now`` the latest time of the fitted log. ``fit(profiles, times=T)``
    takes ``T`` with the sparsity of ``profiles`` (its stored values are the times); without
    ``times`` every holding is of age 0 and the recommender is :class:`Popularity`. With
    ``removed[j] = r`` the weight of the edge ``(users[j], r)`` is taken off ``r``'s score:
    exactly a refit without that edge (``t_now`` kept). Ties: lower item id first. A
    recency-weighted popularity follows items' life cycles (a film's audience comes soon
    after its release and fades), which the plain count of holders ignores.
    """

    def __init__(self, halflife: float = 30.0, *, exclude_seen: bool = True):
        if isinstance(halflife, bool) or not isinstance(halflife, (int, float, np.number)) \
                or not (math.isfinite(halflife) and halflife > 0):
            raise ValueError(f"`halflife` must be a finite number > 0; got {halflife!r}.")
        if not isinstance(exclude_seen, (bool, np.bool_)):
            raise TypeError(f"`exclude_seen` must be a bool; got {type(exclude_seen).__name__}.")
        self.halflife = float(halflife)
        self.exclude_seen = bool(exclude_seen)

    def __repr__(self) -> str:
        return f"RecencyPopularity(halflife={self.halflife:g}, exclude_seen={self.exclude_seen})"

    def fit(self, profiles, *, times=None):
        """Fit on ``profiles`` (users x items), with the holdings' ``times`` (a sparse matrix
        of the same shape whose entry ``(u, i)`` is the time ``u`` began holding ``i``; an
        absent entry reads 0), or None; returns ``self``."""
        csr = _as_csr(profiles, binary=True)
        if times is None:
            w = np.ones(csr.nnz)
        else:
            if not sp.issparse(times):
                raise TypeError(f"`times` must be a scipy.sparse matrix or None; got "
                                f"{type(times).__name__}.")
            t = _as_csr(times, "times", binary=False)
            if t.shape != csr.shape:
                raise ValueError(f"`times` must have the shape of `profiles` {csr.shape}; got "
                                 f"{t.shape}.")
            keys, t_keys = _edge_keys(csr), _edge_keys(t)
            at = np.minimum(np.searchsorted(t_keys, keys), max(t_keys.size - 1, 0))
            w = np.where(t_keys[at] == keys, t.data[at], 0.0) if t_keys.size else \
                np.zeros(keys.size)
            w = np.exp2(-(w.max(initial=0.0) - w) / self.halflife)
        self._weights = w  # in the CSR order of the fitted profiles
        self._fit(csr)
        self._profiles = csr
        self._keys = _edge_keys(csr)
        return self

    def _fit(self, csr) -> None:
        self._scores_all = np.bincount(csr.indices, weights=self._weights,
                                       minlength=csr.shape[1])

    def _scores(self, users, removed, pos):
        scores = np.tile(self._scores_all, (users.size, 1))
        has = removed >= 0
        rows = np.flatnonzero(has)
        scores[rows, removed[has]] -= self._weights[pos[has]]
        if self.exclude_seen:
            r, c, _ = self._held_mask_rows(users, pos)
            scores[r, c] = -np.inf
        return scores

    def scores(self, users) -> np.ndarray:
        """The score of every item for each of ``users`` (held items not left out)."""
        self._check_fitted("scores")
        return np.tile(self._scores_all, (np.asarray(users).size, 1))
