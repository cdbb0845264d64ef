"""Estimator selection by cross-validation against an unbiased estimate on held-out records
(Cief, Kveton & Kompan 2025)."""

from __future__ import annotations

import math

import numpy as np

from evaluators import _select
from evaluators._ope import _check_action_dist, doubly_robust, ips
from evaluators._validation import check_log as _check_log
from recloop_base.guard import TRIAL_TIMEOUT
from recloop_base.validation import as_seed_sequence, check_choice, check_int, check_level

__all__ = ["select_by_cv"]

_VALIDATORS = {"ips": ips, "doubly_robust": doubly_robust}


def select_by_cv(log, action_dist, *, candidates=None, n_splits: int = 10,
                 validator: str = "ips", one_se: bool = True, ci: float = 0.95, rng=None,
                 timeout: float = TRIAL_TIMEOUT) -> _select.Selection:
    """Choose an estimator for ``log`` by cross-validation: each candidate's estimate on a
    training part of the log against an unbiased estimate on the rest, over random splits.

    Parameters
    ----------
    log : simulator.logs.BanditLog
    action_dist : array (n_rounds, n_actions) or (n_rounds, n_actions, len_list)
        The target policy on the log's records (as for :func:`evaluators.ips`).
    candidates : sequence or mapping, optional
        As for :func:`evaluators.select_by_twin` (default :data:`evaluators.CANDIDATES`).
    n_splits : int >= 2, default 10
        Random training/validation splits (the paper's K).
    validator : {"ips", "doubly_robust"}, default "ips"
        The unbiased estimator computed on the validation part.
    one_se : bool, default True
        Choose the least mean squared disagreement plus one standard error of that mean
        (the paper's one-standard-error rule) rather than the least mean.
    ci : float in (0, 1)
        Level of the returned interval.
    rng : None, int, SeedSequence or Generator
        Source of the splits (split ``k`` from child ``k``: a permutation of the records)
        and of the reward models' folds.
    timeout : float > 0
        Seconds a call of a user's candidate may take (recloop's own run unguarded).

    Returns
    -------
    Selection
        ``method="cv"``; each candidate's ``score`` is the root of its mean squared
        disagreement with the validator over the splits.

    Raises
    ------
    TypeError, ValueError
        As :func:`evaluators.select_by_twin`; an unknown ``validator``.

    Notes
    -----
    Cief, Kveton & Kompan (2025), "Cross-validated off-policy evaluation", AAAI. The
    validator's estimate on held-out records is unbiased for the target's value, so the
    expected squared difference between a candidate's estimate on the training part
    (``n_T`` records) and the validator's on the other ``n - n_T`` is the candidate's
    mean squared error at ``n_T`` records plus the validator's variance at ``n - n_T``.
    Following the paper, the training share of candidate ``c`` is ``v_c / (v_c + v_V)``,
    ``v`` the variance of the candidate's and the validator's estimate on the whole log
    (their squared standard errors; 1/2 where one is unknown or both are 0): a
    low-variance candidate is scored on fewer records, leaving more to the validator.
    Every candidate uses the same ``n_splits`` permutations (the first ``n_T`` records of
    permutation ``k`` train), so that two candidates can be compared split by split.
    """
    log = _check_log(log)
    a3 = _check_action_dist(log, action_dist)
    cands = _select.Candidates(candidates, timeout=timeout)
    n_splits = check_int(n_splits, "n_splits", low=2)
    validator = check_choice(validator, "validator", tuple(_VALIDATORS))
    if not isinstance(one_se, (bool, np.bool_)):
        raise TypeError(f"`one_se` must be a bool; got {type(one_se).__name__}.")
    level = check_level(ci)
    n = log.n_rounds
    if n < 4:
        raise ValueError(f"`log` must have at least 4 records to split; got {n}.")
    model_seq, split_seqs = as_seed_sequence(rng).spawn(2)
    val_fn = _VALIDATORS[validator]
    with _select.silenced():
        ests = cands.run(log, a3, np.random.default_rng(model_seq), "the log")
        v_val = val_fn(log, a3).stderr ** 2
    share = []
    for e in ests:
        v = e.stderr ** 2 if e is not None else math.nan
        share.append(v / (v + v_val) if math.isfinite(v) and math.isfinite(v_val)
                     and v + v_val > 0 else 0.5)
    C = len(cands)
    n_train = [min(n - 2, max(2, int(n * s))) for s in share[:C]]
    by_size: dict = {}
    for c, m in enumerate(n_train):
        by_size.setdefault(m, []).append(c)
    seqs = split_seqs.spawn(n_splits)

    def one_split(k):
        gen_split, gen_models = (np.random.default_rng(s) for s in seqs[k].spawn(2))
        perm = gen_split.permutation(n)
        row = np.full(C, np.nan)
        for m, group in by_size.items():
            train, valid = np.sort(perm[:m]), np.sort(perm[m:])
            v = val_fn(log.take(valid), _select.resampled(a3, valid)).value
            got = cands.run(log.take(train), _select.resampled(a3, train), gen_models,
                            f"split {k}", only=set(group), order=k)
            for c in group:
                if got[c] is not None and math.isfinite(v):
                    row[c] = (got[c].value - v) ** 2
        return row

    with _select.silenced():
        losses = np.array(_select.replicates(one_split, n_splits,
                                             cells=n * log.n_actions * C))
    cands.warn_refused()
    cnt = np.isfinite(losses).sum(axis=0)
    mean = np.where(cnt > 0, np.nansum(losses, axis=0) / np.maximum(cnt, 1), np.nan)
    crit = None
    if one_se:
        sd = np.array([np.nanstd(losses[:, c], ddof=1) if cnt[c] > 1 else math.nan
                       for c in range(C)])
        crit = mean + sd / np.sqrt(np.maximum(cnt, 1))
    board, _ = _select.leaderboard(cands.labels, losses, ests, criterion=crit)
    sentence = _select.how_sure(board, f"{n_splits} splits")
    return _select.finish(board, method="cv", level=level, n_replicates=n_splits,
                          sentence=sentence,
                          details={"validator": validator, "n_train": dict(
                              zip(cands.labels, n_train, strict=True))})
