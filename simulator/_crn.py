"""Common random numbers: counter-based uniforms keyed by (seed, stream, user, item, tick).

A draw that depends only on *who* (user), *what* (item), *when* (tick) and *why* (stream) is
the same in every run that shares the seed, whatever else happened before it: the
counterfactual twin of a world, and two agents run on the same seed, see the same coin for
the same (user, item, tick). That is what makes their comparisons paired.

The hash is SplitMix64's finaliser (Steele, Lea, Flood 2014) applied twice to a linear
combination of the counters; :func:`uniforms_reference` is the same computation on Python
ints, kept as the obviously-correct reference for :func:`hash_uniforms`.
"""

from __future__ import annotations

import zlib

import numpy as np

__all__ = ["hash_uniforms", "uniforms_reference", "stream_id", "seed_key"]

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB
# Odd multipliers (from Steele & Vigna's LCG tables) that spread the counters apart before
# mixing, so that neighbouring (user, item) pairs do not feed neighbouring inputs.
_C_USER = 0xD1B54A32D192ED03
_C_ITEM = 0xABC98388FB8FAC03
_C_TICK = 0x8CB92BA72F3D8DD7


def _fmix_int(x: int) -> int:
    x &= _MASK
    x ^= x >> 30
    x = (x * _M1) & _MASK
    x ^= x >> 27
    x = (x * _M2) & _MASK
    x ^= x >> 31
    return x


def _fmix_inplace(x: np.ndarray) -> None:
    # uint64 array arithmetic wraps modulo 2**64 silently, which is what the hash wants.
    x ^= x >> np.uint64(30)
    x *= np.uint64(_M1)
    x ^= x >> np.uint64(27)
    x *= np.uint64(_M2)
    x ^= x >> np.uint64(31)


def stream_id(stream) -> int:
    """Map a stream name (str) or number (int >= 0) to a 64-bit stream id."""
    if isinstance(stream, str):
        # crc32 is stable across processes (unlike hash()), so named streams are reproducible.
        return (1 << 40) + zlib.crc32(stream.encode("utf-8"))
    if isinstance(stream, (bool, np.bool_)) or not isinstance(stream, (int, np.integer)):
        raise TypeError(f"`stream` must be an int >= 0 or a str; got {type(stream).__name__}.")
    if stream < 0:
        raise ValueError(f"`stream` must be >= 0; got {stream}.")
    return int(stream) & _MASK


def seed_key(entropy: int, stream: int) -> int:
    """The per-(seed, stream) 64-bit key that offsets all counters of that stream."""
    return _fmix_int(_fmix_int(entropy & _MASK) ^ ((stream * _GOLDEN) & _MASK))


def _as_u64(a: np.ndarray) -> np.ndarray:
    # int64 -> uint64 reinterpretation is free and exact for the non-negative counters.
    if a.dtype == np.int64 and a.flags.c_contiguous:
        return a.view(np.uint64)
    return a.astype(np.uint64)


def hash_uniforms(key: int, users, items, ticks) -> np.ndarray:
    """Uniforms in [0, 1) for the broadcast of ``users``, ``items``, ``ticks`` (ints >= 0).

    ``key`` comes from :func:`seed_key`. Vectorised; the result has the broadcast shape.
    """
    u, i, t = np.asarray(users), np.asarray(items), np.asarray(ticks)
    x = np.empty(np.broadcast_shapes(u.shape, i.shape, t.shape), dtype=np.uint64)
    np.multiply(_as_u64(u), np.uint64(_C_USER), out=x)
    if i.ndim == 0:
        x += np.uint64((int(i) * _C_ITEM + key) & _MASK)
    else:
        x += _as_u64(i) * np.uint64(_C_ITEM)
        x += np.uint64(key)
    _fmix_inplace(x)
    if t.ndim == 0:  # one tick for all: a scalar, not an array of copies
        x += np.uint64((int(t) * _C_TICK) & _MASK)
    else:
        x += _as_u64(t) * np.uint64(_C_TICK)
    _fmix_inplace(x)
    x >>= np.uint64(11)
    return x.astype(np.float64) * (1.0 / (1 << 53))


def uniforms_reference(key: int, user: int, item: int, tick: int) -> float:
    """Scalar, pure-Python version of :func:`hash_uniforms` (the reference)."""
    x = (user * _C_USER + item * _C_ITEM + key) & _MASK
    x = _fmix_int(x)
    x = _fmix_int(x + tick * _C_TICK)
    return (x >> 11) / float(1 << 53)
