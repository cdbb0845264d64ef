import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

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


def test_bandit_log_pickles_whole_and_read_only():
    """A log crosses to a guest process by pickle: every field back, metadata a read-only
    mapping again, arrays read-only (the constructor checks it on the way in)."""
    import pickle

    log = _log(tick=np.arange(20), position=np.arange(20) % 2, len_list=2,
               metadata={"actions": ["a", "b", "c", "d"]})
    back = pickle.loads(pickle.dumps(log))
    for name in ("context", "action", "reward", "pscore", "tick", "position"):
        np.testing.assert_array_equal(getattr(back, name), getattr(log, name))
        assert not getattr(back, name).flags.writeable
    assert (back.n_actions, back.len_list) == (4, 2)
    assert dict(back.metadata) == {"actions": ["a", "b", "c", "d"]}
    with pytest.raises(TypeError):
        back.metadata["x"] = 1


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
        pytest.param({"pscore": np.r_[np.full(19, 0.25), 0.0]},
                     r"`pscore` must be in \(0, 1\]; got 0.0 at index 19", id="pscore-zero"),
        pytest.param({"action": np.r_[np.zeros(19, int), 4]},
                     r"`action` must be in \[0, 4\); got 4 at index 19", id="action-range"),
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


# -- embeddings, pi_b, malformed files --------------------------------------------------------
def _emb_log():
    return BanditLog(context=np.zeros((3, 1)), action=[0, 1, 2], reward=[1.0, 0.0, 1.0],
                     pscore=[0.5, 0.25, 0.25], n_actions=3,
                     action_embeddings=np.array([[0, 1], [0, 2], [1, 1]]),
                     pi_b=np.tile([0.5, 0.25, 0.25], (3, 1)))


def test_embeddings_and_pi_b_round_trip(tmp_path):
    log = _emb_log()
    back = BanditLog.load(log.save(tmp_path / "e.npz"))
    assert np.array_equal(back.action_embeddings, log.action_embeddings)
    assert np.array_equal(back.pi_b, log.pi_b)
    fb = log.to_obp()
    assert np.array_equal(fb["action_context"], log.action_embeddings)
    assert fb["pi_b"].shape == (3, 3, 1)
    again = BanditLog.from_obp(fb)
    assert np.array_equal(again.action_embeddings, log.action_embeddings)
    assert np.array_equal(again.pi_b, log.pi_b)
    assert BanditLog.from_obp(_emb_log().take([0]).to_obp()).pi_b.shape == (1, 3)
    plain = BanditLog.from_obp(BanditLog(context=np.zeros((1, 1)), action=[0], reward=[1.0],
                                         pscore=[1.0], n_actions=2).to_obp())
    assert plain.action_embeddings is None  # OBP's identity action_context is no embedding


@pytest.mark.parametrize("kw, exc, msg", [
    pytest.param({"action_embeddings": np.array([[0.5], [1], [2]])}, TypeError, "integers",
                 id="float-embeddings"),
    pytest.param({"action_embeddings": np.array([[0], [1]])}, ValueError, "n_actions",
                 id="embeddings-rows"),
    pytest.param({"action_embeddings": np.array([[0], [-1], [2]])}, ValueError, ">= 0",
                 id="negative-embedding"),
    pytest.param({"pi_b": np.full((3, 3), 0.5)}, ValueError, "sum", id="pi_b-sum"),
    pytest.param({"pi_b": np.tile([0.25, 0.5, 0.25], (3, 1))}, ValueError, "equal `pscore`",
                 id="pi_b-pscore"),
])
def test_bad_embeddings_and_pi_b(kw, exc, msg):
    base = dict(context=np.zeros((3, 1)), action=[0, 1, 2], reward=[1.0, 0.0, 1.0],
                pscore=[0.5, 0.25, 0.25], n_actions=3)
    with pytest.raises(exc, match=msg):
        BanditLog(**base, **kw)


def _write_npz(path, **arrays):
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)
    return path


GOOD = dict(context=np.zeros((2, 1)), action=np.array([0, 1]), reward=np.array([1.0, 0.0]),
            pscore=np.array([0.5, 0.5]))
HEADER = json.dumps({"kind": "BanditLog", "format": 1, "n_actions": 2, "metadata": {}})


@pytest.mark.parametrize("arrays, msg", [
    pytest.param(dict(GOOD, __header__=np.array("{not json")), "not valid JSON", id="bad-json"),
    pytest.param(dict(GOOD, __header__=np.array("[1, 2]")), "JSON object", id="header-list"),
    pytest.param(dict(GOOD, __header__=np.array([1.0, 2.0])), "one JSON string",
                 id="header-array"),
    pytest.param(dict(GOOD, __header__=np.array(json.dumps({"kind": "BanditLog",
                                                             "n_actions": "2"}))),
                 "'n_actions' must be an int", id="n_actions-str"),
    pytest.param({k: v for k, v in GOOD.items() if k != "pscore"} | {"__header__":
                                                                       np.array(HEADER)},
                 "missing array", id="missing"),
    pytest.param(dict(GOOD, extra=np.zeros(2), __header__=np.array(HEADER)), "unexpected",
                 id="extra"),
    pytest.param(dict(GOOD, tick=np.array(["a", "b"]), __header__=np.array(HEADER)),
                 "numeric", id="string-array"),
    pytest.param(dict(GOOD, pscore=np.array([0.5, 2.0]), __header__=np.array(HEADER)),
                 "do not make a valid BanditLog", id="invalid-values"),
    pytest.param(dict(GOOD, __header__=np.array(json.dumps({"kind": "InteractionLog"}))),
                 "expected a recloop BanditLog", id="wrong-kind"),
])
def test_malformed_files_raise_log_format_error(tmp_path, arrays, msg):
    path = _write_npz(tmp_path / "bad.npz", **arrays)
    with pytest.raises(LogFormatError, match=msg):
        BanditLog.load(path)


def test_object_array_is_a_log_format_error(tmp_path):
    path = tmp_path / "obj.npz"
    with open(path, "wb") as fh:
        np.savez(fh, **GOOD, user=np.array([{"a": 1}, None], dtype=object),
                 __header__=np.array(HEADER))
    with pytest.raises(LogFormatError, match="pickle"):
        BanditLog.load(path)


def test_save_to_existing_directory_is_an_error(tmp_path):
    log = BanditLog(**GOOD, n_actions=2)
    with pytest.raises(IsADirectoryError, match="existing directory"):
        log.save(tmp_path)
    assert not (tmp_path.parent / (tmp_path.name + ".npz")).exists()


def test_interaction_log_malformed_files(tmp_path):
    header = json.dumps({"kind": "InteractionLog", "n_users": 2, "n_items": 2})
    base = dict(user=np.array([0, 1]), item=np.array([1, 0]), tick=np.array([0, 0]),
                source=np.array([0, 2], dtype=np.int8))
    good = _write_npz(tmp_path / "good.npz", **base, __header__=np.array(header))
    assert len(InteractionLog.load(good)) == 2
    for name, arrays, msg in (
            ("missing", {k: v for k, v in base.items() if k != "tick"}, "missing array"),
            ("extra", dict(base, pscore=np.zeros(2)), "unexpected"),
            ("range", dict(base, item=np.array([5, 0])), "valid InteractionLog")):
        path = _write_npz(tmp_path / f"{name}.npz", **arrays, __header__=np.array(header))
        with pytest.raises(LogFormatError, match=msg):
            InteractionLog.load(path)


# -- positions (OBD-shaped logs) ----------------------------------------------------------------
def _pos_log(n=30, k=5, len_list=3, seed=1, **kw):
    rng = np.random.default_rng(seed)
    return _log(n, k, 2, seed, position=rng.integers(0, len_list, n), len_list=len_list, **kw)


def test_positions_default_and_inferred():
    log = _log()
    assert log.position is None and log.len_list == 1
    assert np.array_equal(log.positions(), np.zeros(20)) and not log.positions().flags.writeable
    inferred = _log(position=np.r_[np.zeros(19, int), 2])
    assert inferred.len_list == 3 and inferred.observation(19)["position"] == 2
    assert "position" not in log.observation(0)


def test_positions_round_trip_obp_and_npz(tmp_path):
    log = _pos_log(tick=np.arange(30), metadata={"campaign": "all"})
    fb = log.to_obp()
    assert fb["len_list"] == 3 and np.array_equal(fb["position"], log.position)
    back = BanditLog.from_obp(fb)
    assert back.len_list == 3 and np.array_equal(back.position, log.position)
    # OBP's OpenBanditDataset dict has no len_list: it is max(position) + 1 there too
    del fb["len_list"]
    assert BanditLog.from_obp(fb).len_list == int(log.position.max()) + 1
    again = BanditLog.load(log.save(tmp_path / "p"))
    assert again.len_list == 3 and np.array_equal(again.position, log.position)
    sub = log.take(np.flatnonzero(log.position == 0))  # only slot 0 left: len_list stays 3
    assert sub.len_list == 3 and BanditLog.from_obp(sub.to_obp()).len_list == 3
    assert BanditLog.load(sub.save(tmp_path / "s")).len_list == 3


def test_one_slot_logs_unchanged(tmp_path):
    """A log without positions writes the same file as before positions existed (no
    `position` array, no `len_list` in the header), and OBP's all-0 position stays absent."""
    log = _log(tick=np.arange(20))
    path = log.save(tmp_path / "plain")
    with np.load(path) as data:
        assert "position" not in data.files
        assert "len_list" not in json.loads(str(data["__header__"]))
    fb = log.to_obp()
    assert fb["len_list"] == 1 and not fb["position"].any()
    assert BanditLog.from_obp(fb).position is None


def test_obp_pi_b_read_at_position():
    pi = np.array([[0.5, 0.25, 0.25], [0.2, 0.2, 0.6]])  # position 0, position 1
    pi_b = np.tile(pi.T[None], (4, 1, 1))  # (n, K, len_list)
    pos = np.array([0, 1, 1, 0])
    act = np.array([0, 2, 1, 1])
    fb = dict(n_actions=3, context=np.zeros((4, 1)), action=act, reward=np.zeros(4),
              pscore=pi[pos, act], position=pos, pi_b=pi_b)
    log = BanditLog.from_obp(fb)
    assert np.array_equal(log.pi_b, pi[pos])
    assert "pi_b" not in log.to_obp()  # OBP's 3-d pi_b cannot be rebuilt from one slot


@pytest.mark.parametrize("kw, exc, msg", [
    pytest.param({"position": np.r_[np.zeros(19, int), 3], "len_list": 3}, ValueError,
                 r"`position` must be in \[0, 3\) \(`len_list` = 3\); got 3 at index 19",
                 id="position-range"),
    pytest.param({"position": np.r_[np.zeros(19, int), -1]}, ValueError,
                 r"`position` must be in \[0, 1\).*got -1 at index 19", id="position-negative"),
    pytest.param({"position": np.full(20, 0.5)}, TypeError, "`position` must hold integers",
                 id="position-float"),
    pytest.param({"position": np.zeros(3, int)}, ValueError, "`position` must have 20 entries",
                 id="position-length"),
    pytest.param({"len_list": 0}, ValueError, "`len_list` must be >= 1", id="len_list-zero"),
    pytest.param({"len_list": 2.0}, TypeError, "`len_list` must be an int", id="len_list-float"),
])
def test_bad_positions(kw, exc, msg):
    with pytest.raises(exc, match=msg):
        _log(**kw)


def test_file_with_positions_out_of_range(tmp_path):
    header = json.dumps({"kind": "BanditLog", "format": 1, "n_actions": 2, "metadata": {},
                         "len_list": 2})
    path = _write_npz(tmp_path / "p.npz", **GOOD, position=np.array([0, 2]),
                      __header__=np.array(header))
    with pytest.raises(LogFormatError, match=r"`position` must be in \[0, 2\)"):
        BanditLog.load(path)
