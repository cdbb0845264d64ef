"""Seed helpers shared by the experiments: one root ``SeedSequence``, children keyed by identity.

Every draw of an experiment comes from a child of the root keyed by what it is for (log index,
agent name, tick, variant), never by the order of computation, so that adding an agent, a log
or a recommender leaves the others' numbers unchanged.
"""

from __future__ import annotations

import math
import numbers
import zlib
from typing import Mapping, Sequence

import numpy as np


def seed_sequence(rng) -> np.random.SeedSequence:
    """The root ``SeedSequence`` of an experiment's ``rng`` (None, int, SeedSequence, Generator)
    -- :func:`recloop_base.validation.as_seed_sequence`."""
    from recloop_base.validation import as_seed_sequence

    return as_seed_sequence(rng)


def child_seed(root: np.random.SeedSequence, *key: int) -> np.random.SeedSequence:
    """The child of ``root`` at spawn key ``root.spawn_key + key``."""
    return np.random.SeedSequence(root.entropy, spawn_key=tuple(root.spawn_key) + tuple(key),
                                  pool_size=root.pool_size)


def child_rng(root: np.random.SeedSequence, *key: int) -> np.random.Generator:
    """A Generator on :func:`child_seed` ``(root, *key)``."""
    return np.random.default_rng(child_seed(root, *key))


def name_key(name: str) -> int:
    """A stable integer key for a name (CRC-32 of its UTF-8 bytes)."""
    return zlib.crc32(name.encode("utf-8"))


def estimator_table(estimators, builtins, *, what: str = "evaluator") -> dict:
    """``{name: callable or None}`` from an experiment's ``estimators`` argument.

    Accepted: a sequence whose items are built-in names (``None`` in the table: the
    experiment runs them its own way) or ``(name, callable)`` pairs, or a mapping
    ``name -> callable``. Names must be distinct, non-empty strings.
    """
    if isinstance(estimators, Mapping):
        items = list(estimators.items())
    elif isinstance(estimators, (str, bytes)) or not isinstance(estimators, Sequence):
        raise TypeError(f"`estimators` must be a sequence of names or (name, {what}) pairs, "
                        f"or a mapping name -> {what}; got {type(estimators).__name__}.")
    else:
        items = []
        for j, e in enumerate(estimators):
            if isinstance(e, str):
                if e not in builtins:
                    raise ValueError(f"`estimators[{j}]` must be one of "
                                     f"{', '.join(map(repr, builtins))} or a (name, {what}) "
                                     f"pair; got {e!r}.")
                items.append((e, None))
            elif isinstance(e, tuple) and len(e) == 2:
                items.append(e)
            else:
                raise TypeError(f"`estimators[{j}]` must be a name or a (name, {what}) pair; "
                                f"got {type(e).__name__}.")
    if not items:
        raise ValueError(f"`estimators` must name at least one {what}; got none.")
    table: dict = {}
    for name, f in items:
        if not isinstance(name, str) or not name:
            raise TypeError(f"`estimators` names must be non-empty strings; got {name!r}.")
        if f is not None and not callable(f):
            raise TypeError(f"`estimators[{name!r}]` must be callable; got "
                            f"{type(f).__name__}.")
        if name in table:
            raise ValueError(f"`estimators` must not repeat a name; got {name!r} twice.")
        table[name] = f
    return table


def as_estimate(result, who: str):
    """An ``evaluators.Estimate`` from what an estimator returned (an Estimate, or a real
    number: then without interval); ``TypeError`` naming ``who`` otherwise."""
    import evaluators

    if isinstance(result, evaluators.Estimate):
        return result
    value = getattr(result, "value", result)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.floating)):
        raise TypeError(f"{who} must return an Estimate or a real number; got "
                        f"{type(result).__name__}.")
    nan = math.nan
    return evaluators.Estimate(float(value), float(getattr(result, "stderr", nan)),
                               float(getattr(result, "ci_low", nan)),
                               float(getattr(result, "ci_high", nan)),
                               int(getattr(result, "n", 1) or 1))


def ab_evaluator(config, n_users: int, *, split: float = 0.5):
    """A learning-policy "evaluator" that runs an online A/B test instead of reading the
    log: the agent (treatment, B) against uniform random (control, A) on ``n_users`` fresh
    users of ``config``'s world; its value is the agent's mean reward over the users it got
    (``n``: how many), the online yardstick beside the offline estimators."""
    def ab_test(log, make_agent, *, rng):
        import agents
        import evaluators
        import simulator

        control_rng, agent_rng, test_rng = rng.spawn(3)
        control = agents.UniformRandom()
        control.reset(control_rng)
        result = evaluators.ab_test(simulator.LinearBanditEnv(config), control,
                                    make_agent(agent_rng), n_steps=n_users, split=split,
                                    rng=test_rng)
        return result.b

    return ab_test


def emit_per_log(per_log, estimates, truth, *, evaluation: str, agent: str, variant: str,
                 params, metric: str = "value", logs=None) -> None:
    """Send each log's estimate to ``per_log`` as a ``Measurement`` with its ``log`` index
    (nothing when ``per_log`` is ``None``): the per-log estimates every summary of a run
    is computed from (:func:`recloop.summarize`).

    ``estimates[j]`` is an ``evaluators.Estimate``, a float, or ``None`` (no estimate:
    recorded as ``nan``); ``truth`` one float or one per estimate (``nan``: none);
    ``logs`` the log index of each estimate (default ``0, 1, ...``).
    """
    if per_log is None:
        return
    from recloop._results import Measurement

    nan = math.nan
    truths = np.broadcast_to(np.asarray(truth, dtype=np.float64), (len(estimates),))
    for j, est in enumerate(estimates):
        if est is None:
            est = nan
        value = getattr(est, "value", est)
        per_log(Measurement(evaluation=evaluation, agent=agent, variant=variant, metric=metric,
                            estimate=float(value), stderr=float(getattr(est, "stderr", nan)),
                            ci_low=float(getattr(est, "ci_low", nan)),
                            ci_high=float(getattr(est, "ci_high", nan)),
                            truth=float(truths[j]), n=getattr(est, "n", None),
                            params=params, log=j if logs is None else logs[j]))


def bound_arguments(function, *args, drop=("progress", "per_log"), **kwargs) -> dict:
    """The arguments of ``function(*args, **kwargs)`` by name with its defaults filled in
    (their one home: the function's signature), without ``drop``: what a chunk's set-up
    receives from a cell's parameters."""
    import inspect

    bound = inspect.signature(function).bind(*args, **kwargs)
    bound.apply_defaults()
    return {k: v for k, v in bound.arguments.items() if k not in drop}


def same_header(parts) -> dict:
    """The header shared by a chunked cell's parts ``(header, per-log values)`` -- what
    every chunk computes before its logs (policies' truth, variants, settings) -- checked
    equal in every chunk: a chunk that disagrees means a computation that depends on more
    than the cell's seed (e.g. a user's agent with hidden state), and its cell fails rather
    than mix two answers."""
    header = parts[0][0]
    for k, (other, _) in enumerate(parts[1:], 1):
        if repr(other) != repr(header):
            raise RuntimeError(f"chunk {k} of the cell computed another header than chunk 0 "
                               f"(the same seed must give the same truth and settings): "
                               f"{other!r} != {header!r}")
    return header


#: Seconds per unit of work of the bandit OPE kinds' cost estimates -- records x (arms +
#: context features) x targets x estimator calls of a log: 43 ms for a log of 10,000 records
#: of ``bred_linear`` (10 arms, 10 features), 3 targets and 7 estimators on one idle core
#: (docs/performance.md's ``harness`` row); ``estimator_selection``'s candidates cost 0.6 (IPS)
#: to 1.1 (DR) times as much per unit at 10,000 records, but small logs have a fixed cost per
#: call that this ignores (2-8x more than estimated at 500 records, 20 twins) and many arms
#: cost less than their share (100 arms: overestimated). Good enough to cut cells: a plan
#: never changes a number.
SECONDS_PER_RECORD_CALL = 1e-8
