"""Users' own agents and estimators in scenario files: import paths, entry points, --path,
validation before anything is written, errors of users' code during a run."""

import json
import sys
import textwrap

import pytest

from recloop._cli import main
from recloop._registry import registry

PLUGIN = '''
import numpy as np


class Greedy:
    """Plays the arm with the best mean so far; exact action probabilities (one-hot)."""

    def __init__(self, start=0):
        self.start = start

    def reset(self, rng=None):
        self._rng = np.random.default_rng(rng)
        self._sums = self._counts = None

    def _arms(self, observation):
        avail = np.asarray(observation["available"], bool)
        if not avail.any():
            raise ValueError("no available arm")
        if self._sums is None:
            self._sums = np.zeros(avail.size)
            self._counts = np.zeros(avail.size)
        return avail

    def act(self, observation):
        return int(np.flatnonzero(self.action_probabilities(observation))[0])

    def update(self, observation, action, reward):
        self._arms(observation)
        self._sums[action] += reward
        self._counts[action] += 1

    def action_probabilities(self, observation):
        avail = self._arms(observation)
        means = np.where(self._counts > 0, self._sums / np.maximum(self._counts, 1), 1.0)
        means = np.where(avail, means, -np.inf)
        p = np.zeros(avail.size)
        p[int(np.argmax(means))] = 1.0
        return p


def noisy_ips(log, action_dist, *, rng=None, scale=0.0):
    """IPS plus a little noise drawn from the cell's stream."""
    a = np.asarray(action_dist)[:, :, 0]
    w = a[np.arange(log.n_rounds), log.action] / log.pscore
    return float(np.mean(w * log.reward) + scale * rng.normal())


def fails_on_big_logs(log, action_dist, *, rng=None):
    if log.n_rounds > 100:
        raise RuntimeError("my estimator broke")
    return 0.5


def one_argument(log):
    return 0.0


def raises(log, action_dist):
    raise ValueError("always")


def bad_factory(start):
    raise ValueError(f"start must be small; got {start}")


class NoAct:
    def reset(self, rng=None):
        pass


class BadArm(Greedy):
    def act(self, observation):
        return 10_000


NOT_CALLABLE = 3
'''


@pytest.fixture
def plugin_dir(tmp_path):
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "myplug.py").write_text(PLUGIN)
    yield folder
    sys.modules.pop("myplug", None)
    while str(folder) in sys.path:
        sys.path.remove(str(folder))


def scenario(tmp_path, agents="", estimators='["ips", "myplug:noisy_ips"]', extra=""):
    text = textwrap.dedent("""\
        [run]
        name = "plug"

        [world]
        preset = "bred_linear"
        """) + agents + textwrap.dedent(f"""
        [[evaluations]]
        kind = "ope"
        n_rounds = 200
        n_logs = 4
        n_train = 100
        targets = [{{name = "unif", policy = "uniform"}}]
        estimators = {estimators}
        """) + extra
    path = tmp_path / "plug.toml"
    path.write_text(text)
    return path


AGENT = '''
[[agents]]
name = "mine"
kind = "python"
factory = "myplug:Greedy"
params = { start = 1 }
'''


def rows_of(run_dir):
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def test_agent_and_estimator_by_import_path_run_with_the_harness(tmp_path, plugin_dir,
                                                                 capsys):
    path = scenario(tmp_path, AGENT, extra="sweep = { reward_noise = [0.0, 0.1] }\n")
    out = tmp_path / "runs"
    assert main(["run", str(path), "--path", str(plugin_dir), "--out", str(out), "-q",
                 "--workers", "1"]) == 0
    rows = rows_of(out / "plug")
    variants = {(r["agent"], r["variant"]) for r in rows}
    assert {("mine", "ips"), ("mine", "noisy_ips"), ("unif", "noisy_ips")} <= variants
    value = next(r for r in rows if r["agent"] == "mine" and r["variant"] == "ips"
                 and r["metric"] == "value")
    assert 0.0 <= value["truth"] <= 1.0
    env = json.loads((out / "plug" / "environment.json").read_text())
    assert env["paths"] == [str(plugin_dir.resolve())]
    # two workers (spawned processes import the plugin through --path): the same bytes
    out2 = tmp_path / "runs2"
    assert main(["run", str(path), "--path", str(plugin_dir), "--out", str(out2), "-q",
                 "--workers", "2"]) == 0
    assert (out2 / "plug" / "results.csv").read_bytes() == \
        (out / "plug" / "results.csv").read_bytes()


def test_plugin_draws_come_from_the_cell(tmp_path, plugin_dir):
    est = '[{name = "n", factory = "myplug:noisy_ips", params = {scale = 0.5}}]'
    path = scenario(tmp_path, estimators=est)
    for out in ("a", "b"):
        assert main(["run", str(path), "--path", str(plugin_dir), "--out",
                     str(tmp_path / out), "-q"]) == 0
    a = (tmp_path / "a" / "plug" / "results.csv").read_bytes()
    assert a == (tmp_path / "b" / "plug" / "results.csv").read_bytes()
    assert main(["run", str(path), "--path", str(plugin_dir), "--out", str(tmp_path / "c"),
                 "-q", "--seed", "5"]) == 0
    assert (tmp_path / "c" / "plug" / "results.csv").read_bytes() != a


@pytest.mark.parametrize("agents, estimators, key, words", [
    pytest.param(AGENT.replace("myplug:Greedy", "nosuchmod:Greedy"), '["ips"]',
                 "agents[0].factory", "no module named 'nosuchmod'", id="module-not-found"),
    pytest.param(AGENT.replace("myplug:Greedy", "myplug:Greed"), '["ips"]',
                 "agents[0].factory", "no attribute 'Greed'", id="attribute-missing"),
    pytest.param(AGENT.replace("myplug:Greedy", "myplug:NOT_CALLABLE"), '["ips"]',
                 "agents[0].factory", "expected a class or a function", id="not-callable"),
    pytest.param(AGENT.replace("myplug:Greedy", "myplug:bad_factory"), '["ips"]',
                 "agents[0].factory", "start must be small", id="factory-raises"),
    pytest.param(AGENT.replace("params = { start = 1 }", "params = { stat = 1 }"), '["ips"]',
                 "agents[0].factory", "stat", id="unknown-param"),
    pytest.param(AGENT.replace("myplug:Greedy", "myplug:NoAct").replace(
        "params = { start = 1 }", ""), '["ips"]', "agents[0].factory", "act/update",
        id="not-an-agent"),
    pytest.param(AGENT.replace("myplug:Greedy", "myplug:BadArm"), '["ips"]',
                 "agents[0].factory", "check_agent", id="fails-check-agent"),
    pytest.param(AGENT.replace("params = { start = 1 }", "params = 3"), '["ips"]',
                 "agents[0].params", "expected a table", id="params-not-a-table"),
    pytest.param("", '["myplug:one_argument"]', "evaluations[0].estimators[0]",
                 "signature", id="estimator-signature"),
    pytest.param("", '["myplug:raises"]', "evaluations[0].estimators[0]", "always",
                 id="estimator-raises"),
    pytest.param("", '["ipz"]', "evaluations[0].estimators[0]", "did you mean 'ips'",
                 id="unknown-estimator"),
    pytest.param("", '["replay"]', "evaluations[0].estimators[0]", "learning",
                 id="wrong-family"),
    pytest.param("", '[{name = "x", factory = "myplug:noisy_ips", params = {scal = 1}}]',
                 "evaluations[0].estimators[0].factory", "scal", id="estimator-param"),
    pytest.param("", '["ips", "ips"]', "evaluations[0].estimators[1]", "distinct",
                 id="repeated-name"),
])
def test_bad_references_are_one_line_each_and_nothing_is_written(
        tmp_path, plugin_dir, capsys, agents, estimators, key, words):
    path = scenario(tmp_path, agents, estimators)
    out = tmp_path / "runs"
    code = main(["run", str(path), "--path", str(plugin_dir), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert f": {key}: " in lines[0] and words in lines[0], lines[0]
    assert not out.exists()


def test_validate_needs_the_path_and_says_so(tmp_path, plugin_dir, capsys):
    path = scenario(tmp_path, AGENT)
    assert main(["validate", str(path)]) == 2
    assert "--path" in capsys.readouterr().err
    assert main(["validate", str(path), "--path", str(plugin_dir)]) == 0
    assert main(["validate", str(path), "--path", str(tmp_path / "nope")]) == 2
    assert "no such folder" in capsys.readouterr().err


def test_users_errors_during_a_run(tmp_path, plugin_dir, capsys):
    # an estimator that only fails on larger logs passes validation (tried on 50 records)
    # and fails in the cell: nan for it, counted in nan_rate, the other rows kept
    path = scenario(tmp_path, estimators='["ips", "myplug:fails_on_big_logs"]')
    out = tmp_path / "runs"
    assert main(["run", str(path), "--path", str(plugin_dir), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "errors.log" in text and "my estimator broke" in text
    log = (out / "plug" / "errors.log").read_text()
    assert "RuntimeError: my estimator broke" in log and "Traceback" in log
    assert "ope/*/seed=0" in log  # names the cell
    rows = {(r["variant"], r["metric"]): r for r in rows_of(out / "plug")}
    assert rows["fails_on_big_logs", "nan_rate"]["estimate"] == 1.0
    assert rows["ips", "nan_rate"]["estimate"] == 0.0 and rows["ips", "value"]["n"] == 4


def _entry_point_dist(folder, lines):
    dist = folder / "myplug-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: myplug\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("\n".join(lines) + "\n")


@pytest.fixture
def fresh_registry(monkeypatch):
    registry.cache_clear()
    yield
    registry.cache_clear()


def test_entry_points_name_kinds_like_builtins(tmp_path, plugin_dir, capsys, monkeypatch,
                                               fresh_registry):
    _entry_point_dist(plugin_dir, ["[recloop.agents]", "greedy = myplug:Greedy",
                                   "[recloop.estimators]", "noisy_ips = myplug:noisy_ips"])
    monkeypatch.syspath_prepend(str(plugin_dir))
    assert main(["list"]) == 0
    listed = capsys.readouterr().out
    assert "greedy" in listed and "entry point myplug:Greedy of myplug" in listed
    assert "noisy_ips" in listed
    agents = '\n[[agents]]\nname = "g"\nkind = "greedy"\nstart = 2\n'
    path = scenario(tmp_path, agents, '["ips", "noisy_ips"]')
    out = tmp_path / "runs"
    assert main(["run", str(path), "--out", str(out), "-q"]) == 0
    variants = {(r["agent"], r["variant"]) for r in rows_of(out / "plug")}
    assert ("g", "noisy_ips") in variants
    # the plugin's own parameters are checked by building it
    (tmp_path / "bad.toml").write_text(path.read_text().replace("start = 2", "strat = 2"))
    assert main(["validate", str(tmp_path / "bad.toml")]) == 2
    assert "agents[0].kind" in capsys.readouterr().err


def test_a_plugin_kind_clashing_with_a_builtin_is_an_error(tmp_path, plugin_dir, capsys,
                                                           monkeypatch, fresh_registry):
    _entry_point_dist(plugin_dir, ["[recloop.estimators]", "ips = myplug:noisy_ips"])
    monkeypatch.syspath_prepend(str(plugin_dir))
    assert main(["list"]) == 2
    err = capsys.readouterr().err
    assert "'ips'" in err and "clashes with the built-in" in err
    assert main(["validate", str(scenario(tmp_path))]) == 2
