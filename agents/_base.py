"""The agents' protocol.

Two families share it:

* **bandit policies** act on one observation at a time. An observation is a dict with at
  least ``context`` (float array (d,)) and ``available`` (bool array (n_actions,)); it may
  carry ``user`` and ``tick``. ``act`` returns an available action; ``update`` feeds back the
  reward of the action taken; ``action_probabilities`` gives the policy's distribution over
  actions where the policy defines one (one-hot for a deterministic policy).
* **recommenders** evaluated by leave-one-out: ``fit(profiles)`` on a users x items matrix,
  then ``recommend(users, k, removed=...)`` scores each user's profile with one item removed.

Every agent owns its random generator, set by ``reset(rng)``; it never touches numpy's global
random state.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["BanditPolicy", "Recommender", "as_generator"]


def as_generator(rng) -> np.random.Generator:
    """Convert ``rng`` (``None``, int, ``SeedSequence``, ``Generator``) into a Generator once."""
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, np.random.RandomState):
        raise TypeError("`rng` must be a numpy Generator, SeedSequence, int or None; "
                        "legacy RandomState is not accepted.")
    return np.random.default_rng(rng)


@runtime_checkable
class BanditPolicy(Protocol):
    """What replay, BRED and the environments need from a bandit agent."""

    def reset(self, rng=None) -> None: ...

    def act(self, observation: dict[str, Any]) -> int: ...

    def update(self, observation: dict[str, Any], action: int, reward: float) -> None: ...


@runtime_checkable
class Recommender(Protocol):
    """What LOO evaluators and campaigns need from a recommender."""

    def fit(self, profiles) -> "Recommender": ...

    def recommend(self, users, k: int, *, removed=None) -> np.ndarray: ...
