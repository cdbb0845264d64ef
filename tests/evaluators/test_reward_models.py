"""One reward model per log (issue 26 s1, s2, s4): ``fit_reward_model`` shared by every
model-based estimator and target gives the estimates of each estimator fitting its own model
with the same stream; the analytic model variance is the exact first-order effect of each
record on a linear model (the infinitesimal jackknife of the weighted refit) and agrees with
the bootstrap, its reference; a model fitted on another log is refused."""

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import evaluators
from evaluators import (
    RewardModel,
    cascade_dr,
    direct_method,
    doubly_robust,
    dr_os,
    fit_reward_model,
    select_estimator,
    sndr,
    switch_dr,
)
from evaluators import _reward_models as rm
from simulator.logs import BanditLog


def linear_log(seed, n=300, K=3, d=2, unseen=False):
    """Rewards linear in the context per action (plus noise); with ``unseen`` the last
    action is never logged."""
    g = np.random.default_rng(seed)
    x = g.normal(size=(n, d))
    a = g.integers(0, K - 1 if unseen else K, n)
    theta = g.normal(size=(K, d))
    r = 0.3 + np.einsum("nd,nd->n", x, theta[a]) * 0.2 + g.normal(0, 0.3, n)
    return BanditLog(context=x, action=a, reward=r, pscore=np.full(n, 1 / K), n_actions=K)


def targets(log, seed=0, n=2):
    g = np.random.default_rng(seed)
    return [g.dirichlet(np.ones(log.n_actions), size=log.n_rounds) for _ in range(n)]


MODEL_BASED = [direct_method, doubly_robust, sndr, switch_dr, dr_os]


# -- the shared model against each estimator fitting its own -------------------------------------
@pytest.mark.parametrize("model", ["ridge", "mean"])
def test_shared_model_equals_each_estimator_fitting_its_own(model):
    log = linear_log(0)
    shared = fit_reward_model(log, model, rng=11)
    for pi in targets(log):  # one model for every target and estimator
        for f in MODEL_BASED:
            own = f(log, pi, model=model, rng=11)
            assert f(log, pi, model=shared) == own, f.__name__
        for f in (direct_method, switch_dr, dr_os):  # the bootstrap reference shares too
            own = f(log, pi, model=model, model_variance="bootstrap", n_bootstrap=30, rng=11)
            assert f(log, pi, model=shared, model_variance="bootstrap",
                     n_bootstrap=30) == own, f.__name__
        for family in ("doubly_robust", "switch_dr", "dr_os"):
            assert select_estimator(log, pi, estimator=family, model=shared) == \
                select_estimator(log, pi, estimator=family, model=model, rng=11)


def test_shared_predictions_are_the_per_fold_fits():
    log = linear_log(1, n=120)
    m = fit_reward_model(log, "ridge", n_folds=3, rng=4)
    assert m.folds.shape == (120,) and set(m.folds.tolist()) == {0, 1, 2}
    # each fold predicted by a ridge fitted on the other folds (numpy's lstsq on the augmented
    # system, the intercept unpenalised), every action
    for f in range(3):
        train, test = m.folds != f, m.folds == f
        for k in range(3):
            rows = train & (log.action == k)
            Z = np.c_[np.ones(rows.sum()), log.context[rows]]
            aug = np.r_[Z, np.c_[np.zeros((2, 1)), np.eye(2)]]
            coef = np.linalg.lstsq(aug, np.r_[log.reward[rows], 0, 0], rcond=None)[0]
            expect = np.c_[np.ones(test.sum()), log.context[test]] @ coef
            np.testing.assert_allclose(m.cross_fitted[test, k], expect, rtol=1e-9, atol=1e-12)
    pi = targets(log)[0]
    assert doubly_robust(log, pi, model=m).value == doubly_robust(log, pi,
                                                                  model=m.cross_fitted).value
    assert direct_method(log, pi, model=m).value == direct_method(log, pi,
                                                                  model=m.in_sample).value
    np.testing.assert_allclose(m.in_sample, np.c_[np.ones(120), log.context] @ m.coef.T,
                               rtol=1e-12, atol=1e-14)


@settings(max_examples=60)
@given(n=st.integers(1, 80), K=st.integers(1, 5), d=st.integers(1, 3),
       n_folds=st.integers(2, 4), seed=st.integers(0, 2**32 - 1), unseen=st.booleans())
def test_fast_ridge_equals_the_per_fold_reference(n, K, d, n_folds, seed, unseen):
    """The shared model's ridge fits (per-(fold, action) Grams, batched solves, BLAS
    predictions) against the plain per-fold refits of ``cross_fit`` / ``fit_in_sample``,
    empty folds and actions without records included."""
    log = linear_log(seed, n=n, K=K, d=d, unseen=unseen and K > 1)
    n_folds = min(n_folds, max(2, n))  # at most one fold per record (2 for one record)
    m = fit_reward_model(log, "ridge", n_folds=n_folds, rng=seed)
    spec = rm.resolve_model(log, "ridge")
    np.testing.assert_allclose(m.cross_fitted, rm.cross_fit(log, spec, m.folds, n_folds),
                               rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(m.in_sample, rm.fit_in_sample(log, spec), rtol=1e-9,
                               atol=1e-12)


def test_refit_is_the_same_specification_on_another_log():
    log, other = linear_log(2), linear_log(3, n=200)
    m = fit_reward_model(log, "mean", n_folds=3, rng=0)
    again = m.refit(other, rng=5)
    assert isinstance(again, RewardModel) and again.n_rounds == 200
    np.testing.assert_array_equal(
        again.cross_fitted, fit_reward_model(other, "mean", n_folds=3, rng=5).cross_fitted)


def test_predictions_are_read_only_and_computed_once():
    log = linear_log(4, n=50)
    m = fit_reward_model(log, rng=0)
    assert m.cross_fitted is m.cross_fitted and not m.cross_fitted.flags.writeable
    with pytest.raises(ValueError):
        m.in_sample[0, 0] = 1.0


# -- the analytic model variance ------------------------------------------------------------------
@st.composite
def linear_problems(draw):
    n = draw(st.integers(8, 60))
    K = draw(st.integers(1, 4))
    d = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**32 - 1))
    unseen = K > 1 and draw(st.booleans())
    log = linear_log(seed, n=n, K=K, d=d, unseen=unseen)
    g = np.random.default_rng(seed + 1)
    pi = g.dirichlet(np.ones(K), size=n)
    ws = g.random(n) * draw(st.sampled_from([0.0, 1.0, 5.0]))
    return log, pi, ws, draw(st.sampled_from(rm.MODELS))


def reference_influence(log, kind):
    """Record by record, from the normal equations of its action: ``d_j`` (the derivative of
    its action's coefficients by its weight, ``H^-1 z_j e_j``), its leverage ``h_j = z_j'
    H^-1 z_j``, and ``rc_j = (r_j - rbar) / n`` (the derivative of the overall mean that
    actions without records get)."""
    n = log.n_rounds
    Z = np.c_[np.ones(n), log.context] if kind == "ridge" else np.ones((n, 1))
    pen = np.eye(Z.shape[1]) * (1.0 if kind == "ridge" else 0.0)
    pen[0, 0] = 0.0
    d, h = np.zeros_like(Z), np.zeros(n)
    for j in range(n):
        mine = log.action == log.action[j]
        H = Z[mine].T @ Z[mine] + pen
        coef = np.linalg.solve(H, Z[mine].T @ log.reward[mine])
        Hz = np.linalg.solve(H, Z[j])
        d[j] = Hz * (log.reward[j] - Z[j] @ coef)
        h[j] = Z[j] @ Hz
    return Z, d, h, (log.reward - log.reward.mean()) / n


def influence_gradients(log, pi, ws, kind):
    """:func:`reference_influence`'s ``Z, d, h, rc``, the actions ``seen`` in the log, and
    the gradients by the coefficients of the model part of DR-type estimates (target ``pi``,
    the records' weights ``ws``) and of the direct method."""
    n, K = log.n_rounds, log.n_actions
    Z, d, h, rc = reference_influence(log, kind)
    seen = np.bincount(log.action, minlength=K) > 0
    g_part = (pi.T @ Z - np.array([(ws[log.action == k, None] * Z[log.action == k]).sum(0)
                                   for k in range(K)])) / n
    return Z, d, h, rc, seen, g_part, pi.T @ Z / n


def hc2_variance(log, d, h, rc, seen, g, y):
    """``n`` times the variance of the records' first-order effects ``y + d_j . g[a_j]``,
    each coefficient part over ``sqrt(1 - h_j)`` (HC2), the unseen actions' mean term
    ``rc`` added."""
    scale = np.where(h < 1 - 1e-12, 1 / np.sqrt(np.maximum(1 - h, 1e-12)), 0.0)
    x = y + np.einsum("jp,jp->j", d, g[log.action]) * scale + g[~seen, 0].sum() * rc
    return np.var(x, ddof=1) * log.n_rounds


@settings(max_examples=40)
@given(linear_problems())
def test_analytic_variance_is_the_leverage_adjusted_sandwich_of_the_derivatives(case):
    """The analytic variance is ``n/(n-1) sum_j (x_j - xbar)^2`` over the records'
    first-order effects on the statistic, each coefficient part over ``sqrt(1 - h_j)``
    (HC2). Checked in two steps: the record-by-record reference's derivatives against
    central differences of the bootstrap's own weighted refit (``_refit``), for the model
    part of DR-type estimates and for the direct method, actions without records included;
    then the estimator's variances against the reference's."""
    log, pi, ws, kind = case
    n = log.n_rounds
    m = fit_reward_model(log, kind, rng=0)
    Z, d, h, rc, seen, g_part, g_dm = influence_gradients(log, pi, ws, kind)
    terms = np.einsum("jk,jk->j", pi, m.in_sample)

    def coef(w):
        return rm._refit(log, kind, w[None, :], Z)[0]

    def part(w):  # sum_j [sum_a pi q - ws_j q(x_j, a_j)] / n, the records' terms fixed
        return float(np.sum(g_part * coef(w)))

    def dm(w):  # the direct method on the weighted records
        return float(np.sum(w[:, None] * pi * (Z @ coef(w).T))) / n

    h_, eye = 1e-5, np.eye(n)
    for stat, g, y in ((part, g_part, 0.0), (dm, g_dm, terms / n)):
        fd = np.array([(stat(1 + h_ * eye[j]) - stat(1 - h_ * eye[j])) / (2 * h_)
                       for j in range(n)])
        c = g[~seen, 0].sum()
        ref = y + np.einsum("jp,jp->j", d, g[log.action]) + c * rc
        np.testing.assert_allclose(ref, fd, rtol=1e-6, atol=1e-8 * max(1.0, np.abs(fd).max()))

    assert m.part_variance(pi, ws, "analytic", 2) == pytest.approx(
        hc2_variance(log, d, h, rc, seen, g_part, 0.0), rel=1e-9, abs=1e-15)
    assert m.dm_stderr(pi, terms, "analytic", 2) == pytest.approx(
        math.sqrt(hc2_variance(log, d, h, rc, seen, g_dm, terms / n)), rel=1e-9, abs=1e-15)


@settings(max_examples=12)
@given(seed=st.integers(0, 2**32 - 1), K=st.integers(1, 4), d=st.integers(1, 3),
       kind=st.sampled_from(rm.MODELS), unseen=st.booleans())
def test_analytic_and_bootstrap_agree_where_the_model_is_nearly_linear(seed, K, d, kind, unseen):
    """With every logged action on >= 100 records the refit is nearly linear in the resample
    weights: 2,000 resamples (Monte Carlo error ~1.6% of the standard deviation) agree with
    the analytic standard error to 10% (5% at worst over 240 such logs)."""
    log = linear_log(seed, n=150 * K, K=K, d=d, unseen=unseen and K > 1)
    counts = np.bincount(log.action, minlength=K)
    assume(counts[counts > 0].min() >= 100)
    g = np.random.default_rng(seed)
    pi = g.dirichlet(np.ones(K), size=log.n_rounds)
    ws = g.random(log.n_rounds) * 3
    m = fit_reward_model(log, kind, rng=seed)
    terms = np.einsum("jk,jk->j", pi, m.in_sample)
    se = {v: m.dm_stderr(pi, terms, v, 2000) for v in ("analytic", "bootstrap")}
    assert se["analytic"] == pytest.approx(se["bootstrap"], rel=0.10)
    part = {v: math.sqrt(m.part_variance(pi, ws, v, 2000)) for v in ("analytic", "bootstrap")}
    assert part["analytic"] == pytest.approx(part["bootstrap"], rel=0.10)


def test_model_variance_options():
    log = linear_log(5)
    pi = targets(log)[0]
    for f in (direct_method, switch_dr, dr_os):
        auto = f(log, pi, rng=3)
        assert auto == f(log, pi, model_variance="analytic", rng=3)
        boot = f(log, pi, model_variance="bootstrap", rng=3)
        assert boot.value == auto.value and boot.stderr != auto.stderr
        assert boot.stderr == pytest.approx(auto.stderr, rel=0.25)


# -- bad input ---------------------------------------------------------------------------------
class Mean:
    def fit(self, X, y):
        self.m = float(np.mean(y))
        return self

    def predict(self, X):
        return np.full(len(X), self.m)


def _changed(log, field):
    import dataclasses

    arr = getattr(log, field).copy()
    arr[0] = arr[0] + 1 if field != "action" else (arr[0] + 1) % log.n_actions
    return dataclasses.replace(log, **{field: arr})


BAD = [
    pytest.param(lambda log, m: doubly_robust(linear_log(0, n=299), np.full((299, 3), 1 / 3),
                                              model=m), "`model` must be a reward model "
                 "fitted on this log (299 records, 3 actions); got one fitted on a log of 300",
                 id="other-length"),
    pytest.param(lambda log, m: direct_method(linear_log(0, K=4), np.full((300, 4), 0.25),
                                              model=m), "3 actions", id="other-actions"),
    pytest.param(lambda log, m: sndr(_changed(log, "reward"), np.full((300, 3), 1 / 3),
                                     model=m), "whose reward differs", id="reward-changed"),
    pytest.param(lambda log, m: switch_dr(_changed(log, "context"), np.full((300, 3), 1 / 3),
                                          model=m), "whose context differs",
                 id="context-changed"),
    pytest.param(lambda log, m: dr_os(_changed(log, "action"), np.full((300, 3), 1 / 3),
                                      model=m), "whose action differs", id="action-changed"),
    pytest.param(lambda log, m: select_estimator(linear_log(0, n=200), np.full((200, 3), 1 / 3),
                                                 estimator="dr_os", model=m), "`model`",
                 id="slope-other-log"),
    pytest.param(lambda log, m: doubly_robust(log, np.full((300, 3), 1 / 3), model=m,
                                              n_folds=3),
                 "`n_folds` must be 2 (the value `model` was fitted with)", id="n_folds"),
    pytest.param(lambda log, m: doubly_robust(log, np.full((300, 3), 1 / 3), model=m,
                                              per_action=True),
                 "`per_action` must be False", id="per_action"),
    pytest.param(lambda log, m: direct_method(log, np.full((300, 3), 1 / 3), model=Mean(),
                                              model_variance="analytic"),
                 "`model_variance` must be 'bootstrap' or 'auto' for a regressor",
                 id="analytic-regressor"),
    pytest.param(lambda log, m: switch_dr(log, np.full((300, 3), 1 / 3),
                                          model_variance="sandwich"),
                 "`model_variance` must be one of 'auto', 'analytic', 'bootstrap'",
                 id="model_variance-name"),
    pytest.param(lambda log, m: fit_reward_model(log, "forest"), "`model` must be one of",
                 id="unknown-model"),
    pytest.param(lambda log, m: fit_reward_model(log, n_folds=1), "`n_folds` must be an int "
                 "in [2, ", id="fit-n_folds"),
]


@pytest.mark.parametrize("call, msg", BAD)
def test_a_model_from_another_log_is_refused(call, msg):
    log = linear_log(0)
    m = fit_reward_model(log, rng=0)
    with pytest.raises(ValueError) as info:
        call(log, m)
    assert msg in str(info.value)


def test_fit_reward_model_wants_a_log():
    with pytest.raises(TypeError, match="`log` must be a simulator.logs.BanditLog or "
                                        "SlateLog; got dict"):
        fit_reward_model({"context": []})


def test_an_equal_log_is_accepted():
    log = linear_log(0, n=50)
    m = fit_reward_model(log, rng=0)
    twin = log.take(np.arange(50))  # a new object holding the same records
    pi = targets(log)[0]
    assert doubly_robust(twin, pi, model=m) == doubly_robust(log, pi, model=m)


# -- slates: Cascade-DR's model per log ---------------------------------------------------------
def slate_problem(seed=0, n=40, m=5, k=3):
    """A log of a Plackett-Luce logging policy and two Plackett-Luce targets' arrays."""
    from agents import PlackettLuce
    from simulator import SlateLog

    rng = np.random.default_rng(seed)
    scores = rng.normal(0, 1.5, (n, m))
    mu = PlackettLuce(scores, k=k, temperature=1.0)
    obs = {"user": np.arange(n), "available": np.ones((n, m), bool)}
    S = mu.sample(obs, rng=rng)
    cas = mu.prefix_probabilities(obs, S)
    log = SlateLog(context=rng.normal(size=(n, 2)), action=S,
                   reward=(rng.random((n, k)) < 0.4).astype(float), pscore=cas[:, -1],
                   pscore_cascade=cas, pscore_item_position=mu.item_position_probabilities(obs, S),
                   n_items=m, user=np.arange(n))
    tgts = [PlackettLuce(scores, k=k, temperature=t) for t in (0.5, 3.0)]
    return log, [(pi.prefix_probabilities(obs, S), pi.conditional_probabilities(obs, S))
                 for pi in tgts]


def test_slate_model_is_shared_by_every_target():
    import dataclasses

    log, tgts = slate_problem()
    m = fit_reward_model(log, "mean", rng=3)
    assert isinstance(m, evaluators.SlateRewardModel)
    for cascade, dist in tgts:  # one model per log, each target completes its own part
        assert cascade_dr(log, cascade, dist, reward_model=m) == \
            cascade_dr(log, cascade, dist, reward_model="mean", rng=3)
    reg = fit_reward_model(log, Mean(), n_folds=1, rng=3)
    for cascade, dist in tgts:
        assert cascade_dr(log, cascade, dist, reward_model=reg) == \
            cascade_dr(log, cascade, dist, reward_model=Mean(), n_folds=1, rng=3)
    cascade, dist = tgts[0]
    r = log.reward.copy()
    r[0, 0] = 1.0 - r[0, 0]
    with pytest.raises(ValueError, match="`reward_model` must be a reward model fitted on "
                                         "this log; got one fitted on a log whose reward"):
        cascade_dr(dataclasses.replace(log, reward=r), cascade, dist, reward_model=m)
    with pytest.raises(ValueError, match="`n_folds` must be 2"):
        cascade_dr(log, cascade, dist, reward_model=m, n_folds=3)
    with pytest.raises(ValueError, match="'mean' or a regressor"):
        fit_reward_model(log)  # "ridge" is a bandit model
