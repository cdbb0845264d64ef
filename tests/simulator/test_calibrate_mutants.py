"""simulator/_calibrate.py's likelihoods against forms written out here: the survivors of their
mutation run (issue 33 §2, docs/testing.md).

Every number is recomputed by a loop over ticks, items, users or observations (the exposure
integral with births, deaths and a CTR half-life; the decay likelihood's normalising sums; the
first adoption of each item), or by an independent solver (SciPy's ``brentq`` for the level
shift, a grid for the decay rate); the decay estimate's "no decline" rule is met on samples on
each side of each of its thresholds. Tiny inputs: the whole file runs in about a second.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import optimize
from scipy.special import expit

from simulator import _calibrate

# -- the exposure integral ------------------------------------------------------------------
#: five items; item 2 has the top appeal (the shares are computed relative to it)
APPEAL = np.array([0.4, -1.3, 3.0, 0.9, -0.2])
EXPOSURE = 0.7
N_TICKS = 8
#: alive on [birth, death): nobody at tick 0, only item 0 (not the top one: Z < 1) at tick 1,
#: only item 2 (the top one: Z = 1 exactly) at ticks 5 and 6, items 2 and 3 at tick 7
BIRTH = np.array([1, 2, 3, 7, 2])
DEATH = np.array([4, 5, 8, 8, 4])
#: a time profile that sums to 1 and weighs every tick differently
PHI = np.arange(1.0, N_TICKS + 1) / (N_TICKS * (N_TICKS + 1) / 2)


def kappa_loop(appeal, exposure, phi, birth, death, halflife):
    """``kappa_i = sum_t phi(t) alive_i(t) d_i(t) / Z(t)``, ``Z(t) = sum_{j alive at t}
    exp(exposure a_j)``, ``d_i(t) = 2^(-(t - birth_i) / halflife)`` (1 without a half-life),
    alive on ``[birth, death)`` (from 0, to the horizon, when not given); a tick where no item
    is alive adds nothing. ``phi`` one profile (n_ticks,) or one row per user."""
    n_items, n_ticks = appeal.size, phi.shape[-1]
    b = [0] * n_items if birth is None else [int(v) for v in birth]
    d = [n_ticks] * n_items if death is None else [int(v) for v in death]
    rows = np.atleast_2d(phi)
    out = np.zeros((rows.shape[0], n_items))
    for u, row in enumerate(rows):
        for t in range(n_ticks):
            alive = [j for j in range(n_items) if b[j] <= t < d[j]]
            z = sum(math.exp(exposure * appeal[j]) for j in alive)
            for i in alive:
                decay = 1.0 if halflife is None else 2.0 ** (-(t - b[i]) / halflife)
                out[u, i] += row[t] * decay / z
    return out if np.ndim(phi) == 2 else out[0]


@pytest.mark.parametrize("birth, death, halflife", [
    (None, None, None),  # one exposure share over the whole horizon (the closed form)
    (BIRTH, None, None), (None, None, 2.5), (BIRTH, DEATH, None), (BIRTH, None, 2.5),
    (BIRTH, DEATH, 2.5), (None, DEATH, 3.0)])
def test_exposure_integral_is_the_sum_over_ticks_of_the_alive_items_decayed_shares(
        birth, death, halflife):
    got = _calibrate._exposure_integral(APPEAL, EXPOSURE, PHI, birth, death, halflife)
    want = kappa_loop(APPEAL, EXPOSURE, PHI, birth, death, halflife)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)


@pytest.mark.parametrize("birth, death, halflife", [
    (BIRTH, DEATH, 2.5), (BIRTH, None, None), (None, None, 4.0)])
def test_exposure_integral_per_user_sums_each_users_own_time_profile(birth, death, halflife):
    """Sessions: one profile per user (a sparse row summing to 1), ``kappa_ui`` the same sum
    over that user's ticks; the users weigh the empty tick 0 and the one-item ticks 1 and 5."""
    w = np.array([[1.0, 1, 0, 0, 0, 1, 0, 0],
                  [0.0, 0, 3, 0, 1, 0, 0, 2],
                  [2.0, 1, 1, 1, 1, 1, 1, 1]])
    phi = sp.csr_array(w / w.sum(axis=1, keepdims=True))
    got = _calibrate._exposure_integral(APPEAL, EXPOSURE, phi, birth, death, halflife)
    want = kappa_loop(APPEAL, EXPOSURE, phi.toarray(), birth, death, halflife)
    assert got.shape == (3, APPEAL.size)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)


@pytest.mark.parametrize("per_user", [False, True], ids=["one profile", "per user"])
def test_a_tick_where_no_item_is_alive_adds_nothing_whatever_memory_numpy_hands_out(per_user):
    """Tick 0 (nobody alive, ``Z = 0``) weighs in the profile; its share must be exactly 0,
    not 0 times whatever an unwritten array holds. numpy reuses freed small blocks: blocks
    of the tick count's size filled with nan and freed just before the call make any value
    left unwritten show (and numpy's warning of a ``where`` without ``out`` is an error)."""
    phi = sp.csr_array(np.tile(PHI, (2, 1))) if per_user else PHI
    want = kappa_loop(APPEAL, EXPOSURE, phi.toarray() if per_user else phi, BIRTH, DEATH, 2.5)
    blocks = [np.full(N_TICKS, np.nan) for _ in range(8)]
    del blocks
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = _calibrate._exposure_integral(APPEAL, EXPOSURE, phi, BIRTH, DEATH, 2.5)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)


# -- the decay rate's likelihood -----------------------------------------------------------
def nll(beta, values, spans):
    """``-log L(beta) = sum_j [beta v_j + log sum_{t < s_j} exp(-beta t)]``, the normalising
    sums written out term by term (one per distinct span)."""
    out = beta * float(np.sum(values))
    for s, count in zip(*np.unique(spans, return_counts=True), strict=True):
        out += count * math.log(float(np.exp(-beta * np.arange(int(s))).sum()))
    return out


def search_end(spans):
    """The end of the rate's search interval: ``50 / mean span`` (at least 1)."""
    return 50.0 / max(1.0, float(np.mean(spans)))


def best_rate(values, spans):
    """The likelihood's maximiser over [0, 50 / mean span]: a grid of 401 points, then a
    bounded search between the best one's neighbours to 1e-12."""
    hi = search_end(spans)
    grid = np.linspace(0.0, hi, 401)
    f = [nll(b, values, spans) for b in grid]
    j = int(np.argmin(f))
    res = optimize.minimize_scalar(lambda b: nll(b, values, spans), method="bounded",
                                   bounds=(grid[max(j - 1, 0)], grid[min(j + 1, 400)]),
                                   options={"xatol": 1e-12})
    return float(res.x)


def expected_counts(beta, span, n):
    """(values, spans): ages 0 .. span - 1 repeated in proportion to the truncated
    exponential of rate beta (about n observations, rounded), each on the span ``span``: a
    sample whose maximum-likelihood rate is near beta."""
    w = np.exp(-beta * np.arange(span))
    values = np.repeat(np.arange(span, dtype=float), np.rint(n * w / w.sum()).astype(int))
    return values, np.full(values.size, span)


def rule(values, spans):
    """(the likelihood's gain over the uniform law at the best rate, that rate times the
    longest span): the decay is kept when the gain is at least 2 and the product 0.25."""
    beta = best_rate(values, spans)
    return nll(0.0, values, spans) - nll(beta, values, spans), beta * float(np.max(spans))


# samples on each side of each threshold of the "no decline" rule (gain 2, reach 0.25), and
# of the thresholds a mutant would move them to (gain 3, reach 1.25)
GAIN_2_TO_3 = (np.array([4.0, 0, 5, 4, 6]), np.array([25, 6, 21, 17, 28]))
GAIN_BELOW_2 = (np.array([1.0, 5, 2]), np.array([15, 15, 15]))
REACH_BELOW_1_25 = expected_counts(0.08, 10, 4000)
REACH_BELOW_0_25 = expected_counts(0.02, 10, 20000)
#: long spans: a search interval of 0.05, its precision 5e-8
LONG_SPANS = expected_counts(0.004, 1000, 3000)


def test_the_rule_samples_lie_where_they_are_meant_to():
    gain, reach = rule(*GAIN_2_TO_3)
    assert 2.0 < gain < 3.0 and reach > 1.25
    gain, reach = rule(*GAIN_BELOW_2)
    assert gain < 2.0 and reach > 1.25
    gain, reach = rule(*REACH_BELOW_1_25)
    assert gain > 3.0 and 0.25 < reach < 1.25
    gain, reach = rule(*REACH_BELOW_0_25)
    assert gain > 3.0 and reach < 0.25


@pytest.mark.parametrize("sample", [GAIN_2_TO_3, REACH_BELOW_1_25, LONG_SPANS],
                         ids=["gain", "reach", "long spans"])
def test_a_decline_past_both_thresholds_is_the_maximum_of_the_likelihood(sample):
    """The rate to the search's precision, 1e-6 of its interval (two such steps here), and
    no warning: the options given are the bounded search's own."""
    values, spans = sample
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = _calibrate._decay_mle(values, spans)
    assert abs(got - best_rate(values, spans)) <= 2e-6 * search_end(spans)


@pytest.mark.parametrize("sample", [GAIN_BELOW_2, REACH_BELOW_0_25], ids=["gain", "reach"])
def test_a_decline_short_of_either_threshold_is_no_decay(sample):
    assert _calibrate._decay_mle(*sample) == 0.0


def test_fewer_than_two_values_or_only_spans_of_one_are_no_decay():
    """One adoption at age 0 of 100 ticks would pass the likelihood rule (a gain of log 100):
    "no decay" by the count rule; two of them are a decline (a gain of 2 log 100)."""
    one, two = (np.array([0.0]), np.array([100])), (np.array([0.0, 0.0]), np.array([100, 100]))
    assert nll(0.0, *one) - nll(search_end(one[1]), *one) > 2.0
    assert _calibrate._decay_mle(*one) == 0.0
    assert _calibrate._decay_mle(*two) > 0.0
    assert _calibrate._decay_mle(np.zeros(5), np.ones(5, dtype=int)) == 0.0


@pytest.mark.parametrize("spans", [[2] * 10, [2, 2, 2, 1], [10, 20, 30]])
def test_every_adoption_at_age_zero_gives_the_end_of_the_search(spans):
    """Spans of 2 carry a decline too (each observation at age 0 of two); a likelihood that
    grows without bound is maximised at the search's end, 50 / mean span (1 at the least):
    to 1e-4 of it, the likelihood being flat there to 1e-12 (rates of 25 or 29 for the
    end 28.6 of the spans 2, 2, 2, 1 would be other search intervals)."""
    spans = np.array(spans)
    values = np.zeros(spans.size)
    hi = search_end(spans)
    assert nll(0.0, values, spans) - nll(hi, values, spans) > 2.0
    assert _calibrate._decay_mle(values, spans) == pytest.approx(hi, rel=1e-4)


# -- births and half-lives from the ticks ---------------------------------------------------
def time_effects_loop(ticks, items, n_ticks, n_items):
    """Births (an item never adopted: the last tick), the activity rate from the ticks on the
    whole horizon, and the CTR rate from the ages of every adoption after the item's first
    (the first: its earliest tick, and among adoptions at that tick the one listed first),
    each on its own item's span, less the activity rate; rates to half-lives, 0 to None.
    The rates are the module's ``_decay_mle`` (pinned above), fed the same observations in
    the same order."""
    birth = [min((int(t) for t, i in zip(ticks, items, strict=True) if i == j),
                 default=n_ticks - 1) for j in range(n_items)]
    ages, spans = [], []
    for k, (t, i) in enumerate(zip(ticks, items, strict=True)):
        first = min(m for m in range(ticks.size) if items[m] == i and ticks[m] == birth[i])
        if k != first:
            ages.append(float(t - birth[i]))
            spans.append(n_ticks - birth[i])
    beta_a = _calibrate._decay_mle(ticks.astype(float), np.full(ticks.size, n_ticks))
    beta_c = max(0.0, _calibrate._decay_mle(np.array(ages), np.array(spans)) - beta_a)
    return (birth, None if beta_a == 0 else math.log(2) / beta_a,
            None if beta_c == 0 else math.log(2) / beta_c)


@pytest.fixture(scope="module")
def adoptions():
    """30 ticks, 7 items (item 6 never adopted); activity declining over the horizon, the
    adoptions of each item declining with its age; item 0's first tick shared by two of its
    adoptions, the earliest item listed last."""
    rng = np.random.default_rng(7)
    n_ticks, birth = 30, [3, 0, 9, 14, 5, 21]
    ticks, items = [], []
    for i, b in enumerate(birth):
        w = np.exp(-0.25 * np.arange(n_ticks - b)) * np.exp(-0.03 * (b + np.arange(n_ticks - b)))
        ages = rng.choice(n_ticks - b, 25, p=w / w.sum())
        ages[:2] = 0
        ticks += list(b + ages)
        items += [i] * 25
    order = rng.permutation(len(ticks))
    return np.array(ticks)[order], np.array(items)[order], n_ticks, 7


def test_time_effects_are_the_decay_rates_of_the_ticks_and_of_the_ages_after_birth(adoptions):
    ticks, items, n_ticks, n_items = adoptions
    birth, activity, ctr = _calibrate._time_effects(ticks, items, n_ticks, n_items)
    want_birth, want_activity, want_ctr = time_effects_loop(ticks, items, n_ticks, n_items)
    assert birth.dtype == np.int64 and birth.tolist() == want_birth
    assert want_activity is not None and want_ctr is not None  # both rates found
    assert activity == want_activity and ctr == want_ctr


# -- the level shift -------------------------------------------------------------------------
LEVEL_CASES = {
    "normal scores": (np.random.default_rng(0).normal(0.0, 1.0, 50), 0.3),
    # convex part of the mean: Newton's first step overshoots far beyond the bracket
    "low scores": (np.full(5, -10.0), 0.5),
    # expit(s) == 1.0 at the start: a zero slope, then bisection
    "saturated scores": (np.array([40.0, 45.0]), 0.5),
    "ctr near 1": (np.random.default_rng(1).normal(0.0, 3.0, 50), 0.999),
    "ctr near 0": (np.random.default_rng(2).normal(0.0, 3.0, 50), 1e-4),
    "spread scores": (np.array([-30.0, 0.0, 30.0]), 0.6),
}


@pytest.mark.parametrize("case", list(LEVEL_CASES))
def test_level_shift_solves_mean_expit_equals_ctr(case):
    """The shift ``c`` with ``mean(expit(s + c)) = ctr``, against SciPy's ``brentq`` on the
    same equation: to 1e-9, and the mean to 1e-11."""
    s, ctr = LEVEL_CASES[case]
    c = _calibrate._level_shift(s, ctr)
    ref = optimize.brentq(lambda v: float(np.mean(expit(s + v))) - ctr, -200.0, 200.0,
                          xtol=1e-14, rtol=1e-15, maxiter=500)
    assert abs(c - ref) <= 1e-9 * max(1.0, abs(ref)), (c, ref)
    assert abs(float(np.mean(expit(s + c))) - ctr) <= 1e-11


def test_level_shift_returns_newtons_root_when_found(monkeypatch):
    """At most 15 passes over the scores on each case (5 to 13 here; the docstring says
    "about 6"), counted by the calls of ``expit``: a Newton step landing on the current
    point (``f == 0``, which has just become the bracket's end) is the root, not a reason
    to restart from the bracket's middle (that took 50 passes on the normal scores)."""
    passes = []
    monkeypatch.setattr(_calibrate, "expit", lambda v: passes.append(1) or expit(v))
    for s, ctr in LEVEL_CASES.values():
        passes.clear()
        c = _calibrate._level_shift(s, ctr)
        assert len(passes) <= 15 and abs(float(np.mean(expit(s + c))) - ctr) <= 1e-11


@pytest.mark.parametrize("s, ctr, end", [(np.zeros(3), float(expit(-60.0)), -50.0),
                                         (np.full(3, -30.0), float(expit(30.0)), 50.0)])
def test_level_shift_stops_at_its_bracket(s, ctr, end):
    """A root beyond the bracket [-50, 50] (at -60 and at 60 here): the bracket's end."""
    assert _calibrate._level_shift(s, ctr) == pytest.approx(end, abs=1e-9)


# -- the negative log-likelihood -------------------------------------------------------------
def nll_cells(X, alpha, x, a, f, o):
    """Cell by cell: ``Lambda = exp(alpha_u + o_ui) expit(a_i + x_u . f_i)``, the NLL
    ``-log(1 - exp(-Lambda))`` where ``X_ui`` is 1, ``Lambda`` where it is 0."""
    n_u, n_i = X.shape
    out = np.empty((n_u, n_i))
    for u in range(n_u):
        for i in range(n_i):
            oi = o[u, i] if o.ndim == 2 else o[i]
            lam = math.exp(alpha[u] + oi) * expit(a[i] + float(x[u] @ f[i]))
            out[u, i] = -math.log(1.0 - math.exp(-lam)) if X[u, i] else lam
    return out


@pytest.fixture(scope="module")
def small_fit():
    """4 users x 5 items, 2 factors; the last user and the last item have no observed cell
    (``bincount`` must still give them a row and a column), per-user offsets."""
    rng = np.random.default_rng(3)
    X = np.array([[1, 0, 1, 0, 0], [0, 1, 1, 0, 0], [1, 1, 0, 1, 0], [0, 0, 0, 0, 0]], float)
    alpha, a = rng.normal(0, 1, 4), rng.normal(-1, 1, 5)
    x, f = rng.normal(0, 1, (4, 2)), rng.normal(0, 1, (5, 2))
    return X, alpha, x, a, f, rng.normal(0, 1, 5), rng.normal(0, 1, (4, 5))


@pytest.mark.parametrize("per_user", [False, True], ids=["offsets", "per-user offsets"])
def test_blocked_nll_per_user_and_item_is_the_cell_sum(small_fit, per_user):
    X, alpha, x, a, f, o1, o2 = small_fit
    o = o2 if per_user else o1
    model = _calibrate._Model(sp.csr_array(X), k=2, exposure=0.7, ctr=0.3, reg=0.5,
                              phi=np.full(3, 1 / 3), birth=None, ctr_halflife=None)
    model.rows = 1  # one block per user
    rows, cols, rowd = model.nll(alpha, x, a, f, o)
    cells = nll_cells(X, alpha, x, a, f, o)
    np.testing.assert_allclose(rows, cells.sum(axis=1), rtol=1e-12)
    np.testing.assert_allclose(cols, cells.sum(axis=0), rtol=1e-12)
    # rowd: the users' sums of D = exp(o) expit(s) (Lambda without the activity)
    d = np.exp(o2 if per_user else o1[None, :]) * expit(a[None, :] + x @ f.T)
    np.testing.assert_allclose(rowd, d.sum(axis=1), rtol=1e-12)


@pytest.mark.parametrize("per_user", [False, True], ids=["offsets", "per-user offsets"])
def test_nll_reference_takes_a_dense_or_a_sparse_matrix(small_fit, per_user):
    X, alpha, x, a, f, o1, o2 = small_fit
    o = o2 if per_user else o1
    want = nll_cells(X, alpha, x, a, f, o)
    for matrix in (X, sp.csr_array(X)):
        np.testing.assert_allclose(_calibrate._nll_reference(matrix, alpha, x, a, f, o), want,
                                   rtol=1e-12)
