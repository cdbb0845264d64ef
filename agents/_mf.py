"""Matrix factorisation for implicit feedback: alternating least squares with confidences
(Hu, Koren & Volinsky 2008), :class:`ImplicitMF`."""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from agents._base import as_generator
from agents._recommenders import _Recommender

__all__ = ["ImplicitMF"]


def _solve_rows(csr: sp.csr_array, fixed: np.ndarray, reg: float, alpha: float,
                rows: np.ndarray | None = None, method: str = "fast") -> np.ndarray:
    """Least-squares factors of the rows of ``csr`` (binary) against the ``fixed`` factors.

    Row ``u`` minimises ``sum_i c_ui (p_ui - x . y_i)^2 + reg |x|^2`` with ``p_ui = 1`` on
    held items (0 elsewhere) and ``c_ui = 1 + alpha p_ui``:
    ``x_u = (Y^T C_u Y + reg I)^-1 Y^T C_u p_u``.

    ``"fast"`` (Hu et al.): ``Y^T C_u Y = Y^T Y + alpha Y_u^T Y_u`` over the held items only,
    ``Y^T C_u p_u = (1 + alpha) Y_u^T 1``; ``"naive"``: the dense ``C_u`` and ``p_u`` written
    out (the reference).
    """
    n_rows = csr.shape[0]
    rows = np.arange(n_rows) if rows is None else rows
    k = fixed.shape[1]
    out = np.zeros((rows.size, k))
    eye = reg * np.eye(k)
    if method == "naive":
        for j, u in enumerate(rows.tolist()):
            p = np.zeros(csr.shape[1])
            p[csr.indices[csr.indptr[u]:csr.indptr[u + 1]]] = 1.0
            c = 1.0 + alpha * p
            a = fixed.T @ (c[:, None] * fixed) + eye
            out[j] = np.linalg.solve(a, fixed.T @ (c * p))
        return out
    gram = fixed.T @ fixed + eye
    sub = csr if rows.size == n_rows and np.array_equal(rows, np.arange(n_rows)) else csr[rows]
    outer = (fixed[:, :, None] * fixed[:, None, :]).reshape(fixed.shape[0], k * k)
    a = gram[None, :, :] + alpha * np.asarray(sub @ outer).reshape(rows.size, k, k)
    b = (1.0 + alpha) * np.asarray(sub @ fixed)
    return np.linalg.solve(a, b[:, :, None])[:, :, 0]


class ImplicitMF(_Recommender):
    """Implicit-feedback matrix factorisation by alternating least squares.

    Parameters
    ----------
    n_factors : int, default 16
        Rank of the user and item factors.
    reg : float, default 0.1
        Ridge penalty ``reg (|x_u|^2 + |y_i|^2)``.
    alpha : float, default 10.0
        Confidence of a held item: ``c_ui = 1 + alpha`` (1 for the others).
    n_iter : int, default 10
        Alternating sweeps (users, then items).
    exclude_seen : bool, default True
        Leave out the items the (reduced) profile holds.
    method : {"fast", "naive"}
        ``"naive"`` solves every row with its dense confidence matrix (the reference).
    rng : None, int, SeedSequence or Generator
        The items' starting factors (``N(0, 0.01)``).

    Notes
    -----
    Minimises ``sum_ui c_ui (p_ui - x_u . y_i)^2 + reg (sum_u |x_u|^2 + sum_i |y_i|^2)`` over
    every cell (held items ``p = 1`` with confidence ``1 + alpha``, the others ``p = 0`` with
    confidence 1) by alternating exact least squares; each row's solve costs
    ``O(k^2 |I_u| + k^3)`` with the Gram trick of Hu, Koren & Volinsky (2008), "Collaborative
    Filtering for Implicit Feedback Datasets", ICDM. Scores ``x_u . y_i``; ties to the lower
    item id. With ``removed[j] = r``, user ``users[j]``'s factor is solved again without
    ``r`` against the fitted item factors (a fold-in: the item factors still saw the edge, so
    this is not the exact leave-one-out of a refit).
    """

    def __init__(self, n_factors: int = 16, *, reg: float = 0.1, alpha: float = 10.0,
                 n_iter: int = 10, exclude_seen: bool = True, method: str = "fast",
                 rng=None):
        if isinstance(n_factors, bool) or not isinstance(n_factors, (int, np.integer)) \
                or n_factors < 1:
            raise ValueError(f"`n_factors` must be an int >= 1; got {n_factors!r}.")
        if isinstance(n_iter, bool) or not isinstance(n_iter, (int, np.integer)) or n_iter < 1:
            raise ValueError(f"`n_iter` must be an int >= 1; got {n_iter!r}.")
        for name, v in (("reg", reg), ("alpha", alpha)):
            if isinstance(v, bool) or not isinstance(v, (int, float, np.number)) \
                    or not (math.isfinite(v) and v >= 0):
                raise ValueError(f"`{name}` must be a finite number >= 0; got {v!r}.")
        if reg == 0:
            raise ValueError("`reg` must be > 0 (the least-squares systems must be solvable); "
                             "got 0.")
        if method not in ("fast", "naive"):
            raise ValueError(f"`method` must be one of 'fast', 'naive'; got {method!r}.")
        if not isinstance(exclude_seen, (bool, np.bool_)):
            raise TypeError(f"`exclude_seen` must be a bool; got {type(exclude_seen).__name__}.")
        self.n_factors, self.reg, self.alpha = int(n_factors), float(reg), float(alpha)
        self.n_iter, self.exclude_seen, self.method = int(n_iter), bool(exclude_seen), method
        self.rng = rng

    def __repr__(self) -> str:
        return (f"ImplicitMF(n_factors={self.n_factors}, reg={self.reg:g}, "
                f"alpha={self.alpha:g}, n_iter={self.n_iter})")

    def _fit(self, csr) -> None:
        gen = as_generator(self.rng)
        k = self.n_factors
        y = gen.normal(0.0, 0.01, (csr.shape[1], k))
        csc = sp.csr_array(csr.T)
        csc.sort_indices()
        for _ in range(self.n_iter):
            x = _solve_rows(csr, y, self.reg, self.alpha, method=self.method)
            y = _solve_rows(csc, x, self.reg, self.alpha, method=self.method)
        self.user_factors = _solve_rows(csr, y, self.reg, self.alpha, method=self.method)
        self.item_factors = y

    def _scores(self, users, removed, pos):
        x = self.user_factors[users]
        has = np.flatnonzero(removed >= 0)
        if has.size:  # fold the user in again without the removed edge
            prof = self._profiles
            rows, cols, _ = self._held_mask_rows(users[has], pos[has])
            reduced = sp.csr_array((np.ones(rows.size), (rows, cols)),
                                   shape=(has.size, prof.shape[1]))
            reduced.sort_indices()
            x = x.copy()
            x[has] = _solve_rows(reduced, self.item_factors, self.reg, self.alpha,
                                 method=self.method)
        scores = x @ self.item_factors.T
        if self.exclude_seen:
            r, c, _ = self._held_mask_rows(users, pos)
            scores[r, c] = -np.inf
        return scores

    def scores(self, users) -> np.ndarray:
        """``x_u . y_i`` for every item and each of ``users`` (held items not left out)."""
        self._check_fitted("scores")
        return self.user_factors[np.asarray(users)] @ self.item_factors.T
