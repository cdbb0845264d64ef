"""``evaluators.evaluate_log`` at scale: a user's log of 10^5 records, 80 actions and 3
positions (the Open Bandit Dataset's shape at ten times the sample), read from CSV, evaluated
with the default selection.

Builds a synthetic log like the Open Bandit Dataset's ``random`` log (uniform logging over
the items at each of 3 positions, 20 one-hot user features, clicks of 0.3-5%) and a
context-dependent target policy, writes them as the CSV files a user would have, then times,
in this process:

* ``read_log_s``: ``read_bandit_log`` of the CSV (pandas' parser, the encodings);
* ``read_target_s``: ``read_target`` of the target CSV (record, action, probability);
* ``evaluate_none_s``: ``evaluate_log(..., select="none")`` -- the shared reward model and
  the default estimators on the log, the diagnostics;
* ``evaluate_s``: ``evaluate_log`` with the default selection (``select="twin"`` today);
  ``selection_s`` = the difference, the selector's share; ``*_cpu_s`` the same in this
  process's CPU time (on a shared machine the wall clock measures the other jobs too);
* ``profile``: the functions with the most cumulative time in one ``evaluate_log`` call
  (cProfile), so that the report can say what the time is spent on.

Run it once per thread budget: ``--threads 1`` pins numpy's BLAS and recloop's kernels to one
core (the issue's target: at most 60 s on one core); ``--threads 0`` (default) leaves them
free. It prints progress, then ONE JSON object on its last line. The default selector may
change (another selector, more twins): the benchmark calls ``evaluate_log`` through its
public API only and keeps working.

Usage: ``.venv/bin/python benchmarks/evaluate_log.py [--rounds N] [--actions K]
[--positions L] [--threads T]``.
"""

from __future__ import annotations

import argparse
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]


def _threads(n: int) -> None:
    """Pin BLAS and recloop's kernels to ``n`` threads (before numpy is imported)."""
    if n > 0:
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "RECLOOP_THREADS", "NUMBA_NUM_THREADS"):
            os.environ[var] = str(n)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=100_000)
    ap.add_argument("--actions", type=int, default=80)
    ap.add_argument("--positions", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0,
                    help="threads for BLAS and kernels (0: leave them free)")
    args = ap.parse_args(argv)
    _threads(args.threads)

    import cProfile
    import json
    import pstats
    import tempfile
    import time
    from pathlib import Path

    import numpy as np
    import pandas as pd

    import evaluators
    from evaluators.datasets import read_bandit_log, read_target

    n, K, L = args.rounds, args.actions, args.positions
    g = np.random.default_rng(7)
    # 4 hashed user features of 3-9 categories each, as in the Open Bandit Dataset
    users = {f"user_feature_{i}": g.integers(0, c, n).astype(str) for i, c in
             enumerate((3, 5, 7, 9))}
    feats = np.stack([np.asarray(v, dtype=np.int64) for v in users.values()], axis=1)
    item_w = g.normal(0, 0.6, (4, K))
    base = g.uniform(-5.5, -3.0, K)
    action = g.integers(0, K, n)
    position = g.integers(0, L, n)
    logit = base[action] + sum(item_w[i, action] * (feats[:, i] % 2) for i in range(4)) - 0.3 * (
        position)
    click = (g.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    frame = pd.DataFrame({"timestamp": np.arange(n), "item_id": action, "position": position + 1,
                          "click": click, "propensity_score": 1.0 / K, **users})
    # the target: a softmax of each item's score for the user's features
    score = base[None, :] + sum(item_w[i][None, :] * (feats[:, i:i + 1] % 2) for i in range(4))
    pi = np.exp(3 * (score - score.max(axis=1, keepdims=True)))
    pi /= pi.sum(axis=1, keepdims=True)
    out = {"n_rounds": n, "n_actions": K, "len_list": L, "threads": args.threads,
           "cpus": len(os.sched_getaffinity(0)), "load_before": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as tmp:
        log_csv = Path(tmp) / "log.csv"
        frame.to_csv(log_csv, index=False)
        rec, act = np.nonzero(pi > 1e-4)  # the target file lists the actions it may take
        p = pi[rec, act]
        p = p / np.bincount(rec, p, n)[rec]
        tgt = pd.DataFrame({"record": rec, "action": act, "probability": p})
        tgt_csv = Path(tmp) / "target.csv"
        tgt.to_csv(tgt_csv, index=False, float_format="%.17g")
        out["log_csv_mb"] = round(log_csv.stat().st_size / 1e6, 1)
        out["target_csv_mb"] = round(tgt_csv.stat().st_size / 1e6, 1)
        print(f"log {out['log_csv_mb']} MB, target {out['target_csv_mb']} MB", flush=True)

        t = time.perf_counter()
        log = read_bandit_log(log_csv, context="user_feature_")
        out["read_log_s"] = round(time.perf_counter() - t, 2)
        t = time.perf_counter()
        action_dist = read_target(tgt_csv, log)
        out["read_target_s"] = round(time.perf_counter() - t, 2)
    print(f"read: log {out['read_log_s']} s, target {out['read_target_s']} s", flush=True)

    t, c = time.perf_counter(), time.process_time()
    evaluators.evaluate_log(log, action_dist, select="none")
    out["evaluate_none_s"] = round(time.perf_counter() - t, 2)
    out["evaluate_none_cpu_s"] = round(time.process_time() - c, 2)
    print(f"evaluate_log(select='none'): {out['evaluate_none_s']} s", flush=True)

    t, c = time.perf_counter(), time.process_time()
    res = evaluators.evaluate_log(log, action_dist)
    out["evaluate_s"] = round(time.perf_counter() - t, 2)
    out["evaluate_cpu_s"] = round(time.process_time() - c, 2)
    out["selection_s"] = round(out["evaluate_s"] - out["evaluate_none_s"], 2)
    out["selection_cpu_s"] = round(out["evaluate_cpu_s"] - out["evaluate_none_cpu_s"], 2)
    out["selector"] = res.selector
    out["selected"] = res.selected
    out["confidence"] = res.confidence
    print(f"evaluate_log(): {out['evaluate_s']} s, CPU {out['evaluate_cpu_s']} s (selector "
          f"{res.selector!r}: {res.selected})", flush=True)
    prof = cProfile.Profile()  # a third call, profiled (the profiler slows what it measures)
    prof.enable()
    evaluators.evaluate_log(log, action_dist)
    prof.disable()
    stats = pstats.Stats(prof)
    total = max(stats.total_tt, 1e-9)
    top = sorted(((v[3], f"{Path(k[0]).parent.name}/{Path(k[0]).name}:{k[2]}")
                  for k, v in stats.stats.items()
                  if "evaluators" in k[0] or "numpy" in k[0] or "recloop_base" in k[0]),
                 reverse=True)
    own = sorted(((v[2], f"{Path(k[0]).name}:{k[2]}") for k, v in stats.stats.items()),
                 reverse=True)
    out["profile_cumulative"] = {name: round(s, 2) for s, name in top[:12]}
    out["profile_own_time"] = {name: round(s / total, 3) for s, name in own[:8]}
    out["load_after"] = os.getloadavg()[0]
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
