"""Speed and memory of simulator.calibrate (issues 15, 23) on MovieLens-shaped logs, with the
fidelity of the fitted worlds beside the times.

    python benchmarks/calibrate.py                 # 100K and 1M shapes
    python benchmarks/calibrate.py --data ../shared/data/ml-100k/u.data   # and the real file

Each calibration runs in a fresh child process that only loads the log (written by this
script beforehand) and fits it, so that its peak memory is the calibration's: the child's
``ru_maxrss`` from ``resource.getrusage`` (whole-process peak resident set, including the
interpreter, numpy and scipy; not tracemalloc, which would miss BLAS buffers and slow the
fit). Logs: ``evaluators.datasets.synthetic_ratings`` (943 x 1,682 with 100,000 ratings;
6,040 x 3,706 with 1,000,209) with timestamps: every user gets sessions drawn from the
session law fitted to MovieLens-100K (horizons of 215 and 1,038 days, the files' own) and
each of its ratings falls in one of them (a first session weighs 1, a later one 0.286), so
that the fit includes the session process and the rating model, ``n_factors=8``.

After the timed fit the child simulates the world once and prints the in-sample fidelity
(KS of each distribution, the rating histogram's total variation, the worst distribution):
the world was fitted to that log, so these figures check the fit, not a prediction. With
``--data``, the real file is fitted and reported in and out of sample
(``recloop.calibration.fidelity_report``: a second fit on the first 80% of the span, its
continuation over the last 20%, and the recommender ranking), timed apart.

The reference beside the fit: one evaluation of the negative log-likelihood by the blocked
path (dense part by blocks of 65,536 cells plus a sparse correction) against the cell-by-cell
reference ``_nll_reference`` on the whole dense matrix (100K shape).

Prints progress lines, then ONE JSON object on the last line: ``calibrate_100k_s``,
``calibrate_1m_s`` (targets on 2 cores: <= 10 s and <= 60 s), ``peak_rss_100k_mb``,
``peak_rss_1m_mb`` (target <= 2,048 MB), ``calibrate_*_cpu_s`` (the fit's CPU seconds: on a
machine shared with other jobs, what an idle one would take, the fit being single-threaded),
sweeps, log-likelihoods and fidelity figures, the
NLL timings and their ratio, and the 1-minute load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

# Sibling scripts (benchmarks/simulator.py) would shadow the packages of the same name when
# this file is run as a script, which puts its own folder first on sys.path.
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]

import numpy as np  # noqa: E402

SHAPES = {"100k": (943, 1682, 100_000), "1m": (6040, 3706, 1_000_209)}
#: Days spanned by the MovieLens 100K and 1M files.
HORIZONS = {"100k": 215, "1m": 1038}


def _fidelity_figures(report, prefix: str) -> dict:
    out = {f"{prefix}ks_{d.name}": round(d.ks, 4) for d in report.distances
           if d.verdict != "not measured"}
    rating = report["rating"]
    if rating.verdict != "not measured":
        out[f"{prefix}rating_tv"] = round(rating.tv, 4)
    w = report.worst
    out[f"{prefix}worst"] = None if w is None else w.name
    return out


def child(path: str, n_factors: int) -> None:
    """Fit the log at ``path`` and print one JSON line (run in a fresh process)."""
    import simulator

    real = not path.endswith(".npz")
    if real:
        from evaluators import datasets

        data = datasets.load_movielens_100k(path)
    else:
        with np.load(path) as d:
            data = (d["users"], d["items"], d["ratings"], d["timestamps"])
    t0, cpu0 = time.perf_counter(), time.process_time()
    cal = simulator.calibrate(data, n_factors=n_factors, rng=0)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out = {"seconds": seconds, "cpu_seconds": cpu, "n_iter": cal.info.n_iter,
           "converged": cal.info.converged, "log_likelihood": cal.info.log_likelihood,
           "peak_rss_mb": peak,
           "rating_converged": cal.info.rating_converged, "n_sessions": cal.info.n_sessions,
           "drift_model": cal.info.drift_model, "appeal_bins": cal.info.appeal_bins}
    t0 = time.perf_counter()
    if real:  # in and out of sample, with the recommender ranking
        from recloop.calibration import fidelity_report

        rep = fidelity_report(cal, seed=0, rng=0)
        out.update(_fidelity_figures(rep.in_sample, "in_sample_"))
        out.update(_fidelity_figures(rep.holdout.report, "out_of_sample_"))
        for part, rank in (("in_sample_", rep.in_sample_ranking),
                           ("out_of_sample_", rep.holdout_ranking)):
            out[f"{part}kendall_tau"] = round(rank.tau, 3)
            out[f"{part}kendall_tau_ci"] = [round(rank.tau_ci_low, 3),
                                            round(rank.tau_ci_high, 3)]
            out[f"{part}halves_tau"] = [round(rank.halves_tau, 3),
                                        round(rank.halves_tau_ci_low, 3),
                                        round(rank.halves_tau_ci_high, 3)]
            out[f"{part}knn_gap_real_sim"] = [round(rank.gap_real, 4),
                                              round(rank.gap_simulated, 4)]
        out["out_of_sample_bands_outside"] = [b.name for b in rep.holdout_bands.bands
                                              if b.verdict == "outside"]
        out["verdict_out_of_sample"] = "faithful" if rep.faithful else "not faithful"
    else:
        world = cal.world(0)
        world.simulate(cal.config.n_ticks - 1)
        out.update(_fidelity_figures(simulator.fidelity(cal.observed, world.edges, rng=0),
                                     "in_sample_"))
    out["fidelity_s"] = time.perf_counter() - t0
    print(json.dumps(out))


def generate(name: str, path: str) -> None:
    """Write the synthetic log of shape ``name`` to ``path`` (run in a fresh process, so that
    the generator's memory never inflates the parent, whose peak a forked child inherits in
    ``ru_maxrss``): ratings of ``synthetic_ratings``, timestamps from sessions."""
    from evaluators.datasets import synthetic_ratings
    from simulator import SessionLaw
    from simulator._sessions import draw_schedule

    n_users = SHAPES[name][0]
    horizon = HORIZONS[name]
    u, i, r = synthetic_ratings(*SHAPES[name], rng=0)
    rng = np.random.default_rng(1)
    law = SessionLaw(count_mu=-0.70, count_sigma=2.82, gap_mu=1.85, gap_sigma=1.84,
                     later_weight=0.286)  # fitted to MovieLens-100K
    s = draw_schedule(law, rng.integers(0, horizon, n_users), horizon, rng)
    order = np.lexsort((s.tick, s.user))
    su, st, sw = s.user[order], s.tick[order], s.weight[order]
    cum = np.cumsum(sw)
    start = np.concatenate([[0.0], cum])[np.searchsorted(su, np.arange(n_users))]
    total = np.bincount(su, sw, minlength=n_users)
    # each rating in one of its user's sessions, with probability proportional to the weight
    pick = np.searchsorted(cum, start[u] + rng.random(u.size) * total[u], side="right")
    pick = np.minimum(pick, np.searchsorted(su, u, side="right") - 1)
    # whole days: seconds within a day would cut a session in two ticks (calibrate's ticks
    # count days from the first timestamp, not from midnight)
    times = 880_000_000 + 86400 * st[pick]
    np.savez(path, users=u, items=i, ratings=r, timestamps=times)


def run_child(path: str, n_factors: int) -> dict:
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", path,
                          "--n-factors", str(n_factors)], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def nll_timing() -> dict:
    import scipy.sparse as sp

    from recloop.experiments._loo_cf import synthetic_ratings
    from simulator import _calibrate as C

    u, i, _ = synthetic_ratings(*SHAPES["100k"], rng=0)
    n_u, n_i = SHAPES["100k"][:2]
    X = sp.csr_array((np.ones(u.size), (u, i)), shape=(n_u, n_i))
    X.sort_indices()
    rng = np.random.default_rng(0)
    m = C._Model(X, k=8, exposure=1.0, ctr=0.3, reg=1.0, phi=np.full(100, 0.01), birth=None,
                 ctr_halflife=None)
    alpha, x = rng.normal(5, 1, n_u), rng.normal(0, 0.3, (n_u, 8))
    a, f = rng.normal(-3, 1, n_i), rng.normal(0, 0.3, (n_i, 8))
    o = m.offsets(a)
    t = time.perf_counter()
    rows, _, _ = m.nll(alpha, x, a, f, o)
    fast = time.perf_counter() - t
    t = time.perf_counter()
    ref = C._nll_reference(X, alpha, x, a, f, o).sum(axis=1)
    slow = time.perf_counter() - t
    return {"nll_blocked_s": fast, "nll_reference_s": slow,
            "nll_speedup": slow / fast, "nll_max_rel_diff": float(np.max(np.abs(rows - ref)
                                                                        / np.abs(ref)))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="also time a real MovieLens 100K u.data")
    ap.add_argument("--n-factors", type=int, default=8)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--generate", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.n_factors)
        return
    if args.generate:
        generate(*args.generate)
        return
    load_before = os.getloadavg()[0]
    out: dict = {"n_factors": args.n_factors, "blas_threads": "1 (pinned by calibrate)",
                 "memory_measure": "child ru_maxrss (whole process)"}
    with tempfile.TemporaryDirectory() as tmp:
        for name, shape in SHAPES.items():
            print(f"[calibrate] generating the {name} shape {shape} ...", flush=True)
            path = os.path.join(tmp, f"{name}.npz")
            subprocess.run([sys.executable, os.path.abspath(__file__), "--generate", name,
                            path], check=True)
            print(f"[calibrate] fitting the {name} shape in a child process ...", flush=True)
            res = run_child(path, args.n_factors)
            print(f"[calibrate]   {res['seconds']:.2f} s ({res['cpu_seconds']:.2f} s CPU), "
                  f"{res['n_iter']} sweeps, peak RSS "
                  f"{res['peak_rss_mb']:.0f} MB; in-sample worst distribution "
                  f"{res['in_sample_worst']}", flush=True)
            out[f"calibrate_{name}_s"] = round(res["seconds"], 3)
            out[f"calibrate_{name}_cpu_s"] = round(res["cpu_seconds"], 3)
            out[f"peak_rss_{name}_mb"] = round(res["peak_rss_mb"], 1)
            out[f"sweeps_{name}"] = res["n_iter"]
            out[f"converged_{name}"] = res["converged"]
            out[f"rating_fit_converged_{name}"] = res["rating_converged"]
            out[f"sessions_{name}"] = res["n_sessions"]
            out[f"log_likelihood_per_cell_{name}"] = round(res["log_likelihood"], 6)
            out.update({f"{k}_{name}": v for k, v in res.items() if k.startswith("in_sample")})
            out[f"fidelity_{name}_s"] = round(res["fidelity_s"], 3)
            out[f"drift_model_{name}"] = res["drift_model"]
            out[f"appeal_bins_{name}"] = res["appeal_bins"]
    if args.data:
        print(f"[calibrate] fitting {args.data}, then its fidelity in and out of sample ...",
              flush=True)
        res = run_child(args.data, args.n_factors)
        out["calibrate_ml100k_s"] = round(res["seconds"], 3)
        out["calibrate_ml100k_cpu_s"] = round(res["cpu_seconds"], 3)
        out["peak_rss_ml100k_mb"] = round(res["peak_rss_mb"], 1)
        out["sweeps_ml100k"] = res["n_iter"]
        out["fidelity_report_ml100k_s"] = round(res["fidelity_s"], 3)
        out.update({f"ml100k_{k}": v for k, v in res.items()
                    if k.startswith(("in_sample", "out_of_sample", "verdict"))})
    print("[calibrate] likelihood: blocked path vs the cell-by-cell reference ...", flush=True)
    out.update({k: (round(v, 4) if isinstance(v, float) else v)
                for k, v in nll_timing().items()})
    out["targets_met"] = bool(out["calibrate_100k_s"] <= 10 and out["calibrate_1m_s"] <= 60
                              and out["peak_rss_1m_mb"] <= 2048)
    out["loadavg_1min_before"] = round(load_before, 2)
    out["loadavg_1min_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
