import numpy as np
import pytest
from hypothesis import given, strategies as st

from simulator.logs import BanditLog, InteractionLog, LogFormatError


def _log(n=20, k=4, d=3, seed=0, **kw):
    rng = np.random.default_rng(seed)
    return BanditLog(
        context=rng.normal(size=(n, d)), action=rng.integers(0, k, n),
        reward=rng.binomial(1, 0.3, n).astype(float), pscore=np.full(n, 1 / k), n_actions=k, **kw,
    )


@given(n=st.integers(1, 30), k=st.integers(1, 6), d=st.integers(1, 4), seed=st.integers(0, 99))
def test_bandit_log_save_load_round_trip(tmp_path_factory, n, k, d, seed):
    log = _log(n, k, d, seed, tick=np.arange(n), metadata={"seed": seed, "config": "abc"})
    path = log.save(tmp_path_factory.mktemp("log") / "log")
    back = BanditLog.load(path)
    for name in ("context", "action", "reward", "pscore", "tick"):
        np.testing.assert_array_equal(getattr(back, name), getattr(log, name))
    assert back.n_actions == log.n_actions and back.available is None
    assert dict(back.metadata) == {"seed": seed, "config": "abc"}


def test_bandit_log_obp_round_trip():
    log = _log(available=np.ones((20, 4), bool))
    fb = log.to_obp()
    assert fb["n_rounds"] == 20 and fb["context"].shape == (20, 3)
    back = BanditLog.from_obp(fb)
    np.testing.assert_array_equal(back.action, log.action)
    np.testing.assert_array_equal(back.available, log.available)


def test_bandit_log_arrays_read_only():
    log = _log()
    with pytest.raises(ValueError):
        log.reward[0] = 5.0


@pytest.mark.parametrize(
    "change, match",
    [
        pytest.param({"pscore": np.r_[np.full(19, 0.25), 0.0]}, r"`pscore` must be in \(0, 1\]; got 0.0 at index 19", id="pscore-zero"),
        pytest.param({"action": np.r_[np.zeros(19, int), 4]}, r"`action` must be in \[0, 4\); got 4 at index 19", id="action-range"),
        pytest.param({"reward": np.zeros(3)}, "`reward` has 3 rows", id="length"),
        pytest.param({"n_actions": 0}, "`n_actions` must be >= 1", id="n-actions"),
    ],
)
def test_bandit_log_rejects_bad_input(change, match):
    rng = np.random.default_rng(0)
    kw = dict(context=rng.normal(size=(20, 3)), action=np.zeros(20, int), reward=np.zeros(20),
              pscore=np.full(20, 0.25), n_actions=4)
    kw.update(change)
    with pytest.raises(ValueError, match=match):
        BanditLog(**kw)


def test_load_rejects_other_kind(tmp_path):
    il = InteractionLog(user=[0, 1], item=[1, 0], tick=[0, 3], source=[0, 2], n_users=2, n_items=2)
    path = il.save(tmp_path / "edges")
    with pytest.raises(LogFormatError, match="expected a recloop BanditLog"):
        BanditLog.load(path)
    back = InteractionLog.load(path)
    assert (back.profiles(2).toarray() == [[0, 1], [0, 0]]).all()
    assert (back.profiles().toarray() == [[0, 1], [1, 0]]).all()
