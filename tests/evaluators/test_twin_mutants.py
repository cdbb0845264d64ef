"""``select_by_twin`` (issue 33 s2): what mutation testing of ``evaluators/_twin.py`` found
unpinned by ``test_twin.py``, each stated as a property against an independent
computation (the twins written out by hand in ``test_twin.py``)."""

import functools
import math

import numpy as np
import pytest

import evaluators
from evaluators import direct_method, doubly_robust, dr_os, fit_reward_model, ips, select_by_twin
from evaluators._estimate import Estimate
from simulator.logs import BanditLog
from tests.evaluators.test_twin import on_log, reference_twin_errors, small_log


def ips_value(log, action_dist):
    """IPS's value alone, a float: a user's candidate without a standard error."""
    return float(ips(log, action_dist).value)


CANDS = [("ips", ips), ("dr_os(lambda_=10)", functools.partial(dr_os, lambda_=10.0))]


@functools.cache
def make_problem(R):
    """A 60-record log, a target, and ``R`` twins of IPS and DR-OS written out by hand
    (IPS's column is also the float candidate's: the same value on every twin)."""
    log = small_log(5, n=60)
    pi = np.random.default_rng(6).dirichlet(np.ones(3), size=(60, 1)).transpose(0, 2, 1)
    seed = 13
    return log, pi, R, seed, reference_twin_errors(log, pi, CANDS, R, seed), \
        on_log(log, pi, CANDS, seed)


@pytest.fixture(params=[5, 2], ids=["5-twins", "2-twins"])
def problem(request):
    """:func:`make_problem` with 5 twins, and 2 (where ddof=1 doubles the variance)."""
    return make_problem(request.param)


@pytest.mark.parametrize("bias", ["auto", "log"])
def test_a_candidate_without_a_standard_error_takes_the_twins_variance_with_ddof_1(problem,
                                                                                  bias):
    """A candidate that returns a float has no standard error on the log: its variance is
    the twins' variance of its errors, with ``ddof=1`` (``ddof=0`` is 20% lower with 5
    twins, half with 2).
    Its score is ``sqrt(var + b^2)``: ``b^2`` the log's ``max(0, d^2 - v)`` with
    ``bias="log"`` (or "auto" where the log resolves it), the twins' squared mean error
    otherwise."""
    log, pi, R, seed, err, est = problem
    cands = [("ips_value", ips_value), *CANDS]
    got = select_by_twin(log, pi, candidates=cands, n_twins=R, rng=seed, bias=bias)
    s = got.scores()["ips_value"]
    e, ref = err[:, 0], err[:, len(CANDS)]
    assert s.bias == pytest.approx(e.mean(), rel=1e-9, abs=1e-13)
    assert math.isnan(s.estimate.stderr) and s.estimate.value == est[0].value
    var = np.var(e, ddof=1)
    d = est[0].value - est[len(CANDS)].value
    v = np.var(e - ref, ddof=1)
    if bias == "log" or d * d > 2 * v:
        mse = var + max(0.0, d * d - v)
    else:
        mse = var + e.mean() ** 2
    assert s.score == pytest.approx(math.sqrt(mse), rel=1e-9)
    # IPS itself (its own standard error on the log) is scored from that, not the twins
    own = got.scores()["ips"]
    assert own.score != pytest.approx(s.score, rel=1e-6)


def words_by_hand(labels, which, z, err, values, ref):
    """The self-check's sentence written out: the three candidates of largest |z| (the
    first listed among equal ones), each with its difference from the reference on the log,
    the twins' mean and sd (ddof=1) of that difference and z, then how many more."""
    top = sorted(which, key=lambda c: (-abs(z[c]), which.index(c)))[:3]
    parts = []
    for c in top:
        diff = [err[r][c] - err[r][ref] for r in range(len(err))
                if math.isfinite(err[r][c] - err[r][ref])]
        m = sum(diff) / len(diff)
        sd = math.sqrt(sum((x - m) ** 2 for x in diff) / (len(diff) - 1))
        d = values[c] - values[ref]
        parts.append(f"{labels[c]!r} is {d:+.4g} from the reference on the log where the "
                     f"twins put it at {m:+.4g} +- {sd:.2g} (z = {z[c]:+.1f})")
    more = len(which) - len(top)
    tail = "" if more == 0 else f"; and {more} more candidate" + ("s" if more > 1 else "")
    return ("The twins are not faithful to this log: " + "; ".join(parts) + tail
            + ". Their biases are read from the log instead.")


@pytest.mark.parametrize("which", [[1], [4, 0, 2], [0, 1, 2, 3], [3, 0, 1, 4, 2]],
                         ids=["one", "three", "four", "five"])
def test_the_self_checks_words_name_the_three_largest_z_and_count_the_rest(which):
    """``_unfaithful_words`` word for word against the sentence written out: the order by
    |z| (a negative z larger in size first), at most three named, "and 1 more candidate",
    "and 2 more candidates"; the differences' mean and sd read over the twins where both
    candidates have a number."""
    from evaluators._twin import _unfaithful_words

    labels = ["a", "b", "c", "d", "e", "ref"]
    ref = 5
    g = np.random.default_rng(len(which))
    err = g.normal(size=(6, 6)) * [1, 2, 3, 4, 5, 0.5]
    err[2, 3] = np.nan  # a twin where 'd' gave no number
    values = [0.1, -0.7, 0.35, 1.25, -0.05, 0.2]
    ests = [Estimate(v, 0.1, v - 0.2, v + 0.2, 60) for v in values]
    z = np.array([3.0, -4.5, 2.9, -3.3, 5.25, 0.0])
    got = _unfaithful_words(labels, which, z, err, ests, ref)
    assert got == words_by_hand(labels, which, z, err.tolist(), values, ref)


@pytest.mark.parametrize("binary", [True, False], ids=["bernoulli", "gaussian"])
def test_a_log_neither_uniform_nor_with_pi_b_keeps_its_actions_and_propensities(binary):
    """``logging="logged"``: a twin record keeps its record's action and propensity (no
    action is drawn: the stream goes on to the rewards), whatever the target; its numbers
    against the twins written out by hand."""
    log = small_log(21, n=50, binary=binary, logging="logged")
    assert log.pi_b is None and np.ptp(log.pscore) > 0
    pi = np.random.default_rng(22).dirichlet(np.ones(3), size=(50, 1)).transpose(0, 2, 1)
    err = reference_twin_errors(log, pi, CANDS, 4, 23)
    got = select_by_twin(log, pi, candidates=CANDS, n_twins=4, rng=23, bias="twin")
    assert got.details["logging"] == "logged"
    for c, (label, _) in enumerate(CANDS):
        s = got.scores()[label]
        assert s.bias == pytest.approx(err[:, c].mean(), rel=1e-9, abs=1e-13)
        assert s.sd == pytest.approx(err[:, c].std(ddof=1), rel=1e-9)


def test_actions_are_drawn_by_the_inverse_cdf_strictly_past_the_uniform():
    """``_draw_actions``: the first action whose cumulative probability exceeds ``u``
    (a ``u`` equal to a cumulative probability takes the next action), and the last action
    when rounding leaves the row's sum below ``u``."""
    from evaluators._twin import _draw_actions

    probs = np.array([[0.25, 0.25, 0.5]] * 4 + [[0.3, 0.3, 0.4 - 1e-12]])
    u = np.array([0.0, 0.25, 0.5, 0.49999999999999994, 1 - 1e-13])
    assert _draw_actions(probs, u).tolist() == [0, 1, 2, 1, 2]


def test_the_log_bias_statistics_against_their_definitions():
    """``_log_bias``: per candidate, ``z = (d - mean) / sd`` of its difference from the
    reference over the twins where both have a number (ddof=1), ``d^2``, ``v`` and ``2 |d|
    sqrt(v)``; nothing (z nan, 0s) for a candidate without a number on the log, with fewer
    than 2 twins, or when the reference has none; a candidate equal to the reference plus a
    constant on every twin (v = 0) has z 0 when the log shows that constant, else +-inf
    with the sign of ``d``; a skipped candidate does not stop the ones after it."""
    from evaluators._twin import _log_bias

    def est(v):
        return Estimate(v, 0.1, v - 0.2, v + 0.2, 10)

    nan = math.nan
    ref = np.array([0.5, -0.25, 1.0, 0.75])
    err = np.column_stack([
        ref + 0.25,  # 0: constant difference 0.25 (exact in binary)
        ref + 0.25,  # 1: the same; the log shows another difference
        ref - 0.5,   # 2: the same, negative on the log
        [0.1, nan, nan, 0.3],  # 3: two twins with a number
        [nan, nan, 0.2, nan],  # 4: one twin
        [0.3, -0.1, 0.9, 0.2],  # 5: no number on the log
        [0.7, 0.1, 0.2, -0.4],  # 6: an ordinary candidate, after the skipped one
        ref])
    values = [1.25, 1.5, -1.0, 0.8, 0.9, None, 0.6, 1.0]
    ests = [None if v is None else est(v) for v in values]
    z, d2, v, se = _log_bias(err, ests, 7, 7)
    assert z[0] == 0.0 and d2[0] == 0.0625 and v[0] == 0.0 and se[0] == 0.0
    assert z[1] == math.inf and z[2] == -math.inf and d2[2] == 4.0
    for c in (3, 6):
        diff = err[:, c] - ref
        diff = diff[np.isfinite(diff)]
        d = values[c] - 1.0
        sd = math.sqrt(sum((x - diff.mean()) ** 2 for x in diff) / (diff.size - 1))
        assert v[c] == pytest.approx(sd * sd, rel=1e-12)
        assert d2[c] == pytest.approx(d * d, rel=1e-12)
        assert z[c] == pytest.approx((d - diff.mean()) / sd, rel=1e-12)
        assert se[c] == pytest.approx(2 * abs(d) * sd, rel=1e-12)
    for c in (4, 5):
        assert math.isnan(z[c]) and d2[c] == v[c] == se[c] == 0.0
    z, d2, v, se = _log_bias(err, [*ests[:7], None], 7, 7)  # the reference without a number
    assert np.isnan(z).all() and not d2.any() and not v.any() and not se.any()


def test_a_fitted_reward_model_is_the_twins_model_as_it_is():
    """``model`` a :class:`RewardModel` fitted on the log: the twins' reward function is its
    cross-fitted prediction (the one the default fits from the same folds gives the same
    twins; one from other folds, other twins), and the candidates on the log fit their own
    model from the model stream's first child (the given one is not reused)."""
    log = small_log(31, n=60)
    pi = np.random.default_rng(32).dirichlet(np.ones(3), size=60)
    cands = [("ips", ips), ("doubly_robust", doubly_robust)]
    seed = 41
    same = fit_reward_model(log, "ridge", rng=np.random.default_rng(
        np.random.SeedSequence(seed).spawn(2)[0]))
    given = select_by_twin(log, pi, candidates=cands, n_twins=3, rng=seed, model=same)
    default = select_by_twin(log, pi, candidates=cands, n_twins=3, rng=seed)
    assert given.details["twin_values"] == default.details["twin_values"]
    for label, _ in cands:
        a, b = given.scores()[label], default.scores()[label]
        assert (a.bias, a.sd) == (b.bias, b.sd)
    model_seq = np.random.SeedSequence(seed).spawn(2)[0]  # (no child spawned yet)
    on_log = fit_reward_model(log, "ridge",
                              rng=np.random.default_rng(model_seq.spawn(1)[0]))
    assert given.scores()["doubly_robust"].estimate == doubly_robust(log, pi, model=on_log)
    assert doubly_robust(log, pi, model=same).value != doubly_robust(log, pi,
                                                                     model=on_log).value
    other = fit_reward_model(log, "ridge", rng=np.random.default_rng(7))
    moved = select_by_twin(log, pi, candidates=cands, n_twins=3, rng=seed, model=other)
    assert moved.details["twin_values"] != default.details["twin_values"]


def test_the_targets_value_on_a_twin_is_computed_in_float64():
    """A float32 ``action_dist`` (kept float32 by the checks) gives the twins the values of
    the same probabilities in float64, bit for bit."""
    log = small_log(33, n=80)
    pi = np.random.default_rng(34).dirichlet(np.ones(3), size=80).astype(np.float32)
    a = select_by_twin(log, pi, candidates=CANDS, n_twins=3, rng=5)
    b = select_by_twin(log, pi.astype(np.float64), candidates=CANDS, n_twins=3, rng=5)
    assert a.details["twin_values"] == b.details["twin_values"]


def test_a_twin_record_keeps_its_records_context_availability_and_position():
    """``twin_log``: records ``idx`` of the log with their contexts, availability, ``pi_b``
    rows and positions, the log's action embeddings and ``len_list``; actions drawn among
    the available ones (uniform mode: pscore ``1 / n_available``)."""
    from evaluators._twin import twin_log

    g = np.random.default_rng(35)
    n, K = 30, 4
    avail = g.random((n, K)) < 0.7
    avail[:, 1] = True
    pi_b = avail / avail.sum(axis=1, keepdims=True)
    a = np.array([g.choice(K, p=p) for p in pi_b])
    emb = g.integers(0, 3, (K, 2))
    idx = g.integers(0, n, n)
    mu = g.random((n, K))
    for mode, kw in [("pi_b", {"pi_b": pi_b}), ("uniform", {"position": g.integers(0, 2, n),
                                                             "len_list": 3})]:
        log = BanditLog(context=g.normal(size=(n, 2)), action=a, reward=g.random(n),
                        pscore=pi_b[np.arange(n), a], n_actions=K, available=avail,
                        action_embeddings=emb, **kw)
        twin = twin_log(log, idx, mu, 0.1, mode, np.random.default_rng(0))
        np.testing.assert_array_equal(twin.context, log.context[idx])
        np.testing.assert_array_equal(twin.available, avail[idx])
        assert twin.available_mask()[np.arange(n), twin.action].all()
        np.testing.assert_array_equal(twin.pscore, 1 / avail[idx].sum(axis=1))
        np.testing.assert_array_equal(twin.action_embeddings, emb)
        assert twin.len_list == log.len_list
        if mode == "pi_b":
            np.testing.assert_array_equal(twin.pi_b, pi_b[idx])
            assert twin.position is None
        else:
            assert twin.pi_b is None and twin.len_list == 3
            np.testing.assert_array_equal(twin.position, log.position[idx])


def on_twins_only(log0, values_on_twins, value_on_log):
    """A user's candidate without a standard error: ``values_on_twins[i]`` on twin ``i``
    (the twins are computed in order on a log this small), ``value_on_log`` on ``log0``."""
    calls = []

    def candidate(log, action_dist):
        if np.array_equal(log.context, log0.context):
            return value_on_log
        calls.append(1)
        return values_on_twins[len(calls) - 1]
    return candidate


@pytest.mark.parametrize("bias", ["auto", "log"])
def test_a_candidate_with_a_number_on_one_twin_or_none(bias):
    """A candidate without its own standard error and with a number on one twin only: its
    bias is that twin's error, but the variance of one error is unknown, so it has no
    score (before issue 33's mutation run it was 0 under ``bias="log"``, and the candidate
    won with a score of 0). One with no number on any twin has no score either. Neither
    wins."""
    log = small_log(5, n=60)
    pi = np.random.default_rng(6).dirichlet(np.ones(3), size=60)
    R, seed = 5, 13
    one = [math.nan] * R
    one[2] = 0.4
    with_se = [math.nan] * R
    with_se[2] = Estimate(0.4, 0.05, 0.3, 0.5, 60)
    cands = [("one", on_twins_only(log, one, 0.35)),
             ("one_with_se", on_twins_only(log, with_se, Estimate(0.35, 0.05, 0.25, 0.45, 60))),
             ("none", on_twins_only(log, [math.nan] * R, 0.3)), *CANDS]
    got = select_by_twin(log, pi, candidates=cands, n_twins=R, rng=seed, bias=bias)
    s = got.scores()
    e = 0.4 - got.details["twin_values"][2]  # its error on twin 2
    assert s["one"].bias == pytest.approx(e, rel=1e-12)
    assert s["one"].n == 0 and math.isnan(s["one"].score)
    # with its own standard error: ``sqrt(se^2 + e^2)`` from its one twin ("auto": the
    # log resolves no bias from one twin), ``sqrt(se^2 + 0)`` under "log"; either way a
    # number on one twin of five, too few to rank it (it scored on all five under "log",
    # and won, before issue 33's mutation run)
    t = s["one_with_se"]
    assert t.n == 1
    if bias == "auto":
        assert t.score == pytest.approx(math.sqrt(0.05 ** 2 + e * e), rel=1e-12)
    else:
        assert t.score == pytest.approx(0.05, rel=1e-12)
    assert s["none"].n == 0 and math.isnan(s["none"].score)
    assert got.selected not in ("none", "one", "one_with_se")


def test_refused_estimates_are_reported_in_twin_order():
    """A candidate refused on several twins is reported once, by its first twin (twin 0's
    "inf", not twin 1's "-inf", which sorts first as text)."""
    log = small_log(5, n=60)
    pi = np.random.default_rng(6).dirichlet(np.ones(3), size=60)
    cands = [("wild", on_twins_only(log, [math.inf, -math.inf], 0.3)), *CANDS]
    with pytest.warns(evaluators.ImplausibleEstimateWarning) as w:
        select_by_twin(log, pi, candidates=cands, n_twins=2, rng=3)
    assert str(w[0].message) == ("candidate 'wild' returned an infinite estimate (inf) on "
                                 "twin 0 (and 1 more): recorded as nan.")


def test_a_candidates_other_model_is_fitted_on_the_log_from_the_models_first_child():
    """A model-based candidate whose model is not the twins' (here "mean" against the
    twins' "ridge") gets, on the log, that model cross-fitted with folds from the first
    child of the model's stream; the twins' own model is reused for the candidates that
    name it."""
    log = small_log(36, n=60)
    pi = np.random.default_rng(37).dirichlet(np.ones(3), size=60)
    cands = [("dr_mean", functools.partial(doubly_robust, model="mean")),
             ("direct_method", direct_method)]
    seed = 8
    model_seq = np.random.SeedSequence(seed).spawn(2)[0]
    got = select_by_twin(log, pi, candidates=cands, n_twins=2, rng=seed).scores()
    # the twins' model first (its folds' streams are the model stream's first children)
    ridge = fit_reward_model(log, "ridge", rng=np.random.default_rng(model_seq))
    mean = fit_reward_model(log, "mean", rng=np.random.default_rng(model_seq.spawn(1)[0]))
    assert got["dr_mean"].estimate == doubly_robust(log, pi, model=mean)
    other = fit_reward_model(log, "mean", rng=np.random.default_rng(1))
    assert doubly_robust(log, pi, model=other).value != got["dr_mean"].estimate.value
    own = direct_method(log, pi, model=ridge)  # (the twins' model, its sums cached)
    assert got["direct_method"].estimate.value == own.value
    assert got["direct_method"].estimate.stderr == pytest.approx(own.stderr, rel=1e-12)


def test_how_a_log_was_logged():
    """``logging_mode``: "pi_b" when the log has it; "uniform" when every propensity is
    ``1 / n_available`` within 1e-9 (relative); "logged" otherwise, also when every
    propensity is within a factor 2 of uniform."""
    from evaluators._twin import logging_mode

    def log_with(pscore, **kw):
        n = len(pscore)
        return BanditLog(context=np.zeros((n, 1)), action=np.zeros(n, int),
                         reward=np.zeros(n), pscore=np.array(pscore), n_actions=3, **kw)

    third = 1 / 3
    assert logging_mode(log_with([third] * 4)) == "uniform"
    assert logging_mode(log_with([third * (1 + 5e-10), third])) == "uniform"
    assert logging_mode(log_with([third * (1 + 3e-9), third])) == "logged"
    assert logging_mode(log_with([0.3, 0.4, 0.5])) == "logged"
    avail = np.array([[True, False, True], [True, True, True]])
    assert logging_mode(log_with([0.5, third], available=avail)) == "uniform"
    pi_b = np.full((2, 3), third)
    assert logging_mode(log_with([third, third], pi_b=pi_b)) == "pi_b"


def test_the_sentence_says_where_the_biases_come_from():
    """``how_sure`` names the twins and where each bias was read: "from the twins" (their
    own RMSE), "with each bias from the log", or "with m of C biases read from the log"
    (m: the candidates whose squared difference from the reference on the log exceeds twice
    its variance over the twins)."""
    log, pi, R, seed, err, est = make_problem(5)
    ref = len(CANDS)
    m = sum(1 for c in range(len(CANDS))
            if (est[c].value - est[ref].value) ** 2 > 2 * np.var(err[:, c] - err[:, ref], ddof=1))
    for bias, words in [("twin", "from the twins"), ("log", "with each bias from the log"),
                        ("auto", f"with {m} of {len(CANDS)} biases read from the log")]:
        got = select_by_twin(log, pi, candidates=CANDS, n_twins=R, rng=seed, bias=bias)
        assert not got.warnings
        assert got.how_sure.startswith(f"{got.selected!r} has the least score on {R} twins, "
                                       f"{words}, ")
        assert got.n_replicates == R and got.method == "twin"
        assert got.details == {"twin_values": got.details["twin_values"],
                               "reward": "bernoulli", "logging": "pi_b",
                               "reference": "doubly_robust", "bias": bias,
                               "z": got.details["z"]}


@pytest.mark.parametrize("bias", ["auto", "log"])
def test_the_scores_standard_errors_add_the_logs_bias_term(bias):
    """A score's standard error by the delta method: ``se(mean loss + offset) / (2 score)``.
    A bias read from the log is the offset ``max(0, d^2 - v)`` with standard error
    ``2 |d| sqrt(v)``, on a loss ``s^2`` the same on every twin; one read from the twins has
    no offset and the losses ``s^2 + e_i^2 - var_pop`` (``e_i`` the twin's error)."""
    log, pi, R, seed, err, est = make_problem(5)
    got = select_by_twin(log, pi, candidates=CANDS, n_twins=R, rng=seed, bias=bias)
    ref = len(CANDS)
    for c, (label, _) in enumerate(CANDS):
        s = got.scores()[label]
        e = err[:, c]
        d = est[c].value - est[ref].value
        v = np.var(e - err[:, ref], ddof=1)
        s2 = est[c].stderr ** 2
        if bias == "log" or d * d > 2 * v:
            se = 2 * abs(d) * math.sqrt(v) / (2 * s.score)
        else:
            losses = s2 + e ** 2 - np.var(e)
            se = np.std(losses, ddof=1) / math.sqrt(R) / (2 * s.score)
        assert s.stderr == pytest.approx(se, rel=1e-9)


def test_the_reference_as_a_candidate_takes_its_bias_from_the_twins():
    """DR (the reference) among the candidates: its difference from itself is 0 on the log
    and on every twin, so z is 0 and "auto" reads its bias from the twins (the log resolves
    nothing: ``0 > 2 * 0`` is false): ``score^2 = se^2 + mean error^2``."""
    log, pi, R, seed, err, est = make_problem(5)
    cands = [*CANDS, ("doubly_robust", doubly_robust)]
    got = select_by_twin(log, pi, candidates=cands, n_twins=R, rng=seed)
    assert got.details["z"]["doubly_robust"] == 0.0
    s = got.scores()["doubly_robust"]
    e = err[:, len(CANDS)]
    assert s.score == pytest.approx(math.sqrt(est[-1].stderr ** 2 + e.mean() ** 2), rel=1e-9)


def test_a_candidate_that_fails_on_the_log_is_named_with_the_log():
    log = small_log(5, n=60)
    pi = np.random.default_rng(6).dirichlet(np.ones(3), size=60)

    def fails_on_the_log(lg, action_dist):
        if np.array_equal(lg.context, log.context):
            raise RuntimeError("not here")
        return 0.3
    with pytest.raises(ValueError) as info:
        select_by_twin(log, pi, candidates=[("bad", fails_on_the_log), *CANDS], n_twins=2,
                       rng=1)
    assert str(info.value) == ("`candidates`: 'bad' on the log failed: RuntimeError: "
                               "not here")


class FailsWithoutRepeats:
    """A regressor that fails on data without a repeated context (a real log's), and fits
    a constant on a twin's (resampled with replacement: repeats in every fold)."""

    def fit(self, X, y):
        if np.unique(X[:, 0]).size == X.shape[0]:
            raise RuntimeError("singular")
        self.c = float(np.mean(y))
        return self

    def predict(self, X):
        return np.full(X.shape[0], self.c)


def test_a_candidates_model_that_fails_on_the_log_is_named_with_the_log():
    log = small_log(5, n=60)
    pi = np.random.default_rng(6).dirichlet(np.ones(3), size=60)
    cands = [("dm_reg", functools.partial(direct_method, model=FailsWithoutRepeats())),
             *CANDS]
    with pytest.raises(ValueError) as info:
        select_by_twin(log, pi, candidates=cands, n_twins=2, rng=1)
    assert str(info.value) == ("`candidates`: the reward model failed to fit on the log: "
                               "RuntimeError: singular")


def test_twenty_twins_by_default():
    log = small_log(2)
    got = select_by_twin(log, np.full((40, 3), 1 / 3), candidates=CANDS, rng=0)
    assert got.n_replicates == 20 and len(got.details["twin_values"]) == 20
