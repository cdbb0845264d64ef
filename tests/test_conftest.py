"""The suite's own set-up (tests/conftest.py): the bytecode it writes before the test
processes start is read by them and never stale."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import write_bytecode


def _import(folder: Path, name: str) -> subprocess.CompletedProcess:
    """``import name`` in a fresh interpreter that writes no bytecode, verbose (``-v`` says
    where each module's code came from)."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, "-v", "-c", f"import {name}; print({name}.VALUE)"],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=60)


def test_a_modules_bytecode_is_read_and_never_stale(tmp_path):
    source = tmp_path / "edited.py"
    source.write_text("VALUE = 1\n")
    write_bytecode([source], [], None)
    pyc = importlib.util.cache_from_source(str(source))
    run = _import(tmp_path, "edited")
    assert run.stdout.strip() == "1"
    assert f"code object from '{pyc}'" in run.stderr  # read, not compiled again
    # the same size and time stamp, another value: bytecode checked by time stamp and size
    # (Python's default) would still say 1
    stat = source.stat()
    source.write_text("VALUE = 2\n")
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert _import(tmp_path, "edited").stdout.strip() == "2"
    write_bytecode([source], [], None)  # and written again for the new source
    run = _import(tmp_path, "edited")
    assert run.stdout.strip() == "2" and f"code object from '{pyc}'" in run.stderr


def test_a_test_modules_bytecode_is_pytests_rewritten_one(tmp_path, pytestconfig):
    from _pytest.assertion.rewrite import PYC_TAIL, _read_pyc, get_cache_dir

    module = tmp_path / "test_planted.py"
    module.write_text("def test_it():\n    x = 1\n    assert x == 2\n")
    write_bytecode([], [module], pytestconfig)
    pyc = get_cache_dir(module) / (module.name[:-3] + PYC_TAIL)
    code = _read_pyc(module, pyc)  # what pytest's import hook will find and use
    assert code is not None, "pytest's rewritten bytecode was not written (its API moved?)"
    body = next(c for c in code.co_consts if getattr(c, "co_name", "") == "test_it")
    assert "@py_assert1" in body.co_varnames  # the assertion was rewritten


def test_a_test_module_that_cannot_be_compiled_is_left_to_pytest(tmp_path, pytestconfig):
    broken, good = tmp_path / "test_broken.py", tmp_path / "test_good.py"
    broken.write_text("def test_it(:\n")
    good.write_text("def test_it():\n    assert 1\n")
    write_bytecode([], [broken, good], pytestconfig)  # no SyntaxError: collection reports it
    from _pytest.assertion.rewrite import PYC_TAIL, _read_pyc, get_cache_dir

    assert _read_pyc(good, get_cache_dir(good) / ("test_good" + PYC_TAIL)) is not None


def test_the_suite_compiles_its_packages_and_tests_once_in_the_controlling_process(
        pytestconfig, monkeypatch):
    import tests.conftest as conftest

    calls = []
    monkeypatch.setattr(conftest, "write_bytecode", lambda *a: calls.append(a))
    conftest.compile_bytecode(pytestconfig)
    (plain, rewritten, _), = calls
    root = Path(conftest.__file__).resolve().parents[1]
    names = {p.relative_to(root).as_posix() for p in plain}
    assert {"agents/_kernels.py", "recloop/_cli.py", "recloop/testing/_checks.py",
            "tests/builtin_data.py", "tests/recloop/smallest.py"} <= names
    rewritten = {p.relative_to(root).as_posix() for p in rewritten}
    assert {"tests/conftest.py", "tests/test_conftest.py",
            "tests/agents/test_generated_kernels.py"} <= rewritten
    assert not names & rewritten
    assert not any("fixtures" in n or "__pycache__" in n for n in names | rewritten)

    compiled = []
    monkeypatch.setattr(conftest, "compile_bytecode", compiled.append)
    conftest.pytest_configure(type("Controller", (), {})())
    assert len(compiled) == 1
    worker = type("Worker", (), {"workerinput": {}})()
    conftest.pytest_configure(worker)
    assert len(compiled) == 1  # a test process reads what the controller wrote
