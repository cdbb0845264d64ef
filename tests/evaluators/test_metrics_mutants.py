"""Survivors of ``evaluators/_metrics.py``'s mutation run (issue 27, docs/testing.md): every
refusal and every :class:`UndefinedMetricWarning` word for word, and the numbers the
existing tests could not tell apart, each on an input small enough to compute by hand (or by a
plain loop in the test): per-user values that differ between users, items never seen, boundary
values (a popularity of exactly 1, one user, a cut-off longer than the baseline's), ids above
2^53, the chunked loops of the diversity cut into chunks of 2."""

import inspect
import math
import os
import re
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import evaluators._metrics as _m
from evaluators import metrics as M
from evaluators.metrics import UndefinedMetricWarning


def exactly(err, text):
    return pytest.raises(err, match="^" + re.escape(text) + "$")


def warns_exactly(text):
    return pytest.warns(UndefinedMetricWarning, match="^" + re.escape(text) + "$")


def located(caught, line):
    """(category, file, line) of the warnings caught, for comparison with one warning at the
    test's ``line``. Under mutmut every function is called through its trampoline (two
    frames of mutmut's own), so no stacklevel can point at the caller: there only the
    category is compared (docs/testing.md; the ordinary suite checks the line)."""
    if "MUTANT_UNDER_TEST" in os.environ:
        return [(w.category, __file__, line) for w in caught]
    return [(w.category, w.filename, w.lineno) for w in caught]


REC = np.array([[0, 1], [2, 3]])
REL = [[0], [3]]

# -- every refusal, word for word -----------------------------------------------------------

REFUSALS = [
    # regression: _real_1d, _pair, mape, tre
    (lambda: M.mse(["a"], [1.0]), TypeError, "`y_true` must hold real numbers; got dtype <U1."),
    (lambda: M.mae([1.0], [None]), TypeError,
     "`y_pred` must hold real numbers; got dtype object."),
    (lambda: M.mse([[1.0]], [[1.0]]), ValueError,
     "`y_true` must be 1-dimensional; got shape (1, 1)."),
    (lambda: M.mae([1.0, 2.0], [1.0, 2.0, 3.0]), ValueError,
     "`y_true` and `y_pred` must have the same length; got 2 and 3."),
    (lambda: M.rmse([1.0, 2.0, 3.0], [1.0, 1.0, -np.inf]), ValueError,
     "`y_pred` must be finite; got -inf at index 2."),
    (lambda: M.mape([1.0, 2.0, 0.0], [1.0, 1.0, 1.0]), ValueError,
     "`y_true` must be non-zero for `mape` (relative error); got 0.0 at index 2. Use `tre` "
     "for data with zero targets."),
    (lambda: M.tre([0.0, 0.0, 0.0], [1.0, 1.0, 1.0]), ValueError,
     "`y_true` must not be all zero for `tre` (sum |y_true| is the denominator); got 3 zeros."),
    # classification: _labels
    (lambda: M.precision(np.array([1, None]), [1, 0]), TypeError,
     "`y_true` must hold labels (bool, int, float or str); got dtype object."),
    (lambda: M.recall([1, 0], np.array([1, None])), TypeError,
     "`y_pred` must hold labels (bool, int, float or str); got dtype object."),
    (lambda: M.f1([[1, 0]], [[1, 0]]), ValueError,
     "`y_true` must be 1-dimensional; got shape (1, 2)."),
    (lambda: M.accuracy([1, 0], [0.0, 1.0, np.inf]), ValueError,
     "`y_pred` must not contain nan or inf; got inf at index 2."),
    (lambda: M.accuracy([1, 0, 1], [1, 0]), ValueError,
     "`y_true` and `y_pred` must have the same length; got 3 and 2."),
    (lambda: M.precision(["1", "0"], [1, 0]), TypeError,
     "`y_true` and `y_pred` must hold labels of the same kind (both strings or both numbers); "
     "got dtype <U1 and int64."),
    (lambda: M.recall([1, 0], ["1", "0"]), TypeError,
     "`y_true` and `y_pred` must hold labels of the same kind (both strings or both numbers); "
     "got dtype int64 and <U1."),
    # ranking: k, recommended, relevant
    (lambda: M.hits_at_k(REC, REL, k=True), TypeError, "`k` must be an integer; got bool True."),
    (lambda: M.hits_at_k(REC, REL, k=1.5), TypeError, "`k` must be an integer; got float 1.5."),
    (lambda: M.hits_at_k(REC, REL, k="2"), TypeError, "`k` must be an integer; got str '2'."),
    (lambda: M.hits_at_k(REC, REL, k=0), ValueError, "`k` must be >= 1; got 0."),
    (lambda: M.hits_at_k(REC, REL, k=-3), ValueError, "`k` must be >= 1; got -3."),
    (lambda: M.hits_at_k(REC.astype(float), REL, k=1), TypeError,
     "`recommended` must be an integer array of item ids; got dtype float64."),
    (lambda: M.hits_at_k(REC[0], REL, k=1), ValueError,
     "`recommended` must be 2-dimensional (n_users, n_ranked); got shape (2,)."),
    (lambda: M.hits_at_k(np.zeros((2, 0), int), REL, k=1), ValueError,
     "`recommended` must rank at least one item per user; got shape (2, 0)."),
    (lambda: M.hits_at_k(np.array([[0, 1], [-1, 2]]), REL, k=1), ValueError,
     "`recommended` item ids must be >= 0; got -1 at [1, 0]."),
    (lambda: M.hits_at_k(np.array([[0, 1, 4], [5, 2, 2]]), REL, k=1), ValueError,
     "`recommended` rows must not repeat an item; row 1 contains item 2 more than once."),
    (lambda: M.hits_at_k(REC, 5, k=1), TypeError,
     "`relevant` must be a sequence of per-user id arrays or a scipy.sparse matrix; got int."),
    (lambda: M.hits_at_k(REC, "ab", k=1), TypeError,
     "`relevant` must be a sequence of per-user id arrays or a scipy.sparse matrix; got str."),
    (lambda: M.hits_at_k(REC, b"ab", k=1), TypeError,
     "`relevant` must be a sequence of per-user id arrays or a scipy.sparse matrix; got bytes."),
    (lambda: M.hits_at_k(REC, sp.coo_array((np.ones(4), ([1, 0, 0, 1], [3, 0, 2, 3])),
                                           shape=(2, 4)), k=1), ValueError,
     "`relevant` stores (1, 3) more than once."),
    (lambda: M.hits_at_k(REC, [[0], [1], [2]], k=1), ValueError,
     "`relevant` must have one entry per row of `recommended` (2); got 3."),
    (lambda: M.hits_at_k(REC, [[0], [0.5]], k=1), TypeError,
     "`relevant[1]` must hold integer item ids; got dtype float64."),
    (lambda: M.hits_at_k(REC, [[0], [[1]]], k=1), ValueError,
     "`relevant[1]` must be 1-dimensional; got shape (1, 1)."),
    (lambda: M.hits_at_k(REC, [[0], [0, 1, -2, -3]], k=1), ValueError,
     "`relevant[1]` item ids must be >= 0; got -2."),
    (lambda: M.hits_at_k(REC, [[0], [5, 3, 1, 3]], k=1), ValueError,
     "`relevant[1]` must not repeat an item; got item 3 more than once."),
    (lambda: M.hits_at_k(REC, sp.csr_array(np.ones((3, 4))), k=1), ValueError,
     "`relevant` must have one row per row of `recommended` (2); got shape (3, 4)."),
    (lambda: M.hits_at_k(REC, sp.csr_array(np.ones((2, 4), dtype=complex)), k=1), TypeError,
     "`relevant` must hold 0/1 values; got dtype complex128."),
    (lambda: M.hits_at_k(REC, sp.csr_array(np.array([[1, 0, 0, 0], [0, 1, 2, 0]])), k=1),
     ValueError, "`relevant` must be binary (0/1); got 2 at (1, 2)."),
    (lambda: M.hits_at_k(REC, sp.coo_array((np.ones(3), ([0, 1, 1], [0, 3, 3])), shape=(2, 4)),
                         k=1), ValueError, "`relevant` stores (1, 3) more than once."),
    (lambda: M.hits_at_k(np.array([[0, 1], [4, 2]]), sp.csr_array(np.eye(2, 4)), k=1),
     ValueError, "`recommended` item ids must be < 4 (columns of `relevant`); got 4 at [1, 0]."),
    (lambda: M.map_at_k(REC, REL, k=1, normalization="TREC"), ValueError,
     "`normalization` must be 'truncated' or 'trec'; got 'TREC'."),
    # beyond accuracy
    (lambda: M.catalog_coverage(np.array([[0, 1], [2, 3], [3, 1]]), n_items=3), ValueError,
     "`recommended` item ids must be < n_items = 3; got 3 at [1, 1]."),
    (lambda: M.catalog_coverage(REC, n_items=0), ValueError, "`n_items` must be >= 1; got 0."),
    (lambda: M.catalog_coverage(REC, n_items=4, k=0), ValueError, "`k` must be >= 1; got 0."),
    (lambda: M.item_popularity(np.eye(2)), TypeError,
     "`interactions` must be a scipy.sparse users x items matrix; got ndarray."),
    (lambda: M.item_popularity(sp.coo_array(np.array([1.0, 0.0, 2.0]))), ValueError,
     "`interactions` must be 2-dimensional; got shape (3,)."),
    (lambda: M.item_popularity(sp.csr_array((0, 3))), ValueError,
     "`interactions` must have at least one user; got shape (0, 3)."),
    # a nan first in its row: the row is found with side="right" (row 2, not 1)
    (lambda: M.item_popularity(sp.csr_array(np.array([[1.0, 0], [0, 0], [np.nan, 2.0]]))),
     ValueError, "`interactions` must be finite; got nan at (2, 0)."),
    (lambda: M.cooccurrence_similarity(sp.csr_array(np.array([[0, 1.0], [0, -np.inf]]))),
     ValueError, "`interactions` must be finite; got -inf at (1, 1)."),
    (lambda: M.novelty(REC, [0.1, 0.2, 0.5, -0.1]), ValueError,
     "`popularity` must be in [0, 1]; got -0.1 at index 3."),
    (lambda: M.novelty(REC, [0.1, 1.5, 0.5, 0.1]), ValueError,
     "`popularity` must be in [0, 1]; got 1.5 at index 1."),
    (lambda: M.novelty(REC, [0.1, 0.2, 0.5]), ValueError,
     "`recommended` item ids must be < n_items = 3; got 3 at [1, 1]."),
    (lambda: M.novelty(np.array([[0, 1], [2, 3]]), [0.5, 0.5, 0.0, 0.5]), ValueError,
     "`popularity` must be > 0 for every recommended item (-log2 0 is infinite); item 2 at "
     "[1, 0] has popularity 0."),
    (lambda: M.novelty(REC, np.full(4, 0.5), k=0), ValueError, "`k` must be >= 1; got 0."),
    (lambda: M.intra_list_diversity(REC), ValueError,
     "Exactly one of `item_vectors` and `similarity` must be given; got neither."),
    (lambda: M.intra_list_diversity(REC, item_vectors=np.ones((4, 2)), similarity=np.eye(4)),
     ValueError, "Exactly one of `item_vectors` and `similarity` must be given; got both."),
    (lambda: M.intra_list_diversity(REC, item_vectors=np.ones((4, 2)), k=0), ValueError,
     "`k` must be >= 1; got 0."),
    (lambda: M.intra_list_diversity(REC, item_vectors=np.array([["a", "b"]] * 4)), TypeError,
     "`item_vectors` must hold real numbers; got dtype <U1."),
    (lambda: M.intra_list_diversity(REC, item_vectors=np.ones(4)), ValueError,
     "`item_vectors` must be 2-dimensional (n_items, d); got shape (4,)."),
    (lambda: M.intra_list_diversity(REC, item_vectors=np.array(
        [[1.0, 0], [0, 1], [1, np.nan], [1, 1]])), ValueError,
     "`item_vectors` must be finite; got nan at [2, 1]."),
    (lambda: M.intra_list_diversity(REC, item_vectors=np.ones((4, 2)), k=1), ValueError,
     "`intra_list_diversity` needs lists of at least 2 items; got min(k, n_ranked) = 1."),
    (lambda: M.intra_list_diversity(np.array([[0, 1], [3, 2]]), item_vectors=np.array(
        [[1.0, 0], [0, 1], [0, 0], [1, 1]])), ValueError,
     "`item_vectors` must be non-zero for recommended items (cosine is undefined); item 2 at "
     "[1, 1] is zero."),
    (lambda: M.intra_list_diversity(REC, similarity=np.array([["a"] * 4] * 4)), TypeError,
     "`similarity` must hold real numbers; got dtype <U1."),
    (lambda: M.intra_list_diversity(REC, similarity=np.ones((4, 3))), ValueError,
     "`similarity` must be square (n_items, n_items); got shape (4, 3)."),
    (lambda: M.intra_list_diversity(REC, similarity=np.ones(4)), ValueError,
     "`similarity` must be square (n_items, n_items); got shape (4,)."),
    (lambda: M.intra_list_diversity(REC, similarity=sp.csr_array(np.ones((4, 3)))), ValueError,
     "`similarity` must be square (n_items, n_items); got shape (4, 3)."),
    (lambda: M.intra_list_diversity(REC, similarity=np.array(
        [[1.0, 0, 0, 0], [0, 1, np.inf, 0], [0, 0, 1, -np.inf], [0, 0, 0, 1]])), ValueError,
     "`similarity` must be finite; got inf."),
    (lambda: M.intra_list_diversity(REC, similarity=sp.csr_array(np.array(
        [[1.0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, np.nan], [0, 0, 0, 1]]))), ValueError,
     "`similarity` must be finite; got nan."),
    (lambda: M.serendipity(REC, REL, np.zeros((3, 2), int), k=1), ValueError,
     "`baseline` must be 1-D or have one row per row of `recommended` (2); got shape (3, 2)."),
    (lambda: M.serendipity(REC, REL, np.zeros((2, 1, 1), int), k=1), ValueError,
     "`baseline` must be 1-D or have one row per row of `recommended` (2); got shape "
     "(2, 1, 1)."),
    (lambda: M.serendipity(REC, REL, [0, 2, 1, 2], k=1), ValueError,
     "`baseline` rows must not repeat an item; row 0 contains item 2 more than once."),
    (lambda: M.serendipity(REC, REL, [0.0, 1.0], k=1), TypeError,
     "`baseline` must be an integer array of item ids; got dtype float64."),
    (lambda: M.serendipity(REC, REL, [[0, 1], [3, -4]], k=1), ValueError,
     "`baseline` item ids must be >= 0; got -4 at [1, 1]."),
]


@pytest.mark.parametrize("call, err, text", REFUSALS, ids=[r[2][:48] for r in REFUSALS])
def test_every_refusal_word_for_word(call, err, text):
    with exactly(err, text):
        call()


# -- every UndefinedMetricWarning, word for word ----------------------------------------------

@pytest.mark.parametrize("f", [M.mae, M.mse, M.rmse, M.mape, M.tre, M.accuracy])
def test_empty_input_warns_word_for_word(f):
    with warns_exactly(f"`{f.__name__}` of 0 observations is undefined; returning nan."):
        assert math.isnan(f([], []))


def test_the_error_metrics_warning_points_at_the_callers_line():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        M.rmse([], [])
    assert located(caught, line) == [(UndefinedMetricWarning, __file__, line)]


@pytest.mark.parametrize("positive, shown", [(1, "1"), ("a", "'a'")])
def test_classification_warnings_word_for_word(positive, shown):
    other = 0 if positive == 1 else "b"
    t, p = [other, positive], [other, other]
    with warns_exactly(f"`precision` is undefined: no prediction equals the positive label "
                       f"{shown}; returning nan."):
        assert math.isnan(M.precision(t, p, positive=positive))
    with warns_exactly(f"`recall` is undefined: no true label equals the positive label "
                       f"{shown}; returning nan."):
        assert math.isnan(M.recall(p, t, positive=positive))
    with warns_exactly(f"`f1` is undefined: neither `y_true` nor `y_pred` contains the "
                       f"positive label {shown}; returning nan."):
        assert math.isnan(M.f1(p, p, positive=positive))


RANKING = [M.hits_at_k, M.hit_rate_at_k, M.precision_at_k, M.recall_at_k, M.dcg_at_k,
           M.ndcg_at_k, M.map_at_k, M.mrr_at_k]


@pytest.mark.parametrize("f", RANKING + [lambda r, rel, k: M.serendipity(r, rel, [0], k=k)],
                         ids=[f.__name__ for f in RANKING] + ["serendipity"])
def test_no_user_with_a_relevant_item_warns_word_for_word(f):
    name = getattr(f, "__name__", "<lambda>")
    name = "serendipity" if name == "<lambda>" else name
    rec = np.array([[0, 1], [2, 3], [1, 0]])
    with warns_exactly(f"`{name}` is undefined: no user could be evaluated (3 users, all "
                       f"skipped); returning nan."):
        res = f(rec, [[], [], []], k=2)
    assert math.isnan(res.value) and math.isnan(float(res))
    assert (res.n_evaluated, res.n_skipped) == (0, 3)
    assert np.isnan(res.per_user).all() and res.per_user.dtype == np.float64


@pytest.mark.parametrize("name, call", [
    ("novelty", lambda rec: M.novelty(rec, [0.5, 0.5])),
    ("intra_list_diversity", lambda rec: M.intra_list_diversity(rec, item_vectors=np.eye(2))),
])
def test_no_user_at_all_warns_word_for_word(name, call):
    with warns_exactly(f"`{name}` is undefined: no user could be evaluated (0 users, all "
                       f"skipped); returning nan."):
        res = call(np.zeros((0, 2), dtype=int))
    assert math.isnan(res.value) and (res.n_evaluated, res.n_skipped) == (0, 0)
    assert res.per_user.shape == (0,)


# -- beyond accuracy: numbers by hand -----------------------------------------------------------

def test_item_popularity_keeps_items_never_seen_and_reads_any_stored_entry():
    # 3 users x 5 items; items 1 and 4 (the last column) are never seen; a stored 0 counts.
    inter = sp.csr_array((np.array([2.0, 0.0, 1.0, 5.0]), (np.array([0, 1, 2, 2]),
                                                           np.array([0, 0, 2, 3]))),
                         shape=(3, 5))
    pop = M.item_popularity(inter)
    np.testing.assert_array_equal(pop, [2 / 3, 0.0, 1 / 3, 1 / 3, 0.0])
    # one user: the shares are 0 or 1
    np.testing.assert_array_equal(M.item_popularity(sp.csr_array(np.array([[0, 3, 0]]))),
                                  [0.0, 1.0, 0.0])
    # no item at all is not an error: an empty vector
    assert M.item_popularity(sp.csr_array((2, 0))).shape == (0,)
    # a CSR matrix given with duplicate entries is one interaction per (user, item)
    dup = sp.csr_array((np.array([1.0, 1.0, 1.0]), np.array([1, 1, 0]), np.array([0, 2, 3])),
                       shape=(2, 3))
    np.testing.assert_array_equal(M.item_popularity(dup), [0.5, 0.5, 0.0])


def test_a_complex_interaction_matrix_is_read_as_its_real_part():
    # the matrix is converted to float64 once: a nan real part is refused as "nan", a
    # complex entry with a finite real part is an interaction like any other
    bad = sp.csr_array(np.array([[1.0 + 0j, 0], [complex(np.nan, 1.0), 0]]))
    with pytest.warns(np.exceptions.ComplexWarning), \
            exactly(ValueError, "`interactions` must be finite; got nan at (1, 0)."):
        M.item_popularity(bad)
    ok = sp.csr_array(np.array([[1.0 + 0j, 0], [complex(2.0, np.nan), 0]]))
    with pytest.warns(np.exceptions.ComplexWarning):
        np.testing.assert_array_equal(M.item_popularity(ok), [1.0, 0.0])


def test_cooccurrence_similarity_leaves_items_never_seen_empty():
    # items 0..3; item 2 is never seen; U_0 = {0, 1}, U_1 = {0}, U_3 = {1, 2}
    inter = sp.csr_array(np.array([[1, 1, 0, 0], [1, 0, 0, 1], [0, 0, 0, 1]]))
    s = M.cooccurrence_similarity(inter)
    assert s.shape == (4, 4)
    expected = np.zeros((4, 4))
    sizes = {0: 2, 1: 1, 3: 2}
    users = {0: {0, 1}, 1: {0}, 3: {1, 2}}
    for i in sizes:
        for j in sizes:
            expected[i, j] = len(users[i] & users[j]) / math.sqrt(sizes[i] * sizes[j])
    np.testing.assert_allclose(s.toarray(), expected, rtol=1e-15)
    assert s.toarray()[2].sum() == 0 and s.toarray()[:, 2].sum() == 0
    # the last item never seen: the shape is kept
    assert M.cooccurrence_similarity(sp.csr_array(np.array([[1, 0]]))).shape == (2, 2)


def test_novelty_per_user_and_a_popularity_of_exactly_one():
    pop = [1.0, 0.5, 0.25, 0.125]
    res = M.novelty(np.array([[0, 1], [2, 3], [3, 1]]), pop)
    # -log2: 0, 1, 2, 3
    np.testing.assert_array_equal(res.per_user, [0.5, 2.5, 2.0])
    assert res.value == (0.5 + 2.5 + 2.0) / 3
    assert (res.n_evaluated, res.n_skipped) == (3, 0)
    assert M.novelty(np.array([[0]]), pop).value == 0.0  # p = 1 is legal: no information
    np.testing.assert_array_equal(M.novelty(np.array([[3, 0], [2, 1]]), pop, k=1).per_user,
                                  [3.0, 2.0])


def test_catalog_coverage_by_hand():
    rec = np.array([[4, 1, 0], [1, 4, 2]])
    assert M.catalog_coverage(rec, n_items=5) == 4 / 5
    assert M.catalog_coverage(rec, n_items=5, k=2) == 2 / 5
    assert M.catalog_coverage(rec, n_items=4 + 1, k=10) == 4 / 5
    assert M.catalog_coverage(np.zeros((0, 3), dtype=int), n_items=5) == 0.0


def test_serendipity_by_hand():
    # user 0: relevant {5, 0, 7}; user 1: relevant {1}; user 2: nothing relevant (skipped)
    rec = np.array([[5, 0, 6, 7], [1, 2, 3, 4], [0, 1, 2, 3]])
    rel = [[5, 0, 7], [1], []]
    base = [0, 1, 2, 5]  # k = 3: expected items {0, 1, 2}; 5 is beyond the baseline's top k
    res = M.serendipity(rec, rel, base, k=3)
    # user 0: top 3 = 5, 0, 6: relevant 5 (unexpected), 0 (expected) -> 1/3
    # user 1: top 3 = 1, 2, 3: relevant 1 is expected -> 0
    np.testing.assert_array_equal(res.per_user[:2], [1 / 3, 0.0])
    assert math.isnan(res.per_user[2]) and (res.n_evaluated, res.n_skipped) == (2, 1)
    assert res.value == (1 / 3 + 0.0) / 2
    # k = 4: top 4 = 5, 0, 6, 7 and 5 is expected now: only 7 -> 1/4
    np.testing.assert_array_equal(M.serendipity(rec, rel, base, k=4).per_user[:2],
                                  [1 / 4, 0.0])
    # a user with one relevant item counts
    one = M.serendipity(np.array([[3, 4]]), [[4]], [0, 1], k=2)
    assert (one.value, one.n_evaluated) == (0.5, 1)


def test_serendipity_compares_ids_as_integers_above_2_53():
    big = 2**53
    rec = np.array([[big + 1, 0]])
    # big + 1 is relevant and not in the baseline (which holds big, a different id)
    res = M.serendipity(rec, [[big + 1]], np.array([big, 1]), k=2)
    assert res.value == 0.5
    res = M.serendipity(rec, [[big + 1]], np.array([big + 1, 1]), k=2)
    assert res.value == 0.0


def test_ranking_docstrings_are_rendered_with_their_sections_in_place():
    # the shared Parameters and Returns sections replace the placeholders, and every line
    # of them keeps its indentation: "Parameters" stands at the margin of the docstring,
    # above its "----------" (numpydoc), not indented by the placeholder's own indentation
    for f in RANKING:
        doc = inspect.getdoc(f)
        assert "{params}" not in doc and "{returns}" not in doc
        for section in (_m._RANKING_PARAMS, _m._RANKING_RETURNS):
            assert inspect.cleandoc(section) in doc
            assert "\n" + inspect.cleandoc(section).splitlines()[0] + "\n" in doc


@pytest.mark.parametrize("f", RANKING)
def test_a_ranking_measures_warning_points_at_the_callers_line(f):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        f(np.array([[0, 1]]), [[]], k=1)
    assert located(caught, line) == [(UndefinedMetricWarning, __file__, line)]


@pytest.mark.parametrize("call", [
    lambda: M.novelty(np.zeros((0, 2), dtype=int), [0.5, 0.5]),
    lambda: M.intra_list_diversity(np.zeros((0, 2), dtype=int), item_vectors=np.eye(2)),
    lambda: M.serendipity(np.array([[0, 1]]), [[]], [0], k=1),
    lambda: M.precision([0], [0]), lambda: M.recall([0], [0]), lambda: M.f1([0], [0]),
    lambda: M.accuracy([], []), lambda: M.mae([], []), lambda: M.mse([], []),
    lambda: M.mape([], []), lambda: M.tre([], []),
], ids=["novelty", "intra_list_diversity", "serendipity", "precision", "recall", "f1",
        "accuracy", "mae", "mse", "mape", "tre"])
def test_every_other_warning_points_at_the_callers_line(call):
    # the lambda's own line is the caller's line here
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    line = call.__code__.co_firstlineno
    assert located(caught, line) == [(UndefinedMetricWarning, __file__, line)]


# -- intra-list diversity ---------------------------------------------------------------------

def _ild_loop(rec, sim):
    """1 - mean over ordered pairs i != j of sim[i, j], one list at a time, in float64."""
    out = []
    for row in rec:
        pairs = [float(sim[a, b]) for ia, a in enumerate(row) for ib, b in enumerate(row)
                 if ia != ib]
        out.append(1.0 - math.fsum(pairs) / len(pairs))
    return out


def test_diversity_reads_a_float32_similarity_in_float64():
    # thirds in float32: summing them in float32 or float64 gives different last digits
    sim = np.full((5, 5), np.float32(1 / 3), dtype=np.float32)
    sim[np.arange(5), np.arange(5)] = 1
    sim[0, 3] = sim[3, 0] = np.float32(0.1)
    rec = np.array([[0, 1, 2, 3, 4], [4, 3, 2, 1, 0], [3, 0, 1, 2, 4]])
    expected = _ild_loop(rec, sim.astype(np.float64))
    for s in (sim, sp.csr_array(sim)):
        got = M.intra_list_diversity(rec, similarity=s).per_user
        np.testing.assert_allclose(got, expected, rtol=1e-15, atol=0)


def test_diversity_of_a_non_symmetric_similarity_counts_both_directions():
    sim = np.array([[1.0, 0.8, 0.0], [0.2, 1.0, 0.5], [0.0, 0.0, 1.0]])
    rec = np.array([[0, 1], [1, 2], [1, 0], [2, 0]])
    # (0.8 + 0.2) / 2, (0.5 + 0) / 2, ..., (0 + 0) / 2
    expected = [1 - 0.5, 1 - 0.25, 1 - 0.5, 1.0]
    for s in (sim, sp.csr_array(sim), sp.csc_array(sim)):
        np.testing.assert_allclose(M.intra_list_diversity(rec, similarity=s).per_user,
                                   expected, rtol=1e-15)
    # a sparse similarity with no stored entry at all: every pair is 0, diversity 1
    empty = sp.csr_array((3, 3))
    np.testing.assert_array_equal(M.intra_list_diversity(rec, similarity=empty).per_user,
                                  [1.0] * 4)
    # duplicate stored entries are summed (scipy's convention)
    dup = sp.csr_array((np.array([0.25, 0.5]), np.array([1, 1]), np.array([0, 2, 2, 2])),
                       shape=(3, 3))
    assert M.intra_list_diversity(np.array([[0, 1]]), similarity=dup).value == 1 - 0.75 / 2


def test_diversity_ignores_zero_vectors_of_items_not_recommended():
    vec = np.array([[1.0, 0.0], [0.0, 0.0], [3.0, 4.0], [0.0, 2.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no division by a zero norm, not even unread
        res = M.intra_list_diversity(np.array([[0, 2], [2, 3], [0, 3]]), item_vectors=vec)
    # cosines: (0, 2) = 3/5, (2, 3) = 4/5, (0, 3) = 0
    np.testing.assert_allclose(res.per_user, [1 - 0.6, 1 - 0.8, 1.0], rtol=1e-15)


@pytest.mark.parametrize("chunk", [1, 2, 3])
def test_diversity_in_chunks_of_users_equals_the_loop(monkeypatch, chunk):
    monkeypatch.setattr(_m, "_CHUNK", chunk)
    g = np.random.default_rng(5)
    sim = g.random((6, 6))
    rec = np.array([g.permutation(6)[:3] for _ in range(5)])
    expected = _ild_loop(rec, sim)
    for s in (sim, sp.csr_array(np.where(sim > 0.5, sim, 0.0))):
        e = expected if not sp.issparse(s) else _ild_loop(rec, s.toarray())
        np.testing.assert_allclose(M.intra_list_diversity(rec, similarity=s).per_user, e,
                                   rtol=1e-14)
    vec = g.normal(size=(6, 2))
    cos = vec @ vec.T / np.outer(np.linalg.norm(vec, axis=1), np.linalg.norm(vec, axis=1))
    np.testing.assert_allclose(M.intra_list_diversity(rec, item_vectors=vec).per_user,
                               _ild_loop(rec, cos), rtol=1e-12)


# -- the relevant pairs, in every accepted form -------------------------------------------------

def test_relevant_in_every_accepted_form_gives_the_same_hits():
    rec = np.array([[0, 1, 2], [1, 0, 3], [2, 3, 0]])
    # hits by hand at k = 2: user 0 {1} -> 1; user 1 {} -> skipped; user 2 {2, 3} -> 2
    expected = [1.0, math.nan, 2.0]
    dense = np.array([[0, 1, 0, 0], [0, 0, 0, 0], [0, 0, 1, 1]])
    forms = [
        [[1], [], [3, 2]],
        [frozenset({1}), set(), {2, 3}],
        [np.array([1], np.uint8), np.array([], np.int64), np.array([3, 2], np.int32)],
        (np.array([1]), np.array([], dtype=int), np.array([2, 3])),
        sp.csr_array(dense.astype(bool)),
        sp.csc_array(dense),
        sp.coo_array((np.array([1.0, 0.0, 1.0, 1.0]), (np.array([2, 1, 0, 2]),
                                                       np.array([3, 1, 1, 2]))), shape=(3, 4)),
    ]
    for rel in forms:
        res = M.hits_at_k(rec, rel, k=2)
        np.testing.assert_array_equal(res.per_user, expected)
        assert (res.value, res.n_evaluated, res.n_skipped) == (1.5, 2, 1)


# -- classification and the smallest ranking case, by hand -------------------------------------

def test_classification_counts_by_hand():
    t = [1, 0, 1, 1, 0, 2]
    p = [1, 1, 0, 1, 0, 1]
    # positive 1: TP at 0 and 3, FP at 1 and 5, FN at 2
    assert M.precision(t, p) == 2 / 4
    assert M.recall(t, p) == 2 / 3
    assert M.f1(t, p) == 2 * 2 / (2 * 2 + 2 + 1)
    assert M.accuracy(t, p) == 3 / 6
    # positive 0: TP at 4, FP at 2, FN at 1
    assert (M.precision(t, p, positive=0), M.recall(t, p, positive=0)) == (1 / 2, 1 / 2)
    assert M.f1(t, p, positive=0) == 2 / (2 + 1 + 1)
    # strings: positive "b" has TP 1, FP 2, FN 1
    ts, ps = ["a", "b", "b", "c"], ["b", "b", "a", "b"]
    assert M.precision(ts, ps, positive="b") == 1 / 3
    assert M.recall(ts, ps, positive="b") == 1 / 2
    assert M.f1(ts, ps, positive="b") == 2 / (2 + 2 + 1)
    assert M.accuracy(ts, ps) == 1 / 4
    # TP 0, FP 1, FN 1: F1 is 0 (defined: positives exist), no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert M.f1([1, 0], [0, 1]) == 0.0


def test_one_user_one_item_and_the_result_is_read_only():
    res = M.hits_at_k(np.array([[3]]), [[3]], k=1)
    assert (res.value, res.n_evaluated, res.n_skipped) == (1.0, 1, 0)
    assert M.mrr_at_k(np.array([[3]]), [[3]], k=5).value == 1.0
    for r in (res, M.novelty(np.array([[0, 1]]), [0.5, 0.5]),
              M.intra_list_diversity(np.array([[0, 1]]), item_vectors=np.eye(2))):
        assert not r.per_user.flags.writeable and r.per_user.dtype == np.float64


@pytest.mark.parametrize("f", RANKING)
def test_no_user_at_all_is_a_nan_for_every_ranking_measure(f):
    with warns_exactly(f"`{f.__name__}` is undefined: no user could be evaluated (0 users, "
                       f"all skipped); returning nan."):
        res = f(np.zeros((0, 2), dtype=int), [], k=2)
    assert math.isnan(res.value) and (res.n_evaluated, res.n_skipped) == (0, 0)
