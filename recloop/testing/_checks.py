"""Property checks for users' own estimators, in the spirit of Gymnasium's ``check_env``.

Each check runs a list of named properties against problems whose truth is known, collects
every failure, and raises one ``AssertionError`` that lists them all, each with the smallest
failing example it found. When everything passes it returns a :class:`CheckReport`.

Two sorts of properties. *Correctness* (same rng, same result; inputs not mutated; numpy's
global random state untouched; unbiasedness; interval coverage; ...) is what an estimate's
truth depends on: a failure fails the check. *Input hygiene* (what the estimator does on an
empty log or without support) is advice: a failure is reported (``CheckReport.advice``) but
fails the check only with ``strict=True``.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import numbers
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import scipy.sparse as sp
from scipy import stats

from recloop._selfcheck import FixedArm
from recloop.testing._problems import LOGGING_POLICIES, random_bandit_problem
from recloop_base.validation import (
    ArgumentTypeError,
    ArgumentValueError,
    as_generator,
    check_callable,
    check_float,
    check_int,
)

__all__ = ["CheckFailed", "CheckReport", "HYGIENE_PROPERTIES", "OPE_PROPERTIES", "PropertyResult",
           "check_learning_policy_evaluator", "check_offline_metric", "check_ope_estimator"]


@dataclass(frozen=True)
class PropertyResult:
    """The outcome of one property.

    Attributes
    ----------
    name : str
        The property (the names ``skip=`` accepts).
    passed : bool
        Whether it held (False when it failed or was skipped).
    hygiene : bool
        An input-hygiene property (:data:`HYGIENE_PROPERTIES`: degenerate input such as an
        empty log): its failure is advice unless the check is ``strict``.
    detail : str
        What was seen.
    skipped : bool
        The user said the estimator does not claim it (``skip=``): not run, never "passed".
    problem : BanditProblem or None
        For a failure of an OPE property: the problem it failed on, with ``n_rounds`` set to
        the failing log's size, so that ``problem.draw_log(seed)`` gives the failing input
        back: a :class:`~recloop.testing.DrawnLog`, the named pair ``(log, action_dist)`` --
        the ``simulator.logs.BanditLog`` and the target policy's probabilities of shape
        ``(n_rounds, n_actions, 1)``, exactly what the estimator was called with
        (``log, action_dist = problem.draw_log(seed)``).
    seed : int or None
        The failing log's seed (``None`` for statistical properties, which use the logs of
        ``seeds``).
    seeds : tuple of int
        For a failed statistical property: the seeds of the problem's logs.
    """

    name: str
    passed: bool
    detail: str = ""
    skipped: bool = False
    problem: Any = None
    seed: int | None = None
    seeds: tuple = ()
    hygiene: bool = False


class CheckFailed(AssertionError):
    """A check failed; ``report`` is the full :class:`CheckReport` (failures first)."""

    def __init__(self, report: "CheckReport"):
        super().__init__(str(report))
        self.report = report


@dataclass(frozen=True)
class CheckReport:
    """All properties a check ran, with figures (bias, RMSE, coverage, errors).

    ``strict``: whether failures of input-hygiene properties fail the check (else they are
    :attr:`advice`)."""

    check: str
    results: tuple[PropertyResult, ...]
    figures: dict[str, Any] = field(default_factory=dict)
    strict: bool = False

    @property
    def passed(self) -> bool:
        """No failure: every property that ran held, or is hygiene advice of a check that is
        not strict (skipped ones are not counted as passed)."""
        return not self.failures

    @property
    def failures(self) -> tuple[PropertyResult, ...]:
        """The properties that fail the check."""
        return tuple(r for r in self.results
                     if not (r.passed or r.skipped) and (self.strict or not r.hygiene))

    @property
    def advice(self) -> tuple[PropertyResult, ...]:
        """Input-hygiene properties that did not hold in a check that is not strict:
        reported, not failed."""
        return tuple(r for r in self.results
                     if not (r.passed or r.skipped) and r.hygiene and not self.strict)

    @property
    def skipped(self) -> tuple[PropertyResult, ...]:
        return tuple(r for r in self.results if r.skipped)

    def __str__(self) -> str:
        ran = [r for r in self.results if not r.skipped]
        advice = self.advice
        lines = [f"{self.check}: {sum(r.passed for r in ran)}/{len(ran)} properties hold"
                 + (f", {len(advice)} with advice" if advice else "")
                 + (f", {len(self.results) - len(ran)} skipped" if len(ran) < len(self.results)
                    else "")]
        for r in self.results:
            tag = "skip" if r.skipped else ("ok" if r.passed else
                                            "advice" if r in advice else "FAIL")
            extra = f" [seed {r.seed}]" if (r.seed is not None and not r.passed) else ""
            lines.append(f"  [{tag}] {r.name}: {r.detail}{extra}")
        for key in ("coverage", "coverage_of", "bias", "rmse"):
            if key in self.figures:
                v = self.figures[key]
                shown = ", ".join(f"{x:.4g}" for x in v) if isinstance(v, list) else (
                    f"{v:.4g}" if isinstance(v, float) else str(v))
                lines.append(f"  {key}: {shown}")
        return "\n".join(lines)

    def raise_if_failed(self) -> "CheckReport":
        if not self.passed:
            raise CheckFailed(self)
        return self


# -- helpers ------------------------------------------------------------------------------
def _rng_kwargs(fn) -> Callable[[int], dict]:
    """Pass ``rng`` only to callables that take it (deterministic estimators need not)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return lambda seed: {"rng": np.random.default_rng(seed)}
    takes = any(p.name == "rng" or p.kind is p.VAR_KEYWORD for p in params)
    return (lambda seed: {"rng": np.random.default_rng(seed)}) if takes else (lambda seed: {})


class ReturnTypeError(TypeError):
    """The function under test returned neither an Estimate nor a real number: not a
    property that fails, a misuse that stops the check at once."""


def _unpack(result, who: str):
    """(value, ci) from an Estimate-like object or a real number; ReturnTypeError
    otherwise."""
    if hasattr(result, "value"):
        value = result.value
        ci = (getattr(result, "ci_low", math.nan), getattr(result, "ci_high", math.nan))
    else:
        value, ci = result, (math.nan, math.nan)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.floating)):
        raise ReturnTypeError(f"{who} must return an Estimate or a real number; "
                              f"got {type(result).__name__}.")
    return float(value), (float(ci[0]), float(ci[1]))


def _same(a: float, b: float, rtol: float = 1e-9) -> bool:
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=rtol, abs_tol=1e-12)


@dataclass(frozen=True)
class _Fail:
    """A property's failure: what was seen, and where to reproduce it."""

    detail: str
    problem: Any = None
    seed: int | None = None
    seeds: tuple = ()


class _Runner:
    """Runs properties, turning exceptions into failures, keeping the first (smallest) example."""

    def __init__(self, check: str, skip=(), *, strict: bool = False):
        self.check = check
        self.skip = frozenset(skip)
        self.strict = strict
        self.results: list[PropertyResult] = []
        self.figures: dict[str, Any] = {}

    def record(self, name: str, fn: Callable[[], "str | _Fail | None"], *,
               holds: str = "holds") -> None:
        hygiene = name in HYGIENE_PROPERTIES
        if name in self.skip:
            self.results.append(PropertyResult(name, False, "skipped (not claimed)",
                                               skipped=True, hygiene=hygiene))
            return
        try:
            failure = fn()
        except ReturnTypeError:
            raise
        except Exception as exc:  # the estimator under test may raise anything
            failure = f"raised {type(exc).__name__}: {exc}"
        if isinstance(failure, _Fail):
            self.results.append(PropertyResult(name, False, failure.detail,
                                               problem=failure.problem, seed=failure.seed,
                                               seeds=failure.seeds, hygiene=hygiene))
        else:
            self.results.append(PropertyResult(name, failure is None, failure or holds,
                                               hygiene=hygiene))

    def report(self) -> CheckReport:
        return CheckReport(self.check, tuple(self.results), dict(self.figures),
                           strict=self.strict).raise_if_failed()


def _first_failure(examples, fails: Callable[[Any], "str | _Fail | None"],
                   where: Callable[[Any], dict] | None = None):
    """Run ``fails`` over examples ordered from small to large; describe the first failure
    (with ``where(example)``: the problem and seed that reproduce it)."""
    for ex in examples:
        msg = fails(ex)
        if msg is not None:
            return _Fail(msg, **where(ex)) if where is not None and isinstance(msg, str) else msg
    return None


def _global_state_untouched(call) -> str | None:
    before = np.random.get_state()
    call()
    after = np.random.get_state()
    if not (before[0] == after[0] and np.array_equal(before[1], after[1])
            and before[2:] == after[2:]):
        return "numpy's global random state changed: draw from the `rng` argument instead"
    return None


def _named_warning(category) -> bool:
    """A warning category that names the situation: a class of the estimator's author, not
    one of Python's built-in categories nor numpy's or scipy's (numpy's "Mean of empty slice"
    RuntimeWarning is an accident, not a diagnosis)."""
    module = getattr(category, "__module__", "builtins") or "builtins"
    return module != "builtins" and module.split(".")[0] not in ("numpy", "scipy", "warnings")


def _degenerate(call, what: str, named: bool = False) -> str | None:
    """Degenerate input must give a ValueError, or nan with a warning -- never a silent number.
    With ``named``, the warning must be of a named category (:func:`_named_warning`)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value, _ = _unpack(call(), "the estimator")
        except ValueError:
            return None
    if math.isnan(value):
        if named:
            if any(_named_warning(w.category) for w in caught):
                return None
            seen = sorted({w.category.__name__ for w in caught})
            return (f"{what}: returned nan with " + (f"only {', '.join(seen)}" if seen else
                                                     "no warning")
                    + " (expected ValueError, or nan with a warning of a named category, "
                    "e.g. `class NoSupportWarning(UserWarning)`)")
        if caught:
            return None
        return f"{what}: returned nan without a warning"
    expected = "a warning of a named category" if named else "a warning"
    return f"{what}: returned {value!r} silently (expected ValueError, or nan with {expected})"


# -- static-policy estimators --------------------------------------------------------------
def _problems(rng, n_problems: int, n_rounds: int):
    """Problems from small to large, cycling through logging policies."""
    out = []
    for j in range(n_problems):
        p = random_bandit_problem(rng, n_actions=2 + j % 3, dim=1 + j % 2,
                                  logging=LOGGING_POLICIES[j % 3])
        out.append(dataclasses.replace(p, n_rounds=n_rounds))
    return out


OPE_PROPERTIES = ("deterministic", "inputs_not_mutated", "global_random_state_untouched",
                  "permutation_invariant", "finite_on_valid_input", "empty_log_rejected",
                  "no_support_rejected", "unbiased", "interval_coverage", "max_abs_bias",
                  "max_rmse")
#: Input-hygiene properties (of every check): what an estimator does on degenerate input.
#: A failure is advice -- reported, not failing the check -- unless the check is ``strict``.
HYGIENE_PROPERTIES = ("empty_log_rejected", "no_support_rejected", "nan_on_no_match")


def _check_bool(value, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ArgumentTypeError(name, "a bool", type(value).__name__)
    return bool(value)


def _check_skip(skip, known) -> tuple:
    if isinstance(skip, str):
        skip = (skip,)
    try:
        skip = tuple(skip)
    except TypeError:
        raise ArgumentTypeError("skip", "a tuple of property names",
                                type(skip).__name__) from None
    for name in skip:
        if name not in known:
            raise ArgumentValueError("skip", "property names among " + ", ".join(known),
                                     repr(name))
    return skip


def check_ope_estimator(estimator, *, n_problems: int = 6, n_logs: int = 200,
                        n_rounds: int = 200, unbiased: bool = True, level: float = 0.95,
                        coverage_tol: float = 0.1, alpha: float = 1e-3,
                        max_abs_bias: float | None = None, max_rmse: float | None = None,
                        skip=(), strict: bool = False, rng=None) -> CheckReport:
    """Check a static-policy off-policy estimator against problems with known truth.

    Parameters
    ----------
    estimator : callable
        ``estimator(log, action_dist, *, rng=None)`` returning an ``Estimate`` (or anything
        with ``value``, ``ci_low``, ``ci_high``) or a float. ``action_dist`` has OBP's shape
        ``(n_rounds, n_actions, 1)``. ``rng`` is passed only when the signature takes it.
    n_problems : int, default 6
        Number of random problems (reward model, logging and target policies).
    n_logs : int, default 200
        Logs drawn per problem for the statistical properties.
    n_rounds : int, default 200
        Records per log.
    unbiased : bool, default True
        Whether the estimator claims to be unbiased. True: the ``unbiased`` property is
        tested and the intervals must cover the truth. False (biased by design: clipped IPS,
        the direct method, ...): no ``unbiased`` property, and the intervals must cover the
        estimator's *own expectation* (estimated per problem by the mean of its other logs'
        estimates); bias and RMSE against the truth are reported in ``figures``.
    level : float, default 0.95
        Nominal level of the estimator's intervals (coverage is tested when it returns them).
    coverage_tol : float in [0, 1), default 0.1
        Coverage counts as nominal when it is in ``[level - coverage_tol, level]`` (up to
        the binomial test's noise; above ``level`` the intervals are too wide): normal
        intervals are asymptotic, and at 200 records the textbook IPS interval covers the
        truth 0.92 of the time on these problems (mean over 60 seeds; 0.86 for the worst
        seed: importance weights are heavy-tailed). The measured coverage is always reported
        (``figures["coverage"]``, per problem in ``figures["coverage_per_problem"]``).
    alpha : float in (0, 1), default 1e-3
        False-alarm rate of each statistical property (see Notes).
    max_abs_bias, max_rmse : float >= 0, optional
        Bounds the user asserts: property ``max_abs_bias`` fails when a problem's bias is
        significantly above the bound (its one-sided lower confidence bound at ``alpha``,
        Bonferroni over problems, exceeds it); ``max_rmse`` fails when a problem's measured
        RMSE over its ``n_logs`` logs exceeds the bound (a point comparison: the RMSE is
        measured to about ``1 / sqrt(2 n_logs)`` relative).
    skip : tuple of str, default ()
        Properties the estimator deliberately does not claim (like Hypothesis's
        ``suppress_health_check``), e.g. ``("unbiased",)``. They are reported as skipped,
        never as passed. Names: :data:`OPE_PROPERTIES`.
    strict : bool, default False
        Whether the input-hygiene properties (``empty_log_rejected``,
        ``no_support_rejected``) fail the check. By default their failures are advice
        (``report.advice``, tagged ``[advice]``): a textbook IPS that returns 0, or ``nan``
        with a plain ``UserWarning``, without support is still a correct estimator.
    rng : optional
        Seed for the problems and logs (anything ``numpy.random.default_rng`` accepts).

    Returns
    -------
    CheckReport
        When every property holds (or is skipped, or is hygiene advice). Otherwise
        :class:`CheckFailed` (an ``AssertionError``) lists every failure; its ``report``
        attribute is the report, and each of ``report.failures`` names the problem and the
        seed that reproduce it: ``log, action_dist = failure.problem.draw_log(failure.seed)``
        gives the failing input back (a :class:`~recloop.testing.DrawnLog`).

    Raises
    ------
    TypeError, ValueError
        Bad arguments (named); an estimator that returns something other than a number or an
        ``Estimate``.

    Notes
    -----
    Correctness properties: same rng, same result; inputs not mutated; numpy's global random
    state not used; invariance to permuting records; finite on valid input; then the
    statistical properties below. Input hygiene (advice unless ``strict``): ValueError or
    ``nan`` with a warning of a *named* category (a class the author defined, such as
    ``NoSupportWarning``; not Python's built-in categories nor numpy's) on an empty log and
    on a log without support for the target policy. The statistical properties:

    * ``unbiased``: per problem, the t statistic of the mean error over ``n_logs`` logs,
      two-sided at ``alpha / n_problems`` (Bonferroni);
    * ``interval_coverage``: the pooled coverage of the truth (``unbiased=True``) or of the
      estimator's own expectation (``unbiased=False``) is tested both ways by exact binomial
      tests at ``alpha / 2`` each: below ``level - coverage_tol`` (intervals too narrow) and
      above ``level`` (intervals wider than they claim; a conservative interval, such as a
      union of intervals, fails here and says so).

    False alarms: for an estimator that meets its claims (unbiased; mean coverage at least
    ``level - coverage_tol``) each statistical property fails with probability at most about
    ``alpha`` (exactly for the coverage test; for the t test, to the accuracy of the normal
    approximation of a mean over ``n_logs`` logs), so a correct estimator fails a check at
    its defaults with probability about ``2 alpha`` = 0.002 (recloop's IPS: 0 of 60 seeds
    failed with ``coverage_tol=0.05`` or the default 0.1; 0 of 300 in the example below).
    ``tests/recloop/test_testing.py`` measures it over many seeds for recloop's estimators
    and a hand-written IPS.

    Examples
    --------
    >>> from evaluators import ips
    >>> check_ope_estimator(ips, n_problems=2, n_logs=50).passed
    True
    """
    check_callable(estimator, "estimator")
    n_problems = check_int(n_problems, "n_problems", low=1)
    n_logs = check_int(n_logs, "n_logs", low=2)
    n_rounds = check_int(n_rounds, "n_rounds", low=1)
    level = check_float(level, "level", low=0.0, high=1.0, low_open=True, high_open=True)
    coverage_tol = check_float(coverage_tol, "coverage_tol", low=0.0, high=1.0,
                               high_open=True)
    alpha = check_float(alpha, "alpha", low=0.0, high=1.0, low_open=True, high_open=True)
    unbiased = _check_bool(unbiased, "unbiased")
    if max_abs_bias is not None:
        max_abs_bias = check_float(max_abs_bias, "max_abs_bias", low=0.0)
    if max_rmse is not None:
        max_rmse = check_float(max_rmse, "max_rmse", low=0.0)
    strict = _check_bool(strict, "strict")
    skip = _check_skip(skip, OPE_PROPERTIES)
    rng = as_generator(rng)
    problems = _problems(rng, n_problems, n_rounds)
    seeds = rng.integers(0, 2**63, size=(n_problems, n_logs))
    run = _Runner("check_ope_estimator", skip, strict=strict)
    rng_kw = _rng_kwargs(estimator)

    def call(log, ad, seed=0):
        return _unpack(estimator(log, ad, **rng_kw(seed)), "`estimator`")

    def sizes(j):  # the same problem at growing log sizes: the first failure is the smallest
        return [(j, n) for n in sorted({min(8, n_rounds), min(32, n_rounds), n_rounds})]

    small_first = [ex for j in range(n_problems) for ex in sizes(j)]

    def sample(ex):
        j, n = ex
        return problems[j].draw_log(int(seeds[j, 0]), n)

    def where(ex):
        j, n = ex
        return {"problem": dataclasses.replace(problems[j], n_rounds=n),
                "seed": int(seeds[j, 0])}

    def describe(ex):
        j, n = ex
        p = problems[j]
        return (f"problem {j} (K={p.n_actions}, d={p.dim}, logging={p.logging}, n_rounds={n}, "
                f"seed={int(seeds[j, 0])})")

    # the first call also checks the return type, so a non-number fails loudly at once
    first_log, first_ad = sample(small_first[0])
    call(first_log, first_ad)

    def deterministic(ex):
        log, ad = sample(ex)
        a, b = call(log, ad, 7), call(log, ad, 7)
        if not (_same(a[0], b[0], 0) and _same(a[1][0], b[1][0], 0)):
            return f"{describe(ex)}: two calls with the same rng gave {a[0]!r} and {b[0]!r}"

    def not_mutated(ex):
        log, ad = sample(ex)
        ad_copy = np.array(ad)
        before = {name: getattr(log, name).copy()
                  for name in ("context", "action", "reward", "pscore")}
        call(log, ad_copy)
        if not np.array_equal(ad_copy, ad):
            return f"{describe(ex)}: `action_dist` was modified in place"
        for name, arr in before.items():
            if not np.array_equal(getattr(log, name), arr):
                return f"{describe(ex)}: `log.{name}` was modified"

    def global_rng(ex):
        log, ad = sample(ex)
        msg = _global_state_untouched(lambda: call(log, ad))
        return f"{describe(ex)}: {msg}" if msg else None

    def permutation(ex):
        log, ad = sample(ex)
        perm = np.random.default_rng(seeds[ex[0], 1]).permutation(log.n_rounds)
        a, b = call(log, ad, 3)[0], call(log.take(perm), ad[perm], 3)[0]
        if not _same(a, b, 1e-9):
            return f"{describe(ex)}: {a!r} on the log, {b!r} on its records permuted"

    def finite(ex):
        log, ad = sample(ex)
        v = call(log, ad)[0]
        if not math.isfinite(v):
            return f"{describe(ex)}: returned {v!r} on a valid log"

    run.record("deterministic", lambda: _first_failure(small_first, deterministic, where))
    run.record("inputs_not_mutated", lambda: _first_failure(small_first, not_mutated, where))
    run.record("global_random_state_untouched",
               lambda: _first_failure(small_first, global_rng, where))
    run.record("permutation_invariant", lambda: _first_failure(small_first, permutation, where))
    run.record("finite_on_valid_input", lambda: _first_failure(small_first, finite, where))

    def empty():
        p = dataclasses.replace(problems[0], n_rounds=0)
        log, ad = p.draw_log(int(seeds[0, 0]))
        msg = _degenerate(lambda: estimator(log, ad, **rng_kw(0)), "empty log", named=True)
        return None if msg is None else _Fail(msg, p, int(seeds[0, 0]))

    no_support_seed = int(rng.integers(2**63))

    def no_support():
        p = random_bandit_problem(no_support_seed, n_actions=3, dim=1, deficient=True)
        # all target mass on the action the log never takes
        p = dataclasses.replace(p, target_action=p.deficient, n_rounds=min(n_rounds, 32))
        log, ad = p.draw_log(0)
        msg = _degenerate(lambda: estimator(log, ad, **rng_kw(0)),
                          "target policy with no support in the log", named=True)
        if msg is None:
            return None
        return _Fail(msg, p, 0)

    run.record("empty_log_rejected", empty)
    run.record("no_support_rejected", no_support)

    # statistical properties
    statistical = {"unbiased", "interval_coverage", "max_abs_bias", "max_rmse"}
    if statistical <= run.skip:
        for name in ("unbiased", "interval_coverage", "max_abs_bias", "max_rmse"):
            run.record(name, lambda: None)
        return run.report()
    values = np.full((n_problems, n_logs), np.nan)
    lows = np.full((n_problems, n_logs), np.nan)
    highs = np.full((n_problems, n_logs), np.nan)
    for j, p in enumerate(problems):
        for m in range(n_logs):
            log, ad = p.draw_log(int(seeds[j, m]))
            values[j, m], (lows[j, m], highs[j, m]) = call(log, ad, int(seeds[j, m]))
    truths = np.array([p.value for p in problems])
    err = values - truths[:, None]
    mean_err = err.mean(axis=1)
    se = err.std(axis=1, ddof=1) / math.sqrt(n_logs)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = mean_err / se
    pvals = 2 * stats.t.sf(np.abs(t), df=n_logs - 1)
    pvals[(se == 0) & (mean_err == 0)] = 1.0
    rmse = np.sqrt(np.mean(err ** 2, axis=1))
    run.figures.update(truth=truths.tolist(), mean_error=mean_err.tolist(), bias=mean_err.tolist(),
                       bias_t=t.tolist(), rmse=rmse.tolist(),
                       nan_rate=float(np.mean(np.isnan(values))))

    def stat_fail(j, msg):
        return _Fail(msg, problems[j], None, tuple(int(s) for s in seeds[j]))

    def describe_problem(j):
        return f"problem {j} ({problems[j].logging} logging, K={problems[j].n_actions})"

    if unbiased:
        def bias():
            bad = np.flatnonzero(~(pvals >= alpha / n_problems))
            if bad.size:
                j = int(bad[0])
                return stat_fail(j, f"{describe_problem(j)}: mean error {mean_err[j]:+.4g} vs "
                                    f"truth {truths[j]:.4g}, t = {t[j]:.2f} over {n_logs} logs "
                                    f"(p = {pvals[j]:.2g} < {alpha / n_problems:.2g})")
        run.record("unbiased", bias)

    if max_abs_bias is not None:
        def bias_bound():
            crit = stats.t.ppf(1 - alpha / n_problems, df=n_logs - 1)
            low = np.abs(mean_err) - crit * se
            bad = np.flatnonzero(~(low <= max_abs_bias))
            if bad.size:
                j = int(bad[0])
                return stat_fail(j, f"{describe_problem(j)}: bias {mean_err[j]:+.4g} (at least "
                                    f"{low[j]:.4g} at confidence 1 - {alpha / n_problems:.2g}) "
                                    f"exceeds max_abs_bias = {max_abs_bias}")
        run.record("max_abs_bias", bias_bound)

    if max_rmse is not None:
        def rmse_bound():
            bad = np.flatnonzero(~(rmse <= max_rmse))
            if bad.size:
                j = int(bad[0])
                return stat_fail(j, f"{describe_problem(j)}: RMSE {rmse[j]:.4g} over {n_logs} logs "
                                    f"exceeds max_rmse = {max_rmse}")
        run.record("max_rmse", rmse_bound)

    has_ci = np.isfinite(lows) & np.isfinite(highs)
    if has_ci.any():
        if unbiased:
            target = np.broadcast_to(truths[:, None], values.shape)
            of = "the truth"
        else:  # the estimator's own expectation, from the other logs of the same problem
            finite_v = np.where(np.isfinite(values), values, 0.0)
            cnt = np.isfinite(values).sum(axis=1, keepdims=True)
            target = (finite_v.sum(axis=1, keepdims=True) - finite_v) / np.maximum(
                cnt - np.isfinite(values), 1)
            of = "the estimator's own expectation (mean of its other logs)"
        hit = has_ci & (lows <= target) & (target <= highs)
        n_cov, n_all = int(hit.sum()), int(has_ci.sum())
        per_problem = (hit.sum(axis=1) / np.maximum(has_ci.sum(axis=1), 1)).tolist()
        run.figures.update(coverage=n_cov / n_all, coverage_per_problem=per_problem,
                           coverage_of=of)
        floor = level - coverage_tol

        def coverage():
            # two-sided: too narrow (below level - coverage_tol) or too wide (above the level
            # itself), each side at alpha / 2
            low = stats.binomtest(n_cov, n_all, floor, alternative="less")
            if low.pvalue < alpha / 2:
                j = int(np.argmin(per_problem))
                return stat_fail(j, f"intervals covered {of} {n_cov}/{n_all} = "
                                    f"{n_cov / n_all:.3f} times, below {level} - {coverage_tol} "
                                    f"= {floor:.3f} (binomial p = {low.pvalue:.2g}); worst "
                                    f"{describe_problem(j)}: {per_problem[j]:.3f}")
            high = stats.binomtest(n_cov, n_all, level, alternative="greater")
            if high.pvalue < alpha / 2:
                j = int(np.argmax(per_problem))
                return stat_fail(j, f"intervals covered {of} {n_cov}/{n_all} = "
                                    f"{n_cov / n_all:.3f} times, above their level {level} "
                                    f"(binomial p = {high.pvalue:.2g}): wider than they claim; "
                                    f"widest {describe_problem(j)}: {per_problem[j]:.3f}")
        run.record("interval_coverage", coverage,
                   holds=f"covered {of} {n_cov}/{n_all} = {n_cov / n_all:.3f} times")
    return run.report()


# -- evaluators of learning agents ---------------------------------------------------------
def check_learning_policy_evaluator(evaluator, *, make_agent=None, n_logs: int = 10,
                                    n_rounds: int = 2000, strict: bool = False,
                                    rng=None) -> CheckReport:
    """Check a replay-like evaluator of learning agents on the BRED linear test bed.

    Parameters
    ----------
    evaluator : callable
        ``evaluator(log, make_agent, *, rng=None)`` returning an ``Estimate`` or a float, where
        ``make_agent(rng)`` builds a fresh agent (the agents' protocol).
    make_agent : callable, optional
        The agent to evaluate; default ``UCB1``.
    n_logs, n_rounds : int
        Uniformly-logged datasets drawn from ``recloop/LinearBandit-v0`` and their size.
    strict : bool, default False
        Whether the input-hygiene property ``nan_on_no_match`` fails the check (else its
        failure is advice, ``report.advice``).
    rng : None, int, SeedSequence or Generator
        Seed of the logs and of the streams passed to ``evaluator`` (same ``rng``, same
        report).

    Returns
    -------
    CheckReport
        When every property holds, with the errors against ``V(T)`` and ``V(T/K)`` in
        ``figures``; otherwise ``CheckFailed`` (an ``AssertionError``) carries the report.

    Notes
    -----
    Properties: determinism, logs not mutated, numpy's global random state untouched; input
    hygiene (advice unless ``strict``): nan with a warning (or ValueError) when no record
    matches. The error against the truth curve
    ``V(t)`` of the agent run online is *reported* in ``figures`` at the horizons ``T`` and
    ``T / K``, not asserted: evaluators of learners are biased by design (time acceleration).
    """
    check_callable(evaluator, "evaluator")
    n_logs = check_int(n_logs, "n_logs", low=1)
    n_rounds = check_int(n_rounds, "n_rounds", low=1)
    strict = _check_bool(strict, "strict")
    if make_agent is None:
        from agents import UCB1

        def make_agent(r):
            agent = UCB1()
            agent.reset(r)
            return agent
    check_callable(make_agent, "make_agent")
    from simulator import LinearBanditConfig, collect_log, online_value

    rng = as_generator(rng)
    config = LinearBanditConfig()
    seeds = rng.integers(0, 2**63, size=n_logs)
    logs = [collect_log(config, n_rounds, rng=int(s))[0] for s in seeds]
    run = _Runner("check_learning_policy_evaluator", strict=strict)

    def call(log, seed=0, factory=make_agent):
        return _unpack(evaluator(log, factory, rng=np.random.default_rng(seed)), "`evaluator`")

    def deterministic():
        a, b = call(logs[0], 5), call(logs[0], 5)
        if not _same(a[0], b[0], 0):
            return f"two calls with the same rng gave {a[0]!r} and {b[0]!r}"

    def not_mutated():
        before = logs[0].reward.copy(), logs[0].context.copy()
        call(logs[0])
        if not (np.array_equal(before[0], logs[0].reward)
                and np.array_equal(before[1], logs[0].context)):
            return "the log was modified"

    def no_match():
        log = logs[0]
        keep = np.flatnonzero(log.action != 0)
        return _degenerate(lambda: evaluator(log.take(keep), lambda r: FixedArm(0),
                                             rng=np.random.default_rng(0)),
                           "an agent that never plays a logged action")

    run.record("deterministic", deterministic)
    run.record("inputs_not_mutated", not_mutated)
    run.record("global_random_state_untouched",
               lambda: _global_state_untouched(lambda: call(logs[0])))
    run.record("nan_on_no_match", no_match)

    estimates = np.array([call(log, int(s))[0] for log, s in zip(logs, seeds, strict=True)])
    truth = online_value(config, make_agent, n_rounds, n_runs=100, rng=rng.integers(2**63))
    curve = np.asarray(truth.curve)
    horizon = max(1, n_rounds // config.n_arms)
    run.figures.update(
        mean_estimate=float(np.nanmean(estimates)),
        truth_at_T=float(curve[n_rounds - 1]),
        error_at_T=float(np.nanmean(estimates) - curve[n_rounds - 1]),
        truth_at_T_over_K=float(curve[horizon - 1]),
        error_at_T_over_K=float(np.nanmean(estimates) - curve[horizon - 1]),
    )
    return run.report()


# -- offline LOO metrics ------------------------------------------------------------------
class _ConstantList:
    """A constant recommender (does not look at the profile)."""

    def __init__(self, items):
        self.items = np.asarray(items, dtype=np.int64)

    def fit(self, profiles):
        return self

    def recommend(self, users, k, *, removed=None):
        return np.broadcast_to(self.items[:k], (len(np.atleast_1d(users)), k)).copy()


def _random_graph(rng, n_users: int, n_items: int) -> sp.csr_matrix:
    dense = rng.random((n_users, n_items)) < rng.uniform(0.05, 0.4)
    dense[rng.integers(n_users)] = False  # an empty row
    dense[:, rng.integers(n_items)] = False  # an item nobody holds
    dense[rng.random(n_users) < 0.5, rng.integers(n_items)] = True  # a dominant item
    return sp.csr_matrix(dense.astype(np.float64))


def check_offline_metric(metric, *, n_graphs: int = 10, k: int = 3, rng=None) -> CheckReport:
    """Check a LOO-style offline score on random profile graphs.

    Parameters
    ----------
    metric : callable
        ``metric(profiles, recommender, *, k, item_weights=None)`` returning an ``Estimate``
        or a float: the exhaustive hit@k score of the recommender on the profiles.
    n_graphs : int, default 10
        Random profile graphs (users x items, small to larger) the properties run on.
    k : int, default 3
        List length passed to ``metric``.
    rng : None, int, SeedSequence or Generator
        Seed of the graphs and of the item weights.

    Returns
    -------
    CheckReport
        When every property holds; otherwise ``CheckFailed`` (an ``AssertionError``) carries
        the report.

    Notes
    -----
    Properties: for a constant recommender the score equals ``sum_i P(i|w) [i in g]``
    (de Myttenaere et al.) with and without item weights, to 1e-9; multiplying all weights by
    a constant changes nothing; scores lie in [0, 1]; the same input gives the same result;
    the profiles are not mutated; numpy's global random state is untouched.
    """
    check_callable(metric, "metric")
    n_graphs = check_int(n_graphs, "n_graphs", low=1)
    k = check_int(k, "k", low=1)
    rng = as_generator(rng)
    graphs = [_random_graph(rng, 3 + 2 * j, k + 2 + j) for j in range(n_graphs)]
    weights = [rng.uniform(0.2, 3.0, g.shape[1]) for g in graphs]
    run = _Runner("check_offline_metric")

    def score(g, rec, w=None):
        return _unpack(metric(g, rec, k=k, item_weights=w), "`metric`")[0]

    def marginal(g, w):
        d = g.multiply(w[None, :]).tocsr()
        rows = np.asarray(d.sum(axis=1)).ravel()
        held = rows > 0
        inv = np.where(held, 1 / np.where(held, rows, 1), 0)
        return np.asarray(d.T @ inv).ravel() / held.sum()

    def constant_identity(j):
        g = graphs[j]
        rec = _ConstantList(np.arange(k))
        for w in (None, weights[j]):
            expected = marginal(g, np.ones(g.shape[1]) if w is None else w)[:k].sum()
            got = score(g, rec, w)
            if not math.isclose(got, expected, rel_tol=1e-9, abs_tol=1e-12):
                return (f"graph {j} ({g.shape[0]} users x {g.shape[1]} items): constant "
                        f"recommender scored {got!r}, expected sum_i P(i|w) l(g,i) = {expected!r}")

    def scale_invariant(j):
        g = graphs[j]
        rec = _ConstantList(np.arange(k)[::-1])
        a, b = score(g, rec, weights[j]), score(g, rec, 7.5 * weights[j])
        if not math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12):
            return f"graph {j}: weights w gave {a!r}, weights 7.5 w gave {b!r}"

    def in_range(j):
        v = score(graphs[j], _ConstantList(np.arange(k)))
        if not 0 <= v <= 1:
            return f"graph {j}: score {v!r} outside [0, 1]"

    def deterministic(j):
        rec = _ConstantList(np.arange(k))
        a, b = score(graphs[j], rec), score(graphs[j], rec)
        if not _same(a, b, 0):
            return f"graph {j}: {a!r} then {b!r} on the same input"

    def not_mutated(j):
        g = graphs[j].copy()
        score(g, _ConstantList(np.arange(k)))
        if (g != graphs[j]).nnz:
            return f"graph {j}: the profiles were modified"

    def global_rng(j):
        msg = _global_state_untouched(lambda: score(graphs[j], _ConstantList(np.arange(k))))
        return f"graph {j}: {msg}" if msg else None

    order = range(n_graphs)
    run.record("constant_recommender_identity", lambda: _first_failure(order, constant_identity))
    run.record("weight_scale_invariant", lambda: _first_failure(order, scale_invariant))
    run.record("score_in_unit_interval", lambda: _first_failure(order, in_range))
    run.record("deterministic", lambda: _first_failure(order, deterministic))
    run.record("inputs_not_mutated", lambda: _first_failure(order, not_mutated))
    run.record("global_random_state_untouched", lambda: _first_failure(order, global_rng))
    return run.report()
