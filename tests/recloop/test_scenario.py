"""Scenario files: defaults, strict validation, sweep expansion, TOML round trip, reference."""

import inspect
import re
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recloop._registry import registry
from recloop._scenario import (
    ScenarioError,
    builtin_scenarios,
    dumps_toml,
    load_scenario,
    loads_scenario,
    scenario_keys,
    sweep_values,
)

TINY = """
[run]
name = "tiny"
replicates = 2

[[agents]]
name = "a0"
kind = "fixed_arm"

[[agents]]
name = "a1"
kind = "fixed_arm"
arm = 1

[[evaluations]]
kind = "selfcheck"
n = 20
sweep = { n_arms = [2, 3] }
"""


def problems_of(text: str, file: str = "f.toml") -> list[str]:
    with pytest.raises(ScenarioError) as info:
        loads_scenario(text, file)
    return info.value.problems


def test_defaults_are_filled_in():
    sc = loads_scenario(TINY)
    run = sc.data["run"]
    assert run["seeds"] == [0, 1] and "seed" not in run and "replicates" not in run
    assert run["description"] == "" and run["horizon"] == 0
    assert sc.data["agents"][0] == {"name": "a0", "kind": "fixed_arm", "arm": 0}
    ev = sc.data["evaluations"][0]
    assert ev["name"] == "selfcheck" and ev["agents"] == ["a0", "a1"]
    assert ev["ticks"] == 1 and ev["n"] == 20 and "n_arms" not in ev
    assert sweep_values(ev) == [{"n_arms": 2}, {"n_arms": 3}]


def test_explicit_seeds_and_seed_override():
    sc = loads_scenario(TINY.replace("replicates = 2", "seeds = [5, 9]"))
    assert sc.seeds == [5, 9]
    assert sc.with_seed(100).seeds == [100, 101]
    assert sc.seeds == [5, 9]  # with_seed does not mutate


def test_sweep_is_a_cartesian_product():
    ev = {"sweep": {"a": [1, 2], "b": ["x", "y", "z"]}}
    combos = sweep_values(ev)
    assert len(combos) == 6
    assert {(c["a"], c["b"]) for c in combos} == {(a, b) for a in (1, 2) for b in "xyz"}
    assert sweep_values({}) == [{}]


def test_resolved_toml_round_trips():
    sc = loads_scenario(TINY)
    again = loads_scenario(sc.to_toml())
    assert again.data == sc.data
    assert tomllib.loads(sc.to_toml()) == sc.data


def test_toml_writer_escapes_strings():
    data = {"run": {"s": 'quote " back \\ tab \t nl \n del \x7f é \U0001f600', "x": 1.5e-300,
                    "inf": float("inf")}}
    assert tomllib.loads(dumps_toml(data)) == data


def test_every_problem_is_reported_at_once():
    text = """
[run]
name = "bad name/../x"
replicates = 0
sede = 3

[[agents]]
name = "a0"
kind = "fixed_arm"
arm = -1

[[agents]]
name = "a0"
kind = "fixed_armm"

[[evaluations]]
kind = "selfcheck"
n = "many"
agents = ["a0", "nobody"]
sweep = { ticks = [1, 0] }

[extra]
x = 1
"""
    problems = problems_of(text)
    joined = "\n".join(problems)
    expected = [
        "f.toml: run.name: expected a name",
        "f.toml: run.replicates: expected an integer in [1, 100000], got 0",
        "f.toml: run.sede: expected one of the keys",
        "(did you mean 'seed'?)",
        "f.toml: agents[0].arm: expected an integer >= 0, got -1",
        "f.toml: agents[1].kind: expected one of 'constant', ",
        "(did you mean 'fixed_arm'?), got 'fixed_armm'",
        "f.toml: evaluations[0].n: expected an integer in [1, 10000000], got str 'many'",
        "f.toml: evaluations[0].agents[1]: expected the name of an agent defined in "
        "[[agents]], got 'nobody'",
        "f.toml: evaluations[0].sweep.ticks[1]: expected an integer in [1, 1000], got 0",
        "f.toml: extra: expected one of the keys agents, evaluations, run, world",
    ]
    for piece in expected:
        assert piece in joined, piece
    assert all(re.match(r"f\.toml: [^ ]+: expected .*, got ", p) for p in problems), problems


def test_unknown_parameter_suggests_the_closest():
    problems = problems_of(TINY.replace("n = 20", "nn = 20"))
    assert len(problems) == 1
    assert problems[0].startswith("f.toml: evaluations[0].nn: expected one of the keys")
    assert "(did you mean 'n'?)" in problems[0]


def test_missing_tables_and_required_keys():
    problems = problems_of("[run]\ndescription = 'x'\n")
    joined = "\n".join(problems)
    assert "f.toml: run.name: expected" in joined and "required key missing" in joined
    assert "f.toml: evaluations: expected at least one [[evaluations]] table" in joined


def test_swept_and_set_is_an_error():
    problems = problems_of(TINY.replace("n = 20", "n = 20\nn_arms = 4"))
    assert any("evaluations[0].sweep.n_arms: expected the parameter either swept or set"
               in p for p in problems)


def test_sweep_of_unknown_or_empty_values():
    problems = problems_of(TINY.replace("sweep = { n_arms = [2, 3] }",
                                        "sweep = { n_armz = [2], n = [] }").replace("n = 20\n", ""))
    joined = "\n".join(problems)
    assert "evaluations[0].sweep.n_armz: expected one of the keys" in joined
    assert "(did you mean 'n_arms'?)" in joined
    assert "evaluations[0].sweep.n: expected a non-empty list" in joined


def test_cross_key_rule_of_a_kind():
    problems = problems_of(TINY.replace("arm = 1", "arm = 7"))
    assert any("evaluations[0].agents: expected agents whose arm is < n_arms = 2" in p
               for p in problems)


@pytest.mark.parametrize("extra, key", [
    ("replicates = 3", "replicates"),
    ("replicates = 2", "replicates"),  # agreeing or not: one way of giving the seeds
    ("seed = 1", "seed"),
])
def test_seeds_with_seed_or_replicates_are_refused(extra, key):
    problems = problems_of(TINY.replace("replicates = 2", f"{extra}\nseeds = [1, 2]"))
    assert problems == [f"f.toml: run.{key}: expected either `seeds` or `seed` and "
                        f"`replicates`, got both `seeds` and `{key}` (`seeds` lists the "
                        "replicate seeds itself)"]


def test_the_resolved_run_table_lists_the_seeds_once():
    sc = loads_scenario(TINY)
    assert sc.data["run"]["seeds"] == [0, 1]
    assert "seed" not in sc.data["run"] and "replicates" not in sc.data["run"]
    assert loads_scenario(sc.with_seed(7).to_toml()).seeds == [7, 8]  # runnable as it is


def test_duplicate_names_and_toml_syntax():
    problems = problems_of(TINY + '\n[[evaluations]]\nkind = "selfcheck"\n')
    assert any("evaluations[1].name: expected a name not used by another evaluation" in p
               for p in problems)
    problems = problems_of("[run\nname = 'x'")
    assert len(problems) == 1 and problems[0].startswith("f.toml: toml: expected valid TOML, got ")


def test_wrong_table_shapes():
    problems = problems_of('run = 3\nagents = "x"\nevaluations = [1]\n')
    joined = "\n".join(problems)
    assert "f.toml: run: expected a [run] table, got int 3" in joined
    assert "f.toml: agents: expected an array of tables" in joined
    assert "f.toml: evaluations: expected an array of tables" in joined


def test_missing_file(tmp_path):
    with pytest.raises(ScenarioError) as info:
        load_scenario(tmp_path / "nope.toml")
    assert "expected a scenario file or a built-in scenario name" in info.value.problems[0]


def test_load_scenario_takes_the_builtin_names_its_error_lists(tmp_path, monkeypatch):
    import recloop

    sc = recloop.load_scenario("quickstart")
    assert sc.name == "quickstart" and sc.path == str(builtin_scenarios()["quickstart"])
    with pytest.raises(ScenarioError) as info:
        recloop.load_scenario("quickstrat")
    assert "quickstart" in info.value.problems[0]  # listed among the names it takes
    # a file of that name in the current folder comes first, as on the command line
    monkeypatch.chdir(tmp_path)
    (tmp_path / "quickstart").write_text(TINY)
    assert recloop.load_scenario("quickstart").name == "tiny"


def test_builtin_scenarios_are_valid():
    found = builtin_scenarios()
    assert "quickstart" in found
    from tests.builtin_data import load_builtin

    for name, path in found.items():
        sc = load_builtin(name, path)
        assert sc.name == name, f"{path}: run.name should match the file name"
        assert sc.description


def _readme_sections(text: str) -> dict[str, set[str]]:
    sections: dict[str, set[str]] = {}
    current = None
    for line in text.splitlines():
        m = re.match(r"#+ `([\w.]+)`$", line)
        if m:
            current = sections.setdefault(m.group(1), set())
            continue
        m = re.match(r"\| `(\w+)` \|", line)
        if m and current is not None:
            current.add(m.group(1))
    return sections


def test_readme_documents_every_key():
    readme = (Path(__file__).resolve().parents[2] / "scenarios" / "README.md").read_text()
    sections = _readme_sections(readme)
    missing = []
    for key in scenario_keys():
        section, _, name = key.rpartition(".")
        if name not in sections.get(section, set()):
            missing.append(key)
    assert not missing, (f"scenarios/README.md lacks {missing}; regenerate it "
                         "(see its header)")
    # and it documents nothing the loader rejects
    documented = {f"{s}.{k}" for s, keys in sections.items() for k in keys}
    assert documented <= set(scenario_keys())


def test_registry_defaults_satisfy_their_own_types():
    for table in (registry().agents, registry().evaluations):
        for kind in table.values():
            for p in kind.params or ():
                if not p.required and p.default is not None:  # None: absent by default
                    assert p.type.check(p.default) is None, (kind.name, p.name)


def _plain(v):
    """Lists and tuples compare alike (TOML has lists, Python defaults are often tuples)."""
    return [_plain(x) for x in v] if isinstance(v, (list, tuple)) else v


@pytest.mark.parametrize("kind", [k for k in registry().evaluations.values() if k.function],
                         ids=lambda k: k.name)
def test_python_function_defaults_are_the_scenario_defaults(kind):
    # one declaration per evaluation kind: calling the Python function without an argument
    # gives what a scenario without the key gives
    defaults = {p.name: p.default for p in kind.params if not p.required}
    as_python = (kind.python_kwargs or dict)(defaults)
    signature = inspect.signature(kind.function).parameters
    compared = 0
    for name, value in as_python.items():
        if name in signature and signature[name].default is not inspect.Parameter.empty:
            assert _plain(signature[name].default) == _plain(value), name
            compared += 1
    assert compared >= 1
    # and every parameter of the kind reaches the function
    required = {p.name for p in kind.params if p.required}
    reached = set((kind.python_kwargs or dict)({p.name: p.default for p in kind.params}))
    assert (reached | required) <= set(signature) | {"data", "format", "columns"}


_scalars = st.one_of(st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False),
                     st.booleans(), st.text(max_size=10))
_values = st.one_of(_scalars, st.lists(_scalars, max_size=3),
                    st.dictionaries(st.text(min_size=1, max_size=5), _scalars, max_size=2))


@settings(max_examples=50)
@given(st.dictionaries(st.text(min_size=1, max_size=6), st.dictionaries(
    st.text(min_size=1, max_size=6), _values, max_size=4), max_size=3))
def test_toml_writer_round_trips_any_plain_data(data):
    assert tomllib.loads(dumps_toml(data)) == data
