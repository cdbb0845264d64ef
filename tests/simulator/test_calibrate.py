"""simulator.calibrate: recovery of a known world, bad input, save/load, use like a preset."""

import dataclasses
import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import simulator
from simulator import CalibratedWorld, CalibrationWarning, World, WorldConfig, _calibrate, calibrate
from simulator.logs import LogFormatError


def _known_world(n_users, n_items, dim, size, taste, seed):
    config = WorldConfig(n_users=n_users, n_items=n_items, n_ticks=30, dim=dim,
                         mean_profile_size=size, n_universal=0, appeal_mean=-2.0,
                         appeal_std=0.75, taste_scale=taste)
    return World(config, seed=seed)


def _same_world(world: World) -> WorldConfig:
    """The known world's drawn arrays as a fitted config: other seeds then give fresh logs of
    the *same* world (a drawn world's seed also draws its users and items)."""
    fa = simulator.FittedArrays(appeal=world._appeal, features=world._features,
                                taste=world._taste0,
                                activity=world._rate * world._lam / world._lam.sum())
    return dataclasses.replace(world.config, fitted=fa)


def _stats(m):
    m = sp.csr_array(m)
    pop = np.bincount(m.indices, minlength=m.shape[1])
    size = np.diff(m.indptr)
    return pop, size


# --------------------------------------------------------------------------- recovery
@settings(max_examples=6)
@given(n_users=st.integers(150, 300), n_items=st.integers(20, 40), dim=st.integers(1, 3),
       size=st.floats(4.0, 8.0), taste=st.floats(0.5, 2.0), seed=st.integers(0, 2**31))
def test_calibrated_world_recovers_the_known_worlds_statistics(n_users, n_items, dim, size,
                                                                taste, seed):
    """A world calibrated from one log of a known world reproduces that world's statistics
    about as well as the log itself does: against the known world's (fresh logs, 3 seeds),
    the calibrated world's number of interactions is within the log's own deviation + 6%,
    its item popularities correlate within 0.1 of the log's correlation (and >= 0.7), the
    KS distances of popularity and profile size exceed the log's by <= 0.15, and the mean
    Jaccard overlap of user pairs is within the log's deviation + 15%. (The fit reproduces
    the log it saw, sampling noise included; users and items without any interaction are
    dropped, so statistics are compared on the kept ones.)"""
    truth = _known_world(n_users, n_items, dim, size, taste, seed)
    t_end = truth.config.n_ticks - 1
    full = truth.profiles(t_end)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)
        cal = calibrate(full, n_factors=dim, n_ticks=truth.config.n_ticks, rng=seed)
    assert cal.config.fitted is not None and cal.config.dim == dim
    # the fit reproduces its own data's totals in expectation (score equations, up to ridge)
    assert cal.expected_profile_sizes().sum() == pytest.approx(full.nnz, rel=0.05)

    users, items = cal.user_ids, cal.item_ids
    observed = full[users][:, items]
    same = _same_world(truth)
    truth_logs = [World(same, seed=seed + j).profiles(t_end)[users][:, items]
                  for j in (1, 2, 3)]
    sim_logs = [cal.world(seed + j).profiles(t_end) for j in (1, 2, 3)]
    pop_t = np.mean([_stats(m)[0] for m in truth_logs], axis=0)
    pop_s = np.mean([_stats(m)[0] for m in sim_logs], axis=0)
    pop_o = _stats(observed)[0]
    n_t = np.mean([m.nnz for m in truth_logs])
    n_s = np.mean([m.nnz for m in sim_logs])
    assert abs(n_s - n_t) <= abs(observed.nnz - n_t) + 0.06 * n_t
    if pop_t.std() > 0 and pop_s.std() > 0 and pop_o.std() > 0:
        corr_s = np.corrcoef(pop_t, pop_s)[0, 1]
        assert corr_s >= min(0.7, np.corrcoef(pop_t, pop_o)[0, 1] - 0.1)
    rep = simulator.fidelity(truth_logs[0], sim_logs[0], rng=0)
    base = simulator.fidelity(truth_logs[0], observed, rng=0)
    for name in ("item_popularity", "profile_size"):
        assert rep[name].ks <= base[name].ks + 0.15
    ov_t = rep["profile_overlap"].real_mean
    assert abs(rep["profile_overlap"].simulated_mean - ov_t) <= abs(
        base["profile_overlap"].simulated_mean - ov_t) + 0.15 * ov_t


def test_a_fitted_config_of_a_drawn_worlds_arrays_reproduces_that_world():
    """FittedArrays carry a world exactly: the drawn world's own arrays and rate, given as a
    fitted config with the same seed, give the same edges."""
    truth = _known_world(120, 20, 2, 5.0, 1.0, 9)
    copy = World(_same_world(truth), seed=9)
    np.testing.assert_array_equal(copy.profiles(29).toarray(), truth.profiles(29).toarray())
    np.testing.assert_allclose(copy.true_ctr([0, 5], [3, 4], 7), truth.true_ctr([0, 5], [3, 4], 7))


def test_the_fit_of_a_world_it_can_represent_beats_the_marginals_only_fit():
    """Tastes matter: with strong tastes, n_factors = dim fits better than n_factors = 0 and
    its simulated profiles overlap like the real ones (the marginals-only world does not)."""
    truth = _known_world(400, 40, 2, 8.0, 3.0, 5)
    observed = truth.profiles(29)
    full = calibrate(observed, n_factors=2, n_ticks=30, rng=0)
    flat = calibrate(observed, n_factors=0, n_ticks=30, rng=0)
    assert full.info.log_likelihood > flat.info.log_likelihood + 0.01
    over = {}
    for name, cal in (("full", full), ("flat", flat)):
        over[name] = simulator.fidelity(observed, cal.world(1).profiles(29),
                                        rng=0)["profile_overlap"]
    assert over["full"].ks < over["flat"].ks
    assert over["full"].ks <= 0.1


def test_ctr_sets_the_mean_adoption_probability_of_the_observed_pairs():
    truth = _known_world(200, 30, 2, 6.0, 1.0, 3)
    observed = truth.profiles(29)
    for ctr in (0.1, 0.5):
        cal = calibrate(observed, n_factors=2, ctr=ctr, rng=0)
        w = cal.world(0)
        o = cal.observed
        p = w.true_ctr(o.user, o.item, 0)
        assert p.mean() == pytest.approx(ctr, abs=1e-6)


def test_same_rng_same_world_and_hash():
    truth = _known_world(150, 25, 2, 5.0, 1.0, 2)
    observed = truth.profiles(29)
    a, b = calibrate(observed, n_factors=2, rng=7), calibrate(observed, n_factors=2, rng=7)
    assert a.sha256 == b.sha256
    np.testing.assert_array_equal(a.config.fitted.taste, b.config.fitted.taste)


def test_time_effects_are_estimated_from_timestamps():
    """Ticks drawn from a decaying activity profile give back its half-life (within 25%);
    uniform ticks give none; item births are the first interactions."""
    rng = np.random.default_rng(0)
    n, T, half = 20_000, 200, 50.0
    beta = math.log(2) / half
    w = np.exp(-beta * np.arange(T))
    ticks = rng.choice(T, n, p=w / w.sum())
    items = rng.integers(0, 100, n)
    birth, act, ctr_half = _calibrate._time_effects(ticks, items, T, 100)
    assert act == pytest.approx(half, rel=0.25)
    assert ctr_half is None  # the ages decline only as the activity does
    np.testing.assert_array_equal(birth, [ticks[items == i].min() for i in range(100)])
    _, act, _ = _calibrate._time_effects(rng.integers(0, T, n), items, T, 100)
    assert act is None


def test_a_log_with_timestamps_gives_a_world_with_their_horizon_and_births():
    users = np.array([0, 0, 1, 1, 2, 2, 3, 3, 4, 4])
    items = np.array([0, 1, 1, 2, 0, 2, 1, 3, 3, 0])
    day = 86400
    times = 1_000_000 + day * np.array([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    cal = calibrate((users, items, None, times), n_factors=1, rng=0)
    assert cal.config.n_ticks == 10
    assert cal.config.item_birth == (0, 1, 3, 7)
    assert cal.observed.tick.tolist() == sorted(cal.observed.tick.tolist())
    cal2 = calibrate((users, items, None, times), n_factors=1, seconds_per_tick=2 * day,
                     rng=0)
    assert cal2.config.n_ticks == 5


# --------------------------------------------------------------------------- like a preset
def test_a_calibrated_world_runs_campaigns_twin_and_truth_like_a_preset():
    truth = _known_world(300, 30, 2, 6.0, 1.0, 4)
    cal = calibrate(truth.profiles(29), n_factors=2, n_ticks=30, rng=0)
    top = tuple(int(i) for i in np.argsort(-np.bincount(cal.observed.item, minlength=30))[:5])
    config = cal.with_campaigns([simulator.CampaignConfig(start=15, duration=5, reach=0.5,
                                                          items=top, boost=5.0)])
    world = World(config, seed=3)
    twin = world.without_campaigns()
    plain = cal.world(3)
    # the twin is the calibrated world without campaigns, edge for edge
    e_twin, e_plain = twin.edges, plain.edges
    twin.simulate(29), plain.simulate(29)
    np.testing.assert_array_equal(twin.edges.user, plain.edges.user)
    np.testing.assert_array_equal(twin.edges.item, plain.edges.item)
    del e_twin, e_plain
    assert world.push_counts(15, 19)[list(top)].sum() > 0
    assert (world.edges.source == simulator.SOURCES.index("campaign")).any()
    m = world.item_marginal(29)
    assert m.sum() == pytest.approx(1.0)
    assert m[list(top)].sum() > twin.item_marginal(29)[list(top)].sum()
    p = world.true_ctr([0, 1], [top[0], top[1]], 20)
    assert np.all((p > 0) & (p < 1))
    # every method of the World gives the same edges on a calibrated world
    for method in ("numpy", "naive"):
        other = World(config, seed=3, method=method)
        other.simulate(29)
        np.testing.assert_array_equal(other.edges.item, world.edges.item)


def test_campaign_bias_runs_unchanged_on_a_calibrated_world():
    from recloop.experiments import campaign_bias

    truth = _known_world(300, 30, 2, 6.0, 1.0, 4)
    cal = calibrate(truth.profiles(29), n_factors=2, n_ticks=30, rng=0)
    top = tuple(int(i) for i in np.argsort(-np.bincount(cal.observed.item, minlength=30))[:5])
    config = cal.with_campaigns([simulator.CampaignConfig(start=15, duration=5, reach=0.7,
                                                          items=top, boost=5.0)])
    rows = campaign_bias(config, recommenders={"g1": "constant_agreeing",
                                               "cf": "user_cosine_cf"},
                         ticks=[14, 29], p_values=(0, None), n_samples=None, rng=0)
    g1 = {(r.tick, r.variant): r for r in rows if r.agent == "g1" and r.metric == "loo_hit@5"}
    assert g1[(29, "unweighted")].estimate > g1[(29, "twin")].estimate  # campaign bias
    # all items reweighted to the marginals of tick 14: a constant recommender scores as then
    assert g1[(29, "weighted_pall")].estimate == pytest.approx(
        g1[(14, "unweighted")].estimate, abs=0.01)


# --------------------------------------------------------------------------- save / load
def test_save_load_round_trip_keeps_arrays_hash_and_edges(tmp_path):
    users = np.array([0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5])
    items = np.array([0, 1, 1, 2, 0, 2, 1, 3, 3, 0, 2])
    times = 5000 + 86400 * np.arange(11)
    cal = calibrate((users * 10 + 3, items, None, times), n_factors=2, rng=0)
    path = cal.save(tmp_path / "world")
    assert path.name == "world.npz"
    with np.load(path, allow_pickle=False) as data:  # no object arrays anywhere
        assert all(data[k].dtype != object for k in data.files)
    back = CalibratedWorld.load(path)
    assert back.sha256 == cal.sha256
    for name in ("appeal", "features", "taste", "activity"):
        np.testing.assert_array_equal(getattr(back.config.fitted, name),
                                      getattr(cal.config.fitted, name))
    np.testing.assert_array_equal(back.user_ids, cal.user_ids)
    assert back.config.item_birth == cal.config.item_birth
    assert back.info == cal.info
    a, b = cal.world(1), back.world(1)
    a.simulate(a.config.n_ticks - 1), b.simulate(b.config.n_ticks - 1)
    np.testing.assert_array_equal(a.edges.item, b.edges.item)
    np.testing.assert_array_equal(a.edges.tick, b.edges.tick)


def test_string_ids_survive_the_round_trip(tmp_path):
    from evaluators.datasets import load_csv

    f = tmp_path / "r.csv"
    f.write_text("u,i,r\na,x,4\na,y,5\nb,y,3\nb,z,1\nc,x,2\nc,z,5\n")
    cal = calibrate(load_csv(f, user="u", item="i", rating="r"), n_factors=1, rng=0)
    back = CalibratedWorld.load(cal.save(tmp_path / "w.npz"))
    assert back.user_ids.tolist() == ["a", "b", "c"]
    assert back.source == str(f)


def test_load_refuses_a_changed_or_foreign_file(tmp_path):
    cal = calibrate(np.eye(6)[[0, 1, 1, 2, 3, 4, 5, 5, 0]] + np.eye(6)[[1, 2, 3, 4, 5, 0, 0,
                                                                        1, 2]], n_factors=1,
                    rng=0)
    path = cal.save(tmp_path / "w.npz")
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    arrays["appeal"] = arrays["appeal"] + 1.0
    np.savez(tmp_path / "changed.npz", **arrays)
    with pytest.raises(LogFormatError, match="does not match its sha256"):
        CalibratedWorld.load(tmp_path / "changed.npz")
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    with pytest.raises(LogFormatError, match="expected a recloop CalibratedWorld"):
        CalibratedWorld.load(tmp_path / "other.npz")
    (tmp_path / "junk.npz").write_text("not a zip")
    with pytest.raises(LogFormatError, match="not a readable .npz"):
        CalibratedWorld.load(tmp_path / "junk.npz")


# --------------------------------------------------------------------------- bad input
def test_an_empty_log_is_refused():
    with pytest.raises(ValueError, match="`interactions` must be a log with at least one "
                                         "interaction; got an empty log"):
        calibrate((np.array([], int), np.array([], int)))
    with pytest.raises(ValueError, match="at least one interaction"):
        calibrate(sp.csr_array((5, 4)))


def test_users_and_items_without_interactions_are_dropped_and_named():
    m = np.zeros((6, 5))
    m[[0, 0, 2, 3, 3, 4, 5], [0, 1, 1, 2, 0, 3, 1]] = 1  # user 1 and item 4 are empty
    with pytest.warns(CalibrationWarning, match=r"dropped 1 user\(s\) \(1\) and 1 item\(s\) "
                                                r"\(4\) with no interaction"):
        cal = calibrate(m, n_factors=1, rng=0)
    assert cal.config.n_users == 5 and cal.config.n_items == 4
    assert cal.dropped_users.tolist() == [1] and cal.dropped_items.tolist() == [4]
    assert cal.user_ids.tolist() == [0, 2, 3, 4, 5]


def test_min_rating_filters_and_reports_what_is_dropped():
    users = np.array([10, 10, 20, 20, 30, 30, 40])
    items = np.array([1, 2, 2, 3, 1, 3, 2])
    ratings = np.array([5, 4, 5, 4, 2, 1, 5.0])
    with pytest.warns(CalibrationWarning, match=r"1 user\(s\) \(30\) with no rating >= "
                                                "min_rating"):
        cal = calibrate((users, items, ratings), n_factors=1, min_rating=4, rng=0)
    assert cal.dropped_users.tolist() == [30]
    with pytest.raises(ValueError, match="none left after filtering"):
        calibrate((users, items, ratings), min_rating=6)


@pytest.mark.parametrize("kwargs, match", [
    pytest.param(dict(n_factors=5), r"`n_factors` must be an int in \[0, 2\] \(below "
                 r"min\(n_users, n_items\) = 3 after filtering\); got 5", id="n_factors"),
    pytest.param(dict(n_factors=-1), r"`n_factors` must be an int >= 0; got -1",
                 id="n_factors_negative"),
    pytest.param(dict(ctr=1.0), r"`ctr` must be a finite number in \(0.0, 1.0\)", id="ctr"),
    pytest.param(dict(exposure=-1), r"`exposure` must be a finite number >= 0", id="exposure"),
    pytest.param(dict(rating_scale=(1, 5)), r"ratings\)` must be in the declared scale "
                 r"\[1, 5\] \(`rating_scale`\); got 7 at index 2", id="rating_scale"),
    pytest.param(dict(rating_scale=(5, 1)), r"`rating_scale` must be finite with low <= high",
                 id="rating_scale_order"),
    pytest.param(dict(seconds_per_tick=0), r"`seconds_per_tick` must be a finite number > 0",
                 id="seconds_per_tick"),
])
def test_bad_options_are_named(kwargs, match):
    users = np.array([0, 0, 1, 1, 2, 2])
    items = np.array([0, 1, 1, 2, 2, 0])
    ratings = np.array([1, 2, 7, 4, 5, 3.0])
    with pytest.raises((ValueError, TypeError), match=match):
        calibrate((users, items, ratings), **kwargs)


def test_malformed_logs_are_named():
    with pytest.raises(ValueError, match=r"one interaction per \(user, item\) pair; got user "
                                         r"3 and item 1 at indices 0 and 2"):
        calibrate((np.array([3, 4, 3]), np.array([1, 1, 1])))
    with pytest.raises(TypeError, match="must be a users x items matrix, a"):
        calibrate("u.data")
    with pytest.raises(ValueError, match=r"`n_ticks` must be None for a log with timestamps"):
        calibrate((np.array([0, 1]), np.array([0, 1]), None, np.array([0, 9])), n_factors=1,
                  n_ticks=5)
    with pytest.raises(ValueError, match=r"`interactions \(ratings\)` must be finite; got nan"):
        calibrate((np.array([0, 1]), np.array([0, 1]), np.array([1.0, np.nan])))
    with pytest.raises(TypeError, match=r"`interactions\[0\] \(users\)` must be integers"):
        calibrate((np.array([0.5, 1]), np.array([0, 1])))


def test_fitted_arrays_are_validated_against_the_config():
    fa = simulator.FittedArrays(appeal=np.zeros(3), features=np.zeros((3, 2)),
                                taste=np.zeros((4, 2)), activity=np.ones(4))
    WorldConfig(n_users=4, n_items=3, dim=2, n_universal=0, fitted=fa)
    with pytest.raises(ValueError, match="`fitted` must be arrays that match `n_users` = 5"):
        WorldConfig(n_users=5, n_items=3, dim=2, n_universal=0, fitted=fa)
    with pytest.raises(ValueError, match=r"`fitted.activity` must be >= 0; got -1.0 at index 1"):
        simulator.FittedArrays(appeal=np.zeros(3), features=np.zeros((3, 2)),
                               taste=np.zeros((2, 2)), activity=[1, -1])
    with pytest.raises(ValueError, match=r"`fitted.appeal` must be finite"):
        simulator.FittedArrays(appeal=[0, np.inf, 0], features=np.zeros((3, 2)),
                               taste=np.zeros((2, 2)), activity=[1, 1])


def test_a_calibrated_world_drives_the_recommendation_environment():
    """The Gymnasium environment runs on a calibrated world (check_env), and collect_log's
    metadata digests its arrays instead of failing on them."""
    from gymnasium.utils.env_checker import check_env

    truth = _known_world(200, 30, 2, 5.0, 1.0, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)
        cal = calibrate(truth.profiles(29), n_factors=2, n_ticks=30, rng=0)
    env = simulator.RecommendationEnv(simulator.RecommendationConfig(world=cal.config,
                                                                     visits_per_tick=20))
    check_env(env, skip_render_check=True)
    log, _ = simulator.collect_log(env, 50, rng=0)
    fitted = log.metadata["config"]["world"]["fitted"]
    assert set(fitted["appeal"]) == {"array_sha256", "shape"}


# --------------------------------------------------------------------------- fast vs reference
@settings(max_examples=25)
@given(n_users=st.integers(2, 12), n_items=st.integers(2, 9), k=st.integers(0, 3),
       seed=st.integers(0, 2**32 - 1), sessions=st.booleans())
def test_blocked_likelihood_and_its_gradient_equal_the_dense_reference(n_users, n_items, k,
                                                                      seed, sessions):
    """The fit's blocked NLL (dense part over every cell + sparse correction) equals the cell
    by cell reference, per user and per item, and the Newton steps' gradients equal central
    finite differences of the reference objective -- with one time profile for all users, or
    one per user (sessions: per-user offsets) with item births."""
    rng = np.random.default_rng(seed)
    X = sp.csr_array((rng.random((n_users, n_items)) < 0.4).astype(float))
    if sessions:  # every user active on 1-3 of 5 ticks, items born on ticks 0-2
        w = (rng.random((n_users, 5)) < 0.5).astype(float)
        w[:, 4] = 1.0
        phi = sp.csr_array(w / w.sum(axis=1, keepdims=True))
        birth = rng.integers(0, 3, n_items)
    else:
        phi, birth = np.full(5, 0.2), None
    model = _calibrate._Model(X, k=k, exposure=0.7, ctr=0.3, reg=0.5,
                              phi=phi, birth=birth, ctr_halflife=None)
    model.rows = 3  # several blocks even on small matrices
    model.alpha0 = 0.3  # the centre of the activities' prior
    alpha = rng.normal(0, 1, n_users)
    x, f = rng.normal(0, 1, (n_users, k)), rng.normal(0, 1, (n_items, k))
    a = rng.normal(-1, 1, n_items)
    o = model.offsets(a)
    assert o.shape == ((n_users, n_items) if sessions else (n_items,))
    rows, cols, _ = model.nll(alpha, x, a, f, o)
    ref = _calibrate._nll_reference(X, alpha, x, a, f, o)
    np.testing.assert_allclose(rows, ref.sum(axis=1), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(cols, ref.sum(axis=0), rtol=1e-9, atol=1e-10)

    # the Newton systems' gradients against central differences of the reference objective
    model.alpha, model.x, model.a, model.f, model.o = alpha, x, a, f, o
    grad_u, hess_u = model.user_system()
    grad_i, hess_i = model.item_system()
    assert np.all(np.linalg.eigvalsh(hess_u) > 0) and np.all(np.linalg.eigvalsh(hess_i) > 0)

    def objective(alpha_, x_, a_, f_):
        o_ = o + model.e * (a_ - a)  # the exposure shares' normalisers held fixed
        return (_calibrate._nll_reference(X, alpha_, x_, a_, f_, o_).sum()
                + 0.5 * model.reg * ((x_ * x_).sum() + (f_ * f_).sum())
                + 0.5 * _calibrate._ALPHA_PRIOR * ((alpha_ - model.alpha0) ** 2).sum())

    def central(which, index):
        args = [alpha, x, a, f]
        plus, minus = [v.copy() for v in args], [v.copy() for v in args]
        plus[which][index] += 1e-6
        minus[which][index] -= 1e-6
        return (objective(*plus) - objective(*minus)) / 2e-6

    u, i = int(rng.integers(n_users)), int(rng.integers(n_items))
    assert grad_u[u, 0] == pytest.approx(central(0, u), rel=1e-5, abs=1e-6)
    assert grad_i[i, 0] == pytest.approx(central(2, i), rel=1e-5, abs=1e-6)
    if k:
        assert grad_u[u, 1] == pytest.approx(central(1, (u, 0)), rel=1e-5, abs=1e-6)
        assert grad_i[i, k] == pytest.approx(central(3, (i, k - 1)), rel=1e-5, abs=1e-6)


def test_a_user_holding_every_item_gets_a_bounded_activity():
    """The likelihood of a full row grows without bound with the user's activity; the fit
    bounds it (the activities' weak prior, and a cap where the least likely held item has 5
    expected successful meetings) while keeping nearly every item held."""
    rng = np.random.default_rng(0)
    m = (rng.random((40, 12)) < 0.3).astype(float)
    m[0] = 1.0
    m[:, 0] = 1.0  # and an item every user holds
    cal = calibrate(m, n_factors=2, n_ticks=20, rng=0)
    act = cal.config.fitted.activity
    assert np.all(np.isfinite(act)) and np.all(np.isfinite(cal.config.fitted.appeal))
    assert cal.expected_profile_sizes()[0] >= 11.5
    assert act[0] < 1e6


# --------------------------------------------------------------------------- sessions, ratings
def _session_log(n_users=250, n_items=30, n_ticks=50, seed=0):
    """(users, items, ratings, timestamps) of a known world with sessions, rated 1-5 by a
    known model."""
    rng = np.random.default_rng(seed)
    law = simulator.SessionLaw(count_mu=0.3, count_sigma=1.2, gap_mu=1.6, gap_sigma=0.8,
                               later_weight=0.3)
    model = simulator.RatingModel(levels=[1.0, 2.0, 3.0, 4.0, 5.0], bounds=[1.5, 2.5, 3.5,
                                                                           4.5],
                                  thresholds=[-2.0, -0.8, 0.6, 2.0], slope=1.0,
                                  user_offset=rng.normal(0, 0.7, n_users),
                                  item_offset=rng.normal(0, 0.5, n_items))
    fa = simulator.FittedArrays(appeal=rng.normal(-2.0, 0.7, n_items),
                                features=rng.normal(0, 1, (n_items, 2)),
                                taste=rng.normal(0, 0.8, (n_users, 2)),
                                activity=np.exp(rng.normal(3.0, 0.5, n_users)),
                                arrival=rng.integers(0, n_ticks, n_users), ratings=model)
    config = WorldConfig(n_users=n_users, n_items=n_items, n_ticks=n_ticks, dim=2,
                         n_universal=0, fitted=fa, sessions=law)
    e = World(config, seed).simulate(n_ticks - 1).edges
    return e.user, e.item, e.rating, 1_000_000 + 86400 * e.tick


def test_a_log_with_timestamps_and_ratings_gives_sessions_and_ratings(tmp_path):
    users, items, ratings, times = _session_log()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)
        cal = calibrate((users, items, ratings, times), n_factors=2, rng=0)
    law, fa = cal.config.sessions, cal.config.fitted
    assert isinstance(law, simulator.SessionLaw) and cal.info.n_sessions > cal.n_users
    ticks = (times - times.min()) // 86400
    first = np.full(cal.n_users, 10**9)
    np.minimum.at(first, np.searchsorted(cal.user_ids, users), ticks)
    np.testing.assert_array_equal(fa.arrival, first)  # each user arrives on its first tick
    assert fa.ratings is not None and fa.ratings.levels.tolist() == [1, 2, 3, 4, 5]
    assert cal.config.activity_halflife is None  # the sessions are the time profile
    e = cal.world(3).simulate(cal.config.n_ticks - 1).edges
    assert set(np.unique(e.rating)) <= {1.0, 2.0, 3.0, 4.0, 5.0}
    assert sorted(cal.observed.rating.tolist()) == sorted(ratings.tolist())
    # saved and loaded: the same world, sessions, ratings and all
    back = CalibratedWorld.load(cal.save(tmp_path / "w.npz"))
    assert back.sha256 == cal.sha256 and back.config.sessions == law
    np.testing.assert_array_equal(back.config.fitted.arrival, fa.arrival)
    f = back.world(3).simulate(cal.config.n_ticks - 1).edges
    np.testing.assert_array_equal(f.item, e.item)
    np.testing.assert_array_equal(f.rating, e.rating)
    # without: no session process, no ratings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)
        plain = calibrate((users, items, ratings, times), n_factors=2, sessions=False,
                          ratings=False, rng=0)
    assert plain.config.sessions is None and plain.config.fitted.ratings is None
    assert plain.world(3).simulate(5).edges.rating is None


def test_min_rating_gives_a_world_whose_ratings_respect_it():
    users, items, ratings, times = _session_log(seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)
        cal = calibrate((users, items, ratings, times), n_factors=2, min_rating=3, rng=0)
    assert cal.config.fitted.ratings.levels.tolist() == [3, 4, 5]
    e = cal.world(0).simulate(cal.config.n_ticks - 1).edges
    assert e.rating.min() >= 3


def test_no_rating_model_from_a_binary_matrix_and_none_without_a_latent_score():
    m = (np.random.default_rng(0).random((30, 10)) < 0.4).astype(float)
    m[:, 0] = 1.0
    cal = calibrate(m, n_factors=2, rng=0)  # every value 1: no ratings to model
    assert cal.config.fitted.ratings is None
    users, items, ratings, times = _session_log(n_users=60, n_items=12, seed=2)
    with pytest.raises(ValueError, match="`n_factors` must be an int >= 1 for a log with "
                                         "ratings"):
        calibrate((users, items, ratings, times), n_factors=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)
        assert calibrate((users, items, ratings, times), n_factors=0, ratings=False,
                         rng=0).config.fitted.ratings is None


def test_ids_that_do_not_fit_64_bits_are_refused():
    big = np.array([2**64, 1, 2], dtype=object)
    with pytest.raises(ValueError, match=r"`interactions\[0\] \(users\)` must be integer ids "
                                         r"in \[0, 2\^63\); got 18446744073709551616"):
        calibrate((big, np.array([0, 1, 0]), None), n_factors=0)
    with pytest.raises(ValueError, match="must be integer ids in"):
        calibrate((np.array([2**63, 1, 2], dtype=np.uint64), np.array([0, 1, 0])),
                  n_factors=0)
