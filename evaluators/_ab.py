"""The A/B test: the online yardstick every offline estimate is finally checked against."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from evaluators._estimate import Estimate, _z, normal_estimate
from recloop_base.validation import (
    ArgumentTypeError,
    as_generator,
    check_float,
    check_int,
    check_level,
)

__all__ = ["ABTestResult", "ab_test"]


@dataclass(frozen=True)
class ABTestResult(Estimate):
    """:class:`Estimate` of ``mean reward of B - mean reward of A`` (Welch's interval),
    with each arm's own estimate (``a``, ``b``: normal intervals of the mean reward) and the
    two-sided p-value of Welch's two-sample t-test of equal means."""

    a: Estimate = None
    b: Estimate = None
    p_value: float = math.nan


def _check_policy(policy, name: str):
    for method in ("act", "update"):
        if not callable(getattr(policy, method, None)):
            raise ArgumentTypeError(name, "a bandit agent (with act and update)",
                                    type(policy).__name__)


def ab_test(env, policy_a, policy_b, *, n_steps: int, split: float = 0.5, ci: float = 0.95,
            rng=None) -> ABTestResult:
    """Run an online A/B test of two bandit policies on fresh simulated traffic.

    Each of ``n_steps`` users (rounds of ``env``) is assigned to B with probability
    ``split`` (else to A) by a coin from ``rng``; the assigned policy acts on the user's
    observation, the environment clicks, and the policy learns from its own users only
    (``update``), as in a live test. Both arms share one stream of traffic, so they meet
    the same population of users over the same period.

    Parameters
    ----------
    env : gymnasium.Env
        A recloop bandit environment (``recloop/LinearBandit-v0``, ``recloop/DynamicNews-v0``
        or any environment with the same observation dict); it is reset with a seed drawn
        from ``rng``.
    policy_a, policy_b : bandit agents
        Fresh, reset agents (``act`` and ``update``); A is the control, B the treatment.
    n_steps : int >= 2
        Users in the test (the traffic budget), within the environment's horizon.
    split : float in (0, 1)
        Share of users assigned to B.
    ci : float in (0, 1)
        Level of the intervals.
    rng : None, int, SeedSequence or Generator
        Source of the environment's seed and of the assignment coins.

    Returns
    -------
    ABTestResult
        ``value`` = mean reward of B minus that of A, its Welch standard error and normal
        interval, ``n`` = users in the test; ``a`` and ``b``: each arm's mean reward;
        ``p_value``: Welch's two-sided test of equal means (``nan`` when an arm has fewer
        than 2 users or both arms' rewards are constant).

    Raises
    ------
    TypeError, ValueError
        A policy without ``act``/``update``, ``n_steps < 2``, ``split`` outside (0, 1),
        ``n_steps`` beyond the environment's horizon (it truncated the episode).

    Notes
    -----
    The A/B test estimates each policy's online value over the users it saw: for a
    learning policy, its average reward over its first ``~split * n_steps`` steps. Welch's
    t-test (unequal variances) is the usual two-sample test of a difference in means; with
    Bernoulli rewards and hundreds of users per arm its normal approximation is accurate.
    Randomised controlled experiments as the yardstick of offline evaluation: Kohavi,
    Tang, Xu (2020), *Trustworthy Online Controlled Experiments*.

    Examples
    --------
    >>> import gymnasium as gym, agents, simulator
    >>> env = gym.make("recloop/LinearBandit-v0")
    >>> a, b = agents.UniformRandom(), agents.UCB1()
    >>> a.reset(0); b.reset(1)
    >>> res = ab_test(env, a, b, n_steps=2000, rng=0)
    >>> res.a.n + res.b.n
    2000
    """
    n_steps = check_int(n_steps, "n_steps", low=2)
    split = check_float(split, "split", low=0.0, high=1.0, low_open=True, high_open=True)
    level = check_level(ci)
    _check_policy(policy_a, "policy_a")
    _check_policy(policy_b, "policy_b")
    gen = as_generator(rng)
    seed = int(gen.integers(0, 2**63))
    to_b = gen.random(n_steps) < split
    rewards = np.empty(n_steps)
    obs, _ = env.reset(seed=seed)
    for t in range(n_steps):
        policy = policy_b if to_b[t] else policy_a
        action = policy.act(obs)
        nxt, reward, terminated, truncated, _ = env.step(action)
        policy.update(obs, action, reward)
        rewards[t] = reward
        if (terminated or truncated) and t + 1 < n_steps:
            raise ValueError(f"`n_steps` must be within the environment's episode; it ended "
                             f"after {t + 1} of {n_steps} steps.")
        obs = nxt
    a = normal_estimate(rewards[~to_b], level=level)
    b = normal_estimate(rewards[to_b], level=level)
    diff = b.value - a.value
    se = math.sqrt(a.stderr ** 2 + b.stderr ** 2)  # nan when an arm has fewer than 2 users
    h = _z(level) * se
    p = math.nan
    if se > 0:
        from scipy.stats import ttest_ind

        p = float(ttest_ind(rewards[to_b], rewards[~to_b], equal_var=False).pvalue)
    return ABTestResult(diff, se, diff - h, diff + h, n_steps, level, a=a, b=b, p_value=p)
