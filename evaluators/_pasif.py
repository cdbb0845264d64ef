"""Estimator selection on pseudo-logs that mimic the real shift: PAS-IF (Udagawa, Kiyohara,
Narita, Saito & Tateno 2023)."""

from __future__ import annotations

import numpy as np

from evaluators import _select
from evaluators._ope import _check_action_dist, _rows
from evaluators._validation import check_log as _check_log
from recloop_base.guard import TRIAL_TIMEOUT
from recloop_base.validation import (
    ArgumentValueError,
    as_seed_sequence,
    check_float,
    check_int,
    check_level,
)
from simulator.logs import BanditLog

__all__ = ["select_by_pasif", "subsampling_rule"]


def _f(t, k):
    """``t / ((1 - k) + k t)``: the share of a context's pseudo-target mass an action with
    pseudo-weight ``t`` takes, divided by ``k`` (``rho = k f``)."""
    return t / ((1.0 - k) + k * t)


def _df(t, k):
    return (1.0 - k) / ((1.0 - k) + k * t) ** 2


def subsampling_rule(pi_b, pi_e, k: float = 0.2, *, iterations: int = 60) -> np.ndarray:
    """PAS-IF's subsampling rule ``rho(x, a)``, (n, K): the probability that a record with
    context ``x`` and action ``a`` goes to the pseudo-target set.

    Every context goes there with probability ``k`` (``sum_a pi_b(a|x) rho(x, a) = k``),
    and among the rules that do, ``rho`` minimises ``sum_a pi_b(a|x) (w~(x, a) -
    w(x, a))^2``, the expected squared difference between the pseudo-logs' importance
    weight ``w~ = rho / (1 - rho) * (1 - k) / k`` and the real one ``w = pi_e / pi_b``.

    The minimiser, per context, by Lagrange: ``w~_a - w_a = mu f'(w~_a)`` with ``f(t) = t /
    ((1 - k) + k t)`` and ``mu >= 0`` such that ``sum_a pi_b f(w~_a) = 1`` (``mu = 0`` when
    the real weights already meet the constraint, which Jensen's inequality allows only
    for a constant weight). For a given ``mu`` each ``w~_a`` is the root of an increasing
    concave function (Newton's steps from ``w_a`` converge from below); ``mu`` is found by
    bisection. Actions the logging policy never takes get ``rho = 0``.
    """
    pi_b = np.asarray(pi_b, dtype=np.float64)
    pi_e = np.asarray(pi_e, dtype=np.float64)
    on = pi_b > 0
    w = np.where(on, pi_e / np.where(on, pi_b, 1.0), 0.0)

    def weights(mu):
        t = w.copy()
        for _ in range(12):
            h = t - w - mu[:, None] * _df(t, k)
            dh = 1.0 + mu[:, None] * 2.0 * k * (1.0 - k) / ((1.0 - k) + k * t) ** 3
            t = t - h / dh
        return t

    def total(mu):
        return np.einsum("ik,ik->i", pi_b, _f(weights(mu), k))

    lo = np.zeros(w.shape[0])
    hi = np.ones(w.shape[0])
    for _ in range(64):  # bracket: total(hi) >= 1 (as mu grows, f -> 1/k > 1)
        short = total(hi) < 1.0
        if not short.any():
            break
        hi = np.where(short, hi * 4.0, hi)
    need = total(lo) < 1.0
    for _ in range(iterations):
        mid = (lo + hi) / 2
        big = total(mid) >= 1.0
        hi = np.where(need & big, mid, hi)
        lo = np.where(need & ~big, mid, lo)
    t = weights(np.where(need, hi, 0.0))
    return np.where(on, k * _f(t, k), 0.0)


def _logging_dist(log) -> np.ndarray:
    if log.pi_b is not None:
        return np.asarray(log.pi_b, dtype=np.float64)
    avail = log.available_mask()
    n_avail = avail.sum(axis=1)
    if np.all(np.abs(log.pscore * n_avail - 1.0) <= 1e-9):
        return avail / n_avail[:, None]
    raise ArgumentValueError("log", "a log with the logging policy's distribution "
                             "(`pi_b`) or logged uniformly (PAS-IF builds pseudo-policies "
                             "from the logging distribution over every action)",
                             "a log with the logged propensities only")


def select_by_pasif(log, action_dist, *, candidates=None, n_subsamples: int = 10,
                    k: float = 0.2, ci: float = 0.95, rng=None,
                    timeout: float = TRIAL_TIMEOUT) -> _select.Selection:
    """Choose an estimator for ``log`` by PAS-IF: the log split into a pseudo-logging and
    a pseudo-target set whose shift mimics the target's, the candidates scored there
    against the pseudo-target's on-policy value.

    Parameters
    ----------
    log : simulator.logs.BanditLog
        With ``pi_b`` (the logging distribution over every action), or logged uniformly.
    action_dist : array (n_rounds, n_actions) or (n_rounds, n_actions, len_list)
        The target policy on the log's records.
    candidates : sequence or mapping, optional
        As for :func:`evaluators.select_by_twin` (default :data:`evaluators.CANDIDATES`).
    n_subsamples : int >= 2, default 10
        Bootstrap resamples of the log, each split once.
    k : float in (0, 1), default 0.2
        Share of the records that goes to the pseudo-target set (the paper's ``k``).
    ci : float in (0, 1)
        Level of the returned interval.
    rng : None, int, SeedSequence or Generator
        Source of the resamples, the splits and the reward models' folds (subsample ``b``
        from child ``b``).
    timeout : float > 0
        Seconds a call of a user's candidate may take.

    Returns
    -------
    Selection
        ``method="pasif"``; ``score`` the candidate's RMSE against the pseudo-target's
        value over the subsamples.

    Raises
    ------
    TypeError, ValueError
        As :func:`evaluators.select_by_twin`; a log without the logging distribution.

    Notes
    -----
    Udagawa, Kiyohara, Narita, Saito & Tateno (2023), "Policy-adaptive estimator selection
    for off-policy evaluation", AAAI. A record ``(x, a, r)`` of a bootstrap resample goes to
    the pseudo-target set with probability ``rho(x, a)``, else to the pseudo-logging set.
    With ``p(x) = sum_a pi_b(a|x) rho(x, a)``, the actions of the pseudo-target set follow
    ``pi_e~(a|x) = pi_b(a|x) rho / p(x)`` and those of the pseudo-logging set ``pi_b~(a|x)
    = pi_b(a|x) (1 - rho) / (1 - p(x))``; the pseudo-target's value is the mean reward of
    its set (on-policy, unbiased), and each candidate estimates it from the pseudo-logging
    set with ``pi_b~`` as the propensities and ``pi_e~`` as the target. The rule makes
    ``p(x) = k`` for every context (both sets then see the same contexts) and the
    pseudo-weights ``pi_e~ / pi_b~`` as close as it can to the real ``pi_e / pi_b``
    (:func:`subsampling_rule`). The paper fits the rule with a neural network by gradient
    descent on the squared weight difference plus a penalty on ``p(x) - k``; here the
    constraint holds exactly and the objective is minimised per context in closed form
    (up to a scalar root), which needs no network and draws nothing. The pseudo-target can
    only be as far from the pseudo-logger as a ``k`` share allows: large real weights are
    kept, small ones are raised (the constraint forbids them).
    """
    log = _check_log(log)
    a3 = _check_action_dist(log, action_dist)
    cands = _select.Candidates(candidates, timeout=timeout)
    n_subsamples = check_int(n_subsamples, "n_subsamples", low=2)
    k = check_float(k, "k", low=0.0, high=1.0, low_open=True, high_open=True)
    level = check_level(ci)
    pi0 = _logging_dist(log)
    pie = np.asarray(_rows(log, a3), dtype=np.float64)
    n, K, L = log.n_rounds, log.n_actions, log.len_list
    model_seq, sub_seqs = as_seed_sequence(rng).spawn(2)
    with _select.silenced():
        ests = cands.run(log, a3, np.random.default_rng(model_seq), "the log")
    rho_all = subsampling_rule(pi0, pie, k)
    p_all = np.einsum("ik,ik->i", pi0, rho_all)
    C = len(cands)
    seqs = sub_seqs.spawn(n_subsamples)

    def one_subsample(b):
        gen, gen_models = (np.random.default_rng(s) for s in seqs[b].spawn(2))
        idx = gen.integers(0, n, n)
        act = log.action[idx]
        rho, p = rho_all[idx], p_all[idx]
        to_target = gen.random(n) < rho[np.arange(n), act]
        train = np.flatnonzero(~to_target)
        err = np.full(C, np.nan)
        if to_target.sum() < 2 or train.size < 2:
            return err
        truth = float(log.reward[idx][to_target].mean())
        sub = idx[train]
        p0 = pi0[sub] * (1.0 - rho[train]) / (1.0 - p[train])[:, None]
        pe = pi0[sub] * rho[train] / p[train][:, None]
        pseudo = BanditLog(context=log.context[sub], action=act[train],
                           reward=log.reward[sub], pscore=p0[np.arange(train.size), act[train]],
                           n_actions=K, pi_b=p0, available=None if log.available is None
                           else log.available[sub], action_embeddings=log.action_embeddings,
                           position=None if log.position is None else log.position[sub],
                           len_list=L)
        dist = np.repeat(pe[:, :, None], L, axis=2)
        got = cands.run(pseudo, dist, gen_models, f"pseudo-log {b}", order=b)
        for c, e in enumerate(got[:C]):
            if e is not None:
                err[c] = e.value - truth
        return err

    with _select.silenced():
        errors = np.array(_select.replicates(one_subsample, n_subsamples,
                                             cells=n * K * C))
    losses = errors ** 2
    cands.warn_refused()
    board, _ = _select.leaderboard(cands.labels, losses, ests)
    used = int(np.isfinite(losses).any(axis=1).sum())
    sentence = _select.how_sure(board, f"{used} pseudo-logs")
    return _select.finish(board, method="pasif", level=level, n_replicates=used,
                          sentence=sentence, details={"k": k})
