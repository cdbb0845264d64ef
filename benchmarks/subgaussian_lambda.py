"""Subgaussian IPS's ``lambda_`` on heavy-weight problems: bias, RMSE and interval coverage
against the exact value, for the old fixed default (0.1), the data-driven ``"auto"`` (Metelli,
Russo & Restelli 2021) and 0 (IPS), over log sizes.

The problems: 20 equally likely contexts, 10 actions with Bernoulli rewards of known means
``q(x, a) ~ Beta(1, 2)``; the target takes the best action with probability 0.9 (uniform
otherwise); the logging policy is adversarial, ``softmax(-beta q(x, .))`` mixed with 3%
uniform, so the target's favourite action is rare in the log: ``heavy`` (beta = 3: weights
up to 53, ``E[w^2]`` = 29) and ``extreme`` (beta = 8: up to 270, ``E[w^2]`` = 174). The truth
is the exact finite sum ``mean_x sum_a pi_e(a|x) q(x, a)``.

Prints progress, then ONE JSON object on its last line: per problem, per ``n`` and per
setting, the relative bias ``(mean estimate - truth) / truth``, the RMSE, the coverage of the
nominal 95% interval, the mean ``lambda_`` and the standard error of the bias, over
``--logs`` logs (default 400).

Usage: ``.venv/bin/python benchmarks/subgaussian_lambda.py [--logs N]``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

import numpy as np

_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]

import evaluators as ev  # noqa: E402
from simulator.logs import BanditLog  # noqa: E402

M, K = 20, 10
SIZES = (300, 1000, 3000, 10_000, 30_000)
SETTINGS = {"fixed_0.1": 0.1, "auto": "auto", "ips_0": 0.0}


def problem(beta: float):
    g = np.random.default_rng(0)
    q = g.beta(1, 2, size=(M, K))
    z = -beta * q
    pb = np.exp(z - z.max(axis=1, keepdims=True))
    pb = 0.97 * pb / pb.sum(axis=1, keepdims=True) + 0.03 / K
    pe = np.full((M, K), 0.1 / K)
    pe[np.arange(M), q.argmax(axis=1)] += 0.9
    return q, pb, pe, float((pe * q).sum(axis=1).mean())


def draw(q, pb, pe, n, g):
    x = g.integers(0, M, n)
    a = np.minimum((np.cumsum(pb[x], axis=1) <= g.random(n)[:, None]).sum(axis=1), K - 1)
    r = (g.random(n) < q[x, a]).astype(float)
    log = BanditLog(context=x[:, None].astype(float), action=a, reward=r, pscore=pb[x, a],
                    n_actions=K)
    return log, pe[x]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--logs", type=int, default=400)
    args = ap.parse_args()
    out = {}
    for name, beta in (("heavy", 3.0), ("extreme", 8.0)):
        q, pb, pe, truth = problem(beta)
        d2 = float((pe ** 2 / pb).sum(axis=1).mean())
        out[name] = {"truth": truth, "E_w2": round(d2, 2), "max_w": round(float((pe / pb).max()),
                                                                               1)}
        print(f"{name}: truth {truth:.4f}, E[w^2] {d2:.1f}, largest weight "
              f"{(pe / pb).max():.0f}", flush=True)
        for n in SIZES:
            g = np.random.default_rng([int(beta), n])
            est = {s: [] for s in SETTINGS}
            for _ in range(args.logs):
                log, ad = draw(q, pb, pe, n, g)
                for s, lam in SETTINGS.items():
                    e = ev.subgaussian_ips(log, ad, lambda_=lam)
                    w = ad[np.arange(n), log.action] / log.pscore
                    used = lam if lam != "auto" else min(1.0, math.sqrt(
                        math.log(20) / (3 * n * float(np.mean(w * w)))))
                    est[s].append((e.value, e.ci_low <= truth <= e.ci_high, used))
            row = {}
            for s, rows in est.items():
                v, cov, lam = (np.array(c, dtype=float) for c in zip(*rows, strict=True))
                row[s] = {"rel_bias": round((v.mean() - truth) / truth, 4),
                          "bias_se": round(v.std(ddof=1) / math.sqrt(v.size) / truth, 4),
                          "rmse": round(float(np.sqrt(np.mean((v - truth) ** 2))), 4),
                          "coverage": round(float(cov.mean()), 3),
                          "lambda": float(f"{lam.mean():.3g}")}
                print(f"  n {n:6d} {s:9s} bias {row[s]['rel_bias']:+.1%} "
                      f"(se {row[s]['bias_se']:.1%}), rmse {row[s]['rmse']:.4f}, coverage "
                      f"{row[s]['coverage']:.3f}, lambda {row[s]['lambda']}", flush=True)
            out[name][str(n)] = row
    print(json.dumps(out))


if __name__ == "__main__":
    main()
