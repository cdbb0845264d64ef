"""The simulated world: users, items, organic adoption, campaigns, profiles and ground truth.

Model (one tick = one day)
--------------------------
* User ``u`` has a latent taste ``x_u(t) = x_u(0) + drift_rate * W_u(t)`` (``W`` a random
  walk, Karhunen-Loeve expansion) and an activity weight ``lambda_u`` (Pareto, so profile
  sizes are roughly power-law). A calibrated world pins the walk at each user's origin
  (``fitted.taste_origin``), or drifts by a stationary Ornstein-Uhlenbeck process
  (``drift_theta``; :mod:`simulator._drift`), and may move its items' appeals in time bins
  (``fitted.appeal_offset``).
* Item ``i`` has latent features ``f_i``, an appeal ``a_i`` (a few universal items with high
  appeal), a lifetime ``[birth_i, death_i)`` and an optional CTR half-life ``h``.
* Click / adoption probability ``p(u, i, t) = g(a_i(t) + x_u(t) . f_i) * 2**(-(t - birth_i)/h)``
  for alive items (0 otherwise), with ``g`` the logistic function (or clipping to [0, 1]).
* Organic adoption: at tick ``t`` there are ``Poisson(R * phi(t))`` exposure events; each
  picks a user with probability ``lambda_u / sum(lambda)`` and an alive item with probability
  ``~ exp(exposure * a_i(t))``; the user adopts it, if not already held, with probability
  ``p(u, i, t)`` (each exposure is one chance). ``R`` is calibrated so that the mean organic
  profile size over the horizon is about ``mean_profile_size``.
* Sessions (``config.sessions``, off by default): user ``u`` is active only on its session
  ticks (arrival, then a heavy-tailed number of returns after heavy-tailed gaps; see
  :mod:`simulator._sessions`), and its expected events over the horizon, ``E_u``, are spread
  over them: session ``s`` brings ``Poisson(E_u w_s / sum_s' w_s')`` exposure events, each an
  alive item drawn as above and adopted with probability ``p(u, i, t)``. Without sessions
  the events of tick ``t`` are ``Poisson(R * phi(t))`` as above.
* Campaigns: a reached user (``U_reach(u, c) < reach``) is pushed once, at a tick drawn in
  the campaign window, and accepts each offered item with probability ``1 - (1 - p)**boost``.
  With sessions, only users who have arrived by their push tick are reached.
* Ratings (a calibrated world with ``fitted.ratings``): each adoption is rated by the
  ordered-logit model of :mod:`simulator._ratings` on the latent score ``x_u(t) . f_i``.

Randomness (common random numbers): everything that does not depend on the state -- the
exposure events and their coins -- comes from a Generator seeded by the seed alone and is
drawn in the same order whatever happens; decisions that depend on the state (which
campaign offers are made) use counter-based uniforms keyed by (seed, stream, user, item,
tick). The twin without campaigns therefore meets the same events with the same coins and
the same offer coins, and differs only where campaigns changed a profile.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import warnings

import numpy as np
import scipy.sparse as sp
from scipy.special import expit

from recloop_base.validation import DEFAULT_SEED
from simulator._config import WorldConfig
from simulator._crn import hash_uniforms, seed_key, stream_id, uniforms_reference
from simulator._sessions import SessionSchedule, draw_schedule
from simulator.logs import SOURCES, InteractionLog

__all__ = ["World", "WORLD_STREAMS"]

#: Counter-based stream ids used by the world itself (1-4 are reserved); environments should
#: use other ids or names.
WORLD_STREAMS = {"rating": 1, "campaign_accept": 2, "campaign_reach": 3, "campaign_tick": 4}
_ORGANIC, _RECOMMENDED, _CAMPAIGN = (SOURCES.index(s) for s in ("organic", "recommended",
                                                                "campaign"))
_N_CALIBRATION_USERS = 1000
_P_CHUNK = 1 << 16
#: Events per call of the span kernel (bounds the memory of the pre-drawn uniforms).
_SPAN_EVENTS = 1 << 20


def _as_seed_sequence(seed) -> np.random.SeedSequence:
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, np.random.Generator):
        return np.random.SeedSequence(int(seed.integers(0, 2**63)))
    if seed is None or (isinstance(seed, (int, np.integer)) and not isinstance(seed, bool)):
        if seed is not None and seed < 0:
            raise ValueError(f"`seed` must be >= 0; got {seed}.")
        # None: recloop's fixed default seed, not fresh entropy (recloop_base.validation)
        return np.random.SeedSequence(DEFAULT_SEED if seed is None else seed)
    raise TypeError(f"`seed` must be None, an int >= 0, a SeedSequence or a Generator; "
                    f"got {type(seed).__name__}.")


def _alias_table(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Vose's alias table for the distribution p: (acceptance probabilities, aliases)."""
    n = p.size
    prob = p * n
    alias = np.arange(n)
    small = [j for j in range(n) if prob[j] < 1.0]
    large = [j for j in range(n) if prob[j] >= 1.0]
    while small and large:
        s, g = small.pop(), large.pop()
        alias[s] = g
        prob[g] -= 1.0 - prob[s]
        (small if prob[g] < 1.0 else large).append(g)
    for j in small + large:  # leftovers are 1 up to rounding
        prob[j] = 1.0
    return prob, alias


def _guided_search(cdf: np.ndarray, guide: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """``np.searchsorted(cdf[:-1], keys, side="right")`` for keys in [0, 1] with a guide table.

    ``cdf`` ends with a sentinel above every key (e.g. 2.0); ``guide`` has ``g + 1`` entries,
    ``guide[b] = searchsorted(cdf[:-1], b / g, "right")``. The answer for a key in bucket
    ``b`` is at least ``guide[b]``: step forward while ``cdf[answer] <= key`` (once or never
    when buckets are narrower than the gaps of ``cdf``). Exact for any ``cdf``.
    """
    g = guide.size - 1
    ans = np.take(guide, (keys * g).astype(np.int64))
    step = np.take(cdf, ans) <= keys
    while step.any():
        ans += step
        step = np.take(cdf, ans) <= keys
    return ans


def _ou_basis(t, theta: float, n_terms: int) -> np.ndarray:
    """Fourier basis of a unit stationary Ornstein-Uhlenbeck process (correlation
    ``exp(-theta |tau|)``), shape t.shape + (n_terms,): ``m = ceil(n_terms / 2)`` frequencies
    ``w_j = theta tan(pi (j + 1/2) / (2 m))`` (the midpoint quantiles of the half-Cauchy law,
    the process's spectral density), a cosine (even k) and a sine (odd k) of each, scaled by
    ``1 / sqrt(m)``: with standard normal coefficients ``Y(t)`` has variance 1 and
    covariance ``mean_j cos(w_j tau)``, the quadrature of ``E cos(w tau) = exp(-theta |tau|)``.
    """
    m = n_terms // 2 + n_terms % 2
    k = np.arange(n_terms)
    w = theta * np.tan(math.pi * (k // 2 + 0.5) / (2 * m))
    arg = w * np.asarray(t, dtype=np.float64)[..., None]
    return np.where(k % 2 == 0, np.cos(arg), np.sin(arg)) / math.sqrt(m)


def _child(ss: np.random.SeedSequence, j: int) -> np.random.Generator:
    # Explicit spawn keys (not ss.spawn(), which counts calls) so that a twin built from the
    # same SeedSequence gets exactly the same children.
    return np.random.default_rng(
        np.random.SeedSequence(ss.entropy, spawn_key=tuple(ss.spawn_key) + (j,),
                               pool_size=ss.pool_size))


class World:
    """A simulated world, advanced lazily tick by tick.

    Parameters
    ----------
    config : WorldConfig
        The world's definition: a preset's, or one calibrated from a real log
        (:func:`simulator.calibrate`), whose ``fitted`` arrays replace the drawn item
        appeals and features, user tastes and activities.
    seed : None, int, SeedSequence or Generator
        Root of all randomness. Same config and seed give identical edges, bit for bit.
    method : {"fast", "numpy", "naive"}
        ``"naive"`` processes exposure events and campaign offers one by one in Python with
        scalar formulas; it is the reference the other paths are tested against. ``"numpy"``
        vectorises each tick's events with numpy; ``"fast"`` runs the events of several ticks
        at once through a numba kernel (:mod:`simulator._kernels`, compiled on the first
        simulated tick; two threads on disjoint users when there are many events) and the
        campaigns like ``"numpy"``. All three give the same edges, byte for byte.
    history : InteractionLog, optional
        Edges that happened before ``start`` (ticks ``< start``; e.g. a real log): the
        profiles start from them and the simulation starts at tick ``start``. Their ratings,
        if any, are kept.
    start : int, default 0
        First simulated tick.

    Notes
    -----
    The generative story (the module docstring and ``docs/worlds.md`` write it out): an
    exposure event of user ``u`` at tick ``t`` meets an alive item ``i`` with probability
    ``q_i(t) ~ exp(exposure a_i(t))`` and adopts it, if not held, with probability
    ``p(u, i, t) = g(a_i(t) + x_u(t) . f_i) d_i(t)``. Without sessions, tick ``t`` has
    ``Poisson(R phi(t))`` events whose users are drawn by activity. With sessions
    (``config.sessions``), user ``u`` arrives at ``A_u`` and has sessions
    ``S_u1 = A_u, S_u,j+1 = S_uj + G_uj`` (``N_u`` of them, ``N`` and ``G`` discretised
    log-normals), and session ``j`` brings ``Poisson(E_u w_j / sum_k w_k)`` events on tick
    ``S_uj`` (``w_1 = 1``, later sessions ``later_weight``). Campaigns push items to reached
    users, accepted with probability ``1 - (1 - p)**boost``. A calibrated world with
    ``fitted.ratings`` rates each adoption: ``P(R <= k) = expit(theta_k - eta)``,
    ``eta = slope x_u(t) . f_i + b_u + c_i`` (``edges.rating``).

    Methods that need the state at tick ``t`` simulate up to ``t`` first; simulation is
    idempotent (``simulate(t)`` twice does nothing the second time). Ticks run from
    ``start`` (0 by default) to ``config.n_ticks - 1``. The world model follows the
    campaign-bias setting of de Myttenaere et al. (2014): organic profile growth plus
    campaigns that push items.

    Examples
    --------
    >>> from simulator import World, preset
    >>> w = World(preset("viadeo_like", n_users=500), seed=1)
    >>> w.profiles(300).shape
    (500, 180)
    """

    def __init__(self, config: WorldConfig, seed=None, *, method: str = "fast", history=None,
                 start: int = 0):
        if not isinstance(config, WorldConfig):
            raise TypeError(f"`config` must be a WorldConfig; got {type(config).__name__}.")
        if method not in ("fast", "numpy", "naive"):
            raise ValueError(f"`method` must be 'fast', 'numpy' or 'naive'; got {method!r}.")
        self.config = config
        self.method = method
        self._ss = _as_seed_sequence(seed)
        entropy = int(self._ss.generate_state(2, np.uint64)[0])
        self._keys = {name: seed_key(entropy, sid) for name, sid in WORLD_STREAMS.items()}
        self._entropy = entropy
        c = config
        if c.fitted is not None:
            # A calibrated world: the arrays are the config's (writable copies, so that the
            # compiled kernels see the same array types as for a drawn world).
            self._features = np.array(c.fitted.features, dtype=np.float64)
            self._appeal = np.array(c.fitted.appeal, dtype=np.float64)
            self._taste0 = np.array(c.fitted.taste, dtype=np.float64)
            lam = np.array(c.fitted.activity, dtype=np.float64)
        else:
            # Items and users from separate streams: a world scaled to more users keeps its
            # items.
            rng = _child(self._ss, 0)
            self._features = rng.normal(0.0, 1.0, (c.n_items, c.dim))
            appeal = rng.normal(c.appeal_mean, c.appeal_std, c.n_items)
            appeal[: c.n_universal] = c.universal_appeal
            self._appeal = appeal
            rng = _child(self._ss, 3)
            self._taste0 = rng.normal(0.0, c.taste_scale / math.sqrt(c.dim), (c.n_users, c.dim))
            # Pareto (type I, x_m = 1) activity weights: heavy-tailed profile sizes.
            lam = 1.0 + rng.pareto(c.activity_shape, c.n_users)
        self._ones_dim = np.ones(c.dim)
        self._lam = lam
        self._activity_cdf = np.cumsum(lam) / lam.sum()
        # Guide table: one bucket per user (the mean gap of the cdf), so a lookup plus a
        # step or two along the cdf replaces a binary search; more buckets cost more to
        # build and no longer fit in cache next to the user blocks of the span kernel.
        n_buckets = c.n_users
        self._activity_guide = np.searchsorted(self._activity_cdf,
                                               np.arange(n_buckets + 1) / n_buckets, side="right")
        self._activity_cdf_sentinel = np.append(self._activity_cdf, 2.0)
        self._events_rng = _child(self._ss, 1)
        self._alias_cache = None
        self._drift_ss_index = 2
        self._drift_z = None  # (n_users, dim, K), drawn on first use
        origin = None if c.fitted is None else c.fitted.taste_origin
        if c.drift_theta is not None and origin is None:
            origin = np.zeros(c.n_users, np.int64)
        self._origin = origin
        if origin is not None and c.drift_rate > 0:
            # a fitted taste is the user's at its origin tick: pin the process there, so that
            # x_u(t) = taste_u + drift_rate (W_u(t) - W_u(origin_u)) for the random walk, and
            # rho taste_u + drift_rate (Y_u(t) - rho Y_u(origin_u)) for the OU process (a
            # shift of the constant part, scaled by rho in _taste)
            self._taste0 = self._taste0 - c.drift_rate * np.einsum(
                "udk,uk->ud", self._drift(), self._basis(origin))
        self._birth = c.birth_array()
        self._death = c.death_array()
        self._user_w = (np.ones(c.n_users) if c.user_weights is None
                        else np.asarray(c.user_weights, dtype=np.float64))
        self._phi = self._time_profile()
        self._sched = self._session_schedule()
        if self._sched is not None:
            # events follow the sessions: the rate's time profile is theirs
            self._phi = self._session_profile(lam)
        # A fitted activity is the expected number of events of each user over the horizon,
        # so its sum is the rate; a drawn world calibrates the rate to `mean_profile_size`.
        self._rate = float(lam.sum()) if c.fitted is not None else self._calibrate_rate(lam)
        if self._sched is not None:
            expected = lam if c.fitted is not None else self._rate * lam / lam.sum()
            self._sess_events = self._sched.events(expected)
            self._sess_ptr = np.searchsorted(self._sched.tick, np.arange(c.n_ticks + 1))
        self._campaign_plan = [self._plan_campaign(j, camp) for j, camp in enumerate(c.campaigns)]
        #: This world's own copies of the campaign policies (``None`` for item lists): they
        #: are fitted in place, so worlds sharing a config must not share them.
        self.campaign_policies = tuple(None if camp.policy is None else copy.deepcopy(camp.policy)
                                       for camp in c.campaigns)
        # State.
        self._has = np.zeros((c.n_users, c.n_items), dtype=bool)
        self._chunks: list[tuple[np.ndarray, ...]] = []
        self._offers: list[tuple[int, np.ndarray]] = []  # (tick, the items offered then)
        self._cat = None
        self._ratings = None
        self._start, self._history = self._check_history(history, start)
        self._next_tick = self._start

    # ------------------------------------------------------------------------ construction
    def _check_history(self, history, start):
        c = self.config
        if isinstance(start, (bool, np.bool_)) or not isinstance(start, (int, np.integer)):
            raise TypeError(f"`start` must be an int; got {type(start).__name__}.")
        if not 0 <= start < c.n_ticks:
            raise ValueError(f"`start` must be in [0, {c.n_ticks - 1}]; got {start}.")
        if history is None:
            return int(start), None
        if not isinstance(history, InteractionLog):
            raise TypeError(f"`history` must be an InteractionLog or None; got "
                            f"{type(history).__name__}.")
        if (history.n_users, history.n_items) != (c.n_users, c.n_items):
            raise ValueError(f"`history` must have the world's {c.n_users} users and "
                             f"{c.n_items} items; got {history.n_users} and {history.n_items}.")
        late = np.flatnonzero(history.tick >= start)
        if late.size:
            raise ValueError(f"`history` must end before `start` = {start}; got tick "
                             f"{history.tick[late[0]]} at index {late[0]}.")
        if history.tick.size and history.tick.min() < 0:
            raise ValueError(f"`history` ticks must be >= 0; got {history.tick.min()}.")
        order = np.argsort(history.tick, kind="stable")
        u, i = history.user[order], history.item[order]
        flat = u * c.n_items + i
        if np.unique(flat).size != flat.size:
            raise ValueError("`history` must hold each (user, item) edge once; got a repeat.")
        self._has.reshape(-1)[flat] = True
        if order.size:
            self._chunks.append((u.astype(np.int64), i.astype(np.int64),
                                 history.tick[order].astype(np.int64),
                                 history.source[order].astype(np.int8)))
        rating = None if history.rating is None else history.rating[order]
        return int(start), (history, rating)

    def _session_schedule(self):
        """The users' sessions: the config's schedule, or drawn from its law (stream 4)."""
        c = self.config
        if c.sessions is None or isinstance(c.sessions, SessionSchedule):
            return c.sessions
        rng = _child(self._ss, 4)
        arrival = None if c.fitted is None else c.fitted.arrival
        if arrival is None:  # first sessions follow the activity time profile
            arrival = np.minimum(np.searchsorted(np.cumsum(self._phi), rng.random(c.n_users),
                                                 side="right"), c.n_ticks - 1)
        return draw_schedule(c.sessions, arrival, c.n_ticks, rng)

    def _session_profile(self, lam) -> np.ndarray:
        """Share of all events on each tick when events follow the sessions."""
        s = self._sched
        share = s.events(lam / lam.sum())
        phi = np.bincount(s.tick, share, minlength=self.config.n_ticks)
        total = phi.sum()
        return phi / total if total > 0 else np.full(self.config.n_ticks,
                                                     1.0 / self.config.n_ticks)

    def _time_profile(self) -> np.ndarray:
        c = self.config
        t = np.arange(c.n_ticks, dtype=np.float64)
        w = np.ones(c.n_ticks) if c.activity_halflife is None else 2.0 ** (-t / c.activity_halflife)
        return w / w.sum()

    def _calibrate_rate(self, lam: np.ndarray) -> float:
        """Expected number of exposure events over the horizon giving the mean profile size.

        For user u with event share pi_u = lambda_u / sum(lambda) and per-event adoption
        chance m_ui = sum_t phi(t) q_i(t) p(u, i, t), the Poisson approximation of the expected
        organic profile size is ``sum_i 1 - exp(-R pi_u m_ui)``: items already held absorb
        later exposures, which a plain ``R = n * mean / E[p]`` would ignore. ``m`` is computed
        over every tick with the users' initial tastes and base appeals (drift and shocks of
        p are ignored), on a sample of users; R is then found by Newton's method.
        """
        c = self.config
        if c.mean_profile_size == 0:
            return 0.0
        ticks = np.arange(c.n_ticks)[:, None]
        alive = (self._birth[None, :] <= ticks) & (ticks < self._death[None, :])
        appeal = np.broadcast_to(self._appeal, alive.shape).copy()
        for s in c.shocks:
            appeal[s.start:s.start + s.duration, s.item] += s.delta
        e = np.where(alive, np.exp(c.exposure * (appeal - appeal.max(axis=1, keepdims=True))), 0.0)
        z = e.sum(axis=1, keepdims=True)
        q = np.divide(e, z, out=np.zeros_like(e), where=z > 0)
        decay = alive.astype(np.float64)
        if c.ctr_halflife is not None:
            decay *= np.exp2(-np.maximum(ticks - self._birth[None, :], 0) / c.ctr_halflife)
        weight = self._phi @ (q * decay)  # (n_items,)
        users = np.arange(min(c.n_users, _N_CALIBRATION_USERS))
        score = self._appeal[None, :] + self._taste0[users] @ self._features.T
        g = expit(score) if c.click_model == "logistic" else np.clip(score, 0.0, 1.0)
        m = g * weight[None, :]
        pm = (lam[users] / lam.sum())[:, None] * m
        ceiling = float((m > 0).sum(axis=1).mean())
        target = c.mean_profile_size
        if target >= ceiling:
            raise ValueError(f"`mean_profile_size` must be below the number of items a user "
                             f"can adopt (about {ceiling:.1f}); got {target}.")
        # size(r) = mean_u sum_i 1 - exp(-r pm_ui) is increasing and concave with size(0) = 0,
        # so Newton's method started at target / size'(0) climbs monotonically to the root.
        r = target / float(pm.sum(axis=1).mean())
        for _ in range(100):
            e = np.exp(-r * pm)
            size = float((1.0 - e).sum(axis=1).mean())
            slope = float((pm * e).sum(axis=1).mean())
            step = (target - size) / slope
            r += step
            if step <= 1e-12 * r:
                break
        return r

    def _plan_campaign(self, j: int, camp) -> tuple[np.ndarray, np.ndarray]:
        """Reached users of campaign ``j`` and their push ticks, sorted by tick."""
        c = self.config
        users = np.arange(c.n_users)
        reach_u = hash_uniforms(self._keys["campaign_reach"], users, j, 0)
        tick_u = hash_uniforms(self._keys["campaign_tick"], users, j, 0)
        reached = users[reach_u < camp.reach]
        ticks = camp.start + np.minimum((tick_u[reached] * camp.duration).astype(np.int64),
                                        camp.duration - 1)
        if self._sched is not None:  # a campaign reaches only users who have arrived
            first = np.full(c.n_users, c.n_ticks, dtype=np.int64)
            np.minimum.at(first, self._sched.user, self._sched.tick)
            here = first[reached] <= ticks
            reached, ticks = reached[here], ticks[here]
        # stable sort on small ints is a radix sort (same order as on int64, much faster)
        offset = ticks - camp.start
        order = np.argsort(offset.astype(np.int16) if camp.duration < 2**15 else offset,
                           kind="stable")
        return reached[order], ticks[order]

    # ------------------------------------------------------------------------ model pieces
    def _basis(self, t) -> np.ndarray:
        """Karhunen-Loeve basis of Brownian motion on [0, n_ticks], shape t.shape + (K,); with
        ``drift_theta``, the Fourier basis of the unit stationary OU process
        (:func:`_ou_basis`)."""
        if self.config.drift_theta is not None:
            return _ou_basis(t, self.config.drift_theta, self.config.drift_terms)
        T = float(self.config.n_ticks)
        k = np.arange(1, self.config.drift_terms + 1) - 0.5
        t = np.asarray(t, dtype=np.float64)[..., None]
        return math.sqrt(2 * T) * np.sin(k * math.pi * t / T) / (k * math.pi)

    def _ou_scale(self, u, t):
        """``rho = exp(-theta |t - origin_u|)`` of an OU drift (broadcast), or None."""
        c = self.config
        if c.drift_theta is None or c.drift_rate <= 0:
            return None
        return np.exp(-c.drift_theta * np.abs(np.asarray(t) - np.take(self._origin, u)))

    def _drift(self) -> np.ndarray:
        if self._drift_z is None:
            c = self.config
            rng = _child(self._ss, self._drift_ss_index)
            self._drift_z = rng.standard_normal((c.n_users, c.dim, c.drift_terms))
        return self._drift_z

    def _taste(self, u, t) -> np.ndarray:
        """Tastes of users ``u`` at ticks ``t`` (broadcast): shape u.shape + (dim,)."""
        x = np.take(self._taste0, u, axis=0)  # take: 3x faster than fancy indexing here
        if self.config.drift_rate > 0:
            rho = self._ou_scale(u, t)
            if rho is not None:
                x = x * np.asarray(rho)[..., None]
            z = np.take(self._drift(), u, axis=0)  # (..., dim, K)
            b = self._basis(t)  # (..., K) or (K,)
            x = x + self.config.drift_rate * np.einsum("...dk,...k->...d", z, b)
        return x

    def _appeal_at(self, i, t) -> np.ndarray:
        a = self._appeal[i]
        fa = self.config.fitted
        if fa is not None and fa.appeal_offset is not None:  # the items' life cycles
            b = np.searchsorted(fa.appeal_edges, t, side="right") - 1
            a = a + fa.appeal_offset[b, i]
        for s in self.config.shocks:
            on = (i == s.item) & (t >= s.start) & (t < s.start + s.duration)
            a = a + np.where(on, s.delta, 0.0)
        return a

    def _decay(self, i, t) -> np.ndarray:
        alive = (self._birth[i] <= t) & (t < self._death[i])
        if self.config.ctr_halflife is None:
            return alive.astype(np.float64)
        age = np.asarray(t - self._birth[i], dtype=np.float64)
        return np.where(alive, np.exp2(-np.maximum(age, 0.0) / self.config.ctr_halflife), 0.0)

    def _p(self, u, i, t) -> np.ndarray:
        """p(u, i, t) for broadcastable int arrays (no validation).

        Works through the broadcast in chunks, so that a users x items grid never builds
        (n_users, n_items, dim[, K]) temporaries.
        """
        u, i, t = np.asarray(u), np.asarray(i), np.asarray(t)
        shape = np.broadcast_shapes(u.shape, i.shape, t.shape)
        # One tick and many pairs: the tastes of all users at t once, then row lookups.
        table = (self._taste(np.arange(self.config.n_users), t)
                 if t.ndim == 0 and self.config.drift_rate > 0
                 and math.prod(shape) >= self.config.n_users else None)
        u, i, t = (np.broadcast_to(a, shape).reshape(-1) for a in (u, i, t))
        out = np.empty(u.size)
        for lo in range(0, u.size, _P_CHUNK):
            uu, ii, tt = u[lo:lo + _P_CHUNK], i[lo:lo + _P_CHUNK], t[lo:lo + _P_CHUNK]
            x = self._taste(uu, tt) if table is None else np.take(table, uu, axis=0)
            score = self._appeal_at(ii, tt) + self._rowdot(x, ii)
            if self.config.click_model == "logistic":
                p = expit(score)
            else:
                p = np.clip(score, 0.0, 1.0)
            out[lo:lo + _P_CHUNK] = p * self._decay(ii, tt)
        return out.reshape(shape)

    def _rowdot(self, x: np.ndarray, i) -> np.ndarray:
        """``sum_d x[..., d] * features[i, d]``; x is overwritten (it is always a temporary).

        A product with a ones vector (BLAS) instead of einsum, which is slow for short rows;
        used by every path so that all of them compute bit-identical scores.
        """
        x *= np.take(self._features, i, axis=0)
        return x @ self._ones_dim

    def _p_tick(self, u: np.ndarray, i: np.ndarray, t: int) -> np.ndarray:
        """p(u, i, t) for 1-d arrays u, i at one tick (the hot path of the simulation)."""
        items = np.arange(self.config.n_items)
        score = self._appeal_at(items, t)[i]
        score += self._rowdot(self._taste(u, t), i)
        if self.config.click_model == "logistic":
            p = expit(score, out=score)
        else:
            p = np.clip(score, 0.0, 1.0, out=score)
        decay = self._decay(items, t)
        if not np.all(decay == 1.0):
            p *= decay[i]
        return p

    def _exposure(self, t: int) -> np.ndarray:
        """Unnormalised exposure weights of the items at tick t (0 for dead items)."""
        items = np.arange(self.config.n_items)
        alive = (self._birth <= t) & (t < self._death)
        a = self._appeal_at(items, t)
        return np.where(alive, np.exp(self.config.exposure * (a - a.max())), 0.0)

    # ------------------------------------------------------------------------ simulation
    @property
    def simulated_until(self) -> int:
        """Last simulated tick (-1 before the first)."""
        return self._next_tick - 1

    def simulate(self, until: int) -> "World":
        """Advance the world through tick ``until`` (inclusive); no-op if already there.

        Raises
        ------
        ValueError
            If ``until`` is outside ``[0, n_ticks - 1]``.
        """
        until = self._check_tick(until, "until")
        if self.method == "fast":
            self._simulate_spans(until)
            return self
        while self._next_tick <= until:
            t = self._next_tick
            self._organic_tick(t)
            self._campaign_tick(t)
            self._next_tick = t + 1
        return self

    def _campaigning(self, t: int) -> bool:
        return any(camp.start <= t < camp.end for camp in self.config.campaigns)

    def _simulate_spans(self, until: int) -> None:
        """The fast path of :meth:`simulate`: organic ticks up to the next campaign tick
        (whose organic events come before its offers) in one kernel call, then the offers.

        The events of the next span do not depend on the state, so they are drawn on a
        background thread while the kernel and the offers of the current span run (the
        draws happen in the same order as without it: one span after the other).
        """
        from simulator import _kernels

        if self._next_tick > until:
            return
        prefetch = _kernels.n_threads() > 1  # $RECLOOP_THREADS=1: everything on this thread
        span = self._draw_span(self._next_tick, until)
        while span is not None:
            t = int(span[0][-1])
            more = t < until
            ahead = (_kernels._pool("draws").submit(self._draw_span, t + 1, until)
                     if more and prefetch else None)
            try:
                self._run_span(span)
                self._campaign_tick(t)
            finally:  # never leave a thread drawing from this world's stream
                span = None if ahead is None else ahead.result()
            if more and not prefetch:
                span = self._draw_span(t + 1, until)
            self._next_tick = t + 1

    def _draw_span(self, t0: int, until: int):
        """Draw the events of organic ticks ``t0 .. t`` for :meth:`_run_span`.

        The span stops at ``until``, at a campaign tick or when it holds about
        ``_SPAN_EVENTS`` events. Draws the same numbers in the same order as
        :meth:`_draw_events` tick after tick.
        """
        users, rs, coins, ticks, counts, tables = [], [], [], [], [], []
        n_total = 0
        t = t0
        while True:
            k, r, coin, table = self._draw_tick_events(t)
            users.append(k)
            rs.append(r)
            coins.append(coin)
            tables.append(table)
            ticks.append(t)
            counts.append(k.size)
            n_total += k.size
            if t >= until or n_total >= _SPAN_EVENTS or self._campaigning(t):
                break
            t += 1
        return np.asarray(ticks, np.int64), counts, users, rs, coins, tables

    def _run_span(self, drawn) -> None:
        """Run the organic events of a drawn span through ``_kernels.organic_span``.

        The kernel meets each user's events in tick order, like :meth:`_organic_naive`, so
        every method gives the same edges (the tests check it).
        """
        from simulator import _kernels

        c = self.config
        span, counts, users, rs, coins, tables = drawn
        if sum(counts) == 0:
            return
        ticks = span.tolist()
        starts = np.zeros(span.size + 1, np.int64)
        np.cumsum(counts, out=starts[1:])
        all_items = np.arange(c.n_items)
        appeal = np.stack([self._appeal_at(all_items, tt) for tt in ticks])
        decay = np.stack([self._decay(all_items, tt) for tt in ticks])
        if c.drift_rate > 0:
            drift_z, basis = self._drift(), self._basis(span)
        else:
            drift_z, basis = np.zeros((0, 0, 0)), np.zeros((span.size, 0))
        # ticks without alive items have no events (and no table): any row will do
        some = next(tb for tb in tables if tb is not None)
        prob = np.stack([(some if tb is None else tb)[0] for tb in tables])
        alias = np.stack([(some if tb is None else tb)[1] for tb in tables])
        users, items, when = _kernels.organic_span(
            np.concatenate(users), np.concatenate(rs), np.concatenate(coins), starts, prob,
            alias, self._has, self._taste0, drift_z, basis, c.drift_rate, self._features,
            appeal, decay, c.click_model == "logistic", span, **self._ou_args())
        if users.size:
            self._chunks.append((users, items, when,
                                 np.full(users.size, _ORGANIC, dtype=np.int8)))
            self._cat = None

    def _draw_tick_events(self, t: int):
        """Exposure events of tick t: (users ascending, alias uniforms, coins, alias table),
        state-independent; no events when no item is alive.

        Without sessions: ``Poisson(R phi(t))`` events, users drawn with probability
        ``lambda_u / sum(lambda)`` from *sorted* uniforms (normalised cumulative exponential
        spacings are distributed as uniform order statistics) through the guide table, so
        the later gathers of user rows walk memory in order (a 3x speed-up at 200,000
        users). With sessions: ``Poisson(m_s)`` events for each session ``s`` on tick t, in
        user order.
        """
        rng = self._events_rng
        if self._sched is None:
            n = int(rng.poisson(self._rate * self._phi[t]))
            spacings = np.cumsum(rng.standard_exponential(n + 1))
            users = _guided_search(self._activity_cdf_sentinel, self._activity_guide,
                                   spacings[:-1] / spacings[-1])
            np.minimum(users, self.config.n_users - 1, out=users)
        else:
            lo, hi = self._sess_ptr[t], self._sess_ptr[t + 1]
            users = np.repeat(self._sched.user[lo:hi], rng.poisson(self._sess_events[lo:hi]))
            n = users.size
        r = rng.random(n)
        coins = rng.random(n)
        table = self._alias_table(t)
        if table is None:
            return users[:0], r[:0], coins[:0], None
        return users, r, coins, table

    def _draw_events(self, t: int):
        """Exposure events of tick t: (users ascending, items, coins); state-independent
        (see :meth:`_draw_tick_events`)."""
        users, r, coins, table = self._draw_tick_events(t)
        if table is None:
            return users, users, coins
        prob, alias = table
        # Walker's alias method: one uniform gives the column and the coin (O(1) per event).
        x = r * prob.size
        col = np.minimum(x.astype(np.int64), prob.size - 1)
        items = np.where(x - col < np.take(prob, col), col, np.take(alias, col))
        return users, items, coins

    def _alias_table(self, t: int):
        """Alias table of the exposure distribution at tick t (cached while it is unchanged)."""
        q = self._exposure(t)
        if self._alias_cache is not None and np.array_equal(self._alias_cache[0], q):
            return self._alias_cache[1]
        total = q.sum()
        table = None if total <= 0 else _alias_table(q / total)
        self._alias_cache = (q, table)
        return table

    def _organic_tick(self, t: int) -> None:
        users, items, coins = self._draw_events(t)
        if self.method == "naive":
            self._organic_naive(users, items, coins, t)
            return
        flat = users * self.config.n_items + items
        new = np.flatnonzero(~self._has.reshape(-1)[flat])
        users, items, flat, coins = users[new], items[new], flat[new], coins[new]
        ok = np.flatnonzero(coins < self._p_tick(users, items, t))
        users, items, flat = users[ok], items[ok], flat[ok]
        # Two exposures of one user to one item in one tick may both succeed: keep the first
        # (what the event-by-event reference does). Rare, so check before paying for unique.
        srt = np.sort(flat)
        if srt.size > 1 and np.any(srt[1:] == srt[:-1]):
            _, first = np.unique(flat, return_index=True)
            first.sort()
            users, items = users[first], items[first]
        self._append(users, items, t, _ORGANIC)

    def _organic_naive(self, users, items, coins, t: int) -> None:
        out_u, out_i = [], []
        for u, i, coin in zip(users.tolist(), items.tolist(), coins.tolist(), strict=True):
            if self._has[u, i]:
                continue
            if coin < self._p_scalar(u, i, t):
                self._has[u, i] = True
                out_u.append(u)
                out_i.append(i)
        self._append(np.array(out_u, np.int64), np.array(out_i, np.int64), t, _ORGANIC,
                     mark=False)

    def _p_scalar(self, u: int, i: int, t: int) -> float:
        """The formula of p(u, i, t) written out for one triple (reference)."""
        c = self.config
        if not (self._birth[i] <= t < self._death[i]):
            return 0.0
        a = self._appeal[i]
        if c.fitted is not None and c.fitted.appeal_offset is not None:
            edges = c.fitted.appeal_edges.tolist()
            a += float(c.fitted.appeal_offset[max(b for b in range(len(edges))
                                                  if edges[b] <= t), i])
        a += sum(s.delta for s in c.shocks if s.item == i and s.start <= t < s.start + s.duration)
        x = self._taste0[u].copy()
        if c.drift_rate > 0 and c.drift_theta is not None:
            x *= math.exp(-c.drift_theta * abs(t - int(self._origin[u])))
            z, m = self._drift()[u], c.drift_terms // 2 + c.drift_terms % 2
            for k in range(c.drift_terms):
                w = c.drift_theta * math.tan(math.pi * (k // 2 + 0.5) / (2 * m))
                trig = math.cos(w * t) if k % 2 == 0 else math.sin(w * t)
                x += c.drift_rate * z[:, k] * math.sqrt(1.0 / m) * trig
        elif c.drift_rate > 0:
            T, z = c.n_ticks, self._drift()[u]
            for k in range(1, c.drift_terms + 1):
                kk = (k - 0.5) * math.pi
                x += c.drift_rate * z[:, k - 1] * math.sqrt(2 * T) * math.sin(kk * t / T) / kk
        score = a + float(sum(x[d] * self._features[i, d] for d in range(c.dim)))
        if c.click_model == "logistic":
            p = 1.0 / (1.0 + math.exp(-score))
        else:
            p = min(max(score, 0.0), 1.0)
        if c.ctr_halflife is not None:
            p *= 2.0 ** (-(t - self._birth[i]) / c.ctr_halflife)
        return p

    def _campaign_tick(self, t: int) -> None:
        for j, camp in enumerate(self.config.campaigns):
            if not (camp.start <= t < camp.end):
                continue
            if camp.policy is not None and t == camp.start:
                self.campaign_policies[j].fit(self._profiles_upto(t - 1))
            reached, ticks = self._campaign_plan[j]
            lo, hi = np.searchsorted(ticks, [t, t + 1])
            users = reached[lo:hi]
            if users.size == 0:
                continue
            if camp.items is not None:
                slate = np.broadcast_to(np.asarray(camp.items, dtype=np.int64),
                                        (users.size, len(camp.items)))
            else:
                slate = self._policy_slate(camp, j, users)
            if self.method == "naive":
                self._campaign_naive(camp, users, slate, t)
            elif self.method == "numpy":
                self._campaign_fast(camp, users, slate, t)
            else:
                self._campaign_kernel(camp, users, slate, t)

    def _policy_slate(self, camp, j: int, users: np.ndarray) -> np.ndarray:
        rec = np.asarray(self.campaign_policies[j].recommend(users, camp.k))
        if rec.shape != (users.size, camp.k) or not np.issubdtype(rec.dtype, np.integer):
            raise ValueError(f"`campaigns[{j}].policy.recommend` must return an int array of "
                             f"shape ({users.size}, {camp.k}); got {rec.dtype} {rec.shape}.")
        if rec.size and (rec.min() < 0 or rec.max() >= self.config.n_items):
            raise ValueError(f"`campaigns[{j}].policy.recommend` must return items in "
                             f"[0, {self.config.n_items - 1}]; got {rec.min()}..{rec.max()}.")
        srt = np.sort(rec, axis=1)
        if camp.k > 1 and np.any(srt[:, 1:] == srt[:, :-1]):
            raise ValueError(f"`campaigns[{j}].policy.recommend` must return distinct items "
                             "in each row; got a repeated item.")
        return rec.astype(np.int64)

    def _campaign_fast(self, camp, users, slate, t: int) -> None:
        uu = np.broadcast_to(users[:, None], slate.shape)
        n_items = self.config.n_items
        # gathers from flat tables (2-d fancy indexing costs several times more)
        flat = uu * n_items + slate
        alive = (self._birth <= t) & (t < self._death)
        valid = np.take(alive, slate)
        valid &= ~np.take(self._has.reshape(-1), flat)
        # Offer the first k valid items of each row (fixed list) / all valid recommendations.
        valid &= np.cumsum(valid, axis=1) <= camp.k
        ou, oi = uu[valid], slate[valid]
        self._offers.append((t, oi))
        p = self._p_tick(ou, oi, t)
        accept = 1.0 - (1.0 - p) ** camp.boost
        ok = hash_uniforms(self._keys["campaign_accept"], ou, oi, t) < accept
        self._append(ou[ok], oi[ok], t, _CAMPAIGN)

    def _campaign_kernel(self, camp, users, slate, t: int) -> None:
        """:meth:`_campaign_fast` in one compiled pass (``_kernels.campaign_offers``)."""
        from simulator import _kernels

        c = self.config
        items = np.arange(c.n_items)
        if c.drift_rate > 0:
            drift_z, basis = self._drift(), self._basis(t)
        else:
            drift_z, basis = np.zeros((0, 0, 0)), np.zeros(0)
        slate = np.ascontiguousarray(slate, dtype=np.int64)
        offered, accepted = _kernels.campaign_offers(
            users, slate, camp.k, t, camp.boost, self._keys["campaign_accept"], self._has,
            (self._birth <= t) & (t < self._death), self._taste0, drift_z, basis,
            c.drift_rate, self._features, self._appeal_at(items, t), self._decay(items, t),
            c.click_model == "logistic", **self._ou_args())
        uu = np.broadcast_to(users[:, None], slate.shape)
        self._offers.append((t, slate[offered]))
        self._append(uu[accepted], slate[accepted], t, _CAMPAIGN, mark=False)

    def _ou_args(self) -> dict:
        """The kernels' OU arguments (none for the random walk or no drift)."""
        c = self.config
        if c.drift_theta is None or c.drift_rate <= 0:
            return {}
        return {"origin": self._origin, "theta": c.drift_theta}

    def _campaign_naive(self, camp, users, slate, t: int) -> None:
        key = self._keys["campaign_accept"]
        off_i, out_u, out_i = [], [], []
        for r, u in enumerate(users.tolist()):
            n_offered = 0
            for i in slate[r].tolist():
                if n_offered == camp.k:
                    break
                if not (self._birth[i] <= t < self._death[i]) or self._has[u, i]:
                    continue
                n_offered += 1
                off_i.append(i)
                accept = 1.0 - (1.0 - self._p_scalar(u, i, t)) ** camp.boost
                if uniforms_reference(key, u, i, t) < accept:
                    out_u.append(u)
                    out_i.append(i)
        for u, i in zip(out_u, out_i, strict=True):
            self._has[u, i] = True
        self._offers.append((t, np.array(off_i, np.int64)))
        self._append(np.array(out_u, np.int64), np.array(out_i, np.int64), t, _CAMPAIGN,
                     mark=False)

    def _append(self, users, items, t: int, source: int, *, mark: bool = True) -> None:
        if users.size == 0:
            return
        if mark:
            self._has.reshape(-1)[users * self.config.n_items + items] = True
        self._chunks.append((users.astype(np.int64), items.astype(np.int64),
                             np.full(users.size, t, dtype=np.int64),
                             np.full(users.size, source, dtype=np.int8)))
        self._cat = None

    # ------------------------------------------------------------------------ edges
    def _edge_ratings(self, u, i, t) -> np.ndarray | None:
        """Ratings of the edges (cached): the model's draw, the history's own where given."""
        model = None if self.config.fitted is None else self.config.fitted.ratings
        if model is None:
            return None
        if self._ratings is None or self._ratings.size != u.size:
            out = np.empty(u.size)
            key = self._keys["rating"]
            for lo in range(0, u.size, _P_CHUNK):
                uu, ii, tt = u[lo:lo + _P_CHUNK], i[lo:lo + _P_CHUNK], t[lo:lo + _P_CHUNK]
                eta = (model.slope * self._rowdot(self._taste(uu, tt), ii)
                       + model.user_offset[uu] + model.item_offset[ii])
                out[lo:lo + _P_CHUNK] = model.draw(eta, hash_uniforms(key, uu, ii, tt))
            if self._history is not None and self._history[1] is not None:
                given = self._history[1]
                out[:given.size] = given  # history edges come first, in their order
            out.setflags(write=False)
            self._ratings = out
        return self._ratings

    def _edges_arrays(self):
        if self._cat is None:
            if self._chunks:
                self._cat = tuple(np.concatenate(parts)
                                  for parts in zip(*self._chunks, strict=True))
            else:
                e = np.zeros(0, np.int64)
                self._cat = (e, e, e, np.zeros(0, np.int8))
            self._chunks = [self._cat] if self._chunks else []
        return self._cat

    @property
    def edges(self) -> InteractionLog:
        """Every edge simulated or added so far (user, item, tick, source), in tick order,
        with its rating when the world rates adoptions (``fitted.ratings``); the edges of
        ``history`` come first."""
        u, i, t, s = self._edges_arrays()
        return InteractionLog(user=u, item=i, tick=t, source=s, n_users=self.config.n_users,
                              n_items=self.config.n_items,
                              metadata={"simulated_until": self.simulated_until},
                              rating=self._edge_ratings(u, i, t))

    @property
    def sessions(self) -> SessionSchedule | None:
        """Every user's sessions (``None`` for a world without sessions)."""
        return self._sched

    def _profiles_upto(self, t: int) -> sp.csr_matrix:
        u, i, tk, _ = self._edges_arrays()
        n = int(np.searchsorted(tk, t, side="right"))  # edges are in non-decreasing tick order
        c = self.config
        m = sp.csr_matrix((np.ones(n), (u[:n], i[:n])), shape=(c.n_users, c.n_items))
        m.sort_indices()
        return m

    def profiles(self, t: int) -> sp.csr_matrix:
        """Binary users x items CSR matrix of the edges with ``tick <= t`` (simulates to t).

        Parameters
        ----------
        t : int
            Tick in ``[0, n_ticks - 1]``.

        Returns
        -------
        scipy.sparse.csr_matrix, shape (n_users, n_items), float64 ones.
        """
        t = self._check_tick(t, "t")
        self.simulate(t)
        return self._profiles_upto(t)

    def add_edges(self, users, items, tick: int, source="recommended") -> np.ndarray:
        """Add edges (e.g. clicks on recommendations) at ``tick``; returns which were new.

        The world is first simulated through ``tick - 1``. Items already in a profile (or
        repeated in the call) are skipped, so profiles stay binary.

        Parameters
        ----------
        users, items : array_like of int, shape (n,)
        tick : int
            Must be >= the last simulated tick (history is never rewritten).
        source : {"organic", "recommended", "campaign"} or its code.

        Returns
        -------
        new : ndarray of bool, shape (n,)

        Raises
        ------
        ValueError
            Out-of-range users/items/tick, an item not alive at ``tick``, or ``tick`` before
            the last simulated tick.
        """
        c = self.config
        tick = self._check_tick(tick, "tick")
        if isinstance(source, str):
            if source not in SOURCES:
                raise ValueError(f"`source` must be one of {SOURCES}; got {source!r}.")
            code = SOURCES.index(source)
        else:
            code = int(source)
            if not 0 <= code < len(SOURCES):
                raise ValueError(f"`source` must be in [0, {len(SOURCES) - 1}]; got {source!r}.")
        users = self._check_ids(users, "users", c.n_users)
        items = self._check_ids(items, "items", c.n_items)
        if users.shape != items.shape or users.ndim != 1:
            raise ValueError(f"`users` and `items` must be 1-d of equal length; got "
                             f"{users.shape} and {items.shape}.")
        if tick < self.simulated_until:
            raise ValueError(f"`tick` must be >= the last simulated tick {self.simulated_until} "
                             f"(history is not rewritten); got {tick}.")
        dead = ~((self._birth[items] <= tick) & (tick < self._death[items]))
        if np.any(dead):
            j = int(np.flatnonzero(dead)[0])
            raise ValueError(f"`items` must be alive at tick {tick}; got item {items[j]} "
                             f"(lifetime [{self._birth[items[j]]}, {self._death[items[j]]})) "
                             f"at index {j}.")
        self.simulate(tick - 1) if tick > 0 else None
        new = ~self._has[users, items]
        _, first = np.unique(users * c.n_items + items, return_index=True)
        keep = np.zeros(users.size, dtype=bool)
        keep[first] = True
        new &= keep
        self._append(users[new], items[new], tick, code)
        return new

    # ------------------------------------------------------------------------ ground truth
    def item_marginal(self, t: int, item_weights=None, *, method: str = "fast") -> np.ndarray:
        """Item marginal ``P_t(i)`` of the leave-one-out protocol at tick ``t``.

        Parameters
        ----------
        t : int
            Tick (the world is simulated to it).
        item_weights : array_like, shape (n_items,), optional
            Non-negative weights ``w``; ``None`` means all ones.
        method : {"fast", "naive"}
            ``"naive"`` loops over users (reference).

        Returns
        -------
        ndarray, shape (n_items,)
            Sums to 1; all ``nan`` (with a ``RuntimeWarning``) if no user has weighted mass.

        Notes
        -----
        ``P_t(i) = sum_u P(u) P(i|u, w)`` with ``P(i|u, w) = w_i 1[i in I_u] / sum_{j in I_u} w_j``
        and ``P(u)`` uniform over users with positive profile mass (or proportional to the
        configured user weights among them); de Myttenaere et al. (2014), eq. of the weighted
        LOO score.
        """
        c = self.config
        if method not in ("fast", "naive"):
            raise ValueError(f"`method` must be 'fast' or 'naive'; got {method!r}.")
        if item_weights is None:
            w = np.ones(c.n_items)
        else:
            w = np.asarray(item_weights, dtype=np.float64)
            if w.shape != (c.n_items,):
                raise ValueError(f"`item_weights` must have shape ({c.n_items},); got {w.shape}.")
            bad = np.flatnonzero(~np.isfinite(w) | (w < 0))
            if bad.size:
                raise ValueError(f"`item_weights` must be finite and >= 0; got {w[bad[0]]} "
                                 f"at index {bad[0]}.")
        x = self.profiles(t)
        if method == "naive":
            return self._marginal_naive(x, w)
        mass = x @ w
        pu = np.where(mass > 0, self._user_w, 0.0)
        if pu.sum() <= 0:
            warnings.warn("item_marginal: no user has a profile with positive weight; "
                          "returning nan.", RuntimeWarning, stacklevel=2)
            return np.full(c.n_items, np.nan)
        pu /= pu.sum()
        scale = np.divide(pu, mass, out=np.zeros_like(pu), where=mass > 0)
        return w * (x.T @ scale)

    def _marginal_naive(self, x, w) -> np.ndarray:
        out = np.zeros(self.config.n_items)
        total = 0.0
        for u in range(x.shape[0]):
            prof = x.indices[x.indptr[u]:x.indptr[u + 1]]
            mass = sum(w[i] for i in prof)
            if mass <= 0:
                continue
            total += self._user_w[u]
            for i in prof:
                out[i] += self._user_w[u] * w[i] / mass
        if total <= 0:
            warnings.warn("item_marginal: no user has a profile with positive weight; "
                          "returning nan.", RuntimeWarning, stacklevel=3)
            return np.full(self.config.n_items, np.nan)
        return out / total

    def push_counts(self, t0: int, t1: int) -> np.ndarray:
        """Number of campaign offers of each item in ticks ``[t0, t1]`` (simulates to t1).

        An offer is one item pushed to one user who did not have it (alive at the time).

        Returns
        -------
        ndarray of int64, shape (n_items,)
        """
        t0 = self._check_tick(t0, "t0")
        t1 = self._check_tick(t1, "t1")
        if t1 < t0:
            raise ValueError(f"`t1` must be >= t0 = {t0}; got {t1}.")
        self.simulate(t1)
        counts = np.zeros(self.config.n_items, dtype=np.int64)
        for tick, items in self._offers:
            if t0 <= tick <= t1:
                counts += np.bincount(items, minlength=self.config.n_items)
        return counts

    def without_campaigns(self) -> "World":
        """The counterfactual twin: same seed and random streams, campaigns removed.

        Edges added with :meth:`add_edges` are not carried over. With no campaigns configured
        the twin is identical to this world, edge for edge.
        """
        history = None if self._history is None else self._history[0]
        return World(dataclasses.replace(self.config, campaigns=()), self._ss,
                     method=self.method, history=history, start=self._start)

    def true_ctr(self, users, items, t) -> np.ndarray:
        """True click / adoption probability ``p(u, i, t)`` (broadcasting), in [0, 1].

        Parameters
        ----------
        users, items, t : array_like of int
            Broadcast together; ``t`` in ``[0, n_ticks - 1]``.

        Returns
        -------
        ndarray of float64 with the broadcast shape; 0 for items outside their lifetime.

        Notes
        -----
        ``p = g(a_i(t) + x_u(t) . f_i) * 2**(-(t - birth_i) / h)`` with ``g`` logistic (or
        clipping for the linear model). Does not depend on the simulated state.
        """
        c = self.config
        u = self._check_ids(users, "users", c.n_users)
        i = self._check_ids(items, "items", c.n_items)
        tt = self._check_ids(t, "t", c.n_ticks)
        return self._p(u, i, tt)

    def policy_value(self, t: int, slate, *, users=None, k: int | None = None,
                     per_user: bool = False):
        """Exact expected clicks per visit of a static slate policy at tick ``t``.

        Parameters
        ----------
        t : int
            Tick (the world is simulated to ``t - 1`` only if ``slate`` is a recommender,
            which is fitted by the caller, not here).
        slate : array_like of int, shape (k,) or (n, k); or callable; or recommender
            Items shown: one slate for everyone (k,), one row per visiting user (n, k), a
            function ``f(users) -> (n, k)``, or an object with ``recommend(users, k)``
            (then ``k`` is required). Items in a row must be distinct.
        users : array_like of int, shape (n,), optional
            Visiting users; default all users.
        per_user : bool
            Return the expected clicks of each visiting user instead of the mean.

        Returns
        -------
        float, or ndarray (n,) when ``per_user``
            ``sum_u P(u) sum_j p(u, s_uj, t)`` with ``P(u)`` proportional to the configured
            user weights over ``users`` (uniform if none).
        """
        c = self.config
        t = self._check_tick(t, "t")
        users = (np.arange(c.n_users) if users is None
                 else self._check_ids(users, "users", c.n_users))
        if users.ndim != 1 or users.size == 0:
            raise ValueError(f"`users` must be a non-empty 1-d array; got shape {users.shape}.")
        if hasattr(slate, "recommend"):
            if k is None:
                raise ValueError("`k` must be given when `slate` is a recommender; got None.")
            slate = slate.recommend(users, k)
        elif callable(slate):
            slate = slate(users)
        s = self._check_ids(slate, "slate", c.n_items)
        if s.ndim == 1:
            s = np.broadcast_to(s, (users.size, s.size))
        if s.ndim != 2 or s.shape[0] != users.size:
            raise ValueError(f"`slate` must have shape (k,) or (n_users_visiting, k) = "
                             f"({users.size}, k); got {s.shape}.")
        srt = np.sort(s, axis=1)
        if np.any(srt[:, 1:] == srt[:, :-1]):
            raise ValueError("`slate` must hold distinct items in each row; got a repeat.")
        clicks = self._p(users[:, None], s, t).sum(axis=1)
        if per_user:
            return clicks
        pu = self._user_w[users]
        if pu.sum() <= 0:
            warnings.warn("policy_value: the visiting users have zero total weight; "
                          "returning nan.", RuntimeWarning, stacklevel=2)
            return math.nan
        return float(np.dot(pu, clicks) / pu.sum())

    # ------------------------------------------------------------------------ accessors
    def uniforms(self, users, items, t, stream) -> np.ndarray:
        """Common-random-number uniforms in [0, 1) for (user, item, tick) in a named stream.

        Same seed, stream and (user, item, tick) give the same number in every world and
        every run, whatever happened before (counter-based SplitMix64 hash, vectorised).

        Parameters
        ----------
        users, items, t : array_like of int >= 0
            Broadcast together.
        stream : str or int >= 0
            The purpose of the draws (e.g. ``"click"``). Stream ids 1-4 belong to the world.
        """
        key = seed_key(self._entropy, stream_id(stream))
        return hash_uniforms(key, self._check_ids(users, "users", None),
                             self._check_ids(items, "items", None),
                             self._check_ids(t, "t", None))

    def user_taste(self, t: int) -> np.ndarray:
        """Taste vectors of all users at tick ``t``, shape (n_users, dim)."""
        t = self._check_tick(t, "t")
        return self._taste(np.arange(self.config.n_users), t)

    @property
    def item_features(self) -> np.ndarray:
        """Latent item features, shape (n_items, dim) (read-only)."""
        f = self._features.view()
        f.flags.writeable = False
        return f

    def item_appeal(self, t: int) -> np.ndarray:
        """Appeal of every item at tick ``t`` (base appeal plus active shocks)."""
        t = self._check_tick(t, "t")
        return self._appeal_at(np.arange(self.config.n_items), t)

    def alive(self, t: int) -> np.ndarray:
        """Boolean mask (n_items,) of the items alive at tick ``t``."""
        t = self._check_tick(t, "t")
        return (self._birth <= t) & (t < self._death)

    @property
    def user_weights(self) -> np.ndarray:
        """Unnormalised importance weights of the users (ones if none configured)."""
        w = self._user_w.view()
        w.flags.writeable = False
        return w

    def __repr__(self) -> str:
        c = self.config
        return (f"World(n_users={c.n_users}, n_items={c.n_items}, n_ticks={c.n_ticks}, "
                f"campaigns={len(c.campaigns)}, simulated_until={self.simulated_until})")

    # ------------------------------------------------------------------------ validation
    def _check_tick(self, t, name: str) -> int:
        if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)):
            raise TypeError(f"`{name}` must be an int; got {type(t).__name__}.")
        if not 0 <= t < self.config.n_ticks:
            raise ValueError(f"`{name}` must be in [0, {self.config.n_ticks - 1}]; got {t}.")
        return int(t)

    @staticmethod
    def _check_ids(a, name: str, hi: int | None) -> np.ndarray:
        arr = np.asarray(a)
        if arr.dtype == bool or not (np.issubdtype(arr.dtype, np.integer) or arr.size == 0):
            raise TypeError(f"`{name}` must hold ints; got dtype {arr.dtype}.")
        arr = arr.astype(np.int64, copy=False)
        if arr.size:
            bad = (arr < 0) if hi is None else (arr < 0) | (arr >= hi)
            if np.any(bad):
                j = int(np.flatnonzero(bad.ravel())[0])
                rng = "[0, inf)" if hi is None else f"[0, {hi - 1}]"
                raise ValueError(f"`{name}` must be in {rng}; got {arr.ravel()[j]} at index {j}.")
        return arr
