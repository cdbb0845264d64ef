"""Speed of slates (issue 14, section 5): click-model environments and slate estimators.

    python benchmarks/slates.py                      # every measurement
    python benchmarks/slates.py --only estimators

Prints progress lines, then ONE JSON object on the last line.

``env``: ``recloop/Recommendation-v0`` with ``k = 10`` out of 1,000 items (a static
``viadeo_like`` world of 5,000 users, whose CTR table is cached), PBM and cascade clicks:
steps per second of one environment, and slate-steps per second of the native vector
environment (N = 1024). Actions are slates drawn beforehand, so the figures are the
environment's; ``*_with_sampling`` adds Gymnasium's way (``action_space.sample()`` each step,
which draws a random key per item and dominates at 1,000 items). Targets on 2 cores: one
environment >= 20,000 steps/s, vector >= 500,000 slate-steps/s.

``estimators``: each slate estimator on 100,000 logged slates of length 10 (logging and
target Plackett-Luce policies over 1,000 items, 200 users; the pseudo-inverse on a uniform
log), the target's propensities given. Cascade-DR's target conditionals are ``n * k *
n_items`` numbers (10^9 with 1,000 items), so it is timed with 20 items (the array in memory)
and with 1,000 items through the policy: in factored form (``conditional_factors``, the
default for ``agents.PlackettLuce``; included in the time) and, as the reference, through
the dense conditionals computed chunk by chunk (a wrapper that hides the factors), with the
relative difference of the two estimates. Target: each <= 1 s. The other ratios are against
the literal per-record Python loop (timed on 2,000 records, scaled).

The machine is usually shared: the JSON ends with the 1-minute load average and the CPUs.
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
# packages; drop that folder before importing.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

import numpy as np  # noqa: E402

import agents  # noqa: E402
import evaluators  # noqa: E402
import simulator  # noqa: E402

MEASUREMENTS: dict[str, Callable[[argparse.Namespace], dict]] = {}


def measurement(fn):
    MEASUREMENTS[fn.__name__] = fn
    return fn


def _world(n_items=1000, n_users=5000):
    return simulator.preset("viadeo_like", n_users=n_users, n_items=n_items, campaigns=())


def _timed(fn, duration: float) -> tuple[float, int]:
    """Calls of ``fn`` (returning a count) per second of wall time, and the count."""
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < duration:
        n += fn()
    return n / (time.perf_counter() - start), n


@measurement
def env(args) -> dict:
    """One environment and the vector environment, k = 10 of 1,000 items."""
    from gymnasium.utils.performance import benchmark_step, benchmark_vector_step

    out = {}
    rng = np.random.default_rng(0)
    slates = np.array([rng.permutation(1000)[:10] for _ in range(4096)])
    for model in ("pbm", "cascade", "independent"):
        cfg = simulator.RecommendationConfig(world=_world(), k=10, visits_per_tick=1000,
                                             click_model=model)
        single = simulator.RecommendationEnv(cfg)
        single.reset(seed=0)
        state = {"i": 0}

        def steps(env=single, state=state):
            for _ in range(256):
                _, _, _, trunc, _ = env.step(slates[state["i"] % 4096])
                state["i"] += 1
                if trunc:
                    env.reset()
            return 256

        steps()  # warm the block caches
        out[f"env_steps_per_s_{model}"] = round(_timed(steps, args.seconds)[0])
        out[f"env_steps_per_s_{model}_with_sampling"] = round(
            benchmark_step(single, target_duration=args.seconds / 2, seed=0))
        N = 1024
        venv = simulator.RecommendationVectorEnv(N, cfg)
        venv.reset(seed=0)
        acts = slates[:N]

        def vsteps(venv=venv, acts=acts, N=N):
            venv.step(acts)
            return N

        vsteps()
        out[f"vector_env_slate_steps_per_s_{model}"] = round(_timed(vsteps, args.seconds)[0])
        out[f"vector_env_slate_steps_per_s_{model}_with_sampling"] = round(
            benchmark_vector_step(venv, target_duration=args.seconds / 2, seed=0))
        print(f"{model}: one env {out[f'env_steps_per_s_{model}']} steps/s, vector "
              f"{out[f'vector_env_slate_steps_per_s_{model}']} slate-steps/s", file=sys.stderr)
    return out


def _log(n, k, m, n_users, *, uniform, seed=0):
    """A slate log of ``n`` records and the target's propensities (not timed)."""
    rng = np.random.default_rng(seed)
    scores = rng.normal(0, 1.5, (n_users, m))
    mu = agents.PlackettLuce(scores, k=k, temperature=np.inf if uniform else 1.0)
    pi = agents.PlackettLuce(scores, k=k, temperature=0.5)
    users = rng.integers(0, n_users, n)
    obs = {"user": users, "available": np.ones((n, m), bool)}
    S = mu.sample(obs, rng=rng)
    cas = mu.prefix_probabilities(obs, S)
    log = simulator.SlateLog(context=np.zeros((n, 1)), action=S,
                             reward=(rng.random((n, k)) < 0.1).astype(float), pscore=cas[:, -1],
                             pscore_cascade=cas,
                             pscore_item_position=mu.item_position_probabilities(obs, S),
                             n_items=m, user=users)
    target = {"cascade": pi.prefix_probabilities(obs, S),
              "ipos": pi.item_position_probabilities(obs, S)}
    if uniform:
        target["marg"] = pi.item_marginals(obs, S)
    return log, target, pi


def _literal_seconds(log, t, name, n=2000) -> float:
    """The literal per-record loop on ``n`` records, scaled to the log (the reference)."""
    start = time.perf_counter()
    total = 0.0
    for i in range(n):
        if name == "slate_ips":
            total += t["cascade"][i, -1] / log.pscore[i] * sum(log.reward[i])
        else:
            for j in range(log.len_list):
                num, den = ((t["ipos"], log.pscore_item_position) if name == "independent_ips"
                            else (t["cascade"], log.pscore_cascade))
                total += num[i, j] / den[i, j] * log.reward[i, j]
    return (time.perf_counter() - start) * log.n_rounds / n


def _best_of(fn, repeat=3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


@measurement
def estimators(args) -> dict:
    """Each estimator on 100,000 slates of length 10."""
    n, k = args.slates, 10
    out = {"estimator_slates": n, "estimator_len_list": k}
    log, t, pi = _log(n, k, 1000, 200, uniform=False)
    print(f"log of {n} slates of {k} out of 1,000 items built", file=sys.stderr)
    calls = {
        "slate_ips": lambda: evaluators.slate_ips(log, t["cascade"][:, -1]),
        "independent_ips": lambda: evaluators.independent_ips(log, t["ipos"]),
        "reward_interaction_ips": lambda: evaluators.reward_interaction_ips(log, t["cascade"]),
    }
    for name, call in calls.items():
        sec = _best_of(call)
        out[f"{name}_s"] = round(sec, 4)
        out[f"{name}_speedup_vs_literal_loop"] = round(_literal_seconds(log, t, name) / sec, 1)
        print(f"{name}: {sec:.4f} s", file=sys.stderr)
    ulog, ut, _ = _log(n, k, 1000, 200, uniform=True, seed=1)
    out["pseudoinverse_s"] = round(_best_of(lambda: evaluators.pseudoinverse(ulog, ut["marg"])),
                                   4)
    print(f"pseudoinverse: {out['pseudoinverse_s']} s", file=sys.stderr)
    # Cascade-DR through the policy at 1,000 items: factored (the policy's own), then the
    # dense reference (the conditionals chunk by chunk, twice: the fit, then the expectations)
    fast = evaluators.cascade_dr(log, t["cascade"], pi, rng=0)
    out["cascade_dr_policy_1000_items_s"] = round(_best_of(
        lambda: evaluators.cascade_dr(log, t["cascade"], pi, rng=0)), 3)
    print(f"cascade_dr (policy, 1,000 items): {out['cascade_dr_policy_1000_items_s']} s",
          file=sys.stderr)

    class DenseOnly:  # the same policy without conditional_factors: the dense path
        conditional_probabilities = pi.conditional_probabilities

    start = time.perf_counter()
    dense = evaluators.cascade_dr(log, t["cascade"], DenseOnly(), rng=0)
    out["cascade_dr_dense_reference_1000_items_s"] = round(time.perf_counter() - start, 2)
    out["cascade_dr_factored_speedup"] = round(
        out["cascade_dr_dense_reference_1000_items_s"] / out["cascade_dr_policy_1000_items_s"], 1)
    out["cascade_dr_factored_vs_dense_rel_diff"] = float(
        f"{abs(fast.value - dense.value) / abs(dense.value):.2g}")
    print(f"cascade_dr dense reference: {out['cascade_dr_dense_reference_1000_items_s']} s",
          file=sys.stderr)
    slog, st, spi = _log(n, k, 20, 200, uniform=False, seed=2)
    D = spi.conditional_probabilities(slog.observations(), slog.action)
    out["cascade_dr_array_20_items_s"] = round(_best_of(
        lambda: evaluators.cascade_dr(slog, st["cascade"], D, rng=0)), 4)
    out["cascade_dr_policy_20_items_s"] = round(_best_of(
        lambda: evaluators.cascade_dr(slog, st["cascade"], spi, rng=0)), 4)
    print(f"cascade_dr (array, 20 items): {out['cascade_dr_array_20_items_s']} s",
          file=sys.stderr)
    return out


@measurement
def marginals(args) -> dict:
    """Exact position marginals of one context, 1,000 items, k = 10 (the exponential-race
    integral); enumeration is infeasible there (10^29 prefixes), so its speed is compared on
    8 items, k = 4 (1,680 prefixes)."""
    from agents._plackett_luce import pl_marginals

    rng = np.random.default_rng(0)
    L = rng.normal(0, 1.5, (20, 1000))
    pl_marginals(L[:1], 10)  # compile
    sec = _best_of(lambda: pl_marginals(L, 10)) / 20
    small = rng.normal(0, 1.5, (1, 8))
    enum = _best_of(lambda: pl_marginals(small, 4, method="enumerate"))
    integ = _best_of(lambda: pl_marginals(small, 4))
    err = float(np.abs(pl_marginals(small, 4) - pl_marginals(small, 4, method="enumerate")).max())
    print(f"marginals: {1e3 * sec:.1f} ms per context (1,000 items, k = 10)", file=sys.stderr)
    return {"marginals_ms_per_context_1000_items_k10": round(1e3 * sec, 2),
            "marginals_8_items_k4_integral_vs_enumeration_speedup": round(enum / integ, 1),
            "marginals_8_items_k4_max_abs_diff": err}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, choices=sorted(MEASUREMENTS))
    parser.add_argument("--seconds", type=float, default=2.0,
                        help="duration of each environment measurement")
    parser.add_argument("--slates", type=int, default=100_000)
    args = parser.parse_args(argv)
    out = {}
    for name in args.only or list(MEASUREMENTS):
        out.update(MEASUREMENTS[name](args))
    out["loadavg_1min"] = round(os.getloadavg()[0], 2)
    out["cpu_count"] = os.cpu_count()
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
