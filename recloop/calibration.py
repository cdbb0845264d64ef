"""Calibrated worlds in the harness: the full fidelity report and ``recloop calibrate``.

:func:`simulator.calibrate` fits a world to a log and :func:`simulator.fidelity` compares the
distributions of a real and a simulated log; both live in ``simulator``, which may not import
``agents`` or ``evaluators``. This module adds what needs them:

* :func:`ranking_check` -- do seven recommenders (popularity, user and item kNN with cosine
  and Jaccard similarities, naive co-occurrence CF, a random baseline) rank in the same order
  by hit rate at 10 on held-out interactions of the real log and of the simulated one?
  Kendall's tau with a paired bootstrap interval over users (after Stavinova et al. 2022,
  "Performance ranking of recommender systems on simulated data");
* :func:`fidelity_report` -- both checks on a :class:`simulator.CalibratedWorld`, in sample
  (labelled so: the world was fitted to those data) and on the future (a world fitted on the
  first 80% of the log's time span, run on over the last 20%: :func:`simulator.holdout_fidelity`),
  with a verdict, printable as text and Markdown (:class:`CalibrationReport`);
* :func:`read_rating_file`, :func:`fit_world` and :func:`calibrate_command` -- the logic of
  ``recloop calibrate PATH [--format ...] [--holdout F] [--out world.npz]``, shared with the
  scenario key ``[world] calibrate_from`` (same file and seed: the same world).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from recloop_base.validation import (
    ArgumentTypeError,
    ArgumentValueError,
    as_seed_sequence,
    check_choice,
    check_float,
    check_int,
)

__all__ = ["FORMATS", "MAX_DATA_BYTES", "RANKING_RECOMMENDERS", "CalibrationReport",
           "RankingCheck", "calibrate_command", "fidelity_of_fit", "fidelity_report", "fit_world",
           "load_interactions", "ranking_check", "read_rating_file"]

#: Formats of :func:`load_interactions`.
FORMATS = ("movielens", "jester", "csv")
#: The recommenders of the ranking check, in report order.
RANKING_RECOMMENDERS = ("popularity", "random", "user_knn_cosine", "user_knn_jaccard",
                        "item_knn_cosine", "item_knn_jaccard", "naive_cf",
                        "recency_popularity", "mf")
#: The recommenders whose mean hit rate minus popularity's is the kNN-over-popularity gap.
KNN_RECOMMENDERS = ("user_knn_cosine", "user_knn_jaccard", "item_knn_cosine",
                    "item_knn_jaccard")
#: Half-life (ticks) of ``recency_popularity``'s weights: a month of days, fixed beforehand.
RECENCY_HALFLIFE = 30.0
#: Rank of the ranking check's matrix factorisation.
MF_FACTORS = 16
#: Largest rating file read without ``--force`` (MovieLens-1M's is 24 MB; a calibration
#: holds users x items dense blocks, so a log much larger than this could not be fitted).
MAX_DATA_BYTES = 256 * 2**20
#: Default held-out fraction of ``recloop calibrate`` (logs with timestamps).
DEFAULT_HOLDOUT = 0.2
_Z = 1.959963984540054
_N_NEIGHBOURS = 20
_CHUNK = 1 << 24


# ---------------------------------------------------------------------------------------------
# the recommenders of the ranking check
# ---------------------------------------------------------------------------------------------
def _similarity(overlap: np.ndarray, size_a: np.ndarray, size_b: np.ndarray, kind: str):
    """Cosine ``|A&B| / sqrt(|A||B|)`` or Jaccard ``|A&B| / |A|B|`` of binary profiles."""
    if kind == "cosine":
        denom = np.sqrt(size_a[:, None] * size_b[None, :])
    else:
        denom = size_a[:, None] + size_b[None, :] - overlap
    return np.divide(overlap, denom, out=np.zeros_like(overlap), where=denom > 0)


def _keep_top(sim: np.ndarray, k: int) -> np.ndarray:
    """``sim`` with all but each row's ``k`` largest entries zeroed (ties: lower column)."""
    if sim.shape[1] <= k:
        return sim
    order = np.argsort(-sim, axis=1, kind="stable")[:, :k]
    out = np.zeros_like(sim)
    rows = np.arange(sim.shape[0])[:, None]
    out[rows, order] = sim[rows, order]
    return out


class _Scorer:
    """Scores of every item for a batch of users, from a binary training matrix (and the
    ticks of its entries, for the recency-weighted popularity)."""

    def __init__(self, name: str, train: sp.csr_array, rng, times=None):
        self.name, self.b = name, train
        self.sizes = np.diff(train.indptr).astype(np.float64)
        self.rng = rng
        if name == "recency_popularity":
            import agents

            self.model = agents.RecencyPopularity(RECENCY_HALFLIFE).fit(train, times=times)
        elif name == "mf":
            import agents

            self.model = agents.ImplicitMF(MF_FACTORS, rng=rng).fit(train)
        elif name == "popularity":
            self.counts = np.bincount(train.indices, minlength=train.shape[1]).astype(float)
        elif name.startswith("item_knn"):
            co = (train.T @ train).toarray()
            counts = np.diag(co).copy()
            sim = _similarity(co, counts, counts, name.rsplit("_", 1)[1])
            np.fill_diagonal(sim, 0.0)
            self.item_sim_t = np.ascontiguousarray(_keep_top(sim, _N_NEIGHBOURS).T)
        elif name == "naive_cf":
            co = (train.T @ train).toarray()
            counts = np.diag(co).copy()
            self.ratio_t = np.ascontiguousarray(
                (co / np.where(counts > 0, counts, 1.0)[None, :]).T)  # row j: C_ij / C_jj
        elif name.startswith("user_knn"):
            self.bt = sp.csr_array(train.T)

    def scores(self, users: np.ndarray) -> np.ndarray:
        b, n_items = self.b, self.b.shape[1]
        rows = b[users]
        if self.name == "popularity":
            return np.tile(self.counts, (users.size, 1))
        if self.name == "random":
            return self.rng.random((users.size, n_items))
        if self.name in ("recency_popularity", "mf"):
            return self.model.scores(users)
        if self.name.startswith("item_knn"):
            return np.asarray(rows @ self.item_sim_t)
        if self.name == "naive_cf":
            out = np.zeros((users.size, n_items))
            for j in range(users.size):
                held = rows.indices[rows.indptr[j]:rows.indptr[j + 1]]
                if held.size:
                    out[j] = self.ratio_t[held].max(axis=0)
            return out
        overlap = np.asarray((rows @ self.bt).toarray())
        sim = _similarity(overlap, self.sizes[users], self.sizes, self.name.rsplit("_", 1)[1])
        sim[np.arange(users.size), users] = 0.0  # never one's own neighbour
        return (sp.csr_array(_keep_top(sim, _N_NEIGHBOURS)) @ b).toarray()


def _top_k(scores: np.ndarray, held: sp.csr_array, k: int) -> np.ndarray:
    """Top ``k`` items per row by score (ties: lower item id), items of ``held`` excluded.

    Scores are rounded to 10 decimals relative to the row's largest, so that equal scores
    summed in different orders tie (as ``agents``' recommenders do)."""
    top = np.abs(scores).max(axis=1, initial=0.0, keepdims=True)
    scores = np.round(scores / np.where(top > 0, top, 1.0), 10)
    r = np.repeat(np.arange(held.shape[0]), np.diff(held.indptr))
    scores[r, held.indices] = -np.inf
    return np.argsort(-scores, axis=1, kind="stable")[:, :k]


def _hits(train: sp.csr_array, test: sp.csr_array, users: np.ndarray, k: int, name: str,
          rng, times=None) -> np.ndarray:
    """Held-out items of each user found in its top ``k``: (n_users,) counts."""
    scorer = _Scorer(name, train, rng, times)
    out = np.zeros(users.size)
    step = max(1, (1 << 21) // max(1, train.shape[1]))
    for lo in range(0, users.size, step):
        u = users[lo:lo + step]
        top = _top_k(scorer.scores(u), train[u], k)
        t = test[u]
        r = np.repeat(np.arange(u.size), np.diff(t.indptr))
        hit = (top[r] == t.indices[:, None]).any(axis=1)
        out[lo:lo + step] = np.bincount(r, hit, minlength=u.size)
    return out


# ---------------------------------------------------------------------------------------------
# the ranking check
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RankingCheck:
    """Hit rates of the recommenders on held-out interactions of the real and simulated logs.

    Attributes
    ----------
    recommenders : tuple of str
    real, simulated : tuple of evaluators.Estimate
        Hit rate at ``k`` of each recommender: held-out items found in the user's top ``k``
        over all held-out items of the sampled users (stderr by the delta method over users,
        95% normal interval; ``n`` = held-out items).
    tau : float
        Kendall's tau-b between the two vectors of hit rates (``nan`` if either is constant).
    tau_ci_low, tau_ci_high : float
        95% percentile interval of tau over a paired bootstrap of the users (one resample of
        users gives both vectors).
    k : int
        List length.
    n_users : int
        Users the rates sum over (the same users in both logs).
    n_bootstrap : int
    protocol : str
        How the held-out interactions were chosen.
    faithful : bool
        The world ranks the recommenders within what the real data's own noise allows:
        ``tau >= halves_tau_ci_low`` (the 2.5th percentile of the tau between two random
        halves of the real users) and ``tau_ci_low > 0``. :attr:`meets_median` is the
        stronger target ``tau >= halves_tau``.
    halves_tau, halves_tau_ci_low, halves_tau_ci_high : float
        Median and 95% range of Kendall's tau between the real hit rates of two random
        halves of the users (``n_halves`` splits): what the real data's own noise allows.
    n_halves : int
    gap_real, gap_real_ci_low, gap_real_ci_high : float
        The kNN-over-popularity gap of the real log: the mean hit rate of the four kNN
        recommenders minus popularity's, with its 95% paired-bootstrap interval.
    gap_simulated, gap_simulated_ci_low, gap_simulated_ci_high : float
        The same on the simulated log.
    """

    recommenders: tuple
    real: tuple
    simulated: tuple
    tau: float
    tau_ci_low: float
    tau_ci_high: float
    k: int
    n_users: int
    n_bootstrap: int
    protocol: str
    faithful: bool
    halves_tau: float = math.nan
    halves_tau_ci_low: float = math.nan
    halves_tau_ci_high: float = math.nan
    n_halves: int = 0
    gap_real: float = math.nan
    gap_real_ci_low: float = math.nan
    gap_real_ci_high: float = math.nan
    gap_simulated: float = math.nan
    gap_simulated_ci_low: float = math.nan
    gap_simulated_ci_high: float = math.nan

    rule = ("the ranking is faithful when Kendall's tau between the world's and the real hit "
            "rates lies within the band of the tau between two random halves of the real users "
            "(at least its 2.5th percentile: the real data's agreement with itself) and its "
            "95% bootstrap interval lies above 0")

    @property
    def meets_median(self) -> bool:
        """The stronger target: tau at least the real halves' median, interval above 0."""
        return bool(self.tau >= self.halves_tau - 1e-12 and self.tau_ci_low > 0)

    @property
    def gap_reproduced(self) -> bool:
        """The simulated kNN-over-popularity gap lies in the real gap's 95% interval."""
        return bool(self.gap_real_ci_low <= self.gap_simulated <= self.gap_real_ci_high)

    def rows(self) -> list[tuple[str, str, str]]:
        def fmt(e):
            return f"{e.value:.4f} [{e.ci_low:.4f}, {e.ci_high:.4f}]"
        rank_r = _ranks([e.value for e in self.real])
        rank_s = _ranks([e.value for e in self.simulated])
        return [(name, f"{fmt(r)} #{a}", f"{fmt(s)} #{b}")
                for name, r, s, a, b in zip(self.recommenders, self.real, self.simulated,
                                            rank_r, rank_s, strict=True)]

    def summary(self) -> str:
        return (f"Kendall tau {self.tau:.3f}, 95% paired bootstrap interval "
                f"[{self.tau_ci_low:.3f}, {self.tau_ci_high:.3f}] ({self.n_bootstrap} "
                f"resamples of {self.n_users} users; hit@{self.k}; {self.protocol}); two "
                f"random halves of the real users: tau {self.halves_tau:.3f}, 95% "
                f"[{self.halves_tau_ci_low:.3f}, {self.halves_tau_ci_high:.3f}] "
                f"({self.n_halves} splits); the world's tau is "
                + ("at least" if self.meets_median else "below")
                + " the halves' median" + ("" if self.tau_ci_low > 0 else
                                           " and its interval reaches 0"))

    def gap_summary(self) -> str:
        """The kNN-over-popularity gap, real and simulated, with intervals."""
        return (f"kNN over popularity (mean hit rate of the four kNN minus popularity's): "
                f"real {self.gap_real:+.4f} [{self.gap_real_ci_low:+.4f}, "
                f"{self.gap_real_ci_high:+.4f}], simulated {self.gap_simulated:+.4f} "
                f"[{self.gap_simulated_ci_low:+.4f}, {self.gap_simulated_ci_high:+.4f}]: "
                + ("reproduced (the simulated gap lies in the real one's interval)"
                   if self.gap_reproduced else "not reproduced"))


def _ranks(values) -> list[int]:
    order = sorted(range(len(values)), key=lambda j: -values[j])
    out = [0] * len(values)
    for r, j in enumerate(order, start=1):
        out[j] = r
    return out


def _as_binary(x, name: str, shape=None) -> sp.csr_array:
    import simulator

    if isinstance(x, simulator.InteractionLog):
        m = sp.csr_array((np.ones(x.user.size), (x.user, x.item)), shape=(x.n_users, x.n_items))
    elif sp.issparse(x) or isinstance(x, np.ndarray):
        if x.ndim != 2:
            raise ArgumentValueError(name, "a 2-D users x items matrix", f"shape {x.shape}")
        m = sp.csr_array(x, dtype=np.float64)
    else:
        raise ArgumentTypeError(name, "an InteractionLog or a users x items matrix",
                                type(x).__name__)
    m.sum_duplicates()
    m.eliminate_zeros()
    m.data[:] = 1.0
    if shape is not None:  # the users and items of `train` only (later ones have no
        # training profile; items first seen later cannot be recommended: left out)
        if m.shape[1] < shape[1]:
            raise ArgumentValueError(name, f"at least the {shape[1]} items of `train`",
                                     str(m.shape[1]))
        if m.shape[0] < shape[0]:
            raise ArgumentValueError(name, f"at least the {shape[0]} users of `train`",
                                     str(m.shape[0]))
        m = sp.csr_array(m[:shape[0], :shape[1]])
    m.sort_indices()
    return m


def _times(x, m: sp.csr_array):
    """The ticks (plus 1: a tick 0 stays stored) of ``m``'s entries from the log ``x``, with
    ``m``'s sparsity; None when ``x`` has no ticks (a matrix)."""
    import simulator

    if not isinstance(x, simulator.InteractionLog):
        return None
    keep = (x.user < m.shape[0]) & (x.item < m.shape[1])
    t = sp.csr_array((x.tick[keep] + 1.0, (x.user[keep], x.item[keep])), shape=m.shape)
    t.sum_duplicates()
    t.sort_indices()
    rows = np.repeat(np.arange(m.shape[0]), np.diff(m.indptr))
    keys, tk = rows * m.shape[1] + m.indices, np.repeat(np.arange(t.shape[0]),
                                                         np.diff(t.indptr)) * m.shape[1] + t.indices
    at = np.minimum(np.searchsorted(tk, keys), max(tk.size - 1, 0))
    data = np.where(tk[at] == keys, t.data[at], 1.0) if tk.size else np.ones(keys.size)
    return sp.csr_array((data, m.indices.copy(), m.indptr.copy()), shape=m.shape)


def _split_mask(m: sp.csr_array, fraction: float, rng) -> np.ndarray:
    """Which of ``m``'s entries are held out: ``max(1, round(fraction * size))`` random items
    of every profile of two or more items."""
    sizes = np.diff(m.indptr)
    n_test = np.where(sizes >= 2, np.maximum(1, np.rint(fraction * sizes)), 0).astype(int)
    keys = rng.random(m.nnz)
    rows = np.repeat(np.arange(m.shape[0]), sizes)
    order = np.lexsort((keys, rows))  # a random order within each row
    rank = np.empty(m.nnz, np.int64)
    rank[order] = np.arange(m.nnz) - np.repeat(m.indptr[:-1], sizes)
    return rank < n_test[rows]


def _select(m: sp.csr_array, sel: np.ndarray, data=None) -> sp.csr_array:
    """The entries ``sel`` of ``m`` (ones, or ``data[sel]``)."""
    rows = np.repeat(np.arange(m.shape[0]), np.diff(m.indptr))
    v = np.ones(int(sel.sum())) if data is None else data[sel]
    out = sp.csr_array((v, (rows[sel], m.indices[sel])), shape=m.shape)
    out.sort_indices()
    return out


def _split(m: sp.csr_array, fraction: float, rng) -> tuple[sp.csr_array, sp.csr_array]:
    """(train, test): ``max(1, round(fraction * size))`` random items of every profile of two
    or more items held out."""
    test = _split_mask(m, fraction, rng)
    return _select(m, ~test), _select(m, test)


def _tau(x, y) -> float:
    from scipy.stats import kendalltau

    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if np.all(x == x[0]) or np.all(y == y[0]):
        return math.nan
    return float(kendalltau(x, y).statistic)


def _rate(hits: np.ndarray, counts: np.ndarray):
    """Hit rate ``sum hits / sum counts`` with its delta-method standard error over users."""
    from evaluators import Estimate

    total = counts.sum()
    p = float(hits.sum() / total) if total > 0 else math.nan
    n = hits.size
    if total > 0 and n > 1:
        resid = hits - p * counts
        se = float(math.sqrt((resid @ resid) * n / (n - 1)) / total)
    else:
        se = math.nan
    return Estimate(p, se, p - _Z * se, p + _Z * se, int(total))


def ranking_check(real, simulated, *, train=None, k: int = 10, max_users: int = 300,
                  test_fraction: float = 0.2, n_bootstrap: int = 500, n_halves: int = 500,
                  rng=None) -> RankingCheck:
    """Rank the recommenders of :data:`RANKING_RECOMMENDERS` by hit rate on both logs.

    Parameters
    ----------
    real, simulated : InteractionLog or users x items matrix
        Without ``train``: the whole logs (same users and items); each is split, a random
        ``test_fraction`` of every profile held out. With ``train``: the held-out
        interactions of each log (users beyond ``train``'s are ignored: they have no training
        profile).
    train : InteractionLog or users x items matrix, optional
        The shared training profiles (the fitted part of a log, before a split in time).
    k : int, default 10
        List length of the hit rate.
    max_users : int, default 300
        Users sampled (the same in both logs; all when fewer). Eligible: users with a
        training profile and held-out items in either log.
    test_fraction : float, default 0.2
        Without ``train``: share of each profile held out.
    n_bootstrap : int, default 500
        Paired bootstrap resamples of the users for the interval of tau.
    n_halves : int, default 500
        Random splits of the users into two halves whose real hit rates are ranked against
        each other: the real data's own agreement (the reference of the verdict).
    rng : None, int, SeedSequence or Generator

    Returns
    -------
    RankingCheck

    Raises
    ------
    TypeError, ValueError
        Logs of other types or shapes, fewer than 2 eligible users, options out of range.

    Notes
    -----
    Each recommender is fitted on the training profiles and recommends, to each sampled
    user, the ``k`` best items it does not hold (ties to the lower item id); its hit rate is
    ``sum_u |top_k(u) & T_u| / sum_u |T_u|`` over the held-out sets ``T_u``. Popularity
    counts holders; user kNN sums the profiles of the 20 most similar users weighted by
    their similarity; item kNN scores ``i`` by the similarities of the user's items among
    ``i``'s 20 nearest items; naive CF by ``max_{j in I_u} #(U_i & U_j) / #U_j``
    (de Myttenaere et al. 2014); random by uniform draws. The same users in both logs make
    the comparison paired: one bootstrap resample of users gives both rate vectors and one
    tau. Stavinova et al. (2022) argue that a simulator is useful for evaluation only if it
    preserves such rankings.
    """
    k = check_int(k, "k", low=1)
    max_users = check_int(max_users, "max_users", low=2)
    test_fraction = check_float(test_fraction, "test_fraction", low=0.0, high=1.0,
                                low_open=True, high_open=True)
    n_bootstrap = check_int(n_bootstrap, "n_bootstrap", low=1)
    n_halves = check_int(n_halves, "n_halves", low=1)
    root = as_seed_sequence(rng)
    pick, boot, split_ss, rand_ss, halves_ss = root.spawn(5)
    pick, boot = np.random.default_rng(pick), np.random.default_rng(boot)
    halves_rng = np.random.default_rng(halves_ss)
    # the same streams for both logs: identical logs are split and scored identically
    split_r, split_s = np.random.default_rng(split_ss), np.random.default_rng(split_ss)
    rand_r, rand_s = np.random.default_rng(rand_ss), np.random.default_rng(rand_ss)
    if train is None:
        m_real, m_sim = _as_binary(real, "real"), _as_binary(simulated, "simulated")
        if m_real.shape != m_sim.shape:
            raise ArgumentValueError("simulated", f"the real log's shape {m_real.shape} (same "
                                     "users and items)", str(m_sim.shape))
        mask_r = _split_mask(m_real, test_fraction, split_r)
        mask_s = _split_mask(m_sim, test_fraction, split_s)
        tr_real, te_real = _select(m_real, ~mask_r), _select(m_real, mask_r)
        tr_sim, te_sim = _select(m_sim, ~mask_s), _select(m_sim, mask_s)
        t_real, t_sim = _times(real, m_real), _times(simulated, m_sim)
        t_real = None if t_real is None else _select(t_real, ~mask_r, t_real.data)
        t_sim = None if t_sim is None else _select(t_sim, ~mask_s, t_sim.data)
        eligible = (np.diff(te_real.indptr) > 0) & (np.diff(te_sim.indptr) > 0)
        protocol = (f"a random {test_fraction:g} of every profile held out, the recommenders "
                    "fitted on the rest of the same log")
    else:
        tr = _as_binary(train, "train")
        tr_real = tr_sim = tr
        t_real = t_sim = _times(train, tr)
        te_real = _as_binary(real, "real", shape=tr.shape)
        te_sim = _as_binary(simulated, "simulated", shape=tr.shape)
        eligible = (np.diff(tr.indptr) > 0) & ((np.diff(te_real.indptr) > 0)
                                               | (np.diff(te_sim.indptr) > 0))
        protocol = ("the held-out interactions of users with a training profile, the "
                    "recommenders fitted on the training profiles")
    if k > tr_real.shape[1]:
        raise ArgumentValueError("k", f"an int in [1, {tr_real.shape[1]}] (n_items)", str(k))
    eligible = np.flatnonzero(eligible)
    if eligible.size < 2:
        raise ArgumentValueError("real", "logs with at least 2 users holding held-out items "
                                 "and training profiles", f"{eligible.size}")
    users = eligible if eligible.size <= max_users else \
        np.sort(pick.choice(eligible, max_users, replace=False))
    n_real, n_sim = np.diff(te_real.indptr)[users], np.diff(te_sim.indptr)[users]
    hr = np.array([_hits(tr_real, te_real, users, k, name, rand_r, t_real)
                   for name in RANKING_RECOMMENDERS])
    hs = np.array([_hits(tr_sim, te_sim, users, k, name, rand_s, t_sim)
                   for name in RANKING_RECOMMENDERS])

    def rates(idx):
        return (hr[:, idx].sum(axis=-1) / np.maximum(n_real[idx].sum(axis=-1), 1),
                hs[:, idx].sum(axis=-1) / np.maximum(n_sim[idx].sum(axis=-1), 1))

    knn = [RANKING_RECOMMENDERS.index(r) for r in KNN_RECOMMENDERS]
    pop = RANKING_RECOMMENDERS.index("popularity")
    gap = lambda v: float(v[knn].mean() - v[pop])  # noqa: E731
    n = users.size
    full_r, full_s = rates(np.arange(n))
    tau = _tau(full_r, full_s)
    idx = boot.integers(0, n, size=(n_bootstrap, n))
    taus, gaps = np.empty(n_bootstrap), np.empty((n_bootstrap, 2))
    for j, b in enumerate(idx):
        r_b, s_b = rates(b)
        taus[j], gaps[j] = _tau(r_b, s_b), (gap(r_b), gap(s_b))
    taus = taus[np.isfinite(taus)]
    lo, hi = (np.percentile(taus, [2.5, 97.5]) if taus.size else (math.nan, math.nan))
    # the real data's own noise: two random halves of the users, ranked against each other
    halves = np.empty(n_halves)
    for j in range(n_halves):
        perm = halves_rng.permutation(n)
        a, c = perm[: n // 2], perm[n // 2:]
        halves[j] = _tau(rates(a)[0], rates(c)[0])
    halves = halves[np.isfinite(halves)]
    h_mid, h_lo, h_hi = (np.percentile(halves, [50, 2.5, 97.5]) if halves.size
                         else (math.nan,) * 3)
    faithful = bool(np.isfinite(tau) and np.isfinite(h_lo) and tau >= h_lo - 1e-12
                    and lo > 0)
    g_lo, g_hi = np.percentile(gaps, [2.5, 97.5], axis=0)
    return RankingCheck(recommenders=RANKING_RECOMMENDERS,
                        real=tuple(_rate(h, n_real) for h in hr),
                        simulated=tuple(_rate(h, n_sim) for h in hs),
                        tau=tau, tau_ci_low=float(lo), tau_ci_high=float(hi), k=k,
                        n_users=int(n), n_bootstrap=n_bootstrap, protocol=protocol,
                        faithful=faithful, halves_tau=float(h_mid),
                        halves_tau_ci_low=float(h_lo), halves_tau_ci_high=float(h_hi),
                        n_halves=n_halves, gap_real=gap(full_r), gap_real_ci_low=float(g_lo[0]),
                        gap_real_ci_high=float(g_hi[0]), gap_simulated=gap(full_s),
                        gap_simulated_ci_low=float(g_lo[1]),
                        gap_simulated_ci_high=float(g_hi[1]))


# ---------------------------------------------------------------------------------------------
# the full report
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CalibrationReport:
    """Fidelity of a calibrated world: distributions, recommender ranking, verdict.

    Attributes
    ----------
    world : simulator.CalibratedWorld
    in_sample : simulator.FidelityReport
        The world's log against the log it was fitted to (labelled in-sample).
    in_sample_ranking : RankingCheck
    holdout : simulator.HoldoutFidelity or None
        The world fitted on the first part of the log's time span, run on over the rest.
    holdout_ranking : RankingCheck or None
    holdout_note : str
        Why there is no out-of-sample part, when there is none.
    faithful : bool
        The verdict: of the out-of-sample part when there is one, else of the in-sample part.
    problems : tuple of str
        Why not, one line each (empty when faithful).
    seed : int
        Seed of the simulated logs compared with the real one.
    in_sample_bands, holdout_bands : simulator.NoiseBandReport or None
        Every distribution's distance to the real data beside the real data's own noise
        (:func:`simulator.noise_bands`), in sample and out of sample; the verdict on the
        distributions rests on them.
    """

    world: object
    in_sample: object
    in_sample_ranking: RankingCheck
    holdout: object
    holdout_ranking: RankingCheck | None
    holdout_note: str
    faithful: bool
    problems: tuple
    seed: int
    in_sample_bands: object = None
    holdout_bands: object = None

    @property
    def bands(self):
        """The noise bands the verdict rests on (out of sample when measured)."""
        return self.in_sample_bands if self.holdout is None else self.holdout_bands

    @property
    def distributions(self):
        """The distributions the verdict rests on (out of sample when measured)."""
        return self.in_sample if self.holdout is None else self.holdout.report

    @property
    def ranking(self) -> RankingCheck:
        """The ranking check the verdict rests on."""
        return self.in_sample_ranking if self.holdout is None else self.holdout_ranking

    @property
    def basis(self) -> str:
        return "in sample" if self.holdout is None else "out of sample"

    def _summary(self) -> list[str]:
        w, info = self.world, self.world.info
        c = w.config
        fmt = lambda v: "none" if v is None else f"{v:.4g} ticks"  # noqa: E731
        out = [f"data: {w.source or '(in memory)'}"
               + (f" (sha256 {w.source_sha256})" if w.source_sha256 else ""),
               f"world sha256: {w.sha256}",
               f"world: {c.n_users} users, {c.n_items} items, {c.n_ticks} ticks, "
               f"{w.observed.user.size} interactions, n_factors={info.n_factors}, "
               f"exposure={info.exposure:g}, ctr={info.ctr:g}, reg={info.reg:g}",
               f"fit: {info.n_iter} sweeps, converged={info.converged}, log-likelihood per "
               f"cell {info.log_likelihood:.5f}"]
        law = c.sessions
        if law is not None:
            out.append(f"sessions: fitted to {info.n_sessions} sessions (distinct active "
                       f"ticks of a user): number per user ceil(LogNormal({law.count_mu:.3g}, "
                       f"{law.count_sigma:.3g})), gaps ceil(LogNormal({law.gap_mu:.3g}, "
                       f"{law.gap_sigma:.3g})) ticks, a later session weighs "
                       f"{law.later_weight:.3g} of a first; each user arrives at its first "
                       f"tick in the log; {law.arrival_rate:.3g} new users per tick "
                       "forecast after it")
        elif info.seconds_per_tick is None:
            out.append("no timestamps: every item alive throughout, constant activity, "
                       f"{c.n_ticks} ticks (assumed), no sessions")
        else:
            out.append(f"no sessions: activity half-life {fmt(c.activity_halflife)}")
        rm = c.fitted.ratings
        if rm is not None:
            levels = ", ".join(f"{v:.3g}" for v in rm.levels)
            out.append(f"ratings: ordered logit on the latent score, {rm.n_levels} levels "
                       f"({levels}), slope {rm.slope:.3g}, log-likelihood per rating "
                       f"{info.rating_log_likelihood:.4f}, converged={info.rating_converged}")
        else:
            out.append("ratings: none (no rating model)")
        if info.seconds_per_tick is not None:
            out.append(f"estimated from timestamps ({info.seconds_per_tick:g} s per tick): "
                       f"CTR half-life {fmt(c.ctr_halflife)}"
                       + ("" if c.item_birth is None else ", item births (first interaction)"))
        out.append(f"dropped: {w.dropped_users.size} users, {w.dropped_items.size} items "
                   "(no interaction left)")
        return out

    @property
    def verdict_line(self) -> str:
        """The verdict in one line (what a run prints after fitting its world)."""
        return self._verdict()[0]

    def _verdict(self) -> list[str]:
        rules = f"{self.bands.rule}; {self.ranking.rule}"
        if self.faithful:
            return [f"VERDICT ({self.basis}): faithful ({rules})."]
        return ([f"VERDICT ({self.basis}): NOT FAITHFUL. " + "; ".join(self.problems) + "."]
                + [f"Rules: {rules}."])

    def _sections(self):
        """(title, note lines, FidelityReport, RankingCheck, NoiseBandReport) of each part."""
        parts = [(f"In sample -- the world was fitted to these data, so the distances "
                  f"measure the fit, not a prediction (real log vs one simulated log, seed "
                  f"{self.seed})", [], self.in_sample, self.in_sample_ranking,
                  self.in_sample_bands)]
        h = self.holdout
        if h is not None:
            n_old = h.world.n_users
            act_r = np.unique(h.real.user)
            act_s = np.unique(h.simulated.user)
            notes = [h.report.label + ".",
                     f"active users: real {act_r.size} ({int((act_r >= n_old).sum())} new), "
                     f"simulated {act_s.size} ({int((act_s >= n_old).sum())} new, forecast); "
                     f"interactions: real {h.real.user.size}, simulated "
                     f"{h.simulated.user.size}"
                     + (f"; {h.dropped_new_items} real interactions with items first seen "
                        "after the split left out" if h.dropped_new_items else "")
                     + f"; new items: real {h.new_items_real} "
                       f"({h.new_item_interactions_real} interactions), forecast "
                       f"{h.new_items_simulated}"]
            parts.append((f"Out of sample -- fitted on the first {1 - h.holdout:g} of the "
                          f"time span, run on over the rest (seed {self.seed})", notes,
                          h.report, self.holdout_ranking, self.holdout_bands))
        return parts

    def to_text(self) -> str:
        lines = ["Calibrated world", *("  " + s for s in self._summary())]
        for title, notes, dist, rank, bands in self._sections():
            lines += ["", f"{title}:"] + ["  " + s for s in notes]
            lines += ["  " + s for s in dist.to_text().splitlines()]
            lines += ["  " + dist.worst_text()]
            if bands is not None:
                lines += ["", f"  Against the data's own noise ({bands.bands[0].n_splits} "
                              "random halves of the users):"]
                lines += ["    " + s for s in bands.to_text().splitlines()]
            lines += ["", "  Recommender ranking by hit rate:"]
            rows = [("recommender", "real", "simulated")] + rank.rows()
            width = [max(len(x[j]) for x in rows) for j in range(3)]
            lines += ["    " + "  ".join(c.ljust(w) for c, w in zip(x, width, strict=True))
                      .rstrip() for x in rows]
            lines += ["    " + rank.summary(), "    " + rank.gap_summary()]
        if self.holdout_note:
            lines += ["", f"No out-of-sample check: {self.holdout_note}."]
        lines += ["", *self._verdict()]
        return "\n".join(lines)

    def to_markdown(self) -> str:
        lines = ["## Calibrated world", "", *(f"- {s}" for s in self._summary())]
        for title, notes, dist, rank, bands in self._sections():
            lines += ["", f"### {title}", ""] + [f"{s}\n" for s in notes]
            lines += [dist.to_markdown(), "", dist.worst_text() + "."]
            if bands is not None:
                lines += ["", f"Against the data's own noise ({bands.bands[0].n_splits} random "
                              "halves of the users):", "", bands.to_markdown()]
            lines += ["", "Recommender ranking by hit rate:", "",
                      "| recommender | real | simulated |", "|---|---|---|"]
            lines += [f"| {a} | {b} | {c} |" for a, b, c in rank.rows()]
            lines += ["", rank.summary() + ".", "", rank.gap_summary() + "."]
        if self.holdout_note:
            lines += ["", f"No out-of-sample check: {self.holdout_note}."]
        lines += ["", "**" + self._verdict()[0] + "**"]
        lines += self._verdict()[1:]
        return "\n".join(lines) + "\n"


def _problems(bands, ranking) -> list[str]:
    out = [f"{b.name} differs more than the real data's halves do (world KS {b.world:.3f} > "
           f"{b.real_high:.3f}, the real halves' 97.5th percentile)" for b in bands.bands
           if b.verdict == "outside"]
    if not ranking.faithful:
        out.append(f"the recommenders rank differently (Kendall tau {ranking.tau:.3f}, "
                   f"interval [{ranking.tau_ci_low:.3f}, {ranking.tau_ci_high:.3f}]; real "
                   f"halves {ranking.halves_tau:.3f} [{ranking.halves_tau_ci_low:.3f}, "
                   f"{ranking.halves_tau_ci_high:.3f}])")
    return out


def _check_holdout(holdout, has_timestamps: bool):
    """The held-out fraction to use (None: no out-of-sample check) and why not."""
    if isinstance(holdout, str):
        if holdout != "auto":
            raise ArgumentValueError("holdout", "'auto', 0 or a fraction in (0, 0.5]",
                                     repr(holdout))
        return (DEFAULT_HOLDOUT, "") if has_timestamps else \
            (None, "the log has no timestamps (a hold-out is cut in time)")
    h = check_float(holdout, "holdout", low=0.0, high=0.5)
    if h == 0:
        return None, "not asked for (holdout 0)"
    if not has_timestamps:
        raise ArgumentValueError("holdout", "0 for a log without timestamps (a hold-out is "
                                 "cut in time)", f"{h:g}")
    return h, ""


def fidelity_of_fit(calibrated, seed: int, *, holdout="auto") -> CalibrationReport:
    """:func:`fidelity_report` of a world fitted with ``seed``, with the draws `recloop
    calibrate` and a scenario's ``[world] calibrate_from`` both use: the same file and seed
    give the same world and the same figures."""
    return fidelity_report(calibrated, holdout=holdout, seed=seed,
                           rng=np.random.SeedSequence(seed, spawn_key=(1,)))


def fidelity_report(calibrated, *, holdout="auto", seed: int = 0, k: int = 10,
                    max_users: int = 300, n_bootstrap: int = 500, n_pairs: int = 20_000,
                    ks_close: float = 0.1, ks_poor: float = 0.2, n_splits: int = 30,
                    rng=None) -> CalibrationReport:
    """Simulate a calibrated world and compare it with the real log, in sample and on the
    future.

    Parameters
    ----------
    calibrated : simulator.CalibratedWorld
    holdout : "auto", 0 or float in (0, 0.5], default "auto"
        Held-out fraction of the log's time span for the out-of-sample check
        (:func:`simulator.holdout_fidelity`: the world is fitted again, with the same
        options, on the first ``1 - holdout`` of the span); ``"auto"``: 0.2 when the log has
        timestamps, none otherwise; 0: none.
    seed : int, default 0
        Seed of the simulated worlds (no campaigns).
    k, max_users, n_bootstrap : see :func:`ranking_check` (``k`` capped at ``n_items - 1``).
    n_pairs, ks_close, ks_poor : see :func:`simulator.fidelity`.
    n_splits : int, default 30
        Random halves of the users of :func:`simulator.noise_bands`.
    rng : None, int, SeedSequence or Generator
        Draws of the checks (user pairs, splits, sampled users, bootstrap) and the start of
        the out-of-sample fit.

    Returns
    -------
    CalibrationReport
        ``faithful`` is false when a distribution's distance to the real data exceeds the
        real halves' band (:func:`simulator.noise_bands`) or the ranking check fails (tau
        below the real halves' median tau, or its interval reaching 0), out of sample when
        measured; ``problems`` says which. The KS thresholds ``ks_close``/``ks_poor`` only
        label the table's rows.

    Raises
    ------
    ValueError
        ``holdout`` out of range, or given for a log without timestamps; a log too short
        for the hold-out (fewer than two active ticks in a part).
    """
    import simulator

    if not isinstance(calibrated, simulator.CalibratedWorld):
        raise ArgumentTypeError("calibrated", "a simulator.CalibratedWorld",
                                type(calibrated).__name__)
    seed = check_int(seed, "seed", low=0)
    has_time = calibrated.info.seconds_per_tick is not None
    fraction, note = _check_holdout(holdout, has_time)
    n_splits = check_int(n_splits, "n_splits", low=1)
    root = as_seed_sequence(rng)
    r_dist, r_rank, r_hold, r_hrank, r_band, r_hband = root.spawn(6)
    # a list as long as the catalogue would hit every held-out item
    k = min(check_int(k, "k", low=1), max(1, calibrated.n_items - 1))
    world = calibrated.world(seed)
    world.simulate(calibrated.config.n_ticks - 1)
    sim = world.edges
    dist = simulator.fidelity(calibrated.observed, sim, n_pairs=n_pairs, ks_close=ks_close,
                              ks_poor=ks_poor, rng=r_dist,
                              label="in sample: the world's log against the log it was "
                                    "fitted to")
    ranking = ranking_check(calibrated.observed, sim, k=k, max_users=max_users,
                            n_bootstrap=n_bootstrap, rng=r_rank)
    bands = simulator.noise_bands(calibrated.observed, sim, n_splits=n_splits, rng=r_band,
                                  label="in sample")
    held = held_rank = held_bands = None
    if fraction is not None:
        info, c = calibrated.info, calibrated.config
        held = simulator.holdout_fidelity(
            calibrated.observed, holdout=fraction, seed=seed, seconds_per_tick=1.0,
            n_pairs=n_pairs, ks_close=ks_close, ks_poor=ks_poor, rng=r_hold,
            n_factors=info.n_factors, exposure=info.exposure, ctr=info.ctr, reg=info.reg,
            ratings=c.fitted.ratings is not None, sessions=c.sessions is not None,
            time_effects=c.item_birth is not None or c.ctr_halflife is not None)
        n_old = held.world.n_users
        back = np.unique(held.real.user[held.real.user < n_old])
        back = back[np.isin(back, held.train.user)]
        if back.size < 2:
            raise ArgumentValueError(
                "holdout", "a hold-out in which at least 2 users of the fitted part come back "
                "(the recommenders are ranked on their future); 0 checks in sample only",
                f"{fraction:g}: {back.size} user(s) of ticks before {held.split} active after "
                "it")
        held_rank = ranking_check(held.real, held.simulated, train=held.train, k=k,
                                  max_users=max_users, n_bootstrap=n_bootstrap, rng=r_hrank)
        held_bands = simulator.noise_bands(held.real, held.simulated, n_splits=n_splits,
                                           rng=r_hband, label="out of sample")
        problems = _problems(held_bands, held_rank)
    else:
        problems = _problems(bands, ranking)
    return CalibrationReport(world=calibrated, in_sample=dist, in_sample_ranking=ranking,
                             holdout=held, holdout_ranking=held_rank, holdout_note=note,
                             faithful=not problems, problems=tuple(problems), seed=seed,
                             in_sample_bands=bands, holdout_bands=held_bands)


# ---------------------------------------------------------------------------------------------
# reading a rating file, fitting it, and the command
# ---------------------------------------------------------------------------------------------
_COLUMN_KEYS = ("user", "item", "rating", "timestamp")


def _columns(columns) -> dict:
    if columns is None:
        return {"user": "user", "item": "item", "rating": "rating"}
    if isinstance(columns, str):
        columns = [c.strip() for c in columns.split(",")]
    if isinstance(columns, Mapping):
        bad = sorted(set(columns) - set(_COLUMN_KEYS))
        if bad:
            raise ArgumentValueError("columns", f"keys among {', '.join(_COLUMN_KEYS)}",
                                     repr(bad[0]))
        spec = dict(columns)
    elif isinstance(columns, Sequence) and all(isinstance(c, str) and c for c in columns):
        if not 3 <= len(columns) <= 4:
            raise ArgumentValueError("columns", "3 or 4 column names: user, item, "
                                     "rating[, timestamp]", repr(list(columns)))
        # 3 or 4 columns against 4 keys: without a timestamp column the last key stays unset
        spec = dict(zip(_COLUMN_KEYS, columns, strict=False))
    else:
        raise ArgumentTypeError("columns", "'user,item,rating[,timestamp]' names or a mapping",
                                type(columns).__name__)
    missing = [k for k in ("user", "item", "rating") if k not in spec]
    if missing:
        raise ArgumentValueError("columns", "the user, item and rating columns",
                                 f"no {missing[0]!r}")
    return spec


def _what(mode: int) -> str:
    return ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a socket" if stat.S_ISSOCK(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "not a regular file")


def _scan(path: Path, *, force: bool) -> str:
    """Check that ``path`` is a readable rating file before a loader parses it: a regular
    file (a FIFO, a device or ``/dev/zero`` are refused at once, unread), at most
    :data:`MAX_DATA_BYTES` unless ``force``, read block by block and stopped at the first
    line that cannot be a rating line (a NUL byte, invalid UTF-8, an integer of 2^63 or
    more). Returns the file's SHA-256."""
    import codecs
    import re

    from evaluators.datasets import DatasetFormatError

    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(21, "Is a directory", str(path))
        if not stat.S_ISREG(st.st_mode):
            raise ArgumentValueError("PATH", "a regular rating file", _what(st.st_mode))
        if st.st_size > MAX_DATA_BYTES and not force:
            raise ArgumentValueError("PATH", f"a rating file of at most "
                                     f"{MAX_DATA_BYTES // 2**20} MiB (--force reads a larger "
                                     "one)", f"{st.st_size} bytes")
        digest = hashlib.sha256()
        decoder = codecs.getincrementaldecoder("utf-8")()
        long_int = re.compile(rb"\d{19,}")
        newline = b"\n"
        line, offset = 1, 0

        def bad(chunk: bytes, at: int, msg: str):
            return DatasetFormatError(f"{path}:{line + chunk.count(newline, 0, at)}: {msg}")

        while True:
            chunk = os.read(fd, _CHUNK)
            if not chunk:
                break
            digest.update(chunk)
            nul = chunk.find(b"\0")
            if nul >= 0:
                raise bad(chunk, nul, f"a NUL byte at byte {offset + nul}: not a text "
                                      "rating file.")
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError as exc:
                raise bad(chunk, max(0, exc.start), "not valid UTF-8 text.") from None
            for m in long_int.finditer(chunk):
                if int(m.group()) > 2**63 - 1:
                    raise bad(chunk, m.start(), f"an integer of 2^63 or more "
                                                f"({m.group().decode()}): ids and timestamps "
                                                "must be below 2^63.")
            line += chunk.count(newline)
            offset += len(chunk)
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            raise DatasetFormatError(f"{path}:{line}: not valid UTF-8 text (a truncated "
                                     "character at the end).") from None
        return digest.hexdigest()
    finally:
        os.close(fd)


def read_rating_file(path, *, format: str, columns=None, rating_scale=None,
                     force: bool = False):
    """Read a rating file safely: ``(RatingData, sha256 of the file)``.

    Parameters
    ----------
    path : str or os.PathLike
    format : {"movielens", "jester", "csv"}
        ``movielens``: ``u.data`` of MovieLens 100K (tab-separated) or ``ratings.dat`` of
        MovieLens 1M (``::``), told apart by the first line; ``jester``: Jester's CSV or text
        file; ``csv``: a delimited file with a header, read with ``columns``.
    columns : str, sequence or mapping, optional
        CSV columns: ``"user,item,rating[,timestamp]"`` (header names in that order) or a
        mapping with those keys; default ``user``, ``item``, ``rating``.
    rating_scale : (float, float), optional
        CSV only (MovieLens and Jester have theirs): ratings outside are an error that names
        the file and line.
    force : bool
        Read a file larger than :data:`MAX_DATA_BYTES`.

    Returns
    -------
    (evaluators.datasets.RatingData, str)

    Raises
    ------
    FileNotFoundError, IsADirectoryError
    ValueError
        Not a regular file (a FIFO, a device: refused unread), too large without ``force``,
        bad options.
    evaluators.datasets.DatasetFormatError
        The first bad line, with the file and line: binary data, invalid UTF-8, an integer
        of 2^63 or more, or anything the format's loader refuses.
    """
    from evaluators import datasets

    format = check_choice(format, "format", FORMATS)
    if format != "csv" and columns is not None:
        raise ArgumentValueError("columns", f"None for format {format!r} (only csv has "
                                 "columns)", repr(columns))
    if format != "csv" and rating_scale is not None:
        raise ArgumentValueError("rating_scale", f"None for format {format!r} (its scale is "
                                 "fixed)", repr(rating_scale))
    spec = _columns(columns) if format == "csv" else None
    if not isinstance(force, (bool, np.bool_)):
        raise ArgumentTypeError("force", "a bool", type(force).__name__)
    p = Path(path)
    sha = _scan(p, force=bool(force))
    if format == "movielens":
        with open(p, "rb") as fh:
            first = fh.readline(4096)
        data = (datasets.load_movielens_1m(p) if b"::" in first
                else datasets.load_movielens_100k(p))
    elif format == "jester":
        data = datasets.load_jester(p)
    else:
        data = datasets.load_csv(p, user=spec["user"], item=spec["item"],
                                 rating=spec["rating"], timestamp=spec.get("timestamp"),
                                 rating_range=rating_scale)
    return data, sha


def load_interactions(path, *, format: str, columns=None, rating_scale=None,
                      force: bool = False):
    """The :class:`evaluators.datasets.RatingData` of :func:`read_rating_file`."""
    return read_rating_file(path, format=format, columns=columns, rating_scale=rating_scale,
                            force=force)[0]


#: Options of :func:`simulator.calibrate` that :func:`fit_world` passes on.
FIT_OPTIONS = ("n_factors", "ctr", "exposure", "reg", "min_rating", "ratings",
               "seconds_per_tick")


def fit_world(data, *, seed: int = 0, source: str = "", source_sha256: str = "", **options):
    """Fit a world to a loaded log: :func:`simulator.calibrate` with the fit's rng
    ``numpy.random.default_rng(seed)``, the file's name and hash recorded.

    ``recloop calibrate PATH --seed N`` and a scenario's ``[world] calibrate_from = PATH``
    with ``seed = N`` both fit through here: the same file, options and seed give the same
    world, byte for byte (the same ``sha256``), wherever the file lies (only its name and
    its hash enter the world).

    Returns
    -------
    (simulator.CalibratedWorld, list of str)
        The world and the calibration's notes (dropped users or items).
    """
    import warnings

    import simulator

    unknown = sorted(set(options) - set(FIT_OPTIONS))
    if unknown:
        raise ArgumentValueError(unknown[0], f"one of {', '.join(FIT_OPTIONS)}", "unknown")
    seed = check_int(seed, "seed", low=0)
    if dataclasses.is_dataclass(data) and hasattr(data, "source"):
        data = dataclasses.replace(data, source=source)  # the name only, not where it lies
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", simulator.CalibrationWarning)
        cal = simulator.calibrate(data, rng=np.random.default_rng(seed), **options)
    cal = dataclasses.replace(cal, source=source, source_sha256=source_sha256)
    notes = [str(w.message) for w in caught
             if issubclass(w.category, simulator.CalibrationWarning)]
    return cal, notes


def _check_out(out) -> Path | None:
    if out is None:
        return None
    out = Path(out)
    if out.suffix != ".npz":
        raise ArgumentValueError("--out", "a path ending in .npz", repr(str(out)))
    parent = out.parent if str(out.parent) else Path(".")
    if parent.exists() and not parent.is_dir():
        raise ArgumentValueError("--out", "a path in a directory", repr(str(out)))
    try:
        st = os.stat(out)
    except FileNotFoundError:
        return out
    except OSError as exc:
        raise ArgumentValueError("--out", "a writable file path",
                                 f"{str(out)!r} ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        raise ArgumentValueError("--out", "a new or regular file (a world is written "
                                 "atomically: a temporary file renamed into place)",
                                 f"{str(out)!r}, {_what(st.st_mode)}")
    return out


def calibrate_command(path, *, format: str, columns=None, out=None, n_factors: int = 8,
                      ctr: float = 0.3, exposure: float = 1.0, min_rating=None,
                      rating_scale=None, ratings: bool = True, holdout="auto",
                      force: bool = False, seed: int = 0, markdown: bool = False,
                      stdout=None, stderr=None) -> int:
    """``recloop calibrate PATH``: fit a world, print its fidelity report, save it.

    Parameters
    ----------
    path : str or os.PathLike
        The rating file.
    format : {"movielens", "jester", "csv"}
        See :func:`read_rating_file`.
    columns : str, sequence or mapping, optional
        CSV columns (``--columns user,item,rating[,timestamp]``).
    out : str or os.PathLike, optional
        Where to write the fitted world (``.npz``, no pickle); nothing is written otherwise.
    n_factors, ctr, exposure, min_rating, ratings : see :func:`simulator.calibrate`.
    rating_scale : (float, float), optional
        CSV only (``--rating-scale LOW HIGH``).
    holdout : "auto", 0 or float in (0, 0.5]
        Out-of-sample check (``--holdout``), see :func:`fidelity_report`.
    force : bool
        Read a rating file larger than :data:`MAX_DATA_BYTES` (``--force``).
    seed : int, default 0
        Seed of the fit (``numpy.random.default_rng(seed)``, as a scenario's ``[world]
        seed``) and, through its own stream, of the report's simulations and draws.
    markdown : bool
        Print the report as Markdown instead of text.
    stdout, stderr : file-like, default sys.stdout / sys.stderr

    Returns
    -------
    int
        0 on success (the report says whether the world is faithful); 2 on bad input, with one
        line ``recloop calibrate: error: ...`` on ``stderr`` naming the problem (file and line
        where it applies) and nothing written.
    """
    from evaluators.datasets import DatasetFormatError

    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr

    def fail(msg) -> int:
        print(f"recloop calibrate: error: {msg}", file=stderr)
        return 2

    try:
        out = _check_out(out)
        seed = check_int(seed, "seed", low=0)
        if not isinstance(holdout, str):
            check_float(holdout, "holdout", low=0.0, high=0.5)  # fail before reading
        data, sha = read_rating_file(path, format=format, columns=columns,
                                     rating_scale=rating_scale, force=force)
        fraction, _ = _check_holdout(holdout, data.timestamps is not None)
        if fraction is not None:  # a log too short for the hold-out: said before the fit
            import simulator

            t = np.asarray(data.timestamps, np.int64)
            days = (t - t.min()) // 86400
            if np.unique(days).size < 4:
                raise ArgumentValueError(
                    "--holdout", "0 (in sample only) for a log whose timestamps fall on fewer "
                    "than 4 distinct days (a hold-out is cut in time: each part needs two)",
                    f"{fraction:g}, with {np.unique(days).size} distinct day(s) in the log "
                    "(timestamps all equal, or within one day)")
            simulator.holdout_split(days, fraction)
        cal, notes = fit_world(data, seed=seed, source=Path(path).name, source_sha256=sha,
                               n_factors=n_factors, ctr=ctr, exposure=exposure,
                               min_rating=min_rating, ratings=ratings)
        report = fidelity_of_fit(cal, seed, holdout=holdout)
    except FileNotFoundError as exc:
        return fail(f"{exc.filename or path}: no such file.")
    except IsADirectoryError as exc:
        return fail(f"{exc.filename or path}: is a directory, expected a rating file.")
    except DatasetFormatError as exc:
        return fail(f"{exc} (is it a {format} file?)")
    except (TypeError, ValueError) as exc:
        return fail(f"{path}: {exc}")
    except OSError as exc:
        return fail(f"{path}: cannot read it ({exc.strerror or exc}).")
    for note in notes:
        print(f"recloop calibrate: note: {note}", file=stderr)
    text = report.to_markdown() if markdown else report.to_text()
    if out is not None:
        try:
            written = cal.save(out)
        except OSError as exc:
            return fail(f"{out}: cannot write the world ({exc.strerror or exc}).")
        text += ("\n\n" if not markdown else "\n") + f"Wrote {written} (sha256 {cal.sha256})"
    print(text, file=stdout)
    return 0
