"""simulator.fidelity: each statistic on a log whose answer is known by hand, the distances,
verdicts, the worst distribution, holdout_fidelity's split and bad input."""

import math

import numpy as np
import pytest
import scipy.sparse as sp

import simulator
from simulator import DISTRIBUTIONS, InteractionLog, fidelity, holdout_fidelity
from simulator import _fidelity as F


def _log(m, ticks=None, rating=None):
    m = sp.csr_array(m)
    u = np.repeat(np.arange(m.shape[0]), np.diff(m.indptr))
    t = np.zeros(u.size, np.int64) if ticks is None else np.asarray(ticks)
    return InteractionLog(user=u, item=m.indices, tick=t, source=np.zeros(u.size, np.int8),
                          n_users=m.shape[0], n_items=m.shape[1], rating=rating)


def _edges(rows, n_users, n_items):
    """An InteractionLog from (user, item, tick, rating) rows."""
    u, i, t, r = (np.array(c) for c in zip(*rows, strict=True))
    return InteractionLog(user=u, item=i, tick=t, source=np.zeros(u.size, np.int8),
                          n_users=n_users, n_items=n_items, rating=r.astype(float))


# A log whose statistics are counted by hand:
#   user 0: items 0, 1 on tick 0, item 2 on tick 3      -> 2 active ticks, gap 3, 3 items
#   user 1: items 0, 3 on tick 1, 4 on tick 2, 1 on 7   -> 3 active ticks, gaps 1, 5, 4 items
#   user 2: item 2 on tick 5                            -> 1 active tick, no gap, 1 item
#   user 3: nothing (not active: left out of the per-user statistics)
#   items 0..5 held by 2, 2, 2, 1, 1, 0 users; pairs of active users: Jaccard
#   (0, 1) = |{0, 1}| / |{0, 1, 2, 3, 4}| = 2/5, (0, 2) = 1/3, (1, 2) = 0
KNOWN = [(0, 0, 0, 5), (0, 1, 0, 4), (0, 2, 3, 3), (1, 0, 1, 1), (1, 3, 1, 2), (1, 4, 2, 5),
         (1, 1, 7, 4), (2, 2, 5, 3)]


def test_each_statistic_of_a_log_known_by_hand():
    log = _edges(KNOWN, n_users=4, n_items=6)
    m = F._as_log(log, "real").matrix
    assert sorted(F._active_days(log.user, log.tick).tolist()) == [1, 2, 3]
    assert sorted(F._session_gaps(log.user, log.tick).tolist()) == [1, 3, 5]
    assert sorted(F._profile_sizes(m).tolist()) == [1, 3, 4]
    assert F._popularity(m).tolist() == [2, 2, 2, 1, 1, 0]
    assert sorted(F._active_overlap(m, 100, np.random.default_rng(0)).tolist()) == \
        pytest.approx([0.0, 1 / 3, 2 / 5])


def test_distances_between_two_logs_known_by_hand():
    real = _edges(KNOWN, n_users=4, n_items=6)
    # every user active once, on one tick: activity [1, 1, 1]; sizes [2, 2, 1, 1];
    # no gaps at all; popularity [1, 1, 1, 1, 2, 0]; ratings [5, 5, 5, 5, 5, 1]
    sim = _edges([(0, 0, 2, 5), (0, 1, 2, 5), (1, 2, 4, 5), (1, 3, 4, 5), (2, 4, 6, 5),
                  (3, 4, 6, 1)], n_users=4, n_items=6)
    rep = fidelity(real, sim, rng=0)
    act = rep["user_activity"]
    # F_real(1) = 1/3 against 1, F_real(2) = 2/3 against 1: sup = 2/3; W1: sorted
    # [1, 2, 3] against [1, 1, 1, 1] (equal CDF areas): |F - G| integrated = 2/3 + 1/3 = 1
    assert act.ks == pytest.approx(2 / 3) and act.wasserstein == pytest.approx(1.0)
    assert (act.n_real, act.n_simulated, act.real_mean, act.simulated_mean) == (3, 4, 2.0, 1.0)
    assert act.verdict == "poor"
    assert rep["session_gaps"].verdict == "not measured"  # no simulated gap
    size = rep["profile_size"]
    # [1, 3, 4] against [1, 1, 2, 2]: |F - G| is 1/6 on [1, 2), 2/3 on [2, 3), 1/3 on
    # [3, 4): sup 2/3, W1 = 1/6 + 2/3 + 1/3 = 7/6
    assert size.ks == pytest.approx(2 / 3) and size.wasserstein == pytest.approx(7 / 6)
    pop = rep["item_popularity"]
    # [0, 1, 1, 2, 2, 2] against [0, 1, 1, 1, 1, 2]: F(1) = 1/2 against 5/6
    assert pop.ks == pytest.approx(1 / 3) and pop.wasserstein == pytest.approx(1 / 3)
    rating = rep["rating"]
    # real histogram over 1..5: [1, 1, 2, 2, 2] / 8; simulated [1, 0, 0, 0, 5] / 6
    tv = 0.5 * sum(abs(a - b) for a, b in zip([1 / 8, 1 / 8, 2 / 8, 2 / 8, 2 / 8],
                                              [1 / 6, 0, 0, 0, 5 / 6], strict=True))
    assert rating.tv == pytest.approx(tv)
    assert rating.ks == pytest.approx(max(abs(a - b) for a, b in
                                          zip(np.cumsum([1, 1, 2, 2, 2]) / 8,
                                              np.cumsum([1, 0, 0, 0, 5]) / 6, strict=True)))
    assert not rep.faithful
    assert rep.worst.name in ("user_activity", "profile_size")
    assert rep.worst.ks == pytest.approx(2 / 3)
    assert "worst distribution:" in rep.worst_text() and "0.567 above" in rep.worst_text()


def test_identical_logs_are_perfectly_faithful():
    rng = np.random.default_rng(0)
    m = sp.csr_array((rng.random((80, 30)) < 0.2).astype(float))
    ticks = rng.integers(0, 10, m.nnz)
    ratings = rng.integers(1, 6, m.nnz).astype(float)
    rep = fidelity(_log(m, ticks, ratings), _log(m, ticks, ratings), rng=1)
    assert [d.name for d in rep.distances] == list(DISTRIBUTIONS)
    for d in rep.distances:
        assert d.ks == 0.0 and d.wasserstein == 0.0 and d.verdict == "close"
        assert d.real_mean == d.simulated_mean
    assert rep["rating"].tv == 0.0
    assert rep.faithful
    assert "| item_popularity |" in rep.to_markdown()
    assert rep.to_text().splitlines()[0].startswith("distribution")


def test_ks_noise_is_the_two_sample_critical_value():
    d = F.Distance("x", 0.1, 0.5, 1.0, 0.1, 1.0, 1.0, 100, 400, "close")
    assert d.ks_noise == pytest.approx(1.358 * math.sqrt(500 / 40_000))


def test_activity_is_not_measured_without_ticks_and_does_not_decide():
    m = np.eye(5)[[0, 1, 2, 3, 4, 0, 1]]
    rep = fidelity(m, m, rng=0)
    for name in ("user_activity", "session_gaps", "rating"):
        assert rep[name].verdict == "not measured" and math.isnan(rep[name].ks)
    assert rep.faithful


def test_a_different_log_is_poor_and_not_faithful():
    rng = np.random.default_rng(0)
    dense = sp.csr_array((rng.random((100, 40)) < 0.3).astype(float))
    sparse = sp.csr_array((rng.random((100, 40)) < 0.05).astype(float))
    rep = fidelity(dense, sparse, rng=0)
    assert rep["profile_size"].verdict == "poor"
    assert rep["profile_size"].ks > 0.9
    active = np.diff(sparse.indptr)[np.diff(sparse.indptr) > 0]
    assert rep["profile_size"].wasserstein == pytest.approx(
        abs(np.diff(dense.indptr).mean() - active.mean()), rel=0.05)
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


# -- fidelity on the future --------------------------------------------------------------------
def _timed_log(n_users=120, n_items=25, n_ticks=40, seed=0, mean_profile_size=6.0,
               seconds_per_tick=86400):
    """(users, items, ratings, timestamps) of a small world with sessions, ids from 1."""
    law = simulator.SessionLaw(count_mu=0.8, count_sigma=1.0, gap_mu=1.2, gap_sigma=0.8,
                               later_weight=0.5)
    config = simulator.WorldConfig(n_users=n_users, n_items=n_items, n_ticks=n_ticks, dim=2,
                                   mean_profile_size=mean_profile_size, n_universal=0,
                                   appeal_mean=-2.0, sessions=law)
    e = simulator.World(config, seed).simulate(n_ticks - 1).edges
    rng = np.random.default_rng(seed)
    return (e.user + 1, e.item + 1, rng.integers(1, 6, e.user.size).astype(float),
            1_000_000 + seconds_per_tick * e.tick)


def test_holdout_splits_in_time_and_continues_the_fitted_users():
    users, items, ratings, times = _timed_log()
    n_ticks = int((times.max() - times.min()) // 86400) + 1
    h = holdout_fidelity((users, items, ratings, times), holdout=0.25, n_factors=2, rng=0)
    split = int(math.floor(0.75 * n_ticks))
    assert (h.split, h.n_ticks) == (split, n_ticks)
    tick = (times - times.min()) // 86400
    before, after = tick < split, tick >= split
    assert h.world.n_users == np.unique(users[before]).size
    assert np.array_equal(h.world.user_ids, np.unique(users[before]))
    assert h.train.user.size == before.sum() and h.train.tick.max() < split
    # the real continuation: every later interaction, in the world's indices; items first
    # seen after the split come after the fitted ones (issue 35: kept, not dropped)
    known_item = np.isin(items, items[before])
    assert h.real.user.size == after.sum() and h.dropped_new_items == 0
    assert h.new_item_interactions_real == (after & ~known_item).sum()
    assert h.new_items_real == np.unique(items[after & ~known_item]).size
    assert h.real.n_items == h.world.n_items + h.new_items_real
    assert (h.real.item >= h.world.n_items).sum() == h.new_item_interactions_real
    new = np.setdiff1d(users[after], users[before])
    assert h.new_users_real == new.size
    assert h.real.n_users == h.world.n_users + new.size
    assert np.all(h.real.tick >= split) and np.all(h.simulated.tick >= split)
    # the simulated continuation starts from the real profiles: no re-adoption of them
    held = set(zip(h.train.user.tolist(), h.train.item.tolist(), strict=True))
    assert not held & set(zip(h.simulated.user.tolist(), h.simulated.item.tolist(),
                              strict=True))
    assert h.simulated.rating is not None and h.report.label.startswith("out of sample")
    assert [d.name for d in h.report.distances] == list(DISTRIBUTIONS)


@pytest.mark.parametrize("kwargs, match", [
    pytest.param(dict(holdout=0.0), r"`holdout` must be a finite number in \(0.0, 0.5\]",
                 id="zero"),
    pytest.param(dict(holdout=0.6), r"`holdout` must be a finite number in \(0.0, 0.5\]",
                 id="above-half"),
    pytest.param(dict(holdout=0.2, n_ticks=5), "`n_ticks` must be not given", id="n_ticks"),
])
def test_holdout_bad_options_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        holdout_fidelity(_timed_log(40, 10, 12), **kwargs)


def test_holdout_refuses_a_log_too_short_or_without_timestamps():
    # two distinct ticks in all: the held-out part has one
    u, i = np.array([1, 1, 2, 2, 3]), np.array([1, 2, 1, 3, 2])
    t = 1_000_000 + 86400 * np.array([0, 0, 0, 1, 1])
    with pytest.raises(ValueError, match="`holdout` must be a split leaving at least two "
                                         "distinct active ticks in each part"):
        holdout_fidelity((u, i, None, t), holdout=0.5, n_factors=1)
    with pytest.raises(ValueError, match="`interactions` must be a log with timestamps"):
        holdout_fidelity((u, i), holdout=0.2)


def test_the_hold_out_keeps_real_new_items_and_forecasts_its_own():
    """Issue 35: the real items first seen after the split come after the fitted ones (not
    dropped); the world forecasts Poisson(cohort) new items, copies of the items first seen
    in the last (n_ticks - split) ticks before the split, born in the held-out window."""
    users, items, ratings, times = _timed_log()
    tick = (times - times.min()) // 86400
    n_ticks = int(tick.max()) + 1
    split = int(math.floor(0.75 * n_ticks))
    # three items that appear only after the split, in the real log
    late = np.flatnonzero(tick >= split)[:6]
    items = items.copy()
    items[late] = 10_000 + np.arange(6) % 3
    # and three first seen in the last (n_ticks - split) ticks before it: the recent cohort
    recent = np.flatnonzero((tick >= split - (n_ticks - split)) & (tick < split))[:6]
    items[recent] = 20_000 + np.arange(6) % 3
    h = holdout_fidelity((users, items, ratings, times), holdout=0.25, n_factors=2, rng=0)
    assert h.new_items_real == 3 and h.new_item_interactions_real == 6
    assert h.real.n_items == h.world.n_items + 3 and h.dropped_new_items == 0
    assert (h.real.item >= h.world.n_items).sum() == 6
    c = h.world.config
    birth = c.birth_array()
    cohort = np.flatnonzero(birth >= split - (n_ticks - split))
    assert set(h.world.item_ids[cohort].tolist()) >= {20_000, 20_001, 20_002}
    assert h.new_items_simulated > 0
    assert h.simulated.n_items == h.world.n_items + h.new_items_simulated
    new_rows = h.simulated.item >= h.world.n_items
    assert np.all(h.simulated.tick[new_rows] >= split)
    off = holdout_fidelity((users, items, ratings, times), holdout=0.25, n_factors=2, rng=0,
                           new_items=False)
    assert off.new_items_simulated == 0 and off.dropped_new_items == 6
    assert off.real.n_items == off.world.n_items
