"""Every figure recloop draws, drawn on a tiny run and looked at by the test (issue 22 §3).

Each figure function is called on the rows of a tiny run of its experiment; the test
catches the matplotlib Figure as it is saved (``recloop._plots.save``) and checks what a
reader would: the PNG exists and is not blank, the legend holds the expected labelled
series, the caption says what the bars are, log axes carry readable labels, a single swept
value is a dot plot, identical series stay visible.
"""

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import simulator
from recloop import _plots
from recloop._rundir import to_jsonable, write_tables
from recloop._scenario import dumps_toml
from recloop.experiments import (
    bred_vs_replay,
    campaign_bias,
    dynamic_news,
    plot_bred_vs_replay,
    plot_campaign_bias,
    plot_dynamic_news,
    plot_slate_ope,
    slate_ope,
)
from recloop.experiments._loo_cf import fast_loo_cf, plot_fast_loo_cf
from recloop.experiments._offline_vs_online import offline_vs_online, plot_offline_vs_online
from recloop.experiments._ope import ope, plot_ope

VARIANTS = ["replay", "bred", "bred_nojitter", "bred_once"]


@dataclass
class Drawn:
    fig: object
    labels: list
    axes: list
    title: str


@pytest.fixture
def drawn(monkeypatch):
    """Every figure saved through ``recloop._plots.save``, by file name."""
    got = {}
    save = _plots.save

    def spy(fig, path, **kw):
        legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
        got[Path(path).name] = Drawn(
            fig, [t.get_text() for lg in legends for t in lg.get_texts()],
            [ax for ax in fig.axes if ax.get_visible()],
            fig._suptitle.get_text() if fig._suptitle is not None else "")
        return save(fig, path, **kw)

    monkeypatch.setattr(_plots, "save", spy)
    return got


def readable(path: Path) -> None:
    """A PNG of a sensible size with ink on it (not blank, not one colour)."""
    from matplotlib.image import imread

    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    gray = imread(path)[..., :3].mean(axis=2)
    assert gray.shape[0] > 200 and gray.shape[1] > 300
    assert gray.std() > 0.05 and (gray < 0.5).mean() > 0.003


def ticks(ax, which="x") -> list[str]:
    ax.figure.canvas.draw()
    labels = ax.get_xticklabels() if which == "x" else ax.get_yticklabels()
    return [t.get_text() for t in labels if t.get_text()]


def series(ax) -> dict:
    """The data line of each labelled series drawn with error bars, by label."""
    return {c.get_label(): c.lines[0] for c in ax.containers
            if not c.get_label().startswith("_")}


def is_dot_plot(ax, categories) -> bool:
    """Categories on the y axis, no line through several x (marks without a line, such as
    each row's truth, are no line)."""
    lines = [ln for ln in ax.get_lines() if len(ln.get_xdata()) > 2
             and ln.get_linestyle() not in ("None", "none", "")]
    return ticks(ax, "y") == list(categories) and not lines


# -- the shared helpers ------------------------------------------------------------------------

def test_every_series_has_its_own_look():
    looks = [(s["color"], s["marker"], str(s["linestyle"])) for s in map(_plots.style,
                                                                         range(60))]
    assert len(set(looks)) == 60
    # a later series is thinner, with a smaller mark: drawn over an equal one, both show
    a, b = _plots.style(0), _plots.style(4)
    assert b["markersize"] < a["markersize"] and b["linewidth"] < a["linewidth"]


@pytest.mark.parametrize(("value", "text"), [(500, "500"), (1000, "1,000"), (20000, "20,000"),
                                             (0.5, "0.5"), (0.02, "0.02"), (0, "0"),
                                             (1e-5, "1e-05"), (2.5e12, "2e+12")])
def test_tick_labels_are_plain_numbers(value, text):
    assert _plots.number(value) == text


def test_log_axes_are_labelled_at_readable_values():
    fig, axes = _plots.figure()
    ax = axes[0, 0]
    sizes = [500, 1000, 2000, 5000, 20000]
    ax.plot(sizes, [0.3, 0.2, 0.1, 0.05, 0.012])
    _plots.log_axis(ax, "x", sizes)
    _plots.log_axis(ax, "y")
    assert ticks(ax) == ["500", "1,000", "2,000", "5,000", "20,000"]  # at the swept sizes
    assert ticks(ax, "y") == ["0.02", "0.05", "0.1", "0.2"]  # 1-2-5 steps in the range
    fig, axes = _plots.figure()
    axes[0, 0].plot([1, 1e6], [1, 2])
    _plots.log_axis(axes[0, 0], "x", list(np.geomspace(1, 1e6, 20)))  # too many: decades
    assert ticks(axes[0, 0]) == ["1", "10", "100", "1,000", "10,000", "100,000",
                                 "1,000,000"]


def test_a_single_x_is_a_dot_plot_and_the_legend_sits_under_the_panels(tmp_path, drawn):
    fig, axes = _plots.figure(1, 2)
    for ax in axes[0]:
        _plots.series_plot(ax, [_plots.Series(name, [100], [v], [0.1], [1.0], j=j)
                                for j, (name, v) in enumerate((("ips", 1.0), ("dm", 0.5)))],
                           x_label="n_rounds", y_label="value")
    _plots.legend(fig)
    _plots.save(fig, tmp_path / "f.png")
    d = drawn["f.png"]
    assert all(is_dot_plot(ax, ["ips", "dm"]) for ax in d.axes)
    assert d.labels == ["estimate (95% interval)", "truth"]  # once for both panels
    legend = d.fig.legends[0].get_window_extent()
    assert all(legend.y1 <= ax.get_window_extent().y0 for ax in d.axes)  # outside the data
    readable(tmp_path / "f.png")


# -- the rules every kind's figure keeps -------------------------------------------------------

def legend_entries(d: Drawn) -> tuple[list[str], list[str]]:
    """(series, references) of the figure's legend: a reference is drawn with the gid
    ``_plots.REFERENCE`` (the truth, a campaign, a nominal level)."""
    refs = set()
    for ax in d.fig.axes:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if getattr(h, "get_gid", lambda: None)() == _plots.REFERENCE:
                refs.add(lab)
    return [x for x in d.labels if x not in refs], [x for x in d.labels if x in refs]


def is_categorical(ax) -> bool:
    """A dot plot: the y axis names categories (estimators, similarities, agents)."""
    labels = ticks(ax, "y")
    try:
        [float(t.replace(",", "").replace("−", "-")) for t in labels]
    except ValueError:
        return True
    return False


def data_lines(ax) -> list:
    """The lines that draw data: not references, not empty."""
    return [ln for ln in ax.get_lines() if ln.get_gid() != _plots.REFERENCE
            and len(ln.get_xdata())]


def panel_values(ax) -> list[float]:
    """The values a panel draws: x of a dot plot, y of lines."""
    dots = is_categorical(ax)
    return [float(v) for ln in data_lines(ax)
            for v in (ln.get_xdata() if dots else ln.get_ydata())]


def check_rules(d: Drawn, *, fixed=()) -> None:
    """What a reader of any figure is owed (issue 34): a legend the eye can match -- at most
    _plots.MAX_LEGEND series (more are named on the lines) and a few references; no panel
    of one constant value (a line of text says it); no line through values of a swept size
    that categories fix (``fixed``: a data set's own n_rounds), which would draw data sets
    as a numeric sweep."""
    series, refs = legend_entries(d)
    assert len(series) <= _plots.MAX_LEGEND, f"{d.title!r}: a legend of {series}"
    assert len(refs) <= 3, f"{d.title!r}: references {refs}"
    for ax in d.axes:
        values = panel_values(ax)
        assert not _plots.is_constant(values), \
            f"{d.title!r}: panel {ax.get_title()!r} draws only {values[:1]}"
        if fixed and not is_categorical(ax):
            for ln in data_lines(ax):
                across = {float(x) for x in ln.get_xdata()} & {float(v) for v in fixed}
                assert len(across) <= 1, \
                    f"{d.title!r}: a line through the categories' own sizes {across}"


# -- each kind's figures ------------------------------------------------------------------------

def make_ucb1(rng):
    import agents

    agent = agents.UCB1()
    agent.reset(rng)
    return agent


@pytest.fixture(scope="module")
def bandit_rows():
    return [r for T in (60, 120) for r in bred_vs_replay(
        "bred_linear", {"ucb1": make_ucb1}, T=T, n_logs=2, n_bootstrap=2, n_truth_runs=3,
        rng=0)]


def test_bred_vs_replay(tmp_path, drawn, bandit_rows):
    record, path = plot_bred_vs_replay(bandit_rows, tmp_path)
    for p in (record, path):
        readable(p)
        check_rules(drawn[p.name])
    # the figure of record: the estimates against T beside the online values
    d = drawn[record.name]
    assert record.name == "bred_vs_replay__value.png"
    assert d.labels == VARIANTS + ["online value V(T): the truth", "online value V(T/K)"]
    ax, = d.axes
    truth = [ln for ln in ax.get_lines() if ln.get_label() == "online value V(T): the truth"]
    want = sorted({r.params["T"]: r.truth for r in bandit_rows if r.metric == "value"}.items())
    assert list(zip(truth[0].get_xdata(), truth[0].get_ydata(), strict=True)) == want
    over_k = [ln for ln in ax.get_lines() if ln.get_label() == "online value V(T/K)"]
    assert list(over_k[0].get_ydata()) == [r.estimate for r in bandit_rows
                                           if r.variant == "T_over_K"]
    assert "95% interval" in d.title and ticks(ax) == ["60", "120"]
    d = drawn[path.name]
    assert d.labels == VARIANTS
    assert [ax.get_title() for ax in d.axes] == ["bias", "RMSE"]
    assert "95% intervals" in d.title and "2 logs per T" in d.title
    assert ticks(d.axes[0]) == ["60", "120"]
    # one T: a dot plot per variant, each beside its truth
    record, path = plot_bred_vs_replay([r for r in bandit_rows if r.params["T"] == 60],
                                       tmp_path / "one")
    first, second = drawn[path.name].axes
    assert is_dot_plot(first, VARIANTS)  # the variants named once, on the left
    assert ticks(second, "y") == [] and list(second.get_yticks()) == list(first.get_yticks())
    assert is_dot_plot(drawn[record.name].axes[0], VARIANTS)


@pytest.fixture(scope="module")
def news_rows():
    return [r for w in (20, 60) for r in dynamic_news(
        "dynamic_news", {"ucb1": make_ucb1}, T=60, window=w, n_logs=3, n_bootstrap=2,
        n_truth_runs=3, rng=5)]


def test_dynamic_news(tmp_path, drawn, news_rows):
    rows = news_rows
    path, = plot_dynamic_news(rows, tmp_path)
    readable(path)
    d = drawn[path.name]
    check_rules(d)
    assert d.labels == ["replay", "bred_window", "bred_window_local",
                        "online value: the truth", "local online value"]
    ax, = d.axes
    assert ticks(ax) == ["20", "60"] and ax.get_title() == "ucb1"
    local = [ln for ln in ax.get_lines() if ln.get_label() == "local online value"][0]
    assert list(local.get_ydata()) == [r.truth for r in rows if r.metric == "value"
                                       and r.variant == "bred_window_local"]
    path, = plot_dynamic_news([r for r in rows if r.params["window"] == 20], tmp_path / "one")
    assert is_dot_plot(drawn[path.name].axes[0], ["replay", "bred_window",
                                                  "bred_window_local"])


@pytest.fixture(scope="module")
def bias_run():
    config = simulator.preset("viadeo_like", n_users=300)
    rows = campaign_bias(config, recommenders={"g1": "constant_agreeing", "g2":
                                               "constant_disagreeing"},
                         ticks=(300, 340, 400), p_values=(0, None), n_samples=200, rng=1)
    return config, rows


def test_campaign_bias(tmp_path, drawn, bias_run):
    config, rows = bias_run
    windows = [(c.start, c.start + c.duration) for c in config.campaigns]
    ids = np.arange(config.n_items) + 1001  # a fitted world's own item ids
    paths = plot_campaign_bias(rows, tmp_path, campaign_windows=windows, item_ids=ids)
    assert [p.name for p in paths] == ["campaign_bias__scores.png", "campaign_bias_g1.png",
                                       "campaign_bias_g2.png", "campaign_bias_marginals.png"]
    for p in paths:
        readable(p)
        check_rules(drawn[p.name])
    # the figure of record: every recommender, the twin, the campaigns shaded; weighted_p0
    # (no item weighted) is the unweighted score: one line named for both
    d = drawn["campaign_bias__scores.png"]
    assert d.labels == ["unweighted = weighted_p0", "weighted_pall",
                        "twin without campaigns: the truth", "campaign"]
    assert [ax.get_title().split("\n")[0] for ax in d.axes] == ["g1", "g2"]
    last = {r.agent: r for r in rows if r.metric == "loo_hit@5" and r.variant == "unweighted"
            and r.tick == 400}
    g1 = last["g1"]
    assert d.axes[0].get_title().split("\n")[1] == \
        f"unweighted {(g1.estimate - g1.truth) / g1.truth:+.0%} at tick 400"
    spans = [p for p in d.axes[0].patches if p.get_gid() == _plots.REFERENCE]
    assert [(p.get_x() + 0.5, p.get_x() + p.get_width() + 0.5) for p in spans] == windows
    d = drawn["campaign_bias_g1.png"]
    assert d.labels == ["unweighted", "weighted_p0", "weighted_pall",
                        "twin without campaigns: the truth", "campaign"]
    assert "95% intervals of the sampled score" in d.title
    # no item weighted: p0 equals the unweighted score, drawn beneath it in its own style
    line = series(d.axes[0])
    a, b = line["unweighted"], line["weighted_p0"]
    assert list(a.get_ydata()) == list(b.get_ydata())
    assert (a.get_marker(), a.get_linestyle()) != (b.get_marker(), b.get_linestyle())
    d = drawn["campaign_bias_marginals.png"]
    pushed = [r.variant for r in rows if r.metric == "item_marginal" and r.tick == 300]
    # a panel per item, the world against its twin, each titled with the item's own id
    assert d.labels == ["the world (with campaigns)", "its twin without campaigns",
                        "campaign"]
    titles = [ax.get_title() for ax in d.axes if ax.get_visible()]
    assert [t.split(":")[0] for t in titles] == [f"item {int(v[4:]) + 1001}" for v in pushed]
    assert "ids in the log" in d.title and "P_t(i): the share" in d.title


def clipped_ips(log, action_dist, *, rng=None):
    """IPS clipped at 1e9: clips nothing, so its series equals IPS's."""
    import evaluators

    return evaluators.ips(log, action_dist, clip=1e9)


@pytest.fixture(scope="module")
def ope_rows():
    return [r for n in (100, 1000) for r in ope(
        "bred_linear", [{"name": "uniform", "policy": "uniform"}], n_rounds=n, n_logs=3,
        estimators=["ips", ("clipped_ips", clipped_ips)], rng=2)]


def test_ope(tmp_path, drawn, ope_rows):
    path, = plot_ope(ope_rows, tmp_path)
    readable(path)
    d = drawn[path.name]
    check_rules(d)
    assert d.labels == ["ips", "clipped_ips"]
    assert ticks(d.axes[0]) == ["100", "1,000"]  # log axis at the swept sizes
    assert d.axes[0].get_yscale() == "log" and "RMSE over 3 logs" in d.title
    assert "logging uniform" in d.title  # what was logged, not a parameter dump
    # clipping at 1e9 clips nothing: two equal series, both visible
    a, b = series(d.axes[0]).values()
    assert list(a.get_ydata()) == list(b.get_ydata())
    assert (a.get_marker(), a.get_linestyle()) != (b.get_marker(), b.get_linestyle())
    path, = plot_ope([r for r in ope_rows if r.params["n_rounds"] == 100], tmp_path / "one")
    assert is_dot_plot(drawn[path.name].axes[0], ["ips", "clipped_ips"])


def test_ope_names_more_than_six_estimators_on_their_lines(tmp_path, drawn, ope_rows):
    """Eight estimators: no legend of eight entries; each line is named where it ends."""
    many = [dataclasses.replace(r, variant=f"{r.variant}_{j}") for j in range(4)
            for r in ope_rows]
    path, = plot_ope(many, tmp_path)
    d = drawn[path.name]
    check_rules(d)
    names = {f"{v}_{j}" for v in ("ips", "clipped_ips") for j in range(4)}
    assert {t.get_text() for t in d.axes[0].texts} == names
    assert legend_entries(d)[0] == []


def test_ope_two_settings_are_two_panels(tmp_path, drawn, ope_rows):
    """large_action_spaces: one target, residual 0 and 0.3 -- two panels of one figure, the
    setting in each title, never one line through both."""
    two = [dataclasses.replace(r, params={**r.params, "residual": x}) for x in (0.0, 0.3)
           for r in ope_rows]
    path, = plot_ope(two, tmp_path)
    d = drawn[path.name]
    check_rules(d)
    assert [ax.get_title() for ax in d.axes] == ["target uniform\nresidual=0",
                                                 "target uniform\nresidual=0.3"]


@pytest.fixture(scope="module")
def slate_rows():
    world = simulator.preset("viadeo_like", n_users=50, n_items=10, campaigns=())
    return [r for model in ("pbm", "cascade") for k in (2, 3) for n in (100, 300)
            for r in slate_ope(world, click_model=model, k=k, n_rounds=n, n_logs=3, rng=3)]


def test_slate_ope(tmp_path, drawn, slate_rows):
    paths = plot_slate_ope(slate_rows, tmp_path)
    assert [p.name for p in paths] == ["slate_ope__bias.png", "slate_ope_pbm.png",
                                       "slate_ope_cascade.png"]
    for p in paths:
        readable(p)
        check_rules(drawn[p.name])
    # the figure of record: the bias as a share of the truth at the largest n_rounds, a
    # panel per click model, a dot per k
    d = drawn["slate_ope__bias.png"]
    assert d.labels == ["k = 2", "k = 3", "no bias: the truth"]
    assert [ax.get_title() for ax in d.axes] == ["pbm", "cascade"]
    names = ["slate_ips", "independent_ips", "reward_interaction_ips", "cascade_dr"]
    assert all(is_dot_plot(ax, names) for ax in d.axes[:1])
    got = {(r.params["click_model"], r.params["k"], r.variant): r for r in slate_rows
           if r.metric == "value" and r.params["n_rounds"] == 300}
    r = got["cascade", 3, "independent_ips"]
    dots = [c.lines[0] for c in d.axes[1].containers]  # per k, a dot per estimator
    assert dots[len(names) + 1].get_xdata()[0] == pytest.approx(
        100 * (r.estimate - r.truth) / r.truth)
    assert "n_rounds = 300, the largest run" in d.title
    d = drawn["slate_ope_pbm.png"]
    assert d.labels[-1] == "nominal 0.95" and "slate_ips" in d.labels
    assert len(d.axes) == 6 and d.axes[2].get_yscale() == "log"
    assert "bias bars: 95% intervals" in d.title


def test_a_constant_panel_is_a_line_of_text(tmp_path, drawn, slate_rows):
    """Coverage 1 for every estimator and size: the panel says so, no flat line."""
    ones = [dataclasses.replace(r, estimate=1.0) if r.metric == "coverage" else r
            for r in slate_rows if r.params["click_model"] == "pbm"]
    paths = plot_slate_ope(ones, tmp_path)
    d = drawn["slate_ope_pbm.png"]
    check_rules(d)
    texts = [t.get_text() for ax in d.axes for t in ax.texts]
    assert "coverage of 95% intervals: 1 for every estimator and n_rounds" in texts
    assert len(paths) == 2


def test_offline_vs_online(tmp_path, drawn):
    rows = offline_vs_online("bred_linear", {"ucb1": make_ucb1, "ucb1b": make_ucb1}, T=60,
                             n_logs=2, n_bootstrap=2, n_truth_runs=3, n_resamples=20,
                             estimators=["replay", "bred_once"], rng=4)
    path, = plot_offline_vs_online(rows, tmp_path)
    readable(path)
    d = drawn[path.name]
    check_rules(d)
    # issue 34, "legends the eye can match": each panel names its own marks under it, the
    # taus in black and grey, never in the colours of the evaluators beside them
    left, right = d.axes
    assert not d.fig.legends
    assert [t.get_text() for t in left.get_legend().get_texts()] == ["against V(T)",
                                                                     "against V(T/K)"]
    assert [t.get_text() for t in right.get_legend().get_texts()] == [
        "replay", "bred_once", "V(T): the truth"]
    taus = {c.lines[0].get_color() for c in left.containers}
    assert taus == {"black", "0.55"}
    assert not taus & {c.lines[0].get_color() for c in right.containers}
    assert ticks(left, "y") == ["replay", "bred_once"]
    assert ticks(right, "y") == ["ucb1", "ucb1b"]
    own = [r.estimate for r in rows if r.agent == "online_T_over_K"][0]
    assert f"that by V(T): tau {own:.2f}" in d.title


@pytest.fixture(scope="module")
def loo_rows():
    return fast_loo_cf(similarities=["cosine", "pearson"], shape=(40, 50, 600),
                       naive_users=0, rng=0)


def test_fast_loo_cf(tmp_path, drawn, loo_rows):
    path, = plot_fast_loo_cf(loo_rows, tmp_path)
    readable(path)
    d = drawn[path.name]
    check_rules(d)
    assert d.labels == ["fit_once", "fit_once_self", "exact LOO (the truth)"]
    assert all(is_dot_plot(ax, ["cosine", "pearson"]) for ax in d.axes[:1])
    assert [ax.get_title() for ax in d.axes] == ["MAE", "RMSE"]


def test_fast_loo_cf_on_a_fitted_world_sets_the_logs_one_above_the_other(tmp_path, drawn,
                                                                         loo_rows):
    """calibrated_loo_cf: the real and the simulated log in one figure (a row each, each
    metric's axis shared), the rank agreement of the similarities in the caption."""
    from recloop._results import Measurement
    from recloop.experiments._loo_cf import KIND

    rows = [dataclasses.replace(r, agent=f"{r.agent} ({log})",
                                params={**r.params, "log": log})
            for log in ("real", "simulated") for r in loo_rows]
    rows.append(Measurement(evaluation="fast_loo_cf", agent="similarities", n=2,
                            metric="rmse_rank_tau", estimate=1.0, variant="exact_loo",
                            params={"log": "simulated vs real"}))
    path, = KIND.figures(rows, tmp_path, None)
    d = drawn[path.name]
    check_rules(d)
    assert [ax.get_title() for ax in d.axes] == ["real log: MAE", "real log: RMSE",
                                                 "simulated log: MAE", "simulated log: RMSE"]
    assert is_dot_plot(d.axes[2], ["cosine", "pearson"])
    assert d.axes[0].get_shared_x_axes().joined(d.axes[0], d.axes[2])
    assert "Kendall tau 1.00 (RMSE)" in d.title


# -- estimator selection against the oracle: every chooser the run has ---------------------------

def row_names(ax) -> list[str]:
    """The rows of a dot plot, top down, also where a panel leaves them to the one on its
    left (its tick labels hidden)."""
    fmt = ax.yaxis.get_major_formatter()
    return [fmt(v, i) for i, v in enumerate(ax.get_yticks())]


def marks(ax) -> dict:
    """The x of every mark of a dot plot, by series label and row name: ``{label: {row:
    x}}`` (a mark's series known by its colour and marker, its row by its height)."""
    names = row_names(ax)
    look = {(c.lines[0].get_color(), c.lines[0].get_marker()): c.get_label()
            for c in ax.containers if not c.get_label().startswith("_")}
    out: dict = {}
    for c in ax.containers:
        line = c.lines[0]
        label = look[line.get_color(), line.get_marker()]
        row = names[int(round(float(line.get_ydata()[0])))]
        out.setdefault(label, {})[row] = float(line.get_xdata()[0])
    return out


ORACLE_LINES = ["oracle: the best fixed candidate", "1.2 x the oracle: the goal"]


@pytest.fixture(scope="module")
def selection_rows():
    from recloop.experiments._selection import estimator_selection

    return [r for family in ("ips", "dr_os") for noise in (0.0, 0.5)
            for r in estimator_selection("bred_linear", family=family, logging="softmax",
                                         n_rounds=200, n_logs=3, n_actions=5,
                                         reward_noise=noise, selectors=["twin", "cv", "pasif"],
                                         n_twins=3, n_resamples=20, rng=6,
                                         evaluation="sel")]


def test_selection_against_the_oracle_draws_every_chooser(tmp_path, drawn, selection_rows):
    """estimator_selection's figure of record (its kind's first figure): per family a
    panel, per setting a row, a mark for each chooser the rows hold -- SLOPE, the twin,
    CV-OPE, PAS-IF and the untuned estimator -- at its RMSE over the oracle's; the oracle
    and the 1.2x goal as lines."""
    from recloop._registry import registry
    from recloop.experiments._selection import CHOOSER_LABELS

    rows = selection_rows
    record, *rest = registry().evaluations["estimator_selection"].figures(rows, tmp_path, None)
    assert record.name == "sel_vs_oracle.png" and not rest
    readable(record)
    d = drawn[record.name]
    check_rules(d)
    choosers = ["untuned", "slope", "twin", "cv", "pasif"]
    assert d.labels == [CHOOSER_LABELS[c] for c in choosers] + ORACLE_LINES
    assert [ax.get_title() for ax in d.axes] == ["family ips", "family dr_os"]
    assert all(ax.get_xscale() == "log" for ax in d.axes)
    for ax, family in zip(d.axes, ("ips", "dr_os"), strict=True):
        drawn_x = marks(ax)
        assert row_names(ax) == ["noise 0", "noise 0.5"]
        for c in choosers:
            for noise in (0.0, 0.5):
                got = {r.variant: r.estimate for r in rows if r.metric == "rmse"
                       and r.params["family"] == family and r.params["reward_noise"] == noise}
                want = got[c] / got["oracle"]
                assert drawn_x[CHOOSER_LABELS[c]][f"noise {_plots.number(noise)}"] == \
                    pytest.approx(want, rel=1e-12), (family, noise, c)
        refs = sorted(float(ln.get_xdata()[0]) for ln in ax.get_lines()
                      if ln.get_gid() == _plots.REFERENCE)
        assert refs == [1.0, 1.2]
    # SLOPE alone: SLOPE and the untuned estimator, nothing drawn for absent selectors
    alone = [r for r in rows if r.variant not in ("twin", "cv", "pasif")]
    path, = plot_selection_of(alone, tmp_path / "alone")
    assert drawn[path.name].labels == [CHOOSER_LABELS[c] for c in ("untuned", "slope")] \
        + ORACLE_LINES


def plot_selection_of(rows, out):
    from recloop.experiments._selection import plot_selection

    return plot_selection(rows, out, prefix="alone")


@pytest.fixture(scope="module")
def ope_real_selection_rows():
    pytest.importorskip("sklearn")
    from recloop.experiments._ope_real import ope_real

    return [r for source in ("wine", "iris") for r in ope_real(
        source, estimators=["ips", "snips", "direct_method"],
        selectors=["select_by_twin", "select_by_cv", "select_by_slope"], n_logs=3, rng=7,
        evaluation="multiclass_selection")]


def test_ope_real_selectors_against_the_oracle(tmp_path, drawn, ope_real_selection_rows):
    """ope_real's figure of record with selectors: a panel per data set (never a numeric
    axis of their sizes), a row per target, a mark per selector at its oracle_ratio; an
    evaluation without selectors draws none (its generic figures stay)."""
    from recloop._registry import registry

    rows = ope_real_selection_rows
    kind = registry().evaluations["ope_real"]
    record, *rest = kind.figures(rows, tmp_path, None)
    assert record.name == "multiclass_selection_vs_oracle.png" and not rest
    readable(record)
    d = drawn[record.name]
    check_rules(d, fixed={r.params["n_rounds"] for r in rows})
    selectors = ["select_by_twin", "select_by_cv", "select_by_slope"]
    assert d.labels == selectors + ORACLE_LINES
    assert [ax.get_title().split("\n")[0] for ax in d.axes] == ["wine", "iris"]
    for ax, source in zip(d.axes, ("wine", "iris"), strict=True):
        assert row_names(ax) == ["good", "hedged", "poor"]
        want = {(r.variant, r.agent): r.estimate for r in rows if r.metric == "oracle_ratio"
                and r.params["source"] == source}
        got = {(s, t): x for s, by_row in marks(ax).items() for t, x in by_row.items()}
        assert got == pytest.approx(want, rel=1e-12)
        assert {s for s, _ in got} == set(selectors)
        assert {t for _, t in got} == {"good", "hedged", "poor"}
    plain = [r for r in rows if r.variant not in selectors and r.variant != "oracle"]
    assert kind.figures(plain, tmp_path / "plain", None) == []


# -- a sweep over categories is never a numeric axis, in any kind's figure ----------------------

#: Per kind with a swept axis: its figure function, the swept parameter and the tiny rows.
SWEPT = {"ope": ("ope_rows", "n_rounds"), "bred_vs_replay": ("bandit_rows", "T"),
         "slate_ope": ("slate_rows", "n_rounds"), "dynamic_news": ("news_rows", "window")}


@pytest.mark.parametrize("kind", sorted(SWEPT))
def test_a_size_each_category_fixes_is_no_axis(kind, tmp_path, drawn, request):
    """Data sets that fix their own size (90, 284, 898 records): each category's rows at
    its one size, as ope_real's multiclass sets are; no figure may join them into a line
    on a numeric axis of sizes."""
    from recloop._registry import registry

    fixture, key = SWEPT[kind]
    rows = request.getfixturevalue(fixture)
    first = min(r.params[key] for r in rows)
    sizes = {"wine": 90, "breast_cancer": 284, "digits": 898}
    cats = [dataclasses.replace(r, params={**r.params, "source": s, key: n})
            for s, n in sizes.items() for r in rows if r.params[key] == first
            and r.params.get("click_model", "pbm") == "pbm" and r.params.get("k", 3) == 3]
    paths = registry().evaluations[kind].figures(cats, tmp_path, None)
    assert paths
    for p in paths:
        check_rules(drawn[p.name], fixed=sizes.values())


# -- the fitted world's fidelity ------------------------------------------------------------------

def noise_report(verdicts):
    import simulator as sim

    bands = tuple(sim.NoiseBand(name, *(round(x + j / 20, 3) for x in (0.1, 0.05, 0.2)), 0.08,
                                0.03, 0.15, 0.09, 0.04, 0.16, n_splits=30, verdict=v)
                  for j, (name, v) in enumerate(zip(sim.DISTRIBUTIONS, verdicts, strict=True)))
    return sim.NoiseBandReport(bands=bands, faithful="outside" not in verdicts)


def test_the_fidelity_figure_reads_the_bands_of_fidelity_md(tmp_path, drawn):
    from recloop._fidelity_plot import bands_from_markdown, plot_fidelity

    inside = noise_report(["within"] * 6)
    outside = noise_report(["within"] * 4 + ["outside", "within"])
    text = "\n".join([
        "## Calibrated world", "", "### In sample -- the world was fitted to these data", "",
        "Against the data's own noise (30 random halves of the users):", "",
        inside.to_markdown(), "", "### Out of sample -- fitted on the first 0.8", "",
        "Against the data's own noise (30 random halves of the users):", "",
        outside.to_markdown(), "", "| user_activity | <script> | x | - | within |"])
    parts = bands_from_markdown(text)
    assert [p for p, _ in parts] == ["in sample", "out of sample"]
    assert parts[0][1].bands == inside.bands and parts[1][1].bands == outside.bands
    assert not parts[1][1].faithful
    path = plot_fidelity(parts, tmp_path / "f.png")
    readable(path)
    d = drawn["f.png"]
    check_rules(d)
    assert [ax.get_title() for ax in d.axes] == ["in sample: faithful",
                                                 "out of sample: NOT faithful: 1 of 6 outside"]
    assert ticks(d.axes[0], "y") == list(simulator.DISTRIBUTIONS)
    assert plot_fidelity(bands_from_markdown("no table"), tmp_path / "g.png") is None


# -- the report's figures: generic and estimates-with-intervals ---------------------------------

def write_run(tmp_path, rows, estimates, kind):
    """A finished run directory of one evaluation ``ev`` of ``kind``."""
    from recloop._rundir import COLUMNS

    def full(r):
        out = dict.fromkeys(COLUMNS)
        out.update(scenario="s", cell="ev/*/seed=0", seed=0, evaluation="ev", n=1,
                   stderr=math.nan, ci_low=math.nan, ci_high=math.nan, truth=math.nan)
        out.update(r)
        out["error"] = out["estimate"] - out["truth"]
        return out

    scenario = {"run": {"name": "s", "description": "", "seed": 0, "replicates": 1,
                        "seeds": [0], "horizon": 0}, "agents": [],
                "evaluations": [{"kind": kind, "name": "ev", "agents": []}]}
    (tmp_path / "scenario.toml").write_text(dumps_toml(scenario))
    (tmp_path / "environment.json").write_text(to_jsonable({"command": ["recloop"]}))
    write_tables(tmp_path, [{"rows": [full(r) for r in rows],
                             "estimates": [full(r) for r in estimates]}])
    return tmp_path


def test_the_estimates_chart_shows_each_estimator_beside_the_truth(tmp_path, drawn):
    from recloop._report import write_report

    logs = [0.2, 0.4, 0.5, 0.9]
    estimates = [dict(agent="target", variant=v, metric="value", estimate=e, truth=0.5,
                      stderr=0.1, ci_low=e - 0.2, ci_high=e + 0.2, log=i,
                      params={"n_rounds": 100})
                 for v in ("ips", "clipped_ips") for i, e in enumerate(logs)]
    run_dir = write_run(tmp_path, [dict(e, log=None) for e in estimates[:1]], estimates,
                        "ope")
    report = write_report(run_dir).read_text()
    assert "![ev: estimates](figures/ev__estimates.png)" in report
    readable(run_dir / "figures" / "ev__estimates.png")
    d = drawn["ev__estimates.png"]
    assert d.labels == ["mean estimate, 95% interval", "single logs (2.5-97.5%)", "truth"]
    ax, = d.axes
    assert ax.get_title() == "target"
    assert ticks(ax, "y") == ["ips", "clipped_ips"]
    assert "over 4 logs" in d.title
    # the numbers drawn, to the last digit: mean, 1.96 standard errors, percentiles, truth
    mean, se = np.mean(logs), np.std(logs, ddof=1) / 2
    spread = np.percentile(logs, [2.5, 97.5])
    seg = [ln.get_xdata() for ln in ax.get_lines() if len(ln.get_xdata()) == 2
           and ln.get_gid() is None and ln.get_label() != "mean"]
    assert [list(s) for s in seg] == [list(spread)] * 2
    bars = [c for c in ax.containers]
    assert [float(b.lines[0].get_xdata()[0]) for b in bars] == [mean, mean]
    low, high = bars[0].lines[2][0].get_segments()[0][:, 0]
    assert (low, high) == pytest.approx((mean - 1.96 * se, mean + 1.96 * se), abs=1e-15)
    truth = [ln for ln in ax.get_lines() if ln.get_gid() == _plots.REFERENCE]
    assert list(truth[0].get_xdata()) == [0.5, 0.5]


def test_the_generic_figure_labels_only_what_varies(tmp_path, drawn):
    from recloop._report import write_report

    rows = [dict(agent=a, variant=v, metric="mean_reward", estimate=e + (n == 10) * 0.1,
                 stderr=0.02, truth=0.5, params={"n": n, "fixed": 1})
            for a in ("a", "b") for v, e in (("x", 0.4), ("y", 0.4)) for n in (10, 20, 40)]
    run_dir = write_run(tmp_path, rows, [dict(r, log=0) for r in rows], "selfcheck")
    write_report(run_dir)
    d = drawn["ev__mean_reward.png"]
    readable(run_dir / "figures" / "ev__mean_reward.png")
    assert d.labels == ["x", "y", "truth"]  # one legend for the panels, no fixed settings
    assert [ax.get_title() for ax in d.axes] == ["a", "b"]
    assert ticks(d.axes[0]) == ["10", "20", "40"]
    assert "bars: 95% intervals" in d.title and "own standard error" in d.title
    # a single swept value: a dot plot, not lines on one x
    one = [dict(r, params={"n": 10}) for r in rows if r["params"]["n"] == 10]
    (tmp_path / "one").mkdir()
    write_report(write_run(tmp_path / "one", one, [dict(r, log=0) for r in one], "selfcheck"))
    assert all(is_dot_plot(ax, ["x", "y"]) for ax in drawn["ev__mean_reward.png"].axes)


def test_a_categorical_sweep_is_never_a_numeric_axis_and_a_constant_is_a_line(tmp_path,
                                                                             drawn):
    """Issue 34: ope_real's multiclass figure drew three data sets as log sizes 90/284/898
    on one axis, and nan_rate panels of zeros. Data sets that fix their own n_rounds give a
    panel per data set, one row per estimator, one mark per target; a metric that is 0 in
    every row is a line of text, no figure."""
    from recloop._report import write_report

    sizes = {"digits": 898, "breast_cancer": 284, "wine": 90}
    rows = [{"agent": target, "variant": e, "metric": metric, "estimate": v,
             "params": {"source": s, "n_rounds": n}}
            for s, n in sizes.items() for target in ("good", "poor")
            for e in ("ips", "snips", "dm")
            for metric, v in (("relative_error", 0.1 + len(e) / 100), ("nan_rate", 0.0))]
    run_dir = write_run(tmp_path, rows, [], "selfcheck")
    report = write_report(run_dir).read_text()
    d = drawn["ev__relative_error.png"]
    assert [ax.get_title().split("\n")[0] for ax in d.axes] == [
        f"source = {s}" for s in sizes]
    assert [ax.get_title().split("\n")[1] for ax in d.axes] == [
        f"(n_rounds = {n})" for n in sizes.values()]
    for ax in d.axes:  # the estimators down, the metric across: no x axis of sizes
        assert ax.get_xlabel() == "relative_error"
        assert ticks(d.axes[0], "y") == ["ips", "snips", "dm"]
    assert d.labels == ["good", "poor"]
    assert "ev__nan_rate.png" not in drawn
    assert "nan_rate is 0 in every row (18): not drawn" in report


@pytest.mark.parametrize("targets", [("bts",), ("good", "poor")], ids=["one", "two"])
def test_a_panel_of_one_value_is_a_line_of_text(tmp_path, drawn, targets):
    """obd_random_to_bts's overlap at its smallest size: 1 for every estimator in the men's
    and women's campaigns, spread in all's -- those panels say it in a line of text, the
    estimators named on the panel that draws them."""
    from recloop._report import write_report

    rows = [{"agent": t, "variant": e, "metric": "overlap",
             "estimate": 1.0 if c != "all" else 0.25 * (j + k),
             "params": {"campaign": c, "n_rounds": 300}}
            for c in ("all", "men", "women") for k, t in enumerate(targets)
            for j, e in enumerate(("ips", "snips", "dm"))]
    write_report(write_run(tmp_path, rows, [], "selfcheck"))
    d = drawn["ev__overlap.png"]
    check_rules(d)
    texts = [[t.get_text() for t in ax.texts] for ax in d.axes]
    say = "overlap is 1 " + ("in every row" if len(targets) == 1 else
                             "for every estimator and target")
    assert texts[0] == [] and texts[1] == texts[2] == [say]
    assert ticks(d.axes[0], "y") == ["ips", "snips", "dm"]


# -- every built-in scenario's figures, at its smallest size ------------------------------------

def rows_of(run_dir: Path) -> list[dict]:
    """The rows of a run's results.jsonl."""
    import json

    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


#: Built-in scenarios of the kinds whose figures recloop designs here (campaign_bias is the
#: quickstart's kind; bred_vs_replay's, 20 s at its smallest, is dynamic_news's function on
#: other rows and is drawn above).
RULED = ("calibrated_campaign_bias", "calibrated_loo_cf", "dynamic_news",
         "estimator_selection", "fast_loo_cf", "large_action_spaces", "offline_vs_online",
         "ope_real", "ope_static", "quickstart", "slate_ope")


@pytest.mark.slow
@pytest.mark.parametrize("name", RULED)
def test_every_figure_of_a_builtin_scenario_keeps_the_rules(name, tmp_path, drawn):
    """Each built-in scenario run at its smallest size: every figure of its report keeps the
    rules (legend, constant panels), its first screen shows the figure each kind designed as
    its figure of record (and a fitted world's fidelity), and every name it emits is in the
    glossary (the glossary's test runs the other built-in scenarios)."""
    import recloop
    from tests.builtin_data import overrides
    from tests.recloop.smallest import smallest
    from tests.recloop.test_glossary import undefined_names

    res = recloop.run(smallest(name), out=tmp_path, workers=1, set=overrides(name),
                      progress=False)
    assert not (res.run_dir / "errors.log").exists()
    # the glossary's check on the same run (tests/recloop/test_glossary.py: FIGURES_RUN)
    undefined = undefined_names(res)
    assert not undefined, f"{name} emits names the glossary does not define: {undefined}"
    assert 'id="glossary"' in (res.run_dir / "report.html").read_text()
    assert drawn
    for d in drawn.values():
        check_rules(d)
    page = (res.run_dir / "report.md").read_text()
    first = page.split("\nContents: [")[0]
    records = {"bred_vs_replay": "__value", "dynamic_news": "__value", "slate_ope": "__bias",
               "campaign_bias": "__scores", "fast_loo_cf": "_errors", "ope": "_rmse_0",
               "offline_vs_online": "_T", "estimator_selection": "_vs_oracle",
               "ope_real": "_vs_oracle"}
    for ev in res.scenario["evaluations"]:
        if ev["kind"] == "ope_real" and not ev.get("selectors"):
            continue  # no selectors: the report's generic figures
        assert f"](figures/{ev['name']}{records[ev['kind']]}" in first, ev["name"]
        if records[ev["kind"]] == "_vs_oracle":  # every selector the run emitted, drawn
            emitted = {r["variant"] for r in rows_of(res.run_dir) if r["evaluation"] ==
                       ev["name"] and r["metric"] in ("oracle_ratio", "within")}
            labels = drawn[f"{ev['name']}_vs_oracle.png"].labels
            assert emitted and all(any(label == v or label.startswith(f"{v}:")
                                       for label in labels) for v in emitted), (emitted,
                                                                                labels)
    if "calibrate_from" in res.scenario.get("world", {}):
        assert "](figures/fitted_world_fidelity.png)" in first
