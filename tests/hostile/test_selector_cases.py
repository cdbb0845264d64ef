"""Estimator selectors against candidates that write, lie, hang or exit (issue 36, item 6):
every selector runs a user's candidate behind the guards of the harness's plugins."""

import functools
import math
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

from evaluators import (
    ImplausibleEstimateWarning,
    ips,
    select_by_cv,
    select_by_pasif,
    select_by_slope,
    select_by_twin,
    snips,
)
from recloop_base.guard import UserCodeError
from simulator.logs import BanditLog

SELECTORS = {
    "twin": functools.partial(select_by_twin, n_twins=3),
    "cv": functools.partial(select_by_cv, n_splits=3),
    "pasif": functools.partial(select_by_pasif, n_subsamples=3),
    "slope": select_by_slope,
}


def small_log(n=120, K=3, seed=0):
    g = np.random.default_rng(seed)
    pi_b = g.dirichlet(np.ones(K) * 3, size=n)
    a = (np.cumsum(pi_b, axis=1) <= g.random(n)[:, None]).sum(axis=1)
    r = (g.random(n) < 0.25).astype(float)
    return BanditLog(context=g.normal(size=(n, 2)), action=a, reward=r,
                     pscore=pi_b[np.arange(n), a], n_actions=K, pi_b=pi_b)


LOG = small_log()
PI = np.tile([0.6, 0.3, 0.1], (LOG.n_rounds, 1))


def writer(log, action_dist):
    """Writes 1.0 into the rewards it was given, through the array's ``.base``."""
    base = log.reward.base
    arr = base if isinstance(base, np.ndarray) else np.asarray(base)
    if not arr.flags.writeable:
        arr.setflags(write=True)
    arr[:] = 1.0
    return ips(log, action_dist)


def fortytwo(log, action_dist):
    return 42.0


def inverted(log, action_dist):
    e = ips(log, action_dist)
    return type(e)(e.value, e.stderr, e.value + 0.3, e.value - 0.3, e.n)


def nan_estimator(log, action_dist):
    return math.nan


def sleeper(log, action_dist):
    time.sleep(30)
    return 0.5


def exiter(log, action_dist):
    sys.exit(3)


@pytest.mark.parametrize("name", SELECTORS)
def test_a_candidate_writing_through_base_leaves_the_callers_log_and_stops_the_selection(name):
    before = {f: getattr(LOG, f).copy() for f in ("reward", "action", "pscore", "context")}
    pi = PI.copy()
    with pytest.raises(UserCodeError, match=r"candidate 'writer' on .* changed the log"):
        SELECTORS[name](LOG, pi, candidates=[ips, writer], rng=0)
    for f, v in before.items():  # 0.937 against 0.236 before the guard
        assert np.array_equal(getattr(LOG, f), v), f
    assert np.array_equal(pi, PI)


@pytest.mark.parametrize("bad", [fortytwo, inverted], ids=["42-on-a-0-1-log", "interval-0.5-0.1"])
@pytest.mark.parametrize("name", SELECTORS)
def test_an_impossible_estimate_is_refused_as_nan_with_a_named_warning(name, bad):
    with pytest.warns(ImplausibleEstimateWarning, match=rf"candidate '{bad.__name__}' "
                      r"returned an? (estimate 42.0 that no weighted mean|inverted interval)"):
        got = SELECTORS[name](LOG, PI, candidates=[ips, snips, bad], rng=0)
    assert got.selected != bad.__name__
    assert math.isnan(got.scores()[bad.__name__].estimate.value)


@pytest.mark.parametrize("name", SELECTORS)
def test_all_nan_candidates_are_a_clear_error(name):
    def also_nan(log, action_dist):
        return float("nan")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=r"every candidate gave nan .*nan_estimator, "
                           r"also_nan"):
            SELECTORS[name](LOG, PI, candidates=[nan_estimator, also_nan], rng=0)


@pytest.mark.parametrize("name", SELECTORS)
def test_a_candidate_past_its_time_limit_stops_the_selection_naming_it(name):
    t0 = time.monotonic()
    with pytest.raises(UserCodeError, match=r"candidate 'sleeper' on .* did not return "
                       r"within 0.5 s"):
        SELECTORS[name](LOG, PI, candidates=[ips, sleeper], rng=0, timeout=0.5)
    assert time.monotonic() - t0 < 20


@pytest.mark.parametrize("name", SELECTORS)
def test_sys_exit_in_a_candidate_does_not_end_the_caller(name):
    with pytest.raises(UserCodeError, match=r"candidate 'exiter' on .* called sys.exit\(3\)"):
        SELECTORS[name](LOG, PI, candidates=[ips, exiter], rng=0)


@pytest.mark.parametrize("name", SELECTORS)
def test_os_exit_in_a_candidate_does_not_end_the_caller(name):
    code = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(__import__('pathlib').Path(__file__).parents[2])!r})
        from tests.hostile.test_selector_cases import SELECTORS, LOG, PI
        from evaluators import ips
        from recloop_base.guard import UserCodeError

        def os_exiter(log, action_dist):
            os._exit(7)

        try:
            SELECTORS[{name!r}](LOG, PI, candidates=[ips, os_exiter], rng=0)
        except UserCodeError as exc:
            print("refused:", exc)
        print("the caller goes on")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "refused: candidate 'os_exiter' on" in out.stdout
    assert "called os._exit(7)" in out.stdout and "the caller goes on" in out.stdout
