"""The one summary of a run (issue 22, section 1; issue 27, section 2): bias, RMSE, spread
and coverage over per-log estimates, checked against hand computations and a plain-loop
reference, and the same numbers on the terminal, in report.md, report.html and the API."""

import html.parser
import io
import json
import math
import sys
from contextlib import redirect_stdout

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import recloop
from recloop import summarize
from recloop._cli import main

NAN = math.nan


def est(value, *, truth=NAN, lo=NAN, hi=NAN, stderr=NAN, variant="v", metric="value",
        tick=None, params=None, agent="a", evaluation="ev"):
    return {"evaluation": evaluation, "agent": agent, "variant": variant, "metric": metric,
            "tick": tick, "params": params or {}, "estimate": value, "stderr": stderr,
            "ci_low": lo, "ci_high": hi, "truth": truth}


# -- hand computations -------------------------------------------------------------------------

def test_bias_rmse_spread_and_coverage_by_hand():
    """Errors 0.1, -0.4, 0.6 against a truth of 0.5: bias 0.1, RMSE sqrt(0.53/3), sd of
    the estimates sqrt(0.37 / 2) (n - 1 in the denominator), 2 of 3 intervals cover."""
    rows = [est(0.6, truth=0.5, lo=0.4, hi=0.8), est(0.1, truth=0.5, lo=0.0, hi=0.3),
            est(1.1, truth=0.5, lo=0.2, hi=1.2)]
    (s,) = summarize(rows)
    assert (s.n, s.n_nan, s.n_ci) == (3, 0, 3)
    assert s.estimate == pytest.approx(0.6, abs=1e-15)
    assert s.truth == 0.5
    assert s.bias == pytest.approx(0.1, abs=1e-15)  # not -0.1: estimate - truth
    assert s.rmse == pytest.approx(math.sqrt((0.01 + 0.16 + 0.36) / 3), rel=1e-14)
    assert s.sd == pytest.approx(math.sqrt((0.0 + 0.25 + 0.25) / 2), rel=1e-14)
    assert s.se == pytest.approx(s.sd / math.sqrt(3), rel=1e-14)
    assert s.coverage == 2 / 3
    assert s.relative_rmse == pytest.approx(s.rmse / 0.5, rel=1e-14)


def test_a_mean_of_estimates_is_not_an_rmse():
    """The old summary compared the mean estimate with the truth: estimates 0.4 and 0.6
    around 0.5 gave an "RMSE" of 0. Over the logs it is 0.1."""
    (s,) = summarize([est(0.4, truth=0.5), est(0.6, truth=0.5)])
    assert s.bias == pytest.approx(0.0, abs=1e-15)
    assert s.rmse == pytest.approx(0.1, rel=1e-14)


def test_missing_estimates_intervals_and_truths():
    rows = [est(NAN, truth=1.0), est(0.8, truth=1.0), est(1.4, truth=1.0, lo=1.0, hi=1.0),
            est(math.inf, truth=1.0)]
    (s,) = summarize(rows)
    assert (s.n, s.n_nan, s.nan_rate) == (2, 2, 0.5)
    assert s.bias == pytest.approx(0.1, abs=1e-15)
    # one interval, of zero width: an exact value, nothing to cover
    assert s.n_ci == 1 and math.isnan(s.coverage)
    (s,) = summarize([est(0.3, stderr=0.05), est(NAN)])
    assert math.isnan(s.truth) and math.isnan(s.bias) and math.isnan(s.rmse)
    assert math.isnan(s.coverage) and s.se == 0.05  # one estimate: its own stderr
    (s,) = summarize([est(0.5, truth=0.5), est(0.25, truth=0.25)])
    assert s.is_truth_itself and s.truth == 0.375  # the truth differs per unit: its mean


def test_groups_never_mix_ticks_swept_values_or_variants():
    rows = [est(0.1, truth=0.0, tick=0), est(0.3, truth=0.0, tick=1),
            est(0.5, truth=0.0, params={"T": 10}), est(0.7, truth=0.0, params={"T": 20}),
            est(0.9, truth=0.0, variant="w")]
    summary = summarize(rows)
    assert [s.rmse for s in summary] == pytest.approx([0.1, 0.3, 0.5, 0.7, 0.9])
    assert [s.n for s in summary] == [1] * 5


# -- against a plain-loop reference ------------------------------------------------------------

def reference(records):
    """The definitions of recloop._summary's docstring, one loop at a time."""
    groups = {}
    for r in records:
        key = (r["evaluation"], r["agent"], r["variant"], r["metric"], r["tick"],
               json.dumps(r["params"], sort_keys=True))
        groups.setdefault(key, []).append(r)
    out = []
    for units in groups.values():
        ok = [u for u in units if math.isfinite(u["estimate"])]
        n = len(ok)
        mean = math.fsum(u["estimate"] for u in ok) / n if n else NAN
        sd = (math.sqrt(math.fsum((u["estimate"] - mean) ** 2 for u in ok) / (n - 1))
              if n > 1 else NAN)
        with_t = [u for u in ok if math.isfinite(u["truth"])]
        m = len(with_t)
        bias = math.fsum(u["estimate"] - u["truth"] for u in with_t) / m if m else NAN
        rmse = (math.sqrt(math.fsum((u["estimate"] - u["truth"]) ** 2 for u in with_t) / m)
                if m else NAN)
        ci = [u for u in with_t if math.isfinite(u["ci_low"]) and math.isfinite(u["ci_high"])]
        covered = sum(1 for u in ci if u["ci_low"] <= u["truth"] <= u["ci_high"])
        exact = all(u["ci_high"] <= u["ci_low"] for u in ci)
        coverage = covered / len(ci) if ci and not exact else NAN
        out.append((n, len(units) - n, mean, sd, bias, rmse, coverage))
    return out


finite = st.floats(-10, 10, allow_nan=False)
maybe = st.one_of(finite, st.just(NAN))


@st.composite
def per_log_records(draw):
    out = []
    for _ in range(draw(st.integers(1, 25))):
        lo = draw(maybe)
        out.append(est(draw(st.one_of(finite, finite, st.just(NAN))),
                       truth=draw(st.sampled_from([0.25, -1.5, NAN])), lo=lo,
                       hi=lo + draw(st.sampled_from([0.0, 0.5, 2.0])),
                       variant=draw(st.sampled_from("xy")), tick=draw(st.sampled_from([None, 3])),
                       params={"T": draw(st.sampled_from([10, 20]))}))
    return out


@settings(max_examples=60)
@given(per_log_records())
def test_summarize_agrees_with_the_plain_loops(records):
    got = summarize(records)
    want = reference(records)
    assert len(got) == len(want)
    for s, (n, n_nan, mean, sd, bias, rmse, coverage) in zip(got, want, strict=True):
        assert (s.n, s.n_nan) == (n, n_nan)
        for a, b in ((s.estimate, mean), (s.sd, sd), (s.bias, bias), (s.rmse, rmse),
                     (s.coverage, coverage)):
            assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-9,
                                                                            abs=1e-12)


# -- the same numbers everywhere: terminal, report.md, report.html, API ---------------------------

SCRIPTED = '''
"""Estimators that return, on the k-th log of a cell, the truth plus a known offset (times
100 / n_rounds), with an interval of a known half-width: their bias, RMSE and coverage over
logs are known by hand."""

from evaluators import Estimate


class Scripted:
    def __init__(self, truth, offsets, half=()):
        self.truth, self.offsets, self.half = truth, offsets, half
        self.k = 0

    def __call__(self, log, action_dist, rng=None):
        j = self.k % len(self.offsets)
        self.k += 1
        value = self.truth + self.offsets[j] * 100 / log.n_rounds
        if not self.half:
            return value
        h = self.half[j]
        return Estimate(value, h / 1.96, value - h, value + h, log.n_rounds)
'''

#: Offsets of the estimators on the four logs (at n_rounds = 100; doubled at 50), and the
#: half-widths of their intervals.
CENTRED = [0.1, -0.3, 0.2, 0.0]
BIASED = [0.05, 0.15, 0.10, 0.30]
HALF = [0.06, 0.1, 0.25, 0.05]


def hand(offsets, scale, half=None):
    """bias, RMSE and coverage of one estimator at one n_rounds, by hand."""
    errors = [o * scale for o in offsets]
    bias = sum(errors) / len(errors)
    rmse = math.sqrt(sum(e * e for e in errors) / len(errors))
    coverage = (sum(abs(e) <= h for e, h in zip(errors, half, strict=True)) / len(errors)
                if half else None)
    return bias, rmse, coverage


def scenario_toml(truth: float) -> str:
    entries = []
    for name, offsets, half in (("centred", CENTRED, HALF), ("biased", BIASED, HALF),
                                ("point", BIASED, None)):
        params = f"truth = {truth!r}, offsets = {offsets}" + (f", half = {half}" if half
                                                              else "")
        entries.append(f'{{ name = "{name}", factory = "scripted:Scripted", '
                       f"params = {{ {params} }} }}")
    listed = ",\n".join(entries)
    return f"""
[run]
name = "scripted"

[world]
preset = "bred_linear"

[[evaluations]]
kind = "ope"
targets = [{{ name = "u", policy = "uniform" }}]
n_logs = 4
estimators = [
{listed},
]
sweep = {{ n_rounds = [50, 100] }}
"""


class _Tables(html.parser.HTMLParser):
    """The cells of every table of an HTML page."""

    def __init__(self):
        super().__init__()
        self.tables, self.cell = [], None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self.cell = ""

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.tables[-1][-1].append(self.cell.strip())
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data


def _as_dicts(table):
    header = table[0]
    return [dict(zip(header, r, strict=True)) for r in table[1:]]


@pytest.fixture(scope="module")
def scripted_run(tmp_path_factory):
    """A tiny ope run of the scripted estimators through the CLI: its run directory and
    what the terminal showed."""
    import simulator

    base = tmp_path_factory.mktemp("scripted")
    (base / "scripted.py").write_text(SCRIPTED)
    truth = simulator.static_policy_value(simulator.preset("bred_linear"))
    (base / "s.toml").write_text(scenario_toml(truth))
    out = io.StringIO()
    try:
        with redirect_stdout(out):
            code = main(["run", str(base / "s.toml"), "--path", str(base), "--out",
                         str(base / "out"), "--workers", "1"])
    finally:
        sys.modules.pop("scripted", None)
    assert code == 0
    return base / "out" / "scripted", out.getvalue()


def expected():
    """(variant, n_rounds) -> (bias, RMSE, coverage) by hand."""
    out = {}
    for n_rounds, scale in ((50, 2.0), (100, 1.0)):
        out["centred", n_rounds] = hand(CENTRED, scale, HALF)
        out["biased", n_rounds] = hand(BIASED, scale, HALF)
        out["point", n_rounds] = hand(BIASED, scale)
    return out


def _fmt(x):
    return "" if x is None else f"{x:.3g}"


def test_the_four_outputs_show_the_hand_computed_numbers(scripted_run):
    run_dir, terminal = scripted_run
    want = expected()
    assert want["centred", 100][0] == pytest.approx(0.0, abs=1e-15)  # bias 0, RMSE 0.187
    # 1. the terminal
    lines = terminal.splitlines()
    head = lines.index(next(ln for ln in lines if ln.startswith("evaluation ")))
    header = lines[head].split()
    shown = {}
    for ln in lines[head + 1:head + 7]:
        cells = ln.split()
        row = dict(zip(header, cells, strict=False))
        shown[row["variant"], int(row["setting"].split("=")[1])] = row
    assert len(shown) == 6
    for (variant, n_rounds), (bias, rmse, coverage) in want.items():
        row = shown[variant, n_rounds]
        assert row["logs"] == "4"
        assert float(row["bias"]) == pytest.approx(bias, abs=5e-4 * max(abs(bias), 1e-3))
        assert row["RMSE"] == _fmt(rmse)
        assert row.get("coverage", "") == _fmt(coverage)
    # 2. report.md's first table
    report = (run_dir / "report.md").read_text()
    part = report.split("## Summary", 1)[1].split("\n## ", 1)[0]
    md = [ln for ln in part.splitlines() if ln.startswith("| ")]
    md_rows = [dict(zip([c.strip() for c in md[0].strip("|").split("|")],
                        [c.strip() for c in ln.strip("|").split("|")], strict=True))
               for ln in md[1:]]
    # 3. report.html's first table: the same cells
    parser = _Tables()
    parser.feed((run_dir / "report.html").read_text())
    html_rows = _as_dicts(parser.tables[0])
    assert html_rows == md_rows and len(md_rows) == 6
    for r in md_rows:
        bias, rmse, coverage = want[r["variant"], int(r["setting"].split("=")[1])]
        # coverage: its share, then its counts where they are few ("0.25 (1/4)")
        assert r["RMSE"] == _fmt(rmse) and r["coverage"].split(" (")[0] == _fmt(coverage)
        assert r["logs"] == "4" and float(r["bias"]) == pytest.approx(bias, abs=1e-12)
        if abs(bias) > 1e-12:
            assert r["bias"] == _fmt(bias)
    # 4. the API
    summary = recloop.load_results(run_dir).summary()
    assert len(summary) == 6
    for _, s in summary.iterrows():
        bias, rmse, coverage = want[s["variant"], s["n_rounds"]]
        assert s["bias"] == pytest.approx(bias, abs=1e-12)
        assert s["rmse"] == pytest.approx(rmse, rel=1e-12)
        if coverage is None:
            assert math.isnan(s["coverage"])
        else:
            assert s["coverage"] == coverage
        scale = 2.0 if s["n_rounds"] == 50 else 1.0
        offsets = [o * scale for o in (CENTRED if s["variant"] == "centred" else BIASED)]
        mean = sum(offsets) / 4
        sd = math.sqrt(sum((o - mean) ** 2 for o in offsets) / 3)  # n - 1
        assert s["sd"] == pytest.approx(sd, rel=1e-12)
        assert s["se"] == pytest.approx(sd / 2, rel=1e-12)


def test_the_leaderboard_shows_the_same_numbers(scripted_run):
    run_dir, out = scripted_run
    report = (run_dir / "report.md").read_text()
    section = report.split("\n## ope\n", 1)[1].split("\n## ", 1)[0]
    want = expected()
    blocks = section.split("**ope, target** `u`")[1:]
    assert len(blocks) == 2
    for block in blocks:
        n_rounds = int(block.split("n_rounds = ", 1)[1].split(",")[0].split(")")[0])
        rows = [[c.strip() for c in ln.split("|")] for ln in block.splitlines()
                if ln.startswith("| ") and ln[2].isdigit()]
        assert [r[2].strip("`") for r in rows] == [
            v for v, _ in sorted(((v, want[v, n_rounds][1]) for v in ("centred", "biased",
                                                                      "point")),
                                 key=lambda t: t[1])]
        scale = 2.0 if n_rounds == 50 else 1.0
        for r in rows:
            variant = r[2].strip("`")
            bias, rmse, coverage = want[variant, n_rounds]
            offsets = CENTRED if variant == "centred" else BIASED
            sq = [(o * scale) ** 2 for o in offsets]
            mean = sum(sq) / 4
            se = math.sqrt(sum((x - mean) ** 2 for x in sq) / 3) / 2 / (2 * rmse)
            assert r[3] == f"{_fmt(rmse)} ± {se:.2g}" and r[6] == _fmt(coverage)
        # by hand: the squared errors' paired differences are within 1.96 standard errors
        # of 0 for every pair (point has biased's very errors): one rank, shared, in words
        assert [r[1] for r in rows] == ["1 (tied)"] * 3
        assert "are tied for rank 1" in block and "same 4 logs" in block
    # the terminal says it too
    assert "are tied for rank 1" in out


def test_ranks_are_shared_only_where_the_paired_comparison_cannot_separate():
    from recloop._summary import summarize
    from recloop.experiments._ope import ranks

    def logs(errors):
        return {(0, j): (0.5 + e, 0.5) for j, e in enumerate(errors)}

    a = [0.01, -0.01, 0.02, -0.02, 0.01, -0.01]
    b = [0.011, -0.012, 0.019, -0.021, 0.012, -0.01]  # a's errors, give or take
    c = [0.3, -0.3, 0.35, -0.25, 0.3, -0.3]  # clearly worse on every log
    per_log = {"a": logs(a), "b": logs(b), "c": logs(c)}
    rows = summarize([est(0.5 + e, truth=0.5, variant=v)
                      for v, errs in (("c", c), ("a", a), ("b", b))
                      for j, e in enumerate(errs)])
    got = dict(zip(sorted((r.variant for r in rows), key=lambda v: sum(
        x * x for x in {"a": a, "b": b, "c": c}[v])), ranks(rows, per_log), strict=True))
    assert got["a"][0] == got["b"][0] == "1" and got["c"][0] == "3"
    assert got["a"][1] == ["b"] and got["c"][1] == []


def test_the_measurements_table_spread_over_seeds_by_hand(tmp_path):
    """The report's "±" over seeds is the standard error with n - 1 (issue 27's mutant
    without the n/(n-1) correction passed every report test)."""
    from recloop._report import write_report
    from tests.recloop.test_report import make_run, row

    rows = [row("ev", "a", "mean_reward", v, truth=0.5, seed=s)
            for s, v in enumerate((0.4, 0.5, 0.9))]
    report = write_report(make_run(tmp_path, rows, seeds=(0, 1, 2))).read_text()
    section = report.split("## Measurements", 1)[1].split("\n## ", 1)[0]
    (line,) = [ln for ln in section.splitlines() if "| mean_reward |" in ln]
    mean = 0.6
    sd = math.sqrt(((0.4 - mean) ** 2 + (0.5 - mean) ** 2 + (0.9 - mean) ** 2) / 2)
    assert f"| {mean:.4g} ± {sd / math.sqrt(3):.2g} |" in line  # 0.6 ± 0.15
