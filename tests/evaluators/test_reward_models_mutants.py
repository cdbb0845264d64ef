"""The reward model (issue 33 s2): what mutation testing of ``evaluators/_reward_models.py``
found unpinned, each stated as a property against an independent computation: a
regressor's bootstrap refits written out resample by resample, the linear bootstrap summed
over several chunks of actions, the features a regressor is shown, its predictions'
refusals word for word."""

from __future__ import annotations

import numpy as np
import pytest

from evaluators import _reward_models as rm
from evaluators import direct_method, fit_reward_model
from simulator.logs import BanditLog


class NestedMean:
    """A regressor predicting its training rewards' mean, its fitted state in a nested
    object (as a pipeline's steps hold theirs): each per-action copy must be its own."""

    def __init__(self):
        self.state = {"mean": None, "n_features": None}

    def fit(self, X, y):
        self.state["mean"] = float(np.mean(y))
        self.state["n_features"] = X.shape[1]
        return self

    def predict(self, X):
        assert X.shape[1] == self.state["n_features"]
        return np.full(X.shape[0], self.state["mean"])


def small_log(seed, n=30, K=3, L=1):
    g = np.random.default_rng(seed)
    a = g.integers(0, K, n)
    a[:K] = np.arange(K)  # every action logged
    return BanditLog(context=g.normal(size=(n, 2)), action=a, reward=g.random(n),
                     pscore=np.full(n, 1 / K), n_actions=K,
                     position=g.integers(0, L, n) if L > 1 else None, len_list=L)


def resample_counts(seed, n, B):
    """The model's resamples by hand: the second child of the model's stream draws
    ``integers(0, n)`` (B, n); W[b, j] counts record j in resample b."""
    draws = np.random.default_rng(np.random.SeedSequence(seed).spawn(2)[1]).integers(
        0, n, (B, n))
    W = np.zeros((B, n))
    for b in range(B):
        for j in draws[b]:
            W[b, j] += 1
    return W


def per_action_means(log, counts):
    """A per-action mean regressor fitted on records weighted by ``counts``: each action's
    mean reward, the overall mean for an action the resample never shows."""
    r, a = log.reward, log.action
    overall = float(np.sum(counts * r) / np.sum(counts))
    out = []
    for k in range(log.n_actions):
        w = counts * (a == k)
        out.append(float(np.sum(w * r) / np.sum(w)) if w.sum() else overall)
    return np.array(out)


@pytest.fixture(scope="module")
def regressor_problem():
    log = small_log(1)
    g = np.random.default_rng(2)
    pi = g.dirichlet(np.ones(3), size=30)
    ws = g.random(30) * 2
    seed, B = 7, 6
    m = fit_reward_model(log, NestedMean(), per_action=True,
                         rng=np.random.default_rng(np.random.SeedSequence(seed)))
    return log, pi, ws, m, resample_counts(seed, 30, B), B


def test_a_regressors_bootstrap_refits_it_on_each_resample(regressor_problem):
    """The direct method's bootstrap with a regressor: on resample b the model refitted on
    the resample's records (a per-action mean: each action's mean reward, the overall mean
    for an action it never shows), the value the mean over the resample's records of
    ``sum_a pi q``; the standard error their standard deviation (ddof=1). Each fit is of a
    deep copy: the caller's regressor is never fitted (a shallow copy shares its nested
    state with the caller's object)."""
    log, pi, ws, m, W, B = regressor_problem
    assert m.model.state == {"mean": None, "n_features": None}  # the caller's, never fitted
    want = []
    for b in range(B):
        q = per_action_means(log, W[b])
        want.append(sum(W[b, j] * float(pi[j] @ q) for j in range(log.n_rounds))
                    / log.n_rounds)
    got = rm.bootstrap_dm_values(m, pi, B)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    se = direct_method(log, pi, model=m, model_variance="bootstrap", n_bootstrap=B).stderr
    assert se == pytest.approx(np.std(want, ddof=1), rel=1e-12)


def test_a_regressors_model_part_is_refitted_on_each_resample(regressor_problem):
    """A DR-type estimate's model part ``(1/n) sum_j [sum_a pi q - ws_j q(a_j)]`` on the
    log's records, with the model refitted on each resample."""
    log, pi, ws, m, W, B = regressor_problem
    want = []
    for b in range(B):
        q = per_action_means(log, W[b])
        want.append(sum(float(pi[j] @ q) - ws[j] * q[log.action[j]]
                        for j in range(log.n_rounds)) / log.n_rounds)
    np.testing.assert_allclose(rm.bootstrap_model_part(m, pi, ws, B), want, rtol=1e-12)
    assert m.part_variance(pi, ws, "bootstrap", B) == pytest.approx(np.var(want, ddof=1),
                                                                    rel=1e-12)


def test_the_linear_bootstrap_sums_every_chunk_of_actions():
    """Many actions (600 on 4,096 records: the pi-weighted design is built 512 actions at
    a time): each resample's direct-method value is the one product over all actions,
    ``(1/n) sum_j W_bj sum_a pi_ja z_j' coef_ba``."""
    g = np.random.default_rng(3)
    n, K = 4096, 600
    a = g.integers(0, K, n)
    log = BanditLog(context=g.normal(size=(n, 1)), action=a, reward=g.random(n),
                    pscore=np.full(n, 1 / K), n_actions=K)
    pi = g.dirichlet(np.ones(K) * 0.5, size=n)
    m = fit_reward_model(log, "ridge", rng=4)
    B = 3
    W, coef, Z = m._resamples(B), m._refits(B), m._linear()["Z"]
    M = (pi[:, :, None] * Z[:, None, :]).reshape(n, K * Z.shape[1])
    want = np.einsum("bkp,bkp->b", (W @ M).reshape(B, K, -1), coef) / n
    np.testing.assert_allclose(rm.bootstrap_dm_values(m, pi, B), want, rtol=1e-10)


@pytest.mark.parametrize("per_action, L, width", [(False, 1, 2 + 3), (True, 1, 2),
                                                  (False, 2, 2 + 3 + 2), (True, 2, 2 + 2)])
def test_a_regressor_sees_the_context_the_action_and_the_position(per_action, L, width):
    """A joint regressor's features: the context, the one-hot action and, on a log with
    several positions, the one-hot position; one per action: the context and the position.
    Nothing else (no position column on a one-slot log)."""
    seen = []

    class Recorder(NestedMean):
        def fit(self, X, y):
            seen.append(X.shape[1])
            return super().fit(X, y)

    log = small_log(5, L=L)
    fit_reward_model(log, Recorder(), per_action=per_action, rng=0)
    assert seen and set(seen) == {width}


class Returns:
    def __init__(self, make):
        self.make = make

    def fit(self, X, y):
        return self

    def predict(self, X):
        return self.make(X)


@pytest.mark.parametrize("per_action, make, msg", [
    (False, lambda X: np.zeros(X.shape[0] - 1),
     "the regressor's predict() must return 45 values; got shape (44,) from the joint "
     "model."),
    (True, lambda X: np.zeros((X.shape[0], 2)),
     "the regressor's predict() must return 15 values; got shape (30,) from action 0."),
    (True, lambda X: np.where(X[:, 0] > 0, np.nan, 0.0),
     "the regressor's predict() returned nan or inf (action 0)."),
])
def test_a_regressors_bad_predictions_are_refused_word_for_word(per_action, make, msg):
    log = small_log(6)
    with pytest.raises(ValueError) as info:
        fit_reward_model(log, Returns(make), per_action=per_action, rng=0)
    assert str(info.value) == msg


@pytest.mark.parametrize("rng, msg", [
    (-1, "`rng` must be a numpy Generator, SeedSequence, int >= 0 or None; got int -1."),
    (1.5, "`rng` must be a numpy Generator, SeedSequence, int >= 0 or None; got float 1.5."),
    (np.random.RandomState(0), "`rng` must be a numpy Generator, SeedSequence, int or None "
     "(legacy RandomState is not accepted); got RandomState."),
])
def test_a_fitted_models_rng_is_checked_though_unused(rng, msg):
    """With a fitted model ``rng`` is not used, but one of the wrong kind is refused as
    everywhere else (and every right kind accepted)."""
    log = small_log(1)
    m = fit_reward_model(log, "mean", rng=0)
    with pytest.raises(TypeError) as info:
        rm.prepare(log, m, rng=rng)
    assert str(info.value) == msg
    for good in (None, 0, 3, np.random.SeedSequence(1), np.random.default_rng(2)):
        assert rm.prepare(log, m, rng=good) is m


def test_what_auto_and_analytic_mean_for_each_model():
    """``model_variance``: "auto" is "analytic" for the linear models and "bootstrap" for a
    regressor (the direct method's standard error then equals the explicit bootstrap's);
    "analytic" for a regressor is refused word for word."""
    log = small_log(2)
    pi = np.full((30, 3), 1 / 3)
    lin = fit_reward_model(log, "ridge", rng=0)
    reg = fit_reward_model(log, NestedMean(), rng=0)
    arr = fit_reward_model(log, np.zeros((30, 3)), rng=0)
    assert rm.check_model_variance("auto", lin) == "analytic"
    assert rm.check_model_variance("auto", reg) == "bootstrap"
    assert rm.check_model_variance("analytic", arr) == "analytic"  # an array: no variance
    assert rm.check_model_variance("bootstrap", lin) == "bootstrap"
    auto = direct_method(log, pi, model=reg, n_bootstrap=5)
    assert auto == direct_method(log, pi, model=reg, model_variance="bootstrap", n_bootstrap=5)
    with pytest.raises(ValueError) as info:
        rm.check_model_variance("analytic", reg)
    assert str(info.value) == ("`model_variance` must be 'bootstrap' or 'auto' for a regressor "
                               "(the analytic variance is for the linear models ('ridge', "
                               "'mean')); got 'analytic'.")


def test_bootstraps_of_two_sizes_on_one_model_are_their_own():
    """The resamples and the refits are kept per ``n_bootstrap``: asking for 5 then 7
    gives 7 values drawn afresh (the first 5 resamples are not reused as the first 5 of 7:
    ``integers(0, n, (7, n))`` is another draw), and asking for 5 again the same 5."""
    log = small_log(3)
    pi = np.full((30, 3), 1 / 3)
    m = fit_reward_model(log, "mean", rng=np.random.default_rng(np.random.SeedSequence(4)))
    five = rm.bootstrap_dm_values(m, pi, 5)
    seven = rm.bootstrap_dm_values(m, pi, 7)
    assert seven.shape == (7,) and five.shape == (5,)
    np.testing.assert_array_equal(m._resamples(7), resample_counts(4, 30, 7))
    np.testing.assert_array_equal(m._resamples(5), resample_counts(4, 30, 5))
    np.testing.assert_array_equal(rm.bootstrap_dm_values(m, pi, 5), five)
    assert m._refits(7).shape == (7, 3, 1) and m._refits(5).shape == (5, 3, 1)


def test_a_model_checks_the_positions_and_len_list_of_its_log():
    """A model fitted on a log with positions refuses the same records at other positions,
    or with another ``len_list``, word for word."""
    import dataclasses

    log = small_log(1, L=2)
    m = fit_reward_model(log, "mean", rng=0)
    moved = dataclasses.replace(log, position=(log.position + 1) % 2)
    with pytest.raises(ValueError) as info:
        m.check(moved)
    assert str(info.value) == ("`model` must be a reward model fitted on this log; got one "
                               "fitted on a log whose position differs (the log changed since "
                               "the model was fitted: fit it again with fit_reward_model).")
    with pytest.raises(ValueError) as info:
        m.check(dataclasses.replace(log, len_list=3), name="q")
    assert str(info.value) == ("`q` must be a reward model fitted on this log (len_list 3); "
                               "got one fitted on a log with len_list 2.")


def test_refit_keeps_the_specification_and_refuses_an_array():
    log, other = small_log(1), small_log(2)
    m = fit_reward_model(log, NestedMean(), per_action=True, n_folds=3, rng=0)
    again = m.refit(other, rng=1)
    assert (again.per_action, again.n_folds, again.kind) == (True, 3, "regressor")
    with pytest.raises(ValueError) as info:
        fit_reward_model(log, np.zeros((30, 3)), rng=0).refit(other)
    assert str(info.value) == "an array of predictions cannot be refitted on another log."


def test_a_regressor_may_predict_a_column():
    """``predict`` returning shape (n, 1) (as some regressors do) is read as n values."""
    log = small_log(4)
    col = fit_reward_model(log, Returns(lambda X: np.full((X.shape[0], 1), 0.25)), rng=0)
    np.testing.assert_array_equal(col.in_sample, np.full((30, 3), 0.25))


@pytest.mark.parametrize("model, L", [("ridge", 1), ("mean", 2)])
def test_a_float32_target_is_read_in_float64_block_by_block(model, L):
    """The analytic variance's ``sum_j pi[j, a] z_j`` of a float32 target: converted to
    float64 in blocks of rows (here 2,048 rows of 512 actions: 3 blocks), the same numbers
    as the float64 target of the same values (per cell of (action, position) for "mean" on
    a log with positions)."""
    g = np.random.default_rng(8)
    n, K = 5000, 512
    log = BanditLog(context=g.normal(size=(n, 1)), action=g.integers(0, K, n),
                    reward=g.random(n), pscore=np.full(n, 1 / K), n_actions=K,
                    position=g.integers(0, L, n) if L > 1 else None, len_list=L)
    m = fit_reward_model(log, model, rng=0)
    pi = g.dirichlet(np.ones(K), size=(n, L)).transpose(0, 2, 1).astype(np.float32)
    if L == 1:
        pi = pi[:, :, 0]
    a = direct_method(log, pi, model=m)
    b = direct_method(log, pi.astype(np.float64), model=m)
    assert a.value == pytest.approx(b.value, rel=1e-12)
    assert a.stderr == pytest.approx(b.stderr, rel=1e-10)
    # the design itself, against a plain sum over the records (every block counted)
    rows = pi if L == 1 else pi[np.arange(n), :, log.positions()]
    if model == "ridge":
        z = np.column_stack([np.ones(n), log.context])
        want = sum(np.outer(rows[j].astype(np.float64), z[j]) for j in range(n))
    else:
        cells = np.zeros((L, K))
        for j in range(n):
            cells[log.positions()[j]] += rows[j]
        want = cells.T.reshape(K * L, 1)
    np.testing.assert_allclose(m._pi_design(rows), want, rtol=1e-9, atol=1e-12)


def test_a_models_repr_says_what_it_is():
    log = small_log(1)
    assert repr(fit_reward_model(log, "ridge", rng=0)) == (
        "RewardModel(model='ridge', per_action=False, n_folds=2, n_rounds=30, n_actions=3)")
    assert repr(fit_reward_model(log, NestedMean(), per_action=True, n_folds=3, rng=0)) == (
        "RewardModel(model='NestedMean', per_action=True, n_folds=3, n_rounds=30, "
        "n_actions=3)")


# -- the folds ----------------------------------------------------------------------------------
M64 = (1 << 64) - 1


def splitmix64_finalizer(x: int) -> int:
    """SplitMix64's output function (Steele, Lea & Flood 2014), on Python ints mod 2^64."""
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & M64
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def record_hash_by_hand(log) -> list[int]:
    """Each record's content hash: the action plus the golden ratio's bits, then every
    field's float64 bits (reward, pscore, the context's columns, the position on a log with
    several) xored in and mixed, one field at a time."""
    import struct

    def bits(v):
        return struct.unpack("<Q", struct.pack("<d", float(v)))[0]

    out = []
    for j in range(log.n_rounds):
        h = splitmix64_finalizer((int(log.action[j]) + 0x9E3779B97F4A7C15) & M64)
        fields = [log.reward[j], log.pscore[j], *log.context[j]]
        if log.len_list > 1:
            fields.append(log.positions()[j])
        for v in fields:
            h = splitmix64_finalizer(h ^ bits(v))
        out.append(h)
    return out


@pytest.mark.parametrize("L", [1, 2, 3])
def test_the_records_hash_is_splitmix64_over_their_fields(L):
    log = small_log(9, n=12, L=L)
    assert rm._record_hash(log).tolist() == record_hash_by_hand(log)


def test_the_folds_are_a_permutation_of_the_records_ranked_by_content():
    """Fold of each record: the records ranked by their content hash, then
    ``permutation(n) % n_folds`` from the first child of the model's stream (the second
    draws the resamples); a Generator without a SeedSequence seeds the children by one
    draw from it."""
    log = small_log(10, n=25)
    seq = np.random.SeedSequence(11)
    m = fit_reward_model(log, "mean", n_folds=3, rng=np.random.default_rng(seq))
    assert seq.n_children_spawned == 2  # two streams: the folds, the resamples
    rank = sorted(range(25), key=lambda j: (record_hash_by_hand(log)[j], j))
    perm = np.random.default_rng(np.random.SeedSequence(11).spawn(2)[0]).permutation(25)
    want = np.empty(25, dtype=np.int64)
    for r, j in enumerate(rank):
        want[j] = perm[r] % 3
    np.testing.assert_array_equal(m.folds, want)

    class NoSeedSequence:  # a Generator's interface without ``bit_generator.seed_seq``
        bit_generator = object()

        def __init__(self, value):
            self.value, self.calls = value, []

        def integers(self, low, high):
            self.calls.append((low, high))
            return self.value

    gen = NoSeedSequence(123)
    kids = rm._children(gen, 2)
    assert gen.calls == [(0, 2**63)]
    assert [k.spawn_key for k in kids] == [(0,), (1,)] and kids[0].entropy == 123


def test_the_fast_ridge_is_the_per_fold_fit_on_a_log_with_positions():
    """The cross-fitted ridge from per-(action, fold) Grams against the reference fit on
    the other folds' records, on a log with 3 positions (one-hot position without its first
    column among the features)."""
    log = small_log(12, n=60, L=3)
    m = fit_reward_model(log, "ridge", rng=1)
    ref = rm.cross_fit(log, rm.resolve_model(log, "ridge"), m.folds, 2)
    np.testing.assert_allclose(m.cross_fitted, ref, rtol=1e-10, atol=1e-12)
    Z = rm._design(log, np.arange(5, 9))
    pos = log.positions()[5:9]
    np.testing.assert_array_equal(Z, np.column_stack(
        [np.ones(4), log.context[5:9], pos == 1, pos == 2]))


# -- tiny logs ----------------------------------------------------------------------------------
def tiny_log(n):
    return BanditLog(context=np.arange(n, dtype=float)[:, None], action=np.zeros(n, int),
                     reward=np.arange(1.0, n + 1), pscore=np.full(n, 0.5), n_actions=2)


@pytest.mark.parametrize("model, per_action", [("mean", False), ("ridge", False),
                                               (NestedMean(), False), (NestedMean(), True)])
def test_one_record_has_no_other_fold_to_learn_from(model, per_action):
    """A one-record log in 2 folds: its cross-fitted prediction comes from no record, 0 for
    every action; two records: each record's from the other one alone (its reward, the
    overall mean for the action never logged)."""
    one = fit_reward_model(tiny_log(1), model, per_action=per_action, rng=0)
    np.testing.assert_array_equal(one.cross_fitted, np.zeros((1, 2)))
    if model == "ridge":
        return
    two = fit_reward_model(tiny_log(2), model, per_action=per_action, rng=0)
    np.testing.assert_array_equal(two.cross_fitted, [[2.0, 2.0], [1.0, 1.0]])


def test_n_folds_at_most_the_records():
    with pytest.raises(ValueError) as info:
        fit_reward_model(tiny_log(2), "mean", n_folds=3)
    assert str(info.value) == "`n_folds` must be an int in [2, 2]; got 3."
    assert fit_reward_model(tiny_log(3), "mean", n_folds=3, rng=0).n_folds == 3


# -- refusals word for word ---------------------------------------------------------------------
def test_a_fitted_models_options_and_log_are_checked_word_for_word():
    log = small_log(1)
    m = fit_reward_model(log, "mean", rng=0)
    cases = [
        (lambda: rm.prepare(log, m, per_action=True), "`per_action` must be False (the value "
         "`model` was fitted with) or left out; got True."),
        (lambda: rm.prepare(log, m, n_folds=3), "`n_folds` must be 2 (the value `model` was "
         "fitted with) or left out; got 3."),
        (lambda: rm.prepare(small_log(2), m, name="q"), "`q` must be a reward model fitted "
         "on this log; got one fitted on a log whose action differs (the log changed since "
         "the model was fitted: fit it again with fit_reward_model)."),
        (lambda: fit_reward_model(log, np.where(np.arange(90).reshape(30, 3) == 7, np.nan,
                                                0.0)),
         "`model` must be an array of finite predicted rewards; got nan at index (2, 1)."),
    ]
    for call, msg in cases:
        with pytest.raises(ValueError) as info:
            call()
        assert str(info.value) == msg
    assert rm.prepare(log, m, per_action=False, n_folds=2) is m


@pytest.mark.parametrize("kind", ["ridge", "mean"])
def test_the_analytic_variance_with_an_action_never_logged(kind):
    """An action no record shows gets the overall mean, whose derivative by record j's
    weight is ``(r_j - rbar) / n``: the direct method's and the model part's analytic
    variances against the record-by-record HC2 reference, with a target that puts mass on
    that action."""
    from tests.evaluators.test_reward_models import hc2_variance, influence_gradients, linear_log

    log = linear_log(13, n=40, K=3, d=2, unseen=True)
    n, K = log.n_rounds, log.n_actions
    assert not (log.action == 2).any()
    g = np.random.default_rng(14)
    pi = g.dirichlet(np.ones(K), size=n)
    ws = g.random(n) * 2
    m = fit_reward_model(log, kind, rng=0)
    _, d, h, rc, seen, g_part, g_dm = influence_gradients(log, pi, ws, kind)
    terms = np.einsum("jk,jk->j", pi, m.in_sample)

    assert m.part_variance(pi, ws, "analytic", 2) == pytest.approx(
        hc2_variance(log, d, h, rc, seen, g_part, 0.0), rel=1e-9)
    assert m.dm_stderr(pi, terms, "analytic", 2) == pytest.approx(
        np.sqrt(hc2_variance(log, d, h, rc, seen, g_dm, terms / n)), rel=1e-9)


class FitOnly:
    def fit(self, X, y):
        return self


class PredictOnly:
    def predict(self, X):
        return X[:, 0]


WANTS = ("`model` must be one of ('ridge', 'mean'), an array (n_rounds, n_actions) of "
         "predicted rewards, a regressor with fit(X, y) and predict(X), or a RewardModel from "
         "fit_reward_model; got {}.")


@pytest.mark.parametrize("kw, msg", [
    ({"model": "mean", "per_action": 1}, "`per_action` must be a bool; got int."),
    ({"model": FitOnly()}, WANTS.format("FitOnly")),
    ({"model": PredictOnly()}, WANTS.format("PredictOnly")),
    ({"model": np.full((30, 3), "a")},
     "`model` must be an array of predicted rewards (float); got dtype <U1."),
])
def test_a_model_specification_is_refused_word_for_word(kw, msg):
    """A regressor needs both ``fit`` and ``predict``; an array, numbers; ``per_action`` a
    bool."""
    with pytest.raises(TypeError) as info:
        fit_reward_model(small_log(1), **kw)
    assert str(info.value) == msg


def test_an_array_of_predictions_in_each_accepted_shape():
    """An array model: (n, K), or OBP's (n, K, 1) read as (n, K); on a log with positions
    (n, K, len_list), each record read at its position. Other shapes refused word for word,
    naming the argument."""
    log, log2 = small_log(1), small_log(1, L=2)
    q = np.random.default_rng(0).random((30, 3))
    obp = fit_reward_model(log, q[:, :, None], rng=0)
    np.testing.assert_array_equal(obp.cross_fitted, q)
    np.testing.assert_array_equal(obp.in_sample, q)
    q3 = np.random.default_rng(1).random((30, 3, 2))
    at = fit_reward_model(log2, q3, rng=0).in_sample
    np.testing.assert_array_equal(at, q3[np.arange(30), :, log2.positions()])
    for lg, bad, msg in [
        (log, np.zeros((30, 4)), "`model` must be an array of shape (n_rounds, n_actions) = "
         "(30, 3) or (30, 3, 1); got shape (30, 4)."),
        (log, np.zeros((30, 3, 2)), "`model` must be an array of shape (n_rounds, n_actions) "
         "= (30, 3) or (30, 3, 1); got shape (30, 3, 2)."),
        (log2, np.zeros((30, 3)), "`model` must be an array of shape (n_rounds, n_actions, "
         "len_list) = (30, 3, 2) (the log has 2 positions); got shape (30, 3)."),
    ]:
        with pytest.raises(ValueError) as info:
            fit_reward_model(lg, bad)
        assert str(info.value) == msg
    assert rm.resolve_model(log, NestedMean()).per_action is False  # one joint model
    with pytest.raises(TypeError) as info:
        rm.resolve_model(log, 3.5, name="q")
    assert str(info.value).startswith("`q` must be one of ('ridge', 'mean'), ") and \
        str(info.value).endswith("; got float.")


def test_an_estimators_model_argument_is_named_in_its_refusal():
    with pytest.raises(ValueError) as info:
        rm.prepare(small_log(1), "forest", name="q_model")
    assert str(info.value) == "`q_model` must be one of 'ridge', 'mean'; got 'forest'."


def test_an_integer_array_of_predictions_is_read_as_floats():
    log = small_log(1)
    q = np.arange(90).reshape(30, 3) % 2
    m = fit_reward_model(log, q, rng=0)
    assert m.in_sample.dtype == np.float64
    np.testing.assert_array_equal(m.in_sample, q.astype(float))
