"""A study runs as fast as its estimators (issue 26): the evaluation-of-OPE study shape, timed
several ways in one process.

The shape: logs of ``--n`` records (default 10,000) of the ``bred_linear`` world (10 arms,
10 context features, the ``ope`` evaluation's world), softmax logging (beta 10), the three
default targets of ``ope``, seven estimators (IPS, SNIPS, DM, DR, SNDR, Switch-DR, DRos), the
ridge reward model. The logs and the targets' action distributions are drawn before the
clock starts; every way sees the same ones. Per log:

* ``per_estimator_bootstrap``: the path before issue 26 -- each model-based estimator fits
  its own model (``model="ridge"``), and DM, Switch-DR and DRos refit it on 100 bootstrap
  resamples for the model's variance;
* ``per_estimator``: each estimator fits its own model, analytic model variance;
* ``shared``: one ``fit_reward_model`` per log shared by every estimator and target,
  analytic model variance (the harness's path);
* ``shared_bootstrap``: one model per log, the bootstrap as the model variance (its
  resamples and refits shared too);
* ``floor``: the estimators given a precomputed cross-fitted prediction array (fitted before
  the clock starts): no fit, no model variance;
* ``fit``: ``fit_reward_model`` alone, with its in-sample fit (which computes the per-action
  statistics of the analytic variance): what the shared path adds to the floor once per
  log, before any estimator asks for a variance;
* ``harness``: the ``ope`` experiment function end to end (log simulation included), per log,
  from the difference of two runs of ``--logs`` and ``2 x --logs`` logs (start-up
  subtracted).

Prints ONE JSON object on its last line: per-log milliseconds of each way (best of
``--repeat`` interleaved passes; wall clock, and the process's CPU time, which a machine
shared with other jobs inflates less), the ratios the issue's targets name (``shared`` against
``floor`` and against the per-estimator paths), the targets and whether they are met,
``same_estimates`` (the shared path equals each estimator fitting its own model from the
same stream, to the last bit), the CPUs the process ran on and the load average before and
after. ``--cores 1`` (default) pins the process to one CPU (and numpy's BLAS to one thread).

Usage: ``.venv/bin/python benchmarks/study.py [--n 10000] [--logs 20] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--logs", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cores", type=int, default=1)
    args = ap.parse_args()
    if args.cores:
        cpus = sorted(os.sched_getaffinity(0))[:args.cores]
        os.sched_setaffinity(0, cpus)
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(args.cores)
        os.environ["RECLOOP_THREADS"] = str(args.cores)


    import numpy as np

    import evaluators as ev
    import simulator
    from recloop.experiments._common import child_rng, seed_sequence
    from recloop.experiments._ope import DEFAULT_TARGETS, _lookup, logged, ope, policy_table

    warnings.simplefilter("ignore")
    load0 = os.getloadavg()[0]
    config = simulator.preset("bred_linear")
    root = seed_sequence(0)
    logger = _lookup(config, policy_table(config, {"policy": "softmax", "beta": 10.0}))
    tables = [policy_table(config, t) for t in DEFAULT_TARGETS]
    logs = []
    for i in range(args.logs):
        log, atoms = logged(config, args.n, logger, root, i, 0.0)
        logs.append((log, [t[atoms][:, :, None] for t in tables], i))
    plain = (ev.ips, ev.snips)
    fitted = (ev.direct_method, ev.doubly_robust, ev.sndr, ev.switch_dr, ev.dr_os)
    with_variance = (ev.direct_method, ev.switch_dr, ev.dr_os)

    def stream(i):
        return child_rng(root, 7, i)

    def per_estimator(variance):
        def run(log, dists, i):
            out = []
            for ad in dists:
                out += [f(log, ad) for f in plain]
                out += [f(log, ad, model="ridge", rng=stream(i),
                          **({"model_variance": variance} if f in with_variance else {}))
                        for f in fitted]
            return out
        return run

    def shared(variance):
        def run(log, dists, i):
            m = ev.fit_reward_model(log, "ridge", rng=stream(i))
            out = []
            for ad in dists:
                out += [f(log, ad) for f in plain]
                out += [f(log, ad, model=m,
                          **({"model_variance": variance} if f in with_variance else {}))
                        for f in fitted]
            return out
        return run

    arrays = {i: ev.fit_reward_model(log, "ridge", rng=stream(i)).cross_fitted
              for log, _, i in logs}

    def floor(log, dists, i):
        out = []
        for ad in dists:
            out += [f(log, ad) for f in plain]
            out += [f(log, ad, model=arrays[i]) for f in fitted]
        return out

    def fit(log, dists, i):
        return ev.fit_reward_model(log, "ridge", rng=stream(i)).in_sample

    ways = {"per_estimator_bootstrap": per_estimator("bootstrap"),
            "per_estimator": per_estimator("analytic"), "shared": shared("analytic"),
            "shared_bootstrap": shared("bootstrap"), "floor": floor, "fit": fit}
    best = {k: float("inf") for k in ways}
    cpu = dict(best)
    results = {}
    for _ in range(args.repeat):
        for name, run in ways.items():
            t0, c0 = time.perf_counter(), time.process_time()
            results[name] = [run(*x) for x in logs]
            best[name] = min(best[name], (time.perf_counter() - t0) / len(logs) * 1e3)
            cpu[name] = min(cpu[name], (time.process_time() - c0) / len(logs) * 1e3)
        print({k: round(v, 2) for k, v in best.items()}, file=sys.stderr, flush=True)
    del results["fit"]
    same = all(a == b for x, y in zip(results["shared"], results["per_estimator"], strict=True)
               for a, b in zip(x, y, strict=True)) and all(
        a == b for x, y in zip(results["shared_bootstrap"], results["per_estimator_bootstrap"],
                               strict=True) for a, b in zip(x, y, strict=True))

    est = ("ips", "snips", "direct_method", "doubly_robust", "sndr", "switch_dr", "dr_os")

    def harness(n_logs):
        t0, c0 = time.perf_counter(), time.process_time()
        ope(config, DEFAULT_TARGETS, estimators=est, logging="softmax", beta=10.0,
            n_rounds=args.n, n_logs=n_logs, rng=1)
        return np.array([time.perf_counter() - t0, time.process_time() - c0])

    h = np.min([(harness(2 * args.logs) - harness(args.logs)) / args.logs * 1e3
                for _ in range(max(1, args.repeat - 1))], axis=0)

    ms = {k: round(v, 2) for k, v in best.items()}
    ms["harness"] = round(float(h[0]), 2)
    cpu_ms = {k: round(v, 2) for k, v in cpu.items()}
    cpu_ms["harness"] = round(float(h[1]), 2)
    ratios = {
        "shared_over_floor": round(best["shared"] / best["floor"], 3),
        "per_estimator_bootstrap_over_shared": round(best["per_estimator_bootstrap"]
                                                     / best["shared"], 2),
        "per_estimator_over_shared": round(best["per_estimator"] / best["shared"], 2),
        "shared_bootstrap_over_shared": round(best["shared_bootstrap"] / best["shared"], 2),
        "harness_over_shared": round(float(h[0]) / best["shared"], 2),
        "cpu_shared_over_floor": round(cpu["shared"] / cpu["floor"], 3),
        # what the 1.5x target leaves for the fit and every interval's model variance
        "fit_over_floor": round(best["fit"] / best["floor"], 3),
        "variance_over_floor": round((best["shared"] - best["fit"] - best["floor"])
                                     / best["floor"], 3),
    }
    targets = {"shared_ms_per_log <= 30": best["shared"] <= 30.0,
               "shared_over_floor <= 1.5": best["shared"] / best["floor"] <= 1.5,
               "cpu: shared_ms_per_log <= 30": cpu["shared"] <= 30.0,
               "cpu: shared_over_floor <= 1.5": cpu["shared"] / cpu["floor"] <= 1.5}
    out = {"n_rounds": args.n, "n_actions": config.n_arms, "dim_context": config.dim,
           "targets_policies": len(tables), "estimators": len(est), "logs": args.logs,
           "ms_per_log": ms, "cpu_ms_per_log": cpu_ms, "ratios": ratios, "targets": targets,
           "same_estimates": same,
           "cpus": sorted(os.sched_getaffinity(0)),
           "load": [round(load0, 2), round(os.getloadavg()[0], 2)]}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
