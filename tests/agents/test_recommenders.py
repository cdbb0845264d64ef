"""Constant, Popularity, UserCosineCF, NaiveCF, UserKNN: exact LOO against refits, ties, bad
input."""

import functools

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import agents._recommenders as rec
from agents import Constant, NaiveCF, Popularity, Recommender, UserCosineCF, UserKNN

# --------------------------------------------------------------------------- strategies


@st.composite
def graphs(draw, max_users=8, max_items=7):
    """Random binary users x items profiles, with empty rows and columns allowed."""
    n_users = draw(st.integers(1, max_users))
    n_items = draw(st.integers(1, max_items))
    cells = draw(st.lists(st.booleans(), min_size=n_users * n_items,
                          max_size=n_users * n_items))
    return sp.csr_array(np.array(cells, dtype=float).reshape(n_users, n_items))


def _edges(graph):
    users = np.repeat(np.arange(graph.shape[0]), np.diff(graph.indptr))
    return users, graph.indices.astype(np.int64)


def _without(graph, u, i):
    dense = graph.toarray()
    dense[u, i] = 0
    return sp.csr_array(dense)


CF = [pytest.param(UserCosineCF, id="user_cosine_cf"), pytest.param(NaiveCF, id="naive_cf"),
      pytest.param(UserKNN, id="user_knn"),
      # fewer neighbours than users: the neighbour selection and its ties are exercised
      pytest.param(functools.partial(UserKNN, 2), id="user_knn_2")]
ALL = [
    pytest.param(lambda: Constant([2, 0, 1]), id="constant"),
    pytest.param(Popularity, id="popularity"),
    pytest.param(lambda: Popularity(exclude_seen=False), id="popularity_keep_seen"),
    pytest.param(UserCosineCF, id="user_cosine_cf"),
    pytest.param(NaiveCF, id="naive_cf"),
    pytest.param(functools.partial(UserKNN, 2), id="user_knn_2"),
]


# --------------------------------------------------------------------------- ranking helper


@given(st.integers(1, 30), st.integers(1, 12), st.integers(0, 2**32 - 1))
def test_top_k_orders_by_score_then_lower_id(n_rows, n_cols, seed):
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 4, size=(n_rows, n_cols)).astype(float)  # many ties
    scores[rng.random(scores.shape) < 0.2] = -np.inf
    k = int(rng.integers(1, n_cols + 1))
    got = rec._top_k(scores, k)
    want = np.stack([rec._rank_reference(row, k) for row in scores])
    np.testing.assert_array_equal(got, want)


# --------------------------------------------------------------------------- contract


@pytest.mark.parametrize("make", ALL)
@settings(max_examples=30)
@given(graph=graphs(), data=st.data())
def test_recommend_returns_k_distinct_valid_items(make, graph, data):
    agent = make()
    if isinstance(agent, Constant):
        agent = Constant(data.draw(st.permutations(range(graph.shape[1]))))
    assert isinstance(agent, Recommender)
    assert agent.fit(graph) is agent
    k = data.draw(st.integers(1, graph.shape[1]))
    users = np.arange(graph.shape[0])
    for out in [agent.recommend(users, k)] + (
            [agent.recommend(*_edges(graph)[:1], k, removed=_edges(graph)[1])]
            if graph.nnz else []):
        assert out.dtype.kind == "i" and out.shape[1] == k
        assert np.all((out >= 0) & (out < graph.shape[1]))
        assert all(len(set(row)) == k for row in out.tolist())


@pytest.mark.parametrize("cls", CF)
@settings(max_examples=40)
@given(graph=graphs(), data=st.data())
def test_cf_fast_equals_naive_reference(cls, graph, data):
    k = data.draw(st.integers(1, graph.shape[1]))
    fast, naive = cls().fit(graph), cls(method="naive").fit(graph)
    users = np.arange(graph.shape[0])
    np.testing.assert_array_equal(fast.recommend(users, k), naive.recommend(users, k))
    if graph.nnz:
        u, i = _edges(graph)
        np.testing.assert_array_equal(fast.recommend(u, k, removed=i),
                                      naive.recommend(u, k, removed=i))


@pytest.mark.parametrize("cls", CF + [pytest.param(Popularity, id="popularity")])
@settings(max_examples=30)
@given(graph=graphs(), data=st.data())
def test_removed_equals_refit_on_graph_without_the_edge(cls, graph, data):
    """The LOO contract: scoring u_-i == refitting on the graph with (u, i) deleted."""
    if not graph.nnz:
        return
    u, i = _edges(graph)
    j = data.draw(st.integers(0, graph.nnz - 1))
    k = data.draw(st.integers(1, graph.shape[1]))
    got = cls().fit(graph).recommend(u[j:j + 1], k, removed=i[j:j + 1])
    for refit in (cls().fit(_without(graph, u[j], i[j])),) + (
            (cls(method="naive").fit(_without(graph, u[j], i[j])),) if cls is not Popularity
            else ()):
        np.testing.assert_array_equal(got, refit.recommend(u[j:j + 1], k))


@pytest.mark.parametrize("cls", CF + [pytest.param(Popularity, id="popularity")])
@settings(max_examples=20)
@given(graph=graphs(), data=st.data())
def test_filtering_recommenders_never_return_held_items_when_avoidable(cls, graph, data):
    k = data.draw(st.integers(1, graph.shape[1]))
    dense = graph.toarray() > 0
    out = cls().fit(graph).recommend(np.arange(graph.shape[0]), k)
    for u, row in enumerate(out):
        n_free = int((~dense[u]).sum())
        held_in_list = dense[u, row]
        # the first min(k, n_free) slots are unheld; only the padding may be held
        assert not held_in_list[:min(k, n_free)].any()


def test_batches_and_sparse_statistics_do_not_change_results(monkeypatch):
    rng = np.random.default_rng(3)
    graph = sp.csr_array((rng.random((60, 9)) < 0.3).astype(float))
    u, i = _edges(graph)
    for cls in (UserCosineCF, NaiveCF, Popularity):
        whole = cls().fit(graph).recommend(u, 4, removed=i)
        monkeypatch.setattr(rec, "_BATCH_CELLS", 20)  # 2 users per batch
        monkeypatch.setattr(rec, "_DENSE_ITEMS", 0)  # the sparse item x item path
        np.testing.assert_array_equal(cls().fit(graph).recommend(u, 4, removed=i), whole)
        monkeypatch.undo()


# --------------------------------------------------------------------------- worked examples


def test_user_cosine_cf_hand_computed():
    # u0 = {0, 1}; u1 = {0, 2}; u2 = {1, 2, 3}; u3 = {3}
    graph = sp.csr_array(np.array([[1, 1, 0, 0], [1, 0, 1, 0], [0, 1, 1, 1], [0, 0, 0, 1]],
                                  dtype=float))
    # u0: cos(u0,u1) = 1/2, cos(u0,u2) = 1/sqrt(6), cos(u0,u3) = 0.
    # item 2: 1/2 + 1/sqrt(6) = 0.908; item 3: 1/sqrt(6) = 0.408.
    assert UserCosineCF().fit(graph).recommend([0], 2).tolist() == [[2, 3]]
    # u0 without item 0 = {1}: cos with u1 = 0, with u2 = 1/sqrt(3), with u3 = 0. Item 0 is
    # held only by u1 -> 0; items 2 and 3 -> 1/sqrt(3) each: a tie, lower id first.
    assert UserCosineCF().fit(graph).recommend([0], 3, removed=[0]).tolist() == [[2, 3, 0]]


def test_naive_cf_hand_computed():
    # holders: item0 {u0, u1}, item1 {u0, u2}, item2 {u1, u2}, item3 {u2, u3}
    graph = sp.csr_array(np.array([[1, 1, 0, 0], [1, 0, 1, 0], [0, 1, 1, 1], [0, 0, 0, 1]],
                                  dtype=float))
    # u3 = {3}: score(i) = #(U_i ∩ {u2,u3}) / 2 -> item1 1/2, item2 1/2, item0 0.
    assert NaiveCF().fit(graph).recommend([3], 3).tolist() == [[1, 2, 0]]
    # u0 = {0, 1} without 1: I' = {0}; #U_0 = 2; item1: #(U_1' ∩ U_0) = #({u2} ∩ {u0,u1}) = 0;
    # item2: #({u1,u2} ∩ {u0,u1}) = 1 -> 1/2; item3: 0. Ranking: 2, then 1 and 3 tied at 0.
    assert NaiveCF().fit(graph).recommend([0], 3, removed=[1]).tolist() == [[2, 1, 3]]


def test_popularity_counts_drop_the_removed_edge_and_ties_go_to_lower_id():
    graph = sp.csr_array(np.array([[1, 1, 0], [1, 0, 1], [0, 1, 0]], dtype=float))
    # counts: item0 2, item1 2, item2 1
    assert Popularity(exclude_seen=False).fit(graph).recommend([2], 3).tolist() == [[0, 1, 2]]
    # u0 without item0: item0 count 1, tied with item2 -> 0 before 2; item1 held
    assert Popularity().fit(graph).recommend([0], 2, removed=[0]).tolist() == [[0, 2]]
    assert Popularity().fit(graph).recommend([0], 3, removed=[0]).tolist() == [[0, 2, 1]]


def test_empty_reduced_profile_scores_zero_everywhere():
    graph = sp.csr_array(np.array([[0, 0, 1], [1, 1, 1]], dtype=float))
    for cls in (UserCosineCF, NaiveCF):
        assert cls().fit(graph).recommend([0], 3, removed=[2]).tolist() == [[0, 1, 2]]


# --------------------------------------------------------------------------- Constant


def test_constant_does_not_filter_the_users_items():
    graph = sp.csr_array(np.eye(4))
    g = Constant([2, 0, 3]).fit(graph)
    assert g.recommend([2, 0], 2).tolist() == [[2, 0], [2, 0]]
    assert g.recommend([2, 0], 2, removed=[2, 0]).tolist() == [[2, 0], [2, 0]]


@given(st.lists(st.integers(0, 5), min_size=1, max_size=12), st.data())
def test_constant_agreeing_picks_the_most_pushed(counts, data):
    counts = np.array(counts)
    pushed = np.flatnonzero(counts > 0)
    k = data.draw(st.integers(1, counts.size))
    if pushed.size < k:
        with pytest.raises(ValueError, match="pushed items"):
            Constant.agreeing(counts, k)
        return
    items = Constant.agreeing(counts, k).items
    want = sorted(pushed.tolist(), key=lambda i: (-counts[i], i))[:k]
    assert items.tolist() == want


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 4)), min_size=1, max_size=12),
       st.data())
def test_constant_disagreeing_picks_the_most_frequent_never_pushed(pairs, data):
    counts = np.array([c for c, _ in pairs])
    ref = np.array([m for _, m in pairs]) / 10.0
    never = np.flatnonzero(counts == 0)
    k = data.draw(st.integers(1, counts.size))
    if never.size < k:
        with pytest.raises(ValueError, match="never-pushed"):
            Constant.disagreeing(ref, counts, k)
        return
    items = Constant.disagreeing(ref, counts, k).items
    assert items.tolist() == sorted(never.tolist(), key=lambda i: (-ref[i], i))[:k]
    assert not np.any(counts[items] > 0)


def test_constant_items_are_read_only_and_validated_at_fit():
    g = Constant(np.array([1, 0]))
    with pytest.raises(ValueError):
        g.items[0] = 5
    with pytest.raises(ValueError, match=r"n_items=2"):
        Constant([0, 2]).fit(sp.csr_array(np.eye(2)))
    with pytest.raises(ValueError, match="length of the constant list"):
        Constant([1]).fit(sp.csr_array(np.eye(3))).recommend([0], 2)


# --------------------------------------------------------------------------- fit hygiene


@pytest.mark.parametrize("make", ALL)
def test_fit_copies_and_never_mutates_its_input(make):
    rng = np.random.default_rng(0)
    graph = sp.csr_array((rng.random((30, 6)) < 0.4).astype(float))
    snapshot = (graph.data.copy(), graph.indices.copy(), graph.indptr.copy())
    agent = make().fit(graph)
    for a, b in zip(snapshot, (graph.data, graph.indices, graph.indptr), strict=True):
        np.testing.assert_array_equal(a, b)
    u, i = _edges(graph)
    before = agent.recommend(u, 3, removed=i)
    graph.data[:] = 0.0  # the caller reuses its buffers: the model must not see it
    graph.indices[:] = 0
    np.testing.assert_array_equal(agent.recommend(u, 3, removed=i), before)


def test_fit_accepts_matrix_array_and_dense_and_binarises_values():
    dense = np.array([[0, 3, 0], [2, 0, 0], [0, 5, 1]], dtype=float)
    outs = [UserCosineCF().fit(x).recommend([0, 1, 2], 2)
            for x in (dense, sp.csr_matrix(dense), sp.coo_array(dense), sp.csr_array(dense > 0))]
    for out in outs[1:]:
        np.testing.assert_array_equal(out, outs[0])


# --------------------------------------------------------------------------- bad input

_G = sp.csr_array(np.array([[1, 0, 1], [0, 1, 0]], dtype=float))

BAD = [
    pytest.param(dict(k=0), ValueError, r"`k` must be in \[1, n_items=3\]; got 0", id="k-zero"),
    pytest.param(dict(k=4), ValueError, r"`k` must be in \[1, n_items=3\]; got 4", id="k-big"),
    pytest.param(dict(k=1.0), TypeError, r"`k` must be an integer", id="k-float"),
    pytest.param(dict(users=[0, 2]), ValueError, r"`users` .* got 2 at index 1",
                 id="user-too-big"),
    pytest.param(dict(users=[-1]), ValueError, r"`users` .* got -1", id="user-negative"),
    pytest.param(dict(users=[0.5]), TypeError, r"`users` must hold integer", id="user-float"),
    pytest.param(dict(users=[0, 1], removed=[0]), ValueError,
                 r"`removed` must have one item per user \(length 2\); got length 1",
                 id="removed-length"),
    pytest.param(dict(users=[0, 1], removed=[0, 0]), ValueError,
                 r"`removed\[1\]` = 0 is not in the profile of user 1", id="removed-not-held"),
    pytest.param(dict(users=[0], removed=[3]), ValueError, r"`removed` must be item ids",
                 id="removed-out-of-range"),
]


@pytest.mark.parametrize("make", ALL)
@pytest.mark.parametrize("kwargs, exc, match", BAD)
def test_bad_recommend_arguments_are_named(make, kwargs, exc, match):
    agent = make().fit(_G)
    call = dict(users=[0, 1], k=1) | kwargs
    with pytest.raises(exc, match=match):
        agent.recommend(call.pop("users"), call.pop("k"), **call)


@pytest.mark.parametrize("make", ALL)
def test_recommend_before_fit_is_a_runtime_error(make):
    with pytest.raises(RuntimeError, match="call `fit"):
        make().recommend([0], 1)


@pytest.mark.parametrize("profiles, exc, match", [
    pytest.param([[1, 0]], TypeError, "scipy.sparse", id="list"),
    pytest.param(np.ones(3), ValueError, "2-dimensional", id="1d"),
    pytest.param(np.zeros((0, 3)), ValueError, "at least one user", id="empty"),
    pytest.param(np.array([[np.nan, 1.0]]), ValueError, "finite", id="nan"),
])
def test_bad_profiles(profiles, exc, match):
    with pytest.raises(exc, match=match):
        UserCosineCF().fit(profiles)


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="'fast', 'naive'"):
        UserCosineCF(method="slow")
    with pytest.raises(ValueError, match="distinct"):
        Constant([1, 1])
    with pytest.raises(ValueError, match="empty"):
        Constant([])
    with pytest.raises(ValueError, match=r"`push_counts` must be finite and >= 0"):
        Constant.agreeing([1, -1], 1)
    with pytest.raises(ValueError, match="one entry per item"):
        Constant.disagreeing([0.5, 0.5], [0, 0, 1], 1)
    with pytest.raises(TypeError, match="exclude_seen"):
        Popularity(exclude_seen="yes")


def test_user_knn_rejects_a_bad_neighbourhood():
    with pytest.raises(ValueError, match="`n_neighbors` must be an int >= 1; got 0"):
        UserKNN(0)
    with pytest.raises(TypeError, match="`n_neighbors` must be an int >= 1; got float"):
        UserKNN(2.0)


def test_user_knn_only_the_nearest_neighbours_vote():
    # u0 = {0, 1}; u1 = {0, 2} (cos 1/2), u2 = {0, 1, 3} (cos 0.816), u3 = {4} (cos 0)
    graph = sp.csr_array(np.array([[1, 1, 0, 0, 0], [1, 0, 1, 0, 0], [1, 1, 0, 1, 0],
                                   [0, 0, 0, 0, 1]], dtype=float))
    assert UserKNN(1).fit(graph).recommend([0], 1).tolist() == [[3]]  # u2 alone votes
    assert UserKNN(2).fit(graph).recommend([0], 2).tolist() == [[3, 2]]
