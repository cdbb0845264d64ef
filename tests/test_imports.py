"""Importing the packages stays light: numba, scipy.stats and scipy.optimize load only when
a kernel, a statistical check or a fit needs them."""

import subprocess
import sys

import pytest

HEAVY = ("numba", "scipy.stats", "scipy.optimize", "pandas")


@pytest.mark.parametrize("package", ["simulator", "agents", "evaluators", "recloop"])
def test_import_loads_no_heavy_module(package):
    code = (f"import sys, {package}; "
            f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "", f"import {package} loaded {out}"


def test_import_recloop_loads_no_numpy():
    # `recloop --help`, `recloop validate` of a bad file: instant (the guards of users' code,
    # the scenario loader and the CLI import numpy only when they need it)
    code = "import sys, recloop, recloop._cli; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"


def test_first_kernel_access_compiles_the_agent_kernels_together():
    code = ("import sys; from agents import _kernels as kn; assert 'numba' not in sys.modules; "
            "f = kn.linucb_act_one; import numba; "
            "assert isinstance(f, numba.core.registry.CPUDispatcher); "
            "assert isinstance(kn.pick, numba.core.registry.CPUDispatcher)")
    subprocess.run([sys.executable, "-c", code], check=True)


# -- the layering of docs/DESIGN.md, checked on the source: every import statement of a package
#    (module level or inside a function) names only what the package may import.

import ast  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OURS = ("simulator", "agents", "evaluators", "recloop", "recloop_base")
#: package -> our packages (or modules) it may import
ALLOWED = {
    "recloop_base": (),
    "simulator": ("recloop_base",),
    "agents": ("recloop_base",),
    "evaluators": ("recloop_base", "simulator.logs"),
    "recloop": ("recloop_base", "simulator", "agents", "evaluators"),
}


def _imports(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_packages_import_only_the_layers_below_them(package):
    bad = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for line, name in _imports(path):
            top = name.split(".")[0]
            if top not in OURS or top == package:
                continue
            if not any(name == a or name.startswith(a + ".") for a in ALLOWED[package]):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert not bad, "layering of docs/DESIGN.md broken:\n" + "\n".join(bad)


def test_no_package_reaches_into_another_packages_private_module():
    bad = []
    for package in OURS:
        for path in sorted((ROOT / package).rglob("*.py")):
            for line, name in _imports(path):
                parts = name.split(".")
                if parts[0] in OURS and parts[0] != package and any(
                        p.startswith("_") for p in parts[1:]):
                    bad.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert not bad, "private modules of another package:\n" + "\n".join(bad)


def _module_level_imports(node):
    """Import statements run when the module is imported (not inside a function)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(child, ast.Import):
            yield child.lineno, [a.name for a in child.names]
        elif isinstance(child, ast.ImportFrom):
            yield child.lineno, [child.module or ""]
        else:
            yield from _module_level_imports(child)


def test_pandas_is_never_imported_at_module_level():
    """pandas is a dependency of the Python API's DataFrames only: imported inside the
    functions that return one, never when a module is imported."""
    bad = []
    for package in OURS:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for line, names in _module_level_imports(tree):
                if any(n == "pandas" or n.startswith("pandas.") for n in names):
                    bad.append(f"{path.relative_to(ROOT)}:{line}")
    assert not bad, "pandas imported at module level:\n" + "\n".join(bad)


def test_the_python_api_loads_pandas_only_for_a_dataframe():
    code = ("import sys, recloop; recloop.run; recloop.load_results; recloop.summarize; "
            "print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"


def test_the_wheel_lists_every_package_and_ships_the_top_level_scenarios():
    # pyproject.toml names its packages by hand (the scenarios' package-dir mapping): a new
    # subpackage missing from the list would be left out of the wheel
    import tomllib

    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = {".".join(p.parent.relative_to(ROOT).parts)
             for package in OURS for p in (ROOT / package).rglob("__init__.py")}
    assert set(tool["packages"]) == found | {"recloop.scenarios"}
    assert tool["package-dir"] == {"recloop.scenarios": "scenarios"}
    assert not (ROOT / "recloop" / "scenarios").exists()  # the files live at the top level
    from recloop import builtin_scenarios

    assert {p.parent for p in builtin_scenarios().values()} == {ROOT / "scenarios"}
    assert "quickstart" in builtin_scenarios()
