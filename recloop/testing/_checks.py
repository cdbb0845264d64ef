"""Property checks for users' own estimators, in the spirit of Gymnasium's ``check_env``.

Each check runs a list of named properties against problems whose truth is known, collects
every failure, and raises one ``AssertionError`` that lists them all, each with the smallest
failing example it found. When everything passes it returns a :class:`CheckReport`.
"""

from __future__ import annotations

import inspect
import math
import numbers
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import scipy.sparse as sp
from scipy import stats

from simulator.logs import BanditLog
from recloop._selfcheck import FixedArm
from recloop.testing._problems import LOGGING_POLICIES, BanditProblem, random_bandit_problem

__all__ = ["CheckReport", "PropertyResult", "check_ope_estimator",
           "check_learning_policy_evaluator", "check_offline_metric"]


@dataclass(frozen=True)
class PropertyResult:
    """The outcome of one property: ``passed``, and what was seen (``detail``)."""

    name: str
    passed: bool
    detail: str = ""


@dataclass(frozen=True)
class CheckReport:
    """All properties a check ran, with figures (bias z-scores, coverage, errors)."""

    check: str
    results: tuple[PropertyResult, ...]
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    @property
    def failures(self) -> tuple[PropertyResult, ...]:
        return tuple(r for r in self.results if not r.passed)

    def __str__(self) -> str:
        lines = [f"{self.check}: {sum(r.passed for r in self.results)}/{len(self.results)} "
                 "properties hold"]
        lines += [f"  [{'ok' if r.passed else 'FAIL'}] {r.name}: {r.detail}" for r in self.results]
        return "\n".join(lines)

    def raise_if_failed(self) -> "CheckReport":
        if not self.passed:
            raise AssertionError(str(self))
        return self


# -- helpers ------------------------------------------------------------------------------
def _check_callable(fn, name: str) -> None:
    if not callable(fn):
        raise TypeError(f"`{name}` must be callable; got {type(fn).__name__}.")


def _check_count(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"`{name}` must be an int; got {type(value).__name__}.")
    if value < 1:
        raise ValueError(f"`{name}` must be >= 1; got {value}.")
    return int(value)


def _rng_kwargs(fn) -> Callable[[int], dict]:
    """Pass ``rng`` only to callables that take it (deterministic estimators need not)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return lambda seed: {"rng": np.random.default_rng(seed)}
    takes = any(p.name == "rng" or p.kind is p.VAR_KEYWORD for p in params)
    return (lambda seed: {"rng": np.random.default_rng(seed)}) if takes else (lambda seed: {})


def _unpack(result, who: str):
    """(value, ci) from an Estimate-like object or a real number; TypeError otherwise."""
    if hasattr(result, "value"):
        value = result.value
        ci = (getattr(result, "ci_low", math.nan), getattr(result, "ci_high", math.nan))
    else:
        value, ci = result, (math.nan, math.nan)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.floating)):
        raise TypeError(f"{who} must return an Estimate or a real number; "
                        f"got {type(result).__name__}.")
    return float(value), (float(ci[0]), float(ci[1]))


def _same(a: float, b: float, rtol: float = 1e-9) -> bool:
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=rtol, abs_tol=1e-12)


class _Runner:
    """Runs properties, turning exceptions into failures, keeping the first (smallest) example."""

    def __init__(self, check: str):
        self.check = check
        self.results: list[PropertyResult] = []
        self.figures: dict[str, Any] = {}

    def record(self, name: str, fn: Callable[[], str | None]) -> None:
        try:
            failure = fn()
        except TypeError as exc:
            if "must return an Estimate" in str(exc):
                raise
            failure = f"raised {type(exc).__name__}: {exc}"
        except Exception as exc:  # the estimator under test may raise anything
            failure = f"raised {type(exc).__name__}: {exc}"
        self.results.append(PropertyResult(name, failure is None, failure or "holds"))

    def report(self) -> CheckReport:
        return CheckReport(self.check, tuple(self.results), dict(self.figures)).raise_if_failed()


def _first_failure(examples, fails: Callable[[Any], str | None]) -> str | None:
    """Run ``fails`` over examples ordered from small to large; describe the first failure."""
    for ex in examples:
        msg = fails(ex)
        if msg is not None:
            return msg
    return None


def _global_state_untouched(call) -> str | None:
    before = np.random.get_state()
    call()
    after = np.random.get_state()
    if not (before[0] == after[0] and np.array_equal(before[1], after[1]) and before[2:] == after[2:]):
        return "numpy's global random state changed: draw from the `rng` argument instead"
    return None


def _degenerate(call, what: str) -> str | None:
    """Degenerate input must give a ValueError, or nan with a warning -- never a silent number."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value, _ = _unpack(call(), "the estimator")
        except ValueError:
            return None
    if math.isnan(value) and caught:
        return None
    if math.isnan(value):
        return f"{what}: returned nan without a warning"
    return f"{what}: returned {value!r} silently (expected ValueError, or nan with a warning)"


# -- static-policy estimators --------------------------------------------------------------
def _problems(rng, n_problems: int):
    """Problems from small to large, cycling through logging policies."""
    out = []
    for j in range(n_problems):
        out.append(random_bandit_problem(
            rng, n_actions=2 + j % 3, dim=1 + j % 2, logging=LOGGING_POLICIES[j % 3]))
    return out


def check_ope_estimator(estimator, *, n_problems: int = 6, n_logs: int = 200,
                        n_rounds: int = 200, unbiased: bool = True, level: float = 0.95,
                        alpha: float = 1e-3, rng=None) -> CheckReport:
    """Check a static-policy off-policy estimator against problems with known truth.

    Parameters
    ----------
    estimator : callable
        ``estimator(log, action_dist, *, rng=None)`` returning an ``Estimate`` (or anything
        with ``value``, ``ci_low``, ``ci_high``) or a float. ``action_dist`` has OBP's shape
        ``(n_rounds, n_actions, 1)``. ``rng`` is passed only when the signature takes it.
    n_problems : int
        Number of random problems (reward model, logging and target policies).
    n_logs : int
        Logs drawn per problem for the statistical properties.
    n_rounds : int
        Records per log.
    unbiased : bool
        Whether the estimator claims to be unbiased (tested when True).
    level : float
        Nominal level of the estimator's intervals (coverage is tested when it returns them).
    alpha : float
        Family-wise false-alarm rate of the statistical properties (Bonferroni-corrected).
    rng : optional
        Seed for the problems and logs (anything ``numpy.random.default_rng`` accepts).

    Returns
    -------
    CheckReport
        When every property holds; otherwise ``AssertionError`` lists every failure.

    Notes
    -----
    Properties: same rng, same result; inputs not mutated; numpy's global random state not
    used; invariance to permuting records; finite on valid input; ValueError or nan with a
    warning on an empty log and on a log with no support for the target policy; unbiasedness
    (per-problem t statistic of the mean error over ``n_logs`` logs, two-sided, Bonferroni
    over problems); interval coverage (one-sided binomial test of the pooled coverage against
    ``level``).

    Examples
    --------
    >>> from evaluators import ips
    >>> check_ope_estimator(ips, n_problems=2, n_logs=50).passed
    True
    """
    _check_callable(estimator, "estimator")
    n_problems = _check_count(n_problems, "n_problems")
    n_logs = _check_count(n_logs, "n_logs")
    n_rounds = _check_count(n_rounds, "n_rounds")
    if not 0 < level < 1:
        raise ValueError(f"`level` must be in (0, 1); got {level}.")
    rng = np.random.default_rng(rng)
    problems = _problems(rng, n_problems)
    seeds = rng.integers(0, 2**63, size=(n_problems, n_logs))
    run = _Runner("check_ope_estimator")
    rng_kw = _rng_kwargs(estimator)

    def call(log, ad, seed=0):
        return _unpack(estimator(log, ad, **rng_kw(seed)), "`estimator`")

    def sizes(j):  # the same problem at growing log sizes: the first failure is the smallest
        return [(j, n) for n in sorted({min(8, n_rounds), min(32, n_rounds), n_rounds})]

    small_first = [ex for j in range(n_problems) for ex in sizes(j)]

    def sample(ex):
        j, n = ex
        return problems[j].sample(n, seeds[j, 0])

    def describe(ex):
        j, n = ex
        p = problems[j]
        return f"problem {j} (K={p.n_actions}, d={p.dim}, logging={p.logging}, n_rounds={n})"

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
        before = {name: getattr(log, name).copy() for name in ("context", "action", "reward", "pscore")}
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

    run.record("deterministic", lambda: _first_failure(small_first, deterministic))
    run.record("inputs_not_mutated", lambda: _first_failure(small_first, not_mutated))
    run.record("global_random_state_untouched", lambda: _first_failure(small_first, global_rng))
    run.record("permutation_invariant", lambda: _first_failure(small_first, permutation))
    run.record("finite_on_valid_input", lambda: _first_failure(small_first, finite))

    def empty():
        log, ad = sample(small_first[0])
        return _degenerate(lambda: estimator(log.take(np.arange(0)), ad[:0], **rng_kw(0)),
                           "empty log")

    def no_support():
        p = random_bandit_problem(rng.integers(2**63), n_actions=3, dim=1, deficient=True)
        log, _ = p.sample(min(n_rounds, 32), 0)
        ad = np.zeros((log.n_rounds, 3, 1))
        ad[:, p.deficient, 0] = 1.0  # all target mass on the action the log never takes
        return _degenerate(lambda: estimator(log, ad, **rng_kw(0)),
                           "target policy with no support in the log")

    run.record("empty_log_rejected", empty)
    run.record("no_support_rejected", no_support)

    # statistical properties
    values = np.full((n_problems, n_logs), np.nan)
    covered = []
    for j, p in enumerate(problems):
        for m in range(n_logs):
            log, ad = p.sample(n_rounds, seeds[j, m])
            value, (lo, hi) = call(log, ad, seeds[j, m])
            values[j, m] = value
            if math.isfinite(lo) and math.isfinite(hi):
                covered.append(lo <= p.value <= hi)
    truths = np.array([p.value for p in problems])
    err = values - truths[:, None]
    se = err.std(axis=1, ddof=1) / math.sqrt(n_logs)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = err.mean(axis=1) / se
    pvals = 2 * stats.t.sf(np.abs(t), df=n_logs - 1)
    pvals[(se == 0) & (err.mean(axis=1) == 0)] = 1.0
    run.figures.update(truth=truths.tolist(), mean_error=err.mean(axis=1).tolist(),
                       bias_t=t.tolist())

    if unbiased:
        def bias():
            bad = np.flatnonzero(~(pvals >= alpha / n_problems))
            if bad.size:
                j = int(bad[0])
                return (f"problem {j} ({problems[j].logging} logging, K={problems[j].n_actions}): "
                        f"mean error {err[j].mean():+.4g} vs truth {truths[j]:.4g}, "
                        f"t = {t[j]:.2f} over {n_logs} logs (p = {pvals[j]:.2g} < "
                        f"{alpha / n_problems:.2g})")
        run.record("unbiased", bias)

    if covered:
        n_cov, n_all = int(np.sum(covered)), len(covered)
        run.figures["coverage"] = n_cov / n_all

        def coverage():
            res = stats.binomtest(n_cov, n_all, level, alternative="less")
            if res.pvalue < alpha:
                return (f"intervals covered the truth {n_cov}/{n_all} = {n_cov / n_all:.3f} "
                        f"times, nominal {level} (binomial p = {res.pvalue:.2g})")
        run.record("interval_coverage", coverage)
    return run.report()


# -- evaluators of learning agents ---------------------------------------------------------
def check_learning_policy_evaluator(evaluator, *, make_agent=None, n_logs: int = 10,
                                    n_rounds: int = 2000, rng=None) -> CheckReport:
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

    Notes
    -----
    Properties: determinism, logs not mutated, numpy's global random state untouched, nan
    with a warning (or ValueError) when no record matches. The error against the truth curve
    ``V(t)`` of the agent run online is *reported* in ``figures`` at the horizons ``T`` and
    ``T / K``, not asserted: evaluators of learners are biased by design (time acceleration).
    """
    _check_callable(evaluator, "evaluator")
    n_logs = _check_count(n_logs, "n_logs")
    n_rounds = _check_count(n_rounds, "n_rounds")
    if make_agent is None:
        from agents import UCB1

        def make_agent(r):
            agent = UCB1()
            agent.reset(r)
            return agent
    _check_callable(make_agent, "make_agent")
    from simulator import LinearBanditConfig, collect_log, online_value

    rng = np.random.default_rng(rng)
    config = LinearBanditConfig()
    seeds = rng.integers(0, 2**63, size=n_logs)
    logs = [collect_log(config, n_rounds, rng=int(s))[0] for s in seeds]
    run = _Runner("check_learning_policy_evaluator")

    def call(log, seed=0, factory=make_agent):
        return _unpack(evaluator(log, factory, rng=np.random.default_rng(seed)), "`evaluator`")

    def deterministic():
        a, b = call(logs[0], 5), call(logs[0], 5)
        if not _same(a[0], b[0], 0):
            return f"two calls with the same rng gave {a[0]!r} and {b[0]!r}"

    def not_mutated():
        before = logs[0].reward.copy(), logs[0].context.copy()
        call(logs[0])
        if not (np.array_equal(before[0], logs[0].reward) and np.array_equal(before[1], logs[0].context)):
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

    estimates = np.array([call(log, int(s))[0] for log, s in zip(logs, seeds)])
    truth = online_value(config, make_agent, n_rounds, n_runs=100, rng=rng.integers(2**63))
    curve = np.asarray(truth.curve)
    horizon = max(1, n_rounds // config.n_arms)
    run.figures.update(
        mean_estimate=float(np.nanmean(estimates)),
        truth_at_T=float(curve[n_rounds - 1]), error_at_T=float(np.nanmean(estimates) - curve[n_rounds - 1]),
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

    Notes
    -----
    Properties: for a constant recommender the score equals ``sum_i P(i|w) [i in g]``
    (de Myttenaere et al.) with and without item weights, to 1e-9; multiplying all weights by
    a constant changes nothing; scores lie in [0, 1]; the same input gives the same result;
    the profiles are not mutated; numpy's global random state is untouched.
    """
    _check_callable(metric, "metric")
    n_graphs = _check_count(n_graphs, "n_graphs")
    k = _check_count(k, "k")
    rng = np.random.default_rng(rng)
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
