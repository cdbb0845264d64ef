"""How closely a simulated log reproduces a real one (issues 15 and 23).

:func:`fidelity` compares six distributions of a real and a simulated interaction log with
the two-sample Kolmogorov-Smirnov statistic and the Wasserstein-1 distance (SciPy's), and the
rating histograms by their total variation. :func:`holdout_fidelity` measures it on the
future: fit a world on the first part of a log's time span, let it run on over the rest from
the fitted state, compare the simulated continuation with the real one. The
recommender-ranking check, which needs ``agents``, lives in the harness
(``recloop.calibration``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from recloop_base.validation import (
    ArgumentTypeError,
    ArgumentValueError,
    as_generator,
    as_seed_sequence,
    check_float,
    check_int,
)
from simulator.logs import InteractionLog

__all__ = ["DISTRIBUTIONS", "Distance", "FidelityReport", "HoldoutFidelity", "NoiseBand",
           "NoiseBandReport", "fidelity", "holdout_fidelity", "holdout_split", "noise_bands"]

#: The compared distributions, in report order.
DISTRIBUTIONS = ("user_activity", "session_gaps", "profile_size", "item_popularity",
                 "rating", "profile_overlap")

#: What each distribution is a distribution of.
WHAT = {
    "user_activity": "distinct ticks with an interaction, per active user",
    "session_gaps": "ticks between two consecutive active ticks of a user",
    "profile_size": "interactions per active user",
    "item_popularity": "users holding each item (every item of the log)",
    "rating": "the ratings (and their histogram: total variation)",
    "profile_overlap": "Jaccard index of the profiles of pairs of active users",
}


@dataclass(frozen=True)
class Distance:
    """Distance between the real and simulated distributions of one statistic.

    Attributes
    ----------
    name : str
        One of :data:`DISTRIBUTIONS`.
    ks : float
        Two-sample Kolmogorov-Smirnov statistic ``sup |F_real - F_sim|`` in [0, 1]
        (``nan`` when not measurable, e.g. user activity without timestamps).
    ks_pvalue : float
        Its p-value (with large samples tiny differences are significant: read ``ks``).
    wasserstein : float
        Wasserstein-1 distance, in the statistic's units.
    relative_wasserstein : float
        ``wasserstein / mean(real)``: the typical shift as a fraction of the real mean.
    real_mean, simulated_mean : float
    n_real, n_simulated : int
        Sample sizes.
    verdict : str
        ``"close"`` (ks <= ks_close), ``"fair"`` (ks <= ks_poor), ``"poor"`` or
        ``"not measured"``.
    tv : float
        Total variation ``1/2 sum_k |p_real(k) - p_sim(k)|`` of the rating histograms
        (levels of the real log's scale); ``nan`` for the other statistics.

    Notes
    -----
    :attr:`ks_noise` is the KS statistic that two samples of these sizes from one and the
    same continuous law exceed with probability 5% (``1.358 sqrt((n + m) / (n m))``, the
    asymptotic two-sample critical value; conservative for discrete statistics): a KS below
    it cannot be told from sampling noise.
    """

    name: str
    ks: float
    ks_pvalue: float
    wasserstein: float
    relative_wasserstein: float
    real_mean: float
    simulated_mean: float
    n_real: int
    n_simulated: int
    verdict: str
    tv: float = math.nan

    @property
    def ks_noise(self) -> float:
        n, m = self.n_real, self.n_simulated
        return 1.358 * math.sqrt((n + m) / (n * m)) if n and m else math.nan


@dataclass(frozen=True)
class FidelityReport:
    """Distances of the distributions and the verdict.

    Attributes
    ----------
    distances : tuple of Distance
        In :data:`DISTRIBUTIONS` order.
    ks_close, ks_poor : float
        The thresholds of the verdicts.
    faithful : bool
        No distribution is ``"poor"``: every KS statistic is <= ``ks_poor``.
    label : str
        What was compared ("in-sample: ...", "out of sample: ...").
    """

    distances: tuple
    ks_close: float
    ks_poor: float
    faithful: bool
    label: str = ""

    def __getitem__(self, name: str) -> Distance:
        for d in self.distances:
            if d.name == name:
                return d
        raise KeyError(name)

    @property
    def rule(self) -> str:
        return (f"a distribution is close when its KS statistic is <= {self.ks_close:g}, "
                f"fair when <= {self.ks_poor:g}, poor above; the world is faithful to the "
                "distributions when none is poor")

    @property
    def worst(self) -> Distance | None:
        """The measured distribution with the largest KS statistic (None if none)."""
        measured = [d for d in self.distances if d.verdict != "not measured"]
        return max(measured, key=lambda d: d.ks) if measured else None

    def worst_text(self) -> str:
        """One line naming the worst distribution and by how much."""
        w = self.worst
        if w is None:
            return "worst distribution: none measured"
        gap = w.ks - self.ks_close
        how = (f"{gap:.3f} above the close threshold {self.ks_close:g}" if gap > 0 else
               f"within the close threshold {self.ks_close:g}")
        return (f"worst distribution: {w.name}, KS {w.ks:.3f} ({how}; real mean "
                f"{w.real_mean:.4g}, simulated {w.simulated_mean:.4g})")

    def rows(self) -> list[tuple[str, ...]]:
        """Table rows: statistic, sample sizes, real mean, simulated mean, KS, its 5% noise
        level, Wasserstein (relative), TV, verdict."""
        out = []
        for d in self.distances:
            if d.verdict == "not measured":
                out.append((d.name, "-", "-", "-", "-", "-", "-", "-", d.verdict))
                continue
            out.append((d.name, f"{d.n_real}/{d.n_simulated}", f"{d.real_mean:.4g}",
                        f"{d.simulated_mean:.4g}", f"{d.ks:.3f}", f"{d.ks_noise:.3f}",
                        f"{d.wasserstein:.4g} ({100 * d.relative_wasserstein:.1f}%)",
                        "-" if math.isnan(d.tv) else f"{d.tv:.3f}", d.verdict))
        return out

    HEADER = ("distribution", "n real/sim", "real mean", "simulated mean", "KS",
              "KS noise 5%", "Wasserstein (rel.)", "TV", "verdict")

    def to_markdown(self) -> str:
        lines = ["| " + " | ".join(self.HEADER) + " |",
                 "|" + "|".join("---" for _ in self.HEADER) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in self.rows()]
        return "\n".join(lines)

    def to_text(self) -> str:
        rows = [self.HEADER] + self.rows()
        width = [max(len(r[j]) for r in rows) for j in range(len(self.HEADER))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, width, strict=True)).rstrip()
                         for r in rows)


# ---------------------------------------------------------------------------------------------
# the statistics
# ---------------------------------------------------------------------------------------------
@dataclass
class _Log:
    matrix: sp.csr_array  # binary users x items
    user: np.ndarray | None  # per interaction (None for a matrix)
    tick: np.ndarray | None
    rating: np.ndarray | None


def _as_log(x, name: str) -> _Log:
    if isinstance(x, InteractionLog):
        u, i, t = x.user, x.item, x.tick
        m = sp.csr_array((np.ones(u.size), (u, i)), shape=(x.n_users, x.n_items))
        m.sum_duplicates()
        m.data[:] = 1.0
        return _Log(m, u, t, x.rating)
    if sp.issparse(x) or isinstance(x, np.ndarray):
        if x.ndim != 2:
            raise ArgumentValueError(name, "a 2-D users x items matrix", f"shape {x.shape}")
        m = sp.csr_array(x, dtype=np.float64)
        m.sum_duplicates()
        m.eliminate_zeros()
        m.data[:] = 1.0
        return _Log(m, None, None, None)
    raise ArgumentTypeError(name, "an InteractionLog or a users x items matrix",
                            type(x).__name__)


def _active_days(user, tick) -> np.ndarray | None:
    """Distinct ticks with an interaction, per user with at least one (None: no ticks)."""
    if user is None or user.size == 0 or np.all(tick == tick[0]):
        return None  # no timestamps (every tick equal): activity is not measurable
    span = int(tick.max()) + 1
    key = np.unique(user.astype(np.int64) * span + tick)
    _, days = np.unique(key // span, return_counts=True)
    return days.astype(np.float64)


def _session_gaps(user, tick) -> np.ndarray | None:
    """Ticks between consecutive distinct active ticks of each user, pooled."""
    if user is None or user.size == 0 or np.all(tick == tick[0]):
        return None
    span = int(tick.max()) + 1
    key = np.unique(user.astype(np.int64) * span + tick)
    u, t = key // span, key % span
    same = u[1:] == u[:-1]
    return (t[1:] - t[:-1])[same].astype(np.float64)


def _profile_sizes(m: sp.csr_array) -> np.ndarray:
    """Items held per user with at least one."""
    sizes = np.diff(m.indptr)
    return sizes[sizes > 0].astype(np.float64)


def _popularity(m: sp.csr_array) -> np.ndarray:
    """Users holding each item, every item of the log (zeros included)."""
    return np.bincount(m.indices, minlength=m.shape[1]).astype(np.float64)


def _pairs(n_users: int, n_pairs: int, rng) -> tuple[np.ndarray, np.ndarray]:
    total = n_users * (n_users - 1) // 2
    if total <= n_pairs:
        a, b = np.triu_indices(n_users, k=1)
        return a, b
    a = rng.integers(0, n_users, n_pairs)
    b = rng.integers(0, n_users - 1, n_pairs)
    b = b + (b >= a)  # uniform over the other users
    return a, b


def _overlap(m: sp.csr_array, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Jaccard index ``|I_a & I_b| / |I_a | I_b|`` of the pairs (0 for two empty profiles)."""
    size = np.diff(m.indptr).astype(np.float64)
    inter = np.empty(a.size)
    chunk = 1 << 14
    for lo in range(0, a.size, chunk):
        ra, rb = m[a[lo:lo + chunk]], m[b[lo:lo + chunk]]
        inter[lo:lo + chunk] = np.asarray(ra.multiply(rb).sum(axis=1)).ravel()
    union = size[a] + size[b] - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


def _active_overlap(m: sp.csr_array, n_pairs: int, rng) -> np.ndarray:
    active = np.flatnonzero(np.diff(m.indptr) > 0)
    if active.size < 2:
        return np.zeros(0)
    a, b = _pairs(active.size, n_pairs, rng)
    return _overlap(m, active[a], active[b])


def _rating_tv(real: np.ndarray, sim: np.ndarray) -> float:
    """Total variation of the rating histograms on the real log's levels."""
    from simulator._ratings import rating_levels

    _, bounds = rating_levels(real)
    k = bounds.size + 1
    p = np.bincount(np.searchsorted(bounds, real, side="right"), minlength=k) / real.size
    q = np.bincount(np.searchsorted(bounds, sim, side="right"), minlength=k) / sim.size
    return 0.5 * float(np.abs(p - q).sum())


def _distance(name, x, y, ks_close, ks_poor) -> Distance:
    from scipy.stats import ks_2samp, wasserstein_distance

    if x is None or y is None or x.size == 0 or y.size == 0:
        return Distance(name, math.nan, math.nan, math.nan, math.nan, math.nan, math.nan,
                        0 if x is None else int(x.size), 0 if y is None else int(y.size),
                        "not measured")
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    ks = ks_2samp(x, y)
    w = float(wasserstein_distance(x, y))
    mean = float(x.mean())
    verdict = ("close" if ks.statistic <= ks_close else
               "fair" if ks.statistic <= ks_poor else "poor")
    tv = _rating_tv(x, y) if name == "rating" else math.nan
    return Distance(name, float(ks.statistic), float(ks.pvalue), w,
                    w / abs(mean) if mean != 0 else math.nan, mean, float(y.mean()),
                    int(x.size), int(y.size), verdict, tv)


def fidelity(real, simulated, *, n_pairs: int = 20_000, ks_close: float = 0.1,
             ks_poor: float = 0.2, label: str = "", rng=None) -> FidelityReport:
    """Distances between the real and simulated distributions of six log statistics.

    Parameters
    ----------
    real, simulated : InteractionLog or sparse matrix / ndarray (n_users, n_items)
        The logs (stored non-zeros of a matrix are interactions). They may have different
        sizes. User activity and session gaps need ticks (InteractionLogs whose ticks are
        not all equal); ratings need ``InteractionLog.rating`` on both sides.
    n_pairs : int, default 20000
        Pairs of active users drawn for the profile overlap (all pairs when there are
        fewer).
    ks_close, ks_poor : float
        Verdict thresholds on the KS statistic, ``0 < ks_close <= ks_poor <= 1``.
    label : str
        What is compared (kept in the report).
    rng : None, int, SeedSequence or Generator
        Draws the user pairs.

    Returns
    -------
    FidelityReport
        One :class:`Distance` per statistic of :data:`DISTRIBUTIONS`: user activity (distinct
        active ticks per active user), session gaps (ticks between a user's consecutive
        active ticks, pooled), profile size (interactions per active user), item popularity
        (users per item, every item), rating (values; plus the total variation of the
        histograms), profile overlap (Jaccard index ``|I_u & I_v| / |I_u | I_v|`` of pairs of
        active users). An active user has at least one interaction in the log.

    Raises
    ------
    TypeError, ValueError
        A log of another type, an empty log, options out of range.

    Notes
    -----
    KS: :func:`scipy.stats.ks_2samp`; Wasserstein-1: :func:`scipy.stats.wasserstein_distance`
    (the area between the two empirical CDFs). Popularity and overlap describe the
    co-occurrence structure a recommender learns from, not only the marginals: a world with
    the right marginals but no tastes has too little overlap between similar users. After
    Stavinova et al. (2022), "Performance ranking of recommender systems on simulated data",
    whose point is that such distances are necessary, not sufficient: the harness adds the
    recommender-ranking check.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.eye(4)[[0, 1, 1, 2, 3, 3]]
    >>> fidelity(x, x, rng=0).faithful
    True
    """
    n_pairs = check_int(n_pairs, "n_pairs", low=1)
    ks_close = check_float(ks_close, "ks_close", low=0.0, high=1.0, low_open=True)
    ks_poor = check_float(ks_poor, "ks_poor", low=ks_close, high=1.0)
    if not isinstance(label, str):
        raise ArgumentTypeError("label", "a str", type(label).__name__)
    gen = as_generator(rng)
    r, s = _as_log(real, "real"), _as_log(simulated, "simulated")
    for name, lg in (("real", r), ("simulated", s)):
        if lg.matrix.nnz == 0:
            raise ArgumentValueError(name, "a log with at least one interaction",
                                     "an empty log")
    samples = {
        "user_activity": (_active_days(r.user, r.tick), _active_days(s.user, s.tick)),
        "session_gaps": (_session_gaps(r.user, r.tick), _session_gaps(s.user, s.tick)),
        "profile_size": (_profile_sizes(r.matrix), _profile_sizes(s.matrix)),
        "item_popularity": (_popularity(r.matrix), _popularity(s.matrix)),
        "rating": (r.rating, s.rating),
        "profile_overlap": (_active_overlap(r.matrix, n_pairs, gen),
                            _active_overlap(s.matrix, n_pairs, gen)),
    }
    out = tuple(_distance(name, *samples[name], ks_close, ks_poor) for name in DISTRIBUTIONS)
    faithful = all(d.verdict != "poor" for d in out)
    return FidelityReport(distances=out, ks_close=ks_close, ks_poor=ks_poor,
                          faithful=faithful, label=label)


# ---------------------------------------------------------------------------------------------
# the data's own noise
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NoiseBand:
    """A statistic's distance from the world to the real data beside the real data's own
    spread (see :func:`noise_bands`).

    Attributes
    ----------
    name : str
        One of :data:`DISTRIBUTIONS`.
    world, world_low, world_high : float
        Median and 95% range over the splits of the KS statistic between a random half of
        the real users and as many simulated users.
    real, real_low, real_high : float
        The same between the two halves of the real users: the real data's own noise.
    sim, sim_low, sim_high : float
        The same between two disjoint samples of simulated users of the halves' sizes
        (``nan`` when the simulation has too few users).
    n_splits : int
    verdict : str
        ``"within"`` (``world <= real_high``: the world is as close to the real data as the
        real data's halves are to each other, 19 times in 20), ``"outside"`` or
        ``"not measured"``.
    """

    name: str
    world: float
    world_low: float
    world_high: float
    real: float
    real_low: float
    real_high: float
    sim: float
    sim_low: float
    sim_high: float
    n_splits: int
    verdict: str


@dataclass(frozen=True)
class NoiseBandReport:
    """:class:`NoiseBand` of every statistic and the verdict.

    Attributes
    ----------
    bands : tuple of NoiseBand
        In :data:`DISTRIBUTIONS` order.
    faithful : bool
        Every measured statistic is ``"within"`` its real-halves band.
    label : str
    """

    bands: tuple
    faithful: bool
    label: str = ""

    def __getitem__(self, name: str) -> NoiseBand:
        for b in self.bands:
            if b.name == name:
                return b
        raise KeyError(name)

    rule = ("a statistic is faithful when the world's distance to the real data (median KS "
            "between a random half of the real users and as many simulated ones) is within "
            "the 95% band of the KS between the two halves of the real users")

    HEADER = ("statistic", "world KS [95%]", "real halves KS [95%]",
              "two simulations KS [95%]", "verdict")

    def rows(self) -> list[tuple[str, ...]]:
        def f(m, lo, hi):
            return "-" if math.isnan(m) else f"{m:.3f} [{lo:.3f}, {hi:.3f}]"
        return [(b.name, f(b.world, b.world_low, b.world_high),
                 f(b.real, b.real_low, b.real_high), f(b.sim, b.sim_low, b.sim_high),
                 b.verdict) for b in self.bands]

    def to_markdown(self) -> str:
        lines = ["| " + " | ".join(self.HEADER) + " |",
                 "|" + "|".join("---" for _ in self.HEADER) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in self.rows()]
        return "\n".join(lines)

    def to_text(self) -> str:
        rows = [self.HEADER] + self.rows()
        width = [max(len(r[j]) for r in rows) for j in range(len(self.HEADER))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, width, strict=True)).rstrip()
                         for r in rows)


def _user_samples(lg: _Log, users: np.ndarray, n_pairs: int, rng) -> dict:
    """The statistics of :data:`DISTRIBUTIONS` on the sub-log of ``users`` (all items)."""
    m = lg.matrix
    sub = sp.csr_array(m[users])
    out = {"profile_size": _profile_sizes(sub), "item_popularity": _popularity(sub),
           "profile_overlap": _active_overlap(sub, n_pairs, rng)}
    if lg.user is not None:
        sel = np.isin(lg.user, users)
        out["user_activity"] = _active_days(lg.user[sel], lg.tick[sel])
        out["session_gaps"] = _session_gaps(lg.user[sel], lg.tick[sel])
        out["rating"] = None if lg.rating is None else lg.rating[sel]
    else:
        out.update(user_activity=None, session_gaps=None, rating=None)
    return out


def _ks(x, y) -> float:
    import warnings

    from scipy.stats import ks_2samp

    if x is None or y is None or x.size == 0 or y.size == 0:
        return math.nan
    with warnings.catch_warnings():  # only the statistic is read, not its p-value
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(ks_2samp(x, y).statistic)


def noise_bands(real, simulated, *, n_splits: int = 50, n_pairs: int = 2000, label: str = "",
                rng=None) -> NoiseBandReport:
    """Distances of the world to the real data measured against the real data's own noise.

    Parameters
    ----------
    real, simulated : InteractionLog or users x items matrix
        As for :func:`fidelity`.
    n_splits : int, default 50
        Random splits of the real users into two halves.
    n_pairs : int, default 2000
        Pairs of users drawn for the profile overlap of each sample.
    label : str
    rng : None, int, SeedSequence or Generator

    Returns
    -------
    NoiseBandReport

    Notes
    -----
    Split the real active users at random into halves ``A`` and ``B``, draw ``|B|`` of the
    simulated active users ``S`` (and, apart, ``|A|`` others ``S'``). For every statistic
    compute the KS statistic of ``A`` against ``B`` (the real data's noise: two samples of
    one population), of ``A`` against ``S`` (the world's distance, at the same sample
    sizes) and of ``S'`` against ``S`` (the simulation's own noise); repeat ``n_splits``
    times. A world is faithful on a statistic when the median of its distance lies within
    the 95% band of the real halves': a real half is then no closer to the other half than
    to the world. Comparing at equal sample sizes matters: the KS statistic shrinks as
    ``1/sqrt(n)``, and a world compared with the whole real log would be judged against a
    noise level its halves cannot reach.
    """
    n_splits = check_int(n_splits, "n_splits", low=1)
    n_pairs = check_int(n_pairs, "n_pairs", low=1)
    if not isinstance(label, str):
        raise ArgumentTypeError("label", "a str", type(label).__name__)
    gen = as_generator(rng)
    r, s = _as_log(real, "real"), _as_log(simulated, "simulated")
    ru = np.flatnonzero(np.diff(r.matrix.indptr) > 0)
    su = np.flatnonzero(np.diff(s.matrix.indptr) > 0)
    if ru.size < 2 or su.size < 1:
        raise ArgumentValueError("real", "logs with at least 2 real and 1 simulated active "
                                 "users", f"{ru.size} and {su.size}")
    ks = {name: np.full((n_splits, 3), math.nan) for name in DISTRIBUTIONS}
    for b in range(n_splits):
        perm = gen.permutation(ru)
        a, c = perm[: ru.size // 2], perm[ru.size // 2:]
        sp_ = gen.permutation(su)
        s1 = np.sort(sp_[: c.size])
        s2 = np.sort(sp_[c.size: c.size + a.size]) if su.size >= a.size + c.size else None
        xa = _user_samples(r, np.sort(a), n_pairs, gen)
        xc = _user_samples(r, np.sort(c), n_pairs, gen)
        xs = _user_samples(s, s1, n_pairs, gen)
        xs2 = None if s2 is None else _user_samples(s, s2, n_pairs, gen)
        for name in DISTRIBUTIONS:
            ks[name][b] = (_ks(xa[name], xs[name]), _ks(xa[name], xc[name]),
                           math.nan if xs2 is None else _ks(xs2[name], xs[name]))
    bands = []
    for name in DISTRIBUTIONS:
        v = ks[name]
        q = [np.nanpercentile(v[:, j], [50, 2.5, 97.5]) if np.isfinite(v[:, j]).any()
             else np.full(3, math.nan) for j in range(3)]
        measured = not (math.isnan(q[0][0]) or math.isnan(q[1][0]))
        verdict = ("not measured" if not measured else
                   "within" if q[0][0] <= q[1][2] + 1e-12 else "outside")
        bands.append(NoiseBand(name, *map(float, q[0]), *map(float, q[1]), *map(float, q[2]),
                               n_splits=n_splits, verdict=verdict))
    faithful = all(b.verdict != "outside" for b in bands)
    return NoiseBandReport(bands=tuple(bands), faithful=faithful, label=label)


# ---------------------------------------------------------------------------------------------
# fidelity on the future
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class HoldoutFidelity:
    """A world fitted on the first part of a log, run on over the rest, and the comparison.

    Attributes
    ----------
    world : simulator.CalibratedWorld
        The world fitted to the log before ``split`` (its users and items).
    train : InteractionLog
        The fitted part (ticks ``< split``), in the world's user and item indices.
    real, simulated : InteractionLog
        The real and simulated interactions of ticks ``[split, n_ticks)``. Users ``0 ..
        world.n_users - 1`` are the fitted users; higher indices are users who arrived
        after the split (real ones, or the forecast ones of the simulation). Items are the
        fitted world's.
    report : FidelityReport
        ``fidelity(real, simulated)``.
    split, n_ticks : int
        First held-out tick and the log's horizon.
    holdout : float
        The held-out fraction of the time span.
    new_users_real, new_users_simulated : int
        Users first seen after the split (real) and forecast by the world.
    dropped_new_items : int
        Real held-out interactions with items first seen after the split left out of
        ``real`` (with ``new_items=False``; 0 otherwise).
    new_items_real, new_items_simulated : int
        Items first seen after the split (real; items ``world.n_items ..`` of ``real``) and
        forecast by the world (items ``world.n_items ..`` of ``simulated``).
    new_item_interactions_real : int
        Real held-out interactions with items first seen after the split.
    """

    world: object
    train: InteractionLog
    real: InteractionLog
    simulated: InteractionLog
    report: FidelityReport
    split: int
    n_ticks: int
    holdout: float
    new_users_real: int
    new_users_simulated: int
    dropped_new_items: int
    new_items_real: int = 0
    new_items_simulated: int = 0
    new_item_interactions_real: int = 0


def _split_columns(interactions, seconds_per_tick):
    """(users, items, ratings, timestamps, ticks, user_ids, item_ids, source) of a log with
    timestamps; users and items are indices into the id arrays."""
    from simulator._calibrate import _columns, _int_column

    if isinstance(interactions, InteractionLog):  # ticks as timestamps; ids are the indices
        x = interactions
        users, items, ratings, times = x.user, x.item, x.rating, x.tick
        uid, iid = np.arange(x.n_users), np.arange(x.n_items)
        source = str(x.metadata.get("source", ""))
    else:
        users, items, ratings, times, uid, iid, source = _columns(interactions)
    if times is None:
        raise ArgumentValueError("interactions", "a log with timestamps (a hold-out is cut "
                                 "in time)", "a log without timestamps")
    times = _int_column(times, "interactions (timestamps)")
    if times.size != users.size:
        raise ArgumentValueError("interactions (timestamps)", f"{users.size} timestamps, one "
                                 "per interaction", str(times.size))
    if times.size == 0:
        raise ArgumentValueError("interactions", "a log with at least one interaction",
                                 "an empty log")
    ticks = np.floor((times - times.min()) / seconds_per_tick).astype(np.int64)
    r = None if ratings is None else np.asarray(ratings, np.float64).ravel()
    return users, items, r, times, ticks, np.asarray(uid), np.asarray(iid), source


def holdout_split(ticks, holdout: float) -> int:
    """The first held-out tick of a log with interaction ``ticks`` (ints >= 0):
    ``floor((1 - holdout) * n_ticks)``, ``n_ticks = max(ticks) + 1``.

    Raises
    ------
    ValueError
        ``holdout`` outside (0, 0.5], or a part with fewer than two distinct ticks.
    """
    holdout = check_float(holdout, "holdout", low=0.0, high=0.5, low_open=True)
    ticks = np.asarray(ticks, np.int64)
    n_ticks = int(ticks.max()) + 1 if ticks.size else 0
    split = int(math.floor((1.0 - holdout) * n_ticks))
    for part, sel in (("fitted", ticks < split), ("held-out", ticks >= split)):
        days = np.unique(ticks[sel]).size
        if days < 2:
            raise ArgumentValueError("holdout", f"a split leaving at least two distinct active "
                                     f"ticks in each part (log of {n_ticks} ticks, split at "
                                     f"tick {split})", f"{days} in the {part} part")
    return split


def holdout_fidelity(interactions, *, holdout: float = 0.2, seed: int = 0,
                     seconds_per_tick: float = 86400.0, n_pairs: int = 20_000,
                     ks_close: float = 0.1, ks_poor: float = 0.2, new_items: bool = True,
                     rng=None, **calibrate_options) -> HoldoutFidelity:
    """Fit a world on the first ``1 - holdout`` of a log's time span and compare its
    continuation over the rest with the real one.

    Parameters
    ----------
    interactions : tuple, RatingData or InteractionLog
        A log with timestamps (see :func:`simulator.calibrate`); an InteractionLog's ticks
        are its timestamps (give ``seconds_per_tick=1``), e.g. a calibrated world's
        ``observed`` log.
    holdout : float, default 0.2
        Held-out fraction of the time span, in (0, 0.5]: the last ``ceil(holdout * n_ticks)``
        ticks, roughly.
    seed : int, default 0
        Seed of the simulated continuation.
    seconds_per_tick : float, default 86400
    n_pairs, ks_close, ks_poor : see :func:`fidelity`.
    new_items : bool, default True
        Forecast items that arrive after the split, and keep the real ones (as items
        ``world.n_items ..`` of ``real``); False: no forecast, and the real interactions
        with items first seen after the split are left out (``dropped_new_items``).
    rng : None, int, SeedSequence or Generator
        The calibration's start vector and the draws of the comparison.
    **calibrate_options
        Passed to :func:`simulator.calibrate` (``n_factors``, ``ctr``, ``min_rating``, ...).

    Returns
    -------
    HoldoutFidelity

    Raises
    ------
    ValueError
        ``holdout`` outside (0, 0.5]; a log without timestamps; a part with fewer than two
        distinct ticks; anything :func:`simulator.calibrate` refuses.

    Notes
    -----
    With ``n_ticks`` the log's horizon, the split is ``split = floor((1 - holdout) *
    n_ticks)``. The world is fitted (:func:`simulator.calibrate`) on the ticks before it and
    continued from the fitted state: the real profiles at the split are its history
    (``World(..., history=train, start=split)``), every fitted user's observed sessions
    continue by the session law conditioned on them
    (:func:`~simulator._sessions.continue_schedule`), and new users arrive at the fitted rate
    (``Poisson(arrival_rate * (n_ticks - split))`` of them, uniformly over the held-out
    ticks), each a copy of a fitted user drawn at random (taste, activity per session,
    rating offset; a drifting world's copy starts its walk at its arrival) with sessions
    drawn from the law. A user's events per session are its fitted ``E_u`` over the weights
    of its observed sessions. A drifting world's fitted users go on wandering from their
    fitted tastes, pinned at their origins (``fitted.taste_origin``), and its items' appeal
    offsets (``fitted.appeal_offset``) go on from the last bin's, times the fitted
    persistence per bin to the middle of the held-out window. New items (with
    ``new_items`` and fitted item births): the items first seen in the last ``L = n_ticks -
    split`` ticks of the fitted part are the recent cohort; ``Poisson(c)`` items arrive, ``c``
    its size, at ticks drawn uniformly in ``[split, n_ticks)``, each a copy of a cohort item
    drawn at random (appeal, features, rating offset), so the world's new items come at the
    fitted arrival rate with the fitted appeal distribution of new items.
    """
    import dataclasses
    import warnings

    from simulator._calibrate import CalibrationWarning, calibrate
    from simulator._config import FittedArrays
    from simulator._sessions import SessionSchedule, continue_schedule, draw_schedule
    from simulator._world import World

    holdout = check_float(holdout, "holdout", low=0.0, high=0.5, low_open=True)
    seed = check_int(seed, "seed", low=0)
    seconds_per_tick = check_float(seconds_per_tick, "seconds_per_tick", low=0.0,
                                   low_open=True)
    if "n_ticks" in calibrate_options:
        raise ArgumentValueError("n_ticks", "not given (the horizon is the log's span)",
                                 repr(calibrate_options["n_ticks"]))
    if not isinstance(new_items, (bool, np.bool_)):
        raise ArgumentTypeError("new_items", "a bool", type(new_items).__name__)
    root = as_seed_sequence(rng)
    r_fit, r_new, r_cmp, r_items = (np.random.default_rng(s) for s in root.spawn(4))
    uids, iids, ratings, times, ticks, user_ids, item_ids, source = _split_columns(
        interactions, seconds_per_tick)
    n_ticks = int(ticks.max()) + 1
    split = holdout_split(ticks, holdout)
    before = ticks < split
    train_cols = (uids[before], iids[before],
                  None if ratings is None else ratings[before], times[before])
    with warnings.catch_warnings():  # users or items dropped: they are simply not fitted
        warnings.simplefilter("ignore", CalibrationWarning)
        cal = calibrate(train_cols, seconds_per_tick=seconds_per_tick, rng=r_fit,
                        **calibrate_options)
    c = cal.config
    # the fitted part, in the world's indices (ticks of the full log: same origin)
    u_idx = np.searchsorted(cal.user_ids, uids)
    i_idx = np.searchsorted(cal.item_ids, iids)
    known_u = (u_idx < cal.n_users) & (cal.user_ids[np.minimum(u_idx, cal.n_users - 1)] == uids)
    known_i = (i_idx < cal.n_items) & (cal.item_ids[np.minimum(i_idx, cal.n_items - 1)] == iids)
    keep_train = before & known_u & known_i
    if cal.info.min_rating is not None and ratings is not None:
        keep_train &= ratings >= cal.info.min_rating
    train = InteractionLog(user=u_idx[keep_train], item=i_idx[keep_train],
                           tick=ticks[keep_train], source=np.zeros(int(keep_train.sum()),
                                                                   np.int8),
                           n_users=cal.n_users, n_items=cal.n_items,
                           rating=None if ratings is None else ratings[keep_train])
    # the real continuation: fitted users keep their index, new users come after them
    after = ~before
    if cal.info.min_rating is not None and ratings is not None:
        after &= ratings >= cal.info.min_rating
    new_item_rows = int((after & ~known_i).sum())
    dropped_items = 0 if new_items else new_item_rows
    if not new_items:
        after &= known_i
    new_item_ids = np.unique(iids[after & ~known_i])
    new_ids = np.unique(uids[after & ~known_u])
    ru = np.where(known_u, u_idx, cal.n_users + np.searchsorted(new_ids, uids))[after]
    ri = np.where(known_i, i_idx, cal.n_items + np.searchsorted(new_item_ids, iids))[after]
    real = InteractionLog(user=ru, item=ri, tick=ticks[after],
                          source=np.zeros(ru.size, np.int8),
                          n_users=cal.n_users + new_ids.size,
                          n_items=cal.n_items + new_item_ids.size,
                          rating=None if ratings is None or c.fitted.ratings is None
                          else ratings[after])
    # the continued world
    law = c.sessions
    fa = c.fitted
    n_old = cal.n_users
    if law is not None:
        sched_old = continue_schedule(law, train.user, train.tick, n_old, split, n_ticks, r_new)
        w_obs = np.bincount(sched_old.user[sched_old.tick < split],
                            sched_old.weight[sched_old.tick < split], minlength=n_old)
        nu = fa.activity / np.where(w_obs > 0, w_obs, 1.0)  # events per unit session weight
        n_new = int(r_new.poisson(law.arrival_rate * (n_ticks - split)))
    else:  # no sessions: the fitted activity rate goes on, and no user is forecast
        sched_old = None
        nu = fa.activity / split
        n_new = 0
    src = r_new.integers(0, n_old, n_new)
    n_all = n_old + n_new
    taste = np.concatenate([fa.taste, fa.taste[src]])
    if sched_old is not None:
        arrival = r_new.integers(split, n_ticks, n_new)
        sched_new = draw_schedule(law, arrival, n_ticks, r_new)
        sched = SessionSchedule(user=np.concatenate([sched_old.user, n_old + sched_new.user]),
                                tick=np.concatenate([sched_old.tick, sched_new.tick]),
                                weight=np.concatenate([sched_old.weight, sched_new.weight]),
                                n_users=n_all, n_ticks=n_ticks)
        nu_all = np.concatenate([nu, nu[src]])
        if fa.taste_origin is not None and c.drift_rate > 0:
            # a drifting session adopts as a static one would (the activities were fitted
            # for it): its events scaled by the adoption-rate ratio at its tick
            from simulator._drift import adoption_rate_ratio

            probe = dataclasses.replace(c, n_users=n_all, n_ticks=n_ticks, fitted=FittedArrays(
                appeal=fa.appeal, features=fa.features, taste=taste,
                activity=np.ones(n_all), taste_origin=np.concatenate([fa.taste_origin,
                                                                      arrival])),
                sessions=None, item_birth=c.item_birth)
            ratio = adoption_rate_ratio(probe, sched.user, sched.tick, probe.fitted.taste_origin)
            sched = SessionSchedule(user=sched.user, tick=sched.tick,
                                    weight=sched.weight * ratio, n_users=n_all,
                                    n_ticks=n_ticks)
        activity = nu_all * np.bincount(sched.user, sched.weight, minlength=n_all)
    else:
        sched = None
        activity = nu * n_ticks
    users_src = np.concatenate([np.arange(n_old), src])
    # new items: copies of the recent cohort's items, arriving in the held-out window
    items_src = np.arange(cal.n_items)
    birth = None if c.item_birth is None else c.birth_array()
    if new_items and birth is not None:
        cohort = np.flatnonzero(birth >= split - (n_ticks - split))
        n_new_items = int(r_items.poisson(cohort.size)) if cohort.size else 0
        items_src = np.concatenate([items_src, r_items.choice(cohort, n_new_items)
                                    if n_new_items else np.zeros(0, np.int64)])
        birth = np.concatenate([birth, r_items.integers(split, n_ticks, n_new_items)])
    n_items_all = items_src.size
    origin = None
    if fa.taste_origin is not None:
        origin = np.concatenate([fa.taste_origin, np.zeros(n_new, np.int64) if sched_old is
                                 None else arrival])
    ratings_model = None if fa.ratings is None else \
        fa.ratings.subset(users=users_src, items=items_src)
    offset = edges = None
    if fa.appeal_offset is not None:  # the life cycles go on: the last bin's offsets fade
        width = split / fa.appeal_edges.size
        ahead = ((split - fa.appeal_edges[-1]) + (n_ticks - split)) / 2.0 / width
        rho = (cal.info.appeal_persistence or 0.0) ** ahead
        future = rho * fa.appeal_offset[-1]
        offset = np.vstack([fa.appeal_offset, future[None, :]])[:, items_src]
        edges = np.append(fa.appeal_edges, split)
    fitted = FittedArrays(appeal=fa.appeal[items_src], features=fa.features[items_src],
                          taste=taste, activity=activity, ratings=ratings_model,
                          taste_origin=origin, appeal_offset=offset, appeal_edges=edges)
    cont = dataclasses.replace(c, n_users=n_all, n_items=n_items_all, n_ticks=n_ticks,
                               fitted=fitted, sessions=sched,
                               item_birth=None if birth is None else tuple(birth.tolist()),
                               activity_halflife=None if sched is not None
                               else c.activity_halflife)
    history = InteractionLog(user=train.user, item=train.item, tick=train.tick,
                             source=train.source, n_users=n_all, n_items=n_items_all,
                             rating=train.rating if fa.ratings is not None else None)
    world = World(cont, seed, history=history, start=split)
    world.simulate(n_ticks - 1)
    e = world.edges
    tail = e.tick >= split
    simulated = InteractionLog(user=e.user[tail], item=e.item[tail], tick=e.tick[tail],
                               source=e.source[tail], n_users=n_all, n_items=n_items_all,
                               rating=None if e.rating is None else e.rating[tail])
    if simulated.user.size == 0:
        raise ArgumentValueError("holdout", "a held-out window in which the fitted world "
                                 "adopts something", "no simulated interaction after the "
                                 f"split at tick {split}")
    label = (f"out of sample: fitted on ticks 0-{split - 1}, the world run on over ticks "
             f"{split}-{n_ticks - 1} ({holdout:g} of the span) from the real profiles at "
             "the split, compared with the real interactions of those ticks")
    report = fidelity(real, simulated, n_pairs=n_pairs, ks_close=ks_close, ks_poor=ks_poor,
                      label=label, rng=r_cmp)
    # the world's ids: the log's own (the fit saw their indices)
    cal = dataclasses.replace(cal, user_ids=user_ids[cal.user_ids],
                              item_ids=item_ids[cal.item_ids],
                              dropped_users=user_ids[cal.dropped_users],
                              dropped_items=item_ids[cal.dropped_items], source=str(source))
    return HoldoutFidelity(world=cal, train=train, real=real, simulated=simulated,
                           report=report, split=split, n_ticks=n_ticks, holdout=holdout,
                           new_users_real=int(new_ids.size), new_users_simulated=n_new,
                           dropped_new_items=dropped_items,
                           new_items_real=int(new_item_ids.size),
                           new_items_simulated=n_items_all - cal.n_items,
                           new_item_interactions_real=new_item_rows)
