"""Survivors of the mutation run of ``evaluators/_slate_ope.py`` (issue 27, docs/testing.md):
Cascade-DR with a regressor written as a plain loop (features, folds, the recursion); the
action distribution from an array, a policy or a policy's conditional factors (chunks,
passes, checks); the pseudo-inverse with availability against the general estimator; SIPS,
IIPS and RIPS by hand; every refusal, tolerance and degenerate case word for word, on tiny
logs."""

import math
import os
import re
import warnings

import numpy as np
import pytest

import evaluators
from agents import PlackettLuce
from evaluators import NoSupportWarning
from simulator import SlateLog


def message(err, text):
    return pytest.raises(err, match="^" + re.escape(text) + "$")


def pl_problem(n=7, m=4, k=3, seed=0, users=None, temperature=0.7, uniform=False):
    """A small log of a Plackett-Luce logging policy, a Plackett-Luce target and the target's
    arrays on the logged slates."""
    rng = np.random.default_rng(seed)
    u = n if users is None else users
    scores = rng.normal(0, 1.0, (u, m))
    mu = PlackettLuce(scores, k=k, temperature=math.inf if uniform else 1.5)
    pi = PlackettLuce(scores, k=k, temperature=temperature)
    user = np.arange(n) % u
    obs = {"user": user, "available": np.ones((n, m), bool)}
    S = mu.sample(obs, rng=rng)
    cas = mu.prefix_probabilities(obs, S)
    log = SlateLog(context=rng.normal(size=(n, 2)), action=S,
                   reward=(rng.random((n, k)) < 0.5).astype(float), pscore=cas[:, -1],
                   pscore_cascade=cas, pscore_item_position=mu.item_position_probabilities(obs, S),
                   n_items=m, user=user)
    t = {"cascade": pi.prefix_probabilities(obs, S), "dist": pi.conditional_probabilities(obs, S),
         "ipos": pi.item_position_probabilities(obs, S), "marg": pi.item_marginals(obs, S)}
    return log, t, pi


# -- Cascade-DR with a regressor, as a loop -----------------------------------------------------

class Ridge:
    """Ridge regression with an intercept (the intercept penalised too): a duck-typed
    regressor whose predictions depend on every feature column."""

    def __init__(self, alpha=0.5):
        self.alpha = alpha

    def fit(self, X, y):
        Z = np.hstack([np.ones((len(X), 1)), X])
        self.coef_ = np.linalg.solve(Z.T @ Z + self.alpha * np.eye(Z.shape[1]), Z.T @ y)
        return self

    def predict(self, X):
        return np.hstack([np.ones((len(X), 1)), X]) @ self.coef_


def features(context_row, item, m):
    """[context, one-hot item] of one (record, item), written out."""
    x = list(context_row) + [0.0] * m
    x[len(context_row) + item] = 1.0
    return x


def cascade_dr_with_regressor(log, cascade, D, folds, n_folds):
    """Cascade-DR with one Ridge per (fold, position), fitted from the last position up on
    the records of the other folds (all records with one fold), record by record."""
    n, k = log.action.shape
    m = log.n_items
    q_logged, q_expect = np.zeros((n, k)), np.zeros((n, k))
    for f in range(n_folds):
        train = [i for i in range(n) if folds[i] != f] if n_folds > 1 else list(range(n))
        test = [i for i in range(n) if folds[i] == f] if n_folds > 1 else list(range(n))
        nxt = None
        for j in range(k - 1, -1, -1):
            X, y = [], []
            for i in train:
                target = log.reward[i, j]
                if nxt is not None:
                    target += sum(D[i, j + 1, a] * nxt.predict(np.array(
                        [features(log.context[i], a, m)]))[0] for a in range(m))
                X.append(features(log.context[i], log.action[i, j], m))
                y.append(target)
            model = Ridge().fit(np.array(X), np.array(y))
            for i in test:
                Q = [model.predict(np.array([features(log.context[i], a, m)]))[0]
                     for a in range(m)]
                q_logged[i, j] = Q[log.action[i, j]]
                q_expect[i, j] = sum(D[i, j, a] * Q[a] for a in range(m))
            nxt = model
    terms = []
    for i in range(n):
        term, w_prev = 0.0, 1.0
        for j in range(k):
            w = cascade[i, j] / log.pscore_cascade[i, j]
            term += w * (log.reward[i, j] - q_logged[i, j]) + w_prev * q_expect[i, j]
            w_prev = w
        terms.append(term)
    return float(np.mean(terms)), float(np.std(terms, ddof=1) / math.sqrt(n))


@pytest.mark.parametrize("n_folds,chunk_cells", [(1, 1 << 22), (2, 1 << 22), (3, 1 << 22),
                                                 (2, 1), (3, 30)])
def test_cascade_dr_with_a_regressor_equals_the_loop(n_folds, chunk_cells, monkeypatch):
    # chunk_cells 1 or 30: the action distribution read one or two records at a time
    log, t, pi = pl_problem(n=7, m=4, k=3, seed=2)
    fitted = evaluators.fit_reward_model(log, Ridge(), n_folds=n_folds, rng=5)
    value, se = cascade_dr_with_regressor(log, t["cascade"], t["dist"], fitted.folds, n_folds)
    monkeypatch.setattr("evaluators._slate_ope._CHUNK_CELLS", chunk_cells)
    for dist in (t["dist"], pi):
        got = evaluators.cascade_dr(log, t["cascade"], dist, reward_model=fitted)
        assert got.value == pytest.approx(value, rel=1e-10, abs=1e-12)
        assert got.stderr == pytest.approx(se, rel=1e-9, abs=1e-12)
    got = evaluators.cascade_dr(log, t["cascade"], t["dist"], reward_model=Ridge(),
                                n_folds=n_folds, rng=5)  # the same folds
    assert got.value == pytest.approx(value, rel=1e-10, abs=1e-12)


def test_cascade_dr_with_a_regressor_on_two_records_in_two_folds():
    # each fold trains on the other's single record (not on both)
    log, t, pi = pl_problem(n=2, m=3, k=2, seed=1)
    fitted = evaluators.fit_reward_model(log, Ridge(), n_folds=2, rng=0)
    value, se = cascade_dr_with_regressor(log, t["cascade"], t["dist"], fitted.folds, 2)
    got = evaluators.cascade_dr(log, t["cascade"], t["dist"], reward_model=fitted)
    assert got.value == pytest.approx(value, rel=1e-10, abs=1e-12)
    assert got.stderr == pytest.approx(se, rel=1e-9, abs=1e-12)


def test_a_regressor_predicting_the_wrong_shape_is_refused():
    log, t, pi = pl_problem(n=5, m=3, k=2)

    class Short(Ridge):
        def predict(self, X):
            return super().predict(X)[:-1]

    with message(ValueError, "`reward_model` must be a regressor whose predict(X) returns one "
                             "value per row of X; got shape (14,)."):
        evaluators.cascade_dr(log, t["cascade"], t["dist"], reward_model=Short(), n_folds=1)


# -- the three IPS estimators on a log of four slates --------------------------------------------

ACTION = [[0, 1], [1, 2], [2, 0], [0, 2]]
CASCADE = [[0.5, 0.25], [0.25, 0.125], [0.25, 0.2], [0.5, 0.1]]
IPOS = [[0.5, 0.4], [0.25, 0.3], [0.25, 0.5], [0.5, 0.2]]
REWARD = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]]


def tiny_log(n=4, reward_type="clicks"):
    cas = np.array(CASCADE[:n])
    return SlateLog(context=np.arange(n, dtype=float), action=ACTION[:n], reward=REWARD[:n],
                    pscore=cas[:, -1], pscore_cascade=cas, pscore_item_position=IPOS[:n],
                    n_items=3, reward_type=reward_type)


def ess(w):
    return sum(w) ** 2 / sum(x * x for x in w)


def normal_z(level):
    from statistics import NormalDist
    return NormalDist().inv_cdf(0.5 + level / 2)


def check_estimate(est, terms, level, ess_, name):
    n = len(terms)
    mean = sum(terms) / n
    se = math.sqrt(sum((x - mean) ** 2 for x in terms) / (n - 1) / n)
    assert est.value == pytest.approx(mean, rel=1e-14, abs=1e-15)
    assert est.stderr == pytest.approx(se, rel=1e-12)
    z = normal_z(level)
    assert est.ci_low == pytest.approx(mean - z * se, rel=1e-12, abs=1e-14)
    assert est.ci_high == pytest.approx(mean + z * se, rel=1e-12, abs=1e-14)
    assert (est.n, est.level, est.estimator) == (n, level, name)
    assert est.ess == pytest.approx(ess_, rel=1e-12)


def test_slate_ips_independent_ips_and_rips_by_hand():
    log = tiny_log()
    pi_slate = [0.2, 0.0, 0.3, 0.05]
    pi_cas = [[0.4, 0.2], [0.5, 0.0], [0.1, 0.05], [0.3, 0.3]]
    pi_pos = [[0.4, 0.6], [0.2, 0.1], [0.0, 0.9], [0.3, 0.2]]
    w = [pi_slate[i] / CASCADE[i][1] for i in range(4)]
    check_estimate(evaluators.slate_ips(log, pi_slate, ci=0.8),
                   [w[i] * sum(REWARD[i]) for i in range(4)], 0.8, ess(w), "slate_ips")
    W = [[pi_pos[i][j] / IPOS[i][j] for j in range(2)] for i in range(4)]
    check_estimate(evaluators.independent_ips(log, pi_pos, ci=0.9),
                   [sum(W[i][j] * REWARD[i][j] for j in range(2)) for i in range(4)], 0.9,
                   min(ess([W[i][j] for i in range(4)]) for j in range(2)), "independent_ips")
    W = [[pi_cas[i][j] / CASCADE[i][j] for j in range(2)] for i in range(4)]
    check_estimate(evaluators.reward_interaction_ips(log, pi_cas),
                   [sum(W[i][j] * REWARD[i][j] for j in range(2)) for i in range(4)], 0.95,
                   min(ess([W[i][j] for i in range(4)]) for j in range(2)),
                   "reward_interaction_ips")
    # the smallest ess is at position 0 here: the min, not the first or the last position
    pi_cas = [[0.5, 0.01], [0.25, 0.125], [0.25, 0.2], [0.5, 0.1]]
    W = [[pi_cas[i][j] / CASCADE[i][j] for j in range(2)] for i in range(4)]
    assert ess([W[i][1] for i in range(4)]) < ess([W[i][0] for i in range(4)])
    assert evaluators.reward_interaction_ips(log, pi_cas).ess == pytest.approx(
        ess([W[i][1] for i in range(4)]), rel=1e-12)


def test_one_slate_has_a_value_and_no_stderr():
    log = tiny_log(n=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for est, value in ((evaluators.slate_ips(log, [0.125]), 0.5),
                           (evaluators.independent_ips(log, [[0.25, 0.2]]), 0.5),
                           (evaluators.reward_interaction_ips(log, [[1.0, 0.25]]), 2.0)):
            assert est.value == value and est.n == 1
            assert math.isnan(est.stderr) and math.isnan(est.ci_low) and math.isnan(est.ci_high)


def at_callers_file(w) -> bool:
    """The warning points at the caller (this file). Under mutmut every function is called
    through its trampoline, one frame more, so there it points at mutmut's trampoline: there
    the check is that it points out of the estimators' package (the stacklevel is computed by
    walking out of it), which a lost or fixed stacklevel misses (docs/testing.md, "a
    warning's stacklevel")."""
    if "MUTANT_UNDER_TEST" in os.environ:
        return (os.path.dirname(os.path.abspath(w.filename))
                != os.path.dirname(os.path.abspath(evaluators._slate_ope.__file__)))
    return w.filename == __file__


@pytest.mark.parametrize("name", ["slate_ips", "independent_ips", "reward_interaction_ips"])
def test_no_support_is_a_nan_with_the_estimators_name(name):
    log = tiny_log()
    zeros = np.zeros(4) if name == "slate_ips" else np.zeros((4, 2))
    with pytest.warns(NoSupportWarning) as caught:
        est = getattr(evaluators, name)(log, zeros, ci=0.9)
    assert [str(w.message) for w in caught] == [
        f"{name}: every importance weight is 0 (the target never shows a logged slate or "
        "prefix); returning nan."]
    assert at_callers_file(caught[0])
    assert all(math.isnan(x) for x in (est.value, est.stderr, est.ci_low, est.ci_high))
    assert (est.n, est.level, est.ess, est.estimator) == (4, 0.9, 0.0, name)


def test_one_nonzero_weight_is_support():
    log = tiny_log()
    est = evaluators.reward_interaction_ips(log, [[0.0, 0.0], [0.0, 0.0], [0.0, 0.0],
                                                  [0.5, 0.0]])
    assert est.value == 0.0 and est.ess == 0.0  # position 1 has no weight at all
    est = evaluators.slate_ips(log, [0.0, 0.0, 0.1, 0.0])
    assert est.value == pytest.approx(0.1 / 0.2 * 2 / 4, rel=1e-14) and est.ess == 1.0


@pytest.mark.parametrize("name", ["independent_ips", "reward_interaction_ips"])
def test_position_wise_estimators_refuse_any_click_logs(name):
    with message(ValueError, f"`log.reward_type` must be 'clicks' for {name} (it estimates the "
                             "expected sum of the positions' rewards, not whether any is "
                             "positive); got 'any_click'."):
        getattr(evaluators, name)(tiny_log(reward_type="any_click"), CASCADE)


def test_target_probabilities_refused_by_name_with_what_was_received():
    log = tiny_log()
    for bad, got in ((["a", "b", "c", "d"], "dtype <U1"), ([True] * 4, "dtype bool"),
                     ([1j] * 4, "dtype complex128")):
        with message(TypeError, f"`target_pscore` must be an array of probabilities; got {got}."):
            evaluators.slate_ips(log, bad)
    with message(ValueError, "`target_pscore` must be of shape (4,) (or OBP's flat (4,)); got "
                             "shape (3,)."):
        evaluators.slate_ips(log, [0.1, 0.2, 0.3])
    with message(ValueError, "`target_pscore_cascade` must be of shape (4, 2) (or OBP's flat "
                             "(8,)); got shape (2, 4)."):
        evaluators.reward_interaction_ips(log, np.full((2, 4), 0.1))
    with message(ValueError, "`target_pscore_item_position` must be of shape (4, 2) (or OBP's "
                             "flat (8,)); got shape (7,)."):
        evaluators.independent_ips(log, np.full(7, 0.1))
    for value, got in ((-0.5, "-0.5"), (math.nan, "nan"), (math.inf, "inf"),
                       (1.0 + 1e-11, "1.00000000001"), (-1e-300, "-1e-300")):
        pi = np.full((4, 2), 0.1)
        pi[2, 1] = value
        with message(ValueError, "`target_pscore_cascade` must be probabilities in [0, 1]; got "
                                 f"{got} at flat index 5."):
            evaluators.reward_interaction_ips(log, pi)
        with message(ValueError, "`target_pscore_cascade` must be probabilities in [0, 1]; got "
                                 f"{got} at flat index 5."):
            evaluators.reward_interaction_ips(log, pi.ravel())


def test_target_probabilities_flat_integer_and_round_off_of_one():
    log = tiny_log()
    pi = np.array([[0.4, 0.2], [0.5, 0.0], [0.1, 0.05], [0.3, 0.3]])
    a = evaluators.reward_interaction_ips(log, pi)
    assert evaluators.reward_interaction_ips(log, pi.ravel()).value == a.value
    ints = evaluators.slate_ips(log, [1, 0, 0, 1])
    assert ints.value == pytest.approx((1 / 0.25 * 1 + 0 + 0 + 1 / 0.1 * 0) / 4, rel=1e-14)
    # 1 + a few ulps is 1 (round-off of a product of probabilities), not a refusal, up to
    # 1 + 1e-12 included
    for above in (1 + 1e-13, 1.0 + 1e-12):
        one = evaluators.slate_ips(log, [above, 0, 0, 0])
        assert one.value == 1 / 0.25 / 4
    # any float or integer dtype
    for dtype in (np.float32, np.float16, np.int8, np.uint16):
        got = evaluators.slate_ips(log, np.array([1, 0, 0, 1], dtype=dtype))
        assert got.value == ints.value
    half = evaluators.slate_ips(log, np.array([0.5, 0.25, 0.5, 0.125], dtype=np.float32))
    assert half.value == evaluators.slate_ips(log, [0.5, 0.25, 0.5, 0.125]).value


class SharedStateRidge(Ridge):
    """A regressor keeping its coefficients in a dict made in ``__init__``: only a deep copy
    per model keeps the models (and the caller's object) apart."""

    def __init__(self):
        super().__init__()
        self.state = {}

    def fit(self, X, y):
        self.state["coef"] = Ridge.fit(Ridge(), X, y).coef_
        return self

    def predict(self, X):
        return np.hstack([np.ones((len(X), 1)), X]) @ self.state["coef"]


def test_every_fold_and_position_fits_a_deep_copy_of_the_regressor():
    log, t, pi = pl_problem(n=7, m=4, k=3, seed=2)
    mine = SharedStateRidge()
    fitted = evaluators.fit_reward_model(log, mine, n_folds=2, rng=5)
    value, se = cascade_dr_with_regressor(log, t["cascade"], t["dist"], fitted.folds, 2)
    got = evaluators.cascade_dr(log, t["cascade"], t["dist"], reward_model=fitted)
    assert got.value == pytest.approx(value, rel=1e-10, abs=1e-12)
    assert mine.state == {}


# -- Cascade-DR's action distribution: an array or a policy ---------------------------------------

# pi(a | x_i, s_i0 .. s_i,j-1) for the slates of ACTION (3 items, 2 positions), in eighths
DIST = np.array([[[0.5, 0.25, 0.25], [0.0, 0.5, 0.5]],
                 [[0.25, 0.5, 0.25], [0.5, 0.0, 0.5]],
                 [[0.25, 0.25, 0.5], [0.75, 0.25, 0.0]],
                 [[0.5, 0.25, 0.25], [0.0, 0.5, 0.5]]])
DIST_CASCADE = np.array([[0.5, 0.25], [0.5, 0.25], [0.5, 0.375], [0.5, 0.25]])


def dist_log():
    log = tiny_log()
    return SlateLog(context=log.context, action=log.action, reward=log.reward, pscore=log.pscore,
                    pscore_cascade=log.pscore_cascade,
                    pscore_item_position=log.pscore_item_position, n_items=3, user=np.arange(4))


class ArrayPolicy:
    """A slate policy answering from an (n, k, n_items) array by the record's ``user``, and
    counting the records it was asked about."""

    def __init__(self, D):
        self.D, self.asked = D, []

    def conditional_probabilities(self, observations, slates):
        self.asked.append(observations["user"].tolist())
        return self.D[observations["user"]]


def dr_by_hand(log, cascade, D, q):
    terms = []
    for i in range(log.n_rounds):
        term, w_prev = 0.0, 1.0
        for j in range(log.len_list):
            w = cascade[i][j] / log.pscore_cascade[i, j]
            q_exp = sum(D[i][j][a] * q[i][j][a] for a in range(log.n_items))
            term += w * (log.reward[i, j] - q[i][j][log.action[i, j]]) + w_prev * q_exp
            w_prev = w
        terms.append(term)
    return terms


def test_cascade_dr_with_a_q_array_by_hand():
    log = dist_log()
    q = np.arange(24.0).reshape(4, 2, 3) / 24
    terms = dr_by_hand(log, DIST_CASCADE, DIST, q)
    W = DIST_CASCADE / np.array(CASCADE)
    for dist in (DIST, ArrayPolicy(DIST), DIST.ravel()):
        check_estimate(evaluators.cascade_dr(log, DIST_CASCADE, dist, reward_model=q, ci=0.8),
                       terms, 0.8, min(ess(W[:, 0]), ess(W[:, 1])), "cascade_dr")
    int_q = np.ones((4, 2, 3), dtype=np.int64)
    assert evaluators.cascade_dr(log, DIST_CASCADE, DIST, reward_model=int_q).value == \
        pytest.approx(np.mean(dr_by_hand(log, DIST_CASCADE, DIST, int_q)), rel=1e-14)


def test_an_action_dist_is_refused_at_its_first_bad_record():
    log = dist_log()
    D = DIST.copy()
    D[2, 1] = [0.75, 0.25, 0.5]
    for dist in (D, ArrayPolicy(D)):
        with message(ValueError, "`target_action_dist` must be distributions over the items "
                                 "(rows summing to 1); got sums [1.0, 1.5] at record 2."):
            evaluators.cascade_dr(log, DIST_CASCADE, dist, reward_model=np.zeros((4, 2, 3)))
    D = DIST.copy()
    D[1, 0] = [0.25 + 2e-6, 0.5, 0.25]  # sums 1 + 2e-6: refused
    with pytest.raises(ValueError, match="rows summing to 1"):
        evaluators.cascade_dr(log, DIST_CASCADE, D)
    D[1, 0] = [0.25 + 5e-7, 0.5, 0.25]  # 1 + 5e-7: round-off, accepted
    evaluators.cascade_dr(log, DIST_CASCADE, D)
    cas = DIST_CASCADE.copy()
    cas[3, 1] = 0.2
    for dist in (DIST, ArrayPolicy(DIST)):
        with message(ValueError, "`target_action_dist` must be consistent with "
                                 "`target_pscore_cascade` (the product of its probabilities of "
                                 "the logged items is the prefix probability); got [0.5, 0.25] "
                                 "against [0.5, 0.2] at record 3."):
            evaluators.cascade_dr(log, cas, dist)


def test_the_prefix_probabilities_are_matched_to_a_relative_1e_6():
    log = dist_log()
    for rel, ok in ((5e-7, True), (2e-6, False)):
        cas = DIST_CASCADE.copy()
        cas[1, 1] *= 1 + rel
        if ok:
            evaluators.cascade_dr(log, cas, DIST)
        else:
            with pytest.raises(ValueError, match="consistent with"):
                evaluators.cascade_dr(log, cas, DIST)
    # and to an absolute 1e-12 near 0: a prefix the target never shows
    D = DIST.copy()
    D[0, 1] = [0.0, 0.0, 1.0]  # the logged item 1 has probability 0 at position 1
    for p, ok in ((5e-13, True), (2e-12, False)):
        cas = DIST_CASCADE.copy()
        cas[0, 1] = p
        if ok:
            evaluators.cascade_dr(log, cas, D)
        else:
            with pytest.raises(ValueError, match="consistent with"):
                evaluators.cascade_dr(log, cas, D)


def test_a_policys_answers_are_checked_by_name():
    log = dist_log()

    class Flat(ArrayPolicy):
        def conditional_probabilities(self, observations, slates):
            return super().conditional_probabilities(observations, slates)[:, 0]

    with message(ValueError, "`target_action_dist` must be of shape (4, 2, 3) (or OBP's flat "
                             "(24,)); got shape (4, 3)."):
        evaluators.cascade_dr(log, DIST_CASCADE, Flat(DIST))
    D = DIST.copy()
    D[3, 1] = [0.0, 1.5, -0.5]
    with message(ValueError, "`target_action_dist` must be probabilities in [0, 1]; got 1.5 at "
                             "flat index 22."):
        evaluators.cascade_dr(log, DIST_CASCADE, ArrayPolicy(D))


@pytest.mark.parametrize("model", ["mean", "ridge", "q"])
def test_a_policy_asked_chunk_by_chunk_gives_the_arrays_estimate(model, monkeypatch):
    # a policy whose action distribution is not kept whole (_WHOLE_CELLS 0) is asked again
    # for each pass, two records at a time (_CHUNK_CELLS 12 = 2 x k x n_items)
    log, t, pi = pl_problem(n=7, m=3, k=2, seed=3)
    q = np.random.default_rng(0).random((7, 2, 3))
    kw = {"mean": {}, "ridge": {"reward_model": Ridge()}, "q": {"reward_model": q}}[model]
    want = evaluators.cascade_dr(log, t["cascade"], t["dist"], rng=1, **kw)
    monkeypatch.setattr("evaluators._slate_ope._WHOLE_CELLS", 0)
    monkeypatch.setattr("evaluators._slate_ope._CHUNK_CELLS", 12)
    policy = ArrayPolicy(t["dist"])
    got = evaluators.cascade_dr(log, t["cascade"], policy, rng=1, **kw)
    assert got.value == pytest.approx(want.value, rel=1e-12, abs=1e-14)
    assert got.stderr == pytest.approx(want.stderr, rel=1e-12, abs=1e-14)
    assert all(len(a) <= 2 for a in policy.asked)
    # passes over the log: q 1, mean 2, ridge per position each fold's train and test parts
    passes = {"q": 1, "mean": 2, "ridge": 2 * 2}[model]
    assert sum(len(a) for a in policy.asked) == 7 * passes
    if model != "ridge":
        assert policy.asked == [[0, 1], [2, 3], [4, 5], [6]] * passes
    monkeypatch.setattr("evaluators._slate_ope._CHUNK_CELLS", 1)  # one record at a time
    policy = ArrayPolicy(t["dist"])
    evaluators.cascade_dr(log, t["cascade"], policy, rng=1, **kw)
    assert all(len(a) == 1 for a in policy.asked)


def test_a_small_policy_is_asked_once(monkeypatch):
    log, t, pi = pl_problem(n=7, m=3, k=2, seed=3)
    policy = ArrayPolicy(t["dist"])
    monkeypatch.setattr("evaluators._slate_ope._CHUNK_CELLS", 12)
    want = evaluators.cascade_dr(log, t["cascade"], t["dist"], rng=1)
    got = evaluators.cascade_dr(log, t["cascade"], policy, rng=1)
    assert got.value == pytest.approx(want.value, rel=1e-12, abs=1e-14)
    assert policy.asked == [[0, 1], [2, 3], [4, 5], [6]]  # kept whole: one pass
    monkeypatch.setattr("evaluators._slate_ope._WHOLE_CELLS", 42)  # 7 x 2 x 3 is still small
    policy = ArrayPolicy(t["dist"])
    evaluators.cascade_dr(log, t["cascade"], policy, rng=1)
    assert policy.asked == [[0, 1], [2, 3], [4, 5], [6]]


# -- Cascade-DR's other arguments -----------------------------------------------------------------

def test_cascade_dr_refusals_word_for_word():
    log = dist_log()
    rule = "'mean', an array (n_rounds, len_list, n_items) or a regressor with fit/predict"
    with message(ValueError, f"`reward_model` must be {rule}; got 'ridge'."):
        evaluators.cascade_dr(log, DIST_CASCADE, DIST, reward_model="ridge")
    for bad, got in ((object(), "object"), ([["a"]], "list")):
        with message(TypeError, f"`reward_model` must be {rule}; got {got}."):
            evaluators.cascade_dr(log, DIST_CASCADE, DIST, reward_model=bad)
    with message(ValueError, "`reward_model` must be an array of shape (4, 2, 3); got shape "
                             "(4, 6)."):
        evaluators.cascade_dr(log, DIST_CASCADE, DIST, reward_model=np.zeros((4, 6)))
    with message(ValueError, "`reward_model` must be an array of shape (4, 2, 3); got shape "
                             "(23,)."):
        evaluators.cascade_dr(log, DIST_CASCADE, DIST, reward_model=np.zeros(23))
    for v in (math.nan, math.inf):
        q = np.zeros((4, 2, 3))
        q[3, 1, 2] = v
        with message(ValueError, "`reward_model` must be finite; got nan or inf."):
            evaluators.cascade_dr(log, DIST_CASCADE, DIST, reward_model=q)
    with message(ValueError, "`log.reward_type` must be 'clicks' for cascade_dr (it estimates "
                             "the expected sum of the positions' rewards, not whether any is "
                             "positive); got 'any_click'."):
        evaluators.cascade_dr(tiny_log(reward_type="any_click"), DIST_CASCADE, DIST)
    with message(ValueError, "`n_folds` must be an int in [1, 4]; got 5."):
        evaluators.cascade_dr(log, DIST_CASCADE, DIST, n_folds=5)
    fitted = evaluators.fit_reward_model(log, "mean", n_folds=3, rng=0)
    with message(ValueError, "`n_folds` must be 3 (the value `reward_model` was fitted with) "
                             "or left out; got 2."):
        evaluators.cascade_dr(log, DIST_CASCADE, DIST, reward_model=fitted, n_folds=2)
    evaluators.cascade_dr(log, DIST_CASCADE, DIST, reward_model=fitted, n_folds=3)
    other = evaluators.fit_reward_model(tiny_log(n=3), "mean", n_folds=3, rng=0)
    with pytest.raises(ValueError, match="^`reward_model` must be a reward model fitted on "
                                         "this log"):
        evaluators.cascade_dr(log, DIST_CASCADE, DIST, reward_model=other)


def test_a_one_record_log_takes_one_fold():
    log = dist_log().take([1])
    fitted = evaluators.fit_reward_model(log, "mean", n_folds=1, rng=0)
    est = evaluators.cascade_dr(log, DIST_CASCADE[1:2], DIST[1:2], reward_model=fitted)
    assert est.n == 1 and math.isnan(est.stderr)
    # the "mean" model of one record [1, 2] with rewards [0, 1]: T_1 = 1 (item 2, the others
    # the position's mean), T_0 = 0 + sum_b pi(b | 1) T_1(b) = 1 for every item
    assert est.value == pytest.approx(dr_by_hand(log, DIST_CASCADE[1:2], DIST[1:2],
                                                 np.ones((1, 2, 3)))[0], rel=1e-14)
    with message(ValueError, "`n_folds` must be an int in [1, 1]; got 2."):
        evaluators.cascade_dr(log, DIST_CASCADE[1:2], DIST[1:2], reward_model=fitted,
                              n_folds=2)


def test_the_default_folds_are_two_drawn_from_rng():
    log, t, pi = pl_problem(n=9, m=3, k=2, seed=4)
    for model in ("mean", Ridge()):
        got = evaluators.cascade_dr(log, t["cascade"], t["dist"], reward_model=model, rng=3)
        fitted = evaluators.fit_reward_model(log, model, n_folds=2, rng=3)
        assert got.value == evaluators.cascade_dr(log, t["cascade"], t["dist"],
                                                  reward_model=fitted).value
        other = evaluators.fit_reward_model(log, model, n_folds=3, rng=3)
        assert got.value != evaluators.cascade_dr(log, t["cascade"], t["dist"],
                                                  reward_model=other).value


def test_no_support_in_cascade_dr():
    log = dist_log()
    D = DIST.copy()
    D[:, 0] = [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    with pytest.warns(NoSupportWarning) as caught:
        est = evaluators.cascade_dr(log, np.zeros((4, 2)), D, ci=0.9)
    assert [str(w.message) for w in caught] == [
        "cascade_dr: every importance weight is 0 (the target never shows a logged slate or "
        "prefix); returning nan."]
    assert at_callers_file(caught[0])
    assert (est.n, est.level, est.ess, est.estimator) == (4, 0.9, 0.0, "cascade_dr")
    assert math.isnan(est.value) and math.isnan(est.ci_high)


# -- the pseudo-inverse on a uniform log with availability -----------------------------------------

AVAILABLE = np.array([[1, 1, 1, 1], [1, 0, 1, 1], [0, 1, 1, 0], [1, 1, 1, 1], [1, 1, 0, 1]],
                     dtype=bool)  # m = 4, 3, 2 (= k: full rankings), 4, 3
PI_ACTION = [[0, 3], [2, 0], [2, 1], [1, 2], [3, 1]]
PI_REWARD = [[1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [0.0, 0.0], [1.0, 0.0]]


def uniform_log(available=AVAILABLE, action=PI_ACTION, reward=PI_REWARD, k=2):
    m = available.sum(axis=1).astype(float)
    cas = np.stack([1 / m, 1 / (m * (m - 1))], axis=1) if k == 2 else (1 / m)[:, None]
    return SlateLog(context=np.zeros((len(m), 1)), action=action, reward=reward,
                    pscore=cas[:, -1], pscore_cascade=cas,
                    pscore_item_position=np.tile(1 / m[:, None], (1, k)), n_items=4,
                    available=available, user=np.arange(len(m)))


def pi_weight(avail, slate, full_marginals):
    """1_s^T Gamma^+ q for one record: Gamma of the uniform ranking policy over the available
    items, built by enumerating its slates and inverted by numpy.linalg.pinv."""
    import itertools
    items = np.flatnonzero(avail)
    k, m = len(slate), len(avail)
    slates = list(itertools.permutations(items, k))
    X = np.zeros((len(slates), k * m))
    for r, s in enumerate(slates):
        X[r, [j * m + s[j] for j in range(k)]] = 1.0
    G = np.linalg.pinv(X.T @ X / len(slates))
    q = full_marginals.T.ravel()  # (n_items, k) as the (position, item) vector
    s = np.zeros(k * m)
    s[[j * m + slate[j] for j in range(k)]] = 1.0
    return float(s @ G @ q)


def test_the_pseudoinverse_with_availability_equals_the_general_estimator():
    log = uniform_log()
    scores = np.random.default_rng(7).normal(0, 1, (5, 4))
    pi = PlackettLuce(scores, k=2, temperature=0.8)
    obs = log.observations()
    full = pi.marginals(obs)  # (n, n_items, k)
    w = [pi_weight(AVAILABLE[i], PI_ACTION[i], full[i]) for i in range(5)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # m = k on record 2: no division by m - k shows
        est = evaluators.pseudoinverse(log, pi.item_marginals(obs, log.action), ci=0.9)
    check_estimate(est, [w[i] * sum(PI_REWARD[i]) for i in range(5)], 0.9, ess(w),
                   "pseudoinverse")
    # full rankings everywhere (m = k = 2): w = (m - 1) sum_j pi_j(s_j) - (k - 2)
    av = np.zeros((5, 4), bool)
    av[np.arange(5)[:, None], PI_ACTION] = True
    log = uniform_log(available=av)
    obs = log.observations()
    marg = pi.item_marginals(obs, log.action)
    w = [marg[i, 0, 0] + marg[i, 1, 1] for i in range(5)]
    check_estimate(evaluators.pseudoinverse(log, marg), [w[i] * sum(PI_REWARD[i])
                                                          for i in range(5)],
                   0.95, ess(w), "pseudoinverse")


def test_the_pseudoinverse_of_single_item_slates():
    # k = 1: w = (m - 1) pi(s) + (m - 1) / (m - 1) pi(s) - 0 = m pi(s)
    av = AVAILABLE[[0, 1, 3]]
    log = uniform_log(available=av, action=[[0], [2], [1]], reward=[[1.0], [1.0], [0.0]], k=1)
    marg = np.array([[[0.5]], [[0.25]], [[0.125]]])
    w = [4 * 0.5, 3 * 0.25, 4 * 0.125]
    check_estimate(evaluators.pseudoinverse(log, marg), [w[0], w[1], 0.0], 0.95, ess(w),
                   "pseudoinverse")


def test_the_pseudoinverse_refuses_other_logging_policies_by_record():
    log = uniform_log()
    marg = np.full((5, 2, 2), 0.25)
    ipos = log.pscore_item_position.copy()
    ipos[3] = [0.25, 0.25 * (1 + 1e-8)]
    bad = SlateLog(context=log.context, action=log.action, reward=log.reward, pscore=log.pscore,
                   pscore_cascade=log.pscore_cascade, pscore_item_position=ipos, n_items=4,
                   available=AVAILABLE)
    p = bad.pscore[3]
    with message(ValueError, "`log` must be a log of the uniform ranking policy for "
                             "`pseudoinverse` (pscore_item_position = 1/m, pscore = (m-k)!/m! "
                             "with m the available items); got pscore_item_position "
                             f"[0.25, {float(ipos[3, 1])!r}] and pscore {float(p)!r} at record "
                             "3 (m = 4)."):
        evaluators.pseudoinverse(bad, marg)
    ipos[3] = [0.25, 0.25 * (1 + 1e-10)]  # within the relative 1e-9
    evaluators.pseudoinverse(SlateLog(context=log.context, action=log.action, reward=log.reward,
                                      pscore=log.pscore, pscore_cascade=log.pscore_cascade,
                                      pscore_item_position=ipos, n_items=4, available=AVAILABLE),
                             marg)
    for rel, ok in ((1e-8, True), (1e-6, False)):
        cas = log.pscore_cascade.copy()
        cas[1, 1] *= 1 + rel
        other = SlateLog(context=log.context, action=log.action, reward=log.reward,
                         pscore=cas[:, 1], pscore_cascade=cas,
                         pscore_item_position=log.pscore_item_position, n_items=4,
                         available=AVAILABLE)
        if ok:
            evaluators.pseudoinverse(other, marg)
        else:
            with pytest.raises(ValueError, match=re.escape(f"and pscore {float(cas[1, 1])!r} at "
                                                           "record 1 (m = 3).")):
                evaluators.pseudoinverse(other, marg)
    # without `available` every item counts: m = 4 on every record
    full = uniform_log(available=np.ones((5, 4), bool))
    plain = SlateLog(context=full.context, action=full.action, reward=full.reward,
                     pscore=full.pscore, pscore_cascade=full.pscore_cascade,
                     pscore_item_position=full.pscore_item_position, n_items=4)
    assert evaluators.pseudoinverse(plain, marg).value == \
        evaluators.pseudoinverse(full, marg).value
    with pytest.raises(ValueError, match=re.escape("at record 1 (m = 4).")):
        evaluators.pseudoinverse(SlateLog(
            context=log.context, action=log.action, reward=log.reward, pscore=log.pscore,
            pscore_cascade=log.pscore_cascade, pscore_item_position=log.pscore_item_position,
            n_items=4), marg)


def test_the_pseudoinverse_has_support_where_a_logged_item_is_anywhere():
    log = uniform_log()
    marg = np.zeros((5, 2, 2))
    marg[2, 0, 1] = 0.5  # record 2's first item at the other position: weight (m = k = 2)
    est = evaluators.pseudoinverse(log, marg)  # w_2 = (2 - 1) * 0 - (2 - 2) = 0, but support
    m = np.array([4, 3, 2, 4, 3.0])
    w = np.array([-x / (x - 2) if x > 2 else 0.0 for x in m])  # (m-1)/(m-k) 0 - m(k-1)/(m-k)
    check_estimate(est, list(w * log.slate_reward), 0.95, ess(w), "pseudoinverse")
    with pytest.warns(NoSupportWarning, match="^pseudoinverse: every importance weight is 0"):
        evaluators.pseudoinverse(log, np.zeros((5, 2, 2)))


# -- a policy's conditional factors ---------------------------------------------------------------

# pi(a | x_i, s_i0 .. s_i,j-1) = WEIGHTS[ROW[i], a] / remaining[i, j] for the slates of ACTION
WEIGHTS = np.array([[2.0, 1.0, 1.0], [1.0, 2.0, 1.0], [1.0, 1.0, 2.0]])
ROW = np.array([0, 1, 2, 0])


def factor_arrays(weights=WEIGHTS, row=ROW, action=ACTION):
    """The remaining weights, the conditionals (n, k, n_items) and the prefix probabilities
    of the factors, written out record by record."""
    n, k, m = len(row), len(action[0]), weights.shape[1]
    R, D, cas = np.zeros((n, k)), np.zeros((n, k, m)), np.zeros((n, k))
    for i in range(n):
        w = weights[row[i]]
        p = 1.0
        for j in range(k):
            R[i, j] = w.sum() - sum(w[action[i][h]] for h in range(j))
            for a in range(m):
                D[i, j, a] = 0.0 if a in action[i][:j] else w[a] / R[i, j]
            p *= D[i, j, action[i][j]]
            cas[i, j] = p
    return R, D, cas


class FactorPolicy:
    """A slate policy with ``conditional_factors`` from fixed weights, indexed by the record's
    ``user``; its answers may be replaced (``answer``) to test the checks."""

    def __init__(self, weights=WEIGHTS, row=ROW, answer=None):
        self.weights, self.row, self.answer, self.asked = weights, row, answer, []
        self.R, self.D, self.cas = factor_arrays(weights, row)

    def conditional_probabilities(self, observations, slates):
        return self.D[observations["user"]]

    def conditional_factors(self, observations, slates):
        users = observations["user"]
        self.asked.append(users.tolist())
        if self.answer is not None:
            return self.answer(users)
        # one weight row per record of the chunk (rows repeated across chunks: merged)
        return self.weights[self.row[users]], np.arange(users.size), self.R[users]


def test_cascade_dr_from_factors_equals_the_array(monkeypatch):
    log = dist_log()
    policy = FactorPolicy()
    assert np.allclose(policy.cas, [[0.5, 0.25]] * 4)
    q = np.arange(24.0).reshape(4, 2, 3) / 24
    want = evaluators.cascade_dr(log, policy.cas, policy.D, reward_model=q)
    check_estimate(want, dr_by_hand(log, policy.cas, policy.D, q), 0.95,
                   min(ess(policy.cas[:, j] / log.pscore_cascade[:, j]) for j in range(2)),
                   "cascade_dr")
    for model in ("mean", Ridge()):
        want = evaluators.cascade_dr(log, policy.cas, policy.D, reward_model=model, rng=0)
        for cells in (1 << 22, 6):  # in one chunk, or two records per chunk (6 // 3 items)
            monkeypatch.setattr("evaluators._slate_ope._CHUNK_CELLS", cells)
            policy = FactorPolicy()
            got = evaluators.cascade_dr(log, policy.cas, policy, reward_model=model, rng=0)
            assert got.value == pytest.approx(want.value, rel=1e-12, abs=1e-14)
            assert got.stderr == pytest.approx(want.stderr, rel=1e-12, abs=1e-14)
            if model == "mean":
                assert policy.asked == ([[0, 1, 2, 3]] if cells > 6 else [[0, 1], [2, 3]])


WHAT = ("`target_action_dist` must be conditional_factors returning (weights (u, n_items) >= 0, "
        "row (n,) in [0, u), remaining (n, k) > 0), finite")


def test_a_policys_factors_are_refused_with_what_was_received():
    log = dist_log()
    R = factor_arrays()[0]
    cas = factor_arrays()[2]
    for got, shown in (("nonsense", "'nonsense'"), (None, "None"), ((1, 2), "(1, 2)"),
                       (("a", [0], [[1.0]]), "('a', [0], [[1.0]])"),
                       ("x" * 100, "'" + "x" * 79)):
        with message(ValueError, f"{WHAT}; got {shown}."):
            evaluators.cascade_dr(log, cas, FactorPolicy(answer=lambda u, g=got: g))
    text = (WEIGHTS, ROW, np.full((4, 2), "x"))  # remaining weights that are not numbers
    with message(ValueError, f"{WHAT}; got {repr(text)[:80]}."):
        evaluators.cascade_dr(log, cas, FactorPolicy(answer=lambda u: text))
    good = (WEIGHTS, ROW, R)
    shapes = [((WEIGHTS[0], ROW, R), "(3,), (4,), (4, 2)"),
              ((WEIGHTS[:, :2], ROW, R), "(3, 2), (4,), (4, 2)"),
              ((WEIGHTS, ROW[:3], R), "(3, 3), (3,), (4, 2)"),
              ((WEIGHTS, ROW, R[:, :1]), "(3, 3), (4,), (4, 1)"),
              ((WEIGHTS, ROW.astype(float), R), "(3, 3), (4,), (4, 2)")]
    for got, shown in shapes:
        with message(ValueError, f"{WHAT} with n = 4, k = 2, n_items = 3; got shapes {shown}."):
            evaluators.cascade_dr(log, cas, FactorPolicy(answer=lambda u, g=got: g))
    evaluators.cascade_dr(log, cas, FactorPolicy(answer=lambda u: good))
    for i, value in ((0, -1.0), (0, math.nan), (0, math.inf), (2, 0.0), (2, -1.0), (2, math.nan),
                     (2, math.inf), (1, -1), (1, 3)):
        bad = [WEIGHTS.copy(), ROW.copy(), R.copy()]
        bad[i].flat[1] = value
        with message(ValueError, f"{WHAT}; got negative, zero, out-of-range or non-finite "
                                 "values."):
            evaluators.cascade_dr(log, cas, FactorPolicy(answer=lambda u, g=bad: tuple(g)))
    zero = WEIGHTS.copy()
    zero[0, 1] = 0.0  # a weight of 0 is allowed (an item the target never shows)
    evaluators.cascade_dr(log, factor_arrays(zero)[2], FactorPolicy(weights=zero))


def test_a_policys_remaining_weights_must_match_its_weights():
    log = dist_log()
    R, D, cas = factor_arrays()
    for rel, ok in ((5e-7, True), (2e-6, False)):
        bad = R.copy()
        bad[2, 1] *= 1 + rel
        policy = FactorPolicy(answer=lambda u, b=bad: (WEIGHTS, ROW, b))
        if ok:
            evaluators.cascade_dr(log, cas, policy)
        else:
            with message(ValueError, "`target_action_dist` must be conditional_factors whose "
                                     "`remaining` is the weight of the items not shown (rows "
                                     f"summing to 1); got [4.0, {float(bad[2, 1])!r}] against "
                                     "[4.0, 2.0] at record 2."):
                evaluators.cascade_dr(log, cas, policy)
    c = cas.copy()
    c[3, 1] = 0.2
    with message(ValueError, "`target_action_dist` must be consistent with "
                             "`target_pscore_cascade` (the product of its probabilities of the "
                             "logged items is the prefix probability); got [0.5, 0.25] against "
                             "[0.5, 0.2] at record 3."):
        evaluators.cascade_dr(log, c, FactorPolicy())


def test_a_fold_holding_every_record_trains_on_every_record():
    # a SlateRewardModel made by hand with every record in fold 0 of 2: fold 0 has no other
    # fold to learn from, so it learns from the whole log, as one fold does
    from evaluators import SlateRewardModel
    log, t, pi = pl_problem(n=6, m=3, k=2, seed=5)
    for model in ("mean", Ridge()):
        one = evaluators.fit_reward_model(log, model, n_folds=1, rng=0)
        lopsided = SlateRewardModel(log, model, 2, np.zeros(6, dtype=np.int64))
        want = evaluators.cascade_dr(log, t["cascade"], t["dist"], reward_model=one)
        got = evaluators.cascade_dr(log, t["cascade"], t["dist"], reward_model=lopsided)
        assert got.value == pytest.approx(want.value, rel=1e-12, abs=1e-14)


def test_the_pseudoinverse_of_full_rankings_of_three():
    # m = k = 3: w = (m - 1) sum_j pi_j(s_j) - (k - 2), against the general estimator
    log, t, pi = pl_problem(n=5, m=3, k=3, seed=6, uniform=True)
    full = pi.marginals(log.observations())
    w = [pi_weight(np.ones(3, bool), log.action[i], full[i]) for i in range(5)]
    assert w == pytest.approx([2 * np.trace(t["marg"][i]) - 1 for i in range(5)], abs=1e-12)
    check_estimate(evaluators.pseudoinverse(log, t["marg"]),
                   [w[i] * log.slate_reward[i] for i in range(5)], 0.95, ess(w), "pseudoinverse")


def test_the_pseudoinverse_checks_tiny_slate_probabilities_relatively():
    # 200 items, slates of 4: pscore = 1 / (200 199 198 197) ~ 6.5e-10; twice that is not the
    # uniform policy, however small the difference
    m = 200
    cas = np.array([[1 / m, 1 / (m * 199), 1 / (m * 199 * 198), 2 / (m * 199 * 198 * 197)]])
    log = SlateLog(context=np.zeros((1, 1)), action=[[0, 1, 2, 3]], reward=[[1.0, 0, 0, 0]],
                   pscore=cas[:, -1], pscore_cascade=cas, pscore_item_position=np.full((1, 4),
                                                                                      1 / m),
                   n_items=m)
    with pytest.raises(ValueError, match=re.escape("at record 0 (m = 200).")):
        evaluators.pseudoinverse(log, np.full((1, 4, 4), 0.001))


def test_the_estimators_name_their_target_argument():
    log = dist_log()
    with message(ValueError, "`target_pscore_cascade` must be of shape (4, 2) (or OBP's flat "
                             "(8,)); got shape (4, 3)."):
        evaluators.cascade_dr(log, np.full((4, 3), 0.1), DIST)
    with message(ValueError, "`target_action_dist` must be of shape (4, 2, 3) (or OBP's flat "
                             "(24,)); got shape (4, 2, 2)."):
        evaluators.cascade_dr(log, DIST_CASCADE, DIST[:, :, :2])
    with message(ValueError, "`target_item_marginals` must be of shape (5, 2, 2) (or OBP's flat "
                             "(20,)); got shape (5, 2)."):
        evaluators.pseudoinverse(uniform_log(), np.full((5, 2), 0.1))


def test_cascade_dr_takes_a_q_array_of_any_real_dtype_or_flat():
    log = dist_log()
    q = np.arange(24.0).reshape(4, 2, 3) / 32  # exact in float32
    want = evaluators.cascade_dr(log, DIST_CASCADE, DIST, reward_model=q).value
    assert want == pytest.approx(np.mean(dr_by_hand(log, DIST_CASCADE, DIST, q)), rel=1e-14)
    for got in (q.astype(np.float32), q.ravel(), q.astype(np.float32).ravel()):
        assert evaluators.cascade_dr(log, DIST_CASCADE, DIST, reward_model=got).value == want


def test_an_object_with_fit_but_no_predict_is_not_a_regressor():
    log = dist_log()

    class OnlyFit:
        def fit(self, X, y):
            return self

    class OnlyPredict:
        def predict(self, X):
            return np.zeros(len(X))

    rule = "'mean', an array (n_rounds, len_list, n_items) or a regressor with fit/predict"
    for obj in (OnlyFit(), OnlyPredict()):
        with message(TypeError, f"`reward_model` must be {rule}; got {type(obj).__name__}."):
            evaluators.cascade_dr(log, DIST_CASCADE, DIST, reward_model=obj)


# -- issue 33: the survivors of the run's continuation (_Factors) ---------------------------------

def test_a_remaining_weight_is_checked_to_its_tolerance_at_the_boundary():
    # |rest - R| <= 1e-6 R + 1e-12 total: the absolute part is relative to the row's total, so
    # the weight left after an item holding nearly all of it (1e12 of 1e12 + 2) may be off by
    # about 1 (its round-off after the subtraction); exactly the tolerance is accepted, one ulp
    # more is refused
    log = dist_log()
    weights = np.array([[1e12, 1.0, 1.0], [1.0, 2.0, 1.0], [1.0, 1.0, 2.0]])
    R = factor_arrays(weights)[0]
    total, rest = 1e12 + 2.0, 2.0  # record 0 shows items 0 and 1: 2 is left at position 1
    assert (R[0, 0], R[0, 1], weights[0].sum()) == (total, rest, total)

    def tol(r):
        return 1e-6 * r + 1e-12 * total

    r = 3.0
    for _ in range(5):  # the fixed point r = rest + tol(r), then the float where they meet
        r = rest + tol(r)
    edges = [x for x in (r + o * np.spacing(r) for o in range(-3, 4)) if abs(rest - x) == tol(x)]
    assert edges, "no float meets the tolerance exactly near the fixed point"
    edge = float(edges[-1])

    def cascade_of(R):  # the prefix probabilities of the factors with these remaining weights
        cas = np.zeros((4, 2))
        for i in range(4):
            p = 1.0
            for j in range(2):
                p *= weights[ROW[i], ACTION[i][j]] / R[i, j]
                cas[i, j] = p
        return cas

    for value, ok in ((3.0, True), (edge, True), (float(np.nextafter(edge, np.inf)), False)):
        bad = R.copy()
        bad[0, 1] = value
        policy = FactorPolicy(weights=weights, answer=lambda u, b=bad: (weights, ROW, b))
        if ok:
            got = evaluators.cascade_dr(log, cascade_of(bad), policy, reward_model="mean", rng=0)
            assert math.isfinite(got.value)
        else:
            with message(ValueError, "`target_action_dist` must be conditional_factors whose "
                                     "`remaining` is the weight of the items not shown (rows "
                                     f"summing to 1); got [{total!r}, {value!r}] against "
                                     f"[{total!r}, 2.0] at record 0."):
                evaluators.cascade_dr(log, cascade_of(bad), policy)


def test_a_policys_factors_are_asked_per_chunk_and_merged_across_chunks(monkeypatch):
    # _CHUNK_CELLS // n_items records per call, at least one; the weight rows of one context
    # returned in several chunks are kept once (WEIGHTS[0] for records 0 and 3)
    from evaluators._slate_ope import _Factors
    log = dist_log()
    cas = factor_arrays()[2]
    for cells, asked in ((1, [[0], [1], [2], [3]]), (5, [[0], [1], [2], [3]]),
                         (6, [[0, 1], [2, 3]]), (9, [[0, 1, 2], [3]])):
        monkeypatch.setattr("evaluators._slate_ope._CHUNK_CELLS", cells)
        policy = FactorPolicy()
        f = _Factors(log, policy, cas)
        assert policy.asked == asked
        assert f.W.shape == (3, 3)  # one row per distinct weight row
        assert len({tuple(w) for w in f.W}) == 3
        assert np.array_equal(f.W[f.row], WEIGHTS[ROW])
        assert np.array_equal(f.R, factor_arrays()[0])


def test_the_dense_factor_chunks_hold_at_most_the_cells_or_one_record(monkeypatch):
    # _CHUNK_CELLS // (len_list * n_items) records per chunk, at least one; each chunk the
    # conditionals written out
    from evaluators._slate_ope import _Factors
    log = dist_log()
    R, D, cas = factor_arrays()
    f = _Factors(log, FactorPolicy(), cas)
    for cells, sizes in ((1, [1, 1, 1]), (6, [1, 1, 1]), (11, [1, 1, 1]), (12, [2, 1]),
                         (1 << 22, [3])):
        monkeypatch.setattr("evaluators._slate_ope._CHUNK_CELLS", cells)
        rows = np.array([3, 0, 2])
        got = list(f.chunks(rows))
        assert [r.size for r, _ in got] == sizes
        assert np.concatenate([r for r, _ in got]).tolist() == [3, 0, 2]
        assert np.allclose(np.concatenate([d for _, d in got]), D[rows], rtol=1e-15, atol=0)


def test_records_whose_remaining_weight_is_below_1e_4_of_the_total_are_summed_item_by_item():
    # "below": a remaining weight of exactly 1e-4 of the row's total stays factored (records 0
    # and 3: 1 of 10,000), one a little below it is expanded (record 2: 1 of 10,000.5)
    from evaluators._slate_ope import _Factors
    log = dist_log()
    weights = np.array([[9999.0, 0.5, 0.5], [1.0, 2.0, 1.0], [0.5, 0.5, 9999.5]])
    R, D, cas = factor_arrays(weights)
    assert R[0, 1] == R[3, 1] == 1e-4 * 10000.0 == 1.0 and R[2, 1] < 1e-4 * 10000.5
    f = _Factors(log, FactorPolicy(weights=weights), cas)
    assert f.ill.tolist() == [2] and f.well.tolist() == [0, 1, 3]


def test_a_nearly_certain_first_item_gives_the_dense_estimate(monkeypatch):
    # the first item holds all but 2 of 1e12 + 2: its remaining weights (2 of 1e12) lose 12
    # digits as W . t minus the shown share, so those records are summed item by item and the
    # estimate equals the dense array's to rounding (factored, it is off by about 1e-5)
    rng = np.random.default_rng(0)
    n, row = 12, np.arange(12) % 3
    action = [[0, 1 + i % 2] if row[i] == 0 else list(rng.permutation(3)[:2]) for i in range(n)]
    weights = np.array([[1e12 + 0.3, 0.7, 1.3], [1.0, 2.0, 1.0], [1.0, 1.0, 2.0]])
    R, D, cas = factor_arrays(weights, row, action)
    mu = np.tile([1 / 3, 1 / 6], (n, 1))
    log = SlateLog(context=np.zeros((n, 1)), action=action,
                   reward=(rng.random((n, 2)) < 0.5).astype(float), pscore=mu[:, 1],
                   pscore_cascade=mu, pscore_item_position=np.full((n, 2), 1 / 3), n_items=3,
                   user=np.arange(n))
    for seed in (0, 1):
        want = evaluators.cascade_dr(log, cas, D, rng=seed)
        got = evaluators.cascade_dr(log, cas, FactorPolicy(
            answer=lambda u: (weights, row[u], R[u])), rng=seed)
        assert got.value == pytest.approx(want.value, rel=1e-12)
        assert got.stderr == pytest.approx(want.stderr, rel=1e-10)
