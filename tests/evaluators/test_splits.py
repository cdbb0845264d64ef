import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from evaluators import splits as S


def assert_partition(parts, n):
    """Parts are sorted, disjoint, read-only and cover range(n)."""
    allidx = np.concatenate(parts)
    assert allidx.size == n
    np.testing.assert_array_equal(np.sort(allidx), np.arange(n))
    for p in parts:
        assert p.dtype == np.int64
        assert np.all(np.diff(p) > 0)
        assert not p.flags.writeable


def same_split(a, b):
    return all(np.array_equal(getattr(a, f), getattr(b, f))
               for f in ("train", "test") + (("validation",) if hasattr(a, "validation") else ()))


@settings(max_examples=40)
@given(n=st.integers(2, 200), f=st.floats(0.01, 0.99), seed=st.integers(0, 2**32))
def test_train_test_split_partitions_with_fraction(n, f, seed):
    n_test = int(np.floor(f * n + 0.5))
    assume(1 <= n_test <= n - 1)
    s = S.train_test_split(n, test_fraction=f, rng=seed)
    assert_partition([s.train, s.test], n)
    assert s.test.size == n_test
    assert same_split(s, S.train_test_split(n, test_fraction=f, rng=seed))
    assert same_split(s, S.train_test_split(n, test_fraction=f,
                                            rng=np.random.default_rng(seed)))


def test_train_test_split_depends_on_seed():
    a = S.train_test_split(1000, rng=1)
    b = S.train_test_split(1000, rng=2)
    assert not np.array_equal(a.test, b.test)


@settings(max_examples=40)
@given(n=st.integers(3, 200), fv=st.floats(0.01, 0.5), ft=st.floats(0.01, 0.48),
       seed=st.integers(0, 2**32))
def test_train_validation_test_partitions(n, fv, ft, seed):
    nv, nt = int(np.floor(fv * n + 0.5)), int(np.floor(ft * n + 0.5))
    assume(nv >= 1 and nt >= 1 and n - nv - nt >= 1)
    s = S.train_validation_test_split(n, validation_fraction=fv, test_fraction=ft, rng=seed)
    assert_partition([s.train, s.validation, s.test], n)
    assert (s.validation.size, s.test.size) == (nv, nt)
    assert same_split(s, S.train_validation_test_split(n, validation_fraction=fv,
                                                       test_fraction=ft, rng=seed))


@settings(max_examples=40)
@given(times=st.lists(st.integers(0, 20), min_size=2, max_size=60), f=st.floats(0.05, 0.95))
def test_temporal_split_no_future_in_train(times, f):
    n = len(times)
    n_test = int(np.floor(f * n + 0.5))
    assume(1 <= n_test <= n - 1)
    t = np.array(times)
    s = S.temporal_split(t, test_fraction=f)
    assert_partition([s.train, s.test], n)
    assert s.test.size == n_test
    assert t[s.train].max() <= t[s.test].min()


@settings(max_examples=30)
@given(times=st.lists(st.floats(-1e6, 1e6), min_size=2, max_size=60),
       cut=st.floats(-1e6, 1e6))
def test_temporal_split_by_cutoff(times, cut):
    t = np.array(times)
    assume(0 < (t >= cut).sum() < t.size)
    s = S.temporal_split(t, cutoff=cut)
    assert_partition([s.train, s.test], t.size)
    assert np.all(t[s.test] >= cut) and np.all(t[s.train] < cut)


def test_temporal_split_datetime64():
    t = np.array(["2020-01-03", "2020-01-01", "2020-01-02"], dtype="datetime64[D]")
    assert S.temporal_split(t, cutoff=np.datetime64("2020-01-02")).test.tolist() == [0, 2]


@settings(max_examples=40)
@given(n=st.integers(2, 100), k=st.integers(2, 10), seed=st.integers(0, 2**32))
def test_kfold_by_rating(n, k, seed):
    assume(k <= n)
    folds = S.kfold(n, n_folds=k, rng=seed)
    assert len(folds) == k
    assert_partition([f.test for f in folds], n)  # every rating tested exactly once
    sizes = [f.test.size for f in folds]
    assert max(sizes) - min(sizes) <= 1
    for f in folds:
        assert_partition([f.train, f.test], n)
    again = S.kfold(n, n_folds=k, rng=seed)
    assert all(same_split(a, b) for a, b in zip(folds, again, strict=True))


@settings(max_examples=40)
@given(users=st.lists(st.integers(0, 15), min_size=2, max_size=80), k=st.integers(2, 6),
       seed=st.integers(0, 2**32))
def test_kfold_by_user(users, k, seed):
    u = np.array(users)
    n_users = np.unique(u).size
    assume(k <= n_users)
    folds = S.kfold_by_user(u, n_folds=k, rng=seed)
    assert_partition([f.test for f in folds], u.size)
    test_users = [set(u[f.test].tolist()) for f in folds]
    for f, tu in zip(folds, test_users, strict=True):
        assert_partition([f.train, f.test], u.size)
        assert tu.isdisjoint(set(u[f.train].tolist()))  # a user is never on both sides
    counts = [len(tu) for tu in test_users]
    assert max(counts) - min(counts) <= 1
    again = S.kfold_by_user(u, n_folds=k, rng=seed)
    assert all(same_split(a, b) for a, b in zip(folds, again, strict=True))


def test_kfold_by_user_string_ids():
    folds = S.kfold_by_user(np.array(["a", "b", "a", "c"]), n_folds=3, rng=0)
    assert sorted(f.test.size for f in folds) == [1, 1, 2]


@settings(max_examples=40)
@given(users=st.lists(st.integers(0, 10), min_size=1, max_size=60),
       which=st.sampled_from(["random", "last"]), m=st.integers(1, 3),
       seed=st.integers(0, 2**32), data=st.data())
def test_leave_one_out(users, which, m, seed, data):
    u = np.array(users)
    t = None
    if which == "last":
        t = np.array(data.draw(st.lists(st.integers(0, 5), min_size=u.size, max_size=u.size)))
    s = S.leave_one_out(u, which=which, timestamps=t, min_ratings=m, rng=seed)
    assert_partition([s.train, s.test], u.size)
    uniq, counts = np.unique(u, return_counts=True)
    eligible = set(uniq[counts >= m].tolist())
    assert sorted(u[s.test].tolist()) == sorted(eligible)  # one per eligible user
    if which == "last":
        for i in s.test:
            mine = np.flatnonzero(u == u[i])
            latest = mine[t[mine] == t[mine].max()].max()  # ties: larger index
            assert i == latest
    again = S.leave_one_out(u, which=which, timestamps=t, min_ratings=m, rng=seed)
    assert same_split(s, again)


@pytest.mark.slow
def test_leave_one_out_random_is_uniform_within_user():
    # One user with 4 ratings: each should be held out about 1/4 of the time.
    rng = np.random.default_rng(123)
    hits = np.zeros(4)
    for _ in range(2000):
        hits[S.leave_one_out(np.zeros(4, int), rng=rng).test[0]] += 1
    from scipy import stats
    assert stats.chisquare(hits).pvalue > 1e-3


@pytest.mark.parametrize("call, exc, match", [
    pytest.param(lambda: S.train_test_split(10, test_fraction=1.0), ValueError,
                 r"`test_fraction` must be in \(0, 1\); got 1.0", id="fraction-1"),
    pytest.param(lambda: S.train_test_split(10, test_fraction="0.2"), TypeError,
                 r"`test_fraction` must be a number; got str", id="fraction-str"),
    pytest.param(lambda: S.train_test_split(3, test_fraction=0.1), ValueError,
                 r"gives 0 test ratings", id="empty-test"),
    pytest.param(lambda: S.train_test_split(10.0), TypeError,
                 r"`n_ratings` must be an integer; got float", id="n-float"),
    pytest.param(lambda: S.train_validation_test_split(10, validation_fraction=0.5,
                                                       test_fraction=0.5), ValueError,
                 r"must be < 1; got 0.5 \+ 0.5", id="fractions-sum"),
    pytest.param(lambda: S.train_validation_test_split(4, validation_fraction=0.1), ValueError,
                 r"every part must be non-empty", id="tvt-empty"),
    pytest.param(lambda: S.temporal_split([1, 2, 3], test_fraction=0.5, cutoff=2), ValueError,
                 r"at most one of `test_fraction` and `cutoff`", id="temporal-both"),
    pytest.param(lambda: S.temporal_split([1, 2, 3], cutoff=0), ValueError,
                 r"puts 3 of 3 ratings in the test set", id="temporal-cutoff-all"),
    pytest.param(lambda: S.temporal_split([1.0, np.nan]), ValueError,
                 r"`timestamps` must be finite; got nan at index 1", id="temporal-nan"),
    pytest.param(lambda: S.temporal_split(["a", "b"]), TypeError,
                 r"`timestamps` must hold numbers", id="temporal-str"),
    pytest.param(lambda: S.kfold(10, n_folds=1), ValueError, r"`n_folds` must be >= 2; got 1",
                 id="kfold-1"),
    pytest.param(lambda: S.kfold(3, n_folds=4), ValueError,
                 r"`n_folds` must be <= the number of ratings \(3\).*got 4", id="kfold-many"),
    pytest.param(lambda: S.kfold_by_user([1, 1, 2], n_folds=3), ValueError,
                 r"distinct users \(2\).*got 3", id="kfold-user-many"),
    pytest.param(lambda: S.kfold_by_user([[1, 2]], n_folds=2), ValueError,
                 r"`users` must be 1-dimensional", id="users-2d"),
    pytest.param(lambda: S.kfold_by_user([1.5, 2.5], n_folds=2), TypeError,
                 r"`users` must hold integer or string ids; got dtype float64", id="users-float"),
    pytest.param(lambda: S.leave_one_out([1, 2], which="first"), ValueError,
                 r"`which` must be 'random' or 'last'; got 'first'", id="loo-which"),
    pytest.param(lambda: S.leave_one_out([1, 2], which="last"), ValueError,
                 r"`timestamps` are required for which='last'", id="loo-no-times"),
    pytest.param(lambda: S.leave_one_out([1, 2], timestamps=[1, 2]), ValueError,
                 r"only used with which='last'", id="loo-extra-times"),
    pytest.param(lambda: S.leave_one_out([1, 2], which="last", timestamps=[1]), ValueError,
                 r"one entry per rating \(2\); got 1", id="loo-times-length"),
    pytest.param(lambda: S.leave_one_out([1, 2], min_ratings=0), ValueError,
                 r"`min_ratings` must be >= 1; got 0", id="loo-min"),
    pytest.param(lambda: S.leave_one_out([]), ValueError, r"`users` must not be empty",
                 id="loo-empty"),
])
def test_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
