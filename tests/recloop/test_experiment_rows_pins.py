"""The evaluation kinds' own summary rows (issue 33): every field against the per-log
estimates, recomputed here by the definitions.

Each kind's cell writes, besides the per-log estimates that ``recloop.summarize`` reads, its
own rows to ``results.csv`` (``Results.frame()``, the report's measurements table): value,
bias, rmse, relative_rmse, sd, coverage, width, nan_rate with their standard errors and
intervals. Earlier tests compared their estimates with ``summarize`` (``test_ope_experiment``)
or with each other (``bias == value - truth``); the standard errors, the intervals' ends, the
spread ``sd`` and the Wilson intervals of coverage and nan rate were never compared with a
formula. Here every row's every field is recomputed from the per-log estimates the cell
emitted (``per_log``), with the statistics module and the Wilson score interval written out:

* value: mean, ``se = stdev / sqrt(n)``, interval mean -/+ z se; bias: mean error, the same
  se (plus the truth's own Monte Carlo variance where the truth is simulated), interval;
* rmse: ``sqrt(mean(err^2))``, se by the delta method ``stdev(err^2) / sqrt(n) / (2 rmse)``;
  relative_rmse: over ``|truth|``; sd: ``stdev``, se ``sd / sqrt(2 (n - 1))``;
* coverage and nan_rate: ``k / n`` with ``sqrt(p (1 - p) / n)`` and Wilson's interval;
  width: mean interval width and its se.
"""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

import agents
import simulator
from recloop.experiments._common import child_rng, name_key, seed_sequence

Z = statistics.NormalDist().inv_cdf(0.975)


def wilson(k, n, z=Z):
    """(p, sqrt(p (1 - p) / n), low, high): Wilson (1927), from its definition."""
    p = k / n
    centre = (k + z * z / 2) / (n + z * z)
    half = z / (n + z * z) * math.sqrt(k * (n - k) / n + z * z / 4)
    return p, math.sqrt(p * (1 - p) / n), max(0.0, centre - half), min(1.0, centre + half)


def mean_se(xs):
    m = statistics.fmean(xs)
    return m, (statistics.stdev(xs) / math.sqrt(len(xs)) if len(xs) > 1 else math.nan)


def rmse_se(errs):
    r = math.sqrt(statistics.fmean([e * e for e in errs]))
    se = statistics.stdev([e * e for e in errs]) / math.sqrt(len(errs)) / (2 * r)
    return r, se


def check(row, estimate, stderr=None, ci=None, *, n=None, truth=None, what=""):
    close = dict(rel=1e-9, abs=1e-12)
    assert row.estimate == pytest.approx(estimate, **close), (what, "estimate")
    if stderr is not None:
        assert row.stderr == pytest.approx(stderr, **close), (what, "stderr")
    if ci is not None:
        assert (row.ci_low, row.ci_high) == pytest.approx(ci, **close), (what, "interval")
    if n is not None:
        assert row.n == n, (what, "n")
    if truth is not None:
        assert row.truth == pytest.approx(truth, **close), (what, "truth")


def by_group(per_log):
    out = {}
    for m in per_log:
        out.setdefault((m.agent, m.variant, m.metric), []).append(m)
    return out


def rows_of(rows):
    return {(r.agent, r.variant, r.metric): r for r in rows}


def static_rows(got, per, key, truth, *, sd=False, coverage_over_all=False):
    """value, bias, rmse, relative_rmse, (sd), coverage, width, nan_rate of the ope and
    slate_ope kinds against the per-log estimates of one (target, estimator)."""
    agent, variant = key
    logs = per[agent, variant, "value"]
    fin = [m for m in logs if math.isfinite(m.estimate)]
    n = len(fin)
    v = [m.estimate for m in fin]
    err = [x - truth for x in v]
    row = lambda metric: got[agent, variant, metric]  # noqa: E731
    p, se_p, lo, hi = wilson(len(logs) - n, len(logs))
    check(row("nan_rate"), p, se_p, (lo, hi), n=len(logs), what="nan_rate")
    m, se = mean_se(v)
    check(row("value"), m, se, (m - Z * se, m + Z * se), n=n, truth=truth, what="value")
    b = statistics.fmean(err)
    check(row("bias"), b, se, (b - Z * se, b + Z * se), n=n, what="bias")
    r, se_r = rmse_se(err)
    check(row("rmse"), r, se_r, n=n, what="rmse")
    check(row("relative_rmse"), r / abs(truth), se_r / abs(truth), n=n, what="relative_rmse")
    if sd:
        s = statistics.stdev(v)
        check(row("sd"), s, s / math.sqrt(2 * (n - 1)), n=n, what="sd")
    with_ci = fin if coverage_over_all else [
        x for x in fin if math.isfinite(x.ci_low) and math.isfinite(x.ci_high)]
    k = sum(x.ci_low <= truth <= x.ci_high for x in with_ci)
    p, se_p, lo, hi = wilson(k, len(with_ci))
    check(row("coverage"), p, se_p, (lo, hi), n=len(with_ci), what="coverage")
    w, se_w = mean_se([x.ci_high - x.ci_low for x in with_ci])
    check(row("width"), w, se_w, n=len(with_ci), what="width")


def test_ope_rows_from_the_per_log_estimates():
    from recloop.experiments._ope import ope

    per = []
    rows = ope("bred_linear", [{"name": "u", "policy": "uniform"},
                               {"name": "eps", "policy": "epsilon_greedy", "epsilon": 0.2}],
               estimators=["ips", "snips", "switch_dr"], n_rounds=200, n_logs=12, rng=5,
               per_log=per.append)
    got, per = rows_of(rows), by_group(per)
    keys = {(a, v) for a, v, _ in per}
    assert len(keys) == 6
    for key in sorted(keys):
        truth = per[key + ("value",)][0].truth
        static_rows(got, per, key, truth)


def test_slate_ope_rows_from_the_per_log_estimates():
    from recloop.experiments import slate_ope

    world = simulator.preset("viadeo_like", n_users=50, n_items=10, campaigns=())
    per = []
    rows = slate_ope(world, click_model="pbm", k=3, n_rounds=200, n_logs=6, rng=2,
                     per_log=per.append)
    got, per = rows_of(rows), by_group(per)
    keys = {(a, v) for a, v, _ in per if v != "on_policy"}
    assert len(keys) >= 3
    for key in sorted(keys):
        truth = per[key + ("value",)][0].truth
        static_rows(got, per, key, truth, sd=True, coverage_over_all=True)


def make_ucb1(rng):
    a = agents.UCB1()
    a.reset(rng)
    return a


def test_bred_vs_replay_rows_from_the_per_log_estimates():
    """The bias's se adds the truth's Monte Carlo variance; the *_at_matches rows score each
    log at its own horizon m (truth V(m) of the same online runs, recomputed here from the
    documented stream: the agent's runs are keyed by its name)."""
    from recloop.experiments._bandit_eval import bred_vs_replay

    per = []
    kw = dict(T=150, n_logs=5, n_bootstrap=4, n_truth_runs=8, rng=4)
    rows = bred_vs_replay("bred_linear", {"ucb1": make_ucb1}, per_log=per.append, **kw)
    got, per = rows_of(rows), by_group(per)
    truth = simulator.online_value(simulator.preset("bred_linear"), make_ucb1, 150, n_runs=8,
                                   rng=child_rng(seed_sequence(4), 5, name_key("ucb1")))
    t_T, se_T = truth.at(150)
    check(got["ucb1", "T", "online_value"], t_T, se_T, (t_T - 1.96 * se_T, t_T + 1.96 * se_T),
          truth=t_T, n=8, what="online_value")
    t_K, se_K = truth.at(15)
    check(got["ucb1", "T_over_K", "online_value"], t_K, se_K, what="online_value T/K")
    for variant in ("replay", "bred", "bred_nojitter", "bred_once"):
        logs = per["ucb1", variant, "value"]
        v = [m.estimate for m in logs]
        n = len(v)
        row = lambda metric, variant=variant: got["ucb1", variant, metric]  # noqa: E731
        m, se = mean_se(v)
        check(row("value"), m, se, (m - Z * se, m + Z * se), n=n, truth=t_T, what=variant)
        for suffix, truths, truth_se in (
                ("", [t_T] * n, se_T),
                ("_at_matches", [x.truth for x in per["ucb1", variant, "value_at_matches"]],
                 None)):
            err = [e - t for e, t in zip(v, truths, strict=True)]
            if truth_se is None:  # the mean of the truth's se at each log's horizon
                truth_se = statistics.fmean(_se_at(truth, x) for x in truths)
            b = statistics.fmean(err)
            se_b = math.sqrt(statistics.variance(err) / n + truth_se ** 2)
            check(row("bias" + suffix), b, se_b, (b - Z * se_b, b + Z * se_b), n=n,
                  truth=0.0, what=(variant, "bias" + suffix))
            r, se_r = rmse_se(err)
            check(row("rmse" + suffix), r, se_r, n=n, what=(variant, "rmse" + suffix))
            k = sum(x.ci_low <= t <= x.ci_high for x, t in zip(logs, truths, strict=True))
            p, se_p, lo, hi = wilson(k, n)
            check(row("coverage" + suffix), p, se_p, (lo, hi), n=n,
                  what=(variant, "coverage" + suffix))
        w, se_w = mean_se([x.ci_high - x.ci_low for x in logs])
        check(row("width"), w, se_w, n=n, what=(variant, "width"))
    # replay's horizon is its used records (the per-log n)
    m, se = mean_se([x.n for x in per["ucb1", "replay", "value"]])
    check(got["ucb1", "replay", "mean_matches"], m, se, n=5, what="mean_matches")


def _se_at(truth, value):
    """The truth's se at the horizon m whose V(m) is ``value`` (a per-log truth V(m)); the
    horizon is the only one with that value here."""
    m = np.flatnonzero(np.asarray(truth.curve) == value) + 1
    assert m.size == 1, (value, m)
    v, se = truth.at(int(m[0]))
    assert v == value
    return se


def test_ope_real_rows_from_the_per_log_estimates():
    """Each log against its own truth (the labels): value (truth: the mean truth), bias and
    relative_error with their se and interval, rmse, coverage (the exact truth has no
    interval: no overlap row), nan_rate."""
    pytest.importorskip("sklearn")
    from recloop.experiments._ope_real import ope_real

    per = []
    rows = ope_real("iris", targets=[{"name": "good", "alpha": 0.9, "C": 1.0}],
                    estimators=["ips", "snips"], n_logs=6, rng=7, per_log=per.append)
    got, per = rows_of(rows), by_group(per)
    for variant in ("ips", "snips"):
        logs = per["good", variant, "value"]
        v, t = [m.estimate for m in logs], [m.truth for m in logs]
        n = len(v)
        row = lambda metric, variant=variant: got["good", variant, metric]  # noqa: E731
        p, se_p, lo, hi = wilson(0, n)
        check(row("nan_rate"), p, se_p, (lo, hi), n=n, what="nan_rate")
        m, se = mean_se(v)
        check(row("value"), m, se, (m - Z * se, m + Z * se), n=n,
              truth=statistics.fmean(t), what="value")
        err = [a - b for a, b in zip(v, t, strict=True)]
        b, se_b = mean_se(err)
        check(row("bias"), b, se_b, (b - Z * se_b, b + Z * se_b), n=n, what="bias")
        check(row("rmse"), math.sqrt(statistics.fmean([e * e for e in err])), n=n, what="rmse")
        rel, se_rel = mean_se([abs(e) / abs(x) for e, x in zip(err, t, strict=True)])
        check(row("relative_error"), rel, se_rel, (rel - Z * se_rel, rel + Z * se_rel), n=n,
              what="relative_error")
        k = sum(x.ci_low <= x.truth <= x.ci_high for x in logs)
        p, se_p, lo, hi = wilson(k, n)
        check(row("coverage"), p, se_p, (lo, hi), n=n, what="coverage")
        assert ("good", variant, "overlap") not in got


def quantile(xs, q):
    """Linear interpolation between order statistics at (n - 1) q."""
    xs = sorted(xs)
    h = (len(xs) - 1) * q
    lo = math.floor(h)
    return xs[lo] + (h - lo) * (xs[min(lo + 1, len(xs) - 1)] - xs[lo])


def test_estimator_selection_rows_from_the_per_log_estimates():
    """The candidates' rmse and bias (with its se), the oracle's and the untuned RMSE, and
    SLOPE's value, rmse, bias, coverage, regret (its bootstrap interval over logs redrawn
    from the documented stream, keyed by the target's name), relative regret and ``within``
    (SLOPE's pick: the candidate whose estimate it returned)."""
    from recloop.experiments._selection import estimator_selection

    per = []
    n_logs, n_resamples = 10, 200
    rows = estimator_selection("bred_linear", family="ips", logging="softmax", beta=-10.0,
                               n_rounds=150, n_logs=n_logs, n_resamples=n_resamples, rng=6,
                               per_log=per.append)
    got, per = rows_of(rows), by_group(per)
    target = next(a for a, _, _ in per)
    cands = sorted({v for a, v, _ in per if v not in ("slope", "twin")},
                   key=lambda s: -float(s.split("=")[1]))  # the experiment's order
    truth = per[target, "slope", "value"][0].truth
    err = {c: [m.estimate - truth for m in per[target, c, "value"]] for c in cands}
    rmse = {}
    for c in cands:
        e = [x for x in err[c] if math.isfinite(x)]
        rmse[c] = math.sqrt(statistics.fmean([x * x for x in e]))
        check(got[target, c, "rmse"], rmse[c], n=len(e), what=(c, "rmse"))
        b, se = mean_se(e)
        check(got[target, c, "bias"], b, se, n=len(e), what=(c, "bias"))
    best = min(cands, key=lambda c: rmse[c])
    check(got[target, "oracle", "rmse"], rmse[best], what="oracle rmse")
    assert got[target, "oracle", "choice"].estimate == float(best.split("=")[1])
    check(got[target, "untuned", "rmse"], rmse[cands[0]], what="untuned rmse")
    slope = per[target, "slope", "value"]
    v = [m.estimate for m in slope]
    n = len(v)
    m_, se = mean_se(v)
    row = lambda metric: got[target, "slope", metric]  # noqa: E731
    check(row("value"), m_, se, (m_ - Z * se, m_ + Z * se), n=n, truth=truth, what="value")
    e_s = [x - truth for x in v]
    r_s = math.sqrt(statistics.fmean([x * x for x in e_s]))
    check(row("rmse"), r_s, n=n, what="slope rmse")
    check(row("bias"), statistics.fmean(e_s), se, n=n, what="slope bias")
    k = sum(x.ci_low <= truth <= x.ci_high for x in slope)
    p, se_p, lo, hi = wilson(k, n)
    check(row("coverage"), p, se_p, (lo, hi), n=n, what="coverage")
    check(row("relative_regret"), r_s / rmse[best] - 1.0, n=n, what="relative_regret")
    gen = child_rng(seed_sequence(6), 4, name_key(target))
    idx = gen.integers(0, n_logs, size=(n_resamples, n_logs))
    boot = [math.sqrt(statistics.fmean([e_s[j] ** 2 for j in r]))
            - math.sqrt(statistics.fmean([err[best][j] ** 2 for j in r])) for r in idx]
    check(row("regret"), r_s - rmse[best], ci=(quantile(boot, 0.025), quantile(boot, 0.975)),
          n=n, what="regret")
    # SLOPE returns its pick's estimate: the candidate with the same value on that log
    # (where several candidates gave that value and they differ in being within 10% of the
    # oracle, the log may count either way)
    sure, either = 0, 0
    for j, x in enumerate(v):
        picks = [c for c in cands if per[target, c, "value"][j].estimate == x]
        assert picks, j
        ok = {rmse[c] <= 1.1 * rmse[best] for c in picks}
        sure += ok == {True}
        either += len(ok) == 2
    k = round(row("within").estimate * n)
    assert sure <= k <= sure + either and either < n // 2, (sure, either, k)
    p, se_p, lo, hi = wilson(k, n)
    check(row("within"), p, se_p, (lo, hi), n=n, what="within")


def test_offline_vs_online_rows_from_the_per_log_estimates():
    """Each evaluator's value per agent (mean over logs, se, interval; truth V(T)) and its
    Kendall tau against the true ranking: the mean over logs, its se and the percentile
    bootstrap interval over logs (redrawn from the documented stream: keyed by the
    evaluator's name and the horizon)."""
    from scipy.stats import kendalltau

    from recloop._selfcheck import FixedArm
    from recloop.experiments._offline_vs_online import offline_vs_online

    agents_ = {"arm0": lambda rng=None: FixedArm(0), "arm5": lambda rng=None: FixedArm(5),
               "ucb1": make_ucb1}
    per = []
    rows = offline_vs_online("bred_linear", agents_, T=150, n_logs=5, n_bootstrap=2,
                             n_truth_runs=4, n_resamples=300, rng=8, per_log=per.append)
    got, per = rows_of(rows), by_group(per)
    names = list(agents_)
    evaluators_ = sorted({v for a, v, m in per if m == "value"})
    truth = {v: [got[a, v, "online_value"].estimate for a in names] for v in ("T", "T_over_K")}
    for e in evaluators_:
        cols = {a: [m.estimate for m in per[a, e, "value"]] for a in names}
        for a in names:
            m, se = mean_se(cols[a])
            check(got[a, e, "value"], m, se, (m - Z * se, m + Z * se), n=5,
                  truth=got[a, "T", "online_value"].estimate, what=(e, a))
        for v_idx, variant in enumerate(("T", "T_over_K")):
            taus = [kendalltau([cols[a][i] for a in names], truth[variant]).statistic
                    for i in range(5)]
            assert [m.estimate for m in per[e, variant, "kendall_tau"]] == pytest.approx(taus)
            if not all(math.isfinite(t) for t in taus):
                continue
            gen = child_rng(seed_sequence(8), 4, name_key(e), v_idx)
            idx = gen.integers(0, 5, size=(300, 5))
            means = [statistics.fmean(taus[j] for j in r) for r in idx]
            m, se = mean_se(taus)
            check(got[e, variant, "kendall_tau"], m, se,
                  (quantile(means, 0.025), quantile(means, 0.975)), n=5, what=(e, variant))


def test_dynamic_news_rows_from_the_per_log_estimates():
    """Windowed BRED: on each log, the mean of the windows' estimates with the standard error
    sqrt(sum of the windows' se^2) / (number of windows) -- from the windows' own estimates
    (per log, variant bred_window_local) -- and the summary rows of replay, bred_window and
    bred_window_local (each window against its local truth) by the definitions."""
    from recloop.experiments._bandit_eval import dynamic_news
    from tests.recloop.test_bandit_eval import DYN

    per = []
    rows = dynamic_news(DYN, {"ucb1": make_ucb1}, T=120, window=40, n_logs=3, n_bootstrap=3,
                        n_truth_runs=4, rng=5, per_log=per.append)
    got, per = rows_of(rows), by_group(per)
    windows = per["ucb1", "bred_window_local", "value"]  # window by window, logs in order
    n_win = len(windows) // 3
    for i, m in enumerate(per["ucb1", "bred_window", "value"]):
        own = [windows[j * 3 + i] for j in range(n_win)]
        assert all(w.log == i for w in own)
        v = statistics.fmean(w.estimate for w in own)
        se = math.sqrt(sum(w.stderr ** 2 for w in own)) / n_win
        assert (m.estimate, m.stderr) == pytest.approx((v, se), rel=1e-12)
        assert (m.ci_low, m.ci_high) == pytest.approx((v - Z * se, v + Z * se), rel=1e-12)
    truth = got["ucb1", "bred_window", "value"].truth
    for variant in ("replay", "bred_window", "bred_window_local"):
        logs = per["ucb1", variant, "value"]
        v = [m.estimate for m in logs]
        t = [m.truth for m in logs]
        n = len(v)
        row = lambda metric, variant=variant: got["ucb1", variant, metric]  # noqa: E731
        m_, se = mean_se(v)
        check(row("value"), m_, se, (m_ - Z * se, m_ + Z * se), n=n, truth=statistics.fmean(t),
              what=(variant, "value"))
        err = [a - b for a, b in zip(v, t, strict=True)]
        r, se_r = rmse_se(err)
        check(row("rmse"), r, se_r, n=n, what=(variant, "rmse"))
        b = statistics.fmean(err)
        assert row("bias").estimate == pytest.approx(b, rel=1e-9, abs=1e-12)
        # the bias's se adds the truth's Monte Carlo variance: at least the spread's part
        assert row("bias").stderr >= math.sqrt(statistics.variance(err) / n) - 1e-15
        k = sum(x.ci_low <= x.truth <= x.ci_high for x in logs)
        p, se_p, lo, hi = wilson(k, n)
        check(row("coverage"), p, se_p, (lo, hi), n=n, what=(variant, "coverage"))
        w, se_w = mean_se([x.ci_high - x.ci_low for x in logs])
        check(row("width"), w, se_w, n=n, what=(variant, "width"))
    assert truth == per["ucb1", "replay", "value"][0].truth
