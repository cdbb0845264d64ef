"""Survivors of ``evaluators/_ope.py``'s first mutation run (docs/testing.md): the no-support
``nan`` of IPS and SNIPS (its record count, level, name and warning) and the refusal of an
``action_dist`` naming its first bad record."""

import math
import re

import numpy as np
import pytest

import evaluators
from simulator.logs import BanditLog

N, K = 5, 3


def _log():
    g = np.random.default_rng(0)
    return BanditLog(context=g.normal(size=(N, 2)), action=np.zeros(N, dtype=int),
                     reward=g.random(N), pscore=np.full(N, 0.5), n_actions=K)


@pytest.mark.parametrize("name", ["ips", "snips"])
def test_no_support_is_a_nan_naming_the_estimator_with_the_records_and_level(name):
    never_logged = np.zeros((N, K))
    never_logged[:, 1] = 1.0  # the logs only ever show action 0
    with pytest.warns(evaluators.NoSupportWarning) as caught:
        est = getattr(evaluators, name)(_log(), never_logged, ci=0.9)
    assert [str(w.message) for w in caught] == [
        f"{name}: every importance weight is 0 (the target policy never takes a logged "
        "action); returning nan."]
    assert math.isnan(est.value) and math.isnan(est.stderr)
    assert (est.n, est.level, est.ess, est.estimator) == (N, 0.9, 0.0, name)


def test_an_action_dist_is_refused_at_its_first_bad_record():
    uniform = np.full((N, K), 1 / K)
    bad = uniform.copy()
    bad[3, 1] = np.nan  # records 0-2 are finite: the message must name 3, not 0
    with pytest.raises(ValueError, match=re.escape(
            "`action_dist` must be finite; got nan or inf at record 3.")):
        evaluators.ips(_log(), bad)
    bad = uniform.copy()
    bad[2] = [0.5, 0.5, 0.5]
    with pytest.raises(ValueError, match=re.escape(
            "`action_dist` rows must sum to 1; got 1.5 at record 2.")):
        evaluators.ips(_log(), bad)
