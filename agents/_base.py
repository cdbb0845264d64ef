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

Fast paths. A bandit policy may offer two compiled shortcuts beside ``act`` / ``update``:
``replay_arrays`` (:class:`SupportsReplayArrays`: a whole replay in one call) and the
classmethod ``batch`` (:class:`SupportsBatch`: a twin stepping B copies in lockstep, whose own
``replay_arrays`` has the same signature with a leading copy axis). An evaluator takes one
only through :func:`agents.fast_path`, which checks that it implements the agent's own
``act`` / ``update`` (a subclass overriding them gets the plain loop, with its own numbers);
``check_agent`` verifies that an offered fast path gives the numbers of the loop.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from recloop_base.validation import as_generator as _as_generator

__all__ = ["BanditPolicy", "BatchedBanditPolicy", "Recommender", "SupportsBatch",
           "SupportsReplayArrays", "as_generator"]


def as_generator(rng) -> np.random.Generator:
    """Convert ``rng`` (``None``, int, ``SeedSequence``, ``Generator``) into a Generator once
    (:func:`recloop_base.validation.as_generator`; legacy ``RandomState`` is refused)."""
    return _as_generator(rng)


@runtime_checkable
class BanditPolicy(Protocol):
    """What replay, BRED and the environments need from a bandit agent.

    Your own agent needs these three methods (``action_probabilities`` too, to be evaluated
    off-policy as a target or to log): ``agents.check_agent(MyAgent())`` checks them. A Python
    agent runs through the plain act/update loop -- in ``bred`` its B replicates run one
    after another, about 14x slower than recloop's agents, whose batched twins run compiled
    (``SupportsBatch``, ``SupportsReplayArrays``; see ``examples/my_bandit_agent.py``).
    """

    def reset(self, rng=None) -> None:
        """Forget everything learnt and draw from now on from ``rng`` (``None``, int,
        ``SeedSequence`` or ``Generator``): the same ``rng``, the same actions."""
        ...

    def act(self, observation: dict[str, Any]) -> int:
        """An available action for ``observation`` (``context`` (d,), ``available`` (K,)
        bool, optionally ``tick``, ``user``); a mask without an available action is a
        ``ValueError``. Must not mutate the observation."""
        ...

    def update(self, observation: dict[str, Any], action: int, reward: float) -> None:
        """Learn from ``reward`` of ``action`` taken on ``observation`` (the observation
        ``act`` saw)."""
        ...


@runtime_checkable
class Recommender(Protocol):
    """What LOO evaluators and campaigns need from a recommender."""

    def fit(self, profiles) -> "Recommender": ...

    def recommend(self, users, k: int, *, removed=None) -> np.ndarray: ...


@runtime_checkable
class SupportsReplayArrays(Protocol):
    """A compiled replay equal, bit for bit, to the ``act`` / ``update`` loop it replaces.

    One signature for single agents and batched twins: the data arrays describe the ``T``
    source records; a batched twin adds a leading copy axis (B) to ``index``, ``eligible``,
    ``jitter`` and ``revealed``. Step ``j`` acts on record ``r = index[j]`` with context
    ``context[r] + jitter[j] * jitter_scale`` and updates when the action equals
    ``logged_action[r]``, ``eligible[j]`` holds and (with ``revealed``) record ``r`` was not
    revealed yet, which it then marks. Returns the actions, (n,) or (B, n) int64.
    """

    def replay_arrays(self, context, available, logged_action, reward, *, index=None,
                      eligible=None, jitter=None, jitter_scale=None,
                      revealed=None) -> np.ndarray: ...


@runtime_checkable
class BatchedBanditPolicy(Protocol):
    """B copies of a bandit policy stepping in lockstep on arrays (all act, the ``active``
    ones learn); copy i equals single agent i stepped alone."""

    def act(self, context, available) -> np.ndarray: ...

    def update(self, active, context, action, reward) -> None: ...


@runtime_checkable
class SupportsBatch(Protocol):
    """``cls.batch(agents)``: the batched twin of B single agents of this exact class (each
    copy takes over its agent's state and generator)."""

    @classmethod
    def batch(cls, agents) -> BatchedBanditPolicy: ...
