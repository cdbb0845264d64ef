"""A user's own log in, an answer out (issue 37): ``BanditLog.from_frame``,
``read_bandit_log``, ``read_target`` and ``evaluate_log``; every refusal names the column
and the row (or the file and the line)."""

import csv
import math
import pickle

import numpy as np
import pandas as pd
import pytest

import evaluators
from evaluators.datasets import DatasetFormatError, read_bandit_log, read_target
from simulator.logs import BanditLog, LogFrameError

N, K = 240, 3


def _frame(seed=0, n=N):
    """A log with the user's own ids (text), a text and a numeric context column, 1-based
    positions and a date column."""
    g = np.random.default_rng(seed)
    country = g.choice(["fr", "de", "it"], n)
    age = g.integers(18, 70, n)
    item = g.choice(["shoes", "hat", "scarf"], n)
    pos = g.integers(1, 3, n)
    p = 1.0 / 3.0
    click = (g.random(n) < 0.2 + 0.2 * (item == "hat") + 0.1 * (country == "fr")).astype(int)
    return pd.DataFrame({"timestamp": pd.date_range("2024-01-01", periods=n, freq="min")
                        .strftime("%Y-%m-%d %H:%M:%S"), "item_id": item, "position": pos,
                         "click": click, "propensity_score": p, "country": country,
                         "age": age})


def _write(df, path):
    df.to_csv(path, index=False)
    return path


# -- from_frame -------------------------------------------------------------------------------
def test_from_frame_finds_the_obd_columns_and_keeps_the_encoding():
    df = _frame()
    log = BanditLog.from_frame(df)
    meta = log.metadata
    assert meta["columns"] == {"action": "item_id", "reward": "click",
                               "pscore": "propensity_score", "position": "position",
                               "tick": "timestamp"}
    assert meta["actions"] == ["hat", "scarf", "shoes"]  # sorted distinct ids
    assert [meta["actions"][a] for a in log.action] == df["item_id"].tolist()
    assert meta["positions"] == [1, 2] and log.len_list == 2
    assert (log.position + 1).tolist() == df["position"].tolist()
    # text context one-hot with the first sorted category dropped; numbers as they are
    assert meta["context_columns"] == ["country=fr", "country=it", "age"]
    assert log.context[:, 0].tolist() == (df["country"] == "fr").astype(float).tolist()
    assert log.context[:, 2].tolist() == df["age"].astype(float).tolist()
    assert log.reward.tolist() == df["click"].astype(float).tolist()
    assert log.tick[1] - log.tick[0] == 60_000_000  # a minute, in microseconds


def test_from_frame_plain_names_context_by_prefix_and_list_and_given_actions():
    g = np.random.default_rng(1)
    df = pd.DataFrame({"action": g.integers(0, 4, 50), "reward": g.random(50),
                       "pscore": 0.25, "x_a": g.normal(size=50), "x_b": g.normal(size=50),
                       "other": 1.0})
    log = BanditLog.from_frame(df, context="x_")
    assert log.metadata["context_columns"] == ["x_a", "x_b"] and log.position is None
    log = BanditLog.from_frame(df, context=["other"], actions=[0, 1, 2, 3, 4])
    assert log.n_actions == 5 and log.action.tolist() == df["action"].tolist()
    assert log.metadata["context_columns"] == ["other"]


def _bad(**changes):
    df = _frame(n=30)
    for k, v in changes.items():
        df[k] = v
    return df


def _set(col, j, value):
    df = _frame(n=30)
    df[col] = df[col].astype(object)
    df.loc[j, col] = value
    return df


BAD_FRAMES = [
    pytest.param(_frame(n=30).drop(columns="click"), {}, r"no reward column.*'click'",
                 id="missing-reward"),
    pytest.param(_frame(n=30), {"reward": "clik"}, r"no column 'clik'.*Did you mean 'click'",
                 id="misspelled-column"),
    pytest.param(_set("click", 7, "yes"), {}, r"column 'click' \(`reward`\) must hold numbers;"
                 r" got 'yes' \(str\) at row 7", id="text-reward"),
    pytest.param(_set("click", 4, np.nan), {}, r"column 'click'.*finite numbers; got no value "
                 r"at row 4", id="nan-reward"),
    pytest.param(_set("propensity_score", 3, 0.0), {}, r"'propensity_score'.*must be in "
                 r"\(0, 1\]; got 0\.0 at row 3", id="zero-pscore"),
    pytest.param(_set("propensity_score", 5, 1.5), {}, r"must be in \(0, 1\]; got 1\.5 at "
                 r"row 5", id="pscore-above-one"),
    pytest.param(_bad(propensity_score="0.5"), {}, r"'propensity_score' \(`pscore`\) must hold "
                 r"numbers; got '0\.5' \(str\) at row 0", id="string-pscore"),
    pytest.param(_set("position", 2, 7), {"len_list": 2}, r"column 'position'.*must be in "
                 r"\[1, 2\].*got 7 at row 2", id="position-out-of-range"),
    pytest.param(_set("position", 9, "left"), {}, r"'position' \(`position`\) must hold "
                 r"integers.*got 'left' at row 9", id="text-position"),
    pytest.param(_set("position", 9, 4), {}, r"'position'.*must be in \[1, 3\] \(a list of "
                 r"distinct actions.*got 4 at row 9", id="more-slots-than-actions"),
    pytest.param(_frame(n=30), {"max_categories": 2}, r"context column 'country' holds text "
                 r"with 3 distinct values", id="too-many-categories"),
    pytest.param(_frame(n=30).set_axis(["timestamp", "item_id", "position", "click", "click",
                                        "country", "age"], axis=1), {},
                 r"column 'click' appears twice", id="duplicated-column"),
    pytest.param(_frame(n=30), {"context": ["age", "contry"]}, r"no column 'contry'.*Did you "
                 r"mean 'country'", id="misspelled-context"),
]


@pytest.mark.parametrize(("df", "kw", "match"), BAD_FRAMES)
def test_from_frame_refusals_name_column_and_row(df, kw, match):
    with pytest.raises(LogFrameError, match=match):
        BanditLog.from_frame(df, **kw)


# -- read_bandit_log --------------------------------------------------------------------------
def test_read_bandit_log_is_from_frame_of_the_file(tmp_path):
    df = _frame()
    path = _write(df, tmp_path / "log.csv")
    a, b = read_bandit_log(path), BanditLog.from_frame(df)
    for f in ("context", "action", "reward", "pscore", "position", "tick"):
        assert np.array_equal(getattr(a, f), getattr(b, f)), f
    assert a.metadata["source"] == str(path)


@pytest.mark.parametrize(("col", "j", "value", "match"), [
    ("click", 11, "abc", r"log\.csv:13: column 'click' \(`reward`\) must hold numbers; got "
                         r"'abc'"),
    ("propensity_score", 4, 0, r"log\.csv:6: column 'propensity_score'.*got 0\.0"),
    ("propensity_score", 4, "", r"log\.csv:6: column 'propensity_score'.*got no value"),
])
def test_read_bandit_log_names_file_and_line(tmp_path, col, j, value, match):
    df = _frame(n=30)
    df[col] = df[col].astype(object)
    df.loc[j, col] = value
    with pytest.raises(DatasetFormatError, match=match):
        read_bandit_log(_write(df, tmp_path / "log.csv"))


def test_read_bandit_log_refuses_a_large_file_before_reading_it(tmp_path, monkeypatch):
    path = _write(_frame(), tmp_path / "log.csv")
    size = path.stat().st_size

    def no_read(*a, **k):
        raise AssertionError("the file was read")

    monkeypatch.setattr(pd, "read_csv", no_read)
    with pytest.raises(ValueError, match=r"`max_bytes` must be at least the file's size"):
        read_bandit_log(path, max_bytes=size - 1)
    # a sparse 10 GiB file: refused by its size, instantly, with the default limit
    big = tmp_path / "big.csv"
    with open(big, "wb") as fh:
        fh.truncate(10 * 2**30)
    with pytest.raises(ValueError, match=r"big\.csv is 10\.00 GiB"):
        read_bandit_log(big)


def test_parquet_without_pyarrow_names_the_package(tmp_path, monkeypatch):
    import importlib.util

    path = tmp_path / "log.parquet"
    path.write_bytes(b"PAR1")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "pyarrow" else real(name, *a))
    with pytest.raises(ImportError, match="pyarrow"):
        read_bandit_log(path)


# -- read_target ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def log():
    return BanditLog.from_frame(_frame())


def _target_rows(log, probs):
    """A target CSV's rows in the user's ids: every record, every action."""
    ids = log.metadata["actions"]
    return [[j, ids[a], probs[j][a]] for j in range(log.n_rounds) for a in range(log.n_actions)]


def _target_csv(path, rows, header=("record", "action", "probability")):
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


def test_target_forms_agree(log, tmp_path):
    g = np.random.default_rng(2)
    p = g.dirichlet(np.ones(K), log.n_rounds)
    np.save(tmp_path / "t.npy", p)
    from_npy = read_target(tmp_path / "t.npy", log)
    from_csv = read_target(_target_csv(tmp_path / "t.csv", _target_rows(log, p)), log)
    from_fn = read_target(lambda x: p, log)
    assert from_npy.shape == (log.n_rounds, K, log.len_list)
    for a in (from_csv, from_fn):
        np.testing.assert_allclose(a, from_npy, rtol=0, atol=1e-15)
    # one context-free distribution
    one = read_target([0.2, 0.3, 0.5], log)
    assert one.shape == (log.n_rounds, K, log.len_list) and one[7, 2, 1] == 0.5


def test_target_csv_in_the_users_ids_with_positions(log, tmp_path):
    ids, pos_ids = log.metadata["actions"], log.metadata["positions"]
    rows = []
    for j in range(log.n_rounds):  # each record at its own position only; "hat" always
        rows.append([j, "hat", pos_ids[log.positions()[j]], 1.0])
    a = read_target(_target_csv(tmp_path / "t.csv", rows,
                                ("record", "action", "position", "probability")), log)
    assert np.all(a[:, ids.index("hat"), :] == 1.0) and a.sum() == log.n_rounds * log.len_list


BAD_TARGETS = [
    pytest.param(lambda lg, p: [[0, "hat", 0.5], [0, "scarf", 0.3], [0, "shoes", 0.1]]
                 + _target_rows(lg, p)[3:], r"probabilities of record 0 sum to 0\.9",
                 id="rows-do-not-sum-to-1"),
    pytest.param(lambda lg, p: _target_rows(lg, p)[:5] + [[1, "boots", 0.0]]
                 + _target_rows(lg, p)[5:], r"t\.csv:7: column 'action' holds 'boots', which "
                 r"the log never had", id="unknown-action"),
    pytest.param(lambda lg, p: _target_rows(lg, p)[3:], r"record 0 has no probabilities",
                 id="record-missing"),
    pytest.param(lambda lg, p: [[0, lg.metadata["actions"][0], 1.2]] + _target_rows(lg, p)[1:],
                 r"t\.csv:2: column 'probability' must be a number in \[0, 1\]; got 1\.2\.$",
                 id="probability-above-1"),
    pytest.param(lambda lg, p: _target_rows(lg, p) + [[lg.n_rounds, "hat", 1.0]],
                 r"column 'record' must be a record of the log, an integer in \[0, \d+\]; got "
                 r"\d+\.$", id="record-out-of-range"),
    pytest.param(lambda lg, p: _target_rows(lg, p) + [[0, "hat", 0.0]],
                 r"given twice; first at .*t\.csv:2", id="pair-twice"),
]


@pytest.mark.parametrize(("rows", "match"), BAD_TARGETS)
def test_bad_target_csv_names_the_line(log, tmp_path, rows, match):
    p = np.full((log.n_rounds, K), 1 / K)
    with pytest.raises(DatasetFormatError, match=match):
        read_target(_target_csv(tmp_path / "t.csv", rows(log, p)), log)


def test_bad_target_policies_name_the_argument(log, tmp_path):
    def boom(x):
        raise RuntimeError("model not loaded")

    with pytest.raises(ValueError, match=r"`target`.*boom raised RuntimeError: model not "
                                         r"loaded"):
        read_target(boom, log)
    with pytest.raises(ValueError, match=r"`target` must be action probabilities of shape.*"
                                         r"got .* of shape \(240, 2\)"):
        read_target(lambda x: np.full((len(x), 2), 0.5), log)
    with pytest.raises(ValueError, match=r"sum 1\.2.* at record 0"):
        read_target(np.tile([0.5, 0.5, 0.2], (log.n_rounds, 1)), log)
    with pytest.raises(ValueError, match=r"`target` must be an importable"):
        read_target("no_such_module_xyz:policy", log)
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_target(tmp_path / "missing.npy", log)


# -- evaluate_log -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def result(log):
    return evaluators.evaluate_log(log, [0.6, 0.2, 0.2], rng=0)


def test_evaluate_log_rows_are_the_estimators_on_the_log(log, result):
    frame = result.frame()
    assert list(frame.columns) == ["estimator", "value", "stderr", "ci_low", "ci_high", "ess",
                                   "score", "score_se", "selected"]
    assert list(frame.estimator) == [label for label, _ in evaluators.CANDIDATES]
    a = read_target([0.6, 0.2, 0.2], log)
    ips = evaluators.ips(log, a)
    row = frame.set_index("estimator").loc["ips"]
    assert (row.value, row.stderr, row.ci_low, row.ci_high) == (ips.value, ips.stderr,
                                                                ips.ci_low, ips.ci_high)
    # the model-based rows share one reward model
    q = evaluators.fit_reward_model(log, "ridge", rng=np.random.SeedSequence(0).spawn(3)[0])
    assert frame.set_index("estimator").loc["doubly_robust"].value == \
        evaluators.doubly_robust(log, a, model=q).value
    assert frame.selected.sum() == 1 and result.selected == frame.estimator[frame.selected].item()
    assert np.isfinite(frame.score).all() and (frame.score_se > 0).all()
    # the scores are the selector's own, on the same candidates and seed stream
    sel = evaluators.select_by_twin(log, a, rng=np.random.SeedSequence(0).spawn(3)[1])
    board = {s.label: s for s in sel.leaderboard}
    assert [(r.score, r.score_se) for r in result.rows] == [
        (board[r.estimator].score, board[r.estimator].stderr) for r in result.rows]
    assert result.selected == sel.selected and result.how_sure == sel.how_sure
    assert result.tied == tuple(s.label for s in sel.leaderboard
                                if s.tied and s.label != sel.selected)
    assert result.confidence == ("tied" if result.tied else "clear")


def test_evaluate_log_diagnostics(log, result):
    a = read_target([0.6, 0.2, 0.2], log)
    w = a[np.arange(log.n_rounds), log.action, log.positions()] / log.pscore
    d = result.diagnostics
    assert d.ess == pytest.approx(w.sum() ** 2 / (w ** 2).sum(), rel=1e-12)
    assert d.max_weight == w.max() and d.unsupported_mass == 0.0
    assert math.isfinite(d.reward_model_r2) and d.reward_model_mse > 0


def test_mass_outside_the_logs_support(log):
    never = log.take(np.flatnonzero(log.action != 2))  # action 2 is never logged
    res = evaluators.evaluate_log(never, [0.5, 0.2, 0.3], estimators=["ips"], select="none")
    assert res.diagnostics.unsupported_mass == pytest.approx(0.3)
    assert "30.0% of the target's probability is on actions the log never shows" in \
        res.summary()


def test_evaluate_log_is_the_same_bytes_every_time(log, result):
    again = evaluators.evaluate_log(log, [0.6, 0.2, 0.2])
    assert pickle.dumps(again.rows) == pickle.dumps(result.rows)
    assert again.diagnostics == result.diagnostics and again.summary() == result.summary()


def test_evaluate_log_selectors(log):
    t = [0.6, 0.2, 0.2]
    none = evaluators.evaluate_log(log, t, estimators=["ips", "snips"], select="none")
    assert none.selected is None and not none.frame().selected.any()
    for name in ("cv", "pasif", "slope"):
        res = evaluators.evaluate_log(log, t, estimators=["ips", "snips"], select=name)
        assert res.selector == name and res.selected in ("ips", "snips")
        assert res.selection.method == name and res.how_sure == res.selection.how_sure
        assert res.score_name == ("interval width" if name == "slope" else "est. RMSE")

    def mine(lg, a, *, candidates, rng):
        assert [c for c, _ in candidates] == ["ips", "snips"]
        return evaluators.select_by_twin(lg, a, candidates=candidates, n_twins=3, rng=rng)

    own = evaluators.evaluate_log(log, t, estimators=["ips", "snips"], select=mine)
    assert own.selector == "mine" and own.selected in ("ips", "snips")
    with pytest.raises(ValueError, match=r"`select` must be one of 'twin', 'cv', 'pasif', "
                                         r"'slope', 'none'"):
        evaluators.evaluate_log(log, t, select="oracle")
    with pytest.raises(ValueError, match=r"estimators\[0\]` must be one of.*did you mean "
                                         r"'doubly_robust'"):
        evaluators.evaluate_log(log, t, estimators=["doubly_robst"])


def test_evaluate_log_refuses_logs_that_cannot_answer(log):
    with pytest.raises(ValueError, match=r"at least 2 records.*got 1 record"):
        evaluators.evaluate_log(log.take([0]), [0.6, 0.2, 0.2])
    one = BanditLog(context=np.zeros((5, 1)), action=np.zeros(5, int), reward=np.ones(5),
                    pscore=np.ones(5), n_actions=1)
    with pytest.raises(ValueError, match=r"at least 2 actions"):
        evaluators.evaluate_log(one, [1.0])


def test_plot_marks_the_selected_estimate(result):
    fig = result.plot()
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(labels) == len(result.rows)
    assert labels.count(f"{result.selected}  (selected)") == 1


@pytest.mark.parametrize("tied", [False, True])
def test_how_sure_the_choice_is(log, tied):
    """The selector's scores, ties and sentence reach the result and its summary as the
    selector gave them; a selector whose choice is not one of the estimators is refused."""
    from types import SimpleNamespace as NS

    def fake(lg, a, *, candidates, rng):
        board = (NS(label="ips", score=0.010, stderr=0.001, tied=True),
                 NS(label="snips", score=0.012, stderr=0.002, tied=tied))
        return NS(selected="ips", leaderboard=board, method="fake",
                  how_sure="a sentence of the selector's own.", warnings=("twins unfaithful",),
                  fallback=False)

    res = evaluators.evaluate_log(log, [0.6, 0.2, 0.2], estimators=["ips", "snips"],
                                  select=fake)
    assert [(r.score, r.score_se) for r in res.rows] == [(0.010, 0.001), (0.012, 0.002)]
    assert (res.selected, res.tied, res.confidence) == (
        "ips", ("snips",) if tied else (), "tied" if tied else "clear")
    assert "How sure: a sentence of the selector's own." in res.summary()
    assert "twins unfaithful" in res.summary()

    def lost(lg, a, *, candidates, rng):
        return NS(selected="dm")

    with pytest.raises(ValueError, match=r"`selected` is 'dm'; expected the label of one"):
        evaluators.evaluate_log(log, [0.6, 0.2, 0.2], estimators=["ips", "snips"],
                                select=lost)
