"""Off-policy estimators of a static policy's value: IPS, SNIPS, direct method, doubly robust.

The target policy is given by its action probabilities per record, ``action_dist`` of shape
``(n_rounds, n_actions)`` or Open Bandit Pipeline's ``(n_rounds, n_actions, 1)``.

Interop with Open Bandit Pipeline (not a dependency): the same inputs feed OBP's estimators,
so the two can be checked against each other::

    fb = log.to_obp()
    from obp.ope import InverseProbabilityWeighting
    InverseProbabilityWeighting().estimate_policy_value(
        reward=fb["reward"], action=fb["action"], pscore=fb["pscore"],
        position=fb["position"], action_dist=action_dist[:, :, None])
    # == evaluators.ips(log, action_dist).value
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from evaluators._estimate import Estimate, _z
from evaluators._replay import _check_level, _check_log

__all__ = ["ips", "snips", "direct_method", "doubly_robust", "OPEEstimate",
           "NoSupportWarning"]

_MODELS = ("ridge", "mean")


class NoSupportWarning(UserWarning):
    """The log carries no information on the target policy (it gives probability 0 to every
    logged action): the estimate is ``nan``."""


@dataclass(frozen=True)
class OPEEstimate(Estimate):
    """:class:`Estimate` of an off-policy estimator; ``ess`` is the effective sample size
    ``(sum w)^2 / sum w^2`` of the importance weights (``n`` for the direct method)."""

    ess: float = math.nan
    estimator: str = ""


def _check_action_dist(log, action_dist) -> np.ndarray:
    a = np.asarray(action_dist)
    if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)):
        raise TypeError(f"`action_dist` must be a float array; got dtype {a.dtype}.")
    a = a.astype(np.float64, copy=False)
    if a.ndim == 3:
        if a.shape[2] != 1:
            raise ValueError(f"`action_dist` of OBP shape (n_rounds, n_actions, len_list) must "
                             f"have len_list == 1; got shape {a.shape}.")
        a = a[:, :, 0]
    if a.shape != (log.n_rounds, log.n_actions):
        raise ValueError(f"`action_dist` must have shape (n_rounds, n_actions) = "
                         f"({log.n_rounds}, {log.n_actions}) or ({log.n_rounds}, "
                         f"{log.n_actions}, 1); got {np.asarray(action_dist).shape}.")
    if not np.all(np.isfinite(a)):
        raise ValueError("`action_dist` must be finite; got nan or inf.")
    bad = np.flatnonzero((a < 0).any(axis=1))
    if bad.size:
        raise ValueError(f"`action_dist` must be >= 0; got a negative probability at "
                         f"record {bad[0]}.")
    s = a.sum(axis=1)
    bad = np.flatnonzero(np.abs(s - 1) > 1e-6)
    if bad.size:
        raise ValueError(f"`action_dist` rows must sum to 1; got {s[bad[0]]} at record "
                         f"{bad[0]}.")
    return a


def _check_clip(clip):
    if clip is None:
        return math.inf
    if isinstance(clip, bool) or not isinstance(clip, (int, float, np.integer, np.floating)):
        raise TypeError(f"`clip` must be None or a float > 0; got {type(clip).__name__}.")
    if not clip > 0:
        raise ValueError(f"`clip` must be > 0; got {clip}.")
    return float(clip)


def _weights(log, a, clip):
    w = a[np.arange(log.n_rounds), log.action] / log.pscore
    return np.minimum(w, clip)


def _ess(w) -> float:
    s2 = float(np.sum(w * w))
    return float(np.sum(w) ** 2 / s2) if s2 > 0 else 0.0


def _nan(n, level, name, why) -> OPEEstimate:
    warnings.warn(f"{name}: {why}; returning nan.", NoSupportWarning, stacklevel=3)
    return OPEEstimate(math.nan, math.nan, math.nan, math.nan, n, level, ess=0.0,
                       estimator=name)


_NO_WEIGHT = "every importance weight is 0 (the target policy never takes a logged action)"


def _mean_estimate(terms, level, ess, name) -> OPEEstimate:
    n = terms.shape[0]
    value = float(terms.mean())
    se = float(terms.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
    half = _z(level) * se
    return OPEEstimate(value, se, value - half, value + half, n, level, ess=ess,
                       estimator=name)


def ips(log, action_dist, *, clip=None, ci=0.95) -> OPEEstimate:
    """Inverse propensity scoring: ``mean_j w_j r_j`` with ``w_j = pi(a_j|x_j) / pscore_j``.

    Parameters
    ----------
    log : simulator.logs.BanditLog
    action_dist : array (n_rounds, n_actions) or (n_rounds, n_actions, 1)
        The target policy's action probabilities on each record's context (rows sum to 1).
    clip : float > 0, optional
        Weights are clipped at ``clip`` (biased, lower variance).
    ci : float in (0, 1)

    Returns
    -------
    OPEEstimate
        Mean, its standard error ``std(w r) / sqrt(n)``, normal interval, ``ess``; ``nan``
        with a :class:`NoSupportWarning` when every weight is 0.

    Raises
    ------
    TypeError, ValueError
        Wrong log type, empty log, ``action_dist`` of wrong shape or not a distribution,
        ``clip <= 0``.

    Notes
    -----
    Horvitz & Thompson (1952); unbiased for the target policy's value when ``pscore`` is
    the logging propensity and the logging policy covers the target's support.
    """
    log = _check_log(log)
    a = _check_action_dist(log, action_dist)
    w = _weights(log, a, _check_clip(clip))
    level = _check_level(ci)
    if not w.any():
        return _nan(log.n_rounds, level, "ips", _NO_WEIGHT)
    return _mean_estimate(w * log.reward, level, _ess(w), "ips")


def snips(log, action_dist, *, ci=0.95) -> OPEEstimate:
    """Self-normalised IPS: ``sum_j w_j r_j / sum_j w_j``.

    Parameters are those of :func:`ips` (no clipping). The standard error is the delta
    method's ``sqrt(sum_j w_j^2 (r_j - V)^2) / sum_j w_j``; ``nan`` with all weights 0.

    Notes
    -----
    Swaminathan & Joachims (2015), "The self-normalized estimator for counterfactual
    learning". Consistent, slightly biased, often much lower variance than IPS.
    """
    log = _check_log(log)
    a = _check_action_dist(log, action_dist)
    level = _check_level(ci)
    w = _weights(log, a, math.inf)
    sw = float(w.sum())
    n = log.n_rounds
    if sw <= 0:
        return _nan(n, level, "snips", _NO_WEIGHT)
    value = float(np.sum(w * log.reward) / sw)
    se = float(math.sqrt(np.sum((w * (log.reward - value)) ** 2)) / sw)
    half = _z(level) * se
    return OPEEstimate(value, se, value - half, value + half, n, level, ess=_ess(w),
                       estimator="snips")


def _reward_model(log, model, ridge=1.0) -> np.ndarray:
    """Predicted rewards q(x_j, a), (n_rounds, n_actions), fitted on the log itself."""
    if model not in _MODELS:
        raise ValueError(f"`model` must be one of {_MODELS}; got {model!r}.")
    K, n = log.n_actions, log.n_rounds
    overall = float(log.reward.mean())
    q = np.empty((n, K))
    if model == "mean":
        counts = np.bincount(log.action, minlength=K)
        sums = np.bincount(log.action, weights=log.reward, minlength=K)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = np.where(counts > 0, sums / np.maximum(counts, 1), overall)
        q[:] = means
        return q
    Z = np.hstack([np.ones((n, 1)), log.context])
    pen = np.full(Z.shape[1], ridge)
    pen[0] = 0.0  # intercept unpenalised
    for k in range(K):
        rows = log.action == k
        if not rows.any():
            q[:, k] = overall
            continue
        Zk = Z[rows]
        beta = np.linalg.solve(Zk.T @ Zk + np.diag(pen), Zk.T @ log.reward[rows])
        q[:, k] = Z @ beta
    return q


def direct_method(log, action_dist, *, model="ridge", ci=0.95) -> OPEEstimate:
    """Direct method: ``mean_j sum_a pi(a|x_j) q(x_j, a)`` with a fitted reward model q.

    Parameters
    ----------
    log, action_dist, ci : as in :func:`ips`
    model : {"ridge", "mean"}
        ``"ridge"``: per-arm ridge regression of reward on ``[1, context]`` (penalty 1,
        intercept unpenalised); ``"mean"``: per-arm mean reward. Actions never logged are
        predicted by the overall mean reward; a target policy that never takes a logged
        action (no support at all) gets ``nan`` and a :class:`NoSupportWarning`.

    Returns
    -------
    OPEEstimate
        The standard error is that of the mean over records and ignores the model's own
        estimation error (the direct method's bias is not in the interval).

    Notes
    -----
    Dudik, Langford, Li (2011), "Doubly robust policy evaluation and learning". The model is
    fitted on the same log, without cross-fitting.
    """
    log = _check_log(log)
    a = _check_action_dist(log, action_dist)
    q = _reward_model(log, model)
    level = _check_level(ci)
    if not a[np.arange(log.n_rounds), log.action].any():
        return _nan(log.n_rounds, level, "direct_method", _NO_WEIGHT)
    return _mean_estimate((a * q).sum(axis=1), level, float(log.n_rounds), "dm")


def doubly_robust(log, action_dist, *, model="ridge", clip=None, ci=0.95) -> OPEEstimate:
    """Doubly robust: ``mean_j [ sum_a pi(a|x_j) q(x_j, a) + w_j (r_j - q(x_j, a_j)) ]``.

    Parameters are those of :func:`direct_method` and :func:`ips`. Unbiased when either the
    propensities or the reward model are right.

    Notes
    -----
    Dudik, Langford, Li (2011). Model fitted on the same log (no cross-fitting).
    """
    log = _check_log(log)
    a = _check_action_dist(log, action_dist)
    w = _weights(log, a, _check_clip(clip))
    q = _reward_model(log, model)
    level = _check_level(ci)
    if not a[np.arange(log.n_rounds), log.action].any():
        return _nan(log.n_rounds, level, "doubly_robust", _NO_WEIGHT)
    qa = q[np.arange(log.n_rounds), log.action]
    terms = (a * q).sum(axis=1) + w * (log.reward - qa)
    return _mean_estimate(terms, level, _ess(w), "dr")
