"""Worlds fitted to a real interaction log: :func:`calibrate`, :class:`CalibratedWorld`.

The model is the :class:`~simulator.World`'s own, so that a calibrated world is an ordinary
``WorldConfig`` carrying fitted arrays (:class:`~simulator.FittedArrays`): campaigns, the twin
without campaigns, ``true_ctr``, ``item_marginal`` and every evaluation run on it unchanged.

Over the horizon, user ``u`` meets item ``i`` ``Poisson(E_u c_i)`` times (``E_u`` the user's
expected exposure events, ``c_i = sum_t phi(t) q_i(t) d_i(t)`` the item's time-integrated
exposure share ``q_i(t) ~ exp(exposure * a_i)`` among the alive items times its CTR decay),
and adopts it at each meeting with probability ``p_ui = expit(a_i + x_u . f_i)``. So ``u``
holds ``i`` at the end of the horizon with probability

    P(X_ui = 1) = 1 - exp(-Lambda_ui),   Lambda_ui = E_u c_i p_ui,

exactly (a Poisson number of successful meetings is at least one) when tastes do not drift.
:func:`calibrate` maximises this Bernoulli likelihood of the observed 0/1 matrix over
``log E_u``, ``a_i``, ``x_u`` and ``f_i`` (ridge penalty on the factors); then, with
timestamps, fits the drift of the tastes and the items' life cycles around that static fit
(:mod:`simulator._drift`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.special import expit, logit

from recloop_base.threads import blas_threads
from recloop_base.validation import (
    ArgumentTypeError,
    ArgumentValueError,
    as_generator,
    check_float,
    check_int,
)
from simulator._config import FittedArrays, WorldConfig
from simulator.logs import InteractionLog, LogFormatError, _atomic_savez, _open_npz

__all__ = ["CalibratedWorld", "CalibrationWarning", "FitInfo", "calibrate"]

_FORMAT_VERSION = 2
#: Cells of one dense users x items block of the fit (512 kB of float64: the chain of
#: element-wise operations on a block stays in cache).
_BLOCK_CELLS = 1 << 16
#: Bounds of the log-intensity: exp stays finite and positive.
_ETA_MIN, _ETA_MAX = -700.0, 30.0
_N_SHOWN = 5  # ids listed in a message
#: Cap of the expected successful meetings of a user's least likely held item.
_LAMBDA_MAX = 5.0
#: Bound of the fitted appeals (expit(20) is 1 to 9 digits).
_APPEAL_MAX = 20.0
#: Precision of the weak normal prior on the users' log-activities (standard deviation
#: 1/sqrt(0.1) = 3.2 nats, a factor 24, around their starting median): users who hold
#: nearly every item have an infinite maximum-likelihood activity, and their slow drift
#: towards it kept the fit from converging (Jester: activities of 1e7 after 30 sweeps,
#: still climbing; 24 sweeps to converge with the prior). On MovieLens-100K, whose
#: log-activities span 5.1-10.9, it changes the fitted activities by under 1%.
_ALPHA_PRIOR = 0.1


class CalibrationWarning(UserWarning):
    """Users or items were dropped from the log before fitting (no interaction left)."""


@dataclass(frozen=True)
class FitInfo:
    """How a calibration went, and the options it used.

    Attributes
    ----------
    n_iter : int
        Alternating sweeps run.
    converged : bool
        Whether the relative change of the log-likelihood fell below ``tol``.
    log_likelihood : float
        Bernoulli log-likelihood of the observed 0/1 matrix under the fitted world, per
        user-item cell (higher is better; 0 would be a perfect fit).
    n_factors, exposure, ctr, reg : the options of :func:`calibrate`.
    activity_halflife, ctr_halflife : float or None
        Half-lives estimated from the timestamps (None: none estimated or no decline found).
    seconds_per_tick : float or None
        Length of a tick when the log has timestamps.
    min_rating : float or None
        Ratings below it were not counted as interactions.
    n_sessions : int or None
        Sessions (distinct active ticks of a user) the session process was fitted to (None:
        no session process).
    session_log_likelihood : float or None
        Censored log-likelihood per user of the fitted session law.
    rating_levels : int or None
        Levels of the rating model (None: no ratings).
    rating_log_likelihood : float or None
        Ordered-logit log-likelihood per rating.
    rating_converged : bool or None
        Whether the rating fit converged.
    drift_model, drift_sigma, drift_theta, drift_inner_split, drift_n_heldout,
    drift_n_sessions, drift_ll_static, drift_ll_random_walk, drift_ll_ou, drift_v0,
    drift_ll_exact, drift_shrinkage, drift_note
        The taste drift (:class:`simulator.DriftFit`; None: not fitted, or not measured).
    appeal_bins, appeal_persistence : int or float or None
        The items' life cycles (:func:`simulator._drift.fit_life_cycles`): time bins of the
        appeals, and the correlation of an item's offset from one bin to the next.
    """

    n_iter: int
    converged: bool
    log_likelihood: float
    n_factors: int
    exposure: float
    ctr: float
    reg: float
    activity_halflife: float | None
    ctr_halflife: float | None
    seconds_per_tick: float | None
    min_rating: float | None
    n_sessions: int | None = None
    session_log_likelihood: float | None = None
    rating_levels: int | None = None
    rating_log_likelihood: float | None = None
    rating_converged: bool | None = None
    drift_model: str | None = None
    drift_sigma: float | None = None
    drift_theta: float | None = None
    drift_inner_split: int | None = None
    drift_n_heldout: int | None = None
    drift_n_sessions: int | None = None
    drift_ll_static: float | None = None
    drift_ll_random_walk: float | None = None
    drift_ll_ou: float | None = None
    drift_v0: float | None = None
    drift_ll_exact: float | None = None
    drift_shrinkage: float | None = None
    drift_note: str | None = None
    appeal_bins: int | None = None
    appeal_persistence: float | None = None


def _ro(a, dtype=None) -> np.ndarray:
    arr = np.array(a, dtype=dtype, copy=True)
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class CalibratedWorld:
    """A world fitted to an interaction log, with the log it was fitted to.

    Attributes
    ----------
    config : WorldConfig
        The fitted world (``config.fitted`` holds the arrays, no campaigns). Run it like any
        preset: ``World(config, seed)``, or add campaigns with :meth:`with_campaigns`.
    observed : InteractionLog
        The real log as fitted: kept users and items renumbered ``0..n-1``, one edge per
        (user, item) pair, ticks from the timestamps (all 0 without timestamps).
    user_ids, item_ids : ndarray, shapes (n_users,) and (n_items,)
        Original id of each user and item of the world.
    dropped_users, dropped_items : ndarray
        Original ids of the users and items removed because no interaction was left after
        filtering (see :class:`CalibrationWarning`).
    info : FitInfo
    source : str
        Where the log came from (a file name), or "".
    source_sha256 : str
        SHA-256 of the data file's bytes when it came from a file (set by the harness), or "".

    Notes
    -----
    :attr:`sha256` hashes exactly what :meth:`save` writes, so a saved and reloaded world has
    the same hash; the harness records it in ``environment.json``.
    """

    config: WorldConfig
    observed: InteractionLog
    user_ids: np.ndarray
    item_ids: np.ndarray
    dropped_users: np.ndarray
    dropped_items: np.ndarray
    info: FitInfo
    source: str = ""
    source_sha256: str = ""

    def __post_init__(self):
        if not isinstance(self.config, WorldConfig) or self.config.fitted is None:
            raise TypeError("`config` must be a WorldConfig with fitted arrays.")
        if self.config.campaigns:
            raise ValueError("`config` must have no campaigns (add them with "
                             "`with_campaigns`); got "
                             f"{len(self.config.campaigns)}.")
        for name in ("user_ids", "item_ids", "dropped_users", "dropped_items"):
            object.__setattr__(self, name, _ro(getattr(self, name)))
        if self.user_ids.shape != (self.config.n_users,):
            raise ValueError(f"`user_ids` must have {self.config.n_users} entries; got "
                             f"{self.user_ids.shape}.")
        if self.item_ids.shape != (self.config.n_items,):
            raise ValueError(f"`item_ids` must have {self.config.n_items} entries; got "
                             f"{self.item_ids.shape}.")

    # -- use ---------------------------------------------------------------------------------
    @property
    def n_users(self) -> int:
        return self.config.n_users

    @property
    def n_items(self) -> int:
        return self.config.n_items

    def with_campaigns(self, campaigns) -> WorldConfig:
        """The fitted config with ``campaigns`` (a tuple of :class:`CampaignConfig`)."""
        return dataclasses.replace(self.config, campaigns=tuple(campaigns))

    def world(self, seed=None, *, method: str = "fast"):
        """A :class:`~simulator.World` of the fitted config (no campaigns)."""
        from simulator._world import World

        return World(self.config, seed, method=method)

    def observed_matrix(self) -> sp.csr_array:
        """The observed binary users x items matrix (CSR, float64 ones)."""
        o = self.observed
        m = sp.csr_array((np.ones(o.user.size), (o.user, o.item)),
                         shape=(o.n_users, o.n_items))
        m.sort_indices()
        return m

    def expected_profile_sizes(self) -> np.ndarray:
        """Expected profile size of every user at the last tick, under the fitted world.

        ``sum_i 1 - exp(-Lambda_ui)`` (exact for a world without drift and campaigns). With
        sessions, over the observed sessions (what the fit conditions on; a simulated world
        draws its own).
        """
        return _expected_sizes(self.config, self._session_profiles())

    def _session_profiles(self):
        """The users' time profiles of the fit: observed sessions, weighted (or None)."""
        law = self.config.sessions
        if law is None or not hasattr(law, "later_weight"):
            return None
        return _session_psi(self.observed.user, self.observed.tick, self.n_users,
                            self.config.n_ticks, law.later_weight)

    # -- persistence -------------------------------------------------------------------------
    def _payload(self) -> tuple[dict, dict]:
        c = self.config
        from simulator._sessions import SessionLaw

        scalars = {f.name: getattr(c, f.name) for f in dataclasses.fields(c)
                   if f.name not in ("fitted", "campaigns", "shocks", "user_weights",
                                     "item_birth", "item_death", "sessions")}
        if c.shocks or c.user_weights is not None:
            raise ValueError("a calibrated world with shocks or user weights cannot be saved.")
        if c.sessions is not None and not isinstance(c.sessions, SessionLaw):
            raise ValueError("a calibrated world with a fixed session schedule cannot be saved.")
        fa = c.fitted
        header = {"kind": "CalibratedWorld", "format": _FORMAT_VERSION, "config": scalars,
                  "info": dataclasses.asdict(self.info), "source": self.source,
                  "source_sha256": self.source_sha256,
                  "sessions": None if c.sessions is None else dataclasses.asdict(c.sessions),
                  "rating_slope": None if fa.ratings is None else fa.ratings.slope,
                  "observed_metadata": dict(self.observed.metadata)}
        arrays = {"appeal": fa.appeal, "features": fa.features,
                  "taste": fa.taste, "activity": fa.activity,
                  "user_ids": self.user_ids, "item_ids": self.item_ids,
                  "dropped_users": self.dropped_users, "dropped_items": self.dropped_items,
                  "observed_user": self.observed.user, "observed_item": self.observed.item,
                  "observed_tick": self.observed.tick}
        if self.observed.rating is not None:
            arrays["observed_rating"] = self.observed.rating
        if fa.arrival is not None:
            arrays["arrival"] = fa.arrival
        if fa.taste_origin is not None:
            arrays["taste_origin"] = fa.taste_origin
        if fa.appeal_offset is not None:
            arrays["appeal_offset"] = fa.appeal_offset
            arrays["appeal_edges"] = fa.appeal_edges
        if fa.ratings is not None:
            for name in _RATING_ARRAYS:
                arrays[f"rating_{name}"] = getattr(fa.ratings, name)
        if c.item_birth is not None:
            arrays["item_birth"] = c.birth_array()
        if c.item_death is not None:
            arrays["item_death"] = c.death_array()
        return header, arrays

    @property
    def sha256(self) -> str:
        """SHA-256 of the header (canonical JSON) and of every array (name, dtype, shape, bytes)."""
        header, arrays = self._payload()
        return _digest(header, arrays)

    def save(self, path) -> Path:
        """Write the world to ``path`` (``.npz``, no pickle, atomic); returns the path written.

        The file holds the fitted arrays, the observed log, the id maps and a JSON header (the
        config's scalar fields, :class:`FitInfo`, the source). Load it with :meth:`load`.
        """
        header, arrays = self._payload()
        header = dict(header, sha256=_digest(header, arrays))
        arrays = dict(arrays, __header__=np.array(json.dumps(header, sort_keys=True)))
        return _atomic_savez(path, arrays)

    @classmethod
    def load(cls, path) -> "CalibratedWorld":
        """Read a world written by :meth:`save` (``allow_pickle=False``).

        Raises
        ------
        FileNotFoundError
            No such file.
        simulator.LogFormatError
            Not a readable ``.npz``, not a calibrated world, or its content does not match the
            hash it was saved with.
        """
        data, header = _open_npz(path, "CalibratedWorld")
        with data:
            arrays = {k: data[k] for k in data.files if k != "__header__"}
        if header.get("format") != _FORMAT_VERSION:
            raise LogFormatError(f"{path}: unsupported CalibratedWorld format "
                                 f"{header.get('format')!r}; expected {_FORMAT_VERSION} (a "
                                 "world saved by an older recloop: fit it again with recloop "
                                 "calibrate).")
        try:
            from simulator._ratings import RatingModel
            from simulator._sessions import SessionLaw

            saved_hash = header.pop("sha256")
            cfg = dict(header["config"])
            info = FitInfo(**header["info"])
            rating = None
            if header.get("rating_slope") is not None:
                rating = RatingModel(slope=header["rating_slope"],
                                     **{n: arrays[f"rating_{n}"] for n in _RATING_ARRAYS})
            fitted = FittedArrays(appeal=arrays["appeal"], features=arrays["features"],
                                  taste=arrays["taste"], activity=arrays["activity"],
                                  arrival=arrays.get("arrival"), ratings=rating,
                                  taste_origin=arrays.get("taste_origin"),
                                  appeal_offset=arrays.get("appeal_offset"),
                                  appeal_edges=arrays.get("appeal_edges"))
            if header.get("sessions") is not None:
                cfg["sessions"] = SessionLaw(**header["sessions"])
            if "item_birth" in arrays:
                cfg["item_birth"] = tuple(int(x) for x in arrays["item_birth"])
            if "item_death" in arrays:
                cfg["item_death"] = tuple(int(x) for x in arrays["item_death"])
            config = WorldConfig(**cfg, fitted=fitted)
            observed = InteractionLog(
                user=arrays["observed_user"], item=arrays["observed_item"],
                tick=arrays["observed_tick"],
                source=np.zeros(arrays["observed_user"].size, np.int8),
                n_users=config.n_users, n_items=config.n_items,
                metadata=header.get("observed_metadata", {}),
                rating=arrays.get("observed_rating"))
            out = cls(config=config, observed=observed, user_ids=arrays["user_ids"],
                      item_ids=arrays["item_ids"], dropped_users=arrays["dropped_users"],
                      dropped_items=arrays["dropped_items"], info=info,
                      source=header.get("source", ""),
                      source_sha256=header.get("source_sha256", ""))
        except (KeyError, TypeError, ValueError) as exc:
            raise LogFormatError(f"{path}: not a valid CalibratedWorld ({exc}).") from None
        if out.sha256 != saved_hash:
            raise LogFormatError(f"{path}: content does not match its sha256 (the file was "
                                 "changed after it was saved).")
        return out

    def __repr__(self) -> str:
        c = self.config
        return (f"CalibratedWorld({c.n_users} users, {c.n_items} items, {c.n_ticks} ticks, "
                f"n_factors={self.info.n_factors}, {self.observed.user.size} interactions, "
                f"source={self.source!r})")


_RATING_ARRAYS = ("levels", "bounds", "thresholds", "user_offset", "item_offset")


def _session_psi(user, tick, n_users: int, n_ticks: int, later_weight: float) -> sp.csr_array:
    """Users' time profiles from their observed sessions: (n_users, n_ticks), rows sum to 1,
    a first session weighing 1 and later ones ``later_weight``."""
    from simulator._sessions import observed_sessions

    su, st, _ = observed_sessions(user, tick, n_users)
    w = np.where(np.r_[True, su[1:] != su[:-1]], 1.0, later_weight)
    w /= np.bincount(su, w, minlength=n_users)[su]
    return sp.csr_array((w, (su, st)), shape=(n_users, n_ticks))


def _digest(header: dict, arrays: dict) -> str:
    h = hashlib.sha256(json.dumps(header, sort_keys=True).encode())
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------
# input
# ---------------------------------------------------------------------------------------------
@dataclass
class _Log:
    users: np.ndarray  # 0-based, kept users only
    items: np.ndarray
    ticks: np.ndarray | None  # raw timestamps (int64) or None
    user_ids: np.ndarray
    item_ids: np.ndarray
    dropped_users: np.ndarray
    dropped_items: np.ndarray
    source: str
    ratings: np.ndarray | None = None  # kept ratings, aligned with users


_INT64_MAX = 2**63 - 1


def _check_id_range(arr: np.ndarray, label: str) -> np.ndarray:
    """Ids as int64, refusing what does not fit (2^64 would wrap around silently)."""
    if arr.dtype == object:
        try:
            big = [v for v in arr.tolist() if isinstance(v, int) and not
                   -_INT64_MAX - 1 <= v <= _INT64_MAX]
        except TypeError:
            big = []
        if big:
            raise ArgumentValueError(label, "integer ids in [0, 2^63)", str(big[0]))
    if arr.dtype == np.uint64 and arr.size and int(arr.max()) > _INT64_MAX:
        raise ArgumentValueError(label, "integer ids in [0, 2^63)", str(int(arr.max())))
    return arr


def _int_column(a, label: str) -> np.ndarray:
    arr = _check_id_range(np.asarray(a), label)
    if arr.ndim != 1:
        raise ArgumentValueError(label, "1-dimensional", f"shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if np.issubdtype(arr.dtype, np.floating) and np.all(np.isfinite(arr)) \
                and np.all(np.mod(arr, 1) == 0):
            arr = arr.astype(np.int64)
        else:
            raise ArgumentTypeError(label, "integers", f"dtype {arr.dtype}")
    return arr.astype(np.int64, copy=False)


def _columns(interactions):
    """(users, items, ratings or None, timestamps or None, user_ids, item_ids, source)."""
    if sp.issparse(interactions) or isinstance(interactions, np.ndarray):
        m = interactions
        if m.ndim != 2:
            raise ArgumentValueError("interactions", "a 2-D users x items matrix",
                                     f"shape {m.shape}")
        if not (np.issubdtype(m.dtype, np.number) or m.dtype == np.bool_):
            raise ArgumentTypeError("interactions", "a matrix of numbers", f"dtype {m.dtype}")
        coo = sp.coo_array(m)
        coo.sum_duplicates()
        keep = coo.data != 0  # an explicit zero of a matrix is no interaction
        r = coo.data[keep].astype(np.float64)
        n_u, n_i = m.shape
        return (coo.row[keep].astype(np.int64), coo.col[keep].astype(np.int64), r, None,
                np.arange(n_u), np.arange(n_i), "")
    if hasattr(interactions, "users") and hasattr(interactions, "items"):
        d = interactions  # evaluators.datasets.RatingData or alike (duck typing)
        users = _int_column(d.users, "interactions.users")
        items = _int_column(d.items, "interactions.items")
        ratings = getattr(d, "ratings", None)
        times = getattr(d, "timestamps", None)
        uid = getattr(d, "user_ids", None)
        iid = getattr(d, "item_ids", None)
        uid = np.arange(users.max() + 1 if users.size else 0) if uid is None else \
            _check_id_range(np.asarray(uid), "interactions.user_ids")
        iid = np.arange(items.max() + 1 if items.size else 0) if iid is None else \
            _check_id_range(np.asarray(iid), "interactions.item_ids")
        for name, col, ids in (("users", users, uid), ("items", items, iid)):
            if col.size and (col.min() < 0 or col.max() >= ids.size):
                raise ArgumentValueError(f"interactions.{name}", f"indices in [0, {ids.size - 1}]",
                                         str(int(col.min() if col.min() < 0 else col.max())))
        return users, items, ratings, times, uid, iid, str(getattr(d, "source", "") or "")
    if isinstance(interactions, (tuple, list)) and len(interactions) in (2, 3, 4):
        cols = list(interactions) + [None] * (4 - len(interactions))
        users = _int_column(cols[0], "interactions[0] (users)")
        items = _int_column(cols[1], "interactions[1] (items)")
        if items.size != users.size:
            raise ArgumentValueError("interactions[1] (items)",
                                     f"as long as the users ({users.size})", str(items.size))
        for name, col in (("users", users), ("items", items)):
            if col.size and col.min() < 0:
                j = int(np.argmax(col < 0))
                raise ArgumentValueError(f"interactions ({name})", "ids >= 0",
                                         f"{col[j]} at index {j}")
        uid, u = np.unique(users, return_inverse=True)
        iid, i = np.unique(items, return_inverse=True)
        return u.ravel(), i.ravel(), cols[2], cols[3], uid, iid, ""
    raise ArgumentTypeError(
        "interactions", "a users x items matrix, a (users, items[, ratings][, timestamps]) "
        "tuple or a RatingData", type(interactions).__name__)


def _ids_text(ids: np.ndarray) -> str:
    shown = ", ".join(str(x) for x in ids[:_N_SHOWN].tolist())
    return shown + (f", ... ({ids.size} in all)" if ids.size > _N_SHOWN else "")


def _prepare(interactions, *, min_rating, rating_scale) -> _Log:
    users, items, ratings, times, uid, iid, source = _columns(interactions)
    n = users.size
    if n == 0:
        raise ArgumentValueError("interactions", "a log with at least one interaction",
                                 "an empty log")
    keep = np.ones(n, dtype=bool)
    if ratings is not None:
        r = np.asarray(ratings, dtype=np.float64).ravel()
        if r.size != n:
            raise ArgumentValueError("interactions (ratings)", f"{n} ratings, one per "
                                     "interaction", str(r.size))
        bad = ~np.isfinite(r)
        if bad.any():
            j = int(np.argmax(bad))
            raise ArgumentValueError("interactions (ratings)", "finite", f"{r[j]} at index {j}")
        if rating_scale is not None:
            lo, hi = rating_scale
            bad = (r < lo) | (r > hi)
            if bad.any():
                j = int(np.argmax(bad))
                raise ArgumentValueError(
                    "interactions (ratings)", f"in the declared scale [{lo:g}, {hi:g}] "
                    "(`rating_scale`)", f"{r[j]:g} at index {j}")
        if min_rating is not None:
            keep = r >= min_rating
    elif min_rating is not None:
        raise ArgumentValueError("min_rating", "None for a log without ratings", repr(min_rating))
    if times is not None:
        times = _int_column(times, "interactions (timestamps)")
        if times.size != n:
            raise ArgumentValueError("interactions (timestamps)", f"{n} timestamps, one per "
                                     "interaction", str(times.size))
    # one interaction per (user, item) pair: a repeated pair is ambiguous
    key = users * max(1, iid.size) + items
    order = np.argsort(key, kind="stable")
    dup = np.flatnonzero(key[order][1:] == key[order][:-1])
    if dup.size:
        a, b = sorted((int(order[dup[0]]), int(order[dup[0] + 1])))
        raise ArgumentValueError("interactions", "one interaction per (user, item) pair",
                                 f"user {uid[users[b]]} and item {iid[items[b]]} at indices "
                                 f"{a} and {b}")
    # in (user, item) order: the order of a file's lines (time going backwards, say) must not
    # change the world (floating-point sums follow the order of their terms)
    keep = order[keep[order]]
    users, items = users[keep], items[keep]
    times = None if times is None else times[keep]
    kept_ratings = None if ratings is None else r[keep]
    if users.size == 0:
        raise ArgumentValueError("interactions", f"at least one interaction with rating >= "
                                 f"{min_rating:g} (`min_rating`)", "none left after filtering")
    has_u = np.bincount(users, minlength=uid.size) > 0
    has_i = np.bincount(items, minlength=iid.size) > 0
    dropped_u, dropped_i = uid[~has_u], iid[~has_i]
    if dropped_u.size or dropped_i.size:
        parts = []
        if dropped_u.size:
            parts.append(f"{dropped_u.size} user(s) ({_ids_text(dropped_u)})")
        if dropped_i.size:
            parts.append(f"{dropped_i.size} item(s) ({_ids_text(dropped_i)})")
        why = ("no rating >= min_rating" if min_rating is not None else "no interaction")
        warnings.warn(f"calibrate: dropped {' and '.join(parts)} with {why}; the world has "
                      f"{int(has_u.sum())} users and {int(has_i.sum())} items.",
                      CalibrationWarning, stacklevel=3)
    new_u = np.cumsum(has_u) - 1
    new_i = np.cumsum(has_i) - 1
    return _Log(users=new_u[users], items=new_i[items], ticks=times, user_ids=uid[has_u],
                item_ids=iid[has_i], dropped_users=dropped_u, dropped_items=dropped_i,
                source=source, ratings=kept_ratings)


# ---------------------------------------------------------------------------------------------
# time effects
# ---------------------------------------------------------------------------------------------
def _decay_mle(values: np.ndarray, spans: np.ndarray) -> float:
    """Rate ``beta >= 0`` of a discrete truncated exponential ``P(v) ~ exp(-beta v)`` on
    ``0 .. spans - 1`` (per observation), by maximum likelihood over ``[0, 50 / mean span]``
    (to 1e-6 of that interval); 0 when no decline is found: fewer than 2 values, every span
    1 or less, or the likelihood's gain over the uniform law under 2 or ``beta`` times the
    longest span under 0.25."""
    if values.size < 2 or np.all(spans <= 1):
        return 0.0
    from scipy.optimize import minimize_scalar

    s = spans.astype(np.float64)
    total = float(values.sum())

    def nll(beta):
        if beta < 1e-12:
            return float(np.log(s).sum())  # uniform
        # -log P = beta v - log(1 - e^-beta) + log(1 - e^-beta s)
        return (beta * total - values.size * math.log(-math.expm1(-beta))
                + float(np.log(-np.expm1(-beta * s)).sum()))

    hi = 50.0 / max(1.0, float(s.mean()))
    res = minimize_scalar(nll, bounds=(0.0, hi), method="bounded",
                          options={"xatol": 1e-6 * hi})
    beta = float(res.x)
    # no decline: the uniform law is as likely (a half-life beyond the horizon is no decay)
    if nll(0.0) - nll(beta) < 2.0 or beta * float(s.max()) < 0.25:
        return 0.0
    return beta


def _time_effects(ticks: np.ndarray, items: np.ndarray, n_ticks: int, n_items: int):
    """(birth, activity_halflife, ctr_halflife) estimated from the interaction ticks."""
    birth = np.full(n_items, n_ticks - 1, dtype=np.int64)
    np.minimum.at(birth, items, ticks)
    beta_a = _decay_mle(ticks.astype(np.float64), np.full(ticks.size, n_ticks))
    # ages of the adoptions after an item's first (the first one defines its birth)
    age = ticks - birth[items]
    first = np.zeros(ticks.size, dtype=bool)
    order = np.lexsort((ticks, items))
    first[order[np.r_[True, items[order][1:] != items[order][:-1]]]] = True
    rest = ~first
    beta_c = _decay_mle(age[rest].astype(np.float64), (n_ticks - birth[items])[rest])
    # the activity decline explains part of the ages' decline: keep the CTR's own share
    beta_c = max(0.0, beta_c - beta_a)
    half = lambda b: None if b <= 0 else math.log(2.0) / b  # noqa: E731
    return birth, half(beta_a), half(beta_c)


def _exposure_integral(appeal, exposure, phi, birth, death, ctr_halflife) -> np.ndarray:
    """``kappa_i = sum_t phi(t) alive_i(t) d_i(t) / Z(t)`` with ``Z(t)`` the sum over alive
    items of ``exp(exposure * a_j)``, so that ``c_i = exp(exposure a_i) kappa_i``.

    ``phi`` is the time profile of the events (n_ticks,), or one per user: a sparse
    (n_users, n_ticks) matrix whose rows sum to 1 (the users' sessions); then ``kappa`` is
    (n_users, n_items), ``kappa_ui = sum_t phi_u(t) alive_i(t) d_i(t) / Z(t)``.
    """
    n_ticks = phi.shape[-1]
    if birth is None and ctr_halflife is None:
        z = np.exp(exposure * (appeal - appeal.max())).sum()
        return np.full(appeal.size, math.exp(-exposure * appeal.max()) / z)
    t = np.arange(n_ticks)[:, None]
    b = np.zeros(appeal.size, np.int64) if birth is None else birth
    d = np.full(appeal.size, n_ticks, np.int64) if death is None else death
    alive = (b[None, :] <= t) & (t < d[None, :])
    top = appeal.max()
    e = np.exp(exposure * (appeal - top))
    z = alive @ e  # (n_ticks,)
    dec = alive.astype(np.float64)
    if ctr_halflife is not None:
        dec *= np.exp2(-np.maximum(t - b[None, :], 0) / ctr_halflife)
    if sp.issparse(phi):  # per user: (n_users, n_ticks) @ (n_ticks, n_items)
        inv = np.divide(1.0, z, out=np.zeros_like(z), where=z > 0)
        return np.asarray(phi @ (dec * inv[:, None])) * math.exp(-exposure * top)
    w = np.divide(phi, z, out=np.zeros_like(phi), where=z > 0)
    return (w @ dec) * math.exp(-exposure * top)


def _time_profile(n_ticks: int, halflife) -> np.ndarray:
    t = np.arange(n_ticks, dtype=np.float64)
    w = np.ones(n_ticks) if halflife is None else 2.0 ** (-t / halflife)
    return w / w.sum()


# ---------------------------------------------------------------------------------------------
# the fit
# ---------------------------------------------------------------------------------------------
def _log_sigmoid(s: np.ndarray) -> np.ndarray:
    """``log expit(s)`` in place of ``s``'s copy: ``min(s, 0) - log1p(exp(-|s|))`` (stable;
    several times faster than scipy.special.log_expit)."""
    out = np.abs(s)
    np.negative(out, out=out)
    np.exp(out, out=out)
    np.log1p(out, out=out)
    return np.minimum(s, 0.0) - out


class _Model:
    """Alternating Fisher scoring of the world's likelihood (see :func:`calibrate`'s Notes).

    The negative log-likelihood is ``sum_ui Lambda_ui - sum_obs [Lambda + log(1 - e^-Lambda)]``
    with ``Lambda_ui = exp(alpha_u) D_ui``, ``D_ui = exp(o_i) expit(s_ui)``,
    ``s_ui = a_i + x_u . f_i``: a dense part over every cell, computed block by block, and a
    sparse correction over the observed cells only. The dense part's Hessian in
    ``eta = log Lambda`` is ``Lambda`` itself; observed cells use the Fisher information.
    """

    def __init__(self, X: sp.csr_array, *, k, exposure, ctr, reg, phi, birth, ctr_halflife):
        self.X = X
        self.n_u, self.n_i = X.shape
        self.k, self.e, self.ctr, self.reg = k, exposure, ctr, reg
        self.phi, self.birth, self.ctr_halflife = phi, birth, ctr_halflife
        self.rows = max(1, _BLOCK_CELLS // self.n_i)
        self.r_obs = np.repeat(np.arange(self.n_u), np.diff(X.indptr))
        self.c_obs = X.indices.astype(np.int64)
        self.flat_obs = self.r_obs * self.n_i + self.c_obs

    # -- pieces ------------------------------------------------------------------------------
    def offsets(self, a) -> np.ndarray:
        """``o_i = log c_i = exposure a_i + log kappa_i``: (n_items,), or (n_users, n_items)
        when the users have their own time profiles (sessions)."""
        kappa = _exposure_integral(a, self.e, self.phi, self.birth, None, self.ctr_halflife)
        ea = np.exp(self.e * a)
        with np.errstate(divide="ignore"):
            o = np.log(kappa) + self.e * a
        self._eo_cache = (o, np.multiply(kappa, ea, out=kappa))  # exp(o), without an exp pass
        return o

    def _shifted_offsets(self, a) -> np.ndarray:
        """The offsets after the appeals move from ``self.a`` to ``a`` with the exposure
        shares' normalisers held fixed: ``o + exposure (a - self.a)``, and their ``exp``
        from the current one's by a product."""
        shift = self.e * (a - self.a)
        o = self.o + shift
        self._eo_cache = (o, self._exp_offsets(self.o) * np.exp(shift))
        return o

    @staticmethod
    def _o_rows(o, lo, hi):
        """The offsets of users ``lo:hi`` (broadcast against their block of cells)."""
        return o if o.ndim == 1 else o[lo:hi]

    @staticmethod
    def _o_cells(o, r, c):
        """The offsets of cells ``(r, c)`` (a flat gather: 2-d fancy indexing is slower)."""
        return o[c] if o.ndim == 1 else np.take(o.reshape(-1), r * o.shape[1] + c)

    def blocks(self):
        for lo in range(0, self.n_u, self.rows):
            yield lo, min(self.n_u, lo + self.rows)

    def _score_matrix(self, x, a, f) -> np.ndarray:
        """``s = a + x f^T`` for every cell, in one BLAS call into a reused buffer.

        One large product per pass instead of one per block: many small multithreaded BLAS
        calls stall on a loaded machine (each waits for every BLAS thread to be scheduled).
        """
        if getattr(self, "_s", None) is None:
            self._s = np.empty((self.n_u, self.n_i))
        if self.k:
            np.matmul(x, f.T, out=self._s)
        else:
            self._s.fill(0.0)
        self._s += a[None, :]
        return self._s

    def _buffers(self):
        """Two reused (n_users, n_items) arrays for the weighted products of a Newton step."""
        if getattr(self, "_wh", None) is None:
            self._wh = np.empty((self.n_u, self.n_i))
            self._whh = np.empty((self.n_u, self.n_i))
        return self._wh, self._whh

    def _dense(self, s, eo, with_h=False):
        """``D = exp(o) expit(s)`` (and ``h = 1 - expit(s)``) of a block of scores ``s``
        (``eo``: ``exp`` of the block's offsets, see :meth:`_eo_rows`).

        With ``t = exp(-s)`` (``-s`` capped at 700: no overflow): ``expit(s) = 1 / (1 + t)``
        and ``h = t / (1 + t)``, both to a few ulps and without cancellation. One
        transcendental pass per cell where the log-sigmoid form took three (25 s of a 91 s
        fit at the 1M shape); numpy's exp is vectorised, scipy's ``expit`` is not (slower
        here than the passes it saves)."""
        t = np.negative(s)
        np.minimum(t, 700.0, out=t)
        np.exp(t, out=t)
        u = t + 1.0
        np.reciprocal(u, out=u)
        if not with_h:
            u *= eo
            return u, None
        t *= u
        u *= eo
        return u, t

    def _exp_offsets(self, o) -> np.ndarray:
        """``exp(o)``, computed once per offsets array (they change once per sweep)."""
        cache = getattr(self, "_eo_cache", None)
        if cache is None or cache[0] is not o:
            with np.errstate(under="ignore"):
                cache = (o, np.exp(o))
            self._eo_cache = cache
        return cache[1]

    def _eo_rows(self, o, lo, hi):
        """``exp`` of the offsets of users ``lo:hi`` (see :meth:`_o_rows`)."""
        return self._o_rows(self._exp_offsets(o), lo, hi)

    def _observed(self, alpha, x, a, f, o, sel=None, sm=None):
        """Lambda, h and the NLL correction at the observed cells (or a selection of them);
        ``sm``: the score matrix of ``(x, a, f)`` when at hand (its cells are gathered
        instead of recomputed)."""
        r, c = (self.r_obs, self.c_obs) if sel is None else (self.r_obs[sel], self.c_obs[sel])
        if sm is not None and sel is None:
            s = np.take(sm.reshape(-1), self.flat_obs)
        else:
            s = a[c] + (np.einsum("nd,nd->n", x[r], f[c]) if self.k else 0.0)
        ls = _log_sigmoid(s)
        lam = np.exp(np.minimum(alpha[r] + self._o_cells(o, r, c) + ls, _ETA_MAX))
        corr = lam + np.log(-np.expm1(-lam))  # cell NLL -log(1 - e^-L) = L - corr
        return r, c, lam, np.exp(ls - s), corr

    def nll(self, alpha, x, a, f, o):
        """Per-user and per-item NLL, and the rows' sums of ``D``."""
        rowd = np.empty(self.n_u)
        cols = np.zeros(self.n_i)
        ea = np.exp(alpha)
        sm = self._score_matrix(x, a, f)
        for lo, hi in self.blocks():
            d, _ = self._dense(sm[lo:hi], self._eo_rows(o, lo, hi))
            rowd[lo:hi] = d.sum(axis=1)
            d *= ea[lo:hi, None]
            cols += d.sum(axis=0)
        r, c, _, _, corr = self._observed(alpha, x, a, f, o, sm=sm)
        rows = ea * rowd - np.bincount(r, corr, minlength=self.n_u)
        cols -= np.bincount(c, corr, minlength=self.n_i)
        return rows, cols, rowd

    def _corrections(self, alpha, x, a, f, o, sm=None):
        """Observed cells' gradient and weight minus the dense part's (both Lambda there)."""
        r, c, lam, h, _ = self._observed(alpha, x, a, f, o, sm=sm)
        with np.errstate(over="ignore"):
            ratio = lam / np.expm1(lam)  # -> 1 as lam -> 0
        g = -ratio - lam  # d(-log(1 - e^-L))/d eta = -L/(e^L - 1)
        w = lam * ratio - lam  # Fisher information L^2/(e^L - 1)
        return r, c, g, w, h

    # -- block updates ----------------------------------------------------------------------
    def user_step(self):
        grad, hess = self.user_system()
        step = _solve(hess, grad)
        self._accept_rows(self.alpha - step[:, 0], self.x - step[:, 1:])

    def user_system(self):
        """Gradient (n_users, k+1) and Fisher matrix of the objective in (alpha_u, x_u)."""
        k, reg, n = self.k, self.reg, self.n_u
        grad = np.zeros((n, k + 1))
        hess = np.zeros((n, k + 1, k + 1))
        ea = np.exp(self.alpha)
        ff = (self.f[:, :, None] * self.f[:, None, :]).reshape(self.n_i, k * k)
        sm = self._score_matrix(self.x, self.a, self.f)
        wh, whh = self._buffers()
        for lo, hi in self.blocks():
            d, h = self._dense(sm[lo:hi], self._eo_rows(self.o, lo, hi), with_h=True)
            d *= ea[lo:hi, None]
            tot = d.sum(axis=1)
            grad[lo:hi, 0] = tot
            hess[lo:hi, 0, 0] = tot
            if k:
                np.multiply(d, h, out=wh[lo:hi])
                np.multiply(wh[lo:hi], h, out=whh[lo:hi])
        if k:  # the products once, on the whole matrices (see _score_matrix)
            dh = wh @ self.f
            grad[:, 1:] = dh
            hess[:, 0, 1:] = dh
            hess[:, 1:, 1:] = (whh @ ff).reshape(n, k, k)
        r, c, g, w, h = self._corrections(self.alpha, self.x, self.a, self.f, self.o, sm=sm)
        grad[:, 0] += np.bincount(r, g, minlength=n) + _ALPHA_PRIOR * (self.alpha - self.alpha0)
        hess[:, 0, 0] += np.bincount(r, w, minlength=n) + _ALPHA_PRIOR
        if k:
            m = lambda v: sp.csr_array((v, (r, c)), shape=(n, self.n_i))  # noqa: E731
            grad[:, 1:] += m(g * h) @ self.f + reg * self.x
            hess[:, 0, 1:] += m(w * h) @ self.f
            hess[:, 1:, 0] = hess[:, 0, 1:]
            hess[:, 1:, 1:] += (m(w * h * h) @ ff).reshape(n, k, k) + reg * np.eye(k)
        return grad, hess

    def _cap(self, alpha):
        """At most ``_LAMBDA_MAX`` expected successful meetings for a user's *least* likely
        held item: a user holding every item has an infinite maximum-likelihood activity,
        which would cost the simulation events without changing the profile much (with the
        cap every held item is held with probability >= 1 - e^-5 = 0.993). Inactive for
        users whose profiles leave items out (their likelihood bounds the activity)."""
        r, c = self.r_obs, self.c_obs
        s = self.a[c] + (np.einsum("nd,nd->n", self.x[r], self.f[c]) if self.k else 0.0)
        log_d = self._o_cells(self.o, r, c) + _log_sigmoid(s)
        low = np.full(self.n_u, np.inf)
        np.minimum.at(low, r, log_d)
        return np.minimum(alpha, math.log(_LAMBDA_MAX) - low)

    def _accept_rows(self, alpha, x):
        """Keep the new rows where the objective went down; halve the step elsewhere."""
        alpha = self._cap(alpha)
        rows, cols, rowd = self.nll(alpha, x, self.a, self.f, self.o)
        obj = rows + self._pen(x) + self._pen_alpha(alpha)
        for j in range(6):
            worse = obj > self.row_obj + 1e-12 * np.abs(self.row_obj)
            if not worse.any():
                break
            alpha[worse] = self.alpha[worse] if j == 5 else 0.5 * (alpha[worse] + self.alpha[worse])
            x[worse] = self.x[worse] if j == 5 else 0.5 * (x[worse] + self.x[worse])
            # the rows changed: recompute them (and the columns) in full
            rows, cols, rowd = self.nll(alpha, x, self.a, self.f, self.o)
            obj = rows + self._pen(x) + self._pen_alpha(alpha)
        self.alpha, self.x = alpha, x
        self.row_obj = obj
        self.col_obj = cols + self._pen(self.f)

    def item_step(self):
        grad, hess = self.item_system()
        step = _solve(hess, grad)
        # an item held by every user has an infinite maximum-likelihood appeal: bounded so
        # that it cannot absorb the exposure of every other item
        self._accept_cols(np.clip(self.a - step[:, 0], -_APPEAL_MAX, _APPEAL_MAX),
                          self.f - step[:, 1:])

    def item_system(self):
        """Gradient (n_items, k+1) and Fisher matrix in (a_i, f_i), the offsets' normalisers
        held fixed (``d o_i / d a_i = exposure``)."""
        k, reg, e, n = self.k, self.reg, self.e, self.n_i
        grad = np.zeros((n, k + 1))
        hess = np.zeros((n, k + 1, k + 1))
        ea = np.exp(self.alpha)
        xx = (self.x[:, :, None] * self.x[:, None, :]).reshape(self.n_u, k * k)
        s0 = np.zeros(n)
        s1 = np.zeros(n)
        s2 = np.zeros(n)
        sm = self._score_matrix(self.x, self.a, self.f)
        wh, whh = self._buffers()
        for lo, hi in self.blocks():
            d, h = self._dense(sm[lo:hi], self._eo_rows(self.o, lo, hi), with_h=True)
            d *= ea[lo:hi, None]
            s0 += d.sum(axis=0)
            np.multiply(d, h, out=wh[lo:hi])
            s1 += wh[lo:hi].sum(axis=0)
            np.multiply(wh[lo:hi], h, out=whh[lo:hi])
            s2 += whh[lo:hi].sum(axis=0)
        if k:  # the products once, on the whole matrices (see _score_matrix)
            grad[:, 1:] = wh.T @ self.x
            hess[:, 0, 1:] = whh.T @ self.x
            hess[:, 1:, 1:] = (whh.T @ xx).reshape(n, k, k)
        # d eta / d a_i = exposure + h (the exposure share's normaliser held fixed)
        grad[:, 0] = e * s0 + s1
        hess[:, 0, 0] = e * e * s0 + 2 * e * s1 + s2
        if k:
            hess[:, 0, 1:] += e * grad[:, 1:]
        r, c, g, w, h = self._corrections(self.alpha, self.x, self.a, self.f, self.o, sm=sm)
        ja = e + h
        grad[:, 0] += np.bincount(c, g * ja, minlength=n)
        hess[:, 0, 0] += np.bincount(c, w * ja * ja, minlength=n)
        if k:
            m = lambda v: sp.csr_array((v, (c, r)), shape=(n, self.n_u))  # noqa: E731
            grad[:, 1:] += m(g * h) @ self.x + reg * self.f
            hess[:, 0, 1:] += m(w * h * ja) @ self.x
            hess[:, 1:, 0] = hess[:, 0, 1:]
            hess[:, 1:, 1:] += (m(w * h * h) @ xx).reshape(n, k, k) + reg * np.eye(k)
        return grad, hess

    def _accept_cols(self, a, f):
        """As :meth:`_accept_rows` for items; the offsets move with ``exposure * a`` only
        (the exposure shares' normalisers are recomputed by :meth:`level_step`)."""
        o = self._shifted_offsets(a)
        rows, cols, rowd = self.nll(self.alpha, self.x, a, f, o)
        obj = cols + self._pen(f)
        for j in range(6):
            worse = obj > self.col_obj + 1e-12 * np.abs(self.col_obj)
            if not worse.any():
                break
            a[worse] = self.a[worse] if j == 5 else 0.5 * (a[worse] + self.a[worse])
            f[worse] = self.f[worse] if j == 5 else 0.5 * (f[worse] + self.f[worse])
            o = self._shifted_offsets(a)
            rows, cols, rowd = self.nll(self.alpha, self.x, a, f, o)
            obj = cols + self._pen(f)
        self.a, self.f, self.o = a, f, o
        self.rowd = rowd

    def _pen(self, v):
        return 0.5 * self.reg * (v * v).sum(axis=1) if self.k else np.zeros(v.shape[0])

    def _pen_alpha(self, alpha):
        """Weak normal prior on the log-activities around their starting median (see
        :data:`_ALPHA_PRIOR`)."""
        d = alpha - self.alpha0
        return 0.5 * _ALPHA_PRIOR * d * d

    def level_step(self):
        """Shift the appeals so that the mean p over the observed cells is ``ctr``, keeping
        each user's ``sum_i Lambda_ui``; recompute the offsets; return the objective."""
        c, r = self.c_obs, self.r_obs
        s_obs = self.a[c] + (np.einsum("nd,nd->n", self.x[r], self.f[c]) if self.k else 0.0)
        self.a = self.a + _level_shift(s_obs, self.ctr)
        self.o = self.offsets(self.a)
        before = self.rowd * np.exp(self.alpha)
        _, _, rowd = self.nll(np.zeros(self.n_u), self.x, self.a, self.f, self.o)
        self.alpha = self._cap(np.log(before / rowd))
        # Lambda = exp(alpha) D: the rows' NLL needs only rowd and the observed cells (no
        # second dense pass); the columns' is recomputed by the next user step's acceptance.
        r, _, _, _, corr = self._observed(self.alpha, self.x, self.a, self.f, self.o)
        rows = np.exp(self.alpha) * rowd - np.bincount(r, corr, minlength=self.n_u)
        self.rowd = rowd
        self.row_obj = rows + self._pen(self.x) + self._pen_alpha(self.alpha)
        self.col_obj = None
        return float(self.row_obj.sum() + self._pen(self.f).sum())

    # -- driver ------------------------------------------------------------------------------
    def init(self, rng):
        X = self.X
        deg_u = np.asarray(X.sum(axis=1)).ravel()
        deg_i = np.asarray(X.sum(axis=0)).ravel()
        k = self.k
        if k:
            from scipy.sparse.linalg import svds

            norm = sp.csr_array(X.multiply(1.0 / np.sqrt(deg_u)[:, None])
                                .multiply(1.0 / np.sqrt(deg_i)[None, :]))
            v0 = rng.uniform(-1.0, 1.0, min(X.shape))
            if k + 1 < min(X.shape):
                u, s, vt = svds(norm, k=k + 1, v0=v0, solver="arpack")
            else:  # ARPACK needs k < min(shape): a tiny log's full SVD
                u, s, vt = np.linalg.svd(norm.toarray(), full_matrices=False)
                u, s, vt = u[:, :k + 1], s[:k + 1], vt[:k + 1]
            order = np.argsort(-s)[1:]  # the leading pair is the degrees' (trivial)
            u, s, vt = u[:, order], s[order], vt[order]
            # the signs of singular vectors are arbitrary: fix them for reproducibility
            sign = np.where(vt[np.arange(k), np.argmax(np.abs(vt), axis=1)] < 0, -1.0, 1.0)
            u, vt = u * sign, vt * sign[:, None]
            scale = np.sqrt(s / s[0])
            self.x = u * scale * math.sqrt(self.n_u) * 0.5
            self.f = vt.T * scale * math.sqrt(self.n_i) * 0.5
        else:
            self.x = np.zeros((self.n_u, 0))
            self.f = np.zeros((self.n_i, 0))
        kappa0 = _exposure_integral(np.zeros(self.n_i), self.e, self.phi, self.birth, None,
                                    self.ctr_halflife)
        if kappa0.ndim == 2:  # per-user exposure: its mean over users for the start
            kappa0 = np.maximum(kappa0.mean(axis=0), 1e-300)
        la = (np.log(deg_i) - np.log(kappa0)) / (1.0 + self.e)
        self.a = la - la.mean() + logit(self.ctr)
        self.o = self.offsets(self.a)
        _, _, rowd = self.nll(np.zeros(self.n_u), self.x, self.a, self.f, self.o)
        self.alpha = np.log(deg_u / rowd)
        self.alpha0 = float(np.median(self.alpha))
        self.rowd = rowd

    def fit(self, rng, *, max_iter, tol):
        self.init(rng)
        prev = self.level_step()
        converged, it = False, 0
        for iteration in range(1, max_iter + 1):
            it = iteration
            self.user_step()
            self.item_step()
            obj = self.level_step()
            if abs(prev - obj) <= tol * abs(obj):
                converged = True
                break
            prev = obj
        r, _, _, _, corr = self._observed(self.alpha, self.x, self.a, self.f, self.o)
        rows = np.exp(self.alpha) * self.rowd - np.bincount(r, corr, minlength=self.n_u)
        return it, converged, -float(rows.sum()) / (self.n_u * self.n_i)


def _level_shift(s: np.ndarray, ctr: float) -> float:
    """The shift ``c`` with ``mean(expit(s + c)) = ctr``: Newton's method on the increasing,
    convex-then-concave mean, kept inside a bracket that shrinks at every step (bisection
    where a Newton step would leave it); about 6 passes where bisection to 1e-9 took 37.
    The bracket is [-50, 50]: a root beyond it gives the bracket's end."""
    lo, hi = -50.0, 50.0
    c = 0.0
    for _ in range(100):
        p = expit(s + c)
        f = float(p.mean()) - ctr
        if f < 0:
            lo = c
        else:
            hi = c
        slope = float((p * (1.0 - p)).mean())
        step = c - f / slope if slope > 0 else 0.5 * (lo + hi)
        tol = 1e-12 * max(1.0, abs(c))
        if abs(step - c) <= tol:  # converged (also when the step lands on c: f == 0, c = hi)
            return step
        nxt = step if lo < step < hi else 0.5 * (lo + hi)
        if abs(nxt - c) <= tol or hi - lo <= 1e-12:
            return nxt
        c = nxt
    return c


def _nll_reference(X, alpha, x, a, f, o) -> np.ndarray:
    """The negative log-likelihood of every cell, written out on the dense matrix: the
    reference :meth:`_Model.nll` (blocks plus sparse corrections) is tested against."""
    X = np.asarray(X.toarray() if sp.issparse(X) else X, dtype=bool)
    s = a[None, :] + x @ f.T
    p = expit(s)
    lam = np.exp(alpha[:, None] + (o if o.ndim == 2 else o[None, :])) * p  # meetings
    held = 1.0 - np.exp(-lam)  # P(X_ui = 1)
    return np.where(X, -np.log(held), lam)  # -log(1 - held) = lam


def _solve(hess, grad):
    """Newton steps of a batch of small systems (a tiny ridge keeps them solvable)."""
    hess = hess.copy()
    idx = np.arange(hess.shape[1])
    hess[:, idx, idx] += 1e-9 * (1.0 + np.abs(hess[:, idx, idx]))
    return np.linalg.solve(hess, grad[:, :, None])[:, :, 0]


def _expected_sizes(config: WorldConfig, psi=None) -> np.ndarray:
    """Expected profile sizes at the last tick of a calibrated world without drift (users'
    time profiles ``psi``, or the config's one)."""
    fa = config.fitted
    phi = _time_profile(config.n_ticks, config.activity_halflife) if psi is None else psi
    kappa = _exposure_integral(fa.appeal, config.exposure, phi,
                               None if config.item_birth is None else config.birth_array(),
                               None if config.item_death is None else config.death_array(),
                               config.ctr_halflife)
    o = config.exposure * fa.appeal + np.log(kappa)
    out = np.empty(config.n_users)
    rows = max(1, _BLOCK_CELLS // config.n_items)
    for lo in range(0, config.n_users, rows):
        hi = min(config.n_users, lo + rows)
        s = fa.appeal[None, :] + fa.taste[lo:hi] @ fa.features.T
        lam = fa.activity[lo:hi, None] * np.exp(_Model._o_rows(o, lo, hi)) * expit(s)
        out[lo:hi] = (-np.expm1(-lam)).sum(axis=1)
    return out


# ---------------------------------------------------------------------------------------------
# drift
# ---------------------------------------------------------------------------------------------
#: Ticks per term of the random walk's Karhunen-Loeve expansion in a drifting world (its
#: time resolution: a week of days).
_DRIFT_TICKS_PER_TERM = 7
_DRIFT_MAX_TERMS = 64
#: Convergence tolerance of the inner split's fit: it estimates one or two numbers.
_INNER_TOL = 1e-3
#: Terms of the OU process's Fourier expansion (64 frequencies: its correlation within 0.06
#: of exp(-theta |tau|) up to three mean-reversion times, within 0.08 beyond).
_OU_TERMS = 128


def _drift_terms(horizon: int) -> int:
    """Terms of the walk's expansion: one per week of the horizon, 8 to 64."""
    return int(min(_DRIFT_MAX_TERMS, max(8, math.ceil(horizon / _DRIFT_TICKS_PER_TERM))))


def _mean_rate_ratio(config, users, ticks, law) -> np.ndarray:
    """Each user's :func:`~simulator._drift.adoption_rate_ratio` at the mean distance of its
    observed sessions from its origin (weighted as its events are: a first session 1, later
    ones ``later_weight``; its interactions' ticks without sessions): one row of the items
    per user, where one per session would cost several times more for the same first-order
    correction."""
    from simulator._drift import adoption_rate_ratio
    from simulator._sessions import observed_sessions

    n = config.n_users
    origin = config.fitted.taste_origin
    if law is not None:
        su, st, _ = observed_sessions(users, ticks, n)
        w = np.where(np.r_[True, su[1:] != su[:-1]], 1.0, law.later_weight)
    else:
        su, st, w = users, ticks, np.ones(users.size)
    dist = np.bincount(su, w * np.abs(st - origin[su]), minlength=n) / np.maximum(
        np.bincount(su, w, minlength=n), 1e-300)
    tick = np.minimum(origin + np.rint(dist).astype(np.int64), config.n_ticks - 1)
    return adoption_rate_ratio(config, np.arange(n), tick, origin)


def _inner_rank(cols) -> int:
    """The largest rank an inner fit of ``cols`` (users, items, ...) allows."""
    return max(0, min(np.unique(cols[0]).size, np.unique(cols[1]).size) - 1)


def _drift_info(d) -> dict:
    fin = lambda v: None if not math.isfinite(v) else float(v)  # noqa: E731
    return {"drift_model": d.model, "drift_sigma": fin(d.sigma), "drift_theta": fin(d.theta),
            "drift_inner_split": d.inner_split, "drift_n_heldout": d.n_heldout,
            "drift_n_sessions": d.n_sessions, "drift_ll_static": fin(d.ll_static),
            "drift_ll_random_walk": fin(d.ll_random_walk), "drift_ll_ou": fin(d.ll_ou),
            "drift_v0": fin(d.v0), "drift_ll_exact": fin(d.ll_exact),
            "drift_shrinkage": fin(d.shrinkage), "drift_note": d.note}


def _drift_fields(d, taste, horizon: int) -> dict:
    """The WorldConfig fields of a fitted drift (none when static)."""
    from simulator._drift import population_variance

    if d is None or d.model == "static":
        return {}
    if d.model == "random_walk":
        return {"drift_rate": d.sigma, "drift_terms": _drift_terms(horizon)}
    return {"drift_rate": math.sqrt(population_variance(taste)), "drift_theta": d.theta,
            "drift_terms": _OU_TERMS}


# ---------------------------------------------------------------------------------------------
# public entry point
# ---------------------------------------------------------------------------------------------
def _check_scale(rating_scale):
    if rating_scale is None:
        return None
    try:
        lo, hi = (float(v) for v in rating_scale)
    except (TypeError, ValueError):
        raise ArgumentTypeError("rating_scale", "None or a (low, high) pair of numbers",
                                repr(rating_scale)) from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
        raise ArgumentValueError("rating_scale", "finite with low <= high", repr(rating_scale))
    return lo, hi


def calibrate(interactions, *, n_factors: int = 8, exposure: float = 1.0, ctr: float = 0.3,
              reg: float = 1.0, min_rating=None, rating_scale=None, ratings: bool = True,
              sessions: bool = True, seconds_per_tick: float = 86400.0,
              n_ticks: int | None = None, time_effects: bool = True, drift: bool = True,
              max_iter: int = 30, tol: float = 1e-4, rng=None) -> CalibratedWorld:
    """Fit a world to a real interaction log.

    Parameters
    ----------
    interactions : sparse matrix or ndarray (n_users, n_items); tuple; or RatingData
        The log: a users x items matrix (every non-zero is an interaction, its value the
        rating), a tuple ``(users, items)``, ``(users, items, ratings)`` or
        ``(users, items, ratings, timestamps)`` of aligned 1-d arrays (ids are any ints in
        ``[0, 2^63)``; ``ratings`` may be None), or an object with the attributes ``users``,
        ``items``, ``ratings``, ``timestamps``, ``user_ids``, ``item_ids`` (what the loaders
        of ``evaluators.datasets`` return). Every (user, item) pair is one adoption.
    n_factors : int, default 8
        Rank of the user and item latent tastes (the world's ``dim``), in
        ``[0, min(n_users, n_items) - 1]``; 0 fits marginals only (``dim`` 1, zero tastes),
        which leaves no latent score for ratings: with ratings, give ``ratings=False``.
    exposure : float, default 1.0
        The world's ``exposure`` (>= 0): organic meetings favour item ``i`` by
        ``exp(exposure * a_i)``. Assumed, not estimated: 0 puts all popularity into the
        adoption probability.
    ctr : float, default 0.3
        Mean adoption probability ``p(u, i)`` over the observed pairs, in (0, 1). A log shows
        only meetings times acceptances, so the level of ``p`` is assumed: this fixes it (and
        with it how strongly campaigns are accepted).
    reg : float, default 1.0
        Ridge penalty ``reg / 2 (|x_u|^2 + |f_i|^2)`` on the factors and
        ``reg / 2 (b_u^2 + c_i^2)`` on the rating offsets (>= 0).
    min_rating : float, optional
        Count only ratings >= ``min_rating`` as interactions (the rating model is fitted to
        those, so the world's ratings are >= ``min_rating`` too).
    rating_scale : (float, float), optional
        Declared scale; a rating outside it is an error.
    ratings : bool, default True
        Fit the rating model (:mod:`simulator._ratings`) when the log has at least two
        distinct ratings; the world then rates its adoptions. False: no ratings.
    sessions : bool, default True
        With timestamps, fit the session process (:mod:`simulator._sessions`): the world's
        users arrive at their first tick in the log and come back in heavy-tailed sessions.
        False (or no timestamps): events spread over the horizon by one time profile.
    seconds_per_tick : float, default 86400
        Length of a tick when the log has timestamps (the horizon is the log's span).
    n_ticks : int, optional
        Horizon of a log without timestamps (default 100); not allowed with timestamps.
    time_effects : bool, default True
        With timestamps, estimate item births, the CTR half-life and (without sessions) the
        activity half-life (see Notes); False: every item alive throughout, no decay.
    drift : bool, default True
        With timestamps, fit the users' taste drift (:func:`simulator._drift.fit_drift`: a
        random walk chosen against static tastes by held-out likelihood on an inner split
        in time of the log); the world's ``drift_rate`` and ``fitted.taste_origin`` carry
        it. False: static tastes.
    max_iter : int, default 30
        Alternating sweeps at most.
    tol : float, default 1e-4
        Stop when the penalised log-likelihood changes by less than ``tol`` (relative).
    rng : None, int, SeedSequence or Generator
        Start vector of the sparse SVD (the only random step): same rng, same world.

    Returns
    -------
    CalibratedWorld
        ``.config`` is a :class:`WorldConfig` with fitted arrays and no campaigns.

    Raises
    ------
    TypeError, ValueError
        An empty log (or none left after ``min_rating``), a log with one user or one item, a
        repeated (user, item) pair, a rating outside ``rating_scale``, an id of 2^63 or more,
        ``n_factors`` beyond ``min(n_users, n_items) - 1`` (or 0 with ratings), an option out
        of range; the message names the argument.

    Warns
    -----
    CalibrationWarning
        Users or items without any interaction left (a matrix's empty row, or all ratings
        below ``min_rating``) are dropped; the message lists them, and so do
        ``dropped_users`` / ``dropped_items``. Timestamps on which no user is active twice:
        no session process.

    Notes
    -----
    Model (the World's, without drift): user ``u`` meets item ``i`` ``Poisson(E_u c_ui)``
    times over the horizon and adopts it at each meeting with probability
    ``p_ui = expit(a_i + x_u . f_i)``, so ``P(u holds i) = 1 - exp(-E_u c_ui p_ui)``;
    ``c_ui = sum_t phi_u(t) q_i(t) d_i(t)``, ``q_i(t) = exp(exposure a_i) / sum_{j alive}
    exp(exposure a_j)``, ``phi_u`` the user's time profile: its observed sessions weighted
    as the session process weighs them (with sessions), or one profile for all users
    (without). The fit maximises this Bernoulli likelihood of the whole 0/1 matrix
    (every cell, observed or not) -- conditional on the observed sessions, the session
    process being fitted on its own -- minus the ridge penalty, by alternating Fisher
    scoring: all users' ``(log E_u, x_u)`` at once, then all items' ``(a_i, f_i)``, each a
    batch of ``(n_factors + 1)``-dimensional Newton systems with step halving, then the
    level of ``a`` is set by ``ctr``. It starts from a truncated SVD
    (:func:`scipy.sparse.linalg.svds`) of the degree-normalised matrix
    ``D_u^-1/2 X D_i^-1/2`` (correspondence analysis). An SVD alone would factorise the 0/1
    matrix on the probability scale by least squares; the world needs factors on its logit
    scale inside an exposure model, which only a likelihood fit of that model gives (a
    logistic-PCA / ALS view of Collins, Dasgupta & Schapire 2001; Johnson 2014). Cost per
    sweep ``O(n_users n_items n_factors^2)``, in blocks of about two million cells.

    Empirical or fitted: item appeals, user activities (``E_u``) and tastes are fitted
    (maximum likelihood, so expected popularity and profile sizes match the observed ones up
    to the penalty); with timestamps, item births are the ticks of their first interactions
    and user arrivals the ticks of theirs (empirical); the session law (number of sessions,
    gaps, weight of later sessions) by censored maximum likelihood
    (:func:`~simulator._sessions.fit_session_law`); the CTR half-life is that of the item
    ages at adoption (after each item's first), net of the overall activity decline, and
    without sessions the activity half-life is the maximum-likelihood truncated exponential
    of the interaction ticks; each half-life is dropped (None) when the decline is not
    significant. Ratings: an ordered logit on ``x_u . f_i`` with user and item offsets
    (:func:`~simulator._ratings.fit_ratings`). With timestamps and ``drift``: the taste
    drift is chosen on an inner split in time (:func:`simulator.fit_drift`: static tastes
    known up to their uncertainty, a random walk, or a stationary OU process, by held-out
    choice likelihood; the static factorisation alone cannot tell drift from noise), each
    user's walk pinned at the mean tick of its interactions, and the activities scaled so
    that the drift does not change how much a user adopts; the items' appeals move in
    monthly bins (:func:`simulator._drift.fit_life_cycles`). Assumed: ``exposure``,
    ``ctr``, items never die.

    Examples
    --------
    >>> import numpy as np, simulator
    >>> truth = simulator.World(simulator.WorldConfig(n_users=200, n_items=40, n_ticks=20,
    ...                                              mean_profile_size=6.0), seed=0)
    >>> cal = calibrate(truth.profiles(19), n_factors=2, rng=0)
    >>> cal.config.n_users, cal.config.dim
    (200, 2)
    """
    from simulator._ratings import fit_ratings
    from simulator._sessions import fit_session_law

    n_factors_ = check_int(n_factors, "n_factors", low=0)
    exposure = check_float(exposure, "exposure", low=0.0)
    ctr = check_float(ctr, "ctr", low=0.0, high=1.0, low_open=True, high_open=True)
    reg = check_float(reg, "reg", low=0.0)
    if min_rating is not None:
        min_rating = check_float(min_rating, "min_rating")
    rating_scale = _check_scale(rating_scale)
    for name, flag in (("ratings", ratings), ("sessions", sessions),
                       ("time_effects", time_effects), ("drift", drift)):
        if not isinstance(flag, (bool, np.bool_)):
            raise ArgumentTypeError(name, "a bool", type(flag).__name__)
    seconds_per_tick = check_float(seconds_per_tick, "seconds_per_tick", low=0.0, low_open=True)
    if n_ticks is not None:
        n_ticks = check_int(n_ticks, "n_ticks", low=1)
    max_iter = check_int(max_iter, "max_iter", low=1)
    tol = check_float(tol, "tol", low=0.0)
    gen = as_generator(rng)

    log = _prepare(interactions, min_rating=min_rating, rating_scale=rating_scale)
    n_u, n_i = log.user_ids.size, log.item_ids.size
    for name, n in (("users", n_u), ("items", n_i)):
        if n < 2:
            raise ArgumentValueError("interactions", f"a log with at least 2 {name} (a "
                                     "world of one cannot be fitted)", f"{n} {name[:-1]}")
    limit = min(n_u, n_i) - 1
    if n_factors_ > limit:
        raise ArgumentValueError("n_factors", f"an int in [0, {limit}] (below min(n_users, "
                                 f"n_items) = {limit + 1} after filtering)", str(n_factors_))
    rated = bool(ratings) and log.ratings is not None and np.unique(log.ratings).size >= 2
    if rated and n_factors_ == 0:
        raise ArgumentValueError("n_factors", "an int >= 1 for a log with ratings (the rating "
                                 "model is on the latent score; pass ratings=False to fit "
                                 "without ratings)", "0")
    birth = act_half = ctr_half = None
    psi = law = None
    session_fit = None
    if log.ticks is not None:
        if n_ticks is not None:
            raise ArgumentValueError("n_ticks", "None for a log with timestamps (the horizon "
                                     "is the log's span; set `seconds_per_tick`)", str(n_ticks))
        t0 = int(log.ticks.min())
        ticks = np.floor((log.ticks - t0) / seconds_per_tick).astype(np.int64)
        horizon = int(ticks.max()) + 1
        if time_effects:
            birth, act_half, ctr_half = _time_effects(ticks, log.items, horizon, n_i)
        if sessions and horizon > 1:
            try:
                session_fit = fit_session_law(log.users, ticks, horizon, n_users=n_u)
            except ValueError as exc:
                warnings.warn(f"calibrate: no session process ({exc})", CalibrationWarning,
                              stacklevel=2)
        if session_fit is not None:
            law = session_fit.law
            psi = _session_psi(log.users, ticks, n_u, horizon, law.later_weight)
            act_half = None  # the sessions are the time profile
    else:
        horizon = 100 if n_ticks is None else n_ticks
        ticks = np.zeros(log.users.size, dtype=np.int64)
    X = sp.csr_array((np.ones(log.users.size), (log.users, log.items)), shape=(n_u, n_i))
    X.sort_indices()
    k = n_factors_
    phi = _time_profile(horizon, act_half) if psi is None else psi
    model = _Model(X, k=k, exposure=exposure, ctr=ctr, reg=reg, phi=phi, birth=birth,
                   ctr_halflife=ctr_half)
    # One BLAS thread: the fit's products stall 3x with two on a loaded machine (see
    # recloop_base.threads.blas_threads), and BLAS sums in an order that depends on its
    # thread count: with one, the fitted bytes do not depend on the machine's cores.
    with np.errstate(under="ignore"), blas_threads(1):
        n_iter, converged, ll = model.fit(gen, max_iter=max_iter, tol=tol)
    dim = max(1, k)
    taste = model.x if k else np.zeros((n_u, 1))
    features = model.f if k else np.zeros((n_i, 1))
    rating_model, rating_info = None, {}
    if rated:
        score = np.einsum("nd,nd->n", taste[log.users], features[log.items])
        rating_model, rating_info = fit_ratings(log.users, log.items, log.ratings, score,
                                                n_u, n_i, reg=reg)
    arrival = None
    if law is not None:
        arrival = np.full(n_u, horizon - 1, dtype=np.int64)
        np.minimum.at(arrival, log.users, ticks)
    drift_fit = origin = None
    if drift and log.ticks is not None and k:
        from simulator._drift import _user_origin, fit_drift

        def inner(cols):  # the static world of the inner split, with this fit's options
            return calibrate(cols, n_factors=min(k, _inner_rank(cols)), exposure=exposure,
                             ctr=ctr, reg=reg, ratings=False, sessions=sessions,
                             seconds_per_tick=1.0, time_effects=time_effects, drift=False,
                             max_iter=max_iter, tol=max(tol, _INNER_TOL), rng=gen)

        drift_fit = fit_drift(log.users, log.items, ticks, horizon, inner, gen)
        if drift_fit.model != "static":
            origin = _user_origin(log.users, ticks, n_u)
    fitted = FittedArrays(appeal=model.a, features=features, taste=taste,
                          activity=np.exp(model.alpha), arrival=arrival, ratings=rating_model,
                          taste_origin=origin)
    config = WorldConfig(
        n_users=n_u, n_items=n_i, n_ticks=horizon, dim=dim,
        mean_profile_size=float(log.users.size / n_u), activity_halflife=act_half,
        n_universal=0, exposure=exposure,
        item_birth=None if birth is None else tuple(int(b) for b in birth),
        ctr_halflife=ctr_half, fitted=fitted, sessions=law,
        **_drift_fields(drift_fit, taste, horizon))
    if origin is not None:  # the drift must not change how much a user adopts
        config = dataclasses.replace(config, fitted=dataclasses.replace(
            fitted, activity=fitted.activity * _mean_rate_ratio(config, log.users, ticks,
                                                                law)))
    cycles = None
    if drift and log.ticks is not None:
        from simulator._drift import fit_life_cycles

        cycles = fit_life_cycles(config, log.users, log.items, ticks, phi)
        if cycles is not None:
            config = dataclasses.replace(config, fitted=dataclasses.replace(
                config.fitted, appeal_offset=cycles.offset, appeal_edges=cycles.edges))
    order = np.lexsort((log.items, log.users, ticks))
    observed = InteractionLog(user=log.users[order], item=log.items[order], tick=ticks[order],
                              source=np.zeros(order.size, np.int8), n_users=n_u, n_items=n_i,
                              metadata={"source": log.source},
                              rating=None if log.ratings is None else log.ratings[order])
    info = FitInfo(n_iter=n_iter, converged=converged, log_likelihood=ll, n_factors=k,
                   exposure=exposure, ctr=ctr, reg=reg, activity_halflife=act_half,
                   ctr_halflife=ctr_half,
                   seconds_per_tick=seconds_per_tick if log.ticks is not None else None,
                   min_rating=min_rating,
                   n_sessions=None if session_fit is None else session_fit.n_sessions,
                   session_log_likelihood=None if session_fit is None
                   else session_fit.log_likelihood / session_fit.n_users,
                   rating_levels=None if rating_model is None else rating_model.n_levels,
                   rating_log_likelihood=rating_info.get("log_likelihood"),
                   rating_converged=rating_info.get("converged"),
                   **({} if drift_fit is None else _drift_info(drift_fit)),
                   **({} if cycles is None else {
                       "appeal_bins": int(cycles.edges.size),
                       "appeal_persistence": cycles.persistence}))
    return CalibratedWorld(config=config, observed=observed, user_ids=log.user_ids,
                           item_ids=log.item_ids, dropped_users=log.dropped_users,
                           dropped_items=log.dropped_items, info=info, source=log.source)
