"""Campaign bias of offline LOO evaluation, measured against the counterfactual twin.

de Myttenaere, Le Grand, Golden, Rossi (2014/2015): recommendation campaigns push items into
profiles, the item marginal ``P_t(i)`` drifts and the offline LOO score ``L_t(g)`` drifts with
it -- up for a recommender that agrees with the campaigns (g1), down for one that disagrees
(g2). Item weights fitted so that ``P_t(i|w)`` matches the marginal at the window's first tick
remove that bias exactly for a constant recommender; for CF a structural part remains.

The simulator gives what the paper could not have: the same world without its campaigns (same
seed, same random numbers). The LOO score on that twin is the unbiased reference, so every
score here is reported beside it (``truth``), and the bias of a CF recommender is split into
what weighting removes (item-selection bias) and what remains (structural bias).
"""

from __future__ import annotations

import copy
import math
import numbers
from pathlib import Path
from typing import Mapping

import numpy as np

from evaluators import fit_item_weights, loo_quality
from recloop._registry import EvaluationKind
from recloop._results import Measurement
from recloop._schema import REQUIRED, Int, ListOf, OneOf, Param, Str
from recloop.experiments._common import child_seed, name_key, seed_sequence

__all__ = ["KIND", "RECOMMENDER_KINDS", "campaign_bias", "plot_campaign_bias"]

#: Recommender kinds a spec string may name; resolved with the world's data in the window.
RECOMMENDER_KINDS = ("constant_agreeing", "constant_disagreeing", "user_cosine_cf", "naive_cf",
                     "popularity")

EVALUATION = "offline_bias"
_N_MARGINAL_ITEMS = 6  # most pushed items whose P_t(i) is reported


def _variant(p) -> str:
    return "weighted_pall" if p is None else f"weighted_p{p}"


def _check_options(recommenders, ticks, p_values, k, n_samples):
    if not isinstance(recommenders, Mapping) or not recommenders:
        raise TypeError("`recommenders` must be a non-empty mapping name -> recommender or kind; "
                        f"got {type(recommenders).__name__}.")
    for name, spec in recommenders.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"`recommenders` keys must be non-empty strings; got {name!r}.")
        if isinstance(spec, str):
            if spec not in RECOMMENDER_KINDS:
                raise ValueError(f"`recommenders[{name!r}]` must be one of {RECOMMENDER_KINDS} "
                                 f"or a recommender instance; got {spec!r}.")
        elif not (callable(getattr(spec, "fit", None))
                  and callable(getattr(spec, "recommend", None))):
            raise TypeError(f"`recommenders[{name!r}]` must be a kind name or an object with "
                            f"`fit` and `recommend`; got {type(spec).__name__}.")
    try:
        ticks = [int(t) for t in ticks]
    except (TypeError, ValueError):
        raise TypeError(f"`ticks` must be a sequence of integers; got {ticks!r}.") from None
    if not ticks:
        raise ValueError("`ticks` must hold at least one tick; got none.")
    ticks = sorted(set(ticks))
    ps = []
    for p in p_values:
        if p is not None and (isinstance(p, bool) or not isinstance(p, numbers.Integral)
                              or p < 0):
            raise ValueError(f"`p_values` must hold integers >= 0 or None (all items); got {p!r}.")
        if p not in ps:
            ps.append(None if p is None else int(p))
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise ValueError(f"`k` must be an integer >= 1; got {k!r}.")
    if n_samples is not None and (isinstance(n_samples, bool)
                                  or not isinstance(n_samples, numbers.Integral)
                                  or n_samples < 1):
        raise ValueError(f"`n_samples` must be an integer >= 1 or None; got {n_samples!r}.")
    return ticks, ps


def _resolve(name, spec, *, push, marginal_ref, k):
    """A fresh recommender for ``spec`` (a kind resolved with the world's data, or a copy)."""
    import agents  # harness side: recloop may import agents

    if not isinstance(spec, str):
        return copy.deepcopy(spec)  # fitting must not touch the caller's object
    try:
        if spec == "constant_agreeing":
            return agents.Constant.agreeing(push, k)
        if spec == "constant_disagreeing":
            return agents.Constant.disagreeing(marginal_ref, push, k)
    except ValueError as exc:
        raise ValueError(f"`recommenders[{name!r}]` = {spec!r} cannot be built from this "
                         f"world's campaigns in the window: {exc}") from None
    if spec == "user_cosine_cf":
        return agents.UserCosineCF()
    if spec == "naive_cf":
        return agents.NaiveCF()
    return agents.Popularity()


def campaign_bias(config, *, recommenders: Mapping, ticks, p_values=(0, 5, 20, None),
                  k: int = 5, n_samples: int | None = 20000, rng=None,
                  progress: bool = False, evaluation: str = EVALUATION) -> list[Measurement]:
    """LOO scores over a window, unweighted, reweighted and on the counterfactual twin.

    Parameters
    ----------
    config : simulator.WorldConfig
        The world (with its campaigns), e.g. ``simulator.preset("viadeo_like")``.
    recommenders : mapping str -> recommender or kind
        Names (used as the ``agent`` column) to recommender instances (copied, then fitted at
        every tick) or kinds in :data:`RECOMMENDER_KINDS`: ``constant_agreeing`` (g1: the
        ``k`` items most pushed in the window), ``constant_disagreeing`` (g2: the ``k`` most
        frequent never-pushed items at the first tick), ``user_cosine_cf``, ``naive_cf``,
        ``popularity``.
    ticks : sequence of int
        Evaluation ticks; the smallest is the reference tick ``t0`` of the weights and the
        window is ``[min(ticks), max(ticks)]``.
    p_values : sequence of (int or None)
        Numbers of reweighted items (``None``: all items).
    k : int
        Length of the recommended lists (metric ``loo_hit@{k}``).
    n_samples : int or None
        Draws of the stochastic evaluation (metric ``loo_hit@{k}_sampled``); ``None`` skips it.
    rng : None, int, SeedSequence or Generator
        Root of the world's seed and of the sampling streams (keyed by recommender name, tick
        and variant).
    progress : bool
        Show a tqdm bar over ticks.
    evaluation : str
        The ``evaluation`` column.

    Returns
    -------
    list of Measurement
        Per (recommender, tick) and variant in ``unweighted``, ``weighted_p{p}``
        (``weighted_pall`` for all items), ``twin``:

        * ``loo_hit@{k}``: the exhaustive (exact) score, ``stderr`` 0;
        * ``loo_hit@{k}_sampled``: the paper's stochastic score (u from P(u), i from P(i|u,w))
          with its 95% Wilson interval.

        ``truth`` is the exhaustive score on the twin at the same tick (unweighted), so
        ``error`` is the bias against ground truth. When ``None`` is in ``p_values`` each
        recommender also gets, with variant ``bias``, ``loo_hit@{k}_selection_bias``
        (unweighted - weighted_pall: what weighting removes) and
        ``loo_hit@{k}_structural_bias`` (weighted_pall - twin: what remains).
        Diagnostics: agent ``item_weights``, metric ``kl`` (``D`` before -- variant
        ``unweighted`` -- and after fitting, ``n`` = optimiser iterations); agent ``world``,
        metric ``item_marginal``, variant ``item{i}`` for the most pushed items: ``P_t(i)``
        beside the twin's as ``truth``.

    Notes
    -----
    The sampled score reuses the exhaustive per-edge qualities (``evaluators.loo_quality``):
    the recommendations do not depend on the weights, and looking a drawn edge up gives
    exactly what calling the recommender on it would. Weights are fitted on the world's
    profiles with the profiles at ``t0`` as reference; scores on the twin are unweighted.
    """
    import simulator  # harness side: recloop may import simulator

    ticks, ps = _check_options(recommenders, ticks, p_values, k, n_samples)
    root = seed_sequence(rng)
    world = simulator.World(config, child_seed(root, 0))
    twin = world.without_campaigns()
    t0, t1 = ticks[0], ticks[-1]
    uw = world.user_weights if config.user_weights is not None else None
    push = world.push_counts(t0, t1)
    marginal_ref = world.item_marginal(t0)
    recs = {name: _resolve(name, spec, push=push, marginal_ref=marginal_ref, k=k)
            for name, spec in recommenders.items()}
    pushed = np.flatnonzero(push > 0)
    top_pushed = pushed[np.lexsort((pushed, -push[pushed]))][:_N_MARGINAL_ITEMS]
    reference = world.profiles(t0)
    metric = f"loo_hit@{k}"
    variant_names = ["unweighted"] + [_variant(p) for p in ps] + ["twin"]

    rows: list[Measurement] = []
    from recloop_base.progress import bar

    for t in bar(ticks, desc="ticks", show=progress, unit="tick"):
        current, twin_profiles = world.profiles(t), twin.profiles(t)
        fits = {p: fit_item_weights(reference, current, p=p, user_weights=uw) for p in ps}
        kl_before = next(iter(fits.values())).kl_before if fits else math.nan
        rows.append(Measurement(evaluation=evaluation, agent="item_weights", metric="kl",
                                estimate=kl_before, tick=t, variant="unweighted", n=0))
        for p, fit in fits.items():
            rows.append(Measurement(evaluation=evaluation, agent="item_weights", metric="kl",
                                    estimate=fit.kl_after, tick=t, variant=_variant(p),
                                    n=fit.n_iter))
        m_world = world.item_marginal(t)
        m_twin = twin.item_marginal(t)
        for i in top_pushed:
            rows.append(Measurement(evaluation=evaluation, agent="world", metric="item_marginal",
                                    estimate=m_world[i], truth=m_twin[i], tick=t,
                                    variant=f"item{i}", n=int(push[i])))

        for name, rec in recs.items():
            lq = loo_quality(current, rec, k=k)
            lq_twin = loo_quality(twin_profiles, rec, k=k)
            truth = lq_twin.score(user_weights=uw).value
            setups = ([("unweighted", lq, None)]
                      + [(_variant(p), lq, fits[p].weights) for p in ps]
                      + [("twin", lq_twin, None)])
            exact = {}
            for variant, table, w in setups:
                est = table.score(user_weights=uw, item_weights=w)
                exact[variant] = est.value
                rows.append(Measurement.from_estimate(est, evaluation=evaluation, agent=name,
                                                      metric=metric, truth=truth, tick=t,
                                                      variant=variant))
                if n_samples is not None:
                    stream = child_seed(root, 1, name_key(name), t, variant_names.index(variant))
                    est = table.score(n_samples=n_samples, user_weights=uw, item_weights=w,
                                      rng=np.random.default_rng(stream))
                    rows.append(Measurement.from_estimate(
                        est, evaluation=evaluation, agent=name, metric=f"{metric}_sampled",
                        truth=truth, tick=t, variant=variant))
            if None in ps:
                for part, value in (
                        ("selection_bias", exact["unweighted"] - exact["weighted_pall"]),
                        ("structural_bias", exact["weighted_pall"] - exact["twin"])):
                    rows.append(Measurement(evaluation=evaluation, agent=name,
                                            metric=f"{metric}_{part}", estimate=value,
                                            stderr=0.0, ci_low=value, ci_high=value, tick=t,
                                            variant="bias", n=lq.quality.size))
    return rows


#: Recommenders of the figure of record at most (one panel each).
_MAX_PANELS = 6


def _plot_scores(rows, path: Path, agents: list, metric: str, marks) -> Path:
    """The figure of record: one panel per recommender, each variant's exact LOO score
    against the tick beside the twin's (the truth), the campaigns marked; identical
    variants merged into one line."""
    from recloop import _plots

    shown = agents[:_MAX_PANELS]
    ncols = 2 if len(shown) == 4 else min(3, len(shown))
    nrows = math.ceil(len(shown) / ncols)
    n_ticks = len({r.tick for r in rows if r.metric == metric})
    many = n_ticks > 1
    fig, axes = _plots.figure(nrows, ncols, width=_plots.RECORD_WIDTH,
                              height=(2.1 if many else 1.9) * nrows + 1.3)
    # one style per variant across the panels; variants equal everywhere share a line
    variants = [v for v in dict.fromkeys(r.variant for r in rows if r.metric == metric
                                         and r.agent in shown) if v != "twin"]
    curve = {v: tuple((r.agent, r.tick, r.estimate) for r in sorted(
        (r for r in rows if r.metric == metric and r.variant == v and r.agent in shown),
        key=lambda r: (r.agent, r.tick))) for v in variants}
    merged: dict[tuple, list[str]] = {}
    for v in variants:
        merged.setdefault(curve[v], []).append(v)
    lines = [(names[0], " = ".join(names)) for names in merged.values()]
    for ax, agent in zip(axes.flat, shown, strict=False):
        mine = [r for r in rows if r.agent == agent and r.metric == metric]
        series = []
        for j, (v, label) in enumerate(lines):
            pts = sorted((r for r in mine if r.variant == v), key=lambda r: r.tick)
            series.append(_plots.Series(label, [r.tick for r in pts],
                                        [r.estimate for r in pts],
                                        truth=[r.truth for r in pts], j=j))
        _plots.series_plot(ax, series, x_label="tick" if many else "", y_label=metric,
                           log_x=False, truth_label="twin without campaigns: the truth",
                           dot_label="exact score")
        for line in ax.get_lines():  # small panels: thinner lines, smaller marks
            line.set_markersize(line.get_markersize() * (0.55 if n_ticks <= 8 else 0.3))
            line.set_linewidth(line.get_linewidth() * 0.7)
        if many:
            marks(ax)
        last = max((r for r in mine if lines and r.variant == lines[0][0]),
                   key=lambda r: r.tick, default=None)
        head = agent
        if last is not None and last.truth:
            head += (f"\n{lines[0][0]} {(last.estimate - last.truth) / abs(last.truth):+.0%} "
                     f"at tick {last.tick}")
        ax.set_title(head, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.xaxis.label.set_size(8)
        ax.yaxis.label.set_size(8)
        if ax.get_subplotspec().colspan.start:
            ax.set_ylabel("")
    for ax in list(axes.flat)[len(shown):]:
        ax.set_visible(False)
    _plots.legend(fig)
    more = (f" The first {len(shown)} of {len(agents)} recommenders." if len(agents)
            > len(shown) else "")
    _plots.caption(fig, f"Offline LOO score ({metric}) against the twin without campaigns",
                   "Lines: each variant's exact (exhaustive) score; black dashed: the twin's, "
                   "the truth; shaded: the campaigns." + more)
    return _plots.save(fig, path, dpi=100)


def plot_campaign_bias(rows, out_dir, *, campaign_ticks=(), metric: str | None = None,
                       prefix: str = "campaign_bias", item_ids=None,
                       campaign_windows=()) -> list[Path]:
    """Figures like the paper's, from :func:`campaign_bias` rows; returns the PNG paths.

    First the figure of record, ``{prefix}__scores.png``: every recommender of the
    evaluation in a panel of its own, the exhaustive LOO score of each variant against the
    tick beside the same score on the twin without campaigns (the truth, black and
    dashed), the campaigns shaded; variants with the same score at every tick (``weighted_p0``
    and ``unweighted``: no item weighted) are one line with both names. Then one figure per
    recommender: the exhaustive score over time for each variant with the 95% intervals of
    the sampled scores, the twin as the truth (a dot plot per variant at a single tick).
    Last, one figure of ``P_t(i)`` of the most pushed items beside the twin's.

    Parameters
    ----------
    rows : iterable of Measurement
    out_dir : str or Path
        Created if missing.
    campaign_ticks : sequence of int
        Start ticks of the campaigns (e.g. ``[c.start for c in config.campaigns]``), drawn
        as dotted lines when their windows are not given.
    campaign_windows : sequence of (int, int)
        ``(start, end)`` ticks of the campaigns (``[(c.start, c.start + c.duration) for c
        in config.campaigns]``), shaded.
    metric : str or None
        The score metric (default: the ``loo_hit@*`` metric found in ``rows``).
    prefix : str
        File name prefix.
    item_ids : sequence or None
        The items' own ids (``item_ids[i]`` for item ``i``: a world fitted to a log names
        its items as the log does); default: the world's indices.
    """
    from recloop import _plots

    rows = list(rows)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if metric is None:
        found = sorted({r.metric for r in rows if r.metric.startswith("loo_hit@")
                        and r.metric.count("_") == 1})
        metric = found[0] if found else "loo_hit@5"
    paths = []
    agents = [a for a in dict.fromkeys(r.agent for r in rows)
              if a not in ("item_weights", "world")]
    truth_label = "twin without campaigns: the truth"

    windows = [(int(a), int(b)) for a, b in campaign_windows]

    def marks(ax):
        for j, (a, b) in enumerate(windows):
            _plots.window(ax, a, b, label="campaign" if j == 0 else None)
        for j, t in enumerate(() if windows else campaign_ticks):
            ax.axvline(t, color="grey", lw=0.8, ls=":", gid=_plots.REFERENCE,
                       label="campaign start" if j == 0 else None)

    if agents:
        paths.append(_plot_scores(rows, out / f"{prefix}__scores.png", agents, metric, marks))
    for agent in agents:
        mine = [r for r in rows if r.agent == agent]
        variants = [v for v in dict.fromkeys(r.variant for r in mine if r.metric == metric)
                    if v != "twin"]
        exact = {v: sorted((r for r in mine if r.metric == metric and r.variant == v),
                           key=lambda r: r.tick) for v in variants}
        sampled = {v: sorted((r for r in mine if r.metric == f"{metric}_sampled"
                              and r.variant == v), key=lambda r: r.tick) for v in variants}
        ticks = sorted({r.tick for v in variants for r in exact[v]})
        fig, axes = _plots.figure(1, 1, width=7.0,
                                  height=4.4 if len(ticks) > 1 else 0.45 * len(variants) + 2)
        ax = axes[0, 0]
        if len(ticks) > 1:
            _plots.series_plot(ax, [_plots.Series(
                v, [r.tick for r in exact[v]], [r.estimate for r in exact[v]],
                truth=[r.truth for r in exact[v]], j=j) for j, v in enumerate(variants)],
                x_label="tick", y_label=metric, log_x=False, truth_label=truth_label)
            width = 0.012 * (ticks[-1] - ticks[0])  # variants' bars side by side
            for j, v in enumerate(variants):
                smp = sampled[v]
                if smp:
                    x = np.array([r.tick for r in smp], float) + (j - (len(variants) - 1) / 2) \
                        * width
                    y = np.array([r.estimate for r in smp])
                    ax.errorbar(x, y, yerr=[y - [r.ci_low for r in smp],
                                            [r.ci_high for r in smp] - y],
                                fmt="none", elinewidth=1.0, alpha=0.6, capsize=2,
                                color=_plots.style(j)["color"])
            marks(ax)
            what = ("lines: the exact (exhaustive) LOO score; bars: 95% intervals of the "
                    "sampled score" if any(sampled.values()) else
                    "lines: the exact (exhaustive) LOO score")
        else:
            series = [_plots.Dots("exact score", [exact[v][0].estimate if exact[v]
                                                  else math.nan for v in variants], j=0)]
            if any(sampled.values()):
                smp = [sampled[v][0] if sampled[v] else None for v in variants]
                series.append(_plots.Dots(
                    "sampled score (95% interval)",
                    [r.estimate if r else math.nan for r in smp],
                    [r.ci_low if r else math.nan for r in smp],
                    [r.ci_high if r else math.nan for r in smp], j=1))
            _plots.dot_plot(ax, variants, series,
                            truths=[exact[v][0].truth if exact[v] else math.nan
                                    for v in variants], truth_label=truth_label)
            ax.set_xlabel(metric)
            what = (f"tick {ticks[0]}: the exact (exhaustive) LOO score"
                    + ("; bars: 95% intervals of the sampled score"
                       if any(sampled.values()) else "") if ticks else "no score")
        _plots.legend(fig)
        refs = "; black dashed: the twin's score, the truth" + (
            "; shaded: the campaigns" if windows and len(ticks) > 1 else "")
        _plots.caption(fig, f"{agent}: offline LOO score", what + refs + ".")
        paths.append(_plots.save(fig, out / f"{prefix}_{agent}.png", dpi=110))

    marg = [r for r in rows if r.agent == "world" and r.metric == "item_marginal"]
    if marg:
        def name(v: str) -> str:
            i = v.removeprefix("item")
            if item_ids is not None and i.isdigit() and int(i) < len(item_ids):
                return f"item {item_ids[int(i)]}"
            return f"item {i}"

        # one small panel per item (the world against its twin), not five curves that
        # lie on one another
        items = list(dict.fromkeys(r.variant for r in marg))[:9]
        ncols = min(3, len(items))
        nrows = math.ceil(len(items) / ncols)
        fig, axes = _plots.figure(nrows, ncols, width=3.3 * ncols + 0.6,
                                  height=2.5 * nrows + 1.2, sharex=True)
        for ax, v in zip(axes.flat, items, strict=False):
            pts = sorted((r for r in marg if r.variant == v), key=lambda r: r.tick)
            x = [r.tick for r in pts]
            ax.plot(x, [r.estimate for r in pts], label="the world (with campaigns)",
                    **{**_plots.style(0), "markersize": 9 if len(x) <= 8 else 4})
            ax.plot(x, [r.truth for r in pts], label="its twin without campaigns",
                    **_plots.TRUTH)
            last = pts[-1]
            lift = (f": x{last.estimate / last.truth:.2f} at tick {last.tick}"
                    if last.truth > 0 else "")
            ax.set_title(name(v) + lift, fontsize=9)
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
            marks(ax)
        for ax in list(axes.flat)[len(items):]:
            ax.set_visible(False)
        for ax in axes[-1]:
            ax.set_xlabel("tick")
        for ax in axes[:, 0]:
            ax.set_ylabel("P_t(i)")
        _plots.legend(fig)
        _plots.caption(fig, "Marginals P_t(i) of the most pushed items: the world against "
                       "its twin",
                       "P_t(i): the share of the profiles' items that are item i at tick t "
                       "(what LOO holds out); the campaigns' effect is the gap."
                       + (" Items by their ids in the log the world was fitted to."
                          if item_ids is not None else ""))
        paths.append(_plots.save(fig, out / f"{prefix}_marginals.png", dpi=110))
    return paths


# -- the scenario kind ------------------------------------------------------------------------

_P_VALUE = OneOf((Int(low=0), Str(choices=("all",))))


def _python_kwargs(params: dict) -> dict:
    """Scenario values -> :func:`campaign_bias` keyword arguments."""
    out = dict(params)
    if "p_values" in out:
        out["p_values"] = [None if v == "all" else v for v in out["p_values"]]
    if "n_samples" in out:
        out["n_samples"] = out["n_samples"] or None
    return out


def _check_kind(params, agents, world):
    """Cross-key rules: a recommendation world, ticks inside it, constant items in range,
    lists no longer than the items, and the campaigns g1 is built from."""
    from recloop._worlds import world_config

    if not world:
        return
    config = world_config(world)
    n_ticks = getattr(config, "n_ticks", None)
    if n_ticks is None or not hasattr(config, "campaigns"):
        yield "kind", (f"expected a [world] with a recommendation preset (users, items, "
                       f"campaigns), got preset {world['preset']!r}")
        return
    late = [t for t in params["ticks"] if t >= n_ticks]
    if late:
        yield "ticks", f"expected ticks < n_ticks = {n_ticks} of the world, got {late[0]}"
    for a in agents:
        if a.get("kind") == "constant" and any(i >= config.n_items for i in a.get("items", ())):
            yield "agents", (f"expected constant agents whose items are < n_items = "
                             f"{config.n_items}, got agent {a['name']!r}")
    k = params["k"]
    if k > config.n_items:
        yield "k", f"expected k <= n_items = {config.n_items} of the world, got {k}"
    for j, p in enumerate(params.get("p_values") or ()):
        if isinstance(p, int) and not isinstance(p, bool) and p > config.n_items:
            yield f"p_values[{j}]", (f"expected a number of items <= n_items = "
                                     f"{config.n_items} of the world, got {p}")
    ticks = params.get("ticks") or []
    if not ticks:
        return
    t0, t1 = min(ticks), max(ticks)
    in_window = {i for camp in config.campaigns if camp.items is not None and camp.reach > 0
                 and camp.start <= t1 and camp.end > t0 for i in camp.items}
    for a in agents:
        if a.get("kind") == "constant" and len(a.get("items") or ()) < k:
            yield "k", (f"expected k <= {len(a['items'])}, the length of constant agent "
                        f"{a['name']!r}'s items, got {k}")
        if a.get("kind") == "constant_agreeing" and len(in_window) < k <= config.n_items:
            yield "k", (f"expected k <= {len(in_window)}, the items pushed by the world's "
                        f"campaigns in the window [{t0}, {t1}] (agent {a['name']!r} "
                        f"recommends the k most pushed), got {k}")


def _resources(params, world):
    """World and its counterfactual twin, and the per-edge LOO qualities of the window."""
    from recloop._limits import F8, world_bytes, world_config_or_none

    out = {f"{k} (world and twin)": 2 * v for k, v in world_bytes(world).items()}
    c = world_config_or_none(world)
    if c is not None and hasattr(c, "n_users"):
        edges = c.n_users * c.mean_profile_size
        out["k x profile edges: LOO recommendations"] = int(edges * params.get("k", 5) * F8 * 2)
    # the stochastic score's draws: users, edges, their bounds and qualities (ten arrays)
    out["n_samples: the sampled edges"] = 10 * (params.get("n_samples") or 0) * F8
    return out


def _run_kind(cell):
    """One cell: all the evaluation's recommenders on one world."""
    from recloop._worlds import world_config

    recommenders = {}
    for table in cell.agents:
        name = table["name"]
        if table["kind"] in RECOMMENDER_KINDS:  # built from the world's data by the experiment
            recommenders[name] = table["kind"]
        else:  # constant, plugins, import paths: an instance, seeded by the cell and its name
            recommenders[name] = cell.make_agent(name)(cell.agent_rng(name))
    return campaign_bias(world_config(cell.world), recommenders=recommenders,
                         **_python_kwargs(cell.params), rng=cell.seed_sequence,
                         progress=cell.progress, evaluation=cell.evaluation)


def _campaign_windows(world) -> list[tuple[int, int]]:
    """``(start, end)`` ticks of the world's campaigns, resolved (a fitted world's
    ``start_fraction`` needs the fitted horizon)."""
    campaigns = (world or {}).get("campaigns", [])
    if all("start" in c and c["start"] is not None for c in campaigns):
        return [(c["start"], c["start"] + c.get("duration", 1)) for c in campaigns]
    from recloop._worlds import world_config

    return [(c.start, c.start + c.duration) for c in world_config(world).campaigns]


def _item_ids(world):
    """The items' ids in the log a fitted world was fitted to (``None``: a preset)."""
    from recloop._calibrated_world import calibrated_world, is_calibrated

    return calibrated_world(world).item_ids if is_calibrated(world) else None


def _figures_kind(measurements, out_dir, world):
    windows = _campaign_windows(world)
    prefix = measurements[0].evaluation if measurements else "campaign_bias"
    return plot_campaign_bias(measurements, out_dir, campaign_windows=windows, prefix=prefix,
                              item_ids=_item_ids(world))


KIND = EvaluationKind(
    name="campaign_bias",
    summary="Offline LOO score of recommenders over a window of ticks -- unweighted, with "
            "item weights fitted on p items (`weighted_p{p}`), and on the counterfactual twin "
            "without campaigns (`twin`, the truth) -- de Myttenaere et al. 2014/2015.",
    run=_run_kind,
    params=(
        Param("ticks", ListOf(Int(low=0), unique=True), REQUIRED, "Evaluation ticks; the "
              "first is the reference of the item weights (must be < the world's n_ticks)."),
        Param("p_values", ListOf(_P_VALUE, min_len=0, unique=True), [0, 5, 20, "all"],
              "Numbers of reweighted items (`\"all\"`: every item)."),
        Param("k", Int(low=1, high=10_000), 5, "Length of the recommended lists "
              "(metric `loo_hit@{k}`)."),
        Param("n_samples", Int(low=0, high=10**8), 20_000, "Draws of the stochastic "
              "evaluation (metric `loo_hit@{k}_sampled`); 0 skips it."),
    ),
    per_agent=False,
    agent_family="recommender",
    needs_world=True,
    check=_check_kind,
    figures=_figures_kind,
    resources=_resources,
    headline=("loo_hit",),
    function=campaign_bias,
    python_kwargs=_python_kwargs,
)

#: The kinds this module declares (the registry reads them: recloop._registry.BUILTIN_MODULES).
KINDS = (KIND,)
