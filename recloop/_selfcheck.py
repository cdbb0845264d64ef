"""A tiny self-contained evaluation that exercises the harness without the simulator.

Each agent is a ``fixed_arm`` policy; the cell draws the means of ``n_arms`` Bernoulli arms
from its seed, pulls the agent's arm ``n`` times per tick and reports the sample mean (normal
interval) beside the arm's true mean. Cheap, deterministic given the cell's seed, and it
checks the whole pipeline: seeding by cell key, executors, resume, results and report.
"""

from __future__ import annotations

import time

import numpy as np

from recloop._registry import AgentKind, EvaluationKind
from recloop._results import Measurement
from recloop._schema import Float, Int, Param

__all__ = ["FixedArm", "KINDS", "run_selfcheck"]

_Z95 = 1.959963984540054  # standard normal quantile 0.975


class FixedArm:
    """A policy that always plays ``arm``."""

    def __init__(self, arm: int = 0):
        self.arm = int(arm)

    def reset(self, rng=None) -> None:
        pass

    def act(self, observation) -> int:
        return self.arm

    def update(self, observation, action, reward) -> None:
        pass


def run_selfcheck(cell) -> list[Measurement]:
    """Run one selfcheck cell (see the module docstring)."""
    p = cell.params
    world_rng, pull_rng = (np.random.default_rng(s) for s in cell.seed_sequence.spawn(2))
    means = world_rng.uniform(0.0, 1.0, size=p["n_arms"])
    rows = []
    for name in cell.agent_names:
        agent = cell.make_agent(name)(pull_rng)
        arm = agent.act({"context": np.zeros(0), "available": np.ones(p["n_arms"], bool)})
        if not 0 <= arm < p["n_arms"]:
            raise ValueError(f"agent {name!r} plays arm {arm}; the selfcheck has "
                             f"n_arms = {p['n_arms']}")
        for tick in range(p["ticks"]):
            pulls = (pull_rng.random(p["n"]) < means[arm]).astype(np.float64)
            mean = float(pulls.mean())
            # normal interval computed here, not by `evaluators`: the self-check must not
            # depend on the code it is used to test around
            se = float(pulls.std(ddof=1) / np.sqrt(p["n"])) if p["n"] > 1 else float("nan")
            rows.append(Measurement(
                evaluation=cell.evaluation, agent=name, metric="mean_reward", estimate=mean,
                stderr=se, ci_low=mean - _Z95 * se, ci_high=mean + _Z95 * se, n=p["n"],
                truth=float(means[arm]), tick=tick if p["ticks"] > 1 else None))
    if p["delay"]:  # in steps of at most 0.1 s, each a sign of progress (the time limits)
        steps = max(1, int(np.ceil(p["delay"] / 0.1)))
        for _ in cell.bar(range(steps), desc="delay"):
            time.sleep(p["delay"] / steps)
    return rows



def _check_kind(params, agents, world):
    """Cross-key rule: every agent's arm exists."""
    for a in agents:
        if a.get("arm", 0) >= params["n_arms"]:
            yield "agents", (f"expected agents whose arm is < n_arms = {params['n_arms']}, got "
                             f"agent {a['name']!r} with arm = {a['arm']}")


KINDS = (
    EvaluationKind(
        name="selfcheck",
        summary="Harness self-check: Monte-Carlo mean of n pulls of each agent's arm against "
                "the arm's true Bernoulli rate (no simulator needed).",
        run=run_selfcheck,
        params=(
            Param("n_arms", Int(low=1, high=1000), 5, "Number of Bernoulli arms (means drawn "
                  "uniformly in [0, 1] from the cell's seed)."),
            Param("n", Int(low=1, high=10_000_000), 100, "Pulls per estimate."),
            Param("ticks", Int(low=1, high=1000), 1, "Repeated estimates per cell, reported "
                  "on the tick column (fresh pulls each tick)."),
            Param("delay", Float(low=0.0, high=60.0), 0.0, "Seconds each cell sleeps before "
                  "it returns, reporting its progress every 0.1 s (to test interruption, "
                  "resume and the time limits)."),
        ),
        per_agent=True,
        agent_family="test",
        check=_check_kind,
        resources=lambda params, world: {"n: pulls": 2 * params["n"] * 8},
        headline=("mean_reward",),
    ),
    AgentKind("fixed_arm", FixedArm, "test", "Always plays the same arm (the selfcheck "
              "evaluation's agent).",
              (Param("arm", Int(low=0), 0, "Index of the arm played (must be < n_arms)."),)),
)
