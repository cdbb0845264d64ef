"""Position-aware off-policy estimation (issue 24 s1): on a log with several positions every
static estimator reads the target at each record's position, the model-based ones sum over
the actions at that position, and the reward models take the position as a feature -- each
checked against a plain loop written from the formula, record by record, position by
position; the analytic model variance against the record-by-record sandwich."""

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import evaluators
from evaluators import _reward_models as rm
from evaluators import (
    direct_method,
    doubly_robust,
    dr_os,
    fit_reward_model,
    ips,
    mips,
    select_estimator,
    sndr,
    snips,
    subgaussian_ips,
    switch_dr,
)
from simulator.logs import BanditLog


def positioned_log(seed, n=60, K=3, L=3, d=2, unseen=False, logging="random"):
    """Rewards linear in the context with a position effect; ``pi_b`` (the logging
    distribution at each record's position) random or uniform; with ``unseen`` the last
    action is never logged."""
    g = np.random.default_rng(seed)
    x = g.normal(size=(n, d))
    pos = g.integers(0, L, n)
    top = K - 1 if unseen else K
    if logging == "uniform":
        pi_b = np.zeros((n, K))
        pi_b[:, :top] = 1 / top
    else:
        pi_b = np.zeros((n, K))
        pi_b[:, :top] = g.dirichlet(np.ones(top), size=n)
    a = np.array([g.choice(K, p=p) for p in pi_b])
    theta = g.normal(size=(K, d))
    r = 0.3 + 0.2 * np.einsum("nd,nd->n", x, theta[a]) - 0.1 * pos + g.normal(0, 0.3, n)
    return BanditLog(context=x, action=a, reward=r, pscore=pi_b[np.arange(n), a], n_actions=K,
                     pi_b=pi_b, position=pos, len_list=L)


def at(arr, j, log):
    """``arr[j, :, position of record j]``: the obvious read."""
    return arr[j, :, int(log.position[j])]


# -- the estimators against plain loops ------------------------------------------------------
def loop_terms(log, pi, q, weight):
    out = []
    for j in range(log.n_rounds):
        a, p, qq = int(log.action[j]), at(pi, j, log), at(q, j, log)
        w = p[a] / log.pscore[j]
        out.append(sum(p[b] * qq[b] for b in range(log.n_actions))
                   + weight(w) * (log.reward[j] - qq[a]))
    return out


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 40), K=st.integers(2, 5),
       L=st.integers(2, 4), tau=st.floats(0.0, 5.0), lam=st.floats(0.0, 50.0),
       lam_sg=st.floats(0.0, 1.0))
def test_every_static_estimator_reads_each_record_at_its_position(seed, n, K, L, tau, lam,
                                                                   lam_sg):
    log = positioned_log(seed, n=n, K=K, L=L)
    g = np.random.default_rng(seed + 1)
    pi = g.dirichlet(np.ones(K), size=(n, L)).transpose(0, 2, 1)  # (n, K, L)
    q = g.random((n, K, L))
    pi_b = g.dirichlet(np.ones(K), size=(n, L)).transpose(0, 2, 1)
    pi_b[np.arange(n), :, log.position] = log.pi_b  # the logging policy at the logged slots
    w = np.array([at(pi, j, log)[log.action[j]] / log.pscore[j] for j in range(n)])
    r = log.reward
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    close = dict(rel=1e-10, abs=1e-12)
    assert ips(log, pi).value == pytest.approx(mean(list(w * r)), **close)
    assert ips(log, pi, clip=1.2).value == pytest.approx(mean(list(np.minimum(w, 1.2) * r)),
                                                         **close)
    assert snips(log, pi).value == pytest.approx(sum(w * r) / sum(w), **close)
    assert subgaussian_ips(log, pi, lambda_=lam_sg).value == pytest.approx(
        mean([x * y / (1 - lam_sg + lam_sg * x) for x, y in zip(w, r, strict=True)]), **close)
    assert direct_method(log, pi, model=q).value == pytest.approx(
        mean(loop_terms(log, pi, q, lambda x: 0.0)), **close)
    assert doubly_robust(log, pi, model=q).value == pytest.approx(
        mean(loop_terms(log, pi, q, lambda x: x)), **close)
    assert switch_dr(log, pi, model=q, tau=tau).value == pytest.approx(
        mean(loop_terms(log, pi, q, lambda x: x if x <= tau else 0.0)), **close)
    assert dr_os(log, pi, model=q, lambda_=lam).value == pytest.approx(
        mean(loop_terms(log, pi, q, lambda x: lam * x / (x * x + lam) if lam > 0 else 0.0)),
        **close)
    dm = mean(loop_terms(log, pi, q, lambda x: 0.0))
    corr = sum(w[j] * (r[j] - at(q, j, log)[log.action[j]]) for j in range(n)) / sum(w)
    assert sndr(log, pi, model=q).value == pytest.approx(dm + corr, **close)
    E = g.integers(0, 2, size=(K, 1))
    same = lambda j: [b for b in range(K) if E[b, 0] == E[log.action[j], 0]]  # noqa: E731
    want = mean([r[j] * sum(at(pi, j, log)[b] for b in same(j))
                 / sum(log.pi_b[j, b] for b in same(j)) for j in range(n)])
    assert mips(log, pi, action_embeddings=E).value == pytest.approx(want, **close)
    assert mips(log, pi, action_embeddings=E, pi_b=pi_b).value == pytest.approx(want, **close)
    sel = select_estimator(log, pi, estimator="ips", values=[math.inf, 2.0, 1.0])
    for v, th in zip(sel.candidates, sel.candidate_values, strict=True):
        assert th == pytest.approx(mean(list(np.minimum(w, v) * r)), **close)


def test_a_context_free_policy_broadcast_over_the_records_is_read_without_a_copy():
    log = positioned_log(0, n=200, K=4, L=3)
    dist = np.random.default_rng(1).dirichlet(np.ones(4), size=3).T  # (K, L)
    lazy = np.broadcast_to(dist, (200, 4, 3))
    full = np.ascontiguousarray(lazy)
    for f in (ips, snips, subgaussian_ips):
        assert f(log, lazy) == f(log, full)
    for f in (direct_method, doubly_robust, sndr, switch_dr, dr_os):
        assert f(log, lazy, model="ridge", rng=3) == f(log, full, model="ridge", rng=3)
    bad = dist.copy()
    bad[0, 2] += 0.1
    with pytest.raises(ValueError, match=r"`action_dist` rows must sum to 1; got 1\.1\d* at "
                                         r"every position: record 0, position 2"):
        ips(log, np.broadcast_to(bad, (200, 4, 3)))


# -- the reward models take the position as a feature ------------------------------------------
def ridge_reference(log, train, rows):
    """q (rows, K): per action, ridge (penalty 1 except on the intercept) of the reward on
    [1, context, one_hot(position) without its first column], by least squares on the
    augmented system; actions without records get the mean training reward."""
    L, K = log.len_list, log.n_actions

    def design(idx):
        return np.c_[np.ones(idx.size), log.context[idx], np.eye(L)[log.position[idx]][:, 1:]]

    Zp = design(rows)
    p = Zp.shape[1]
    out = np.empty((rows.size, K))
    for k in range(K):
        mine = train[log.action[train] == k]
        if not mine.size:
            out[:, k] = log.reward[train].mean() if train.size else 0.0
            continue
        aug = np.r_[design(mine), np.c_[np.zeros((p - 1, 1)), np.eye(p - 1)]]
        coef = np.linalg.lstsq(aug, np.r_[log.reward[mine], np.zeros(p - 1)], rcond=None)[0]
        out[:, k] = Zp @ coef
    return out


def mean_reference(log, train, rows):
    """q (rows, K): the mean reward of each (action, position) pair over ``train``, one
    loop; a pair without records gets the mean training reward."""
    out = np.empty((rows.size, log.n_actions))
    for i, j in enumerate(rows):
        for k in range(log.n_actions):
            mine = [t for t in train if log.action[t] == k
                    and log.position[t] == log.position[j]]
            out[i, k] = (np.mean(log.reward[mine]) if mine else
                         log.reward[train].mean() if train.size else 0.0)
    return out


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 50), K=st.integers(1, 4),
       L=st.integers(2, 3), n_folds=st.integers(2, 3), unseen=st.booleans(),
       kind=st.sampled_from(["ridge", "mean"]))
def test_fitted_models_take_the_position_as_a_feature(seed, n, K, L, n_folds, unseen, kind):
    log = positioned_log(seed, n=n, K=K, L=L, unseen=unseen and K > 1)
    n_folds = min(n_folds, max(2, n))
    m = fit_reward_model(log, kind, n_folds=n_folds, rng=seed)
    ref = ridge_reference if kind == "ridge" else mean_reference
    every = np.arange(n)
    np.testing.assert_allclose(m.in_sample, ref(log, every, every), rtol=1e-8, atol=1e-10)
    want = np.empty((n, K))
    for f in range(n_folds):
        rows = np.flatnonzero(m.folds == f)
        if rows.size:
            want[rows] = ref(log, np.flatnonzero(m.folds != f), rows)
    np.testing.assert_allclose(m.cross_fitted, want, rtol=1e-8, atol=1e-10)


class Recorder:
    """A regressor that predicts the mean and keeps the features it was fitted on."""

    seen: list = []

    def fit(self, X, y):
        Recorder.seen.append(np.array(X))
        self.m = float(np.mean(y))
        return self

    def predict(self, X):
        return np.full(len(X), self.m)


def test_a_regressor_gets_the_one_hot_position_after_its_features():
    log = positioned_log(3, n=30, K=3, L=3)
    Recorder.seen = []
    fit_reward_model(log, Recorder(), n_folds=2, rng=0).in_sample  # noqa: B018
    X = Recorder.seen[-1]  # the in-sample fit on every record
    np.testing.assert_array_equal(X, np.c_[log.context, np.eye(3)[log.action],
                                           np.eye(3)[log.position]])
    Recorder.seen = []
    fit_reward_model(log, Recorder(), per_action=True, rng=0).in_sample  # noqa: B018
    for k, X in enumerate(Recorder.seen[-3:]):
        mine = log.action == k
        np.testing.assert_array_equal(X, np.c_[log.context[mine], np.eye(3)[log.position[mine]]])


# -- the analytic variance stays exact -------------------------------------------------------
def reference_influence(log, kind):
    """Record by record, from the normal equations of its block (its action for "ridge",
    with the one-hot position in the design; its (action, position) cell for "mean"): the
    derivative of the block's coefficients by the record's weight, its leverage, and the
    derivative of the overall mean that blocks without records get."""
    n, L = log.n_rounds, log.len_list
    if kind == "ridge":
        Z = np.c_[np.ones(n), log.context, np.eye(L)[log.position][:, 1:]]
        cell, n_cells = log.action, log.n_actions
    else:
        Z = np.ones((n, 1))
        cell, n_cells = log.action * L + log.position, log.n_actions * L
    pen = np.eye(Z.shape[1]) * (1.0 if kind == "ridge" else 0.0)
    pen[0, 0] = 0.0
    d, h = np.zeros_like(Z), np.zeros(n)
    for j in range(n):
        mine = cell == cell[j]
        H = Z[mine].T @ Z[mine] + pen
        coef = np.linalg.solve(H, Z[mine].T @ log.reward[mine])
        Hz = np.linalg.solve(H, Z[j])
        d[j] = Hz * (log.reward[j] - Z[j] @ coef)
        h[j] = Z[j] @ Hz
    return Z, cell, n_cells, d, h, (log.reward - log.reward.mean()) / n


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(8, 50), K=st.integers(1, 3),
       L=st.integers(2, 3), kind=st.sampled_from(["ridge", "mean"]), unseen=st.booleans(),
       scale=st.sampled_from([0.0, 1.0, 5.0]))
def test_analytic_variance_is_the_sandwich_over_the_positioned_design(seed, n, K, L, kind,
                                                                       unseen, scale):
    """The statistic's derivatives by each record's weight, from the reference's normal
    equations, against central differences of the weighted refit the bootstrap uses
    (``_refit``); then the analytic variances (model part of DR-type estimates, the direct
    method) against the HC2 sandwich of those derivatives."""
    log = positioned_log(seed, n=n, K=K, L=L, unseen=unseen and K > 1)
    g = np.random.default_rng(seed + 1)
    pi = g.dirichlet(np.ones(K), size=n)  # the target at each record's position
    ws = g.random(n) * scale
    m = fit_reward_model(log, kind, rng=0)
    Z, cell, n_cells, d, h, rc = reference_influence(log, kind)
    # the target's weight on each block, per record: action a at the record's position
    blk = (np.arange(K)[None, :] if kind == "ridge" else
           np.arange(K)[None, :] * L + log.position[:, None])           # (n, K) block ids
    P = np.zeros((n, n_cells))
    np.add.at(P, (np.repeat(np.arange(n), K), np.broadcast_to(blk, (n, K)).ravel()), pi.ravel())
    g_dm = P.T @ Z / n
    logged = np.zeros((n_cells, Z.shape[1]))
    np.add.at(logged, cell, ws[:, None] * Z)
    g_part = g_dm - logged / n
    terms = np.einsum("jk,jk->j", pi, m.in_sample)
    seen = np.bincount(cell, minlength=n_cells) > 0

    def coef(w):
        return rm._refit(log, kind, w[None, :], Z)[0]

    def part(w):
        return float(np.sum(g_part * coef(w)))

    def dm(w):
        return float(np.sum(w[:, None] * P * (Z @ coef(w).T))) / n

    step, eye = 1e-5, np.eye(n)
    for stat, gg, y in ((part, g_part, 0.0), (dm, g_dm, terms / n)):
        fd = np.array([(stat(1 + step * eye[j]) - stat(1 - step * eye[j])) / (2 * step)
                       for j in range(n)])
        ref = y + np.einsum("jp,jp->j", d, gg[cell]) + gg[~seen, 0].sum() * rc
        np.testing.assert_allclose(ref, fd, rtol=1e-6, atol=1e-8 * max(1.0, np.abs(fd).max()))

    def hc2(gg, y):
        scale_ = np.where(h < 1 - 1e-12, 1 / np.sqrt(np.maximum(1 - h, 1e-12)), 0.0)
        x = y + np.einsum("jp,jp->j", d, gg[cell]) * scale_ + gg[~seen, 0].sum() * rc
        return np.var(x, ddof=1) * n

    assert m.part_variance(pi, ws, "analytic", 2) == pytest.approx(hc2(g_part, 0.0),
                                                                   rel=1e-9, abs=1e-15)
    assert m.dm_stderr(pi, terms, "analytic", 2) == pytest.approx(
        math.sqrt(hc2(g_dm, terms / n)), rel=1e-9, abs=1e-15)
    # the bootstrap's values are the refits' statistics, resample by resample
    W = m._resamples(3)
    boot_dm = rm.bootstrap_dm_values(m, pi, 3)
    boot_part = rm.bootstrap_model_part(m, pi, ws, 3)
    for b in range(3):
        cb = coef(W[b])
        assert boot_dm[b] == pytest.approx(float(np.sum(W[b][:, None] * P * (Z @ cb.T))) / n,
                                           rel=1e-9, abs=1e-12)
        assert boot_part[b] == pytest.approx(float(np.sum(g_part * cb)), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("kind", ["ridge", "mean"])
def test_analytic_and_bootstrap_variances_agree_with_positions(kind):
    """Every (action, position) cell on >= 100 records: the refit is nearly linear in the
    weights, 2,000 resamples agree with the analytic standard error to 10%."""
    log = positioned_log(7, n=1200, K=2, L=3, logging="uniform")
    g = np.random.default_rng(1)
    pi = g.dirichlet(np.ones(2), size=1200)
    m = fit_reward_model(log, kind, rng=2)
    terms = np.einsum("jk,jk->j", pi, m.in_sample)
    se = {v: m.dm_stderr(pi, terms, v, 2000) for v in ("analytic", "bootstrap")}
    assert se["analytic"] == pytest.approx(se["bootstrap"], rel=0.10)
    ws = g.random(1200) * 3
    part = {v: math.sqrt(m.part_variance(pi, ws, v, 2000)) for v in ("analytic", "bootstrap")}
    assert part["analytic"] == pytest.approx(part["bootstrap"], rel=0.10)


# -- bad input ------------------------------------------------------------------------------
def test_a_row_that_is_no_distribution_at_some_position_is_named():
    log = positioned_log(1, n=20, K=3, L=3)
    pi = np.full((20, 3, 3), 1 / 3)
    pi[5, :, 2] = [0.5, 0.5, 0.5]  # record 5 is logged at some position; its slot 2 is wrong
    for f, kw in ((ips, {}), (doubly_robust, {"model": "mean", "rng": 0}),
                  (direct_method, {"model": "mean", "rng": 0}), (mips, {"action_embeddings":
                                                                        np.arange(3)})):
        with pytest.raises(ValueError, match=r"`action_dist` rows must sum to 1; got 1\.5 at "
                                             r"every position: record 5, position 2"):
            f(log, pi, **kw)
    with pytest.raises(ValueError, match=r"`action_dist` must have shape \(n_rounds, n_actions, "
                                         r"len_list\) = \(20, 3, 3\); got \(20, 3\)"):
        snips(log, pi[:, :, 0])
    with pytest.raises(ValueError, match=r"`model` must be an array of shape \(n_rounds, "
                                         r"n_actions, len_list\) = \(20, 3, 3\)"):
        doubly_robust(log, np.full((20, 3, 3), 1 / 3), model=np.zeros((20, 3)))


def test_a_model_fitted_on_other_positions_is_refused():
    log = positioned_log(2, n=30)
    moved = BanditLog(context=log.context, action=log.action, reward=log.reward,
                      pscore=log.pscore, n_actions=3, position=(log.position + 1) % 3,
                      len_list=3)
    m = fit_reward_model(log, "ridge", rng=0)
    with pytest.raises(ValueError, match="`model` must be a reward model fitted on this log.*"
                                         "position differs"):
        doubly_robust(moved, np.full((30, 3, 3), 1 / 3), model=m)


def test_one_slot_logs_read_as_before():
    """A log with every record at position 0 and len_list 1 is the log without positions:
    the same bits from every estimator (the position-aware paths are not taken)."""
    log = positioned_log(4, n=80, L=1)
    plain = BanditLog(context=log.context, action=log.action, reward=log.reward,
                      pscore=log.pscore, n_actions=3, pi_b=log.pi_b)
    pi = np.random.default_rng(0).dirichlet(np.ones(3), size=80)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for f in (ips, snips, subgaussian_ips):
            assert f(log, pi) == f(plain, pi) == f(plain, pi[:, :, None])
        for f in (direct_method, doubly_robust, sndr, switch_dr, dr_os):
            for model in ("ridge", "mean"):
                assert f(log, pi, model=model, rng=1) == f(plain, pi, model=model, rng=1)
    assert evaluators.mips(log, pi, action_embeddings=np.arange(3)) == evaluators.mips(
        plain, pi, action_embeddings=np.arange(3))
