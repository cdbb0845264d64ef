"""What every figure recloop draws has in common, in one place.

The report's generic figures (:mod:`recloop._report`), its estimates-with-intervals charts
and every evaluation kind's own figures (``recloop.experiments``) are drawn with these
helpers, so that they read alike:

* **series** -- series ``j`` has its own colour, marker (hollow) and line style
  (:func:`style`): two identical series (``clipped_ips`` under ``ips``) stay visible, one
  through the other, and stay apart in black and white;
* **the truth** -- black and dashed (:data:`TRUTH`), labelled ``truth``;
* **log axes** -- ticks at the plotted values when there are few (the swept ``n_rounds``),
  else at 1-2-5 steps, labelled as plain numbers (``1,000``, ``0.02``), never ``10^3``
  alone (:func:`log_axis`);
* **one legend, outside the data** -- under every panel, each label once, so that a grid
  of panels has a single shared legend (:func:`legend`);
* **a caption under the title** saying what the marks and the bars are (:func:`caption`);
* **a single swept value is a dot plot** -- one row per series, the estimate with its
  interval, the truth as a line or a mark -- not lines drawn on one x (:func:`dot_plot`);
* **written atomically** (:func:`save`: a temporary file and a rename).

Figures are made with matplotlib's object-oriented API on the Agg canvas
(``matplotlib.figure.Figure``), never through ``pyplot``: drawing a report changes no global
state of the caller (a notebook keeps its backend, nothing is left open) and needs no
display. matplotlib is imported when a figure is made, never at import time.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from recloop._rundir import atomic_savefig

__all__ = ["DASHES", "MARKERS", "MAX_LEGEND", "ORACLE_GOAL", "RECORD_WIDTH", "REFERENCE",
           "TRUTH", "Dots", "Series", "caption", "constant_text", "direct_labels", "dot_plot",
           "figure", "groups", "is_constant", "legend", "log_axis", "number", "oracle_figure",
           "panel_legend", "save", "series_plot", "setting_text", "style", "truth_handle",
           "window"]

#: Markers of the series, in order (hollow, so that one shows through another).
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h", "*", "p")
#: Line styles of the series, in order.
DASHES = ("-", "--", "-.", ":", (0, (6, 1.5, 1, 1.5, 1, 1.5)), (0, (9, 2.5)))
#: ``gid`` of references (the truth, the campaigns): last in the legend.
REFERENCE = "reference"
#: How the truth is drawn, everywhere.
TRUTH = {"color": "black", "linestyle": "--", "linewidth": 1.3, "zorder": 1,
         "gid": REFERENCE}
#: At most this many plotted values on a log axis are ticked one by one.
MAX_VALUE_TICKS = 8
#: Width in inches of a kind's figure of record: drawn at 100 dpi, it is shown at its own
#: size (650 px) on the report's first screen, where the figures stand side by side.
RECORD_WIDTH = 6.5
#: Entries of a legend at most (series and reference lines): more cannot be matched by eye.
MAX_LEGEND = 6


def figure(nrows: int = 1, ncols: int = 1, *, width: float = 6.4, height: float = 4.0,
           **subplots):
    """A new figure on the Agg canvas with constrained layout and a 2-d array of axes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False, **subplots)
    return fig, axes


def style(j: int) -> dict:
    """Colour, hollow marker, line style and width of series ``j`` (unique for ``j < 60``).
    Later series are thinner with smaller marks, so that a series drawn over an identical
    one leaves it visible around it."""
    k = j % 5
    return {"color": f"C{j % 10}", "marker": MARKERS[j % len(MARKERS)],
            "linestyle": DASHES[j % len(DASHES)], "linewidth": 2.4 - 0.35 * k,
            "markersize": 10.0 - 1.3 * k, "markerfacecolor": "none",
            "markeredgewidth": 1.5, "zorder": 2 + 0.1 * j}


def number(v: float) -> str:
    """A tick label a reader reads at once: ``500``, ``1,000``, ``20,000``, ``0.5``,
    ``0.02``, ``1e-05``."""
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}" if a < 1e12 else f"{v:.0e}"
    if a >= 1e-3:
        return f"{v:.3g}"
    return f"{v:.0e}"


def _log_ticks(lo: float, hi: float) -> list[float]:
    """1-2-5 ticks in [lo, hi] (every decade when they are too many; 1 to 9 when too few)."""
    if not (lo > 0 and hi > lo and math.isfinite(hi)):
        return []
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    for subs in ((1, 2, 5), (1, 1.5, 2, 3, 4, 5, 6, 7, 8, 9), (1,)):
        ticks = [m * 10.0 ** e for e in range(first, last + 1) for m in subs]
        ticks = [t for t in ticks if lo * (1 - 1e-9) <= t <= hi * (1 + 1e-9)]
        if subs == (1, 2, 5) and 3 <= len(ticks) <= 10:
            return ticks
        if subs != (1, 2, 5) and len(ticks) >= 3 and (subs == (1,) or len(ticks) <= 10):
            step = max(1, math.ceil(len(ticks) / 10))
            return ticks[::step]
    return ticks


def log_axis(ax, which: str = "x", values: Sequence[float] | None = None) -> None:
    """A log scale on ``ax``'s ``which`` axis with labelled ticks at readable values: at the
    plotted ``values`` when they are at most :data:`MAX_VALUE_TICKS` (the swept sizes),
    else at 1-2-5 steps of the visible range; labels as plain numbers (:func:`number`).

    Call it after drawing (the range is the one autoscaling found)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    axis = ax.xaxis if which == "x" else ax.yaxis
    (ax.set_xscale if which == "x" else ax.set_yscale)("log", nonpositive="clip")
    lo, hi = ax.get_xlim() if which == "x" else ax.get_ylim()
    lo, hi = min(lo, hi), max(lo, hi)
    given = sorted({float(v) for v in values or () if v is not None and math.isfinite(v)
                    and v > 0})
    ticks = given if 1 <= len(given) <= MAX_VALUE_TICKS else _log_ticks(lo, hi)
    if not ticks:
        return
    # a narrow panel holds fewer labels: about one per 0.45 inch across, 0.25 inch up
    box = ax.get_position()
    fig_w, fig_h = ax.figure.get_size_inches()
    room = max(2, int(box.width * fig_w / 0.45) if which == "x" else
               int(box.height * fig_h / 0.25))
    if len(ticks) > room and ticks is not given:
        decades = [t for t in ticks if math.isclose(math.log10(t), round(math.log10(t)))]
        ticks = decades if 2 <= len(decades) <= room else ticks[::math.ceil(len(ticks) / room)]
    elif len(ticks) > room:
        ticks = ticks[::math.ceil(len(ticks) / room)] + ([ticks[-1]] if (len(ticks) - 1)
                                                          % math.ceil(len(ticks) / room)
                                                          else [])
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(FuncFormatter(lambda v, _: number(v)))
    axis.set_minor_locator(NullLocator())
    new_lo, new_hi = min(lo, ticks[0] / 1.15), max(hi, ticks[-1] * 1.15)
    (ax.set_xlim if which == "x" else ax.set_ylim)(new_lo, new_hi)


def legend(fig, *, handles=None, labels=None, title: str | None = None):
    """One legend for the whole figure, under every panel (outside the data), each label
    once -- the shared legend of a grid -- in as many columns as the figure's width holds;
    the series first, reference lines (``gid`` :data:`REFERENCE`: the truth, campaign
    starts) last. ``handles``/``labels`` default to those of every axes; ``None`` when
    there is nothing to label."""
    if handles is None:
        from matplotlib.artist import Artist

        seen: dict[str, object] = {}
        for ax in fig.axes:
            for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
                if lab and not lab.startswith("_") and lab not in seen:
                    seen[lab] = h

        def reference(lab) -> bool:  # the truth, campaign windows: last
            h = seen[lab]
            return isinstance(h, Artist) and h.get_gid() == REFERENCE

        labels = sorted(seen, key=reference)  # stable
        handles = [seen[lab] for lab in labels]
    if not handles:
        return None
    entry = max(len(lab) for lab in labels) * 0.075 + 0.7  # inches, at 8 pt
    ncols = max(1, min(len(labels), int(fig.get_figwidth() // entry)))
    return fig.legend(handles, labels, loc="outside lower center", ncols=ncols, fontsize=8,
                      title=title, title_fontsize=8)


def panel_legend(ax, *, ncols: int = 2):
    """A short legend under one panel, of its own marks only (series first, references
    last): for a figure whose panels draw different things, where one legend for all
    would ask the eye to match marks across panels. ``None`` when nothing is labelled."""
    from matplotlib.artist import Artist

    pairs = [(h, lab) for h, lab in zip(*ax.get_legend_handles_labels(), strict=True)
             if lab and not lab.startswith("_")]
    if not pairs:
        return None
    pairs.sort(key=lambda p: isinstance(p[0], Artist) and p[0].get_gid() == REFERENCE)
    return ax.legend(*zip(*pairs, strict=True), loc="upper center",
                     bbox_to_anchor=(0.5, -0.2), fontsize=7, ncols=min(ncols, len(pairs)),
                     frameon=False, handletextpad=0.3, columnspacing=1.0)


def caption(fig, title: str, note: str = "") -> None:
    """The figure's title and, under it, a smaller note of what the marks and bars are."""
    width = max(40, int(fig.get_figwidth() * 12))  # characters of 9 pt at 100 dpi
    text = "\n".join(textwrap.wrap(title, width) + textwrap.wrap(note, width))
    fig.suptitle(text, fontsize=9)


@dataclass
class Dots:
    """One series of a dot plot: per category its ``values``, the interval ``[low, high]``
    drawn as a thick bar, and optionally a ``spread`` ``[spread_low, spread_high]`` drawn as
    a thin line (``nan`` where there is none). ``j`` picks its :func:`style`; ``by_row``
    colours each row by the style of its category's index instead (one series whose rows
    are the estimators); ``color`` overrides the style's colour (a series that must not be
    read as one of another panel's coloured series)."""

    label: str
    values: Sequence[float]
    low: Sequence[float] | None = None
    high: Sequence[float] | None = None
    spread_low: Sequence[float] | None = None
    spread_high: Sequence[float] | None = None
    j: int = 0
    by_row: bool = False
    color: str | None = None


def dot_plot(ax, categories: Sequence[str], series: Sequence[Dots], *,
             truths: Sequence[float] | None = None, truth_label: str = "truth",
             row_styles: Sequence[int] | None = None, markersize: float = 7.0,
             spread: float = 0.22) -> None:
    """A horizontal dot plot: one row per category (top to bottom), each series a dot with
    its interval, several series side by side within a row (``spread``: the farthest from
    the row's middle, in rows). The truth of each row is a black mark, or one dashed
    vertical line when every row shares it.

    ``row_styles``: with a ``by_row`` series, the style index of each row (default: its
    position)."""
    import numpy as np

    n = len(categories)
    y = np.arange(n, dtype=float)
    k = len(series)
    offsets = np.linspace(-spread, spread, k) if k > 1 else np.zeros(1)
    for s, off in zip(series, offsets, strict=True):
        vals = np.asarray(s.values, dtype=float)
        for i in range(n):
            st = style(row_styles[i] if row_styles is not None else i) if s.by_row \
                else style(s.j)
            if s.color is not None:
                st = {**st, "color": s.color}
            yy = y[i] + off
            if s.spread_low is not None and math.isfinite(s.spread_low[i]) \
                    and math.isfinite(s.spread_high[i]):
                ax.plot([s.spread_low[i], s.spread_high[i]], [yy, yy], color=st["color"],
                        lw=1.0, alpha=0.8, solid_capstyle="butt")
            if not math.isfinite(vals[i]):
                continue
            xerr = None
            if s.low is not None and math.isfinite(s.low[i]) and math.isfinite(s.high[i]):
                xerr = [[max(0.0, vals[i] - s.low[i])], [max(0.0, s.high[i] - vals[i])]]
            ax.errorbar([vals[i]], [yy], xerr=xerr, fmt=st["marker"], color=st["color"],
                        markersize=markersize, markerfacecolor="none", markeredgewidth=1.6,
                        elinewidth=2.4, capsize=3,
                        label=s.label if i == 0 and not s.by_row else None)
        if s.by_row:  # rows in their own colours: the legend shows a neutral mark
            ax.plot([], [], color="0.35", marker="o", markerfacecolor="none", lw=2.4,
                    label=s.label)
    if truths is not None:
        t = np.asarray(truths, dtype=float)
        finite = np.isfinite(t)
        if finite.any() and np.all(t[finite] == t[finite][0]) and finite.all():
            ax.axvline(t[0], label=truth_label, **TRUTH)
        elif finite.any():
            ax.plot(t[finite], y[finite], linestyle="none", marker="|", color="black",
                    markersize=18, markeredgewidth=2.0, label=truth_label, zorder=1,
                    gid=REFERENCE)
    ax.set_yticks(y, list(categories), fontsize=8)
    ax.set_ylim(n - 0.5, -0.5)  # the first category on top
    ax.grid(axis="x", alpha=0.3)


def truth_handle():
    """The legend's mark of the truth: a dashed line, or a black mark per row."""
    from matplotlib.lines import Line2D

    return Line2D([], [], marker="|", markersize=10, markeredgewidth=2.0, **TRUTH)


@dataclass
class Series:
    """One series against x: ``y`` at ``x`` with symmetric ``err`` (half-widths of the
    interval, ``nan``: none) and its ``truth`` at each x (``nan``: none); ``j`` picks its
    :func:`style`."""

    label: str
    x: Sequence[float]
    y: Sequence[float]
    err: Sequence[float] | None = None
    truth: Sequence[float] | None = None
    j: int = 0


def series_plot(ax, series: Sequence[Series], *, x_label: str, y_label: str,
                log_x: bool | None = None, log_y: bool = False,
                dot_label: str = "estimate (95% interval)", truth_label: str = "truth") -> str:
    """Series against x, or a dot plot when they share a single x value.

    Lines: each series in its :func:`style` with its error bars; the truth black and
    dashed when every series has the same, else thin in each series' colour; the x axis
    logarithmic when ``log_x`` (``None``: when the positive values span a factor of 8 or
    more), ticked at the plotted values when they are few. Dot plot: one row per series,
    the metric (``y_label``) across, the truth as a mark or a line. ``truth_label`` names
    the truth in the legend. Returns ``"lines"`` or ``"dots"``."""
    import numpy as np

    series = [s for s in series if len(s.x)]
    xs_all = sorted({float(x) for s in series for x in s.x})
    if not any(math.isfinite(float(v)) for s in series for v in s.y):
        ax.text(0.5, 0.5, "no finite value to draw", transform=ax.transAxes, ha="center",
                va="center", color="0.4")
    if len(xs_all) <= 1:
        y = [float(s.y[0]) for s in series]
        err = [float(s.err[0]) if s.err is not None else math.nan for s in series]
        dot_plot(ax, [s.label for s in series], [Dots(
            dot_label, y, [a - e for a, e in zip(y, err, strict=True)],
            [a + e for a, e in zip(y, err, strict=True)], by_row=True)],
            truths=[float(s.truth[0]) if s.truth is not None else math.nan
                    for s in series], truth_label=truth_label,
            row_styles=[s.j for s in series])
        if log_y:
            log_axis(ax, "x")
        ax.set_xlabel(y_label)
        return "dots"
    for s in series:
        order = np.argsort(np.asarray(s.x, dtype=float), kind="stable")
        x = np.asarray(s.x, dtype=float)[order]
        y = np.asarray(s.y, dtype=float)[order]
        err = None if s.err is None else np.nan_to_num(
            np.asarray(s.err, dtype=float)[order], nan=0.0)
        ax.errorbar(x, y, yerr=err, capsize=2, label=s.label, **style(s.j))
    curves = {s.label: [(float(x), float(t)) for x, t in sorted(zip(s.x, s.truth,
                                                                    strict=True))
                        if math.isfinite(t)]
              for s in series if s.truth is not None}
    curves = {k: v for k, v in curves.items() if v}
    if curves:
        first = next(iter(curves.values()))
        if all(c == first for c in curves.values()):
            ax.plot(*zip(*first, strict=True), label=truth_label, **TRUTH)
        else:
            by_label = {s.label: s for s in series}
            for n, (lab, c) in enumerate(curves.items()):
                ax.plot(*zip(*c, strict=True), color=style(by_label[lab].j)["color"],
                        lw=0.9, ls=(0, (2, 2)), gid=REFERENCE,
                        label=f"{truth_label} (thin, in the series' colour)" if n == 0
                        else None)
    if log_x is None:
        log_x = xs_all[0] > 0 and xs_all[-1] / xs_all[0] >= 8
    if log_x:
        log_axis(ax, "x", xs_all)
    elif len(xs_all) <= MAX_VALUE_TICKS:
        ax.set_xticks(xs_all, [number(x) for x in xs_all])
    if log_y:
        log_axis(ax, "y")
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.grid(alpha=0.3)
    if len(series) > MAX_LEGEND:
        direct_labels(ax)
    return "lines"


def direct_labels(ax) -> None:
    """Name each labelled series of ``ax`` at its last point, in its colour, instead of in
    the legend (more series than :data:`MAX_LEGEND` cannot be matched by eye): right of the
    panel, at the height where its line ends; labels that would overlap are pushed apart
    (a line of 7-point text apart)."""
    import numpy as np

    ax.figure.canvas.draw()  # the limits and scales are final
    to_axes = ax.transAxes.inverted()
    ends = []
    for c in ax.containers:
        label = c.get_label()
        if not label or label.startswith("_"):
            continue
        line = c.lines[0]
        x, y = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
        ok = np.isfinite(x) & np.isfinite(y)
        if not ok.any():
            continue
        j = np.flatnonzero(ok)[-1]
        point = to_axes.transform(ax.transData.transform((x[j], y[j])))
        ends.append([point[1], label, line.get_color()])
        c.set_label("_" + label)
        for artist in (line, *c.lines[1], *c.lines[2]):
            artist.set_label("_" + label)
    ends.sort(key=lambda e: e[0])
    gap = 7 * 1.3 * ax.figure.dpi / 72 / max(ax.get_window_extent().height, 1.0)
    for k in range(1, len(ends)):  # push apart, upwards
        ends[k][0] = max(ends[k][0], ends[k - 1][0] + gap)
    shift = max(0.0, ends[-1][0] - 0.98) if ends else 0.0
    for e in ends:
        ax.annotate(e[1], xy=(1.02, e[0] - shift), xycoords="axes fraction", fontsize=7,
                    color=e[2], va="center", ha="left", annotation_clip=False)


#: Characters of one line of a figure's text at most (names come from scenarios).
MAX_TEXT_LINE = 160


def _as_text(fig) -> None:
    """Every text of ``fig`` as plain text: no mathtext (a ``$`` in a name is a dollar),
    each line at most :data:`MAX_TEXT_LINE` characters (a received run's 100,000-character
    name costs minutes of layout, and says nothing more)."""
    from matplotlib.text import Text
    from matplotlib.ticker import FixedFormatter, FuncFormatter

    def clip(text: str) -> str:
        if len(text) <= MAX_TEXT_LINE:
            return text
        return "\n".join(line if len(line) <= MAX_TEXT_LINE else
                         line[:MAX_TEXT_LINE - 3] + "..." for line in text.split("\n")[:12])

    for ax in fig.axes:  # tick labels are made at drawing time: clip them at the source
        for axis in (ax.xaxis, ax.yaxis):
            fmt = axis.get_major_formatter()
            if isinstance(fmt, FixedFormatter):
                fmt.seq = [clip(str(x)) for x in fmt.seq]
            elif isinstance(fmt, FuncFormatter) and not getattr(fmt.func, "_clipped", False):
                def clipped(x, pos=None, func=fmt.func):
                    return clip(str(func(x, pos)))
                clipped._clipped = True
                fmt.func = clipped
    for t in fig.findobj(Text):
        t.set_parse_math(False)
        t.set_text(clip(t.get_text()))


def save(fig, path, *, dpi: int = 110) -> Path:
    """Write ``fig`` as a PNG, atomically (nothing under ``path`` if the write fails); its
    texts are plain text, each line clipped (:func:`_as_text`)."""
    path = Path(path)
    _as_text(fig)
    atomic_savefig(fig, path, dpi=dpi)
    return path


# --- what every kind's figures share: settings, constants, campaign windows -----------------

def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def groups(rows, x_key: str | None = None, *, ignore: Sequence[str] = ()) -> list[tuple]:
    """Rows split by their setting: the values of the parameters other than ``x_key`` (and
    ``ignore``) that differ between ``rows``. Returns ``[(setting, rows), ...]`` in the
    order first met, ``setting`` a dict of those values (empty: one setting).

    Within one group only ``x_key`` varies, so that its values are a sweep that may be an
    axis: a size that each data set or logger fixes (a categorical parameter's own
    ``n_rounds``) falls into that category's group as a single value -- a dot plot, never a
    point on a numeric axis shared with the other categories; two settings of another swept
    parameter (``n_bootstrap``) are never joined into one line."""
    import json

    rows = list(rows)
    values: dict[str, set] = {}
    for r in rows:
        for k, v in r.params.items():
            values.setdefault(k, set()).add(json.dumps(v, sort_keys=True))
    keys = [k for k, vs in values.items() if len(vs) > 1 and k != x_key and k not in ignore]
    out: dict[str, tuple] = {}
    for r in rows:
        setting = {k: r.params.get(k) for k in keys}
        out.setdefault(json.dumps(setting, sort_keys=True), (setting, []))[1].append(r)
    return list(out.values())


def setting_text(setting: dict) -> str:
    """``click_model=cascade, k=10`` (empty for no setting)."""
    return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                     for k, v in setting.items())


def is_constant(values) -> bool:
    """Two or more finite values, all equal: a panel of them would be a flat line."""
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    return len(vals) > 1 and all(v == vals[0] for v in vals)


def constant_text(ax, text: str) -> None:
    """A panel whose metric has one value everywhere says so in a line of text instead of
    drawing it (``coverage is 1 for every estimator``)."""
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=8,
            wrap=True, color="0.25")
    ax.set_xticks([])
    ax.set_yticks([])
    for side in ax.spines.values():
        side.set_visible(False)


def window(ax, start: float, end: float, *, label: str | None = "campaign") -> None:
    """A shaded span ``[start, end)`` of the x axis (a campaign), a reference of the
    legend."""
    ax.axvspan(start - 0.5, max(end, start + 1) - 0.5, color="0.55", alpha=0.22, lw=0,
               zorder=0, gid=REFERENCE, label=label)


# --- choosers against the oracle: estimator selection's figure of record ----------------------

#: The goal a selector is held to (issue 37): its pick's RMSE within this many times the
#: oracle's, the candidate of least RMSE over the logs.
ORACLE_GOAL = 1.2


def _ratio_ticks(lo: float, hi: float) -> list[float]:
    """Ticks of a ratio axis in ``[lo, hi]``: 1-2-5 steps, with 0.8, 1.2 and 1.5 when the
    range is narrow (two or fewer of those)."""
    steps = [m * 10.0 ** e for e in range(-3, 4) for m in (1, 2, 5)]
    ticks = [t for t in steps if lo <= t <= hi]
    if len(ticks) <= 2:
        ticks = sorted(ticks + [t for t in (0.5, 0.8, 1.2, 1.5, 3.0) if lo <= t <= hi
                                and t not in ticks])
    return ticks


def oracle_figure(panels: Sequence[tuple[str, Sequence[str], Sequence[Dots]]], path, *,
                  title: str, note: str,
                  x_label: str = "RMSE / the oracle's RMSE") -> Path:
    """Each chooser's RMSE over the oracle's, per cell: one dot plot per panel (``(title,
    rows, series)``, the panels side by side, at most 3 a row; rows named once when panels
    side by side have the same), one row per cell, one mark per chooser (a series: its own
    look in every panel), on the same log axis in every panel; the oracle (1) black and
    dashed, the goal (:data:`ORACLE_GOAL` times the oracle) dotted; one legend under the
    panels. Written at :data:`RECORD_WIDTH` (a figure of record)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    panels = [p for p in panels if len(p[1])]
    k = max([len(p[2]) for p in panels] + [1])
    row = max(0.4, 0.1 + 0.12 * k)  # inches a row: its marks ~0.1 inch apart
    ncols = min(3, max(1, len(panels)))
    nrows = math.ceil(len(panels) / ncols)
    tallest = [max(len(p[1]) for p in panels[r * ncols:(r + 1) * ncols])
               for r in range(nrows)] or [1]
    fig, axes = figure(nrows, ncols, width=RECORD_WIDTH, height=row * sum(tallest)
                       + 0.4 * nrows + 1.5, gridspec_kw={"height_ratios": tallest})
    flat = list(axes.flat)
    values = [v for _, _, dots in panels for d in dots
              for v in (*d.values, *(d.low or ()), *(d.high or ()))]
    finite = [v for v in values if v is not None and math.isfinite(v) and v > 0]
    lo, hi = min(finite + [1.0]) / 1.12, max(finite + [ORACLE_GOAL]) * 1.12
    ticks = _ratio_ticks(lo, hi)
    for n, (ax, (name, cats, dots)) in enumerate(zip(flat, panels, strict=False)):
        dot_plot(ax, cats, dots, markersize=5.5, spread=0.3 if k > 2 else 0.2)
        ax.axvline(1.0, label="oracle: the best fixed candidate", **TRUTH)
        ax.axvline(ORACLE_GOAL, color="0.35", linestyle=":", linewidth=1.2, zorder=1,
                   gid=REFERENCE, label=f"{ORACLE_GOAL:g} x the oracle: the goal")
        ax.set_xscale("log")
        ax.set_xlim(lo, hi)
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: number(v)))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.tick_params(labelsize=7)
        left = panels[n - 1] if n % ncols else None
        if left is not None and list(left[1]) == list(cats):
            ax.tick_params(labelleft=False)  # the same rows: named once, on the left
        if name:
            ax.set_title(name, fontsize=8)
    for n, ax in enumerate(flat[:len(panels)]):
        if n + ncols >= len(panels):  # nothing under it
            ax.set_xlabel(x_label, fontsize=8)
    for ax in flat[len(panels):]:
        ax.set_visible(False)
    legend(fig)
    caption(fig, title, note)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return save(fig, path, dpi=100)
