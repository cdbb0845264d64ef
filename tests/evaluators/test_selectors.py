"""The model-free selectors (issue 37 s3): cross-validated OPE and PAS-IF written out from
their papers' definitions and the documented streams; SLOPE over any candidates against
SLOPE over a family; what every selector shares (the result, determinism, bad input)."""

import functools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import evaluators
from evaluators import (
    Selection,
    dr_os,
    ips,
    select_by_cv,
    select_by_pasif,
    select_by_slope,
    select_by_twin,
    select_estimator,
    snips,
)
from evaluators._pasif import subsampling_rule
from evaluators._select import _own
from simulator.logs import BanditLog

Z = 1.959963984540054


def small_log(seed, n=150, K=3, uniform=False):
    g = np.random.default_rng(seed)
    pi_b = np.full((n, K), 1 / K) if uniform else g.dirichlet(np.ones(K) * 2, size=n)
    a = (np.cumsum(pi_b, axis=1) <= g.random(n)[:, None]).sum(axis=1)
    x = g.normal(size=(n, 2))
    r = (g.random(n) < 0.2 + 0.3 * (a == (x[:, 0] > 0))).astype(float)
    return BanditLog(context=x, action=a, reward=r, pscore=pi_b[np.arange(n), a], n_actions=K,
                     pi_b=None if uniform else pi_b)


CANDS = [("ips", ips), ("snips", snips), ("ips(clip=2)", functools.partial(ips, clip=2.0))]


WEIGHTED = [("ips", ips), ("snips", snips), ("ips(clip=2)", functools.partial(ips, clip=2.0)),
            ("subgaussian_ips", evaluators.subgaussian_ips)]


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), one_se=st.booleans())
def test_cv_is_the_papers_procedure_written_out(seed, one_se):
    log = small_log(seed % 997)
    pi = np.random.default_rng(seed).dirichlet(np.ones(3), size=log.n_rounds)
    K = 4
    got = select_by_cv(log, pi, candidates=WEIGHTED, n_splits=K, one_se=one_se, rng=seed)
    _, split_seqs = np.random.SeedSequence(seed).spawn(2)
    n = log.n_rounds
    full = [f(log, pi) for _, f in WEIGHTED]
    v_val = ips(log, pi).stderr ** 2
    losses = np.zeros((K, len(WEIGHTED)))
    for k, seq in enumerate(split_seqs.spawn(K)):
        perm = np.random.default_rng(seq.spawn(2)[0]).permutation(n)
        for c, (_, f) in enumerate(WEIGHTED):
            v = full[c].stderr ** 2
            n_t = min(n - 2, max(2, int(n * (v / (v + v_val)))))  # the paper's training share
            tr, va = np.sort(perm[:n_t]), np.sort(perm[n_t:])
            losses[k, c] = (f(log.take(tr), pi[tr]).value
                            - ips(log.take(va), pi[va]).value) ** 2
    board = got.scores()
    for c, (label, _) in enumerate(WEIGHTED):
        mse = losses[:, c].mean()
        assert board[label].score == pytest.approx(math.sqrt(mse), rel=1e-10)
        assert board[label].stderr == pytest.approx(
            np.std(losses[:, c], ddof=1) / math.sqrt(K) / (2 * math.sqrt(mse)), rel=1e-9)
        assert board[label].estimate == full[c]
    crit = losses.mean(axis=0) + (np.std(losses, axis=0, ddof=1) / math.sqrt(K) if one_se
                                  else 0.0)
    assert got.selected == WEIGHTED[int(np.argmin(crit))][0]
    assert got.method == "cv" and got.n_replicates == K
    assert got.details["validator"] == "ips"


def test_cv_shares_a_reward_model_among_the_candidates_of_one_training_part():
    log = small_log(6, n=200)
    pi = np.random.default_rng(1).dirichlet(np.ones(3), size=200)
    cands = [("ips", ips), ("dr_os(lambda_=10)", functools.partial(dr_os, lambda_=10.0))]
    got = select_by_cv(log, pi, candidates=cands, n_splits=2, rng=4)
    model_seq, split_seqs = np.random.SeedSequence(4).spawn(2)
    m = evaluators.fit_reward_model(log, "ridge", rng=np.random.default_rng(model_seq))
    full = dr_os(log, pi, lambda_=10.0, model=m)
    assert got.scores()["dr_os(lambda_=10)"].estimate == full
    v, v_val = full.stderr ** 2, ips(log, pi).stderr ** 2
    n_t = min(198, max(2, int(200 * (v / (v + v_val)))))
    losses = []
    for seq in split_seqs.spawn(2):
        g_split, g_models = (np.random.default_rng(s) for s in seq.spawn(2))
        perm = g_split.permutation(200)
        tr, va = np.sort(perm[:n_t]), np.sort(perm[n_t:])
        mt = evaluators.fit_reward_model(log.take(tr), "ridge", rng=g_models)
        losses.append((dr_os(log.take(tr), pi[tr], lambda_=10.0, model=mt).value
                       - ips(log.take(va), pi[va]).value) ** 2)
    assert got.scores()["dr_os(lambda_=10)"].score == pytest.approx(
        math.sqrt(np.mean(losses)), rel=1e-10)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), K=st.integers(2, 6), k=st.sampled_from([0.1, 0.2, 0.4]))
def test_the_subsampling_rule_meets_its_constraint_and_minimises_the_weight_error(seed, K, k):
    g = np.random.default_rng(seed)
    pi_b = g.dirichlet(np.ones(K), size=5)
    pi_e = g.dirichlet(np.ones(K) * 0.5, size=5)
    rho = subsampling_rule(pi_b, pi_e, k)
    assert np.all((rho >= 0) & (rho < 1))
    assert np.allclose((pi_b * rho).sum(axis=1), k, atol=1e-9)  # every context: share k
    w = pi_e / pi_b
    wt = rho / (1 - rho) * (1 - k) / k

    def objective(r):
        t = r / (1 - r) * (1 - k) / k
        return (pi_b * (t - w) ** 2).sum(axis=1)

    best = objective(rho)
    for _ in range(30):  # no other rule that meets the constraint does better
        d = g.normal(size=(5, K)) * 0.01
        d -= (pi_b * d).sum(axis=1, keepdims=True) / pi_b.sum(axis=1, keepdims=True)
        other = np.clip(rho + d, 1e-9, 1 - 1e-9)
        ok = np.allclose((pi_b * other).sum(axis=1), k, atol=1e-12)
        if ok:
            assert np.all(objective(other) >= best - 1e-9)
    # the pseudo-weights stay at or above the real ones (the constraint can only raise them)
    assert np.all(wt >= w - 1e-9)


def test_a_constant_weight_is_mimicked_exactly():
    pi_b = np.full((3, 4), 0.25)
    rho = subsampling_rule(pi_b, pi_b.copy(), 0.2)  # w = 1 everywhere
    assert np.allclose(rho, 0.2)


@pytest.mark.parametrize("uniform", [False, True], ids=["pi_b", "uniform"])
def test_pasif_scores_the_candidates_on_pseudo_logs_written_out(uniform):
    log = small_log(4, n=200, uniform=uniform)
    pi = np.random.default_rng(5).dirichlet(np.ones(3), size=200)
    B, k = 4, 0.25
    got = select_by_pasif(log, pi, candidates=CANDS, n_subsamples=B, k=k, rng=11)
    n = log.n_rounds
    pi0 = log.pi_b if log.pi_b is not None else np.full((n, 3), 1 / 3)
    rho_all = subsampling_rule(pi0, pi, k)
    _, sub_seqs = np.random.SeedSequence(11).spawn(2)
    err = np.zeros((B, 3))
    for b, seq in enumerate(sub_seqs.spawn(B)):
        gen = np.random.default_rng(seq.spawn(2)[0])
        idx = gen.integers(0, n, n)
        u = gen.random(n)
        target_set = [j for j in range(n) if u[j] < rho_all[idx[j], log.action[idx[j]]]]
        train = [j for j in range(n) if j not in set(target_set)]
        truth = np.mean([log.reward[idx[j]] for j in target_set])
        rows = [idx[j] for j in train]
        p = (pi0 * rho_all).sum(axis=1)
        p0 = np.array([pi0[i] * (1 - rho_all[i]) / (1 - p[i]) for i in rows])
        pe = np.array([pi0[i] * rho_all[i] / p[i] for i in rows])
        act = log.action[rows]
        pseudo = BanditLog(context=log.context[rows], action=act, reward=log.reward[rows],
                           pscore=p0[np.arange(len(rows)), act], n_actions=3, pi_b=p0)
        for c, (_, f) in enumerate(CANDS):
            err[b, c] = f(pseudo, pe).value - truth
    board = got.scores()
    for c, (label, _) in enumerate(CANDS):
        assert board[label].score == pytest.approx(math.sqrt(np.mean(err[:, c] ** 2)),
                                                   rel=1e-9)
    assert got.selected == CANDS[int(np.argmin((err ** 2).mean(axis=0)))][0]
    assert got.method == "pasif" and got.details["k"] == k


def test_pasif_needs_the_logging_distribution():
    log = small_log(1)
    bare = BanditLog(context=log.context, action=log.action, reward=log.reward,
                     pscore=log.pscore, n_actions=3)
    with pytest.raises(ValueError, match=r"`log` must be a log with the logging policy's "
                       r"distribution \(`pi_b`\) or logged uniformly"):
        select_by_pasif(bare, np.full((150, 3), 1 / 3), n_subsamples=2)


def test_slope_over_a_familys_candidates_is_select_estimator():
    log = small_log(8, n=400)
    pi = np.random.default_rng(9).dirichlet(np.ones(3) * 0.5, size=400)
    values = (np.inf, 50.0, 10.0, 3.0, 1.0)
    cands = [(f"clip={v:g}", functools.partial(ips, clip=v)) for v in values]
    got = select_by_slope(log, pi, candidates=cands)
    want = select_estimator(log, pi, estimator="ips", values=values)
    assert got.selected == f"clip={want.selected:g}" and got.value == want.value
    widths = {s.label: s.score for s in got.leaderboard}
    for v, w in zip(want.candidates, want.candidate_widths, strict=True):
        assert widths[f"clip={v:g}"] == pytest.approx(w, rel=1e-12)
    assert got.leaderboard[0].label == got.selected and got.leaderboard[0].rank == 1


def test_slope_walks_the_candidates_own_intervals_widest_first():
    """Across families the order of decreasing width is read from each candidate's own
    standard error (the model-based ones include their model's variance)."""
    from scipy.special import stdtrit

    log = small_log(8, n=400)
    pi = np.random.default_rng(9).dirichlet(np.ones(3) * 0.5, size=400)
    got = select_by_slope(log, pi, delta=0.2, rng=3)
    m = evaluators.fit_reward_model(log, "ridge", rng=np.random.default_rng(3))
    t = stdtrit(399, 0.8)
    rows = []
    for label, f in evaluators.CANDIDATES:
        fn = getattr(f, "func", f)
        e = f(log, pi, model=m) if fn.__name__ in ("direct_method", "doubly_robust", "sndr",
                                                   "switch_dr", "dr_os") else f(log, pi)
        rows.append((t * e.stderr, e.value, label))
    rows.sort(key=lambda r: -r[0])
    accepted = [rows[0]]
    for w, v, label in rows[1:]:
        if all(abs(v - av) <= w + (math.sqrt(6) - 1) * aw for aw, av, _ in accepted):
            accepted.append((w, v, label))
        else:
            break
    assert got.selected == accepted[-1][2]


SELECTORS = {
    "twin": functools.partial(select_by_twin, n_twins=3),
    "cv": functools.partial(select_by_cv, n_splits=3),
    "pasif": functools.partial(select_by_pasif, n_subsamples=3),
    "slope": select_by_slope,
}


@pytest.mark.parametrize("name", SELECTORS)
def test_every_selector_returns_a_selection_and_the_same_bytes_without_rng(name):
    log = small_log(2)
    pi = np.random.default_rng(3).dirichlet(np.ones(3), size=log.n_rounds)
    a = SELECTORS[name](log, pi)
    assert isinstance(a, Selection) and a.method == name
    assert a.selected == a.leaderboard[0].label and a.value == a.leaderboard[0].estimate.value
    assert a.estimator == f"select_by_{name}"
    assert len(a.leaderboard) == len(evaluators.CANDIDATES) and a.how_sure
    # rng=None is the fixed default seed (recloop_base.validation.as_generator)
    b = SELECTORS[name](log, pi)
    assert a == b and a.details == b.details
    assert a == SELECTORS[name](log, pi, rng=np.random.SeedSequence(0)) or name == "slope"


@pytest.mark.parametrize("name", [n for n in SELECTORS if n != "slope"])
def test_two_seeds_draw_differently(name):
    log = small_log(2)
    pi = np.random.default_rng(3).dirichlet(np.ones(3), size=log.n_rounds)
    a, b = SELECTORS[name](log, pi, rng=1), SELECTORS[name](log, pi, rng=2)
    assert [s.score for s in a.leaderboard] != [s.score for s in b.leaderboard]


@pytest.mark.parametrize("name", SELECTORS)
@pytest.mark.parametrize("kw, exc, msg", [
    pytest.param({"candidates": [ips]}, ValueError, r"`candidates` must be at least 2",
                 id="one-candidate"),
    pytest.param({"candidates": "ips"}, TypeError, r"`candidates`", id="string"),
    pytest.param({"ci": 1.5}, ValueError, r"`ci`", id="ci"),
    pytest.param({"timeout": -1.0}, ValueError, r"`timeout`", id="timeout"),
])
def test_bad_input_is_named_by_every_selector(name, kw, exc, msg):
    with pytest.raises(exc, match=msg):
        SELECTORS[name](small_log(0), np.full((150, 3), 1 / 3), **kw)


def test_recloops_own_estimators_run_unguarded_and_anything_else_as_a_guest():
    assert _own(ips) and _own(functools.partial(dr_os, lambda_=3.0))
    assert _own(functools.partial(functools.partial(ips, clip=2.0)))
    assert not _own(lambda log, a: ips(log, a))

    def mine(log, a):  # a user's function of the same name
        return 0.5

    mine.__name__ = mine.__qualname__ = "ips"
    assert not _own(mine)


@pytest.mark.parametrize("name", [n for n in SELECTORS if n != "slope"])
def test_replicates_on_threads_give_the_same_bytes_and_the_first_replicates_error(
        name, monkeypatch):
    import evaluators._select as sel

    log = small_log(2)
    pi = np.random.default_rng(3).dirichlet(np.ones(3), size=log.n_rounds)
    serial = SELECTORS[name](log, pi, rng=5)
    monkeypatch.setattr(sel, "THREADED_CELLS", 0)
    monkeypatch.setenv("RECLOOP_THREADS", "3")
    threaded = SELECTORS[name](log, pi, rng=5)
    assert threaded == serial and threaded.details == serial.details

    def failing(log, action_dist):  # on every replicate (the twins come before the log;
        if name == "twin" or log.n_rounds < 150:  # the splits and pseudo-logs after it)
            raise RuntimeError("no")
        return ips(log, action_dist)

    where = {"twin": "twin 0", "cv": "split 0", "pasif": "pseudo-log 0"}[name]
    with pytest.raises(ValueError, match=rf"'failing' on {where} failed: RuntimeError: no"):
        SELECTORS[name](small_log(2, uniform=True), pi, candidates=[ips, failing], rng=5)


def test_the_leaderboard_ties_what_a_paired_comparison_cannot_separate():
    """Losses built so that the paired t of b over a is 1.9 (tied at 1.96) and of c over a
    is 2.5 (separated); the offsets (the twin's bias term) enter the comparison with their
    standard errors."""
    from evaluators._estimate import Estimate
    from evaluators._select import leaderboard

    R = 10
    base = np.linspace(1.0, 2.0, R)
    noise = np.array([1, -1] * 5, dtype=float)  # mean 0, sd(ddof=1) = sqrt(10/9)
    sd = math.sqrt(10 / 9)

    def shifted(t):  # paired differences with mean m and sd sd: t = m / (sd / sqrt(R))
        return base + t * sd / math.sqrt(R) + noise

    losses = np.column_stack([base, shifted(1.9), shifted(2.5)])
    est = [Estimate(0.5, 0.1, 0.3, 0.7, 100)] * 3
    board, best = leaderboard(["a", "b", "c"], losses, est)
    by = {s.label: s for s in board}
    assert best == 0 and [s.label for s in board] == ["a", "b", "c"]
    assert by["a"].tied and by["b"].tied and not by["c"].tied
    # b beats c in every replicate by the same amount (no spread): separated too
    assert (by["a"].rank, by["b"].rank, by["c"].rank) == (1, 1, 3)
    assert by["b"].score == pytest.approx(math.sqrt(losses[:, 1].mean()))
    assert by["b"].stderr == pytest.approx(
        np.std(losses[:, 1], ddof=1) / math.sqrt(R) / (2 * by["b"].score))
    # an offset with its own uncertainty: c's lead of 2.5 standard errors over a, in a's
    # offset, is no longer a separation once that offset's standard error is counted
    board, _ = leaderboard(["a", "b", "c"], np.column_stack([shifted(2.5), base, base + 5]),
                           est, offset=np.zeros(3), offset_se=np.array([0.0, 0.0, 0.0]))
    assert not {s.label: s for s in board}["a"].tied
    board, _ = leaderboard(["a", "b", "c"], np.column_stack([shifted(2.5), base, base + 5]),
                           est, offset=np.zeros(3), offset_se=np.array([0.0, 0.6, 0.0]))
    assert {s.label: s for s in board}["a"].tied
