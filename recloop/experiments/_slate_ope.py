"""Slate off-policy estimators scored against the exact value of the target (issue 14).

"My new ranker, judged on logs of the old ranker's lists -- how far off is it?" One cell: a
world, a click model, a slate length ``k``; a logging and a target Plackett-Luce policy on
the same item scores (the world's true logits plus Gaussian noise: an imperfect ranker),
differing by their temperature; ``n_logs`` independent logs of ``n_rounds`` visits at one
tick. Every slate estimator scores the target on every log; the target's exact value
(:func:`simulator.slate_policy_value`, the exponential-race integral) is the truth; the rows
give each estimator's bias, RMSE, interval coverage and width over the logs.

Expected, by the estimators' assumptions (see :mod:`evaluators._slate_ope`): SIPS and RIPS
unbiased under every click model; IIPS and PI unbiased under independent and position-based
clicks, biased under the cascade and the DCM; Cascade-DR unbiased everywhere (as RIPS) with
less variance when its reward model is good; the variance ordering SIPS > RIPS > IIPS.
"""

from __future__ import annotations

import math
import re
import warnings
from typing import Sequence

import numpy as np

from recloop._results import Measurement
from recloop.experiments._common import child_rng, emit_per_log, seed_sequence
from recloop_base.validation import check_int

__all__ = ["KIND", "SLATE_OPE_PARAMS", "SLATE_ESTIMATORS", "slate_ope", "plot_slate_ope"]

EVALUATION = "slate_ope"
#: The estimators the experiment knows, in the order of its rows and figures.
SLATE_ESTIMATORS = ("slate_ips", "independent_ips", "reward_interaction_ips", "pseudoinverse",
                    "cascade_dr")
_CLICK_MODELS = ("independent", "pbm", "cascade", "dcm")
_Z = 1.959963984540054
_WHOLE_DIST = 1 << 24  # cells of cascade_dr's action distribution computed in one piece
_NOISE = 0x5C0E  # spawn key of the score noise under the world's seed

#: ``(name, default, one-line doc)`` of every keyword parameter of :func:`slate_ope`, for the
#: harness to declare the scenario kind from (``rng``, ``progress``, ``evaluation`` are the
#: harness's own).
SLATE_OPE_PARAMS = (
    ("click_model", "independent",
     "Click model of the world: 'independent', 'pbm', 'cascade' or 'dcm'."),
    ("k", 5, "Slate length (positions), 1 to 10 and at most the number of items."),
    ("n_rounds", 10_000, "Visits (slates) per logged dataset, all at `tick`."),
    ("n_logs", 50, "Independent logs per cell (each scored by every estimator)."),
    ("logging_temperature", 2.0,
     "Temperature of the logging Plackett-Luce policy (> 0), or \"uniform\" (inf): the "
     "uniform ranking policy, the only logging policy for which `pseudoinverse` is "
     "computed."),
    ("target_temperature", 0.5, "Temperature of the target Plackett-Luce policy (> 0)."),
    ("score_noise", 1.0,
     "Standard deviation of the Gaussian noise added to the world's true logits to make "
     "the policies' item scores (0: both rank by the truth)."),
    ("eta", 1.0, "PBM only: examination theta_j = 1 / (j + 1)^eta."),
    ("dcm_lambda", 0.5, "DCM only: probability of going on after a click (every position)."),
    ("tick", 0, "Tick of the visits and of the truth."),
    ("world_seed", 0, "Seed of the world and of the score noise: the same world, policies and "
     "truth in every cell of a sweep (the logs come from the cell's seed)."),
    ("estimators", list(SLATE_ESTIMATORS), "Slate estimators compared (the variant column)."),
    ("n_folds", 2, "Cross-fitting folds of cascade_dr's reward model (per-position item "
     "means of the recursive target)."),
)


def _temperature(name, value, allow_inf: bool) -> float:
    from recloop_base.validation import check_float

    if allow_inf and value == "uniform":  # TOML-friendly spelling of inf
        return math.inf
    return check_float(value, name, low=0.0, low_open=True, finite=not allow_inf)


def _world(config):
    import dataclasses

    import simulator

    if isinstance(config, str):
        config = simulator.preset(config)
    if isinstance(config, simulator.RecommendationConfig):
        return config.world
    if isinstance(config, simulator.WorldConfig):
        return config
    if dataclasses.is_dataclass(config):
        raise TypeError(f"`config` must be a recommendation world (WorldConfig, "
                        f"RecommendationConfig or a preset name such as 'viadeo_like'); got "
                        f"{type(config).__name__}.")
    raise TypeError(f"`config` must be a WorldConfig, a RecommendationConfig or a preset "
                    f"name; got {type(config).__name__}.")


def _check_estimators(estimators) -> tuple:
    if isinstance(estimators, str) or not isinstance(estimators, Sequence):
        raise TypeError("`estimators` must be a sequence of estimator names; got "
                        f"{type(estimators).__name__}.")
    if not estimators:
        raise ValueError("`estimators` must name at least one estimator; got none.")
    for j, name in enumerate(estimators):
        if name not in SLATE_ESTIMATORS:
            raise ValueError(f"`estimators[{j}]` must be one of "
                             f"{', '.join(map(repr, SLATE_ESTIMATORS))}; got {name!r}.")
    if len(set(estimators)) != len(estimators):
        raise ValueError(f"`estimators` must not repeat a name; got {list(estimators)}.")
    return tuple(n for n in SLATE_ESTIMATORS if n in estimators)


def _static(world, t0: int, t1: int) -> bool:
    """Whether ``p(u, i, t)`` is the same at every tick of ``[t0, t1)``: no taste drift, no
    CTR decay, no appeal shock and no item born or dying inside the span."""
    if world.drift_rate != 0 or world.ctr_halflife is not None:
        return False
    if any(sh.start < t1 and t0 < sh.start + sh.duration and not (
            sh.start <= t0 and t1 <= sh.start + sh.duration) for sh in world.shocks):
        return False
    birth, death = world.birth_array(), world.death_array()
    alive0 = (birth <= t0) & (t0 < death)
    alive1 = (birth <= t1 - 1) & (t1 - 1 < death)
    return bool(np.array_equal(alive0, alive1) and not np.any((birth > t0) & (birth < t1))
                and not np.any((death > t0) & (death < t1)))


def _policy_name(temperature: float) -> str:
    return "uniform" if math.isinf(temperature) else f"pl_T{temperature:g}"


def _summary(values, stderrs, lows, highs, truth, *, evaluation, agent, variant, params):
    """value, bias, rmse, relative_rmse, sd, coverage, width and nan_rate rows of one
    estimator over the logs."""
    from evaluators import wilson_estimate

    value = np.asarray(values, dtype=np.float64)
    lo, hi = np.asarray(lows, dtype=np.float64), np.asarray(highs, dtype=np.float64)
    n_logs = value.size
    ok = np.isfinite(value)
    n = int(ok.sum())
    kw = dict(evaluation=evaluation, agent=agent, variant=variant, params=params)
    nan_rate = wilson_estimate(n_logs - n, n_logs)
    rows = [Measurement(metric="nan_rate", estimate=nan_rate.value, stderr=nan_rate.stderr,
                        ci_low=nan_rate.ci_low, ci_high=nan_rate.ci_high, n=n_logs, **kw)]
    if n == 0:
        return rows + [Measurement(metric=m, estimate=math.nan, n=0, **kw)
                       for m in ("value", "bias", "rmse", "relative_rmse", "sd", "coverage",
                                 "width")]
    v, err = value[ok], value[ok] - truth
    sq = math.sqrt
    se_v = float(v.std(ddof=1) / sq(n)) if n > 1 else math.nan
    mse = float(np.mean(err ** 2))
    rmse = sq(mse)
    se_rmse = float(np.std(err ** 2, ddof=1)) / sq(n) / (2 * rmse) if n > 1 and rmse > 0 \
        else math.nan
    sd = float(v.std(ddof=1)) if n > 1 else math.nan
    se_sd = sd / sq(2 * (n - 1)) if n > 1 else math.nan
    rel = rmse / abs(truth) if truth != 0 else math.nan
    covers = (lo[ok] <= truth) & (truth <= hi[ok])
    cov = wilson_estimate(int(covers.sum()), n)
    width = (hi - lo)[ok]
    se_w = float(width.std(ddof=1) / sq(n)) if n > 1 else math.nan
    mean_v = float(v.mean())
    bias = float(err.mean())
    return rows + [
        Measurement(metric="value", estimate=mean_v, stderr=se_v, ci_low=mean_v - _Z * se_v,
                    ci_high=mean_v + _Z * se_v, truth=truth, n=n, **kw),
        Measurement(metric="bias", estimate=bias, stderr=se_v, ci_low=bias - _Z * se_v,
                    ci_high=bias + _Z * se_v, truth=0.0, n=n, **kw),
        # no truth on rmse/sd/width: they are already errors or spreads (the report would
        # otherwise show an "error of the error")
        Measurement(metric="rmse", estimate=rmse, stderr=se_rmse, n=n, **kw),
        Measurement(metric="relative_rmse", estimate=rel,
                    stderr=se_rmse / abs(truth) if truth != 0 else math.nan, n=n, **kw),
        Measurement(metric="sd", estimate=sd, stderr=se_sd, n=n, **kw),
        Measurement(metric="coverage", estimate=cov.value, stderr=cov.stderr,
                    ci_low=cov.ci_low, ci_high=cov.ci_high, n=n, **kw),
        Measurement(metric="width", estimate=float(width.mean()), stderr=se_w, n=n, **kw),
    ]


def slate_ope(config, *, click_model: str = "independent", k: int = 5, n_rounds: int = 10_000,
              n_logs: int = 50, logging_temperature: float = 2.0,
              target_temperature: float = 0.5, score_noise: float = 1.0, eta: float = 1.0,
              dcm_lambda: float = 0.5, tick: int = 0, world_seed: int = 0,
              estimators: Sequence[str] = SLATE_ESTIMATORS, n_folds: int = 2, rng=None,
              progress: bool = False, evaluation: str = EVALUATION,
              per_log=None) -> list[Measurement]:
    """One cell of the slate OPE experiment: every estimator against the exact truth.

    Parameters
    ----------
    config : WorldConfig, RecommendationConfig or preset name
        The world (of a ``RecommendationConfig`` only ``world`` is used: the slate settings
        and the world's seed are this function's parameters).
    click_model : {"independent", "pbm", "cascade", "dcm"}
    k : int
        Slate length, in [1, 10] and at most the items alive at ``tick``.
    n_rounds : int
        Visits per log, all at ``tick`` (``visits_per_tick = n_rounds``).
    n_logs : int
        Independent logs, >= 2.
    logging_temperature, target_temperature : float > 0
        Temperatures of the logging and target Plackett-Luce policies; ``inf`` or
        ``"uniform"`` (logging only) is the uniform ranking policy.
    score_noise : float >= 0
        The policies' scores are ``logit p(u, i, tick) + N(0, score_noise^2)`` (one draw per
        user and item and cell, shared by both policies).
    eta : float >= 0
        PBM examination decay (``theta_j = 1/(j+1)^eta``); ignored by the other models.
    dcm_lambda : float in [0, 1]
        DCM continuation probability after a click, at every position (the value is then
        exact); ignored by the other models.
    tick : int
        Tick of the visits and of the truth.
    world_seed : int >= 0
        Seed of the world (users, items) and of the score noise: every cell of a sweep that
        shares it has the same world, the same policies and -- for the same click model and
        ``k`` -- the same truth.
    estimators : sequence of names
        Among ``slate_ips``, ``independent_ips``, ``reward_interaction_ips``,
        ``pseudoinverse``, ``cascade_dr``. ``pseudoinverse`` needs the uniform logging
        policy: with a finite ``logging_temperature`` it is left out of the cell.
    n_folds : int
        Cross-fitting folds of ``cascade_dr``'s built-in reward model (``"mean"``).
    rng : None, int, SeedSequence or Generator
        Root of the logs' draws, keyed by identity: log ``i`` (key (2, i)), the folds of
        ``cascade_dr``'s reward model on log ``i`` (4, i: the log's own stream, see
        ``evaluators.fit_reward_model``).
    progress : bool
        A progress bar over the logs.
    evaluation : str
        The ``evaluation`` column.
    per_log : callable, optional
        Receives every estimator's estimate on every log (and the logs' on-policy mean
        reward) as a ``Measurement`` (metric ``value``, ``log`` = the log's index, its
        interval, ``truth`` the exact value): the per-log estimates
        :func:`recloop.summarize` turns into bias, RMSE and coverage over logs.

    Returns
    -------
    list of Measurement
        ``agent`` = the target policy's name (``pl_T{target_temperature}``), ``variant`` =
        the estimator, ``params`` = the cell's settings. Per estimator: ``value`` (mean
        estimate over the logs, ``truth`` = the exact value), ``bias`` (truth 0), ``rmse``,
        ``relative_rmse`` (RMSE / truth), ``sd`` (standard deviation of the estimates over
        the logs: the variance ordering), ``coverage`` of the 95% intervals (Wilson
        interval), ``width`` (mean interval width), ``nan_rate`` (logs without an estimate,
        e.g. no support). Beside them, agent = the logging policy, variant ``on_policy``,
        metric ``value``: the mean slate reward of the logs against the logging policy's
        exact value (a check of the simulation itself).

    Raises
    ------
    TypeError, ValueError
        A bad argument, named (unknown click model or estimator, ``k`` above the items,
        a temperature <= 0, ...).

    Notes
    -----
    The visits of a log are spread over the ticks from ``tick`` on
    (``visits_per_tick = ceil(n_rounds / (n_ticks - tick))``): the environment's click coin
    is common to every visit of one ``(user, item, tick)``, so visits crowded into one tick
    would repeat clicks and make the records dependent (intervals then cover less than
    95%: 0.45 measured for IIPS at 50,000 visits on one tick). This needs ``p(u, i, t)``
    constant over the span (no drift, decay, shocks or item births and deaths in it), in
    which case the value at ``tick`` is the value at every tick; otherwise every visit is
    at ``tick``, with a ``RuntimeWarning``.

    The truth is :func:`simulator.slate_policy_value` with ``method="exact"`` (the
    exponential-race integral, within 1e-13 of enumeration); the ``bias`` row's interval
    is the mean error's normal interval over the logs (the truth has no error). Logs of a
    cell share the world, the scores and the truth; they differ by their visits, slates
    and clicks.

    Examples
    --------
    >>> import simulator
    >>> world = simulator.preset("viadeo_like", n_users=100, n_items=20, campaigns=())
    >>> rows = slate_ope(world, click_model="cascade", k=3, n_rounds=200, n_logs=3,
    ...                  estimators=["reward_interaction_ips"], rng=0)
    >>> sorted({r.metric for r in rows if r.variant == "reward_interaction_ips"})
    ['bias', 'coverage', 'nan_rate', 'relative_rmse', 'rmse', 'sd', 'value', 'width']
    """
    import agents
    import evaluators
    import simulator
    from recloop_base.validation import check_choice, check_float

    world = _world(config)
    world_seed = check_int(world_seed, "world_seed", low=0)
    click_model = check_choice(click_model, "click_model", _CLICK_MODELS)
    k = check_int(k, "k", low=1, high=10)
    n_rounds = check_int(n_rounds, "n_rounds", low=1)
    n_logs = check_int(n_logs, "n_logs", low=2)
    n_folds = check_int(n_folds, "n_folds", low=1)
    log_t = _temperature("logging_temperature", logging_temperature, True)
    tgt_t = _temperature("target_temperature", target_temperature, False)
    score_noise = check_float(score_noise, "score_noise", low=0.0)
    eta = check_float(eta, "eta", low=0.0)
    dcm_lambda = check_float(dcm_lambda, "dcm_lambda", low=0.0, high=1.0)
    tick = check_int(tick, "tick", low=0, high=world.n_ticks - 1)
    names = _check_estimators(estimators)
    if not isinstance(evaluation, str) or not evaluation:
        raise TypeError(f"`evaluation` must be a non-empty str; got {evaluation!r}.")
    alive = int(((world.birth_array() <= tick) & (tick < world.death_array())).sum())
    if k > alive:
        raise ValueError(f"`k` must be <= the {alive} items alive at tick {tick}; got {k}.")
    uniform = math.isinf(log_t)
    if "pseudoinverse" in names and not uniform:
        names = tuple(n for n in names if n != "pseudoinverse")

    root = seed_sequence(rng)
    model_kw = {"pbm": {"eta": eta}, "dcm": {"dcm_lambda": dcm_lambda}}.get(click_model, {})
    span = world.n_ticks - tick
    per_tick = -(-n_rounds // span)
    if not _static(world, tick, tick + -(-n_rounds // per_tick)):
        per_tick = n_rounds
        warnings.warn(f"{evaluation}: p(u, i, t) changes over the ticks after {tick}, so every "
                      f"visit of a log is at tick {tick}, where repeated (user, item) pairs "
                      "share the environment's click coin: the records are not independent "
                      "and the intervals may cover less than their level.", RuntimeWarning,
                      stacklevel=2)
    cfg = simulator.RecommendationConfig(world=world, world_seed=world_seed, k=k,
                                         visits_per_tick=per_tick, start_tick=tick,
                                         click_model=click_model, **model_kw)
    sim_world = simulator.World(world, seed=world_seed)
    users = np.arange(world.n_users)
    p = sim_world.true_ctr(users[:, None], np.arange(world.n_items)[None, :], tick)
    q = np.clip(p, 1e-12, 1 - 1e-12)
    scores = np.log(q) - np.log1p(-q)
    if score_noise > 0:  # part of the setting, not of a log: keyed by the world's seed
        noise = np.random.default_rng(np.random.SeedSequence(world_seed, spawn_key=(_NOISE,)))
        scores = scores + noise.normal(0.0, score_noise, scores.shape)
    logging = agents.PlackettLuce(scores, k=k, temperature=log_t)
    target = agents.PlackettLuce(scores, k=k, temperature=tgt_t)
    truth = simulator.slate_policy_value(cfg, target, method="exact")
    truth_log = simulator.slate_policy_value(cfg, logging, method="exact")

    est = {n: [] for n in names}
    on_policy = []
    from recloop_base.progress import bar

    for i in bar(range(n_logs), desc="logs", show=progress):
        log, _ = simulator.collect_slate_log(cfg, n_rounds, policy=logging,
                                             rng=child_rng(root, 2, i))
        on_policy.append(float(log.slate_reward.mean()))
        obs = log.observations()
        cascade = target.prefix_probabilities(obs, log.action)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", evaluators.NoSupportWarning)
            for name in names:
                if name == "slate_ips":
                    e = evaluators.slate_ips(log, cascade[:, -1])
                elif name == "independent_ips":
                    e = evaluators.independent_ips(
                        log, target.item_position_probabilities(obs, log.action))
                elif name == "reward_interaction_ips":
                    e = evaluators.reward_interaction_ips(log, cascade)
                elif name == "pseudoinverse":
                    e = evaluators.pseudoinverse(log, target.item_marginals(obs, log.action))
                else:
                    # the (n, k, n_items) action distribution whole when it is small, else
                    # the policy itself, evaluated by cascade_dr chunk by chunk
                    dist = (target.conditional_probabilities(obs, log.action)
                            if n_rounds * k * world.n_items <= _WHOLE_DIST else target)
                    # the Q model's folds and per-item sums: once per log, its own stream
                    model = evaluators.fit_reward_model(log, "mean", n_folds=n_folds,
                                                        rng=child_rng(root, 4, i))
                    e = evaluators.cascade_dr(log, cascade, dist, reward_model=model)
                est[name].append(e)

    params = {"click_model": click_model, "k": k, "n_rounds": n_rounds, "n_logs": n_logs,
              "logging_temperature": log_t, "target_temperature": tgt_t,
              "score_noise": score_noise, "tick": tick, "world_seed": world_seed}
    if click_model == "pbm":
        params["eta"] = eta
    if click_model == "dcm":
        params["dcm_lambda"] = dcm_lambda
    agent = _policy_name(tgt_t)
    rows = []
    kw = dict(evaluation=evaluation, params=params)
    for name in names:
        es = est[name]
        emit_per_log(per_log, es, truth.value, agent=agent, variant=name, **kw)
        rows += _summary([e.value for e in es], [e.stderr for e in es],
                         [e.ci_low for e in es], [e.ci_high for e in es], truth.value,
                         evaluation=evaluation, agent=agent, variant=name, params=params)
    emit_per_log(per_log, on_policy, truth_log.value, agent=_policy_name(log_t),
                 variant="on_policy", **kw)
    op = np.asarray(on_policy)
    se = float(op.std(ddof=1) / math.sqrt(op.size))
    rows.append(Measurement(evaluation=evaluation, agent=_policy_name(log_t), metric="value",
                            estimate=float(op.mean()), stderr=se,
                            ci_low=float(op.mean()) - _Z * se,
                            ci_high=float(op.mean()) + _Z * se, truth=truth_log.value,
                            n=op.size, variant="on_policy", params=params))
    return rows


def _plot_bias(rows, out, prefix: str) -> list:
    """The figure of record: each estimator's bias as a share of the true value at the
    largest ``n_rounds``, a panel per click model, a dot per slate length ``k``, zero (the
    truth) dashed; a figure per setting of the other swept parameters."""
    from recloop import _plots

    values = [r for r in rows if r.metric == "value" and r.truth
              and math.isfinite(r.estimate)]
    paths = []
    groups = _plots.groups(values, ignore=("click_model", "k", "n_rounds"))
    for j, (setting, sel) in enumerate(groups[:8]):
        models = [m for m in _CLICK_MODELS if any(r.params.get("click_model") == m
                                                  for r in sel)]
        ks = sorted({r.params.get("k") for r in sel})[-4:]
        names = [e for e in SLATE_ESTIMATORS if any(r.variant == e for r in sel)]
        ncols = 2 if len(models) in (2, 4) else min(3, len(models))
        nrows = math.ceil(len(models) / ncols)
        fig, axes = _plots.figure(nrows, ncols, width=_plots.RECORD_WIDTH,
                                  height=(0.3 * len(names) + 0.9) * nrows + 1.4,
                                  sharex=True)
        sizes = set()
        for ax, model in zip(axes.flat, models, strict=False):
            mine = [r for r in sel if r.params.get("click_model") == model]
            series = []
            for c, k in enumerate(ks):
                at = [r for r in mine if r.params.get("k") == k]
                n = max((r.params.get("n_rounds") for r in at), default=None)
                sizes.add(n)
                got = {r.variant: r for r in at if r.params.get("n_rounds") == n}
                rel = [100 * (got[e].estimate - got[e].truth) / abs(got[e].truth)
                       if e in got else math.nan for e in names]
                half = [100 * _Z * got[e].stderr / abs(got[e].truth) if e in got
                        else math.nan for e in names]
                series.append(_plots.Dots(f"k = {k}", rel,
                                          [a - h for a, h in zip(rel, half, strict=True)],
                                          [a + h for a, h in zip(rel, half, strict=True)],
                                          j=c))
            _plots.dot_plot(ax, names, series, truths=[0.0] * len(names),
                            truth_label="no bias: the truth")
            ax.set_title(model, fontsize=8)
            ax.tick_params(labelsize=7)
        for ax in list(axes.flat)[len(models):]:
            ax.set_visible(False)
        for ax in axes[-1]:
            ax.set_xlabel("bias, % of the true value", fontsize=8)
        for ax in axes[:, 1:].flat:
            ax.tick_params(labelleft=False)  # the estimators once, on the left
        _plots.legend(fig)
        n_logs = sorted({r.n for r in sel if r.n})
        where = _plots.setting_text(setting)
        size = ", ".join(_plots.number(n) for n in sorted(x for x in sizes if x))
        _plots.caption(fig, "Slate estimators: bias under each click model"
                       + (f" ({where})" if where else ""),
                       f"At n_rounds = {size}, the largest run: the mean estimate's bias "
                       f"over {n_logs[-1] if n_logs else '?'} logs as a share of the exact "
                       "value, 95% bars (±1.96 standard errors over the logs); dashed: no "
                       "bias.")
        name = f"{prefix}__bias" + ("" if len(groups) == 1 else f"_{j}")
        paths.append(_plots.save(fig, out / f"{name}.png", dpi=100))
    return paths


def plot_slate_ope(rows, out_dir, *, prefix: str = EVALUATION) -> list:
    """The figure of record, ``{prefix}__bias.png``: each slate estimator's bias as a share
    of the true value at the largest log size, a panel per click model, a dot per slate
    length ``k``. Then a figure per click model: bias (95% bars), RMSE and coverage against
    ``n_rounds``.

    Parameters
    ----------
    rows : iterable of Measurement
        Rows of :func:`slate_ope` (any number of cells).
    out_dir : str or Path
        Created if missing.
    prefix : str
        File name prefix: ``{prefix}_{click_model}.png``, with ``_T{logging}-{target}``
        appended when the rows hold several temperature pairs.

    Returns
    -------
    list of Path
        One panel column per slate length ``k``; rows: bias, RMSE (log scale), coverage;
        one legend for the grid; a dot plot per estimator when a single ``n_rounds`` was
        run.
    """
    from pathlib import Path

    from recloop import _plots

    rows = [r for r in rows if r.variant in SLATE_ESTIMATORS]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = _plot_bias(rows, out, prefix)
    for setting, sel in _plots.groups(rows, "n_rounds", ignore=("k",)):
        model = sel[0].params.get("click_model")
        lt = sel[0].params.get("logging_temperature")
        tt = sel[0].params.get("target_temperature")
        ks = sorted({r.params.get("k") for r in sel})
        single = len({r.params.get("n_rounds") for r in sel}) == 1
        names = [e for e in SLATE_ESTIMATORS if any(r.variant == e for r in sel)]
        fig, axes = _plots.figure(3, len(ks), width=3.4 * len(ks) + 0.9,
                                  height=(3 * (0.3 * len(names) + 1.0) if single
                                          else 7.0) + 1.1,
                                  sharex=not single)
        for c, k in enumerate(ks):
            for r_idx, (metric, label) in enumerate((
                    ("bias", "bias (95% interval)"), ("rmse", "RMSE"),
                    ("coverage", "coverage of 95% intervals"))):
                ax = axes[r_idx, c]
                series = []
                for e in names:
                    pts = sorted((r for r in sel if r.params.get("k") == k
                                  and r.variant == e and r.metric == metric),
                                 key=lambda r: r.params.get("n_rounds"))
                    series.append(_plots.Series(
                        e, [r.params.get("n_rounds") for r in pts],
                        [r.estimate for r in pts],
                        [_Z * r.stderr for r in pts] if metric == "bias" else None,
                        j=SLATE_ESTIMATORS.index(e)))
                if _plots.is_constant([y for x in series for y in x.y]):
                    _plots.constant_text(ax, f"{label}: {series[0].y[0]:g} for every "
                                         "estimator and n_rounds")
                    continue
                mode = _plots.series_plot(ax, series,
                                          x_label="n_rounds (slates per log)",
                                          y_label=label, log_y=metric == "rmse",
                                          dot_label="estimate")
                ref = (ax.axvline if mode == "dots" else ax.axhline)
                if metric == "bias":
                    ref(0.0, color="grey", lw=0.8)
                if metric == "coverage":
                    ref(0.95, color="grey", lw=0.8, ls="--", gid=_plots.REFERENCE,
                        label="nominal 0.95")
                    (ax.set_xlim if mode == "dots" else ax.set_ylim)(-0.02, 1.02)
                if mode == "lines" and r_idx < 2:
                    ax.set_xlabel("")
                if r_idx == 0:
                    n = sel[0].params.get("n_rounds")
                    ax.set_title(f"{model}, k = {k}" + (
                        f", n_rounds = {_plots.number(n)}" if single else ""), fontsize=9)
        _plots.legend(fig)
        n_logs = sorted({r.n for r in sel if r.metric == "rmse" and r.n})
        rest = {k: v for k, v in setting.items() if k != "click_model"}
        tag = re.sub(r"[^A-Za-z0-9_.-]+", "_", _plots.setting_text(rest)).strip("_")
        _plots.caption(fig, f"Slate OPE under the {model} click model: logging "
                       f"{_policy_name(lt)}, target {_policy_name(tt)}"
                       + (f" ({_plots.setting_text(rest)})" if rest else ""),
                       "Over " + (f"{n_logs[-1]:,}" if n_logs else "?") + " logs per "
                       "point; bias bars: 95% intervals (±1.96 standard errors over the "
                       "logs).")
        paths.append(_plots.save(fig, out / f"{prefix}_{model}{'_' + tag if tag else ''}.png",
                                 dpi=100))
    return paths


# -- the scenario kind ------------------------------------------------------------------------

def _check_kind(params, agents, world):
    """Cross-key rules: a recommendation world; ``k`` at most the items alive at ``tick``;
    ``tick`` inside the world."""
    from recloop._worlds import world_config

    if not world:
        return
    config = world_config(world)
    if not hasattr(config, "birth_array"):
        yield "kind", (f"expected a [world] with a recommendation preset (users, items) for "
                       f"slate_ope, got preset {world['preset']!r}")
        return
    tick = params["tick"]
    if tick >= config.n_ticks:
        yield "tick", f"expected a tick < n_ticks = {config.n_ticks} of the world, got {tick}"
        return
    alive = int(((config.birth_array() <= tick) & (tick < config.death_array())).sum())
    if params["k"] > alive:
        yield "k", (f"expected k <= the {alive} items alive at tick {tick} of the world, got "
                    f"{params['k']}")


def _resources(params, world):
    """Per log: the slates and clicks (n_rounds x k), the logging and target policies'
    position marginals (n_rounds x k x items, float64) that IIPS and RIPS read, and
    Cascade-DR's per-record target distribution of one position chunk; the world."""
    from recloop._limits import ESTIMATE_BYTES, world_bytes, world_config_or_none

    c = world_config_or_none(world)
    items = getattr(c, "n_items", 1000)
    n, k = params["n_rounds"], params["k"]
    out = dict(world_bytes(world))
    out["n_rounds x k: slates, clicks, propensities"] = n * k * 8 * 6
    out["n_rounds x k x world.n_items: position marginals (logging, target)"] = (
        2 * n * k * items * 8)
    out["n_logs x estimators: the estimates of every log"] = (
        params.get("n_logs", 1) * (len(params.get("estimators") or ()) + 2) * ESTIMATE_BYTES)
    return out


def _run_kind(cell):
    from recloop._worlds import world_config

    return slate_ope(world_config(cell.world), **cell.params, rng=cell.seed_sequence,
                     progress=cell.progress, evaluation=cell.evaluation,
                     per_log=cell.per_log)


def _figures_kind(measurements, out_dir, world):
    prefix = measurements[0].evaluation if measurements else EVALUATION
    return plot_slate_ope(measurements, out_dir, prefix=prefix)


def _kind():
    from recloop._registry import EvaluationKind
    from recloop._schema import Float, Int, ListOf, OneOf, Param, Str

    doc = {name: text for name, _, text in SLATE_OPE_PARAMS}
    default = {name: value for name, value, _ in SLATE_OPE_PARAMS}
    types = {
        "click_model": Str(choices=_CLICK_MODELS),
        "k": Int(low=1, high=10),
        "n_rounds": Int(low=1, high=10**7),
        "n_logs": Int(low=2, high=100_000),
        "logging_temperature": OneOf((Float(low=0.0, low_open=True),
                                      Str(choices=("uniform",)))),
        "target_temperature": Float(low=0.0, low_open=True),
        "score_noise": Float(low=0.0),
        "eta": Float(low=0.0),
        "dcm_lambda": Float(low=0.0, high=1.0),
        "tick": Int(low=0),
        "world_seed": Int(low=0, high=2**63 - 1),
        "estimators": ListOf(Str(choices=SLATE_ESTIMATORS), unique=True),
        "n_folds": Int(low=2, high=100),
    }
    return EvaluationKind(
        name="slate_ope",
        summary="Slate off-policy estimators -- standard IPS, independent IPS (Li et al. "
                "2018), reward-interaction IPS (McInerney et al. 2020), the pseudo-inverse "
                "(Swaminathan et al. 2017) and Cascade-DR (Kiyohara et al. 2022) -- on logs "
                "of a Plackett-Luce ranker, against the exact value of another one, under a "
                "click model (independent, position-based, cascade, dependent): per "
                "estimator value, bias, rmse, relative_rmse, sd, coverage, width, nan_rate.",
        run=_run_kind,
        params=tuple(Param(name, types[name], default[name], doc[name],
                           sweepable=name != "estimators") for name in types),
        per_agent=False,
        agent_family="",
        needs_world=True,
        min_agents=0,
        check=_check_kind,
        figures=_figures_kind,
        resources=_resources,
        headline=("value",),
        unit="log",
        function=slate_ope,
    )


KIND = _kind()

#: The kinds this module declares (the registry reads them: recloop._registry.BUILTIN_MODULES).
KINDS = (KIND,)
