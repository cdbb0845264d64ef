"""Estimator selection against the truth: SLOPE's choice of a hyper-parameter, and the
choices of the twin, cross-validation and PAS-IF among the same candidates, beside the
oracle's.

SLOPE (Su, Srinath & Krishnamurthy 2020; :func:`evaluators.select_estimator`) picks an
estimator's hyper-parameter (IPS's clip, Switch-DR's tau, DRos's lambda, ...) from the log
alone, by the interval-overlap rule. Whether it picks well is a question only the truth can
answer: the *oracle* choice is the candidate with the least RMSE against the exact policy
value over many logs -- known to the harness, never to an estimator. Per setting, this
evaluation reports every candidate's RMSE, SLOPE's RMSE, its regret against the oracle, and
how often SLOPE's pick is within 10% of the oracle's RMSE; ``selectors`` adds
:func:`evaluators.select_by_twin`, :func:`evaluators.select_by_cv` and
:func:`evaluators.select_by_pasif`, each choosing among the same candidates on every log and
scored as SLOPE is.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from recloop._registry import Chunks, EvaluationKind
from recloop._results import Measurement
from recloop._schema import Float, Int, ListOf, Param, Str, Table
from recloop.experiments._common import (
    SECONDS_PER_RECORD_CALL,
    bound_arguments,
    child_rng,
    child_seed,
    emit_per_log,
    name_key,
    same_header,
    seed_sequence,
)
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

__all__ = ["CHOOSER_LABELS", "CHOOSER_STYLES", "FAMILIES", "KIND", "estimator_selection",
           "plot_selection"]

EVALUATION = "estimator_selection"
#: Estimator families SLOPE tunes (see ``evaluators.SLOPE_DEFAULTS``).
FAMILIES = ("ips", "doubly_robust", "switch_dr", "dr_os", "subgaussian_ips")
#: Selectors that choose among the family's candidates beside SLOPE (the results' variant,
#: the function's name in evaluators, its stream's key, its regret's stream's key).
SELECTORS = {"twin": ("select_by_twin", 9, 10), "cv": ("select_by_cv", 11, 12),
             "pasif": ("select_by_pasif", 13, 14)}
_Z = 1.959963984540054


def _label(param: str, value: float) -> str:
    return f"{param}={'inf' if math.isinf(value) else f'{value:g}'}"


def estimator_selection(config="bred_linear", targets=DEFAULT_TARGETS[:1], *,
                        family: str = "ips", values=None, within: float = 0.1,
                        logging: str = "uniform", beta: float = 10.0, epsilon: float = 0.2,
                        n_rounds: int = 1000, n_logs: int = 100, n_actions: int | None = None,
                        reward_noise: float = 0.0, n_twins: int = 0, selectors=(),
                        n_resamples: int = 1000, rng=None,
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
    n_twins : int, default 0
        When >= 2, :func:`evaluators.select_by_twin` also picks among the same candidates on
        every log, from ``n_twins`` simulated twins of it (variant ``twin``, scored as
        SLOPE is); 0: SLOPE alone, unless ``selectors`` names the twin (then 20 twins).
    selectors : sequence of {"twin", "cv", "pasif"}
        Selectors that also pick among the same candidates on every log (variants of those
        names, scored as SLOPE is): :func:`evaluators.select_by_twin`,
        :func:`evaluators.select_by_cv` and :func:`evaluators.select_by_pasif` with their
        defaults.
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
          shrinkage or switching: the family's plain estimator);
        * variants ``twin``, ``cv``, ``pasif`` (with ``n_twins`` or ``selectors``): the
          metrics of ``slope`` for that selector's pick, and ``warned`` (the share of logs
          where its self-check warned).

    Notes
    -----
    SLOPE never sees the truth: it picks from the log alone. The oracle is what a user would
    choose knowing the truth, the best any fixed choice can do in this setting.
    """
    study = _Selection(config, targets, family=family, values=values, within=within,
                       logging=logging, beta=beta, epsilon=epsilon, n_rounds=n_rounds,
                       n_logs=n_logs, n_actions=n_actions, reward_noise=reward_noise,
                       n_twins=n_twins, selectors=selectors, n_resamples=n_resamples,
                       rng=rng, evaluation=evaluation)
    return finish(study.header, study.logs(0, study.n_logs, progress=progress), per_log)


class _Selection:
    """One cell of :func:`estimator_selection` (its arguments, checked): the targets and
    their truth, then any range of logs -- log ``i`` depends on ``i`` alone (the harness's
    chunks, :data:`CHUNKS`)."""

    def __init__(self, config, targets, *, family, values, within, logging, beta, epsilon,
                 n_rounds, n_logs, n_actions, reward_noise, n_twins, selectors, n_resamples,
                 rng, evaluation):
        import functools

        import evaluators
        import simulator
        from evaluators import SLOPE_DEFAULTS

        if family not in FAMILIES:
            raise ValueError(f"`family` must be one of {', '.join(map(repr, FAMILIES))}; "
                             f"got {family!r}.")
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
        n_twins = check_int(n_twins, "n_twins", low=0)
        if n_twins == 1:
            raise ValueError("`n_twins` must be 0 (no twin) or >= 2; got 1.")
        if isinstance(selectors, str) or not all(x in SELECTORS for x in selectors):
            raise ValueError(f"`selectors` must be a list of {', '.join(map(repr, SELECTORS))}; "
                             f"got {selectors!r}.")
        chosen = [x for x in SELECTORS if x in selectors or (x == "twin" and n_twins)]
        if "twin" in chosen and not n_twins:
            n_twins = 20
        fn = getattr(evaluators, family)
        self.twin_candidates = [(_label(param, v), functools.partial(fn, **{param: v}))
                                for v in cands]
        self.logging_table = policy_table(config, _check_policy(
            {"policy": logging, "beta": beta, "epsilon": epsilon}, "logging"))
        self.logger = _lookup(config, self.logging_table)
        specs = {}
        for j, t in enumerate(targets):
            t = _check_policy(t, f"targets[{j}]")
            specs[t["name"]] = t
        if not specs:
            raise ValueError("`targets` must name at least one target policy; got none.")
        root = seed_sequence(rng)
        self.tables = {name: policy_table(config, t) for name, t in specs.items()}
        truth = {name: simulator.static_policy_value(config, _lookup(config, tab))
                 for name, tab in self.tables.items()}
        params = {"family": family, "logging": logging, "n_rounds": n_rounds,
                  "n_actions": config.n_arms, "reward_noise": float(reward_noise)}
        if n_twins:
            params["n_twins"] = n_twins
        if logging == "softmax":
            params["beta"] = float(beta)
        elif logging == "epsilon_greedy":
            params["epsilon"] = float(epsilon)
        self.config, self.n_rounds, self.n_logs, self.root = config, n_rounds, n_logs, root
        self.reward_noise, self.family, self.cands, self.n_twins = (
            reward_noise, family, cands, n_twins)
        self.selectors = chosen
        #: What the values of every log are read with (the same in every chunk).
        self.header = {"evaluation": evaluation, "targets": list(self.tables), "param": param,
                       "cands": cands, "truth": truth, "params": params, "within": within,
                       "n_twins": n_twins, "selectors": chosen, "n_resamples": n_resamples,
                       "root": root}

    def logs(self, start: int, stop: int, *, progress: bool = False) -> list[list]:
        """Logs ``start`` to ``stop - 1``: per log and target, ``(candidates' values, index
        of SLOPE's pick or -1, SLOPE's estimate, {selector: (its Selection or None, index
        of its pick or -1)})``."""
        import warnings

        import evaluators
        from evaluators import fit_reward_model, select_estimator
        from recloop_base.progress import bar

        config, root, cands, family = self.config, self.root, self.cands, self.family
        labels = [c[0] for c in self.twin_candidates]
        # the DR families' candidates share one reward model per log (every target too),
        # fitted from the log's own stream
        model_based = family in ("doubly_robust", "switch_dr", "dr_os")
        out = []
        for i in bar(range(start, stop), desc="logs", show=progress):
            log, atoms = logged(config, self.n_rounds, self.logger, root, i, self.reward_noise)
            if self.selectors:  # the logging policy's distribution: what the twins draw
                # their actions from and PAS-IF subsamples by (SLOPE and the candidates read
                # the propensities only)
                log = dataclasses.replace(log, pi_b=self.logging_table[atoms])
            model = fit_reward_model(log, "ridge", rng=child_rng(root, 7, i)) if model_based \
                else "ridge"
            row = []
            for t, tab in self.tables.items():
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    est = select_estimator(log, tab[atoms], estimator=family, values=cands,
                                           model=model)
                theta = np.full(len(cands), np.nan)
                for v, th in zip(est.candidates, est.candidate_values, strict=True):
                    theta[cands.index(float(v))] = th
                picked = cands.index(float(est.selected)) if not math.isnan(est.selected) \
                    else -1
                chosen = {}
                for sel in self.selectors:
                    name, key, _ = SELECTORS[sel]
                    kw = {"n_twins": self.n_twins} if sel == "twin" else {}
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        try:
                            got = getattr(evaluators, name)(
                                log, tab[atoms], candidates=self.twin_candidates,
                                rng=child_seed(root, key, name_key(t), i), **kw)
                        except ValueError:  # every candidate without a number: no pick
                            got = None
                    chosen[sel] = (got if got is not None else evaluators.Estimate(
                        math.nan, math.nan, math.nan, math.nan, log.n_rounds),
                        labels.index(got.selected) if got is not None else -1)
                row.append((theta, picked, est, chosen))
            out.append(row)
        return out


def finish(header: dict, values: list[list], per_log=None) -> list[Measurement]:
    """The rows of :func:`estimator_selection` from the values of every log in log order
    (:meth:`_Selection.logs` of all the logs, or of consecutive ranges concatenated); each
    log's estimates go to ``per_log`` first."""
    cands, param, root = header["cands"], header["param"], header["root"]
    within, n_resamples = header["within"], header["n_resamples"]
    rows = []
    for j, t in enumerate(header["targets"]):
        truth = header["truth"][t]
        theta = np.array([v[j][0] for v in values]).reshape(len(values), len(cands))
        picked = np.array([v[j][1] for v in values], dtype=int)
        slope = [v[j][2] for v in values]
        chosen = {sel: ([v[j][3][sel][0] for v in values],
                        np.array([v[j][3][sel][1] for v in values], dtype=int))
                  for sel in header["selectors"]}
        kw = dict(evaluation=header["evaluation"], agent=t, params=header["params"])
        emit_per_log(per_log, slope, truth, variant="slope", **kw)
        for sel, (ests, _) in chosen.items():
            emit_per_log(per_log, ests, truth, variant=sel, **kw)
        for c, v in enumerate(cands):
            emit_per_log(per_log, list(theta[:, c]), truth, variant=_label(param, v), **kw)
        err = theta - truth  # (n_logs, candidates)
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
        rows += _chooser_rows(slope, picked, truth, err, rmse, best, within,
                              child_rng(root, 4, name_key(t)), n_resamples,
                              dict(kw, variant="slope"))
        for sel, (ests, picks) in chosen.items():
            rows += _chooser_rows(ests, picks, truth, err, rmse, best, within,
                                  child_rng(root, SELECTORS[sel][2], name_key(t)),
                                  n_resamples, dict(kw, variant=sel))
            from evaluators import wilson_estimate

            w = wilson_estimate(sum(bool(getattr(e, "warnings", ())) for e in ests),
                                len(ests))
            rows.append(Measurement(metric="warned", estimate=w.value, stderr=w.stderr,
                                    ci_low=w.ci_low, ci_high=w.ci_high, n=len(ests),
                                    variant=sel, **kw))
    return rows


def _chooser_rows(ests, picks, truth, err, rmse, best, within, gen, n_resamples, kw_s):
    """value, rmse, bias, coverage, regret, relative_regret and within of a chooser (SLOPE
    or the twin): its estimate on every log, the candidate it picked (-1: none), the
    candidates' errors ``err`` (logs x candidates) and RMSEs, the oracle ``best``."""
    from evaluators import wilson_estimate

    n_logs = len(ests)
    values_t = np.array([e.value for e in ests])
    good = np.isfinite(values_t)
    n = int(good.sum())
    if n == 0:
        return [Measurement(metric="value", estimate=math.nan, n=0, **kw_s)]
    e_s = values_t[good] - truth
    rmse_s = math.sqrt(float(np.mean(e_s ** 2)))
    mean_v = float(values_t[good].mean())
    se_v = float(values_t[good].std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
    lo = np.array([e.ci_low for e in ests])[good]
    hi = np.array([e.ci_high for e in ests])[good]
    cov = wilson_estimate(int(np.sum((lo <= truth) & (truth <= hi))), n)
    # the regret's interval: bootstrap over logs of (the chooser's RMSE - the oracle's)
    idx = gen.integers(0, n_logs, size=(n_resamples, n_logs))
    e_all = np.where(good, values_t - truth, np.nan)
    eo = err[:, best]
    boot = (np.sqrt(np.nanmean(e_all[idx] ** 2, axis=1))
            - np.sqrt(np.nanmean(eo[idx] ** 2, axis=1)))
    blo, bhi = np.nanpercentile(boot, [2.5, 97.5])
    regret = rmse_s - rmse[best]
    close = picks[good] >= 0
    pick_rmse = np.where(close, rmse[np.maximum(picks[good], 0)], np.inf)
    win = wilson_estimate(int(np.sum(pick_rmse <= (1 + within) * rmse[best])), n)
    return [
        Measurement(metric="value", estimate=mean_v, stderr=se_v, ci_low=mean_v - _Z * se_v,
                    ci_high=mean_v + _Z * se_v, truth=truth, n=n, **kw_s),
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


# -- report --------------------------------------------------------------------------------------

def summary_table(rows, summary) -> list[str]:
    """Markdown: per setting, target and chooser (SLOPE, and the selectors the run has),
    the untuned and the oracle's RMSE over the logs, the chooser's RMSE, its ratio to the
    oracle's (the figure of record's mark) and its regret (the :func:`recloop.summarize`
    rows of the per-log estimates, the logs of every seed pooled), how often its pick is
    within 10% of the oracle's RMSE (``within``) and how often its self-check warned
    (``warned``; the cells' own rows, mean over seeds)."""
    import json

    cell: dict = {}  # (setting, target, chooser, metric) -> the value of each seed
    for r in rows:  # the rows of one evaluation
        if r["metric"] in ("within", "warned"):
            key = (json.dumps(r["params"] or {}, sort_keys=True), r["agent"], r["variant"],
                   r["metric"])
            cell.setdefault(key, []).append(r["estimate"])
    groups: dict = {}  # (setting, target) -> {variant: SummaryRow}
    for s in summary:
        if s.metric == "value":
            key = (json.dumps(dict(s.params), sort_keys=True), s.agent)
            groups.setdefault(key, {})[s.variant] = s
    choosers = [c for c in ("slope", *SELECTORS) if any(c in g for g in groups.values())]
    out = ["| setting | target | logs | untuned RMSE | oracle (choice) RMSE | chooser | RMSE | "
           "RMSE / oracle | regret | within 10% | warned |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]

    def f(x, digits=3):
        return "" if x is None or math.isnan(x) else f"{x:.{digits}g}"

    for (setting, target), by_variant in groups.items():
        cands = [(v, s) for v, s in by_variant.items() if "=" in v]
        if not cands or "slope" not in by_variant:
            continue
        rmses = [s.rmse for _, s in cands]
        best = (int(np.nanargmin(rmses)) if np.isfinite(rmses).any() else None)
        oracle = cands[best][1].rmse if best is not None else math.nan
        choice = cands[best][0].partition("=")[2] if best is not None else ""

        def mean(chooser, metric, key=(setting, target)):
            w = cell.get((*key, chooser, metric), [])
            return float(np.nanmean(w)) if np.isfinite(w).any() else math.nan

        p = json.loads(setting)
        shown = ", ".join(f"{k} {p[k]}" for k in ("family", "logging", "beta", "n_rounds",
                                                    "n_actions", "reward_noise") if k in p)
        for c in choosers:
            got = by_variant.get(c)
            rmse = got.rmse if got is not None else math.nan
            out.append(f"| {shown} | {target} | {by_variant['slope'].n_logs} | "
                       f"{f(cands[0][1].rmse)} | {f(oracle)} ({choice}) | {c} | {f(rmse)} | "
                       f"{f(rmse / oracle if oracle > 0 else math.nan)} | "
                       f"{f(rmse - oracle)} | {f(mean(c, 'within'), 2)} | "
                       f"{f(mean(c, 'warned'), 2)} |")
    return out


#: Each chooser's look in the figures against the oracle (its :func:`recloop._plots.style`
#: index), the same in ``estimator_selection``'s and ``ope_real``'s (``select_by_twin`` there).
CHOOSER_STYLES = {"twin": 0, "cv": 1, "pasif": 2, "slope": 3}
#: The choosers' names in the legend (the results' variant first, as the tables name it).
CHOOSER_LABELS = {"slope": "slope: SLOPE's rule", "twin": "twin",
                  "cv": "cv: cross-validated OPE", "pasif": "pasif: PAS-IF",
                  "untuned": "untuned (no clip or shrinkage)"}
#: How a setting's parameters read in a row's name.
_SHOWN = {"family": "family {}", "logging": "{} logging", "beta": "beta {}",
          "epsilon": "epsilon {}", "n_rounds": "{} rounds", "n_actions": "{} arms",
          "reward_noise": "noise {}", "n_twins": "{} twins"}


def _setting_words(params: dict, keys) -> str:
    from recloop._plots import number

    return ", ".join(_SHOWN[k].format(number(params[k]) if isinstance(params[k], (int, float))
                                      else params[k]) for k in keys if k in params)


def chooser_dots(label: str, key: str, ratios, lows=None, highs=None, *, j: int):
    """The :class:`recloop._plots.Dots` of one chooser against the oracle, in its look
    (:data:`CHOOSER_STYLES`; the untuned estimator grey)."""
    from recloop import _plots

    return _plots.Dots(label, ratios, lows, highs, j=CHOOSER_STYLES.get(key, j),
                       color="0.45" if key == "untuned" else None)


def plot_selection(rows, out_dir, *, prefix: str = EVALUATION) -> list:
    """The figure of record, ``{prefix}_vs_oracle.png``: per setting and target, the RMSE of
    every chooser the rows hold (SLOPE's pick, and the twin's, CV-OPE's and PAS-IF's with
    ``selectors``) and of the untuned estimator, divided by the oracle's (1: as good as the
    best fixed candidate in hindsight; the bars: the bootstrap interval of the regret over
    the logs, divided likewise), the mean over seeds; the goal (1.2 x the oracle) dotted; a
    panel per family when several are swept, a row per setting that varies."""
    import json
    from pathlib import Path

    from recloop import _plots

    choosers = ["untuned", "slope", *SELECTORS]
    acc: dict = {}
    n_logs = set()
    for m in rows:
        if m.metric not in ("rmse", "regret") or m.variant not in ("oracle", *choosers):
            continue
        key = (json.dumps(dict(m.params or {}), sort_keys=True), m.agent)
        acc.setdefault(key, {}).setdefault((m.variant, m.metric), []).append(m)
        if m.variant == "oracle":
            n_logs.add(m.n)
    if not acc:
        return []
    present = [c for c in choosers if any((c, "rmse") in got for got in acc.values())]
    settings = [json.loads(s) for s, _ in acc]
    keys = [k for k in _SHOWN if any(k in p for p in settings)]
    varying = [k for k in keys if len({json.dumps(p.get(k)) for p in settings}) > 1]
    fixed = [k for k in keys if k not in varying]
    targets = list(dict.fromkeys(t for _, t in acc))
    panel_key = "family" if "family" in varying else None
    in_row = [k for k in varying if k != panel_key]
    panels: dict = {}  # panel -> {row name: {(chooser, what): value}}
    for (setting, target), got in acc.items():
        p = json.loads(setting)
        name = _setting_words(p, in_row)
        if len(targets) > 1 or not name:
            name = f"{name} | {target}" if name else target
        oracle = float(np.mean([m.estimate for m in got.get(("oracle", "rmse"), [])]
                               or [math.nan]))
        cell = panels.setdefault(p.get(panel_key, "") if panel_key else "", {})
        cell[name] = out = {}
        for v in present:
            r = [m.estimate for m in got.get((v, "rmse"), [])]
            out[v, "ratio"] = float(np.mean(r)) / oracle if r and oracle > 0 else math.nan
            g = got.get((v, "regret"), [])
            lo = [m.ci_low for m in g if m.ci_low is not None]
            hi = [m.ci_high for m in g if m.ci_high is not None]
            out[v, "low"] = (oracle + float(np.mean(lo))) / oracle if lo and oracle > 0 \
                else math.nan
            out[v, "high"] = (oracle + float(np.mean(hi))) / oracle if hi and oracle > 0 \
                else math.nan
    drawn = []
    for panel, cells in panels.items():
        names = list(cells)
        dots = [chooser_dots(CHOOSER_LABELS[v], v, *([cells[c][v, w] for c in names]
                                                      for w in ("ratio", "low", "high")),
                             j=4)
                for v in present]
        drawn.append((f"family {panel}" if panel_key else "", names, dots))
    what = _setting_words(settings[0], fixed)
    logs = f"{min(n_logs)}" if len(n_logs) == 1 else f"{min(n_logs)}-{max(n_logs)}"
    note = ("oracle: the candidate of least RMSE over the logs, known only to the harness; "
            f"bars: 95% bootstrap interval of the regret, divided likewise; {logs} logs a row"
            + (f"; {what}" if what else "") + (f"; target {targets[0]}"
                                                if len(targets) == 1 else ""))
    return [_plots.oracle_figure(drawn, Path(out_dir) / f"{prefix}_vs_oracle.png",
                                 title=f"{prefix}: each chooser's RMSE / the oracle's",
                                 note=note)]


def _figures_kind(measurements, out_dir, world):
    prefix = measurements[0].evaluation if measurements else EVALUATION
    return plot_selection(measurements, out_dir, prefix=prefix)


# -- the scenario kind ------------------------------------------------------------------------

def _check_kind(params, agents, world):
    """The rules of ``ope``: a static linear bandit world, well-formed targets; ``n_twins``
    0 or >= 2."""
    from recloop.experiments._ope import _check_kind as ope_rules

    if params.get("n_twins") == 1:
        yield "n_twins", "expected 0 (no twin) or at least 2 twins, got 1"
    yield from ope_rules({**params, "ab_users": 0}, agents, world)


def _chunk(cell, start: int, stop: int):
    """Logs ``[start, stop)`` of a cell: ``(header, values)`` (:class:`_Selection`)."""
    from recloop._worlds import world_config

    p = dict(cell.params)
    study = _Selection(**bound_arguments(estimator_selection, world_config(cell.world),
                                         p.pop("targets"), **p, rng=cell.seed_sequence,
                                         evaluation=cell.evaluation))
    return study.header, study.logs(start, stop, progress=cell.progress)


def _merge(cell, parts):
    """The cell's rows from its chunks' ``(header, values)`` in log order."""
    return finish(same_header(parts), [v for _, values in parts for v in values],
                  cell.per_log)


def _cost(cell) -> float:
    """Estimated seconds of one log: records x (arms + features) x targets x candidates (x
    twins), at :data:`SECONDS_PER_RECORD_CALL`."""
    from recloop._limits import bandit_sizes

    p = cell.params
    K, d = bandit_sizes(cell.world)
    sel = p.get("selectors") or ()
    twins = p.get("n_twins") or (20 if "twin" in sel else 0)
    calls = len(p.get("values") or range(10)) * (1 + twins + 10 * (("cv" in sel)
                                                                   + ("pasif" in sel)))
    return SECONDS_PER_RECORD_CALL * p["n_rounds"] * ((p.get("n_actions") or K) + d) \
        * max(1, len(p.get("targets") or ())) * calls


CHUNKS = Chunks(n_logs=lambda cell: cell.params["n_logs"], cost=_cost, run=_chunk,
                merge=_merge)


def _resources(params, world):
    from recloop._limits import F8
    from recloop.experiments._ope import _resources as ope_bytes

    values = params.get("values") or range(10)  # the candidates, estimated on every log
    out = ope_bytes({**params, "targets": params.get("targets") or (),
                     "estimators": list(values)}, world)
    out["n_resamples x n_logs: bootstrap of the logs"] = (
        2 * params.get("n_resamples", 1) * params.get("n_logs", 1) * F8)
    out["n_twins x candidates: the twins' errors and values"] = (
        (params.get("n_twins") or 0) * (len(values) + 1) * F8)
    return out


KIND = EvaluationKind(
    name="estimator_selection",
    summary="SLOPE (Su, Srinath & Krishnamurthy 2020) picks an estimator's hyper-parameter "
            "(clip, tau, lambda) from each log alone; the oracle knows the exact value and "
            "picks the candidate with the least RMSE. Per setting and target: every "
            "candidate's rmse and bias, SLOPE's rmse, coverage, regret (against the oracle, "
            "bootstrap interval) and how often its pick is within 10% of the oracle's RMSE.",
    run=CHUNKS.whole,
    chunks=CHUNKS,
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
        Param("n_twins", Int(low=0, high=10_000), 0, "Twins per log for "
              "`evaluators.select_by_twin`, which then picks among the same candidates "
              "(variant `twin`, scored as SLOPE); 0: no twin (20 when `selectors` names "
              "it), >= 2 otherwise."),
        Param("selectors", ListOf(Str(choices=tuple(SELECTORS)), min_len=0, unique=True), [],
              "Selectors that pick among the same candidates beside SLOPE, scored as SLOPE "
              "is: `twin` (`evaluators.select_by_twin`), `cv` (`select_by_cv`), `pasif` "
              "(`select_by_pasif`).", sweepable=False),
        Param("n_resamples", Int(low=1, high=10**6), 1000, "Bootstrap resamples of the logs "
              "for the regret's interval."),
    ),
    per_agent=False,
    agent_family="",
    needs_world=True,
    min_agents=0,
    check=_check_kind,
    figures=_figures_kind,
    resources=_resources,
    headline=("value",),
    unit="log",
    report=lambda rows, scenario, summary: [
        "Each chooser's pick (SLOPE's, and the twin's, CV-OPE's and PAS-IF's when the "
        "evaluation has `selectors`) against the oracle's (the candidate with the least "
        "RMSE against the exact value over the logs, the logs of every seed pooled); "
        "`within 10%` is the share of logs whose pick is within 10% of the oracle's RMSE "
        "in its cell, `warned` the share where the selector's self-check warned (SLOPE has "
        "none), mean over seeds:", ""] + summary_table(rows, summary) + [""],
    function=estimator_selection,
)

#: The kinds this module declares (the registry reads them: recloop._registry.BUILTIN_MODULES).
KINDS = (KIND,)
