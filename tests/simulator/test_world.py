"""The simulated world: determinism, twin, invariants, ground truth, calibration."""

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator import (
    WORLD_STREAMS,
    AppealShock,
    CampaignConfig,
    FittedArrays,
    InteractionLog,
    RatingModel,
    SessionLaw,
    SessionSchedule,
    World,
    WorldConfig,
    preset,
)
from simulator._crn import hash_uniforms, seed_key, uniforms_reference


# -- strategies ------------------------------------------------------------------------------
@st.composite
def world_configs(draw, *, campaigns=True, min_campaigns=0):
    n_users = draw(st.integers(3, 40))
    n_items = draw(st.integers(3, 12))
    n_ticks = draw(st.integers(4, 25))
    kw = dict(n_users=n_users, n_items=n_items, n_ticks=n_ticks, dim=draw(st.integers(1, 4)),
              mean_profile_size=draw(st.floats(0.2, 2.0)),
              n_universal=draw(st.integers(0, 2)),
              click_model=draw(st.sampled_from(["logistic", "linear"])),
              activity_halflife=draw(st.none() | st.floats(2.0, 50.0)),
              ctr_halflife=draw(st.none() | st.floats(1.0, 20.0)),
              drift_rate=draw(st.sampled_from([0.0, 0.05])))
    if kw["click_model"] == "linear":
        kw.update(appeal_mean=0.2, appeal_std=0.1, universal_appeal=0.6, taste_scale=0.2)
    if draw(st.booleans()):
        birth = draw(st.lists(st.integers(0, n_ticks - 2), min_size=n_items, max_size=n_items))
        life = draw(st.lists(st.integers(1, n_ticks), min_size=n_items, max_size=n_items))
        birth[0] = 0  # keep one item alive at the start of every campaign below
        life[0] = n_ticks
        kw["item_birth"] = tuple(birth)
        kw["item_death"] = tuple(b + d for b, d in zip(birth, life, strict=True))
    if draw(st.booleans()):
        kw["shocks"] = (AppealShock(item=draw(st.integers(0, n_items - 1)),
                                    start=draw(st.integers(0, n_ticks - 1)),
                                    duration=draw(st.integers(1, 5)), delta=2.0),)
    n_camp = draw(st.integers(min_campaigns, 2)) if campaigns else 0
    camps = []
    for _ in range(n_camp):
        start = draw(st.integers(0, n_ticks - 1))
        items = tuple(draw(st.lists(st.integers(0, n_items - 1), min_size=1, max_size=4,
                                    unique=True)))
        if 0 not in items:
            items = items + (0,)
        camps.append(CampaignConfig(start=start, duration=draw(st.integers(1, n_ticks - start)),
                                    reach=draw(st.floats(0.2, 1.0)), items=items, k=1,
                                    boost=draw(st.floats(1.0, 10.0))))
    kw["campaigns"] = tuple(camps)
    return WorldConfig(**kw)


seeds = st.integers(0, 2**32 - 1)


def _edges(world):
    e = world.edges
    return e.user, e.item, e.tick, e.source


def _same_edges(a, b):
    return all(np.array_equal(x, y) for x, y in zip(_edges(a), _edges(b), strict=True))


# -- determinism and the twin ----------------------------------------------------------------
@settings(max_examples=30)
@given(world_configs(), seeds)
def test_same_seed_gives_identical_arrays(cfg, seed):
    a = World(cfg, seed).simulate(cfg.n_ticks - 1)
    b = World(cfg, seed)
    b.simulate(cfg.n_ticks // 2)  # lazily, in two steps: same result
    b.simulate(cfg.n_ticks - 1)
    assert _same_edges(a, b)
    t = cfg.n_ticks - 1
    assert np.array_equal(a.user_taste(t), b.user_taste(t))
    assert np.array_equal(a.push_counts(0, t), b.push_counts(0, t))


def test_different_seeds_differ():
    cfg = preset("viadeo_like", n_users=300)
    a, b = World(cfg, 1).profiles(200), World(cfg, 2).profiles(200)
    assert (a != b).nnz > 0


@settings(max_examples=30)
@given(world_configs(campaigns=False), seeds)
def test_twin_without_campaigns_is_identical_edge_for_edge(cfg, seed):
    world = World(cfg, seed)
    twin = world.without_campaigns()
    world.simulate(cfg.n_ticks - 1)
    twin.simulate(cfg.n_ticks - 1)
    assert len(world.edges) == len(twin.edges)
    assert _same_edges(world, twin)


@settings(max_examples=30)
@given(world_configs(min_campaigns=1), seeds)
def test_campaign_raises_marginal_of_pushed_items_against_twin(cfg, seed):
    # With common random numbers the twin's profiles are contained in the world's, and the
    # extra edges are campaign pushes, so the pushed items' LOO marginal can only go up.
    world = World(cfg, seed)
    twin = world.without_campaigns()
    t = cfg.n_ticks - 1
    pw, pt = world.profiles(t), twin.profiles(t)
    assert (pt - pt.multiply(pw)).nnz == 0  # twin subset of world
    extra = (pw - pt).tocoo()
    pushed = sorted({i for c in cfg.campaigns for i in c.items})
    assert np.isin(extra.col, pushed).all()
    if pw.nnz:
        mw = world.item_marginal(t)[pushed].sum()
        mt = twin.item_marginal(t)[pushed].sum() if pt.nnz else 0.0
        assert mw >= mt - 1e-12


def test_uniforms_are_common_to_world_and_twin():
    cfg = preset("viadeo_like", n_users=200)
    world = World(cfg, 7)
    twin = world.without_campaigns()
    u, i = np.arange(200), np.arange(200) % 180
    assert np.array_equal(world.uniforms(u, i, 5, "click"), twin.uniforms(u, i, 5, "click"))
    assert np.array_equal(world.uniforms(u, i, 5, "click"),
                          World(cfg, 7).uniforms(u, i, 5, "click"))
    assert not np.array_equal(world.uniforms(u, i, 5, "click"), world.uniforms(u, i, 5, "view"))
    assert not np.array_equal(world.uniforms(u, i, 5, "click"),
                              World(cfg, 8).uniforms(u, i, 5, "click"))
    assert world.uniforms(u[:, None], i[None, :3], 5, 99).shape == (200, 3)


@given(st.integers(0, 2**63), st.integers(0, 2**40), st.lists(st.tuples(
    st.integers(0, 2**31), st.integers(0, 2**31), st.integers(0, 2**31)), min_size=1, max_size=20))
def test_hash_uniforms_match_reference(entropy, stream, triples):
    key = seed_key(entropy, stream)
    u, i, t = (np.array(x, dtype=np.int64) for x in zip(*triples, strict=True))
    fast = hash_uniforms(key, u, i, t)
    ref = [uniforms_reference(key, a, b, c) for a, b, c in triples]
    assert np.array_equal(fast, ref)
    assert np.all((fast >= 0) & (fast < 1))


def test_hash_uniforms_look_uniform():
    from scipy import stats
    key = seed_key(3, 1)
    u = hash_uniforms(key, np.arange(20000), np.arange(20000) % 7, 11)
    assert stats.kstest(u, "uniform").pvalue > 1e-3
    # neighbouring counters are not correlated
    assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < 0.05


# -- naive reference ---------------------------------------------------------------------------
@settings(max_examples=25)
@given(world_configs(), seeds)
def test_fast_simulation_matches_naive_reference(cfg, seed):
    fast = World(cfg, seed).simulate(cfg.n_ticks - 1)
    naive = World(cfg, seed, method="naive").simulate(cfg.n_ticks - 1)
    vectorised = World(cfg, seed, method="numpy").simulate(cfg.n_ticks - 1)
    assert _same_edges(fast, naive)
    assert _same_edges(vectorised, naive)
    t = cfg.n_ticks - 1
    assert np.array_equal(fast.push_counts(0, t), naive.push_counts(0, t))


@settings(max_examples=20)
@given(world_configs(), seeds, st.lists(st.integers(0, 30), max_size=4))
def test_simulating_in_steps_gives_the_same_edges(cfg, seed, stops):
    # the fast path runs spans of ticks in one kernel call: where the spans are cut must not
    # matter
    whole = World(cfg, seed).simulate(cfg.n_ticks - 1)
    steps = World(cfg, seed)
    for t in sorted(min(s, cfg.n_ticks - 1) for s in stops):
        steps.simulate(t)
    steps.simulate(cfg.n_ticks - 1)
    assert _same_edges(whole, steps)


@pytest.mark.parametrize("threads", ["", "1"])
def test_fast_matches_numpy_on_a_larger_world(monkeypatch, threads):
    # a world large enough for several user blocks, two threads and several spans; with
    # RECLOOP_THREADS=1 the kernels and the draws of the next span stay on this thread
    from simulator import _kernels, _world

    monkeypatch.setenv("RECLOOP_THREADS", threads)
    monkeypatch.setattr(_world, "_SPAN_EVENTS", 5000)
    monkeypatch.setattr(_kernels, "_MIN_SPLIT", 1000)
    monkeypatch.setattr(_kernels, "_MIN_SPLIT_ROWS", 16)
    monkeypatch.setattr(_kernels, "_BLOCK", 256)
    cfg = preset("viadeo_like", n_users=3000, drift_rate=0.05, ctr_halflife=200.0)
    fast = World(cfg, 7).simulate(cfg.n_ticks - 1)
    vectorised = World(cfg, 7, method="numpy").simulate(cfg.n_ticks - 1)
    assert fast.edges.user.size > 10_000
    assert (fast.edges.source == 2).sum() > 500  # campaign edges, from two threads too
    assert _same_edges(fast, vectorised)
    assert np.array_equal(fast.push_counts(0, 500), vectorised.push_counts(0, 500))


@settings(max_examples=25)
@given(world_configs(), seeds, st.data())
def test_true_ctr_matches_scalar_formula_and_is_a_probability(cfg, seed, data):
    world = World(cfg, seed)
    users = np.arange(cfg.n_users)[:, None]
    items = np.arange(cfg.n_items)[None, :]
    t = data.draw(st.integers(0, cfg.n_ticks - 1))
    p = world.true_ctr(users, items, t)
    assert p.shape == (cfg.n_users, cfg.n_items)
    assert np.all((p >= 0) & (p <= 1))
    assert np.all(p[:, ~world.alive(t)] == 0)
    for u, i in [(0, 0), (cfg.n_users - 1, cfg.n_items - 1)]:
        assert p[u, i] == pytest.approx(world._p_scalar(u, i, t), abs=1e-12)


# -- invariants ----------------------------------------------------------------------------------
@settings(max_examples=30)
@given(world_configs(), seeds)
def test_profiles_only_grow_and_stay_binary(cfg, seed):
    world = World(cfg, seed)
    prev = None
    for t in range(cfg.n_ticks):
        x = world.profiles(t)
        assert isinstance(x, sp.csr_matrix) and x.shape == (cfg.n_users, cfg.n_items)
        assert np.all(x.data == 1)
        if prev is not None:
            assert (prev - prev.multiply(x)).nnz == 0
        prev = x
    e = world.edges
    assert np.all(np.diff(e.tick) >= 0)
    assert len(np.unique(e.user * cfg.n_items + e.item)) == len(e)


@settings(max_examples=30)
@given(world_configs(), seeds)
def test_no_adoption_outside_item_lifetime(cfg, seed):
    world = World(cfg, seed).simulate(cfg.n_ticks - 1)
    e = world.edges
    birth, death = cfg.birth_array(), cfg.death_array()
    assert np.all((birth[e.item] <= e.tick) & (e.tick < death[e.item]))


@settings(max_examples=30)
@given(world_configs(min_campaigns=1), seeds)
def test_campaign_edges_and_pushes_stay_in_window_and_list(cfg, seed):
    world = World(cfg, seed).simulate(cfg.n_ticks - 1)
    e = world.edges
    camp = e.source == 2
    in_some = np.zeros(camp.sum(), dtype=bool)
    for c in cfg.campaigns:
        in_some |= ((e.tick[camp] >= c.start) & (e.tick[camp] < c.end)
                    & np.isin(e.item[camp], c.items))
    assert in_some.all()
    pushes = world.push_counts(0, cfg.n_ticks - 1)
    listed = sorted({i for c in cfg.campaigns for i in c.items})
    assert pushes[np.setdiff1d(np.arange(cfg.n_items), listed)].sum() == 0
    assert np.all(pushes >= np.bincount(e.item[camp], minlength=cfg.n_items))


# -- marginals ---------------------------------------------------------------------------------
@settings(max_examples=30)
@given(world_configs(), seeds, st.data())
def test_item_marginal_sums_to_one_and_matches_naive(cfg, seed, data):
    world = World(cfg, seed)
    t = cfg.n_ticks - 1
    w = np.array(data.draw(st.lists(st.floats(0.01, 10.0), min_size=cfg.n_items,
                                    max_size=cfg.n_items)))
    if world.profiles(t).nnz == 0:
        with pytest.warns(RuntimeWarning, match="no user"):
            assert np.isnan(world.item_marginal(t)).all()
        return
    for weights in (None, w):
        m = world.item_marginal(t, weights)
        assert m.sum() == pytest.approx(1.0)
        assert np.all(m >= 0)
        np.testing.assert_allclose(m, world.item_marginal(t, weights, method="naive"), atol=1e-12)
    assert np.allclose(world.item_marginal(t, np.full(cfg.n_items, 3.0)), world.item_marginal(t))


def test_item_marginal_uses_configured_user_weights():
    base = dict(n_users=50, n_items=10, n_ticks=10, mean_profile_size=2.0)
    weights = tuple(float(u % 3) for u in range(50))
    a = World(WorldConfig(**base), 3)
    b = World(WorldConfig(**base, user_weights=weights), 3)
    x = a.profiles(9)
    assert (x != b.profiles(9)).nnz == 0  # weights change P(u), not the dynamics
    sizes = np.asarray(x.sum(axis=1)).ravel()
    wu = np.where(sizes > 0, np.array(weights), 0.0)
    expected = (x.multiply((wu / np.maximum(sizes, 1))[:, None])).sum(axis=0).A1 / wu.sum()
    np.testing.assert_allclose(b.item_marginal(9), expected, atol=1e-12)
    assert not np.allclose(a.item_marginal(9), b.item_marginal(9))


def test_item_marginal_rejects_bad_weights():
    world = World(WorldConfig(n_users=20, n_items=5, n_ticks=5, mean_profile_size=1.0), 0)
    with pytest.raises(ValueError, match="item_weights.*shape"):
        world.item_marginal(3, np.ones(4))
    with pytest.raises(ValueError, match=r"item_weights.*>= 0; got -1.0 at index 2"):
        world.item_marginal(3, np.array([1, 1, -1, 1, 1.0]))


# -- ground truth ------------------------------------------------------------------------------
def test_policy_value_is_exact_expected_clicks():
    cfg = WorldConfig(n_users=30, n_items=8, n_ticks=10, drift_rate=0.1, ctr_halflife=5.0)
    world = World(cfg, 5)
    slate = np.array([1, 4, 6])
    p = world.true_ctr(np.arange(30)[:, None], slate[None, :], 7)
    assert world.policy_value(7, slate) == pytest.approx(p.sum(axis=1).mean())
    per_user = np.stack([np.roll(slate, u) for u in range(30)])
    assert world.policy_value(7, per_user) == pytest.approx(p.sum(axis=1).mean())
    users = np.array([3, 5])
    fn = lambda us: np.tile(slate, (len(us), 1))  # noqa: E731
    assert world.policy_value(7, fn, users=users) == pytest.approx(p[users].sum(axis=1).mean())
    np.testing.assert_allclose(world.policy_value(7, slate, per_user=True), p.sum(axis=1))

    class Fixed:
        def recommend(self, users, k, *, removed=None):
            return np.tile(slate[:k], (len(users), 1))

    assert world.policy_value(7, Fixed(), k=2) == pytest.approx(p[:, :2].sum(axis=1).mean())
    with pytest.raises(ValueError, match="distinct"):
        world.policy_value(7, np.array([1, 1]))
    with pytest.raises(ValueError, match="`k`"):
        world.policy_value(7, Fixed())
    with pytest.raises(ValueError, match="slate"):
        world.policy_value(7, np.array([1, 8]))


def test_ctr_halflife_halves_probability():
    cfg = WorldConfig(n_users=5, n_items=4, n_ticks=30, ctr_halflife=10.0, n_universal=1,
                      mean_profile_size=1.0,
                      item_birth=(0, 5, 5, 0))
    world = World(cfg, 0)
    p5, p15 = world.true_ctr(np.arange(5), 1, 5), world.true_ctr(np.arange(5), 1, 15)
    np.testing.assert_allclose(p15, p5 / 2)
    assert np.all(world.true_ctr(np.arange(5), 1, 4) == 0)  # not born yet


def test_appeal_shock_raises_ctr_only_during_window():
    cfg = WorldConfig(n_users=5, n_items=4, n_ticks=30, n_universal=1, mean_profile_size=1.0,
                      shocks=(AppealShock(item=2, start=10, duration=5, delta=2.0),))
    world = World(cfg, 0)
    before, during, after = (world.true_ctr(np.arange(5), 2, t) for t in (9, 12, 15))
    assert np.all(during > before) and np.array_equal(before, after)
    assert world.item_appeal(12)[2] == pytest.approx(world.item_appeal(9)[2] + 2.0)


def test_taste_drift_is_a_random_walk_with_the_configured_rate():
    cfg = WorldConfig(n_users=3000, n_items=5, n_ticks=100, dim=4, drift_rate=0.1,
                      mean_profile_size=0.0)
    world = World(cfg, 0)
    x0, x50, x60 = world.user_taste(0), world.user_taste(50), world.user_taste(60)
    # KL expansion with 8 terms keeps ~98% of the variance of a Brownian motion at mid-horizon.
    var50 = np.var(x50 - x0)
    assert 0.9 * 0.01 * 50 < var50 < 1.1 * 0.01 * 50
    assert np.var(x60 - x50) < var50
    static = World(WorldConfig(n_users=10, n_items=5, n_ticks=100, mean_profile_size=1.0), 0)
    assert np.array_equal(static.user_taste(0), static.user_taste(99))


def test_policy_campaign_is_fitted_before_start_and_pushes_its_items():
    class TopTwo:
        def __init__(self):
            self.fitted_on = None

        def fit(self, profiles):
            self.fitted_on = profiles.copy()
            return self

        def recommend(self, users, k, *, removed=None):
            return np.tile(np.array([7, 8, 9])[:k], (len(users), 1))

    policy = TopTwo()
    cfg = WorldConfig(n_users=200, n_items=10, n_ticks=20, mean_profile_size=2.0,
                      campaigns=(CampaignConfig(start=10, duration=3, reach=1.0, policy=policy,
                                                k=2, boost=10.0),))
    world = World(cfg, 2)
    world.simulate(19)
    assert policy.fitted_on is None  # each world fits its own copy
    assert (world.campaign_policies[0].fitted_on != world.profiles(9)).nnz == 0
    e = world.edges
    assert set(e.item[e.source == 2]) <= {7, 8}
    pushes = world.push_counts(10, 12)
    assert pushes[[7, 8]].sum() > 0 and pushes.sum() == pushes[[7, 8]].sum()
    assert world.push_counts(0, 9).sum() == 0


def test_policy_returning_bad_slates_is_rejected():
    class Bad:
        def fit(self, profiles):
            return self

        def recommend(self, users, k, *, removed=None):
            return np.zeros((len(users), k + 1), dtype=np.int64)

    cfg = WorldConfig(n_users=20, n_items=10, n_ticks=5,
                      campaigns=(CampaignConfig(start=1, reach=1.0, policy=Bad(), k=2),))
    with pytest.raises(ValueError, match="policy.recommend.*shape"):
        World(cfg, 0).simulate(4)


# -- add_edges and bad input ---------------------------------------------------------------------
def test_add_edges_enter_profiles_with_their_source():
    cfg = WorldConfig(n_users=20, n_items=6, n_ticks=10, mean_profile_size=1.0,
                      item_birth=(0, 0, 0, 0, 0, 8))
    world = World(cfg, 1)
    held = world.profiles(3)
    u, i = held.nonzero()
    users = np.array([0, 0, 1] + ([u[0]] if u.size else []))
    items = np.array([2, 2, 3] + ([i[0]] if u.size else []))
    new = world.add_edges(users, items, 4)
    expected = np.array([not held[0, 2], False, not held[1, 3]] + ([False] if u.size else []))
    assert np.array_equal(new, expected)
    assert world.profiles(4)[0, 2] == 1 and world.profiles(4)[1, 3] == 1
    e = world.edges
    rec = e.source == 1
    assert set(zip(e.user[rec], e.item[rec], e.tick[rec], strict=True)) == {
        (int(a), int(b), 4) for a, b in zip(users[new], items[new], strict=True)}
    world.simulate(6)
    with pytest.raises(ValueError, match="tick.*>= the last simulated tick 6"):
        world.add_edges([0], [1], 5)
    with pytest.raises(ValueError, match="alive at tick 7.*item 5"):
        world.add_edges([0], [5], 7)
    with pytest.raises(ValueError, match="source"):
        world.add_edges([0], [1], 7, source="magic")


@pytest.mark.parametrize("call, exc, pattern", [
    pytest.param(lambda w: w.simulate(10), ValueError, r"`until` must be in \[0, 9\]; got 10",
                 id="simulate-beyond-horizon"),
    pytest.param(lambda w: w.profiles(-1), ValueError, "`t`", id="profiles-negative"),
    pytest.param(lambda w: w.profiles(2.0), TypeError, "`t` must be an int", id="profiles-float"),
    pytest.param(lambda w: w.true_ctr([0, 20], 0, 1), ValueError, r"`users`.*got 20 at index 1",
                 id="ctr-user-out-of-range"),
    pytest.param(lambda w: w.true_ctr(0, 0.5, 1), TypeError, "`items` must hold ints",
                 id="ctr-item-float"),
    pytest.param(lambda w: w.push_counts(5, 2), ValueError, "`t1` must be >= t0",
                 id="push-counts-reversed"),
    pytest.param(lambda w: w.uniforms(0, 0, 0, -1), ValueError, "`stream`",
                 id="uniforms-negative-stream"),
    pytest.param(lambda w: w.add_edges([0, 1], [0], 3), ValueError, "equal length",
                 id="add-edges-lengths"),
])
def test_bad_input_to_world_methods(call, exc, pattern):
    world = World(WorldConfig(n_users=20, n_items=5, n_ticks=10, mean_profile_size=1.0), 0)
    with pytest.raises(exc, match=pattern):
        call(world)


def test_bad_world_arguments():
    with pytest.raises(TypeError, match="config"):
        World({"n_users": 3}, 0)
    with pytest.raises(TypeError, match="seed"):
        World(WorldConfig(), "zero")
    with pytest.raises(ValueError, match="method"):
        World(WorldConfig(), 0, method="slow")
    with pytest.raises(ValueError, match="mean_profile_size"):
        World(WorldConfig(n_items=3, n_universal=0, mean_profile_size=3.0), 0)


# -- calibration of viadeo_like ------------------------------------------------------------------
def _campaign_shift(world, t0=300, t1=500):
    p0, p1 = world.item_marginal(t0), world.item_marginal(t1)
    pushes = world.push_counts(t0, t1)
    g1 = np.argsort(-pushes, kind="stable")[:5]
    never = np.flatnonzero(pushes == 0)
    g2 = never[np.argsort(-p0[never], kind="stable")[:5]]
    return p1[g1].sum() / p0[g1].sum() - 1, p1[g2].sum() / p0[g2].sum() - 1


@pytest.mark.slow
def test_viadeo_like_campaigns_shift_the_marginal_strongly():
    world = World(preset("viadeo_like", n_users=3000), 0)
    sizes = np.asarray(world.profiles(300).sum(axis=1)).ravel()
    assert 4.5 < sizes.mean() < 7.0
    # heavy tail: the largest profiles are many times the mean
    assert sizes.max() > 5 * sizes.mean()
    up, down = _campaign_shift(world)
    assert up >= 0.25
    assert down <= -0.25
    # without campaigns the same groups barely move
    twin = world.without_campaigns()
    q0, q1 = twin.item_marginal(300), twin.item_marginal(500)
    pushes = world.push_counts(300, 500)
    never = np.flatnonzero(pushes == 0)
    g2 = never[np.argsort(-q0[never], kind="stable")[:5]]
    assert abs(q1[g2].sum() / q0[g2].sum() - 1) < 0.1


# -- exposure sampling ---------------------------------------------------------------------------
@given(st.lists(st.floats(0.0, 10.0), min_size=1, max_size=30).filter(lambda v: sum(v) > 0))
def test_alias_table_reproduces_the_distribution_exactly(weights):
    from simulator._world import _alias_table
    p = np.array(weights) / sum(weights)
    prob, alias = _alias_table(p.copy())
    n = p.size
    implied = np.bincount(np.arange(n), weights=prob / n, minlength=n)
    implied += np.bincount(alias, weights=(1 - prob) / n, minlength=n)
    np.testing.assert_allclose(implied, p, atol=1e-12)


@pytest.mark.slow
def test_exposure_events_follow_activity_and_exposure_laws():
    from scipy import stats
    cfg = WorldConfig(n_users=6, n_items=5, n_ticks=200, mean_profile_size=3.0, n_universal=1,
                      activity_halflife=50.0)
    world = World(cfg, 4)
    users, items, ticks = [], [], []
    for t in range(cfg.n_ticks):
        u, i, _ = world._draw_events(t)
        users.append(u)
        items.append(i)
        ticks.append(np.full(u.size, t))
    users, items, ticks = (np.concatenate(a) for a in (users, items, ticks))
    lam = world._lam / world._lam.sum()
    q = world._exposure(0) / world._exposure(0).sum()
    for obs, p in ((users, lam), (items, q)):
        counts = np.bincount(obs, minlength=p.size)
        assert stats.chisquare(counts, p * counts.sum()).pvalue > 1e-4
    # the number of events per tick follows the time profile
    per_tick = np.bincount(ticks, minlength=cfg.n_ticks)
    early, late = per_tick[:50].sum(), per_tick[150:].sum()
    assert early > 4 * late


def test_scaling_the_user_count_keeps_the_items():
    small = World(preset("viadeo_like", n_users=100), 3)
    large = World(preset("viadeo_like", n_users=300), 3)
    assert np.array_equal(small.item_features, large.item_features)
    assert np.array_equal(small.item_appeal(0), large.item_appeal(0))


@given(st.lists(st.floats(0.0, 100.0), min_size=1, max_size=40).filter(lambda v: sum(v) > 0),
       st.integers(1, 200), st.lists(st.floats(0.0, 1.0, exclude_max=True), max_size=50))
def test_guided_search_equals_searchsorted(weights, n_buckets, keys):
    from simulator._world import _guided_search
    cdf = np.cumsum(weights) / sum(weights)
    guide = np.searchsorted(cdf, np.arange(n_buckets + 1) / n_buckets, side="right")
    keys = np.sort(np.array(keys + [0.0, cdf[0], cdf[-1] * 0.999999, 1.0]))
    assert np.array_equal(_guided_search(np.append(cdf, 2.0), guide, keys),
                          np.searchsorted(cdf, keys, side="right"))


@pytest.mark.slow
@pytest.mark.parametrize("extra", [
    pytest.param({}, id="static"),
    pytest.param(dict(ctr_halflife=10.0, activity_halflife=20.0), id="decay-and-launch"),
    pytest.param(dict(n_items=40, item_birth=tuple(range(40)), item_death=tuple(range(10, 50))),
                 id="short-lifetimes"),
])
def test_calibrated_rate_gives_the_configured_mean_profile_size(extra):
    cfg = WorldConfig(**{**dict(n_users=2000, n_items=50, n_ticks=60, mean_profile_size=4.0),
                         **extra})
    world = World(cfg, 11).simulate(59)
    organic = np.count_nonzero(world.edges.source == 0) / cfg.n_users
    assert organic == pytest.approx(4.0, rel=0.08)


# -- sessions, history, ratings ---------------------------------------------------------------
LAW = SessionLaw(count_mu=0.5, count_sigma=1.2, gap_mu=1.2, gap_sigma=0.8, later_weight=0.4)


@settings(max_examples=12)
@given(world_configs(), seeds)
def test_sessions_every_method_the_same_edges_on_session_ticks_only(cfg, seed):
    cfg = dataclasses.replace(cfg, sessions=LAW)
    fast = World(cfg, seed).simulate(cfg.n_ticks - 1)
    naive = World(cfg, seed, method="naive").simulate(cfg.n_ticks - 1)
    vectorised = World(cfg, seed, method="numpy").simulate(cfg.n_ticks - 1)
    assert _same_edges(fast, naive) and _same_edges(vectorised, naive)
    s = fast.sessions
    assert s is not None and np.array_equal(s.tick, naive.sessions.tick)
    organic = fast.edges.source == 0
    on = set(zip(s.user.tolist(), s.tick.tolist(), strict=True))
    assert {(u, t) for u, t in zip(fast.edges.user[organic].tolist(),
                                   fast.edges.tick[organic].tolist(), strict=True)} <= on
    # a campaign reaches only users who have arrived
    first = np.full(cfg.n_users, cfg.n_ticks)
    np.minimum.at(first, s.user, s.tick)
    camp = fast.edges.source == 2
    assert np.all(first[fast.edges.user[camp]] <= fast.edges.tick[camp])
    # the twin meets the same sessions
    twin = fast.without_campaigns()
    assert np.array_equal(twin.sessions.user, s.user)


def test_a_given_schedule_brings_each_user_its_expected_events():
    """Every user has one session (tick 3), activity 3 and p = 1 on 2,000 items: profile
    sizes are Poisson(3) events less the rare repeats of an item."""
    n = 4000
    sched = SessionSchedule(user=np.arange(n), tick=np.full(n, 3), weight=np.ones(n),
                            n_users=n, n_ticks=5)
    fa = FittedArrays(appeal=np.full(2000, 5.0), features=np.zeros((2000, 1)),
                      taste=np.zeros((n, 1)), activity=np.full(n, 3.0))
    cfg = WorldConfig(n_users=n, n_items=2000, n_ticks=5, dim=1, n_universal=0,
                      click_model="linear", fitted=fa, sessions=sched)
    e = World(cfg, 0).simulate(4).edges
    assert np.all(e.tick == 3)
    sizes = np.bincount(e.user, minlength=n)
    assert sizes.mean() == pytest.approx(3.0 * (1 - 3.0 / 4000), abs=4 * np.sqrt(3 / n))
    assert sizes.var() == pytest.approx(3.0, rel=0.15)


def test_a_world_continues_from_its_history():
    cfg = WorldConfig(n_users=200, n_items=20, n_ticks=30, dim=2, mean_profile_size=6.0,
                      n_universal=0, appeal_mean=-1.5)
    full = World(cfg, 1).simulate(29).edges
    past = full.tick < 15
    history = InteractionLog(user=full.user[past], item=full.item[past], tick=full.tick[past],
                             source=full.source[past], n_users=200, n_items=20,
                             rating=np.arange(past.sum(), dtype=float))
    w = World(cfg, 2, history=history, start=15)
    assert w.simulated_until == 14
    assert w.profiles(14).nnz == past.sum()
    e = w.simulate(29).edges
    n = int(past.sum())
    assert np.array_equal(e.user[:n], history.user) and np.all(e.tick[n:] >= 15)
    assert e.rating is None  # no rating model: no ratings, even with rated history
    held = set(zip(history.user.tolist(), history.item.tolist(), strict=True))
    assert not held & set(zip(e.user[n:].tolist(), e.item[n:].tolist(), strict=True))
    assert _same_edges(w.without_campaigns().simulate(29), w)
    with pytest.raises(ValueError, match="`history` must end before `start` = 10"):
        World(cfg, 0, history=history, start=10)


def _rated_config():
    rng = np.random.default_rng(0)
    n_users, n_items = 120, 15
    model = RatingModel(levels=[1.0, 2.0, 3.0], bounds=[1.5, 2.5], thresholds=[-0.5, 0.8],
                        slope=1.5, user_offset=rng.normal(0, 0.5, n_users),
                        item_offset=rng.normal(0, 0.5, n_items))
    fa = FittedArrays(appeal=rng.normal(-1, 0.5, n_items), features=rng.normal(0, 1, (n_items, 2)),
                      taste=rng.normal(0, 1, (n_users, 2)), activity=np.full(n_users, 6.0),
                      ratings=model)
    return WorldConfig(n_users=n_users, n_items=n_items, n_ticks=20, dim=2, n_universal=0,
                       fitted=fa, campaigns=(CampaignConfig(start=5, duration=3, reach=0.5,
                                                            items=(0, 1), k=2),))


def test_ratings_of_the_edges_are_the_model_drawn_with_keyed_uniforms():
    cfg = _rated_config()
    world = World(cfg, 4).simulate(19)
    e = world.edges
    assert e.rating is not None and set(np.unique(e.rating)) <= {1.0, 2.0, 3.0}
    m = cfg.fitted.ratings
    score = (cfg.fitted.taste[e.user] * cfg.fitted.features[e.item]).sum(axis=1)
    eta = m.slope * score + m.user_offset[e.user] + m.item_offset[e.item]
    key = seed_key(world._entropy, WORLD_STREAMS["rating"])
    assert np.array_equal(e.rating, m.draw(eta, hash_uniforms(key, e.user, e.item, e.tick)))
    # the twin rates the edges it shares with the world alike
    t = world.without_campaigns().simulate(19).edges
    both = {(u, i, k): r for u, i, k, r in zip(t.user, t.item, t.tick, t.rating, strict=True)}
    shared = [(r, both[(u, i, k)]) for u, i, k, r in zip(e.user, e.item, e.tick, e.rating,
                                                           strict=True) if (u, i, k) in both]
    assert len(shared) > 100 and all(a == b for a, b in shared)
    # without a rating model: no ratings
    plain = dataclasses.replace(cfg, fitted=dataclasses.replace(cfg.fitted, ratings=None))
    assert World(plain, 4).simulate(19).edges.rating is None
