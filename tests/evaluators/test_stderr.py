"""Standard errors and intervals, not only values: every estimator's stderr, interval and
effective sample size against its formula written as a plain loop; then, over many logs of a
problem whose truth is known exactly, the Monte Carlo spread of the estimates against the mean
reported standard error and the coverage of the intervals, both tested two-sided (slow)."""

import math
import statistics

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import evaluators
from evaluators import (
    direct_method,
    doubly_robust,
    dr_os,
    ips,
    mips,
    select_estimator,
    sndr,
    snips,
    subgaussian_ips,
    switch_dr,
)
from recloop.testing._problems import random_bandit_problem
from recloop.testing.strategies import bandit_problems
from simulator.logs import BanditLog
from tests.evaluators.test_slate_ope import slate_problems


def z_of(level):
    return statistics.NormalDist().inv_cdf(0.5 + level / 2)


def loop_mean_se(terms):
    """mean and sqrt(sum (t - mean)^2 / (n - 1)) / sqrt(n), one term at a time."""
    n = len(terms)
    mean = sum(terms) / n
    return mean, math.sqrt(sum((t - mean) ** 2 for t in terms) / (n - 1)) / math.sqrt(n)


def loop_ess(ws):
    """(sum w)^2 / sum w^2, and 0 when every weight is 0 (or its square underflows)."""
    s2 = sum(w * w for w in ws)
    return sum(ws) ** 2 / s2 if s2 > 0 else 0.0


def same(est, value, se, level, *, ess=None, rel=1e-9):
    """est carries ``value``, ``se`` and the normal interval value -/+ z se at ``level``."""
    close = dict(rel=rel, abs=1e-12)
    assert est.value == pytest.approx(value, **close)
    assert est.stderr == pytest.approx(se, **close)
    assert est.ci_low == pytest.approx(value - z_of(level) * se, **close)
    assert est.ci_high == pytest.approx(value + z_of(level) * se, **close)
    assert est.level == level
    if ess is not None:
        assert est.ess == pytest.approx(ess, **close)


# -- static estimators: plain loops --------------------------------------------------------
@settings(max_examples=30)
@given(case=bandit_problems(min_rounds=2, max_rounds=25), seed=st.integers(0, 2**32 - 1),
       clip=st.floats(0.5, 4.0), tau=st.floats(0.0, 4.0), lam=st.floats(0.0, 20.0),
       lam_sg=st.floats(0.0, 1.0), level=st.sampled_from([0.8, 0.95]))
def test_static_estimators_stderr_equals_the_formula(case, seed, clip, tau, lam, lam_sg, level):
    log, pi = case.log, case.action_dist[:, :, 0]
    n, K = log.n_rounds, log.n_actions
    A, R = [int(a) for a in log.action], [float(r) for r in log.reward]
    w = [pi[j, A[j]] / log.pscore[j] for j in range(n)]
    if not any(w):
        return  # no support: nan with a warning (test_ope_catalogue)
    q = np.random.default_rng(seed).random((n, K))
    dm = [sum(pi[j, b] * q[j, b] for b in range(K)) for j in range(n)]
    e = [R[j] - q[j, A[j]] for j in range(n)]
    kw = dict(ci=level)

    def check(est, weights, terms):
        v, se = loop_mean_se(terms)
        same(est, v, se, level, ess=loop_ess(weights))

    check(ips(log, pi, **kw), w, [w[j] * R[j] for j in range(n)])
    wc = [min(x, clip) for x in w]
    check(ips(log, pi, clip=clip, **kw), wc, [wc[j] * R[j] for j in range(n)])
    wsg = [x / (1 - lam_sg + lam_sg * x) for x in w]
    check(subgaussian_ips(log, pi, lambda_=lam_sg, **kw), wsg, [wsg[j] * R[j] for j in range(n)])
    check(doubly_robust(log, pi, model=q, clip=clip, **kw), wc,
          [dm[j] + wc[j] * e[j] for j in range(n)])
    wsw = [x if x <= tau else 0.0 for x in w]
    check(switch_dr(log, pi, model=q, tau=tau, **kw), wsw,
          [dm[j] + wsw[j] * e[j] for j in range(n)])
    wos = [lam * x / (x * x + lam) if lam > 0 else 0.0 for x in w]
    check(dr_os(log, pi, model=q, lambda_=lam, **kw), wos,
          [dm[j] + wos[j] * e[j] for j in range(n)])
    v, se = loop_mean_se(dm)
    same(direct_method(log, pi, model=q, **kw), v, se, level, ess=n)
    # SNIPS, delta method: sqrt(sum_j w_j^2 (r_j - V)^2) / sum_j w_j
    V = sum(w[j] * R[j] for j in range(n)) / sum(w)
    same(snips(log, pi, **kw), V, math.sqrt(sum((w[j] * (R[j] - V)) ** 2 for j in range(n)))
         / sum(w), level, ess=loop_ess(w))
    # SNDR: psi_j = dm_j + w_j (e_j - R) / mean(w), R the normalised correction
    wbar = sum(w) / n
    Rc = sum(w[j] * e[j] for j in range(n)) / sum(w)
    psi = [dm[j] + w[j] * (e[j] - Rc) / wbar for j in range(n)]
    _, se = loop_mean_se(psi)
    same(sndr(log, pi, model=q, **kw), sum(dm) / n + Rc, se, level, ess=loop_ess(w))
    # MIPS: w_j = p(e_j | pi) / p(e_j | pi_b), summed over the actions sharing the embedding
    E = np.random.default_rng(seed).integers(0, 2, size=(K, 1))
    wm = []
    for j in range(n):
        group = [b for b in range(K) if E[b, 0] == E[A[j], 0]]
        wm.append(sum(pi[j, b] for b in group) / sum(log.pi_b[j, b] for b in group))
    check(mips(log, pi, action_embeddings=E, **kw), wm, [wm[j] * R[j] for j in range(n)])


@settings(max_examples=20)
@given(case=bandit_problems(min_rounds=3, max_rounds=30), level=st.sampled_from([0.8, 0.95]))
def test_slope_reports_the_chosen_stderr_and_the_union_of_accepted_intervals(case, level):
    log, pi = case.log, case.action_dist[:, :, 0]
    if not pi[np.arange(log.n_rounds), log.action].any():
        return
    values = (np.inf, 8.0, 4.0, 2.0, 1.0, 0.5)
    est = select_estimator(log, pi, values=values, delta=0.2, ci=level, rng=0)
    ests = [ips(log, pi, clip=v, ci=level) for v in values]  # already in decreasing order
    t = stats.t.ppf(0.8, log.n_rounds - 1)
    widths = [t * e.stderr for e in ests]
    assert est.candidate_values == pytest.approx([e.value for e in ests], rel=1e-12)
    assert est.candidate_widths == pytest.approx(widths, rel=1e-9)
    order = list(np.argsort(widths)[::-1])  # ties broken as OBP (and select_estimator) do
    accepted = [order[0]]
    for i in order[1:]:
        if all(abs(ests[i].value - ests[j].value) <= widths[i] + (math.sqrt(6) - 1) * widths[j]
               for j in accepted):
            accepted.append(i)
        else:
            break
    chosen = ests[accepted[-1]]
    assert est.value == chosen.value and est.stderr == chosen.stderr and est.ess == chosen.ess
    assert est.ci_low == min(ests[i].ci_low for i in accepted)
    assert est.ci_high == max(ests[i].ci_high for i in accepted)
    assert est.level == level and est.n == log.n_rounds


# -- slate estimators: plain loops ---------------------------------------------------------
@settings(max_examples=30)
@given(problem=slate_problems(), level=st.sampled_from([0.8, 0.95]))
def test_slate_estimators_stderr_equals_the_formula(problem, level):
    log, t, pi, obs = problem
    n, k = log.action.shape
    terms = {"sips": [], "iips": [], "rips": [], "cdr": []}
    wpos = {"iips": [], "rips": []}
    for i in range(n):
        terms["sips"].append(t["cascade"][i, -1] / log.pscore[i] * sum(log.reward[i]))
        wi = [t["ipos"][i, j] / log.pscore_item_position[i, j] for j in range(k)]
        wr = [t["cascade"][i, j] / log.pscore_cascade[i, j] for j in range(k)]
        wpos["iips"].append(wi)
        wpos["rips"].append(wr)
        terms["iips"].append(sum(wi[j] * log.reward[i, j] for j in range(k)))
        terms["rips"].append(sum(wr[j] * log.reward[i, j] for j in range(k)))
        term, w_prev = 0.0, 1.0
        for j in range(k):
            q = t["q"][i, j]
            q_exp = sum(t["dist"][i, j, a] * q[a] for a in range(log.n_items))
            term += wr[j] * (log.reward[i, j] - q[log.action[i, j]]) + w_prev * q_exp
            w_prev = wr[j]
        terms["cdr"].append(term)

    def min_ess(ws):  # the smallest effective sample size over positions
        return min(loop_ess([w[j] for w in ws]) for j in range(k))

    got = {"sips": evaluators.slate_ips(log, t["cascade"][:, -1], ci=level),
           "iips": evaluators.independent_ips(log, t["ipos"], ci=level),
           "rips": evaluators.reward_interaction_ips(log, t["cascade"], ci=level),
           "cdr": evaluators.cascade_dr(log, t["cascade"], t["dist"], reward_model=t["q"],
                                        ci=level)}
    for key, est in got.items():
        if math.isnan(est.value):
            continue  # no support (test_slate_ope)
        v, se = loop_mean_se(terms[key])
        same(est, v, se, level, ess=min_ess(wpos[key]) if key in wpos else None)
    w_s = [t["cascade"][i, -1] / log.pscore[i] for i in range(n)]
    if any(w_s):
        assert got["sips"].ess == pytest.approx(loop_ess(w_s), rel=1e-9)


@settings(max_examples=20)
@given(problem=slate_problems(uniform=True), level=st.sampled_from([0.8, 0.95]))
def test_pseudoinverse_stderr_equals_the_formula(problem, level):
    log, t, pi, obs = problem
    n, k = log.action.shape
    # the weights of the general pseudo-inverse (Swaminathan et al. 2017, enumerated and
    # inverted by numpy in test_slate_ope), then the plain mean and stderr of w_i R_i
    from tests.evaluators.test_slate_ope import general_pi_weights

    w = general_pi_weights(log, pi.marginals(obs))
    terms = [w[i] * sum(log.reward[i]) for i in range(n)]
    est = evaluators.pseudoinverse(log, t["marg"], ci=level)
    if math.isnan(est.value):
        return
    v, se = loop_mean_se(terms)
    same(est, v, se, level, rel=1e-7)


# -- Monte Carlo: the spread of the estimates against the reported stderr, two-sided ----------
N_LOGS, N_ROUNDS = 2000, 200
RATIO_BAND = (0.95, 1.05)
ALPHA = 1e-3


def _power_note():
    """The power of the two checks below against a standard error off by 10% (the figures
    quoted in docs/testing.md), for an estimator whose estimates are normal: the ratio
    sd(estimates) / mean(stderr) has relative standard deviation ~ 1 / sqrt(2 N_LOGS)
    (0.0158), and coverage is binomial."""
    s = 1 / math.sqrt(2 * N_LOGS)
    out = {}
    for f in (0.9, 1.1):  # stderr 10% too small / too large
        r = 1 / f
        inside = stats.norm.cdf((RATIO_BAND[1] / r - 1) / s) - stats.norm.cdf(
            (RATIO_BAND[0] / r - 1) / s)
        cover = 2 * stats.norm.cdf(z_of(0.95) * f) - 1
        lo, hi = stats.binom.ppf(ALPHA / 2, N_LOGS, 0.95), stats.binom.isf(ALPHA / 2, N_LOGS,
                                                                             0.95)
        passes = stats.binom.cdf(hi, N_LOGS, cover) - stats.binom.cdf(lo - 1, N_LOGS, cover)
        out[f] = (1 - inside, 1 - passes)
    false_alarm = 1 - (stats.norm.cdf((RATIO_BAND[1] - 1) / s)
                       - stats.norm.cdf((RATIO_BAND[0] - 1) / s))
    return out, false_alarm


@pytest.fixture(scope="module")
def many_logs():
    """N_LOGS logs of N_ROUNDS records of one problem (softmax logger, importance weights up
    to 2.4), drawn as one sample and cut in pieces, with the target and a reward model that
    is off by 0.1 everywhere (so that the doubly robust corrections matter)."""
    problem = random_bandit_problem(7, n_actions=4, dim=2, logging="softmax")
    big, ad = problem.sample(N_LOGS * N_ROUNDS, 1)
    q = problem.expected_reward(big.context) + 0.1
    logs = []
    for m in range(N_LOGS):
        s = slice(m * N_ROUNDS, (m + 1) * N_ROUNDS)
        log = BanditLog(context=big.context[s], action=big.action[s], reward=big.reward[s],
                        pscore=big.pscore[s], n_actions=4, pi_b=big.pi_b[s])
        logs.append((log, ad[s, :, 0], q[s]))
    return problem.value, logs


# the stderr code paths: the mean of i.i.d. terms (IPS; DR with its model terms; a biased one,
# clipped IPS), and the delta method of the self-normalised ones (SNIPS, SNDR); the other
# estimators share the first (their formulas are the plain-loop tests above)
@pytest.mark.slow
@pytest.mark.parametrize("name, estimator, unbiased", [
    pytest.param("ips", lambda log, a, q: ips(log, a), True, id="ips"),
    pytest.param("snips", lambda log, a, q: snips(log, a), True, id="snips"),
    pytest.param("doubly_robust", lambda log, a, q: doubly_robust(log, a, model=q), True,
                 id="doubly_robust"),
    pytest.param("sndr", lambda log, a, q: sndr(log, a, model=q), True, id="sndr"),
    pytest.param("ips-clip", lambda log, a, q: ips(log, a, clip=1.5), False, id="ips-clip"),
])
def test_reported_stderr_matches_the_spread_over_logs(many_logs, name, estimator, unbiased):
    truth, logs = many_logs
    r = np.array([[e.value, e.stderr, e.ci_low, e.ci_high]
                  for e in (estimator(*x) for x in logs)])
    value, se, lo, hi = r.T
    ratio = value.std(ddof=1) / se.mean()
    # the two-sided calibration check: a stderr 10% too small or too large leaves the band
    assert RATIO_BAND[0] < ratio < RATIO_BAND[1], (name, ratio)
    # coverage, both ways: of the truth (unbiased, or consistent with an O(1/n) bias far below
    # the stderr), else of the estimator's own expectation (the mean of its estimates)
    target = truth if unbiased else value.mean()
    covered = int(np.sum((lo <= target) & (target <= hi)))
    p = stats.binomtest(covered, N_LOGS, 0.95, alternative="two-sided").pvalue
    assert p > ALPHA, (name, covered / N_LOGS, p)


def test_the_monte_carlo_checks_have_the_power_they_claim():
    """A 10% error in the standard error leaves the ratio band at least 99% of the time; the
    ratio of a right stderr stays inside it 99.8% of the time (normal estimates)."""
    power, false_alarm = _power_note()
    assert power[0.9][0] > 0.99 and power[1.1][0] > 0.99
    assert false_alarm < 0.002
