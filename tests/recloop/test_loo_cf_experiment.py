"""The fast_loo_cf experiment: leaky "fit once" kNN protocols against the exact LOO."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluators import loo_knn
from recloop.experiments._loo_cf import (
    SIMILARITIES,
    fast_loo_cf,
    fit_once_knn,
    load_ratings,
    synthetic_ratings,
)

# -- the literal reference of the leaky protocols ------------------------------------------------


def _slow_similarity(name, x, y, xo, yo, m_u, m_v, ex, ey, exo, eyo):
    """(num, du, mu, dv, mv) on all the data, straight from the definitions."""
    if name == "pearson":
        dx, dy = x - m_u, y - m_v
        return (np.sum(dx * dy), np.sum(dx * dx), np.sum(x * x) + x.size * m_u ** 2,
                np.sum(dy * dy), np.sum(y * y) + y.size * m_v ** 2)
    if name == "pearson_corated":
        dx, dy = x - x.mean(), y - y.mean()
        return np.sum(dx * dy), np.sum(dx * dx), np.sum(x * x), np.sum(dy * dy), np.sum(y * y)
    if name == "cosine":
        return np.sum(x * y), np.sum(xo * xo), np.sum(xo * xo), np.sum(yo * yo), np.sum(yo * yo)
    if name == "cosine_corated":
        return np.sum(x * y), np.sum(x * x), np.sum(x * x), np.sum(y * y), np.sum(y * y)
    du, dv = np.sum(exo * exo), np.sum(eyo * eyo)  # adjusted_cosine
    return np.sum(ex * ey), du, du, dv, dv


def slow_fit_once(users, items, ratings, *, similarity, k, min_support=1, include_self=False):
    """One rating at a time, one candidate at a time: predictions and neighbour counts."""
    prof = {}
    for u, i, r in zip(users.tolist(), items.tolist(), ratings.tolist(), strict=True):
        prof.setdefault(u, {})[i] = r
    by_item = {}
    for _u, i, r in zip(users.tolist(), items.tolist(), ratings.tolist(), strict=True):
        by_item.setdefault(i, []).append(r)
    item_mean = {i: np.mean(v) for i, v in by_item.items()}
    mean = {u: np.mean(list(p.values())) for u, p in prof.items()}
    pred, count = [], []
    for u, kk in zip(users.tolist(), items.tolist(), strict=True):
        cands = []
        for v in sorted(prof):
            if kk not in prof[v] or (v == u and not include_self):
                continue
            common = sorted(set(prof[u]) & set(prof[v]))
            if len(common) < max(min_support, 1):
                continue
            x = np.array([prof[u][i] for i in common])
            y = np.array([prof[v][i] for i in common])
            xo = np.array(list(prof[u].values()))
            yo = np.array(list(prof[v].values()))
            ex = np.array([prof[u][i] - item_mean[i] for i in common])
            ey = np.array([prof[v][i] - item_mean[i] for i in common])
            exo = np.array([r - item_mean[i] for i, r in prof[u].items()])
            eyo = np.array([r - item_mean[i] for i, r in prof[v].items()])
            num, du, mu, dv, mv = _slow_similarity(similarity, x, y, xo, yo, mean[u], mean[v],
                                                   ex, ey, exo, eyo)
            if du <= 1e-12 * mu or dv <= 1e-12 * mv:
                continue
            s = num / math.sqrt(du * dv)
            if round(s, 10) > 0:
                cands.append((-round(s, 10), v, s))
        cands.sort()
        chosen = cands[:k]
        count.append(len(chosen))
        if not chosen:
            pred.append(mean[u])
            continue
        w = np.array([c[2] for c in chosen])
        d = np.array([prof[c[1]][kk] - mean[c[1]] for c in chosen])
        pred.append(mean[u] + np.sum(w * d) / np.sum(w))
    return np.array(pred), np.array(count)


@st.composite
def rating_sets(draw):
    n_users = draw(st.integers(1, 7))
    n_items = draw(st.integers(1, 6))
    cells = [(u, i) for u in range(n_users) for i in range(n_items)]
    mask = draw(st.lists(st.booleans(), min_size=len(cells), max_size=len(cells)))
    chosen = [c for c, m in zip(cells, mask, strict=True) if m] or [cells[0]]
    chosen = draw(st.permutations(chosen))
    if draw(st.booleans()):  # a 1-5 grid: many ties and zero variances
        r = draw(st.lists(st.integers(1, 5), min_size=len(chosen), max_size=len(chosen)))
    else:
        # Jester-like reals (a fine grid: no subnormal products, whose underflow is noise)
        r = draw(st.lists(st.floats(-10, 10).map(lambda x: round(x, 3)), min_size=len(chosen),
                          max_size=len(chosen)))
    ids = draw(st.permutations(list(range(0, 3 * n_users, 3))))  # ids are not indices
    users = np.array([ids[c[0]] for c in chosen], dtype=np.int64)
    items = np.array([c[1] * 2 for c in chosen], dtype=np.int64)
    return users, items, np.array(r, dtype=np.float64)


@settings(max_examples=40)
@given(data=rating_sets(), similarity=st.sampled_from(SIMILARITIES), k=st.integers(1, 4),
       min_support=st.integers(0, 2), include_self=st.booleans())
def test_fit_once_matches_the_literal_reference(data, similarity, k, min_support, include_self):
    users, items, ratings = data
    fast = fit_once_knn(data, similarity=similarity, k=k, min_support=min_support,
                        include_self=include_self)
    pred, count = slow_fit_once(users, items, ratings, similarity=similarity, k=k,
                                min_support=min_support, include_self=include_self)
    np.testing.assert_allclose(fast.prediction, pred, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(fast.n_neighbours, count)
    np.testing.assert_array_equal(fast.rating, ratings)


def test_fit_once_clip_and_self_similarity():
    users = np.array([0, 0, 0, 1, 1, 1])
    items = np.array([0, 1, 2, 0, 1, 2])
    r = np.array([1.0, 5.0, 3.0, 2.0, 5.0, 4.0])
    res = fit_once_knn((users, items, r), similarity="pearson_corated", k=5, include_self=True)
    assert np.all(res.n_neighbours == 2)  # itself and the other user
    clipped = fit_once_knn((users, items, r), similarity="pearson_corated", k=5,
                           include_self=True, clip=(2.5, 3.5))
    np.testing.assert_array_equal(clipped.prediction, np.clip(res.prediction, 2.5, 3.5))


# -- the leak ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_set():
    return synthetic_ratings(150, 200, 4000, rng=5)


def test_the_leak_is_visible(small_set):
    rows = fast_loo_cf(small_set, similarities=["pearson_corated", "cosine"], naive_users=0,
                       clip=(1, 5))
    got = {(m.agent, m.variant, m.metric): m for m in rows}
    assert len(got) == len(rows) == 2 * 3 * 2
    for s in ("pearson_corated", "cosine"):
        exact = got[s, "exact_loo", "rmse"]
        once = got[s, "fit_once", "rmse"]
        self_ = got[s, "fit_once_self", "rmse"]
        assert once.estimate < exact.estimate
        assert self_.estimate < once.estimate
        for m in (exact, once, self_, got[s, "fit_once", "mae"]):
            assert m.truth == got[s, "exact_loo", m.metric].estimate
            assert m.n == small_set[0].size
            assert 0 < m.stderr < 0.1 and m.ci_low < m.estimate < m.ci_high
        assert got[s, "exact_loo", "rmse"].error == 0.0
    # the exact rows are loo_knn's numbers
    ref = loo_knn(small_set, similarity="cosine", clip=(1, 5))
    assert got["cosine", "exact_loo", "mae"].estimate == pytest.approx(ref.mae, rel=1e-12)
    assert got["cosine", "exact_loo", "rmse"].estimate == pytest.approx(ref.rmse, rel=1e-12)


def test_error_bars_follow_the_formulas(small_set):
    rows = fast_loo_cf(small_set, similarities=["cosine"], naive_users=0)
    leaky = fit_once_knn(small_set, similarity="cosine")
    err = leaky.prediction - leaky.rating
    n = err.size
    got = {(m.variant, m.metric): m for m in rows}
    mae, rmse = got["fit_once", "mae"], got["fit_once", "rmse"]
    assert mae.stderr == pytest.approx(np.abs(err).std(ddof=1) / math.sqrt(n))
    se_mse = (err ** 2).std(ddof=1) / math.sqrt(n)
    assert rmse.stderr == pytest.approx(se_mse / (2 * leaky.rmse))
    assert rmse.ci_low ** 2 == pytest.approx(leaky.rmse ** 2 - 1.959963984540054 * se_mse)


def test_deterministic_synthetic_and_timing_rows():
    kw = dict(similarities=["pearson_corated"], shape=(60, 80, 900), naive_users=0)
    a, b = fast_loo_cf(rng=3, **kw), fast_loo_cf(rng=3, **kw)
    assert a == b  # same rng, same rows (frozen dataclasses compare by value)
    c = fast_loo_cf(rng=4, **kw)
    assert [m.estimate for m in a] != [m.estimate for m in c]
    timed = fast_loo_cf(rng=3, similarities=["pearson_corated"], shape=(60, 80, 900),
                        naive_users=2, evaluation="loo")
    assert [m for m in timed if m.metric in ("mae", "rmse")] == [
        m.__class__(**{**m.__dict__, "evaluation": "loo", "params": dict(m.params)}) for m in a]
    t = {m.metric: m for m in timed if m.metric not in ("mae", "rmse")}
    assert set(t) == {"fast_s", "naive_s_estimated", "speedup"}
    assert t["fast_s"].estimate > 0 and t["naive_s_estimated"].estimate > 0
    assert t["speedup"].estimate == pytest.approx(
        t["naive_s_estimated"].estimate / t["fast_s"].estimate)


def test_synthetic_ratings_shape():
    u, i, r = synthetic_ratings(50, 60, 1500, rng=0)
    assert u.size == i.size == r.size == 1500
    assert len(set(zip(u.tolist(), i.tolist(), strict=True))) == 1500
    assert set(np.unique(r)) <= {1.0, 2.0, 3.0, 4.0, 5.0}
    counts = np.bincount(u, minlength=50)
    assert counts.min() >= 20 and counts.max() <= 42  # at least 20, at most 70% of 60
    pop = np.sort(np.bincount(i, minlength=60))[::-1]
    assert pop[:6].sum() > 2 * pop[-6:].sum()  # skewed popularity
    np.testing.assert_array_equal(r, synthetic_ratings(50, 60, 1500, rng=0)[2])
    # the extremes the scenario schema allows: one rating; every cell rated
    assert synthetic_ratings(5, 1, 1, rng=0)[0].size == 1
    u, i, _ = synthetic_ratings(4, 3, 12, rng=0)
    assert sorted(zip(u.tolist(), i.tolist(), strict=True)) == [
        (a, b) for a in range(4) for b in range(3)]


def test_load_ratings_from_local_files(tmp_path):
    path = tmp_path / "u.data"
    path.write_text("1\t10\t5\t100\n1\t11\t3\t101\n2\t10\t4\t102\n2\t11\t2\t103\n")
    u, i, r = load_ratings(path)
    np.testing.assert_array_equal(r, [5.0, 3.0, 4.0, 2.0])
    rows = fast_loo_cf((u, i, r), similarities=["cosine"], naive_users=0, k=1)
    assert {m.n for m in rows} == {4}
    csv = tmp_path / "r.csv"
    csv.write_text("userId,itemId,rating\na,x,1\na,y,2\nb,x,3\n")
    u, i, r = load_ratings(csv, format="csv")
    assert u.dtype.kind == "i" and list(r) == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="`format`"):
        load_ratings(csv, format="xls")


@pytest.mark.parametrize("kwargs, exc, match", [
    pytest.param(dict(similarities=["pearsn"]), ValueError, r"`similarities\[0\]`", id="sim"),
    pytest.param(dict(similarities=[]), ValueError, "`similarities`", id="no-sim"),
    pytest.param(dict(similarities="cosine"), TypeError, "`similarities`", id="str-sim"),
    pytest.param(dict(similarities=["cosine", "cosine"]), ValueError, "repeat", id="dup"),
    pytest.param(dict(k=0), ValueError, "`k`", id="k"),
    pytest.param(dict(min_support=-1), ValueError, "`min_support`", id="support"),
    pytest.param(dict(naive_users=-1), ValueError, "`naive_users`", id="naive"),
    pytest.param(dict(clip=(5, 1)), ValueError, "`clip`", id="clip"),
    pytest.param(dict(shape=(10, 10, 101)), ValueError, "`n_ratings`", id="shape-large"),
    pytest.param(dict(shape=(10, 0, 10)), ValueError, "`n_items`", id="shape-items"),
    pytest.param(dict(shape=10), TypeError, "`shape`", id="shape-type"),
])
def test_bad_parameters_are_named(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        fast_loo_cf(**kwargs)


def test_bad_ratings_are_named():
    u, i, r = np.array([0, 0, 1]), np.array([0, 1, 0]), np.array([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="duplicate"):
        fit_once_knn((np.array([0, 0]), np.array([1, 1]), np.array([1.0, 2.0])))
    with pytest.raises(ValueError, match="finite"):
        fit_once_knn((u, i, np.array([1.0, np.nan, 2.0])))
    with pytest.raises(ValueError, match="equal lengths"):
        fit_once_knn((u, i[:2], r))
    with pytest.raises(ValueError, match="`similarity`"):
        fit_once_knn((u, i, r), similarity="jaccard")
    with pytest.raises(TypeError, match="`include_self`"):
        fit_once_knn((u, i, r), include_self=1)
    with pytest.raises(TypeError, match="`ratings`"):
        fit_once_knn({"u": u})


def test_figure(tmp_path):
    from recloop.experiments._loo_cf import plot_fast_loo_cf

    rows = fast_loo_cf(similarities=["cosine", "pearson_corated"], shape=(40, 50, 600),
                       naive_users=0, rng=0)
    paths = plot_fast_loo_cf(rows, tmp_path / "fig")
    assert len(paths) == 1 and paths[0].stat().st_size > 1000
    assert plot_fast_loo_cf([], tmp_path) == []
