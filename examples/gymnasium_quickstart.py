"""recloop's worlds as Gymnasium environments: register, make, step, read the truth.

``import simulator`` registers the environments ``recloop/Recommendation-v0`` (a user visit
per step: show a slate, count the clicks), ``recloop/LinearBandit-v0`` (the BRED test bed) and
``recloop/DynamicNews-v0``. Run: ``python examples/gymnasium_quickstart.py``.
"""

import gymnasium as gym
import numpy as np

import simulator  # noqa: F401  (registers the recloop/ environments)


def main(steps: int = 200) -> None:
    # a slate of 5 items per visit, clicks under the cascade model (the user scans down and
    # stops at the first click); k and click_model may also go through a RecommendationConfig
    env = gym.make("recloop/Recommendation-v0", k=5, click_model="cascade")
    obs, info = env.reset(seed=0)
    rng = np.random.default_rng(0)
    total = expected = 0.0
    for _ in range(steps):
        available = np.flatnonzero(obs["available"])
        slate = rng.choice(available, size=5, replace=False)  # a random ranker
        obs, reward, terminated, truncated, info = env.step(slate)
        total += reward  # the number of clicks of the slate
        expected += info["expected_reward"]  # its expected clicks: the truth, exactly
        if terminated or truncated:
            obs, info = env.reset()
    print(f"Recommendation-v0, cascade clicks: {total:.0f} clicks in {steps} visits, "
          f"{expected:.1f} expected; clicks per position of the last slate {info['clicks']}")

    # the linear bandit: one arm per step, the true CTR of every arm in `info`
    env = gym.make("recloop/LinearBandit-v0")
    obs, _ = env.reset(seed=1)
    rewards, best = [], []
    for _ in range(steps):
        arm = int(env.action_space.sample())
        obs, reward, terminated, truncated, info = env.step(arm)
        rewards.append(reward)
        best.append(info["best_expected_reward"])
    print(f"LinearBandit-v0, uniform arms: mean reward {np.mean(rewards):.3f}, the best arm "
          f"of each round would earn {np.mean(best):.3f} in expectation")

    # N environments stepped as one (native vector version)
    envs = gym.make_vec("recloop/LinearBandit-v0", num_envs=64)
    obs, _ = envs.reset(seed=2)
    obs, rewards, *_ = envs.step(envs.action_space.sample())
    print(f"make_vec: {rewards.shape[0]} environments stepped at once")


if __name__ == "__main__":
    main()
