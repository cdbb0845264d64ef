"""Offline LOO score: exhaustive against the literal definition, sampling, bad input."""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluators import EmptyProfilesWarning, Estimate, LooQuality, loo_quality, offline_score

# --- small fixtures: recommenders following the protocol -------------------------------------

class ConstantRec:
    """Always the same list; ignores the profile (like agents.Constant)."""

    def __init__(self, items):
        self.items = np.asarray(items, dtype=np.int64)
        self.calls = 0

    def fit(self, profiles):
        return self

    def recommend(self, users, k, *, removed=None):
        self.calls += 1
        return np.tile(self.items[:k], (len(users), 1))


class CooccurrenceRec:
    """Scores items by co-occurrence with the reduced profile, excludes held items.

    Uses ``removed`` for real, so the LOO protocol matters for its score.
    """

    def fit(self, profiles):
        self.B = sp.csr_array(profiles)
        self.C = (self.B.T @ self.B).toarray()
        np.fill_diagonal(self.C, 0)
        self.calls = 0
        return self

    def recommend(self, users, k, *, removed=None):
        self.calls += 1
        P = self.B[np.asarray(users)].toarray()
        if removed is not None:
            P[np.arange(len(users)), np.asarray(removed)] = 0
        scores = P @ self.C - 1e9 * P
        # deterministic tie-break: lower item id first
        order = np.lexsort((np.broadcast_to(np.arange(P.shape[1]), P.shape), -scores), axis=1)
        return order[:, :k].astype(np.int64)

    def recommend_one(self, profile_set, k):
        P = np.zeros((1, self.B.shape[1]))
        P[0, sorted(profile_set)] = 1
        scores = P @ self.C - 1e9 * P
        return sorted(range(P.shape[1]), key=lambda j: (-scores[0, j], j))[:k]


@st.composite
def graphs(draw, max_users=12, max_items=8):
    n_users = draw(st.integers(1, max_users))
    n_items = draw(st.integers(2, max_items))
    cells = draw(st.lists(st.booleans(), min_size=n_users * n_items,
                          max_size=n_users * n_items))
    dense = np.array(cells, dtype=np.float64).reshape(n_users, n_items)
    if dense.sum() == 0:
        dense[0, 0] = 1.0
    return sp.csr_array(dense)


weights_st = st.floats(0.05, 20.0, allow_nan=False, allow_infinity=False)


def brute_force_score(B, rec, k, quality, user_weights=None, item_weights=None):
    """The paper's formula with explicit loops over users and their items."""
    D = B.toarray() != 0
    n_users, n_items = D.shape
    w = np.ones(n_items) if item_weights is None else np.asarray(item_weights, float)
    uw = np.ones(n_users) if user_weights is None else np.asarray(user_weights, float)
    uw = np.where(D.any(axis=1), uw, 0.0)
    pu = uw / uw.sum()
    total = 0.0
    for u in range(n_users):
        held = list(np.flatnonzero(D[u]))
        Wu = sum(w[j] for j in held)
        for i in held:
            top = rec.recommend_one(set(held) - {i}, k)
            if quality == "hit":
                gain = 1.0 if i in top else 0.0
            else:
                gain = 1.0 / (top.index(i) + 1) if i in top else 0.0
            total += pu[u] * w[i] / Wu * gain
    return total


# --- properties ------------------------------------------------------------------------------

@settings(max_examples=40)
@given(data=st.data(), graph=graphs())
def test_constant_recommender_score_is_weighted_marginal(data, graph):
    n_users, n_items = graph.shape
    k = data.draw(st.integers(1, n_items))
    items = data.draw(st.permutations(range(n_items)))
    w = np.array(data.draw(st.lists(weights_st, min_size=n_items, max_size=n_items)))
    uw = np.array(data.draw(st.lists(st.floats(0, 5), min_size=n_users, max_size=n_users)))
    D = graph.toarray() != 0
    uw[D.any(axis=1)] += 0.1  # keep at least one user with items and positive weight
    quality = data.draw(st.sampled_from(["hit", "reciprocal_rank"]))
    est = offline_score(graph, ConstantRec(items), k=k, quality=quality, item_weights=w,
                        user_weights=uw)
    # P_t(i|w) = sum_u P(u) w_i / W_u over holders of i
    pu = np.where(D.any(axis=1), uw, 0) / np.where(D.any(axis=1), uw, 0).sum()
    Wu = D @ w
    marginal = w * ((pu / np.where(Wu > 0, Wu, 1)) @ D)
    gain = np.zeros(n_items)
    for rank, item in enumerate(items[:k], start=1):
        gain[item] = 1.0 if quality == "hit" else 1.0 / rank
    assert abs(est.value - float(marginal @ gain)) <= 1e-12
    assert est.stderr == 0.0 and est.ci_low == est.ci_high == est.value
    assert est.n == graph.nnz


@settings(max_examples=25)
@given(data=st.data(), graph=graphs(max_users=8, max_items=6))
def test_exhaustive_equals_literal_definition(data, graph):
    n_items = graph.shape[1]
    k = data.draw(st.integers(1, n_items))
    quality = data.draw(st.sampled_from(["hit", "reciprocal_rank"]))
    w = np.array(data.draw(st.lists(weights_st, min_size=n_items, max_size=n_items)))
    rec = CooccurrenceRec()
    est = offline_score(graph, rec, k=k, quality=quality, item_weights=w, batch_size=3)
    assert math.isclose(est.value, brute_force_score(graph, rec, k, quality, item_weights=w),
                        rel_tol=1e-12, abs_tol=1e-15)


def test_uniform_item_weights_change_nothing():
    rng = np.random.default_rng(1)
    B = sp.random_array((300, 25), density=0.15, rng=rng, format="csr")
    rec = CooccurrenceRec()
    a = offline_score(B, rec, k=3)
    b = offline_score(B, rec, k=3, item_weights=np.full(25, 7.5))
    assert math.isclose(a.value, b.value, rel_tol=1e-14)


def test_recommender_called_in_batches_not_per_pair():
    rng = np.random.default_rng(2)
    B = sp.random_array((2000, 40), density=0.1, rng=rng, format="csr")
    rec = ConstantRec(np.arange(40))
    offline_score(B, rec, k=5, batch_size=1000)
    assert rec.calls == math.ceil(B.nnz / 1000)
    rec.calls = 0
    offline_score(B, rec, k=5, n_samples=5000, rng=0, batch_size=4096)
    assert rec.calls == 2


def test_sampled_uses_wilson_for_hit_and_normal_for_rank():
    rng = np.random.default_rng(3)
    B = sp.random_array((500, 20), density=0.2, rng=rng, format="csr")
    rec = CooccurrenceRec()
    hit = offline_score(B, rec, k=3, n_samples=4000, rng=5)
    assert isinstance(hit, Estimate) and hit.n == 4000
    assert 0 <= hit.ci_low < hit.value < hit.ci_high <= 1
    # Wilson is asymmetric around p unless p = 1/2
    assert not math.isclose(hit.value - hit.ci_low, hit.ci_high - hit.value, rel_tol=1e-9)
    rr = offline_score(B, rec, k=3, quality="reciprocal_rank", n_samples=4000, rng=5)
    assert math.isclose(rr.value - rr.ci_low, rr.ci_high - rr.value, rel_tol=1e-9)


def test_sampled_draws_follow_user_then_item_distribution():
    # Two users: u0 holds {0, 1}, u1 holds {2}. With w = (1, 3, 1) and P(u) uniform:
    # P(0) = 1/8, P(1) = 3/8, P(2) = 1/2. A constant recommender of [item] at k=1 hits it.
    B = sp.csr_array(np.array([[1, 1, 0], [0, 0, 1]]))
    w = np.array([1.0, 3.0, 1.0])
    for item, p in [(0, 1 / 8), (1, 3 / 8), (2, 1 / 2)]:
        order = [item] + [j for j in range(3) if j != item]
        est = offline_score(B, ConstantRec(order), k=1, n_samples=40000, item_weights=w, rng=11)
        assert abs(est.value - p) < 4 * math.sqrt(p * (1 - p) / 40000)
        exact = offline_score(B, ConstantRec(order), k=1, item_weights=w)
        assert math.isclose(exact.value, p, rel_tol=1e-14)


def test_user_weights_zero_user_is_never_drawn():
    B = sp.csr_array(np.array([[1, 0], [0, 1]]))
    est = offline_score(B, ConstantRec([0, 1]), k=1, n_samples=2000,
                        user_weights=[1.0, 0.0], rng=0)
    assert est.value == 1.0


@pytest.mark.slow
def test_sampled_interval_covers_exhaustive_value():
    # Coverage of the 95% Wilson interval over 200 seeds, checked with a binomial test.
    from scipy import stats
    rng = np.random.default_rng(4)
    B = sp.random_array((400, 15), density=0.25, rng=rng, format="csr")
    rec = CooccurrenceRec()
    lq = loo_quality(B, rec, k=2)
    truth = lq.score().value
    covered = sum(lq.score(n_samples=300, rng=s).covers(truth) for s in range(200))
    assert stats.binomtest(covered, 200, 0.95).pvalue > 0.001


def test_loo_quality_reuses_recommendations_and_matches_offline_score():
    rng = np.random.default_rng(6)
    B = sp.random_array((400, 30), density=0.1, rng=rng, format="csr")
    w = rng.uniform(0.2, 3.0, 30)
    rec = CooccurrenceRec()
    lq = loo_quality(B, rec, k=4)
    assert isinstance(lq, LooQuality)
    assert lq.quality.size == B.nnz
    for kw in ({}, {"item_weights": w}):
        a = offline_score(B, rec, k=4, **kw)
        assert math.isclose(lq.score(**kw).value, a.value, rel_tol=1e-14)
        s1 = offline_score(B, rec, k=4, n_samples=3000, rng=9, **kw)
        s2 = lq.score(n_samples=3000, rng=9, **kw)
        assert s1 == s2


def test_same_rng_same_result_and_inputs_untouched():
    rng = np.random.default_rng(7)
    B = sp.random_array((300, 20), density=0.2, rng=rng, format="csr")
    B_copy = B.copy()
    w = rng.uniform(0.5, 2, 20)
    w_copy = w.copy()
    rec = CooccurrenceRec()
    a = offline_score(B, rec, k=3, n_samples=1000, item_weights=w, rng=np.random.default_rng(3))
    b = offline_score(B, rec, k=3, n_samples=1000, item_weights=w, rng=np.random.default_rng(3))
    assert a == b
    assert (B != B_copy).nnz == 0 and np.array_equal(w, w_copy)


def test_non_binary_values_are_edges():
    B = sp.csr_array(np.array([[3.0, 0.5, 0.0], [0.0, 2.0, 1.0]]))
    b = sp.csr_array(np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]]))
    rec = ConstantRec([1, 0, 2])
    assert offline_score(B, rec, k=1).value == offline_score(b, rec, k=1).value == 0.5


# --- bad input -------------------------------------------------------------------------------

_B = sp.csr_array(np.array([[1, 1, 0], [0, 1, 1]]))


@pytest.mark.parametrize("kwargs, exc, match", [
    pytest.param({"k": 0}, ValueError, r"`k` must be in \[1, n_items=3\]; got 0", id="k=0"),
    pytest.param({"k": -2}, ValueError, r"`k`.*got -2", id="k<0"),
    pytest.param({"k": 4}, ValueError, r"`k`.*got 4", id="k>n_items"),
    pytest.param({"k": 2.0}, TypeError, r"`k` must be an integer", id="k-float"),
    pytest.param({"quality": "ndcg"}, ValueError, r"`quality` must be one of .*'ndcg'",
                 id="unknown-quality"),
    pytest.param({"item_weights": [1.0, 0.0, 1.0]}, ValueError,
                 r"`item_weights` must be finite and > 0; got 0.0 at index 1", id="zero-weight"),
    pytest.param({"item_weights": [1.0, 1.0, -2.0]}, ValueError,
                 r"`item_weights`.*-2.0 at index 2", id="negative-weight"),
    pytest.param({"item_weights": [1.0, 1.0]}, ValueError, r"`item_weights` must have shape",
                 id="weights-shape"),
    pytest.param({"user_weights": [-1.0, 1.0]}, ValueError, r"`user_weights`.*>= 0",
                 id="negative-user-weight"),
    pytest.param({"user_weights": [0.0, 0.0]}, ValueError,
                 r"`user_weights` must be positive for at least one user holding an item",
                 id="all-users-zero"),
    pytest.param({"n_samples": 0}, ValueError, r"`n_samples` must be >= 1", id="n_samples=0"),
    pytest.param({"batch_size": 0}, ValueError, r"`batch_size` must be >= 1", id="batch=0"),
])
def test_bad_input(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        offline_score(_B, ConstantRec([0, 1, 2]), **{"k": 1, **kwargs})


def test_bad_profiles_and_recommender():
    with pytest.raises(TypeError, match="`profiles` must be a scipy.sparse matrix"):
        offline_score([[1, 0]], ConstantRec([0, 1]), k=1)
    with pytest.raises(TypeError, match="`recommender` must have a `recommend"):
        offline_score(_B, object(), k=1)

    class Short(ConstantRec):
        def recommend(self, users, k, *, removed=None):
            return np.zeros((len(users), k - 1), dtype=np.int64)

    with pytest.raises(ValueError, match=r"must return an array of shape"):
        offline_score(_B, Short([0]), k=2)


def test_no_edge_is_nan_with_a_named_warning():
    rec = ConstantRec([0, 1])
    for n_samples in (None, 100):
        with pytest.warns(EmptyProfilesWarning, match="no edge"):
            est = offline_score(sp.csr_array((3, 4)), rec, k=1, n_samples=n_samples)
        assert math.isnan(est.value) and est.n == 0
    assert rec.calls == 0


class _Listing:
    """Recommends ``lists[user]`` (k = len of the lists); for the output checks."""

    def __init__(self, lists):
        self.lists = np.asarray(lists)

    def fit(self, profiles):
        return self

    def recommend(self, users, k, *, removed=None):
        return self.lists[np.asarray(users)][:, :k]

    def __repr__(self):
        return "_Listing()"


@pytest.mark.parametrize("lists, match", [
    pytest.param([[0, 1], [2, 9], [0, 1]], r"`recommender` _Listing\(\) returned item id 9 "
                 r"outside \[0, 4\) in row 2 \(user 1, item 1 removed\): \[2, 9\]",
                 id="out-of-range"),
    pytest.param([[0, 1], [1, 2], [-1, 0]], r"item id -1 outside \[0, 4\) in row 4 \(user 2, "
                 r"item 2 removed\)", id="negative"),
    pytest.param([[0, 1], [3, 3], [0, 1]], r"returned item 3 more than once in row 2 \(user 1, "
                 r"item 1 removed\): \[3, 3\]", id="duplicate"),
])
@pytest.mark.parametrize("n_samples", [None, 50])
def test_bad_lists_name_the_recommender_and_the_first_bad_row(lists, match, n_samples):
    # today's behaviour was to score such lists as misses, silently
    profiles = sp.csr_array(np.array([[1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]]))
    if n_samples is not None:  # the sampled pairs are numbered in draw order
        match = match.split(" in row")[0]
    with pytest.raises(ValueError, match=match):
        offline_score(profiles, _Listing(lists), k=2, n_samples=n_samples, rng=0, batch_size=2)
    with pytest.raises(ValueError, match=match.split(" in row")[0]):
        loo_quality(profiles, _Listing(lists), k=2)


def test_columns_past_k_are_not_checked():
    class Wide(_Listing):  # returns more columns than asked; only the first k are scored
        def recommend(self, users, k, *, removed=None):
            return self.lists[np.asarray(users)]

    profiles = sp.csr_array(np.array([[1, 1, 0], [0, 1, 1]]))
    assert offline_score(profiles, Wide([[0, 1, 1], [1, 2, 2]]), k=2).value == 1.0


@pytest.mark.parametrize("n_samples", [None, 400])
def test_partitions_change_nothing(n_samples):
    g = np.random.default_rng(2)
    profiles = sp.csr_array((g.random((90, 25)) < 0.2).astype(float))
    rec = CooccurrenceRec()
    kw = dict(k=3, n_samples=n_samples, rng=4, batch_size=7)
    one = offline_score(profiles, rec, n_partitions=1, **kw)
    for p in (2, 5, 1000):
        other = offline_score(profiles, rec, n_partitions=p, progress=p == 5, **kw)
        assert (other.value, other.stderr, other.n) == (one.value, one.stderr, one.n)
    with pytest.raises(ValueError, match=r"`n_partitions` must be an int >= 1; got 0"):
        offline_score(profiles, rec, n_partitions=0)
