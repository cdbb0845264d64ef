"""MIPS on a uniformly logged log with availability masks and no ``pi_b``: the logging
marginal is the uniform distribution over each record's available actions (a survivor of
the mutation run of evaluators/_mips.py: the masks were never exercised)."""

import numpy as np
import pytest

from evaluators import mips
from simulator.logs import BanditLog


def test_mips_with_masks_uses_the_uniform_marginal_over_the_available_actions():
    g = np.random.default_rng(3)
    n, K = 40, 5
    avail = g.random((n, K)) < 0.7
    avail[np.arange(n), g.integers(0, K, n)] = True  # at least one action each
    action = np.array([g.choice(np.flatnonzero(row)) for row in avail])
    pscore = 1.0 / avail.sum(axis=1)
    log = BanditLog(context=np.zeros((n, 1)), action=action, reward=g.random(n), pscore=pscore,
                    n_actions=K, available=avail)
    pi = g.random((n, K)) * avail
    pi /= pi.sum(axis=1, keepdims=True)
    E = np.array([0, 0, 1, 1, 2])
    # by hand: w_j = sum of pi over the logged action's embedding / the available share of it
    w = [sum(pi[j, b] for b in range(K) if E[b] == E[action[j]])
         / (sum(avail[j, b] for b in range(K) if E[b] == E[action[j]]) / avail[j].sum())
         for j in range(n)]
    est = mips(log, pi, action_embeddings=E)
    assert est.value == pytest.approx(np.mean(np.array(w) * log.reward), rel=1e-12)
    # the same log with one pscore off uniform is no uniform log: pi_b is then required
    bad = BanditLog(context=np.zeros((n, 1)), action=action, reward=log.reward,
                    pscore=np.r_[pscore[0] * 0.9, pscore[1:]], n_actions=K, available=avail)
    with pytest.raises(ValueError, match="`pi_b` must be"):
        mips(bad, pi, action_embeddings=E)
