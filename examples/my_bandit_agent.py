"""Bring your own bandit agent: check it, evaluate it offline, compare with the truth.

A bandit agent is any object with ``reset(rng)``, ``act(observation)`` and
``update(observation, action, reward)`` (``agents.BanditPolicy``); with
``action_probabilities(observation)`` it can also be a target policy of the ``ope``
evaluation. ``agents.check_agent`` checks the protocol. In a scenario file it is
``kind = "python"``, ``factory = "my_bandit_agent:SoftmaxMeans"`` with
``--path examples``.

Python agents run through the plain act/update loop: in ``bred`` their B replicates run one
after another, about 14x slower than recloop's agents, whose batched twins are compiled.

Run: ``python examples/my_bandit_agent.py`` (``--quick`` for a smaller run).
"""

import sys

import numpy as np

import agents
import evaluators
import simulator


class SoftmaxMeans:
    """Plays arm a with probability proportional to exp(mean reward of a / temperature);
    arms never played count with an optimistic mean of 1."""

    def __init__(self, temperature: float = 0.05):
        if not temperature > 0:
            raise ValueError(f"`temperature` must be > 0; got {temperature}.")
        self.temperature = float(temperature)
        self.reset()

    def reset(self, rng=None):
        self._rng = np.random.default_rng(rng)
        self._sums = self._counts = None

    def _stats(self, available):
        if self._sums is None:
            self._sums = np.zeros(available.size)
            self._counts = np.zeros(available.size)
        return self._sums, self._counts

    def action_probabilities(self, observation):
        available = np.asarray(observation["available"], dtype=bool)
        if not available.any():
            raise ValueError("no available arm in the observation")
        sums, counts = self._stats(available)
        means = np.where(counts > 0, sums / np.maximum(counts, 1), 1.0)
        score = np.where(available, means / self.temperature, -np.inf)
        p = np.exp(score - score[available].max())
        return p / p.sum()

    def act(self, observation):
        p = self.action_probabilities(observation)
        return int(self._rng.choice(p.size, p=p))

    def update(self, observation, action, reward):
        sums, counts = self._stats(np.asarray(observation["available"]))
        sums[action] += reward
        counts[action] += 1


def make_agent(rng=None):
    agent = SoftmaxMeans()
    agent.reset(rng)
    return agent


def main(T: int = 2000, n_bootstrap: int = 20, n_runs: int = 100) -> None:
    agents.check_agent(SoftmaxMeans(), rng=0)  # raises AgentCheckError naming a broken rule
    print("check_agent: SoftmaxMeans honours the bandit protocol")
    config = simulator.preset("bred_linear")
    log, _ = simulator.collect_log(config, T, rng=0)  # uniform logging
    replay = evaluators.replay(log, make_agent(1), rng=2)
    once = evaluators.bred(log, make_agent, n_bootstrap=n_bootstrap, reveal="once", rng=3)
    truth = simulator.online_value(config, make_agent, T, n_runs=n_runs, rng=4)
    v_replay, _ = truth.at(max(1, int(replay.n)))
    v_once, _ = truth.at(max(1, min(T, int(round(once.mean_matches)))))
    print(f"replay:    {replay.value:.3f} [{replay.ci_low:.3f}, {replay.ci_high:.3f}] on "
          f"{replay.n} matches; truth at that horizon V({replay.n}) = {v_replay:.3f}")
    print(f"bred_once: {once.value:.3f} [{once.ci_low:.3f}, {once.ci_high:.3f}] on "
          f"{once.mean_matches:.0f} matches; truth V({once.mean_matches:.0f}) = {v_once:.3f}")
    print(f"the online value over {T} steps: V({T}) = {truth.value:.3f} +- "
          f"{truth.stderr:.3f} ({truth.n_runs} runs)")


if __name__ == "__main__":
    if "--quick" in sys.argv:
        main(T=400, n_bootstrap=4, n_runs=10)
    else:
        main()
