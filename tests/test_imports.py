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


# -- a house without circles: the import graph of our packages, read from the source, has no
#    cycle. Every import statement counts, at module level or inside a function (a deferred
#    import hides a circle from the interpreter, not from the design). Not counted: the
#    implicit import of a module's parent package (a package's ``__init__`` re-exporting its
#    own private modules is the layout, not a circle) and modules named by strings
#    (``importlib.import_module``), which is how the registry reads the modules that declare
#    built-in kinds (``recloop._registry.BUILTIN_MODULES``), as it reads plugins' entry points.

def _module_files(root: Path) -> dict[str, Path]:
    mods = {}
    for package in OURS:
        for path in (root / package).rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join(parts)] = path
    return mods


def import_graph(root: Path) -> dict[str, dict[str, int]]:
    """``{module: {imported module: line}}`` of the packages under ``root``, every import
    statement (relative ones resolved; ``from pkg import name`` is ``pkg.name`` when that is
    a module, else ``pkg``)."""
    mods = _module_files(root)

    def ours(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, dict[str, int]] = {}
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        edges = graph.setdefault(mod, {})
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                         for a in node.names]
            else:
                continue
            for name in names:
                target = ours(name)
                if target is not None and target != mod:
                    edges.setdefault(target, node.lineno)
    return graph


def import_circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []

    def visit(v: str) -> None:  # the graph is a few hundred modules deep at most
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return circles


def _explain(graph, circle) -> str:
    return "\n".join(f"  {a} -> {b} (line {graph[a][b]})"
                     for a in circle for b in sorted(graph[a]) if b in circle)


def test_no_import_circle():
    graph = import_graph(ROOT)
    assert len(graph) > 100  # the walk found the packages
    circles = import_circles(graph)
    assert not circles, "import circles (each strongly connected set, its edges):\n" + \
        "\n\n".join(_explain(graph, c) for c in circles)


def test_the_circle_finder_sees_a_circle_through_a_function_level_import(tmp_path):
    # the finder itself, on a planted tree: a relative module-level import one way, a
    # function-level absolute import back, and a third module that only looks on
    for package in OURS:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "agents" / "_a.py").write_text("from . import _b\n")
    (tmp_path / "agents" / "_b.py").write_text("def f():\n    from agents._a import g\n")
    (tmp_path / "agents" / "_c.py").write_text("import agents._a\nfrom agents import _b\n")
    graph = import_graph(tmp_path)
    assert graph["agents._a"] == {"agents._b": 1}
    assert graph["agents._b"] == {"agents._a": 2}
    assert import_circles(graph) == [["agents._a", "agents._b"]]
    (tmp_path / "agents" / "_b.py").write_text("def f():\n    import numpy\n")
    assert import_circles(import_graph(tmp_path)) == []


def test_every_module_declaring_builtin_kinds_is_read_by_the_registry():
    # the registry imports none of the modules that declare kinds (a leaf): it reads the
    # modules of BUILTIN_MODULES by name, so a module declaring `KINDS` must be listed there
    from recloop._registry import BUILTIN_MODULES

    declaring = set()
    for mod, path in _module_files(ROOT).items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(node, ast.Assign)
               and any(isinstance(t, ast.Name) and t.id == "KINDS" for t in node.targets)
               for node in tree.body):
            declaring.add(mod)
    assert declaring == set(BUILTIN_MODULES)
    assert len(BUILTIN_MODULES) == len(set(BUILTIN_MODULES))
