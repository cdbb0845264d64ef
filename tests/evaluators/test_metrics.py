import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluators import metrics as M
from evaluators.metrics import UndefinedMetricWarning

# -- literal references (slow, obviously correct; trec_eval's definitions) ------------------

def ref_user(rec_row, rel_set, k, name, normalization="truncated"):
    """One user's value, written from the textbook definitions with Python loops."""
    top = list(rec_row[:k])
    R = len(rel_set)
    rel = [1 if item in rel_set else 0 for item in top]
    hits = sum(rel)
    if name == "hits":
        return float(hits)
    if name == "hit_rate":
        return 1.0 if hits > 0 else 0.0
    if name == "precision":
        return hits / k
    if name == "recall":
        return hits / R
    dcg = sum(r / math.log2(j + 1) for j, r in enumerate(rel, start=1))
    if name == "dcg":
        return dcg
    if name == "ndcg":
        idcg = sum(1 / math.log2(j + 1) for j in range(1, min(R, k) + 1))
        return dcg / idcg
    if name == "map":
        s = 0.0
        for j in range(1, len(top) + 1):
            if rel[j - 1]:
                s += sum(rel[:j]) / j
        return s / (min(R, k) if normalization == "truncated" else R)
    if name == "mrr":
        for j, r in enumerate(rel, start=1):
            if r:
                return 1.0 / j
        return 0.0
    raise AssertionError(name)


FUNCS = {
    "hits": M.hits_at_k, "hit_rate": M.hit_rate_at_k, "precision": M.precision_at_k,
    "recall": M.recall_at_k, "dcg": M.dcg_at_k, "ndcg": M.ndcg_at_k, "map": M.map_at_k,
    "mrr": M.mrr_at_k,
}


@st.composite
def ranking_cases(draw):
    n_users = draw(st.integers(1, 6))
    n_items = draw(st.integers(1, 12))
    n_ranked = draw(st.integers(1, n_items))
    rec = np.array([draw(st.permutations(range(n_items)))[:n_ranked] for _ in range(n_users)],
                   dtype=np.int64)
    relevant = [np.array(sorted(draw(st.sets(st.integers(0, n_items - 1), max_size=n_items))),
                         dtype=np.int64) for _ in range(n_users)]
    k = draw(st.integers(1, n_items + 2))
    return rec, relevant, k, n_items


@settings(max_examples=60)
@given(case=ranking_cases(), as_sparse=st.booleans())
def test_ranking_metrics_match_literal_definitions(case, as_sparse):
    rec, relevant, k, n_items = case
    rel_in = relevant
    if as_sparse:
        rows = np.concatenate([np.full(r.size, u) for u, r in enumerate(relevant)] + [[]])
        cols = np.concatenate(list(relevant) + [np.array([])])
        rel_in = sp.csr_array((np.ones(rows.size), (rows.astype(int), cols.astype(int))),
                              shape=(len(relevant), n_items))
    for name, f in FUNCS.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UndefinedMetricWarning)
            res = f(rec, rel_in, k=k)
        expected = [ref_user(rec[u], set(r.tolist()), k, name) if r.size else math.nan
                    for u, r in enumerate(relevant)]
        np.testing.assert_allclose(res.per_user, expected, rtol=1e-12, atol=1e-12, err_msg=name)
        evaluated = [e for e in expected if not math.isnan(e)]
        assert res.n_evaluated == len(evaluated)
        assert res.n_skipped == len(relevant) - len(evaluated)
        if evaluated:
            assert res.value == pytest.approx(np.mean(evaluated), rel=1e-12, abs=1e-12)
        else:
            assert math.isnan(res.value)


@settings(max_examples=30)
@given(case=ranking_cases())
def test_map_trec_normalization_matches_trec_eval_map_cut(case):
    rec, relevant, k, _ = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        res = M.map_at_k(rec, relevant, k=k, normalization="trec")
    expected = [ref_user(rec[u], set(r.tolist()), k, "map", "trec") if r.size else math.nan
                for u, r in enumerate(relevant)]
    np.testing.assert_allclose(res.per_user, expected, rtol=1e-12)


@settings(max_examples=30)
@given(case=ranking_cases())
def test_ranking_bounds_and_perfect_list(case):
    rec, relevant, k, _ = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        for f in (M.ndcg_at_k, M.map_at_k, M.recall_at_k, M.precision_at_k, M.mrr_at_k):
            v = f(rec, relevant, k=k).per_user
            v = v[~np.isnan(v)]
            assert np.all((v >= 0) & (v <= 1 + 1e-12))
        # A list that ranks every relevant item first is ideal.
        perfect = np.array([np.concatenate([r, np.setdiff1d(rec[u], r)])[:rec.shape[1]]
                            for u, r in enumerate(relevant)])
        full = [r.size <= rec.shape[1] and r.size > 0 for r in relevant]
        if any(full):
            pr = perfect[full].astype(np.int64)
            rr = [r for r, f in zip(relevant, full, strict=True) if f]
            assert M.ndcg_at_k(pr, rr, k=k).value == pytest.approx(1.0)
            assert M.map_at_k(pr, rr, k=k).value == pytest.approx(1.0)


def test_hand_computed_cases():
    rec = np.array([[7, 1, 9, 2, 5]])
    rel = [np.array([1, 2, 3])]
    # hits at ranks 2 and 4; R = 3
    assert M.hits_at_k(rec, rel, k=5).value == 2
    assert M.hits_at_k(rec, rel, k=1).value == 0
    assert M.hit_rate_at_k(rec, rel, k=1).value == 0
    assert M.hit_rate_at_k(rec, rel, k=2).value == 1
    assert M.precision_at_k(rec, rel, k=5).value == pytest.approx(2 / 5)
    assert M.precision_at_k(rec, rel, k=10).value == pytest.approx(2 / 10)  # trec P_10
    assert M.recall_at_k(rec, rel, k=5).value == pytest.approx(2 / 3)
    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    assert M.dcg_at_k(rec, rel, k=5).value == pytest.approx(dcg)
    idcg = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert M.ndcg_at_k(rec, rel, k=5).value == pytest.approx(dcg / idcg)
    # k = 2: ideal over min(3, 2) = 2 ranks
    assert M.ndcg_at_k(rec, rel, k=2).value == pytest.approx(
        (1 / math.log2(3)) / (1 + 1 / math.log2(3)))
    assert M.map_at_k(rec, rel, k=5).value == pytest.approx((1 / 2 + 2 / 4) / 3)
    assert M.map_at_k(rec, rel, k=2).value == pytest.approx((1 / 2) / 2)
    assert M.map_at_k(rec, rel, k=2, normalization="trec").value == pytest.approx((1 / 2) / 3)
    assert M.mrr_at_k(rec, rel, k=5).value == pytest.approx(1 / 2)
    assert M.mrr_at_k(rec, rel, k=1).value == 0


def test_skipped_users_are_reported_and_all_skipped_warns():
    rec = np.array([[0, 1], [1, 0], [2, 3]])
    res = M.precision_at_k(rec, [[0], [], np.array([], dtype=int)], k=2)
    assert res.n_evaluated == 1 and res.n_skipped == 2
    assert res.value == 0.5 and np.isnan(res.per_user[1:]).all()
    assert float(res) == 0.5
    with pytest.raises(ValueError):
        res.per_user[0] = 1.0
    with pytest.warns(UndefinedMetricWarning, match="ndcg_at_k"):
        res = M.ndcg_at_k(rec, [[], [], []], k=2)
    assert math.isnan(res.value) and res.n_skipped == 3


def test_relevant_sets_accepted():
    rec = np.array([[3, 2, 1]])
    assert M.recall_at_k(rec, [{1, 5}], k=3).value == 0.5


def test_sparse_relevant_ignores_stored_zeros_and_matches_sequence():
    rel = sp.csr_array((np.array([1.0, 0.0, 1.0]), (np.array([0, 0, 1]), np.array([2, 3, 0]))),
                       shape=(2, 5))
    rec = np.array([[3, 2], [0, 4]])
    a = M.recall_at_k(rec, rel, k=2)
    b = M.recall_at_k(rec, [[2], [0]], k=2)
    np.testing.assert_array_equal(a.per_user, b.per_user)
    assert a.value == 1.0


# -- regression / classification ------------------------------------------------------------

finite = st.floats(-1e3, 1e3, allow_nan=False, allow_subnormal=False)


@settings(max_examples=40)
@given(st.lists(st.tuples(finite, finite), min_size=1, max_size=30))
def test_regression_against_loops(pairs):
    t = [a for a, _ in pairs]
    p = [b for _, b in pairs]
    n = len(pairs)
    assert M.mae(t, p) == pytest.approx(sum(abs(a - b) for a, b in pairs) / n)
    assert M.mse(t, p) == pytest.approx(sum((a - b) ** 2 for a, b in pairs) / n)
    assert M.rmse(t, p) == pytest.approx(math.sqrt(sum((a - b) ** 2 for a, b in pairs) / n))
    if all(abs(a) > 1e-9 for a in t):  # tiny targets overflow the ratio
        assert M.mape(t, p) == pytest.approx(sum(abs(a - b) / abs(a) for a, b in pairs) / n)
    if any(a != 0 for a in t):
        assert M.tre(t, p) == pytest.approx(sum(abs(a - b) for a, b in pairs)
                                            / sum(abs(a) for a in t))


def test_mape_zero_target_raises_tre_accepts():
    with pytest.raises(ValueError, match=r"`y_true` must be non-zero.*index 1"):
        M.mape([1.0, 0.0], [1.0, 1.0])
    assert M.tre([1.0, 0.0], [1.0, 1.0]) == 1.0
    with pytest.raises(ValueError, match="all zero"):
        M.tre([0.0, 0.0], [1.0, 1.0])


@pytest.mark.parametrize("f", [M.mae, M.mse, M.rmse, M.mape, M.tre, M.accuracy])
def test_empty_input_is_nan_with_warning(f):
    with pytest.warns(UndefinedMetricWarning):
        assert math.isnan(f([], []))


@settings(max_examples=40)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), min_size=1, max_size=30))
def test_classification_against_counts(pairs):
    t = np.array([a for a, _ in pairs])
    p = np.array([b for _, b in pairs])
    tp = sum(a == 1 and b == 1 for a, b in pairs)
    fp = sum(a != 1 and b == 1 for a, b in pairs)
    fn = sum(a == 1 and b != 1 for a, b in pairs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        pr, rc, f = M.precision(t, p), M.recall(t, p), M.f1(t, p)
    assert M.accuracy(t, p) == pytest.approx(np.mean(t == p))
    assert (math.isnan(pr) if tp + fp == 0 else pr == pytest.approx(tp / (tp + fp)))
    assert (math.isnan(rc) if tp + fn == 0 else rc == pytest.approx(tp / (tp + fn)))
    if tp + fp + fn == 0:
        assert math.isnan(f)
    else:
        assert f == pytest.approx(2 * tp / (2 * tp + fp + fn))
        if tp + fp and tp + fn and tp:
            assert f == pytest.approx(2 * pr * rc / (pr + rc))


def test_classification_edge_cases_warn_by_name():
    with pytest.warns(UndefinedMetricWarning, match="precision"):
        assert math.isnan(M.precision([1, 0], [0, 0]))
    with pytest.warns(UndefinedMetricWarning, match="recall"):
        assert math.isnan(M.recall([0, 0], [1, 0]))
    with pytest.warns(UndefinedMetricWarning, match="f1"):
        assert math.isnan(M.f1([0, 0], [0, 0]))
    assert M.f1([1, 0], [0, 0]) == 0.0  # positives exist, none predicted
    assert M.precision(["a", "b"], ["a", "a"], positive="a") == 0.5
    assert M.recall([True, False], [True, True]) == 1.0


# -- beyond accuracy ----------------------------------------------------------------------------

def test_catalog_coverage():
    rec = np.array([[0, 1, 2], [1, 3, 0]])
    assert M.catalog_coverage(rec, n_items=8) == 4 / 8
    assert M.catalog_coverage(rec, n_items=8, k=1) == 2 / 8


def test_item_popularity_and_novelty():
    inter = sp.csr_array((np.array([0.0, 3.0, 1.0, 2.0]),
                          (np.array([0, 1, 1, 3]), np.array([0, 0, 1, 2]))), shape=(4, 3))
    pop = M.item_popularity(inter)  # stored 0 counts as an interaction
    np.testing.assert_allclose(pop, [0.5, 0.25, 0.25])
    res = M.novelty(np.array([[0, 1], [2, 0]]), pop)
    np.testing.assert_allclose(res.per_user, [(1 + 2) / 2, (2 + 1) / 2])
    assert M.novelty(np.array([[0, 1]]), pop, k=1).value == pytest.approx(1.0)
    with pytest.raises(ValueError, match=r"popularity 0"):
        M.novelty(np.array([[0, 1]]), [0.5, 0.0])


@settings(max_examples=30)
@given(seed=st.integers(0, 10_000), n_users=st.integers(1, 5), L=st.integers(2, 5),
       use_k=st.booleans())
def test_intra_list_diversity_against_pair_loop(seed, n_users, L, use_k):
    rng = np.random.default_rng(seed)
    n_items = 8
    vec = rng.normal(size=(n_items, 3))
    rec = np.array([rng.permutation(n_items)[:L] for _ in range(n_users)])
    k = 2 if use_k else None
    Lk = 2 if use_k else L
    cos = vec @ vec.T / np.outer(np.linalg.norm(vec, axis=1), np.linalg.norm(vec, axis=1))
    expected = []
    for row in rec[:, :Lk]:
        sims = [cos[a, b] for ia, a in enumerate(row) for ib, b in enumerate(row) if ia != ib]
        expected.append(1 - np.mean(sims))
    got = M.intra_list_diversity(rec, item_vectors=vec, k=k)
    np.testing.assert_allclose(got.per_user, expected, atol=1e-12)
    # The same cosine given as a precomputed similarity, dense and sparse.
    np.testing.assert_allclose(M.intra_list_diversity(rec, similarity=cos, k=k).per_user,
                               expected, atol=1e-12)
    np.testing.assert_allclose(
        M.intra_list_diversity(rec, similarity=sp.csr_array(cos), k=k).per_user,
        expected, atol=1e-12)
    # A sparse similarity with absent entries (read as 0) against its dense form.
    pos = np.where(cos > 0, cos, 0.0)
    np.testing.assert_allclose(
        M.intra_list_diversity(rec, similarity=sp.csr_array(pos), k=k).per_user,
        M.intra_list_diversity(rec, similarity=pos, k=k).per_user, atol=1e-12)


def test_cooccurrence_similarity_hand_case():
    inter = sp.csr_array(np.array([[1, 1, 0], [1, 0, 0], [1, 1, 1]]))
    s = M.cooccurrence_similarity(inter).toarray()
    assert s[0, 1] == pytest.approx(2 / math.sqrt(3 * 2))
    assert s[1, 2] == pytest.approx(1 / math.sqrt(2 * 1))
    np.testing.assert_allclose(s, s.T)
    d = M.intra_list_diversity(np.array([[0, 1]]), similarity=s).value
    assert d == pytest.approx(1 - 2 / math.sqrt(6))


def test_serendipity_hand_case_and_per_user_baseline():
    rec = np.array([[0, 5, 6], [1, 2, 3]])
    rel = [[0, 5], [2, 9]]
    pop = np.array([0, 1, 2, 3])
    res = M.serendipity(rec, rel, pop, k=3)
    # user 0: relevant 0 (expected), 5 (unexpected) -> 1/3; user 1: 2 is expected -> 0
    np.testing.assert_allclose(res.per_user, [1 / 3, 0.0])
    per_user_base = np.array([[5, 6, 7], [9, 8, 7]])
    np.testing.assert_allclose(M.serendipity(rec, rel, per_user_base, k=3).per_user,
                               [1 / 3, 1 / 3])
    with pytest.raises(ValueError, match="`baseline` rows must not repeat"):
        M.serendipity(rec, rel, [1, 1], k=2)


# -- bad input ----------------------------------------------------------------------------------

REC = np.array([[0, 1], [2, 3]])
REL = [[0], [3]]


@pytest.mark.parametrize("call, exc, match", [
    pytest.param(lambda: M.ndcg_at_k(REC, REL, k=0), ValueError, r"`k` must be >= 1; got 0",
                 id="k-zero"),
    pytest.param(lambda: M.ndcg_at_k(REC, REL, k=1.5), TypeError, r"`k` must be an integer",
                 id="k-float"),
    pytest.param(lambda: M.ndcg_at_k(REC, REL, k=True), TypeError, r"`k` must be an integer",
                 id="k-bool"),
    pytest.param(lambda: M.ndcg_at_k(np.array([[0, 0]]), [[0]], k=1), ValueError,
                 r"row 0 contains item 0 more than once", id="duplicate-recommended"),
    pytest.param(lambda: M.ndcg_at_k(np.array([[0, -1]]), [[0]], k=1), ValueError,
                 r"`recommended` item ids must be >= 0; got -1 at \[0, 1\]", id="negative-id"),
    pytest.param(lambda: M.ndcg_at_k(REC.astype(float), REL, k=1), TypeError,
                 r"`recommended` must be an integer array", id="float-recommended"),
    pytest.param(lambda: M.ndcg_at_k(REC[0], REL, k=1), ValueError,
                 r"`recommended` must be 2-dimensional", id="1d-recommended"),
    pytest.param(lambda: M.ndcg_at_k(REC, [[0]], k=1), ValueError,
                 r"`relevant` must have one entry per row of `recommended` \(2\); got 1",
                 id="relevant-length"),
    pytest.param(lambda: M.ndcg_at_k(REC, [[0, 0], [1]], k=1), ValueError,
                 r"`relevant\[0\]` must not repeat an item; got item 0", id="relevant-dup"),
    pytest.param(lambda: M.ndcg_at_k(REC, [[0.5], [1]], k=1), TypeError,
                 r"`relevant\[0\]` must hold integer item ids", id="relevant-float"),
    pytest.param(lambda: M.ndcg_at_k(REC, 5, k=1), TypeError,
                 r"`relevant` must be a sequence", id="relevant-int"),
    pytest.param(lambda: M.ndcg_at_k(REC, sp.csr_array(np.array([[2, 0, 0, 0], [0, 0, 0, 1]])),
                                     k=1), ValueError, r"binary \(0/1\); got 2", id="non-binary"),
    pytest.param(lambda: M.ndcg_at_k(REC, sp.csr_array(np.eye(2)), k=1), ValueError,
                 r"must be < 2 \(columns of `relevant`\); got 2", id="sparse-too-narrow"),
    pytest.param(lambda: M.map_at_k(REC, REL, k=1, normalization="x"), ValueError,
                 r"`normalization` must be 'truncated' or 'trec'; got 'x'", id="map-norm"),
    pytest.param(lambda: M.mae([1, 2], [1]), ValueError, r"same length; got 2 and 1",
                 id="length"),
    pytest.param(lambda: M.mae([1, np.nan], [1, 1]), ValueError,
                 r"`y_true` must be finite; got nan at index 1", id="nan"),
    pytest.param(lambda: M.rmse([1, 2], [1, np.inf]), ValueError,
                 r"`y_pred` must be finite; got inf at index 1", id="inf"),
    pytest.param(lambda: M.mse(["a"], [1]), TypeError, r"`y_true` must hold real numbers",
                 id="str-regression"),
    pytest.param(lambda: M.mse([[1]], [[1]]), ValueError, r"1-dimensional; got shape",
                 id="2d-regression"),
    pytest.param(lambda: M.precision([1, 0], [1]), ValueError, r"same length",
                 id="label-length"),
    pytest.param(lambda: M.recall(np.array([1, None]), [1, 0]), TypeError,
                 r"`y_true` must hold labels", id="object-labels"),
    pytest.param(lambda: M.accuracy([1.0, np.nan], [1, 0]), ValueError,
                 r"`y_true` must not contain nan or inf; got nan at index 1", id="nan-labels"),
    pytest.param(lambda: M.catalog_coverage(REC, n_items=3), ValueError,
                 r"`recommended` item ids must be < n_items = 3; got 3 at \[1, 1\]",
                 id="coverage-range"),
    pytest.param(lambda: M.catalog_coverage(REC, n_items=0), ValueError,
                 r"`n_items` must be >= 1; got 0", id="coverage-n-items"),
    pytest.param(lambda: M.novelty(REC, [0.1, 0.2, 1.5, 0.1]), ValueError,
                 r"`popularity` must be in \[0, 1\]; got 1.5 at index 2", id="popularity"),
    pytest.param(lambda: M.item_popularity(np.eye(2)), TypeError,
                 r"`interactions` must be a scipy.sparse", id="popularity-dense"),
    pytest.param(lambda: M.intra_list_diversity(REC), ValueError,
                 r"Exactly one of `item_vectors` and `similarity`.*neither", id="ild-neither"),
    pytest.param(lambda: M.intra_list_diversity(REC, item_vectors=np.ones((4, 2)),
                                                similarity=np.eye(4)), ValueError,
                 r"got both", id="ild-both"),
    pytest.param(lambda: M.intra_list_diversity(REC, item_vectors=np.ones((4, 2)), k=1),
                 ValueError, r"at least 2 items; got min\(k, n_ranked\) = 1", id="ild-short"),
    pytest.param(lambda: M.intra_list_diversity(REC, item_vectors=np.zeros((4, 2))),
                 ValueError, r"item 0 at \[0, 0\] is zero", id="ild-zero-vector"),
    pytest.param(lambda: M.intra_list_diversity(REC, similarity=np.ones((4, 3))), ValueError,
                 r"`similarity` must be square", id="ild-not-square"),
    pytest.param(lambda: M.item_popularity(sp.csr_array(np.array([[1.0, np.nan]]))), ValueError,
                 r"`interactions` must be finite; got nan at \(0, 1\)", id="popularity-nan"),
    pytest.param(lambda: M.intra_list_diversity(REC, item_vectors=np.full((4, 2), np.inf)),
                 ValueError, r"`item_vectors` must be finite; got inf at \[0, 0\]",
                 id="ild-inf"),
    pytest.param(lambda: M.intra_list_diversity(REC, similarity=np.full((4, 4), np.nan)),
                 ValueError, r"`similarity` must be finite; got nan", id="ild-sim-nan"),
    pytest.param(lambda: M.serendipity(REC, REL, np.zeros((3, 2), int), k=1), ValueError,
                 r"`baseline` must be 1-D or have one row per row", id="baseline-rows"),
])
def test_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_inputs_not_mutated():
    rec = np.array([[2, 0, 1]])
    rel = [np.array([1, 0])]
    before = rec.copy(), rel[0].copy()
    M.map_at_k(rec, rel, k=3)
    M.serendipity(rec, rel, np.array([1, 2]), k=2)
    np.testing.assert_array_equal(rec, before[0])
    np.testing.assert_array_equal(rel[0], before[1])
