"""Users who come and go: the per-user session process of a world (issue 23).

Generative story (one tick = one day)
-------------------------------------
User ``u`` arrives at tick ``A_u`` and comes back ``N_u - 1`` times::

    N_u = ceil(exp(mu_N + sigma_N Z)),   gaps G = ceil(exp(mu_G + sigma_G Z')) >= 1,
    sessions  S_u1 = A_u,  S_u,j+1 = S_uj + G_uj  (kept while < n_ticks),

``Z, Z'`` independent standard normals: a discretised log-normal number of sessions (heavy
tailed: most users come once, a few come back for months) and discretised log-normal gaps.
Session ``j`` has the weight ``w_1 = 1``, ``w_j = later_weight`` for ``j >= 2`` (first visits
are where most items are collected), and the user's ``E_u`` expected exposure events over
the horizon are spread over its sessions inside the horizon in proportion to their weights:
session ``j`` brings ``Poisson(E_u w_j / sum_k w_k)`` events, all on tick ``S_uj``.

:class:`SessionLaw` holds the five numbers (plus the arrival rate used to forecast users
that arrive after a fitted log ends); :func:`fit_session_law` fits them to the distinct
active ticks of a log by maximum likelihood, censoring included; :func:`draw_schedule`
draws every user's sessions; :func:`continue_schedule` continues observed sessions past the
end of a log (the hold-out fidelity check). A :class:`SessionSchedule` is the result: the
sessions of every user, which :class:`simulator.World` simulates.

Why a discretised log-normal count rather than a zeta law: both are heavy tailed with few
parameters; on MovieLens-100K the censored likelihood (gaps fitted jointly) is higher for the
log-normal, AIC 13,130.8 against 13,151.2 for zeta (see ``docs/worlds.md``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import log_ndtr, ndtri

from recloop_base.fields import check_fields, documented, spec
from recloop_base.validation import ArgumentValueError

__all__ = ["SessionLaw", "SessionSchedule", "SessionFit", "continue_schedule",
           "draw_schedule", "fit_session_law", "observed_sessions"]

#: Bound of the standard normal quantiles drawn (exp stays finite; 9 sigma is 1e-19).
_Z_MAX = 9.0


@documented
@dataclass(frozen=True)
class SessionLaw:
    """The session process of a world's users (see :mod:`simulator._sessions`)."""

    count_mu: float = spec(0.0, doc="Location ``mu_N`` of the log of the number of sessions "
                           "(``N = ceil(exp(mu_N + sigma_N Z))``).")
    count_sigma: float = spec(1.0, doc="Scale ``sigma_N`` of the log of the number of "
                              "sessions.", low=0.0, low_open=True)
    gap_mu: float = spec(1.0, doc="Location ``mu_G`` of the log of the gap (ticks) between "
                         "two sessions (``G = ceil(exp(mu_G + sigma_G Z))``).")
    gap_sigma: float = spec(1.0, doc="Scale ``sigma_G`` of the log of the gaps.", low=0.0,
                            low_open=True)
    later_weight: float = spec(1.0, doc="Weight of every session after the first (the first "
                               "weighs 1): a user's events are spread over its sessions in "
                               "proportion to their weights.", low=0.0, low_open=True)
    arrival_rate: float = spec(0.0, doc="New users per tick after the end of a fitted log "
                               "(used by :func:`continue_schedule` to forecast arrivals).",
                               low=0.0)

    def __post_init__(self):
        check_fields(self)
        for name in ("count_mu", "gap_mu"):
            if abs(getattr(self, name)) > 50:
                raise ArgumentValueError(name, "a float in [-50, 50]", repr(getattr(self, name)))


@dataclass(frozen=True, eq=False)
class SessionSchedule:
    """Sessions of every user: ``(user[s], tick[s], weight[s])``, sorted by tick then user.

    Parameters
    ----------
    user, tick : array_like of int, shape (n,)
        One entry per session (a user has at most one session per tick).
    weight : array_like of float, shape (n,)
        Positive weights; a user's events are spread over its sessions in proportion.
    n_users, n_ticks : int

    Notes
    -----
    The arrays are copied to read-only arrays, sorted by (tick, user). Equality is identity.
    """

    user: np.ndarray
    tick: np.ndarray
    weight: np.ndarray
    n_users: int
    n_ticks: int

    def __post_init__(self):
        set_ = lambda n, v: object.__setattr__(self, n, v)  # noqa: E731
        u = np.asarray(self.user)
        t = np.asarray(self.tick)
        w = np.asarray(self.weight, dtype=np.float64)
        for name, a in (("user", u), ("tick", t)):
            if a.ndim != 1 or (a.size and not np.issubdtype(a.dtype, np.integer)):
                raise ArgumentValueError(f"sessions.{name}", "a 1-d array of ints",
                                         f"{a.dtype} of shape {a.shape}")
        if not (u.shape == t.shape == w.shape):
            raise ArgumentValueError("sessions", "user, tick and weight arrays of equal "
                                     "length", f"{u.size}, {t.size} and {w.size}")
        u, t = u.astype(np.int64), t.astype(np.int64)
        for name, a, hi in (("user", u, self.n_users), ("tick", t, self.n_ticks)):
            bad = np.flatnonzero((a < 0) | (a >= hi))
            if bad.size:
                raise ArgumentValueError(f"sessions.{name}", f"in [0, {hi - 1}]",
                                         f"{a[bad[0]]} at index {bad[0]}")
        bad = np.flatnonzero(~(np.isfinite(w) & (w > 0)))
        if bad.size:
            raise ArgumentValueError("sessions.weight", "finite and > 0",
                                     f"{w[bad[0]]} at index {bad[0]}")
        order = np.lexsort((u, t))
        u, t, w = u[order], t[order], w[order]
        key = t * max(1, self.n_users) + u
        if key.size > 1 and np.any(key[1:] == key[:-1]):
            j = int(np.flatnonzero(key[1:] == key[:-1])[0])
            raise ArgumentValueError("sessions", "one session per (user, tick)",
                                     f"user {u[j]} twice at tick {t[j]}")
        for name, a in (("user", u), ("tick", t), ("weight", w)):
            a.setflags(write=False)
            set_(name, a)

    def __len__(self) -> int:
        return int(self.user.size)

    def sessions_per_user(self) -> np.ndarray:
        """Number of sessions of every user, shape (n_users,)."""
        return np.bincount(self.user, minlength=self.n_users)

    def events(self, activity: np.ndarray) -> np.ndarray:
        """Expected exposure events of every session: ``E_u w_s / sum_{s' of u} w_s'``."""
        total = np.bincount(self.user, self.weight, minlength=self.n_users)
        return np.asarray(activity, np.float64)[self.user] * self.weight / total[self.user]


# ---------------------------------------------------------------------------------------------
# the discretised log-normal law: X = ceil(exp(mu + sigma Z)) on {1, 2, ...}
# ---------------------------------------------------------------------------------------------
def _log_cdf(n, mu, sigma):
    """``log P(X <= n)`` (``-inf`` for n < 1)."""
    n = np.asarray(n, np.float64)
    with np.errstate(divide="ignore"):
        return np.where(n >= 1, log_ndtr((np.log(np.maximum(n, 1.0)) - mu) / sigma), -np.inf)


def _log_sf(n, mu, sigma):
    """``log P(X > n)`` (0 for n < 1)."""
    n = np.asarray(n, np.float64)
    return np.where(n >= 1, log_ndtr(-(np.log(np.maximum(n, 1.0)) - mu) / sigma), 0.0)


def _log_pmf(n, mu, sigma):
    """``log P(X = n)`` for ints n >= 1."""
    hi = _log_cdf(n, mu, sigma)
    lo = _log_cdf(np.asarray(n) - 1, mu, sigma)
    with np.errstate(divide="ignore", invalid="ignore"):
        # log(e^hi - e^lo) = hi + log(1 - e^(lo - hi)); exact when lo = -inf
        return hi + np.log(-np.expm1(np.minimum(lo - hi, -1e-300)))


def _draw(mu, sigma, uniforms, above=None, cap=None) -> np.ndarray:
    """Inverse-CDF draws of X, or of X given X > ``above`` (ints >= 0), capped at ``cap``.

    ``uniforms`` in [0, 1): the quantile of the (conditional) law; one draw per uniform.
    """
    u = np.asarray(uniforms, np.float64)
    tail = 1.0 if above is None else np.exp(_log_sf(above, mu, sigma))
    # z with P(Z > z) = (1 - u) * tail: the upper tail beyond `above`, sampled by quantile
    z = -ndtri(np.clip((1.0 - u) * tail, 1e-300, 1.0))
    y = np.exp(mu + sigma * np.clip(z, -_Z_MAX, _Z_MAX))
    x = np.ceil(np.minimum(y, 2.0**52)).astype(np.int64)
    x = np.maximum(x, 1 if above is None else np.asarray(above, np.int64) + 1)
    return x if cap is None else np.minimum(x, cap)


# ---------------------------------------------------------------------------------------------
# observed sessions and the fit
# ---------------------------------------------------------------------------------------------
def observed_sessions(user, tick, n_users: int):
    """Distinct active ticks of every user: ``(user, tick, adoptions)`` sorted by user, tick.

    A session is a (user, tick) pair with at least one interaction; ``adoptions`` counts the
    interactions it holds.
    """
    user = np.asarray(user, np.int64)
    tick = np.asarray(tick, np.int64)
    span = int(tick.max()) + 1 if tick.size else 1
    key, count = np.unique(user * span + tick, return_counts=True)
    return key // span, key % span, count


@dataclass(frozen=True)
class SessionFit:
    """A fitted :class:`SessionLaw` and how the fit went.

    Attributes
    ----------
    law : SessionLaw
    log_likelihood : float
        Censored log-likelihood of the users' session counts and gaps (nats).
    n_users, n_sessions, n_gaps : int
        Users, sessions (distinct active ticks) and gaps between sessions in the log.
    converged : bool
    """

    law: SessionLaw
    log_likelihood: float
    n_users: int
    n_sessions: int
    n_gaps: int
    converged: bool


def _later_weight(su, sa, same) -> float:
    """Maximum-likelihood weight ``omega`` of a later session against a first one.

    Given a user's ``n`` sessions and ``R`` interactions, the world splits them
    multinomially with probabilities ``w_j / (1 + omega (n - 1))``; with ``L`` interactions
    in later sessions the log-likelihood is ``L log omega - R log(1 + omega (n - 1))`` up to
    constants, whose derivative ``sum_u L_u / omega - R_u (n_u - 1) / (1 + omega (n_u - 1))``
    falls from +inf to below 0: one root (users seen once carry no information). The
    pooled ratio of the mean later session to the mean first one is biased: users with
    many sessions have small ones (on sessions drawn with omega = 0.215 it gave 0.122; this
    estimator 0.216).
    """
    from scipy.optimize import brentq

    n_users = int(su.max()) + 1
    first = np.r_[True, ~same]
    n = np.bincount(su, minlength=n_users)
    total = np.bincount(su, sa, minlength=n_users).astype(np.float64)
    later = np.bincount(su[~first], sa[~first], minlength=n_users).astype(np.float64)
    m = n > 1
    n, total, later = n[m], total[m], later[m]

    def score(w):
        return float((later / w - total * (n - 1) / (1.0 + w * (n - 1))).sum())

    return float(brentq(score, 1e-8, 1e8, xtol=1e-12, rtol=1e-10))


def _session_nll(theta, n, cens, gaps, gap_counts):
    mu_n, s_n, mu_g, s_g = theta[0], math.exp(theta[1]), theta[2], math.exp(theta[3])
    # a user seen n times: N = n, or N > n and the next gap ends past the horizon
    stop = _log_pmf(n, mu_n, s_n)
    more = _log_sf(n, mu_n, s_n) + _log_sf(cens, mu_g, s_g)
    ll = np.logaddexp(stop, more).sum()
    ll += (gap_counts * _log_pmf(gaps, mu_g, s_g)).sum()
    return -float(ll)


def fit_session_law(user, tick, n_ticks: int, *, n_users: int | None = None) -> SessionFit:
    """Fit the session process to the distinct active ticks of a log (maximum likelihood).

    Parameters
    ----------
    user, tick : array_like of int, shape (n,)
        The log's interactions (several per (user, tick) are one session).
    n_ticks : int
        The log's horizon: ticks ``0 .. n_ticks - 1``.
    n_users : int, optional
        Users of the world (default ``max(user) + 1``).

    Returns
    -------
    SessionFit

    Raises
    ------
    ValueError
        No user with two sessions (the gaps cannot be fitted).

    Notes
    -----
    A user seen on ``n`` distinct ticks, the last at ``l``, with gaps ``g_1 .. g_{n-1}``,
    contributes ``prod_j P(G = g_j) [P(N = n) + P(N > n) P(G > n_ticks - 1 - l)]``: either
    it had ``n`` sessions, or its next one fell past the end of the log (right censoring).
    The four parameters maximise the sum of the logs (L-BFGS-B, start from the moments of
    the logs). ``later_weight`` maximises the likelihood of the users' interactions being
    split over their sessions in proportion to the weights (multinomially, as the world splits
    a user's events); ``arrival_rate`` is the number of users over ``n_ticks``.
    """
    from scipy.optimize import minimize

    user = np.asarray(user, np.int64)
    tick = np.asarray(tick, np.int64)
    n_users = int(user.max()) + 1 if n_users is None else int(n_users)
    su, st, sa = observed_sessions(user, tick, n_users)
    users, first, n = np.unique(su, return_index=True, return_counts=True)
    last = st[first + n - 1]
    same = su[1:] == su[:-1]
    gaps_all = (st[1:] - st[:-1])[same]
    if gaps_all.size == 0:
        raise ArgumentValueError("interactions (timestamps)", "a log in which at least one "
                                 "user is active on two distinct ticks (to fit the gaps "
                                 "between sessions)", "every user active on one tick only")
    gaps, gap_counts = np.unique(gaps_all, return_counts=True)
    cens = (n_ticks - 1 - last).astype(np.float64)
    log_n, log_g = np.log(n.astype(np.float64)), np.log(gaps_all.astype(np.float64))
    start = np.array([float(log_n.mean()) - 0.5, math.log(max(0.3, float(log_n.std()) + 0.5)),
                      float(log_g.mean()), math.log(max(0.3, float(log_g.std())))])
    args = (n.astype(np.float64), cens, gaps.astype(np.float64), gap_counts.astype(np.float64))
    bounds = [(-20.0, 20.0), (math.log(0.02), math.log(20.0))] * 2
    res = minimize(_session_nll, start, args=args, method="L-BFGS-B", bounds=bounds,
                   options={"maxiter": 500, "ftol": 1e-12, "gtol": 1e-7})
    mu_n, ls_n, mu_g, ls_g = (float(v) for v in res.x)
    law = SessionLaw(count_mu=mu_n, count_sigma=math.exp(ls_n), gap_mu=mu_g,
                     gap_sigma=math.exp(ls_g), later_weight=_later_weight(su, sa, same),
                     arrival_rate=users.size / n_ticks)
    return SessionFit(law=law, log_likelihood=-float(res.fun), n_users=int(users.size),
                      n_sessions=int(su.size), n_gaps=int(gaps_all.size),
                      converged=bool(res.success))


# ---------------------------------------------------------------------------------------------
# drawing schedules
# ---------------------------------------------------------------------------------------------
def _unroll(law: SessionLaw, users, starts, counts, n_ticks: int, rng, first_gap_above=None):
    """Sessions ``starts[j] + cumulative gaps`` of ``counts[j]`` sessions for each user.

    With ``first_gap_above``, ``starts`` is the user's last observed session and every
    listed session comes after a gap (the first one conditioned to exceed the given value).
    """
    counts = np.asarray(counts, np.int64)
    total = int(counts.sum())
    owner = np.repeat(np.arange(users.size), counts)
    pos = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    g = np.zeros(total, np.int64)
    if first_gap_above is None:
        later = pos > 0
        g[later] = _draw(law.gap_mu, law.gap_sigma, rng.random(int(later.sum())), cap=n_ticks)
    else:
        head = pos == 0
        g[head] = _draw(law.gap_mu, law.gap_sigma, rng.random(int(head.sum())),
                        above=np.asarray(first_gap_above, np.int64)[owner[head]], cap=n_ticks)
        g[~head] = _draw(law.gap_mu, law.gap_sigma, rng.random(int((~head).sum())),
                         cap=n_ticks)
    # cumulative gaps within each user's run: the running sum minus its value before the run
    cum = np.cumsum(g)
    if total:
        head = np.cumsum(counts) - counts
        before = np.where(head > 0, cum[np.maximum(head - 1, 0) % total], 0)
        cum -= np.repeat(before, counts)
    ticks = np.asarray(starts, np.int64)[owner] + cum
    keep = ticks < n_ticks
    return users[owner[keep]], ticks[keep], pos[keep]


def draw_schedule(law: SessionLaw, arrival, n_ticks: int, rng) -> SessionSchedule:
    """Every user's sessions over ``0 .. n_ticks - 1``, drawn from ``law``.

    Parameters
    ----------
    law : SessionLaw
    arrival : array_like of int, shape (n_users,)
        First session of every user (ticks in ``[0, n_ticks)``).
    n_ticks : int
    rng : numpy.random.Generator

    Returns
    -------
    SessionSchedule
        First sessions weigh 1, later ones ``law.later_weight``.
    """
    arrival = np.asarray(arrival, np.int64)
    n_users = arrival.size
    count = _draw(law.count_mu, law.count_sigma, rng.random(n_users), cap=n_ticks)
    users, ticks, pos = _unroll(law, np.arange(n_users), arrival, count, n_ticks, rng)
    weight = np.where(pos == 0, 1.0, law.later_weight)
    return SessionSchedule(user=users, tick=ticks, weight=weight, n_users=n_users,
                           n_ticks=n_ticks)


def continue_schedule(law: SessionLaw, user, tick, n_users: int, start: int, n_ticks: int,
                      rng) -> SessionSchedule:
    """Observed sessions before ``start`` and their continuation to ``n_ticks`` (drawn).

    Parameters
    ----------
    law : SessionLaw
    user, tick : array_like of int
        Interactions of the log before ``start`` (the fitted part); their distinct (user,
        tick) pairs are the observed sessions.
    n_users : int
        Users of the continued world; users without an observed session are left out here
        (new users come from :func:`draw_schedule`).
    start, n_ticks : int
        First tick to draw; end of the continued horizon.
    rng : numpy.random.Generator

    Returns
    -------
    SessionSchedule
        The observed sessions (weights 1 for a user's first, ``later_weight`` after) and the
        drawn ones. A user seen ``n`` times, last at ``l``, continues with probability
        ``P(N > n) P(G > c) / (P(N = n) + P(N > n) P(G > c))``, ``c = start - 1 - l`` (Bayes
        on the censoring of :func:`fit_session_law`); it then has ``N - n`` more sessions,
        ``N`` drawn given ``N > n``, the first after a gap drawn given ``G > c``.
    """
    su, st, _ = observed_sessions(user, tick, n_users)
    users, first, n = np.unique(su, return_index=True, return_counts=True)
    last = st[first + n - 1]
    cens = start - 1 - last
    stop = _log_pmf(n, law.count_mu, law.count_sigma)
    more = _log_sf(n, law.count_mu, law.count_sigma) + _log_sf(cens, law.gap_mu,
                                                               law.gap_sigma)
    p_more = np.exp(more - np.logaddexp(stop, more))
    go = rng.random(users.size) < p_more
    total = _draw(law.count_mu, law.count_sigma, rng.random(users.size), above=n, cap=n_ticks)
    extra = np.where(go, total - n, 0)
    new_u, new_t, _ = _unroll(law, users, last, extra, n_ticks, rng, first_gap_above=cens)
    is_first = np.r_[True, su[1:] != su[:-1]]
    w_old = np.where(is_first, 1.0, law.later_weight)
    return SessionSchedule(user=np.concatenate([su, new_u]), tick=np.concatenate([st, new_t]),
                           weight=np.concatenate([w_old, np.full(new_u.size,
                                                                 law.later_weight)]),
                           n_users=n_users, n_ticks=n_ticks)
