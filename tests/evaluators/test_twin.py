"""``select_by_twin`` (issue 24 s4): the twins of a log written out record by record from the
documented streams, their exact values, the leaderboard and the winner; bad input."""

import functools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import evaluators
from evaluators import TwinSelection, doubly_robust, dr_os, ips, select_by_twin, snips
from simulator.logs import BanditLog


def small_log(seed, n=40, K=3, L=1, binary=True, logging="pi_b"):
    g = np.random.default_rng(seed)
    x = g.normal(size=(n, 2))
    pi_b = g.dirichlet(np.ones(K), size=n) if logging != "uniform" else np.full((n, K), 1 / K)
    a = np.array([g.choice(K, p=p) for p in pi_b])
    mean = 0.3 + 0.1 * x[:, 0] * (a == 0)
    r = (g.random(n) < mean).astype(float) if binary else mean + g.normal(0, 0.2, n)
    return BanditLog(context=x, action=a, reward=r, pscore=pi_b[np.arange(n), a], n_actions=K,
                     pi_b=pi_b if logging == "pi_b" else None,
                     position=g.integers(0, L, n) if L > 1 else None, len_list=L)


def reference_twin_errors(log, pi, candidates, n_twins, seed):
    """The twins written out one record at a time from the documented streams: the model's
    folds from the first child of the root, twin i's draws from the first child of child i
    of the second; rewards Bernoulli around the clipped cross-fitted ridge (Gaussian with the
    residuals' standard deviation when a reward is not 0/1); the twin's value the mean over
    its records of sum_a pi(a|x) mu(x, a)."""
    root = np.random.SeedSequence(seed)
    model_seq, twin_seqs = root.spawn(2)
    q = evaluators.fit_reward_model(log, "ridge", rng=np.random.default_rng(model_seq)).cross_fitted
    n, K = log.n_rounds, log.n_actions
    binary = all(r in (0.0, 1.0) for r in log.reward)
    mu = np.clip(q, 0, 1) if binary else q
    sigma = None if binary else float(np.std(log.reward - q[np.arange(n), log.action]))
    pos = log.position if log.position is not None else np.zeros(n, int)
    errors = []
    for seq in twin_seqs.spawn(n_twins):
        gen = np.random.default_rng(seq.spawn(2)[0])
        idx = gen.integers(0, n, n)
        u = gen.random(n)
        act, ps = [], []
        for j, i in enumerate(idx):
            probs = log.pi_b[i] if log.pi_b is not None else np.full(K, 1 / K)
            c, k = 0.0, 0
            for k in range(K):  # the first action whose cumulative probability passes u
                c += probs[k]
                if c > u[j]:
                    break
            act.append(k)
            ps.append(probs[k])
        act = np.array(act)
        noise = gen.random(n) if binary else gen.standard_normal(n)
        rew = np.array([float(noise[j] < mu[i, act[j]]) if binary else
                        mu[i, act[j]] + sigma * noise[j] for j, i in enumerate(idx)])
        twin = BanditLog(context=log.context[idx], action=act, reward=rew, pscore=np.array(ps),
                         n_actions=K, pi_b=None if log.pi_b is None else log.pi_b[idx],
                         position=None if log.position is None else log.position[idx],
                         len_list=log.len_list)
        truth = sum(sum(pi[i, k, pos[i]] * mu[i, k] for k in range(K)) for i in idx) / n
        errors.append([f(twin, pi[idx]).value - truth for _, f in candidates])
    return np.array(errors)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), L=st.sampled_from([1, 2]), binary=st.booleans(),
       logging=st.sampled_from(["pi_b", "uniform"]))
def test_the_leaderboard_is_the_rmse_on_twins_written_out_by_hand(seed, L, binary, logging):
    log = small_log(seed % 1000, L=L, binary=binary, logging=logging)
    g = np.random.default_rng(seed)
    pi = g.dirichlet(np.ones(3), size=(40, L)).transpose(0, 2, 1)
    cands = [("ips", ips), ("snips", snips), ("ips(clip=2)", functools.partial(ips, clip=2.0))]
    got = select_by_twin(log, pi, candidates=cands, n_twins=4, rng=seed)
    err = reference_twin_errors(log, pi, cands, 4, seed)
    board = {s.label: s for s in got.leaderboard}
    for c, (label, f) in enumerate(cands):
        assert board[label].rmse == pytest.approx(math.sqrt(np.mean(err[:, c] ** 2)), rel=1e-12)
        assert board[label].bias == pytest.approx(np.mean(err[:, c]), rel=1e-9, abs=1e-15)
        assert board[label].estimate == f(log, pi)
    assert [s.rmse for s in got.leaderboard] == sorted(s.rmse for s in got.leaderboard)
    assert got.selected == got.leaderboard[0].label
    assert got.value == got.leaderboard[0].estimate.value
    assert got.logging == logging and got.reward == ("bernoulli" if binary else "gaussian")


def test_model_based_candidates_share_one_model_per_twin_and_the_result_is_seeded():
    log = small_log(3, n=200)
    pi = np.random.default_rng(0).dirichlet(np.ones(3), size=200)
    a = select_by_twin(log, pi, n_twins=3, rng=7)
    assert isinstance(a, TwinSelection) and len(a.leaderboard) == 10
    assert a == select_by_twin(log, pi, n_twins=3, rng=np.random.SeedSequence(7))
    assert a.twin_values != select_by_twin(log, pi, n_twins=3, rng=8).twin_values
    # on the real log, the model-based candidates' estimates use one ridge model fitted on it
    m = evaluators.fit_reward_model(log, "ridge", rng=np.random.default_rng(
        np.random.SeedSequence(7).spawn(2)[0]))
    board = {s.label: s for s in a.leaderboard}
    assert board["doubly_robust"].estimate == doubly_robust(log, pi, model=m)
    assert board["dr_os(lambda_=10)"].estimate == dr_os(log, pi, model=m, lambda_=10.0)


class Broken:
    def fit(self, X, y):
        raise RuntimeError("singular")

    def predict(self, X):
        return np.zeros(len(X))


def failing(log, action_dist):
    raise RuntimeError("no")


@pytest.mark.parametrize("kw, exc, msg", [
    pytest.param({"model": Broken()}, ValueError, r"`model`: the reward model failed to fit on "
                 r"the log: RuntimeError: singular", id="model-fails"),
    pytest.param({"candidates": [ips, ("bad", failing)]}, ValueError,
                 r"`candidates`: 'bad' on twin 0 failed: RuntimeError: no", id="candidate-fails"),
    pytest.param({"candidates": [ips]}, ValueError, r"`candidates` must be at least 2 "
                 r"candidates", id="one-candidate"),
    pytest.param({"candidates": [ips, ips]}, ValueError, r"distinct labels.*'ips' twice",
                 id="same-label"),
    pytest.param({"candidates": [ips, 3]}, TypeError, r"`candidates\[1\]`", id="not-callable"),
    pytest.param({"candidates": "ips"}, TypeError, r"`candidates`", id="string"),
    pytest.param({"n_twins": 1}, ValueError, r"`n_twins`", id="one-twin"),
    pytest.param({"rng": -1}, (TypeError, ValueError), r"`rng`", id="rng"),
])
def test_bad_input_is_named(kw, exc, msg):
    log = small_log(0)
    with pytest.raises(exc, match=msg):
        select_by_twin(log, np.full((40, 3), 1 / 3), **{"n_twins": 2, **kw})


def test_an_action_dist_off_at_some_position_is_named():
    log = small_log(1, L=2)
    pi = np.full((40, 3, 2), 1 / 3)
    pi[7, 0, 1] = 0.9
    with pytest.raises(ValueError, match=r"record 7, position 1"):
        select_by_twin(log, pi, n_twins=2)
