"""Seed helpers shared by the experiments: one root ``SeedSequence``, children keyed by identity.

Every draw of an experiment comes from a child of the root keyed by what it is for (log index,
agent name, tick, variant), never by the order of computation, so that adding an agent, a log
or a recommender leaves the others' numbers unchanged.
"""

from __future__ import annotations

import numbers
import zlib

import numpy as np


def seed_sequence(rng) -> np.random.SeedSequence:
    """The root ``SeedSequence`` of an experiment's ``rng`` (None, int, SeedSequence, Generator)."""
    if isinstance(rng, np.random.SeedSequence):
        return rng
    if isinstance(rng, np.random.Generator):
        return np.random.SeedSequence(int(rng.integers(0, 2**63)))
    if rng is None or (isinstance(rng, numbers.Integral) and not isinstance(rng, bool)):
        return np.random.SeedSequence(rng)
    raise TypeError("`rng` must be None, an int, a SeedSequence or a Generator; got "
                    f"{type(rng).__name__}.")


def child_seed(root: np.random.SeedSequence, *key: int) -> np.random.SeedSequence:
    """The child of ``root`` at spawn key ``root.spawn_key + key``."""
    return np.random.SeedSequence(root.entropy, spawn_key=tuple(root.spawn_key) + tuple(key),
                                  pool_size=root.pool_size)


def child_rng(root: np.random.SeedSequence, *key: int) -> np.random.Generator:
    """A Generator on :func:`child_seed` ``(root, *key)``."""
    return np.random.default_rng(child_seed(root, *key))


def name_key(name: str) -> int:
    """A stable integer key for a name (CRC-32 of its UTF-8 bytes)."""
    return zlib.crc32(name.encode("utf-8"))
