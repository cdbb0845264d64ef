"""``select_by_twin`` (issue 33 s2): what mutation testing of ``evaluators/_twin.py`` found
unpinned by ``test_twin.py``, each stated as a property against an independent
computation (the twins written out by hand in ``test_twin.py``)."""

import functools
import math

import numpy as np
import pytest

from evaluators import dr_os, ips, select_by_twin
from tests.evaluators.test_twin import on_log, reference_twin_errors, small_log


def ips_value(log, action_dist):
    """IPS's value alone, a float: a user's candidate without a standard error."""
    return float(ips(log, action_dist).value)


CANDS = [("ips", ips), ("dr_os(lambda_=10)", functools.partial(dr_os, lambda_=10.0))]


@pytest.fixture(scope="module")
def problem():
    """A 60-record log, a target, and the twins of IPS and DR-OS written out by hand (IPS's
    column is also the float candidate's: the same value on every twin)."""
    log = small_log(5, n=60)
    pi = np.random.default_rng(6).dirichlet(np.ones(3), size=(60, 1)).transpose(0, 2, 1)
    R, seed = 5, 13
    return log, pi, R, seed, reference_twin_errors(log, pi, CANDS, R, seed), \
        on_log(log, pi, CANDS, seed)


@pytest.mark.parametrize("bias", ["auto", "log"])
def test_a_candidate_without_a_standard_error_takes_the_twins_variance_with_ddof_1(problem,
                                                                                  bias):
    """A candidate that returns a float has no standard error on the log: its variance is
    the twins' variance of its errors, with ``ddof=1`` (5 twins: ``ddof=0`` is 20% lower).
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
