"""Survivors of ``evaluators/_ope.py``'s mutation runs, two sessions and a third run of the
shared helpers (docs/testing.md): the no-support ``nan`` of every estimator, the refusals and
defaults of the hyper-parameters, the direct method's and the reward model's standard errors
by a plain loop, the one-record warnings, the checks of ``action_dist`` (float32's tolerance
to the bit, row chunks, thread blocks, the first bad record, the argument named on a log with
several positions) and the regression test of the row-sum bug the chunk mutants showed. Each
number is computed by hand or by a loop here; each message is word for word."""

import inspect
import math
import re
import warnings
from statistics import NormalDist

import numpy as np
import pytest

import evaluators
from simulator.logs import BanditLog

N, K = 5, 3


def _log():
    g = np.random.default_rng(0)
    return BanditLog(context=g.normal(size=(N, 2)), action=np.zeros(N, dtype=int),
                     reward=g.random(N), pscore=np.full(N, 0.5), n_actions=K)


def test_an_action_dist_is_refused_at_its_first_bad_record():
    uniform = np.full((N, K), 1 / K)
    bad = uniform.copy()
    bad[3, 1] = np.nan  # records 0-2 are finite: the message must name 3, not 0
    with pytest.raises(ValueError, match=re.escape(
            "`action_dist` must be finite; got nan or inf at record 3.")):
        evaluators.ips(_log(), bad)
    bad = uniform.copy()
    bad[2] = [0.5, 0.5, 0.5]
    with pytest.raises(ValueError, match=re.escape(
            "`action_dist` rows must sum to 1; got 1.5 at record 2.")):
        evaluators.ips(_log(), bad)


# -- the second run's survivors (docs/testing.md): the no-support nan of every estimator, the
# hyper-parameters' refusals and defaults, the direct method's and the model variance's
# standard errors by a plain loop, the one-record warnings --------------------------------

_Z90 = NormalDist().inv_cdf(0.95)


def _q():
    return np.linspace(0.1, 0.9, N * K).reshape(N, K)  # a reward model given as an array


@pytest.mark.parametrize("name", ["ips", "snips", "subgaussian_ips", "direct_method",
                                  "doubly_robust", "sndr", "switch_dr", "dr_os"])
def test_every_estimator_returns_the_no_support_nan_with_its_name_and_level(name):
    never_logged = np.zeros((N, K))
    never_logged[:, 2] = 1.0  # the logs only ever show action 0
    kw = {} if name in ("ips", "snips", "subgaussian_ips") else {"model": _q()}
    with pytest.warns(evaluators.NoSupportWarning) as caught:
        est = getattr(evaluators, name)(_log(), never_logged, ci=0.9, **kw)
    assert [str(w.message) for w in caught] == [
        f"{name}: every importance weight is 0 (the target policy never takes a logged "
        "action); returning nan."]
    assert math.isnan(est.value) and math.isnan(est.stderr)
    assert math.isnan(est.ci_low) and math.isnan(est.ci_high)
    assert (est.n, est.level, est.ess, est.estimator) == (N, 0.9, 0.0, name)


@pytest.mark.parametrize("name", ["direct_method", "switch_dr", "dr_os"])
def test_n_bootstrap_is_refused_below_2_by_name_and_2_is_accepted(name):
    f, d = getattr(evaluators, name), np.full((N, K), 1 / K)
    with pytest.raises(ValueError, match=re.escape(
            "`n_bootstrap` must be an int >= 2; got 1.")):
        f(_log(), d, model=_q(), n_bootstrap=1)
    est = f(_log(), d, model="mean", model_variance="bootstrap", n_bootstrap=2, rng=0)
    assert math.isfinite(est.stderr)


@pytest.mark.parametrize("name", ["sndr", "switch_dr", "dr_os"])
def test_n_folds_reaches_the_cross_fit(name):
    with pytest.raises(ValueError, match=re.escape("`n_folds` must be an int in [2, 5]; got 1.")):
        getattr(evaluators, name)(_log(), np.full((N, K), 1 / K), model="mean", n_folds=1)


def _weighted_log():
    """Six records, actions 0 and 1 of 3 (action 2 never logged), weights 10.5 and 2 under
    the target below (the first between Switch-DR's default tau and 11)."""
    action = np.array([0, 1, 0, 1, 0, 1])
    reward = np.array([1.0, 0.0, 0.5, 1.0, 0.0, 0.25])
    pscore = np.array([2 / 21, 0.5, 0.5, 0.5, 0.5, 0.5])
    return BanditLog(context=np.zeros((6, 1)), action=action, reward=reward, pscore=pscore,
                     n_actions=3)


def _target():
    return np.tile([1.0, 0.0, 0.0], (6, 1))  # always action 0: weights 10.5, 0, 2, 0, 2, 0


def _dr_by_hand(log, pi, q, ws):
    """terms_j = sum_a pi q + ws_j (r_j - q(a_j)), record by record."""
    terms = []
    for j in range(log.n_rounds):
        dm = sum(pi[j, a] * q[j, a] for a in range(log.n_actions))
        terms.append(dm + ws[j] * (log.reward[j] - q[j, log.action[j]]))
    terms = np.array(terms)
    return float(terms.mean()), float(terms.std(ddof=1) / math.sqrt(len(terms)))


def _weights_by_hand(log, pi):
    return np.array([pi[j, log.action[j]] / log.pscore[j] for j in range(log.n_rounds)])


def test_the_defaults_of_tau_and_lambda_are_10_and_100():
    log, pi = _weighted_log(), _target()
    q = np.tile([0.3, 0.6, 0.2], (6, 1))
    w = _weights_by_hand(log, pi)
    assert w[0] == pytest.approx(10.5)  # above tau = 10, below 11
    value, se = _dr_by_hand(log, pi, q, [x if x <= 10 else 0.0 for x in w])
    est = evaluators.switch_dr(log, pi, model=q)
    assert (est.value, est.stderr) == pytest.approx((value, se), rel=1e-12)
    value, se = _dr_by_hand(log, pi, q, [100 * x / (x * x + 100) for x in w])
    est = evaluators.dr_os(log, pi, model=q)
    assert (est.value, est.stderr) == pytest.approx((value, se), rel=1e-12)


def test_an_infinite_tau_or_lambda_is_doubly_robust():
    log, pi = _weighted_log(), _target()
    q = np.tile([0.3, 0.6, 0.2], (6, 1))
    dr = evaluators.doubly_robust(log, pi, model=q)
    for est in (evaluators.switch_dr(log, pi, model=q, tau=math.inf),
                evaluators.dr_os(log, pi, model=q, lambda_=math.inf)):
        assert (est.value, est.stderr) == (dr.value, dr.stderr)


def test_the_default_n_bootstrap_is_100():
    log, pi = _weighted_log(), _target()
    for f in (evaluators.switch_dr, evaluators.dr_os):
        se = [f(log, pi, model="mean", model_variance="bootstrap", rng=1, **kw).stderr
              for kw in ({}, {"n_bootstrap": 100}, {"n_bootstrap": 101})]
        assert se[0] == se[1] != se[2]


def _mean_model_influence(log, g):
    """x_j = d/dw_j sum_k g_k q_k of the "mean" model (whole-log fit, record j's weight),
    HC2-adjusted, record by record: for a seen action ``e_j / sqrt(1 - 1/n_k) / n_k``;
    never logged actions predict the overall mean, whose derivative is ``(r_j - rbar) / n``."""
    r, act, n = log.reward, log.action, log.n_rounds
    counts = [int(np.sum(act == k)) for k in range(log.n_actions)]
    unseen = [k for k in range(log.n_actions) if counts[k] == 0]
    rbar = sum(r) / n
    x = np.zeros(n)
    for j in range(n):
        k = act[j]
        mean_k = sum(r[i] for i in range(n) if act[i] == k) / counts[k]
        if counts[k] > 1:
            x[j] = g[k] * (r[j] - mean_k) / math.sqrt(1 - 1 / counts[k]) / counts[k]
        x[j] += sum(g[u] for u in unseen) * (r[j] - rbar) / n
    return x


def _spread(x):
    """The variance of the sum over records: sum_j (x_j - mean x)^2 * n / (n - 1)."""
    n = len(x)
    return sum((v - sum(x) / n) ** 2 for v in x) * n / (n - 1)


def _mean_model_q(log):
    r, act = log.reward, log.action
    means = [r[act == k].mean() if np.any(act == k) else r.mean() for k in range(log.n_actions)]
    return np.tile(means, (log.n_rounds, 1))


@pytest.mark.parametrize("n", [2, 6])
def test_the_direct_method_with_a_fitted_model_has_its_influence_stderr(n):
    log = _weighted_log() if n == 6 else BanditLog(
        context=np.zeros((2, 1)), action=[0, 0], reward=[1.0, 0.25], pscore=[0.5, 0.5],
        n_actions=3)
    pi = np.tile([0.5, 0.3, 0.2], (n, 1))
    q = _mean_model_q(log)
    terms = np.array([sum(pi[j, a] * q[j, a] for a in range(3)) for j in range(n)])
    value = float(terms.mean())
    g = [sum(pi[j, k] for j in range(n)) / n for k in range(3)]
    x = (terms - value) / n + _mean_model_influence(log, g)
    se = math.sqrt(_spread(x))
    est = evaluators.direct_method(log, pi, model="mean", ci=0.9)
    assert (est.value, est.stderr) == pytest.approx((value, se), rel=1e-12)
    assert (est.ci_low, est.ci_high) == pytest.approx((value - _Z90 * se, value + _Z90 * se),
                                                      rel=1e-12)
    assert (est.n, est.ess, est.estimator) == (n, float(n), "direct_method")


def test_the_direct_method_labels_an_array_model_and_one_fitted_record():
    est = evaluators.direct_method(_log(), np.full((N, K), 1 / K), model=_q())
    assert (est.ess, est.estimator) == (float(N), "direct_method")
    one = BanditLog(context=np.zeros((1, 1)), action=[0], reward=[0.5], pscore=[0.5],
                    n_actions=2)
    with pytest.warns(evaluators.UndefinedStderrWarning):
        est = evaluators.direct_method(one, [[0.5, 0.5]], model="mean")
    assert est.value == 0.5 and math.isnan(est.stderr)
    assert (est.n, est.ess, est.estimator) == (1, 1.0, "direct_method")


@pytest.mark.parametrize("name", ["switch_dr", "dr_os"])
@pytest.mark.parametrize("n_folds", [2, 3])
def test_the_model_variance_is_added_with_the_cross_fitting_factor(name, n_folds):
    """stderr^2 = var(terms) / n + v * n_folds / (n_folds - 1), v the variance of the model's
    part (1/n) sum_j [sum_a pi q - ws_j q(a_j)] over its estimation error, by a loop."""
    log, pi = _weighted_log(), np.tile([0.6, 0.3, 0.1], (6, 1))
    m = evaluators.fit_reward_model(log, "mean", n_folds=n_folds, rng=3)
    w = _weights_by_hand(log, pi)
    ws = ([x if x <= 1.5 else 0.0 for x in w] if name == "switch_dr"
          else [2 * x / (x * x + 2) for x in w])
    value, se0 = _dr_by_hand(log, pi, m.cross_fitted, ws)
    g = [(sum(pi[:, k]) - sum(ws[j] for j in range(6) if log.action[j] == k)) / 6
         for k in range(3)]
    v = _spread(_mean_model_influence(log, g))
    assert v > 0
    se = math.sqrt(se0 ** 2 + v * n_folds / (n_folds - 1))
    kw = {"tau": 1.5} if name == "switch_dr" else {"lambda_": 2.0}
    est = getattr(evaluators, name)(log, pi, model=m, ci=0.9, **kw)
    assert (est.value, est.stderr) == pytest.approx((value, se), rel=1e-12)
    assert (est.ci_low, est.ci_high) == pytest.approx((value - _Z90 * se, value + _Z90 * se),
                                                      rel=1e-12)


@pytest.mark.parametrize("n", [2, 3])
def test_the_model_variance_is_added_from_two_records(n):
    log = BanditLog(context=np.zeros((n, 1)), action=[0, 0, 1][:n], reward=[1.0, 0.25, 0.5][:n],
                    pscore=[0.5] * n, n_actions=2)
    pi = np.tile([0.7, 0.3], (n, 1))
    m = evaluators.fit_reward_model(log, "mean", n_folds=2, rng=0)
    w = _weights_by_hand(log, pi)
    value, se0 = _dr_by_hand(log, pi, m.cross_fitted, w)  # tau = inf: no weight switched off
    g = [(sum(pi[:, k]) - sum(w[j] for j in range(n) if log.action[j] == k)) / n
         for k in range(2)]
    se = math.sqrt(se0 ** 2 + _spread(_mean_model_influence(log, g)) * 2)
    est = evaluators.switch_dr(log, pi, model=m, tau=math.inf)
    assert (est.value, est.stderr) == pytest.approx((value, se), rel=1e-12)
    assert est.stderr > se0


@pytest.mark.parametrize("name", ["ips", "snips", "subgaussian_ips", "direct_method", "sndr",
                                  "switch_dr", "dr_os", "doubly_robust"])
def test_one_record_warns_once_that_the_stderr_is_undefined(name):
    """No numpy warning on the way (a std of one value with ddof=1 would give one)."""
    one = BanditLog(context=np.zeros((1, 1)), action=[0], reward=[0.5], pscore=[0.5],
                    n_actions=2)
    kw = {} if name in ("ips", "snips", "subgaussian_ips") else {"model": np.array([[0.25, 0.75]])}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = getattr(evaluators, name)(one, [[0.5, 0.5]], **kw)
    assert [(w.category, str(w.message)) for w in caught] == [(
        evaluators.UndefinedStderrWarning,
        f"{name}: the standard error needs at least 2 records (the log has 1); stderr and "
        "interval are nan.")]
    # weight 0.5 / 0.5 = 1 (subgaussian: 1 / (1 - lambda + lambda) = 1; DR-OS: 100 / 101);
    # the model's term 0.5 * 0.25 + 0.5 * 0.75 = 0.5 and residual 0.5 - 0.25
    expected = {"direct_method": 0.5, "dr_os": 0.5 + 100 / 101 * 0.25,
                "doubly_robust": 0.75, "sndr": 0.75, "switch_dr": 0.75}.get(name, 0.5)
    assert est.value == expected and est.n == 1
    assert math.isnan(est.stderr) and math.isnan(est.ci_low) and math.isnan(est.ci_high)


def test_direct_method_checks_its_other_arguments_before_action_dist_values():
    """action_dist's values are read once, in the pass that sums pi q: the model, n_bootstrap
    and ci are refused first; the values are then refused with the record."""
    bad = np.full((N, K), 1 / K)
    bad[2] = [0.5, 0.5, 0.5]
    with pytest.raises(ValueError, match=re.escape("`ci` must be")):
        evaluators.direct_method(_log(), bad, model=_q(), ci=1.5)
    with pytest.raises(ValueError, match=re.escape("`n_bootstrap` must be")):
        evaluators.direct_method(_log(), bad, model=_q(), n_bootstrap=1)
    with pytest.raises(ValueError, match=re.escape(
            "`action_dist` rows must sum to 1; got 1.5 at record 2.")):
        evaluators.direct_method(_log(), bad, model=_q())


# -- the checks of action_dist: float32's tolerance to the last bit, float16, positions, the
# messages, row chunks, the first bad record ----------------------------------------------

def _float32_rows(K=4):
    """Row 0 off by exactly the float32 tolerance 8 K eps (= K 2^-20, above 1e-6)."""
    d = np.full((N, K), 1 / K, dtype=np.float32)
    d[0, K - 1] += np.float32(K * 2.0 ** -20)
    return d


@pytest.mark.parametrize("name", ["ips", "direct_method", "doubly_robust"])
def test_a_float32_row_off_by_exactly_its_tolerance_is_accepted_and_read_as_it_is(name):
    log, d = _log4(), _float32_rows()
    assert float(d[0].sum(dtype=np.float64)) == 1 + 2.0 ** -18  # exactly 8 * 4 * 2^-23
    kw = {} if name == "ips" else {"model": np.zeros((N, 4))}
    est = getattr(evaluators, name)(log, d, **kw)
    w = [float(d[j, log.action[j]]) / log.pscore[j] for j in range(N)]
    expected = (sum(wj * r for wj, r in zip(w, log.reward, strict=True)) / N
                if name != "direct_method" else 0.0)
    assert est.value == pytest.approx(expected, rel=1e-12)
    bad = d.copy()
    bad[2, 3] += np.float32(2.0 ** -17)  # twice the tolerance: refused, and record 0 is fine
    got = float(np.float32(1 + 2.0 ** -17))
    with pytest.raises(ValueError, match=re.escape(
            f"`action_dist` rows must sum to 1; got {got} at record 2.")):
        getattr(evaluators, name)(log, bad, **kw)


def _log4():
    g = np.random.default_rng(4)
    return BanditLog(context=g.normal(size=(N, 2)), action=[0, 3, 1, 3, 2], reward=g.random(N),
                     pscore=np.full(N, 0.25), n_actions=4)


def test_a_float16_action_dist_is_checked_in_float64():
    exact = np.tile(np.array([0.25, 0.25, 0.5], dtype=np.float16), (N, 1))
    est = evaluators.ips(_log(), exact)  # action 0 always logged: weight 0.25 / 0.5
    assert est.value == pytest.approx(float(np.mean(0.5 * _log().reward)), rel=1e-12)
    rounded = np.tile(np.array([0.1, 0.2, 0.7], dtype=np.float16), (N, 1))
    # 0.0999755859375 + 0.199951171875 + 0.7001953125: far beyond float64's 1e-6
    with pytest.raises(ValueError, match=re.escape(
            "`action_dist` rows must sum to 1; got 1.0001220703125 at record 0.")):
        evaluators.ips(_log(), rounded)


def test_a_two_slot_log_reads_each_record_at_its_position():
    log = BanditLog(context=np.zeros((4, 1)), action=[0, 1, 1, 0], reward=[1.0, 0.5, 0.0, 1.0],
                    pscore=[0.5] * 4, n_actions=2, position=[0, 1, 0, 1], len_list=2)
    d = np.zeros((4, 2, 2))
    d[:, :, 0] = [0.25, 0.75]  # position 0
    d[:, :, 1] = [1.0, 0.0]  # position 1
    # weights: pi(0 | pos 0) = 0.25, pi(1 | pos 1) = 0, pi(1 | pos 0) = 0.75, pi(0 | pos 1) = 1
    est = evaluators.ips(log, d)
    assert est.value == (0.25 * 1.0 + 0 + 0.75 * 0.0 + 1.0 * 1.0) / 0.5 / 4


def test_the_shape_and_type_refusals_word_for_word():
    log = _log()
    cases = [(np.full((N, K, 2), 1 / K), "`action_dist` of OBP shape (n_rounds, n_actions, "
              f"len_list) must have len_list == 1; got shape ({N}, {K}, 2)."),
             (np.full((N, K - 1), 0.5), "`action_dist` must have shape (n_rounds, n_actions) = "
              f"({N}, {K}) or ({N}, {K}, 1); got ({N}, {K - 1})."),
             (np.full((N, K), "a"), "`action_dist` must be a float array of action "
              "probabilities; got dtype <U1.")]
    for d, message in cases:
        with pytest.raises((TypeError, ValueError), match=re.escape(message)):
            evaluators.ips(log, d)


@pytest.mark.parametrize("name", ["ips", "direct_method", "sndr"])
def test_a_negative_probability_or_a_nan_is_refused_at_its_record(name):
    kw = {} if name == "ips" else {"model": _q()}
    d = np.full((N, K), 1 / K)
    d[2] = [-0.5, 1.5, 0.0]  # sums to 1: only the sign gives it away
    with pytest.raises(ValueError, match=re.escape(
            "`action_dist` must be >= 0; got a negative probability at record 2.")):
        getattr(evaluators, name)(_log(), d, **kw)
    d = np.full((N, K), 1 / K)
    d[0, 2] = np.nan  # the first record only
    with pytest.raises(ValueError, match=re.escape(
            "`action_dist` must be finite; got nan or inf at record 0.")):
        getattr(evaluators, name)(_log(), d, **kw)


def test_every_row_chunk_is_checked_and_summed():
    """2^16 actions: chunks of 4 rows (1 << 18 entries). A bad row in the first chunk is
    refused; the direct method's terms of every chunk equal the row's own sum."""
    n, K_ = 9, 1 << 16
    g = np.random.default_rng(5)
    log = BanditLog(context=np.zeros((n, 1)), action=g.integers(0, K_, n), reward=g.random(n),
                    pscore=np.full(n, 1 / K_), n_actions=K_)
    d = np.full((n, K_), 1 / K_)
    q = g.random((n, K_))
    est = evaluators.direct_method(log, d, model=q)
    terms = [float(np.dot(d[j], q[j])) for j in range(n)]
    assert est.value == pytest.approx(sum(terms) / n, rel=1e-12)
    assert est.stderr == pytest.approx(float(np.std(terms, ddof=1)) / 3, rel=1e-12)
    d[1, 0] += 1.0
    for f in (evaluators.ips, lambda lg, a: evaluators.direct_method(lg, a, model=q)):
        with pytest.raises(ValueError, match=re.escape(
                f"`action_dist` rows must sum to 1; got {1 + 1 + 0.0} at record 1.")):
            f(log, d)


def test_the_model_is_named_at_its_first_non_finite_record():
    q = _q()
    q[3, 1] = np.nan
    q[4, 0] = np.inf
    with pytest.raises(ValueError, match=re.escape(
            "`model` must be finite predicted rewards; got nan or inf at record 3.")):
        evaluators.direct_method(_log(), np.full((N, K), 1 / K), model=q)
    huge = np.full((N, K), 1e308)  # finite predictions whose terms overflow in their sum
    with np.errstate(over="ignore"), pytest.raises(ValueError, match=re.escape(
            "`model` must be finite predicted rewards; got nan or inf at a row.")):
        evaluators.direct_method(_log(), np.full((N, K), 1 / K), model=huge)


# -- the weight transforms at their edges, clip, ess ------------------------------------------

def test_switch_dr_keeps_a_weight_equal_to_tau_and_ess_is_0_when_every_weight_is_off():
    log, pi = _weighted_log(), _target()
    q = np.tile([0.3, 0.6, 0.2], (6, 1))
    w = _weights_by_hand(log, pi)
    assert sorted(set(w)) == [0.0, 2.0, 10.5]
    value, se = _dr_by_hand(log, pi, q, [x if x <= 2.0 else 0.0 for x in w])
    est = evaluators.switch_dr(log, pi, model=q, tau=2.0)
    assert (est.value, est.stderr) == pytest.approx((value, se), rel=1e-12)
    assert est.ess == pytest.approx(16 / 8)  # the two weights of 2: (2 + 2)^2 / (4 + 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        off = evaluators.switch_dr(log, pi, model=q, tau=1.0)
    assert off.ess == 0.0 and off.value == pytest.approx(0.3)  # the DM term alone


@pytest.mark.parametrize("lam", [0.0, 0.5])
def test_dr_os_with_a_small_lambda(lam):
    log, pi = _weighted_log(), _target()  # zero weights on half the records
    q = np.tile([0.3, 0.6, 0.2], (6, 1))
    w = _weights_by_hand(log, pi)
    ws = [lam * x / (x * x + lam) if lam > 0 else 0.0 for x in w]
    value, se = _dr_by_hand(log, pi, q, ws)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = evaluators.dr_os(log, pi, model=q, lambda_=lam)
    assert (est.value, est.stderr) == pytest.approx((value, se), rel=1e-12, abs=1e-15)
    expected_ess = sum(ws) ** 2 / sum(x * x for x in ws) if lam > 0 else 0.0
    assert est.ess == pytest.approx(expected_ess, rel=1e-12)


def test_ess_of_small_weights():
    pi = np.tile([0.1, 0.45, 0.45], (N, 1))  # weights 0.2: sum of squares 0.2 < 1
    est = evaluators.ips(_log(), pi)
    assert est.ess == pytest.approx((N * 0.2) ** 2 / (N * 0.04), rel=1e-12)


def test_clip_accepts_inf_and_small_values_and_refuses_0_by_name():
    log, pi = _weighted_log(), _target()
    w = _weights_by_hand(log, pi)
    assert evaluators.ips(log, pi, clip=math.inf).value == evaluators.ips(log, pi).value
    est = evaluators.ips(log, pi, clip=0.5)
    assert est.value == pytest.approx(
        sum(min(x, 0.5) * r for x, r in zip(w, log.reward, strict=True)) / 6, rel=1e-12)
    with pytest.raises(ValueError, match=re.escape("`clip` must be a number > 0.0; got 0.0.")):
        evaluators.ips(log, pi, clip=0.0)


# -- the model reaches the estimators as asked: rng, per_action, argument order -----------------

class _MeanRegressor:
    """Predicts the mean reward of what it was fitted on."""

    def fit(self, X, y):
        self.mean = float(np.mean(y))
        return self

    def predict(self, X):
        return np.full(len(X), self.mean)


def _log12():
    g = np.random.default_rng(1)
    return BanditLog(context=g.normal(size=(12, 2)), action=g.integers(0, 3, 12),
                     reward=g.random(12), pscore=np.full(12, 1 / 3), n_actions=3)


@pytest.mark.parametrize("name", ["doubly_robust", "sndr", "switch_dr", "dr_os"])
def test_the_cross_fitted_model_follows_rng_and_per_action(name):
    log, pi = _log12(), np.tile([0.5, 0.3, 0.2], (12, 1))
    f = getattr(evaluators, name)
    shared = f(log, pi, model=evaluators.fit_reward_model(log, "mean", rng=7))
    own = f(log, pi, model="mean", rng=7)
    assert (own.value, own.stderr) == (shared.value, shared.stderr)
    # a regressor fitted per action is the per-action mean; jointly, the overall mean
    per = f(log, pi, model=_MeanRegressor(), per_action=True, rng=0)
    assert per.value == pytest.approx(f(log, pi, model="mean", rng=0).value, rel=1e-12)
    joint = f(log, pi, model=_MeanRegressor(), rng=0)
    assert joint.value != pytest.approx(per.value, rel=1e-6)


@pytest.mark.parametrize("name", ["doubly_robust", "sndr", "switch_dr", "dr_os"])
def test_the_dr_family_checks_its_other_arguments_before_action_dist_values(name):
    bad = np.full((N, K), 1 / K)
    bad[2] = [0.5, 0.5, 0.5]
    f = getattr(evaluators, name)
    with pytest.raises(ValueError, match=re.escape("`ci` must be")):
        f(_log(), bad, model=_q(), ci=1.5)
    with pytest.raises(ValueError, match=re.escape(
            "`action_dist` rows must sum to 1; got 1.5 at record 2.")):
        f(_log(), bad, model=_q())


# mutmut's copy of the module calls every function through a trampoline in mutmut's own file,
# a frame between each two of the module's (docs/testing.md): there the frames the stacklevel
# walks are not the caller's, so the line is checked by the ordinary suite (and each mutant of
# _caller_stacklevel planted against it with tools/mutate.py --plant)
_TRAMPOLINED = hasattr(evaluators._ope, "_mutmut_mutated")


def test_the_warnings_point_at_the_callers_line():
    """At the line of the call itself (not a frame further out: the estimators reach the
    warnings through call chains of different depths)."""
    never_logged = np.zeros((N, K))
    never_logged[:, 1] = 1.0
    one = BanditLog(context=np.zeros((1, 1)), action=[0], reward=[0.5], pscore=[0.5],
                    n_actions=2)
    where = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        where.append(inspect.currentframe().f_lineno + 1)
        evaluators.ips(_log(), never_logged)
        where.append(inspect.currentframe().f_lineno + 1)
        evaluators.direct_method(_log(), never_logged, model=_q())
        where.append(inspect.currentframe().f_lineno + 1)
        evaluators.sndr(one, [[0.5, 0.5]], model=np.array([[0.25, 0.75]]))
        where.append(inspect.currentframe().f_lineno + 1)
        evaluators.direct_method(one, [[0.5, 0.5]], model="mean")
    assert [w.category for w in caught] == [evaluators.NoSupportWarning] * 2 + [
        evaluators.UndefinedStderrWarning] * 2
    if not _TRAMPOLINED:
        assert [(w.filename, w.lineno) for w in caught] == [(__file__, line) for line in where]


@pytest.mark.parametrize("name", ["ips", "direct_method"])
def test_a_float32_action_dist_is_summed_in_float32(name):
    """Row 1 is 1 + 2^-18 + 2^-25 exactly, 1 + 2^-18 (the tolerance) in float32: accepted."""
    d = _float32_rows()
    d[1] = [0.25, 0.25, 0.25 + 2.0 ** -18, 0.25 + 2.0 ** -25]
    assert float(d[1].astype(np.float64).sum()) == 1 + 2.0 ** -18 + 2.0 ** -25
    kw = {} if name == "ips" else {"model": np.zeros((N, 4))}
    assert math.isfinite(getattr(evaluators, name)(_log4(), d, **kw).value)


def test_a_large_action_dist_is_checked_in_blocks_on_threads(monkeypatch):
    """2^24 entries (float32, 64 MB): the rows are cut into one block per thread (2 here)."""
    monkeypatch.setattr(evaluators._ope, "n_threads", lambda: 2)
    n = K_ = 1 << 12
    log = BanditLog(context=np.zeros((n, 1)), action=np.arange(n) % K_, reward=np.ones(n),
                    pscore=np.full(n, 1 / K_), n_actions=K_)
    d = np.full((n, K_), 1 / K_, dtype=np.float32)  # 2^-12: exact
    assert evaluators.ips(log, d).value == 1.0
    d[3000, 5] = -1.0  # in the second block
    with pytest.raises(ValueError, match=re.escape(
            "`action_dist` must be >= 0; got a negative probability at record 3000.")):
        evaluators.ips(log, d)


def _float32_rows_at_the_edge():
    """600 float32 rows of 1,000 actions, each pushed to sum to 1 + tol by a matrix-vector
    product over the whole array: in chunks of rows, BLAS gives some of them other last bits."""
    g = np.random.default_rng(0)
    a = g.random((600, 1000)).astype(np.float32)
    a /= a.sum(axis=1, keepdims=True, dtype=np.float64).astype(np.float32)
    tol = 8 * 1000 * float(np.finfo(np.float32).eps)
    ones = np.ones(1000, dtype=np.float32)
    for _ in range(3):
        a[:, 0] += (1 + tol - (a @ ones).astype(np.float64)).astype(np.float32)
    return a, tol


@pytest.mark.parametrize("name", ["ips", "direct_method"])
def test_a_float32_action_dist_at_its_tolerance_gets_one_verdict(name):
    """The regression of a real bug (docs/testing.md): the chunks judged a row by its sum in
    its chunk, the search for the first bad record by its sum over the whole array, and when
    they disagreed the search raised an IndexError instead of naming a record."""
    a, tol = _float32_rows_at_the_edge()
    log = BanditLog(context=np.zeros((600, 1)), action=np.zeros(600, dtype=int),
                    reward=np.ones(600), pscore=np.full(600, 0.5), n_actions=1000)
    kw = {} if name == "ips" else {"model": np.zeros((600, 1000))}
    try:
        getattr(evaluators, name)(log, a, **kw)
    except ValueError as e:  # refused: at a record whose sum the message shows beyond tol
        m = re.fullmatch(r"`action_dist` rows must sum to 1; got (\S+) at record (\d+)\.", str(e))
        assert m is not None, str(e)
        assert abs(float(m.group(1)) - 1) > tol
        # the verdict does not depend on how the rows are cut: the record alone is refused
        j = int(m.group(2))
        with pytest.raises(ValueError, match=re.escape(f"got {m.group(1)} at record 0.")):
            getattr(evaluators, name)(_log_of(log, j), a[j:j + 1], **{
                k: v[j:j + 1] for k, v in kw.items()})


def _log_of(log, j):
    return BanditLog(context=log.context[j:j + 1], action=log.action[j:j + 1],
                     reward=log.reward[j:j + 1], pscore=log.pscore[j:j + 1],
                     n_actions=log.n_actions)


# -- the third run (the validation and shared helpers, 2026-11-28): survivors ---------------

def test_dr_os_at_lambda_0_with_a_fitted_model_is_its_model_part_alone():
    """Every shrunk weight 0 (an array of zeros, one per record): the terms are the cross-fitted
    model's sum_a pi q, the model variance that of (1/n) sum_j sum_a pi q, by a loop."""
    log, pi = _weighted_log(), np.tile([0.6, 0.3, 0.1], (6, 1))
    m = evaluators.fit_reward_model(log, "mean", n_folds=2, rng=3)
    value, se0 = _dr_by_hand(log, pi, m.cross_fitted, [0.0] * 6)
    g = [sum(pi[:, k]) / 6 for k in range(3)]
    se = math.sqrt(se0 ** 2 + _spread(_mean_model_influence(log, g)) * 2)
    est = evaluators.dr_os(log, pi, model=m, lambda_=0.0)
    assert (est.value, est.stderr, est.ess) == pytest.approx((value, se, 0.0), rel=1e-12)


def test_a_two_slot_log_names_the_argument_it_refuses():
    """MIPS checks ``pi_b`` with the same helper: on a log with several positions the refusal
    names ``pi_b``, not ``action_dist``."""
    log = BanditLog(context=np.zeros((4, 1)), action=[0, 1, 1, 0], reward=[1.0, 0.5, 0.0, 1.0],
                    pscore=[0.5] * 4, n_actions=2, position=[0, 1, 0, 1], len_list=2)
    d, E = np.full((4, 2, 2), 0.5), np.array([[0], [1]])
    with pytest.raises(ValueError, match=re.escape(
            "`pi_b` must have shape (n_rounds, n_actions, len_list) = (4, 2, 2); got (4, 2).")):
        evaluators.mips(log, d, action_embeddings=E, pi_b=np.full((4, 2), 0.5))
