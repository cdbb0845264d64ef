"""The off-policy catalogue: each estimator against a plain loop written from its paper's
formula, reward models and cross-fitting, MIPS against exact truth, SLOPE's rule, bad input,
and every estimator through recloop.testing's checker at its defaults."""

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import evaluators
from evaluators import (
    NoSupportWarning,
    UndefinedStderrWarning,
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
from evaluators import _reward_models as rm
from recloop.testing import check_ope_estimator
from recloop.testing.strategies import bandit_problems
from simulator.logs import BanditLog


# -- plain loops from the papers' formulas -------------------------------------------------
def loop_terms(log, pi, q, weight):
    """Per-record DR-type terms sum_a pi q + weight(w) (r - q_a), one record at a time."""
    out = []
    for j in range(log.n_rounds):
        a = int(log.action[j])
        w = pi[j, a] / log.pscore[j]
        dm = sum(pi[j, b] * q[j, b] for b in range(log.n_actions))
        out.append(dm + weight(w) * (log.reward[j] - q[j, a]))
    return out


def ref_sndr(log, pi, q):
    n = log.n_rounds
    ws = [pi[j, log.action[j]] / log.pscore[j] for j in range(n)]
    dm = sum(sum(pi[j, b] * q[j, b] for b in range(log.n_actions)) for j in range(n)) / n
    corr = sum(ws[j] * (log.reward[j] - q[j, log.action[j]]) for j in range(n)) / sum(ws)
    return dm + corr


def ref_mips(log, pi, pi_b, E):
    """w(x, e) = p(e|x, pi) / p(e|x, pi_0), p(e|x, .) summed over the actions of embedding e."""
    total = 0.0
    for j in range(log.n_rounds):
        e = tuple(E[log.action[j]])
        same = [b for b in range(log.n_actions) if tuple(E[b]) == e]
        total += log.reward[j] * sum(pi[j, b] for b in same) / sum(pi_b[j, b] for b in same)
    return total / log.n_rounds


@settings(max_examples=40)
@given(case=bandit_problems(min_rounds=2, max_rounds=30), seed=st.integers(0, 2**32 - 1),
       tau=st.floats(0.0, 5.0), lam=st.floats(0.0, 50.0), lam_sg=st.floats(0.0, 1.0))
def test_estimators_equal_plain_loops(case, seed, tau, lam, lam_sg):
    log, pi = case.log, case.action_dist[:, :, 0]
    q = np.random.default_rng(seed).random((log.n_rounds, log.n_actions))
    if not pi[np.arange(log.n_rounds), log.action].any():
        return  # no support: nan (tested below)
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    w = pi[np.arange(log.n_rounds), log.action] / log.pscore
    close = dict(rel=1e-10, abs=1e-12)
    assert ips(log, pi).value == pytest.approx(mean(list(w * log.reward)), **close)
    assert snips(log, pi).value == pytest.approx(float(np.sum(w * log.reward) / w.sum()), **close)
    assert subgaussian_ips(log, pi, lambda_=lam_sg).value == pytest.approx(
        mean([r * x / (1 - lam_sg + lam_sg * x) for x, r in zip(w, log.reward, strict=True)]),
        **close)
    assert direct_method(log, pi, model=q).value == pytest.approx(
        mean(loop_terms(log, pi, q, lambda x: 0.0)), **close)
    assert doubly_robust(log, pi, model=q).value == pytest.approx(
        mean(loop_terms(log, pi, q, lambda x: x)), **close)
    assert doubly_robust(log, pi, model=q[:, :, None], clip=1.5).value == pytest.approx(
        mean(loop_terms(log, pi, q, lambda x: min(x, 1.5))), **close)
    assert switch_dr(log, pi, model=q, tau=tau).value == pytest.approx(
        mean(loop_terms(log, pi, q, lambda x: x if x <= tau else 0.0)), **close)
    assert dr_os(log, pi, model=q, lambda_=lam).value == pytest.approx(
        mean(loop_terms(log, pi, q, lambda x: lam * x / (x * x + lam) if lam > 0 else 0.0)),
        **close)
    assert sndr(log, pi, model=q).value == pytest.approx(ref_sndr(log, pi, q), **close)
    E = np.random.default_rng(seed).integers(0, 3, size=(log.n_actions, 2))
    assert mips(log, pi, action_embeddings=E).value == pytest.approx(
        ref_mips(log, pi, log.pi_b, E), **close)


@settings(max_examples=25)
@given(case=bandit_problems(min_rounds=3, max_rounds=40), seed=st.integers(0, 2**32 - 1))
def test_slope_follows_its_rule(case, seed):
    log, pi = case.log, case.action_dist[:, :, 0]
    if not pi[np.arange(log.n_rounds), log.action].any():
        return
    values = (np.inf, 8.0, 4.0, 2.0, 1.0, 0.5)
    est = select_estimator(log, pi, values=values, rng=seed)
    # the rule, written from Su et al. (2020) with OBP's constants, one candidate at a time
    from scipy import stats

    n = log.n_rounds
    cands = sorted(values, reverse=True)
    ests = [ips(log, pi, clip=v) for v in cands]
    widths = [stats.t.ppf(0.9, n - 1) * e.stderr for e in ests]
    order = list(np.argsort(widths)[::-1])
    accepted = [order[0]]
    for i in order[1:]:
        if all(abs(ests[i].value - ests[j].value) <= widths[i] + (math.sqrt(6) - 1) * widths[j]
               for j in accepted):
            accepted.append(i)
        else:
            break
    chosen = accepted[-1]
    assert est.selected == cands[chosen] and est.value == ests[chosen].value
    assert est.ci_low <= ests[chosen].ci_low and est.ci_high >= ests[chosen].ci_high
    assert est.estimator == "select_estimator" and est.parameter == "clip"


# -- reward models -------------------------------------------------------------------------
class MeanRegressor:
    """The smallest duck-typed regressor: predicts the mean of what it was fitted on."""

    def __init__(self):
        self.fits = 0

    def fit(self, X, y):
        self.mean_ = float(np.mean(y))
        self.fits += 1
        return self

    def predict(self, X):
        return np.full(len(X), self.mean_)


class LeastSquares:
    """Ordinary least squares with numpy, recording the width of what it was fitted on."""

    def fit(self, X, y):
        self.width_ = X.shape[1]
        self.coef_ = np.linalg.lstsq(np.c_[np.ones(len(X)), X], y, rcond=None)[0]
        return self

    def predict(self, X):
        return np.c_[np.ones(len(X)), X] @ self.coef_


def small_log(seed=0, n=300, K=3):
    g = np.random.default_rng(seed)
    x = g.normal(size=(n, 2))
    a = g.integers(0, K, n)
    r = (g.random(n) < 0.2 + 0.2 * (a == 1) + 0.1 * (x[:, 0] > 0)).astype(float)
    return BanditLog(context=x, action=a, reward=r, pscore=np.full(n, 1 / K), n_actions=K)


def test_per_action_duck_typed_regressor_equals_mean_model():
    log = small_log()
    pi = np.tile([0.2, 0.5, 0.3], (log.n_rounds, 1))
    reg = MeanRegressor()
    for f in (doubly_robust, sndr, switch_dr, dr_os):
        a = f(log, pi, model=reg, per_action=True, rng=5)
        b = f(log, pi, model="mean", rng=5)
        assert a.value == pytest.approx(b.value, rel=1e-12), f.__name__
    assert reg.fits == 0  # the object passed in is never fitted: copies are


def test_joint_regressor_sees_context_and_one_hot_action():
    log = small_log()
    pi = np.tile([0.2, 0.5, 0.3], (log.n_rounds, 1))
    est = doubly_robust(log, pi, model=LeastSquares(), n_folds=3, rng=1)
    assert math.isfinite(est.value) and est.estimator == "doubly_robust"
    # what the joint model fits: [context (2), one_hot(action) (3)]
    from evaluators._reward_models import fit_in_sample, resolve_model

    q = fit_in_sample(log, resolve_model(log, LeastSquares()))
    X = np.c_[log.context, np.eye(3)[log.action]]
    coef = np.linalg.lstsq(np.c_[np.ones(log.n_rounds), X], log.reward, rcond=None)[0]
    x0 = np.r_[1.0, log.context[0], 0, 1, 0]
    assert q[0, 1] == pytest.approx(x0 @ coef, rel=1e-9)


def test_cross_fitting_is_seeded_and_order_free():
    log = small_log(n=200)
    pi = np.tile([0.2, 0.5, 0.3], (log.n_rounds, 1))
    perm = np.random.default_rng(3).permutation(log.n_rounds)
    a = doubly_robust(log, pi, rng=9)
    assert a == doubly_robust(log, pi, rng=9)
    assert doubly_robust(log.take(perm), pi[perm], rng=9).value == pytest.approx(a.value,
                                                                                 rel=1e-12)
    assert doubly_robust(log, pi, rng=10).value != a.value  # the folds do come from rng


def test_sklearn_ridge_where_installed():
    linear_model = pytest.importorskip("sklearn.linear_model")
    log = small_log()
    pi = np.tile([0.2, 0.5, 0.3], (log.n_rounds, 1))
    # scikit-learn's Ridge leaves the intercept unpenalised like "ridge": one per action, equal
    per_action = doubly_robust(log, pi, model=linear_model.Ridge(alpha=1.0), per_action=True,
                               rng=0)
    assert per_action.value == pytest.approx(doubly_robust(log, pi, model="ridge", rng=0).value,
                                             rel=1e-10)
    joint = doubly_robust(log, pi, model=linear_model.Ridge(alpha=1.0), rng=0)
    assert abs(joint.value - per_action.value) < 3 * per_action.stderr


def test_dm_array_is_obp_formula_and_interval_from_contexts():
    log = small_log()
    g = np.random.default_rng(2)
    q = g.random((log.n_rounds, 3))
    pi = g.dirichlet(np.ones(3), size=log.n_rounds)
    est = direct_method(log, pi, model=q[:, :, None])
    terms = np.average(q, weights=pi, axis=1)  # OBP's DirectMethod round rewards
    assert est.value == pytest.approx(terms.mean(), rel=1e-12)
    assert est.stderr == pytest.approx(terms.std(ddof=1) / math.sqrt(log.n_rounds), rel=1e-12)


def test_dm_bootstrap_interval_refits_the_model():
    log = small_log()
    pi = np.tile([0.2, 0.5, 0.3], (log.n_rounds, 1))
    a = direct_method(log, pi, model="mean", model_variance="bootstrap", rng=4)
    assert a == direct_method(log, pi, model="mean", model_variance="bootstrap", rng=4)
    # the bootstrap's stderr: the vectorised refit against refits one resample at a time, on
    # the resamples of the model's own stream
    W = rm.fit_reward_model(log, "mean", rng=4)._resamples(100).astype(np.int64)
    vals = []
    for b in range(100):
        idx = np.repeat(np.arange(log.n_rounds), W[b])
        sub = log.take(idx)
        means = [sub.reward[sub.action == k].mean() for k in range(3)]
        vals.append(np.mean(pi[idx] @ np.array(means)))
    assert a.stderr == pytest.approx(np.std(vals, ddof=1), rel=1e-9)
    ridge_loop = []
    for b in range(100):
        idx = np.repeat(np.arange(log.n_rounds), W[b])
        ridge_loop.append(direct_method(log.take(idx), pi[idx], model="ridge").value)
    assert direct_method(log, pi, model="ridge", model_variance="bootstrap",
                         rng=4).stderr == pytest.approx(np.std(ridge_loop, ddof=1), rel=1e-9)
    reg = direct_method(log, pi, model=MeanRegressor(), per_action=True, n_bootstrap=20, rng=4)
    assert reg.value == pytest.approx(a.value, rel=1e-12) and reg.stderr > 0


# -- degenerate logs -----------------------------------------------------------------------
ALL = [ips, snips, direct_method, doubly_robust, sndr, switch_dr, dr_os, subgaussian_ips, mips,
       select_estimator]


@pytest.mark.parametrize("f", ALL, ids=lambda f: f.__name__)
def test_one_record_log_gives_value_and_nan_stderr_with_reason(f):
    log = BanditLog(context=np.zeros((1, 1)), action=[1], reward=[1.0], pscore=[0.5],
                    n_actions=2, action_embeddings=np.array([[0], [1]]))
    with pytest.warns(UndefinedStderrWarning, match="at least 2 records"):
        est = f(log, np.array([[0.5, 0.5]]), rng=0) if "rng" in f.__code__.co_varnames else \
            f(log, np.array([[0.5, 0.5]]))
    assert math.isfinite(est.value) and math.isnan(est.stderr)
    assert est.estimator == f.__name__


@pytest.mark.parametrize("f", ALL, ids=lambda f: f.__name__)
def test_no_support_is_nan_with_named_warning(f):
    log = BanditLog(context=np.zeros((4, 1)), action=[0, 0, 1, 1], reward=[1.0, 0, 1, 1],
                    pscore=[0.5] * 4, n_actions=3, action_embeddings=np.array([[0], [1], [2]]),
                    pi_b=np.tile([0.5, 0.5, 0.0], (4, 1)))
    with pytest.warns(NoSupportWarning):
        est = f(log, np.tile([0.0, 0.0, 1.0], (4, 1)))
    assert math.isnan(est.value)


def test_float32_action_dist_is_read_without_a_copy():
    log = small_log()
    pi = np.tile(np.float32([0.2, 0.5, 0.3]), (log.n_rounds, 1))
    assert ips(log, pi).value == pytest.approx(ips(log, pi.astype(np.float64)).value, rel=1e-6)


# -- bad input -----------------------------------------------------------------------------
def tiny(**kw):
    return BanditLog(context=np.zeros((2, 1)), action=[0, 1], reward=[1.0, 0.0],
                     pscore=[0.5, 0.25], n_actions=2, **kw)


HALF = np.full((2, 2), 0.5)


@pytest.mark.parametrize("call, exc, msg", [
    pytest.param(lambda: switch_dr(tiny(), HALF, tau=-1.0), ValueError, "`tau` must be",
                 id="tau-negative"),
    pytest.param(lambda: dr_os(tiny(), HALF, lambda_=-1.0), ValueError, "`lambda_` must be",
                 id="lambda-negative"),
    pytest.param(lambda: subgaussian_ips(tiny(), HALF, lambda_=1.5), ValueError,
                 r"`lambda_` must be a finite number in \[0.0, 1.0\]", id="lambda-above-1"),
    pytest.param(lambda: ips(tiny(), np.float32([[0.6, 0.6], [0.5, 0.5]])), ValueError,
                 "rows must sum to 1; got 1.2", id="rows-float32"),
    pytest.param(lambda: ips(tiny(), np.array([[np.inf, 0.0], [0.5, 0.5]])), ValueError,
                 "finite", id="inf"),
    pytest.param(lambda: mips(tiny(), HALF), ValueError, "`action_embeddings` must be",
                 id="no-embeddings"),
    pytest.param(lambda: mips(tiny(), HALF, action_embeddings=np.array([[0.5], [1.0]])),
                 TypeError, "integers", id="float-embeddings"),
    pytest.param(lambda: mips(tiny(), HALF, action_embeddings=np.array([[0], [1], [2]])),
                 ValueError, "shape", id="embeddings-shape"),
    pytest.param(lambda: mips(tiny(), HALF, action_embeddings=np.array([0, 1])), ValueError,
                 "`pi_b` must be", id="non-uniform-without-pi_b"),
    pytest.param(lambda: mips(tiny(), HALF, action_embeddings=np.array([0, 1]),
                              pi_b=np.full((2, 2), 0.5)), ValueError, "agree with `log.pscore`",
                 id="pi_b-disagrees"),
    pytest.param(lambda: direct_method(tiny(), HALF, model=np.zeros((3, 2))), ValueError,
                 "`model` must be an array of shape", id="model-shape"),
    pytest.param(lambda: direct_method(tiny(), HALF, model=np.full((2, 2), np.nan)),
                 ValueError, "finite", id="model-nan"),
    pytest.param(lambda: direct_method(tiny(), HALF, model=3), TypeError, "regressor",
                 id="model-type"),
    pytest.param(lambda: doubly_robust(tiny(), HALF, n_folds=1), ValueError,
                 r"`n_folds` must be an int in \[2, 2\]; got 1", id="n_folds"),
    pytest.param(lambda: direct_method(tiny(), HALF, n_bootstrap=1), ValueError,
                 "`n_bootstrap`", id="n_bootstrap"),
    pytest.param(lambda: select_estimator(tiny(), HALF, values=[1.0]), ValueError,
                 "at least 2", id="slope-values"),
    pytest.param(lambda: select_estimator(tiny(), HALF, estimator="snips"), ValueError,
                 "`estimator` must be one of", id="slope-estimator"),
    pytest.param(lambda: select_estimator(tiny(), HALF, delta=1.0), ValueError, "`delta`",
                 id="slope-delta"),
])
def test_bad_input(call, exc, msg):
    with pytest.raises(exc, match=msg):
        call()


# -- MIPS against the exact truth of a world with embeddings -------------------------------
@pytest.mark.slow
def test_mips_unbiased_when_its_assumption_holds_and_biased_when_not():
    import simulator

    def greedy(config):
        from simulator._bandit import arm_table

        tab = arm_table(config)

        def policy(x, avail):  # the best arm of each context, by the true CTR
            p = np.zeros(avail.shape)
            p[np.arange(len(x)), np.argmax(x @ tab.weights.T + tab.base, axis=1)] = 1.0
            return p
        return policy

    out = {}
    for residual in (0.0, 0.3):
        config = simulator.preset("large_actions", n_arms=200, residual=residual)
        target = greedy(config)
        truth = simulator.static_policy_value(config, target)
        errs, mips_cov = [], 0
        for child in np.random.default_rng(11).spawn(60):
            log, _ = simulator.collect_log(config, 1000, rng=child)
            ad = target(log.context, log.available_mask())
            est = mips(log, ad)
            errs.append(est.value - truth)
            mips_cov += est.covers(truth)
        e = np.array(errs)
        out[residual] = (e.mean(), e.std(ddof=1) / np.sqrt(e.size), mips_cov)
    bias0, se0, cov0 = out[0.0]
    assert abs(bias0) < 4 * se0 and cov0 >= 50  # no direct effect: unbiased, covers
    bias1, se1, _ = out[0.3]
    assert bias1 < -4 * se1  # the target picks high-residual arms; MIPS sees their average


# -- every estimator passes the checker at its defaults ------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("estimator, unbiased", [
    pytest.param(ips, True, id="ips"),
    pytest.param(lambda log, ad: ips(log, ad, clip=2.0), False, id="ips-clip"),
    pytest.param(snips, False, id="snips"),
    pytest.param(direct_method, False, id="direct_method"),
    pytest.param(doubly_robust, True, id="doubly_robust"),
    pytest.param(sndr, False, id="sndr"),
    pytest.param(switch_dr, False, id="switch_dr"),
    pytest.param(dr_os, False, id="dr_os"),
    pytest.param(subgaussian_ips, False, id="subgaussian_ips"),
    pytest.param(mips, True, id="mips"),
    pytest.param(select_estimator, False, id="select_estimator"),
])
def test_catalogue_passes_the_checker_at_defaults(estimator, unbiased):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedStderrWarning)
        report = check_ope_estimator(estimator, unbiased=unbiased, strict=True, rng=2)
    assert report.passed and "coverage" in report.figures
    assert not report.skipped


def test_public_names():
    for name in ("sndr", "switch_dr", "dr_os", "subgaussian_ips", "mips", "select_estimator",
                 "SelectionEstimate", "UndefinedStderrWarning"):
        assert name in evaluators.__all__


def test_large_inputs_give_the_same_bits_on_one_or_two_threads(monkeypatch):
    g = np.random.default_rng(0)
    n, K = 20_000, 1_000  # above the size where the row blocks go to threads
    pi = g.random((n, K), dtype=np.float32)
    pi /= pi.sum(axis=1, keepdims=True)
    q = g.random((n, K), dtype=np.float32)
    log = BanditLog(context=np.zeros((n, 1)), action=g.integers(0, K, n),
                    reward=g.random(n), pscore=np.full(n, 1 / K), n_actions=K)
    out = {}
    for threads in ("1", "2"):
        monkeypatch.setenv("RECLOOP_THREADS", threads)
        out[threads] = (ips(log, pi), doubly_robust(log, pi, model=q), sndr(log, pi, model=q))
        bad = pi.copy()
        bad[n - 5, 3] = -0.1  # in the last row block
        with pytest.raises(ValueError, match=f"negative probability at record {n - 5}"):
            doubly_robust(log, bad, model=q)
        with pytest.raises(ValueError, match=f"negative probability at record {n - 5}"):
            ips(log, bad)
    assert out["1"] == out["2"]


@pytest.mark.parametrize("module", ["evaluators._ope", "evaluators._mips", "evaluators._slope",
                                    "recloop.testing._checks"])
def test_docstring_examples_run(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


class TinyRidge:
    """Ridge with an unpenalised intercept, penalty 1: what model="ridge" fits per action."""

    def fit(self, X, y):
        Z = np.c_[np.ones(len(X)), X]
        pen = np.eye(Z.shape[1])
        pen[0, 0] = 0.0
        self.coef_ = np.linalg.solve(Z.T @ Z + pen, Z.T @ y)
        return self

    def predict(self, X):
        return np.c_[np.ones(len(X)), X] @ self.coef_


@pytest.mark.parametrize("name, reg", [("mean", MeanRegressor), ("ridge", TinyRidge)])
def test_model_variance_vectorised_equals_refit_loop(name, reg):
    log = small_log(n=150)
    g = np.random.default_rng(1)
    pi = g.dirichlet(np.ones(3), size=log.n_rounds)
    ws = g.random(log.n_rounds)
    # the same rng: the same resamples, refitted vectorised or one at a time
    fast = rm.bootstrap_model_part(rm.fit_reward_model(log, name, rng=7), pi, ws, 30)
    loop = rm.bootstrap_model_part(rm.fit_reward_model(log, reg(), per_action=True, rng=7), pi,
                                   ws, 30)
    assert fast == pytest.approx(loop, rel=1e-9, abs=1e-12)


def test_switch_and_shrinkage_intervals_carry_the_model_variance():
    log = small_log()
    pi = np.tile([0.1, 0.1, 0.8], (log.n_rounds, 1))
    q = np.full((log.n_rounds, 3), 0.3)
    for f, kw in ((switch_dr, {"tau": 1.0}), (dr_os, {"lambda_": 1.0})):
        fitted = f(log, pi, rng=0, **kw)
        # the same cross-fitted predictions given as an array: the per-record variance only
        q_cf = rm.fit_reward_model(log, "ridge", rng=0).cross_fitted
        terms_only = f(log, pi, model=q_cf, **kw)
        assert fitted.value == pytest.approx(terms_only.value, rel=1e-12)
        assert fitted.stderr > terms_only.stderr  # the model's share is added
        assert f(log, pi, model=q, **kw).stderr == pytest.approx(
            f(log, pi, model=q, rng=5, **kw).stderr, rel=1e-12)  # arrays: no bootstrap
