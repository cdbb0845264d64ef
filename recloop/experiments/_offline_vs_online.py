"""Does an offline evaluator rank agents the way the online truth does? (issue 7)

An evaluator is useful for model selection when it orders candidate agents as their online
values do, even if every estimate is biased. Here each evaluator (replay, BRED) scores a set
of bandit agents on the same uniformly logged data; the simulator gives each agent's online
value (Monte Carlo over independent online runs); the agreement of the two orderings is
Kendall's tau, computed per log and averaged over independent logs, with a percentile
bootstrap interval over logs.

Replay of a learner only learns on the ~T/K records where it agrees with the log, so it
measures the value at horizon T/K rather than T (Li et al. 2011; Mary, Preux & Nicol 2014):
the truth is reported at both horizons and tau computed against each.
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import Callable, Mapping, Sequence

import numpy as np

from recloop._registry import EvaluationKind
from recloop._results import Measurement
from recloop._schema import EstimatorList, Int, Param
from recloop.experiments._common import (
    ab_evaluator,
    child_rng,
    emit_per_log,
    estimator_table,
    name_key,
    seed_sequence,
)
from recloop_base.validation import check_int

__all__ = ["DEFAULT_ESTIMATORS", "ESTIMATORS", "KIND", "NoRankingWarning", "offline_vs_online",
           "plot_offline_vs_online"]

EVALUATION = "offline_vs_online"

#: Built-in evaluators, by name (the default set: each of them).
ESTIMATORS = ("replay", "bred", "bred_nojitter", "bred_once")
#: The evaluators compared by default.
DEFAULT_ESTIMATORS = ("replay", "bred", "bred_once")

_Z = 1.959963984540054
_TRUTH_ROW = "online_T_over_K"


class NoRankingWarning(RuntimeWarning):
    """An evaluator gave no usable ranking on some logs (nan estimates or all ties)."""


def _builtin(name: str, n_bootstrap: int) -> Callable:
    """A built-in evaluator with the public signature ``f(log, make_agent, *, rng)``."""
    import functools

    from recloop import _builtins

    f = getattr(_builtins, name)
    return f if name == "replay" else functools.partial(f, n_bootstrap=n_bootstrap)


def _check(config, agents, estimators, T, n_logs, n_bootstrap, n_truth_runs, n_resamples):
    import simulator

    config = simulator.LinearBanditConfig() if config is None else config
    if isinstance(config, str):
        config = simulator.preset(config)
    if not isinstance(config, simulator.LinearBanditConfig):
        raise TypeError("`config` must be a LinearBanditConfig or a preset name; got "
                        f"{type(config).__name__}.")
    if not isinstance(agents, Mapping):
        raise TypeError("`agents` must be a mapping name -> make_agent(rng); got "
                        f"{type(agents).__name__}.")
    if len(agents) < 2:
        raise ValueError(f"`agents` must hold at least 2 agents to rank; got {len(agents)}.")
    for name, make in agents.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"`agents` keys must be non-empty strings; got {name!r}.")
        if not callable(make):
            raise TypeError(f"`agents[{name!r}]` must be callable (rng -> agent); got "
                            f"{type(make).__name__}.")
    T = check_int(T, "T", low=1)
    n_logs = check_int(n_logs, "n_logs", low=1)
    n_bootstrap = check_int(n_bootstrap, "n_bootstrap", low=1)
    n_truth_runs = check_int(n_truth_runs, "n_truth_runs", low=2)
    n_resamples = check_int(n_resamples, "n_resamples", low=1)
    if config.horizon is not None and T > config.horizon:
        raise ValueError(f"`T` must be <= the horizon {config.horizon} of the config; got {T}.")
    table = estimator_table(estimators, ESTIMATORS)
    funcs = {name: f if f is not None else _builtin(name, n_bootstrap)
             for name, f in table.items()}
    # evaluators and the truth-vs-truth row share the agent column with the agents
    clash = sorted(set(agents) & (set(funcs) | {_TRUTH_ROW}))
    if clash:
        raise ValueError(f"`agents` must not be named like an evaluator or {_TRUTH_ROW!r} "
                         f"(they share the results' agent column); got {clash[0]!r}.")
    return config, funcs, T, n_logs, n_truth_runs, n_resamples


def _value(x) -> float:
    v = getattr(x, "value", x)
    if isinstance(v, bool) or not isinstance(v, (numbers.Real, np.floating)):
        raise TypeError(f"an estimator must return a float or an Estimate; got "
                        f"{type(x).__name__}.")
    return float(v)


def _tau(x, y) -> float:
    """Kendall's tau-b of two orderings (nan when either is constant or has a nan)."""
    from scipy.stats import kendalltau

    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        return math.nan
    if np.all(x == x[0]) or np.all(y == y[0]):
        return math.nan
    return float(kendalltau(x, y).statistic)


def _tau_row(taus, rng, n_resamples, *, evaluation, agent, variant, params):
    """Mean tau over logs, its stderr and a percentile bootstrap interval over logs."""
    taus = np.asarray(taus, dtype=np.float64)
    ok = taus[np.isfinite(taus)]
    n = int(ok.size)
    kw = dict(evaluation=evaluation, agent=agent, metric="kendall_tau", variant=variant, n=n,
              params=params)
    if n < taus.size:
        warnings.warn(f"{evaluation}: {agent} gave no ranking on {taus.size - n} of "
                      f"{taus.size} logs (nan estimates or all ties); tau is averaged over "
                      "the others.", NoRankingWarning, stacklevel=3)
    if n == 0:
        return Measurement(estimate=math.nan, **kw)
    mean = float(ok.mean())
    if n == 1:
        return Measurement(estimate=mean, **kw)
    # whole (n_resamples, n) index matrix at once: the result does not depend on batching
    idx = rng.integers(0, n, size=(n_resamples, n))
    means = ok[idx].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return Measurement(estimate=mean, stderr=float(ok.std(ddof=1) / math.sqrt(n)),
                       ci_low=float(lo), ci_high=float(hi), **kw)


def offline_vs_online(config, agents: Mapping[str, Callable], *, T: int = 1000,
                      n_logs: int = 10, n_bootstrap: int = 20, n_truth_runs: int = 100,
                      estimators: Sequence | Mapping[str, Callable] = DEFAULT_ESTIMATORS,
                      n_resamples: int = 2000, ab_users: int = 0, rng=None,
                      progress: bool = False, executor=None,
                      evaluation: str = EVALUATION, per_log=None) -> list[Measurement]:
    """Each evaluator's ranking of bandit agents against the ranking by online value.

    Parameters
    ----------
    config : LinearBanditConfig or preset name
        The test bed (``"bred_linear"``: Mary et al.'s).
    agents : mapping name -> make_agent
        At least two; ``make_agent(rng)`` returns a fresh, reset agent.
    T : int, default 1000
        Size of each uniformly logged dataset (and the horizon of the truth), >= 1.
    n_logs : int, default 10
        Independent logs; every agent and evaluator sees the same logs (paired).
    n_bootstrap : int, default 20
        BRED's bootstrap replicates.
    n_truth_runs : int, default 100
        Online runs of each agent's ground truth, >= 2.
    estimators : sequence, default ``("replay", "bred", "bred_once")``
        The evaluators: names of the built-ins (``replay``, ``bred``, ``bred_nojitter``,
        ``bred_once``) and ``(name, evaluator)`` pairs of your own, or a mapping
        ``name -> evaluator``; ``evaluator(log, make_agent, *, rng)`` returns an
        ``evaluators.Estimate`` or a float (the signature
        ``recloop.testing.check_learning_policy_evaluator`` checks). ``bred`` and
        ``bred_nojitter`` are optimistic for learners that use the context (see
        ``evaluators.bred``'s Notes); ``bred_once`` is not.
    n_resamples : int, default 2000
        Bootstrap resamples of the logs for the interval of the mean tau.
    ab_users : int, default 0
        Traffic budget of an online A/B test per log and agent, ranked like an evaluator
        (``ab_test``): each agent against uniform random on ``ab_users`` fresh users, half
        each; its value is the agent's mean reward over its users. 0: none.
    rng : None, int, SeedSequence or Generator
        Root of every draw, keyed by log, agent and evaluator.
    progress : bool
        A progress bar over the logs.
    evaluation : str
        The ``evaluation`` column.
    executor : None or dask.distributed.Client
        Where the truth's online runs are computed (partitioned over the cluster's workers;
        the same numbers).
    per_log : callable, optional
        Receives, as ``Measurement`` objects with ``log`` = the log's index, every
        evaluator's value of every agent on every log (metric ``value``, ``truth``
        ``V(T)``) and its Kendall tau on every log (metric ``kendall_tau``, no truth): the
        per-log estimates :func:`recloop.summarize` turns into bias and RMSE over logs.

    Returns
    -------
    list of Measurement
        ``params = {"T": T}``.

        * per agent, metric ``online_value``, variants ``T`` (``V(T)``) and ``T_over_K``
          (``V(T / K)``, the horizon replay measures; K = arms alive at a time);
        * per agent and evaluator, metric ``value``, variant = the evaluator: mean estimate
          over logs (normal 95% interval), ``truth`` = ``V(T)``;
        * per evaluator (``agent`` = evaluator), metric ``kendall_tau``, variants ``T`` and
          ``T_over_K``: tau-b between the evaluator's and the true ordering, mean over logs,
          standard error over logs, 95% percentile bootstrap interval over logs, ``n`` the
          logs with a ranking;
        * agent ``online_T_over_K``, metric ``kendall_tau``, variant ``T``: how far the true
          ordering at T/K is from the one at T.

    Raises
    ------
    TypeError, ValueError
        Bad arguments, named (fewer than 2 agents, an unknown evaluator, ``T`` beyond the
        horizon, counts below their minimum).

    Warns
    -----
    NoRankingWarning
        An evaluator gave nan estimates or all-equal values on some logs (dropped).

    Notes
    -----
    Kendall's tau-b (:func:`scipy.stats.kendalltau`) counts concordant minus discordant
    pairs of agents, normalised to [-1, 1] with ties accounted for; 1 is the true ordering.
    The truth is itself a Monte Carlo estimate: agents whose values are within a few
    standard errors of each other (``online_value`` rows) have an uncertain true order.

    Examples
    --------
    >>> import agents
    >>> def make(cls):
    ...     def factory(rng=None):
    ...         a = cls()
    ...         a.reset(rng)
    ...         return a
    ...     return factory
    >>> rows = offline_vs_online("bred_linear", {"ucb1": make(agents.UCB1),
    ...                          "uniform": make(agents.UniformRandom)}, T=100, n_logs=2,
    ...                          n_bootstrap=2, n_truth_runs=3, estimators=["bred"], rng=0)
    >>> tau = [m for m in rows if m.metric == "kendall_tau" and m.agent == "bred"][0]
    >>> -1.0 <= tau.estimate <= 1.0
    True
    """
    import simulator

    config, funcs, T, n_logs, n_truth_runs, n_resamples = _check(
        config, agents, estimators, T, n_logs, n_bootstrap, n_truth_runs, n_resamples)
    from recloop.experiments._bandit_eval import _check_ab_users

    if _check_ab_users(ab_users, funcs, config):
        if "ab_test" in agents:
            raise ValueError("`agents` must not hold an agent named 'ab_test' when `ab_users` "
                             "runs the A/B test of that name.")
        funcs["ab_test"] = ab_evaluator(config, ab_users)
    root = seed_sequence(rng)
    names = list(agents)
    params = {"T": T}
    K = config.n_alive if config.n_alive is not None else config.n_arms
    t_short = max(1, T // K)
    values = {e: np.full((n_logs, len(names)), np.nan) for e in funcs}
    from recloop_base.progress import bar

    for i in bar(range(n_logs), desc="logs", show=progress):
        log, _ = simulator.collect_log(config, T, rng=child_rng(root, 1, i))
        for e, f in funcs.items():
            for j, name in enumerate(names):
                values[e][i, j] = _value(f(log, agents[name],
                                           rng=child_rng(root, 2, name_key(e), name_key(name), i)))
    rows = []
    truth = {"T": np.empty(len(names)), "T_over_K": np.empty(len(names))}
    for j, name in enumerate(names):
        ov = simulator.online_value(config, agents[name], T, n_runs=n_truth_runs,
                                    rng=child_rng(root, 3, name_key(name)), executor=executor)
        for variant, t in (("T", T), ("T_over_K", t_short)):
            v, se = ov.at(t)
            truth[variant][j] = v
            rows.append(Measurement(evaluation=evaluation, agent=name, metric="online_value",
                                    estimate=v, stderr=se, ci_low=v - _Z * se,
                                    ci_high=v + _Z * se, truth=v, n=ov.n_runs,
                                    variant=variant, params=params))
    for e in funcs:
        for j, name in enumerate(names):
            col = values[e][:, j]
            emit_per_log(per_log, list(col), truth["T"][j], evaluation=evaluation, agent=name,
                         variant=e, params=params)
            ok = col[np.isfinite(col)]
            n = int(ok.size)
            mean = float(ok.mean()) if n else math.nan
            se = float(ok.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
            rows.append(Measurement(evaluation=evaluation, agent=name, metric="value",
                                    estimate=mean, stderr=se, ci_low=mean - _Z * se,
                                    ci_high=mean + _Z * se, truth=truth["T"][j], n=n,
                                    variant=e, params=params))
    for e in funcs:
        for v_idx, variant in enumerate(("T", "T_over_K")):
            taus = [_tau(values[e][i], truth[variant]) for i in range(n_logs)]
            emit_per_log(per_log, taus, math.nan, evaluation=evaluation, agent=e,
                         variant=variant, params=params, metric="kendall_tau")
            rows.append(_tau_row(taus, child_rng(root, 4, name_key(e), v_idx), n_resamples,
                                 evaluation=evaluation, agent=e, variant=variant,
                                 params=params))
    rows.append(Measurement(evaluation=evaluation, agent=_TRUTH_ROW,
                            metric="kendall_tau", estimate=_tau(truth["T_over_K"], truth["T"]),
                            n=1, variant="T", params=params))
    return rows


def plot_offline_vs_online(rows, out_dir, *, prefix: str = EVALUATION) -> list:
    """Kendall tau per evaluator (95% bootstrap bars) and each agent's estimates against
    its online value: two dot plots with one legend, one figure per ``T``.

    Parameters
    ----------
    rows : iterable of Measurement
        Rows of :func:`offline_vs_online` (one or more cells; one figure per ``T``).
    out_dir : str or Path
        Created if missing.
    prefix : str
        File name prefix.

    Returns
    -------
    list of Path
    """
    from pathlib import Path

    from recloop import _plots

    rows = list(rows)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for T in dict.fromkeys(r.params.get("T") for r in rows):
        sel = [r for r in rows if r.params.get("T") == T]
        taus = [r for r in sel if r.metric == "kendall_tau" and r.agent != _TRUTH_ROW]
        values = [r for r in sel if r.metric == "value"]
        if not taus and not values:
            continue
        names = list(dict.fromkeys(r.agent for r in taus))
        agents = list(dict.fromkeys(r.agent for r in values))
        evaluators = list(dict.fromkeys(r.variant for r in values))
        rows_shown = max(len(names), len(agents), 1)
        fig, axes = _plots.figure(1, 2, width=_plots.RECORD_WIDTH,
                                  height=0.42 * rows_shown + 2.2)
        ax1, ax2 = axes[0]
        series = []
        # black and grey: not the evaluators' colours of the right panel (rows name them)
        for j, (variant, text, color) in enumerate((("T", "against V(T)", "black"),
                                                    ("T_over_K", "against V(T/K)", "0.55"))):
            ms = {r.agent: r for r in taus if r.variant == variant}
            series.append(_plots.Dots(
                text, [ms[n].estimate if n in ms else math.nan for n in names],
                [ms[n].ci_low if n in ms else math.nan for n in names],
                [ms[n].ci_high if n in ms else math.nan for n in names], j=j, color=color))
        _plots.dot_plot(ax1, names, series)
        ax1.axvline(0.0, color="grey", lw=0.8)
        ax1.set_xlim(-1.05, 1.05)
        ax1.set_xlabel("Kendall tau")
        ax1.set_title("ranking agreement with the truth", fontsize=8)
        got = {(r.agent, r.variant): r for r in values}
        series = []
        for j, e in enumerate(evaluators):
            ms = [got.get((a, e)) for a in agents]
            est = [m.estimate if m else math.nan for m in ms]
            half = [1.96 * m.stderr if m and math.isfinite(m.stderr) else math.nan
                    for m in ms]
            series.append(_plots.Dots(e, est, [v - h for v, h in zip(est, half, strict=True)],
                                      [v + h for v, h in zip(est, half, strict=True)],
                                      j=j))
        truth = {}
        for r in values:
            truth.setdefault(r.agent, r.truth)
        _plots.dot_plot(ax2, agents, series, truths=[truth[a] for a in agents],
                        truth_label="V(T): the truth")
        ax2.set_xlabel("value")
        ax2.set_title("each agent's estimates beside the truth", fontsize=8)
        for ax in (ax1, ax2):  # a short legend under each panel: its own marks only
            ax.tick_params(labelsize=7)
            ax.xaxis.label.set_size(8)
            _plots.panel_legend(ax)
        own = [r.estimate for r in sel if r.agent == _TRUTH_ROW]
        _plots.caption(fig, f"Offline evaluators against the online truth, T = "
                       f"{_plots.number(T)}", "Left: mean Kendall tau over the logs, 95% "
                       "bootstrap bars; right: mean estimates, 95% bars (±1.96 standard "
                       "errors over the logs), black: the agent's online value V(T)."
                       + (f" The ordering by V(T/K) against that by V(T): tau {own[0]:.2f}."
                          if own and math.isfinite(own[0]) else ""))
        paths.append(_plots.save(fig, out / f"{prefix}_T{T}.png", dpi=100))
    return paths


# -- the scenario kind ------------------------------------------------------------------------

def _check_kind(params, agents, world):
    from recloop._schema import entry_name
    from recloop.experiments._bandit_eval import _bandit_world_rules

    yield from _bandit_world_rules(params, world, what="offline_vs_online")
    # evaluators share the results' agent column with the agents
    names = {a["name"] for a in agents} | {_TRUTH_ROW}
    for j, entry in enumerate(params["estimators"]):
        if entry_name(entry) in names:
            yield f"estimators[{j}]", (f"expected an evaluator named unlike the agents and "
                                       f"{_TRUTH_ROW!r} (they share the agent column), got "
                                       f"{entry_name(entry)!r}")
    if params["ab_users"] and "ab_test" in names:
        yield "ab_users", "expected no agent named 'ab_test' with an A/B test, got one"
    from recloop._limits import ab_test_rules

    yield from ab_test_rules(params, agents, world)


def _resources(params, world):
    from recloop._limits import bandit_sizes, log_bytes
    from recloop.experiments._bandit_eval import bandit_resources

    out = bandit_resources(params, world)
    out["n_logs x T: the logs"] = params.get("n_logs", 1) * log_bytes(params["T"],
                                                                     *bandit_sizes(world))
    out["n_resamples x n_logs: bootstrap of the logs"] = (
        2 * params.get("n_resamples", 1) * params.get("n_logs", 1) * 8)
    return out


def _run_kind(cell):
    from recloop._worlds import world_config

    p = dict(cell.params)
    p["estimators"] = cell.estimators(p["estimators"], "learning", builtins=ESTIMATORS)
    makers = {name: cell.make_agent(name) for name in cell.agent_names}
    return offline_vs_online(world_config(cell.world), makers, **p, rng=cell.seed_sequence,
                             progress=cell.progress, evaluation=cell.evaluation,
                             executor=cell.executor, per_log=cell.per_log)


def _bred_note(rows, scenario):
    from recloop.experiments._bandit_eval import bred_note

    return bred_note(rows, scenario)


def _figures_kind(measurements, out_dir, world):
    prefix = measurements[0].evaluation if measurements else EVALUATION
    return plot_offline_vs_online(measurements, out_dir, prefix=prefix)


KIND = EvaluationKind(
    name="offline_vs_online",
    summary="Does each offline evaluator rank the agents as the ground truth does? Replay, "
            "BRED and BRED revealing each record once (and your own evaluators) score every "
            "agent on the same uniform logs of size T; Kendall's tau between their ordering "
            "and the ordering by online value, at T and at T/K (the horizon replay "
            "measures), averaged over logs with a bootstrap interval (metric `kendall_tau`, "
            "agent = the evaluator), beside each agent's estimates and truth (metrics "
            "`value`, `online_value`).",
    run=_run_kind,
    params=(
        Param("T", Int(low=1, high=10**7), 1000, "Size of each logged dataset and horizon of "
              "the truth (at most the world's horizon)."),
        Param("n_logs", Int(low=1, high=100_000), 10, "Independent uniform logs (every agent "
              "and evaluator sees the same ones)."),
        Param("n_bootstrap", Int(low=1, high=100_000), 20, "BRED bootstrap replicates."),
        Param("n_truth_runs", Int(low=2, high=1_000_000), 100, "Online runs of each agent's "
              "ground truth."),
        Param("estimators", EstimatorList("learning"), list(DEFAULT_ESTIMATORS), "Offline "
              "evaluators compared: `replay`, `bred`, `bred_nojitter`, `bred_once`, and "
              "your own `evaluator(log, make_agent, *, rng)` by import path or entry point "
              "(a name, `\"package.module:attribute\"` or a table `{name, factory, "
              "params}`). `bred` is optimistic for context-using learners.",
              sweepable=False),
        Param("n_resamples", Int(low=1, high=10**6), 2000, "Bootstrap resamples of the logs "
              "for the interval of the mean tau."),
        Param("ab_users", Int(low=0, high=10**7), 0, "Traffic budget of an online A/B test "
              "per log and agent, ranked like an evaluator (`ab_test`): the agent against "
              "uniform random on `ab_users` fresh users, half each; 0: none."),
    ),
    per_agent=False,
    agent_family="bandit",
    needs_world=True,
    min_agents=2,
    check=_check_kind,
    figures=_figures_kind,
    report=lambda rows, scenario, summary: _bred_note(rows, scenario),
    resources=_resources,
    headline=("kendall_tau",),
    unit="log",
    function=offline_vs_online,
    apart=False,  # its rows rank the agents and the estimators: each depends on all
)

#: The kinds this module declares (the registry reads them: recloop._registry.BUILTIN_MODULES).
KINDS = (KIND,)
