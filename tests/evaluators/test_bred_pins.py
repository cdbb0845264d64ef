"""BRED (issue 33): every number of a ``BredEstimate`` against an independent computation.

The docstring fixes BRED's randomness: ``rng`` is converted once and spawns B children; child
i spawns two streams, the first for replicate i's resampling indices (``round(expansion *
T)`` draws in ``[0, T)``) then its jitter (float32 standard normals, chunks of 4,096
records), the second for its agent. For a static policy the replicates are then computed
here by hand: the resample, the jittered contexts, the policy's choices, the matches and
their mean reward (each source record once with ``reveal="once"``), and the summary over
replicates (mean, standard deviation, percentile interval by linear interpolation).
"""

from __future__ import annotations

import math
import statistics
import warnings

import numpy as np
import pytest

from evaluators import NoMatchWarning, bred
from evaluators._bred import _CHUNK
from tests.evaluators.test_replay import StaticPolicy, make_log, make_world


def quantile(xs, q):
    """Linear interpolation between order statistics at (n - 1) q (numpy's default)."""
    xs = sorted(xs)
    h = (len(xs) - 1) * q
    lo = math.floor(h)
    return xs[lo] + (h - lo) * (xs[min(lo + 1, len(xs) - 1)] - xs[lo])


def replicates_by_hand(log, policy, B, rng, *, expansion, h, once):
    """(value, matches) of each replicate of a static policy, from the documented streams."""
    T = log.n_rounds
    n = max(1, int(round(expansion * T)))
    out = []
    for child in np.random.default_rng(rng).spawn(B):
        data = child.spawn(2)[0]
        idx = data.integers(0, T, size=n)
        noise = np.zeros((n, log.context.shape[1]))
        if np.any(h > 0):
            noise = np.concatenate([data.standard_normal((min(_CHUNK, n - s),
                                                          log.context.shape[1]),
                                                         dtype=np.float32)
                                    for s in range(0, n, _CHUNK)]).astype(np.float64)
        avail = log.available_mask()
        chosen = np.array([policy.choose(log.context[r] + noise[j] * h, avail[r])
                           for j, r in enumerate(idx)])
        hit = chosen == log.action[idx]
        if once:
            records = np.unique(idx[hit])
            total, count = float(log.reward[records].sum()), records.size
        else:
            total, count = float(log.reward[idx][hit].sum()), int(hit.sum())
        out.append((total / count if count else math.nan, count))
    return out


@pytest.mark.parametrize("reveal", ["every", "once"])
@pytest.mark.parametrize("jitter, expansion, B, ci", [
    pytest.param(0.0, None, 30, 0.9, id="no-jitter"),
    pytest.param(0.4, 2.5, 25, 0.95, id="jitter"),
    pytest.param("auto", 18.0, 6, 0.8, id="auto-chunks"),  # 5,400 records: two chunks
])
def test_every_number_from_the_replicates_by_hand(reveal, jitter, expansion, B, ci):
    world = make_world(3)
    log, _ = make_log(world, 300, 4)
    policy = StaticPolicy(np.random.default_rng(5).normal(size=(4, 3)))
    est = bred(log, lambda g: policy, n_bootstrap=B, expansion=expansion, jitter=jitter,
               ci=ci, reveal=reveal, rng=9)
    h = est.bandwidth
    if jitter == "auto":
        np.testing.assert_allclose(h, log.context.std(axis=0) / math.sqrt(300), rtol=1e-12)
    else:
        assert np.all(h == jitter)
    reps = replicates_by_hand(log, policy, B, 9, expansion=est.expansion, h=h,
                              once=reveal == "once")
    values = [v for v, _ in reps]
    np.testing.assert_allclose(est.replicate_values, values, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(est.replicate_matches, [c for _, c in reps])
    assert est.expansion == (4.0 if expansion is None else expansion)
    assert est.mean_matches == pytest.approx(statistics.fmean(c for _, c in reps), rel=1e-12)
    assert est.n == B and est.level == ci and est.reveal == reveal
    close = dict(rel=1e-12, abs=1e-15)
    assert est.value == pytest.approx(statistics.fmean(values), **close)
    assert est.stderr == pytest.approx(statistics.stdev(values), **close)
    assert (est.ci_low, est.ci_high) == pytest.approx(
        (quantile(values, (1 - ci) / 2), quantile(values, (1 + ci) / 2)), **close)


def test_replicates_without_a_match_are_left_out_by_name():
    """A policy matching only the one record with action 0: replicates that never resample it
    are nan, counted out of ``n`` and of the summary, with the warning word for word."""
    world = make_world(6)
    log, _ = make_log(world, 12, 7)
    keep = np.r_[np.flatnonzero(log.action == 0)[:1], np.flatnonzero(log.action != 0)]
    log = log.take(keep)

    class Zero:
        def act(self, observation):
            return 0

        def update(self, observation, action, reward):
            pass

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = bred(log, lambda g: Zero(), n_bootstrap=40, expansion=0.1, jitter=0.0, rng=2)
    v = est.replicate_values
    empty = int(np.isnan(v).sum())
    assert 0 < empty < 40 and est.n == 40 - empty
    assert [str(w.message) for w in caught] == [
        f"{empty} of 40 BRED replicates matched no record and were left out."]
    assert caught[0].category is NoMatchWarning
    assert caught[0].filename == __file__ or "mutmut" in caught[0].filename  # trampoline
    assert est.value == pytest.approx(statistics.fmean(v[~np.isnan(v)]), rel=1e-12)
    assert est.stderr == pytest.approx(statistics.stdev(v[~np.isnan(v)]), rel=1e-12)
    # the matches count the records that were drawn and matched, replicate by replicate
    np.testing.assert_array_equal(np.isnan(v), est.replicate_matches == 0)


def test_one_replicate_has_no_spread_and_the_seed_matters():
    world = make_world(8)
    log, _ = make_log(world, 100, 9)
    policy = StaticPolicy(np.random.default_rng(1).normal(size=(4, 3)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy warning from a spread of one value
        one = bred(log, lambda g: policy, n_bootstrap=1, rng=4)
    assert one.n == 1 and math.isnan(one.stderr)
    assert one.value == one.ci_low == one.ci_high == one.replicate_values[0]
    a = bred(log, lambda g: policy, n_bootstrap=5, rng=4)
    b = bred(log, lambda g: policy, n_bootstrap=5, rng=4)
    c = bred(log, lambda g: policy, n_bootstrap=5, rng=5)
    assert a.replicate_values.tobytes() == b.replicate_values.tobytes()
    assert not np.array_equal(a.replicate_values, c.replicate_values)


@pytest.mark.parametrize("batched", [False, True])
def test_a_part_gives_up_once_another_part_failed(batched):
    """The stop event (set when another part of the replicates failed, or on an interrupt):
    a part checks it before each replicate (plain) or chunk of records (batched twins) and
    gives up with its own message instead of computing on."""
    import threading

    import agents
    from evaluators import _bred

    world = make_world(2)
    log, _ = make_log(world, 60, 3)
    arrays = (log.context, log.available_mask(), log.action, log.reward)
    gens = [np.random.default_rng(s) for s in range(3)]
    h = np.zeros(log.context.shape[1])
    stop = threading.Event()
    stop.set()
    ucb = []
    for g in range(3):
        a = agents.UCB1()
        a.reset(g)
        ucb.append(a)
    with pytest.raises(RuntimeError) as e:
        if batched:
            index = np.zeros((3, 10), dtype=np.int64)
            _bred._run_batched(arrays, type(ucb[0]).batch(ucb), index, gens, h, False, stop)
        else:
            _bred._run_plain(arrays, ucb, gens, 10, h, False, stop)
    assert str(e.value) == "stopped: another part of the replicates failed"
    # not set: the part runs
    fresh = threading.Event()
    out = _bred._run_plain(arrays, ucb, gens, 10, h, False, fresh)
    assert len(out[0]) == 3


def _slow(single, twin):
    """``single``'s subclass whose batched twin has no compiled replay (``replay_arrays =
    None`` opts out of the fast path): BRED steps the twin in Python, chunk by chunk."""
    slow_twin = type("Slow" + twin.__name__, (twin,), {"replay_arrays": None})

    def batch(cls, singles):
        return slow_twin(singles)

    return type("Slow" + single.__name__, (single,), {"batch": classmethod(batch)})


@pytest.mark.parametrize("reveal", ["every", "once"])
@pytest.mark.parametrize("jitter", [0.0, 0.3])
@pytest.mark.parametrize("name", ["UCB1", "LinUCB"])
def test_a_twin_without_compiled_replay_steps_in_python_with_the_same_numbers(name, reveal,
                                                                               jitter):
    """Batched twins whose replay is not compiled run BRED's Python loop over chunks of
    records (jittered contexts, reveal once); their replicates equal those of the agents'
    compiled twins, bit for bit."""
    import agents
    from recloop_base.fast_paths import fast_path

    single, twin = getattr(agents, name), getattr(agents, "Batched" + name)
    slow_cls = _slow(single, twin)
    world = make_world(7)
    log, _ = make_log(world, 150, 8)

    def make(cls):
        def f(g):
            a = cls(1.0)
            a.reset(g)
            return a
        return f

    probe = [make(slow_cls)(np.random.default_rng(0))]
    assert fast_path(probe[0], "batch") is not None
    assert fast_path(slow_cls.batch(probe), "replay_arrays") is None
    slow = bred(log, make(slow_cls), n_bootstrap=4, jitter=jitter, reveal=reveal, rng=3)
    fast = bred(log, make(single), n_bootstrap=4, jitter=jitter, reveal=reveal, rng=3)
    np.testing.assert_array_equal(slow.replicate_values, fast.replicate_values)
    np.testing.assert_array_equal(slow.replicate_matches, fast.replicate_matches)


def test_a_bandwidth_given_as_integers_is_reported_as_floats():
    world = make_world(4)
    log, _ = make_log(world, 50, 2)
    policy = StaticPolicy(np.random.default_rng(2).normal(size=(4, 3)))
    est = bred(log, lambda g: policy, n_bootstrap=2, jitter=[0, 1, 0], rng=1)
    assert est.bandwidth.dtype == np.float64
    np.testing.assert_array_equal(est.bandwidth, [0.0, 1.0, 0.0])


# -- the public function's refusals word for word and its plumbing --------------------------------
class _ActOnly:
    def act(self, observation):
        return 0


@pytest.mark.parametrize("kwargs, exc, message", [
    pytest.param({"make_agent": 3}, TypeError,
                 "`make_agent` must be callable (Generator -> agent); got int.", id="make"),
    pytest.param({"make_agent": lambda g: object()}, TypeError,
                 "`make_agent` must return a bandit agent (with `act` and `update`); got object "
                 "for replicate 0.", id="not-an-agent"),
    pytest.param({"make_agent": lambda g: _ActOnly()}, TypeError,
                 "`make_agent` must return a bandit agent (with `act` and `update`); got "
                 "_ActOnly for replicate 0.", id="no-update"),
    pytest.param({"n_bootstrap": 2.0}, TypeError, "`n_bootstrap` must be an int; got float.",
                 id="n_bootstrap"),
    pytest.param({"expansion": "2"}, TypeError, "`expansion` must be a float > 0; got str.",
                 id="expansion-str"),
    pytest.param({"expansion": True}, TypeError, "`expansion` must be a float > 0; got bool.",
                 id="expansion-bool"),
    pytest.param({"jitter": True}, TypeError,
                 "`jitter` must be \"auto\", a float >= 0 or one float >= 0 per context feature; "
                 "got bool.", id="jitter-bool"),
    pytest.param({"jitter": [0.1, -0.1, 0.0]}, ValueError,
                 "`jitter` must be \"auto\", a float >= 0 or one float >= 0 per context feature "
                 "(3 here); got [0.1, -0.1, 0.0].", id="jitter-negative"),
])
def test_refusals_word_for_word(kwargs, exc, message):
    log, _ = make_log(make_world(1), 40, 1)
    policy = StaticPolicy(np.eye(4, 3))
    args = dict(make_agent=lambda g: policy, n_bootstrap=2, rng=0)
    args.update(kwargs)
    with pytest.raises(exc) as e:
        bred(log, args.pop("make_agent"), **args)
    assert str(e.value) == message


def test_a_non_uniform_log_is_refused_by_name():
    log, _ = make_log(make_world(1), 40, 1, kind="nonuniform")
    with pytest.raises(ValueError) as e:
        bred(log, lambda g: StaticPolicy(np.eye(4, 3)), n_bootstrap=2, rng=0)
    assert str(e.value).startswith("`bred` requires uniform logging propensities")


def test_the_replicates_run_on_their_partitions(monkeypatch, capsys):
    """The parts of the replicates: one per thread for agents with a compiled twin, four per
    thread otherwise (here or per worker thread of an executor), ``n_partitions`` when
    given; the stop event locally, none on a cluster; the progress bar labelled "bred"."""
    import threading

    import agents
    from evaluators import _bred
    from recloop_base.threads import n_threads

    calls = []
    real = _bred.run_partitions

    def spy(fn, parts, **kw):
        calls.append((len(parts), kw["executor"], kw["progress"], kw["stop"], kw["threads"]))
        return real(fn, parts, **dict(kw, executor=None))

    monkeypatch.setattr(_bred, "run_partitions", spy)
    log, _ = make_log(make_world(5), 80, 5)

    def ucb(g):
        a = agents.UCB1()
        a.reset(g)
        return a

    policy = StaticPolicy(np.eye(4, 3))
    base = bred(log, ucb, n_bootstrap=8, rng=2)
    parts, executor, progress, stop, threads = calls[-1]
    assert (parts, executor, progress, threads) == (n_threads(), None, False, n_threads())
    assert isinstance(stop, threading.Event) and capsys.readouterr().err == ""
    bred(log, lambda g: policy, n_bootstrap=8, rng=2)  # no twin: four parts a thread, one
    assert calls[-1][0] == 4 and calls[-1][4] == 1     # thread (the walk holds the GIL)
    three = bred(log, ucb, n_bootstrap=8, rng=2, n_partitions=3, progress=True)
    assert calls[-1][:3] == (3, None, True) and "\rbred: " in capsys.readouterr().err
    np.testing.assert_array_equal(three.replicate_values, base.replicate_values)
    stand_in = object()
    monkeypatch.setattr(_bred, "check_executor", lambda e: e)
    monkeypatch.setattr(_bred, "executor_threads", lambda e: 3 if e is stand_in else 0)
    there = bred(log, ucb, n_bootstrap=8, rng=2, executor=stand_in)
    assert calls[-1][:4] == (3, stand_in, False, None)  # one part per worker thread
    np.testing.assert_array_equal(there.replicate_values, base.replicate_values)
    bred(log, lambda g: policy, n_bootstrap=16, rng=2, executor=stand_in)
    assert calls[-1][0] == 12  # four per worker thread


def test_defaults_floors_and_degenerate_replicates():
    """100 replicates by default; at least one record per resample (a tiny expansion);
    no warning when every replicate matched; two replicates: their standard deviation;
    none matched: nan and the warning word for word; read-only arrays."""
    import warnings

    world = make_world(9)
    log, _ = make_log(world, 40, 9)
    policy = StaticPolicy(np.random.default_rng(3).normal(size=(4, 3)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = bred(log, lambda g: policy, rng=0)  # matches in every replicate: no warning
    assert est.replicate_values.size == 100 and est.n == 100
    for a in (est.replicate_values, est.replicate_matches, est.bandwidth):
        assert not a.flags.writeable
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoMatchWarning)
        one = bred(log, lambda g: policy, n_bootstrap=30, expansion=1e-6, jitter=0.0, rng=1)
    assert set(one.replicate_matches.tolist()) <= {0, 1} and one.replicate_matches.max() == 1
    two = bred(log, lambda g: policy, n_bootstrap=2, rng=4)
    v = two.replicate_values
    assert two.stderr == pytest.approx(abs(v[0] - v[1]) / math.sqrt(2), rel=1e-12)
    never = log.take(np.flatnonzero(log.action != 0))

    class Zero:
        def act(self, observation):
            return 0

        def update(self, observation, action, reward):
            pass

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        none = bred(never, lambda g: Zero(), n_bootstrap=3, rng=0)
    assert [str(w.message) for w in caught] == [
        "no BRED replicate matched any record (B=3); returning nan."]
    assert math.isnan(none.value) and math.isnan(none.stderr) and none.n == 0
    assert math.isnan(none.ci_low) and math.isnan(none.ci_high)
