"""simulator/_truth.py against plain loops and its exact refusals: the survivors of its
second mutation run (docs/testing.md). Every figure is recomputed here atom by atom or run by
run; every refusal is matched word for word."""

import itertools
import re

import gymnasium as gym
import numpy as np
import pytest

import simulator
from simulator import LinearBanditConfig, _truth, online_value, oracle_value, static_policy_value
from simulator import _bandit as B
from tests.simulator.test_truth_numbers import Fixed

#: a small dynamic world: 8 atoms, arms born and dying (horizon (40 + 1 - 6) * 60 // 6 = 350)
DYN = LinearBanditConfig(dim=4, n_arms=40, n_universal=16, lifetime=60, n_alive=6,
                         half_life=30.0)


def loop_atoms(c):
    """Atom m sets feature j to bit j of m; its probability is the product over the bits."""
    f = c.dim - int(c.intercept)
    p = c.context_p
    xs, probs = [], []
    for m in range(2 ** f):
        bits = [float((m >> j) & 1) for j in range(f)]
        xs.append(([1.0] if c.intercept else []) + bits)
        prob = 1.0
        for b in bits:
            prob *= p if b else 1.0 - p
        probs.append(prob)
    return np.array(xs), np.array(probs)


# -- context_atoms ----------------------------------------------------------------------------


@pytest.mark.parametrize("intercept, p", [(True, 0.3), (False, 0.3), (True, 0.0), (True, 1.0),
                                          (False, 0.0), (False, 1.0)])
def test_context_atoms_are_the_bits_of_their_index_with_product_probabilities(intercept, p):
    c = LinearBanditConfig(dim=4, context_p=p, intercept=intercept)
    xs, probs = loop_atoms(c)
    n = len(probs)
    assert n == (8 if intercept else 16)
    for start, stop in [(0, None), (3, 7), (5, n + 9), (0, 1), (n - 1, None)]:
        x, prob, total = _truth.context_atoms(c, start, stop)
        end = n if stop is None else min(stop, n)
        assert total == n
        assert x.dtype == np.float64 and prob.dtype == np.float64
        np.testing.assert_array_equal(x, xs[start:end])
        if 0 < p < 1:
            np.testing.assert_allclose(prob, probs[start:end], rtol=1e-13, atol=0)
        else:  # a point mass: exactly 1 on the all-zero (p = 0) or all-one (p = 1) atom
            np.testing.assert_array_equal(prob, probs[start:end])
    assert _truth.context_atoms(c)[1].sum() == pytest.approx(1.0, abs=1e-15)


# -- static_policy_value and oracle_value ----------------------------------------------------


def scored(context, available):
    """A deterministic policy: the best available arm of a fixed linear score."""
    score = context @ np.linspace(-1, 1, context.shape[1] * available.shape[1]).reshape(
        context.shape[1], available.shape[1])
    p = np.zeros(available.shape)
    p[np.arange(len(p)), np.argmax(np.where(available, score, -np.inf), axis=1)] = 1.0
    return p


class TickPolicy:
    """An object policy that plays arm ``tick % 3``'s first available successor."""

    def action_probabilities(self, obs):
        avail = np.asarray(obs["available"])
        idx = np.flatnonzero(avail)
        p = np.zeros(avail.size)
        p[idx[int(obs["tick"]) % min(3, idx.size)]] = 1.0
        return p


def loop_value(c, probs_of, ticks):
    """mean_t sum_x P(x) sum_a pi(a | x, t) p(a, x, t), atom by atom."""
    xs, probs = loop_atoms(c)
    per_tick = []
    for t in ticks:
        total = 0.0
        for x, prob in zip(xs, probs, strict=True):
            avail = B.alive(c, np.array([t]))
            pi = probs_of(x[None], avail, t)[0]
            ctr = B.true_ctr(c, x[None], np.array([t]))[0]
            total += prob * sum(pi[a] * ctr[a] for a in range(c.n_arms))
        per_tick.append(total)
    return sum(per_tick) / len(per_tick)


@pytest.mark.parametrize("ticks", [0, [0, 7, 33], [349], np.array([5, 5, 200], np.int32)],
                         ids=["t0", "3-ticks", "last-tick", "int32-ticks"])
def test_static_value_is_the_mean_over_ticks_of_the_sum_over_atoms(ticks, monkeypatch):
    ts = np.atleast_1d(ticks).tolist()
    want = loop_value(DYN, lambda x, a, t: scored(x, a), ts)
    assert static_policy_value(DYN, scored, ticks=ticks) == pytest.approx(want, rel=1e-13)
    # the policy object sees each atom's tick
    want = loop_value(DYN, lambda x, a, t: TickPolicy().action_probabilities(
        {"available": a[0], "tick": t})[None], ts)
    assert static_policy_value(DYN, TickPolicy(), ticks=ticks) == pytest.approx(want, rel=1e-13)
    # in chunks of 3 atoms (8 = 3 + 3 + 2): the same sum
    if isinstance(ticks, int):  # 0, the default tick
        assert static_policy_value(DYN, scored) == pytest.approx(
            loop_value(DYN, lambda x, a, t: scored(x, a), [0]), rel=1e-13)
    uniform = loop_value(DYN, lambda x, a, t: a / a.sum(axis=1, keepdims=True), ts)
    want = loop_value(DYN, lambda x, a, t: scored(x, a), ts)
    for chunk, chunks in [(3, [3, 3, 2]), (4, [4, 4])]:  # 8 atoms in chunks
        monkeypatch.setattr(_truth, "_CHUNK_ATOMS", chunk)
        assert static_policy_value(DYN, ticks=ticks) == pytest.approx(uniform, rel=1e-13)
        sizes = []  # a callable policy is called once per chunk, never on an empty one

        def counted(x, a, sizes=sizes):
            sizes.append(len(x))
            return scored(x, a)

        assert static_policy_value(DYN, counted, ticks=ticks) == pytest.approx(want, rel=1e-13)
        assert sizes == chunks * len(ts)


def test_truth_of_an_env_or_a_wrapped_env_is_the_truth_of_its_config():
    env = simulator.LinearBanditEnv(DYN)
    wrapped = gym.wrappers.RecordEpisodeStatistics(env)
    for world in (env, wrapped):
        assert static_policy_value(world, scored, ticks=[1, 9]) == \
            static_policy_value(DYN, scored, ticks=[1, 9])
        assert oracle_value(world, ticks=3) == oracle_value(DYN, ticks=3)
    np.testing.assert_array_equal(
        online_value(wrapped, lambda g: Fixed(0), 5, n_runs=2, rng=1).curve,
        online_value(DYN, lambda g: Fixed(0), 5, n_runs=2, rng=1).curve)


@pytest.mark.parametrize("fn", [static_policy_value, oracle_value], ids=["static", "oracle"])
def test_ticks_are_refused_by_name_with_what_was_received(fn):
    h = DYN.horizon
    rule = "`ticks` must be an int or a non-empty 1-d array of ints; got "
    for bad in ([[0, 1]], [], 1.0, np.array([0.0, 2.0]), "3"):
        with pytest.raises(ValueError, match=re.escape(rule + f"{bad!r}.")):
            fn(DYN, ticks=bad)
    with pytest.raises(ValueError, match=re.escape("`ticks` must be >= 0; got -3.")):
        fn(DYN, ticks=[2, -1, -3])
    with pytest.raises(ValueError, match=re.escape(f"`ticks` must be < the horizon {h}; got "
                                                   f"{h + 5}.")):
        fn(DYN, ticks=[0, h, h + 5])
    assert fn(DYN, ticks=[0, h - 1]) == pytest.approx((fn(DYN, ticks=0) + fn(DYN, ticks=h - 1))
                                                      / 2, rel=1e-14)
    with pytest.raises(ValueError, match=re.escape(f"`ticks` must be < the horizon {h}; got "
                                                   f"{h}.")):
        fn(DYN, ticks=h)
    assert fn(LinearBanditConfig(dim=3), ticks=10**9) == fn(LinearBanditConfig(dim=3))
    # ticks numpy reads as uint64 are refused, not wrapped to negative int64 (nan before)
    for big, top in ((2**63, 2**63), (np.array([0, 2**64 - 1], dtype=np.uint64), 2**64 - 1)):
        with pytest.raises(ValueError, match=re.escape(f"`ticks` must be < 2**63; got {top}.")):
            fn(LinearBanditConfig(half_life=10.0), ticks=big)


def test_oracle_value_defaults_to_tick_0():
    xs, probs = loop_atoms(DYN)
    want = sum(prob * max(B.true_ctr(DYN, x[None], np.array([0]))[0])
               for x, prob in zip(xs, probs, strict=True))
    assert oracle_value(DYN) == pytest.approx(want, rel=1e-13)


# -- online_value's refusals -------------------------------------------------------------------


class Twin:
    """Plays the first available arm; its batched twin does too, unless ``bad`` decides the
    actions (to try the twin's checks)."""

    bad = None

    def __init__(self, rng=None, run=0):
        self.run = run

    def act(self, obs):
        return int(np.argmax(obs["available"]))

    def update(self, obs, action, reward):
        pass

    @classmethod
    def batch(cls, agents):
        return _TwinBatch(agents, cls.bad)


class _TwinBatch:
    def __init__(self, agents, bad):
        self.B, self.bad, self.t = len(agents), bad, 0
        self.runs = [a.run for a in agents]

    def act(self, context, available):
        assert context.shape == (self.B, DYN.dim) and available.shape == (self.B, DYN.n_arms)
        if self.bad is None:
            return np.argmax(available, axis=1)
        return self.bad(self.runs, self.t)

    def update(self, active, context, action, reward):
        # the batched interface (agents/_batched.py): every copy learns, ``active`` (B,) bool
        assert active.dtype == np.bool_ and active.shape == (self.B,) and active.all()
        self.t += 1


class Other(Twin):
    batch = None


def twin(bad):
    return type("Twin", (Twin,), {"bad": staticmethod(bad)})


def test_online_value_refuses_bad_arguments_by_name():
    cases = [
        (TypeError, "`make_agent` must be callable; got int.", dict(make_agent=3)),
        (TypeError, "`T` must be an int; got float.", dict(T=2.0)),
        (TypeError, "`T` must be an int; got bool.", dict(T=True)),
        (ValueError, "`T` must be >= 1; got 0.", dict(T=0)),
        (TypeError, "`n_runs` must be an int; got float.", dict(n_runs=2.0)),
        (TypeError, "`n_runs` must be an int; got bool.", dict(n_runs=True)),
        (ValueError, "`n_runs` must be >= 1; got 0.", dict(n_runs=0)),
        (TypeError, "`start` must be an int; got float.", dict(start=1.0)),
        (TypeError, "`start` must be an int; got bool.", dict(start=True)),
        (ValueError, "`start` must be >= 0; got -1.", dict(start=-1)),
        (ValueError, "`start + T` must be <= the horizon 350; got 340 + 11 = 351.",
         dict(start=340, T=11)),
        (ValueError, "`method` must be 'auto', 'loop' or 'batched'; got 'fast'.",
         dict(method="fast")),
        (ValueError, "`method='batched'` needs a batched twin of Other: Other.batch is None, "
         "not a callable.", dict(make_agent=Other, method="batched")),
    ]
    for error, message, kw in cases:
        args = dict(make_agent=Twin, T=5, n_runs=2, rng=0) | kw
        with pytest.raises(error, match=re.escape(message)):
            online_value(DYN, args.pop("make_agent"), args.pop("T"), **args)
    with pytest.raises(ValueError, match=re.escape("`n_partitions` must be an int >= 1; got 0.")):
        online_value(DYN, Twin, 5, n_runs=2, n_partitions=0)
    # the boundaries are accepted: start + T == horizon, one step, one run
    assert online_value(DYN, Twin, 10, start=340, n_runs=2, rng=0).T == 10
    with pytest.warns(_truth.DegenerateTruthWarning):
        assert online_value(DYN, Twin, 1, n_runs=1, rng=0).T == 1


class Scrawler(Fixed):
    """Writes into the availability mask it was shown."""

    def act(self, obs):
        obs["available"][0] = False
        return 0


def test_the_loop_lends_a_read_only_availability_mask():
    with pytest.raises(ValueError, match="read-only"):
        online_value(DYN, lambda g: Scrawler(0), 3, n_runs=2, rng=0, method="loop")


def test_auto_batches_a_class_with_a_twin_and_loop_never_does():
    refuses = twin(lambda runs, t: np.full(len(runs), -1))
    for method in ("auto", "batched"):
        with pytest.raises(ValueError, match="returned action -1 at step 0"):
            online_value(DYN, refuses, 3, n_runs=2, rng=0, method=method)
    # the loop calls act, which plays the first available arm
    np.testing.assert_array_equal(online_value(DYN, refuses, 3, n_runs=2, rng=0,
                                               method="loop").curve,
                                  online_value(DYN, Other, 3, n_runs=2, rng=0).curve)


def in_turn(*makers):
    """A ``make_agent`` that calls ``makers`` in turn, cycling."""
    turn = itertools.cycle(makers)
    return lambda g: next(turn)(g)


def test_agents_of_two_classes_run_the_loop_and_cannot_be_batched():
    with pytest.raises(ValueError, match=re.escape(
            "`method='batched'` needs a batched twin of Other: `make_agent` returned both "
            "Other and Twin.")):
        online_value(DYN, in_turn(Other, Twin), 4, n_runs=3, rng=0, method="batched")
    # auto runs the loop: the same numbers as agents of one class
    mixed = online_value(DYN, in_turn(Other, Twin), 4, n_runs=3, rng=0)
    np.testing.assert_array_equal(mixed.curve, online_value(DYN, Other, 4, n_runs=3, rng=0).curve)


@pytest.mark.parametrize("bad, message", [
    (lambda runs, t: np.zeros(len(runs) - 1, np.int64),
     "the batched agent must return (4,) integer actions; got shape (3,), dtype int64 at step 0."),
    (lambda runs, t: np.zeros((len(runs), 1), np.int64),
     "the batched agent must return (4,) integer actions; got shape (4, 1), dtype int64 at "
     "step 0."),
    (lambda runs, t: np.zeros(len(runs)),
     "the batched agent must return (4,) integer actions; got shape (4,), dtype float64 at "
     "step 0."),
    (lambda runs, t: np.array([0, 0, 0, 40 if t == 2 else 0]),
     "the agent of run 3 returned action 40 at step 2, which is out of range or not available."),
    (lambda runs, t: np.array([0, -1, 0, -2]),
     "the agent of run 1 returned action -1 at step 0, which is out of range or not available."),
    (lambda runs, t: np.array([0, 0, 39, 39]),
     "the agent of run 2 returned action 39 at step 0, which is out of range or not available."),
], ids=["short", "2-d", "float", "out-of-range-late", "negative", "unavailable"])
def test_the_batched_twins_actions_are_checked(bad, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        online_value(DYN, twin(bad), 5, n_runs=4, rng=0, method="batched", n_partitions=1)


def test_a_bad_action_names_its_run_across_parts():
    """The runs are numbered from 0 over all the parts: run 5 is the second of part 2."""
    def bad(runs, t):
        return np.array([40 if r == 5 and t == 1 else 0 for r in runs])

    cls, runs = twin(bad), itertools.count()
    with pytest.raises(ValueError, match=re.escape("the agent of run 5 returned action 40 at "
                                                   "step 1,")):
        online_value(DYN, lambda g: cls(g, next(runs)), 3, n_runs=6, rng=0, method="batched",
                     n_partitions=3)
    fine, late = (lambda g: Fixed(0)), (lambda g: Fixed(40))
    with pytest.raises(ValueError, match=re.escape("the agent of run 5 returned action 40 at "
                                                   "step 7, which is out of range")):
        online_value(DYN, in_turn(fine, fine, fine, fine, fine, late), 3, start=7, n_runs=6,
                     rng=0, method="loop", n_partitions=3)
    with pytest.raises(ValueError, match=re.escape("the agent of run 0 returned a non-integer "
                                                   "action '1' at step 0.")):
        online_value(DYN, lambda g: Fixed("1"), 3, n_runs=2, rng=0, method="loop")
    with pytest.raises(ValueError, match=re.escape("the agent of run 0 returned a non-integer "
                                                   "action np.True_ at step 0.")):
        online_value(DYN, lambda g: Fixed(np.bool_(True)), 3, n_runs=2, rng=0, method="loop")
    with pytest.raises(ValueError, match=re.escape("the agent of run 0 returned action -1 at "
                                                   "step 0, which is out of range or not "
                                                   "available.")):
        online_value(DYN, lambda g: Fixed(-1), 3, n_runs=2, rng=0, method="loop")


# -- online_value's numbers --------------------------------------------------------------------


def test_online_value_in_chunks_of_ticks_is_the_same_run(monkeypatch):
    """Runs cut into chunks of 7 ticks (and a last short one) give the same curve, batched or
    looped, as in one chunk; the first-available-arm agent's curve is the running mean of its
    expected rewards along the episode's contexts, computed here tick by tick."""
    kw = dict(start=3, n_runs=3, rng=5)
    whole = online_value(DYN, Twin, 20, method="loop", **kw)
    monkeypatch.setattr(_truth, "_CHUNK_TICKS", 7)
    for method in ("loop", "batched"):
        np.testing.assert_array_equal(online_value(DYN, Twin, 20, method=method, **kw).curve,
                                      whole.curve)
    runs = []
    for child in np.random.default_rng(5).spawn(3):
        key = B.episode_key(child.spawn(2)[0])
        p = [float(B.true_ctr(DYN, B.contexts(DYN, key, np.array([t])), np.array([t]))[
            0, np.argmax(B.alive(DYN, t))]) for t in range(3, 23)]
        runs.append([sum(p[:t]) / t for t in range(1, 21)])
    np.testing.assert_allclose(whole.curve, np.mean(runs, axis=0), rtol=1e-13, atol=0)


def test_online_results_are_read_only_and_progress_is_shown_only_when_asked(capsys):
    v = online_value(DYN, Twin, 4, n_runs=2, rng=0)
    for arr in (v.curve, v.curve_stderr):
        with pytest.raises(ValueError, match="read-only"):
            arr[0] = 1.0
    assert capsys.readouterr().err == ""
    online_value(DYN, Twin, 4, n_runs=2, rng=0, progress=True)
    assert "online_value" in capsys.readouterr().err


def test_one_run_warns_at_the_callers_line_with_the_exact_message():
    with pytest.warns(_truth.DegenerateTruthWarning,
                      match=r"^`n_runs` == 1: standard errors are nan\.$") as got:
        online_value(DYN, Twin, 2, n_runs=1, rng=0)
    # under mutmut every function is called through its trampoline (docs/testing.md)
    assert got[0].filename == __file__ or "mutmut" in got[0].filename, got[0].filename


def test_the_runs_are_cut_into_the_documented_parts_and_sent_to_the_executor(monkeypatch):
    """n_partitions' defaults (docs of online_value): 1 part here when batched, else 8; on a
    cluster one per worker thread when batched, else four per thread. A stand-in client
    with 3 threads checks the wiring; the parts run here, giving the same numbers."""
    calls = []
    real = _truth.run_partitions

    def recorded(fn, parts, *, shared, executor, progress, desc):
        calls.append((len(parts), executor, progress, desc))
        return real(fn, parts, shared=shared)

    client = object()
    monkeypatch.setattr(_truth, "run_partitions", recorded)
    monkeypatch.setattr(_truth, "check_executor", lambda ex: ex)
    monkeypatch.setattr(_truth, "executor_threads", lambda ex: 3 if ex is client else None)
    here = online_value(DYN, Other, 3, n_runs=13, rng=2)
    assert here.n_runs == 13
    for kw, parts in [(dict(method="batched"), 1), (dict(method="loop"), 8),
                      (dict(method="batched", executor=client), 3),
                      (dict(method="loop", executor=client), 12),
                      (dict(method="loop", n_partitions=1), 1),
                      (dict(method="batched", n_partitions=5, executor=client), 5)]:
        calls.clear()
        v = online_value(DYN, Twin, 3, n_runs=13, rng=2, **kw)
        assert calls == [(parts, kw.get("executor"), False, "online_value")], kw
        np.testing.assert_array_equal(v.curve, here.curve)
    calls.clear()
    assert online_value(DYN, Twin, 2, rng=0).n_runs == 200  # the default
    assert calls == [(1, None, False, "online_value")]
