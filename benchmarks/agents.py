"""Speed of the bandit agents (single and batched LinUCB) and of UserCosineCF's LOO recommend.

    python benchmarks/agents.py [--quick]

Prints progress lines, then ONE JSON object on the last line:
``linucb_steps_per_s`` (one LinUCB, K = 10, d = 10, act + update per step),
``linucb_batched_steps_per_s`` (BatchedLinUCB, B = 100, copy-steps per second: every copy
acts and learns at each step), ``linucb_batched_speedup`` (target >= 20) and
``cf_recommend_pairs_per_s`` (``UserCosineCF().fit(G)`` on a 20,000 x 180 binary graph, then
``recommend(users, 5, removed=items)`` for 20,000 held (user, item) pairs; target >= 20,000),
``linucb_new_process_cpu_s`` (the CPU seconds of a new interpreter that imports ``agents``
and runs a batched LinUCB's first act, update and replay at d = 10, B = 100: what each worker
and guest pays, with numba's disk cache filled) beside ``linucb_new_process_cold_cpu_s``
(the same with an empty cache: every kernel compiled, as on the first run after an install).
Timings exclude JIT compilation (a warm-up run first) and the simulated environment (every
arm's reward at every step is drawn before the clock starts). Each LinUCB figure is the best of
``--repeat`` runs (default 3): on a shared machine the slowest runs measure the neighbours.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
import scipy.sparse as sp

# this file is named like the ``agents`` package: drop its folder from sys.path
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]

import agents  # noqa: E402


def problem(T, B, K, d, seed):
    """Contexts X (T, B, d) and the reward R (T, B, K) every arm would earn: Bernoulli with
    logistic means. Drawn before the clock starts, so the timed loops measure the agents
    (act + update), not the simulated environment."""
    g = np.random.default_rng(seed)
    theta = g.normal(size=(K, d)) / np.sqrt(d)
    X = g.normal(size=(T, B, d))
    U = g.random((T, B))
    R = (U[:, :, None] < 1 / (1 + np.exp(-(X @ theta.T)))).astype(float)
    return X, R


def single_steps(T, K, d, seed=0):
    X, R = problem(T, 1, K, d, seed)
    ag = agents.LinUCB(alpha=0.5)
    ag.reset(seed)
    avail = np.ones(K, bool)
    t0 = time.perf_counter()
    for t in range(T):
        obs = {"context": X[t, 0], "available": avail}
        a = ag.act(obs)
        ag.update(obs, a, R[t, 0, a])
    return T / (time.perf_counter() - t0)


def batched_steps(T, B, K, d, seed=0):
    X, R = problem(T, B, K, d, seed)
    singles = [agents.LinUCB(alpha=0.5) for _ in range(B)]
    for i, a in enumerate(singles):
        a.reset([seed, i])
    bt = agents.LinUCB.batch(singles)
    avail = np.ones((B, K), bool)
    active = np.ones(B, bool)
    rows = np.arange(B)
    t0 = time.perf_counter()
    for t in range(T):
        a = bt.act(X[t], avail)
        bt.update(active, X[t], a, R[t, rows, a])
    return T * B / (time.perf_counter() - t0)


def cf_graph(n_users, n_items, seed=0):
    """Binary users x items CSR: ~10 items per user, power-law item popularity."""
    g = np.random.default_rng(seed)
    pop = 1.0 / np.arange(1, n_items + 1) ** 0.8
    pop /= pop.sum()
    sizes = np.clip(g.poisson(10, n_users), 2, n_items)
    users = np.repeat(np.arange(n_users), sizes)
    items = g.choice(n_items, size=users.size, p=pop)
    G = sp.csr_matrix((np.ones(users.size), (users, items)), shape=(n_users, n_items))
    G.sum_duplicates()
    G.data[:] = 1.0
    return G


def cf_pairs_per_s(n_users=20_000, n_items=180, n_pairs=20_000, seed=0):
    if not hasattr(agents, "UserCosineCF"):
        return None
    G = cf_graph(n_users, n_items, seed)
    g = np.random.default_rng(seed)
    coo = G.tocoo()
    pick = g.choice(coo.nnz, size=n_pairs, replace=coo.nnz < n_pairs)
    users, items = coo.row[pick].astype(np.int64), coo.col[pick].astype(np.int64)
    cf = agents.UserCosineCF().fit(G)
    cf.recommend(users[:100], 5, removed=items[:100])  # warm-up
    t0 = time.perf_counter()
    cf = agents.UserCosineCF().fit(G)
    out = cf.recommend(users, 5, removed=items)
    dt = time.perf_counter() - t0
    assert out.shape == (n_pairs, 5)
    return n_pairs / dt


#: A new interpreter's first batched LinUCB: act, update, replay (d = 10, B = 100); prints its
#: CPU seconds, imports included.
FIRST_USE = """
import time
t0 = time.process_time()
import numpy as np
import agents
g = np.random.default_rng(0)
T, K, d, B = 2000, 10, 10, 100
X, logged = g.normal(size=(T, d)), g.integers(0, K, T)
copies = [agents.LinUCB(alpha=0.5) for _ in range(B)]
for i, a in enumerate(copies):
    a.reset([0, i])
bt = agents.LinUCB.batch(copies)
acts = bt.act(np.repeat(X[:1], B, 0), np.ones((B, K), bool))
bt.update(np.ones(B, bool), np.repeat(X[:1], B, 0), acts, np.ones(B))
bt.replay_arrays(X, np.ones((T, K), bool), logged, (g.random(T) < 0.3).astype(float),
                 index=g.integers(0, T, size=(B, 500)))
print(time.process_time() - t0)
"""


def new_process_cpu(cache_dir=None) -> float:
    """CPU seconds of :data:`FIRST_USE` in a new interpreter; ``cache_dir``: numba's cache
    there (an empty folder: everything compiled)."""
    import subprocess

    env = dict(os.environ)
    if cache_dir is not None:
        env["NUMBA_CACHE_DIR"] = cache_dir
    root = os.path.dirname(_here)
    done = subprocess.run([sys.executable, "-c", FIRST_USE], cwd=root, env=env, check=True,
                          capture_output=True, text=True)
    return float(done.stdout.split()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer steps (smoke run)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per LinUCB figure (best)")
    args = ap.parse_args(argv)
    K, d, B = 10, 10, 100
    T1, TB = (2_000, 200) if args.quick else (20_000, 2_000)
    single_steps(200, K, d)  # JIT warm-up
    batched_steps(20, B, K, d)
    s = max(single_steps(T1, K, d) for _ in range(args.repeat))
    print(f"single LinUCB: {s:,.0f} steps/s", file=sys.stderr)
    b = max(batched_steps(TB, B, K, d) for _ in range(args.repeat))
    print(f"batched LinUCB (B={B}): {b:,.0f} copy-steps/s", file=sys.stderr)
    cf = cf_pairs_per_s()
    print(f"UserCosineCF LOO recommend: {cf} pairs/s", file=sys.stderr)
    import tempfile

    new_process_cpu()  # fills the cache
    warm = min(new_process_cpu() for _ in range(args.repeat))
    with tempfile.TemporaryDirectory() as empty:
        cold = new_process_cpu(empty)
    print(f"a new process's first batched LinUCB: {warm:.2f} s of CPU ({cold:.2f} s with an "
          "empty numba cache)", file=sys.stderr)
    print(json.dumps({
        "linucb_steps_per_s": s,
        "linucb_batched_steps_per_s": b,
        "linucb_batched_speedup": b / s,
        "cf_recommend_pairs_per_s": cf,
        "linucb_new_process_cpu_s": warm,
        "linucb_new_process_cold_cpu_s": cold,
        "K": K, "d": d, "B": B,
    }))


if __name__ == "__main__":
    main()
