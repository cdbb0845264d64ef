"""Speed of the simulator (issue 2, section 7).

    python benchmarks/simulator.py                      # every measurement
    python benchmarks/simulator.py --only organic_adoptions_per_s

Prints progress lines, then ONE JSON object on the last line. Each key is produced by a
small function registered in ``MEASUREMENTS`` (name -> function returning a dict of
figures); more keys (environment steps) are added by registering more functions.

``organic_adoptions_per_s``: bulk ``World`` simulation of ``viadeo_like`` scaled to 200,000
users over its whole horizon (construction included), organic edges per second; the naive
per-event reference is timed on a small world for the ratio. Target: >= 1,000,000 / s on
2 cores. ``organic_adoptions_sessions_per_s``: the same world with the session process opted
in, and its throughput as a fraction of the world without (target >= 0.75, issue 23).

The machine is usually shared: every rate also comes per CPU-second of this process
(``*_per_cpu_s``; the organic simulation runs its kernel on two threads, so its CPU rate
counts both), and the JSON ends with the 1-minute load average.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Callable

# Run as a script, this file's folder comes first on sys.path and its name would shadow the
# `simulator` package; drop that folder before importing.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

from simulator import SessionLaw, World, preset  # noqa: E402

MEASUREMENTS: dict[str, Callable[[argparse.Namespace], dict]] = {}


def measurement(fn: Callable[[argparse.Namespace], dict]) -> Callable:
    """Register ``fn`` under its name; it returns a dict of JSON-serialisable figures."""
    MEASUREMENTS[fn.__name__] = fn
    return fn


#: The session process of ``organic_adoptions_sessions_per_s``: most users come a few times,
#: a few come back for months (discretised log-normal counts and gaps, as fitted to logs).
SESSIONS = SessionLaw(count_mu=0.5, count_sigma=1.5, gap_mu=2.5, gap_sigma=1.2,
                      later_weight=0.5)


def _organic_rate(n_users: int, method: str, seed: int = 0,
                  sessions=None) -> tuple[float, int, float, float]:
    cfg = preset("viadeo_like", n_users=n_users, sessions=sessions)
    start, cpu = time.perf_counter(), time.process_time()
    world = World(cfg, seed, method=method)
    world.simulate(cfg.n_ticks - 1)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    n_organic = int((world.edges.source == 0).sum())
    return n_organic / elapsed, n_organic, elapsed, cpu


@measurement
def organic_adoptions_per_s(args: argparse.Namespace) -> dict:
    """Organic adoptions per second, viadeo_like at ``args.users`` users."""
    _organic_rate(2000, "fast")  # warm caches and imports
    rate, n, elapsed, cpu = _organic_rate(args.users, "fast")
    print(f"organic: {n} adoptions of {args.users} users in {elapsed:.2f} s "
          f"({cpu:.2f} s CPU)", file=sys.stderr)
    naive_rate, n_naive, naive_s, _ = _organic_rate(args.naive_users, "naive")
    print(f"naive reference: {n_naive} adoptions in {naive_s:.2f} s", file=sys.stderr)
    return {
        "organic_adoptions_per_s": round(rate),
        # CPU-time rate: what one uncontended core would give on a shared machine
        "organic_adoptions_per_cpu_s": round(n / cpu),
        "organic_adoptions": n,
        "organic_users": args.users,
        "organic_seconds": round(elapsed, 3),
        "organic_naive_adoptions_per_s": round(naive_rate),
        "organic_speedup_vs_naive": round(rate / naive_rate, 1),
    }


@measurement
def organic_adoptions_sessions_per_s(args: argparse.Namespace) -> dict:
    """Organic adoptions per second of viadeo_like with the session process opted in
    (:data:`SESSIONS`; users arrive over the horizon and are active on their session ticks
    only), beside the same world without sessions timed in the same run: the ratio is the
    cost of sessions (issue 23: at most 25% of the throughput)."""
    _organic_rate(2000, "fast", sessions=SESSIONS)  # warm caches and imports
    plain, n_plain, _, cpu_plain = _organic_rate(args.users, "fast")
    rate, n, elapsed, cpu = _organic_rate(args.users, "fast", sessions=SESSIONS)
    print(f"organic with sessions: {n} adoptions of {args.users} users in {elapsed:.2f} s "
          f"({cpu:.2f} s CPU); without: {n_plain} adoptions", file=sys.stderr)
    return {
        "organic_adoptions_sessions_per_s": round(rate),
        "organic_adoptions_sessions_per_cpu_s": round(n / cpu),
        "organic_adoptions_sessions": n,
        "organic_sessions_vs_plain_throughput": round(rate / plain, 3),
        "organic_sessions_vs_plain_cpu_throughput": round((n / cpu) / (n_plain / cpu_plain), 3),
    }


def _env_rates(duration: float) -> dict:
    import gymnasium as gym
    from gymnasium.utils.performance import benchmark_step

    out = {}
    for key, env_id in (("env_steps_per_s", "recloop/Recommendation-v0"),
                        ("bandit_env_steps_per_s", "recloop/LinearBandit-v0"),
                        ("dynamic_news_env_steps_per_s", "recloop/DynamicNews-v0")):
        env = gym.make(env_id)
        benchmark_step(env, target_duration=0.2, seed=0)  # warm-up (block caches, tables)
        out[key], out[key.replace("_per_s", "_per_cpu_s")] = _with_cpu(
            benchmark_step, env, target_duration=duration, seed=0)
        print(f"{env_id}: {out[key]} steps/s (one env, random valid actions)", file=sys.stderr)
    return out


def _with_cpu(bench, *args, **kwargs) -> tuple[int, int]:
    """``bench``'s rate (per wall second) and the same count per CPU second of this process
    (what an uncontended core would give on a shared machine)."""
    start, cpu = time.perf_counter(), time.process_time()
    rate = bench(*args, **kwargs)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    return round(rate), round(rate * elapsed / cpu)


@measurement
def env_steps_per_s(args: argparse.Namespace) -> dict:
    """One environment, random actions, as Gymnasium's ``benchmark_step`` measures
    (``action_space.sample()`` draws among available items). Target >= 30,000 / s."""
    return _env_rates(args.env_seconds)


@measurement
def vector_env_steps_per_s(args: argparse.Namespace) -> dict:
    """``make_vec(id, num_envs=1024)`` (native vector entry point), random actions, as
    Gymnasium's ``benchmark_vector_step`` measures; the reference is Gymnasium's
    ``SyncVectorEnv`` of single environments. Target >= 1,000,000 / s."""
    import gymnasium as gym
    from gymnasium.utils.performance import benchmark_vector_step

    out = {}
    for key, env_id in (("vector_env_steps_per_s", "recloop/Recommendation-v0"),
                        ("bandit_vector_env_steps_per_s", "recloop/LinearBandit-v0")):
        venv = gym.make_vec(env_id, num_envs=1024)
        out[key], out[key.replace("_per_s", "_per_cpu_s")] = _with_cpu(
            benchmark_vector_step, venv, target_duration=args.env_seconds, seed=0)
        print(f"{env_id}: {out[key]} steps/s (make_vec, N = 1024)", file=sys.stderr)
    sync = gym.make_vec("recloop/Recommendation-v0", num_envs=64, vectorization_mode="sync")
    ref = benchmark_vector_step(sync, target_duration=args.env_seconds, seed=0)
    out["vector_env_sync_reference_steps_per_s"] = round(ref)
    out["vector_env_speedup_vs_sync"] = round(out["vector_env_steps_per_s"] / ref, 1)
    return out


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, choices=sorted(MEASUREMENTS),
                        help="measure only these keys")
    parser.add_argument("--users", type=int, default=200_000)
    parser.add_argument("--naive-users", type=int, default=2000)
    parser.add_argument("--env-seconds", type=float, default=3.0,
                        help="duration of each environment step measurement")
    args = parser.parse_args(argv)
    out = {}
    for name in args.only or list(MEASUREMENTS):
        out.update(MEASUREMENTS[name](args))
    # the machine is shared: say how busy it was
    out["loadavg_1min"] = round(os.getloadavg()[0], 2)
    out["cpu_count"] = os.cpu_count()
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
