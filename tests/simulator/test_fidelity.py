"""simulator.fidelity: distances of the four distributions, verdicts, bad input."""

import math

import numpy as np
import pytest
import scipy.sparse as sp

from simulator import DISTRIBUTIONS, InteractionLog, fidelity


def _log(m, ticks=None):
    m = sp.csr_array(m)
    u = np.repeat(np.arange(m.shape[0]), np.diff(m.indptr))
    t = np.zeros(u.size, np.int64) if ticks is None else np.asarray(ticks)
    return InteractionLog(user=u, item=m.indices, tick=t, source=np.zeros(u.size, np.int8),
                          n_users=m.shape[0], n_items=m.shape[1])


def test_identical_logs_are_perfectly_faithful():
    rng = np.random.default_rng(0)
    m = sp.csr_array((rng.random((80, 30)) < 0.2).astype(float))
    ticks = rng.integers(0, 10, m.nnz)
    rep = fidelity(_log(m, ticks), _log(m, ticks), rng=1)
    assert [d.name for d in rep.distances] == list(DISTRIBUTIONS)
    for d in rep.distances:
        assert d.ks == 0.0 and d.wasserstein == 0.0 and d.verdict == "close"
        assert d.real_mean == d.simulated_mean
    assert rep.faithful
    assert "| item_popularity |" in rep.to_markdown()
    assert rep.to_text().splitlines()[0].startswith("distribution")


def test_activity_is_not_measured_without_ticks_and_does_not_decide():
    m = np.eye(5)[[0, 1, 2, 3, 4, 0, 1]]
    rep = fidelity(m, m, rng=0)
    act = rep["user_activity"]
    assert act.verdict == "not measured" and math.isnan(act.ks)
    assert rep.faithful


def test_a_different_log_is_poor_and_not_faithful():
    rng = np.random.default_rng(0)
    dense = sp.csr_array((rng.random((100, 40)) < 0.3).astype(float))
    sparse = sp.csr_array((rng.random((100, 40)) < 0.05).astype(float))
    rep = fidelity(dense, sparse, rng=0)
    assert rep["profile_size"].verdict == "poor"
    assert rep["profile_size"].ks > 0.9
    assert rep["profile_size"].wasserstein == pytest.approx(
        abs(np.diff(dense.indptr).mean() - np.diff(sparse.indptr).mean()), rel=0.05)
    assert not rep.faithful


def test_overlap_sees_structure_that_marginals_miss():
    """Two blocks of users with disjoint tastes against the same marginals, shuffled: the
    same popularity and sizes, but more overlap in the block log."""
    block = np.zeros((40, 20))
    block[:20, :10] = 1
    block[20:, 10:] = 1
    rng = np.random.default_rng(0)
    shuffled = np.array([rng.permutation(row) for row in block])  # sizes kept
    rep = fidelity(block, shuffled, rng=0)
    assert rep["profile_size"].ks == 0.0
    assert rep["profile_overlap"].real_mean > rep["profile_overlap"].simulated_mean
    assert rep["profile_overlap"].verdict == "poor"


def test_bad_input_is_named():
    m = np.eye(3)
    with pytest.raises(TypeError, match="`real` must be an InteractionLog or a users x items "
                                        "matrix; got list"):
        fidelity([[1, 0]], m)
    with pytest.raises(ValueError, match="`simulated` must be a log with at least one "
                                         "interaction; got an empty log"):
        fidelity(m, np.zeros((3, 3)))
    with pytest.raises(ValueError, match=r"`ks_poor` must be a finite number in \[0.3, 1.0\]"):
        fidelity(m, m, ks_close=0.3, ks_poor=0.2)
    with pytest.raises(ValueError, match="`n_pairs` must be an int >= 1; got 0"):
        fidelity(m, m, n_pairs=0)
