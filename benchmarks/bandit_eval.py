"""Speed of replay and BRED on LinUCB (issue 6).

    python benchmarks/bandit_eval.py [--quick]

Prints progress lines, then ONE JSON object on the last line:

* ``replay_linucb_records_per_s``: ``evaluators.replay`` of LinUCB (alpha 0.5) on a uniform
  log of T = 100,000 records, K = 10, d = 10 (compiled fast path; target >= 200,000/s);
  ``replay_plain_loop_records_per_s``: the same through the plain act/update loop (on the
  first 5,000 records), for reference;
* ``bred_s``: ``evaluators.bred`` with B = 100, T = 10,000, K = 10, d = 10, LinUCB, jitter
  "auto", on ``threads`` threads (every CPU, or ``$RECLOOP_THREADS``; target <= 10 s);
* ``bred_batched_speedup``: ``bred_sequential_s / bred_s``, where ``bred_sequential_s`` is the
  time of B single replays run one after another, each with the compiled single-agent replay
  (measured on 10 replicates, scaled to B; target >= 10);
  ``bred_speedup_vs_plain_loop``: against B replays through the plain Python act/update loop
  (measured on 20,000 records of one replicate, scaled to B * K * T records).

Timings exclude JIT compilation (warm-up runs first).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]

import agents  # noqa: E402
from evaluators import bred, replay  # noqa: E402
from recloop_base.threads import n_threads  # noqa: E402
from simulator.logs import BanditLog  # noqa: E402


def uniform_log(T, K, d, seed=0):
    g = np.random.default_rng(seed)
    X = g.normal(size=(T, d))
    theta = g.normal(size=(K, d)) / np.sqrt(d)
    a = g.integers(0, K, T)
    p = 1 / (1 + np.exp(-(X * theta[a]).sum(axis=1)))
    r = (g.random(T) < p).astype(float)
    return BanditLog(context=X, action=a, reward=r, pscore=np.full(T, 1 / K), n_actions=K)


def make_linucb(gen):
    ag = agents.LinUCB(alpha=0.5)
    ag.reset(gen)
    return ag


class Plain:
    """Only act/update: the plain Python loop."""

    def __init__(self, agent):
        self.agent = agent

    def act(self, observation):
        return self.agent.act(observation)

    def update(self, observation, action, reward):
        self.agent.update(observation, action, reward)


class Single(Plain):
    """A LinUCB without ``batch``: bred then runs replicate after replicate, each through the
    single agent's compiled replay (what B calls of ``replay`` would do)."""

    def replay_arrays(self, *args, **kw):
        return self.agent.replay_arrays(*args, **kw)


def timed(f):
    t0 = time.perf_counter()
    out = f()
    return out, time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes (smoke run)")
    args = ap.parse_args(argv)
    K, d = 10, 10
    T_replay, T_bred, B = (10_000, 1_000, 20) if args.quick else (100_000, 10_000, 100)
    say = lambda *a: print(*a, file=sys.stderr)  # noqa: E731

    # warm-up: compile every kernel on small inputs
    small = uniform_log(500, K, d, seed=1)
    replay(small, make_linucb(0))
    bred(small, make_linucb, n_bootstrap=3, rng=0)
    bred(small, lambda g: Single(make_linucb(g)), n_bootstrap=2, rng=0)
    replay(small, Plain(make_linucb(0)))

    log = uniform_log(T_replay, K, d)
    est, dt = timed(lambda: replay(log, make_linucb(0)))
    replay_rps = T_replay / dt
    say(f"replay LinUCB, T={T_replay}: {dt:.3f} s = {replay_rps:,.0f} records/s ({est})")
    n_plain = 5_000
    _, dt_plain = timed(lambda: replay(log.take(np.arange(n_plain)), Plain(make_linucb(0))))
    plain_rps = n_plain / dt_plain
    say(f"replay plain loop: {plain_rps:,.0f} records/s")

    blog = uniform_log(T_bred, K, d, seed=2)
    est, bred_s = timed(lambda: bred(blog, make_linucb, n_bootstrap=B, rng=3))
    say(f"bred B={B}, T={T_bred}: {bred_s:.2f} s ({est})")
    n_seq = min(10, B)
    est_seq, dt_seq = timed(lambda: bred(blog, lambda g: Single(make_linucb(g)),
                                         n_bootstrap=n_seq, rng=3))
    seq_s = dt_seq * B / n_seq
    say(f"sequential single replays: {dt_seq:.2f} s for {n_seq} -> {seq_s:.1f} s for {B}")
    # the batched and sequential runs agree on the common replicates
    same = bool(np.array_equal(est.replicate_values[:n_seq], est_seq.replicate_values))
    plain_total = B * K * T_bred / plain_rps
    print(json.dumps({
        "replay_linucb_records_per_s": replay_rps,
        "replay_plain_loop_records_per_s": plain_rps,
        "bred_s": bred_s,
        "bred_sequential_s": seq_s,
        "bred_batched_speedup": seq_s / bred_s,
        "bred_speedup_vs_plain_loop": plain_total / bred_s,
        "batched_equals_sequential": same,
        "T_replay": T_replay, "T_bred": T_bred, "B": B, "K": K, "d": d,
        "threads": n_threads(), "loadavg_1min": round(os.getloadavg()[0], 2),
    }))


if __name__ == "__main__":
    main()
