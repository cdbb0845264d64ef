"""Tastes that move: the drift of a calibrated world's users, fitted from the log (issue 35).

A calibrated world's user ``u`` has the fitted taste ``x_u`` at its origin tick ``o_u`` (the
mean tick of its interactions) and wanders from there by a Gaussian random walk,

    x_u(t) = x_u + sigma (W_u(t) - W_u(o_u)),    W_u a standard Brownian motion per coordinate,

which :class:`simulator.World` simulates (``drift_rate = sigma``, ``fitted.taste_origin``).
``sigma`` is fitted on the log itself by an inner split in time: a static world is fitted to
the ticks before ``s1 = floor(0.8 n_ticks)`` and the items its returning users adopt after
``s1`` are scored by the world's choice probability,

    P(i | u, t) = w_i(t) pbar_ui(t) / sum_{j not held by u} w_j(t) pbar_uj(t),
    w_i(t) = exp(exposure a_i) alive_i(t) d_i(t),
    pbar_ui(t) = E expit(a_i + x_u(t) . f_i) ~ expit(m_ui / sqrt(1 + pi v |f_i|^2 / 8)),

the probability that an adoption of ``u`` at ``t`` is item ``i`` (an exposure meets ``i`` in
proportion to ``w_i``, ``u`` adopts it with ``pbar``; ``m_ui = a_i + x_u . f_i``, ``v`` the
variance of a coordinate of ``x_u(t) - x_u``; the probit approximation of the logistic-normal
mean, MacKay 1992). Three processes are compared by this held-out likelihood: static tastes
(``v = 0``), the random walk (``v = sigma^2 |t - o_u|``) and an Ornstein-Uhlenbeck process
around the population mean 0 (``x_u(t) = x_u e^{-theta |t - o_u|}`` plus a variance
``sigma^2 (1 - e^{-2 theta |t - o_u|}) / (2 theta)``). The world drifts by the random walk when
it beats the static tastes by a likelihood-ratio test at 5% (``2 Delta > 3.84``); the
Ornstein-Uhlenbeck fit is reported beside it (see ``docs/worlds.md`` for the figures and
why the random walk is kept).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.special import expit

__all__ = ["DriftFit", "choice_log_likelihood", "fit_drift"]

#: Fraction of the fitted span before the inner split.
INNER_SPLIT = 0.8
#: Users of the inner fit at most (a sample): one scalar is estimated from it.
MAX_USERS = 1000
#: (user, tick) groups of the held-out window scored at most (a sample).
MAX_GROUPS = 3000
#: Chi-square(1) 95% quantile: the likelihood-ratio bar of the random walk over static tastes.
_LR_BAR = 3.841458820694124
_SIGMA_BOUNDS = (1e-4, 10.0)
_CELLS = 1 << 21


@dataclass(frozen=True)
class DriftFit:
    """The taste drift fitted by :func:`fit_drift`.

    Attributes
    ----------
    model : str
        ``"random_walk"`` (the world drifts with :attr:`sigma`) or ``"static"`` (no drift:
        the walk did not beat static tastes, or there was nothing to fit it on; see
        :attr:`note`).
    sigma : float
        Random-walk standard deviation per coordinate per sqrt(tick) (0 when static).
    inner_split : int
        First tick of the inner held-out window (the fit saw ticks before it).
    n_users, n_heldout : int
        Returning users and held-out adoptions the likelihoods are over.
    ll_static, ll_random_walk, ll_ou : float
        Held-out log-likelihood per adoption of static tastes, of the random walk at
        :attr:`sigma` and of the Ornstein-Uhlenbeck process at (:attr:`ou_theta`,
        :attr:`ou_sigma`) (``nan`` when not measured).
    ou_theta, ou_sigma : float
    note : str
        Why there is no drift, when there is none for lack of data.
    """

    model: str
    sigma: float
    inner_split: int
    n_users: int
    n_heldout: int
    ll_static: float
    ll_random_walk: float
    ll_ou: float
    ou_theta: float
    ou_sigma: float
    note: str = ""

    @property
    def likelihood_ratio(self) -> float:
        """``2 n (ll_random_walk - ll_static)``: the random walk's test statistic."""
        return 2.0 * self.n_heldout * (self.ll_random_walk - self.ll_static)


def _none(note: str, inner: int = -1) -> DriftFit:
    nan = math.nan
    return DriftFit("static", 0.0, inner, 0, 0, nan, nan, nan, nan, nan, note)


@dataclass
class _Groups:
    """The held-out adoptions grouped by (user, tick), with what the choice needs."""

    m: np.ndarray  # (G, n_items) a_i + x_u . f_i
    w: np.ndarray  # (G, n_items) exposure weights, 0 where held or not alive
    f2: np.ndarray  # (n_items,) |f_i|^2
    dt: np.ndarray  # (G,) |t - o_u|
    rows: np.ndarray  # (n,) group of each adoption
    cols: np.ndarray  # (n,) its item
    users: np.ndarray  # (G,) the group's user
    a0: np.ndarray  # (n_items,) appeals (the tastes' part of m is what drift scales)


def choice_log_likelihood(groups: _Groups, scale: np.ndarray, var: np.ndarray) -> float:
    """Held-out log-likelihood per adoption of the choice model (see the module docstring),
    the tastes' mean scaled by ``scale`` (G,) and their coordinates' variance ``var`` (G,)."""
    total = 0.0
    g_all = groups.m.shape[0]
    step = max(1, _CELLS // max(1, groups.m.shape[1]))
    for lo in range(0, g_all, step):
        hi = min(g_all, lo + step)
        a = groups.m[lo:hi]
        if not np.all(scale[lo:hi] == 1.0):
            a = groups.a0[None, :] + scale[lo:hi, None] * (a - groups.a0[None, :])
        den = np.sqrt(1.0 + (math.pi / 8.0) * var[lo:hi, None] * groups.f2[None, :])
        p = groups.w[lo:hi] * expit(a / den)
        sel = (groups.rows >= lo) & (groups.rows < hi)
        r, c = groups.rows[sel] - lo, groups.cols[sel]
        with np.errstate(divide="ignore"):
            total += float(np.log(p[r, c]).sum() - np.log(p.sum(axis=1))[r].sum())
    return total / groups.rows.size


def _groups(cal, users, items, ticks, origin, rng) -> _Groups | None:
    """The held-out adoptions (world indices) of the inner fit ``cal`` grouped by (user,
    tick); None when there are none."""
    if users.size == 0:
        return None
    c, fa = cal.config, cal.config.fitted
    key = users * (ticks.max() + 1) + ticks
    gkey, inv = np.unique(key, return_inverse=True)
    inv = inv.ravel()
    if gkey.size > MAX_GROUPS:
        keep = np.sort(rng.choice(gkey.size, MAX_GROUPS, replace=False))
        mask = np.isin(inv, keep)
        users, items, ticks = users[mask], items[mask], ticks[mask]
        inv = np.searchsorted(keep, inv[mask])
        gkey = gkey[keep]
    span = ticks.max() + 1
    gu, gt = gkey // span, gkey % span
    m = fa.appeal[None, :] + fa.taste[gu] @ fa.features.T
    birth = c.birth_array()
    alive = birth[None, :] <= gt[:, None]
    w = np.exp(c.exposure * (fa.appeal - fa.appeal.max()))[None, :] * alive
    if c.ctr_halflife is not None:
        w = w * np.exp2(-np.maximum(gt[:, None] - birth[None, :], 0) / c.ctr_halflife)
    o = cal.observed
    held = sp.csr_array((np.ones(o.user.size), (o.user, o.item)),
                        shape=(cal.n_users, cal.n_items))
    hr = held[gu].tocoo()
    w[hr.row, hr.col] = 0.0
    w[inv, items] = np.maximum(w[inv, items], 1e-300)  # an adopted item is never impossible
    return _Groups(m=m, w=w, f2=(fa.features ** 2).sum(axis=1),
                   dt=np.abs(gt - origin[gu]).astype(np.float64), rows=inv, cols=items,
                   users=gu, a0=fa.appeal)


def _user_origin(user, tick, n_users) -> np.ndarray:
    """Each user's origin: the (rounded down) mean tick of its interactions."""
    n = np.bincount(user, minlength=n_users)
    s = np.bincount(user, tick.astype(np.float64), minlength=n_users)
    return np.floor(np.divide(s, n, out=np.zeros(n_users), where=n > 0)).astype(np.int64)


def fit_drift(users, items, ticks, horizon: int, fit, rng) -> DriftFit:
    """Fit the taste drift on an inner split in time of a log (see the module docstring).

    Parameters
    ----------
    users, items, ticks : ndarray of int
        The log (world indices, ticks from 0).
    horizon : int
    fit : callable
        ``fit((users, items, None, ticks)) -> CalibratedWorld``: a static calibration with
        the options of the world being fitted (ticks are its timestamps, one per tick).
    rng : numpy.random.Generator
        Samples the users (at most :data:`MAX_USERS`) and groups (:data:`MAX_GROUPS`).
    """
    from scipy.optimize import minimize, minimize_scalar

    inner = int(math.floor(INNER_SPLIT * horizon))
    before, after = ticks < inner, ticks >= inner
    if inner < 2 or not after.any() or np.unique(ticks[before]).size < 2:
        return _none("the log spans too few ticks for an inner split", inner)
    early_users = np.unique(users[before])
    returning = np.intersect1d(early_users, np.unique(users[after]))
    if returning.size < 2:
        return _none(f"fewer than 2 users active both before and after the inner split at "
                     f"tick {inner} ({returning.size})", inner)
    if early_users.size > MAX_USERS:  # returning users first: they carry the likelihood
        n_ret = min(returning.size, MAX_USERS // 2)
        ret = rng.choice(returning, n_ret, replace=False)
        rest = rng.choice(np.setdiff1d(early_users, ret), MAX_USERS - n_ret, replace=False)
        chosen = np.sort(np.concatenate([ret, rest]))
    else:
        chosen = early_users
    sel = before & np.isin(users, chosen)
    t0 = int(ticks[sel].min())  # the inner fit counts its ticks from its first one
    ticks = ticks - t0
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # items no sampled user holds are dropped
            cal = fit((users[sel], items[sel], None, ticks[sel]))
    except ValueError as exc:
        return _none(f"the inner fit failed ({exc})", inner)
    # held-out adoptions of the inner fit's users and items, in its indices
    fu = np.searchsorted(cal.user_ids, users)
    fi = np.searchsorted(cal.item_ids, items)
    known = (after & (fu < cal.n_users) & (fi < cal.n_items))
    known[known] &= (cal.user_ids[fu[known]] == users[known]) & \
        (cal.item_ids[fi[known]] == items[known])
    if known.sum() < 2:
        return _none("fewer than 2 held-out adoptions of known items by returning users",
                     inner)
    obs = cal.observed
    origin = _user_origin(obs.user, obs.tick, cal.n_users)
    groups = _groups(cal, fu[known], fi[known], ticks[known], origin, rng)
    ones = np.ones(groups.dt.size)
    ll_static = choice_log_likelihood(groups, ones, np.zeros_like(ones))

    def rw(log_sigma):
        return -choice_log_likelihood(groups, ones, math.exp(2 * log_sigma) * groups.dt)

    lo, hi = (math.log(b) for b in _SIGMA_BOUNDS)
    res = minimize_scalar(rw, bounds=(lo, hi), method="bounded", options={"xatol": 1e-3})
    sigma, ll_rw = math.exp(float(res.x)), -float(res.fun)

    def ou(p):
        sig, theta = math.exp(p[0]), math.exp(p[1])
        e = np.exp(-theta * groups.dt)
        var = sig * sig * -np.expm1(-2.0 * theta * groups.dt) / (2.0 * theta)
        return -choice_log_likelihood(groups, e, var)

    best = None
    for log_theta in (math.log(1e-3), math.log(1e-2), math.log(1e-1)):
        r = minimize(ou, np.array([math.log(sigma), log_theta]), method="Nelder-Mead",
                     options={"xatol": 1e-3, "fatol": 1e-7, "maxiter": 200})
        if best is None or r.fun < best.fun:
            best = r
    n = int(groups.rows.size)
    lr = 2.0 * n * (ll_rw - ll_static)
    model = "random_walk" if lr > _LR_BAR else "static"
    return DriftFit(model=model, sigma=sigma if model == "random_walk" else 0.0,
                    inner_split=inner, n_users=int(np.unique(groups.users).size),
                    n_heldout=n, ll_static=ll_static, ll_random_walk=ll_rw,
                    ll_ou=-float(best.fun), ou_theta=math.exp(float(best.x[1])),
                    ou_sigma=math.exp(float(best.x[0])),
                    note="" if model == "random_walk" else
                    f"the random walk does not beat static tastes (likelihood ratio {lr:.2f} "
                    f"<= {_LR_BAR:.2f})")
