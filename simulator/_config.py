"""Validated, frozen configuration of a simulated world and of its campaigns.

Every out-of-range value raises ``ValueError`` naming the field, the allowed range and the
value received; a value of the wrong type raises ``TypeError``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["WorldConfig", "CampaignConfig", "AppealShock", "FittedArrays", "CLICK_MODELS"]

#: Click / adoption models: ``p = expit(score)`` or ``p = clip(score, 0, 1)``.
CLICK_MODELS = ("logistic", "linear")


# -- small validators (each names the field, the rule and the value) --------------------------
def _int(obj, name: str, lo: int | None = None, hi: int | None = None) -> int:
    value = getattr(obj, name) if not isinstance(obj, tuple) else obj[1]
    label = name if not isinstance(obj, tuple) else obj[0]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"`{label}` must be an int; got {type(value).__name__} {value!r}.")
    value = int(value)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        rng = f"[{lo if lo is not None else '-inf'}, {hi if hi is not None else 'inf'}]"
        raise ValueError(f"`{label}` must be an int in {rng}; got {value}.")
    return value


def _float(obj, name: str, lo: float = -math.inf, hi: float = math.inf, *,
           lo_open: bool = False, hi_open: bool = False, label: str | None = None) -> float:
    value = getattr(obj, name) if obj is not None else name
    label = label or name
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer,
                                                                      np.floating)):
        raise TypeError(f"`{label}` must be a real number; got {type(value).__name__} {value!r}.")
    value = float(value)
    ok = (math.isfinite(value) and (value > lo if lo_open else value >= lo)
          and (value < hi if hi_open else value <= hi))
    if not ok:
        rng = f"{'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}"
        raise ValueError(f"`{label}` must be a finite number in {rng}; got {value}.")
    return value


def _int_tuple(value, label: str, lo: int, hi: int | None, length: int | None = None) -> tuple:
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        raise TypeError(f"`{label}` must be a sequence of ints; got {type(value).__name__}.")
    out = tuple(_int((f"{label}[{j}]", v), "", lo, hi) for j, v in enumerate(value))
    if length is not None and len(out) != length:
        raise ValueError(f"`{label}` must have {length} entries; got {len(out)}.")
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
        object.__setattr__(self, "item", _int(self, "item", 0))
        object.__setattr__(self, "start", _int(self, "start", 0))
        object.__setattr__(self, "duration", _int(self, "duration", 1))
        object.__setattr__(self, "delta", _float(self, "delta"))


@dataclass(frozen=True)
class CampaignConfig:
    """A recommendation campaign: items pushed to a fraction of the users.

    Parameters
    ----------
    start : int
        First tick of the campaign (>= 0).
    duration : int
        Number of ticks (>= 1); each reached user is pushed once, at a tick drawn uniformly
        in ``[start, start + duration)``.
    reach : float
        Fraction of users reached, in [0, 1].
    items : tuple of int, optional
        Fixed list of pushed items (distinct). A reached user is offered the first ``k``
        listed items that are alive and not yet in the profile.
    policy : object, optional
        Instead of ``items``: any object with ``fit(profiles)`` and
        ``recommend(users, k, *, removed=None) -> (n, k)`` (the agents' recommender
        protocol). Each world fits its own deep copy (``World.campaign_policies``) once, on
        the profiles of tick ``start - 1``. Recommended items that are dead or already in
        the profile are not offered.
    k : int, optional
        Slate size; defaults to ``len(items)``; required with ``policy``.
    boost : float
        Acceptance boost >= 1: a pushed item is accepted with probability
        ``1 - (1 - p)**boost`` where ``p`` is the organic adoption probability.
    """

    start: int
    duration: int = 1
    reach: float = 0.5
    items: tuple | None = None
    policy: Any = None
    k: int | None = None
    boost: float = 5.0

    def __post_init__(self):
        set_ = lambda n, v: object.__setattr__(self, n, v)  # noqa: E731
        set_("start", _int(self, "start", 0))
        set_("duration", _int(self, "duration", 1))
        set_("reach", _float(self, "reach", 0.0, 1.0))
        set_("boost", _float(self, "boost", 1.0))
        if (self.items is None) == (self.policy is None):
            raise ValueError("exactly one of `items` and `policy` must be given; got "
                             f"items={self.items!r}, policy={self.policy!r}.")
        if self.items is not None:
            items = _int_tuple(self.items, "items", 0, None)
            if not items:
                raise ValueError("`items` must hold at least one item; got ().")
            if len(set(items)) != len(items):
                raise ValueError(f"`items` must be distinct; got {items}.")
            set_("items", items)
            if self.k is None:
                set_("k", len(items))
            k = _int(self, "k", 1)
            if k > len(items):
                raise ValueError(f"`k` must be in [1, len(items)] = [1, {len(items)}]; got {k}.")
            set_("k", k)
        else:
            for meth in ("fit", "recommend"):
                if not callable(getattr(self.policy, meth, None)):
                    raise TypeError(f"`policy` must have a `{meth}` method (recommender "
                                    f"protocol); got {type(self.policy).__name__}.")
            if self.k is None:
                raise ValueError("`k` must be given with `policy`; got None.")
            set_("k", _int(self, "k", 1))

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
        rate: ``R = activity.sum()``, so ``mean_profile_size`` is not used.

    Notes
    -----
    The arrays are copied to read-only float64 arrays. Equality is identity (``eq=False``):
    two configs are equal only if they share the same ``FittedArrays`` object.
    """

    appeal: np.ndarray
    features: np.ndarray
    taste: np.ndarray
    activity: np.ndarray

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
@dataclass(frozen=True)
class WorldConfig:
    """Everything that defines a simulated world, validated on construction.

    Parameters
    ----------
    n_users, n_items : int
        Population sizes (>= 1).
    n_ticks : int
        Horizon: ticks (days) ``0 .. n_ticks - 1``.
    dim : int
        Dimension of the latent taste vectors and item features.
    mean_profile_size : float
        Expected number of organic adoptions per user over the horizon (>= 0); the event rate
        is calibrated to it at construction (approximately: saturation lowers it slightly).
    activity_shape : float
        Tail exponent (> 1) of the Pareto law of user activity: profile sizes are roughly
        power-law with this exponent.
    activity_halflife : float or None
        Half-life (ticks) of the overall activity after launch at tick 0; ``None``: constant.
    n_universal : int
        Number of "universal" items (ids ``0 .. n_universal - 1``) with high appeal.
    universal_appeal : float
        Appeal (score scale) of the universal items.
    appeal_mean, appeal_std : float
        Normal law of the other items' appeal.
    taste_scale : float
        Standard deviation of the taste-feature score ``taste . features`` (>= 0).
    exposure : float
        Organic exposure: an active user meets item ``i`` with probability proportional to
        ``exp(exposure * appeal_i(t))`` among alive items (>= 0; 0 is uniform).
    item_birth, item_death : tuple of int or None
        Item lifetimes ``[birth, death)``; ``None``: alive over the whole horizon.
    ctr_halflife : float or None
        Half-life of an item's click probability after its birth; ``None``: no decay.
    drift_rate : float
        Taste random walk: per-coordinate standard deviation per sqrt(tick) (>= 0).
    drift_terms : int
        Terms of the Karhunen-Loeve expansion used for the random walk (>= 1).
    shocks : tuple of AppealShock
        Scheduled appeal changes (promotions).
    campaigns : tuple of CampaignConfig
        Scheduled recommendation campaigns (inside the horizon).
    user_weights : tuple of float or None
        Importance weights ``P(u)`` (unnormalised, >= 0, positive sum); ``None``: uniform.
    click_model : {"logistic", "linear"}
        ``p = expit(appeal + taste . features)`` or ``clip(appeal + taste . features, 0, 1)``
        (then appeal is on the probability scale), times the CTR decay.
    fitted : FittedArrays or None
        Item appeals and features, user tastes and activities to use instead of drawing them
        (a world calibrated from data, :func:`simulator.calibrate`). Their shapes must match
        ``n_users``, ``n_items`` and ``dim``. With them, ``appeal_mean``, ``appeal_std``,
        ``n_universal``, ``universal_appeal``, ``taste_scale``, ``activity_shape`` and
        ``mean_profile_size`` are not used; everything else (lifetimes, CTR decay, activity
        half-life, drift, exposure, shocks, campaigns) works as for a drawn world.
    """

    n_users: int = 2000
    n_items: int = 100
    n_ticks: int = 100
    dim: int = 8
    mean_profile_size: float = 5.0
    activity_shape: float = 2.0
    activity_halflife: float | None = None
    n_universal: int = 5
    universal_appeal: float = 0.0
    appeal_mean: float = -3.0
    appeal_std: float = 0.75
    taste_scale: float = 1.0
    exposure: float = 1.0
    item_birth: tuple | None = None
    item_death: tuple | None = None
    ctr_halflife: float | None = None
    drift_rate: float = 0.0
    drift_terms: int = 8
    shocks: tuple = ()
    campaigns: tuple = ()
    user_weights: tuple | None = None
    click_model: str = "logistic"
    fitted: FittedArrays | None = None

    def __post_init__(self):
        set_ = lambda n, v: object.__setattr__(self, n, v)  # noqa: E731
        for name in ("n_users", "n_items", "n_ticks", "dim", "drift_terms"):
            set_(name, _int(self, name, 1))
        set_("n_universal", _int(self, "n_universal", 0, self.n_items))
        set_("mean_profile_size", _float(self, "mean_profile_size", 0.0))
        set_("activity_shape", _float(self, "activity_shape", 1.0, lo_open=True))
        for name in ("activity_halflife", "ctr_halflife"):
            if getattr(self, name) is not None:
                set_(name, _float(self, name, 0.0, lo_open=True))
        for name in ("universal_appeal", "appeal_mean"):
            set_(name, _float(self, name))
        for name in ("appeal_std", "taste_scale", "exposure", "drift_rate"):
            set_(name, _float(self, name, 0.0))
        if self.click_model not in CLICK_MODELS:
            raise ValueError(f"`click_model` must be one of {CLICK_MODELS}; "
                             f"got {self.click_model!r}.")
        self._check_fitted()
        self._check_lifetimes(set_)
        self._check_shocks(set_)
        self._check_campaigns(set_)
        if self.user_weights is not None:
            w = self.user_weights
            if isinstance(w, (str, bytes)) or not hasattr(w, "__len__"):
                raise TypeError("`user_weights` must be a sequence of floats; "
                                f"got {type(w).__name__}.")
            w = tuple(_float(None, v, 0.0, label=f"user_weights[{j}]") for j, v in enumerate(w))
            if len(w) != self.n_users:
                raise ValueError(f"`user_weights` must have n_users = {self.n_users} entries; "
                                 f"got {len(w)}.")
            if sum(w) <= 0:
                raise ValueError("`user_weights` must have a positive sum; got 0.")
            set_("user_weights", w)

    def _check_fitted(self):
        f = self.fitted
        if f is None:
            return
        if not isinstance(f, FittedArrays):
            raise TypeError(f"`fitted` must be a FittedArrays or None; got {type(f).__name__}.")
        for name, have in (("n_users", f.n_users), ("n_items", f.n_items), ("dim", f.dim)):
            if have != getattr(self, name):
                raise ValueError(f"`fitted` must match `{name}` = {getattr(self, name)}; its "
                                 f"arrays have {name} = {have}.")

    def _check_lifetimes(self, set_):
        birth, death = self.item_birth, self.item_death
        if birth is not None:
            set_("item_birth", _int_tuple(birth, "item_birth", 0, self.n_ticks - 1, self.n_items))
        if death is not None:
            set_("item_death", _int_tuple(death, "item_death", 1, None, self.n_items))
        b = self.item_birth or (0,) * self.n_items
        d = self.item_death or (self.n_ticks,) * self.n_items
        for j, (bj, dj) in enumerate(zip(b, d)):
            if dj <= bj:
                raise ValueError(f"`item_death[{j}]` must be > item_birth[{j}] = {bj}; got {dj}.")

    def _check_shocks(self, set_):
        shocks = self.shocks
        if isinstance(shocks, AppealShock) or not isinstance(shocks, (tuple, list)):
            raise TypeError("`shocks` must be a tuple of AppealShock; "
                            f"got {type(shocks).__name__}.")
        for j, s in enumerate(shocks):
            if not isinstance(s, AppealShock):
                raise TypeError(f"`shocks[{j}]` must be an AppealShock; got {type(s).__name__}.")
            if s.item >= self.n_items:
                raise ValueError(f"`shocks[{j}].item` must be in [0, {self.n_items - 1}]; "
                                 f"got {s.item}.")
            if s.start >= self.n_ticks:
                raise ValueError(f"`shocks[{j}].start` must be in [0, {self.n_ticks - 1}]; "
                                 f"got {s.start}.")
        set_("shocks", tuple(shocks))

    def _check_campaigns(self, set_):
        cs = self.campaigns
        if isinstance(cs, CampaignConfig) or not isinstance(cs, (tuple, list)):
            raise TypeError("`campaigns` must be a tuple of CampaignConfig; "
                            f"got {type(cs).__name__}.")
        for j, c in enumerate(cs):
            if not isinstance(c, CampaignConfig):
                raise TypeError(f"`campaigns[{j}]` must be a CampaignConfig; "
                                f"got {type(c).__name__}.")
            if c.end > self.n_ticks:
                raise ValueError(f"`campaigns[{j}]` must lie inside the horizon: start + duration "
                                 f"must be in [1, n_ticks] = [1, {self.n_ticks}]; got "
                                 f"{c.start} + {c.duration} = {c.end}.")
            if c.items is not None:
                bad = [i for i in c.items if i >= self.n_items]
                if bad:
                    raise ValueError(f"`campaigns[{j}].items` must be in [0, {self.n_items - 1}]; "
                                     f"got {bad[0]}.")
            b = np.asarray(self.item_birth or (0,) * self.n_items)
            d = np.asarray(self.item_death or (self.n_ticks,) * self.n_items)
            pool = np.asarray(c.items) if c.items is not None else np.arange(self.n_items)
            ticks = np.arange(c.start, c.end)
            alive = (b[pool][None, :] <= ticks[:, None]) & (ticks[:, None] < d[pool][None, :])
            n_avail = int(alive.sum(axis=1).min())
            if c.k > n_avail:
                raise ValueError(f"`campaigns[{j}].k` must be in [1, {n_avail}] (the fewest "
                                 f"items available during the campaign); got {c.k}.")
        set_("campaigns", tuple(cs))

    # -- derived arrays --------------------------------------------------------------------
    def birth_array(self) -> np.ndarray:
        """Birth tick of every item, (n_items,) int64."""
        return np.asarray(self.item_birth or (0,) * self.n_items, dtype=np.int64)

    def death_array(self) -> np.ndarray:
        """Death tick (first tick not alive) of every item, (n_items,) int64."""
        return np.asarray(self.item_death or (self.n_ticks,) * self.n_items, dtype=np.int64)
