"""Calibrated worlds in the harness: the full fidelity report and ``recloop calibrate``.

:func:`simulator.calibrate` fits a world to a log and :func:`simulator.fidelity` compares the
distributions of a real and a simulated log; both live in ``simulator``, which may not import
``agents`` or ``evaluators``. This module adds what needs them:

* :func:`ranking_check` -- do a fixed set of recommenders (popularity, user cosine CF, naive
  CF, user kNN) rank in the same order by leave-one-out score on the real log and on the
  simulated one? Kendall's tau with a paired bootstrap interval over users (after Stavinova
  et al. 2022, "Performance ranking of recommender systems on simulated data");
* :func:`fidelity_report` -- both checks on a :class:`simulator.CalibratedWorld`, with a
  verdict, printable as text and Markdown (:class:`CalibrationReport`);
* :func:`load_interactions` and :func:`calibrate_command` -- the logic of
  ``recloop calibrate PATH [--format ...] [--out world.npz]``.
"""

from __future__ import annotations

import math
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
    check_int,
)

__all__ = ["FORMATS", "RANKING_RECOMMENDERS", "CalibrationReport", "RankingCheck",
           "calibrate_command", "fidelity_report", "load_interactions", "ranking_check"]

#: Formats of :func:`load_interactions`.
FORMATS = ("movielens", "jester", "csv")
#: The fixed set of recommenders of the ranking check, in report order.
RANKING_RECOMMENDERS = ("popularity", "user_cosine_cf", "naive_cf", "user_knn")
#: Kendall's tau at or above which the ranking is faithful: at most one of the six pairs of
#: the four recommenders in a different order.
TAU_FAITHFUL = 2.0 / 3.0
_Z = 1.959963984540054


def _recommender(name: str, n_neighbors: int):
    import agents

    return {"popularity": lambda: agents.Popularity(),
            "user_cosine_cf": lambda: agents.UserCosineCF(),
            "naive_cf": lambda: agents.NaiveCF(),
            "user_knn": lambda: agents.UserKNN(n_neighbors)}[name]()


# ---------------------------------------------------------------------------------------------
# the ranking check
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RankingCheck:
    """Leave-one-out scores of the fixed recommenders on the real and the simulated log.

    Attributes
    ----------
    recommenders : tuple of str
    real, simulated : tuple of evaluators.Estimate
        LOO hit rate at ``k`` of each recommender (mean over the sampled users of the
        per-user hit rate; stderr and 95% normal interval over users).
    tau : float
        Kendall's tau-b between the two score vectors (``nan`` if either is constant).
    tau_ci_low, tau_ci_high : float
        95% percentile interval of tau over a paired bootstrap of users.
    k : int
        List length.
    n_users : int
        Users the scores average over (the same users in both logs).
    n_bootstrap : int
    faithful : bool
        ``tau >= 2/3`` (at most one of the six pairs swapped) and ``tau_ci_low > 0``.
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
    faithful: bool

    rule = (f"the ranking is faithful when Kendall's tau >= {TAU_FAITHFUL:.3g} (at most one "
            "pair of recommenders in a different order) and its 95% bootstrap interval lies "
            "above 0")

    def rows(self) -> list[tuple[str, str, str]]:
        def fmt(e):
            return f"{e.value:.4f} [{e.ci_low:.4f}, {e.ci_high:.4f}]"
        rank_r = _ranks([e.value for e in self.real])
        rank_s = _ranks([e.value for e in self.simulated])
        return [(name, f"{fmt(r)} #{a}", f"{fmt(s)} #{b}")
                for name, r, s, a, b in zip(self.recommenders, self.real, self.simulated,
                                            rank_r, rank_s, strict=True)]


def _ranks(values) -> list[int]:
    order = sorted(range(len(values)), key=lambda j: -values[j])
    out = [0] * len(values)
    for r, j in enumerate(order, start=1):
        out[j] = r
    return out


def _as_binary(x, name: str) -> sp.csr_array:
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
    m.sort_indices()
    return m


def _user_hits(m: sp.csr_array, rec, users: np.ndarray, k: int, per_user: int, rng):
    """Per-user LOO hit rate at k over (at most ``per_user`` sampled) held items."""
    pair_u, pair_i, owner = [], [], []
    for j, u in enumerate(users.tolist()):
        items = m.indices[m.indptr[u]:m.indptr[u + 1]]
        if items.size > per_user:
            items = np.sort(rng.choice(items, per_user, replace=False))
        pair_u.append(np.full(items.size, u))
        pair_i.append(items)
        owner.append(np.full(items.size, j))
    pu, pi, ow = (np.concatenate(a) for a in (pair_u, pair_i, owner))
    hits = np.zeros(pu.size)
    step = 2048
    for lo in range(0, pu.size, step):
        top = rec.recommend(pu[lo:lo + step], k, removed=pi[lo:lo + step])
        hits[lo:lo + step] = (top == pi[lo:lo + step, None]).any(axis=1)
    count = np.bincount(ow, minlength=users.size)
    return np.bincount(ow, hits, minlength=users.size) / np.maximum(count, 1)


def _tau(x, y) -> float:
    from scipy.stats import kendalltau

    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if np.all(x == x[0]) or np.all(y == y[0]):
        return math.nan
    return float(kendalltau(x, y).statistic)


def ranking_check(real, simulated, *, k: int = 10, n_neighbors: int = 20,
                  max_users: int = 300, items_per_user: int = 20, n_bootstrap: int = 500,
                  rng=None) -> RankingCheck:
    """Rank popularity, user cosine CF, naive CF and user kNN by LOO score on both logs.

    Parameters
    ----------
    real, simulated : InteractionLog or users x items matrix
        Same users and items (a calibrated world's users are the real log's users).
    k : int, default 10
        List length of the hit rate.
    n_neighbors : int, default 20
        Neighbourhood of :class:`agents.UserKNN`.
    max_users : int, default 300
        Users sampled (the same in both logs; all when fewer). Only users with at least one
        item in both logs are eligible.
    items_per_user : int, default 20
        Held items left out per user at most (sampled without replacement).
    n_bootstrap : int, default 500
        Paired bootstrap resamples of the users for the interval of tau.
    rng : None, int, SeedSequence or Generator

    Returns
    -------
    RankingCheck

    Raises
    ------
    TypeError, ValueError
        Logs of other types or shapes, no user with items in both, options out of range.

    Notes
    -----
    Each recommender is fitted on the whole log and scored by exact leave-one-out
    (``removed=``, as :func:`evaluators.offline_score`): ``L = mean_u mean_{i in S_u}
    1[i in g(u_-i)]`` over the sampled users ``u`` and held items ``S_u`` (uniform ``P(u)``
    and ``P(i|u)``; the sample of held items is an unbiased estimate of each user's hit
    rate). The same users in both logs make the comparison paired: one bootstrap resample of
    users gives both score vectors and one tau. Stavinova et al. (2022) argue that a
    simulator is useful for evaluation only if it preserves such rankings.
    """
    k = check_int(k, "k", low=1)
    n_neighbors = check_int(n_neighbors, "n_neighbors", low=1)
    max_users = check_int(max_users, "max_users", low=2)
    items_per_user = check_int(items_per_user, "items_per_user", low=1)
    n_bootstrap = check_int(n_bootstrap, "n_bootstrap", low=1)
    root = as_seed_sequence(rng)
    m_real, m_sim = _as_binary(real, "real"), _as_binary(simulated, "simulated")
    if m_real.shape != m_sim.shape:
        raise ArgumentValueError("simulated", f"the real log's shape {m_real.shape} (same users "
                                 "and items)", str(m_sim.shape))
    if k > m_real.shape[1]:
        raise ArgumentValueError("k", f"an int in [1, {m_real.shape[1]}] (n_items)", str(k))
    eligible = np.flatnonzero((np.diff(m_real.indptr) > 0) & (np.diff(m_sim.indptr) > 0))
    if eligible.size < 2:
        raise ArgumentValueError("real", "logs with at least 2 users holding items in both",
                                 f"{eligible.size}")
    pick, boot, r_items, s_items = (np.random.default_rng(s) for s in root.spawn(4))
    users = eligible if eligible.size <= max_users else \
        np.sort(pick.choice(eligible, max_users, replace=False))
    per_real, per_sim = [], []
    for name in RANKING_RECOMMENDERS:
        per_real.append(_user_hits(m_real, _recommender(name, n_neighbors).fit(m_real), users,
                                   k, items_per_user,
                                   np.random.default_rng(r_items.integers(2**63))))
        per_sim.append(_user_hits(m_sim, _recommender(name, n_neighbors).fit(m_sim), users,
                                  k, items_per_user,
                                  np.random.default_rng(s_items.integers(2**63))))
    hr, hs = np.array(per_real), np.array(per_sim)  # (n_recommenders, n_users)
    n = users.size

    def est(x):
        from evaluators import Estimate

        mean, se = float(x.mean()), float(x.std(ddof=1) / math.sqrt(x.size))
        return Estimate(mean, se, mean - _Z * se, mean + _Z * se, int(x.size))

    tau = _tau(hr.mean(axis=1), hs.mean(axis=1))
    idx = boot.integers(0, n, size=(n_bootstrap, n))
    taus = np.array([_tau(hr[:, b].mean(axis=1), hs[:, b].mean(axis=1)) for b in idx])
    taus = taus[np.isfinite(taus)]
    lo, hi = (np.percentile(taus, [2.5, 97.5]) if taus.size else (math.nan, math.nan))
    faithful = bool(np.isfinite(tau) and tau >= TAU_FAITHFUL - 1e-12 and lo > 0)
    return RankingCheck(recommenders=RANKING_RECOMMENDERS,
                        real=tuple(est(x) for x in hr), simulated=tuple(est(x) for x in hs),
                        tau=tau, tau_ci_low=float(lo), tau_ci_high=float(hi), k=k,
                        n_users=int(n), n_bootstrap=n_bootstrap, faithful=faithful)


# ---------------------------------------------------------------------------------------------
# the full report
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CalibrationReport:
    """Fidelity of a calibrated world: distributions, recommender ranking, verdict.

    Attributes
    ----------
    world : simulator.CalibratedWorld
    distributions : simulator.FidelityReport
    ranking : RankingCheck
    faithful : bool
        Both parts faithful (see their ``rule``).
    problems : tuple of str
        Why not, one line each (empty when faithful).
    seed : int
        Seed of the simulated log compared with the real one.
    """

    world: object
    distributions: object
    ranking: RankingCheck
    faithful: bool
    problems: tuple
    seed: int

    def _summary(self) -> list[str]:
        w, info = self.world, self.world.info
        c = w.config
        fmt = lambda v: "none" if v is None else f"{v:.4g} ticks"  # noqa: E731
        return [
            f"source: {w.source or '(in memory)'}",
            f"world: {c.n_users} users, {c.n_items} items, {c.n_ticks} ticks, "
            f"{w.observed.user.size} interactions, n_factors={info.n_factors}, "
            f"exposure={info.exposure:g}, ctr={info.ctr:g}, reg={info.reg:g}",
            f"fit: {info.n_iter} sweeps, converged={info.converged}, log-likelihood per "
            f"cell {info.log_likelihood:.5f}",
            ("no timestamps: every item alive throughout, constant activity, "
             f"{c.n_ticks} ticks (assumed)" if info.seconds_per_tick is None else
             f"estimated from timestamps ({info.seconds_per_tick:g} s per tick): activity "
             f"half-life {fmt(c.activity_halflife)}, CTR half-life {fmt(c.ctr_halflife)}"
             + ("" if c.item_birth is None else ", item births (first interaction)")),
            f"dropped: {w.dropped_users.size} users, {w.dropped_items.size} items "
            "(no interaction left)",
            f"sha256: {w.sha256}",
        ]

    def _verdict(self) -> list[str]:
        if self.faithful:
            return ["VERDICT: faithful (" + self.distributions.rule + "; "
                    + self.ranking.rule + ")."]
        return (["VERDICT: NOT FAITHFUL. " + "; ".join(self.problems) + "."]
                + [f"Rules: {self.distributions.rule}; {self.ranking.rule}."])

    def _ranking_lines(self) -> list[str]:
        r = self.ranking
        return [f"Kendall tau {r.tau:.3f}, 95% bootstrap interval [{r.tau_ci_low:.3f}, "
                f"{r.tau_ci_high:.3f}] ({r.n_bootstrap} resamples of {r.n_users} users; LOO "
                f"hit@{r.k})"]

    def to_text(self) -> str:
        lines = ["Calibrated world", *("  " + s for s in self._summary()), "",
                 f"Distributions (real log vs one simulated log, seed {self.seed}):"]
        lines += ["  " + s for s in self.distributions.to_text().splitlines()]
        lines += ["", "Recommender ranking by LOO score:"]
        rows = [("recommender", "real", "simulated")] + self.ranking.rows()
        width = [max(len(x[j]) for x in rows) for j in range(3)]
        lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(x, width, strict=True)).rstrip()
                  for x in rows]
        lines += ["  " + s for s in self._ranking_lines()]
        lines += ["", *self._verdict()]
        return "\n".join(lines)

    def to_markdown(self) -> str:
        lines = ["## Calibrated world", "", *(f"- {s}" for s in self._summary()), "",
                 f"### Distributions (real log vs one simulated log, seed {self.seed})", "",
                 self.distributions.to_markdown(), "", "### Recommender ranking by LOO score",
                 "", "| recommender | real | simulated |", "|---|---|---|"]
        lines += [f"| {a} | {b} | {c} |" for a, b, c in self.ranking.rows()]
        lines += ["", *self._ranking_lines(), "", "**" + self._verdict()[0] + "**"]
        lines += self._verdict()[1:]
        return "\n".join(lines) + "\n"


def fidelity_report(calibrated, *, seed: int = 0, k: int = 10, n_neighbors: int = 20,
                    max_users: int = 300, items_per_user: int = 20, n_bootstrap: int = 500,
                    n_pairs: int = 20_000, ks_close: float = 0.1, ks_poor: float = 0.2,
                    rng=None) -> CalibrationReport:
    """Simulate a calibrated world once and compare its log with the real one.

    Parameters
    ----------
    calibrated : simulator.CalibratedWorld
    seed : int, default 0
        Seed of the simulated world (no campaigns), run to its last tick.
    k, n_neighbors, max_users, items_per_user, n_bootstrap : see :func:`ranking_check`
        (``k`` is capped at ``n_items - 1``).
    n_pairs, ks_close, ks_poor : see :func:`simulator.fidelity`.
    rng : None, int, SeedSequence or Generator
        Draws of the checks (user pairs, sampled users and items, bootstrap).

    Returns
    -------
    CalibrationReport
        ``faithful`` is false when any distribution's KS statistic exceeds ``ks_poor`` or the
        ranking check fails (tau < 2/3 or its interval reaches 0); ``problems`` says which.
    """
    import simulator

    if not isinstance(calibrated, simulator.CalibratedWorld):
        raise ArgumentTypeError("calibrated", "a simulator.CalibratedWorld",
                                type(calibrated).__name__)
    seed = check_int(seed, "seed", low=0)
    root = as_seed_sequence(rng)
    r_dist, r_rank = root.spawn(2)
    # a list as long as the catalogue would hit every held-out item
    k = min(check_int(k, "k", low=1), max(1, calibrated.n_items - 1))
    world = calibrated.world(seed)
    world.simulate(calibrated.config.n_ticks - 1)
    sim = world.edges
    dist = simulator.fidelity(calibrated.observed, sim, n_pairs=n_pairs, ks_close=ks_close,
                              ks_poor=ks_poor, rng=r_dist)
    ranking = ranking_check(calibrated.observed, sim, k=k, n_neighbors=n_neighbors,
                            max_users=max_users, items_per_user=items_per_user,
                            n_bootstrap=n_bootstrap, rng=r_rank)
    problems = [f"{d.name} differs (KS {d.ks:.3f} > {ks_poor:g}: real mean {d.real_mean:.4g}, "
                f"simulated {d.simulated_mean:.4g})"
                for d in dist.distances if d.verdict == "poor"]
    if not ranking.faithful:
        problems.append(f"the recommenders rank differently (Kendall tau {ranking.tau:.3f}, "
                        f"interval [{ranking.tau_ci_low:.3f}, {ranking.tau_ci_high:.3f}])")
    return CalibrationReport(world=calibrated, distributions=dist, ranking=ranking,
                             faithful=not problems, problems=tuple(problems), seed=seed)


# ---------------------------------------------------------------------------------------------
# loading and the command
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


def load_interactions(path, *, format: str, columns=None, rating_scale=None):
    """Read a rating file with ``evaluators.datasets``.

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

    Returns
    -------
    evaluators.datasets.RatingData

    Raises
    ------
    FileNotFoundError, evaluators.datasets.DatasetFormatError, TypeError, ValueError
    """
    from evaluators import datasets

    format = check_choice(format, "format", FORMATS)
    if format != "csv" and columns is not None:
        raise ArgumentValueError("columns", f"None for format {format!r} (only csv has "
                                 "columns)", repr(columns))
    if format != "csv" and rating_scale is not None:
        raise ArgumentValueError("rating_scale", f"None for format {format!r} (its scale is "
                                 "fixed)", repr(rating_scale))
    p = Path(path)
    if format == "movielens":
        with open(p, "rb") as fh:
            first = fh.readline()
        if b"::" in first:
            return datasets.load_movielens_1m(p)
        return datasets.load_movielens_100k(p)
    if format == "jester":
        return datasets.load_jester(p)
    spec = _columns(columns)
    return datasets.load_csv(p, user=spec["user"], item=spec["item"], rating=spec["rating"],
                             timestamp=spec.get("timestamp"), rating_range=rating_scale)


def calibrate_command(path, *, format: str, columns=None, out=None, n_factors: int = 8,
                      ctr: float = 0.3, exposure: float = 1.0, min_rating=None,
                      rating_scale=None, seed: int = 0, rng=0, markdown: bool = False,
                      stdout=None, stderr=None) -> int:
    """``recloop calibrate PATH``: fit a world, print its fidelity report, save it.

    Parameters
    ----------
    path : str or os.PathLike
        The rating file.
    format : {"movielens", "jester", "csv"}
        See :func:`load_interactions`.
    columns : str, sequence or mapping, optional
        CSV columns (``--columns user,item,rating[,timestamp]``).
    out : str or os.PathLike, optional
        Where to write the fitted world (``.npz``, no pickle); nothing is written otherwise.
    n_factors, ctr, exposure, min_rating : see :func:`simulator.calibrate`.
    rating_scale : (float, float), optional
        CSV only (``--rating-scale LOW HIGH``).
    seed : int, default 0
        Seed of the simulated log of the report.
    rng : None, int, SeedSequence or Generator, default 0
        Calibration and report draws (a fixed default: same file, same world).
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
    import warnings

    import simulator
    from evaluators.datasets import DatasetFormatError

    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr

    def fail(msg) -> int:
        print(f"recloop calibrate: error: {msg}", file=stderr)
        return 2

    try:
        if out is not None:
            out = Path(out)
            if out.suffix != ".npz":
                raise ArgumentValueError("--out", "a path ending in .npz", repr(str(out)))
            parent = out.parent if str(out.parent) else Path(".")
            if parent.exists() and not parent.is_dir():
                raise ArgumentValueError("--out", "a path in a directory", repr(str(out)))
        seed = check_int(seed, "seed", low=0)
        root = as_seed_sequence(rng)
        r_fit, r_report = root.spawn(2)
        data = load_interactions(path, format=format, columns=columns,
                                 rating_scale=rating_scale)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", simulator.CalibrationWarning)
            cal = simulator.calibrate(data, n_factors=n_factors, ctr=ctr, exposure=exposure,
                                      min_rating=min_rating, rng=np.random.default_rng(r_fit))
        report = fidelity_report(cal, seed=seed, rng=r_report)
    except FileNotFoundError as exc:
        return fail(f"{exc.filename or path}: no such file.")
    except IsADirectoryError as exc:
        return fail(f"{exc.filename or path}: is a directory, expected a rating file.")
    except DatasetFormatError as exc:
        return fail(f"{exc} (is it a {format} file?)")
    except (TypeError, ValueError) as exc:
        return fail(f"{path}: {exc}")
    for w in caught:
        if issubclass(w.category, simulator.CalibrationWarning):
            print(f"recloop calibrate: note: {w.message}", file=stderr)
    text = report.to_markdown() if markdown else report.to_text()
    if out is not None:
        try:
            written = cal.save(out)
        except OSError as exc:
            return fail(f"{out}: cannot write the world ({exc.strerror or exc}).")
        text += ("\n\n" if not markdown else "\n") + f"Wrote {written} (sha256 {cal.sha256})"
    print(text, file=stdout)
    return 0
