"""The shared reader of position-aware ``action_dist`` (evaluators/_validation.py)."""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluators._validation import action_dist_at_position, check_positioned
from simulator.logs import BanditLog


def _log(n, K, L, seed):
    g = np.random.default_rng(seed)
    pos = g.integers(0, L, n) if L > 1 else None
    return BanditLog(context=np.zeros((n, 1)), action=g.integers(0, K, n), reward=np.zeros(n),
                     pscore=np.full(n, 1 / K), n_actions=K, position=pos, len_list=L)


def _dist(n, K, L, seed, dtype=np.float64):
    d = np.random.default_rng(seed + 1).random((n, K, L)) + 0.01
    return (d / d.sum(axis=1, keepdims=True)).astype(dtype)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 40), K=st.integers(1, 6), L=st.integers(1, 4), seed=st.integers(0, 99))
def test_reads_each_record_at_its_position(n, K, L, seed):
    log, d = _log(n, K, L, seed), _dist(n, K, L, seed)
    got = action_dist_at_position(log, d)
    want = np.array([d[j, :, log.positions()[j]] for j in range(n)])  # the obvious loop
    assert got.shape == (n, K) and np.array_equal(got, want)


def test_one_slot_views_and_float32():
    log = _log(5, 3, 1, 0)
    d = _dist(5, 3, 1, 0)
    assert np.shares_memory(action_dist_at_position(log, d), d)
    assert np.shares_memory(action_dist_at_position(log, d[:, :, 0]), d)
    assert action_dist_at_position(log, d.astype(np.float32)).dtype == np.float32
    # a context-free policy broadcast to every record costs no memory
    multi = _log(6, 3, 2, 0)
    d = np.broadcast_to(_dist(1, 3, 2, 0), (6, 3, 2))
    assert np.array_equal(action_dist_at_position(multi, d)[3], d[0, :, multi.position[3]])


def _bad(d, j, pos, row):
    d = d.copy()
    d[j, :, pos] = row
    return d


LOG = _log(30, 3, 3, 4)
GOOD = _dist(30, 3, 3, 4)


@pytest.mark.parametrize("arr, exc, msg", [
    pytest.param(_bad(GOOD, 17, 2, [0.5, 0.3, 0.1]), ValueError,
                 r"`action_dist` rows must sum to 1; got 0.9\d* at every position: record 17, "
                 r"position 2", id="sum-at-an-unlogged-position"),
    pytest.param(_bad(GOOD, 3, 1, [1.5, -0.5, 0.0]), ValueError,
                 r"must be >= 0 .*record 3, position 1", id="negative"),
    pytest.param(_bad(GOOD, 29, 0, [np.nan, 0.5, 0.5]), ValueError,
                 r"must be finite .*record 29, position 0", id="nan"),
    pytest.param(GOOD[:, :, :2], ValueError,
                 r"shape \(n_rounds, n_actions, len_list\) = \(30, 3, 3\); got \(30, 3, 2\)",
                 id="len_list"),
    pytest.param(GOOD[:, :, 0], ValueError, r"= \(30, 3, 3\); got \(30, 3\)",
                 id="2d-for-a-multi-slot-log"),
    pytest.param(GOOD.astype(str), TypeError, "`action_dist` must be a float array",
                 id="strings"),
])
def test_bad_action_dist_named(arr, exc, msg):
    with pytest.raises(exc, match=msg):
        action_dist_at_position(LOG, arr)


def test_error_names_the_argument():
    with pytest.raises(ValueError, match="`target` rows must sum"):
        action_dist_at_position(LOG, _bad(GOOD, 0, 0, [0.2, 0.2, 0.2]), name="target")


def test_float32_rows_at_the_tolerance_are_refused_at_a_record_not_with_an_index_error():
    """The regression of a real bug: the verdict read each position's sum from a matrix
    product, the search for the record from ``sum(axis=1)``; their last bits differ, and with
    float32 rows pushed to 1 + tol the search found no bad record (an IndexError)."""
    n, K, L = 600, 1000, 2
    a = np.random.default_rng(0).random((n, K, L)).astype(np.float32)
    a /= a.sum(axis=1, keepdims=True, dtype=np.float64).astype(np.float32)
    tol = 8 * K * float(np.finfo(np.float32).eps)
    for _ in range(3):
        a[:, 0, :] += (1 + tol - a.sum(axis=1).astype(np.float64)).astype(np.float32)
    log = BanditLog(context=np.zeros((n, 1)), action=np.zeros(n, dtype=int), reward=np.ones(n),
                    pscore=np.full(n, 0.5), n_actions=K, position=np.zeros(n, dtype=int),
                    len_list=L)
    with pytest.raises(ValueError) as e:
        check_positioned(log, a)
    m = re.fullmatch(r"`action_dist` rows must sum to 1; got (\S+) at every position: "
                     r"record (\d+), position (\d)\.", str(e.value))
    assert m is not None, str(e.value)
    assert abs(float(m.group(1)) - 1) > tol
