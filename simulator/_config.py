"""Validated, frozen configuration of a simulated world and of its campaigns.

Every field is declared with its documentation and its range (``recloop_base.fields.spec``):
the class docstrings, the validation and recloop's scenario schema all come from that one
declaration. An out-of-range value raises ``ValueError`` and a value of the wrong type
``TypeError``; both are :class:`recloop_base.validation.ArgumentError` whose ``name``,
``rule`` and ``got`` say what was wrong as data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from recloop_base.fields import check_fields, documented, spec
from recloop_base.validation import ArgumentTypeError, ArgumentValueError, check_float, check_int

__all__ = ["WorldConfig", "CampaignConfig", "AppealShock", "FittedArrays", "CLICK_MODELS"]

#: Click / adoption models: ``p = expit(score)`` or ``p = clip(score, 0, 1)``.
CLICK_MODELS = ("logistic", "linear")

#: Bound of the score-scale fields (appeals, the taste score's scale, exposure, drift): on the
#: logistic scale a score of 100 is a probability within exp(-100) ~ 4e-44 of 0 or 1, which no
#: simulation can tell apart from more; far beyond it ``exp`` and the sums of scores overflow
#: (``appeal_mean = 1e308`` gave inf - inf = nan probabilities).
SCORE_BOUND = 100.0


# -- validators: structured errors (recloop_base.validation) naming field, rule, value -----
def _int_tuple(value, label: str, lo: int, hi: int | None, length: int | None = None) -> tuple:
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        raise ArgumentTypeError(label, "a sequence of ints", type(value).__name__)
    out = tuple(check_int(v, f"{label}[{j}]", low=lo, high=hi) for j, v in enumerate(value))
    if length is not None and len(out) != length:
        raise ArgumentValueError(label, f"a sequence of {length} entries", f"{len(out)}")
    return out


# -- campaigns and shocks ---------------------------------------------------------------------
@dataclass(frozen=True)
class AppealShock:
    """A scheduled change of an item's appeal (a promotion): ``delta`` added to its score.

    Active during ticks ``[start, start + duration)``.
    """

    item: int
    start: int
    duration: int
    delta: float

    def __post_init__(self):
        object.__setattr__(self, "item", check_int(self.item, "item", low=0))
        object.__setattr__(self, "start", check_int(self.start, "start", low=0))
        object.__setattr__(self, "duration", check_int(self.duration, "duration", low=1))
        object.__setattr__(self, "delta", check_float(self.delta, "delta"))


@documented
@dataclass(frozen=True)
class CampaignConfig:
    """A recommendation campaign: items pushed to a fraction of the users."""

    start: int = spec(doc="First tick of the campaign.", low=0)
    duration: int = spec(1, doc="Number of ticks; each reached user is pushed once, at a tick "
                         "drawn uniformly in ``[start, start + duration)``.", low=1)
    reach: float = spec(0.5, doc="Fraction of users reached.", low=0.0, high=1.0)
    items: tuple | None = spec(None, doc="Fixed list of pushed items (distinct). A reached "
                               "user is offered the first ``k`` listed items that are alive "
                               "and not yet in the profile.")
    policy: Any = spec(None, doc="Instead of ``items``: any object with ``fit(profiles)`` and "
                       "``recommend(users, k, *, removed=None) -> (n, k)`` (the agents' "
                       "recommender protocol). Each world fits its own deep copy "
                       "(``World.campaign_policies``) once, on the profiles of tick ``start - "
                       "1``. Recommended items that are dead or already in the profile are "
                       "not offered.", settable=False)
    k: int | None = spec(None, doc="Slate size; defaults to ``len(items)``; required with "
                         "``policy``.", low=1)
    boost: float = spec(5.0, doc="Acceptance boost: a pushed item is accepted with probability "
                        "``1 - (1 - p)**boost`` where ``p`` is the organic adoption "
                        "probability.", low=1.0)

    def __post_init__(self):
        set_ = lambda n, v: object.__setattr__(self, n, v)  # noqa: E731
        check_fields(self)
        if (self.items is None) == (self.policy is None):
            raise ArgumentValueError("items", "given exactly when `policy` is not",
                                     f"items={self.items!r}, policy={self.policy!r}")
        if self.items is not None:
            items = _int_tuple(self.items, "items", 0, None)
            if not items:
                raise ArgumentValueError("items", "a list of at least one item", "()")
            if len(set(items)) != len(items):
                raise ArgumentValueError("items", "distinct items", str(items))
            set_("items", items)
            if self.k is None:
                set_("k", len(items))
            k = check_int(self.k, "k", low=1)
            if k > len(items):
                raise ArgumentValueError("k", f"an int in [1, len(items)] = [1, {len(items)}]",
                                         str(k))
            set_("k", k)
        else:
            for meth in ("fit", "recommend"):
                if not callable(getattr(self.policy, meth, None)):
                    raise ArgumentTypeError("policy", f"an object with a `{meth}` method "
                                            "(recommender protocol)",
                                            type(self.policy).__name__)
            if self.k is None:
                raise ArgumentValueError("k", "an int >= 1 with `policy`", "None")

    @property
    def end(self) -> int:
        """First tick after the campaign."""
        return self.start + self.duration


# -- fitted arrays (calibrated worlds) ----------------------------------------------------------
def _float_array(value, label: str, ndim: int) -> np.ndarray:
    try:
        arr = np.array(value, dtype=np.float64, copy=True, order="C")
    except (TypeError, ValueError):
        raise TypeError(f"`{label}` must be an array of real numbers; got "
                        f"{type(value).__name__}.") from None
    if arr.ndim != ndim:
        raise ValueError(f"`{label}` must be {ndim}-dimensional; got shape {arr.shape}.")
    bad = np.flatnonzero(~np.isfinite(arr.ravel()))
    if bad.size:
        where = np.unravel_index(int(bad[0]), arr.shape)
        raise ValueError(f"`{label}` must be finite; got {arr.ravel()[bad[0]]} at index "
                         f"{where if ndim > 1 else int(bad[0])}.")
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class FittedArrays:
    """Arrays that a :class:`WorldConfig` carries instead of drawing them (calibrated worlds).

    Parameters
    ----------
    appeal : array_like, shape (n_items,)
        Base appeal ``a_i`` of every item (score scale).
    features : array_like, shape (n_items, dim)
        Latent item features ``f_i``.
    taste : array_like, shape (n_users, dim)
        Initial user tastes ``x_u(0)``.
    activity : array_like, shape (n_users,)
        Expected number of organic exposure events of each user over the whole horizon
        (>= 0, positive sum). It fixes both the users' shares of the events and the event
        rate: ``R = activity.sum()``, so ``mean_profile_size`` is not used. With sessions
        (``WorldConfig.sessions``), a user's events are spread over its sessions.
    arrival : array_like of int, shape (n_users,), optional
        First session of every user (ticks), for a world whose ``sessions`` is a
        :class:`~simulator.SessionLaw`; ``None``: drawn from the activity time profile.
    ratings : simulator.RatingModel, optional
        The world rates its adoptions with this model (``World.edges.rating``); ``None``:
        no ratings.
    appeal_offset : array_like, shape (n_bins, n_items), optional
        Item appeals that change over time (a calibrated world's item life cycles): during
        ticks ``[appeal_edges[b], appeal_edges[b + 1])`` item ``i``'s appeal is
        ``appeal_i + appeal_offset[b, i]`` (the last bin runs to the horizon). ``None``:
        constant appeals.
    appeal_edges : array_like of int, shape (n_bins,), optional
        First tick of every bin: increasing, starting at 0 (with ``appeal_offset``).
    taste_origin : array_like of int, shape (n_users,), optional
        The tick at which each user's taste is ``taste`` (a calibrated world's drift: with
        ``WorldConfig.drift_rate > 0`` the user's random walk is pinned there,
        ``x_u(t) = taste_u + drift_rate (W_u(t) - W_u(origin_u))``); ``None``: pinned at
        tick 0 (``x_u(0) = taste_u``), as for a drawn world.

    Notes
    -----
    The arrays are copied to read-only float64 arrays. Equality is identity (``eq=False``):
    two configs are equal only if they share the same ``FittedArrays`` object.
    """

    appeal: np.ndarray
    features: np.ndarray
    taste: np.ndarray
    activity: np.ndarray
    arrival: np.ndarray | None = None
    ratings: Any = None
    taste_origin: np.ndarray | None = None
    appeal_offset: np.ndarray | None = None
    appeal_edges: np.ndarray | None = None

    def __post_init__(self):
        set_ = lambda n, v: object.__setattr__(self, n, v)  # noqa: E731
        set_("appeal", _float_array(self.appeal, "fitted.appeal", 1))
        set_("features", _float_array(self.features, "fitted.features", 2))
        set_("taste", _float_array(self.taste, "fitted.taste", 2))
        set_("activity", _float_array(self.activity, "fitted.activity", 1))
        if self.features.shape[0] != self.appeal.shape[0]:
            raise ValueError(f"`fitted.features` must have one row per item "
                             f"({self.appeal.shape[0]}); got {self.features.shape[0]}.")
        if self.taste.shape[1] != self.features.shape[1]:
            raise ValueError(f"`fitted.taste` must have dim = {self.features.shape[1]} columns "
                             f"like `fitted.features`; got {self.taste.shape[1]}.")
        if self.activity.shape[0] != self.taste.shape[0]:
            raise ValueError(f"`fitted.activity` must have one entry per user "
                             f"({self.taste.shape[0]}); got {self.activity.shape[0]}.")
        neg = np.flatnonzero(self.activity < 0)
        if neg.size:
            raise ValueError(f"`fitted.activity` must be >= 0; got {self.activity[neg[0]]} "
                             f"at index {neg[0]}.")
        if not self.activity.sum() > 0:
            raise ValueError("`fitted.activity` must have a positive sum; got 0.")
        for name in ("arrival", "taste_origin"):
            if getattr(self, name) is not None:
                set_(name, self._user_ticks(getattr(self, name), name))
        if (self.appeal_offset is None) != (self.appeal_edges is None):
            raise ValueError("`fitted.appeal_offset` and `fitted.appeal_edges` must be given "
                             "together; got one of them.")
        if self.appeal_offset is not None:
            off = _float_array(self.appeal_offset, "fitted.appeal_offset", 2)
            edges = np.array(self.appeal_edges, copy=True)
            if edges.ndim != 1 or (edges.size and not np.issubdtype(edges.dtype, np.integer)):
                raise ValueError(f"`fitted.appeal_edges` must be a 1-d array of ints; got "
                                 f"{edges.dtype} of shape {edges.shape}.")
            if off.shape != (edges.size, self.n_items):
                raise ValueError(f"`fitted.appeal_offset` must have shape (len(appeal_edges), "
                                 f"n_items) = ({edges.size}, {self.n_items}); got {off.shape}.")
            if edges.size == 0 or edges[0] != 0 or np.any(np.diff(edges) <= 0):
                raise ValueError(f"`fitted.appeal_edges` must increase strictly from 0; got "
                                 f"{edges.tolist()[:5]}.")
            edges = edges.astype(np.int64)
            edges.setflags(write=False)
            set_("appeal_offset", off)
            set_("appeal_edges", edges)
        if self.ratings is not None:
            from simulator._ratings import RatingModel

            if not isinstance(self.ratings, RatingModel):
                raise TypeError(f"`fitted.ratings` must be a RatingModel or None; got "
                                f"{type(self.ratings).__name__}.")
            if (self.ratings.user_offset.size, self.ratings.item_offset.size) != \
                    (self.n_users, self.n_items):
                raise ValueError(f"`fitted.ratings` must have offsets for {self.n_users} "
                                 f"users and {self.n_items} items; got "
                                 f"{self.ratings.user_offset.size} and "
                                 f"{self.ratings.item_offset.size}.")

    def _user_ticks(self, value, name: str) -> np.ndarray:
        arr = np.array(value, copy=True)
        if arr.shape != self.activity.shape or (arr.size and not
                                                np.issubdtype(arr.dtype, np.integer)):
            raise ValueError(f"`fitted.{name}` must hold one int per user "
                             f"({self.activity.size}); got {arr.dtype} of shape {arr.shape}.")
        if arr.size and arr.min() < 0:
            raise ValueError(f"`fitted.{name}` must be >= 0; got {arr.min()}.")
        arr = arr.astype(np.int64)
        arr.setflags(write=False)
        return arr

    @property
    def n_users(self) -> int:
        return int(self.taste.shape[0])

    @property
    def n_items(self) -> int:
        return int(self.appeal.shape[0])

    @property
    def dim(self) -> int:
        return int(self.features.shape[1])


# -- the world ----------------------------------------------------------------------------------
@documented
@dataclass(frozen=True)
class WorldConfig:
    """Everything that defines a simulated world, validated on construction."""

    n_users: int = spec(2000, doc="Number of users.", low=1)
    n_items: int = spec(100, doc="Number of items.", low=1)
    n_ticks: int = spec(100, doc="Horizon: ticks (days) ``0 .. n_ticks - 1``.", low=1)
    dim: int = spec(8, doc="Dimension of the latent taste vectors and item features.", low=1)
    mean_profile_size: float = spec(5.0, doc="Expected number of organic adoptions per user "
                                    "over the horizon; the event rate is calibrated to it at "
                                    "construction (approximately: saturation lowers it "
                                    "slightly).", low=0.0)
    activity_shape: float = spec(2.0, doc="Tail exponent of the Pareto law of user activity: "
                                 "profile sizes are roughly power-law with this exponent.",
                                 low=1.0, low_open=True)
    activity_halflife: float | None = spec(None, doc="Half-life (ticks) of the overall "
                                           "activity after launch at tick 0; ``None``: "
                                           "constant.", low=0.0, low_open=True)
    n_universal: int = spec(5, doc="Number of \"universal\" items (ids ``0 .. n_universal - "
                            "1``) with high appeal (at most ``n_items``).", low=0)
    universal_appeal: float = spec(0.0, doc="Appeal (score scale) of the universal items.",
                                   low=-SCORE_BOUND, high=SCORE_BOUND)
    appeal_mean: float = spec(-3.0, doc="Mean of the normal law of the other items' appeal.",
                              low=-SCORE_BOUND, high=SCORE_BOUND)
    appeal_std: float = spec(0.75, doc="Standard deviation of the normal law of the other "
                             "items' appeal.", low=0.0, high=SCORE_BOUND)
    taste_scale: float = spec(1.0, doc="Standard deviation of the taste-feature score "
                              "``taste . features``.", low=0.0, high=SCORE_BOUND)
    exposure: float = spec(1.0, doc="Organic exposure: an active user meets item ``i`` with "
                           "probability proportional to ``exp(exposure * appeal_i(t))`` among "
                           "alive items (0 is uniform).", low=0.0, high=SCORE_BOUND)
    item_birth: tuple | None = spec(None, doc="Birth tick of every item (its lifetime is "
                                    "``[birth, death)``); ``None``: alive from tick 0.")
    item_death: tuple | None = spec(None, doc="Death tick (first tick not alive) of every "
                                    "item; ``None``: alive to the horizon.")
    ctr_halflife: float | None = spec(None, doc="Half-life of an item's click probability "
                                      "after its birth; ``None``: no decay.", low=0.0,
                                      low_open=True)
    drift_rate: float = spec(0.0, doc="Taste random walk: per-coordinate standard deviation "
                             "per sqrt(tick).", low=0.0, high=SCORE_BOUND)
    drift_terms: int = spec(8, doc="Terms of the Karhunen-Loeve expansion used for the random "
                            "walk (of the Fourier expansion of the Ornstein-Uhlenbeck process "
                            "with ``drift_theta``).", low=1)
    drift_theta: float | None = spec(None, doc="Taste drift as a stationary Ornstein-Uhlenbeck "
                                     "process instead of a random walk: mean-reversion rate "
                                     "per tick; ``drift_rate`` is then its stationary standard "
                                     "deviation per coordinate, and a user's taste at its "
                                     "origin tick (``fitted.taste_origin``, else 0) is its "
                                     "fitted (or drawn) one: ``x_u(t) = rho x_u + drift_rate "
                                     "(Y_u(t) - rho Y_u(o_u))``, ``rho = exp(-drift_theta "
                                     "|t - o_u|)``, ``Y`` a unit stationary process of "
                                     "correlation ``exp(-drift_theta |tau|)``. ``None``: the "
                                     "random walk.", low=0.0, low_open=True, high=SCORE_BOUND,
                                     settable=False)
    shocks: tuple = spec((), doc="Scheduled appeal changes (promotions): ``AppealShock``s.",
                         settable=False)
    campaigns: tuple = spec((), doc="Scheduled recommendation campaigns (inside the horizon): "
                            "``CampaignConfig``s.", settable=False)
    user_weights: tuple | None = spec(None, doc="Importance weights ``P(u)`` (unnormalised, "
                                      ">= 0, positive sum); ``None``: uniform.")
    click_model: str = spec("logistic", doc="``p = expit(appeal + taste . features)`` or "
                            "``clip(appeal + taste . features, 0, 1)`` (then appeal is on the "
                            "probability scale), times the CTR decay.", choices=CLICK_MODELS)
    fitted: FittedArrays | None = spec(None, doc="Item appeals and features, user tastes and "
                                       "activities to use instead of drawing them (a world "
                                       "calibrated from data, :func:`simulator.calibrate`). "
                                       "Their shapes must match ``n_users``, ``n_items`` and "
                                       "``dim``. With them, ``appeal_mean``, ``appeal_std``, "
                                       "``n_universal``, ``universal_appeal``, "
                                       "``taste_scale``, ``activity_shape`` and "
                                       "``mean_profile_size`` are not used; everything else "
                                       "works as for a drawn world.", settable=False)
    sessions: Any = spec(None, doc="The users' session process: a :class:`~simulator."
                         "SessionLaw` (each world draws every user's sessions from it, first "
                         "sessions at ``fitted.arrival`` or drawn from the activity time "
                         "profile) or a :class:`~simulator.SessionSchedule` (the sessions "
                         "themselves). A user's exposure events then happen only on its "
                         "session ticks. ``None`` (default): no sessions, events spread over "
                         "the ticks by the activity time profile (``activity_halflife``).",
                         settable=False)

    def __post_init__(self):
        set_ = lambda n, v: object.__setattr__(self, n, v)  # noqa: E731
        check_fields(self)
        set_("n_universal", check_int(self.n_universal, "n_universal", low=0,
                                      high=self.n_items))
        self._check_fitted()
        self._check_sessions()
        self._check_lifetimes(set_)
        self._check_shocks(set_)
        self._check_campaigns(set_)
        if self.user_weights is not None:
            w = self.user_weights
            if isinstance(w, (str, bytes)) or not hasattr(w, "__len__"):
                raise ArgumentTypeError("user_weights", "a sequence of floats",
                                        type(w).__name__)
            w = tuple(check_float(v, f"user_weights[{j}]", low=0.0) for j, v in enumerate(w))
            if len(w) != self.n_users:
                raise ArgumentValueError("user_weights", f"a sequence of n_users = "
                                         f"{self.n_users} entries", f"{len(w)}")
            if sum(w) <= 0:
                raise ArgumentValueError("user_weights", "weights with a positive sum", "0")
            set_("user_weights", w)

    def _check_fitted(self):
        f = self.fitted
        if f is None:
            return
        if not isinstance(f, FittedArrays):
            raise ArgumentTypeError("fitted", "a FittedArrays or None", type(f).__name__)
        for name, have in (("n_users", f.n_users), ("n_items", f.n_items), ("dim", f.dim)):
            if have != getattr(self, name):
                raise ArgumentValueError("fitted", f"arrays that match `{name}` = "
                                         f"{getattr(self, name)}", f"{name} = {have}")
        origin = f.taste_origin
        if origin is not None and origin.size and origin.max() >= self.n_ticks:
            raise ArgumentValueError("fitted.taste_origin", f"ticks in [0, {self.n_ticks - 1}]",
                                     str(int(origin.max())))

    def _check_sessions(self):
        from simulator._sessions import SessionLaw, SessionSchedule

        s = self.sessions
        if s is None:
            return
        if isinstance(s, SessionSchedule):
            for name in ("n_users", "n_ticks"):
                if getattr(s, name) != getattr(self, name):
                    raise ArgumentValueError("sessions", f"a schedule with `{name}` = "
                                             f"{getattr(self, name)}",
                                             f"{name} = {getattr(s, name)}")
        elif not isinstance(s, SessionLaw):
            raise ArgumentTypeError("sessions", "a SessionLaw, a SessionSchedule or None",
                                    type(s).__name__)
        arrival = None if self.fitted is None else self.fitted.arrival
        if arrival is not None and arrival.size and arrival.max() >= self.n_ticks:
            raise ArgumentValueError("fitted.arrival", f"ticks in [0, {self.n_ticks - 1}]",
                                     str(int(arrival.max())))

    def _check_lifetimes(self, set_):
        birth, death = self.item_birth, self.item_death
        if birth is not None:
            set_("item_birth", _int_tuple(birth, "item_birth", 0, self.n_ticks - 1, self.n_items))
        if death is not None:
            set_("item_death", _int_tuple(death, "item_death", 1, None, self.n_items))
        b = self.item_birth or (0,) * self.n_items
        d = self.item_death or (self.n_ticks,) * self.n_items
        for j, (bj, dj) in enumerate(zip(b, d, strict=True)):
            if dj <= bj:
                raise ArgumentValueError(f"item_death[{j}]", f"> item_birth[{j}] = {bj}", str(dj))

    def _check_shocks(self, set_):
        shocks = self.shocks
        if isinstance(shocks, AppealShock) or not isinstance(shocks, (tuple, list)):
            raise ArgumentTypeError("shocks", "a tuple of AppealShock", type(shocks).__name__)
        for j, s in enumerate(shocks):
            if not isinstance(s, AppealShock):
                raise ArgumentTypeError(f"shocks[{j}]", "an AppealShock", type(s).__name__)
            if s.item >= self.n_items:
                raise ArgumentValueError(f"shocks[{j}].item", f"in [0, {self.n_items - 1}]",
                                         str(s.item))
            if s.start >= self.n_ticks:
                raise ArgumentValueError(f"shocks[{j}].start", f"in [0, {self.n_ticks - 1}]",
                                         str(s.start))
        set_("shocks", tuple(shocks))

    def _check_campaigns(self, set_):
        cs = self.campaigns
        if isinstance(cs, CampaignConfig) or not isinstance(cs, (tuple, list)):
            raise ArgumentTypeError("campaigns", "a tuple of CampaignConfig", type(cs).__name__)
        for j, c in enumerate(cs):
            if not isinstance(c, CampaignConfig):
                raise ArgumentTypeError(f"campaigns[{j}]", "a CampaignConfig", type(c).__name__)
            if c.end > self.n_ticks:
                raise ArgumentValueError(f"campaigns[{j}]", f"inside the horizon: start + "
                                         f"duration in [1, n_ticks] = [1, {self.n_ticks}]",
                                         f"{c.start} + {c.duration} = {c.end}")
            if c.items is not None:
                bad = [i for i in c.items if i >= self.n_items]
                if bad:
                    raise ArgumentValueError(f"campaigns[{j}].items",
                                             f"in [0, {self.n_items - 1}]", str(bad[0]))
            b = np.asarray(self.item_birth or (0,) * self.n_items)
            d = np.asarray(self.item_death or (self.n_ticks,) * self.n_items)
            pool = np.asarray(c.items) if c.items is not None else np.arange(self.n_items)
            ticks = np.arange(c.start, c.end)
            alive = (b[pool][None, :] <= ticks[:, None]) & (ticks[:, None] < d[pool][None, :])
            n_avail = int(alive.sum(axis=1).min())
            if c.k > n_avail:
                raise ArgumentValueError(f"campaigns[{j}].k", f"in [1, {n_avail}] (the fewest "
                                         "items available during the campaign)", str(c.k))
        set_("campaigns", tuple(cs))

    # -- derived arrays --------------------------------------------------------------------
    def birth_array(self) -> np.ndarray:
        """Birth tick of every item, (n_items,) int64."""
        return np.asarray(self.item_birth or (0,) * self.n_items, dtype=np.int64)

    def death_array(self) -> np.ndarray:
        """Death tick (first tick not alive) of every item, (n_items,) int64."""
        return np.asarray(self.item_death or (self.n_ticks,) * self.n_items, dtype=np.int64)
