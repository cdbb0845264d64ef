"""One call from a user's log and target policy to an answer: every estimator's estimate with
its interval, the one a selector says to trust and how sure it is, and the diagnostics that
say whether the log can answer at all (:func:`evaluate_log`)."""

from __future__ import annotations

import functools
import inspect
import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evaluators._cv_ope import select_by_cv
from evaluators._estimate import Estimate
from evaluators._ope import _rows, _target_at_logged
from evaluators._pasif import select_by_pasif
from evaluators._reward_models import fit_reward_model
from evaluators._select import CANDIDATES
from evaluators._slope import select_by_slope
from evaluators._twin import select_by_twin
from evaluators._user_log import read_target
from evaluators._validation import check_log
from recloop_base.validation import (
    ArgumentTypeError,
    ArgumentValueError,
    as_seed_sequence,
    check_level,
)

__all__ = ["EstimatorRow", "LogDiagnostics", "LogEvaluation", "SELECTORS", "evaluate_log"]

#: The selectors ``select=`` names.
SELECTORS = ("twin", "cv", "pasif", "slope", "none")


@dataclass(frozen=True)
class EstimatorRow:
    """One estimator on the log: its estimate and interval (at the result's ``level``),
    the effective sample size of its weights, and the selection's ``score`` of it with
    that score's standard error (``nan`` where the selector gives none)."""

    estimator: str
    value: float
    stderr: float
    ci_low: float
    ci_high: float
    ess: float
    score: float = math.nan
    score_se: float = math.nan
    selected: bool = False


@dataclass(frozen=True)
class LogDiagnostics:
    """Whether the log can answer for this target at all.

    Attributes
    ----------
    n_rounds, n_actions, len_list : int
        The log's size.
    ess : float
        Effective sample size of the target's importance weights ``w_j = pi(a_j | x_j,
        k_j) / pscore_j``: ``(sum w)^2 / sum w^2`` (Kish); ``ess_share = ess / n_rounds``.
    max_weight : float
        The largest weight, at record ``max_weight_record``.
    unsupported_mass : float
        Share of the target's probability mass (averaged over records) on actions the log
        never shows at the record's position (with ``pi_b``: that the logging policy gives
        probability 0 on the record). No weighting estimator sees that mass; only a reward
        model can guess it.
    reward_model : str
        The shared reward model's specification.
    reward_model_mse : float
        Its held-out (cross-fitted) mean squared error at the logged actions.
    reward_model_r2 : float
        ``1 - mse / var(reward)``: the share of the rewards' variance the model predicts on
        records it was not fitted on (0: no better than the mean; negative: worse).
    """

    n_rounds: int
    n_actions: int
    len_list: int
    ess: float
    ess_share: float
    max_weight: float
    max_weight_record: int
    unsupported_mass: float
    reward_model: str
    reward_model_mse: float
    reward_model_r2: float


@dataclass(frozen=True)
class LogEvaluation:
    """The result of :func:`evaluate_log`.

    Attributes
    ----------
    rows : tuple of EstimatorRow
        One per estimator, in the order given.
    selected : str or None
        The estimator the selector says to use (``None`` without selection).
    selector : str
        ``"twin"``, ``"cv"``, ``"pasif"``, ``"slope"``, ``"none"`` or a callable's name.
    score_name : str
        What ``score`` is (``"est. RMSE"``: the selector's estimate of each estimator's
        RMSE on this log; ``"interval width"`` for SLOPE; lower is better), empty when none.
    confidence : str
        ``"clear"`` (a paired comparison over the selector's replicates separates the chosen
        estimator from every other), ``"tied"`` (it cannot, for those in ``tied``) or ``""``
        when the selector gives no scores.
    tied : tuple of str
        The other estimators the selector cannot separate from the chosen one.
    how_sure : str
        The selector's own sentence on how sure it is (empty without one).
    diagnostics : LogDiagnostics
    level : float
        Level of every interval.
    note : str
        What the selector said about its choice (a fallback, a warning), or empty.
    selection : object
        The selector's own result, as it returned it.
    """

    rows: tuple
    selected: str | None
    selector: str
    score_name: str
    confidence: str
    tied: tuple
    how_sure: str
    diagnostics: LogDiagnostics
    level: float
    note: str = ""
    selection: Any = field(default=None, repr=False, compare=False)

    @property
    def estimate(self) -> EstimatorRow | None:
        """The selected row (``None`` without selection)."""
        return next((r for r in self.rows if r.selected), None)

    def frame(self):
        """One row per estimator (a pandas DataFrame): ``estimator``, ``value``,
        ``stderr``, ``ci_low``, ``ci_high``, ``ess``, ``score``, ``score_se``,
        ``selected``."""
        import pandas as pd

        cols = ["estimator", "value", "stderr", "ci_low", "ci_high", "ess", "score",
                "score_se", "selected"]
        return pd.DataFrame([[getattr(r, c) for c in cols] for r in self.rows], columns=cols)

    def summary(self, *, label=str) -> str:
        """One plain sentence (or three): which estimate to use, its interval, how sure the
        selection is, and what in the diagnostics limits the answer. ``label`` formats each
        estimator's name (a report renders it as code)."""
        return _summary(self, label)

    def plot(self, ax=None):
        """Every estimate with its interval, the selected one marked; returns the matplotlib
        ``Figure`` (imported now, never at import time). ``ax``: draw into these axes."""
        return _plot(self, ax)


# -- candidates -------------------------------------------------------------------------------
def _builtin_estimators() -> dict:
    from evaluators import _ope

    table = {name: getattr(_ope, name) for name in (
        "ips", "snips", "direct_method", "doubly_robust", "sndr", "switch_dr", "dr_os",
        "subgaussian_ips")}
    table.update(dict(_default_candidates()))
    return table


def _check_estimators(estimators) -> list:
    if estimators is None:
        return list(_default_candidates())
    if isinstance(estimators, dict):
        items = list(estimators.items())
    elif isinstance(estimators, (str, bytes)) or not hasattr(estimators, "__iter__"):
        raise ArgumentTypeError("estimators", "a list of estimator names, functions or "
                                "(label, function) pairs", type(estimators).__name__)
    else:
        table = _builtin_estimators()
        items = []
        for j, e in enumerate(estimators):
            if isinstance(e, str):
                if e not in table:
                    import difflib

                    close = difflib.get_close_matches(e, list(table), n=1)
                    raise ArgumentValueError(
                        f"estimators[{j}]", "one of " + ", ".join(table),
                        repr(e) + (f" (did you mean {close[0]!r}?)" if close else ""))
                items.append((e, table[e]))
            elif isinstance(e, tuple) and len(e) == 2 and isinstance(e[0], str):
                items.append(e)
            elif callable(e):
                items.append((getattr(e, "__name__", f"estimator {j}"), e))
            else:
                raise ArgumentTypeError(f"estimators[{j}]", "a name, a function or a "
                                        "(label, function) pair", type(e).__name__)
    if not items:
        raise ArgumentValueError("estimators", "at least one estimator", "none")
    labels = [label for label, _ in items]
    dup = next((x for x in labels if labels.count(x) > 1), None)
    if dup is not None:
        raise ArgumentValueError("estimators", "distinct labels", f"{dup!r} twice")
    for label, f in items:
        if not callable(f):
            raise ArgumentTypeError(f"estimators[{label!r}]", "a callable estimator(log, "
                                    "action_dist)", type(f).__name__)
    return items


def _accepts(f, name: str) -> bool:
    fn = f.func if isinstance(f, functools.partial) else f
    if isinstance(f, functools.partial) and name in (f.keywords or {}):
        return False
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _row(label, f, log, a, model, gen, level) -> EstimatorRow:
    kw = {}
    if _accepts(f, "model"):
        kw["model"] = model
    if _accepts(f, "rng"):
        kw["rng"] = gen
    if _accepts(f, "ci"):
        kw["ci"] = level
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = f(log, a, **kw)
    except Exception as exc:  # a user's estimator may fail in any way
        raise ValueError(f"`estimators`: {label!r} failed on the log: {type(exc).__name__}: "
                         f"{exc}") from exc
    if isinstance(est, Estimate):
        return EstimatorRow(label, float(est.value), float(est.stderr), float(est.ci_low),
                            float(est.ci_high), float(getattr(est, "ess", math.nan)))
    value = float(est) if isinstance(est, (int, float, np.floating)) else math.nan
    return EstimatorRow(label, value, math.nan, math.nan, math.nan, math.nan)


# -- the selection adapter --------------------------------------------------------------------
# Everything that depends on a selector's signature or on the fields of its result lives in
# this block.
_BY_NAME = {"twin": select_by_twin, "cv": select_by_cv, "pasif": select_by_pasif,
            "slope": select_by_slope}


def _default_candidates() -> tuple:
    """The estimators evaluated and chosen from by default: the selectors' candidates."""
    return tuple(CANDIDATES)


def _run_selector(select, log, a, items, seq) -> tuple:
    """``(name, result)``: the selector called through its public API."""
    if select is None or select == "none":
        return "none", None
    if isinstance(select, str):
        return select, _BY_NAME[select](log, a, candidates=items, rng=seq)
    name = getattr(select, "__name__", type(select).__name__)
    try:
        return name, select(log, a, candidates=items, rng=seq)
    except Exception as exc:  # a user's selector may fail in any way
        raise ValueError(f"`select`: {name} failed: {type(exc).__name__}: {exc}") from exc


@dataclass(frozen=True)
class _Pick:
    selected: str | None
    scores: dict  # label -> (score, standard error)
    score_name: str = ""
    tied: tuple = ()  # the other candidates a paired comparison cannot separate from it
    how_sure: str = ""
    note: str = ""


def _read_selection(name, result, labels) -> _Pick:
    """What the rest of evaluate_log needs from a selector's result: recloop's selectors
    return a :class:`evaluators.Selection` (a leaderboard of scores with their standard
    errors and paired ties, a sentence saying how sure, the self-checks' warnings); a
    user's selector may return anything whose ``selected`` names one of the estimators."""
    if result is None:
        return _Pick(None, {})
    selected = getattr(result, "selected", None)
    if not (isinstance(selected, str) and selected in labels):
        raise ValueError(f"`select`: {name} returned {type(result).__name__} whose "
                         f"`selected` is {selected!r}; expected the label of one of the "
                         "estimators (" + ", ".join(labels) + ").")
    board = tuple(getattr(result, "leaderboard", ()) or ())
    notes = [str(w) for w in getattr(result, "warnings", ()) or ()]
    if getattr(result, "fallback", False):
        notes.append(f"The selector fell back to its safe choice, {selected}.")
    scores = {s.label: (float(s.score), float(s.stderr)) for s in board
              if hasattr(s, "score") and hasattr(s, "stderr")}
    method = getattr(result, "method", name)
    score_name = ("" if not scores else "interval width" if method == "slope"
                  else "est. RMSE")
    tied = tuple(s.label for s in board if getattr(s, "tied", False) and s.label != selected)
    return _Pick(selected, scores, score_name, tied, str(getattr(result, "how_sure", "") or ""),
                 " ".join(notes))
# -- end of the selection adapter -------------------------------------------------------------


def _diagnostics(log, a, model) -> LogDiagnostics:
    n = log.n_rounds
    w = _target_at_logged(log, a) / log.pscore
    s2 = float(np.sum(w * w))
    ess = float(np.sum(w) ** 2 / s2) if s2 > 0 else 0.0
    j = int(np.argmax(w))
    pi = np.asarray(_rows(log, a), dtype=np.float64)
    if log.pi_b is not None:
        outside = log.pi_b <= 0
    else:
        seen = np.zeros((log.len_list, log.n_actions), dtype=bool)
        seen[log.positions(), log.action] = True
        outside = ~seen[log.positions()]
    unsupported = float(np.einsum("jk,jk->j", pi, outside).mean())
    q = model.cross_fitted[np.arange(n), log.action]
    mse = float(np.mean((log.reward - q) ** 2))
    var = float(np.var(log.reward))
    return LogDiagnostics(
        n_rounds=n, n_actions=log.n_actions, len_list=log.len_list, ess=ess,
        ess_share=ess / n, max_weight=float(w[j]), max_weight_record=j,
        unsupported_mass=unsupported, reward_model=str(model.model), reward_model_mse=mse,
        reward_model_r2=1.0 - mse / var if var > 0 else math.nan)


def evaluate_log(log, target, *, estimators=None, select="twin", ci: float = 0.95,
                 rng=0) -> LogEvaluation:
    """Evaluate a target policy on a logged bandit dataset: every estimator with its
    interval, the one to trust, and whether the log can answer.

    Parameters
    ----------
    log : simulator.logs.BanditLog
        The user's log (``evaluators.datasets.read_bandit_log`` reads one from a CSV,
        ``BanditLog.from_frame`` from a DataFrame); at least 2 records and 2 actions.
    target : array, callable, str or os.PathLike
        The target policy, as :func:`evaluators.datasets.read_target` reads it: an
        ``action_dist`` array, a ``.npy`` file, a CSV of (record, action, [position,]
        probability) in the log's own ids, or a callable ``policy(context) ->
        probabilities`` (or its import path ``"module:attribute"``).
    estimators : sequence, optional
        Names of recloop's estimators (``"ips"``, ``"doubly_robust"``, or a candidate label
        such as ``"dr_os(lambda_=10)"``), functions ``estimator(log, action_dist)`` or
        ``(label, function)`` pairs. Default: the selectors' candidates
        (:data:`evaluators.CANDIDATES`). The model-based ones share one reward model
        (ridge, cross-fitted once).
    select : "twin", "cv", "pasif", "slope", "none", None or callable, default "twin"
        Who chooses the estimate to use among ``estimators``: :func:`evaluators.select_by_twin`
        (each one's own standard error and its bias, read from the log against DR where the
        log resolves it, from simulated twins of the log elsewhere; docs/real_data.md has
        how it fares against the truth), :func:`evaluators.select_by_cv` (cross-validated
        OPE), :func:`evaluators.select_by_pasif` (PAS-IF), :func:`evaluators.select_by_slope`
        (SLOPE's interval rule), nobody, or ``select(log, action_dist, *, candidates, rng)``
        returning a result whose ``selected`` names one of the estimators.
    ci : float in (0, 1), default 0.95
        Level of every interval.
    rng : None, int, SeedSequence or Generator, default 0
        Source of every draw (the reward model's folds, the selector's twins); the same
        ``rng`` gives the same result, byte for byte.

    Returns
    -------
    LogEvaluation
        ``frame()`` (one row per estimator: value, standard error, interval, the
        selection's score and its standard error), ``selected``, ``diagnostics``,
        ``summary()`` and ``plot()``.

    Raises
    ------
    TypeError, ValueError
        Naming the argument: a log of fewer than 2 records or actions, a target that
        :func:`read_target` refuses (wrong shape, rows not summing to 1, a policy that
        raises), an unknown estimator name (with the nearest), an estimator or selector
        that fails (named, with its error).

    Notes
    -----
    The standard errors and intervals are each estimator's own; the selected estimator's
    interval does not account for the selection. How sure the selection is comes from the
    selector: a paired comparison of the candidates' errors over the same replicates (twins,
    splits, subsamples) says which of them it cannot separate from the chosen one
    (``tied``); the selector's self-checks (e.g. twins unfaithful to the log) reach
    ``note`` in words.

    Examples
    --------
    >>> import numpy as np
    >>> from simulator.logs import BanditLog
    >>> g = np.random.default_rng(0)
    >>> log = BanditLog(context=g.normal(size=(400, 2)), action=g.integers(0, 3, 400),
    ...                 reward=(g.random(400) < 0.3).astype(float),
    ...                 pscore=np.full(400, 1 / 3), n_actions=3)
    >>> res = evaluate_log(log, [0.8, 0.1, 0.1], estimators=["ips", "doubly_robust"],
    ...                    select="none")
    >>> list(res.frame().estimator), res.selected
    (['ips', 'doubly_robust'], None)
    """
    log = check_log(log)
    if log.n_rounds < 2:
        raise ArgumentValueError("log", "a log of at least 2 records (a standard error "
                                 "needs two)", f"{log.n_rounds} record")
    if log.n_actions < 2:
        raise ArgumentValueError("log", "a log of at least 2 actions (with one, every "
                                 "policy is the logging policy: nothing to evaluate)",
                                 "1 action")
    a = read_target(target, log)
    items = _check_estimators(estimators)
    level = check_level(ci)
    if not (select is None or callable(select) or (isinstance(select, str)
                                                   and select in SELECTORS)):
        raise ArgumentValueError("select", "one of " + ", ".join(map(repr, SELECTORS))
                                 + ", None or a callable", repr(select))
    root = as_seed_sequence(rng)
    model_seq, select_seq, est_seq = root.spawn(3)
    model = fit_reward_model(log, "ridge", rng=model_seq)
    rows = [_row(label, f, log, a, model, np.random.default_rng(s), level)
            for (label, f), s in zip(items, est_seq.spawn(len(items)), strict=True)]
    name, result = _run_selector(select, log, a, items, select_seq)
    pick = _read_selection(name, result, [r.estimator for r in rows])
    nan2 = (math.nan, math.nan)
    rows = [EstimatorRow(**{**r.__dict__, "score": pick.scores.get(r.estimator, nan2)[0],
                            "score_se": pick.scores.get(r.estimator, nan2)[1],
                            "selected": r.estimator == pick.selected}) for r in rows]
    confidence = "" if pick.selected is None or not pick.scores else (
        "tied" if pick.tied else "clear")
    return LogEvaluation(
        rows=tuple(rows), selected=pick.selected, selector=name, score_name=pick.score_name,
        confidence=confidence, tied=pick.tied, how_sure=pick.how_sure,
        diagnostics=_diagnostics(log, a, model), level=level, note=pick.note,
        selection=result)


def _g(x: float) -> str:
    return "nan" if not math.isfinite(x) else f"{x:.4g}"


def _summary(res: LogEvaluation, label=str) -> str:
    d = res.diagnostics
    pct = f"{res.level:.0%}"
    win = res.estimate
    parts = []
    if win is None:
        parts.append("No selection was asked for: compare the estimates' intervals.")
    else:
        parts.append(f"Use {label(win.estimator)}: {_g(win.value)}, {pct} interval "
                     f"[{_g(win.ci_low)}, {_g(win.ci_high)}].")
        if res.how_sure:
            parts.append(f"How sure: {res.how_sure}")
        elif res.selector == "none":
            pass
        else:
            parts.append(f"How sure: the selector ({res.selector}) gives no scores.")
    if res.note:
        parts.append(res.note)
    if d.unsupported_mass > 0.005:
        parts.append(f"Warning: {d.unsupported_mass:.1%} of the target's probability is on "
                     "actions the log never shows at that position; no weighting estimator "
                     "sees it.")
    if d.ess_share < 0.01:
        parts.append(f"Warning: the weights' effective sample size is {d.ess:.0f} of "
                     f"{d.n_rounds:,} records: the target is far from the logging policy.")
    return " ".join(parts)


def _plot(res: LogEvaluation, ax=None):
    from matplotlib.figure import Figure

    rows = list(res.rows)
    if ax is None:
        fig = Figure(figsize=(7.5, 0.45 * len(rows) + 1.4))
        ax = fig.add_subplot(1, 1, 1)
    else:
        fig = ax.figure
    y = np.arange(len(rows))[::-1]
    for yi, r in zip(y, rows, strict=True):
        color = "#c0392b" if r.selected else "#34495e"
        lo = r.value - r.ci_low if math.isfinite(r.ci_low) else 0.0
        hi = r.ci_high - r.value if math.isfinite(r.ci_high) else 0.0
        ax.errorbar([r.value], [yi], xerr=[[lo], [hi]], fmt="D" if r.selected else "o",
                    color=color, capsize=3, markersize=7 if r.selected else 5)
    ax.set_yticks(y)
    ax.set_yticklabels([r.estimator + ("  (selected)" if r.selected else "") for r in rows])
    ax.set_xlabel(f"estimated value of the target policy, {res.level:.0%} intervals")
    title = "Estimates on the log"
    if res.selected is not None:
        title += f"; selected by {res.selector}: {res.selected}"
    ax.set_title(title, fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig
