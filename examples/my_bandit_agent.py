"""Evaluate your own bandit agent: replay and BRED on logs, beside its true online value.

    python examples/my_bandit_agent.py [--quick]     # about a minute (--quick: seconds)

A bandit agent is any object with ``reset(rng)``, ``act(observation)`` and ``update(observation,
action, reward)``; ``agents.check_agent`` checks the protocol. ``recloop.run`` then scores it
on uniform logs by replay and by BRED revealing each record once, against its online value
(``simulator.online_value``): bias, RMSE, coverage over the logs. In a scenario file it is
``kind = "python"``, ``factory = "my_bandit_agent:SoftmaxMeans"`` (``--path examples``).
"""

import sys

import numpy as np

import agents
import recloop


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

    def action_probabilities(self, observation):
        available = np.asarray(observation["available"], dtype=bool)
        if self._sums is None:
            self._sums, self._counts = np.zeros(available.size), np.zeros(available.size)
        means = np.where(self._counts > 0, self._sums / np.maximum(self._counts, 1), 1.0)
        score = np.where(available, means / self.temperature, -np.inf)
        p = np.exp(score - score[available].max())
        return p / p.sum()

    def act(self, observation):
        p = self.action_probabilities(observation)
        return int(self._rng.choice(p.size, p=p))

    def update(self, observation, action, reward):
        self.action_probabilities(observation)  # the statistics exist
        self._sums[action] += reward
        self._counts[action] += 1


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    agents.check_agent(SoftmaxMeans(), rng=0)  # raises AgentCheckError naming a broken rule
    print("check_agent: SoftmaxMeans honours the bandit protocol")
    T, n_logs, B, runs = (200, 2, 2, 10) if quick else (1000, 10, 5, 100)
    study = {"run": {"name": "my_agent"}, "world": {"preset": "bred_linear"},
             "agents": [{"name": "mine", "kind": "python",
                         "factory": "my_bandit_agent:SoftmaxMeans"}],
             "evaluations": [{"kind": "bred_vs_replay", "T": T, "n_logs": n_logs,
                              "n_bootstrap": B, "n_truth_runs": runs,
                              "estimators": ["replay", "bred_once"]}]}
    table = recloop.run(study, workers=1, progress=False).summary()
    print(f"Over {n_logs} uniform logs of {T} records: `value` against the online value "
          f"V({T}), `value_at_matches` against V(m) at the m records each one used:")
    print(table[["variant", "metric", "estimate", "truth", "bias", "rmse", "coverage"]]
          .to_string(index=False, float_format="{:.3f}".format))
