"""The analytic model variance against the bootstrap, its reference, on ``ope_static``'s
settings (issue 26 s2).

For every evaluation of the built-in ``ope_static`` scenario (uniform, skewed and adversarial
logging; its ``n_rounds`` sweep; its three targets; ``--logs`` logs per cell, default the
scenario's 200), the ``ope`` experiment runs the estimators whose interval carries the
reward model's own variance -- the direct method with the ridge and the mean model,
Switch-DR (tau 10) and DRos (lambda 100) with the ridge model -- twice on the same logs:
``model_variance="analytic"`` and ``"bootstrap"`` (100 resamples). The harness fits one
model per log and specification, so both variants share the fit and the resamples and
differ only in the variance term.

Prints progress and ONE JSON object on its last line: per (logging, n_rounds, target,
estimator) the mean interval width of each variant (the mean standard error times
2 x 1.96), their ratio ``analytic / bootstrap``, and the coverage of the exact value by
each variant's intervals over the logs; then the summary the issue asks for: the mean and
range of the width ratio over every cell, and the cells where the bootstrap's coverage is in
[0.93, 0.97] and the analytic one is not (and the reverse), with the seconds taken; and
``leverage``: why the analytic variance adjusts the residuals for their leverage -- for the
direct method with the ridge model (near-greedy target, ``--leverage-logs`` logs of 500 and
2,000 records per logging policy), the mean ratio to a 2,000-resample bootstrap of the
sandwich standard error with raw residuals (HC0, the infinitesimal jackknife), with
residuals over ``sqrt(1 - h)`` (HC2, recloop's) and over ``1 - h`` (HC3, close to the
jackknife), ``h`` the record's leverage in its action's ridge fit.

Usage: ``.venv/bin/python benchmarks/model_variance.py [--logs 200] [--seed 0]
[--leverage-logs 30]``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time

_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--logs", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, nargs="*", default=None,
                    help="n_rounds values (default: the scenario's sweep)")
    ap.add_argument("--leverage-logs", type=int, default=30)
    args = ap.parse_args()

    import tomllib
    from importlib import resources

    import evaluators as ev
    from recloop.experiments._ope import DEFAULT_TARGETS, ope

    scenario = tomllib.loads(resources.files("recloop.scenarios").joinpath(
        "ope_static.toml").read_text())
    variants = {}
    for name, f, kw in (("dm", ev.direct_method, {}),
                        ("dm_mean", ev.direct_method, {"model": "mean"}),
                        ("switch_dr", ev.switch_dr, {"tau": 10.0}),
                        ("dr_os", ev.dr_os, {"lambda_": 100.0})):
        for mv in ("analytic", "bootstrap"):
            variants[f"{name}/{mv}"] = functools.partial(f, **kw, model_variance=mv)
    t0 = time.perf_counter()
    cells = []
    for evaluation in scenario["evaluations"]:
        sizes = args.rounds or evaluation["sweep"]["n_rounds"]
        for n in sizes:
            rows = ope(scenario["world"]["preset"], DEFAULT_TARGETS,
                       estimators=list(variants.items()), logging=evaluation["logging"],
                       beta=evaluation.get("beta", 10.0), n_rounds=n,
                       n_logs=args.logs or evaluation["n_logs"], rng=args.seed)
            got = {(r.agent, r.variant, r.metric): r for r in rows}
            for t in DEFAULT_TARGETS:
                for name in ("dm", "dm_mean", "switch_dr", "dr_os"):
                    a, b = (got[t["name"], f"{name}/{mv}", "width"].estimate
                            for mv in ("analytic", "bootstrap"))
                    ca, cb = (got[t["name"], f"{name}/{mv}", "coverage"].estimate
                              for mv in ("analytic", "bootstrap"))
                    cells.append({"logging": evaluation["name"], "n_rounds": n,
                                  "target": t["name"], "estimator": name,
                                  "width_analytic": round(a, 6), "width_bootstrap": round(b, 6),
                                  "ratio": round(a / b, 4), "coverage_analytic": ca,
                                  "coverage_bootstrap": cb})
            print(f"{evaluation['name']} n_rounds={n}: "
                  f"{time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)

    ratios = [c["ratio"] for c in cells]

    def band(x):
        return 0.93 <= x <= 0.97

    out = {"scenario": "ope_static", "logs": args.logs or "scenario's", "seed": args.seed,
           "cells": cells,
           "summary": {
               "cells": len(cells), "mean_ratio": round(sum(ratios) / len(ratios), 4),
               "min_ratio": min(ratios), "max_ratio": max(ratios),
               "bootstrap_in_band": sum(band(c["coverage_bootstrap"]) for c in cells),
               "analytic_in_band": sum(band(c["coverage_analytic"]) for c in cells),
               "bootstrap_in_band_analytic_not": [
                   c for c in cells if band(c["coverage_bootstrap"])
                   and not band(c["coverage_analytic"])],
               "analytic_in_band_bootstrap_not": sum(
                   band(c["coverage_analytic"]) and not band(c["coverage_bootstrap"])
                   for c in cells),
               "seconds": round(time.perf_counter() - t0, 1)},
           "leverage": leverage(args.leverage_logs, args.seed)}
    print(json.dumps(out))


def leverage(n_logs: int, seed: int) -> list:
    """Sandwich standard errors of the direct method (ridge) with raw, HC2 and HC3
    residuals against a 2,000-resample bootstrap, written out from the normal equations."""
    import math

    import numpy as np

    import evaluators as ev
    import simulator
    from recloop.experiments._common import seed_sequence
    from recloop.experiments._ope import DEFAULT_TARGETS, _lookup, logged, policy_table

    config = simulator.preset("bred_linear")
    root = seed_sequence(seed)
    target = policy_table(config, DEFAULT_TARGETS[0])
    out = []
    for name, spec in (("uniform", {"policy": "uniform"}),
                       ("skewed", {"policy": "softmax", "beta": 10.0}),
                       ("adversarial", {"policy": "softmax", "beta": -10.0})):
        logger = _lookup(config, policy_table(config, spec))
        for n in (500, 2000):
            ratios = {"hc0": [], "hc2": [], "hc3": []}
            for i in range(n_logs):
                log, atoms = logged(config, n, logger, root, i, 0.0)
                pi = target[atoms]
                m = ev.fit_reward_model(log, rng=i)
                terms = np.einsum("jk,jk->j", pi, m.in_sample)
                boot = m.dm_stderr(pi, terms, "bootstrap", 2000)
                Z = np.c_[np.ones(n), log.context]
                pen = np.eye(Z.shape[1])
                pen[0, 0] = 0.0
                Hinv = np.zeros((log.n_actions,) + pen.shape)
                for k in np.unique(log.action):
                    Hinv[k] = np.linalg.inv(Z[log.action == k].T @ Z[log.action == k] + pen)
                Ha = Hinv[log.action]
                h = np.einsum("jp,jpq,jq->j", Z, Ha, Z)
                e = log.reward - m.in_sample[np.arange(n), log.action]
                g = pi.T @ Z / n
                for key, scale in (("hc0", 1.0), ("hc2", 1 / np.sqrt(1 - h)),
                                   ("hc3", 1 / (1 - h))):
                    U = np.einsum("jpq,jq->jp", Ha, Z * (e * scale)[:, None])
                    x = (terms - terms.mean()) / n + np.einsum("jp,jp->j", U, g[log.action])
                    ratios[key].append(math.sqrt(np.var(x, ddof=1) * n) / boot)
            out.append({"logging": name, "n_rounds": n, "logs": n_logs,
                        **{f"{k}_over_bootstrap": round(float(np.mean(v)), 4)
                           for k, v in ratios.items()}})
            print(out[-1], file=sys.stderr, flush=True)
    return out


if __name__ == "__main__":
    main()
