"""Bad input: mutated built-in scenarios never produce a traceback or a partial directory.

Each example mutates one of the built-in scenario files (deletes a key, swaps a type, draws
a wild value, adds an unknown table, truncates the text), then runs ``recloop validate`` and
``recloop run --dry-run`` in-process: the exit code is 0 or 2, nothing escapes as an exception,
and nothing is written anywhere (a failed validation creates no run directory).
"""

import tomllib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recloop._cli import main
from recloop._runner import run_scenario
from recloop._scenario import builtin_scenarios, dumps_toml, load_scenario

BUILTIN = {name: path.read_text() for name, path in builtin_scenarios().items()}
SELFCHECK = """
[run]
name = "x"
replicates = 2

[[agents]]
name = "a"
kind = "fixed_arm"

[[agents]]
name = "b"
kind = "fixed_arm"

[[evaluations]]
kind = "selfcheck"
sweep = { n = [10, 20] }
"""
BUILTIN["selfcheck (test)"] = SELFCHECK

scalars = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1), st.floats(allow_nan=True),
    st.booleans(), st.text(max_size=12), st.sampled_from(["", "..", "../x", "/etc", "all", "a/b"]),
)
wild = st.one_of(
    scalars, st.lists(scalars, max_size=4),
    st.dictionaries(st.text(min_size=1, max_size=6), scalars, max_size=3),
    st.lists(st.dictionaries(st.sampled_from(["name", "kind", "x"]), scalars, max_size=2),
             min_size=1, max_size=2),
)


def _paths(node, prefix=()):
    """Every (container path, key) in a parsed TOML document."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield prefix, k
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for j, v in enumerate(node):
            yield prefix, j
            yield from _paths(v, prefix + (j,))


def _get(node, path):
    for p in path:
        node = node[p]
    return node


@st.composite
def mutated(draw):
    name = draw(st.sampled_from(sorted(BUILTIN)))
    text = BUILTIN[name]
    how = draw(st.sampled_from(["delete", "swap", "wild", "unknown", "truncate", "several"]))
    if how == "truncate":
        return text[: draw(st.integers(0, len(text)))]
    data = tomllib.loads(text)
    for _ in range(draw(st.integers(2, 4)) if how == "several" else 1):
        paths = list(_paths(data))
        if not paths:
            break
        parent_path, key = draw(st.sampled_from(paths))
        parent = _get(data, parent_path)
        op = draw(st.sampled_from(["delete", "swap", "wild", "unknown"])) if how == "several" \
            else how
        if op == "delete":
            del parent[key]
        elif op == "swap":
            value = parent[key]
            parent[key] = draw(st.sampled_from(
                [str(value), [value], {"v": 1}, 1.5, True, 0, -1]))
        elif op == "wild":
            parent[key] = draw(wild)
        else:
            target = parent if isinstance(parent, dict) else data
            target[draw(st.text(min_size=1, max_size=8))] = draw(wild)
    return dumps_toml(data)


@settings(max_examples=60)
@given(text=mutated())
def test_mutated_scenarios_validate_cleanly(tmp_path_factory, text):
    folder = tmp_path_factory.mktemp("fuzz")
    path = folder / "s.toml"
    path.write_text(text)
    out = folder / "out"
    rc = main(["validate", str(path)])
    assert rc in (0, 2)
    rc_run = main(["run", str(path), "--out", str(out), "--dry-run", "-q"])
    assert rc_run == rc
    assert sorted(p.name for p in folder.iterdir()) == ["s.toml"]  # nothing written
    if rc == 0:  # what validates round-trips through the resolved file
        sc = load_scenario(path)
        assert load_scenario_text(sc.to_toml(), folder).data == sc.data


@pytest.mark.parametrize("kind", ["[]", "{v = 1}", "1.5", "true"])
def test_a_kind_that_is_not_a_string_is_named(tmp_path, capsys, kind):
    # found by the fuzz test: an agent's kind = [] reached the plugin registry as a dict
    # key (TypeError, exit 1) before the validator could name it
    path = tmp_path / "s.toml"
    path.write_text(SELFCHECK.replace('kind = "fixed_arm"', f"kind = {kind}", 1))
    assert main(["validate", str(path)]) == 2
    assert "agents[0].kind: expected a string" in capsys.readouterr().err


def load_scenario_text(text, folder):
    path = folder / "resolved.toml"
    path.write_text(text)
    try:
        return load_scenario(path)
    finally:
        path.unlink()


@settings(max_examples=30)
@given(name=st.text(min_size=1, max_size=20))
def test_scenario_names_cannot_escape_out(tmp_path_factory, name):
    folder = tmp_path_factory.mktemp("escape")
    data = tomllib.loads(SELFCHECK)
    data["run"]["name"] = name
    path = folder / "s.toml"
    path.write_text(dumps_toml(data))
    out = folder / "out"
    rc = main(["validate", str(path)])
    assert rc in (0, 2)
    if rc == 0:
        # a valid name makes exactly one directory, directly under --out
        sc = load_scenario(path)
        run_dir = run_scenario(_cheap(sc), out=out, workers=1, quiet=True, report=False)
        assert run_dir.parent == out and run_dir.name == name
        assert sorted(p.name for p in folder.iterdir()) == ["out", "s.toml"]
        assert [p.name for p in out.iterdir()] == [name]
    else:
        assert sorted(p.name for p in folder.iterdir()) == ["s.toml"]


def _cheap(sc):
    """The same scenario cut to one seed and one cell, so the run itself costs nothing."""
    from recloop._scenario import Scenario

    data = dict(sc.data)
    data["run"] = {**data["run"], "seeds": data["run"]["seeds"][:1]}
    ev = {k: v for k, v in data["evaluations"][0].items() if k != "sweep"}
    ev.update({k: values[0] for k, values in data["evaluations"][0].get("sweep", {}).items()})
    ev["agents"] = ev["agents"][:1]
    data["evaluations"] = [ev]
    return Scenario(sc.path, data)


@pytest.mark.parametrize("name", ["../evil", "/abs", "a/b", "..", ".hidden", "x" * 65])
def test_escaping_names_are_rejected(tmp_path, name, capsys):
    data = tomllib.loads(SELFCHECK)
    data["run"]["name"] = name
    path = tmp_path / "s.toml"
    path.write_text(dumps_toml(data))
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "-q"]) == 2
    assert "run.name: expected a name" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.toml"]
    assert not (tmp_path.parent / "evil").exists()
