"""``agents.check_agent`` over every bandit policy and its batched twin's singles."""

import numpy as np
import pytest

import agents

BANDITS = [
    pytest.param(lambda: agents.UniformRandom(), id="UniformRandom"),
    pytest.param(lambda: agents.UCB1(), id="UCB1"),
    pytest.param(lambda: agents.UCB1(alpha=0.0), id="UCB1-alpha0"),
    pytest.param(lambda: agents.LinUCB(), id="LinUCB"),
    pytest.param(lambda: agents.LinUCB(alpha=0.0, ridge=0.5), id="LinUCB-alpha0"),
    pytest.param(lambda: agents.EpsilonGreedy(0.2), id="EpsilonGreedy"),
    pytest.param(lambda: agents.EpsilonGreedy(1.0), id="EpsilonGreedy-eps1"),
    pytest.param(lambda: agents.ThompsonSampling(), id="ThompsonSampling"),
]


@pytest.mark.parametrize("make", BANDITS)
@pytest.mark.parametrize("seed", [0, 1])
def test_check_agent(make, seed):
    agents.check_agent(make(), rng=seed)


@pytest.mark.parametrize("make", BANDITS)
def test_unbatched_copies_pass_check_agent(make):
    # singles recovered from a batched twin are ordinary agents
    twins = [make() for _ in range(2)]
    for i, a in enumerate(twins):
        a.reset(i)
    batched = type(twins[0]).batch(twins)
    batched.act(np.zeros((2, 3)), np.ones((2, 5), bool))
    for a in batched.unbatch():
        agents.check_agent(a, rng=3)


@pytest.mark.parametrize("make", BANDITS)
def test_is_a_bandit_policy(make):
    assert isinstance(make(), agents.BanditPolicy)
