"""How closely a simulated log reproduces a real one: distribution distances (issue 15).

:func:`fidelity` compares four distributions of a real and a simulated interaction log with
the two-sample Kolmogorov-Smirnov statistic and the Wasserstein-1 distance (SciPy's). The
recommender-ranking check, which needs ``agents`` and ``evaluators``, lives in the harness
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
    check_float,
    check_int,
)
from simulator.logs import InteractionLog

__all__ = ["DISTRIBUTIONS", "Distance", "FidelityReport", "fidelity"]

#: The compared distributions, in report order.
DISTRIBUTIONS = ("item_popularity", "user_activity", "profile_size", "profile_overlap")

_WHAT = {
    "item_popularity": "users holding each item",
    "user_activity": "distinct ticks with an interaction, per user",
    "profile_size": "items held, per user",
    "profile_overlap": "Jaccard index of the profiles of user pairs",
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


@dataclass(frozen=True)
class FidelityReport:
    """Distances of the four distributions and the verdict.

    Attributes
    ----------
    distances : tuple of Distance
        In :data:`DISTRIBUTIONS` order.
    ks_close, ks_poor : float
        The thresholds of the verdicts.
    faithful : bool
        No distribution is ``"poor"``: every KS statistic is <= ``ks_poor``.
    """

    distances: tuple
    ks_close: float
    ks_poor: float
    faithful: bool

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

    def rows(self) -> list[tuple[str, ...]]:
        """Table rows: statistic, real mean, simulated mean, KS, Wasserstein (relative),
        verdict."""
        out = []
        for d in self.distances:
            if d.verdict == "not measured":
                out.append((d.name, "-", "-", "-", "-", d.verdict))
                continue
            out.append((d.name, f"{d.real_mean:.4g}", f"{d.simulated_mean:.4g}", f"{d.ks:.3f}",
                        f"{d.wasserstein:.4g} ({100 * d.relative_wasserstein:.1f}%)",
                        d.verdict))
        return out

    HEADER = ("distribution", "real mean", "simulated mean", "KS", "Wasserstein (rel.)",
              "verdict")

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


def _as_log(x, name: str):
    """(binary CSR users x items, per-edge (user, tick) or None)."""
    if isinstance(x, InteractionLog):
        u, i, t = x.user, x.item, x.tick
        m = sp.csr_array((np.ones(u.size), (u, i)), shape=(x.n_users, x.n_items))
        m.sum_duplicates()
        m.data[:] = 1.0
        return m, (u, t)
    if sp.issparse(x) or isinstance(x, np.ndarray):
        if x.ndim != 2:
            raise ArgumentValueError(name, "a 2-D users x items matrix", f"shape {x.shape}")
        m = sp.csr_array(x, dtype=np.float64)
        m.sum_duplicates()
        m.eliminate_zeros()
        m.data[:] = 1.0
        return m, None
    raise ArgumentTypeError(name, "an InteractionLog or a users x items matrix",
                            type(x).__name__)


def _active_ticks(pairs, n_users: int) -> np.ndarray | None:
    if pairs is None:
        return None
    u, t = pairs
    if u.size == 0 or np.all(t == t[0]):
        return None  # no timestamps (every tick equal): activity is not measurable
    key = np.unique(u.astype(np.int64) * (int(t.max()) + 1) + t)
    users = key // (int(t.max()) + 1)
    return np.bincount(users, minlength=n_users).astype(np.float64)


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
    size = np.diff(m.indptr).astype(np.float64)
    inter = np.empty(a.size)
    chunk = 1 << 14
    for lo in range(0, a.size, chunk):
        ra, rb = m[a[lo:lo + chunk]], m[b[lo:lo + chunk]]
        inter[lo:lo + chunk] = np.asarray(ra.multiply(rb).sum(axis=1)).ravel()
    union = size[a] + size[b] - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


def fidelity(real, simulated, *, n_pairs: int = 20_000, ks_close: float = 0.1,
             ks_poor: float = 0.2, rng=None) -> FidelityReport:
    """Distances between the real and simulated distributions of four log statistics.

    Parameters
    ----------
    real, simulated : InteractionLog or sparse matrix / ndarray (n_users, n_items)
        The logs (stored non-zeros of a matrix are interactions). They may have different
        sizes. User activity needs ticks (InteractionLogs whose ticks are not all equal).
    n_pairs : int, default 20000
        User pairs drawn for the profile overlap (all pairs when there are fewer).
    ks_close, ks_poor : float
        Verdict thresholds on the KS statistic, ``0 < ks_close <= ks_poor <= 1``.
    rng : None, int, SeedSequence or Generator
        Draws the user pairs.

    Returns
    -------
    FidelityReport
        One :class:`Distance` per statistic of :data:`DISTRIBUTIONS`: item popularity (users
        per item), user activity (distinct active ticks per user), profile size (items per
        user), profile overlap (Jaccard index ``|I_u & I_v| / |I_u | I_v|`` of user pairs).

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
    gen = as_generator(rng)
    m_real, t_real = _as_log(real, "real")
    m_sim, t_sim = _as_log(simulated, "simulated")
    for name, m in (("real", m_real), ("simulated", m_sim)):
        if m.nnz == 0:
            raise ArgumentValueError(name, "a log with at least one interaction",
                                     "an empty log")
    from scipy.stats import ks_2samp, wasserstein_distance

    samples = {
        "item_popularity": (np.bincount(m_real.indices, minlength=m_real.shape[1]),
                            np.bincount(m_sim.indices, minlength=m_sim.shape[1])),
        "user_activity": (_active_ticks(t_real, m_real.shape[0]),
                          _active_ticks(t_sim, m_sim.shape[0])),
        "profile_size": (np.diff(m_real.indptr), np.diff(m_sim.indptr)),
    }
    pa, pb = _pairs(m_real.shape[0], n_pairs, gen)
    if m_sim.shape[0] == m_real.shape[0]:
        qa, qb = pa, pb  # the same users: paired pairs, less noise
    else:
        qa, qb = _pairs(m_sim.shape[0], n_pairs, gen)
    samples["profile_overlap"] = (_overlap(m_real, pa, pb), _overlap(m_sim, qa, qb))
    out = []
    for name in DISTRIBUTIONS:
        x, y = samples[name]
        if x is None or y is None or x.size == 0 or y.size == 0:
            out.append(Distance(name, math.nan, math.nan, math.nan, math.nan, math.nan,
                                math.nan, 0, 0, "not measured"))
            continue
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        ks = ks_2samp(x, y)
        w = float(wasserstein_distance(x, y))
        mean = float(x.mean())
        verdict = ("close" if ks.statistic <= ks_close else
                   "fair" if ks.statistic <= ks_poor else "poor")
        out.append(Distance(name, float(ks.statistic), float(ks.pvalue), w,
                            w / mean if mean > 0 else math.nan, mean, float(y.mean()),
                            int(x.size), int(y.size), verdict))
    faithful = all(d.verdict != "poor" for d in out)
    return FidelityReport(distances=tuple(out), ks_close=ks_close, ks_poor=ks_poor,
                          faithful=faithful)
