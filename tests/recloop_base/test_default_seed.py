"""Deterministic defaults: ``rng=None`` is ``DEFAULT_SEED`` everywhere (issue 37). One test
per public family that draws: two calls without ``rng`` give the same bytes, and an explicit
fresh ``numpy.random.default_rng()`` is still fresh where the draw matters."""

import math
import pickle

import numpy as np
import pytest

import agents
import evaluators
import simulator
from recloop_base.validation import DEFAULT_SEED, as_generator, as_seed_sequence
from simulator.logs import BanditLog


def _log(n=300, K=4, seed=3):
    g = np.random.default_rng(seed)
    x = g.normal(size=(n, 2))
    a = g.integers(0, K, n)
    r = (g.random(n) < 0.3 + 0.1 * (a == 1) + 0.1 * (x[:, 0] > 0)).astype(float)
    return BanditLog(context=x, action=a, reward=r, pscore=np.full(n, 1 / K), n_actions=K)


LOG = _log()
PI = np.tile([0.55, 0.15, 0.15, 0.15], (LOG.n_rounds, 1))


def _bytes(x) -> bytes:
    return pickle.dumps(x)


def test_none_is_the_documented_default_seed():
    assert DEFAULT_SEED == 0
    assert as_generator(None).random(4).tobytes() == np.random.default_rng(0).random(4).tobytes()
    assert as_seed_sequence(None).entropy == np.random.SeedSequence(0).entropy
    # fresh entropy only when asked for, explicitly
    fresh = [as_generator(np.random.default_rng()).random() for _ in range(2)]
    assert fresh[0] != fresh[1]
    assert as_seed_sequence(np.random.SeedSequence()).entropy != DEFAULT_SEED


@pytest.mark.parametrize("name", ["direct_method", "doubly_robust", "sndr", "switch_dr",
                                  "dr_os"])
def test_model_based_estimators_are_deterministic_by_default(name):
    # doubly_robust(log, ad) gave 0.7569, 0.7667, 0.7642 on the same inputs before
    f = getattr(evaluators, name)
    assert _bytes(f(LOG, PI)) == _bytes(f(LOG, PI)) == _bytes(f(LOG, PI, rng=DEFAULT_SEED))


def test_reward_model_is_deterministic_by_default():
    a, b = evaluators.fit_reward_model(LOG), evaluators.fit_reward_model(LOG)
    assert a.cross_fitted.tobytes() == b.cross_fitted.tobytes()


def test_slope_is_deterministic_by_default():
    f = evaluators.select_estimator
    assert _bytes(f(LOG, PI, estimator="doubly_robust")) == _bytes(
        f(LOG, PI, estimator="doubly_robust"))


def test_twin_selection_is_deterministic_by_default():
    a = evaluators.select_by_twin(LOG, PI, n_twins=3)
    b = evaluators.select_by_twin(LOG, PI, n_twins=3)
    assert (a.value, a.selected, a.details["twin_values"]) == (b.value, b.selected,
                                                         b.details["twin_values"])


def test_replay_and_bred_are_deterministic_by_default():
    skewed = BanditLog(context=LOG.context, action=LOG.action, reward=LOG.reward,
                       pscore=np.where(LOG.action == 0, 0.4, 0.2), n_actions=4)
    def agent():  # its own stream reset to the default seed: only replay's draws vary
        a = agents.EpsilonGreedy(epsilon=0.2)
        a.reset()
        return a

    one = evaluators.replay(skewed, agent(), method="rejection")
    two = evaluators.replay(skewed, agent(), method="rejection")
    assert (one.value, one.n) == (two.value, two.n)

    def make(rng):
        a = agents.EpsilonGreedy(epsilon=0.2)
        a.reset(rng)
        return a

    b1 = evaluators.bred(LOG, make, n_bootstrap=3)
    b2 = evaluators.bred(LOG, make, n_bootstrap=3)
    assert b1.value == b2.value and b1.stderr == b2.stderr


def test_slate_estimator_is_deterministic_by_default():
    g = np.random.default_rng(1)
    n, m, k = 60, 4, 2
    pl = agents.PlackettLuce(g.normal(size=(n, m)), k=k)
    obs = {"user": np.arange(n), "available": np.ones((n, m), bool)}
    S = pl.sample(obs, rng=g)
    cas = pl.prefix_probabilities(obs, S)
    log = simulator.SlateLog(context=g.normal(size=(n, 2)), action=S,
                             reward=(g.random((n, k)) < 0.4).astype(float), pscore=cas[:, -1],
                             pscore_cascade=cas,
                             pscore_item_position=pl.item_position_probabilities(obs, S),
                             n_items=m, user=np.arange(n))
    dist = pl.conditional_probabilities(obs, S)
    a = evaluators.cascade_dr(log, cas, dist, reward_model="mean")
    b = evaluators.cascade_dr(log, cas, dist, reward_model="mean")
    assert _bytes(a) == _bytes(b)


def test_splits_and_loo_are_deterministic_by_default():
    assert _bytes(evaluators.splits.kfold(50, n_folds=5)) == _bytes(
        evaluators.splits.kfold(50, n_folds=5))
    assert _bytes(evaluators.splits.train_test_split(50)) == _bytes(
        evaluators.splits.train_test_split(50))


def test_agents_and_simulated_logs_are_deterministic_by_default():
    cfg = simulator.preset("bred_linear")
    a, _ = simulator.collect_log(cfg, 50)
    b, _ = simulator.collect_log(cfg, 50)
    assert a.action.tobytes() == b.action.tobytes() and a.reward.tobytes() == b.reward.tobytes()
    # an agent reset without a generator, and a Plackett-Luce ranker never reset
    runs = []
    for _ in range(2):
        eps = agents.EpsilonGreedy(epsilon=0.5)
        eps.reset()
        obs = {"context": np.zeros(1), "available": np.ones(3, bool)}
        pl = agents.PlackettLuce(np.zeros(6), k=3)
        ranked = {"user": 0, "available": np.ones(6, bool)}
        runs.append([int(eps.act(obs)) for _ in range(20)]
                    + [np.asarray(pl.act(ranked)).tolist() for _ in range(20)])
    assert runs[0] == runs[1]


def test_world_is_deterministic_by_default():
    cfg = simulator.preset("viadeo_like", n_users=200)
    w1, w2 = simulator.World(cfg), simulator.World(cfg)
    assert (w1.profiles(50) != w2.profiles(50)).nnz == 0
    assert math.isfinite(float(w1.profiles(50).sum()))
