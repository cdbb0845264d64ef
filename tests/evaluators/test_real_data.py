"""Real bandit logs: the Open Bandit Dataset's layout (on a small generated stand-in), its
Bernoulli TS policy, and the multiclass-to-bandit protocol (evaluators/_real_data.py)."""

import csv
import sys
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluators.datasets import (
    BetaPrior,
    ClassifierPolicy,
    DatasetFormatError,
    bernoulli_ts_action_dist,
    load_classification,
    load_open_bandit,
    multiclass_to_bandit,
    read_bts_prior,
)
from simulator.logs import BanditLog

# -- a stand-in of the OBD layout ---------------------------------------------------------------
K, N = 5, 40
T0 = datetime(2019, 11, 24, tzinfo=timezone.utc)


def _rows(seed=0):
    g = np.random.default_rng(seed)
    hashes = [[f"{f}{c:031x}" for c in range(n)] for f, n in enumerate((2, 3, 3, 4))]
    rows = []
    for _ in range(N):
        # out of time order, with ties: the loader sorts stably by timestamp
        t = T0 + timedelta(seconds=int(g.integers(0, 15)), microseconds=int(g.integers(0, 3)))
        rows.append({
            "timestamp": t.isoformat(sep=" "),
            "item_id": int(g.integers(0, K)), "position": int(g.integers(1, 4)),
            "click": int(g.random() < 0.3), "propensity_score": float(g.uniform(0.01, 1.0)),
            **{f"user_feature_{f}": hashes[f][g.integers(0, len(hashes[f]))] for f in range(4)},
            **{f"user-item_affinity_{i}": float(g.integers(0, 3)) for i in range(K)},
        })
    return rows


ITEMS = [{"item_id": i, "item_feature_0": [0.5, -1.25, 0.5, 2.0, -1.25][i],
          "item_feature_1": "ab"[i % 2] + "x", "item_feature_2": f"h{(7 * i) % 3}",
          "item_feature_3": "z"} for i in range(K)]


def _write(root, rows=None, items=None, policy="random", campaign="all", drop=()):
    folder = root / policy / campaign
    folder.mkdir(parents=True, exist_ok=True)
    rows = _rows() if rows is None else rows
    for name, table in ((f"{campaign}.csv", rows), ("item_context.csv", items or ITEMS)):
        cols = [c for c in table[0] if c not in drop]
        with open(folder / name, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow([""] + cols)
            for j, r in enumerate(table):
                w.writerow([j] + [r[c] for c in cols])
    return root


def test_reads_the_obd_layout(tmp_path):
    rows = _rows()
    log = load_open_bandit(_write(tmp_path, rows), behavior_policy="random", campaign="all")
    ticks = [int((datetime.fromisoformat(r["timestamp"]) - datetime(1970, 1, 1, tzinfo=
                  timezone.utc)) / timedelta(microseconds=1)) for r in rows]
    order = sorted(range(N), key=lambda j: ticks[j])  # Python's sort is stable
    assert log.n_rounds == N and log.n_actions == K and log.len_list == 3
    assert log.tick.tolist() == [ticks[j] for j in order]
    assert log.action.tolist() == [rows[j]["item_id"] for j in order]
    assert log.position.tolist() == [rows[j]["position"] - 1 for j in order]
    assert log.reward.tolist() == [rows[j]["click"] for j in order]
    assert log.pscore.tolist() == [rows[j]["propensity_score"] for j in order]
    # the context: per user feature, one column per sorted category but the first
    expect, names = [], []
    for f in range(4):
        cats = sorted({r[f"user_feature_{f}"] for r in rows})
        names += [f"user_feature_{f}={c}" for c in cats[1:]]
        expect.append([[float(rows[j][f"user_feature_{f}"] == c) for c in cats[1:]]
                       for j in order])
    assert log.context.tolist() == np.concatenate(expect, axis=1).tolist()
    assert log.metadata["context_columns"] == names
    # item features: label codes of the categorical ones, then item_feature_0's dense rank
    assert log.metadata["action_embedding_columns"] == ["item_feature_1", "item_feature_2",
                                                        "item_feature_3", "item_feature_0"]
    assert log.action_embeddings.tolist() == [[0, 0, 0, 1], [1, 1, 0, 0], [0, 2, 0, 1],
                                              [1, 0, 0, 2], [0, 1, 0, 0]]
    assert log.metadata["item_feature_values"]["item_feature_0"] == [0.5, -1.25, 0.5, 2.0,
                                                                      -1.25]
    wide = load_open_bandit(tmp_path, behavior_policy="random", campaign="all", affinity=True)
    aff = [[rows[j][f"user-item_affinity_{i}"] for i in range(K)] for j in order]
    assert wide.context[:, -K:].tolist() == aff
    assert np.array_equal(wide.context[:, :-K], log.context)


def test_obd_round_trips(tmp_path):
    log = load_open_bandit(_write(tmp_path), behavior_policy="random", campaign="all")
    back = BanditLog.from_obp(log.to_obp())
    again = BanditLog.load(log.save(tmp_path / "obd"))
    for other in (back, again):
        for name in ("context", "action", "reward", "pscore", "position", "action_embeddings"):
            assert np.array_equal(getattr(other, name), getattr(log, name)), name
        assert other.len_list == 3
    assert dict(again.metadata) == dict(log.metadata)


def _with(**change):
    rows = _rows()
    j = change.pop("row", 7)
    rows[j] = {**rows[j], **change}
    return rows


@pytest.mark.parametrize("rows, drop, msg", [
    pytest.param(None, ("propensity_score",), r"all.csv:1: missing column\(s\) "
                 "'propensity_score'", id="missing-column"),
    pytest.param(_with(propensity_score=0.0), (), r"all.csv:9: column 'propensity_score' must "
                 r"be in \(0, 1\]; got 0", id="pscore-zero"),
    pytest.param(_with(propensity_score=1.5), (), r"all.csv:9: .*'propensity_score' .*got 1.5",
                 id="pscore-above-one"),
    pytest.param(_with(propensity_score="n/a"), (), r":9: column 'propensity_score' must hold a "
                 "finite number; got 'n/a'", id="pscore-text"),
    pytest.param(_with(position=0), (), r":9: column 'position' must be an integer in \[1, 5\]",
                 id="position-zero"),
    pytest.param(_with(position=1.5), (), r":9: column 'position' must hold an integer; got "
                 "'1.5'", id="position-fraction"),
    pytest.param(_with(item_id=K), (), r":9: column 'item_id' must be an item of "
                 r"item_context.csv, in \[0, 5\); got 5", id="item-out-of-range"),
    pytest.param(_with(click=2), (), r":9: column 'click' must be 0 or 1; got 2", id="click"),
    pytest.param(_with(timestamp="yesterday"), (), "column 'timestamp' must hold",
                 id="timestamp"),
])
def test_bad_obd_files_name_the_column(tmp_path, rows, drop, msg):
    _write(tmp_path, rows, drop=drop)
    with pytest.raises(DatasetFormatError, match=msg):
        load_open_bandit(tmp_path, behavior_policy="random", campaign="all")


def test_bad_obd_arguments(tmp_path):
    _write(tmp_path)
    with pytest.raises(ValueError, match="`campaign` must be one of 'all', 'men', 'women'; "
                                         "got 'kids'"):
        load_open_bandit(tmp_path, behavior_policy="random", campaign="kids")
    with pytest.raises(FileNotFoundError, match="bts/all/all.csv: no such file"):
        load_open_bandit(tmp_path, behavior_policy="bts", campaign="all")
    with pytest.raises(DatasetFormatError, match="'item_id' must number the 5 items"):
        _write(tmp_path, items=[{**r, "item_id": r["item_id"] + 1} for r in ITEMS])
        load_open_bandit(tmp_path, behavior_policy="random", campaign="all")


# -- the Bernoulli TS policy ----------------------------------------------------------------------
PRIOR_YAML = """# two campaigns
all:
  alpha:
    - 47.0
    - 8.0
    - 62.0
  beta:
    - 12198.0
    - 3566.0
    - 16.5

men:
  alpha: # a comment
    - 1.0
  beta:
    - 2
"""


def test_read_bts_prior(tmp_path):
    (tmp_path / "p.yaml").write_text(PRIOR_YAML)
    priors = read_bts_prior(tmp_path / "p.yaml")
    assert list(priors) == ["all", "men"]
    assert priors["all"].alpha.tolist() == [47.0, 8.0, 62.0]
    assert priors["all"].beta.tolist() == [12198.0, 3566.0, 16.5]
    assert priors["men"].beta.tolist() == [2.0]


@pytest.mark.parametrize("text, msg", [
    pytest.param(PRIOR_YAML.replace("- 8.0", "- eight"), r"p.yaml:5: expected '- <number>'; "
                 "got '- eight'", id="not-a-number"),
    pytest.param(PRIOR_YAML.replace("  beta:\n    - 2\n", ""), "'men' must have both",
                 id="no-beta"),
    pytest.param(PRIOR_YAML.replace("    - 16.5\n", ""), r"'all': `beta` must be as long as "
                 r"`alpha` \(3\); got 2", id="lengths"),
    pytest.param(PRIOR_YAML.replace("- 2\n", "- -2\n"), r"`beta` must be finite and > 0; got "
                 "-2.0 at index 0", id="negative"),
    pytest.param(PRIOR_YAML.replace("  alpha:", "  gamma:", 1), "expected 'alpha:' or 'beta:'",
                 id="unknown-key"),
])
def test_bad_prior_files(tmp_path, text, msg):
    (tmp_path / "p.yaml").write_text(text)
    with pytest.raises(DatasetFormatError, match=msg):
        read_bts_prior(tmp_path / "p.yaml")


def _bts_naive(prior, L, n_sim, seed):
    """OBP's loop: one draw per item per simulation, the L largest in decreasing order."""
    g = np.random.default_rng(seed)
    K = prior.alpha.size
    count = np.zeros((K, L))
    for _ in range(n_sim):
        draw = g.beta(prior.alpha, prior.beta)
        ranked = sorted(range(K), key=lambda i: (-draw[i], i))
        for pos in range(L):
            count[ranked[pos], pos] += 1
    return count / n_sim


@settings(max_examples=25, deadline=None)
@given(K=st.integers(1, 7), data=st.data(), n_sim=st.integers(1, 60), seed=st.integers(0, 99))
def test_bts_equals_the_simulation_loop(K, data, n_sim, seed):
    L = data.draw(st.integers(1, K))
    g = np.random.default_rng(seed + 1000)
    prior = BetaPrior(g.uniform(0.2, 5, K), g.uniform(0.2, 5, K))
    got = bernoulli_ts_action_dist(prior, K, L, n_sim=n_sim, rng=seed)
    assert np.array_equal(got, _bts_naive(prior, L, n_sim, seed))


@pytest.mark.slow
def test_bts_matches_the_exact_probabilities():
    """Against the integrals: P(i first) = int f_i prod_{j != i} F_j and P(i second) =
    int f_i sum_{k != i} (1 - F_k) prod_{j != i, k} F_j, three items, two positions."""
    from scipy import integrate, stats

    alpha, beta = np.array([2.0, 3.0, 1.5]), np.array([5.0, 4.0, 2.0])
    dists = [stats.beta(a, b) for a, b in zip(alpha, beta, strict=True)]
    exact = np.zeros((3, 2))
    for i in range(3):
        others = [j for j in range(3) if j != i]
        exact[i, 0] = integrate.quad(lambda x, i=i, o=others: dists[i].pdf(x) * np.prod(
            [dists[j].cdf(x) for j in o]), 0, 1)[0]
        exact[i, 1] = integrate.quad(lambda x, i=i, o=others: dists[i].pdf(x) * sum(
            dists[k].sf(x) * np.prod([dists[j].cdf(x) for j in o if j != k]) for k in o),
            0, 1)[0]
    n_sim = 200_000
    got = bernoulli_ts_action_dist((alpha, beta), 3, 2, n_sim=n_sim, rng=5)
    se = np.sqrt(exact * (1 - exact) / n_sim)
    assert np.all(np.abs(got - exact) < 4.5 * se), (got, exact)


def test_bts_shape_and_errors():
    d = bernoulli_ts_action_dist(([1, 2, 3, 4], [4, 3, 2, 1]), 4, 3, n_sim=500, rng=0)
    assert d.shape == (4, 3) and np.allclose(d.sum(axis=0), 1) and np.all(d.sum(axis=1) <= 1)
    assert np.array_equal(d, bernoulli_ts_action_dist(([1, 2, 3, 4], [4, 3, 2, 1]), 4, 3,
                                                      n_sim=500, rng=0))
    with pytest.raises(ValueError, match=r"`n_actions` must be the prior's number of items "
                                         r"\(4\); got 5"):
        bernoulli_ts_action_dist(([1, 2, 3, 4], [4, 3, 2, 1]), 5, 1)
    with pytest.raises(ValueError, match="`len_list` must be an int in"):
        bernoulli_ts_action_dist(([1, 2], [4, 3]), 2, 3)
    with pytest.raises(ValueError, match="`alpha` must be finite and > 0; got 0.0 at index 1"):
        bernoulli_ts_action_dist(([1, 0], [4, 3]), 2, 1)
    with pytest.raises(TypeError, match="`prior` must be a BetaPrior or an"):
        bernoulli_ts_action_dist({"alpha": [1]}, 1, 1)


# -- the multiclass-to-bandit protocol -----------------------------------------------------------
class Centroid:
    """A nearest-centroid classifier: cheap and deterministic (no scikit-learn needed)."""

    def fit(self, X, y):
        self.c = np.stack([X[y == k].mean(axis=0) for k in range(int(y.max()) + 1)])
        return self

    def predict(self, X):
        return np.argmin(((X[:, None, :] - self.c[None]) ** 2).sum(axis=2), axis=1)


def _blobs(n=300, K=4, seed=0):
    g = np.random.default_rng(seed)
    y = g.integers(0, K, n)
    return g.normal(size=(n, 2)) + 1.5 * np.c_[np.cos(y), np.sin(y)], np.array(list("abcd"))[y]


def test_multiclass_protocol_records():
    X, y = _blobs()
    out = multiclass_to_bandit(X, y, logging=ClassifierPolicy(0.6, Centroid()),
                               target=[ClassifierPolicy(0.9, Centroid()),
                                       ClassifierPolicy(0.0)], rng=3)
    log, ev = out.log, out.eval_index
    label = np.searchsorted(out.classes, y)
    assert out.classes.tolist() == list("abcd")
    assert np.array_equal(log.context, X[ev]) and log.n_actions == 4
    assert np.array_equal(log.reward, (log.action == label[ev]).astype(float))
    assert np.array_equal(log.pscore, log.pi_b[np.arange(log.n_rounds), log.action])
    assert set(log.pi_b.ravel().round(12)) <= {0.1, 0.7}  # 0.6 + 0.4 / 4, 0.4 / 4
    assert out.action_dist.shape == (2, log.n_rounds, 4)
    np.testing.assert_allclose(out.action_dist[1], 0.25)  # alpha 0: uniform
    assert out.value[1] == pytest.approx(0.25)
    # the exact value: the target's probability of the true class, on average
    rows = np.arange(log.n_rounds)
    assert out.value[0] == np.mean(out.action_dist[0][rows, label[ev]])
    # the split: stratified, half of each class, disjoint, covering every row
    assert np.array_equal(np.sort(np.r_[out.train_index, ev]), np.arange(len(y)))
    for k in "abcd":
        assert abs((y[ev] == k).sum() - (y == k).sum() / 2) <= 0.5
    again = multiclass_to_bandit(X, y, logging=ClassifierPolicy(0.6, Centroid()),
                                 target=ClassifierPolicy(0.9, Centroid()), rng=3)
    assert np.array_equal(again.log.action, log.action)  # same rng, same log


@pytest.mark.slow
def test_multiclass_ips_is_unbiased_for_the_exact_value():
    """Over logs of one split, IPS averages to the exact value: the logged actions follow
    pi_b and pscore is their probability."""
    X, y = _blobs(n=200)
    errs = []
    for s in range(300):
        out = multiclass_to_bandit(X, y, logging=ClassifierPolicy(0.5, Centroid()),
                                   target=ClassifierPolicy(0.8, Centroid()), rng=s)
        log = out.log
        w = out.action_dist[0][np.arange(log.n_rounds), log.action] / log.pscore
        errs.append(np.mean(w * log.reward) - out.value[0])
    errs = np.array(errs)
    assert abs(errs.mean()) < 4 * errs.std(ddof=1) / np.sqrt(errs.size)


def test_multiclass_on_a_bundled_set_with_logistic_regression():
    X, y = load_classification("iris")
    assert X.shape == (150, 4) and set(y.tolist()) == {0, 1, 2}
    out = multiclass_to_bandit(X, y, logging=ClassifierPolicy(0.5, C=0.01),
                               target=ClassifierPolicy(0.95), rng=0)
    assert out.log.n_rounds == 75 and 0.6 < out.value[0] <= 1.0


@pytest.mark.parametrize("X, y, kw, exc, msg", [
    pytest.param(np.zeros((4, 2)), [3, 3, 3, 3], {}, ValueError,
                 "`y` must be labels of at least 2 classes .*; got 1 class", id="one-class"),
    pytest.param(np.full((4, 2), np.nan), [0, 1, 0, 1], {}, ValueError,
                 "`X` must be finite", id="nan"),
    pytest.param(np.zeros((4, 2)), [0, 1, 0], {}, ValueError, "`y` must be a 1-d array of 4",
                 id="lengths"),
    pytest.param(np.zeros((4, 2)), [0, 1, 0, 1], {"logging": ClassifierPolicy(1.0)}, ValueError,
                 r"`logging.alpha` must be < 1", id="deterministic-logging"),
    pytest.param(np.zeros((4, 2)), [0, 1, 0, 1], {"target": "greedy"}, TypeError,
                 "`target` must be a ClassifierPolicy", id="target-type"),
    pytest.param(np.zeros((4, 2)), [0, 1, 0, 1], {"eval_size": 1.0}, ValueError,
                 r"`eval_size` must be a finite number in \(0.0, 1.0\); got 1.0", id="eval-size"),
])
def test_bad_multiclass_input(X, y, kw, exc, msg):
    args = dict(logging=ClassifierPolicy(0.5, Centroid()),
                target=ClassifierPolicy(0.9, Centroid()), rng=0) | kw
    with pytest.raises(exc, match=msg):
        multiclass_to_bandit(X, y, **args)


def test_bad_classifier_policy():
    with pytest.raises(ValueError,
                       match=r"`alpha` must be a finite number in \[0.0, 1.0\]; got 1.5"):
        ClassifierPolicy(1.5)
    with pytest.raises(TypeError, match="`classifier` must be 'logistic' or an object"):
        ClassifierPolicy(0.5, classifier=3)


def test_failing_classifier_is_named():
    class Broken(Centroid):
        def fit(self, X, y):
            raise RuntimeError("singular")

    with pytest.raises(ValueError, match="classifier of a policy .* failed .*: singular"):
        multiclass_to_bandit(*_blobs(), logging=ClassifierPolicy(0.5, Broken()),
                             target=ClassifierPolicy(0.5), rng=0)


def test_missing_scikit_learn_is_a_clear_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn", None)
    with pytest.raises(ImportError, match=r"pip install 'recloop\[real\]'"):
        load_classification("digits")
    with pytest.raises(ImportError, match="multiclass_to_bandit needs scikit-learn"):
        multiclass_to_bandit(*_blobs(), logging=ClassifierPolicy(0.5),
                             target=ClassifierPolicy(0.9), rng=0)
