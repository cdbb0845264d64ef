"""The agents' protocol.

Two families share it:

* **bandit policies** act on one observation at a time. An observation is a dict with at
  least ``context`` (float array (d,)) and ``available`` (bool array (n_actions,)); it may
  carry ``user`` and ``tick``. ``act`` returns an available action; ``update`` feeds back the
  reward of the action taken; ``action_probabilities`` gives the policy's distribution over
  actions where the policy defines one (one-hot for a deterministic policy): shape
  (n_actions,), >= 0, summing to 1, 0 on unavailable arms, and a pure query (it does not
  change what ``act`` does next). Arms appear and vanish through ``available``; a mask with
  no available arm is a ``ValueError``. No method mutates the observation.
* **recommenders** evaluated by leave-one-out: ``fit(profiles)`` on a users x items
  ``scipy.sparse`` matrix returns ``self`` and keeps its own copy (the caller may reuse its
  buffers). ``recommend(users, k, *, removed=None)`` returns an int array ``(len(users), k)``
  of distinct item ids in rank order. ``removed[j]`` -- an item ``users[j]`` holds -- is left
  out of the **whole** training data before ``users[j]`` is scored (the exact LOO ``g(u_-i)``
  of de Myttenaere et al.), batched so that 20,000 LOO pairs need no refit. Recommenders that
  filter the user's items filter the reduced profile. Ties: lower item id first unless the
  agent documents otherwise. ``recommend`` before ``fit`` is a ``RuntimeError``; ``k`` outside
  ``[1, n_items]``, unknown user ids, ``removed`` of the wrong length or not held are
  ``ValueError`` naming the argument.

Every agent owns its random generator, set by ``reset(rng)``; it never touches numpy's global
random state. ``agents.check_agent`` checks all of the above on a fresh agent.
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
