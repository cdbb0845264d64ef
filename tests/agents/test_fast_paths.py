"""Fast paths (issue 18): taken only when they implement the agent's own act/update.

The regression: ``class FirstArm(agents.UCB1)`` overriding ``act`` inherited UCB1's compiled
``replay_arrays`` and batched twin, so replay returned UCB1's value for it (0.3228 with 254
matches instead of the loop's 0.4429 with 210) and BRED crashed on the twin table.
"""

import warnings

import numpy as np
import pytest

import agents
import simulator
from agents import AgentCheckError, _bandits, check_agent, fast_path, why_no_fast_path
from evaluators import NoMatchWarning, bred, replay
from tests.evaluators.test_replay import Hidden


class FirstArm(agents.UCB1):
    """Plays the first available arm (the issue's example)."""

    def act(self, observation):
        return int(np.flatnonzero(observation["available"])[0])


class Tagged(agents.UCB1):
    """Only adds an attribute and an unrelated method: keeps the fast paths."""

    label = "tagged"

    def describe(self):
        return f"{self.label} UCB1"


class TaggedLinUCB(agents.LinUCB):
    def __repr__(self):
        return "TaggedLinUCB()"


class OwnReplay(agents.UCB1):
    """Overrides act *and* provides its own replay_arrays beside it: its own fast path."""

    def act(self, observation):
        return super().act(observation)

    def replay_arrays(self, context, available, logged_action, reward, **kw):
        return super().replay_arrays(context, available, logged_action, reward, **kw)


def _issue_log():
    log, _ = simulator.collect_log(simulator.preset("bred_linear"), 2000, rng=0)
    return log


def _fresh(cls, seed=0):
    a = cls()
    a.reset(seed)
    return a


# -- the rule -------------------------------------------------------------------------------


@pytest.mark.parametrize("cls, replay_ok, batch_ok", [
    pytest.param(agents.UCB1, True, True, id="UCB1"),
    pytest.param(agents.LinUCB, True, True, id="LinUCB"),
    pytest.param(agents.ThompsonSampling, False, True, id="ThompsonSampling"),
    pytest.param(FirstArm, False, False, id="FirstArm-overrides-act"),
    pytest.param(Tagged, True, True, id="Tagged-adds-attributes"),
    pytest.param(TaggedLinUCB, True, True, id="TaggedLinUCB-overrides-repr"),
    pytest.param(OwnReplay, True, False, id="OwnReplay-act-and-replay-together"),
])
def test_fast_path_follows_the_mro_rule(cls, replay_ok, batch_ok):
    a = cls()
    assert (fast_path(a, "replay_arrays") is not None) is replay_ok
    assert (fast_path(a, "batch") is not None) is batch_ok
    assert (why_no_fast_path(a, "replay_arrays") is None) is replay_ok
    # the protocols say what is offered, fast_path whether it may be taken
    assert isinstance(a, agents.SupportsBatch)
    assert isinstance(a, agents.SupportsReplayArrays) is (cls is not agents.ThompsonSampling)


def test_refusal_names_the_overriding_class():
    why = why_no_fast_path(FirstArm(), "replay_arrays")
    assert "FirstArm overrides `act` below UCB1" in why


def test_update_override_is_refused_too():
    class Doubled(agents.UCB1):
        def update(self, observation, action, reward):
            super().update(observation, action, 2 * reward)

    assert fast_path(Doubled(), "replay_arrays") is None
    assert fast_path(Doubled, "batch") is None


def test_opting_out_with_none_and_registering():
    class NoFast(agents.UCB1):
        replay_arrays = None

    assert fast_path(NoFast(), "replay_arrays") is None and fast_path(NoFast(), "batch")

    class Logged(agents.UCB1):  # same behaviour, act overridden: the author may vouch
        def act(self, observation):
            return super().act(observation)

    assert fast_path(Logged(), "replay_arrays") is None
    agents.register_fast_path(Logged, "replay_arrays")
    assert fast_path(Logged(), "replay_arrays") is not None
    assert fast_path(Logged(), "batch") is None  # registered for replay_arrays only


def test_register_checks_its_arguments():
    with pytest.raises(TypeError, match="`cls` must be a class"):
        agents.register_fast_path(agents.UCB1(), "batch")
    with pytest.raises(TypeError, match="`names` must be strings"):
        agents.register_fast_path(agents.UCB1, 3)


def test_direct_calls_of_a_foreign_fast_path_are_refused():
    a = _fresh(FirstArm)
    X = np.zeros((3, 2))
    with pytest.raises(TypeError, match="replay_arrays cannot stand in for FirstArm"):
        a.replay_arrays(X, np.ones((3, 4), bool), np.zeros(3, np.int64), np.zeros(3))
    with pytest.raises(TypeError, match="FirstArm has no batched twin"):
        FirstArm.batch([_fresh(FirstArm)])


# -- the regression on replay, BRED and online_value ---------------------------------------


def test_replay_of_first_arm_is_its_own_loop_not_ucb1():
    log = _issue_log()
    ucb = replay(log, _fresh(agents.UCB1))
    fast = replay(log, _fresh(FirstArm))
    loop = replay(log, Hidden(_fresh(FirstArm)))
    assert (fast.value, fast.n, fast.n_matches) == (loop.value, loop.n, loop.n_matches)
    assert (round(fast.value, 4), fast.n) == (0.4429, 210)       # the issue's loop figures
    assert (round(ucb.value, 4), ucb.n) == (0.3228, 254)         # what it returned before


def test_subclass_keeping_the_fast_path_uses_it_with_the_same_numbers(monkeypatch):
    log = _issue_log()
    calls = []
    compiled = _bandits._Bandit.replay_arrays

    def spy(self, *args, **kw):
        calls.append(type(self).__name__)
        return compiled(self, *args, **kw)

    monkeypatch.setattr(_bandits._Bandit, "replay_arrays", spy)
    tagged = replay(log, _fresh(Tagged))
    assert calls == ["Tagged"]
    plain = replay(log, _fresh(agents.UCB1))
    assert (tagged.value, tagged.n) == (plain.value, plain.n)
    replay(log, _fresh(FirstArm))
    assert calls == ["Tagged", "UCB1"]  # FirstArm went through the plain loop


def _bred_maker(cls, hide=False):
    def make(gen):
        a = cls()
        a.reset(gen)
        return Hidden(a) if hide else a
    return make


@pytest.mark.parametrize("reveal", ["every", "once"])
def test_bred_of_a_subclass_runs_and_equals_the_plain_loop(reveal):
    log = _issue_log().take(np.arange(300))
    kw = dict(n_bootstrap=4, reveal=reveal, rng=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoMatchWarning)
        got = bred(log, _bred_maker(FirstArm), **kw)          # crashed with KeyError before
        want = bred(log, _bred_maker(FirstArm, hide=True), **kw)
        ucb = bred(log, _bred_maker(agents.UCB1), **kw)
        tagged = bred(log, _bred_maker(Tagged), **kw)         # batched twin of UCB1
    np.testing.assert_array_equal(got.replicate_values, want.replicate_values)
    np.testing.assert_array_equal(got.replicate_matches, want.replicate_matches)
    assert not np.array_equal(got.replicate_values, ucb.replicate_values)
    np.testing.assert_array_equal(tagged.replicate_values, ucb.replicate_values)


def test_online_value_of_a_subclass_runs_its_own_act():
    c = simulator.LinearBanditConfig()
    kw = dict(n_runs=3, rng=2)
    auto = simulator.online_value(c, _bred_maker(FirstArm), 150, **kw)
    loop = simulator.online_value(c, _bred_maker(FirstArm), 150, method="loop", **kw)
    np.testing.assert_array_equal(auto.curve, loop.curve)
    ucb = simulator.online_value(c, _bred_maker(agents.UCB1), 150, **kw)
    assert not np.array_equal(auto.curve, ucb.curve)
    with pytest.raises(ValueError, match="FirstArm overrides `act` below UCB1"):
        simulator.online_value(c, _bred_maker(FirstArm), 10, method="batched", **kw)
    tagged = simulator.online_value(c, _bred_maker(Tagged), 150, method="batched", **kw)
    np.testing.assert_array_equal(tagged.curve, ucb.curve)


# -- check_agent verifies the fast paths it would take -------------------------------------


class _Counts:
    """A hand-written greedy bandit with act/update and (optionally broken) fast paths."""

    def reset(self, rng=None):
        self.gen = np.random.default_rng(rng)
        self.n = self.s = None

    def _state(self, K):
        if self.n is None:
            self.n, self.s = np.zeros(K), np.zeros(K)

    def act(self, observation):
        avail = np.asarray(observation["available"], bool)
        if not avail.any():
            raise ValueError("`observation['available']` has no available arm.")
        self._state(avail.size)
        u = self.gen.random()
        mean = np.where(self.n > 0, self.s / np.maximum(self.n, 1), np.inf)
        score = np.where(avail, mean + 1e-9 * u, -np.inf)
        return int(np.argmax(score))

    def update(self, observation, action, reward):
        self.n[action] += 1
        self.s[action] += reward

    def replay_arrays(self, context, available, logged_action, reward, *, index=None,
                      eligible=None, jitter=None, jitter_scale=None, revealed=None):
        T = len(logged_action)
        index = np.arange(T) if index is None else index
        out = []
        for j, r in enumerate(index):
            a = self.act({"context": context[r], "available": available[r]})
            out.append(a)
            if a == logged_action[r] and (eligible is None or eligible[j]) and self._use(
                    revealed, r):
                self.update(None, a, reward[r])
        return np.array(out, dtype=np.int64)

    @staticmethod
    def _use(revealed, r):
        if revealed is None:
            return True
        if revealed[r]:
            return False
        revealed[r] = True
        return True


class IgnoresEligible(_Counts):
    """Its replay_arrays learns from rejected matches too: disagrees with its loop."""

    def replay_arrays(self, context, available, logged_action, reward, **kw):
        kw.pop("eligible", None)
        return super().replay_arrays(context, available, logged_action, reward, **kw)


class _CountsTwin:
    def __init__(self, singles, flip=False):
        self.singles, self.flip = singles, flip

    def act(self, context, available):
        out = np.array([a.act({"context": x, "available": m})
                        for a, x, m in zip(self.singles, context, available, strict=True)],
                       dtype=np.int64)
        if self.flip:  # a twin that disagrees: the last copy plays its last available arm
            out[-1] = np.flatnonzero(available[-1])[-1]
        return out

    def update(self, active, context, action, reward):
        for a, on, _x, k, r in zip(self.singles, active, context, action, reward, strict=True):
            if on:
                a.update(None, int(k), float(r))


class WithTwin(_Counts):
    replay_arrays = None

    @classmethod
    def batch(cls, singles):
        return _CountsTwin(list(singles))


class WrongTwin(WithTwin):
    @classmethod
    def batch(cls, singles):
        return _CountsTwin(list(singles), flip=True)


def test_check_agent_passes_honest_fast_paths_and_subclasses():
    # (FirstArm itself fails the contract: its inherited action_probabilities are UCB1's)
    for a in (_Counts(), WithTwin(), Tagged(), TaggedLinUCB(), OwnReplay()):
        check_agent(a, rng=1)


def test_check_agent_catches_a_replay_arrays_that_disagrees_with_its_loop():
    with pytest.raises(AgentCheckError, match="replay_arrays.* disagrees with the act/update "
                                              "loop"):
        check_agent(IgnoresEligible(), rng=1)


def test_check_agent_catches_a_batched_twin_that_disagrees():
    with pytest.raises(AgentCheckError, match=r"batch\(\.\.\.\)\.act at step \d+ disagrees"):
        check_agent(WrongTwin(), rng=1)


def test_a_proxy_forwarding_by_getattr_gets_the_plain_loop():
    class Proxy:  # nothing provable about what __getattr__ forwards
        def __init__(self, agent):
            self._agent = agent

        def __getattr__(self, name):
            return getattr(self._agent, name)

    p = Proxy(_fresh(agents.UCB1))
    assert callable(p.replay_arrays) and fast_path(p, "replay_arrays") is None
    assert "has no `replay_arrays`" in why_no_fast_path(p, "replay_arrays")
