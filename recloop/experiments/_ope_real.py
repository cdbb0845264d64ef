"""Off-policy estimators scored on real data, against a truth that comes from the data.

Two sources of truth (issue 24 §3):

* **The Open Bandit Dataset** (``source = "obd"``): the log of the uniform random policy is
  the input, the platform's Bernoulli Thompson sampling (BTS) the target. The truth is the
  on-policy value of BTS: the click rate of the dataset's *other* log, the one BTS wrote
  itself. That truth is uncertain (on the 10,000-row sample: 42 clicks), so it comes with
  its own Wilson interval; an estimate is scored by its error relative to the truth and by
  whether its interval overlaps the truth's. The logs are bootstrap resamples of the random
  log's rows (as the dataset's paper does, Saito et al. 2021), the target's action
  distribution the simulated BTS policy with the dataset's prior.
* **The multiclass-to-bandit protocol** (``source`` a bundled scikit-learn set): the
  classes are the actions, the reward is 1 for the true class (Dudik, Langford & Li 2011).
  Per replicate (seed), one stratified split trains the policies' classifiers; each log is
  a bootstrap resample of the evaluation rows with actions drawn afresh from the logging
  policy, and each target's value on the log's rows is exact: ``mean_j pi_e(y_j | x_j)``.
* **Jester** (``source = "jester"``): the users who rated every joke of a set, the ratings
  of some jokes the context, the others the actions, the reward a high rating (Riquelme,
  Tucker & Snoek 2018); every action's reward is known, so the protocol is the multiclass
  one with ``mean_j sum_a pi_e(a | x_j) r_j(a)`` the exact value.

``selectors`` (``evaluators.select_by_twin``, ``select_by_cv``, ...) choose, on every log,
among the evaluation's ``estimators``; each is scored like an estimator and against the
*oracle*, the estimator with the least RMSE over the logs (known only to the harness).
"""

from __future__ import annotations

import math
import warnings
from typing import Mapping, Sequence

import numpy as np

from recloop._registry import EvaluationKind
from recloop._results import Measurement
from recloop._schema import REQUIRED, EstimatorList, Float, Int, ListOf, Param, Str, Table
from recloop.experiments._common import (
    child_rng,
    emit_per_log,
    estimator_table,
    name_key,
    seed_sequence,
)
from recloop_base.validation import (
    ArgumentTypeError,
    ArgumentValueError,
    check_choice,
    check_float,
    check_int,
)

__all__ = ["DEFAULT_TARGETS", "KIND", "SOURCES", "ope_real", "plot_selectors"]

EVALUATION = "ope_real"
#: Where the truth comes from: the Open Bandit Dataset, or a bundled classification set.
SOURCES = ("obd", "jester", "digits", "breast_cancer", "wine", "iris")
CAMPAIGNS = ("all", "men", "women")
#: The multiclass protocol's default targets: a good, a hedged and a poor classifier policy.
DEFAULT_TARGETS = (
    {"name": "good", "alpha": 0.9, "C": 1.0},
    {"name": "hedged", "alpha": 0.5, "C": 1.0},
    {"name": "poor", "alpha": 0.9, "C": 0.0001},
)
DEFAULT_ESTIMATORS = ("ips", "snips", "direct_method", "doubly_robust", "sndr", "switch_dr",
                      "dr_os")
_Z = 1.959963984540054


def _check_target(spec, where: str) -> dict:
    if not isinstance(spec, Mapping):
        raise ArgumentTypeError(where, "a table {name, alpha, C}", type(spec).__name__)
    unknown = sorted(set(spec) - {"name", "alpha", "C"})
    if unknown:
        raise ArgumentValueError(f"{where}.{unknown[0]}", "one of the keys name, alpha, C",
                                 repr(unknown[0]))
    name = spec.get("name")
    if not isinstance(name, str) or not name:
        raise ArgumentValueError(f"{where}.name", "a non-empty string", repr(name))
    return {"name": name,
            "alpha": check_float(spec.get("alpha", 0.9), f"{where}.alpha", low=0.0, high=1.0),
            "C": check_float(spec.get("C", 1.0), f"{where}.C", low=0.0, low_open=True)}


def _draw(probs, u) -> np.ndarray:
    K = probs.shape[1]
    return np.minimum((np.cumsum(probs, axis=1) <= u[:, None]).sum(axis=1), K - 1)


def _obd(data, campaign, n_sim, root):
    """The random log, BTS's action distribution on it, BTS's on-policy value and its
    Wilson interval."""
    from pathlib import Path

    from evaluators import wilson_estimate
    from evaluators.datasets import bernoulli_ts_action_dist, load_open_bandit, read_bts_prior

    if data is None:
        raise ArgumentValueError("data", "the Open Bandit Dataset's folder (holding "
                                 "random/{campaign}/, bts/{campaign}/ and prior_bts.yaml) "
                                 "when source is 'obd'", "nothing")
    root_dir = Path(data).expanduser()
    random = load_open_bandit(root_dir, behavior_policy="random", campaign=campaign)
    bts = load_open_bandit(root_dir, behavior_policy="bts", campaign=campaign)
    priors = read_bts_prior(root_dir / "prior_bts.yaml")
    if campaign not in priors:
        raise ArgumentValueError("data", f"a prior_bts.yaml with the campaign {campaign!r}",
                                 f"campaigns {sorted(priors)}")
    dist = bernoulli_ts_action_dist(priors[campaign], random.n_actions, random.len_list,
                                    n_sim=n_sim, rng=child_rng(root, 8))
    clicks = int(np.sum(bts.reward))
    truth = wilson_estimate(clicks, bts.n_rounds)
    return random, dist, truth


def ope_real(source: str = "digits", *, data=None, campaign: str = "all",
             estimators=DEFAULT_ESTIMATORS, selectors=(),
             targets: Sequence[Mapping] = DEFAULT_TARGETS, logging_alpha: float = 0.2,
             logging_C: float = 1.0, eval_size: float = 0.5, n_logs: int = 200,
             n_sim: int = 100_000, rng=None, progress: bool = False,
             evaluation: str = EVALUATION, on_error=None, per_log=None) -> list[Measurement]:
    """Off-policy estimators on real data against a truth from the data, over many logs.

    Parameters
    ----------
    source : {"obd", "jester", "digits", "breast_cancer", "wine", "iris"}
        ``"obd"``: the Open Bandit Dataset's random log, target BTS, truth the click rate
        of the BTS log (with its Wilson interval). ``"jester"``: the Jester ratings at
        ``data`` as full-information feedback (:func:`evaluators.datasets.
        jester_full_information`: the users who rated every joke of
        ``evaluators.datasets.JESTER_JOKES``, 4 jokes' ratings the context, the other 4
        the actions, reward 1 for a rating of 5 or more), truth exact. Else a bundled
        scikit-learn set in the multiclass-to-bandit protocol, truth exact from the labels.
    data : str or os.PathLike
        ``"obd"``: the dataset's folder (``random/``, ``bts/``, ``prior_bts.yaml``; the
        10,000-row sample or the full release). ``"jester"``: a Jester ratings file
        (``userId,jokeId,rating`` CSV, or Jester's text format).
    campaign : {"all", "men", "women"}
        ``"obd"`` only.
    estimators : sequence
        Static estimators: names of the registry's (``ips``, ``dr_os``, ``select_by_twin``,
        ...) or ``(name, estimator)`` pairs; model-based ones share one reward model per log.
    selectors : sequence
        Estimator selectors (``select_by_twin``, ``select_by_cv``, ``select_by_pasif``,
        ``select_by_slope``): names or ``(name, selector)`` pairs, ``selector(log,
        action_dist, *, candidates, rng)``; each chooses on every log among the
        ``estimators`` (as its candidates) and is scored like them, and against the oracle.
    targets : sequence of tables ``{name, alpha, C}``
        Multiclass only: target policies (a logistic regression with inverse
        regularisation ``C`` on the training split, its prediction mixed with uniform,
        weight ``alpha``; :class:`evaluators.datasets.ClassifierPolicy`).
    logging_alpha, logging_C : float
        Multiclass only: the logging policy (``alpha < 1``).
    eval_size : float in (0, 1)
        Multiclass only: share of each class in the evaluation part.
    n_logs : int
        Logs (bootstrap resamples) per cell.
    n_sim : int
        ``"obd"`` only: simulations of the BTS policy's action distribution.
    rng, progress, evaluation, on_error, per_log
        As for :func:`recloop.experiments._ope.ope`.

    Returns
    -------
    list of Measurement
        Per target (``agent``; ``"bts"`` on OBD) and estimator (``variant``): ``value`` (mean
        estimate, ``truth`` the mean truth over logs), ``bias``, ``rmse``, ``relative_error``
        (mean of ``|estimate - truth| / truth`` over logs, the dataset paper's relative
        estimation error), ``coverage`` (share of logs whose interval holds that log's
        truth; on OBD the truth's point value), ``overlap`` (OBD: share of logs whose
        interval meets the truth's interval), ``nan_rate``; variant ``truth``: the truth
        (OBD: the BTS click rate with its Wilson interval; multiclass: the mean over logs
        of the exact values). With ``selectors``: variant ``oracle``, metric ``rmse``, the
        least RMSE of the estimators (``choice``: the index of that estimator in
        ``estimators``); per selector, besides the estimator's metrics, ``oracle_ratio``
        (its RMSE over the oracle's), ``pick_within`` (share of logs whose pick has an RMSE
        within 1.2 times the oracle's, Wilson interval) and ``warned`` (share of logs where
        its self-check warned).
    """
    from evaluators import Estimate
    from recloop._registry import registry
    from recloop.experiments._ope import LogModels, _safe_call, _takes_rng, model_spec

    source = check_choice(source, "source", SOURCES)
    n_logs = check_int(n_logs, "n_logs", low=2)
    n_sim = check_int(n_sim, "n_sim", low=1)
    root = seed_sequence(rng)
    builtins = {k: v.factory for k, v in registry().estimators.items()
                if v.family == "static" and v.origin == "built-in"}
    table = estimator_table(estimators, tuple(builtins), what="estimator")
    funcs = {name: f if f is not None else builtins[name] for name, f in table.items()}
    chooser = estimator_table(selectors, tuple(builtins), what="selector") if len(
        selectors) else {}
    choosers = {name: f if f is not None else builtins[name] for name, f in chooser.items()}
    clash = sorted(set(choosers) & set(funcs))
    if clash:
        raise ArgumentValueError("selectors", "names distinct from the estimators'",
                                 f"{clash[0]!r} in both")
    if choosers and len(funcs) < 2:
        raise ArgumentValueError("estimators", "at least 2 estimators for the selectors to "
                                 "choose from", f"{len(funcs)}")
    if on_error is None:
        def on_error(what, exc):
            warnings.warn(f"{what}: {type(exc).__name__}: {exc}; recorded as nan.",
                          stacklevel=3)
    params: dict = {"source": source}
    truth_ci: Estimate | None = None
    if source == "obd":
        campaign = check_choice(campaign, "campaign", CAMPAIGNS)
        base, dist, truth_ci = _obd(data, campaign, n_sim, root)
        n, K, L = base.n_rounds, base.n_actions, base.len_list
        a = np.broadcast_to(dist, (n, K, L))
        names = ["bts"]
        params.update(campaign=campaign, n_rounds=n)

        def make_log(i):
            idx = child_rng(root, 1, i).integers(0, n, n)
            return base.take(idx), {"bts": a}, {"bts": truth_ci.value}
    else:
        from evaluators.datasets import (
            ClassifierPolicy,
            full_information_to_bandit,
            jester_full_information,
            load_classification,
        )

        specs = [_check_target(t, f"targets[{j}]") for j, t in enumerate(targets)]
        if not specs:
            raise ArgumentValueError("targets", "at least one target policy", "none")
        names = [s["name"] for s in specs]
        if len(set(names)) != len(names):
            dup = next(x for x in names if names.count(x) > 1)
            raise ArgumentValueError("targets", "distinct names", f"{dup!r} twice")
        if source == "jester":
            if data is None:
                raise ArgumentValueError("data", "a Jester ratings file when source is "
                                         "'jester'", "nothing")
            full = jester_full_information(data)
            X, R, labels = full.X, full.rewards, full.labels
        else:
            X, y = load_classification(source)
            labels = np.unique(y, return_inverse=True)[1].ravel()
            R = np.eye(int(labels.max()) + 1)[labels]
        data = full_information_to_bandit(
            X, R, labels=labels, logging=ClassifierPolicy(alpha=logging_alpha, C=logging_C),
            target=[ClassifierPolicy(alpha=s["alpha"], C=s["C"]) for s in specs],
            eval_size=eval_size, rng=child_rng(root, 0))
        rewards = data.rewards
        pi_b = data.log.pi_b
        n, K = data.log.n_rounds, data.log.n_actions
        rows = np.arange(n)
        params.update(n_rounds=n, n_actions=K, logging_alpha=float(logging_alpha))

        def make_log(i):
            from simulator.logs import BanditLog

            gen = child_rng(root, 1, i)
            idx = gen.integers(0, n, n)
            p = pi_b[idx]
            action = _draw(p, gen.random(n))
            r = rewards[idx]
            log = BanditLog(context=data.log.context[idx], action=action,
                            reward=r[rows, action], pscore=p[rows, action], n_actions=K,
                            pi_b=p)
            dists = {t: data.action_dist[j][idx] for j, t in enumerate(names)}
            truths = {t: float(np.einsum("jk,jk->j", data.action_dist[j][idx], r).mean())
                      for j, t in enumerate(names)}
            return log, dists, truths

    values = {(t, e): [] for t in names for e in [*funcs, *choosers]}
    picks = {(t, e): [] for t in names for e in choosers}
    warned = {(t, e): [] for t in names for e in choosers}
    truths = {t: np.empty(n_logs) for t in names}
    takes_rng = {e: _takes_rng(f) for e, f in funcs.items()}
    mspecs = {e: model_spec(f) for e, f in funcs.items()}
    candidates = [(e, _as_partial(f)) for e, f in funcs.items()]
    from recloop_base.progress import bar

    for i in bar(range(n_logs), desc="logs", show=progress):
        log, dists, truth_i = make_log(i)
        models = LogModels(log, root, i)
        calls = {e: f if mspecs[e] is None else models.bind(*mspecs[e])
                 for e, f in funcs.items()}
        for t in names:
            truths[t][i] = truth_i[t]
            d = dists[t]
            d = d if d.ndim == 3 else d[:, :, None]
            for e, f in calls.items():
                kw = {"rng": child_rng(root, 3, name_key(e), name_key(t), i)} \
                    if takes_rng[e] else {}
                values[t, e].append(_safe_call(f, log, d, kw, on_error,
                                               f"estimator {e!r} on target {t!r}, log {i}"))
            for e, f in choosers.items():
                sel = _select(f, log, d, candidates,
                              child_rng(root, 3, name_key(e), name_key(t), i), on_error,
                              f"selector {e!r} on target {t!r}, log {i}")
                # the pick's estimate as the harness computed it (the shared reward model
                # of the log): the selector is scored by its pick alone
                pick = getattr(sel, "selected", None)
                values[t, e].append(values[t, pick][-1] if pick is not None else None)
                picks[t, e].append(pick)
                warned[t, e].append(bool(getattr(sel, "warnings", ())))
    out = []
    for t in names:
        kw = dict(evaluation=evaluation, agent=t, params=params)
        if truth_ci is not None:
            out.append(Measurement(metric="value", estimate=truth_ci.value,
                                   stderr=truth_ci.stderr, ci_low=truth_ci.ci_low,
                                   ci_high=truth_ci.ci_high, n=truth_ci.n, variant="truth",
                                   **kw))
        else:
            m = float(truths[t].mean())
            out.append(Measurement(metric="value", estimate=m, n=n_logs, variant="truth",
                                   **kw))
        for e in [*funcs, *choosers]:
            emit_per_log(per_log, values[t, e], truths[t], variant=e, **kw)
            out += _summary(values[t, e], truths[t], truth_ci, variant=e, **kw)
        if choosers:
            out += _oracle_rows(values, picks, warned, truths[t], t, list(funcs),
                                list(choosers), kw)
    return out


def _as_partial(f):
    """A candidate for a selector: recloop's bound estimator (``func`` and ``keywords``, as
    the harness binds a table's params) as a ``functools.partial``, so that the selector
    recognises recloop's own estimators and shares their reward models."""
    import functools

    if isinstance(f, functools.partial) or not hasattr(f, "func"):
        return f
    return functools.partial(f.func, **(getattr(f, "keywords", None) or {}))


def _select(f, log, d, candidates, rng, on_error, what):
    """A selector's :class:`evaluators.Selection` on one log, or ``None`` after reporting
    its failure."""
    fn = getattr(f, "func", f)
    kw = dict(getattr(f, "keywords", None) or {})
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(log, d, **kw, candidates=candidates, rng=rng)
    except Exception as exc:  # a candidate that raises, every candidate nan, ...
        on_error(what, exc)
        return None


def _oracle_rows(values, picks, warned, truths, t, estimators, selectors, kw):
    """The oracle (the estimator of least RMSE over the logs) and, per selector, its RMSE
    over the oracle's, the share of logs whose pick is within 1.2 times the oracle's RMSE,
    and the share of logs where it warned."""
    from evaluators import wilson_estimate

    def rmse(ests):
        err = [e.value - tr for e, tr in zip(ests, truths, strict=True)
               if e is not None and math.isfinite(e.value)]
        return math.sqrt(float(np.mean(np.square(err)))) if err else math.nan

    cand = {e: rmse(values[t, e]) for e in estimators}
    finite = {e: r for e, r in cand.items() if math.isfinite(r)}
    if not finite:
        return []
    best = min(finite, key=lambda e: (finite[e], estimators.index(e)))
    oracle = finite[best]
    rows = [Measurement(metric="rmse", estimate=oracle, variant="oracle", **kw),
            Measurement(metric="choice", estimate=float(estimators.index(best)),
                        variant="oracle", **kw)]
    for s in selectors:
        r = rmse(values[t, s])
        got = [p for p in picks[t, s] if p is not None]
        near = sum(1 for p in got if cand.get(p, math.inf) <= 1.2 * oracle)
        w = wilson_estimate(near, len(got)) if got else None
        warn = wilson_estimate(sum(warned[t, s]), len(warned[t, s]))
        rows.append(Measurement(metric="oracle_ratio", estimate=r / oracle if oracle > 0
                                else math.nan, n=len(got), variant=s, **kw))
        if w is not None:
            rows.append(Measurement(metric="pick_within", estimate=w.value, stderr=w.stderr,
                                    ci_low=w.ci_low, ci_high=w.ci_high, n=len(got),
                                    variant=s, **kw))
        rows.append(Measurement(metric="warned", estimate=warn.value, stderr=warn.stderr,
                                ci_low=warn.ci_low, ci_high=warn.ci_high,
                                n=len(warned[t, s]), variant=s, **kw))
    return rows


def _summary(ests, truths, truth_ci, **kw) -> list[Measurement]:
    """value, bias, rmse, relative_error, coverage, overlap (OBD), nan_rate of one (target,
    estimator) over the logs, each log against its own truth."""
    from evaluators import wilson_estimate

    n_logs = len(ests)
    ok = np.array([e is not None and math.isfinite(e.value) for e in ests])
    n = int(ok.sum())
    nan_rate = wilson_estimate(n_logs - n, n_logs)
    rows = [Measurement(metric="nan_rate", estimate=nan_rate.value, stderr=nan_rate.stderr,
                        ci_low=nan_rate.ci_low, ci_high=nan_rate.ci_high, n=n_logs, **kw)]
    if n == 0:
        return rows + [Measurement(metric=m, estimate=math.nan, n=0, **kw)
                       for m in ("value", "bias", "rmse", "relative_error")]
    good = [e for e, g in zip(ests, ok, strict=True) if g]
    v = np.array([e.value for e in good])
    tr = np.asarray(truths, dtype=np.float64)[ok]
    err = v - tr
    se_v = float(v.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
    se_e = float(err.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
    mean_v, bias = float(v.mean()), float(err.mean())
    rel = np.abs(err) / np.abs(tr)
    se_rel = float(rel.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
    rows += [
        Measurement(metric="value", estimate=mean_v, stderr=se_v, ci_low=mean_v - _Z * se_v,
                    ci_high=mean_v + _Z * se_v, truth=float(tr.mean()), n=n, **kw),
        Measurement(metric="bias", estimate=bias, stderr=se_e, ci_low=bias - _Z * se_e,
                    ci_high=bias + _Z * se_e, n=n, **kw),
        Measurement(metric="rmse", estimate=math.sqrt(float(np.mean(err ** 2))), n=n, **kw),
        Measurement(metric="relative_error", estimate=float(rel.mean()), stderr=se_rel,
                    ci_low=float(rel.mean()) - _Z * se_rel,
                    ci_high=float(rel.mean()) + _Z * se_rel, n=n, **kw),
    ]
    lo = np.array([e.ci_low for e in good])
    hi = np.array([e.ci_high for e in good])
    has = np.isfinite(lo) & np.isfinite(hi)
    m = int(has.sum())
    if m:
        cov = wilson_estimate(int(np.sum(has & (lo <= tr) & (tr <= hi))), m)
        rows.append(Measurement(metric="coverage", estimate=cov.value, stderr=cov.stderr,
                                ci_low=cov.ci_low, ci_high=cov.ci_high, n=m, **kw))
        if truth_ci is not None:
            meet = has & (lo <= truth_ci.ci_high) & (truth_ci.ci_low <= hi)
            ov = wilson_estimate(int(meet.sum()), m)
            rows.append(Measurement(metric="overlap", estimate=ov.value, stderr=ov.stderr,
                                    ci_low=ov.ci_low, ci_high=ov.ci_high, n=m, **kw))
    return rows


# -- report ---------------------------------------------------------------------------------------

def overlap_table(rows) -> list[str]:
    """Markdown (OBD): per setting and estimator, the truth's interval beside the mean
    estimate, the relative error and how often the two intervals overlap (mean over seeds)."""
    import json

    acc: dict = {}
    truth: dict = {}
    for r in rows:
        setting = json.dumps(r["params"] or {}, sort_keys=True)
        if r["variant"] == "truth" and r["metric"] == "value" and r.get("ci_low") is not None \
                and math.isfinite(r["ci_low"]):
            truth[setting] = r
        elif r["metric"] in ("value", "relative_error", "overlap", "coverage"):
            acc.setdefault((setting, r["variant"]), {}).setdefault(r["metric"], []).append(
                r["estimate"])
    if not truth:
        return []
    out = ["| setting | estimator | truth (95% interval) | mean estimate | relative error | "
           "intervals overlap | covers the truth |", "|---|---|---|---|---|---|---|"]

    def f(xs, digits=3):
        xs = [x for x in xs or [] if x is not None and math.isfinite(x)]
        return f"{np.mean(xs):.{digits}g}" if xs else ""

    for (setting, variant), m in acc.items():
        t = truth.get(setting)
        if t is None:
            continue
        p = json.loads(setting)
        out.append(f"| {p.get('campaign', '')} | {variant} | {t['estimate']:.3g} "
                   f"[{t['ci_low']:.3g}, {t['ci_high']:.3g}] | {f(m.get('value'))} | "
                   f"{f(m.get('relative_error'))} | {f(m.get('overlap'), 2)} | "
                   f"{f(m.get('coverage'), 2)} |")
    return out + [""]


def plot_selectors(rows, out_dir, *, prefix: str = EVALUATION) -> list:
    """The figure of record of an evaluation with ``selectors``,
    ``{prefix}_vs_oracle.png``: per cell (a panel per data set, a row per target) each
    selector's ``oracle_ratio`` (its RMSE over the oracle's, the mean over seeds) on a log
    axis, the oracle (1) and the goal (1.2 x the oracle) as lines. No figure (``[]``)
    without selectors."""
    from pathlib import Path

    from recloop import _plots
    from recloop.experiments._selection import chooser_dots

    acc: dict = {}  # data set -> target -> selector -> ratios (one a seed)
    for m in rows:
        if m.metric != "oracle_ratio":
            continue
        p = dict(m.params or {})
        where = p.get("source", "")
        if where == "obd":
            where = f"obd\ncampaign {p.get('campaign', 'all')}"
        elif "n_actions" in p:
            where = f"{where}\n{_plots.number(p['n_rounds'])} rows, {p['n_actions']} actions"
        acc.setdefault(where, {}).setdefault(m.agent, {}).setdefault(m.variant, []).append(
            m.estimate)
    if not acc:
        return []
    selectors = list(dict.fromkeys(v for cells in acc.values() for by in cells.values()
                                   for v in by))
    panels = []
    for where, cells in acc.items():
        targets = list(cells)
        dots = []
        for j, s in enumerate(selectors):
            ratios = [float(np.mean(cells[t][s])) if cells[t].get(s) else math.nan
                      for t in targets]
            dots.append(chooser_dots(s, s.removeprefix("select_by_"), ratios, j=4 + j))
        panels.append((where if len(acc) > 1 else "", targets, dots))
    one = next(iter(acc)) if len(acc) == 1 else ""
    note = ("oracle: the candidate of least RMSE over the logs, known only to the harness; "
            "no bars (pick_within in the tables: the share of logs within 1.2 x, with its "
            "interval)" + (f"; {one}".replace("\n", ", ") if one else ""))
    return [_plots.oracle_figure(panels, Path(out_dir) / f"{prefix}_vs_oracle.png",
                                 title=f"{prefix}: each selector's RMSE / the oracle's",
                                 note=note)]


def _figures_kind(measurements, out_dir, world):
    prefix = measurements[0].evaluation if measurements else EVALUATION
    return plot_selectors(measurements, out_dir, prefix=prefix)


def _report(rows, scenario, summary, estimates=()) -> list:
    from recloop.experiments._ope import leaderboard

    return (["Estimators ranked by RMSE against the truth from the data (OBD: the click rate "
             "of the BTS log; multiclass: the exact value from the labels of each log's "
             "rows), the logs of every seed pooled (± its standard error over the logs; a "
             "rank is shared where a paired comparison over the same logs cannot separate "
             "two estimators).", ""] + leaderboard(summary, estimates)
            + overlap_table(rows))


# -- the scenario kind ----------------------------------------------------------------------------

def _check_kind(params, agents, world):
    """OBD: the dataset's folder with the campaign's two logs and the prior; Jester: its
    ratings file; multiclass and Jester: scikit-learn installed, well-formed targets."""
    import importlib.util
    from pathlib import Path

    if params.get("source") == "obd":
        data, campaign = params.get("data"), params.get("campaign") or "all"
        need = "the Open Bandit Dataset's folder, holding random/, bts/ and prior_bts.yaml"
        hint = "give your copy with --set evaluations.N.data=PATH, N this evaluation's number"
        if data is None:
            yield "data", f"expected {need}, got nothing ({hint})"
            return
        root = Path(data).expanduser()
        missing = [f for f in (f"random/{campaign}/{campaign}.csv",
                               f"bts/{campaign}/{campaign}.csv", "prior_bts.yaml")
                   if not (root / f).is_file()]
        if missing:
            yield "data", (f"expected {need}, got {data!r} (no file {root / missing[0]}; "
                           f"{hint})")
        return
    if params.get("source") == "jester":
        data = params.get("data")
        hint = "give your copy with --set evaluations.N.data=PATH, N this evaluation's number"
        need = "a Jester ratings file (userId,jokeId,rating)"
        if data is None:
            yield "data", f"expected {need}, got nothing ({hint})"
            return
        if not Path(data).expanduser().is_file():
            yield "data", f"expected {need}, got {data!r} (no such file; {hint})"
            return
    if importlib.util.find_spec("sklearn") is None:
        yield "source", (f"expected scikit-learn installed for the bundled set "
                         f"{params.get('source')!r} (pip install 'recloop[real]'), got none")
    for j, t in enumerate(params.get("targets") or ()):
        try:
            _check_target(t, f"targets[{j}]")
        except (TypeError, ValueError) as exc:
            yield f"targets[{j}]", str(exc)
            return


def _resources(params, world):
    """The log and its resample, the action distributions and reward models (OBD: rows
    guessed from the CSV's size, about 700 bytes a row with the affinity columns)."""
    import os

    from recloop._limits import ESTIMATE_BYTES, F8

    obd = params.get("source") == "obd"
    if obd:
        campaign = params.get("campaign") or "all"
        try:
            n = os.path.getsize(os.path.join(params.get("data") or "", "random", campaign,
                                             f"{campaign}.csv")) // 700 + 1
        except OSError:
            n = 10_000  # the sample's rows
        K, L, targets, d = 80, 3, 1, 30
    else:
        n, K, L, targets, d = 1_000, 10, 1, len(params.get("targets") or ()), 64
    estimators = len(params.get("estimators") or ()) + len(params.get("selectors") or ()) + 1
    out = {"the log, its resample and a twin": 3 * n * (d + 8) * F8,
           "targets x rows x actions x positions: action distributions and reward models": (
               4 * targets * n * K * L * F8),
           "n_logs x targets x estimators: the estimates of every log": (
               params.get("n_logs", 1) * targets * estimators * ESTIMATE_BYTES)}
    if obd:
        out["n_sim: the BTS simulation (batches of 2^20 draws)"] = (
            min(params.get("n_sim", 1), 1 << 20) * K * 2 * F8)
    return out


def _run_kind(cell):
    p = dict(cell.params)
    p["estimators"] = cell.estimators(p["estimators"], "static")
    p["selectors"] = cell.estimators(p.get("selectors") or [], "static")
    return ope_real(p.pop("source"), **p, rng=cell.seed_sequence, progress=cell.progress,
                    evaluation=cell.evaluation, on_error=cell.report_error,
                    per_log=cell.per_log)


KIND = EvaluationKind(
    name="ope_real",
    summary="Off-policy estimators on real data against a truth from the data: the Open "
            "Bandit Dataset (random log in, Bernoulli TS the target, truth the BTS log's own "
            "click rate with its Wilson interval), Jester's ratings as full information, or a "
            "bundled classification set in the multiclass-to-bandit protocol (truth exact "
            "from the labels); per target and estimator: value, bias, rmse, relative_error, "
            "coverage, overlap, nan_rate; per selector also its RMSE over the oracle's.",
    run=_run_kind,
    params=(
        Param("source", Str(choices=SOURCES), REQUIRED, "Where the truth comes from: "
              "`obd` (the Open Bandit Dataset at `data`), `jester` (the Jester ratings file "
              "at `data`: users who rated every joke of a set, full information), or a "
              "bundled scikit-learn set (`digits` is UCI optdigits' test part) in the "
              "multiclass protocol."),
        Param("data", Str(), None, "`obd`: the dataset's folder (random/, bts/, "
              "prior_bts.yaml), the 10,000-row sample or the full release; `jester`: the "
              "ratings file; a relative path is relative to the current directory "
              "(`--set evaluations.N.data=PATH`).", sweepable=False),
        Param("campaign", Str(choices=CAMPAIGNS), "all", "`obd` only: the campaign."),
        Param("estimators", EstimatorList("static"), list(DEFAULT_ESTIMATORS),
              "Estimators compared, as for `ope` (`select_by_twin` and `select_estimator` "
              "choose among candidates on each log).", sweepable=False),
        Param("selectors", EstimatorList("static", min_len=0), [], "Estimator selectors "
              "(`select_by_twin`, `select_by_cv`, `select_by_pasif`, `select_by_slope`, or "
              "tables with their params) that choose on every log among `estimators`: each "
              "is scored like an estimator and against the oracle (the estimator of least "
              "RMSE over the logs): `oracle_ratio`, `pick_within`, `warned`.",
              sweepable=False),
        Param("targets", ListOf(Table(), min_len=1), [dict(t) for t in DEFAULT_TARGETS],
              "Multiclass and Jester: target policies `{name, alpha, C}`: a logistic regression "
              "(inverse regularisation C) fitted on the training split, mixed with uniform "
              "(weight alpha on its prediction).", sweepable=False),
        Param("logging_alpha", Float(low=0.0, high=1.0, high_open=True), 0.2,
              "Multiclass and Jester: the logging policy's weight on its classifier."),
        Param("logging_C", Float(low=0.0, low_open=True), 1.0, "Multiclass and Jester: the "
              "logging classifier's inverse regularisation."),
        Param("eval_size", Float(low=0.0, high=1.0, low_open=True, high_open=True), 0.5,
              "Multiclass and Jester: share of each class that becomes the log."),
        Param("n_logs", Int(low=2, high=100_000), 200, "Logs (bootstrap resamples) per "
              "cell."),
        Param("n_sim", Int(low=1, high=10**8), 100_000, "`obd` only: simulations of the BTS "
              "policy's action distribution."),
    ),
    per_agent=False,
    agent_family="",
    needs_world=False,
    min_agents=0,
    check=_check_kind,
    figures=_figures_kind,
    resources=_resources,
    headline=("value",),
    unit="log",
    report=_report,
    function=ope_real,
)

KINDS = (KIND,)
