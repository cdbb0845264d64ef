"""The figure of a fitted world's fidelity: each statistic's distance to the real data beside
the real data's own noise (:func:`simulator.noise_bands`).

A run on a world fitted to a log (``[world] calibrate_from``) keeps its fidelity report as
``fidelity.md``; the report draws this figure from the noise-band tables of that file
(:func:`bands_from_markdown`: numbers and the statistics' fixed names only, nothing else of
the file's text reaches the figure) as the figure of record of the fitted world.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

__all__ = ["PARTS", "bands_from_markdown", "plot_fidelity"]

#: The parts of a fidelity report, as the figure names them (the report's ``###`` headings
#: start with these words).
PARTS = ("in sample", "out of sample")

_BAND = r"([0-9.]+) \[([0-9.]+), ([0-9.]+)\]"
_ROW = re.compile(r"\| (\w+) \| " + _BAND + r" \| " + _BAND + r" \| (?:" + _BAND
                  + r"|-) \| (within|outside|not measured) \|")
_SPLITS = re.compile(r"Against the data's own noise \(([0-9]+) random halves")


def bands_from_markdown(text: str) -> list:
    """The noise bands of a fidelity report's Markdown (:meth:`recloop.calibration.
    CalibrationReport.to_markdown`): ``[(part, NoiseBandReport), ...]``, ``part`` one of
    :data:`PARTS`, in the file's order. Rows that do not parse, statistics not in
    :data:`simulator.DISTRIBUTIONS` and tables outside a part are skipped."""
    import simulator

    out: list = []
    part, bands, splits = None, [], 0

    def close():
        if part is not None and bands:
            out.append((part, simulator.NoiseBandReport(
                bands=tuple(bands), faithful=all(b.verdict != "outside" for b in bands))))

    for line in text.splitlines():
        if line.startswith("### "):
            close()
            head = line[4:].lower()
            part = next((p for p in PARTS if head.startswith(p)), None)
            bands = []
            continue
        found = _SPLITS.search(line)
        if found:
            splits = int(found.group(1))
        m = _ROW.fullmatch(line.strip())
        if m is None or m.group(1) not in simulator.DISTRIBUTIONS or part is None:
            continue
        x = [float(v) if v is not None else math.nan for v in m.groups()[1:10]]
        bands.append(simulator.NoiseBand(m.group(1), *x, n_splits=splits,
                                         verdict=m.group(11)))
    close()
    return out


def plot_fidelity(parts, path) -> Path | None:
    """Each statistic's KS distance from the world to the real data (a dot at the median over
    the random splits, a bar over their 95% range) beside the real data's own noise (the KS
    between two random halves of the real users: a grey band over its 95% range): a panel
    per part (in sample, out of sample), a statistic per row, the world's dot red where it
    lies outside the band. Returns the PNG's path (``None``: no band to draw).

    Parameters
    ----------
    parts : CalibrationReport or sequence of (str, simulator.NoiseBandReport)
        A fitted world's report (its in-sample and out-of-sample bands), or the parts of
        :func:`bands_from_markdown`.
    path : str or Path
        The PNG to write.
    """
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    from recloop import _plots

    if hasattr(parts, "in_sample_bands"):
        parts = [(p, b) for p, b in zip(PARTS, (parts.in_sample_bands, parts.holdout_bands),
                                        strict=True) if b is not None]
    parts = [(p, b) for p, b in parts if b.bands]
    if not parts:
        return None
    names = [b.name for b in parts[0][1].bands]
    fig, axes = _plots.figure(1, len(parts), width=_plots.RECORD_WIDTH,
                              height=0.32 * len(names) + 2.0, sharex=True)
    within, outside = _plots.style(0)["color"], "C3"
    for ax, (part, report) in zip(axes[0], parts, strict=True):
        rows = {b.name: b for b in report.bands}
        for y, name in enumerate(names):
            b = rows.get(name)
            if b is None or math.isnan(b.world):
                continue
            if math.isfinite(b.real_low):
                ax.plot([b.real_low, b.real_high], [y, y], color="0.6", lw=9, alpha=0.45,
                        solid_capstyle="butt", zorder=1)
                ax.plot([b.real, b.real], [y - 0.22, y + 0.22], color="0.35", lw=1.2,
                        zorder=2)
            colour = outside if b.verdict == "outside" else within
            ax.errorbar([b.world], [y], xerr=[[b.world - b.world_low],
                                              [b.world_high - b.world]],
                        fmt="o", color=colour, markersize=5, elinewidth=1.4, capsize=2,
                        zorder=3)
        ax.set_yticks(range(len(names)), names, fontsize=7)
        ax.set_ylim(len(names) - 0.5, -0.5)
        ax.set_xlim(left=0)
        ax.grid(axis="x", alpha=0.3)
        ax.tick_params(labelsize=7)
        ax.set_xlabel("KS distance", fontsize=8)
        n_out = sum(b.verdict == "outside" for b in report.bands)
        measured = sum(b.verdict != "not measured" for b in report.bands)
        verdict = ("faithful" if report.faithful else
                   f"NOT faithful: {n_out} of {measured} outside")
        ax.set_title(f"{part}: {verdict}", fontsize=8)
    for ax in axes[0, 1:]:
        ax.tick_params(labelleft=False)
    _plots.legend(fig, handles=[
        Line2D([], [], color=within, marker="o", markersize=5, lw=1.4),
        Line2D([], [], color=outside, marker="o", markersize=5, lw=1.4),
        Patch(color="0.6", alpha=0.45)], labels=[
        "world vs real users: within the band", "world vs real users: outside the band",
        "real half vs real half: the data's own noise"])
    splits = parts[0][1].bands[0].n_splits
    _plots.caption(fig, "The fitted world: its distance to the real data against the data's "
                   "own noise",
                   "Dot: median KS between a random half of the real users and as many "
                   f"simulated ones, bar: 95% range over {splits} splits; grey: the same "
                   "between the two real halves (line: median). Faithful where the dot lies in "
                   "the grey.")
    return _plots.save(fig, path, dpi=100)
