"""The `ope_real` evaluation kind (truth from data: the Open Bandit Dataset's BTS log, the
multiclass protocol's labels) and the twin beside SLOPE in `estimator_selection`."""

import math

import numpy as np
import pytest

import evaluators
from recloop.experiments._common import child_rng, seed_sequence
from recloop.experiments._ope_real import ope_real
from tests.builtin_data import small_jester, small_obd, write_small_obd

pytest.importorskip("sklearn")


def _per_log(rows):
    out = {}
    for m in rows:
        out.setdefault((m.agent, m.variant), []).append(m)
    return out


def test_multiclass_truth_is_the_exact_value_of_each_logs_rows():
    from evaluators.datasets import ClassifierPolicy, load_classification, multiclass_to_bandit

    got = []
    targets = [{"name": "good", "alpha": 0.9, "C": 1.0}, {"name": "poor", "alpha": 0.3,
                                                           "C": 0.01}]
    rows = ope_real("iris", targets=targets, estimators=["ips", "snips"], n_logs=4, rng=7,
                    per_log=got.append)
    # the definition written out: one split per cell (child 0), log i = a bootstrap of the
    # evaluation rows with actions drawn from the logging policy (child (1, i))
    X, y = load_classification("iris")
    root = seed_sequence(7)
    data = multiclass_to_bandit(X, y, logging=ClassifierPolicy(alpha=0.2), target=[
        ClassifierPolicy(alpha=0.9, C=1.0), ClassifierPolicy(alpha=0.3, C=0.01)],
        rng=child_rng(root, 0))
    label = np.searchsorted(data.classes, y[data.eval_index])
    n, K = data.log.n_rounds, data.log.n_actions
    per = _per_log(got)
    for i in range(4):
        gen = child_rng(root, 1, i)
        idx = gen.integers(0, n, n)
        u = gen.random(n)
        action = np.array([min(int(np.searchsorted(np.cumsum(p), x, side="right")), K - 1)
                           for p, x in zip(data.log.pi_b[idx], u, strict=True)])
        for t, name in enumerate(("good", "poor")):
            pi = data.action_dist[t][idx]
            truth = sum(pi[j, label[idx][j]] for j in range(n)) / n
            ips = sum(pi[j, action[j]] / data.log.pi_b[idx][j, action[j]]
                      * (action[j] == label[idx][j]) for j in range(n)) / n
            m = per[name, "ips"][i]
            assert m.log == i and m.truth == pytest.approx(truth, abs=1e-12)
            assert m.estimate == pytest.approx(ips, abs=1e-12)
    summary = {(m.agent, m.variant, m.metric): m for m in rows}
    t_good = [m.truth for m in per["good", "ips"]]
    assert summary["good", "truth", "value"].estimate == pytest.approx(np.mean(t_good))
    err = [m.estimate - m.truth for m in per["good", "ips"]]
    assert summary["good", "ips", "rmse"].estimate == pytest.approx(
        math.sqrt(np.mean(np.square(err))))
    assert summary["good", "ips", "relative_error"].estimate == pytest.approx(
        np.mean([abs(m.estimate - m.truth) / m.truth for m in per["good", "ips"]]))
    assert ("good", "ips", "overlap") not in summary  # an exact truth has no interval


def test_obd_truth_is_the_bts_logs_click_rate_with_its_interval(tmp_path):
    from evaluators.datasets import bernoulli_ts_action_dist, load_open_bandit, read_bts_prior

    root_dir = write_small_obd(tmp_path / "obd", n=200)
    got = []
    rows = ope_real("obd", data=str(root_dir), campaign="men", estimators=["ips", "mips"],
                    n_logs=5, n_sim=2000, rng=3, per_log=got.append)
    bts = load_open_bandit(root_dir, behavior_policy="bts", campaign="men")
    random = load_open_bandit(root_dir, behavior_policy="random", campaign="men")
    truth = evaluators.wilson_estimate(int(bts.reward.sum()), bts.n_rounds)
    summary = {(m.variant, m.metric): m for m in rows}
    t = summary["truth", "value"]
    assert (t.estimate, t.ci_low, t.ci_high) == (truth.value, truth.ci_low, truth.ci_high)
    assert t.estimate == bts.reward.mean()
    root = seed_sequence(3)
    dist = bernoulli_ts_action_dist(read_bts_prior(root_dir / "prior_bts.yaml")["men"],
                                    random.n_actions, 3, n_sim=2000, rng=child_rng(root, 8))
    per = _per_log(got)["bts", "ips"]
    meet = []
    for i, m in enumerate(per):
        idx = child_rng(root, 1, i).integers(0, random.n_rounds, random.n_rounds)
        w = dist[random.action[idx], random.position[idx]] / random.pscore[idx]
        assert m.estimate == pytest.approx(float(np.mean(w * random.reward[idx])), abs=1e-15)
        assert m.truth == truth.value
        meet.append(m.ci_low <= truth.ci_high and truth.ci_low <= m.ci_high)
    assert summary["ips", "overlap"].estimate == pytest.approx(np.mean(meet))
    assert summary["mips", "nan_rate"].estimate == 0.0  # item features as embeddings


def test_bad_ope_real_arguments(tmp_path):
    with pytest.raises(ValueError, match="`data`.*Open Bandit Dataset"):
        ope_real("obd", n_logs=2)
    with pytest.raises(ValueError, match="`source`"):
        ope_real("mnist", n_logs=2)
    with pytest.raises(ValueError, match=r"`targets\[0\]\.gamma`"):
        ope_real("iris", targets=[{"name": "x", "gamma": 1}], n_logs=2)
    with pytest.raises(ValueError, match="distinct names"):
        ope_real("iris", targets=[{"name": "x"}, {"name": "x"}], n_logs=2)
    with pytest.raises(ValueError, match="`n_logs`"):
        ope_real("iris", n_logs=1)
    with pytest.raises(ValueError, match=r"`logging.alpha`"):
        ope_real("iris", logging_alpha=1.0, n_logs=2)


def test_the_scenario_says_what_data_it_needs(tmp_path, capsys):
    from recloop._cli import main

    assert main(["validate", "ope_real"]) == 2
    err = capsys.readouterr().err
    assert "evaluations[0].data: expected the Open Bandit Dataset's folder" in err
    assert "--set evaluations.N.data=PATH" in err and "Traceback" not in err
    assert main(["validate", "ope_real", "--set", f"evaluations.0.data={tmp_path}"]) == 2
    assert f"no file {tmp_path}/random/all/all.csv" in capsys.readouterr().err
    obd = small_obd()
    assert main(["validate", "ope_real", "--set", f"evaluations.0.data={obd}",
                 "--set", f"evaluations.2.data={obd}"]) == 2
    err = capsys.readouterr().err
    assert "evaluations[4].data: expected a Jester ratings file" in err
    assert main(["validate", "ope_real", "--set", f"evaluations.0.data={obd}",
                 "--set", f"evaluations.2.data={obd}", "--set",
                 f"evaluations.4.data={tmp_path / 'none.csv'}"]) == 2
    assert "(no such file;" in capsys.readouterr().err
    assert main(["validate", "ope_real", "--set", f"evaluations.0.data={obd}",
                 "--set", f"evaluations.2.data={obd}", "--set",
                 f"evaluations.4.data={small_jester()}"]) == 0
    assert main(["list"]) == 0
    assert "[needs your data: --set evaluations.N.data=PATH" in capsys.readouterr().out


@pytest.mark.slow
def test_ope_real_runs_from_the_cli(tmp_path, capsys):
    from recloop._cli import main

    scenario = tmp_path / "s.toml"
    scenario.write_text(f"""
[run]
name = "real"
[[evaluations]]
kind = "ope_real"
source = "obd"
data = "{small_obd()}"
n_logs = 3
n_sim = 1000
estimators = ["ips", "doubly_robust"]
[[evaluations]]
kind = "ope_real"
name = "mc"
source = "iris"
targets = [{{ name = "good" }}]
n_logs = 3
estimators = ["snips", {{ name = "twin", factory = "select_by_twin", params = {{ n_twins = 2 }} }}]
""")
    assert main(["run", str(scenario), "--out", str(tmp_path / "runs"), "-q",
                 "--workers", "1"]) == 0
    report = next((tmp_path / "runs").rglob("report.md")).read_text()
    assert "intervals overlap" in report and "| twin |" in report


def test_the_twin_beside_slope_leaves_slope_unchanged():
    from recloop.experiments._selection import estimator_selection

    kw = dict(family="ips", logging="softmax", beta=0.0, n_rounds=100, n_logs=6,
              n_actions=20, reward_noise=1.0, rng=1, n_resamples=20)
    alone = estimator_selection("bred_linear", **kw)
    per: list = []
    both = estimator_selection("bred_linear", **kw, n_twins=3, per_log=per.append)
    def strip(m):  # the setting names n_twins
        return (m.variant, m.metric, m.estimate, m.ci_low, m.ci_high, m.n)

    # keyed streams: SLOPE's and the candidates' numbers do not move
    assert [strip(m) for m in both if m.variant != "twin"] == [strip(m) for m in alone]
    got = {(m.variant, m.metric): m for m in both}
    cands = [m for m in both if m.metric == "rmse" and "=" in m.variant]
    oracle = min(m.estimate for m in cands)
    assert oracle < got["untuned", "rmse"].estimate  # clipping helps: a choice to make
    assert got["twin", "regret"].estimate == pytest.approx(got["twin", "rmse"].estimate
                                                           - oracle)
    # the twin returns its pick's estimate on the log: one of the candidates' on that log
    by_log: dict = {}
    for m in per:
        by_log.setdefault(m.log, {})[m.variant] = m.estimate
    for values in by_log.values():
        assert values["twin"] in [v for k, v in values.items() if "=" in k]
    with pytest.raises(ValueError, match="`n_twins`"):
        estimator_selection("bred_linear", **{**kw, "n_twins": 1})


def test_jester_truth_is_every_actions_known_reward_under_the_target():
    """Users who rated every joke of the set: the first four jokes' ratings the context, the
    others the actions, reward 1 for a rating of 5 or more; each log's truth is
    mean_j sum_a pi(a|x_j) r_j(a) over its rows, written out from the ratings file."""
    from evaluators.datasets import (
        JESTER_JOKES,
        ClassifierPolicy,
        full_information_to_bandit,
        jester_full_information,
    )

    path = small_jester()
    got = []
    ope_real("jester", data=str(path), targets=[{"name": "good"}], estimators=["ips"],
             n_logs=3, rng=2, per_log=got.append)
    ratings = {}
    for line in path.read_text().splitlines()[1:]:
        u, j, r = line.split(",")
        ratings.setdefault(int(u), {})[int(j)] = float(r)
    users = sorted(u for u, d in ratings.items() if all(j in d for j in JESTER_JOKES))
    X = np.array([[ratings[u][j] / 10 for j in JESTER_JOKES[:4]] for u in users])
    R = np.array([[float(ratings[u][j] >= 5.0) for j in JESTER_JOKES[4:]] for u in users])
    full = jester_full_information(path)
    assert np.array_equal(full.X, X) and np.array_equal(full.rewards, R)
    best = np.array([int(np.argmax([ratings[u][j] for j in JESTER_JOKES[4:]])) for u in users])
    assert np.array_equal(full.labels, best)
    root = seed_sequence(2)
    data = full_information_to_bandit(X, R, labels=best, logging=ClassifierPolicy(alpha=0.2),
                                      target=[ClassifierPolicy(alpha=0.9)],
                                      rng=child_rng(root, 0))
    n = data.log.n_rounds
    for i, m in enumerate(got):
        idx = child_rng(root, 1, i).integers(0, n, n)
        truth = sum(sum(data.action_dist[0][j, a] * data.rewards[j, a] for a in range(4))
                    for j in idx) / n
        assert m.truth == pytest.approx(truth, abs=1e-12)


def test_selectors_choose_among_the_estimators_and_are_scored_against_the_oracle():
    got = []
    est = ["ips", "snips", "doubly_robust", "direct_method"]
    sel = ["select_by_twin", "select_by_slope",
           ("cv3", __import__("functools").partial(evaluators.select_by_cv, n_splits=3))]
    rows = ope_real("iris", targets=[{"name": "good"}], estimators=est, selectors=sel,
                    n_logs=4, rng=5, per_log=got.append)
    per = _per_log(got)
    summary = {(m.variant, m.metric): m for m in rows}
    rmse = {e: math.sqrt(np.mean([(m.estimate - m.truth) ** 2 for m in per["good", e]]))
            for e in est}
    oracle = min(rmse.values())
    assert summary["oracle", "rmse"].estimate == oracle
    assert est[int(summary["oracle", "choice"].estimate)] == min(rmse, key=rmse.get)
    for s in ("select_by_twin", "select_by_slope", "cv3"):
        r = math.sqrt(np.mean([(m.estimate - m.truth) ** 2 for m in per["good", s]]))
        assert summary[s, "oracle_ratio"].estimate == pytest.approx(r / oracle)
        # every pick is one of the estimators' own estimates on that log
        near = 0
        for i, m in enumerate(per["good", s]):
            picked = [e for e in est if per["good", e][i].estimate == m.estimate]
            assert picked
            near += rmse[picked[0]] <= 1.2 * oracle
        assert summary[s, "pick_within"].estimate == near / 4
        assert 0 <= summary[s, "warned"].estimate <= 1
    with pytest.raises(ValueError, match="`selectors` must be names distinct"):
        ope_real("iris", estimators=["ips", "snips"], selectors=["ips"], n_logs=2)
    with pytest.raises(ValueError, match="`estimators` must be at least 2"):
        ope_real("iris", estimators=["ips"], selectors=["select_by_cv"], n_logs=2)


def test_the_selectors_beside_slope_give_the_same_rows_in_chunks():
    """estimator_selection's selectors (the twin, CV-OPE, PAS-IF) on every log, the logs cut
    into chunks as the harness cuts a large cell: the same rows as in one piece; each
    selector's variant has SLOPE's metrics and `warned`."""
    import pickle

    from recloop.experiments._selection import _Selection, finish

    kw = dict(family="dr_os", values=[1.0, 100.0, float("inf")], within=0.1,
              logging="softmax", beta=10.0, epsilon=0.2, n_rounds=80, n_logs=4, n_actions=5,
              reward_noise=0.0, n_twins=2, selectors=["cv", "pasif"], n_resamples=20,
              rng=seed_sequence(3), evaluation="sel")
    study = _Selection("bred_linear", [{"name": "t", "policy": "epsilon_greedy",
                                        "epsilon": 0.1}], **kw)
    whole = finish(study.header, study.logs(0, 4))
    parts = pickle.loads(pickle.dumps([study.logs(0, 1), study.logs(1, 4)]))  # as workers
    assert repr(finish(study.header, parts[0] + parts[1])) == repr(whole)
    got = {(m.variant, m.metric) for m in whole}
    for sel in ("twin", "cv", "pasif"):
        assert {(sel, m) for m in ("value", "rmse", "regret", "within", "warned")} <= got
    with pytest.raises(ValueError, match="`selectors` must be a list of 'twin', 'cv', "
                       "'pasif'"):
        _Selection("bred_linear", [{"name": "t", "policy": "uniform"}],
                   **{**kw, "selectors": ["oracle"]})


def test_pick_within_counts_the_picks_within_1_2_times_the_oracles_rmse():
    """A selector that always picks the second of two estimators, one a hair off the other
    (the oracle): its picks are within 1.2x (not within 1.0x) of the oracle's RMSE."""
    def shifted(log, action_dist):
        e = evaluators.snips(log, action_dist)
        s = 0.002 if log.action[0] % 2 else -0.002  # up on some logs, down on others
        return evaluators.Estimate(e.value + s, e.stderr, e.ci_low + s, e.ci_high + s, e.n)

    def second(log, action_dist, *, candidates, rng):
        label, f = candidates[1]
        e = f(log, action_dist)
        return evaluators.Selection(e.value, e.stderr, e.ci_low, e.ci_high, e.n,
                                    selected=label, method="second")

    rows = ope_real("iris", targets=[{"name": "good"}], estimators=[
        ("snips", evaluators.snips), ("shifted", shifted)], selectors=[("second", second)],
        n_logs=6, rng=1)
    got = {(m.variant, m.metric): m.estimate for m in rows}
    assert got["oracle", "choice"] == 0.0
    assert 1.0 < got["second", "oracle_ratio"] < 1.2
    assert got["second", "pick_within"] == 1.0 and got["second", "warned"] == 0.0
