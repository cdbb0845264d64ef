"""Speed of the fast exact LOO for user-based kNN (issue 5) against the literal reference.

    python benchmarks/loo_cf.py                       # synthetic, MovieLens 100K shape
    python benchmarks/loo_cf.py --size 1m             # synthetic, MovieLens 1M shape
    python benchmarks/loo_cf.py --data ../shared/data/ml-100k/u.data   # the real file

Prints progress lines, then ONE JSON object on the last line:
``fast_s`` (exact LOO, pearson, k=20, all ratings, after JIT warm-up), ``fast_s_by_similarity``,
``naive_s_estimated`` (the naive method on a user subsample, scaled by the pair work it
skipped: sum over held-out (u, k) and candidates v of |I_u| + |I_v|), ``speedup``, the
agreement of fast and naive on the subsample, MAE/RMSE per similarity, and peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

import numpy as np

# Sibling scripts (benchmarks/simulator.py) would shadow the packages of the same name when
# this file is run as a script, which puts its own folder first on sys.path.
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]

from evaluators import datasets, loo_knn  # noqa: E402

SIMILARITIES = ("pearson", "cosine", "adjusted_cosine", "pearson_corated", "cosine_corated")
SHAPES = {"100k": (943, 1682, 100_000), "1m": (6040, 3706, 1_000_209)}


def synthetic(n_users, n_items, n_ratings, rng):
    """MovieLens-like ratings: >= 20 per user, heavy-tailed activity, power-law popularity."""
    # activity: 20 each plus a log-normal share of the rest, capped at 70% of the catalogue
    cap = int(0.7 * n_items)
    w = rng.lognormal(0.0, 1.0, n_users)
    counts = np.full(n_users, 20)
    rest = n_ratings - counts.sum()
    while rest > 0:
        free = counts < cap
        add = rng.multinomial(rest, w * free / np.sum(w * free))
        counts = np.minimum(counts + add, cap)
        rest = n_ratings - counts.sum()
    # popularity ~ (rank + 20)^-1, close to MovieLens 100K (sum of squared popularities
    # ~1.5e7 against 1.7e7); each user draws distinct items with these weights
    # (Gumbel top-k = weighted sampling without replacement)
    logp = -1.0 * np.log(np.arange(n_items) + 20.0)
    logp = logp[rng.permutation(n_items)]
    users, items = [], []
    for u in range(n_users):
        keys = logp + rng.gumbel(size=n_items)
        chosen = np.argpartition(-keys, counts[u] - 1)[:counts[u]]
        users.append(np.full(counts[u], u))
        items.append(chosen)
    users, items = np.concatenate(users), np.concatenate(items)
    bias_u = rng.normal(0.0, 0.5, n_users)
    bias_i = rng.normal(0.0, 0.5, n_items)
    r = np.clip(np.rint(3.5 + bias_u[users] + bias_i[items] + rng.normal(0, 0.9, users.size)), 1, 5)
    return users, items, r


def read_ratings(path):
    """MovieLens ``u.data`` or ``ratings.dat`` through ``evaluators.datasets``."""
    load = (datasets.load_movielens_1m if os.path.basename(path) == "ratings.dat"
            else datasets.load_movielens_100k)
    d = load(path)
    return d.users, d.items, d.ratings


def pair_work(users, items, held):
    """Sum over held-out (u, k) and candidates v (other raters of k) of |I_u| + |I_v|."""
    _, u = np.unique(users, return_inverse=True)
    _, i = np.unique(items, return_inverse=True)
    n_u = np.bincount(u).astype(np.float64)
    c_k = np.bincount(i).astype(np.float64)
    sum_nv = np.bincount(i, weights=n_u[u])
    nu, ck, sk = n_u[u[held]], c_k[i[held]], sum_nv[i[held]]
    return float(np.sum((ck - 1) * nu + (sk - nu)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="MovieLens u.data or ratings.dat (read in place, never copied)")
    ap.add_argument("--size", choices=sorted(SHAPES), default="100k")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--naive-users", type=int, default=None,
                    help="users in the naive subsample (default 10 for 100k, 4 for 1m)")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)

    if args.data:
        users, items, r = read_ratings(args.data)
        source = args.data
    else:
        users, items, r = synthetic(*SHAPES[args.size], rng)
        source = f"synthetic {args.size} (seed {args.seed})"
    n_users = np.unique(users).size
    print(f"data: {source}: {n_users} users, {np.unique(items).size} items, {r.size} ratings",
          flush=True)

    t = time.perf_counter()  # JIT compilation, once per process
    loo_knn((np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]), np.array([1.0, 2.0, 3.0, 4.0])))
    compile_s = time.perf_counter() - t

    fast_s, mae, rmse, fallbacks = {}, {}, {}, {}
    for sim in SIMILARITIES:
        t = time.perf_counter()
        res = loo_knn((users, items, r), similarity=sim, k=args.k)
        fast_s[sim] = time.perf_counter() - t
        mae[sim], rmse[sim], fallbacks[sim] = res.mae, res.rmse, res.n_fallback
        print(f"fast {sim}: {fast_s[sim]:.2f} s, MAE {res.mae:.4f}, RMSE {res.rmse:.4f}",
              flush=True)
        if sim == "pearson":
            full = res
    clipped = loo_knn((users, items, r), similarity="pearson_corated", k=args.k, clip=(1, 5))

    n_sub = args.naive_users or (10 if args.size == "100k" or args.data else 4)
    sub = rng.choice(np.unique(users), size=min(n_sub, n_users), replace=False)
    t = time.perf_counter()
    naive = loo_knn((users, items, r), similarity="pearson", k=args.k, users=sub,
                    method="naive")
    naive_sub_s = time.perf_counter() - t
    held = np.isin(users, sub)
    share = pair_work(users, items, held) / pair_work(users, items, np.ones(r.size, bool))
    naive_est = naive_sub_s / share
    agree = float(np.max(np.abs(naive.prediction - full.prediction[naive.index])))
    nb_equal = bool(np.array_equal(naive.n_neighbours, full.n_neighbours[naive.index]))
    print(f"naive on {sub.size} users ({share:.2%} of the pair work): {naive_sub_s:.2f} s "
          f"-> {naive_est:.1f} s estimated; max |fast - naive| = {agree:.2e}", flush=True)

    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({
        "data": source, "n_users": int(n_users), "n_ratings": int(r.size), "k": args.k,
        "fast_s": round(fast_s["pearson"], 3),
        "fast_s_by_similarity": {s: round(v, 3) for s, v in fast_s.items()},
        "compile_s": round(compile_s, 2),
        "naive_s_estimated": round(naive_est, 1),
        "naive_subsample_users": int(sub.size), "naive_subsample_s": round(naive_sub_s, 2),
        "naive_subsample_work_share": round(share, 5),
        "speedup": round(naive_est / fast_s["pearson"], 1),
        "max_abs_fast_minus_naive": agree, "n_neighbours_equal": nb_equal,
        "mae": {s: round(v, 4) for s, v in mae.items()},
        "rmse": {s: round(v, 4) for s, v in rmse.items()},
        "n_fallback": fallbacks,
        "pearson_corated_clip_1_5": {"mae": round(clipped.mae, 4), "rmse": round(clipped.rmse, 4)},
        "peak_rss_mb": round(peak_mb, 1),
    }))


if __name__ == "__main__":
    main()
