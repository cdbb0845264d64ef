"""Data-driven choice of an estimator's hyper-parameter: SLOPE (Su, Srinath & Krishnamurthy
2020) in the form Open Bandit Pipeline implements (Tucker & Lee 2021's SLOPE++)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import stdtrit

from evaluators import _reward_models as _rm
from evaluators._ope import (
    OPEEstimate,
    _check_action_dist,
    _dr_parts,
    _family_estimate,
    _no_support,
    _weights,
)
from evaluators._validation import check_log as _check_log
from recloop_base.validation import (
    ArgumentTypeError,
    ArgumentValueError,
    check_choice,
    check_float,
    check_level,
)

__all__ = ["select_estimator", "select_by_slope", "SelectionEstimate", "SLOPE_DEFAULTS"]

_INF = math.inf
#: estimator -> (its hyper-parameter, the default candidate values)
SLOPE_DEFAULTS = {
    "ips": ("clip", (_INF, 500.0, 200.0, 100.0, 50.0, 20.0, 10.0, 5.0, 2.0, 1.0)),
    "doubly_robust": ("clip", (_INF, 500.0, 200.0, 100.0, 50.0, 20.0, 10.0, 5.0, 2.0, 1.0)),
    "switch_dr": ("tau", (_INF, 500.0, 200.0, 100.0, 50.0, 20.0, 10.0, 5.0, 2.0, 1.0)),
    "dr_os": ("lambda_", (_INF, 1e5, 1e4, 1e3, 300.0, 100.0, 30.0, 10.0, 3.0, 1.0)),
    "subgaussian_ips": ("lambda_", (0.0, 0.001, 0.003, 0.01, 0.03, 0.1, 0.2, 0.4, 0.7, 1.0)),
}
_FUNCS = ("ips", "doubly_robust", "switch_dr", "dr_os", "subgaussian_ips")
_MODEL_BASED = ("doubly_robust", "switch_dr", "dr_os")
_C = math.sqrt(6) - 1


@dataclass(frozen=True)
class SelectionEstimate(OPEEstimate):
    """The chosen candidate's :class:`OPEEstimate`, with the choice: ``parameter`` (its name),
    ``selected`` (its value), ``candidates`` (the values tried), ``candidate_values`` and
    ``candidate_widths`` (each candidate's estimate and SLOPE's confidence width)."""

    parameter: str = ""
    selected: float = math.nan
    candidates: tuple = ()
    candidate_values: tuple = ()
    candidate_widths: tuple = ()


def select_estimator(log, action_dist, *, estimator="ips", values=None, delta=0.1,
                     model="ridge", per_action=None, n_folds=None, ci=0.95,
                     rng=None) -> SelectionEstimate:
    """Pick an estimator's hyper-parameter from the log alone by SLOPE, and estimate with it.

    Parameters
    ----------
    log : simulator.logs.BanditLog
        The logged records.
    action_dist : array (n_rounds, n_actions) or (n_rounds, n_actions, len_list)
        The target policy's action probabilities on each record's context.
    estimator : {"ips", "doubly_robust", "switch_dr", "dr_os", "subgaussian_ips"}
        The family; its hyper-parameter is ``clip``, ``clip``, ``tau``, ``lambda_``,
        ``lambda_`` (:data:`SLOPE_DEFAULTS`).
    values : sequence of floats, optional
        Candidate values (at least 2); default the 10 of :data:`SLOPE_DEFAULTS`.
    delta : float in (0, 1), default 0.1
        Confidence of the widths (Open Bandit Pipeline's default).
    model, per_action, n_folds : as in :func:`doubly_robust`
        The reward model of the model-based families, cross-fitted once and shared by all
        candidates (a :class:`RewardModel` from :func:`fit_reward_model`: shared with other
        targets and estimators on the same log too).
    ci : float in (0, 1)
        Level of the returned interval.
    rng : None, int, SeedSequence or Generator
        Source of the cross-fitting folds (not used with a fitted model).

    Returns
    -------
    SelectionEstimate
        The chosen candidate's estimate, the chosen value (``selected``) and every candidate's
        value and width.

    Raises
    ------
    TypeError, ValueError
        Unknown family, fewer than 2 candidates or candidates out of the family's range,
        ``delta`` outside (0, 1), and everything the family itself rejects.

    Notes
    -----
    Data-driven tuning that never sees the truth. Each candidate ``i`` gives an estimate
    ``theta_i`` and a width ``c_i = t_{n-1}(1 - delta) * stderr_i`` (the Student-t bound of
    Thomas et al. 2015). Candidates are ordered by decreasing width (decreasing variance,
    increasing bias as the hyper-parameter shrinks the weights); walking down that order,
    candidate ``i`` is accepted while ``|theta_i - theta_j| <= c_i + (sqrt(6) - 1) c_j`` for
    every accepted ``j``; the last accepted is chosen. This is the interval-overlap rule of
    Su, Srinath & Krishnamurthy (2020), "Adaptive estimator selection for off-policy
    evaluation", with the constants of Tucker & Lee (2021), "Improved estimator selection for
    off-policy evaluation", as Open Bandit Pipeline's ``*Tuning`` estimators implement it
    (same choice, same value, to 1e-10). The chosen candidate's own interval ignores the
    selection step and under-covers (0.70-0.79 of the estimator's expectation on
    ``recloop.testing``'s problems), so the interval returned is the union of the intervals
    of every accepted candidate: conservative, it contains the interval of the least-biased
    accepted candidate; ``stderr`` is the chosen candidate's.

    Examples
    --------
    >>> import numpy as np
    >>> from simulator.logs import BanditLog
    >>> g = np.random.default_rng(0)
    >>> log = BanditLog(context=g.normal(size=(500, 1)), action=g.integers(0, 3, 500),
    ...                 reward=g.random(500), pscore=np.full(500, 1 / 3), n_actions=3)
    >>> est = select_estimator(log, np.tile([0.8, 0.1, 0.1], (500, 1)), rng=0)
    >>> est.parameter, est.selected in est.candidates
    ('clip', True)
    """
    log = _check_log(log)
    estimator = check_choice(estimator, "estimator", _FUNCS)
    a = _check_action_dist(log, action_dist, values=estimator not in _MODEL_BASED)
    param, default = SLOPE_DEFAULTS[estimator]
    cand = _check_values(values, default, estimator, param)
    delta = check_float(delta, "delta", low=0.0, high=1.0, low_open=True, high_open=True)
    level = check_level(ci)
    n = log.n_rounds
    name = "select_estimator"
    m = _rm.prepare(log, model, per_action=per_action, n_folds=n_folds, rng=rng)
    nan = _no_support(log, a, level, name)
    if nan is not None:
        return _as_selection(nan, param, math.nan, cand, (), ())
    # the weights, and the cross-fitted model's terms, once for every candidate
    if estimator in _MODEL_BASED:
        w, dm, qa = _dr_parts(log, a, m)
    else:
        w, dm, qa = _weights(log, a), None, None
    # OBP sorts the candidates in decreasing order first; ties in width then break alike
    cand = tuple(sorted(cand, reverse=True))
    ests = [_family_estimate(estimator, log, w, dm, qa, v, level) for v in cand]
    theta = np.array([e.value for e in ests])
    t = float(stdtrit(n - 1, 1.0 - delta)) if n > 1 else math.nan
    width = np.array([t * e.stderr for e in ests])
    order = np.argsort(width)[::-1]
    chosen = order[-1]
    for i in range(1, order.size):
        acc = order[:i]
        if not np.all(np.abs(theta[acc] - theta[order[i]]) <= width[order[i]] + _C * width[acc]):
            chosen = order[i - 1]
            break
    accepted = order[:list(order).index(chosen) + 1]
    best = ests[chosen]
    lo = min(ests[i].ci_low for i in accepted)
    hi = max(ests[i].ci_high for i in accepted)
    return _as_selection(best, param, cand[chosen], cand, tuple(theta.tolist()),
                         tuple(width.tolist()), (lo, hi))


def _as_selection(est, param, selected, cand, values, widths, ci=None) -> SelectionEstimate:
    lo, hi = (est.ci_low, est.ci_high) if ci is None else ci
    return SelectionEstimate(est.value, est.stderr, lo, hi, est.n, est.level,
                             ess=est.ess, estimator="select_estimator", parameter=param,
                             selected=float(selected), candidates=tuple(map(float, cand)),
                             candidate_values=values, candidate_widths=widths)


def _check_values(values, default, estimator, param) -> tuple:
    if values is None:
        return default
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ArgumentTypeError("values", f"a sequence of candidate `{param}` values",
                                type(values).__name__)
    vals = tuple(values)
    if len(vals) < 2:
        raise ArgumentValueError("values", "at least 2 candidates", f"{len(vals)}")
    hi = 1.0 if estimator == "subgaussian_ips" else None
    open_low = param == "clip"
    return tuple(check_float(v, f"values[{i}]", low=0.0, high=hi, low_open=open_low,
                             finite=False) for i, v in enumerate(vals))


def select_by_slope(log, action_dist, *, candidates=None, delta: float = 0.1,
                    ci: float = 0.95, rng=None, timeout: float | None = None):
    """Choose among any candidates by SLOPE's interval-overlap rule (Su, Srinath &
    Krishnamurthy 2020), from the log alone.

    Parameters
    ----------
    log : simulator.logs.BanditLog
    action_dist : array (n_rounds, n_actions) or (n_rounds, n_actions, len_list)
    candidates : sequence or mapping, optional
        As for :func:`evaluators.select_by_twin` (default :data:`evaluators.CANDIDATES`);
        each must return an :class:`Estimate` with a standard error (a candidate without
        one cannot be placed in SLOPE's order: it is ranked last and never chosen).
    delta : float in (0, 1), default 0.1
        Confidence of the widths, as for :func:`select_estimator`.
    ci : float in (0, 1)
        Level of the returned interval.
    rng : None, int, SeedSequence or Generator
        Source of the model-based candidates' folds.
    timeout : float > 0, optional
        Seconds a call of a user's candidate may take (default
        :data:`recloop_base.guard.TRIAL_TIMEOUT`).

    Returns
    -------
    Selection
        ``method="slope"``; each candidate's ``score`` is its width ``t_{n-1}(1 - delta)
        stderr``, ``stderr`` nan (SLOPE has no replicates: it says nothing of how sure its
        choice is), ``rank`` its place in SLOPE's order of decreasing width (1: the
        chosen one).

    Notes
    -----
    :func:`select_estimator`'s rule over an arbitrary set: the candidates are ordered by
    decreasing width, and walking down that order a candidate is accepted while its
    estimate is within ``c_i + (sqrt(6) - 1) c_j`` of every accepted one's; the last
    accepted wins. The rule assumes that the order of decreasing width is one of
    increasing bias (a family with a hyper-parameter, as in the paper); across estimator
    families that need not hold, and the rule then prefers the narrowest interval the
    wider ones do not contradict. The returned interval is the winner's own.
    """
    from evaluators import _select
    from evaluators._ope import _check_action_dist
    from recloop_base.guard import TRIAL_TIMEOUT
    from recloop_base.validation import as_generator

    log = _check_log(log)
    a3 = _check_action_dist(log, action_dist)
    cands = _select.Candidates(candidates, timeout=TRIAL_TIMEOUT if timeout is None
                               else timeout)
    delta = check_float(delta, "delta", low=0.0, high=1.0, low_open=True, high_open=True)
    level = check_level(ci)
    with _select.silenced():
        ests = cands.run(log, a3, as_generator(rng), "the log")
    cands.warn_refused()
    n, C = log.n_rounds, len(cands)
    t = float(stdtrit(n - 1, 1.0 - delta)) if n > 1 else math.nan
    theta = np.array([e.value if e is not None else math.nan for e in ests[:C]])
    width = np.array([t * e.stderr if e is not None else math.nan for e in ests[:C]])
    placed = [c for c in np.argsort(-np.where(np.isfinite(width), width, -np.inf),
                                    kind="stable") if np.isfinite(width[c])
              and np.isfinite(theta[c])]
    if not placed:
        raise ValueError("every candidate gave nan (or an impossible value, or no standard "
                         "error) on the log: SLOPE cannot order them ("
                         + ", ".join(cands.labels) + ").")
    chosen_at = len(placed) - 1
    for i in range(1, len(placed)):
        acc = np.array(placed[:i])
        if not np.all(np.abs(theta[acc] - theta[placed[i]]) <= width[placed[i]]
                      + _C * width[acc]):
            chosen_at = i - 1
            break
    order = ([placed[chosen_at]] + placed[:chosen_at] + placed[chosen_at + 1:]
             + [c for c in range(C) if c not in placed])
    board = [_select.CandidateScore(
        label=cands.labels[c], score=float(width[c]), stderr=math.nan, rank=r + 1,
        tied=r == 0, estimate=ests[c] if ests[c] is not None else _select.NAN_ESTIMATE,
        n=0, n_nan=0) for r, c in enumerate(order)]
    accepted = len(placed[:chosen_at + 1])
    sentence = (f"{cands.labels[order[0]]!r} is the narrowest of the {accepted} widest "
                "candidates whose intervals agree (SLOPE); the rule has no replicates, so it "
                "says nothing of how sure the choice is.")
    return _select.finish(board, method="slope", level=level, n_replicates=0,
                          sentence=sentence, details={"delta": delta})
