"""Speed of the off-policy estimators, and against Open Bandit Pipeline where it is installed.

Prints progress, then ONE JSON object on its last line:

* ``seconds``: each estimator on ``--n`` records (default 1,000,000) with ``--k`` actions
  (default 1,000). ``action_dist`` is one dense ``(n, K)`` float32 array (4 GB at the
  defaults; float32 is read as it is, float64 would be 8 GB); the model-based estimators get
  the reward model as a second dense float32 array (``model=q``, no fitting). The log is
  uniform: ``mips`` computes the logging marginal in closed form, ``mips_with_pi_b`` reads it
  from a dense float32 ``pi_b`` as a non-uniform log needs (``--skip-mips`` to leave both
  out); MIPS reads only each record's own embedding group beyond the validation pass. IPS,
  SNIPS and subgaussian IPS read only ``pi(a_j|x_j)`` beyond the validation pass (one global
  min and one pass of row sums); the model-based ones validate inside their own pass.
* ``slope_s``: ``select_estimator`` over 10 ``clip`` values of IPS.
* ``static_value_s``: exact ``static_policy_value`` of a softmax policy at K = 10,000.
* ``obp``: where ``obp`` imports, recloop and OBP side by side in this process on
  ``--obp-n`` records (default 100,000) with K = ``--k``, float64 ``(n, K, 1)`` inputs as
  OBP wants them: seconds of each, the ratio ``recloop / obp`` (best of 7 interleaved runs) and the
  largest absolute difference of the values; MIPS with a dense ``pi_b`` against OBP's
  ``MarginalizedInverseProbabilityWeighting`` given the one-hot ``p_e_a``, SLOPE against
  ``InverseProbabilityWeightingTuning(tuning_method="slope")`` over 10 clips.
* ``positions``: the position-aware case of the Open Bandit Dataset's shape (issue 24 §5):
  ``--pos-n`` records (default 1,000,000), 80 items, 3 positions, ``action_dist`` a dense
  float32 ``(n, 80, 3)`` array (a contextual target; 0.96 GB) and the model-based
  estimators' ``q`` another: ``seconds`` of every static estimator (target <= 1 s each),
  ``ips_numpy_s`` the plain-numpy reference ``mean(pi(a_j|x_j, k_j) / p_j r_j)`` and the
  ratio of IPS to it; ``select_by_twin_s``: 20 twins, the 10 default candidates, on
  ``--twin-n`` records (default 100,000) of the same shape with a context-free target
  broadcast over the records, as the dataset's BTS policy is (target <= 60 s on 2 cores).
  ``--positions-only`` runs this part alone.
* ``load``: the 1-minute load average before and after (the machine is shared).

Usage: ``.venv/bin/python benchmarks/ope.py [--n N] [--k K] [--obp-n N] [--positions-only]``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np

# this directory holds a script called simulator.py: keep it from shadowing the package
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]


def best_of(fn, repeat=3):
    best, out = math.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def make_inputs(n, K, dtype, seed=0):
    from simulator.logs import BanditLog

    g = np.random.default_rng(seed)
    ad = g.random((n, K), dtype=np.float32).astype(dtype, copy=False)
    ad /= ad.sum(axis=1, keepdims=True, dtype=np.float64).astype(dtype)
    ad[:, 0] += 1 - ad.sum(axis=1, dtype=np.float64).astype(dtype)  # rows sum to 1
    action = g.integers(0, K, n)
    log = BanditLog(context=g.normal(size=(n, 5)), action=action,
                    reward=(g.random(n) < 0.3).astype(np.float64), pscore=np.full(n, 1.0 / K),
                    n_actions=K, action_embeddings=(np.arange(K) % 50)[:, None])
    return log, ad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--k", type=int, default=1_000)
    ap.add_argument("--obp-n", type=int, default=100_000)
    ap.add_argument("--skip-mips", action="store_true")
    ap.add_argument("--pos-n", type=int, default=1_000_000)
    ap.add_argument("--twin-n", type=int, default=100_000)
    ap.add_argument("--positions-only", action="store_true")
    args = ap.parse_args()
    import simulator

    load0 = os.getloadavg()[0]
    out = {"n_rounds": args.n, "n_actions": args.k, "threads": os.cpu_count(), "seconds": {}}
    out["positions"] = time_positions(args.pos_n, args.twin_n)
    if args.positions_only:
        out["load"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
        print(json.dumps(out))
        return
    time_catalogue(args, out)  # its (n, K) arrays are freed on return

    config = simulator.preset("large_actions", n_arms=10_000)
    logits = np.random.default_rng(2).normal(size=(config.dim, config.n_arms))

    def softmax_policy(x, avail):
        z = x @ logits
        p = np.exp(z - z.max(axis=1, keepdims=True))
        return p / p.sum(axis=1, keepdims=True)

    s, v = best_of(lambda: simulator.static_policy_value(config, softmax_policy), 3)
    out["static_value_s"] = round(s, 3)
    print(f"  static_policy_value, K = 10,000: {s:.3f} s (value {v:.6f})", flush=True)

    try:
        import obp  # noqa: F401
    except ImportError:
        out["obp"] = "not installed"
        print("obp not installed: no ratio", flush=True)
    else:
        out["obp"] = against_obp(args.obp_n, args.k)
    out["load"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
    print(json.dumps(out))


def static_cases(log, ad, q) -> dict:
    """The static estimators on one log, target and estimated rewards ``q``, as calls."""
    import evaluators as ev

    return {
        "ips": lambda: ev.ips(log, ad),
        "snips": lambda: ev.snips(log, ad),
        "subgaussian_ips": lambda: ev.subgaussian_ips(log, ad),
        "direct_method": lambda: ev.direct_method(log, ad, model=q),
        "doubly_robust": lambda: ev.doubly_robust(log, ad, model=q),
        "sndr": lambda: ev.sndr(log, ad, model=q),
        "switch_dr": lambda: ev.switch_dr(log, ad, model=q),
        "dr_os": lambda: ev.dr_os(log, ad, model=q),
    }


def time_static(cases: dict, seconds: dict) -> None:
    """Best of 2 of each call into ``seconds``, a line each."""
    for name, fn in cases.items():
        s, est = best_of(fn, 2)
        seconds[name] = round(s, 3)
        print(f"  {name:16s} {s:7.3f} s  value {est.value:.6f}", flush=True)


def time_catalogue(args, out):
    import evaluators as ev

    print(f"building inputs: n = {args.n:,}, K = {args.k:,} (float32)", flush=True)
    log, ad = make_inputs(args.n, args.k, np.float32)
    q = np.random.default_rng(1).random((args.n, args.k), dtype=np.float32)
    time_static(static_cases(log, ad, q), out["seconds"])
    if not args.skip_mips:
        del q
        # the log is uniform: MIPS's logging marginal in closed form (no pi_b array) ...
        s, est = best_of(lambda: ev.mips(log, ad), 2)
        out["seconds"]["mips"] = round(s, 3)
        print(f"  {'mips':16s} {s:7.3f} s  value {est.value:.6f}", flush=True)
        # ... and with the logging policy given as a dense pi_b, as a non-uniform log needs
        pi_b = np.full((args.n, args.k), 1.0 / args.k, dtype=np.float32)
        s, est = best_of(lambda: ev.mips(log, ad, pi_b=pi_b), 2)
        out["seconds"]["mips_with_pi_b"] = round(s, 3)
        print(f"  {'mips, pi_b':16s} {s:7.3f} s  value {est.value:.6f}", flush=True)
        del pi_b
    values = (math.inf, 500.0, 200.0, 100.0, 50.0, 20.0, 10.0, 5.0, 2.0, 1.0)
    s, est = best_of(lambda: ev.select_estimator(log, ad, values=values), 2)
    out["slope_s"] = round(s, 3)
    print(f"  select_estimator (10 clips) {s:.3f} s, chose clip = {est.selected}", flush=True)


def positioned_inputs(n, K, L, seed=0, *, dense=True):
    """A uniform log of ``n`` records over ``K`` items and ``L`` positions, and a target:
    dense float32 ``(n, K, L)`` (each position a distribution over the items), or one
    ``(K, L)`` column set broadcast over the records (a context-free policy)."""
    from simulator.logs import BanditLog

    g = np.random.default_rng(seed)
    log = BanditLog(context=g.normal(size=(n, 5)), action=g.integers(0, K, n),
                    reward=(g.random(n) < 0.005).astype(np.float64),
                    pscore=np.full(n, 1.0 / K), n_actions=K, position=g.integers(0, L, n),
                    len_list=L, action_embeddings=(np.arange(K) % 8)[:, None])
    if dense:
        ad = g.random((n, K, L), dtype=np.float32)
        ad /= ad.sum(axis=1, keepdims=True, dtype=np.float64).astype(np.float32)
        ad[:, 0, :] += 1 - ad.sum(axis=1, dtype=np.float64).astype(np.float32)
    else:
        col = g.dirichlet(np.ones(K), size=L).T  # (K, L)
        ad = np.broadcast_to(col, (n, K, L))
    return log, ad


def time_positions(n, twin_n, K=80, L=3):
    import evaluators as ev

    res: dict = {"n_rounds": n, "n_actions": K, "len_list": L, "seconds": {}}
    print(f"position-aware inputs: n = {n:,}, K = {K}, L = {L} (float32)", flush=True)
    log, ad = positioned_inputs(n, K, L)
    q = np.random.default_rng(1).random((n, K, L), dtype=np.float32) * 0.01
    cases = static_cases(log, ad, q)
    cases["mips"] = lambda: ev.mips(log, ad)
    time_static(cases, res["seconds"])
    rows = np.arange(n)

    def reference():  # the formula in plain numpy, no validation
        return float(np.mean(ad[rows, log.action, log.position] / log.pscore * log.reward))

    s_ref, v_ref = best_of(reference, 2)
    res["ips_numpy_s"] = round(s_ref, 3)
    res["ips_over_numpy"] = round(res["seconds"]["ips"] / s_ref, 2)
    res["ips_abs_diff"] = abs(ev.ips(log, ad).value - v_ref)
    s, est = best_of(lambda: ev.select_estimator(log, ad), 1)
    res["seconds"]["select_estimator"] = round(s, 3)
    ad = q = cases = None  # free the dense arrays
    log, ad = positioned_inputs(twin_n, K, L, seed=3, dense=False)
    s, est = best_of(lambda: ev.select_by_twin(log, ad, n_twins=20, rng=0), 1)
    res["select_by_twin_s"] = round(s, 2)
    res["select_by_twin_n"] = twin_n
    print(f"  select_by_twin (20 twins, 10 candidates, n = {twin_n:,}) {s:.2f} s, chose "
          f"{est.selected}", flush=True)
    return res


def against_obp(n, K):
    import obp.ope as o

    import evaluators as ev

    print(f"against OBP {__import__('obp').__version__}: n = {n:,}, K = {K:,} (float64)",
          flush=True)
    log, ad = make_inputs(n, K, np.float64, seed=3)
    ad3 = ad[:, :, None]
    q3 = np.random.default_rng(4).random((n, K, 1))
    common = dict(reward=log.reward, action=log.action, pscore=log.pscore,
                  position=np.zeros(n, dtype=int), action_dist=ad3)
    pairs = {
        "ips": (lambda: ev.ips(log, ad3).value,
                lambda: o.InverseProbabilityWeighting().estimate_policy_value(**common)),
        "snips": (lambda: ev.snips(log, ad3).value,
                  lambda: o.SelfNormalizedInverseProbabilityWeighting().estimate_policy_value(
                      **common)),
        "direct_method": (lambda: ev.direct_method(log, ad3, model=q3).value,
                          lambda: o.DirectMethod().estimate_policy_value(
                              action_dist=ad3, position=common["position"],
                              estimated_rewards_by_reg_model=q3)),
        "doubly_robust": (lambda: ev.doubly_robust(log, ad3, model=q3).value,
                          lambda: o.DoublyRobust().estimate_policy_value(
                              **common, estimated_rewards_by_reg_model=q3)),
        "sndr": (lambda: ev.sndr(log, ad3, model=q3).value,
                 lambda: o.SelfNormalizedDoublyRobust().estimate_policy_value(
                     **common, estimated_rewards_by_reg_model=q3)),
        "switch_dr": (lambda: ev.switch_dr(log, ad3, model=q3, tau=500.0).value,
                      lambda: o.SwitchDoublyRobust(lambda_=500.0).estimate_policy_value(
                          **common, estimated_rewards_by_reg_model=q3)),
        "dr_os": (lambda: ev.dr_os(log, ad3, model=q3, lambda_=100.0).value,
                  lambda: o.DoublyRobustWithShrinkage(lambda_=100.0).estimate_policy_value(
                      **common, estimated_rewards_by_reg_model=q3)),
        "subgaussian_ips": (lambda: ev.subgaussian_ips(log, ad3, lambda_=0.1).value,
                            lambda: o.SubGaussianInverseProbabilityWeighting(
                                lambda_=0.1).estimate_policy_value(**common)),
    }
    E = log.action_embeddings
    pi_b = np.full((n, K), 1.0 / K)
    p_e_a = np.zeros((K, int(E.max()) + 1, 1))
    p_e_a[np.arange(K), E[:, 0], 0] = 1.0
    pairs["mips"] = (
        lambda: ev.mips(log, ad3, pi_b=pi_b).value,
        lambda: o.MarginalizedInverseProbabilityWeighting(
            n_actions=K, embedding_selection_method=None).estimate_policy_value(
            reward=log.reward, action=log.action, action_embed=E[log.action],
            pi_b=pi_b[:, :, None], action_dist=ad3, p_e_a=p_e_a, position=common["position"]))
    clips = [math.inf, 500.0, 200.0, 100.0, 50.0, 20.0, 10.0, 5.0, 2.0, 1.0]
    pairs["select_estimator"] = (
        lambda: ev.select_estimator(log, ad3, values=clips).value,
        lambda: o.InverseProbabilityWeightingTuning(
            lambdas=list(clips), tuning_method="slope").estimate_policy_value(**common))
    res = {}
    for name, (ours, theirs) in pairs.items():
        # interleaved, best of 7 each: the machine is shared, and noise is one-sided
        t_ours = t_obp = math.inf
        for _ in range(7):
            t, v_ours = best_of(ours, 1)
            t_ours = min(t_ours, t)
            t, v_obp = best_of(theirs, 1)
            t_obp = min(t_obp, t)
        res[name] = {"recloop_s": round(t_ours, 4), "obp_s": round(t_obp, 4),
                     "ratio": round(t_ours / t_obp, 3),
                     "max_abs_diff": float(abs(v_ours - v_obp))}
        print(f"  {name:16s} recloop {t_ours:.4f} s, OBP {t_obp:.4f} s, ratio "
              f"{t_ours / t_obp:.2f}, |diff| {abs(v_ours - v_obp):.2e}", flush=True)
    return res


if __name__ == "__main__":
    main()
