"""What every estimator selector shares: the candidates, the one guarded path by which a
candidate is run on a log (the real one, a simulated twin, a split or a subsample of it),
the leaderboard with its uncertainty and ties, and the result type.

The selectors -- :func:`evaluators.select_by_twin`, :func:`evaluators.select_by_cv`,
:func:`evaluators.select_by_pasif` and :func:`evaluators.select_by_slope` -- differ only in
how they score a candidate; each returns a :class:`Selection`.

Candidates are guests unless they are recloop's own estimators (or ``functools.partial`` of
them): a user's candidate runs behind the guards of the harness's plugins
(:mod:`recloop_base.guard`) -- on read-only views of a private copy of the log, whose
checksum is compared before and after the call; on a thread with a time limit, where
``sys.exit`` and ``os._exit`` become :class:`recloop_base.guard.UserCodeError`; and any
estimate that cannot be right (:func:`recloop_base.guard.implausible`) is recorded as ``nan``
with an :class:`ImplausibleEstimateWarning` naming the candidate.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from evaluators import _reward_models as _rm
from evaluators._estimate import Estimate, _z
from evaluators._ope import (
    OPEEstimate,
    direct_method,
    doubly_robust,
    dr_os,
    ips,
    sndr,
    snips,
    subgaussian_ips,
    switch_dr,
)
from recloop_base import guard
from recloop_base.validation import (
    ArgumentTypeError,
    ArgumentValueError,
    check_float,
)

__all__ = ["CANDIDATES", "CandidateScore", "ImplausibleEstimateWarning", "Selection"]


class ImplausibleEstimateWarning(RuntimeWarning):
    """A candidate returned an estimate no estimator of a mean reward can give on that log
    (:func:`recloop_base.guard.implausible`: infinite, beyond every weighted mean of the
    log's rewards, an inverted interval, ...): it is recorded as ``nan``."""


def _label(fn, **kw) -> str:
    args = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v!r}"
                     for k, v in kw.items())
    return f"{fn.__name__}({args})" if kw else fn.__name__


def _candidate(fn, **kw):
    return (_label(fn, **kw), functools.partial(fn, **kw) if kw else fn)


#: The default candidates of every selector: ten estimators and hyper-parameters,
#: ``(label, estimator)``.
CANDIDATES = (
    _candidate(ips), _candidate(ips, clip=10.0), _candidate(snips),
    _candidate(subgaussian_ips), _candidate(direct_method), _candidate(doubly_robust),
    _candidate(sndr), _candidate(switch_dr, tau=10.0), _candidate(dr_os, lambda_=10.0),
    _candidate(dr_os, lambda_=100.0),
)

_MODEL_BASED = (direct_method, doubly_robust, sndr, switch_dr, dr_os)
#: recloop's own estimators, by module and name: a candidate that is one of them (or a
#: partial of one) runs without the guards of users' code (no copy, no checksum, no thread).
_OWN = {"evaluators._ope": {"ips", "snips", "subgaussian_ips", "direct_method",
                            "doubly_robust", "sndr", "switch_dr", "dr_os"},
        "evaluators._mips": {"mips"}, "evaluators._slope": {"select_estimator"}}


@dataclass(frozen=True)
class CandidateScore:
    """One candidate on one selector's leaderboard.

    Attributes
    ----------
    label : str
    score : float
        The selector's estimate of the candidate's RMSE on this log (lower is better; for
        SLOPE the width of its confidence interval).
    stderr : float
        Standard error of ``score`` over the replicates (``nan`` where there are none).
    rank : int
        1 + the number of candidates whose score is lower by a paired comparison over the
        same replicates (z > 1.96): tied candidates share a rank.
    tied : bool
        Whether a paired comparison over the same replicates cannot tell it from the
        selected candidate (the selected one is tied with itself).
    estimate : Estimate
        Its estimate on the real log (``nan`` where it gave none).
    n, n_nan : int
        Replicates (twins, splits, subsamples) it was scored on, and those where it gave no
        number.
    bias, sd : float
        The mean and the standard deviation (``ddof=1``) of its error over the replicates
        where the selector knows an error (the twins; ``nan`` otherwise).
    """

    label: str
    score: float
    stderr: float
    rank: int
    tied: bool
    estimate: Estimate
    n: int
    n_nan: int
    bias: float = math.nan
    sd: float = math.nan


@dataclass(frozen=True)
class Selection(OPEEstimate):
    """A selector's choice: the chosen candidate's estimate on the real log (its value,
    standard error and interval, which do not account for the choice) and how it was made.

    Attributes
    ----------
    selected : str
        The chosen candidate's label.
    method : str
        The selector: "twin", "cv", "pasif" or "slope".
    leaderboard : tuple of CandidateScore
        Every candidate, best score first.
    n_replicates : int
        Twins, splits or subsamples every candidate was scored on (0 for SLOPE).
    how_sure : str
        One sentence: which candidates the replicates cannot separate from the chosen one.
    warnings : tuple of str
        What the selector's self-checks found, in words (empty: nothing).
    fallback : bool
        Whether ``selected`` is the documented safe choice a self-check fell back to rather
        than the best score.
    details : dict
        What is particular to the selector (the twins' exact values, their reward model,
        ...).
    """

    selected: str = ""
    method: str = ""
    leaderboard: tuple = ()
    n_replicates: int = 0
    how_sure: str = ""
    warnings: tuple = ()
    fallback: bool = False
    details: dict = field(default_factory=dict, compare=False)

    def scores(self) -> dict:
        """``{label: CandidateScore}``."""
        return {s.label: s for s in self.leaderboard}


# -- candidates ---------------------------------------------------------------------------------

def check_candidates(candidates) -> list:
    """``candidates`` as a list of ``(label, estimator)`` pairs (default :data:`CANDIDATES`)."""
    if candidates is None:
        return list(CANDIDATES)
    if isinstance(candidates, dict):
        items = list(candidates.items())
    elif isinstance(candidates, (str, bytes)) or not hasattr(candidates, "__iter__"):
        raise ArgumentTypeError("candidates", "a sequence of (label, estimator) pairs or "
                                "estimator functions, or a mapping label -> estimator",
                                type(candidates).__name__)
    else:
        items = []
        for j, c in enumerate(candidates):
            if isinstance(c, tuple) and len(c) == 2 and isinstance(c[0], str):
                items.append(c)
            elif callable(c):
                items.append((getattr(c, "__name__", f"candidate {j}"), c))
            else:
                raise ArgumentTypeError(f"candidates[{j}]", "a (label, estimator) pair or an "
                                        "estimator function", type(c).__name__)
    if len(items) < 2:
        raise ArgumentValueError("candidates", "at least 2 candidates (one leaves nothing to "
                                 "choose)", f"{len(items)}")
    labels = set()
    for label, f in items:
        if not callable(f):
            raise ArgumentTypeError(f"candidates[{label!r}]", "a callable estimator(log, "
                                    "action_dist)", type(f).__name__)
        if label in labels:
            raise ArgumentValueError("candidates", "distinct labels", f"{label!r} twice")
        labels.add(label)
    return items


def _own(f) -> bool:
    """Whether ``f`` is one of recloop's estimators or a partial of one."""
    while isinstance(f, functools.partial):
        f = f.func
    return getattr(f, "__name__", None) in _OWN.get(getattr(f, "__module__", None), ())


def model_spec(f):
    """The reward-model specification a built-in model-based candidate fits itself (a name
    or a regressor; ``None``: the candidate is called as it is)."""
    fn, kw = getattr(f, "func", f), dict(getattr(f, "keywords", None) or {})
    if fn not in _MODEL_BASED:
        return None
    model = kw.get("model", inspect.signature(fn).parameters["model"].default)
    if isinstance(model, str) or callable(getattr(model, "fit", None)):
        return model
    return None


def _key(spec):
    return spec if isinstance(spec, str) else id(spec)


def fit_model(log, spec, gen, what: str):
    """``fit_reward_model(log, spec)`` with its predictions computed; a failure names
    ``what`` (the argument and the log)."""
    try:
        m = _rm.fit_reward_model(log, spec, rng=gen)
        m.cross_fitted, m.in_sample  # noqa: B018 (fitted now)
    except (TypeError, ArgumentTypeError, ArgumentValueError):
        raise
    except Exception as exc:  # a user's regressor may fail in any way
        raise ValueError(f"{what}: {type(exc).__name__}: {exc}") from exc
    return m


class Candidates:
    """The candidates of one selector call and the one path by which each is run on a log.

    ``run(log, action_dist, gen, where)`` returns every candidate's :class:`Estimate` on
    that log (``None`` where it gave no finite number): recloop's model-based candidates
    share one reward model per specification, fitted on that log with folds from ``gen``;
    users' candidates run behind the guards (module docstring). A candidate that raises is
    a ``ValueError`` naming it and the log; one that exits, hangs past ``timeout`` seconds
    or changes its input is a :class:`recloop_base.guard.UserCodeError` naming it.
    """

    def __init__(self, candidates, *, timeout: float, reference=None):
        self.items = check_candidates(candidates)
        self.labels = [label for label, _ in self.items]
        #: index of the ``reference`` estimator among the items: a candidate that is it, or
        #: an item appended after the candidates (not on the leaderboard)
        self.reference = None
        if reference is not None:
            same = [c for c, (_, f) in enumerate(self.items) if f is reference]
            if same:
                self.reference = same[0]
            else:
                self.items.append((reference.__name__, reference))
                self.reference = len(self.items) - 1
        self.timeout = check_float(timeout, "timeout", low=0.0, low_open=True)
        self.specs = [model_spec(f) for _, f in self.items]
        self.own = [_own(f) for _, f in self.items]
        #: label -> [(replicate, reason)] of the estimates refused (implausible), for one
        #: warning each
        self.refused: dict = {}

    def __len__(self) -> int:
        """The number of candidates (the reference appended after them not counted)."""
        return len(self.labels)

    def models(self, log, gen, what, reuse=None, only=None) -> dict:
        """One fitted reward model per distinct specification of the candidates (of those
        in ``only``, all by default)."""
        out = {}
        for c, spec in enumerate(self.specs):
            if spec is None or _key(spec) in out or (only is not None and c not in only):
                continue
            if reuse and _key(spec) in reuse:
                out[_key(spec)] = reuse[_key(spec)]
            else:
                out[_key(spec)] = fit_model(log, spec, gen, what)
        return out

    def run(self, log, action_dist, gen, where: str, *, models=None, only=None,
            order: int = -1) -> list:
        """Every candidate's estimate on ``log`` (``None``: no finite number); with
        ``only`` (indices), those candidates' (the others ``None``). ``order``: the
        replicate's index (-1: the real log), which orders the refusals' messages."""
        if models is None:
            models = self.models(log, gen, f"`candidates`: the reward model failed to fit "
                                           f"on {where}", only=only)
        guest = None  # the private copy users' candidates see, made once per log
        out = []
        for c, (label, f) in enumerate(self.items):
            if only is not None and c not in only:
                out.append(None)
                continue
            what = f"{label!r} on {where}"
            if self.own[c]:
                spec = self.specs[c]
                model = models.get(_key(spec)) if spec is not None else None
                est = _call_own(f, log, action_dist, model, what)
            else:
                if guest is None:
                    guest = (guard.read_only(_copy_log(log)),
                             guard.read_only(np.array(action_dist)))
                est = self._call_guest(f, guest, label, what)
            out.append(self._plausible(est, log, label, what, order))
        return out

    def _call_guest(self, f, guest, label, what):
        glog, gdist = guest
        before = guard.inputs_before(glog, gdist)
        with guard.section(f"candidate {label!r}"):
            try:
                est = guard.run_guarded(quiet, f, glog, gdist, what=f"candidate {what}",
                                        timeout=self.timeout)
            except guard.UserCodeError:
                raise
            except Exception as exc:  # a user's estimator may fail in any way
                raise ValueError(f"`candidates`: {what} failed: {type(exc).__name__}: "
                                 f"{exc}") from exc
        if guard.inputs_after(glog, gdist) != before:
            raise guard.UserCodeError(
                f"candidate {what} changed the log or action_dist it was given (through "
                "an array's .base): every estimate after it would be computed on changed "
                "data, so the selection stops (the caller's log is untouched: the candidate "
                "had a copy)")
        return est

    def _plausible(self, est, log, label, what, order):
        value = getattr(est, "value", est)
        if isinstance(value, (bool, np.bool_)) or not isinstance(
                value, (float, int, np.floating, np.integer)):
            return None
        value = float(value)
        if isinstance(est, Estimate):
            why = guard.implausible(value, float(est.stderr), float(est.ci_low),
                                    float(est.ci_high), log)
        else:
            why = guard.implausible(value, math.nan, math.nan, math.nan, log)
        if why is not None:
            self.refused.setdefault(label, []).append(
                (order, f"{why} on {what.split(' on ', 1)[1]}"))
            return None
        if not math.isfinite(value):
            return None
        return est if isinstance(est, Estimate) else Estimate(value, math.nan, math.nan,
                                                              math.nan, log.n_rounds)

    def warn_refused(self, stacklevel: int = 3) -> None:
        """One :class:`ImplausibleEstimateWarning` per candidate whose estimates were
        refused."""
        for label in self.labels:
            why = [text for _, text in sorted(self.refused.get(label, ()))]
            if not why:
                continue
            more = f" (and {len(why) - 1} more)" if len(why) > 1 else ""
            warnings.warn(f"candidate {label!r} returned {why[0]}{more}: recorded as nan.",
                          ImplausibleEstimateWarning, stacklevel=stacklevel)


def quiet(f, log, a):
    """``f(log, a)`` (the selectors silence the candidates' warnings once, around all their
    calls, in the calling thread: ``warnings.catch_warnings`` is not thread-safe)."""
    return f(log, a)


def _call_own(f, log, a, model, what):
    try:
        return f(log, a, model=model) if model is not None else f(log, a)
    except Exception as exc:  # a partial with a bad hyper-parameter, ...
        raise ValueError(f"`candidates`: {what} failed: {type(exc).__name__}: {exc}") from exc


#: Cells (records x actions x candidates) of one replicate above which the replicates run
#: on threads (numpy releases the GIL on large arrays; on small ones threads only cost).
THREADED_CELLS = 1 << 21


def replicates(fn, n: int, *, cells: int) -> list:
    """``[fn(i) for i in range(n)]``, on :func:`recloop_base.threads.n_threads` threads
    when one replicate is large (``cells`` above :data:`THREADED_CELLS`). Each replicate
    draws from its own streams, so the results do not depend on the threads; an exception
    is re-raised once every replicate has ended, the lowest replicate's first (the same
    message on every run)."""
    from recloop_base.threads import n_threads, thread_map

    threads = n_threads() if cells > THREADED_CELLS else 1
    if threads <= 1 or n <= 1:
        return [fn(i) for i in range(n)]

    def caught(i):
        try:
            return True, fn(i)
        except BaseException as exc:  # noqa: BLE001 - re-raised below, in replicate order
            return False, exc

    out = thread_map(caught, range(n), threads)
    for ok, value in out:
        if not ok:
            raise value
    return [value for _, value in out]


@contextlib.contextmanager
def silenced():
    """The candidates' own warnings silenced (no-support, undefined standard errors, ...):
    a selector reports what matters in its result."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def resampled(a, idx) -> np.ndarray:
    """``action_dist``'s records ``idx`` (a broadcast row stays a broadcast)."""
    if a.shape[0] and a.strides[0] == 0:
        return np.broadcast_to(a[:1], (idx.shape[0], *a.shape[1:]))
    return a[idx]


def _copy_log(log):
    """The log with every array copied (what a user's candidate sees of the caller's)."""
    import copy
    import dataclasses

    twin = copy.copy(log)
    for f in dataclasses.fields(log):
        v = getattr(log, f.name, None)
        if isinstance(v, np.ndarray):
            object.__setattr__(twin, f.name, v.copy())
    return twin


# -- the leaderboard ------------------------------------------------------------------------------

_Z = 1.959963984540054


def leaderboard(labels, losses, estimates, *, errors=None, offset=None, offset_se=None,
                criterion=None) -> tuple:
    """The candidates' :class:`CandidateScore`, best first, and the index of the best, from
    per-replicate ``losses`` (replicates x candidates, ``nan`` where a candidate gave no
    number; squared errors or disagreements).

    ``score`` is ``sqrt(mean loss + offset)`` over the replicates where the candidate has a
    number (``offset``, (candidates,): a part of the squared error the replicates do not
    see, with standard error ``offset_se``); its standard error by the delta method,
    ``se(mean loss + offset) / (2 score)``. Candidate ``i`` is better than ``j`` when the
    mean of their paired loss differences (over the replicates where both have a number,
    plus ``offset_i - offset_j``) is below 0 by more than 1.96 of its standard errors.
    ``errors`` (replicates x candidates): the signed errors whose mean and sd are ``bias``
    and ``sd``. ``criterion`` (candidates,): what is ordered, least first, when it is not
    ``score``. Candidates without a number on the real log, or on half the replicates or
    more, come after those with (when any has).
    """
    L = np.asarray(losses, dtype=np.float64)
    R, C = L.shape
    off = np.zeros(C) if offset is None else np.asarray(offset, dtype=np.float64)
    off_se = np.zeros(C) if offset_se is None else np.asarray(offset_se, dtype=np.float64)
    ok = np.isfinite(L)
    n = ok.sum(axis=0)
    mean = np.array([L[ok[:, c], c].mean() if n[c] else math.nan for c in range(C)])
    sd = np.array([L[ok[:, c], c].std(ddof=1) if n[c] > 1 else math.nan for c in range(C)])
    mse = mean + off
    score = np.sqrt(np.maximum(mse, 0.0))
    se_mse = np.sqrt(sd ** 2 / np.maximum(n, 1) + off_se ** 2)
    se = np.where(score > 0, se_mse / (2 * np.where(score > 0, score, 1.0)), 0.0)
    better = np.zeros((C, C), dtype=bool)  # better[i, j]: i's loss below j's, paired
    for i in range(C):
        for j in range(C):
            if i != j:
                better[i, j] = _paired_lower(L[:, i], L[:, j], off[i] - off[j],
                                             math.hypot(off_se[i], off_se[j]))
    usable = [c for c in range(C) if n[c] * 2 > R and estimates[c] is not None]
    pool = usable or [c for c in range(C) if n[c]]
    key = score if criterion is None else np.asarray(criterion, dtype=np.float64)
    order = sorted(range(C), key=lambda c: (c not in pool, not math.isfinite(key[c]),
                                             key[c] if math.isfinite(key[c]) else 0.0, c))
    best = order[0]
    out = []
    for c in order:
        e = errors[:, c][np.isfinite(errors[:, c])] if errors is not None else None
        out.append(CandidateScore(
            label=labels[c], score=float(score[c]), stderr=float(se[c]),
            rank=1 + int(better[:, c].sum()), tied=c == best or not better[best, c],
            estimate=estimates[c] if estimates[c] is not None else NAN_ESTIMATE,
            n=int(n[c]), n_nan=int(R - n[c]),
            bias=float(e.mean()) if e is not None and e.size else math.nan,
            sd=float(e.std(ddof=1)) if e is not None and e.size > 1 else math.nan))
    return out, best


NAN_ESTIMATE = Estimate(math.nan, math.nan, math.nan, math.nan, 0)


def _paired_lower(a, b, offset: float = 0.0, offset_se: float = 0.0) -> bool:
    """Whether ``a``'s losses (plus ``offset``, with standard error ``offset_se``) are below
    ``b``'s by a paired comparison (z > 1.96) over the replicates where both have a
    number."""
    both = np.isfinite(a) & np.isfinite(b)
    m = int(both.sum())
    if m < 2:
        return False
    d = b[both] - a[both]
    mean = float(d.mean()) - offset
    s = math.sqrt(float(d.var(ddof=1)) / m + offset_se ** 2)
    if s == 0.0:
        return mean > 0
    return mean / s > _Z


def how_sure(board, what: str) -> str:
    """One sentence: the chosen candidate and the candidates tied with it."""
    best = board[0]
    tied = [s.label for s in board[1:] if s.tied]
    if not tied:
        return (f"{best.label!r} has the least score on {what}, and a paired comparison over "
                f"them separates it from every other candidate.")
    names = ", ".join(repr(t) for t in tied[:4]) + (f" and {len(tied) - 4} more"
                                                     if len(tied) > 4 else "")
    return (f"{best.label!r} has the least score on {what}, but a paired comparison over "
            f"them cannot separate it from {names}: "
            f"{'its' if len(tied) == 1 else 'their'} estimates are as well supported.")


def finish(board, *, method, level, n_replicates, sentence, warnings_=(),
           fallback: bool = False, details=None) -> Selection:
    """The :class:`Selection` of ``board``, best first (``fallback``: the order is a
    self-check's safe choice, not the selector's own score); raises ``ValueError`` when no
    candidate has a number on the log."""
    if all(not math.isfinite(s.estimate.value) for s in board):
        raise ValueError("every candidate gave nan (or an impossible value) on the log: "
                         "there is no estimate to select ("
                         + ", ".join(s.label for s in board) + ").")
    win = board[0]
    if not math.isfinite(win.estimate.value):  # the best score, no number on the log
        win = next(s for s in board if math.isfinite(s.estimate.value))
    e = win.estimate
    lo, hi = e.ci_low, e.ci_high
    if e.level != level:  # the candidates ran at 0.95: the normal interval at `ci`
        lo, hi = e.value - _z(level) * e.stderr, e.value + _z(level) * e.stderr
    return Selection(e.value, e.stderr, lo, hi, e.n, level, ess=getattr(e, "ess", math.nan),
                     estimator=f"select_by_{method}", selected=win.label, method=method,
                     leaderboard=tuple(board), n_replicates=n_replicates, how_sure=sentence,
                     warnings=tuple(warnings_), fallback=bool(fallback),
                     details=dict(details or {}))
