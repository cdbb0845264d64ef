"""The offline_vs_online experiment: evaluators' rankings of agents against the true ranking."""

import math

import numpy as np
import pytest

import agents
import simulator
from recloop._selfcheck import FixedArm  # a static policy: cheap to replay and to simulate
from recloop.experiments._offline_vs_online import NoRankingWarning, offline_vs_online

T = 150


def make_ucb1(rng=None):
    a = agents.UCB1()
    a.reset(rng)
    return a


AGENTS = {"arm0": lambda rng=None: FixedArm(0), "arm5": lambda rng=None: FixedArm(5),
          "arm8": lambda rng=None: FixedArm(8), "ucb1": make_ucb1}
SMALL = dict(T=T, n_logs=4, n_bootstrap=2, n_truth_runs=4, n_resamples=200)
NAME_OF = {id(make): name for name, make in AGENTS.items()}  # evaluators see the factory


def by_key(rows):
    return {(m.agent, m.variant, m.metric): m for m in rows}


@pytest.fixture(scope="module")
def run():
    return offline_vs_online("bred_linear", AGENTS, rng=7, **SMALL)


def test_rows_and_tau_range(run):
    got = by_key(run)
    assert len(got) == len(run)
    for e in ("replay", "bred"):
        for variant in ("T", "T_over_K"):
            tau = got[e, variant, "kendall_tau"]
            assert -1.0 <= tau.estimate <= 1.0
            assert tau.n == 4 and tau.params == {"T": T}
            assert -1.0 <= tau.ci_low <= tau.estimate <= tau.ci_high <= 1.0
        for name in AGENTS:
            v = got[name, e, "value"]
            assert v.truth == got[name, "T", "online_value"].estimate and v.n == 4
    for name in AGENTS:
        assert got[name, "T_over_K", "online_value"].n == 4
    # a static policy's value does not depend on the horizon (same runs, same contexts)
    assert abs(got["arm0", "T", "online_value"].estimate
               - got["arm0", "T_over_K", "online_value"].estimate) < 0.2
    assert -1.0 <= got["online_T_over_K", "T", "kendall_tau"].estimate <= 1.0


def test_same_rng_same_rows(run):
    again = offline_vs_online("bred_linear", AGENTS, rng=7, **SMALL)
    assert repr(again) == repr(run)  # repr: nan fields compare equal
    other = offline_vs_online("bred_linear", AGENTS, rng=8, **SMALL)
    assert repr(other) != repr(run)


def test_oracle_ranks_perfectly_and_anti_oracle_reverses(run):
    truth = {m.agent: m.estimate for m in run if m.metric == "online_value" and m.variant == "T"}
    rows = offline_vs_online(
        "bred_linear", AGENTS, rng=7,
        estimators={"oracle": lambda log, make, *, rng: truth[NAME_OF[id(make)]],
                    "anti": lambda log, make, *, rng: -truth[NAME_OF[id(make)]]}, **SMALL)
    got = by_key(rows)
    assert got["oracle", "T", "kendall_tau"].estimate == pytest.approx(1.0)
    assert got["oracle", "T", "kendall_tau"].ci_low == pytest.approx(1.0)
    assert got["anti", "T", "kendall_tau"].estimate == pytest.approx(-1.0)
    # against the truth at T/K the oracle agrees exactly as much as the two truths do
    assert got["oracle", "T_over_K", "kendall_tau"].estimate == pytest.approx(
        got["online_T_over_K", "T", "kendall_tau"].estimate)
    # the truths are the same as in the built-in run: streams are keyed by agent, not order
    assert got["arm5", "oracle", "value"].estimate == truth["arm5"]


def test_streams_are_keyed_by_name(run):
    fewer = {k: AGENTS[k] for k in ("ucb1", "arm5")}
    rows = by_key(offline_vs_online("bred_linear", fewer, rng=7, **SMALL))
    full = by_key(run)
    for key in (("ucb1", "replay", "value"), ("ucb1", "bred", "value"),
                ("arm5", "T", "online_value")):
        assert rows[key].estimate == full[key].estimate


def test_no_ranking_is_nan_with_a_warning():
    with pytest.warns(NoRankingWarning, match="flat"):
        rows = offline_vs_online("bred_linear", AGENTS, rng=1,
                                 estimators={"flat": lambda log, make, *, rng: 0.5}, **SMALL)
    tau = by_key(rows)["flat", "T", "kendall_tau"]
    assert math.isnan(tau.estimate) and tau.n == 0


DYN = simulator.LinearBanditConfig(n_arms=12, n_universal=4, lifetime=20, n_alive=4)


@pytest.mark.parametrize("args, kwargs, exc, match", [
    pytest.param(("bred_linear", {"a": make_ucb1}), {}, ValueError, "at least 2",
                 id="one-agent"),
    pytest.param(("bred_linear", AGENTS), dict(estimators=["replai"]), ValueError,
                 r"`estimators\[0\]`", id="unknown-estimator"),
    pytest.param(("bred_linear", AGENTS), dict(estimators="replay"), TypeError, "`estimators`",
                 id="str-estimators"),
    pytest.param(("bred_linear", AGENTS), dict(estimators=[]), ValueError, "`estimators`",
                 id="no-estimator"),
    pytest.param(("bred_linear", AGENTS), dict(estimators=["bred", "bred"]), ValueError,
                 "repeat", id="dup-estimator"),
    pytest.param(("bred_linear", AGENTS), dict(n_logs=0), ValueError, "`n_logs`", id="n_logs"),
    pytest.param(("bred_linear", AGENTS), dict(n_truth_runs=1), ValueError, "`n_truth_runs`",
                 id="truth-runs"),
    pytest.param(("bred_linear", AGENTS), dict(n_resamples=0), ValueError, "`n_resamples`",
                 id="resamples"),
    pytest.param(("bred_linear", AGENTS), dict(n_bootstrap=0), ValueError, "`n_bootstrap`",
                 id="bootstrap"),
    pytest.param(("bred_linear", AGENTS), dict(T=1.5), TypeError, "`T`", id="T-type"),
    pytest.param((DYN, AGENTS), dict(T=10_000), ValueError, "horizon", id="T-horizon"),
    pytest.param((42, AGENTS), {}, TypeError, "`config`", id="config"),
    pytest.param(("bred_linear", {**AGENTS, "replay": make_ucb1}), {}, ValueError,
                 "named like an evaluator", id="name-clash"),
    pytest.param(("bred_linear", AGENTS), dict(estimators={"x": 3}), TypeError,
                 r"`estimators\['x'\]`", id="not-callable"),
])
def test_bad_parameters_are_named(args, kwargs, exc, match):
    kw = {"T": T, **kwargs}
    with pytest.raises(exc, match=match):
        offline_vs_online(*args, **kw)


def test_estimator_returning_garbage_is_a_type_error():
    with pytest.raises(TypeError, match="float or an Estimate"):
        offline_vs_online("bred_linear", AGENTS, estimators={"x": lambda *a, rng: "high"},
                          rng=0, **SMALL)


def test_tau_summary_over_logs(run):
    truth = {m.agent: m.estimate for m in run if m.metric == "online_value" and m.variant == "T"}
    calls = []

    def alternating(log, make, *, rng):
        # called agent by agent, log by log: the reversed order on even logs
        i = len(calls) // len(AGENTS)
        name = NAME_OF[id(make)]
        calls.append(name)
        return (1.0 if i % 2 else -1.0) * truth[name]

    rows = offline_vs_online("bred_linear", AGENTS, rng=7, estimators={"alt": alternating},
                             **{**SMALL, "n_logs": 6})
    tau = by_key(rows)["alt", "T", "kendall_tau"]
    assert tau.n == 6 and tau.estimate == pytest.approx(0.0)
    assert tau.stderr == pytest.approx(np.std([-1, 1] * 3, ddof=1) / math.sqrt(6))
    assert -1.0 <= tau.ci_low < 0.0 < tau.ci_high <= 1.0


def test_figure(run, tmp_path):
    from recloop.experiments._offline_vs_online import plot_offline_vs_online

    paths = plot_offline_vs_online(run, tmp_path / "fig")
    assert [p.name for p in paths] == [f"offline_vs_online_T{T}.png"]
    assert paths[0].stat().st_size > 1000


@pytest.mark.filterwarnings("ignore::recloop.experiments._offline_vs_online.NoRankingWarning")
def test_scenario_adapter(tmp_path):
    """The registry's adapter: world, agents with their parameters, T and seed reach the run."""
    import json

    from recloop._runner import run_scenario
    from recloop._scenario import load_scenario

    text = """
[run]
name = "ovo"
seed = 3
[world]
preset = "bred_linear"
[[agents]]
name = "ucb"
kind = "ucb1"
[[agents]]
name = "lin"
kind = "linucb"
alpha = 0.3
[[evaluations]]
kind = "offline_vs_online"
T = 60
n_logs = 2
n_bootstrap = 2
n_truth_runs = 3
n_resamples = 50
estimators = ["replay"]
"""
    (tmp_path / "s.toml").write_text(text)
    sc = load_scenario(tmp_path / "s.toml")
    run_scenario(sc, out=tmp_path / "out", workers=1, quiet=True, report=False)
    rows = [json.loads(line) for line in
            (tmp_path / "out" / "ovo" / "results.jsonl").read_text().splitlines()]
    got = {(r["agent"], r["variant"], r["metric"]) for r in rows}
    assert ("replay", "T", "kendall_tau") in got and ("lin", "replay", "value") in got
    assert not any(r["variant"] == "bred" for r in rows)
    assert {r["seed"] for r in rows} == {3} and all(r["params"]["T"] == 60 for r in rows)
    bad = text.replace('kind = "linucb"\nalpha = 0.3', 'kind = "linucb"').replace(
        "T = 60", "T = 60\nestimators_ = 1")
    (tmp_path / "bad.toml").write_text(bad.replace('[[agents]]\nname = "lin"\nkind = "linucb"\n',
                                                   ""))
    from recloop._scenario import ScenarioError

    with pytest.raises(ScenarioError) as info:
        load_scenario(tmp_path / "bad.toml")
    joined = "\n".join(info.value.problems)
    assert "estimators_" in joined and "at least 2" in joined
