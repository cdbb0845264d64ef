"""tools/mutate.py's bookkeeping (docs/testing.md): the verdicts it keeps, restores and counts.

mutmut itself is not run here (a run takes minutes to hours); these tests build the scratch
tree's files by hand: ``pyproject.toml`` (the test selection) and ``mutants/<module>.meta``
(mutmut's verdicts, None for a mutant not run).
"""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("mutate_tool", ROOT / "tools" / "mutate.py")
mutate = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mutate)

MODULE = "evaluators/_x.py"


def scratch(tmp_path, tests, codes, hashes):
    """A scratch tree whose last run selected ``tests`` and left these verdicts."""
    (tmp_path / "pyproject.toml").write_text(
        "[tool.mutmut]\n"
        f"pytest_add_cli_args_test_selection = {json.dumps(tests)}\n")
    meta = tmp_path / "mutants" / (MODULE + ".meta")
    meta.parent.mkdir(parents=True, exist_ok=True)
    meta.write_text(json.dumps({"exit_code_by_key": codes, "hash_by_function_name": hashes,
                                "type_check_error_by_key": {}, "durations_by_key": {},
                                "estimated_durations_by_key": {}}))
    return json.loads(meta.read_text())


def name(function, i):
    return f"evaluators._x.{function}__mutmut_{i}"


OLD_CODES = {name("x_f", 1): 1, name("x_f", 2): 0, name("x_g", 1): 1, name("x_g", 2): None,
             name("xǁCǁ__call__", 1): 36}
OLD_HASHES = {"x_f": "aa", "x_g": "bb", "xǁCǁ__call__": "cc"}


def test_restore_gives_back_the_verdicts_mutmut_dropped_for_unchanged_functions(tmp_path):
    old = scratch(tmp_path, ["t1.py"], OLD_CODES, OLD_HASHES)
    # mutmut dropped every verdict (a test file was added), ran f's survivor again (killed
    # now), and g's code changed since
    scratch(tmp_path, ["t1.py", "t2.py"],
            {name("x_f", 1): None, name("x_f", 2): 1, name("x_g", 1): None,
             name("x_g", 2): None, name("xǁCǁ__call__", 1): None},
            {"x_f": "aa", "x_g": "b2", "xǁCǁ__call__": "cc"})
    mutate.restore_verdicts(tmp_path, MODULE, old, ["t1.py"])
    assert mutate.verdicts(tmp_path, MODULE) == {
        name("x_f", 1): 1,           # given back
        name("x_f", 2): 1,           # the new verdict stands
        name("x_g", 1): None,        # g changed: its old verdict says nothing now
        name("x_g", 2): None,        # never run
        name("xǁCǁ__call__", 1): 36,  # a method's name (dunder before __mutmut_) given back
    }


def test_restore_gives_back_nothing_when_a_test_left_the_selection(tmp_path):
    old = scratch(tmp_path, ["t1.py", "t2.py"], OLD_CODES, OLD_HASHES)
    dropped = {k: None for k in OLD_CODES}
    scratch(tmp_path, ["t1.py"], dropped, OLD_HASHES)
    mutate.restore_verdicts(tmp_path, MODULE, old, ["t1.py", "t2.py"])
    assert mutate.verdicts(tmp_path, MODULE) == dropped


def test_summary_counts_mutants_not_run_and_does_not_pass_them(tmp_path, monkeypatch, capsys):
    scratch(tmp_path, ["t1.py"], OLD_CODES, OLD_HASHES)
    diffs = {name("x_f", 2): "--- a\n+++ a\n-    return x\n+    return None"}
    monkeypatch.setattr(mutate, "diffs_of",
                        lambda work, module, names: {n: diffs[n] for n in names})

    class Args:
        max_children, target = 1, 0.5

    def run(known):
        status = mutate.summarize(tmp_path, [MODULE], known, Args, seconds=None)
        return status, json.loads(capsys.readouterr().out.strip().splitlines()[-1])

    status, out = run(set())
    row = out["modules"][MODULE]
    assert (row["killed"], row["survived"], row["timeout"], row["not run"]) == (2, 1, 1, 1)
    assert row["kill_rate"] == 0.75  # (2 killed + 1 timeout) / 4 run
    assert status == 1 and out["passed"] is False  # a mutant not run: not passed
    # listed as equivalent: out of the rate, which is then 1; still not passed
    status, out = run({(MODULE, "f", "return None")})
    row = out["modules"][MODULE]
    assert (row["equivalent"], row["survived"], row["kill_rate"]) == (1, 0, 1.0)
    assert status == 1


def test_functions_narrow_the_summary_to_their_mutants(tmp_path, monkeypatch, capsys):
    """``--functions``: mutmut's name patterns of a function and of a method, and a summary
    over their mutants only (``g``'s mutant not run is left out: the run passes)."""
    assert mutate.function_pattern("simulator/_w.py", "W.m") == "simulator._w.xǁWǁm__mutmut_*"
    assert mutate.function_pattern(MODULE, "f") == "evaluators._x.x_f__mutmut_*"
    patterns = [mutate.function_pattern(MODULE, f) for f in ("f", "C.__call__")]
    assert mutate.in_functions(name("x_f", 12), patterns)
    assert not mutate.in_functions(name("x_f_g", 1), patterns)  # another function's prefix
    assert not mutate.in_functions(name("x_g", 1), patterns)
    scratch(tmp_path, ["t1.py"], OLD_CODES, OLD_HASHES)
    monkeypatch.setattr(mutate, "diffs_of", lambda work, module, names: {
        n: "--- a\n+++ a\n-    return x\n+    return None" for n in names})

    class Args:
        max_children, target, functions = 1, 0.5, ["f", "C.__call__"]

    Args.patterns = patterns
    status = mutate.summarize(tmp_path, [MODULE], set(), Args, seconds=None)
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    row = out["modules"][MODULE]
    assert (row["total"], row["killed"], row["survived"], row["timeout"], row["not run"]) == \
        (3, 1, 1, 1, 0)
    assert out["functions"] == ["f", "C.__call__"] and status == 0


@pytest.mark.parametrize("mutant, function", [
    ("evaluators._x.x_f__mutmut_3", "f"),
    ("evaluators._x.xǁCǁ__call____mutmut_12", "C.__call__"),
])
def test_key_of_names_the_function_and_the_mutated_line(mutant, function):
    diff = "--- p\n+++ p\n@@ -1 +1 @@\n-    a = b\n+    a = None\n     c = a"
    assert mutate.key_of(MODULE, mutant, diff) == (MODULE, function, "a = None")


def test_changed_functions_are_named_as_mutmut_names_them():
    old = ("def f(x):\n    return x + 1\n\n\ndef g(x):\n    return x\n\n\n"
           "class C:\n    def m(self):\n        return 1\n\n    def n(self):\n        return 2\n")
    new = ("def g(x):\n    return x\n\n\ndef f(x):\n    return x + 2\n\n\ndef h():\n    pass\n\n\n"
           "class C:\n    def m(self):\n        return 1\n\n    def n(self):\n        return 3\n")
    # g moved (same code), f changed, h new; C.m the same, C.n changed
    assert mutate.changed_functions(old, new) == {"x_f", "x_h", "xǁCǁn"}
    assert mutate.changed_functions(new, new) == set()


def test_an_ambiguous_mutated_line_is_listed_with_its_removed_line():
    diff = "--- p\n+++ p\n@@ -1 +1 @@\n-    g(a, b=c)\n+    )"
    other = "--- p\n+++ p\n@@ -1 +1 @@\n-    h(a, d=e)\n+    )"
    name = "evaluators._x.x_f__mutmut_3"
    known = {(MODULE, "f", "g(a, b=c) => )")}
    assert mutate.is_equivalent(MODULE, name, diff, known)
    assert not mutate.is_equivalent(MODULE, name, other, known)  # the same `)`, another call
    assert mutate.is_equivalent(MODULE, name, other, {(MODULE, "f", ")")})


def test_plant_refuses_text_that_is_not_there_once(capsys):
    assert mutate.main(["--plant", "evaluators/_ab.py", "no such text", "x"]) == 2
    assert "occurs 0 times" in capsys.readouterr().err
    assert mutate.main(["--plant", "evaluators/_ab.py", "import", "x"]) == 2
    assert mutate.main(["--plant", "evaluators/_nothing.py", "a", "b"]) == 2
    assert mutate.main(["--plant", "evaluators/_ab.py"]) == 2


@pytest.mark.slow
def test_plant_runs_the_tests_on_a_scratch_copy(capsys):
    """A planted bug the tests see is killed (exit 0, the failing test listed); the work
    tree's module is untouched."""
    before = (ROOT / "evaluators" / "_ab.py").read_text()
    test = "tests/evaluators/test_ab.py::test_refusals_word_for_word"
    assert mutate.main(["--plant", "evaluators/_ab.py", '"policy_a")', '"policy_A")', test]) == 0
    out = capsys.readouterr().out
    assert "KILLED: 1 test(s) failed" in out and f"FAILED {test}" in out
    assert (ROOT / "evaluators" / "_ab.py").read_text() == before


def test_plant_says_survived_when_every_test_passes(monkeypatch, capsys):
    import subprocess

    monkeypatch.setattr(mutate, "WORK", mutate.WORK / "plant-test")
    # empty directories for the tree (pytest is stubbed: nothing needs the files)
    monkeypatch.setattr(mutate.shutil, "copytree",
                        lambda src, dst, **k: Path(dst).mkdir(parents=True, exist_ok=True))
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(
        a, 0, stdout="3 passed in 0.1s\n", stderr=""))
    assert mutate.main(["--plant", "evaluators/_ab.py", "p = math.nan", "p = 0.0", "x"]) == 1
    assert "SURVIVED: no test failed (3 passed in 0.1s" in capsys.readouterr().out
