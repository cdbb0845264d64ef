"""MIPS's edges, each number from a plain loop (issue 27, section 1: the survivors of the
mutation run of evaluators/_mips.py, docs/testing.md): every refusal's exact message, the
uniform logging without ``pi_b`` (with and without availability masks, and its tolerance),
embeddings of several features, and the chunked gather of the group sums (several chunks,
groups of unequal sizes)."""

import re

import numpy as np
import pytest

from evaluators import NoSupportWarning, mips
from evaluators._mips import _group_sums
from simulator.logs import BanditLog


def uniform_log(n=6, K=4, seed=0, **kw):
    g = np.random.default_rng(seed)
    return BanditLog(context=np.zeros((n, 1)), action=g.integers(0, K, n), reward=g.random(n),
                     pscore=np.full(n, 1.0 / K), n_actions=K, **kw)


def target(n, K, seed=1):
    p = np.random.default_rng(seed).random((n, K)) + 0.05
    return p / p.sum(axis=1, keepdims=True)


def by_loop(log, pi, pi_b, E):
    """w_j r_j averaged, with w_j = sum of pi over the logged embedding / sum of pi_b."""
    E = np.asarray(E).reshape(log.n_actions, -1)
    terms = []
    for j in range(log.n_rounds):
        same = [b for b in range(log.n_actions) if tuple(E[b]) == tuple(E[log.action[j]])]
        terms.append(log.reward[j] * sum(pi[j, b] for b in same)
                     / sum(pi_b[j, b] for b in same))
    return sum(terms) / len(terms)


def message(err, text):
    return pytest.raises(err, match="^" + re.escape(text) + "$")


# -- refusals, word for word --------------------------------------------------------------------

def test_embeddings_refused_with_their_rule_and_what_was_received():
    log = uniform_log()
    pi = target(6, 4)
    with message(ValueError, "`action_embeddings` must be an int array (n_actions, "
                             "n_embedding_features) (the log carries none); got None.") as err:
        mips(log, pi)
    # the facts as data too, for callers that re-word them: `got` is text
    assert (err.value.name, err.value.got) == ("action_embeddings", "None")
    with message(TypeError, "`action_embeddings` must be an array of integers (discrete "
                            "embeddings); got dtype float64."):
        mips(log, pi, action_embeddings=np.array([0.0, 1.0, 0.0, 1.0]))
    # (a 1-d embedding is read as one feature before the check: 3 actions show as (3, 1))
    for E, shown in ((np.array([0, 1, 0]), "(3, 1)"), (np.zeros((4, 0), dtype=int), "(4, 0)"),
                     (np.zeros((5, 2), dtype=int), "(5, 2)"),
                     (np.zeros((4, 1, 1), dtype=int), "(4, 1, 1)")):
        with message(ValueError, "`action_embeddings` must be of shape (n_actions, "
                                 f"n_embedding_features) = (4, F >= 1); got shape {shown}."):
            mips(log, pi, action_embeddings=E)
    with message(ValueError, "`action_embeddings` must be integers >= 0; got min -2."):
        mips(log, pi, action_embeddings=np.array([[0, 1], [0, -2], [1, 1], [3, 0]]))


def test_pi_b_disagreeing_with_pscore_is_refused_at_the_first_record():
    log = uniform_log()
    pi = target(6, 4)
    E = np.array([0, 0, 1, 1])
    pb = np.full((6, 4), 0.25)
    pb[2] = [0.4, 0.2, 0.2, 0.2]
    pb[4] = [0.4, 0.2, 0.2, 0.2]
    first = next(j for j in range(6) if pb[j, log.action[j]] != 0.25)
    with message(ValueError, f"`pi_b` must agree with `log.pscore` on the logged actions; got "
                             f"{pb[first, log.action[first]]} against pscore 0.25 at record "
                             f"{first}."):
        mips(log, pi, action_embeddings=E, pi_b=pb)
    # within 1e-6 of pscore (relative to max(1, pscore)): accepted, and used as given
    near = np.full((6, 4), 0.25)
    near[np.arange(6), log.action] += 9e-7
    near[np.arange(6), (log.action + 1) % 4] -= 9e-7
    assert mips(log, pi, action_embeddings=E, pi_b=near).value == pytest.approx(
        by_loop(log, pi, near, E), rel=1e-13)
    far = np.full((6, 4), 0.25)
    far[0, log.action[0]] += 1.5e-6
    far[0, (log.action[0] + 1) % 4] -= 1.5e-6
    with pytest.raises(ValueError, match="at record 0"):
        mips(log, pi, action_embeddings=E, pi_b=far)


def test_a_log_logged_otherwise_needs_pi_b():
    log = uniform_log()
    bad = BanditLog(context=log.context, action=log.action, reward=log.reward,
                    pscore=np.r_[0.25 + 1e-8, log.pscore[1:]], n_actions=4)
    with message(ValueError, "`pi_b` must be the logging policy's action probabilities "
                             "(n_rounds, n_actions): the log has no `pi_b` and was not logged "
                             "uniformly; got None.") as err:
        mips(bad, target(6, 4), action_embeddings=np.array([0, 0, 1, 1]))
    assert (err.value.name, err.value.got) == ("pi_b", "None")


def test_a_pi_b_of_the_wrong_shape_is_named():
    log = uniform_log()
    with pytest.raises(ValueError, match=r"^`pi_b` must have shape \(n_rounds, n_actions\) = "
                                         r"\(6, 4\)"):
        mips(log, target(6, 4), action_embeddings=np.array([0, 0, 1, 1]),
             pi_b=np.full((6, 3), 1 / 3))


def test_pi_b_exactly_1e_6_from_pscore_is_accepted():
    """The rule is |pi_b - pscore| <= 1e-6 (for pscore <= 1): pscore 1e-6 against pi_b 2e-6
    differ by exactly the double 1e-6, and are accepted."""
    n, K = 2, 3
    pb = np.array([[2e-6, 0.5, 0.5 - 2e-6], [0.2, 0.3, 0.5]])
    log = BanditLog(context=np.zeros((n, 1)), action=np.array([0, 1]), reward=np.array([1.0, 0.5]),
                    pscore=np.array([1e-6, 0.3]), n_actions=K)
    assert 2e-6 - 1e-6 == 1e-6
    pi = np.array([[0.1, 0.2, 0.7], [0.3, 0.3, 0.4]])
    E = np.array([0, 1, 2])
    # the given pi_b is used as it is: w_0 = 0.1 / 2e-6
    assert mips(log, pi, action_embeddings=E, pi_b=pb).value == pytest.approx(
        (0.1 / 2e-6 * 1.0 + 0.3 / 0.3 * 0.5) / 2, rel=1e-14)


# -- the uniform logging marginal ---------------------------------------------------------------

def test_uniform_log_without_pi_b_by_hand():
    """pscore 1/4 everywhere, no pi_b, no masks: p(e | pi_0) = |e| / 4 for embedding
    groups {0, 1}, {2}, {3}; a pscore 1e-11 off 1/4 is still uniform (tolerance 1e-9)."""
    log = uniform_log(n=8, K=4, seed=5)
    pi = target(8, 4, seed=6)
    E = np.array([7, 7, 2, 3])
    uniform = np.full((8, 4), 0.25)
    want = by_loop(log, pi, uniform, E)
    assert mips(log, pi, action_embeddings=E).value == pytest.approx(want, rel=1e-13)
    close = BanditLog(context=log.context, action=log.action, reward=log.reward,
                      pscore=np.r_[0.25 + 1e-11, log.pscore[1:]], n_actions=4)
    assert mips(close, pi, action_embeddings=E).value == pytest.approx(want, rel=1e-13)
    # the same as passing the uniform pi_b
    assert mips(log, pi, action_embeddings=E, pi_b=uniform).value == pytest.approx(
        want, rel=1e-13)


def test_masks_with_every_action_available_are_the_unmasked_log():
    log = uniform_log(n=8, K=4, seed=5)
    masked = uniform_log(n=8, K=4, seed=5, available=np.ones((8, 4), dtype=bool))
    pi = target(8, 4, seed=6)
    E = np.array([0, 0, 1, 2])
    assert mips(masked, pi, action_embeddings=E).value == pytest.approx(
        mips(log, pi, action_embeddings=E).value, rel=1e-14)


# -- embeddings --------------------------------------------------------------------------------

def test_several_features_group_by_the_whole_vector():
    """Actions 0 and 2 share (0, 0); 1 is (0, 1), 3 is (1, 1): three groups, not two (by
    first feature) nor four."""
    n, K = 12, 4
    g = np.random.default_rng(8)
    action = g.integers(0, K, n)
    pb = target(n, K, seed=9)
    log = BanditLog(context=np.zeros((n, 1)), action=action, reward=g.random(n),
                    pscore=pb[np.arange(n), action], n_actions=K, pi_b=pb)
    pi = target(n, K, seed=10)
    E = np.array([[0, 0], [0, 1], [0, 0], [1, 1]])
    assert mips(log, pi, action_embeddings=E).value == pytest.approx(
        by_loop(log, pi, pb, E), rel=1e-13)
    # a 1-d embedding is one feature: the same as its column
    E1 = np.array([4, 1, 4, 0])
    assert mips(log, pi, action_embeddings=E1).value == pytest.approx(
        by_loop(log, pi, pb, E1[:, None]), rel=1e-13)
    assert mips(log, pi, action_embeddings=E1).value == mips(
        log, pi, action_embeddings=E1[:, None]).value


def test_no_weight_is_nan_with_the_reason():
    log = uniform_log(n=4, K=4, seed=2)
    E = np.arange(4)
    pi = np.zeros((4, 4))
    pi[np.arange(4), (log.action + 1) % 4] = 1.0  # never the logged action's embedding
    with pytest.warns(NoSupportWarning) as caught:
        est = mips(log, pi, action_embeddings=E, ci=0.9)
    assert [str(w.message) for w in caught] == [
        "mips: every importance weight is 0 (the target policy never takes a logged action); "
        "returning nan."]
    assert np.isnan(est.value) and np.isnan(est.stderr)
    assert (est.n, est.level, est.estimator, est.ess) == (4, 0.9, "mips", 0.0)


# -- the chunked gather ------------------------------------------------------------------------

@pytest.mark.parametrize("logged", ["big only", "mixed", "small only"])
def test_group_sums_over_several_chunks_equal_a_loop(logged):
    """1,200 actions in groups of 1,100, 60 and 40 (the padded table is 1,100 wide, a chunk
    59 rows): 150 rows cross three chunks; rows logged in the big group only (every gathered
    entry valid), in all three or in the two small ones only (padding masked)."""
    g = np.random.default_rng(11)
    K, n = 1200, 150
    groups = np.r_[np.zeros(1100, dtype=np.int64), np.ones(60, dtype=np.int64),
                   np.full(40, 2, dtype=np.int64)]
    g.shuffle(groups)
    dist = g.random((n, K))
    logged_group = {"big only": np.zeros(n, dtype=np.int64), "mixed": g.integers(0, 3, n),
                    "small only": g.integers(1, 3, n)}[logged]
    got = _group_sums(dist, groups, 3, logged_group)
    want = [sum(dist[j, a] for a in range(K) if groups[a] == logged_group[j]) for j in range(n)]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # a Fortran-ordered dist (a transposed view) gives the same sums
    np.testing.assert_allclose(_group_sums(np.asfortranarray(dist), groups, 3, logged_group),
                               want, rtol=1e-12)


def test_float32_probabilities_are_summed_in_float64():
    """A float32 target is kept as float32 (no copy) but its group sums accumulate in float64:
    equal to the loop over the same values as doubles to 1e-12 (a float32 sum of 40 values
    is off by ~1e-7)."""
    g = np.random.default_rng(12)
    n, K = 30, 400
    groups = np.repeat(np.arange(10), 40)
    dist = g.random((n, K)).astype(np.float32)
    logged_group = g.integers(0, 10, n)
    want = [sum(float(dist[j, a]) for a in range(K) if groups[a] == logged_group[j])
            for j in range(n)]
    np.testing.assert_allclose(_group_sums(dist, groups, 10, logged_group), want, rtol=1e-12)
    log = uniform_log(n=n, K=K, seed=13)
    pi = (dist / dist.sum(axis=1, keepdims=True, dtype=np.float64)).astype(np.float32)
    assert pi.dtype == np.float32
    E = groups
    assert mips(log, pi, action_embeddings=E).value == pytest.approx(
        by_loop(log, pi.astype(np.float64), np.full((n, K), 1.0 / K), E), rel=1e-12)


def test_large_embedding_ids_stay_distinct():
    """Embeddings are ids compared as integers: 2**53 and 2**53 + 1 (the same double) are two
    groups. Actions 0, 1 have ids 2**53, 2**53 + 1; a target on action 0 only weighs the
    records of action 0 by 1 / (1/4) and those of action 1 by 0."""
    log = uniform_log(n=8, K=4, seed=14)
    E = np.array([2**53, 2**53 + 1, 3, 4], dtype=np.int64)
    pi = np.zeros((8, 4))
    pi[:, 0] = 1.0
    want = sum(4.0 * log.reward[j] for j in range(8) if log.action[j] == 0) / 8
    assert mips(log, pi, action_embeddings=E).value == pytest.approx(want, rel=1e-14)
    assert mips(log, pi, action_embeddings=E).value == pytest.approx(
        by_loop(log, pi, np.full((8, 4), 0.25), E), rel=1e-14)
