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
[0.93, 0.97] and the analytic one is not (and the reverse), with the seconds taken.

Usage: ``.venv/bin/python benchmarks/model_variance.py [--logs 200] [--seed 0]``.
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
               "seconds": round(time.perf_counter() - t0, 1)}}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
