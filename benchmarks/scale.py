"""Cost of one large evaluation as it grows, here and on a 2-worker Dask LocalCluster (issue 17).

    python benchmarks/scale.py                 # 100K, 1M, 4M ratings; BRED B = 100, 400
    python benchmarks/scale.py --quick         # smoke run (small sizes, a few minutes)

For each size of synthetic rating log (``evaluators.datasets.synthetic_ratings``, MovieLens
shapes) a fresh child process generates the data, times exact LOO kNN (pearson, k = 20, every
rating held out) in this process on its threads, then on a 2-worker LocalCluster (one thread
per worker), after compiling the kernel everywhere, and checks that the two results are equal
bit for bit. BRED (LinUCB, K = 10, d = 10, T = 100,000) is timed the same way for B = 100
and 400. Peak RSS is the child's (this process: data, preparation, kernel inputs, outputs)
and each worker's (ru_maxrss, so each size runs in a fresh process and a fresh cluster).

Prints progress lines, then ONE JSON object on the last line: the figures per size, the
fitted exponent of local time against ratings (log-log slope) and against the kernel's work
``W = sum over items of (raters)^2``, the cluster overhead on the smallest input (target
< 2x local), whether every cluster result equals the local one, the load average before and
after, and the projection of exact LOO on MovieLens-25M (see docs/scaling.md).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

# Sibling scripts (benchmarks/simulator.py) would shadow the packages of the same name when
# this file is run as a script, which puts its own folder first on sys.path.
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]

# MovieLens shapes: 100K and 1M as published; 4M between 1M (6,040 x 3,706) and 10M
# (69,878 x 10,677) on the log-log line of both (users ~ ratings^1.06, items ~ ratings^0.46).
SHAPES = {"100k": (943, 1682, 100_000), "1m": (6040, 3706, 1_000_209),
          "4m": (26_000, 7_000, 4_000_000)}
QUICK = {"100k": (943, 1682, 100_000), "300k": (2000, 2400, 300_000)}
ML25M = {"n_ratings": 25_000_095, "n_users": 162_541, "n_items": 59_047}


def say(*a):
    print(*a, file=sys.stderr, flush=True)


def peak_mb() -> float:
    """Peak RSS of this process since it started or since :func:`reset_peak` (Linux VmHWM)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak():
    """Start a new peak at the current RSS (Linux ``clear_refs`` 5); a worker forked from a
    big parent would otherwise report the parent's peak."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _worker_peak_mb():
    return peak_mb()


def _worker_rss_mb():
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def _warm_loo():
    from evaluators import loo_knn

    loo_knn((np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]), np.array([1.0, 2.0, 3.0, 4.0])))


def _cluster(workers):
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                           dashboard_address=":0", env={"RECLOOP_THREADS": "1"})
    return cluster, Client(cluster)


# -- child processes --------------------------------------------------------------------------


def child_loo(name, shape, workers, k):
    from evaluators import loo_knn
    from evaluators.datasets import synthetic_ratings
    from recloop_base.threads import n_threads

    t = time.perf_counter()
    u, i, r = synthetic_ratings(*shape, rng=0)
    gen_s = time.perf_counter() - t
    c = np.bincount(i).astype(np.float64)
    work = float(np.sum(c * c))
    say(f"[{name}] {shape[0]:,} users x {shape[1]:,} items, {r.size:,} ratings; generated in "
        f"{gen_s:.1f} s; W = sum raters^2 = {work:.3g}")
    _warm_loo()
    data_mb = peak_mb()
    t = time.perf_counter()
    here = loo_knn((u, i, r), similarity="pearson", k=k)
    local_s = time.perf_counter() - t
    local_peak = peak_mb()
    say(f"[{name}] local ({n_threads()} threads): {local_s:.2f} s, peak RSS {local_peak:.0f} MB "
        f"(data {data_mb:.0f} MB), MAE {here.mae:.4f}")
    cluster, client = _cluster(workers)
    try:
        client.run(_warm_loo)  # compile the kernel on every worker, as above
        client.run(reset_peak)
        worker_base = max(client.run(_worker_rss_mb).values())
        t = time.perf_counter()
        there = loo_knn((u, i, r), similarity="pearson", k=k, executor=client)
        cluster_s = time.perf_counter() - t
        worker_peaks = list(client.run(_worker_peak_mb).values())
    finally:
        client.close()
        cluster.close()
    equal = bool(there.prediction.tobytes() == here.prediction.tobytes()
                 and np.array_equal(there.n_neighbours, here.n_neighbours)
                 and np.array_equal(there.fallback, here.fallback))
    say(f"[{name}] cluster ({workers} workers x 1 thread): {cluster_s:.2f} s "
        f"({cluster_s / local_s:.2f}x local), worker peak RSS {max(worker_peaks):.0f} MB "
        f"(runtime {worker_base:.0f} MB), equal to local: {equal}")
    return {"n_users": shape[0], "n_items": shape[1], "n_ratings": int(r.size),
            "work_sum_raters_sq": work, "generate_s": round(gen_s, 2),
            "local_s": round(local_s, 3), "local_threads": n_threads(),
            "local_peak_rss_mb": round(local_peak, 1), "data_rss_mb": round(data_mb, 1),
            "cluster_s": round(cluster_s, 3), "cluster_over_local": round(cluster_s / local_s, 3),
            "worker_peak_rss_mb": round(max(worker_peaks), 1),
            "worker_runtime_rss_mb": round(worker_base, 1),
            "driver_peak_rss_mb": round(peak_mb(), 1), "mae": round(here.mae, 5),
            "cluster_equals_local": equal}


def _make_linucb(gen):
    import agents

    a = agents.LinUCB(alpha=0.5)
    a.reset(gen)
    return a


def _warm_bred():
    import simulator
    from evaluators import bred

    log, _ = simulator.collect_log(simulator.preset("bred_linear"), 300, rng=1)
    bred(log, _make_linucb, n_bootstrap=3, rng=0)


def child_bred(T, Bs, workers):
    import simulator
    from evaluators import bred
    from recloop_base.threads import n_threads

    log, _ = simulator.collect_log(simulator.preset("bred_linear"), T, rng=2)
    _warm_bred()
    out = {}
    here = {}
    for B in Bs:
        t = time.perf_counter()
        here[B] = bred(log, _make_linucb, n_bootstrap=B, rng=3)
        dt = time.perf_counter() - t
        out[B] = {"local_s": round(dt, 2), "local_threads": n_threads()}
        say(f"[bred] B={B}, T={T:,}: local {dt:.1f} s ({here[B].value:.4f}), peak RSS "
            f"{peak_mb():.0f} MB")
    out["local_peak_rss_mb"] = round(peak_mb(), 1)
    cluster, client = _cluster(workers)
    try:
        client.run(_warm_bred)
        client.run(reset_peak)
        for B in Bs:
            t = time.perf_counter()
            there = bred(log, _make_linucb, n_bootstrap=B, rng=3, executor=client)
            dt = time.perf_counter() - t
            equal = bool(np.array_equal(there.replicate_values, here[B].replicate_values)
                         and np.array_equal(there.replicate_matches,
                                            here[B].replicate_matches))
            out[B].update(cluster_s=round(dt, 2), cluster_equals_local=equal,
                          cluster_over_local=round(dt / out[B]["local_s"], 3))
            say(f"[bred] B={B}: cluster {dt:.1f} s, equal to local: {equal}")
        out["worker_peak_rss_mb"] = round(max(client.run(_worker_peak_mb).values()), 1)
    finally:
        client.close()
        cluster.close()
    return {"T": T, "K": 10, "d": 10, "agent": "LinUCB(alpha=0.5)",
            **{f"B={B}": out[B] for B in Bs},
            "local_peak_rss_mb": out["local_peak_rss_mb"],
            "worker_peak_rss_mb": out["worker_peak_rss_mb"]}


def run_child(args: list[str]) -> dict:
    """This script in a fresh process (fresh peak RSS); its last stdout line is JSON."""
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), *args],
                          stdout=subprocess.PIPE, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- the projection -----------------------------------------------------------------------------


def projection(loo: dict) -> dict:
    """Exact LOO (pearson, k = 20) on MovieLens-25M from the measured sizes."""
    sizes = sorted(loo.values(), key=lambda m: m["n_ratings"])
    n = np.array([m["n_ratings"] for m in sizes], dtype=float)
    w = np.array([m["work_sum_raters_sq"] for m in sizes])
    s = np.array([m["local_s"] for m in sizes])
    slope_n = float(np.polyfit(np.log(n), np.log(s), 1)[0]) if len(sizes) > 1 else None
    slope_w = float(np.polyfit(np.log(w), np.log(s), 1)[0]) if len(sizes) > 1 else None
    big = sizes[-1]
    ns_per_work = big["local_s"] * big["local_threads"] / big["work_sum_raters_sq"] * 1e9
    by_ratings = big["local_s"] * (ML25M["n_ratings"] / big["n_ratings"]) ** slope_n \
        if slope_n is not None else None
    # worker memory: the growth of the measured worker peak per rating
    per_rating = (big["worker_peak_rss_mb"] - sizes[0]["worker_peak_rss_mb"]) * 2**20 / \
        max(big["n_ratings"] - sizes[0]["n_ratings"], 1)  # bytes per rating
    return {
        "slope_time_vs_ratings": slope_n, "slope_time_vs_work": slope_w,
        "thread_ns_per_unit_work": round(ns_per_work, 3),
        "ml25m_local_s_by_ratings_exponent": by_ratings,
        "worker_bytes_per_rating": round(per_rating, 1),
        "ml25m_worker_rss_mb": round(sizes[0]["worker_peak_rss_mb"]
                                     + per_rating * ML25M["n_ratings"] / 2**20, 0),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--no-bred", action="store_true")
    ap.add_argument("--child", choices=["loo", "bred"], help=argparse.SUPPRESS)
    ap.add_argument("--size", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    shapes = QUICK if args.quick else SHAPES
    T, Bs = (10_000, (20, 40)) if args.quick else (100_000, (100, 400))
    if args.child == "loo":
        print(json.dumps(child_loo(args.size, shapes[args.size], args.workers, args.k)))
        return
    if args.child == "bred":
        print(json.dumps(child_bred(T, Bs, args.workers)))
        return

    load0 = os.getloadavg()
    say(f"load average {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, {os.cpu_count()} CPUs")
    t0 = time.perf_counter()
    extra = ["--quick"] if args.quick else []
    loo = {name: run_child(["--child", "loo", "--size", name, "--workers", str(args.workers),
                            "--k", str(args.k)] + extra) for name in shapes}
    bred_out = None if args.no_bred else run_child(["--child", "bred", "--workers",
                                                    str(args.workers)] + extra)
    smallest = loo[min(loo, key=lambda k: loo[k]["n_ratings"])]
    load1 = os.getloadavg()
    equal = all(m["cluster_equals_local"] for m in loo.values()) and (
        bred_out is None or all(v["cluster_equals_local"] for k, v in bred_out.items()
                                if k.startswith("B=")))
    out = {
        "loo_knn": loo, "bred": bred_out, "projection": projection(loo),
        "cluster_overhead_smallest": smallest["cluster_over_local"],
        "cluster_overhead_target_met": smallest["cluster_over_local"] < 2.0,
        "largest_local_s": max(m["local_s"] for m in loo.values()),
        "target_4m_local_le_300s": (loo["4m"]["local_s"] <= 300) if "4m" in loo else None,
        "cluster_equals_local": equal, "workers": args.workers,
        "loadavg_before": [round(x, 2) for x in load0],
        "loadavg_after": [round(x, 2) for x in load1],
        "total_s": round(time.perf_counter() - t0, 1), "quick": args.quick,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
