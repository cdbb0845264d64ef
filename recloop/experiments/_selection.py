"""Estimator selection against the truth: SLOPE's choice of a hyper-parameter beside the
oracle's.

SLOPE (Su, Srinath & Krishnamurthy 2020; :func:`evaluators.select_estimator`) picks an
estimator's hyper-parameter (IPS's clip, Switch-DR's tau, DRos's lambda, ...) from the log
alone, by the interval-overlap rule. Whether it picks well is a question only the truth can
answer: the *oracle* choice is the candidate with the least RMSE against the exact policy
value over many logs -- known to the harness, never to an estimator. Per setting, this
evaluation reports every candidate's RMSE, SLOPE's RMSE, its regret against the oracle, and
how often SLOPE's pick is within 10% of the oracle's RMSE.
"""

from __future__ import annotations

import math

import numpy as np

from recloop._registry import EvaluationKind
from recloop._results import Measurement
from recloop._schema import Float, Int, ListOf, Param, Str, Table
from recloop.experiments._common import child_rng, emit_per_log, name_key, seed_sequence
from recloop.experiments._ope import (
    DEFAULT_TARGETS,
    LOGGING_POLICIES,
    _check_policy,
    _lookup,
    _world,
    logged,
    policy_table,
)
from recloop_base.validation import check_int

__all__ = ["FAMILIES", "KIND", "estimator_selection"]

EVALUATION = "estimator_selection"
#: Estimator families SLOPE tunes (see ``evaluators.SLOPE_DEFAULTS``).
FAMILIES = ("ips", "doubly_robust", "switch_dr", "dr_os", "subgaussian_ips")
_Z = 1.959963984540054


def _label(param: str, value: float) -> str:
    return f"{param}={'inf' if math.isinf(value) else f'{value:g}'}"


def estimator_selection(config="bred_linear", targets=DEFAULT_TARGETS[:1], *,
                        family: str = "ips", values=None, within: float = 0.1,
                        logging: str = "uniform", beta: float = 10.0, epsilon: float = 0.2,
                        n_rounds: int = 1000, n_logs: int = 100, n_actions: int | None = None,
                        reward_noise: float = 0.0, n_resamples: int = 1000, rng=None,
                        progress: bool = False, evaluation: str = EVALUATION,
                        per_log=None) -> list[Measurement]:
    """SLOPE's choice of a hyper-parameter against the oracle's, over many logs.

    Parameters
    ----------
    config : LinearBanditConfig or preset name, default "bred_linear"
        A static linear bandit world (the policy value is exact).
    targets : sequence of mappings
        Target policy constructors, as for :func:`recloop.experiments._ope.ope`.
    family : {"ips", "doubly_robust", "switch_dr", "dr_os", "subgaussian_ips"}
        The estimator whose hyper-parameter SLOPE picks.
    values : sequence of floats, optional
        The candidates (default: ``evaluators.SLOPE_DEFAULTS[family]``).
    within : float > 0, default 0.1
        SLOPE's pick counts as good when that candidate's RMSE is at most
        ``(1 + within)`` times the oracle's.
    logging, beta, epsilon, n_rounds, n_logs, n_actions, reward_noise
        As for ``ope``: the logging policy and the logs.
    n_resamples : int, default 1000
        Bootstrap resamples of the logs for the interval of the regret.
    rng : None, int, SeedSequence or Generator
        Root of the logs' and the estimators' draws.
    progress : bool
        A progress bar over the logs.
    evaluation : str
        The ``evaluation`` column.
    per_log : callable, optional
        Receives SLOPE's estimate (variant ``slope``, with its interval) and every
        candidate's (variant ``{param}={value}``, no interval) on every log as a
        ``Measurement`` (metric ``value``, ``log`` = the log's index, ``truth`` the exact
        value): the per-log estimates :func:`recloop.summarize` turns into RMSEs over logs.

    Returns
    -------
    list of Measurement
        Per target (``agent``):

        * variant ``{param}={value}`` for each candidate: ``rmse`` and ``bias`` against the
          exact value over the logs;
        * variant ``slope``: ``value`` (mean estimate, ``truth`` the exact value), ``rmse``,
          ``bias``, ``coverage`` of its intervals, ``regret`` (SLOPE's RMSE minus the
          oracle's, with a bootstrap interval over logs), ``relative_regret`` (RMSE ratio
          minus 1), ``within`` (share of logs whose pick is within ``within`` of the
          oracle's RMSE, Wilson interval);
        * variant ``oracle``: ``rmse`` of the best candidate and ``choice`` (its value);
        * variant ``untuned``: ``rmse`` of the first default candidate (no clipping,
          shrinkage or switching: the family's plain estimator).

    Notes
    -----
    SLOPE never sees the truth: it picks from the log alone. The oracle is what a user would
    choose knowing the truth, the best any fixed choice can do in this setting.
    """
    import simulator
    from evaluators import SLOPE_DEFAULTS, fit_reward_model, select_estimator, wilson_estimate

    if family not in FAMILIES:
        raise ValueError(f"`family` must be one of {', '.join(map(repr, FAMILIES))}; got "
                         f"{family!r}.")
    param, default = SLOPE_DEFAULTS[family]
    cands = tuple(sorted(float(v) for v in (default if values is None else values)))[::-1]
    if len(cands) < 2:
        raise ValueError(f"`values` must hold at least 2 candidates; got {len(cands)}.")
    if not (isinstance(within, (int, float)) and within > 0):
        raise ValueError(f"`within` must be a number > 0; got {within!r}.")
    config = _world(config, n_actions)
    n_rounds = check_int(n_rounds, "n_rounds", low=2)
    n_logs = check_int(n_logs, "n_logs", low=2)
    n_resamples = check_int(n_resamples, "n_resamples", low=1)
    logger = _lookup(config, policy_table(config, _check_policy(
        {"policy": logging, "beta": beta, "epsilon": epsilon}, "logging")))
    specs = {}
    for j, t in enumerate(targets):
        t = _check_policy(t, f"targets[{j}]")
        specs[t["name"]] = t
    if not specs:
        raise ValueError("`targets` must name at least one target policy; got none.")
    root = seed_sequence(rng)
    tables = {name: policy_table(config, t) for name, t in specs.items()}
    truth = {name: simulator.static_policy_value(config, _lookup(config, tab))
             for name, tab in tables.items()}
    theta = {t: np.full((n_logs, len(cands)), np.nan) for t in tables}
    picked = {t: np.full(n_logs, -1) for t in tables}
    slope = {t: [] for t in tables}
    from recloop_base.progress import bar

    logs = bar(range(n_logs), desc="logs", show=progress)
    import warnings

    # the DR families' candidates share one reward model per log (every target too), fitted
    # from the log's own stream
    model_based = family in ("doubly_robust", "switch_dr", "dr_os")
    for i in logs:
        log, atoms = logged(config, n_rounds, logger, root, i, reward_noise)
        model = fit_reward_model(log, "ridge", rng=child_rng(root, 7, i)) if model_based \
            else "ridge"
        for t, tab in tables.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = select_estimator(log, tab[atoms], estimator=family, values=cands,
                                       model=model)
            for v, th in zip(est.candidates, est.candidate_values, strict=True):
                theta[t][i, cands.index(float(v))] = th
            picked[t][i] = cands.index(float(est.selected)) if not math.isnan(est.selected) \
                else -1
            slope[t].append(est)
    params = {"family": family, "logging": logging, "n_rounds": n_rounds,
              "n_actions": config.n_arms, "reward_noise": float(reward_noise)}
    if logging == "softmax":
        params["beta"] = float(beta)
    elif logging == "epsilon_greedy":
        params["epsilon"] = float(epsilon)
    rows = []
    for t in tables:
        kw = dict(evaluation=evaluation, agent=t, params=params)
        emit_per_log(per_log, slope[t], truth[t], variant="slope", **kw)
        for c, v in enumerate(cands):
            emit_per_log(per_log, list(theta[t][:, c]), truth[t], variant=_label(param, v), **kw)
        err = theta[t] - truth[t]  # (n_logs, candidates)
        ok = np.isfinite(err)
        rmse = np.array([math.sqrt(np.mean(err[ok[:, c], c] ** 2)) if ok[:, c].any()
                         else math.nan for c in range(len(cands))])
        for c, v in enumerate(cands):
            e = err[ok[:, c], c]
            n = int(e.size)
            se = float(e.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
            rows += [Measurement(metric="rmse", estimate=rmse[c], n=n, variant=_label(param, v),
                                 **kw),
                     Measurement(metric="bias", estimate=float(e.mean()) if n else math.nan,
                                 stderr=se, n=n, variant=_label(param, v), **kw)]
        best = int(np.nanargmin(rmse))
        rows += [Measurement(metric="rmse", estimate=rmse[best], n=int(ok[:, best].sum()),
                             variant="oracle", **kw),
                 Measurement(metric="choice", estimate=cands[best], variant="oracle", **kw),
                 Measurement(metric="rmse", estimate=rmse[0], n=int(ok[:, 0].sum()),
                             variant="untuned", **kw)]
        values_t = np.array([e.value for e in slope[t]])
        good = np.isfinite(values_t)
        n = int(good.sum())
        kw_s = dict(kw, variant="slope")
        if n == 0:
            rows.append(Measurement(metric="value", estimate=math.nan, n=0, **kw_s))
            continue
        e_s = values_t[good] - truth[t]
        rmse_s = math.sqrt(float(np.mean(e_s ** 2)))
        mean_v = float(values_t[good].mean())
        se_v = float(values_t[good].std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
        lo = np.array([e.ci_low for e in slope[t]])[good]
        hi = np.array([e.ci_high for e in slope[t]])[good]
        cov = wilson_estimate(int(np.sum((lo <= truth[t]) & (truth[t] <= hi))), n)
        # the regret's interval: bootstrap over logs of (SLOPE's RMSE - the oracle's)
        gen = child_rng(root, 4, name_key(t))
        idx = gen.integers(0, n_logs, size=(n_resamples, n_logs))
        e_all = np.where(good, values_t - truth[t], np.nan)
        eo = err[:, best]
        boot = (np.sqrt(np.nanmean(e_all[idx] ** 2, axis=1))
                - np.sqrt(np.nanmean(eo[idx] ** 2, axis=1)))
        blo, bhi = np.nanpercentile(boot, [2.5, 97.5])
        regret = rmse_s - rmse[best]
        close = picked[t][good] >= 0
        pick_rmse = np.where(close, rmse[np.maximum(picked[t][good], 0)], np.inf)
        win = wilson_estimate(int(np.sum(pick_rmse <= (1 + within) * rmse[best])), n)
        rows += [
            Measurement(metric="value", estimate=mean_v, stderr=se_v, ci_low=mean_v - _Z * se_v,
                        ci_high=mean_v + _Z * se_v, truth=truth[t], n=n, **kw_s),
            Measurement(metric="rmse", estimate=rmse_s, n=n, **kw_s),
            Measurement(metric="bias", estimate=float(e_s.mean()), stderr=se_v, n=n, **kw_s),
            Measurement(metric="coverage", estimate=cov.value, stderr=cov.stderr,
                        ci_low=cov.ci_low, ci_high=cov.ci_high, n=n, **kw_s),
            Measurement(metric="regret", estimate=regret, ci_low=float(blo),
                        ci_high=float(bhi), n=n, **kw_s),
            Measurement(metric="relative_regret", estimate=rmse_s / rmse[best] - 1.0
                        if rmse[best] > 0 else math.nan, n=n, **kw_s),
            Measurement(metric="within", estimate=win.value, stderr=win.stderr,
                        ci_low=win.ci_low, ci_high=win.ci_high, n=n, **kw_s),
        ]
    return rows


# -- report --------------------------------------------------------------------------------------

def summary_table(rows, summary) -> list[str]:
    """Markdown: per setting and target, the untuned, oracle's and SLOPE's RMSE over the
    logs (the :func:`recloop.summarize` rows of the per-log estimates, the logs of every
    seed pooled), the regret (SLOPE's RMSE minus the oracle's) and how often SLOPE picks
    within 10% of the oracle's RMSE (``within``: the cells' own rows, mean over seeds)."""
    import json

    within: dict = {}  # (setting, target) -> `within` of each seed
    for r in rows:  # the rows of one evaluation
        if r["variant"] == "slope" and r["metric"] == "within":
            key = (json.dumps(r["params"] or {}, sort_keys=True), r["agent"])
            within.setdefault(key, []).append(r["estimate"])
    groups: dict = {}  # (setting, target) -> {variant: SummaryRow}
    for s in summary:
        if s.metric == "value":
            key = (json.dumps(dict(s.params), sort_keys=True), s.agent)
            groups.setdefault(key, {})[s.variant] = s
    out = ["| setting | target | logs | untuned RMSE | oracle (choice) RMSE | SLOPE RMSE | "
           "regret | within 10% |", "|---|---|---|---|---|---|---|---|"]

    def f(x, digits=3):
        return "" if x is None or math.isnan(x) else f"{x:.{digits}g}"

    for (setting, target), by_variant in groups.items():
        cands = [(v, s) for v, s in by_variant.items() if "=" in v]
        slope = by_variant.get("slope")
        if not cands or slope is None:
            continue
        rmses = [s.rmse for _, s in cands]
        best = (int(np.nanargmin(rmses)) if np.isfinite(rmses).any() else None)
        oracle = cands[best][1].rmse if best is not None else math.nan
        choice = cands[best][0].partition("=")[2] if best is not None else ""
        w = within.get((setting, target), [])
        w_mean = float(np.nanmean(w)) if np.isfinite(w).any() else math.nan
        p = json.loads(setting)
        shown = ", ".join(f"{k} {p[k]}" for k in ("family", "logging", "beta", "n_rounds",
                                                    "n_actions", "reward_noise") if k in p)
        out.append(f"| {shown} | {target} | {slope.n_logs} | {f(cands[0][1].rmse)} | "
                   f"{f(oracle)} ({choice}) | {f(slope.rmse)} | {f(slope.rmse - oracle)} | "
                   f"{f(w_mean, 2)} |")
    return out


# -- the scenario kind ------------------------------------------------------------------------

def _check_kind(params, agents, world):
    """The rules of ``ope``: a static linear bandit world, well-formed targets."""
    from recloop.experiments._ope import _check_kind as ope_rules

    yield from ope_rules({**params, "ab_users": 0}, agents, world)


def _run_kind(cell):
    from recloop._scenario import world_config

    p = dict(cell.params)
    return estimator_selection(world_config(cell.world), p.pop("targets"), **p,
                               rng=cell.seed_sequence, progress=cell.progress,
                               evaluation=cell.evaluation, per_log=cell.per_log)


def _resources(params, world):
    from recloop._limits import F8
    from recloop.experiments._ope import _resources as ope_bytes

    values = params.get("values") or range(10)  # the candidates, estimated on every log
    out = ope_bytes({**params, "targets": params.get("targets") or (),
                     "estimators": list(values)}, world)
    out["n_resamples x n_logs: bootstrap of the logs"] = (
        2 * params.get("n_resamples", 1) * params.get("n_logs", 1) * F8)
    return out


KIND = EvaluationKind(
    name="estimator_selection",
    summary="SLOPE (Su, Srinath & Krishnamurthy 2020) picks an estimator's hyper-parameter "
            "(clip, tau, lambda) from each log alone; the oracle knows the exact value and "
            "picks the candidate with the least RMSE. Per setting and target: every "
            "candidate's rmse and bias, SLOPE's rmse, coverage, regret (against the oracle, "
            "bootstrap interval) and how often its pick is within 10% of the oracle's RMSE.",
    run=_run_kind,
    params=(
        Param("family", Str(choices=FAMILIES), "ips", "The estimator whose hyper-parameter "
              "SLOPE picks (ips: clip; doubly_robust: clip; switch_dr: tau; dr_os and "
              "subgaussian_ips: lambda_)."),
        Param("values", ListOf(Float(low=0.0), min_len=2, unique=True), None, "Candidate "
              "values (default: the family's ten of `evaluators.SLOPE_DEFAULTS`).",
              sweepable=False),
        Param("within", Float(low=0.0, low_open=True), 0.1, "A pick is good when its RMSE is "
              "at most (1 + within) x the oracle's."),
        Param("targets", ListOf(Table(), min_len=1), [dict(DEFAULT_TARGETS[0])], "Target "
              "policy constructors, as for `ope`.", sweepable=False),
        Param("logging", Str(choices=LOGGING_POLICIES), "uniform", "Logging policy."),
        Param("beta", Float(), 10.0, "Inverse temperature of the softmax logging policy."),
        Param("epsilon", Float(low=0.0, high=1.0), 0.2, "Exploration of the epsilon-greedy "
              "logging policy."),
        Param("n_rounds", Int(low=2, high=10**7), 1000, "Records per log."),
        Param("n_logs", Int(low=2, high=100_000), 100, "Independent logs per cell."),
        Param("n_actions", Int(low=1, high=10_000), None, "Number of arms, at most the "
              "world's `n_arms` (the world drawn again with that many; default: the world's "
              "`n_arms`)."),
        Param("reward_noise", Float(low=0.0), 0.0, "Gaussian noise added to each logged "
              "reward (the truth is unchanged)."),
        Param("n_resamples", Int(low=1, high=10**6), 1000, "Bootstrap resamples of the logs "
              "for the regret's interval."),
    ),
    per_agent=False,
    agent_family="",
    needs_world=True,
    min_agents=0,
    check=_check_kind,
    resources=_resources,
    headline=("value",),
    unit="log",
    report=lambda rows, scenario, summary: [
        "SLOPE's pick against the oracle's (the candidate with the least RMSE against the "
        "exact value over the logs, the logs of every seed pooled); `within 10%` is the "
        "share of logs whose pick is within 10% of the oracle's RMSE in its cell, mean over "
        "seeds:", ""] + summary_table(rows, summary) + [""],
    function=estimator_selection,
)
