"""Cascade-DR's reward model of a slate log (:class:`SlateRewardModel`), fitted once per
log by :func:`evaluators.fit_reward_model` and completed per target by
:func:`evaluators.cascade_dr`.

It lives apart from both so that neither imports the other's module: ``_reward_models``
dispatches a ``SlateLog`` here, ``_slate_ope`` reads the model (no import circle).
"""

from __future__ import annotations

import numpy as np

from evaluators._validation import check_slate_log
from recloop_base.validation import (
    ArgumentTypeError,
    ArgumentValueError,
    as_generator,
    check_int,
)

__all__ = ["SLATE_MODELS", "SlateRewardModel"]

#: The reward models of a slate log named by a string (Cascade-DR's Q model).
SLATE_MODELS = ("mean",)


def _folds(n: int, n_folds: int, rng) -> np.ndarray:
    fold = np.empty(n, dtype=np.int64)
    fold[rng.permutation(n)] = np.arange(n) % n_folds
    return fold


class SlateRewardModel:
    """Cascade-DR's reward model fitted on one slate log, for every target policy.

    Made by :func:`evaluators.fit_reward_model` from a :class:`~simulator.logs.SlateLog`;
    pass it to :func:`cascade_dr` as ``reward_model=``. Cascade-DR's Q function depends on
    the target (its recursion averages the next position over the target's distribution),
    so what a log can share is what does not: the fold split and, for the "mean" model, the
    count and reward sum of every (fold, position, item). :func:`cascade_dr` completes the
    target's part. Like :class:`evaluators.RewardModel` it records its log: passed with
    another log (or one whose context, slates or rewards differ) it is refused with a
    ``ValueError`` naming ``reward_model``.

    Attributes
    ----------
    model : "mean" or the regressor
    n_folds : int
    folds : array (n_rounds,) of int
        The fold of each record (all 0 when ``n_folds`` is 1: fit and predict on the log).
    """

    __slots__ = ("_log", "model", "n_folds", "folds", "_counts")

    def __init__(self, log, model, n_folds: int, folds: np.ndarray):
        self._log, self.model, self.n_folds = log, model, n_folds
        folds.setflags(write=False)
        self.folds = folds
        self._counts = _slate_counts(log, folds, n_folds) if model == "mean" else None

    def __repr__(self) -> str:
        what = self.model if isinstance(self.model, str) else type(self.model).__name__
        n, k = self._log.action.shape
        return (f"SlateRewardModel(model={what!r}, n_folds={self.n_folds}, n_rounds={n}, "
                f"len_list={k}, n_items={self._log.n_items})")

    def check(self, log, name: str = "reward_model") -> None:
        """Raise ``ValueError`` naming ``name`` unless ``log`` holds the records the model was
        fitted on (the same context, slates and rewards)."""
        mine = self._log
        if log is mine:
            return
        if (log.action.shape, log.n_items) != (mine.action.shape, mine.n_items):
            raise ArgumentValueError(
                name, f"a reward model fitted on this log ({log.n_rounds} slates of "
                f"{log.action.shape[1]} of {log.n_items} items)", f"one fitted on a log of "
                f"{mine.n_rounds} slates of {mine.action.shape[1]} of {mine.n_items} items")
        for field in ("action", "reward", "context"):
            x, y = getattr(log, field), getattr(mine, field)
            if x is not y and not np.array_equal(x, y):
                raise ArgumentValueError(
                    name, "a reward model fitted on this log", f"one fitted on a log whose "
                    f"{field} differs (the log changed since the model was fitted: fit it "
                    "again with fit_reward_model)")


def _check_slate_model(model):
    if isinstance(model, str):
        if model not in SLATE_MODELS:
            raise ArgumentValueError("model", "'mean' or a regressor with fit/predict for a "
                                     "SlateLog (Cascade-DR's Q model)", repr(model))
        return model
    if callable(getattr(model, "fit", None)) and callable(getattr(model, "predict", None)):
        return model
    raise ArgumentTypeError("model", "'mean' or a regressor with fit/predict for a SlateLog "
                            "(Cascade-DR's Q model)", type(model).__name__)


def _fit_slate_model(log, model, n_folds, rng) -> SlateRewardModel:
    """:func:`evaluators.fit_reward_model` for a slate log."""
    log = check_slate_log(log)
    model = _check_slate_model(model)
    n_folds = check_int(n_folds, "n_folds", low=1, high=max(1, log.n_rounds))
    return SlateRewardModel(log, model, n_folds, _folds(log.n_rounds, n_folds,
                                                        as_generator(rng)))


def _slate_counts(log, fold, n_folds):
    """Count and reward sum of every (fold, position, item), (n_folds, k, n_items) each."""
    k, m = log.action.shape[1], log.n_items
    cnt = np.zeros((n_folds, k, m))
    rsum = np.zeros((n_folds, k, m))
    for j in range(k):
        key = fold * m + log.action[:, j]
        cnt[:, j] = np.bincount(key, minlength=n_folds * m).reshape(n_folds, m)
        rsum[:, j] = np.bincount(key, weights=log.reward[:, j],
                                 minlength=n_folds * m).reshape(n_folds, m)
    return cnt, rsum
