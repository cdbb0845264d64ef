"""Tastes that move: the drift of a calibrated world's users, fitted from the log (issue 35).

A calibrated world's user ``u`` has the fitted taste ``x_u`` at its origin tick ``o_u`` (the
mean tick of its interactions) and moves from there by one of two processes, which
:class:`simulator.World` simulates (``drift_rate``, ``drift_theta``, ``fitted.taste_origin``):

* a Gaussian random walk, ``x_u(t) = x_u + sigma (W_u(t) - W_u(o_u))``: the taste's variance
  grows without bound, ``sigma^2 |t - o_u|`` per coordinate;
* a stationary Ornstein-Uhlenbeck process around the population's mean 0, of the
  population's variance ``s^2`` (the mean variance of a coordinate of the fitted tastes):
  given ``x_u(o_u) = x_u``, ``x_u(t) ~ N(rho x_u, s^2 (1 - rho^2))``, ``rho = exp(-theta |t -
  o_u|)``: a user's taste is replaced, over a time ``1/theta``, by a taste of the population
  (the tastes stay tastes of the population, so the world's adoption volume does not grow).

Which one, and its parameter, is decided on the log itself by an inner split in time: a
static world is fitted to the ticks before ``s1 = floor(0.8 n_ticks)``, and the adoptions
of its returning users after ``s1``, grouped by (user, tick) (a session), are scored by the
world's own law of a session's adoptions:

    n_g ~ Poisson(mu_g) given n_g >= 1,  mu_g = nu_u w sum_i q_i(t) pbar_ui(t)   (volume)
    P(i | u, t) = q_i(t) pbar_ui(t) / sum_{j not held by u} q_j(t) pbar_uj(t)      (choice)
    q_i(t) = exp(exposure a_i) alive_i(t) d_i(t) / sum_{j alive} exp(exposure a_j),
    pbar_ui(t) = E expit(a_i + x_u(t) . f_i)
               ~ expit((a_i + m_u(t) . f_i) / sqrt(1 + pi v(t) |f_i|^2 / 8)),

``nu_u`` the user's fitted events per unit session weight, ``w`` a later session's weight,
``m_u(t)`` and ``v(t)`` the mean and per-coordinate variance of the taste at ``t`` (the
probit approximation of the logistic-normal mean, MacKay 1992). A fitted taste is an
estimate: the null is not "exact static tastes" (which a static world's own log rejects,
its fitted tastes being noisy) but a time-independent posterior, mean ``c x_u`` (``c`` in
[0, 1]) and variance ``v0``; the random walk keeps ``c`` and adds ``sigma^2 |t - o_u|`` to
``v0``, the OU process scales the mean by ``rho`` and adds ``s^2 (1 - rho^2)``. Each model's
parameters maximise the held-out *choice* likelihood (the volume term
depends on the drift only through the events' adoption rate, which the world's activities
absorb: :func:`adoption_rate_ratio`); the process with the higher likelihood is chosen when
it beats the null by a likelihood-ratio test at 5% (``2 Delta > 3.84``, one parameter more),
and the world drifts by its process alone (``v0`` is the fit's error, not the world's). The
figures on MovieLens-100K and why the choice falls as it does: ``docs/worlds.md``.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.special import expit, gammaln

__all__ = ["DRIFT_MODELS", "DriftFit", "fit_drift", "held_out_log_likelihood"]

#: The taste processes compared.
DRIFT_MODELS = ("static", "random_walk", "ou")
#: Fraction of the fitted span before the inner split.
INNER_SPLIT = 0.8
#: Users of the inner fit at most (a sample, returning users first): one number is
#: estimated from it.
MAX_USERS = 500
#: (user, tick) groups of the held-out window scored at most (a sample).
MAX_GROUPS = 800
#: Chi-square(1) 95% quantile: the likelihood-ratio bar of a drift over static tastes.
_LR_BAR = 3.841458820694124
_V0_BOUNDS = (1e-4, 100.0)
_SIGMA_BOUNDS = (1e-4, 10.0)
_THETA_BOUNDS = (1e-5, 10.0)


def _clip(log_value: float, bounds) -> float:
    """``log_value`` inside ``log(bounds)`` (the optimisers search on the log scale)."""
    return float(min(max(log_value, math.log(bounds[0])), math.log(bounds[1])))
_CELLS = 1 << 21
_CHOICE = ("choice",)
#: Nelder-Mead on two log-parameters: 1e-4 nats per adoption is far below what a model
#: choice turns on (the likelihood-ratio bar is 3.84 / (2 n), 1e-3 for 2,000 adoptions).
_NM = {"xatol": 0.03, "fatol": 1e-5, "maxiter": 80}


@dataclass(frozen=True)
class DriftFit:
    """The taste drift fitted by :func:`fit_drift`.

    Attributes
    ----------
    model : str
        One of :data:`DRIFT_MODELS`: ``"random_walk"`` (the world drifts by a random walk of
        :attr:`sigma`), ``"ou"`` (a stationary Ornstein-Uhlenbeck process of rate
        :attr:`theta`) or ``"static"`` (no drift: neither beat static tastes, or there was
        nothing to fit them on; see :attr:`note`).
    sigma : float
        The random walk's standard deviation per coordinate per sqrt(tick) (``nan`` when
        not fitted).
    theta : float
        The OU process's mean-reversion rate per tick (``nan`` when not fitted).
    inner_split : int
        First tick of the inner held-out window (the fit saw ticks before it).
    n_users, n_heldout, n_sessions : int
        Returning users, held-out adoptions and (user, tick) groups scored.
    ll_static, ll_random_walk, ll_ou : float
        Held-out choice log-likelihood per adoption (see the module docstring) of static
        tastes known up to a constant uncertainty :attr:`v0` (the null), the random walk at
        :attr:`sigma` and the OU process at :attr:`theta` (``nan`` when not measured).
    note : str
        Why there is no drift, when there is none.
    v0 : float
        The null's constant variance of a taste coordinate: how uncertain the fitted tastes
        are (estimation error, not a process of the world).
    ll_exact : float
        Held-out choice log-likelihood of static tastes taken as exact (``v = 0``).
    shrinkage : float
        The null's factor ``c`` in [0, 1] on the fitted tastes' mean (kept by the drifts).
    """

    model: str
    sigma: float
    theta: float
    inner_split: int
    n_users: int
    n_heldout: int
    n_sessions: int
    ll_static: float
    ll_random_walk: float
    ll_ou: float
    note: str = ""
    v0: float = math.nan
    ll_exact: float = math.nan
    shrinkage: float = math.nan

    def likelihood_ratio(self, model: str) -> float:
        """``2 n (ll_model - ll_static)``: a drift's test statistic against static tastes."""
        ll = {"static": self.ll_static, "random_walk": self.ll_random_walk,
              "ou": self.ll_ou}[model]
        return 2.0 * self.n_heldout * (ll - self.ll_static)


def _none(note: str, inner: int = -1) -> DriftFit:
    nan = math.nan
    return DriftFit("static", nan, nan, inner, 0, 0, 0, nan, nan, nan, note)


@dataclass
class _Groups:
    """The held-out adoptions grouped by (user, tick), with what their law needs."""

    m: np.ndarray  # (G, n_items) x_u . f_i (the tastes' part of the score)
    a: np.ndarray  # (n_items,) appeals
    q: np.ndarray  # (G, n_items) exposure shares q_i(t) d_i(t), 0 where held
    f2: np.ndarray  # (n_items,) |f_i|^2
    dt: np.ndarray  # (G,) |t - o_u|
    rows: np.ndarray  # (n,) group of each adoption
    cols: np.ndarray  # (n,) its item
    users: np.ndarray  # (G,) the group's user
    rate: np.ndarray | None  # (G,) events of the session (nu_u w), None: no volume term


def held_out_log_likelihood(groups: _Groups, scale: np.ndarray, var: np.ndarray, *,
                            parts: tuple = ("choice", "volume")) -> float:
    """Held-out log-likelihood per adoption of the law in the module docstring, the tastes'
    mean scaled by ``scale`` (G,) and the variance of a coordinate ``var`` (G,); ``parts``:
    the terms summed."""
    total = 0.0
    g_all = groups.m.shape[0]
    counts = np.bincount(groups.rows, minlength=g_all)
    step = max(1, _CELLS // max(1, groups.m.shape[1]))
    for lo in range(0, g_all, step):
        hi = min(g_all, lo + step)
        score = groups.a[None, :] + scale[lo:hi, None] * groups.m[lo:hi]
        den = np.sqrt(1.0 + (math.pi / 8.0) * var[lo:hi, None] * groups.f2[None, :])
        p = groups.q[lo:hi] * expit(score / den)
        sel = (groups.rows >= lo) & (groups.rows < hi)
        r, c = groups.rows[sel] - lo, groups.cols[sel]
        per_event = p.sum(axis=1)
        if "choice" in parts:
            with np.errstate(divide="ignore"):
                total += float(np.log(p[r, c]).sum() - np.log(per_event)[r].sum())
        if groups.rate is not None and "volume" in parts:
            mu = groups.rate[lo:hi] * per_event
            n = counts[lo:hi]
            with np.errstate(divide="ignore"):
                total += float((n * np.log(mu) - mu - gammaln(n + 1.0)
                                - np.log(-np.expm1(-mu))).sum())
    return total / groups.rows.size


def _groups(cal, users, items, ticks, origin, rng) -> _Groups:
    """The held-out adoptions (indices of the inner fit ``cal``) grouped by (user, tick)."""
    from simulator._sessions import SessionLaw, observed_sessions

    c, fa = cal.config, cal.config.fitted
    span = int(ticks.max()) + 1
    gkey, inv = np.unique(users * span + ticks, return_inverse=True)
    inv = inv.ravel()
    if gkey.size > MAX_GROUPS:
        keep = np.sort(rng.choice(gkey.size, MAX_GROUPS, replace=False))
        mask = np.isin(inv, keep)
        items, inv = items[mask], np.searchsorted(keep, inv[mask])
        gkey = gkey[keep]
    gu, gt = gkey // span, gkey % span
    birth = c.birth_array()
    alive = birth[None, :] <= gt[:, None]
    e = np.exp(c.exposure * (fa.appeal - fa.appeal.max()))
    z = alive @ e
    q = e[None, :] * alive / np.where(z > 0, z, 1.0)[:, None]
    if c.ctr_halflife is not None:
        q *= np.exp2(-np.maximum(gt[:, None] - birth[None, :], 0) / c.ctr_halflife)
    o = cal.observed
    held = sp.csr_array((np.ones(o.user.size), (o.user, o.item)),
                        shape=(cal.n_users, cal.n_items))[gu].tocoo()
    q[held.row, held.col] = 0.0
    q[inv, items] = np.maximum(q[inv, items], 1e-300)  # an adopted item is never impossible
    rate = None
    if isinstance(c.sessions, SessionLaw):  # events of a later session: nu_u w
        su, _, _ = observed_sessions(o.user, o.tick, cal.n_users)
        w = np.where(np.r_[True, su[1:] != su[:-1]], 1.0, c.sessions.later_weight)
        total_w = np.bincount(su, w, minlength=cal.n_users)
        rate = fa.activity[gu] / total_w[gu] * c.sessions.later_weight
    return _Groups(m=fa.taste[gu] @ fa.features.T, a=fa.appeal, q=q,
                   f2=(fa.features ** 2).sum(axis=1),
                   dt=np.abs(gt - origin[gu]).astype(np.float64), rows=inv, cols=items,
                   users=gu, rate=rate)


def _user_origin(user, tick, n_users) -> np.ndarray:
    """Each user's origin: the (rounded down) mean tick of its interactions."""
    n = np.bincount(user, minlength=n_users)
    s = np.bincount(user, tick.astype(np.float64), minlength=n_users)
    return np.floor(np.divide(s, n, out=np.zeros(n_users), where=n > 0)).astype(np.int64)


def population_variance(taste: np.ndarray) -> float:
    """The OU's stationary variance: the mean over coordinates of the tastes' variance."""
    return float(taste.var(axis=0).mean()) if taste.size else 0.0


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

    Returns
    -------
    DriftFit
    """
    from scipy.optimize import minimize

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
    ticks = ticks - int(ticks[sel].min())  # the inner fit counts its ticks from its first
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # items no sampled user holds are dropped
            cal = fit((users[sel], items[sel], None, ticks[sel]))
    except ValueError as exc:
        return _none(f"the inner fit failed ({exc})", inner)
    fu = np.minimum(np.searchsorted(cal.user_ids, users), cal.n_users - 1)
    fi = np.minimum(np.searchsorted(cal.item_ids, items), cal.n_items - 1)
    known = after & (cal.user_ids[fu] == users) & (cal.item_ids[fi] == items)
    if known.sum() < 2:
        return _none("fewer than 2 held-out adoptions of known items by returning users",
                     inner)
    obs = cal.observed
    origin = _user_origin(obs.user, obs.tick, cal.n_users)
    g = _groups(cal, fu[known], fi[known], ticks[known], origin, rng)
    ones, zeros = np.ones(g.dt.size), np.zeros(g.dt.size)
    ll_exact = held_out_log_likelihood(g, ones, zeros, parts=_CHOICE)
    s2 = population_variance(cal.config.fitted.taste)

    def ll(scale, var):
        return held_out_log_likelihood(g, scale, var, parts=_CHOICE)

    # the null: static tastes known up to a shrinkage c and a constant uncertainty v0 (the
    # fit's own error): a posterior that does not depend on time
    def null(p):
        c, v0 = expit(p[0]), math.exp(_clip(p[1], _V0_BOUNDS))
        return -ll(c * ones, v0 * ones)

    best0 = minimize(null, np.array([1.0, math.log(0.5)]), method="Nelder-Mead",
                     options=_NM)
    c0 = float(expit(best0.x[0]))
    log_v0, ll_null = _clip(best0.x[1], _V0_BOUNDS), -float(best0.fun)

    def rw(p):  # c x_u; v0 + sigma^2 |t - o|
        sigma = math.exp(_clip(p[1], _SIGMA_BOUNDS))
        return -ll(c0 * ones, math.exp(_clip(p[0], _V0_BOUNDS)) + sigma * sigma * g.dt)

    def ou(p):  # c rho x_u; v0 + s^2 (1 - rho^2)
        rho = np.exp(-math.exp(_clip(p[1], _THETA_BOUNDS)) * g.dt)
        return -ll(c0 * rho, math.exp(_clip(p[0], _V0_BOUNDS)) + s2 * (1.0 - rho * rho))

    fits = {}
    for name, nll, start, bounds in (("random_walk", rw, math.log(0.05), _SIGMA_BOUNDS),
                                     ("ou", ou, math.log(0.01), _THETA_BOUNDS)):
        best = minimize(nll, np.array([log_v0, start]), method="Nelder-Mead", options=_NM)
        fits[name] = (math.exp(_clip(best.x[1], bounds)), -float(best.fun),
                      math.exp(_clip(best.x[0], _V0_BOUNDS)))
    n = int(g.rows.size)
    best = max(fits, key=lambda k: fits[k][1])
    lr = 2.0 * n * (fits[best][1] - ll_null)
    model = best if lr > _LR_BAR else "static"
    note = "" if model != "static" else (
        f"no drift beats static tastes known up to their fitted uncertainty (likelihood "
        f"ratio {lr:.2f} <= {_LR_BAR:.2f})")
    return DriftFit(model=model, sigma=fits["random_walk"][0], theta=fits["ou"][0],
                    inner_split=inner, n_users=int(np.unique(g.users).size), n_heldout=n,
                    n_sessions=int(g.dt.size), ll_static=ll_null,
                    ll_random_walk=fits["random_walk"][1], ll_ou=fits["ou"][1], note=note,
                    v0=math.exp(log_v0), ll_exact=ll_exact, shrinkage=c0)


def drift_moments(config, dt):
    """``(scale, var)`` of a world's taste at ``dt = |t - o_u|`` ticks from its origin:
    ``x_u(t) ~ N(scale x_u, var I)`` (the world's ``drift_rate``, ``drift_theta``)."""
    dt = np.asarray(dt, np.float64)
    if config.drift_rate <= 0:
        return np.ones_like(dt), np.zeros_like(dt)
    if config.drift_theta is None:
        return np.ones_like(dt), config.drift_rate ** 2 * dt
    rho = np.exp(-config.drift_theta * dt)
    return rho, config.drift_rate ** 2 * (1.0 - rho * rho)


def adoption_rate_ratio(config, users, ticks, origin) -> np.ndarray:
    """Per-event adoption probability of static tastes over the drifting world's, for each
    ``(users[j], ticks[j])``: ``sum_i q_i(t) p_ui / sum_i q_i(t) pbar_ui(t)`` (see the module
    docstring; held items are not left out, a first-order correction).

    A drifting taste meets the items with a spread score, and the logistic link is convex
    below one half: without correction a drifting world would adopt more than the static
    world whose activities were fitted. Scaling a session's events by this ratio keeps its
    expected adoptions and lets the drift change only *which* items are adopted (the
    activities are the nuisance parameters of the choice likelihood that chose the drift).
    """
    fa = config.fitted
    users, ticks = np.asarray(users, np.int64), np.asarray(ticks, np.int64)
    out = np.ones(users.size)
    if config.drift_rate <= 0 or users.size == 0:
        return out
    birth = config.birth_array()
    e = np.exp(config.exposure * (fa.appeal - fa.appeal.max()))
    f2 = (fa.features ** 2).sum(axis=1)
    scale, var = drift_moments(config, np.abs(ticks - origin[users]))
    step = max(1, _CELLS // max(1, fa.appeal.size))
    for lo in range(0, users.size, step):
        hi = min(users.size, lo + step)
        t = ticks[lo:hi, None]
        q = e[None, :] * (birth[None, :] <= t)
        if config.ctr_halflife is not None:
            q = q * np.exp2(-np.maximum(t - birth[None, :], 0) / config.ctr_halflife)
        m = fa.taste[users[lo:hi]] @ fa.features.T
        p0 = expit(fa.appeal[None, :] + m)
        den = np.sqrt(1.0 + (math.pi / 8.0) * var[lo:hi, None] * f2[None, :])
        p1 = expit((fa.appeal[None, :] + scale[lo:hi, None] * m) / den)
        num, dd = (q * p0).sum(axis=1), (q * p1).sum(axis=1)
        out[lo:hi] = np.divide(num, dd, out=np.ones(hi - lo), where=dd > 0)
    return out


# ---------------------------------------------------------------------------------------------
# items' life cycles
# ---------------------------------------------------------------------------------------------
#: Ticks per bin of the items' appeal paths (a month of days), 2 to 12 bins.
LIFE_CYCLE_TICKS = 28
_MAX_BINS = 12
#: Pseudo-adoptions of the Gamma prior that shrinks a bin's appeal ratio towards 1.
_PRIOR_ADOPTIONS = 2.0
_USER_BLOCK_CELLS = 1 << 20


@dataclass(frozen=True)
class LifeCycles:
    """Items' appeals over time bins, fitted by :func:`fit_life_cycles`.

    Attributes
    ----------
    edges : ndarray of int, shape (n_bins,)
        First tick of every bin.
    offset : ndarray, shape (n_bins, n_items)
        Appeal offset of every item in every bin (score scale).
    persistence : float
        The offsets' correlation from one bin to the next, in [0, 1]: a forecast ``k`` bins
        past the log carries ``persistence^k`` of the last bin's offset.
    """

    edges: np.ndarray
    offset: np.ndarray
    persistence: float


def _bins(horizon: int) -> np.ndarray:
    n = int(min(_MAX_BINS, max(2, round(horizon / LIFE_CYCLE_TICKS))))
    return np.unique(np.floor(np.arange(n) * horizon / n).astype(np.int64))


def fit_life_cycles(config, users, items, ticks, psi) -> LifeCycles | None:
    """Each item's appeal in time bins, from its adoptions against the static world's.

    Notes
    -----
    Under the fitted (static) world user ``u`` holds item ``i`` with probability ``P_ui = 1
    - exp(-Lambda_ui)``, ``Lambda_ui = E_u exp(exposure a_i) kappa_ui p_ui`` and ``kappa_ui
    = sum_t psi_u(t) g_i(t)`` (``g`` the item's exposure share and decay at ``t``); the
    holdings expected in bin ``b`` are ``mu_ib = sum_u P_ui kappa_ui^(b) / kappa_ui`` (each
    holding allotted to the ticks of its exposures). With ``n_ib`` the observed adoptions,
    the bin's appeal ratio is ``r_ib = (n_ib + 2) / (mu_ib + 2)`` (a Gamma prior of two
    pseudo-adoptions shrinks sparse items to their constant appeal) and its offset
    ``log(r_ib / m_i) / (1 + exposure)`` on the score scale (in the exposure share and, at
    small ``p``, the adoption probability alike), ``m_i = sum_b mu_ib r_ib / sum_b mu_ib``:
    the life cycle moves an item's expected holdings in time and keeps their total. ``psi``
    is the users' time profiles: a sparse (n_users, n_ticks) matrix, or one (n_ticks,)
    profile shared by all. The persistence is
    the least-squares slope of an offset on the previous bin's over all items, clipped to
    [0, 1]. Returns None for a horizon under 4 ticks.
    """
    horizon = config.n_ticks
    if horizon < 4:
        return None
    fa, e = config.fitted, config.exposure
    edges = _bins(horizon)
    n_b, n_i, n_u = edges.size, config.n_items, config.n_users
    t = np.arange(horizon)
    birth = config.birth_array()
    alive = birth[None, :] <= t[:, None]
    top = fa.appeal.max()
    ex = np.exp(e * (fa.appeal - top))
    z = alive @ ex
    g = alive / np.where(z > 0, z, 1.0)[:, None]  # (T, n_items): g_i(t) exp(-e top)
    if config.ctr_halflife is not None:
        g = g * np.exp2(-np.maximum(t[:, None] - birth[None, :], 0) / config.ctr_halflife)
    scale = fa.activity * math.exp(-e * top)  # E_u, with exp(e a_i) as ex
    h = np.zeros((horizon, n_i))
    rows = max(1, _USER_BLOCK_CELLS // n_i)
    shared = not sp.issparse(psi)
    for lo in range(0, n_u, rows):
        hi = min(n_u, lo + rows)
        kappa = np.broadcast_to(psi @ g, (hi - lo, n_i)) if shared else \
            np.asarray(psi[lo:hi] @ g)
        p = expit(fa.appeal[None, :] + fa.taste[lo:hi] @ fa.features.T)
        lam = scale[lo:hi, None] * ex[None, :] * kappa * p
        w = np.divide(-np.expm1(-lam), kappa, out=np.zeros_like(lam), where=kappa > 0)
        if shared:
            h += np.outer(psi, w.sum(axis=0))
        else:
            h += np.asarray(psi[lo:hi].T @ w)
    b_of_t = np.searchsorted(edges, t, side="right") - 1
    mu = np.zeros((n_b, n_i))
    np.add.at(mu, b_of_t, g * h)
    n = np.zeros((n_b, n_i))
    np.add.at(n, (b_of_t[ticks], items), 1.0)
    ratio = (n + _PRIOR_ADOPTIONS) / (mu + _PRIOR_ADOPTIONS)
    # a life cycle moves an item's adoptions in time; their expected total stays the fit's
    total = mu.sum(axis=0)
    norm = np.divide((mu * ratio).sum(axis=0), total, out=np.ones(n_i), where=total > 0)
    offset = np.log(ratio / norm[None, :]) / (1.0 + e)
    x, y = offset[:-1].ravel(), offset[1:].ravel()
    den = float(x @ x)
    persistence = float(np.clip((x @ y) / den, 0.0, 1.0)) if den > 0 else 0.0
    return LifeCycles(edges=edges, offset=offset, persistence=persistence)
