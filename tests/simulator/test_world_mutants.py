"""The world's campaign and CTR code against a campaign written out here (issue 33 section 2).

The suite compared the three campaign paths ("naive", "numpy" and the kernel) with one
another, which cannot see a bug they share (the plan, the dispatch, the order of two
campaigns at one tick). Here each tick's campaign is replayed from the documented law with the
world's public accessors only (``CampaignConfig``, ``World.uniforms`` with ``WORLD_STREAMS``,
tastes, features, appeals, lifetimes):

* campaign ``j`` reaches user ``u`` when ``U_reach(u, j, 0) < reach``, at the push tick
  ``start + min(floor(U_tick(u, j, 0) * duration), duration - 1)``; with sessions only when
  the user's first session is at or before that tick;
* a reached user is offered the first ``k`` items of its slate that are alive at the push
  tick and not held (held: every edge before the tick, the tick's organic edges, the offers
  accepted by the campaigns before it at that tick);
* an offer of ``i`` to ``u`` at ``t`` is accepted when ``U_accept(u, i, t) < 1 - (1 - p)**boost``
  with ``p = g(a_i(t) + x_u(t) . f_i) 2**(-(t - birth_i) / h)`` (0 outside the lifetime).

The campaign edges of every tick must be those accepted offers, ``push_counts(t, t)`` the
offers, for every method. Then the refusals, matched word for word.
"""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest

from simulator import (
    WORLD_STREAMS,
    CampaignConfig,
    InteractionLog,
    SessionSchedule,
    World,
    WorldConfig,
)

METHODS = ("naive", "numpy", "fast")


class Rotating:
    """A campaign policy whose slate depends on the user only: ``(u + 2 r + shift) % n``."""

    def __init__(self, n_items, shift=0):
        self.n_items, self.shift, self.fitted_on = n_items, shift, None

    def fit(self, profiles):
        self.fitted_on = profiles.copy()
        return self

    def recommend(self, users, k, *, removed=None):
        return np.array([[(u + 2 * r + self.shift) % self.n_items for r in range(k)]
                         for u in users], dtype=np.int64)


def rotating_slate(n_items, shift, u, k):
    return [(u + 2 * r + shift) % n_items for r in range(k)]


def p_formula(world, u, i, t):
    """``p(u, i, t)`` written out from the public accessors."""
    c = world.config
    birth, death = int(c.birth_array()[i]), int(c.death_array()[i])
    if not birth <= t < death:
        return 0.0
    x, f = world.user_taste(t)[u], world.item_features[i]
    score = float(world.item_appeal(t)[i]) + sum(float(x[d]) * float(f[d]) for d in range(c.dim))
    p = 1.0 / (1.0 + math.exp(-score)) if c.click_model == "logistic" else min(max(score, 0.0),
                                                                               1.0)
    if c.ctr_halflife is not None:
        p *= 2.0 ** (-(t - birth) / c.ctr_halflife)
    return p


def plan_law(world, j, camp):
    """{user: push tick} of campaign ``j`` by the documented law."""
    c = world.config
    users = np.arange(c.n_users)
    reach = world.uniforms(users, j, 0, WORLD_STREAMS["campaign_reach"])
    tick = world.uniforms(users, j, 0, WORLD_STREAMS["campaign_tick"])
    first = {}
    if world.sessions is not None:
        for u, t in zip(world.sessions.user.tolist(), world.sessions.tick.tolist(), strict=True):
            first[u] = min(first.get(u, t), t)
    plan = {}
    for u in range(c.n_users):
        if not reach[u] < camp.reach:
            continue
        t = camp.start + min(int(tick[u] * camp.duration), camp.duration - 1)
        if world.sessions is not None and not (u in first and first[u] <= t):
            continue
        plan[u] = t
    return plan


def replay(world):
    """The campaigns replayed tick by tick against the world's organic edges: per tick, the
    accepted offers {(u, i)} and the offers per item; and what the replay met (the edge
    cases it reached, so that a test can say it reached them)."""
    c = world.config
    e = world.edges
    plans = [plan_law(world, j, camp) for j, camp in enumerate(c.campaigns)]
    accept_key = WORLD_STREAMS["campaign_accept"]
    held, out, met = set(), [], {"dead at death tick": 0, "held": 0, "empty then pushed": 0,
                                 "second sees first": 0}
    for t in range(c.n_ticks):
        at = e.tick == t
        for u, i, s in zip(e.user[at].tolist(), e.item[at].tolist(), e.source[at].tolist(),
                           strict=True):
            if s != 2:  # the tick's organic edges come before its offers
                held.add((u, i))
        accepted, offers = set(), np.zeros(c.n_items, np.int64)
        empty_before = False
        for j, camp in enumerate(c.campaigns):
            if not camp.start <= t < camp.start + camp.duration:
                continue
            users = sorted(u for u, tk in plans[j].items() if tk == t)
            if not users:
                empty_before = True
                continue
            met["empty then pushed"] += empty_before
            for u in users:
                row = (list(camp.items) if camp.items is not None
                       else rotating_slate(c.n_items, world.campaign_policies[j].shift, u,
                                           camp.k))
                n_offered = 0
                for i in row:
                    if n_offered == camp.k:
                        break
                    if t == int(c.death_array()[i]) and (u, i) not in held:
                        met["dead at death tick"] += 1
                    if not c.birth_array()[i] <= t < c.death_array()[i]:
                        continue
                    if (u, i) in held:
                        met["held"] += 1
                        met["second sees first"] += (u, i) in accepted
                        continue
                    n_offered += 1
                    offers[i] += 1
                    p = p_formula(world, u, i, t)
                    if world.uniforms(u, i, t, accept_key)[()] < 1.0 - (1.0 - p) ** camp.boost:
                        held.add((u, i))
                        accepted.add((u, i))
        out.append((accepted, offers))
    return out, met


def assert_campaigns_follow_the_law(world, *, need=()):
    c = world.config
    world.simulate(c.n_ticks - 1)
    law, met = replay(world)
    e = world.edges
    n_offers = 0
    for t, (accepted, offers) in enumerate(law):
        at = (e.tick == t) & (e.source == 2)
        got = set(zip(e.user[at].tolist(), e.item[at].tolist(), strict=True))
        assert got == accepted, (world.method, t, sorted(got ^ accepted))
        np.testing.assert_array_equal(world.push_counts(t, t), offers, err_msg=f"tick {t}")
        n_offers += offers.sum()
    assert n_offers > 0
    assert (e.source == 2).sum() > 0
    for what in need:  # the edge cases this world is built to reach
        assert met[what] > 0, (what, met)
    return law


# -- a small world with two overlapping campaigns of fixed lists --------------------------------
def two_lists(**kw):
    """Item 1 dies at tick 6, inside campaign 0's window; items 2 and 3 are born during it;
    campaign 1 (k = 3) starts at tick 3; both push at ticks 3-5; item 5 is never pushed."""
    base = dict(n_users=40, n_items=6, n_ticks=10, dim=2, drift_rate=0.05, ctr_halflife=4.0,
                mean_profile_size=1.5, item_birth=(0, 0, 2, 3, 0, 0),
                item_death=(10, 6, 10, 10, 10, 10),
                campaigns=(CampaignConfig(start=2, duration=6, reach=0.8, items=(1, 2, 3, 0),
                                          k=2, boost=3.0),
                           CampaignConfig(start=3, duration=3, reach=0.6, items=(2, 0, 4), k=3,
                                          boost=2.0)))
    base.update(kw)
    return WorldConfig(**base)


@pytest.fixture(scope="module")
def lists_worlds():
    return {method: World(two_lists(), 7, method=method).simulate(9) for method in METHODS}


@pytest.fixture(scope="module")
def lists_world(lists_worlds):
    return lists_worlds["numpy"]


@pytest.mark.parametrize("method", METHODS)
def test_each_ticks_campaign_edges_and_offers_are_the_law_replayed(lists_worlds, method):
    """Both campaigns at ticks 3-5, the second seeing the first's adoptions; an item pushed
    at its death tick is skipped; held items are skipped and the next listed one offered."""
    assert_campaigns_follow_the_law(lists_worlds[method], need=("dead at death tick", "held"))


def test_a_linear_click_model_and_no_ctr_decay_follow_the_law_too():
    cfg = two_lists(click_model="linear", ctr_halflife=None, appeal_mean=0.2, appeal_std=0.1,
                    universal_appeal=0.6, taste_scale=0.2, drift_rate=0.0)
    for method in METHODS:
        assert_campaigns_follow_the_law(World(cfg, 3, method=method))


def test_a_campaign_that_reaches_nobody_at_a_tick_does_not_stop_the_next_one():
    """Campaign 0 (reach 0.05 over 8 ticks) pushes nobody at some ticks where campaign 1
    (reach 1, the same window) pushes everybody: those pushes are made."""
    cfg = two_lists(campaigns=(CampaignConfig(start=1, duration=8, reach=0.05, items=(4,)),
                               CampaignConfig(start=1, duration=8, reach=1.0, items=(0, 4),
                                              boost=2.0)))
    for method in METHODS:
        assert_campaigns_follow_the_law(World(cfg, 1, method=method), need=("empty then pushed",))


def test_two_campaigns_pushing_one_item_at_one_tick_offer_it_once():
    """Two identical one-tick campaigns: the second offers only what the first did not get
    accepted (the profiles are updated between them)."""
    camp = CampaignConfig(start=4, duration=1, reach=1.0, items=(0, 4), boost=4.0)
    cfg = two_lists(campaigns=(camp, camp))
    for method in METHODS:
        assert_campaigns_follow_the_law(World(cfg, 2, method=method), need=("second sees first",))


# -- a policy campaign -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def policy_worlds():
    """A fixed list first, then a policy campaign (j = 1) of k = 3 with a slate per user."""
    cfg = two_lists(campaigns=(CampaignConfig(start=2, duration=2, reach=0.5, items=(0,)),
                               CampaignConfig(start=3, duration=4, reach=0.9,
                                              policy=Rotating(6, shift=1), k=3, boost=3.0)))
    return {method: World(cfg, 5, method=method).simulate(9) for method in METHODS}


@pytest.mark.parametrize("method", METHODS)
def test_a_policy_campaign_offers_every_valid_recommendation(policy_worlds, method):
    assert_campaigns_follow_the_law(policy_worlds[method], need=("held",))


@pytest.mark.parametrize("method", METHODS)
def test_the_policy_is_fitted_on_the_profiles_before_the_start(policy_worlds, method):
    world = policy_worlds[method]
    fitted = world.campaign_policies[1].fitted_on
    e = world.edges
    before = e.tick <= 2  # the campaign starts at tick 3
    assert fitted.nnz == before.sum() > 0
    # organic edges on ticks 2 and 3: profiles of ticks 1, 2 and 3 all differ
    assert ((e.tick == 2) & (e.source == 0)).sum() > 0 and ((e.tick == 3) & (e.source == 0)).sum()
    assert set(zip(*fitted.nonzero(), strict=True)) == set(
        zip(e.user[before].tolist(), e.item[before].tolist(), strict=True))
    assert world.campaign_policies[0] is None


# -- sessions: a campaign reaches a user whose first session is at or before the push --------
def test_a_user_arriving_at_the_push_tick_is_reached_and_one_arriving_after_is_not():
    cfg = two_lists(campaigns=(CampaignConfig(start=2, duration=6, reach=1.0, items=(0, 4),
                                              boost=3.0),))
    plan = plan_law(World(cfg, 11), 0, cfg.campaigns[0])
    users = sorted(plan)
    # a third of the users arrive at their push tick, a third one tick later, the rest before
    first = {u: plan[u] + (u % 3 == 1) - 2 * (u % 3 == 2) for u in users}
    user = [u for u in users for _ in (0, 1)]
    tick = [t for u in users for t in (first[u], 9 if first[u] < 9 else 8)]
    sched = SessionSchedule(user=user, tick=tick, weight=np.ones(len(user)), n_users=40,
                            n_ticks=10)
    cfg = two_lists(campaigns=cfg.campaigns, sessions=sched)
    for method in METHODS:
        world = World(cfg, 11, method=method).simulate(9)
        pushed = {u for u, t in plan_law(world, 0, cfg.campaigns[0]).items()}
        assert pushed == {u for u in users if u % 3 != 1}
        law = assert_campaigns_follow_the_law(world)
        offered = sum(int(o.sum()) for _, o in law)
        assert offered > 0


# -- true_ctr and the decay ------------------------------------------------------------------------
def test_true_ctr_is_the_formula_on_every_user_item_and_tick(lists_world):
    """Born at 2 and 3, dead at 6: the first and last alive ticks carry the decay
    ``2**(-(t - birth) / 4)``; 0 outside the lifetime."""
    w = lists_world
    c = w.config
    grid = w.true_ctr(np.arange(c.n_users)[:, None, None], np.arange(c.n_items)[None, :, None],
                      np.arange(c.n_ticks)[None, None, :])
    assert grid.shape == (40, 6, 10) and grid.dtype == np.float64
    for t in range(c.n_ticks):
        for i in range(c.n_items):
            for u in (0, 17, 39):
                assert grid[u, i, t] == pytest.approx(p_formula(w, u, i, t), rel=1e-12, abs=0)
    assert np.all(grid[:, 1, 6:] == 0) and np.all(grid[:, 2, :2] == 0)
    assert np.all(grid[:, 1, :6] > 0) and np.all(grid[:, 2, 2:] > 0)


@pytest.mark.parametrize("args, exc, message", [
    (([0, 40], 0, 1), ValueError, "`users` must be in [0, 39]; got 40 at index 1."),
    ((-1, 0, 1), ValueError, "`users` must be in [0, 39]; got -1 at index 0."),
    ((0, [1, 6], 1), ValueError, "`items` must be in [0, 5]; got 6 at index 1."),
    ((0, 0, 10), ValueError, "`t` must be in [0, 9]; got 10 at index 0."),
    ((0.5, 0, 1), TypeError, "`users` must hold ints; got dtype float64."),
    ((0, 0.5, 1), TypeError, "`items` must hold ints; got dtype float64."),
    ((0, 0, 1.0), TypeError, "`t` must hold ints; got dtype float64."),
])
def test_true_ctr_refusals_word_for_word(lists_world, args, exc, message):
    with pytest.raises(exc, match="^" + re.escape(message) + "$"):
        lists_world.true_ctr(*args)


# -- push_counts -----------------------------------------------------------------------------
def test_push_counts_of_a_range_are_the_offers_of_its_ticks_both_ends_included(lists_world):
    law, _ = replay(lists_world)
    per_tick = np.array([offers for _, offers in law])
    for t0, t1 in [(0, 9), (3, 3), (2, 4), (4, 7), (0, 2), (7, 9)]:
        counts = lists_world.push_counts(t0, t1)
        assert counts.dtype == np.int64 and counts.shape == (6,)
        np.testing.assert_array_equal(counts, per_tick[t0:t1 + 1].sum(axis=0))
    assert per_tick[:, 5].sum() == 0  # the last item is never pushed: the shape still holds


@pytest.mark.parametrize("t0, t1, exc, message", [
    (5, 2, ValueError, "`t1` must be >= t0 = 5; got 2."),
    (10, 2, ValueError, "`t0` must be in [0, 9]; got 10."),
    (2, 10, ValueError, "`t1` must be in [0, 9]; got 10."),
    (2.0, 3, TypeError, "`t0` must be an int; got float."),
    (2, 3.0, TypeError, "`t1` must be an int; got float."),
])
def test_push_counts_refusals_word_for_word(lists_world, t0, t1, exc, message):
    with pytest.raises(exc, match="^" + re.escape(message) + "$"):
        lists_world.push_counts(t0, t1)


# -- the policy's slates: refusals ------------------------------------------------------------
class Slates:
    def __init__(self, rows):
        self.rows = rows

    def fit(self, profiles):
        return self

    def recommend(self, users, k, *, removed=None):
        return np.array([self.rows[u % len(self.rows)] for u in users])


def policy_config(rows, k):
    return WorldConfig(n_users=20, n_items=10, n_ticks=5, mean_profile_size=1.0,
                       campaigns=(CampaignConfig(start=1, reach=1.0, items=(0,)),
                                  CampaignConfig(start=1, reach=1.0, policy=Slates(rows), k=k)))


@pytest.mark.parametrize("rows, k, message", [
    ([[0, 9]], 3, "`campaigns[1].policy.recommend` must return an int array of shape (20, 3); "
                  "got int64 (20, 2)."),
    ([[0.0, 9.0]], 2, "`campaigns[1].policy.recommend` must return an int array of shape "
                      "(20, 2); got float64 (20, 2)."),
    ([[0, 10]], 2, "`campaigns[1].policy.recommend` must return items in [0, 9]; got 0..10."),
    ([[-1, 9]], 2, "`campaigns[1].policy.recommend` must return items in [0, 9]; got -1..9."),
    ([[3, 3]], 2, "`campaigns[1].policy.recommend` must return distinct items in each row; "
                  "got a repeated item."),
    ([[1, 4, 2], [5, 6, 5]], 3, "`campaigns[1].policy.recommend` must return distinct items in "
                                "each row; got a repeated item."),
    ([[7, 1, 2], [8, 0, 8]], 3, "`campaigns[1].policy.recommend` must return distinct items "
                                "in each row; got a repeated item."),
])
def test_bad_policy_slates_are_refused_word_for_word(rows, k, message):
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        World(policy_config(rows, k), 0, method="numpy").simulate(1)


@pytest.mark.parametrize("rows, k", [([[0, 9]], 2), ([[9]], 1), ([[0, 1, 2], [2, 1, 0]], 3),
                                     ([[np.int32(4), np.int32(0)]], 2)])
def test_slates_at_the_edges_of_the_rules_are_accepted(rows, k):
    """Items 0 and n_items - 1, k = 1, rows that repeat across users (not within a row)."""
    world = World(policy_config(rows, k), 0, method="numpy").simulate(1)
    pushed = world.push_counts(1, 1)
    assert pushed.sum() > 0
    assert set(np.flatnonzero(pushed)) <= {0} | {int(i) for r in rows for i in r}


# -- the twin ---------------------------------------------------------------------------------
def test_the_twin_keeps_the_method_history_and_start_and_drops_the_campaigns():
    cfg = two_lists()
    full = World(cfg, 4).simulate(9).edges
    past = full.tick < 3
    history = InteractionLog(user=full.user[past], item=full.item[past], tick=full.tick[past],
                             source=full.source[past], n_users=40, n_items=6)
    world = World(cfg, 9, method="naive", history=history, start=3)
    twin = world.without_campaigns()
    assert twin.method == "naive" and twin.config.campaigns == () and twin.simulated_until == 2
    bare = World(two_lists(campaigns=()), 9, method="numpy", history=history, start=3)
    a, b = twin.simulate(9).edges, bare.simulate(9).edges
    for x, y in zip((a.user, a.item, a.tick, a.source), (b.user, b.item, b.tick, b.source),
                    strict=True):
        np.testing.assert_array_equal(x, y)
    new = a.tick >= 3
    assert (a.source[new] == 2).sum() == 0 and past.sum() > 0 and new.sum() > 0


# -- the plan's order over long windows ----------------------------------------------------------
def test_the_plan_is_sorted_by_tick_then_user_over_windows_beyond_int16():
    """``_campaign_tick`` finds a tick's users by binary search in the plan, so the plan must
    be in tick order (then user order) also where sort keys would pass 2**15 as int16: a
    window of 40,000 ticks (offsets up to 39,999), and one of 20,000 starting at 10,000
    (offsets below 2**15, ``tick + start`` on both sides of it). Only the plan is built (the
    constructor's), nothing is simulated."""
    cfg = WorldConfig(n_users=30, n_items=3, n_ticks=60000, mean_profile_size=0.0,
                      n_universal=0,
                      campaigns=(CampaignConfig(start=20000, duration=40000, reach=0.9,
                                                items=(0,)),
                                 CampaignConfig(start=10000, duration=20000, reach=0.9,
                                                items=(1,))))
    world = World(cfg, 0)
    for j, camp in enumerate(cfg.campaigns):
        law = sorted((t, u) for u, t in plan_law(world, j, camp).items())
        if j == 0:  # offsets beyond int16
            assert law[-1][0] - camp.start >= 2**15
        else:  # offsets within int16, tick + start on both sides of 2**15
            assert law[0][0] + camp.start < 2**15 <= law[-1][0] + camp.start
        users, ticks = world._campaign_plan[j]
        assert users.dtype == np.int64 and ticks.dtype == np.int64
        assert list(zip(ticks.tolist(), users.tolist(), strict=True)) == law


def test_a_campaign_meeting_only_held_items_offers_nothing_and_counts_zero():
    """Two campaigns push item 0 to everybody at tick 4; the first, with boost 1000, gets
    every offer accepted (``1 - (1 - p)**1000`` is 1 to double precision here), so the second
    offers nothing: tick 4 counts the first's offers only (an empty record is still ints)."""
    camp = CampaignConfig(start=4, duration=1, reach=1.0, items=(0,), boost=1000.0)
    cfg = two_lists(campaigns=(camp, dataclasses.replace(camp, boost=2.0)))
    for method in METHODS:
        world = World(cfg, 6, method=method).simulate(9)
        e = world.edges
        organic = {u for u, i, t, s in zip(e.user.tolist(), e.item.tolist(), e.tick.tolist(),
                                           e.source.tolist(), strict=True)
                   if i == 0 and t <= 4 and s == 0}
        assert set(e.user[(e.item == 0) & (e.source == 2)].tolist()) == set(range(40)) - organic
        expected = np.zeros(6, np.int64)
        expected[0] = 40 - len(organic)  # the first campaign's offers; the second's: none
        np.testing.assert_array_equal(world.push_counts(4, 4), expected)
        np.testing.assert_array_equal(world.push_counts(0, 9), expected)
        assert_campaigns_follow_the_law(world)


def test_the_plan_of_a_tick_is_in_user_order(lists_world):
    """Many users share a push tick here (32 users over 6 ticks): the plan keeps them in user
    order (a stable sort), so the edges of a tick come in the same order whatever sort
    algorithm numpy picks."""
    for j, camp in enumerate(lists_world.config.campaigns):
        law = sorted((t, u) for u, t in plan_law(lists_world, j, camp).items())
        users, ticks = lists_world._campaign_plan[j]
        assert len(law) > len(set(ticks.tolist())) + 10
        assert list(zip(ticks.tolist(), users.tolist(), strict=True)) == law
