"""simulator.fidelity's edges (issue 27, section 1: the survivors of the mutation run of
simulator/_fidelity.py, docs/testing.md): each statistic where a key, a bound or a count could
be off by one, the verdicts at their thresholds, the report's rows and text to the character,
every refusal word for word, holdout_split's arithmetic and the hold-out on a log small
enough to follow by hand."""

import dataclasses
import inspect
import math
import re

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.stats import ks_2samp

import simulator
from simulator import InteractionLog, calibrate, fidelity, holdout_fidelity, holdout_split
from simulator import _fidelity as F
from simulator._sessions import SessionSchedule, continue_schedule, draw_schedule
from tests.simulator.test_fidelity import _timed_log


def _edges(rows, n_users, n_items, rating=True):
    """An InteractionLog from (user, item, tick, rating) rows."""
    u, i, t, r = (np.array(c) for c in zip(*rows, strict=True))
    return InteractionLog(user=u, item=i, tick=t, source=np.zeros(u.size, np.int8),
                          n_users=n_users, n_items=n_items,
                          rating=r.astype(float) if rating else None)


def _msg(text):
    return re.escape(text)


# -- the statistics ----------------------------------------------------------------------------
def test_activity_and_gaps_keep_users_apart_when_a_tick_is_the_last_one():
    """user 0 active on ticks 0 and 3 (the last tick of the log), user 1 on tick 0: the key
    user * (max tick + 1) + tick keeps (0, 3) and (1, 0) apart (a span of max tick would
    merge them: 3 = 1 * 3 + 0)."""
    user, tick = np.array([0, 0, 0, 1]), np.array([0, 3, 3, 0])
    assert F._active_days(user, tick).tolist() == [2.0, 1.0]
    assert F._session_gaps(user, tick).tolist() == [3.0]
    # a user whose first tick is 0 right after another's last: no gap across users
    user, tick = np.array([0, 1, 1]), np.array([2, 0, 1])
    assert F._active_days(user, tick).tolist() == [1.0, 2.0]
    assert F._session_gaps(user, tick).tolist() == [1.0]


def test_activity_is_not_measured_on_one_interaction_or_none():
    one = np.array([4])
    assert F._active_days(one, one) is None and F._session_gaps(one, one) is None
    none = np.zeros(0, np.int64)
    assert F._active_days(none, none) is None and F._session_gaps(none, none) is None
    assert F._active_days(None, None) is None and F._session_gaps(None, None) is None
    # ticks that are not all equal, but equal to the first on most records
    user, tick = np.array([0, 0, 1]), np.array([5, 5, 6])
    assert F._active_days(user, tick).tolist() == [1.0, 1.0]
    assert F._session_gaps(user, tick).tolist() == []


def test_a_log_becomes_a_binary_matrix():
    # a pair seen twice is one interaction; an explicit zero of a matrix is none; a 2 is one
    log = _edges([(0, 1, 0, 3), (0, 1, 2, 4), (1, 0, 1, 5)], n_users=2, n_items=3)
    m = F._as_log(log, "real").matrix
    assert m.toarray().tolist() == [[0, 1, 0], [1, 0, 0]] and m.nnz == 2
    dense = np.array([[0.0, 2.0, 0.0], [1.0, 0.0, 0.0]])
    stored = sp.csr_array((np.array([0.0, 2.0, 1.0]), np.array([0, 1, 0]),
                           np.array([0, 2, 3])), shape=(2, 3))
    for x in (dense, stored, sp.coo_array(dense)):
        lg = F._as_log(x, "real")
        assert lg.matrix.toarray().tolist() == [[0, 1, 0], [1, 0, 0]] and lg.matrix.nnz == 2
        assert lg.user is None and lg.tick is None and lg.rating is None
    with pytest.raises(ValueError, match=_msg("`simulated` must be a 2-D users x items matrix; "
                                              "got shape (3,).")):
        F._as_log(np.ones(3), "simulated")
    with pytest.raises(TypeError, match=_msg("`real` must be an InteractionLog or a users x "
                                             "items matrix; got dict.")):
        F._as_log({}, "real")


def test_pairs_are_all_pairs_up_to_n_pairs_then_uniform_over_other_users():
    # 4 users: 6 pairs; n_pairs 6 takes them all, in triu order
    a, b = F._pairs(4, 6, np.random.default_rng(0))
    assert list(zip(a.tolist(), b.tolist(), strict=True)) == [
        (0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    # n_pairs 5 < 6: five draws, a uniform, b uniform over the other three users
    rng = np.random.default_rng(7)
    a, b = F._pairs(4, 5, rng)
    ref = np.random.default_rng(7)
    ea = ref.integers(0, 4, 5)
    eb = ref.integers(0, 3, 5)
    eb = [int(y) + (1 if y >= x else 0) for x, y in zip(ea, eb, strict=True)]
    assert a.tolist() == ea.tolist() and b.tolist() == eb
    a, b = F._pairs(3, 2, np.random.default_rng(1))  # 3 pairs > 2: drawn
    assert a.size == b.size == 2
    # many draws: never a user with itself, every other user reached, none out of range
    a, b = F._pairs(40, 600, np.random.default_rng(2))
    assert np.all(a != b) and b.min() == 0 and b.max() == 39 and a.max() == 39


def test_overlap_is_jaccard_and_zero_for_two_empty_profiles():
    m = sp.csr_array(np.array([[1, 1, 0], [0, 1, 1], [0, 0, 0], [0, 0, 0], [1, 1, 1]],
                              dtype=float))
    a, b = np.array([0, 2, 0, 1]), np.array([1, 3, 4, 4])
    # {0,1} & {1,2} = 1 of 3; two empty profiles 0; {0,1} in {0,1,2}: 2/3; {1,2}: 2/3
    assert F._overlap(m, a, b).tolist() == pytest.approx([1 / 3, 0.0, 2 / 3, 2 / 3])
    assert F._overlap(m, np.array([2]), np.array([3])).tolist() == [0.0]
    # the same one item: union 1, Jaccard 1
    one = sp.csr_array(np.array([[0, 1], [0, 1]], dtype=float))
    assert F._overlap(one, np.array([0]), np.array([1])).tolist() == [1.0]


def test_overlap_of_more_pairs_than_two_chunks():
    """Pairs are computed in chunks of 2^14: more than two chunks' worth are all filled (the
    default 20,000 pairs fit in two, and a loop that covered only the first two chunks passed
    every other test)."""
    one = sp.csr_array(np.array([[0, 1], [0, 1]], dtype=float))
    n = 3 * (1 << 14) + 5
    out = F._overlap(one, np.zeros(n, dtype=np.int64), np.ones(n, dtype=np.int64))
    assert out.shape == (n,) and np.all(out == 1.0)


def test_overlap_of_two_active_users_and_of_fewer():
    m = sp.csr_array(np.array([[1, 1, 0], [0, 1, 1], [0, 0, 0]], dtype=float))
    assert F._active_overlap(m, 10, np.random.default_rng(0)).tolist() == pytest.approx([1 / 3])
    one = sp.csr_array(np.array([[1, 1, 0], [0, 0, 0]], dtype=float))
    assert F._active_overlap(one, 10, np.random.default_rng(0)).size == 0


def test_rating_tv_counts_on_the_real_levels_when_the_top_one_is_missing():
    # real levels 1, 2, 3 (bounds 1.5, 2.5); simulated never 3, once exactly on the bound 1.5
    # (side right: level 2). p = [1/4, 1/4, 1/2], q = [1/4, 3/4, 0]: TV = (1/2 + 1/2) / 2
    real = np.array([1.0, 2.0, 3.0, 3.0])
    sim = np.array([1.0, 1.5, 2.0, 2.0])
    assert F._rating_tv(real, sim) == 0.5
    # simulated on the bound 2.5 goes up to level 3: q = [0, 1/2, 1/2], p as above
    assert F._rating_tv(real, np.array([2.0, 2.5])) == 0.5 * (0.25 + 0.25 + 0.0)


def test_rating_tv_on_a_continuous_scale_puts_a_rating_on_an_edge_in_the_upper_bin():
    # 21 distinct ratings 0..20 (more than MAX_LEVELS = 20): 20 equal bins of width 1 over
    # [0, 20], the last closed; a rating on an edge goes up (side right), so the bins hold
    # {0}, {1}, ..., {18}, {19, 20}: p = [1, ..., 1, 2] / 21 (down, it would be [2, 1, ...,
    # 1] / 21). Simulated 1.5 and 19.5: q = 1/2 in bins 1 and 19. TV = (1/21 + (1/2 - 1/21)
    # + 17/21 + (1/2 - 2/21)) / 2 = 6/7
    real = np.arange(21.0)
    tv = F._rating_tv(real, np.array([1.5, 19.5]))
    assert tv == pytest.approx(0.5 * (1 / 21 + (0.5 - 1 / 21) + 17 / 21 + (0.5 - 2 / 21)),
                               abs=1e-15)
    assert tv == pytest.approx(6 / 7, abs=1e-15)


# -- one distance ------------------------------------------------------------------------------
def test_verdicts_at_their_thresholds_are_the_milder_one():
    x, y = np.array([1.0, 2.0]), np.array([1.0, 1.0])  # KS exactly 1/2, W1 1/2
    assert F._distance("d", x, y, 0.5, 0.5).verdict == "close"
    assert F._distance("d", x, y, 0.25, 0.5).verdict == "fair"
    assert F._distance("d", x, y, 0.25, 0.375).verdict == "poor"
    d = F._distance("d", x, y, 0.25, 0.5)
    assert (d.ks, d.wasserstein, d.real_mean, d.simulated_mean, d.n_real, d.n_simulated) == \
        (0.5, 0.5, 1.5, 1.0, 2, 2)
    assert d.relative_wasserstein == 0.5 / 1.5 and math.isnan(d.tv) and d.name == "d"
    assert d.ks_pvalue == ks_2samp(x, y).pvalue  # the p-value is SciPy's, kept as is


def test_a_sample_of_one_is_measured():
    # [2] against [1, 3]: |F - G| is 1/2 on [1, 3): KS 1/2, W1 1
    for x, y in ((np.array([2.0]), np.array([1.0, 3.0])), (np.array([1.0, 3.0]), np.array([2.0]))):
        d = F._distance("d", x, y, 0.1, 0.2)
        assert (d.ks, d.wasserstein, d.verdict) == (0.5, 1.0, "poor")
        assert (d.n_real, d.n_simulated) == (x.size, y.size)


def test_relative_wasserstein_of_a_negative_mean_and_a_zero_mean():
    d = F._distance("d", np.array([-1.0, -3.0]), np.array([-1.0, -1.0]), 0.1, 0.2)
    assert d.wasserstein == 1.0 and d.real_mean == -2.0 and d.relative_wasserstein == 0.5
    d = F._distance("d", np.array([-1.0, 1.0]), np.array([0.0, 0.0]), 0.1, 0.2)
    assert d.wasserstein == 1.0 and d.real_mean == 0.0 and math.isnan(d.relative_wasserstein)
    d = F._distance("d", np.array([1.0, 1.0]), np.array([1.0, 3.0]), 0.1, 0.2)
    assert d.wasserstein == 1.0 and d.real_mean == 1.0 and d.relative_wasserstein == 1.0


def test_a_distance_not_measured_counts_what_there_is():
    three = np.ones(3)
    for x, y, n in ((None, three, (0, 3)), (three, None, (3, 0)), (np.zeros(0), three, (0, 3)),
                    (three, np.zeros(0), (3, 0)), (None, None, (0, 0))):
        d = F._distance("session_gaps", x, y, 0.1, 0.2)
        assert (d.n_real, d.n_simulated) == n and d.verdict == "not measured"
        assert all(math.isnan(v) for v in (d.ks, d.ks_pvalue, d.wasserstein,
                                           d.relative_wasserstein, d.real_mean,
                                           d.simulated_mean, d.tv))
        assert math.isnan(d.ks_noise)


def test_ks_noise_needs_both_samples():
    d = F.Distance("x", 0.1, 0.5, 1.0, 0.1, 1.0, 1.0, 0, 400, "close")
    assert math.isnan(d.ks_noise)
    d = F.Distance("x", 0.1, 0.5, 1.0, 0.1, 1.0, 1.0, 400, 0, "close")
    assert math.isnan(d.ks_noise)
    d = F.Distance("x", 0.1, 0.5, 1.0, 0.1, 1.0, 1.0, 1, 1, "close")
    assert d.ks_noise == 1.358 * math.sqrt(2.0)


# -- the report --------------------------------------------------------------------------------
def _report(ks=(0.5, 0.25), close=0.25, poor=0.5, label="x"):
    a = F.Distance("user_activity", ks[0], 0.01, 2.0, 0.125, 16.0, 14.0, 4, 16, "fair")
    b = F.Distance("rating", ks[1], 0.5, 0.5, 0.25, 2.0, 2.5, 16, 4, "close", tv=0.125)
    c = F.Distance("session_gaps", math.nan, math.nan, math.nan, math.nan, math.nan, math.nan,
                   0, 3, "not measured")
    return F.FidelityReport(distances=(a, b, c), ks_close=close, ks_poor=poor, faithful=True,
                            label=label)


def test_the_report_rows_and_tables_to_the_character():
    rep = _report()
    noise = 1.358 * math.sqrt(20 / 64)  # 0.7591...
    assert f"{noise:.3f}" == "0.759"
    assert rep.rows() == [
        ("user_activity", "4/16", "16", "14", "0.500", "0.759", "2 (12.5%)", "-", "fair"),
        ("rating", "16/4", "2", "2.5", "0.250", "0.759", "0.5 (25.0%)", "0.125", "close"),
        ("session_gaps", "-", "-", "-", "-", "-", "-", "-", "not measured"),
    ]
    assert rep.to_markdown().splitlines() == [
        "| distribution | n real/sim | real mean | simulated mean | KS | KS noise 5% | "
        "Wasserstein (rel.) | TV | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
        "| user_activity | 4/16 | 16 | 14 | 0.500 | 0.759 | 2 (12.5%) | - | fair |",
        "| rating | 16/4 | 2 | 2.5 | 0.250 | 0.759 | 0.5 (25.0%) | 0.125 | close |",
        "| session_gaps | - | - | - | - | - | - | - | not measured |",
    ]
    text = rep.to_text().splitlines()
    assert text[0] == ("distribution   n real/sim  real mean  simulated mean  KS     "
                       "KS noise 5%  Wasserstein (rel.)  TV     verdict")
    assert text[1] == ("user_activity  4/16        16         14              0.500  "
                       "0.759        2 (12.5%)           -      fair")
    assert text[3] == ("session_gaps   -           -          -               -      "
                       "-            -                   -      not measured")
    assert len(text) == 4
    assert rep.rule == ("a distribution is close when its KS statistic is <= 0.25, fair when "
                        "<= 0.5, poor above; the world is faithful to the distributions when "
                        "none is poor")


def test_the_worst_distribution_and_its_line():
    rep = _report()
    assert rep.worst.name == "user_activity" and rep["rating"].ks == 0.25
    assert rep.worst_text() == ("worst distribution: user_activity, KS 0.500 (0.250 above the "
                                "close threshold 0.25; real mean 16, simulated 14)")
    # the worst exactly at the close threshold is within it
    rep = _report(ks=(0.25, 0.125))
    assert rep.worst_text() == ("worst distribution: user_activity, KS 0.250 (within the close "
                                "threshold 0.25; real mean 16, simulated 14)")
    # the larger KS wins whatever the order
    rep = _report(ks=(0.125, 0.25))
    assert rep.worst.name == "rating"
    c = _report().distances[2]
    none = F.FidelityReport(distances=(c,), ks_close=0.1, ks_poor=0.2, faithful=True)
    assert none.worst is None and none.worst_text() == "worst distribution: none measured"
    assert none.label == ""
    with pytest.raises(KeyError, match="profile_size"):
        none["profile_size"]


# -- fidelity ----------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, error, text", [
    pytest.param(dict(n_pairs=0), ValueError, "`n_pairs` must be an int >= 1; got 0.",
                 id="n_pairs"),
    pytest.param(dict(ks_close=0.0), ValueError,
                 "`ks_close` must be a finite number in (0.0, 1.0]; got 0.0.", id="close-0"),
    pytest.param(dict(ks_close=1.5, ks_poor=1.5), ValueError,
                 "`ks_close` must be a finite number in (0.0, 1.0]; got 1.5.", id="close-1.5"),
    pytest.param(dict(ks_close=0.3, ks_poor=0.2), ValueError,
                 "`ks_poor` must be a finite number in [0.3, 1.0]; got 0.2.", id="poor-low"),
    pytest.param(dict(ks_close=0.3, ks_poor=1.5), ValueError,
                 "`ks_poor` must be a finite number in [0.3, 1.0]; got 1.5.", id="poor-high"),
    pytest.param(dict(label=3), TypeError, "`label` must be a str; got int.", id="label"),
])
def test_fidelity_refusals_word_for_word(kwargs, error, text):
    m = np.eye(3)
    with pytest.raises(error, match=_msg(text)):
        fidelity(m, m, **kwargs)


def test_fidelity_accepts_the_edges_of_its_ranges_and_keeps_them():
    m = np.eye(4)[[0, 1, 1, 2, 3, 3]]
    rep = fidelity(m, m, n_pairs=1, ks_close=1.0, ks_poor=1.0, label="edges", rng=0)
    assert (rep.ks_close, rep.ks_poor, rep.label) == (1.0, 1.0, "edges")
    assert rep["profile_overlap"].n_real == rep["profile_overlap"].n_simulated == 1
    with pytest.raises(ValueError, match=_msg("`real` must be a log with at least one "
                                              "interaction; got an empty log.")):
        fidelity(np.zeros((2, 2)), m)
    with pytest.raises(TypeError, match=_msg("`simulated` must be an InteractionLog or a users "
                                             "x items matrix; got list.")):
        fidelity(m, [[1.0]])
    with pytest.raises(ValueError, match=_msg("`real` must be a 2-D users x items matrix; got "
                                              "shape (3,).")):
        fidelity(np.ones(3), m)
    one = np.array([[0.0, 1.0]])  # one interaction is a log
    assert fidelity(one, one, rng=0)["profile_size"].n_real == 1


def test_fidelity_defaults_20000_pairs_and_no_label():
    # 202 users each holding item 0 (active): 20,301 pairs, of which the default draws 20,000
    m = sp.csr_array(np.ones((202, 1)))
    rep = fidelity(m, m, rng=0)
    assert rep["profile_overlap"].n_real == rep["profile_overlap"].n_simulated == 20_000
    assert (rep.label, rep.ks_close, rep.ks_poor) == ("", 0.1, 0.2)


def test_overlap_pairs_are_drawn_from_rng_and_n_pairs_of_them():
    g = np.random.default_rng(3)
    m = sp.csr_array((g.random((60, 12)) < 0.3).astype(float))  # 1,770 pairs of users
    other = sp.csr_array((g.random((60, 12)) < 0.3).astype(float))
    rep = fidelity(m, other, n_pairs=50, rng=5)
    assert fidelity(m, other, n_pairs=50, rng=5) == rep
    ov = rep["profile_overlap"]
    assert (ov.n_real, ov.n_simulated) == (50, 50)
    # the same draws by hand: real pairs first, then simulated, from one generator
    gen = np.random.default_rng(5)
    expect = []
    for x in (m, other):
        active = np.flatnonzero(np.diff(x.indptr) > 0)
        a, b = F._pairs(active.size, 50, gen)
        d = x.toarray().astype(bool)
        expect.append(np.mean([(d[active[i]] & d[active[j]]).sum()
                               / (d[active[i]] | d[active[j]]).sum()
                               for i, j in zip(a, b, strict=True)]))
    assert ov.real_mean == pytest.approx(expect[0], rel=1e-12)
    assert ov.simulated_mean == pytest.approx(expect[1], rel=1e-12)


def test_faithful_when_the_worst_is_fair():
    # profile sizes [1, 2] against [1, 1]: KS 1/2; the overlap 1/2 against 0: KS 1. Under
    # (0.25, 1) both are fair and nothing is poor
    real = np.array([[1.0, 0.0], [1.0, 1.0]])
    sim = np.array([[1.0, 0.0], [0.0, 1.0]])
    rep = fidelity(real, sim, ks_close=0.25, ks_poor=1.0, rng=0)
    assert rep["profile_size"].verdict == rep["profile_overlap"].verdict == "fair"
    assert rep["profile_overlap"].ks == 1.0 and rep.faithful
    rep = fidelity(real, sim, ks_close=0.25, ks_poor=0.375, rng=0)
    assert rep["profile_size"].verdict == "poor" and not rep.faithful


# -- holdout_split -----------------------------------------------------------------------------
def test_holdout_split_is_the_floor_of_the_kept_fraction():
    # 5 ticks, holdout 0.3: floor(0.7 * 5) = floor(3.5) = 3
    assert holdout_split([0, 1, 2, 3, 4], 0.3) == 3
    assert holdout_split(np.array([4, 0, 1, 3, 2, 4]), 0.5) == 2  # floor(2.5)
    assert holdout_split([0, 1, 2, 3], 0.5) == 2


@pytest.mark.parametrize("ticks, holdout, text", [
    pytest.param([0, 1, 2], 0.5, "`holdout` must be a split leaving at least two distinct "
                 "active ticks in each part (log of 3 ticks, split at tick 1); got 1 in the "
                 "fitted part.", id="fitted"),
    pytest.param([0, 1, 2, 3, 3], 0.25, "`holdout` must be a split leaving at least two "
                 "distinct active ticks in each part (log of 4 ticks, split at tick 3); got 1 "
                 "in the held-out part.", id="held-out"),
    pytest.param([], 0.2, "`holdout` must be a split leaving at least two distinct active "
                 "ticks in each part (log of 0 ticks, split at tick 0); got 0 in the fitted "
                 "part.", id="empty"),
    pytest.param([0, 1, 2, 3], 0.0, "`holdout` must be a finite number in (0.0, 0.5]; got "
                 "0.0.", id="zero"),
    pytest.param([0, 1, 2, 3], 0.75, "`holdout` must be a finite number in (0.0, 0.5]; got "
                 "0.75.", id="above-half"),
])
def test_holdout_split_refusals_word_for_word(ticks, holdout, text):
    with pytest.raises(ValueError, match=_msg(text)):
        holdout_split(ticks, holdout)


# -- holdout_fidelity on a log followed by hand --------------------------------------------------
# (user id, item id, rating, tick); timestamps 1000 + 10 tick + a few seconds (10 s per tick:
# the seconds are floored away). 8 ticks, holdout 0.25: split at floor(0.75 * 8) = 6.
#   before: users 10, 20, 30, 60 on items 100, 200, 300 (60 only once, rated 1)
#   after:  10 on 400 and 20 on 250 (items first seen after the split: dropped), 20 and 30
#           and 60 again (fitted), 15, 40 and 50 new (15 lies between fitted ids, 40 and 50
#           above them all); 30's item 100 rated 2
def _pinned_holdout(*args, **kwargs):
    """``holdout_fidelity`` without the taste drift and the new items (issue 35): the
    bookkeeping and the recipe pinned here are those of the static continuation; the drift
    and the new items have their own tests in test_fidelity.py."""
    return holdout_fidelity(*args, drift=False, new_items=False, **kwargs)


ROWS = [(10, 100, 5, 0), (10, 200, 4, 1), (20, 100, 3, 0), (20, 300, 5, 2), (30, 200, 2, 3),
        (30, 300, 4, 5), (10, 300, 1, 4), (60, 100, 1, 2),
        (10, 400, 5, 6), (20, 200, 4, 6), (50, 100, 5, 7), (40, 300, 3, 7), (30, 100, 2, 7),
        (50, 200, 4, 6), (15, 300, 5, 7), (20, 250, 5, 7), (60, 200, 5, 7)]
SECONDS = [0, 3, 9, 0, 0, 0, 0, 0, 9, 0, 5, 0, 0, 0, 0, 0, 0]


def _rows_log():
    u, i, r, t = (np.array(c) for c in zip(*ROWS, strict=True))
    return u, i, r.astype(float), 1000 + 10 * t + np.array(SECONDS)


def _columns(log):
    return [log.user.tolist(), log.item.tolist(), log.tick.tolist(),
            None if log.rating is None else log.rating.tolist()]


def test_holdout_bookkeeping_by_hand():
    h = _pinned_holdout(_rows_log(), holdout=0.25, seconds_per_tick=10, n_factors=1, rng=0,
                         n_pairs=2, ks_close=0.15, ks_poor=0.35)
    assert (h.split, h.n_ticks, h.holdout) == (6, 8, 0.25)
    # fitted users 10, 20, 30, 60 -> 0..3; items 100, 200, 300 -> 0..2 (the log's ids kept)
    assert h.world.user_ids.tolist() == [10, 20, 30, 60]
    assert h.world.item_ids.tolist() == [100, 200, 300] and h.world.source == ""
    assert h.world.dropped_users.tolist() == [] and h.world.dropped_items.tolist() == []
    assert _columns(h.train) == [[0, 0, 1, 1, 2, 2, 0, 3], [0, 1, 0, 2, 1, 2, 2, 0],
                                 [0, 1, 0, 2, 3, 5, 4, 2], [5, 4, 3, 5, 2, 4, 1, 1]]
    assert (h.train.n_users, h.train.n_items) == (4, 3)
    # after the split: items 400 and 250 dropped; new users 15, 40, 50 -> 4, 5, 6
    assert _columns(h.real) == [[1, 6, 5, 2, 6, 4, 3], [1, 0, 2, 0, 1, 2, 1],
                                [6, 7, 7, 7, 6, 7, 7], [4, 5, 3, 2, 4, 5, 5]]
    assert (h.real.n_users, h.real.n_items) == (7, 3)
    assert (h.new_users_real, h.dropped_new_items) == (3, 2)
    # the simulated continuation: held-out ticks, fitted and forecast users, fitted items
    s = h.simulated
    assert s.n_users == 4 + h.new_users_simulated and s.n_items == 3
    assert s.user.size > 0 and np.all((s.tick >= 6) & (s.tick <= 7))
    assert np.all(s.user < s.n_users) and np.all(s.item < 3) and s.rating is not None
    assert h.report.label == ("out of sample: fitted on ticks 0-5, the world run on over "
                              "ticks 6-7 (0.25 of the span) from the real profiles at the "
                              "split, compared with the real interactions of those ticks")
    assert (h.report.ks_close, h.report.ks_poor) == (0.15, 0.35)
    assert h.report["profile_overlap"].n_real == 2  # n_pairs reaches fidelity
    # the comparison draws its pairs from the rng's third stream (fit, continuation, comparison)
    cmp = np.random.default_rng(np.random.SeedSequence(0).spawn(3)[2])
    plain = fidelity(h.real, s, n_pairs=2, ks_close=0.15, ks_poor=0.35, rng=cmp)
    assert h.report.distances == plain.distances
    again = _pinned_holdout(_rows_log(), holdout=0.25, seconds_per_tick=10, n_factors=1,
                             rng=0, n_pairs=2, ks_close=0.15, ks_poor=0.35)
    assert _columns(again.simulated) == _columns(s) and again.report == h.report


@pytest.mark.filterwarnings("error")  # the users the fit drops are not warned about
def test_holdout_with_min_rating_leaves_low_ratings_out_of_both_parts():
    h = _pinned_holdout(_rows_log(), holdout=0.25, seconds_per_tick=10, n_factors=1, rng=0,
                         min_rating=3)
    # ratings >= 3 only (3 itself kept): user 60's one rating before the split is 1, so 60 is
    # not fitted (the fit drops it) and is new after it: new users 15, 40, 50, 60 -> 3..6
    assert h.world.user_ids.tolist() == [10, 20, 30]
    assert h.world.dropped_users.tolist() == [60]
    assert _columns(h.train) == [[0, 0, 1, 1, 2], [0, 1, 0, 2, 2], [0, 1, 0, 2, 5],
                                 [5, 4, 3, 5, 4]]
    assert _columns(h.real) == [[1, 5, 4, 5, 3, 6], [1, 0, 2, 1, 2, 1], [6, 7, 7, 6, 7, 7],
                                [4, 5, 3, 4, 5, 5]]
    assert (h.new_users_real, h.dropped_new_items, h.real.n_users) == (4, 2, 7)
    assert h.simulated.rating is not None and np.all(h.simulated.rating >= 3)


def test_holdout_without_a_rating_model_compares_no_ratings():
    h = _pinned_holdout(_rows_log(), holdout=0.25, seconds_per_tick=10, n_factors=1, rng=0,
                         ratings=False)
    assert h.real.rating is None and h.simulated.rating is None
    assert h.report["rating"].verdict == "not measured"
    assert _columns(h.real)[:3] == [[1, 6, 5, 2, 6, 4, 3], [1, 0, 2, 0, 1, 2, 1],
                                    [6, 7, 7, 7, 6, 7, 7]]


def test_holdout_of_an_interaction_log_keeps_its_indices_and_source():
    u, i, r, t = _rows_log()
    ticks = (t - 1000) // 10
    uid, uix = np.unique(u, return_inverse=True)  # 10 15 20 30 40 50 60
    iid, iix = np.unique(i, return_inverse=True)  # 100 200 250 300 400
    log = InteractionLog(user=uix, item=iix, tick=ticks, source=np.zeros(u.size, np.int8),
                         n_users=uid.size, n_items=iid.size, rating=r,
                         metadata={"source": "by hand"})
    h = _pinned_holdout(log, holdout=0.25, seconds_per_tick=1, n_factors=1, rng=0)
    assert h.split == 6 and h.world.source == "by hand"
    assert h.world.user_ids.tolist() == [0, 2, 3, 6] and h.world.item_ids.tolist() == [0, 1, 3]
    assert _columns(h.real) == [[1, 6, 5, 2, 6, 4, 3], [1, 0, 2, 0, 1, 2, 1],
                                [6, 7, 7, 7, 6, 7, 7], [4, 5, 3, 2, 4, 5, 5]]
    # a log without a source in its metadata: no source
    bare = InteractionLog(user=uix, item=iix, tick=ticks, source=np.zeros(u.size, np.int8),
                          n_users=uid.size, n_items=iid.size, rating=r)
    assert _pinned_holdout(bare, holdout=0.25, seconds_per_tick=1, n_factors=1,
                            rng=0).world.source == ""


def test_holdout_of_a_log_without_ratings():
    u, i, _, t = _rows_log()
    h = _pinned_holdout((u, i, None, t), holdout=0.25, seconds_per_tick=10, n_factors=1, rng=0)
    assert h.train.rating is None and h.real.rating is None and h.simulated.rating is None
    assert _columns(h.train)[:3] == [[0, 0, 1, 1, 2, 2, 0, 3], [0, 1, 0, 2, 1, 2, 2, 0],
                                     [0, 1, 0, 2, 3, 5, 4, 2]]
    assert _columns(h.real)[:3] == [[1, 6, 5, 2, 6, 4, 3], [1, 0, 2, 0, 1, 2, 1],
                                    [6, 7, 7, 7, 6, 7, 7]]


def test_holdout_refuses_a_window_in_which_nothing_is_adopted():
    # two users who hold both items before the split; without sessions nobody new arrives
    u, i, t = np.array([1, 1, 2, 2, 1, 2]), np.array([1, 2, 1, 2, 1, 2]), np.arange(6)
    with pytest.raises(ValueError, match=_msg(
            "`holdout` must be a held-out window in which the fitted world adopts something; "
            "got no simulated interaction after the split at tick 4.")):
        holdout_fidelity((u, i, None, t), holdout=1 / 3, seconds_per_tick=1, n_factors=1,
                         rng=0, sessions=False)


def test_the_documented_defaults():
    opts = inspect.signature(holdout_fidelity).parameters
    assert {k: opts[k].default for k in ("holdout", "seed", "seconds_per_tick", "n_pairs",
                                         "ks_close", "ks_poor", "rng")} == dict(
        holdout=0.2, seed=0, seconds_per_tick=86400.0, n_pairs=20_000, ks_close=0.1,
        ks_poor=0.2, rng=None)


class _Data:
    """A RatingData look-alike (duck typing)."""

    def __init__(self, users, items, ratings, timestamps):
        self.users, self.items, self.ratings, self.timestamps = users, items, ratings, timestamps


@pytest.mark.parametrize("make, kwargs, error, text", [
    pytest.param(lambda: _rows_log(), dict(seed=-1), ValueError,
                 "`seed` must be an int >= 0; got -1.", id="seed"),
    pytest.param(lambda: _rows_log(), dict(seconds_per_tick=0.0), ValueError,
                 "`seconds_per_tick` must be a finite number > 0.0; got 0.0.", id="spt"),
    pytest.param(lambda: _rows_log(), dict(n_ticks=8), ValueError,
                 "`n_ticks` must be not given (the horizon is the log's span); got 8.",
                 id="n_ticks"),
    pytest.param(lambda: _rows_log(), dict(holdout=0.0), ValueError,
                 "`holdout` must be a finite number in (0.0, 0.5]; got 0.0.", id="holdout"),
    # the options are checked before the log is read
    pytest.param(lambda: (np.array([0, 1]), np.array([0, 1])), dict(holdout=0.0), ValueError,
                 "`holdout` must be a finite number in (0.0, 0.5]; got 0.0.",
                 id="holdout-0-first"),
    pytest.param(lambda: (np.array([0, 1]), np.array([0, 1])), dict(holdout=0.75), ValueError,
                 "`holdout` must be a finite number in (0.0, 0.5]; got 0.75.",
                 id="holdout-0.75-first"),
    pytest.param(lambda: _Data(np.array([0, 1]), np.array([0, 1]), None, np.array([5])), {},
                 ValueError, "`interactions (timestamps)` must be 2 timestamps, one per "
                 "interaction; got 1.", id="timestamps"),
    pytest.param(lambda: _Data(np.array([0, 1]), np.array([0, 1]), None, np.array([0.5, 1.0])),
                 {}, TypeError, "`interactions (timestamps)` must be integers; got dtype "
                 "float64.", id="float-timestamps"),
    pytest.param(lambda: _Data(np.zeros(0, int), np.zeros(0, int), None, np.zeros(0, int)), {},
                 ValueError, "`interactions` must be a log with at least one interaction; got "
                 "an empty log.", id="empty"),
    pytest.param(lambda: (np.array([3]), np.array([4]), None, np.array([7])), {}, ValueError,
                 "`holdout` must be a split leaving at least two distinct active ticks in each "
                 "part (log of 1 ticks, split at tick 0); got 0 in the fitted part.",
                 id="one-interaction"),
    pytest.param(lambda: (np.array([0, 1]), np.array([0, 1])), {}, ValueError,
                 "`interactions` must be a log with timestamps (a hold-out is cut in time); "
                 "got a log without timestamps.", id="no-times"),
])
def test_holdout_refusals_word_for_word(make, kwargs, error, text):
    with pytest.raises(error, match=_msg(text)):
        holdout_fidelity(make(), **{"holdout": 0.25, **kwargs})


def _world_log(n_users=60, n_items=15, n_ticks=20, seed=0):
    """(users, items, ratings, timestamps) of a small world with sessions, ids from 1, one tick
    an hour."""
    return _timed_log(n_users, n_items, n_ticks, seed, mean_profile_size=5.0,
                      seconds_per_tick=3600)


def _same_arrays(a, b):
    """The fields of two dataclasses are equal, arrays entry by entry (nested dataclasses are
    compared apart)."""
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            if not (isinstance(x, np.ndarray) and isinstance(y, np.ndarray)
                    and np.array_equal(x, y)):
                return False
        elif not dataclasses.is_dataclass(x) and x != y:
            return False
    return True


@pytest.mark.parametrize("sessions", [True, False], ids=["sessions", "no-sessions"])
def test_the_continuation_is_the_documented_recipe(sessions):
    """The simulated held-out log against the world built by hand from holdout_fidelity's
    Notes, with the rng's second stream (SeedSequence(rng).spawn(3): fit, continuation,
    comparison): the real profiles at the split as history; with sessions, the observed
    sessions continued, E_u = activity_u / (weight of u's observed sessions), Poisson(rate *
    held-out ticks) new users, each a copy of a fitted user drawn at random, arriving
    uniformly over the held-out ticks; without sessions, the fitted rate per tick goes on
    over the whole horizon and nobody new arrives."""
    u, i, r, t = _world_log()
    if not sessions:  # activity that fades: the fit's activity half-life must go on
        keep = np.random.default_rng(0).random(t.size) < np.exp(-(t - t.min()) / 3600 / 6)
        u, i, r, t = u[keep], i[keep], r[keep], t[keep]
    h = _pinned_holdout((u, i, r, t), holdout=0.3, n_factors=2, rng=4, seed=3,
                         sessions=sessions, seconds_per_tick=3600, n_pairs=30)
    split, n_ticks, n_old = h.split, h.n_ticks, h.world.n_users
    c = h.world.config
    # the world is the fit of the part before the split, with the rng's first stream
    before = (t - t.min()) // 3600 < split
    fit = calibrate((u[before], i[before], r[before], t[before]), n_factors=2,
                    sessions=sessions, seconds_per_tick=3600, drift=False,
                    rng=np.random.default_rng(np.random.SeedSequence(4).spawn(3)[0]))
    assert dataclasses.replace(fit.config, fitted=None) == dataclasses.replace(c, fitted=None)
    assert _same_arrays(fit.config.fitted, c.fitted) and _same_arrays(fit.config.fitted.ratings,
                                                                      c.fitted.ratings)
    assert np.array_equal(fit.user_ids, h.world.user_ids)
    fa = c.fitted
    r_new = np.random.default_rng(np.random.SeedSequence(4).spawn(3)[1])
    if sessions:
        law = c.sessions
        old = continue_schedule(law, h.train.user, h.train.tick, n_old, split, n_ticks, r_new)
        observed = np.zeros(n_old)
        for u, t, w in zip(old.user, old.tick, old.weight, strict=True):
            if t < split:
                observed[u] += w
        n_new = int(r_new.poisson(law.arrival_rate * (n_ticks - split)))
        src = r_new.integers(0, n_old, n_new)
        new = draw_schedule(law, r_new.integers(split, n_ticks, n_new), n_ticks, r_new)
        copy_of = list(range(n_old)) + src.tolist()
        sched = SessionSchedule(user=np.concatenate([old.user, n_old + new.user]),
                                tick=np.concatenate([old.tick, new.tick]),
                                weight=np.concatenate([old.weight, new.weight]),
                                n_users=n_old + n_new, n_ticks=n_ticks)
        activity = np.zeros(n_old + n_new)
        for u, w in zip(sched.user, sched.weight, strict=True):
            f = copy_of[u]
            activity[u] += w * fa.activity[f] / (observed[f] if observed[f] > 0 else 1.0)
        halflife = None
    else:
        n_new, copy_of, sched = 0, list(range(n_old)), None
        activity = np.array([a / split * n_ticks for a in fa.activity])
        halflife = c.activity_halflife
        assert halflife is not None
    assert h.new_users_simulated == n_new and (not sessions) <= (n_new == 0)
    n_all = n_old + n_new
    fitted = simulator.FittedArrays(appeal=fa.appeal, features=fa.features,
                                    taste=fa.taste[copy_of], activity=activity,
                                    ratings=fa.ratings.subset(users=np.array(copy_of)))
    cont = dataclasses.replace(c, n_users=n_all, n_ticks=n_ticks, fitted=fitted,
                               sessions=sched, activity_halflife=halflife)
    t = h.train
    history = InteractionLog(user=t.user, item=t.item, tick=t.tick, source=t.source,
                             n_users=n_all, n_items=t.n_items, rating=t.rating)
    world = simulator.World(cont, 3, history=history, start=split)
    e = world.simulate(n_ticks - 1).edges
    tail = e.tick >= split
    assert h.simulated.n_users == n_all and h.simulated.n_items == t.n_items
    assert _columns(h.simulated) == [e.user[tail].tolist(), e.item[tail].tolist(),
                                     e.tick[tail].tolist(), e.rating[tail].tolist()]
    assert h.simulated.source.tolist() == e.source[tail].tolist()
    # the comparison: 30 pairs drawn from the third stream
    cmp = np.random.default_rng(np.random.SeedSequence(4).spawn(3)[2])
    assert h.report.distances == fidelity(h.real, h.simulated, n_pairs=30, rng=cmp).distances


# -- the survivors of the run's second part (the statistics, fidelity, _distance) ---------------
def test_rows_go_on_after_a_distance_not_measured():
    a, _, c = _report().distances
    rep = F.FidelityReport(distances=(c, a), ks_close=0.25, ks_poor=0.5, faithful=True)
    assert rep.rows() == [
        ("session_gaps", "-", "-", "-", "-", "-", "-", "-", "not measured"),
        ("user_activity", "4/16", "16", "14", "0.500", "0.759", "2 (12.5%)", "-", "fair"),
    ]
    assert len(rep.to_text().splitlines()) == 3


def test_holdout_names_the_items_the_fit_drops_by_their_ids():
    # item 500, rated once before the split and below min_rating 3: the fit drops it; the
    # world names it by its id in the log (500), not by its index among the log's items (5)
    u, i, r, t = _rows_log()
    u, i, r, t = (np.append(u, 30), np.append(i, 500), np.append(r, 1.0),
                  np.append(t, 1000 + 10 * 1))
    h = _pinned_holdout((u, i, r, t), holdout=0.25, seconds_per_tick=10, n_factors=1, rng=0,
                         min_rating=3)
    assert h.world.dropped_items.tolist() == [500] and h.world.dropped_users.tolist() == [60]
    assert h.world.item_ids.tolist() == [100, 200, 300]


def test_holdout_defaults_act_as_documented(monkeypatch):
    """The defaults by what they do, not by the signature (under mutmut's trampolines the
    signature is the original's): a day per tick and a hold-out of 0.2 split the hand log of
    8 days at day floor(0.8 * 8) = 6, seed 0, and fidelity's n_pairs 20,000, ks 0.1 and
    0.2."""
    u, i, r, t = _rows_log()
    days = (t - 1000) // 10 * 86400  # the same ticks, a day apart
    seen = {}

    def spy(real, simulated, **kwargs):
        seen.update(kwargs)
        return fidelity(real, simulated, **kwargs)

    monkeypatch.setattr(F, "fidelity", spy)
    h = _pinned_holdout((u, i, r, days), n_factors=1, rng=0)
    assert (h.split, h.n_ticks, h.holdout) == (6, 8, 0.2)
    assert (seen["n_pairs"], seen["ks_close"], seen["ks_poor"]) == (20_000, 0.1, 0.2)
    seeded = _pinned_holdout((u, i, r, days), n_factors=1, rng=0, seed=0)
    assert _columns(h.simulated) == _columns(seeded.simulated)
