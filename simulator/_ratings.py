"""Ratings of a calibrated world's adoptions: an ordered-logit model on the latent score.

Model (cumulative logit, "proportional odds"; McCullagh 1980)
-------------------------------------------------------------
A rating takes one of ``K`` ordered levels ``v_0 < ... < v_{K-1}``. For user ``u`` and item
``i`` at tick ``t``::

    eta_ui(t) = slope * x_u(t) . f_i + b_u + c_i
    P(R <= k) = expit(theta_k - eta_ui(t)),   theta_0 < ... < theta_{K-2}

``x_u . f_i`` is the world's own latent taste score (the one that drives adoption), ``b_u``
a user's leniency, ``c_i`` an item's quality, ``theta`` the fitted thresholds. Why this
model: ratings are ordinal (the distance from 1 to 2 stars is not that from 4 to 5, and the
histogram of a real log is far from symmetric), the logistic link is the world's adoption
link, one linear predictor per pair keeps the fit a convex problem, and the thresholds
reproduce the histogram while the offsets and the slope carry who rates what how. A world
draws the rating of an adoption from a counter-based uniform keyed by (user, item, tick), so
the same adoption gets the same rating in a world and its counterfactual twin.

Continuous scales (Jester's [-10, 10]) are cut into at most :data:`MAX_LEVELS` equal-width
bins; a level's value is the mean of the real ratings in its bin, so generated ratings stay
on the log's own scale.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from recloop_base.validation import ArgumentValueError

__all__ = ["MAX_LEVELS", "RatingModel", "fit_ratings", "rating_levels"]

#: Most levels of a rating scale: more distinct values are binned.
MAX_LEVELS = 20
#: Bound of the linear predictor (expit stays away from 0 and 1 in float64).
_ETA_MAX = 30.0


def _ro(a, dtype=np.float64, ndim=1, name="array") -> np.ndarray:
    arr = np.array(a, dtype=dtype, copy=True)
    if arr.ndim != ndim:
        raise ArgumentValueError(name, f"{ndim}-dimensional", f"shape {arr.shape}")
    bad = np.flatnonzero(~np.isfinite(arr.ravel()))
    if bad.size:
        raise ArgumentValueError(name, "finite", f"{arr.ravel()[bad[0]]} at index {bad[0]}")
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class RatingModel:
    """A fitted ordered-logit rating model (see :mod:`simulator._ratings`).

    Parameters
    ----------
    levels : array_like, shape (K,)
        Rating values, increasing (``K >= 2``).
    bounds : array_like, shape (K - 1,)
        Where real ratings are cut into levels: level ``k`` holds the ratings in
        ``[bounds[k - 1], bounds[k])``.
    thresholds : array_like, shape (K - 1,)
        ``theta``, increasing.
    slope : float
        Weight of the latent score ``x_u . f_i``.
    user_offset, item_offset : array_like, shapes (n_users,), (n_items,)
    """

    levels: np.ndarray
    bounds: np.ndarray
    thresholds: np.ndarray
    slope: float
    user_offset: np.ndarray
    item_offset: np.ndarray

    def __post_init__(self):
        set_ = lambda n, v: object.__setattr__(self, n, v)  # noqa: E731
        for name in ("levels", "bounds", "thresholds", "user_offset", "item_offset"):
            set_(name, _ro(getattr(self, name), name=f"ratings.{name}"))
        k = self.levels.size
        if k < 2:
            raise ArgumentValueError("ratings.levels", "at least 2 levels", str(k))
        for name in ("bounds", "thresholds"):
            a = getattr(self, name)
            if a.size != k - 1:
                raise ArgumentValueError(f"ratings.{name}", f"{k - 1} entries (one fewer than "
                                         "the levels)", str(a.size))
        for name in ("levels", "bounds", "thresholds"):
            a = getattr(self, name)
            if np.any(np.diff(a) <= 0):
                raise ArgumentValueError(f"ratings.{name}", "strictly increasing", str(a))
        slope = float(self.slope)
        if not math.isfinite(slope):
            raise ArgumentValueError("ratings.slope", "finite", repr(self.slope))
        set_("slope", slope)

    @property
    def n_levels(self) -> int:
        return int(self.levels.size)

    def level_of(self, ratings) -> np.ndarray:
        """The level index of real ratings (binned with ``bounds``)."""
        return np.searchsorted(self.bounds, np.asarray(ratings, np.float64), side="right")

    def probabilities(self, eta) -> np.ndarray:
        """``P(R = k)`` for linear predictors ``eta``: shape ``eta.shape + (K,)``."""
        cum = expit(self.thresholds - np.clip(np.asarray(eta, np.float64), -_ETA_MAX,
                                              _ETA_MAX)[..., None])
        ones = np.ones(cum.shape[:-1] + (1,))
        return np.diff(np.concatenate([0.0 * ones, cum, ones], axis=-1), axis=-1)

    def draw(self, eta, uniforms) -> np.ndarray:
        """Ratings (values of ``levels``) by inverse CDF: the first level ``k`` with
        ``uniform < P(R <= k)``."""
        eta = np.clip(np.asarray(eta, np.float64), -_ETA_MAX, _ETA_MAX)
        cum = expit(self.thresholds[None, :] - eta[:, None])
        k = (np.asarray(uniforms)[:, None] >= cum).sum(axis=1)
        return self.levels[k]

    def subset(self, users=None, items=None) -> "RatingModel":
        """The model for a world with these users and items (rows of the offsets)."""
        return RatingModel(levels=self.levels, bounds=self.bounds, thresholds=self.thresholds,
                           slope=self.slope,
                           user_offset=self.user_offset if users is None
                           else self.user_offset[np.asarray(users)],
                           item_offset=self.item_offset if items is None
                           else self.item_offset[np.asarray(items)])


def rating_levels(ratings) -> tuple[np.ndarray, np.ndarray]:
    """``(levels, bounds)`` of a log's ratings.

    At most :data:`MAX_LEVELS` distinct values: the values themselves, cut halfway between
    neighbours. More (a continuous scale): :data:`MAX_LEVELS` equal-width bins over
    ``[min, max]``, empty bins dropped, a level's value the mean rating of its bin.
    """
    r = np.asarray(ratings, np.float64)
    values = np.unique(r)
    if values.size <= MAX_LEVELS:
        return values, 0.5 * (values[1:] + values[:-1])
    edges = np.linspace(values[0], values[-1], MAX_LEVELS + 1)
    idx = np.clip(np.searchsorted(edges[1:-1], r, side="right"), 0, MAX_LEVELS - 1)
    count = np.bincount(idx, minlength=MAX_LEVELS)
    total = np.bincount(idx, r, minlength=MAX_LEVELS)
    kept = np.flatnonzero(count > 0)
    return total[kept] / count[kept], edges[kept[1:]]


def _nll_grad(params, level, score, users, items, n_users, n_items, reg, n_levels):
    """Penalised negative log-likelihood of the ordered logit and its gradient."""
    slope = params[0]
    b = params[1:1 + n_users]
    c = params[1 + n_users:1 + n_users + n_items]
    t0 = params[1 + n_users + n_items]
    inc = params[2 + n_users + n_items:]
    theta = t0 + np.concatenate([[0.0], np.cumsum(np.exp(inc))])
    eta = slope * score
    eta += np.take(b, users)
    eta += np.take(c, items)
    np.clip(eta, -_ETA_MAX, _ETA_MAX, out=eta)
    ext = np.concatenate([[-np.inf], theta, [np.inf]])
    # a = theta_k - eta (inf for the top level), z = theta_{k-1} - eta (-inf for the bottom)
    fa = expit(np.take(ext, level + 1) - eta)
    fz = expit(np.take(ext, level) - eta)
    p = np.maximum(fa - fz, 1e-300)
    # d(-log p)/d eta = (f'(a) - f'(z)) / p with f' = f (1 - f)
    da = fa * (1.0 - fa)
    da /= p
    dz = fz * (1.0 - fz)
    dz /= p
    nll = -np.log(p).sum() + 0.5 * reg * (b @ b + c @ c)
    g_eta = da - dz  # d nll / d eta
    grad = np.empty_like(params)
    grad[0] = g_eta @ score
    grad[1:1 + n_users] = np.bincount(users, g_eta, minlength=n_users) + reg * b
    grad[1 + n_users:1 + n_users + n_items] = np.bincount(items, g_eta, minlength=n_items) + reg * c
    # d nll / d theta_j: -da where level k == j (upper bound), +dz where k - 1 == j
    g_theta = (-np.bincount(level, da, minlength=n_levels)[:n_levels - 1]
               + np.bincount(level, dz, minlength=n_levels)[1:])
    # theta_j = t0 + sum_{m < j} exp(inc_m): d/d t0 = sum, d/d inc_m = exp(inc_m) sum_{j > m}
    grad[1 + n_users + n_items] = g_theta.sum()
    tail = np.cumsum(g_theta[::-1])[::-1]  # sum_{j >= m}
    grad[2 + n_users + n_items:] = np.exp(inc) * tail[1:]
    return nll, grad


def fit_ratings(users, items, ratings, score, n_users: int, n_items: int, *,
                reg: float = 1.0) -> tuple[RatingModel, dict]:
    """Fit the ordered-logit rating model by penalised maximum likelihood.

    Parameters
    ----------
    users, items : array_like of int, shape (n,)
    ratings : array_like of float, shape (n,)
        At least two distinct values.
    score : array_like of float, shape (n,)
        The latent score ``x_u . f_i`` of each rated pair.
    n_users, n_items : int
    reg : float
        Ridge penalty ``reg / 2 (|b|^2 + |c|^2)`` on the offsets.

    Returns
    -------
    (RatingModel, dict)
        The model and ``{"n_iter", "converged", "log_likelihood"}`` (per rating).

    Notes
    -----
    L-BFGS-B on ``(slope, b, c, theta_0, log(theta_k - theta_{k-1}))`` (the increments'
    logs keep the thresholds ordered), from zero offsets, slope 0 and the thresholds of the
    empirical cumulative histogram (the exact fit of the marginals alone).
    """
    from scipy.optimize import minimize

    r = np.asarray(ratings, np.float64)
    levels, bounds = rating_levels(r)
    if levels.size < 2:
        raise ArgumentValueError("interactions (ratings)", "at least two distinct ratings to "
                                 "fit a rating model", f"every rating {levels[0]:g}")
    k = levels.size
    model0 = RatingModel(levels=levels, bounds=bounds, thresholds=np.arange(k - 1.0),
                         slope=0.0, user_offset=np.zeros(n_users), item_offset=np.zeros(n_items))
    level = model0.level_of(r)
    cum = np.cumsum(np.bincount(level, minlength=k))[:-1] / r.size
    cum = np.clip(cum, 1e-6, 1 - 1e-6)
    theta0 = np.log(cum / (1 - cum))
    theta0 = np.maximum.accumulate(theta0 + 1e-6 * np.arange(k - 1))
    start = np.concatenate([[0.0], np.zeros(n_users + n_items), [theta0[0]],
                            np.log(np.maximum(np.diff(theta0), 1e-6))])
    score = np.asarray(score, np.float64)
    users, items = np.asarray(users, np.int64), np.asarray(items, np.int64)
    args = (level, score, users, items, n_users, n_items, float(reg), k)
    # Diagonal preconditioning: each variable rescaled by the square root of its curvature
    # at the start (a logit's curvature is at most 1/4 per rating), so that a user with 700
    # ratings and one with 20 move alike; L-BFGS needs 10x fewer iterations.
    scale = np.sqrt(np.concatenate([
        [0.25 * float(score @ score) + 1.0],
        0.25 * np.bincount(users, minlength=n_users) + reg + 1e-3,
        0.25 * np.bincount(items, minlength=n_items) + reg + 1e-3,
        np.full(k - 1, 0.25 * r.size / k)]))

    def f(z):
        v, g = _nll_grad(z / scale, *args)
        return v / r.size, g / (scale * r.size)

    res = minimize(f, start * scale, jac=True, method="L-BFGS-B",
                   options={"maxiter": 2000, "ftol": 1e-9, "gtol": 1e-5})
    p = res.x / scale
    theta = p[1 + n_users + n_items] + np.concatenate(
        [[0.0], np.cumsum(np.exp(p[2 + n_users + n_items:]))])
    model = RatingModel(levels=levels, bounds=bounds, thresholds=theta, slope=float(p[0]),
                        user_offset=p[1:1 + n_users], item_offset=p[1 + n_users:1 + n_users
                                                                     + n_items])
    return model, {"n_iter": int(res.nit), "converged": bool(res.success),
                   "log_likelihood": -float(res.fun)}
