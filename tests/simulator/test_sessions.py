"""The session process: the discretised log-normal law, schedules, the censored fit and the
continuation of observed sessions."""

import math

import numpy as np
import pytest
from scipy.stats import norm

from simulator import SessionLaw, SessionSchedule
from simulator import _sessions as S

LAW = SessionLaw(count_mu=0.4, count_sigma=1.3, gap_mu=1.5, gap_sigma=0.9, later_weight=0.3,
                 arrival_rate=2.0)


def test_the_law_is_a_distribution_and_its_draws_follow_it():
    n = np.arange(1, 200_000)
    pmf = np.exp(S._log_pmf(n, 0.4, 1.3))
    assert pmf.sum() == pytest.approx(1.0, abs=1e-6)
    # P(X = n) = Phi((log n - mu) / s) - Phi((log(n - 1) - mu) / s), by scipy's norm
    for k in (1, 2, 7):
        lo = 0.0 if k == 1 else norm.cdf((math.log(k - 1) - 0.4) / 1.3)
        assert pmf[k - 1] == pytest.approx(norm.cdf((math.log(k) - 0.4) / 1.3) - lo)
    assert math.exp(S._log_sf(5, 0.4, 1.3)) == pytest.approx(1 - pmf[:5].sum())
    rng = np.random.default_rng(0)
    x = S._draw(0.4, 1.3, rng.random(200_000))
    for k in (1, 2, 5):
        assert np.mean(x == k) == pytest.approx(pmf[k - 1], abs=4 * math.sqrt(0.25 / 2e5))
    # given X > 3: the law's tail, renormalised
    y = S._draw(0.4, 1.3, rng.random(200_000), above=np.full(200_000, 3))
    assert y.min() == 4
    assert np.mean(y == 4) == pytest.approx(pmf[3] / pmf[3:].sum(), abs=0.005)
    assert S._draw(0.4, 1.3, rng.random(1000), cap=3).max() == 3


def test_a_drawn_schedule_starts_at_arrival_and_stays_in_the_horizon():
    rng = np.random.default_rng(1)
    arrival = rng.integers(0, 50, 300)
    s = S.draw_schedule(LAW, arrival, 60, rng)
    assert isinstance(s, SessionSchedule) and s.n_users == 300 and s.n_ticks == 60
    assert np.all(s.tick < 60)
    first = np.full(300, 10**9)
    np.minimum.at(first, s.user, s.tick)
    assert np.array_equal(first, arrival)  # everyone arrives, on its tick
    order = np.lexsort((s.tick, s.user))
    u, t, w = s.user[order], s.tick[order], s.weight[order]
    head = np.r_[True, u[1:] != u[:-1]]
    assert np.all(w[head] == 1.0) and np.all(w[~head] == LAW.later_weight)
    assert np.all(np.diff(t)[~head[1:]] >= 1)  # one session per tick at most
    # expected events of a user spread over its sessions by weight
    ev = s.events(np.full(300, 12.0))
    assert np.bincount(s.user, ev, minlength=300) == pytest.approx(np.full(300, 12.0))


def test_a_schedule_is_validated():
    with pytest.raises(ValueError, match=r"`sessions.tick` must be in \[0, 9\]; got 10"):
        SessionSchedule(user=[0], tick=[10], weight=[1.0], n_users=1, n_ticks=10)
    with pytest.raises(ValueError, match="`sessions` must be one session per"):
        SessionSchedule(user=[0, 0], tick=[3, 3], weight=[1.0, 1.0], n_users=1, n_ticks=10)
    with pytest.raises(ValueError, match="`sessions.weight` must be finite and > 0"):
        SessionSchedule(user=[0], tick=[3], weight=[0.0], n_users=1, n_ticks=10)
    with pytest.raises(ValueError, match="`count_sigma` must be"):
        SessionLaw(count_sigma=0.0)


def test_the_censored_likelihood_equals_its_formula_written_out():
    # user A: ticks 2, 5, 6 (gaps 3, 1), horizon 10: P(G=3) P(G=1) [P(N=3) + P(N>3) P(G>3)]
    # user B: tick 9 only: P(N=1) + P(N>1) P(G>0) = 1 (always possible)
    mn, sn, mg, sg = 0.3, 1.1, 1.0, 0.7

    def pmf(k, m, s):
        return norm.cdf((math.log(k) - m) / s) - (norm.cdf((math.log(k - 1) - m) / s)
                                                  if k > 1 else 0.0)

    def sf(k, m, s):
        return 1.0 if k < 1 else norm.sf((math.log(k) - m) / s)

    a = pmf(3, mg, sg) * pmf(1, mg, sg) * (pmf(3, mn, sn) + sf(3, mn, sn) * sf(3, mg, sg))
    b = pmf(1, mn, sn) + sf(1, mn, sn) * sf(0, mg, sg)
    theta = np.array([mn, math.log(sn), mg, math.log(sg)])
    got = S._session_nll(theta, np.array([3.0, 1.0]), np.array([3.0, 0.0]),
                         np.array([1.0, 3.0]), np.array([1.0, 1.0]))
    assert got == pytest.approx(-math.log(a * b), rel=1e-12)


@pytest.mark.slow
def test_the_fit_recovers_a_known_law():
    rng = np.random.default_rng(2)
    law = SessionLaw(count_mu=-0.3, count_sigma=1.6, gap_mu=1.8, gap_sigma=1.0,
                     later_weight=0.4)
    n_ticks = 200
    s = S.draw_schedule(law, rng.integers(0, n_ticks, 6000), n_ticks, rng)
    # 40 interactions per user, split over its sessions in proportion to their weights
    share = s.events(np.full(6000, 40.0))
    count = rng.poisson(share) + 1  # every session holds at least one
    fit = S.fit_session_law(np.repeat(s.user, count), np.repeat(s.tick, count), n_ticks,
                            n_users=6000)
    assert fit.converged and fit.n_users == 6000 and fit.n_sessions == len(s)
    got = fit.law
    assert got.later_weight == pytest.approx(law.later_weight, rel=0.1)
    assert got.count_mu == pytest.approx(law.count_mu, abs=0.15)
    assert got.count_sigma == pytest.approx(law.count_sigma, abs=0.15)
    assert got.gap_mu == pytest.approx(law.gap_mu, abs=0.1)
    assert got.gap_sigma == pytest.approx(law.gap_sigma, abs=0.1)
    assert got.arrival_rate == pytest.approx(6000 / n_ticks)


def test_a_log_without_returns_cannot_fit_gaps():
    with pytest.raises(ValueError, match="at least one user is active on two distinct ticks"):
        S.fit_session_law([0, 1, 2], [0, 3, 5], 10)


def test_the_continuation_is_the_law_conditioned_on_what_was_seen():
    """Users of the law, cut at tick `start`: those seen once, at their arrival, come back
    after `start` with the probability that continue_schedule gives them (Bayes on the
    censoring), and their later sessions are kept as observed."""
    rng = np.random.default_rng(3)
    n, start, n_ticks = 60_000, 30, 60
    full = S.draw_schedule(LAW, np.full(n, 20), n_ticks, rng)
    seen = full.tick < start
    counts = np.bincount(full.user[seen], minlength=n)
    once = counts == 1  # seen once before the cut: at tick 20
    later = np.bincount(full.user[~seen], minlength=n) > 0
    empirical = later[once].mean()
    m = int(once.sum())
    cont = S.continue_schedule(LAW, np.arange(m), np.full(m, 20), m, start, n_ticks, rng)
    again = np.bincount(cont.user[cont.tick >= start], minlength=m) > 0
    # the probability the function draws from, and its draws, against the process itself
    c = start - 1 - 20
    stop = math.exp(S._log_pmf(1, LAW.count_mu, LAW.count_sigma))
    more = math.exp(S._log_sf(1, LAW.count_mu, LAW.count_sigma)
                    + S._log_sf(c, LAW.gap_mu, LAW.gap_sigma))
    se = math.sqrt(0.25 / m)
    assert more / (stop + more) == pytest.approx(empirical, abs=4 * se)
    assert again.mean() == pytest.approx(empirical, abs=6 * se)
    # observed sessions are kept, with their weights; new ones weigh `later_weight`
    old = cont.tick < start
    assert np.all(cont.tick[old] == 20) and np.all(cont.weight[old] == 1.0)
    assert np.all(cont.weight[~old] == LAW.later_weight)
