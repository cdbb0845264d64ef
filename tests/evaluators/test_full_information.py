"""Full-information data as bandit feedback (issue 37 s3): Jester's users who rated every joke
of a set, and the multiclass protocol as its special case."""

import numpy as np
import pytest

from evaluators.datasets import (
    JESTER_JOKES,
    ClassifierPolicy,
    full_information_to_bandit,
    jester_full_information,
    multiclass_to_bandit,
)
from tests.builtin_data import write_small_jester

pytest.importorskip("sklearn")


def test_the_multiclass_protocol_is_full_information_with_one_hot_rewards():
    g = np.random.default_rng(0)
    X = g.normal(size=(300, 3))
    y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5)
    kw = dict(logging=ClassifierPolicy(alpha=0.3), target=[ClassifierPolicy(0.9),
                                                            ClassifierPolicy(0.4, C=0.1)])
    a = multiclass_to_bandit(X, y, **kw, rng=4)
    b = full_information_to_bandit(X, np.eye(3)[y], labels=y, **kw, rng=4)
    for f in ("context", "action", "reward", "pscore", "pi_b"):
        assert np.array_equal(getattr(a.log, f), getattr(b.log, f)), f
    assert np.array_equal(a.value, b.value) and np.array_equal(a.action_dist, b.action_dist)
    assert np.array_equal(a.rewards, np.eye(3)[y[a.eval_index]])
    # the value: every action's reward under the target, record by record
    for t in range(2):
        want = np.mean([sum(b.action_dist[t][j, k] * b.rewards[j, k] for k in range(3))
                        for j in range(b.log.n_rounds)])
        assert b.value[t] == pytest.approx(want, abs=1e-15)


def test_jester_keeps_the_users_who_rated_every_joke_of_the_set(tmp_path):
    path = write_small_jester(tmp_path / "j.csv", n_users=40, seed=3)
    got = jester_full_information(path, threshold=2.0)
    rows = [line.split(",") for line in path.read_text().splitlines()[1:]]
    by_user: dict = {}
    for u, j, r in rows:
        by_user.setdefault(int(u), {})[int(j)] = float(r)
    users = [u for u in sorted(by_user) if all(j in by_user[u] for j in JESTER_JOKES)]
    assert len(users) == 36 and got.X.shape == (36, 4)  # every tenth user skips a joke
    assert np.array_equal(got.action_ids, JESTER_JOKES[4:])
    for i, u in enumerate(users):
        assert got.X[i].tolist() == [by_user[u][j] / 10 for j in JESTER_JOKES[:4]]
        assert got.rewards[i].tolist() == [float(by_user[u][j] >= 2.0)
                                           for j in JESTER_JOKES[4:]]
        assert got.labels[i] == int(np.argmax([by_user[u][j] for j in JESTER_JOKES[4:]]))
    fewer = jester_full_information(path, jokes=(7, 8, 13, 15, 16), n_context=2)
    assert fewer.X.shape[1] == 2 and fewer.rewards.shape[1] == 3


@pytest.mark.parametrize("kw, msg", [
    pytest.param({"jokes": (7, 8)}, r"`jokes` must be at least 3 distinct joke ids",
                 id="two-jokes"),
    pytest.param({"jokes": (7, 8, 999), "n_context": 1}, r"`jokes` must be jokes of the "
                 r"data .*joke 999",
                 id="unknown-joke"),
    pytest.param({"n_context": 7}, r"`n_context` must be an int in \[1, 6\]",
                 id="no-actions-left"),
    pytest.param({"threshold": float("nan")}, r"`threshold`", id="threshold"),
])
def test_bad_jester_arguments_are_named(tmp_path, kw, msg):
    path = write_small_jester(tmp_path / "j.csv", n_users=20)
    with pytest.raises(ValueError, match=msg):
        jester_full_information(path, **kw)


@pytest.mark.parametrize("rewards, labels, exc, msg", [
    pytest.param(np.zeros((10, 1)), None, ValueError, r"`rewards` must be an array \(10, "
                 r"n_actions\) with n_actions >= 2", id="one-action"),
    pytest.param(np.full((10, 3), np.nan), None, ValueError, r"`rewards` must be finite; got "
                 r"nan at row 0, action 0", id="nan"),
    pytest.param(np.full((10, 3), "a"), None, TypeError, r"`rewards` must be a numeric "
                 r"array", id="strings"),
    pytest.param(np.zeros((10, 3)), np.full(10, 3), ValueError, r"`labels` must be 10 ints "
                 r"in \[0, 3\)", id="label-out-of-range"),
])
def test_bad_full_information_is_named(rewards, labels, exc, msg):
    with pytest.raises(exc, match=msg):
        full_information_to_bandit(np.zeros((10, 2)), rewards, labels=labels,
                                   logging=ClassifierPolicy(0.5),
                                   target=ClassifierPolicy(0.9), rng=0)
