"""Slate estimators: against literal per-record references, against the general
pseudo-inverse, properties, bad input; unbiasedness under each estimator's assumption
against the exact truth (slow)."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import evaluators
import simulator
from agents import PlackettLuce
from evaluators import NoSupportWarning
from simulator import RecommendationConfig, SlateLog, preset

# -- random logs and literal references ----------------------------------------------------------

@st.composite
def slate_problems(draw, uniform=False):
    """A log of a Plackett-Luce (or uniform) logging policy and a Plackett-Luce target, with
    every array an estimator takes (small: n <= 30, m <= 6, k <= 3)."""
    n = draw(st.integers(2, 30))
    m = draw(st.integers(2, 6))
    k = draw(st.integers(1, min(3, m)))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    scores = rng.normal(0, 1.5, (n, m))
    mu = PlackettLuce(scores, k=k, temperature=math.inf if uniform else 1.0)
    pi = PlackettLuce(scores, k=k, temperature=draw(st.sampled_from([0.5, 1.0, 3.0])))
    obs = {"user": np.arange(n), "available": np.ones((n, m), bool)}
    S = mu.sample(obs, rng=rng)
    cas = mu.prefix_probabilities(obs, S)
    log = SlateLog(context=rng.normal(size=(n, 2)), action=S,
                   reward=(rng.random((n, k)) < 0.4).astype(float), pscore=cas[:, -1],
                   pscore_cascade=cas, pscore_item_position=mu.item_position_probabilities(obs, S),
                   n_items=m, user=np.arange(n))
    target = {"cascade": pi.prefix_probabilities(obs, S),
              "ipos": pi.item_position_probabilities(obs, S),
              "marg": pi.item_marginals(obs, S),
              "dist": pi.conditional_probabilities(obs, S),
              "q": rng.random((n, k, m))}
    return log, target, pi, obs


def literal(log, t):
    """Every estimator written record by record, position by position."""
    out = {"sips": [], "iips": [], "rips": [], "cdr": []}
    for i in range(log.n_rounds):
        R = sum(log.reward[i])
        out["sips"].append(t["cascade"][i, -1] / log.pscore[i] * R)
        out["iips"].append(sum(t["ipos"][i, j] / log.pscore_item_position[i, j] * log.reward[i, j]
                               for j in range(log.len_list)))
        out["rips"].append(sum(t["cascade"][i, j] / log.pscore_cascade[i, j] * log.reward[i, j]
                               for j in range(log.len_list)))
        term, w_prev = 0.0, 1.0
        for j in range(log.len_list):
            w = t["cascade"][i, j] / log.pscore_cascade[i, j]
            q_obs = t["q"][i, j, log.action[i, j]]
            q_exp = sum(t["dist"][i, j, a] * t["q"][i, j, a] for a in range(log.n_items))
            term += w * (log.reward[i, j] - q_obs) + w_prev * q_exp
            w_prev = w
        out["cdr"].append(term)
    return {key: float(np.mean(v)) for key, v in out.items()}


@settings(max_examples=40)
@given(problem=slate_problems())
def test_estimators_equal_their_literal_definitions(problem):
    log, t, pi, obs = problem
    ref = literal(log, t)
    assert evaluators.slate_ips(log, t["cascade"][:, -1]).value == pytest.approx(ref["sips"],
                                                                                  rel=1e-12)
    assert evaluators.independent_ips(log, t["ipos"]).value == pytest.approx(ref["iips"],
                                                                              rel=1e-12)
    assert evaluators.reward_interaction_ips(log, t["cascade"]).value == pytest.approx(
        ref["rips"], rel=1e-12)
    for dist in (t["dist"], pi):  # the array or the policy itself, chunk by chunk
        got = evaluators.cascade_dr(log, t["cascade"], dist, reward_model=t["q"]).value
        assert got == pytest.approx(ref["cdr"], rel=1e-12, abs=1e-12)


def general_pi_weights(log, marg):
    """PI weights 1_s^T Gamma^+ q with Gamma of the uniform ranking policy built by
    enumerating its slates and inverted by numpy.linalg.pinv (Swaminathan et al. 2017)."""
    n, k = log.action.shape
    m = log.n_items
    slates = np.array(list(itertools.permutations(range(m), k)))
    X = np.zeros((len(slates), k * m))
    X[np.arange(len(slates))[:, None], np.arange(k) * m + slates] = 1.0
    G_pinv = np.linalg.pinv(X.T @ X / len(slates))
    w = np.empty(n)
    for i in range(n):
        q = marg[i].T.ravel()  # pi's marginals (n_items, k) as the (position, item) vector
        s = np.zeros(k * m)
        s[np.arange(k) * m + log.action[i]] = 1.0
        w[i] = s @ G_pinv @ q
    return w


@settings(max_examples=25)
@given(problem=slate_problems(uniform=True))
def test_pseudoinverse_equals_the_general_estimator(problem):
    log, t, pi, obs = problem
    full = pi.marginals(obs)  # (n, m, k)
    w = general_pi_weights(log, full)
    ref = float(np.mean(w * log.slate_reward))
    got = evaluators.pseudoinverse(log, t["marg"])
    assert got.value == pytest.approx(ref, rel=1e-9, abs=1e-10)


@settings(max_examples=25)
@given(problem=slate_problems())
def test_target_equal_to_logging_gives_the_mean_reward(problem):
    log, t, pi, obs = problem
    mean = log.slate_reward.mean()
    assert evaluators.slate_ips(log, log.pscore).value == pytest.approx(mean, rel=1e-12)
    assert evaluators.independent_ips(log, log.pscore_item_position).value == pytest.approx(
        mean, rel=1e-12)
    assert evaluators.reward_interaction_ips(log, log.pscore_cascade).value == pytest.approx(
        mean, rel=1e-12)


@settings(max_examples=25)
@given(problem=slate_problems(), seed=st.integers(0, 100))
def test_cascade_dr_properties(problem, seed):
    log, t, pi, obs = problem
    n, k = log.action.shape
    rips = evaluators.reward_interaction_ips(log, t["cascade"])
    zero = evaluators.cascade_dr(log, t["cascade"], t["dist"], reward_model=np.zeros(
        (n, k, log.n_items)))
    assert zero.value == pytest.approx(rips.value, rel=1e-12, abs=1e-14)
    assert zero.stderr == pytest.approx(rips.stderr, rel=1e-9, abs=1e-14)
    a = evaluators.cascade_dr(log, t["cascade"], t["dist"], rng=seed)
    b = evaluators.cascade_dr(log, t["cascade"], pi, rng=seed)
    assert a.value == pytest.approx(b.value, rel=1e-12, abs=1e-12)
    flat = evaluators.cascade_dr(log, t["cascade"].ravel(), t["dist"].ravel(),
                                 reward_model=t["q"].ravel())
    assert flat.value == pytest.approx(evaluators.cascade_dr(
        log, t["cascade"], t["dist"], reward_model=t["q"]).value, rel=1e-12, abs=1e-14)


def test_order_of_records_and_inputs_unchanged():
    rng = np.random.default_rng(3)
    log, t, pi, obs = _fixed_problem()
    before = {key: v.copy() for key, v in t.items()}
    perm = rng.permutation(log.n_rounds)
    for name, args in (("slate_ips", (t["cascade"][:, -1],)),
                       ("independent_ips", (t["ipos"],)),
                       ("reward_interaction_ips", (t["cascade"],))):
        f = getattr(evaluators, name)
        a = f(log, *args)
        b = f(log.take(perm), *(x[perm] for x in args))
        assert a.value == pytest.approx(b.value, rel=1e-12) and a.n == b.n == log.n_rounds
    for key in t:
        np.testing.assert_array_equal(t[key], before[key])


def _fixed_problem(n=50, m=5, k=3, seed=0, uniform=False):
    rng = np.random.default_rng(seed)
    scores = rng.normal(0, 1.5, (n, m))
    mu = PlackettLuce(scores, k=k, temperature=math.inf if uniform else 1.0)
    pi = PlackettLuce(scores, k=k, temperature=0.5)
    obs = {"user": np.arange(n), "available": np.ones((n, m), bool)}
    S = mu.sample(obs, rng=rng)
    cas = mu.prefix_probabilities(obs, S)
    log = SlateLog(context=rng.normal(size=(n, 2)), action=S,
                   reward=(rng.random((n, k)) < 0.4).astype(float), pscore=cas[:, -1],
                   pscore_cascade=cas, pscore_item_position=mu.item_position_probabilities(obs, S),
                   n_items=m, user=np.arange(n))
    t = {"cascade": pi.prefix_probabilities(obs, S),
         "ipos": pi.item_position_probabilities(obs, S), "marg": pi.item_marginals(obs, S),
         "dist": pi.conditional_probabilities(obs, S)}
    return log, t, pi, obs


class TinyRidge:
    """A duck-typed regressor (fit/predict), as a user would bring one."""

    def __init__(self, alpha=1.0):
        self.alpha = alpha
        self.coef_ = None

    def fit(self, X, y):
        Z = np.hstack([np.ones((X.shape[0], 1)), X])
        self.coef_ = np.linalg.solve(Z.T @ Z + self.alpha * np.eye(Z.shape[1]), Z.T @ y)
        return self

    def predict(self, X):
        return np.hstack([np.ones((X.shape[0], 1)), X]) @ self.coef_


@settings(max_examples=25)
@given(seed=st.integers(0, 2**32 - 1), temperature=st.sampled_from([0.05, 0.3, 1.0]),
       chunk_cells=st.sampled_from([1 << 22, 64]), dense_sums=st.sampled_from([0, 10**9]))
def test_cascade_dr_factored_path_equals_the_dense_reference(seed, temperature, chunk_cells,
                                                             dense_sums):
    """A policy with ``conditional_factors`` (fit and expectations in factored form; records
    whose remaining weight is a tiny share expanded densely) against the same policy's
    (n, k, n_items) array (the reference); in one chunk or in many (rows merged); the
    context sums sparse or dense."""
    rng = np.random.default_rng(seed)
    n, m, k, users = 60, 8, 3, 5
    scores = rng.normal(0, 3.0, (users, m))
    mu = PlackettLuce(scores, k=k, temperature=2.0)
    pi = PlackettLuce(scores, k=k, temperature=temperature)
    obs = {"user": rng.integers(0, users, n), "available": np.ones((n, m), bool)}
    S = mu.sample(obs, rng=rng)
    cas = mu.prefix_probabilities(obs, S)
    log = SlateLog(context=np.zeros((n, 1)), action=S,
                   reward=(rng.random((n, k)) < 0.4).astype(float), pscore=cas[:, -1],
                   pscore_cascade=cas, pscore_item_position=mu.item_position_probabilities(
                       obs, S), n_items=m, user=obs["user"])
    target = pi.prefix_probabilities(obs, S)
    ref = evaluators.cascade_dr(log, target, pi.conditional_probabilities(obs, S), rng=seed)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("evaluators._slate_ope._CHUNK_CELLS", chunk_cells)
        mp.setattr("evaluators._slate_ope._DENSE_SUMS", dense_sums)
        got = evaluators.cascade_dr(log, target, pi, rng=seed)
    assert got.value == pytest.approx(ref.value, rel=1e-11, abs=1e-12)
    assert got.stderr == pytest.approx(ref.stderr, rel=1e-9, abs=1e-12)


def test_cascade_dr_checks_a_policys_factors():
    rng = np.random.default_rng(3)
    scores = rng.normal(0, 1, (4, 6))
    pi = PlackettLuce(scores, k=2)
    obs = {"user": rng.integers(0, 4, 30), "available": np.ones((30, 6), bool)}
    S = pi.sample(obs, rng=rng)
    cas = pi.prefix_probabilities(obs, S)
    log = SlateLog(context=np.zeros((30, 1)), action=S, reward=np.ones((30, 2)),
                   pscore=cas[:, -1], pscore_cascade=cas,
                   pscore_item_position=pi.item_position_probabilities(obs, S), n_items=6,
                   user=obs["user"])

    class Scaled:  # remaining weights off by a factor: rows no longer sum to 1
        def conditional_probabilities(self, observations, slates):
            return pi.conditional_probabilities(observations, slates)

        def conditional_factors(self, observations, slates):
            W, row, R = pi.conditional_factors(observations, slates)
            return W, row, 2 * R

    class Broken(Scaled):
        def conditional_factors(self, observations, slates):
            return "nonsense"

    for policy, match in ((Scaled(), "remaining"), (Broken(), "conditional_factors")):
        with pytest.raises(ValueError, match="target_action_dist") as err:
            evaluators.cascade_dr(log, cas, policy, rng=0)
        assert match in str(err.value)


def test_cascade_dr_with_a_regressor():
    log, t, pi, obs = _fixed_problem(n=120)
    reg = TinyRidge()
    a = evaluators.cascade_dr(log, t["cascade"], t["dist"], reward_model=reg, rng=1)
    b = evaluators.cascade_dr(log, t["cascade"], pi, reward_model=reg, rng=1)
    assert reg.coef_ is None  # the caller's object is never fitted (deep copies are)
    assert math.isfinite(a.value) and a.value == pytest.approx(b.value, rel=1e-10)
    c = evaluators.cascade_dr(log, t["cascade"], t["dist"], reward_model=reg, rng=2)
    assert c.value != a.value  # other folds


def test_no_support_gives_nan_with_a_warning():
    log, t, pi, obs = _fixed_problem()
    zeros = np.zeros_like(t["cascade"])
    for f, args in ((evaluators.slate_ips, (zeros[:, -1],)),
                    (evaluators.independent_ips, (zeros,)),
                    (evaluators.reward_interaction_ips, (zeros,))):
        with pytest.warns(NoSupportWarning):
            est = f(log, *args)
        assert math.isnan(est.value) and math.isnan(est.stderr) and est.ess == 0.0
    ulog, ut, _, _ = _fixed_problem(uniform=True)
    with pytest.warns(NoSupportWarning):
        assert math.isnan(evaluators.pseudoinverse(ulog, np.zeros_like(ut["marg"])).value)


def test_estimates_carry_their_uncertainty():
    log, t, pi, obs = _fixed_problem(n=400)
    est = evaluators.independent_ips(log, t["ipos"], ci=0.9)
    terms = (t["ipos"] / log.pscore_item_position * log.reward).sum(axis=1)
    assert est.stderr == pytest.approx(terms.std(ddof=1) / 20, rel=1e-12)
    assert est.ci_high - est.ci_low == pytest.approx(2 * 1.6448536269514722 * est.stderr)
    assert est.level == 0.9 and est.estimator == "independent_ips" and 0 < est.ess <= 400


@pytest.mark.parametrize("call,err,match", [
    pytest.param(lambda log, t: evaluators.slate_ips(object(), t["cascade"][:, -1]),
                 TypeError, "SlateLog", id="not-a-log"),
    pytest.param(lambda log, t: evaluators.slate_ips(log, t["cascade"][:10, -1]),
                 ValueError, "target_pscore", id="short-target"),
    pytest.param(lambda log, t: evaluators.independent_ips(log, t["ipos"] * 3),
                 ValueError, r"\[0, 1\]", id="target-above-one"),
    pytest.param(lambda log, t: evaluators.reward_interaction_ips(log, np.full_like(
        t["cascade"], np.nan)), ValueError, "target_pscore_cascade", id="nan-target"),
    pytest.param(lambda log, t: evaluators.slate_ips(log, t["cascade"][:, -1], ci=1.0),
                 ValueError, "ci", id="level"),
    pytest.param(lambda log, t: evaluators.pseudoinverse(log, t["marg"]),
                 ValueError, "uniform ranking policy", id="pi-non-uniform-log"),
    pytest.param(lambda log, t: evaluators.cascade_dr(log, t["cascade"], t["dist"] * 0.5),
                 ValueError, "sum", id="dist-not-normalised"),
    pytest.param(lambda log, t: evaluators.cascade_dr(log, t["cascade"] * 0.5, t["dist"]),
                 ValueError, "consistent", id="dist-inconsistent"),
    pytest.param(lambda log, t: evaluators.cascade_dr(log, t["cascade"], t["dist"],
                                                      reward_model="ridge"),
                 ValueError, "reward_model", id="unknown-model"),
    pytest.param(lambda log, t: evaluators.cascade_dr(log, t["cascade"], t["dist"],
                                                      reward_model=np.zeros((2, 2))),
                 ValueError, "reward_model", id="model-shape"),
    pytest.param(lambda log, t: evaluators.cascade_dr(log, t["cascade"], t["dist"],
                                                      n_folds=0),
                 ValueError, "n_folds", id="no-folds"),
])
def test_bad_input(call, err, match):
    log, t, pi, obs = _fixed_problem()
    with pytest.raises(err, match=match):
        call(log, t)


def test_position_wise_estimators_refuse_any_click_logs():
    log, t, pi, obs = _fixed_problem()
    fb = log.to_obp()
    any_log = SlateLog.from_obp(fb, reward_type="any_click")
    for f, arg in ((evaluators.independent_ips, t["ipos"]),
                   (evaluators.reward_interaction_ips, t["cascade"])):
        with pytest.raises(ValueError, match="reward_type"):
            f(any_log, arg)
    # the slate-level estimator takes the log's own reward
    assert evaluators.slate_ips(any_log, t["cascade"][:, -1]).value <= \
        evaluators.slate_ips(log, t["cascade"][:, -1]).value


# -- unbiasedness against the exact truth (slow) -------------------------------------------------

WORLD = preset("viadeo_like", n_users=60, n_items=8, n_ticks=400, campaigns=(),
               appeal_mean=-1.2)


def _errors(model, n_logs, n_rounds, *, uniform=False, seed=0):
    """Errors of every estimator over independent logs against the truth conditional on each
    log's users (exact; the unconditional truth only adds the users' sampling noise)."""
    kw = {"dcm_lambda": 0.3} if model == "dcm" else {}
    cfg = RecommendationConfig(world=WORLD, k=3, visits_per_tick=5, click_model=model, **kw)
    world = simulator.World(WORLD, seed=0)
    p = world.true_ctr(np.arange(60)[:, None], np.arange(8)[None, :], 0)
    scores = np.log(p / (1 - p)) + np.random.default_rng(1).normal(0, 1, p.shape)
    mu = PlackettLuce(scores, k=3, temperature=math.inf if uniform else 2.0)
    pi = PlackettLuce(scores, k=3, temperature=0.7)
    truth = simulator.slate_policy_value(cfg, pi)
    err = {name: [] for name in evaluators.SLATE_ESTIMATORS}
    for i in range(n_logs):
        log, _ = simulator.collect_slate_log(cfg, n_rounds, policy=mu, rng=seed * 10_000 + i)
        obs = log.observations()
        cas = pi.prefix_probabilities(obs, log.action)
        v = truth.conditional(log.user)
        err["slate_ips"].append(evaluators.slate_ips(log, cas[:, -1]).value - v)
        err["independent_ips"].append(evaluators.independent_ips(
            log, pi.item_position_probabilities(obs, log.action)).value - v)
        err["reward_interaction_ips"].append(evaluators.reward_interaction_ips(log, cas).value - v)
        err["cascade_dr"].append(evaluators.cascade_dr(log, cas, pi, rng=i).value - v)
        if uniform:
            err["pseudoinverse"].append(evaluators.pseudoinverse(
                log, pi.item_marginals(obs, log.action)).value - v)
    return {name: np.array(e) for name, e in err.items() if e}


def _t(e):
    return e.mean() / (e.std(ddof=1) / np.sqrt(e.size))


# the assumption each estimator needs, per click model
UNBIASED = {
    "independent": {"slate_ips", "independent_ips", "reward_interaction_ips", "cascade_dr",
                    "pseudoinverse"},
    "pbm": {"slate_ips", "independent_ips", "reward_interaction_ips", "cascade_dr",
            "pseudoinverse"},
    "cascade": {"slate_ips", "reward_interaction_ips", "cascade_dr"},
    "dcm": {"slate_ips", "reward_interaction_ips", "cascade_dr"},
}


@pytest.mark.slow
@pytest.mark.parametrize("model", ["independent", "pbm", "cascade", "dcm"])
@pytest.mark.parametrize("uniform", [False, True], ids=["pl-logging", "uniform-logging"])
def test_unbiased_under_their_assumption_and_biased_outside(model, uniform):
    """|t| < 4 over 200 logs where the estimator's assumption holds (each test ~1e-4 false
    alarm); where it does not (IIPS and PI under the cascade and the DCM), the bias is
    detected (|t| > 6)."""
    err = _errors(model, 200, 300, uniform=uniform, seed=1 + uniform)
    for name, e in err.items():
        if name in UNBIASED[model]:
            assert abs(_t(e)) < 4, (name, e.mean(), _t(e))
        else:
            assert abs(_t(e)) > 6, (name, e.mean(), _t(e))


@pytest.mark.parametrize("n_folds", [1, 2, 3])
def test_cascade_dr_mean_model_equals_the_recursion_written_as_a_loop(n_folds):
    # Cascade-DR's "mean" Q model, T_j(a) = mean over the training records showing a at j of
    # r_ij + sum_b pi(b | prefix) T_{j+1}(b), written record by record; items never shown at
    # j get the mean of the position's targets. Its estimate equals the estimate from those
    # tables given as an array.
    log, t, pi, obs = _fixed_problem(n=20, m=12, k=3, seed=4)  # some items unseen at a slot
    D = t["dist"]
    fitted = evaluators.fit_reward_model(log, "mean", n_folds=n_folds, rng=7)
    folds = fitted.folds
    n, k = log.action.shape
    m = log.n_items
    q = np.zeros((n, k, m))
    for f in range(n_folds):
        train = [i for i in range(n) if folds[i] != f] if n_folds > 1 else list(range(n))
        if not train:
            train = list(range(n))
        T = np.zeros((k, m))
        for j in range(k - 1, -1, -1):
            tot, cnt = np.zeros(m), np.zeros(m)
            for i in train:
                target = log.reward[i, j]
                if j < k - 1:
                    target += sum(D[i, j + 1, b] * T[j + 1, b] for b in range(m))
                tot[log.action[i, j]] += target
                cnt[log.action[i, j]] += 1
            for a in range(m):
                T[j, a] = tot[a] / cnt[a] if cnt[a] > 0 else tot.sum() / cnt.sum()
        for i in range(n):
            if folds[i] == f:
                q[i] = T
    got = evaluators.cascade_dr(log, t["cascade"], D, reward_model=fitted)
    want = evaluators.cascade_dr(log, t["cascade"], D, reward_model=q)
    assert got.value == pytest.approx(want.value, rel=1e-12, abs=1e-14)
    assert got.stderr == pytest.approx(want.stderr, rel=1e-9, abs=1e-14)
