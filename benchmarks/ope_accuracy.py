"""Accuracy of the off-policy catalogue against the exact value: the headline figures of the
``large_action_spaces`` and ``estimator_selection`` studies, computed by calling the
estimators directly (no harness), truth from ``simulator.static_policy_value``.

Prints progress and ONE JSON object on its last line:

* ``large_actions``: per number of actions K and residual, per estimator: bias, RMSE,
  relative RMSE (RMSE / value), interval coverage and nan rate over ``--logs`` logs of
  ``--rounds`` records, uniform logging, in the ``large_actions`` world (two embedding
  features of 10 categories). Target: 0.8 on the truly best arm of each context, 0.2 spread
  uniformly.
* ``selection``: per setting (K, n_rounds, logging) and family (``ips`` clip, ``dr_os``
  lambda_): the RMSE of every candidate, the oracle's (the candidate with the least true
  RMSE, which only the truth can tell), SLOPE's, the regret ``SLOPE - oracle`` and whether
  SLOPE is within 10% of the oracle; and, over settings, how often it is.

Usage: ``.venv/bin/python benchmarks/ope_accuracy.py [--logs N] [--rounds N] [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import warnings

import numpy as np

_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]

import evaluators as ev  # noqa: E402
import simulator  # noqa: E402
from simulator._bandit import true_ctr  # noqa: E402  (the study's policies may see the truth)


def greedy_target(config, share=0.8):
    def policy(x, avail):
        K = avail.shape[1]
        p = np.full(avail.shape, (1 - share) / K)
        p[np.arange(len(x)), np.argmax(true_ctr(config, x, 0), axis=1)] += share
        return p
    return policy


def softmax_logging(config, beta):
    def policy(x, avail):
        z = beta * true_ctr(config, x, 0)
        p = np.exp(z - z.max(axis=1, keepdims=True))
        return p / p.sum(axis=1, keepdims=True)
    return policy


def summarise(est, truth):
    v = np.array([e.value for e in est])
    ok = np.isfinite(v)
    err = v[ok] - truth
    cov = [e.covers(truth) for e in est if math.isfinite(e.ci_low)]
    rmse = float(np.sqrt(np.mean(err ** 2))) if ok.any() else math.nan
    return {"bias": round(float(err.mean()), 5) if ok.any() else math.nan,
            "rmse": round(rmse, 5), "relative_rmse": round(rmse / truth, 4),
            "coverage": round(float(np.mean(cov)), 3) if cov else None,
            "nan_rate": round(float(1 - ok.mean()), 3)}


def large_actions(n_logs, n_rounds, Ks, residuals, rng):
    out = []
    estimators = {
        "ips": lambda log, ad, r: ev.ips(log, ad),
        "snips": lambda log, ad, r: ev.snips(log, ad),
        "doubly_robust": lambda log, ad, r: ev.doubly_robust(log, ad, rng=r),
        "switch_dr": lambda log, ad, r: ev.switch_dr(log, ad, rng=r),
        "dr_os": lambda log, ad, r: ev.dr_os(log, ad, rng=r),
        "mips": lambda log, ad, r: ev.mips(log, ad),
    }
    for residual in residuals:
        for K in Ks:
            t0 = time.perf_counter()
            config = simulator.preset("large_actions", n_arms=K, residual=residual)
            target = greedy_target(config)
            truth = simulator.static_policy_value(config, target)
            res = {name: [] for name in estimators}
            for child in rng.spawn(n_logs):
                log_rng, est_rng = child.spawn(2)
                log, _ = simulator.collect_log(config, n_rounds, rng=log_rng)
                ad = target(log.context, log.available_mask())
                for name, f in estimators.items():
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        res[name].append(f(log, ad, np.random.default_rng(est_rng)))
            row = {"K": K, "residual": residual, "truth": round(truth, 5),
                   "distinct_embeddings": int(np.unique(log.action_embeddings, axis=0).shape[0])}
            row |= {name: summarise(e, truth) for name, e in res.items()}
            out.append(row)
            print(f"  K={K:5d} residual={residual}: truth {truth:.4f}; RMSE "
                  + ", ".join(f"{n} {row[n]['rmse']:.4f}" for n in estimators)
                  + f" ({time.perf_counter() - t0:.0f} s)", flush=True)
    return out


def selection(n_logs, Ks, rounds, loggings, rng):
    from evaluators import SLOPE_DEFAULTS

    out = []
    for K in Ks:
        config = simulator.preset("large_actions", n_arms=K, n_embedding_features=1,
                                  n_categories=K, residual=0.0)
        target = greedy_target(config)
        truth = simulator.static_policy_value(config, target)
        for logging, beta in loggings:
            policy = None if beta == 0 else softmax_logging(config, beta)
            for n in rounds:
                for family in ("ips", "dr_os"):
                    param, cands = SLOPE_DEFAULTS[family]
                    per_cand = {v: [] for v in cands}
                    slope = []
                    for child in rng.spawn(n_logs):
                        log_rng, est_rng = child.spawn(2)
                        log, _ = simulator.collect_log(config, n, policy=policy, rng=log_rng)
                        ad = target(log.context, log.available_mask())
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            s = ev.select_estimator(log, ad, estimator=family,
                                                    rng=np.random.default_rng(est_rng))
                        slope.append(s.value)
                        for v, val in zip(s.candidates, s.candidate_values, strict=True):
                            per_cand[v].append(val)
                    rm = {v: float(np.sqrt(np.nanmean((np.array(x) - truth) ** 2)))
                          for v, x in per_cand.items()}
                    oracle = min(rm, key=rm.get)
                    slope_rmse = float(np.sqrt(np.nanmean((np.array(slope) - truth) ** 2)))
                    row = {"K": K, "n_rounds": n, "logging": logging, "family": family,
                           "parameter": param, "truth": round(truth, 5),
                           "oracle_value": oracle, "oracle_rmse": round(rm[oracle], 5),
                           "slope_rmse": round(slope_rmse, 5),
                           "regret": round(slope_rmse - rm[oracle], 5),
                           "within_10pct": bool(slope_rmse <= 1.1 * rm[oracle]),
                           "untuned_rmse": round(rm[cands[0]], 5)}
                    out.append(row)
                    print(f"  K={K:4d} n={n:5d} {logging:11s} {family:6s}: oracle {param}="
                          f"{oracle} RMSE {rm[oracle]:.4f}, SLOPE {slope_rmse:.4f}, untuned "
                          f"{rm[cands[0]]:.4f}", flush=True)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--logs", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="a small run (smoke test)")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    if args.quick:
        Ks, n_logs, sel_logs, sel_K, sel_n = [10, 100], 5, 5, [10], [500]
    else:
        Ks, n_logs, sel_logs, sel_K, sel_n = [10, 100, 1000, 5000], args.logs, args.logs, \
            [10, 100], [500, 2000]
    print(f"large action spaces: {n_logs} logs of {args.rounds} records per setting", flush=True)
    la = large_actions(n_logs, args.rounds, Ks, (0.0, 0.3), rng)
    print(f"estimator selection: {sel_logs} logs per setting", flush=True)
    sel = selection(sel_logs, sel_K, sel_n, (("uniform", 0.0), ("skewed", 10.0),
                                             ("adversarial", -10.0)), rng)
    within = float(np.mean([r["within_10pct"] for r in sel]))
    print(json.dumps({"large_actions": la, "selection": sel, "slope_within_10pct": within,
                      "seconds": round(time.perf_counter() - t0, 1),
                      "load": [round(load0, 2), round(os.getloadavg()[0], 2)]}))


if __name__ == "__main__":
    main()
