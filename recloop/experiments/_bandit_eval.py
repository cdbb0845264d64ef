"""Replay and BRED scored against the simulator's ground truth (issue 6's experiments).

Li et al. (2011) replay a learning policy on uniformly logged data: it only learns on the
~T/K records where it agrees with the log, so its score measures roughly the online value at
horizon T/K ("time acceleration"), below the value at T for a learner. BRED (Mary, Preux &
Nicol 2014) replays on K*T bootstrap records, jittered, to restore a horizon of about T and to
give a confidence interval. Here the online value of the very agent is known (Monte Carlo over
independent online runs, :func:`simulator.online_value`), so every estimate is put beside it:
bias, RMSE, mean interval width and coverage of the truth over many independent logs.
"""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

import evaluators
import simulator
from recloop._registry import EvaluationKind
from recloop._results import Measurement
from recloop._schema import REQUIRED, EstimatorList, Float, Int, OneOf, Param, Str
from recloop.experiments._common import (
    ab_evaluator,
    as_estimate,
    child_rng,
    emit_per_log,
    estimator_table,
    name_key,
    seed_sequence,
)

__all__ = ["BRED_VS_REPLAY", "DYNAMIC_NEWS", "KINDS", "TruthComparison", "VARIANTS",
           "bred_vs_replay", "compare_to_truth", "dynamic_news", "plot_bred_vs_replay",
           "plot_dynamic_news"]

EVALUATION = "bred_vs_replay"
EVALUATION_DYNAMIC = "dynamic_news"


class ZeroTruthWarning(UserWarning):
    """A relative error was asked for a truth of 0 (returned as nan)."""


# -- comparison with the truth --------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class TruthComparison:
    """Estimates against their ground truth (arrays of shape (n,), or scalars for one).

    ``error = value - truth``; ``relative_error = error / |truth|`` (``nan`` where the truth
    is 0); ``covers``: whether ``[ci_low, ci_high]`` contains the truth.
    """

    error: np.ndarray | float
    relative_error: np.ndarray | float
    covers: np.ndarray | bool


def _truth_value(truth) -> float:
    if isinstance(truth, simulator.OnlineValue):
        return truth.value
    if isinstance(truth, (numbers.Real, np.floating)) and not isinstance(truth, bool):
        return float(truth)
    raise TypeError(f"`truth` must be a float, an OnlineValue or a sequence of them; got "
                    f"{type(truth).__name__}.")


def compare_to_truth(estimates, truth) -> TruthComparison:
    """Error, relative error and coverage of estimates against the ground truth.

    Parameters
    ----------
    estimates : evaluators.Estimate or sequence of Estimate
        The estimates (anything with ``value``, ``ci_low``, ``ci_high``).
    truth : float, simulator.OnlineValue, or sequence of them
        One truth for all estimates, or one per estimate.

    Returns
    -------
    TruthComparison
        Scalars for a single estimate, arrays (n,) for a sequence.

    Raises
    ------
    TypeError
        Estimates without ``value``/``ci_low``/``ci_high``; a truth of the wrong type.
    ValueError
        A sequence of truths of another length than the estimates.
    """
    single = hasattr(estimates, "value")
    ests = [estimates] if single else list(estimates)
    for j, e in enumerate(ests):
        if not all(hasattr(e, a) for a in ("value", "ci_low", "ci_high")):
            raise TypeError(f"`estimates[{j}]` must be an Estimate; got {type(e).__name__}.")
    if isinstance(truth, (list, tuple, np.ndarray)):
        t = np.array([_truth_value(x) for x in np.ravel(np.asarray(truth, dtype=object))])
        if t.size != len(ests):
            raise ValueError(f"`truth` must hold one value per estimate ({len(ests)}); got "
                             f"{t.size}.")
    else:
        t = np.full(len(ests), _truth_value(truth))
    value = np.array([e.value for e in ests], dtype=np.float64)
    lo = np.array([e.ci_low for e in ests], dtype=np.float64)
    hi = np.array([e.ci_high for e in ests], dtype=np.float64)
    err = value - t
    zero = t == 0
    if zero.any():
        warnings.warn("compare_to_truth: the truth is 0 for some estimates; their relative "
                      "error is nan.", ZeroTruthWarning, stacklevel=2)
    rel = np.divide(err, np.abs(t), out=np.full(err.shape, np.nan), where=~zero)
    covers = (lo <= t) & (t <= hi)
    if single:
        return TruthComparison(float(err[0]), float(rel[0]), bool(covers[0]))
    return TruthComparison(err, rel, covers)


# -- aggregation --------------------------------------------------------------------------------


def _summary_rows(ests, truth, truth_se: float, *, evaluation, agent, variant,
                  params, suffix: str = "") -> list[Measurement]:
    """value, bias, rmse, coverage and width rows of one (agent, variant) over the logs.

    ``truth`` is one float, or one per estimate (then the value row shows their mean).
    With a ``suffix`` only the truth-dependent rows (bias, rmse, coverage) are made, their
    metric names suffixed (e.g. ``bias_at_matches``).
    """
    value = np.array([e.value for e in ests], dtype=np.float64)
    truth = np.broadcast_to(np.asarray(truth, dtype=np.float64), value.shape)
    ok = np.isfinite(value)
    n = int(ok.sum())
    kw = dict(evaluation=evaluation, agent=agent, variant=variant, params=params, n=n)
    if n == 0:
        warnings.warn(f"{evaluation}: no finite estimate for {agent}/{variant}; rows are nan.",
                      RuntimeWarning, stacklevel=3)
        names = ("bias", "rmse", "coverage") if suffix else ("value", "bias", "rmse",
                                                              "coverage", "width")
        return [Measurement(metric=m + suffix, estimate=math.nan, **kw) for m in names]
    good = [e for e, k in zip(ests, ok, strict=True) if k]
    cmp = compare_to_truth(good, list(truth[ok]))
    err = np.atleast_1d(cmp.error)
    sq = math.sqrt
    se_err = sq(err.var(ddof=1) / n + truth_se ** 2) if n > 1 else math.nan
    mse = float(np.mean(err ** 2))
    rmse = sq(mse)
    se_rmse = (float(np.std(err ** 2, ddof=1)) / sq(n) / (2 * rmse)
               if n > 1 and rmse > 0 else math.nan)
    width = np.array([e.ci_high - e.ci_low for e in good])
    has_ci = bool(np.all(np.isfinite(width)))  # coverage is no measure of point estimates
    cov = evaluators.wilson_estimate(int(np.sum(cmp.covers)), n)
    se_w = float(width.std(ddof=1) / sq(n)) if n > 1 else math.nan
    mean_v = float(value[ok].mean())
    se_v = float(value[ok].std(ddof=1) / sq(n)) if n > 1 else math.nan
    z = 1.959963984540054
    scored = [
        Measurement(metric="bias" + suffix, estimate=float(err.mean()), stderr=se_err,
                    ci_low=float(err.mean()) - z * se_err, ci_high=float(err.mean()) + z * se_err,
                    truth=0.0, **kw),
        # no truth: an RMSE is already an error against the truth (the summary of the
        # report would otherwise show an "error of the error")
        Measurement(metric="rmse" + suffix, estimate=rmse, stderr=se_rmse, **kw),
    ]
    if has_ci:
        scored.append(Measurement(metric="coverage" + suffix, estimate=cov.value,
                                  stderr=cov.stderr, ci_low=cov.ci_low, ci_high=cov.ci_high,
                                  **kw))
    if suffix:
        return scored
    rows = [Measurement(metric="value", estimate=mean_v, stderr=se_v, ci_low=mean_v - z * se_v,
                        ci_high=mean_v + z * se_v, truth=float(truth[ok].mean()), **kw),
            *scored]
    if has_ci:
        rows.append(Measurement(metric="width", estimate=float(width.mean()), stderr=se_w,
                                **kw))
    return rows


def _n_matches(est) -> float:
    """Horizon an estimate measures: replay's used records, BRED's mean matches."""
    m = getattr(est, "mean_matches", None)
    return float(est.n) if m is None else float(m)


def _check_common(config, agents, T, n_logs, n_bootstrap, n_truth_runs):
    config = simulator.LinearBanditConfig() if config is None else config
    if isinstance(config, str):
        config = simulator.preset(config)
    if not isinstance(config, simulator.LinearBanditConfig):
        raise TypeError("`config` must be a LinearBanditConfig or a preset name; got "
                        f"{type(config).__name__}.")
    if not isinstance(agents, Mapping) or not agents:
        raise TypeError("`agents` must be a non-empty mapping name -> make_agent(rng); got "
                        f"{type(agents).__name__}.")
    for name, make in agents.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"`agents` keys must be non-empty strings; got {name!r}.")
        if not callable(make):
            raise TypeError(f"`agents[{name!r}]` must be callable (rng -> agent); got "
                            f"{type(make).__name__}.")
    for label, v, lo in (("T", T, 1), ("n_logs", n_logs, 1), ("n_bootstrap", n_bootstrap, 1),
                         ("n_truth_runs", n_truth_runs, 2)):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise TypeError(f"`{label}` must be an int; got {type(v).__name__}.")
        if v < lo:
            raise ValueError(f"`{label}` must be >= {lo}; got {v}.")
    if config.horizon is not None and T > config.horizon:
        raise ValueError(f"`T` must be <= the horizon {config.horizon} of the config; got {T}.")
    return config


def _check_ab_users(ab_users, table, config) -> int:
    """The A/B traffic budget: an int >= 0 (0: none), >= 2 users, within the world's
    horizon; ``ab_test`` must not also name an evaluator."""
    if isinstance(ab_users, bool) or not isinstance(ab_users, numbers.Integral):
        raise TypeError(f"`ab_users` must be an int; got {type(ab_users).__name__}.")
    if ab_users == 1 or ab_users < 0:
        raise ValueError(f"`ab_users` must be 0 (no A/B test) or >= 2; got {ab_users}.")
    if ab_users and config.horizon is not None and ab_users > config.horizon:
        raise ValueError(f"`ab_users` must be <= the horizon {config.horizon} of the config; "
                         f"got {ab_users}.")
    if ab_users and "ab_test" in table:
        raise ValueError("`estimators` must not name an evaluator 'ab_test' when `ab_users` "
                         "runs the A/B test of that name.")
    return int(ab_users)


def _bar(progress, iterable, desc):
    from recloop_base.progress import bar

    return bar(iterable, desc=desc, show=progress)


# -- experiments -----------------------------------------------------------------------------


#: The evaluators bred_vs_replay runs itself (keyed streams of their own, see below).
VARIANTS = ("replay", "bred", "bred_nojitter", "bred_once")


def bred_vs_replay(config, agents: Mapping[str, Callable], *, T: int, n_logs: int = 50,
                   n_bootstrap: int = 100, n_truth_runs: int = 200, estimators=VARIANTS,
                   ab_users: int = 0, rng=None, progress: bool = False,
                   executor=None, per_log=None) -> list[Measurement]:
    """Replay and BRED variants against the online value, for one log size T.

    Parameters
    ----------
    config : LinearBanditConfig or preset name
        The test bed (``"bred_linear"`` for the paper's).
    agents : mapping name -> make_agent
        ``make_agent(rng)`` returns a fresh, reset agent (e.g. ``{"linucb": ..., "ucb1": ...}``).
    T : int
        Size of each uniformly logged dataset, >= 1.
    n_logs : int, default 50
        Independent logs (each evaluated by every agent and variant).
    n_bootstrap : int, default 100
        BRED replicates.
    n_truth_runs : int, default 200
        Online runs of the ground truth, >= 2.
    estimators : sequence, default all of :data:`VARIANTS`
        The evaluators compared: names of :data:`VARIANTS` (``replay``, ``bred``,
        ``bred_nojitter``, ``bred_once``) and ``(name, evaluator)`` pairs of your own, where
        ``evaluator(log, make_agent, *, rng)`` returns an ``evaluators.Estimate`` or a float
        (the signature ``recloop.testing.check_learning_policy_evaluator`` checks); or a
        mapping ``name -> evaluator``.
    ab_users : int, default 0
        Traffic budget of an online A/B test run per log beside the offline estimators
        (variant ``ab_test``): the agent against uniform random on ``ab_users`` fresh users,
        half each; its estimate is the agent's mean reward over its users, scored against
        ``V(T)`` and (``*_at_matches``) against ``V(m)`` at its ``m`` users. 0: no A/B test.
    rng : None, int, SeedSequence or Generator
        Root of every draw; log ``i`` is keyed by ``i``, an agent's draws by its name, an
        evaluator's by its name.
    progress : bool
        Show a progress bar over the logs.
    executor : None or dask.distributed.Client
        Where BRED's replicates and the truth's online runs are computed (partitioned over
        the cluster's workers; the same numbers).
    per_log : callable, optional
        Receives every variant's estimate on every log as a ``Measurement`` (``log`` = the
        log's index, its interval): metric ``value`` with ``truth`` ``V(T)``, and --
        where the horizon is known -- ``value_at_matches`` with ``truth`` ``V(m)``; the
        per-log estimates :func:`recloop.summarize` turns into bias, RMSE and coverage.

    Returns
    -------
    list of Measurement
        Evaluation ``bred_vs_replay``; per agent and variant (``replay``, ``bred``,
        ``bred_nojitter``, ``bred_once``: BRED with ``reveal="once"``, and your own
        evaluators by name) the metrics ``value``
        (mean estimate; truth ``V(T)``), ``bias``, ``rmse``, ``coverage`` (Wilson interval),
        ``width``; the same scored against the horizon each estimate really measures,
        ``bias_at_matches``, ``rmse_at_matches``, ``coverage_at_matches`` (truth
        ``V(m)``, ``m`` the estimate's number of matches: replay's used records, BRED's
        ``mean_matches``, capped at T; not for your own evaluators, whose horizon is
        unknown), and ``mean_matches`` (mean of ``m`` over the logs, stderr over the logs);
        ``coverage`` and ``width`` only where the evaluator gives intervals; per agent the
        truth rows
        ``online_value`` (variant ``T``: ``V(T)``; variant ``T_over_K``: ``V(T / K)``, the horizon
        replay really measures). ``params`` is ``{"T": T}``.

    Notes
    -----
    The truth of every variant is ``V(T)`` = the expected average reward of the agent's
    first ``T`` online steps (Mary, Preux & Nicol 2014, who score BRED against it); the
    bias's standard error includes the Monte-Carlo error of the truth. Errors are computed
    over the logs, so ``rmse`` mixes the estimator's variance over logs and its bias.
    ``bred`` (the paper's algorithm) over-estimates context-using learners (LinUCB): they
    memorise the repeated copies of a record (see :func:`evaluators.bred`);
    ``bred_once`` reveals each record once per replicate and is unbiased for ``V(m)`` at
    its shorter horizon ``m`` (about T/4 for LinUCB with K = 10).
    """
    config = _check_common(config, agents, T, n_logs, n_bootstrap, n_truth_runs)
    table = estimator_table(estimators, VARIANTS)
    ab_users = _check_ab_users(ab_users, table, config)
    if ab_users:
        table["ab_test"] = ab_evaluator(config, ab_users)
    root = seed_sequence(rng)
    params = {"T": int(T)}
    K = config.n_arms
    # the built-in BRED variants' seeds are keyed by their position in this table (kept so
    # that results stay comparable from release to release); others by their name
    bred_variants = {"bred": ("auto", "every", 0), "bred_nojitter": (0.0, "every", 1),
                     "bred_once": ("auto", "once", 2)}
    ests = {(a, v): [] for a in agents for v in table}
    for i in _bar(progress, range(n_logs), "logs"):
        log, _ = simulator.collect_log(config, int(T), rng=child_rng(root, 1, i))
        for name, make in agents.items():
            key = name_key(name)
            if "replay" in table and table["replay"] is None:
                agent = make(child_rng(root, 2, key, i))
                ests[name, "replay"].append(evaluators.replay(
                    log, agent, rng=child_rng(root, 3, key, i)))
            for variant, f in table.items():
                if f is None and variant in bred_variants:
                    jitter, reveal, v = bred_variants[variant]
                    ests[name, variant].append(evaluators.bred(
                        log, make, n_bootstrap=n_bootstrap, jitter=jitter, reveal=reveal,
                        rng=child_rng(root, 4, key, i, v), executor=executor))
                elif f is not None:
                    ests[name, variant].append(as_estimate(
                        f(log, make, rng=child_rng(root, 6, name_key(variant), key, i)),
                        f"evaluator {variant!r}"))
    rows = []
    for name, make in agents.items():
        truth = simulator.online_value(config, make, int(T), n_runs=n_truth_runs,
                                       rng=child_rng(root, 5, name_key(name)),
                                       executor=executor)
        for variant, f in table.items():
            es = ests[name, variant]
            kw = dict(evaluation=EVALUATION, agent=name, variant=variant, params=params)
            emit_per_log(per_log, es, truth.value, **kw)
            rows += _summary_rows(es, truth.value, truth.stderr, **kw)
            if f is not None and variant != "ab_test":  # a user's evaluator: the horizon
                continue                                   # it measures is unknown
            m = np.array([_n_matches(e) for e in es])
            at = [truth.at(min(int(T), max(1, int(round(x))))) for x in m]
            emit_per_log(per_log, es, [v for v, _ in at], metric="value_at_matches", **kw)
            rows += _summary_rows(es, np.array([v for v, _ in at]),
                                  float(np.mean([se for _, se in at])),
                                  evaluation=EVALUATION, agent=name, variant=variant,
                                  params=params, suffix="_at_matches")
            se_m = float(m.std(ddof=1) / math.sqrt(m.size)) if m.size > 1 else math.nan
            rows.append(Measurement(evaluation=EVALUATION, agent=name, variant=variant,
                                    metric="mean_matches", estimate=float(m.mean()),
                                    stderr=se_m, n=int(m.size), params=params))
        for variant, t in (("T", int(T)), ("T_over_K", max(1, int(T) // K))):
            v, se = truth.at(t)
            rows.append(Measurement(evaluation=EVALUATION, agent=name, metric="online_value",
                                    estimate=v, stderr=se, ci_low=v - 1.96 * se,
                                    ci_high=v + 1.96 * se, truth=v, n=truth.n_runs,
                                    variant=variant, params=params))
    return rows


def _window_starts(T: int, window: int) -> list[int]:
    return list(range(0, T - window + 1, window))


def dynamic_news(config, agents: Mapping[str, Callable], *, T: int, window: int,
                 n_logs: int = 20, n_bootstrap: int = 50, n_truth_runs: int = 100,
                 jitter="auto", rng=None, progress: bool = False,
                 per_log=None) -> list[Measurement]:
    """Replay's time-acceleration bias and windowed BRED on the drifting news world.

    Parameters
    ----------
    config : LinearBanditConfig or preset name
        A dynamic test bed (``"dynamic_news"``: arms live 500 ticks, CTR half-life 250).
    agents : mapping name -> make_agent
        As for :func:`bred_vs_replay`.
    T : int
        Log size (ticks ``0 .. T-1``), <= the horizon.
    window : int
        BRED window length, in [1, T]: BRED runs on each of the ``T // window`` consecutive
        windows, over which the world is nearly static when ``window`` is short against the
        arms' lifetime.
    n_logs, n_bootstrap, n_truth_runs, rng, progress
        As for :func:`bred_vs_replay`.
    jitter : "auto" or float
        BRED's jitter.
    per_log : callable, optional
        Receives every estimate as a ``Measurement`` (metric ``value``, ``log`` = the log's
        index, its interval and truth): one per log for ``replay`` and ``bred_window``, one
        per window of each log for ``bred_window_local`` (each against its window's value).

    Returns
    -------
    list of Measurement
        Evaluation ``dynamic_news``, ``params = {"T": T, "window": window}``; per agent:

        * variant ``replay``: replay of the whole log against ``V_0(T)``, the online value of
          the agent launched at tick 0 for ``T`` steps (time acceleration shows as bias);
        * variant ``bred_window``: the mean of the windows' BRED estimates against the same
          ``V_0(T)`` (standard error from the windows' bootstrap errors);
        * variant ``bred_window_local``: each window's BRED estimate against the value of an
          agent launched at the window's start for ``window`` steps (pooled over windows and
          logs): what BRED gets right when the world drifts within the window;

        each with ``value``, ``bias``, ``rmse``, ``coverage`` and ``width``.

    Notes
    -----
    BRED's expansion is the mean number of live arms in the window (the replay match rate
    is one over it under uniform logging), not the size of the action space. Short windows
    keep drift out (less bias against the local truth) but give few records (more variance,
    and a fresh agent per window, which forgets what it learnt before: bias against V_0(T)).
    """
    config = _check_common(config, agents, T, n_logs, n_bootstrap, n_truth_runs)
    if isinstance(window, bool) or not isinstance(window, numbers.Integral):
        raise TypeError(f"`window` must be an int; got {type(window).__name__}.")
    if not 1 <= window <= T:
        raise ValueError(f"`window` must be in [1, T = {T}]; got {window}.")
    root = seed_sequence(rng)
    params = {"T": int(T), "window": int(window)}
    starts = _window_starts(int(T), int(window))
    replay_est = {a: [] for a in agents}
    window_mean = {a: [] for a in agents}
    window_each = {a: [[] for _ in starts] for a in agents}
    z = 1.959963984540054
    for i in _bar(progress, range(n_logs), "logs"):
        log, _ = simulator.collect_log(config, int(T), rng=child_rng(root, 1, i))
        for name, make in agents.items():
            key = name_key(name)
            replay_est[name].append(evaluators.replay(log, make(child_rng(root, 2, key, i)),
                                                      rng=child_rng(root, 3, key, i)))
            values, ses = [], []
            for j, s in enumerate(starts):
                sub = log.take(np.arange(s, s + window))
                expansion = float(sub.available_mask().sum(axis=1).mean())
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", evaluators.NoMatchWarning)
                    e = evaluators.bred(sub, make, n_bootstrap=n_bootstrap, jitter=jitter,
                                        expansion=expansion, rng=child_rng(root, 4, key, i, j))
                window_each[name][j].append(e)
                values.append(e.value)
                ses.append(e.stderr)
            v = float(np.mean(values))
            se = float(math.sqrt(np.sum(np.square(ses))) / len(ses))
            window_mean[name].append(evaluators.Estimate(v, se, v - z * se, v + z * se,
                                                         len(starts)))
    rows = []
    for name, make in agents.items():
        key = name_key(name)
        truth = simulator.online_value(config, make, int(T), n_runs=n_truth_runs,
                                       rng=child_rng(root, 5, key))
        kw = dict(evaluation=EVALUATION_DYNAMIC, agent=name, params=params)
        emit_per_log(per_log, replay_est[name], truth.value, variant="replay", **kw)
        emit_per_log(per_log, window_mean[name], truth.value, variant="bred_window", **kw)
        rows += _summary_rows(replay_est[name], truth.value, truth.stderr,
                              evaluation=EVALUATION_DYNAMIC, agent=name, variant="replay",
                              params=params)
        rows += _summary_rows(window_mean[name], truth.value, truth.stderr,
                              evaluation=EVALUATION_DYNAMIC, agent=name, variant="bred_window",
                              params=params)
        # local truths: an agent launched at each window's start, for `window` steps
        pooled, pooled_truth, pooled_se, pooled_log = [], [], [], []
        for j, s in enumerate(starts):
            local = simulator.online_value(config, make, int(window), start=s,
                                           n_runs=n_truth_runs, rng=child_rng(root, 6, key, j))
            pooled += window_each[name][j]
            pooled_truth += [local.value] * len(window_each[name][j])
            pooled_log += list(range(len(window_each[name][j])))
            pooled_se.append(local.stderr)
        emit_per_log(per_log, pooled, pooled_truth, variant="bred_window_local",
                     logs=pooled_log, **kw)
        rows += _summary_rows(pooled, np.array(pooled_truth), float(np.mean(pooled_se)),
                              evaluation=EVALUATION_DYNAMIC, agent=name,
                              variant="bred_window_local", params=params)
    return rows


#: Figures per kind and setting of the swept parameters off the x axis, at most.
MAX_FIGURES = 8
#: A second reference (V(T/K), the windows' local values): grey, densely dotted.
_GREY = {"color": "0.45", "lw": 1.6, "ls": (0, (1, 1.2)), "zorder": 1, "gid": "reference"}


def _name(prefix: str, stem: str, setting: dict) -> str:
    """``{prefix}{stem}.png``, the setting appended when there are several."""
    import re

    from recloop import _plots

    tail = re.sub(r"[^A-Za-z0-9_.-]+", "_", _plots.setting_text(setting)).strip("_")
    return f"{prefix}{stem}" + (f"_{tail}" if tail else "") + ".png"


def _value_figures(rows, out, *, prefix: str, x_key: str, x_label: str, title: str,
                   note: str, references, truth_label: str) -> list:
    """Each agent's mean estimated value per variant against ``x_key`` beside its online
    value: a panel per agent, a figure per setting of the other swept parameters
    (:func:`recloop._plots.groups`). ``references(ax, rows, mode)`` draws the truths of a
    panel of lines; in a dot plot (a single x) each row's truth is its mark."""
    from recloop import _plots

    values = [r for r in rows if r.metric == "value" and x_key in r.params]
    paths = []
    for setting, sel in _plots.groups(values, x_key)[:MAX_FIGURES]:
        agents = list(dict.fromkeys(r.agent for r in sel))
        variants = list(dict.fromkeys(r.variant for r in sel))
        single = len({r.params[x_key] for r in sel}) == 1
        ncols = 2 if len(agents) == 4 else min(3, len(agents))
        nrows = math.ceil(len(agents) / ncols)
        fig, axes = _plots.figure(nrows, ncols, width=_plots.RECORD_WIDTH,
                                  height=((0.3 * len(variants) + 1.1) if single else 2.4)
                                  * nrows + 1.4)
        for ax, agent in zip(axes.flat, agents, strict=False):
            mine = [r for r in sel if r.agent == agent]
            series = []
            for v in variants:
                pts = sorted((r for r in mine if r.variant == v), key=lambda r: r.params[x_key])
                series.append(_plots.Series(
                    v, [r.params[x_key] for r in pts], [r.estimate for r in pts],
                    [1.96 * r.stderr for r in pts],
                    [r.truth for r in pts] if single else None, j=variants.index(v)))
            mode = _plots.series_plot(ax, series, x_label=x_label, y_label="value",
                                      dot_label="mean estimate (95% interval)",
                                      truth_label=truth_label)
            references(ax, mine, mode)
            for line in ax.get_lines():
                line.set_markersize(line.get_markersize() * 0.7)
            at = (f", {x_key} = {_plots.number(mine[0].params[x_key])}" if single and mine
                  else "")
            ax.set_title(agent + at, fontsize=8)
            ax.tick_params(labelsize=7)
            ax.xaxis.label.set_size(8)
            ax.yaxis.label.set_size(8)
        for ax in list(axes.flat)[len(agents):]:
            ax.set_visible(False)
        _plots.legend(fig)
        n_logs = sorted({r.n for r in sel if r.n})
        logs = "-".join(f"{n:,}" for n in (n_logs[0], n_logs[-1])[:len(set(n_logs))]) \
            if n_logs else "?"
        where = _plots.setting_text(setting)
        _plots.caption(fig, title + (f" ({where})" if where else ""),
                       f"Dots: mean estimate over {logs} logs, 95% interval (±1.96 "
                       f"standard errors); {note}")
        paths.append(_plots.save(fig, out / _name(prefix, "__value", setting), dpi=100))
    return paths


def plot_bred_vs_replay(rows, out_dir, *, prefix: str = "bred_vs_replay") -> list:
    """Figures like Mary et al.'s Figure 2 from :func:`bred_vs_replay` rows (all T).

    First the figure of record, ``{prefix}__value.png``: each agent's mean estimate by
    replay and each BRED variant against the log size T, with 95% intervals, beside its
    online value V(T) (the truth, black and dashed) and V(T/K) (dotted: what replay's T/K
    matches measure); a panel per agent. Then one figure per agent, two panels: the bias
    and the RMSE of each variant against V(T), against T (log scale; a dot plot per
    variant when there is a single T). One set per setting of other swept parameters
    (:func:`recloop._plots.groups`). Returns the PNG paths.

    Parameters
    ----------
    rows : iterable of Measurement
        Rows of one or more cells (one per T).
    out_dir : str or Path
        Created if missing.
    prefix : str
        File name prefix.
    """
    from pathlib import Path

    from recloop import _plots

    rows = [r for r in rows if "T" in r.params]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    over_k = {(r.agent, _params_key(r.params)): r.estimate for r in rows
              if r.metric == "online_value" and r.variant == "T_over_K"}

    truth = "online value V(T): the truth"

    def references(ax, mine, mode):
        pts = sorted({r.params["T"]: over_k.get((r.agent, _params_key(r.params)), math.nan)
                      for r in mine}.items())
        pts = [(t, v) for t, v in pts if math.isfinite(v)]
        if mode == "lines":  # in a dot plot each row's mark is its truth
            curve = sorted({r.params["T"]: r.truth for r in mine}.items())
            ax.plot(*zip(*curve, strict=True), label=truth, **_plots.TRUTH)
        if pts and mode == "dots":
            ax.axvline(pts[0][1], label="online value V(T/K)", **_GREY)
        elif pts:
            ax.plot(*zip(*pts, strict=True), label="online value V(T/K)", **_GREY)

    paths = _value_figures(rows, out, prefix=prefix, x_key="T", x_label="log size T",
                           title="Replay and BRED against the online value",
                           note="dashed: the online value V(T), the truth; grey: V(T/K), "
                           "what replay's T/K matches measure.", references=references,
                           truth_label=truth)
    variants = list(dict.fromkeys(r.variant for r in rows if r.metric == "rmse"))
    for setting, group in _plots.groups(rows, "T")[:MAX_FIGURES]:
        for agent in dict.fromkeys(r.agent for r in group):
            mine = [r for r in group if r.agent == agent]
            n_logs = sorted({r.n for r in mine if r.metric == "rmse" and r.n})
            fig, axes = _plots.figure(1, 2, width=_plots.RECORD_WIDTH, height=3.4)
            for ax, metric, name in zip(axes[0], ("bias", "rmse"), ("bias", "RMSE"),
                                        strict=True):
                series = []
                for j, variant in enumerate(variants):
                    sel = sorted((r for r in mine if r.variant == variant
                                  and r.metric == metric), key=lambda r: r.params["T"])
                    series.append(_plots.Series(
                        variant, [r.params["T"] for r in sel], [r.estimate for r in sel],
                        [1.96 * r.stderr for r in sel], j=j))
                mode = _plots.series_plot(ax, series, x_label="log size T",
                                          y_label=f"{name} against V(T)")
                (ax.axvline if mode == "dots" else ax.axhline)(0.0, color="grey", lw=0.8)
                ax.set_title(name + (f", T = {_plots.number(mine[0].params['T'])}"
                                     if mode == "dots" else ""), fontsize=8)
                ax.tick_params(labelsize=7)
                ax.xaxis.label.set_size(8)
                ax.yaxis.label.set_size(8)
            axes[0, 1].tick_params(labelleft=mode != "dots")
            _plots.legend(fig)
            logs = "-".join(f"{n:,}" for n in (n_logs[0], n_logs[-1])[:len(set(n_logs))]) \
                if n_logs else "?"
            where = _plots.setting_text(setting)
            _plots.caption(fig, f"{agent}: replay and BRED, errors against the online value "
                           "V(T)" + (f" ({where})" if where else ""),
                           f"Over {logs} logs per T; bars: 95% intervals (±1.96 standard "
                           "errors over the logs); grey: zero error.")
            paths.append(_plots.save(fig, out / _name(f"{prefix}_{agent}", "", setting),
                                     dpi=100))
    return paths


def plot_dynamic_news(rows, out_dir, *, prefix: str = EVALUATION_DYNAMIC) -> list:
    """The figure of record of :func:`dynamic_news`, ``{prefix}__value.png``: each agent's
    mean estimate by replay and by windowed BRED against the window length, beside the
    online value V_0(T) of the whole log (black and dashed: the truth of ``replay`` and
    ``bred_window``) and the mean value of an agent launched at each window's start
    (dotted: the truth of ``bred_window_local``); a dot plot per variant, each beside its
    own truth, when a single window was run. A panel per agent, a figure per setting of
    other swept parameters. Returns the PNG paths."""
    from pathlib import Path

    from recloop import _plots

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    truth = "online value: the truth"

    def references(ax, mine, mode):
        if mode == "dots":
            return
        for variant, style in (("replay", dict(_plots.TRUTH, label=truth)),
                               ("bred_window_local", dict(_GREY,
                                                          label="local online value"))):
            pts = sorted({r.params["window"]: r.truth for r in mine
                          if r.variant == variant}.items())
            if pts:
                ax.plot(*zip(*pts, strict=True), **style)

    return _value_figures(rows, out, prefix=prefix, x_key="window",
                          x_label="BRED window (ticks)",
                          title="Replay and windowed BRED against the online value",
                          note="dashed: the online value V_0(T) of the log's span, the truth "
                          "of replay and bred_window; grey: the mean value of an agent "
                          "launched at each window's start, the truth of bred_window_local.",
                          references=references, truth_label=truth)


def _params_key(params: dict) -> str:
    """A hashable key of a row's parameters."""
    import json

    return json.dumps(dict(params), sort_keys=True)


# -- the scenario kinds -----------------------------------------------------------------------

def _bandit_world_rules(params, world, *, what: str):
    """Shared rules of the bandit kinds: a LinearBandit world, T within its horizon."""
    from recloop._worlds import world_config

    if not world:
        return
    config = world_config(world)
    if not hasattr(config, "n_arms") or not hasattr(config, "horizon"):
        yield "kind", (f"expected a [world] with a linear bandit preset (bred_linear, "
                       f"dynamic_news) for {what}, got preset {world['preset']!r}")
        return
    if config.horizon is not None and params["T"] > config.horizon:
        yield "T", f"expected T <= {config.horizon} (the world's horizon), got {params['T']}"


def bandit_resources(params, world):
    """One log at a time; BRED's (n_bootstrap, K x T) resample index; the truth's
    n_truth_runs curves of length T."""
    from recloop._limits import ESTIMATE_BYTES, F8, bandit_sizes, log_bytes, traffic_bytes

    K, d = bandit_sizes(world)
    T = params["T"]
    B = params.get("n_bootstrap", 1)
    variants = len(params.get("estimators") or ()) + 4
    return {"T x world.n_arms x world.dim: one log": log_bytes(T, K, d),
            "n_bootstrap x world.n_arms x T: BRED resamples": B * K * T * F8,
            "n_truth_runs x T: online truth": params.get("n_truth_runs", 1) * T * F8 * 2,
            "n_logs x estimators: the estimates of every log (per agent)": (
                params.get("n_logs", 1) * variants * ESTIMATE_BYTES),
            **traffic_bytes(params, world)}


def _check_bred_vs_replay(params, agents, world):
    from recloop._limits import ab_test_rules

    yield from _bandit_world_rules(params, world, what="bred_vs_replay")
    yield from ab_test_rules(params, agents, world)


def _makers(cell) -> dict:
    return {name: cell.make_agent(name) for name in cell.agent_names}


_AB_USERS = Param("ab_users", Int(low=0, high=10**7), 0, "Traffic budget of an online A/B "
                  "test per log (variant `ab_test`): the agent against uniform random on "
                  "`ab_users` fresh users, half each; 0: none.")

_BANDIT_COMMON = (
    Param("n_logs", Int(low=1, high=100_000), 50, "Independent uniformly logged datasets "
          "(each evaluated by every agent and variant)."),
    Param("n_bootstrap", Int(low=1, high=100_000), 100, "BRED bootstrap replicates."),
    Param("n_truth_runs", Int(low=2, high=1_000_000), 200, "Online runs of the ground truth "
          "(Monte Carlo value of the agent)."),
)


def _run_bred_vs_replay(cell):
    from recloop._worlds import world_config

    p = dict(cell.params)
    p["estimators"] = cell.estimators(p["estimators"], "learning", builtins=VARIANTS)
    return bred_vs_replay(world_config(cell.world), _makers(cell), **p,
                          rng=cell.seed_sequence, progress=cell.progress,
                          executor=cell.executor, per_log=cell.per_log)


#: Agent kinds known to use the context (the paper's BRED is optimistic for them).
CONTEXT_LEARNERS = ("linucb",)


def bred_note(rows, scenario) -> list:
    """One note beside the paper's BRED rows: optimistic for learners that use the context
    (a block of :mod:`recloop._document`; the terminal shows it too)."""
    names = {r["variant"] for r in rows} | {r["agent"] for r in rows}
    if not names & {"bred", "bred_nojitter"}:
        return []
    evaluated = {a for r in rows for a in (r["agent"],)}
    learners = [a["name"] for a in scenario.get("agents", [])
                if a["kind"] in CONTEXT_LEARNERS and a["name"] in evaluated]
    own = [a["name"] for a in scenario.get("agents", [])
           if a["kind"] not in CONTEXT_LEARNERS and a["name"] in evaluated
           and a["kind"] == "python"]
    from recloop import _document as D

    def names(xs):
        return [p for j, n in enumerate(xs) for p in ((", " if j else ""), D.Code(str(n)))]

    who = names(learners) or ["none here"]
    if own:
        who += ["; perhaps your own "] + names(own)
    return [D.Note(D.Code("bred"), " and ", D.Code("bred_nojitter"), " (BRED as Mary, Preux "
                   "& Nicol describe it) are expected to be optimistic for learners that use "
                   "the context (LinUCB: ", *who, "): they memorise the repeated copies of a "
                   "record in the K x T resample. ", D.Code("bred_once"), " reveals each "
                   "record once and is not. See the Notes of ", D.Code("evaluators.bred"),
                   ".")]


def _figures_bred_vs_replay(measurements, out_dir, world):
    prefix = measurements[0].evaluation if measurements else "bred_vs_replay"
    return plot_bred_vs_replay(measurements, out_dir, prefix=prefix)


def _figures_dynamic_news(measurements, out_dir, world):
    prefix = measurements[0].evaluation if measurements else EVALUATION_DYNAMIC
    return plot_dynamic_news(measurements, out_dir, prefix=prefix)


BRED_VS_REPLAY = EvaluationKind(
    name="bred_vs_replay",
    summary="Replay (Li et al. 2011), BRED, BRED without jitter (Mary, Preux, Nicol 2014) "
            "and BRED revealing each record once (variant bred_once) on uniform logs of size "
            "T -- and your own learning-policy evaluators -- against the agent's Monte-Carlo "
            "online value V(T): metrics value, bias, rmse, coverage, width per variant; "
            "bias_at_matches, rmse_at_matches, coverage_at_matches against V(m) at the "
            "variant's number of matches m (metric mean_matches).",
    run=_run_bred_vs_replay,
    params=(Param("T", Int(low=1, high=10**7), REQUIRED, "Size of each logged dataset "
                  "(sweep it for the paper's Figure 2)."),) + _BANDIT_COMMON + (
        Param("estimators", EstimatorList("learning"), list(VARIANTS), "The evaluators: "
              "`replay`, `bred`, `bred_nojitter`, `bred_once`, and your own "
              "`evaluator(log, make_agent, *, rng)` by import path or entry point (a name, "
              "`\"package.module:attribute\"` or a table `{name, factory, params}`).",
              sweepable=False),
        _AB_USERS),
    per_agent=True,
    agent_family="bandit",
    needs_world=True,
    check=_check_bred_vs_replay,
    figures=_figures_bred_vs_replay,
    report=lambda rows, scenario, summary: bred_note(rows, scenario),
    resources=bandit_resources,
    headline=("value",),
    unit="log",
    function=bred_vs_replay,
)


def _check_dynamic_news(params, agents, world):
    yield from _bandit_world_rules(params, world, what="dynamic_news")
    if params["window"] > params["T"]:
        yield "window", f"expected window <= T = {params['T']}, got {params['window']}"


def _run_dynamic_news(cell):
    from recloop._worlds import world_config

    return dynamic_news(world_config(cell.world), _makers(cell), **cell.params,
                        rng=cell.seed_sequence, progress=cell.progress, per_log=cell.per_log)


DYNAMIC_NEWS = EvaluationKind(
    name="dynamic_news",
    summary="Replay's time-acceleration bias on a drifting news world, and BRED run on "
            "windows over which the world is nearly static, against the online values "
            "V_0(T) and the windows' local values (variants replay, bred_window, "
            "bred_window_local).",
    run=_run_dynamic_news,
    params=(
        Param("T", Int(low=1, high=10**7), REQUIRED, "Log size (ticks 0 .. T-1), at most "
              "the world's horizon."),
        Param("window", Int(low=1, high=10**7), REQUIRED, "BRED window length, in [1, T] "
              "(sweep it for the bias/variance trade-off)."),
        Param("n_logs", Int(low=1, high=100_000), 20, "Independent logs."),
        Param("n_bootstrap", Int(low=1, high=100_000), 50, "BRED bootstrap replicates per "
              "window."),
        Param("n_truth_runs", Int(low=2, high=1_000_000), 100, "Online runs of each ground "
              "truth."),
        Param("jitter", OneOf((Str(choices=("auto",)), Float(low=0.0))), "auto", "BRED's "
              "context jitter: \"auto\" (bandwidth ~ 1/sqrt(T)) or a bandwidth (0: none)."),
    ),
    per_agent=True,
    agent_family="bandit",
    needs_world=True,
    check=_check_dynamic_news,
    figures=_figures_dynamic_news,
    resources=bandit_resources,
    headline=("value",),
    unit="log",
    function=dynamic_news,
)

KINDS = (BRED_VS_REPLAY, DYNAMIC_NEWS)
