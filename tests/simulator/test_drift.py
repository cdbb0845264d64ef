"""Worlds that drift the way a log does (issue 35): the World's pinned random walk and OU
process, items' appeal paths, the drift and life-cycle fits, the noise bands."""

import hashlib
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import expit

import simulator
from simulator import CampaignConfig, FittedArrays, SessionLaw, World, WorldConfig
from simulator._calibrate import _level_shift
from simulator._drift import adoption_rate_ratio, drift_moments
from simulator._world import _ou_basis

# --------------------------------------------------------------------------- presets


def _digest(cfg, seed):
    w = World(cfg, seed=seed)
    w.simulate(cfg.n_ticks - 1)
    h = hashlib.sha256()
    for a in (w.edges.user, w.edges.item, w.edges.tick, w.edges.source):
        h.update(np.ascontiguousarray(a).tobytes())
    twin = w.without_campaigns().simulate(cfg.n_ticks - 1)
    for a in (twin.edges.user, twin.edges.item):
        h.update(np.ascontiguousarray(a).tobytes())
    h.update(np.asarray(w.true_ctr(np.arange(5), np.arange(5), cfg.n_ticks - 1)).tobytes())
    return h.hexdigest()


def test_presets_keep_their_bytes():
    # the digest of main at 9ad3b5a (before drifting worlds): a preset's world, its twin and
    # its truth are the same bytes (viadeo_like drifts by the random walk and has campaigns)
    cfg = simulator.preset("viadeo_like", n_users=100)
    assert _digest(cfg, 7) == "63d46c131935b98af80dc03e390ef62b28122ce74a195bb0d2c7f9bd73982361"


# --------------------------------------------------------------------------- the World


def _fitted_world(*, theta=None, offsets=True, n_users=60, n_items=25, n_ticks=40, seed=0,
                  campaigns=()):
    rng = np.random.default_rng(seed)
    edges = np.array([0, 10, 25])
    fitted = FittedArrays(
        appeal=rng.normal(-2, 1, n_items), features=rng.normal(0, 1, (n_items, 3)),
        taste=rng.normal(0, 1, (n_users, 3)), activity=rng.uniform(5, 40, n_users),
        arrival=rng.integers(0, n_ticks // 2, n_users),
        taste_origin=rng.integers(0, n_ticks, n_users),
        appeal_offset=rng.normal(0, 0.7, (3, n_items)) if offsets else None,
        appeal_edges=edges if offsets else None)
    law = SessionLaw(count_mu=1.0, count_sigma=0.8, gap_mu=1.0, gap_sigma=0.7,
                     later_weight=0.4)
    return WorldConfig(n_users=n_users, n_items=n_items, n_ticks=n_ticks, dim=3,
                       n_universal=0, drift_rate=0.3, drift_theta=theta,
                       drift_terms=16, fitted=fitted, sessions=law, campaigns=campaigns)


@pytest.mark.parametrize("theta", [None, 0.05], ids=["random-walk", "ou"])
def test_a_drifting_world_is_the_same_by_every_method_and_its_twin_too(theta):
    camp = (CampaignConfig(start=20, duration=5, reach=0.6, items=(0, 1, 2), boost=3.0),)
    cfg = _fitted_world(theta=theta, campaigns=camp)
    worlds = [World(cfg, 3, method=m).simulate(cfg.n_ticks - 1)
              for m in ("fast", "numpy", "naive")]
    e = [(w.edges.user.tolist(), w.edges.item.tolist(), w.edges.tick.tolist())
         for w in worlds]
    assert e[0] == e[1] == e[2] and len(e[0][0]) > 50
    assert (worlds[0].edges.source == 2).any()  # the campaign made adoptions
    # the twin without campaigns shares the world's drift: without campaigns, the same edges
    plain = World(dataclasses_replace(cfg, campaigns=()), 3).simulate(cfg.n_ticks - 1)
    twin = worlds[0].without_campaigns().simulate(cfg.n_ticks - 1)
    assert np.array_equal(twin.edges.item, plain.edges.item)


def dataclasses_replace(cfg, **kw):
    import dataclasses

    return dataclasses.replace(cfg, **kw)


@pytest.mark.parametrize("theta", [None, 0.05], ids=["random-walk", "ou"])
def test_a_fitted_taste_is_the_users_at_its_origin_and_true_ctr_reads_the_drift(theta):
    cfg = _fitted_world(theta=theta)
    w = World(cfg, 5)
    fa = cfg.fitted
    for u in range(0, cfg.n_users, 7):
        o = int(fa.taste_origin[u])
        assert np.allclose(w.user_taste(o)[u], fa.taste[u], atol=1e-12)
    # p(u, i, t) = expit(a_i + offset_{bin(t), i} + x_u(t) . f_i) (no decay here)
    u, i, t = 4, 7, 33
    b = int(np.searchsorted(fa.appeal_edges, t, side="right") - 1)
    score = fa.appeal[i] + fa.appeal_offset[b, i] + w.user_taste(t)[u] @ fa.features[i]
    assert w.true_ctr(u, i, t) == pytest.approx(expit(score), rel=1e-12)
    assert w._p_scalar(u, i, t) == pytest.approx(expit(score), rel=1e-12)
    assert np.allclose(w.item_appeal(t), fa.appeal + fa.appeal_offset[b])


def test_the_ou_drift_has_its_law_over_users():
    """Given x(o) = x_u, x(t) ~ N(rho x_u, s^2 (1 - rho^2)), rho = exp(-theta |t - o|): the
    mean over many users of x(t) - rho x_u is 0 and its variance s^2 (1 - rho^2)."""
    n, theta, s = 4000, 0.05, 0.8
    rng = np.random.default_rng(1)
    fitted = FittedArrays(appeal=np.zeros(3), features=np.eye(3), taste=rng.normal(0, 1, (n, 3)),
                          activity=np.ones(n), taste_origin=np.full(n, 10))
    cfg = WorldConfig(n_users=n, n_items=3, n_ticks=80, dim=3, n_universal=0, drift_rate=s,
                      drift_theta=theta, drift_terms=64, fitted=fitted)
    w = World(cfg, 2)
    for t in (10, 20, 40, 79):
        rho = math.exp(-theta * abs(t - 10))
        dev = w.user_taste(t) - rho * fitted.taste
        assert abs(dev.mean()) < 4 * s / math.sqrt(3 * n) + 1e-12
        assert dev.var() == pytest.approx(s * s * (1 - rho * rho), rel=0.1, abs=1e-12)


def test_the_ou_basis_has_unit_variance_and_its_correlation():
    t = np.arange(300)
    b = _ou_basis(t, 0.02, 128)  # calibrate's 64 frequencies
    assert np.allclose((b * b).sum(axis=1), 1.0)
    corr = b @ b[0]
    near = t <= 3 / 0.02  # within three mean-reversion times: the quadrature is close
    assert np.allclose(corr[near], np.exp(-0.02 * t[near]), atol=0.06)
    assert np.allclose(corr, np.exp(-0.02 * t), atol=0.08)


def test_fitted_arrays_refuse_inconsistent_drift_fields():
    base = dict(appeal=np.zeros(2), features=np.zeros((2, 1)), taste=np.zeros((3, 1)),
                activity=np.ones(3))
    with pytest.raises(ValueError, match="given together"):
        FittedArrays(**base, appeal_offset=np.zeros((1, 2)))
    with pytest.raises(ValueError, match="increase strictly from 0"):
        FittedArrays(**base, appeal_offset=np.zeros((2, 2)), appeal_edges=[0, 0])
    with pytest.raises(ValueError, match=r"shape \(len\(appeal_edges\), n_items\)"):
        FittedArrays(**base, appeal_offset=np.zeros((2, 3)), appeal_edges=[0, 4])
    with pytest.raises(ValueError, match="taste_origin` must be >= 0"):
        FittedArrays(**base, taste_origin=[0, -1, 2])
    fitted = FittedArrays(**base, taste_origin=[0, 1, 9])
    with pytest.raises(ValueError, match=r"fitted.taste_origin` must be ticks in \[0, 4\]"):
        WorldConfig(n_users=3, n_items=2, n_ticks=5, dim=1, n_universal=0, fitted=fitted)


# --------------------------------------------------------------------------- the fits


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(0.01, 0.99), st.floats(-8, 8), st.floats(0.05, 6))
def test_the_level_shift_is_the_bisection_reference(seed, ctr, mean, sd):
    s = np.random.default_rng(seed).normal(mean, sd, 200)
    lo, hi = -50.0, 50.0  # the reference: bisection to 1e-12
    while hi - lo > 1e-12:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if expit(s + mid).mean() < ctr else (lo, mid)
    fast = _level_shift(s, ctr)
    assert fast == pytest.approx(0.5 * (lo + hi), abs=1e-8)
    assert expit(s + fast).mean() == pytest.approx(ctr, abs=1e-10)


def test_the_adoption_rate_ratio_against_monte_carlo():
    cfg = _fitted_world(theta=None, offsets=False)
    fa = cfg.fitted
    users, ticks = np.arange(10), np.full(10, 35)
    ratio = adoption_rate_ratio(cfg, users, ticks, fa.taste_origin)
    scale, var = drift_moments(cfg, np.abs(ticks - fa.taste_origin[users]))
    rng = np.random.default_rng(0)
    q = np.exp(cfg.exposure * (fa.appeal - fa.appeal.max()))
    for j, u in enumerate(users):
        x = scale[j] * fa.taste[u] + math.sqrt(var[j]) * rng.standard_normal((20000, 3))
        drift = (q * expit(fa.appeal + x @ fa.features.T)).sum(axis=1).mean()
        static = (q * expit(fa.appeal + fa.taste[u] @ fa.features.T)).sum()
        assert ratio[j] == pytest.approx(static / drift, rel=0.06)  # the probit approximation
    static = dataclasses_replace(cfg, drift_rate=0.0)
    assert np.all(adoption_rate_ratio(static, users, ticks, fa.taste_origin) == 1.0)


def test_life_cycles_find_an_item_that_rises_and_one_that_fades():
    """A world whose item 0 gains appeal in the second half and item 1 loses it: the fitted
    offsets of the static world's log follow (higher late than early for 0, lower for 1)."""
    n_users, n_items, n_ticks = 400, 12, 112
    rng = np.random.default_rng(0)
    truth = FittedArrays(appeal=np.full(n_items, -1.5), features=rng.normal(0, 0.3, (n_items, 2)),
                         taste=rng.normal(0, 0.3, (n_users, 2)), activity=np.full(n_users, 12.0),
                         appeal_offset=np.array([[-0.8, 0.8] + [0.0] * 10,
                                                 [0.8, -0.8] + [0.0] * 10]),
                         appeal_edges=np.array([0, 56]))
    cfg = WorldConfig(n_users=n_users, n_items=n_items, n_ticks=n_ticks, dim=2, n_universal=0,
                      fitted=truth)
    e = World(cfg, 0).simulate(n_ticks - 1).edges
    cal = simulator.calibrate((e.user, e.item, None, e.tick), n_factors=1, seconds_per_tick=1,
                              sessions=False, rng=0)
    lc = cal.config.fitted.appeal_offset
    assert lc is not None and cal.info.appeal_bins == lc.shape[0] == 4
    early, late = lc[:2].mean(axis=0), lc[2:].mean(axis=0)
    i0, i1 = (int(np.flatnonzero(cal.item_ids == j)[0]) for j in (0, 1))
    assert late[i0] - early[i0] > 0.5 and early[i1] - late[i1] > 0.5
    others = np.setdiff1d(np.arange(cal.n_items), [i0, i1])
    assert np.abs(late[others] - early[others]).max() < 0.5
    assert 0.0 <= cal.info.appeal_persistence <= 1.0


@pytest.mark.slow
def test_a_static_world_is_not_given_a_drift_and_a_drifting_one_is():
    """The inner split's choice: logs drawn with static tastes stay static (two seeds: the
    fitted tastes' own error goes to the null's shrinkage and v0, not to a drift); one drawn
    from tastes replaced over ~33 ticks (an OU process, theta 0.03) gets a drift (about
    1,700 held-out adoptions; the random walk and the OU process score within 0.001 nats of
    each other there, so the test asks for a drift, not for which one)."""
    law = SessionLaw(count_mu=2.0, count_sigma=0.4, gap_mu=1.8, gap_sigma=0.5, later_weight=1.0)
    rng = np.random.default_rng(2)
    n_users, n_items, n_ticks = 600, 60, 120
    fitted = dict(appeal=rng.normal(-2.5, 0.5, n_items), features=rng.normal(0, 1.2, (n_items, 3)),
                  taste=rng.normal(0, 1.2, (n_users, 3)), activity=np.full(n_users, 150.0),
                  arrival=rng.integers(0, 90, n_users))

    def fit(theta, seed):
        cfg = WorldConfig(n_users=n_users, n_items=n_items, n_ticks=n_ticks, dim=3,
                          n_universal=0, fitted=FittedArrays(**fitted), sessions=law,
                          drift_rate=0.0 if theta is None else 1.2, drift_theta=theta,
                          drift_terms=32)
        e = World(cfg, seed).simulate(n_ticks - 1).edges
        return simulator.calibrate((e.user, e.item, None, e.tick), n_factors=3,
                                   seconds_per_tick=1, ratings=False, rng=0).info

    for seed in (1, 2):
        static = fit(None, seed)
        assert static.drift_model == "static" and "no drift beats" in static.drift_note
        assert static.drift_n_heldout > 1000
    drifting = fit(0.03, 1)
    assert drifting.drift_model in ("random_walk", "ou")
    best = max(drifting.drift_ll_random_walk, drifting.drift_ll_ou)
    assert best > drifting.drift_ll_static > drifting.drift_ll_exact
    assert 2 * drifting.drift_n_heldout * (best - drifting.drift_ll_static) > 3.84


# --------------------------------------------------------------------------- noise bands


def _log(n_users, sizes_scale, seed):
    rng = np.random.default_rng(seed)
    u, i, t = [], [], []
    for user in range(n_users):
        k = int(rng.integers(2, 12) * sizes_scale)
        items = rng.choice(80, min(k, 80), replace=False, p=np.r_[np.full(20, 0.03),
                                                                    np.full(60, 0.4 / 60)])
        u += [user] * items.size
        i += items.tolist()
        t += rng.integers(0, 30, items.size).tolist()
    return simulator.InteractionLog(user=np.array(u), item=np.array(i), tick=np.array(t),
                                    source=np.zeros(len(u), np.int8), n_users=n_users,
                                    n_items=80, rating=rng.integers(1, 6, len(u)).astype(float))


def test_noise_bands_put_a_log_within_its_own_noise_and_a_different_one_outside():
    real = _log(300, 1, 0)
    same_law = _log(300, 1, 1)
    bands = simulator.noise_bands(real, same_law, n_splits=20, n_pairs=500, rng=0)
    assert bands.faithful and all(b.verdict == "within" for b in bands.bands)
    bigger = simulator.noise_bands(real, _log(300, 3, 2), n_splits=20, n_pairs=500, rng=0)
    assert bigger["profile_size"].verdict == "outside" and not bigger.faithful
    b = bigger["profile_size"]
    assert b.world > b.real_high and b.real_low <= b.real <= b.real_high
    assert bands.bands[0].n_splits == 20 and "within" in bands.to_text()
    again = simulator.noise_bands(real, same_law, n_splits=20, n_pairs=500, rng=0)
    assert again == bands
