"""Real bandit logs: the Open Bandit Dataset's small sample read, checked and timed.

Reads the six files (``random`` / ``bts`` x ``all`` / ``men`` / ``women``) with
``evaluators.datasets.load_open_bandit``, round-trips each through ``to_obp`` / ``from_obp``
and ``save`` / ``load``, and prints progress, then ONE JSON object on its last line:

* ``load_s``: per file, the best of ``--repeat`` in-process loads (pandas already imported),
  and ``cold_load_s``: one load in a fresh interpreter, timed around the call (it pays
  pandas' import). Target (issue 24): <= 1 s for a 10,000-row file.
* ``round_trip``: per file, whether every array and ``len_list`` came back equal.
* ``on_policy``: per campaign, the ``bts`` log's click rate with its Wilson 95% interval --
  the on-policy value of the Bernoulli TS policy (the data README gives 0.0042, 0.0069,
  0.0046).
* ``bts_action_dist_s``: ``bernoulli_ts_action_dist`` with the shipped prior, 100,000
  simulations, per campaign; ``ips_random_to_bts``: the plain IPS estimate of that policy
  from the ``random`` log, reading the simulated ``(n, K, 3)`` distribution at each record's
  position (``evaluators._validation.action_dist_at_position``), with its normal 95%
  interval -- informational only (the position-aware estimators are issue 24, phase 2).
* ``load``: the 1-minute load average before and after (the machine is shared).

The data are never copied: ``--obd`` points at the dataset's root (default
``../shared/data/obd`` beside the repository).

Usage: ``.venv/bin/python benchmarks/real_data.py [--obd PATH] [--repeat N]``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# this directory holds a script called simulator.py: keep it from shadowing the package
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]

from evaluators import datasets as ds  # noqa: E402
from evaluators import normal_estimate, wilson_estimate  # noqa: E402
from evaluators._validation import action_dist_at_position  # noqa: E402
from simulator.logs import BanditLog  # noqa: E402

ROOT = Path(_here).parent
FIELDS = ("context", "action", "reward", "pscore", "position", "tick", "action_embeddings")


def same(a: BanditLog, b: BanditLog) -> bool:
    return a.len_list == b.len_list and a.n_actions == b.n_actions and all(
        np.array_equal(getattr(a, f), getattr(b, f)) for f in FIELDS
        if getattr(a, f) is not None or getattr(b, f) is not None)


def cold_load(obd: Path, policy: str, campaign: str) -> float:
    code = ("import time, sys; from evaluators.datasets import load_open_bandit; "
            "t = time.perf_counter(); "
            f"load_open_bandit({str(obd)!r}, behavior_policy={policy!r}, campaign={campaign!r}); "
            "print(time.perf_counter() - t)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=tempfile.gettempdir())
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--obd", type=Path, default=ROOT.parent / "shared" / "data" / "obd")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--n-sim", type=int, default=100_000)
    args = ap.parse_args()
    load0 = os.getloadavg()[0]
    out = {"load_s": {}, "cold_load_s": {}, "round_trip": {}, "on_policy": {},
           "bts_action_dist_s": {}, "ips_random_to_bts": {}}
    logs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for policy in ds.OBD_BEHAVIOR_POLICIES:
            for campaign in ds.OBD_CAMPAIGNS:
                key = f"{policy}/{campaign}"
                best = math.inf
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    log = ds.load_open_bandit(args.obd, behavior_policy=policy,
                                              campaign=campaign)
                    best = min(best, time.perf_counter() - t0)
                logs[key] = log
                out["load_s"][key] = round(best, 4)
                out["cold_load_s"][key] = round(cold_load(args.obd, policy, campaign), 4)
                back = BanditLog.from_obp(log.to_obp())
                again = BanditLog.load(log.save(Path(tmp) / key.replace("/", "_")))
                out["round_trip"][key] = same(log, back) and same(log, again)
                print(f"{key:14s} {log.n_rounds} records, {log.n_actions} items, len_list "
                      f"{log.len_list}, context {log.dim_context} columns: load {best:.3f} s "
                      f"(cold {out['cold_load_s'][key]:.3f} s), round trip "
                      f"{out['round_trip'][key]}", flush=True)
    priors = ds.read_bts_prior(args.obd / "prior_bts.yaml")
    for campaign in ds.OBD_CAMPAIGNS:
        bts = logs[f"bts/{campaign}"]
        w = wilson_estimate(int(bts.reward.sum()), bts.n_rounds)
        out["on_policy"][campaign] = {"clicks": int(bts.reward.sum()), "n": bts.n_rounds,
                                      "rate": round(w.value, 6), "ci": [round(w.ci_low, 6),
                                                                         round(w.ci_high, 6)]}
        rnd = logs[f"random/{campaign}"]
        t0 = time.perf_counter()
        dist = ds.bernoulli_ts_action_dist(priors[campaign], rnd.n_actions, rnd.len_list,
                                           n_sim=args.n_sim, rng=0)
        out["bts_action_dist_s"][campaign] = round(time.perf_counter() - t0, 4)
        pi = action_dist_at_position(rnd, np.broadcast_to(dist, (rnd.n_rounds, *dist.shape)))
        terms = pi[np.arange(rnd.n_rounds), rnd.action] / rnd.pscore * rnd.reward
        ips = normal_estimate(terms)
        out["ips_random_to_bts"][campaign] = {"value": round(ips.value, 6),
                                              "ci": [round(ips.ci_low, 6),
                                                     round(ips.ci_high, 6)]}
        print(f"bts/{campaign:6s} on-policy click rate {w.value:.4f} (Wilson 95% "
              f"[{w.ci_low:.4f}, {w.ci_high:.4f}], {int(bts.reward.sum())} clicks); BTS "
              f"policy by simulation {out['bts_action_dist_s'][campaign]:.2f} s; IPS from the "
              f"random log {ips.value:.4f} [{ips.ci_low:.4f}, {ips.ci_high:.4f}]", flush=True)
    out["load"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
