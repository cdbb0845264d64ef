"""check_agent: every agent passes it, and each broken rule is caught and named."""

import numpy as np
import pytest
import scipy.sparse as sp

import agents
from agents import AgentCheckError, Constant, check_agent
from agents._recommenders import Popularity

RECOMMENDERS = [
    pytest.param(lambda: agents.Constant([3, 1, 0, 6]), id="constant"),
    pytest.param(lambda: agents.Constant.agreeing([0, 5, 2, 7, 0, 1, 0], 3), id="constant_g1"),
    pytest.param(lambda: agents.Constant.disagreeing([.3, .1, .2, .1, .1, .1, .1],
                                                     [0, 5, 2, 7, 0, 1, 0], 3),
                 id="constant_g2"),
    pytest.param(lambda: agents.Popularity(), id="popularity"),
    pytest.param(lambda: agents.Popularity(exclude_seen=False), id="popularity_keep_seen"),
    pytest.param(lambda: agents.UserCosineCF(), id="user_cosine_cf"),
    pytest.param(lambda: agents.UserCosineCF(method="naive"), id="user_cosine_cf_naive"),
    pytest.param(lambda: agents.NaiveCF(), id="naive_cf"),
    pytest.param(lambda: agents.NaiveCF(method="naive"), id="naive_cf_naive"),
    pytest.param(lambda: agents.UserKNN(2), id="user_knn"),
    pytest.param(lambda: agents.UserKNN(2, method="naive"), id="user_knn_naive"),
] + [
    pytest.param(lambda s=s: agents.KNNRating(s, 3), id=f"knn_{s}")
    for s in ("pearson", "adjusted_cosine", "cosine")
    if hasattr(agents, "KNNRating")
]

BANDITS = [
    pytest.param(lambda: agents.UniformRandom(), id="uniform_random"),
    pytest.param(lambda: agents.UCB1(1.0), id="ucb1"),
    pytest.param(lambda: agents.LinUCB(0.5), id="linucb"),
    pytest.param(lambda: agents.EpsilonGreedy(0.2), id="epsilon_greedy"),
    pytest.param(lambda: agents.EpsilonGreedy(0.0), id="greedy"),
    pytest.param(lambda: agents.ThompsonSampling(), id="thompson_sampling"),
]


@pytest.mark.parametrize("make", RECOMMENDERS + BANDITS)
@pytest.mark.parametrize("seed", [0, 1])
def test_every_agent_passes_the_contract_check(make, seed):
    check_agent(make(), rng=seed)


class _RecordingUCB1(agents.UCB1):
    """UCB1 that records every observation, action and reward the check gives it."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def reset(self, seed=None):
        state = seed.bit_generator.state if isinstance(seed, np.random.Generator) else seed
        self.seen.append(("reset", repr(state)))
        return super().reset(seed)

    def act(self, observation):
        a = super().act(observation)
        self.seen.append(("act", observation["context"].tobytes(),
                          observation["available"].tobytes(), int(a)))
        return a

    def update(self, observation, action, reward):
        self.seen.append(("update", int(action), float(reward)))
        return super().update(observation, action, reward)


class _RecordingPopularity(Popularity):
    """Popularity that records the profiles it is fitted on and the lists it returns."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def fit(self, profiles):
        self.seen.append(("fit", profiles.toarray().tobytes()))
        return super().fit(profiles)

    def recommend(self, users, k, *, removed=None):
        out = super().recommend(users, k, removed=removed)
        self.seen.append(("recommend", np.asarray(users).tobytes(), k, out.tobytes()))
        return out


@pytest.mark.parametrize("make", [_RecordingUCB1, _RecordingPopularity],
                         ids=["bandit", "recommender"])
def test_check_is_itself_reproducible(make):
    # same rng => the same synthetic inputs, call for call; another rng => other inputs
    runs = {}
    for seed in (5, 5, 6):
        agent = make()
        check_agent(agent, rng=np.random.default_rng(seed))
        runs.setdefault(seed, []).append(agent.seen)
    assert len(runs[5][0]) > 10 and runs[5][0] == runs[5][1]
    assert runs[6][0] != runs[5][0]


def test_not_an_agent_is_a_type_error():
    with pytest.raises(TypeError, match="recommender .* or a bandit policy"):
        check_agent(object())


# --------------------------------------------------------------------------- broken agents


class _Wrapped:
    """A working Popularity whose one method is broken by a subclass."""

    def __init__(self):
        self.inner = Popularity()

    def fit(self, profiles):
        self.inner.fit(profiles)
        return self

    def recommend(self, users, k, *, removed=None):
        return self.inner.recommend(users, k, removed=removed)

    def __repr__(self):
        return type(self).__name__


class NoFitCheck(_Wrapped):
    def recommend(self, users, k, *, removed=None):
        if self.inner._profiles is None:
            return np.zeros((len(users), k), dtype=np.int64)
        return super().recommend(users, k, removed=removed)


class Repeats(_Wrapped):
    def recommend(self, users, k, *, removed=None):
        out = super().recommend(users, k, removed=removed)
        out[:, -1] = out[:, 0]
        return out


class FloatIds(_Wrapped):
    def recommend(self, users, k, *, removed=None):
        return super().recommend(users, k, removed=removed).astype(float)


class KeepsReference(_Wrapped):
    profiles = None

    def fit(self, profiles):
        self.profiles = profiles
        return self

    def recommend(self, users, k, *, removed=None):
        if self.profiles is not None:
            self.inner.fit(self.profiles)  # refits from the caller's (shared) buffers
        return super().recommend(users, k, removed=removed)


class MutatesInput(_Wrapped):
    def fit(self, profiles):
        profiles.data[:] = 1.0
        return super().fit(profiles)


class IgnoresBadK(_Wrapped):
    def recommend(self, users, k, *, removed=None):
        return super().recommend(users, max(1, min(k, self.inner.n_items)), removed=removed)


class BatchDependent(_Wrapped):
    def recommend(self, users, k, *, removed=None):
        out = super().recommend(users, k, removed=removed)
        return out if len(users) > 1 else out[:, ::-1].copy()


class ReturnsSelfNot(_Wrapped):
    def fit(self, profiles):
        super().fit(profiles)
        return None


@pytest.mark.parametrize("cls, match", [
    pytest.param(NoFitCheck, "recommend before fit must raise RuntimeError",
                 id="no-fit-check"),
    pytest.param(Repeats, "repeated item", id="repeats"),
    pytest.param(FloatIds, "integer item ids", id="float-ids"),
    pytest.param(KeepsReference, "kept a reference", id="keeps-reference"),
    pytest.param(MutatesInput, "mutated its `profiles`", id="mutates-input"),
    pytest.param(IgnoresBadK, "k=0 must raise ValueError", id="ignores-bad-k"),
    pytest.param(BatchDependent, "alone .* and in a batch", id="batch-dependent"),
    pytest.param(ReturnsSelfNot, "return the agent itself", id="fit-returns-none"),
])
def test_broken_recommenders_are_caught(cls, match):
    with pytest.raises(AgentCheckError, match=match):
        check_agent(cls(), rng=0)


class _Bandit:
    """A correct uniform policy; subclasses break one rule."""

    def reset(self, rng=None):
        self.gen = np.random.default_rng(rng)

    def act(self, observation):
        return int(self.gen.choice(np.flatnonzero(observation["available"])))

    def update(self, observation, action, reward):
        pass

    def action_probabilities(self, observation):
        avail = observation["available"]
        if not avail.any():
            raise ValueError("no available arm")
        return avail / avail.sum()

    def __repr__(self):
        return type(self).__name__


class TakesUnavailable(_Bandit):
    def act(self, observation):
        return int(np.flatnonzero(~observation["available"])[0]) \
            if not observation["available"].all() else 0


class BadProbabilities(_Bandit):
    def action_probabilities(self, observation):
        return np.full(observation["available"].size, 1.0 / observation["available"].size)


class UnnormalisedProbabilities(_Bandit):
    def action_probabilities(self, observation):
        return observation["available"] * 0.5


class ForgetsSeed(_Bandit):
    def reset(self, rng=None):
        if not hasattr(self, "gen"):
            self.gen = np.random.default_rng(rng)


class MutatesObservation(_Bandit):
    def update(self, observation, action, reward):
        observation["context"][0] = 0.0


class QueryConsumesRandomness(_Bandit):
    def action_probabilities(self, observation):
        self.gen.random()
        return super().action_probabilities(observation)


class ActsOnEmptyMask(_Bandit):
    def act(self, observation):
        avail = np.flatnonzero(observation["available"])
        return int(self.gen.choice(avail)) if avail.size else 0


class ReturnsNumpyFloat(_Bandit):
    def act(self, observation):
        return float(super().act(observation))


@pytest.mark.parametrize("cls, match", [
    pytest.param(TakesUnavailable, "not available", id="unavailable-arm"),
    pytest.param(BadProbabilities, "0 on unavailable arms", id="mass-on-unavailable"),
    pytest.param(UnnormalisedProbabilities, "sum to 1", id="not-normalised"),
    pytest.param(ForgetsSeed, "same seed must replay", id="reset-ignores-seed"),
    pytest.param(MutatesObservation, "mutated the observation", id="mutates-observation"),
    pytest.param(QueryConsumesRandomness, "pure query", id="impure-probabilities"),
    pytest.param(ActsOnEmptyMask, "no available arm must raise", id="empty-mask"),
    pytest.param(ReturnsNumpyFloat, "must return an int", id="float-action"),
])
def test_broken_bandits_are_caught(cls, match):
    with pytest.raises(AgentCheckError, match=match):
        check_agent(cls(), rng=0)


def test_a_correct_hand_written_bandit_passes():
    check_agent(_Bandit(), rng=0)


def test_custom_profiles_and_k_are_used():
    graph = sp.csr_array(np.eye(6) + np.eye(6, k=1))
    check_agent(Popularity(), profiles=graph, k=6, rng=0)
    with pytest.raises(ValueError, match=r"`k` must be in \[1, n_items=6\]"):
        check_agent(Constant([0]), profiles=graph, k=7, rng=0)
