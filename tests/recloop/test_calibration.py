"""recloop.calibration: the ranking check, the full report and `recloop calibrate`'s logic."""

import dataclasses
import hashlib
import io
import os
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import simulator
from recloop.calibration import (
    RANKING_RECOMMENDERS,
    calibrate_command,
    fidelity_report,
    load_interactions,
    ranking_check,
)


def _known_log(n_users=200, n_items=40, seed=0):
    config = simulator.WorldConfig(n_users=n_users, n_items=n_items, n_ticks=30, dim=3,
                                   mean_profile_size=8.0, n_universal=0, appeal_mean=-2.0,
                                   taste_scale=2.0)
    return simulator.World(config, seed=seed)


def _write_ratings(path, n_users=120, n_items=30, seed=0, sep="\t"):
    world = _known_log(n_users, n_items, seed)
    world.simulate(29)
    e = world.edges
    rng = np.random.default_rng(seed)
    lines = [sep.join(map(str, (u + 1, i + 1, int(rng.integers(1, 6)), 880_000_000 + 86400 * t)))
             for u, i, t in zip(e.user, e.item, e.tick, strict=True)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def ml_file(tmp_path_factory):
    return _write_ratings(tmp_path_factory.mktemp("data") / "u.data")


def test_identical_logs_rank_identically():
    world = _known_log()
    m = world.profiles(29)
    check = ranking_check(m, m, k=5, n_bootstrap=50, rng=0)
    assert check.recommenders == RANKING_RECOMMENDERS
    assert check.tau == pytest.approx(1.0)
    assert check.tau_ci_low == pytest.approx(1.0)
    assert check.faithful
    for r, s in zip(check.real, check.simulated, strict=True):
        assert r.value == s.value and r.n == s.n
    # held out: a fifth of every profile of 2 items or more
    sizes = np.diff(m.indptr)
    assert check.real[0].n == int(np.where(sizes >= 2, np.maximum(1, np.rint(0.2 * sizes)),
                                           0).sum())


def _naive_scores(name, b, u):
    """The ranking recommenders' scores for user u, by loops over sets (the reference)."""
    prof = [set(np.flatnonzero(row)) for row in b]
    holders = [set(np.flatnonzero(b[:, i])) for i in range(b.shape[1])]

    def sim(x, y, kind):
        inter = len(x & y)
        if kind == "cosine":
            return inter / np.sqrt(len(x) * len(y)) if x and y else 0.0
        return inter / len(x | y) if x | y else 0.0

    n_items = b.shape[1]
    if name in ("popularity", "recency_popularity"):  # no times: every holding is new
        return np.array([len(h) for h in holders], float)
    if name == "mf":  # the dense-confidence reference of the ALS, from the same start
        from agents import ImplicitMF
        from recloop.calibration import MF_FACTORS

        m = ImplicitMF(MF_FACTORS, method="naive", rng=np.random.default_rng(0)).fit(b)
        return m.user_factors[u] @ m.item_factors.T
    if name.startswith("user_knn"):
        kind = name.rsplit("_", 1)[1]
        sims = sorted(((-sim(prof[u], prof[v], kind), v) for v in range(len(prof)) if v != u))
        out = np.zeros(n_items)
        for neg, v in sims[:20]:
            for i in prof[v]:
                out[i] += -neg
        return out
    if name.startswith("item_knn"):
        kind = name.rsplit("_", 1)[1]
        out = np.zeros(n_items)
        for i in range(n_items):
            near = sorted((-sim(holders[i], holders[j], kind), j) for j in range(n_items)
                          if j != i)[:20]
            out[i] = sum(-neg for neg, j in near if j in prof[u])
        return out
    # naive_cf
    return np.array([max((len(holders[i] & holders[j]) / len(holders[j]) for j in prof[u]),
                         default=0.0) for i in range(n_items)])


@pytest.mark.parametrize("name", [n for n in RANKING_RECOMMENDERS if n != "random"])
def test_ranking_recommenders_equal_their_definition_written_as_loops(name):
    from recloop.calibration import _Scorer, _top_k

    rng = np.random.default_rng(3)
    b = (rng.random((30, 26)) < 0.25).astype(float)
    b[5] = 0.0  # an empty profile
    train = sp.csr_array(b)
    users = np.arange(30)
    fast = _Scorer(name, train, np.random.default_rng(0)).scores(users)
    ref = np.array([_naive_scores(name, b, u) for u in users])
    tol = 1e-9 if name == "mf" else 1e-12  # ALS: ten sweeps of solves, summed differently
    np.testing.assert_allclose(fast, ref, rtol=tol, atol=tol)
    top = _top_k(fast, train, 4)
    for u in users:  # the 4 best unheld items, ties to the lower id
        cand = sorted((-ref[u, i], i) for i in range(26) if b[u, i] == 0)
        assert top[u].tolist() == [i for _, i in cand[:4]]


def test_a_log_without_structure_ranks_differently():
    """CF beats popularity on a log with tastes; on a log with random profiles of the same
    sizes popularity is as good as CF: the ranking changes."""
    world = _known_log()
    m = world.profiles(29)
    rng = np.random.default_rng(0)
    dense = m.toarray()
    shuffled = sp.csr_array(np.array([rng.permutation(row) for row in dense]))
    check = ranking_check(m, shuffled, k=5, n_bootstrap=100, rng=0)
    assert check.tau < 2 / 3
    assert not check.faithful


def test_ranking_check_bad_input():
    m = np.eye(4)
    with pytest.raises(ValueError, match=r"`simulated` must be the real log's shape \(4, 4\)"):
        ranking_check(m, np.eye(5))
    with pytest.raises(ValueError, match=r"`k` must be an int in \[1, 4\]"):
        ranking_check(m, m, k=5)


def test_the_report_of_a_calibrated_world_states_its_verdict():
    world = _known_log()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", simulator.CalibrationWarning)
        cal = simulator.calibrate(world.profiles(29), n_factors=3, n_ticks=30, rng=0)
    rep = fidelity_report(cal, seed=1, k=5, n_bootstrap=50, rng=0)
    text, md = rep.to_text(), rep.to_markdown()
    assert "VERDICT (in sample):" in text and "Kendall tau" in text and cal.sha256 in text
    assert "| item_knn_jaccard |" in md and "worst distribution:" in md
    # no timestamps: no out-of-sample part, and the report says why
    assert rep.holdout is None and "the log has no timestamps" in text
    with pytest.raises(ValueError, match="`holdout` must be 0 for a log without timestamps"):
        fidelity_report(cal, holdout=0.2)
    # no timestamps: activity is not measured; the others are not poor (40 items: KS moves
    # by steps of 1/40)
    assert rep.distributions["user_activity"].verdict == "not measured"
    assert rep.distributions["item_popularity"].verdict in ("close", "fair")
    assert rep.distributions["profile_size"].verdict in ("close", "fair")
    assert rep.faithful == (not rep.problems)
    if not rep.faithful:
        assert "NOT FAITHFUL" in text


def test_calibrate_command_fits_prints_and_saves(ml_file, tmp_path):
    out, err = io.StringIO(), io.StringIO()
    target = tmp_path / "sub" / "world.npz"
    rc = calibrate_command(ml_file, format="movielens", out=target, n_factors=3,
                           stdout=out, stderr=err)
    assert rc == 0, err.getvalue()
    text = out.getvalue()
    assert "In sample -- the world was fitted to these data" in text
    assert "Out of sample -- fitted on the first 0.8 of the time span" in text
    assert "VERDICT (out of sample)" in text and text.count("worst distribution:") == 2
    back = simulator.CalibratedWorld.load(target)
    assert back.sha256 in text
    # the data file's hash and the world's, each named
    digest = hashlib.sha256(ml_file.read_bytes()).hexdigest()
    assert f"data: u.data (sha256 {digest})" in text and f"world sha256: {back.sha256}" in text
    assert back.source == "u.data" and back.source_sha256 == digest
    # timestamps: the activity of users is measured
    assert "user_activity" in text
    # same file, same default rng: the same world
    target2 = tmp_path / "again.npz"
    assert calibrate_command(ml_file, format="movielens", out=target2, n_factors=3,
                             stdout=io.StringIO(), stderr=io.StringIO()) == 0
    assert simulator.CalibratedWorld.load(target2).sha256 == back.sha256


def _bad(tmp_path, path, **kw):
    out, err = io.StringIO(), io.StringIO()
    target = tmp_path / "w.npz"
    rc = calibrate_command(path, out=target, stdout=out, stderr=err, **kw)
    lines = err.getvalue().strip().splitlines()
    assert rc == 2
    assert len(lines) == 1 and lines[0].startswith("recloop calibrate: error: ")
    assert not target.exists() and out.getvalue() == ""
    return lines[0]


def test_calibrate_command_bad_input_exits_2_and_writes_nothing(ml_file, tmp_path):
    # a file that is not of the declared format
    jester = tmp_path / "j.csv"
    jester.write_text("userId,jokeId,rating\n1,1,3.5\n1,2,-2\n2,1,9\n")
    msg = _bad(tmp_path, jester, format="movielens")
    assert f"{jester}:1:" in msg and "is it a movielens file?" in msg
    msg = _bad(tmp_path, ml_file, format="jester")
    assert f"{ml_file}:1:" in msg
    # no such file
    assert "no such file" in _bad(tmp_path, tmp_path / "missing.data", format="movielens")
    # an empty log
    empty = tmp_path / "empty.data"
    empty.write_text("")
    assert "no ratings found" in _bad(tmp_path, empty, format="movielens")
    # ratings outside the declared scale (CSV: file and line)
    csv = tmp_path / "r.csv"
    csv.write_text("u,i,r\n1,1,4\n1,2,9\n2,1,3\n")
    msg = _bad(tmp_path, csv, format="csv", columns="u,i,r", rating_scale=(1, 5))
    assert f"{csv}:3: rating must be in [1, 5]; got 9" in msg
    # columns that are not in the header
    assert "`user` = 'user' is not a column" in _bad(tmp_path, csv, format="csv")
    # n_factors beyond what the matrix allows
    msg = _bad(tmp_path, csv, format="csv", columns="u,i,r", n_factors=5)
    assert "`n_factors` must be an int in [0, 1]" in msg
    # nothing left after filtering
    msg = _bad(tmp_path, csv, format="csv", columns="u,i,r", min_rating=10)
    assert "none left after filtering" in msg
    # an output that is not .npz
    out, err = io.StringIO(), io.StringIO()
    assert calibrate_command(ml_file, format="movielens", out=tmp_path / "w.txt",
                             stdout=out, stderr=err) == 2
    assert "`--out` must be a path ending in .npz" in err.getvalue()
    assert not (tmp_path / "w.txt").exists()
    # an unknown format
    assert "`format` must be one of 'movielens', 'jester', 'csv'" in _bad(
        tmp_path, ml_file, format="parquet")


def _fifo(tmp_path):
    path = tmp_path / "fifo.data"
    os.mkfifo(path)
    return path


def _sparse(tmp_path, size=2 * 2**30):
    path = tmp_path / "sparse.data"
    with open(path, "wb") as fh:
        fh.truncate(size)  # 2 GB of holes: no disk used
    return path


@pytest.mark.parametrize("make, kw, expected", [
    pytest.param(_fifo, {}, "`PATH` must be a regular rating file; got a FIFO", id="fifo"),
    pytest.param(lambda t: "/dev/zero", {}, "`PATH` must be a regular rating file; got a "
                 "device", id="dev-zero"),
    pytest.param(lambda t: "/dev/urandom", {}, "got a device", id="dev-urandom"),
    pytest.param(_sparse, {}, "`PATH` must be a rating file of at most 256 MiB (--force reads "
                 "a larger one); got 2147483648 bytes", id="2GB-sparse"),
    pytest.param(_sparse, {"force": True}, "sparse.data:1: a NUL byte at byte 0: not a text "
                 "rating file", id="2GB-sparse-forced"),
])
def test_inputs_that_would_hang_or_eat_memory_are_refused_at_once(tmp_path, make, kw,
                                                                  expected):
    assert expected in _bad(tmp_path, make(tmp_path), format="movielens", **kw)


def test_values_that_must_be_refused(ml_file, tmp_path):
    big = tmp_path / "big.data"
    big.write_text("1\t1\t5\t881250949\n18446744073709551616\t2\t3\t881250950\n")
    msg = _bad(tmp_path, big, format="movielens")
    assert f"{big}:2: an integer of 2^63 or more (18446744073709551616)" in msg
    msg = _bad(tmp_path, ml_file, format="movielens", n_factors=0)
    assert "`n_factors` must be an int >= 1 for a log with ratings" in msg
    assert "ratings=False" in msg
    # --out to a device, or to something that is not a regular file
    os.mkfifo(tmp_path / "pipe.npz")
    for target, what in ((tmp_path / "pipe.npz", "a FIFO"), (tmp_path, "a path ending")):
        out, err = io.StringIO(), io.StringIO()
        assert calibrate_command(ml_file, format="movielens", out=target, stdout=out,
                                 stderr=err) == 2
        assert "`--out` must be" in err.getvalue() and what in err.getvalue()
    # hold-outs out of range, or that the log cannot give
    assert "`holdout` must be a finite number in [0.0, 0.5]; got 0.7" in _bad(
        tmp_path, ml_file, format="movielens", holdout=0.7)
    short = tmp_path / "short.data"
    short.write_text("1\t1\t5\t880000000\n1\t2\t3\t880000000\n2\t1\t4\t880086400\n"
                     "2\t2\t2\t880086400\n")
    assert "`--holdout` must be 0 (in sample only) for a log whose timestamps fall on " \
        "fewer than 4 distinct days" in _bad(tmp_path, short, format="movielens", n_factors=1)
    # four days, but three of them before the split: the split itself is refused
    lopsided = tmp_path / "lopsided.data"
    lopsided.write_text("".join(f"{u}\t{i}\t3\t{880000000 + 86400 * d}\n"
                                for u, i, d in ((1, 1, 0), (1, 2, 1), (2, 1, 2), (2, 2, 9))))
    assert "`holdout` must be a split leaving at least two distinct active ticks" in _bad(
        tmp_path, lopsided, format="movielens", n_factors=1)
    # a log of one user (or one item)
    one = tmp_path / "one.data"
    one.write_text("1\t1\t5\t880000000\n1\t2\t3\t880086400\n")
    assert "`interactions` must be a log with at least 2 users" in _bad(
        tmp_path, one, format="movielens", n_factors=0, ratings=False, holdout=0)
    # a rating outside the declared scale (MovieLens: 1-5)
    off = tmp_path / "off.data"
    off.write_text("1\t1\t5\t880000000\n2\t2\t7\t880086400\n")
    assert f"{off}:2: rating must be in [1, 5]; got 7" in _bad(tmp_path, off,
                                                              format="movielens")


def test_dropped_users_are_reported_as_a_note(tmp_path):
    csv = tmp_path / "r.csv"
    rows = ["u,i,r"] + [f"{u},{i},{5 if u != 9 else 1}" for u in range(10) for i in range(6)
                        if (u + i) % 2 == 0]
    csv.write_text("\n".join(rows) + "\n")
    out, err = io.StringIO(), io.StringIO()
    rc = calibrate_command(csv, format="csv", columns=["u", "i", "r"], min_rating=3,
                           n_factors=1, stdout=out, stderr=err)
    assert rc == 0, err.getvalue()
    assert "note: calibrate: dropped 1 user(s) (9)" in err.getvalue()


def test_load_interactions_formats(ml_file, tmp_path):
    d = load_interactions(ml_file, format="movielens")
    assert d.timestamps is not None and d.n_ratings > 0
    one_m = tmp_path / "ratings.dat"
    one_m.write_text("1::10::5::978300760\n1::11::3::978302109\n2::10::4::978301968\n")
    assert load_interactions(one_m, format="movielens").n_ratings == 3
    with pytest.raises(ValueError, match="`columns` must be None for format 'movielens'"):
        load_interactions(ml_file, format="movielens", columns="a,b,c")


# --------------------------------------------------------------------------- time-shaped input
def _timed_file(path, days_of, n_users=40, n_items=30, seed=0, reverse=False):
    """A MovieLens-format file: every user rates 8 items, user ``u``'s ratings on the days
    ``days_of(u, rng)`` (seconds added within the day), lines in time order or reversed."""
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(1, n_users + 1):
        for i in rng.choice(np.arange(1, n_items + 1), 8, replace=False):
            rows.append((u, int(i), int(rng.integers(1, 6)),
                         880_000_000 + 86400 * int(days_of(u, rng)) + int(rng.integers(0, 3600))))
    rows.sort(key=lambda r: r[3], reverse=reverse)
    path.write_text("".join("\t".join(map(str, r)) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("days_of", [
    pytest.param(lambda u, rng: 0, id="all-equal-days"),
    pytest.param(lambda u, rng: 0 if u % 2 else 0, id="within-one-day"),
])
def test_a_log_of_one_day_needs_holdout_0_and_then_fits_a_one_tick_world(tmp_path, days_of):
    path = _timed_file(tmp_path / "u.data", days_of)
    msg = _bad(tmp_path, path, format="movielens", n_factors=2)
    assert "`--holdout` must be 0 (in sample only)" in msg and "1 distinct day(s)" in msg
    target = tmp_path / "w.npz"
    rc = calibrate_command(path, format="movielens", n_factors=2, holdout=0, out=target,
                           stdout=io.StringIO(), stderr=io.StringIO())
    assert rc == 0
    world = simulator.CalibratedWorld.load(target)
    assert world.config.n_ticks == 1 and world.config.sessions is None
    assert world.config.drift_rate == 0 and world.config.fitted.appeal_offset is None


def test_a_hold_out_without_returning_users_is_refused(tmp_path):
    # users 1-20 rate on days 0-46 only, users 21-40 on days 49-59 only: nobody comes back
    path = _timed_file(tmp_path / "u.data",
                       lambda u, rng: rng.integers(0, 47) if u <= 20 else rng.integers(49, 60))
    msg = _bad(tmp_path, path, format="movielens", n_factors=2)
    assert "`holdout` must be a hold-out in which at least 2 users of the fitted part come " \
           "back" in msg and "0 user(s) of ticks before 48 active after it" in msg


def test_timestamps_going_backwards_fit_the_same_world(tmp_path):
    days = lambda u, rng: rng.integers(0, 30)  # noqa: E731
    (tmp_path / "f").mkdir()
    (tmp_path / "b").mkdir()
    forward = _timed_file(tmp_path / "f" / "u.data", days)
    backward = _timed_file(tmp_path / "b" / "u.data", days, reverse=True)
    assert forward.read_text() != backward.read_text()
    worlds = []
    for p in (forward, backward):
        target = p.parent / "w.npz"
        assert calibrate_command(p, format="movielens", n_factors=2, holdout=0, out=target,
                                 stdout=io.StringIO(), stderr=io.StringIO()) == 0
        w = simulator.CalibratedWorld.load(target)
        worlds.append(dataclasses.replace(w, source_sha256=""))  # the files' bytes differ
    assert worlds[0].sha256 == worlds[1].sha256


def test_the_ranking_is_judged_against_the_real_halves_and_reports_the_knn_gap():
    world = _known_log()
    m = world.profiles(29)
    check = ranking_check(m, m, k=5, n_bootstrap=50, n_halves=60, rng=0)
    # identical logs: the same gap on both sides, reproduced; the halves' tau is a tau
    assert check.gap_real == check.gap_simulated and check.gap_reproduced
    assert check.gap_real_ci_low <= check.gap_real <= check.gap_real_ci_high
    assert -1 <= check.halves_tau_ci_low <= check.halves_tau <= check.halves_tau_ci_high <= 1
    assert check.n_halves == 60 and check.faithful and check.meets_median
    # the gap by its definition: the four kNN's mean hit rate minus popularity's
    rate = {n: e.value for n, e in zip(check.recommenders, check.real, strict=True)}
    knn = np.mean([rate[n] for n in ("user_knn_cosine", "user_knn_jaccard",
                                     "item_knn_cosine", "item_knn_jaccard")])
    assert check.gap_real == pytest.approx(knn - rate["popularity"], abs=1e-12)
    # the halves: two random halves of the real users' hit rates, ranked against each other;
    # a simulated log without structure is below their band
    noise = sp.csr_array((np.random.default_rng(1).random(m.shape) < m.mean()).astype(float))
    worse = ranking_check(m, noise, k=5, n_bootstrap=50, n_halves=60, rng=0)
    assert worse.halves_tau == pytest.approx(check.halves_tau)  # the real side alone
    assert not worse.faithful and worse.tau < worse.halves_tau_ci_low
    assert "two random halves of the real users" in worse.summary()
    assert "kNN over popularity" in worse.gap_summary()
