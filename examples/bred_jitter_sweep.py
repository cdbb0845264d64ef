"""How wide should BRED's jitter be? A sweep of ``c`` in ``h = c * std(context) / sqrt(T)``.

    python examples/bred_jitter_sweep.py [--quick]

On the ``bred_linear`` test bed, for logs of T records, prints the bias and RMSE against
the truth of

* replay and BRED (``c`` = 1, 3, 10, 30, 100) for LinUCB (alpha 0.5), against its online
  value V(T) (Monte Carlo, 200 runs);
* replay and BRED (``c`` = 1, 30, 100) for a *static* context-using policy (a greedy ridge
  policy fitted on a separate log, then frozen), against its exact value.

The paper's small jitter (c = 1, recloop's default) leaves LinUCB's memorisation bias
untouched; a jitter wide enough to cancel it (c ~ 100) blurs the contexts so much that
the static policy's estimate drops by a third. See ``evaluators.bred``'s Notes; about 7
minutes on 2 cores (``--quick``: 6 logs of T = 500 only, about 15 s).
"""

from __future__ import annotations

import argparse

import numpy as np

import agents
import evaluators
import simulator

CONFIG = simulator.preset("bred_linear")


def linucb(gen):
    agent = agents.LinUCB(alpha=0.5)
    agent.reset(gen)
    return agent


class Frozen:
    """A trained agent that no longer learns: a static policy (exact value known)."""

    def __init__(self, agent):
        self.agent = agent

    def act(self, observation):
        return self.agent.act(observation)

    def update(self, observation, action, reward):
        pass

    def action_probabilities(self, observation):
        return self.agent.action_probabilities(observation)


def greedy_policy(seed):
    """Ridge-greedy policy (LinUCB with alpha 0) fitted on a separate log of 20,000 records."""
    log, _ = simulator.collect_log(CONFIG, 20_000, rng=seed)
    agent = agents.LinUCB(alpha=0.0)
    agent.reset(np.random.default_rng(seed))
    available = log.available_mask()
    for j in range(log.n_rounds):
        obs = {"context": log.context[j], "available": available[j]}
        agent.update(obs, int(log.action[j]), float(log.reward[j]))
    return Frozen(agent)


def row(label, errors):
    e = np.asarray(errors)
    print(f"  {label:<10} bias {e.mean():+.3f}  RMSE {np.sqrt(np.mean(e ** 2)):.3f}")


def jitter(log, c):
    return c * log.context.std(axis=0) / np.sqrt(log.n_rounds)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer logs, T = 500 only")
    args = ap.parse_args(argv)
    n_logs, sizes, B = (6, (500,), 20) if args.quick else (20, (500, 2000, 10_000), 50)
    root = np.random.SeedSequence(2026)
    truth_seed, log_seeds, static_seeds = root.spawn(3)

    print(f"LinUCB, {n_logs} logs per T, B = {B}; truth V(T) from 200 online runs")
    for T in sizes:
        V = simulator.online_value(CONFIG, linucb, T, n_runs=200, rng=truth_seed).value
        logs = [simulator.collect_log(CONFIG, T, rng=s)[0] for s in log_seeds.spawn(n_logs)]
        print(f"T = {T}: V(T) = {V:.3f}")
        row("replay", [evaluators.replay(lg, linucb(np.random.default_rng(i))).value - V
                       for i, lg in enumerate(logs)])
        for c in (1, 3, 10, 30, 100):
            row(f"BRED c={c}", [evaluators.bred(lg, linucb, n_bootstrap=B,
                                                jitter=jitter(lg, c), rng=i).value - V
                                for i, lg in enumerate(logs)])

    policy = greedy_policy(int(static_seeds.generate_state(1)[0]))
    value = simulator.static_policy_value(CONFIG, policy)
    print(f"\nStatic greedy policy, exact value {value:.3f}")
    for T in sizes[:2]:
        logs = [simulator.collect_log(CONFIG, T, rng=s)[0] for s in log_seeds.spawn(n_logs)]
        print(f"T = {T}:")
        row("replay", [evaluators.replay(lg, policy).value - value for lg in logs])
        for c in (1, 30, 100):
            row(f"BRED c={c}", [evaluators.bred(lg, lambda g: policy, n_bootstrap=B // 5,
                                                jitter=jitter(lg, c), rng=i).value - value
                                for i, lg in enumerate(logs)])


if __name__ == "__main__":
    main()
