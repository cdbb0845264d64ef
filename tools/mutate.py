"""Mutation testing of recloop's numeric core with mutmut (docs/testing.md).

    python tools/mutate.py                       # every module of the numeric core
    python tools/mutate.py evaluators/_estimate.py simulator/_truth.py
    python tools/mutate.py --changed             # the core modules changed since main
    python tools/mutate.py --changed HEAD~3      # ... since another revision

The numeric core is ``only_mutate`` of ``[tool.mutmut]`` in pyproject.toml; the tests that may
kill a module's mutants are ``TESTS`` below. The run happens in a scratch copy of the tree
(``build/mutation/<modules>/``: sources, tests and a pyproject.toml narrowed to the chosen
modules), so the work tree is never touched and a stale copy is never reused.

Runs of the larger modules take hours on two cores; two options make them resumable and cheap:

    python tools/mutate.py evaluators/_ope.py --keep        # go on with a stopped run
    python tools/mutate.py evaluators/_ope.py --survivors   # retry its survivors, new tests
    python tools/mutate.py simulator/_world.py --functions World._plan_campaign World.true_ctr

``--keep`` refreshes the scratch copy's sources and tests but keeps mutmut's verdicts: a mutant
keeps its verdict when its function's code is unchanged, and only the mutants not yet run (or
of changed functions) run. mutmut starts over when the module's test selection (``TESTS``) or
pyproject.toml changed. ``--survivors`` (which implies ``--keep``) runs, by name, against the
current tests, only the survivors that are not listed as equivalent (a verdict otherwise
stands, and a test written since could kill them), the mutants not run yet and the mutants of
functions changed or added since the run. The killed of unchanged functions keep their
verdicts, also when mutmut drops them because tests were added to the selection (tests only
added cannot revive a killed mutant; a selection that lost tests keeps nothing).

``--functions`` runs and reports only the mutants of the named functions (``name`` or
``Class.method``) of one module: a module too large for one run is mutated in parts (the
others stay "not run" in mutmut's verdicts and are left out of the report).

One bug, planted by hand, in a scratch copy (the work tree is never touched):

    python tools/mutate.py --plant evaluators/_ab.py 'math.sqrt(a.stderr ** 2 + b.stderr ** 2)' \
        'a.stderr + b.stderr'                   # against the module's TESTS
    python tools/mutate.py --plant evaluators/_ab.py OLD NEW tests/evaluators/test_ab.py

replaces the one occurrence of OLD by NEW in the module, runs the tests and says which fail:
exit status 0 when the bug is caught (killed), 1 when every test passes (survived).

It prints, per module, the mutants killed, survived (and how many of those are listed as
equivalent in ``tools/equivalent_mutants.txt``), timed out and not covered, each survivor's
diff, and as its last line a JSON summary with the kill rate of the non-equivalent mutants.
Exit status: 0 when every module reaches ``--target`` (default 0.95), 1 otherwise, 2 for bad
arguments. mutmut is the ``dev`` extra: ``pip install -e ".[dev]"``.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "build" / "mutation"  # the scratch trees (work_dir), one per set of modules
PACKAGES = ("evaluators", "simulator", "recloop_base", "agents", "recloop")
EQUIVALENT = ROOT / "tools" / "equivalent_mutants.txt"

#: the tests whose failures may kill each module's mutants (mutmut then runs, for each
#: mutant, only those of them that execute the mutated function)
TESTS = {
    "evaluators/_estimate.py": ["tests/evaluators/test_estimate.py",
                                "tests/evaluators/test_stderr.py",
                                "tests/evaluators/test_replay.py", "tests/evaluators/test_ab.py"],
    "evaluators/_metrics.py": ["tests/evaluators/test_metrics.py",
                               "tests/evaluators/test_metrics_mutants.py",
                               "tests/evaluators/test_bad_arrays.py"],
    "evaluators/_slate_ope.py": ["tests/evaluators/test_slate_ope.py",
                                 "tests/evaluators/test_slate_ope_mutants.py",
                                 "tests/evaluators/test_stderr.py",
                                 "tests/evaluators/test_bad_arrays.py"],
    "evaluators/_mips.py": ["tests/evaluators/test_ope_catalogue.py",
                            "tests/evaluators/test_mips_available.py",
                            "tests/evaluators/test_mips_mutants.py",
                            "tests/evaluators/test_stderr.py",
                            "tests/evaluators/test_bad_arrays.py"],
    "evaluators/_ope.py": ["tests/evaluators/test_ope.py", "tests/evaluators/test_ope_catalogue.py",
                           "tests/evaluators/test_stderr.py",
                           "tests/evaluators/test_positions.py",
                           "tests/evaluators/test_subgaussian.py",
                           "tests/evaluators/test_refusals.py",
                           "tests/evaluators/test_reward_models.py",
                           "tests/evaluators/test_ope_mutants.py",
                           "tests/evaluators/test_bad_arrays.py"],
    "evaluators/_slope.py": ["tests/evaluators/test_ope_catalogue.py",
                             "tests/evaluators/test_slope_mutants.py",
                             "tests/evaluators/test_stderr.py",
                             "tests/evaluators/test_bad_arrays.py"],
    "simulator/_truth.py": ["tests/simulator/test_truth.py",
                            "tests/simulator/test_truth_numbers.py",
                            "tests/simulator/test_truth_mutants.py",
                            "tests/simulator/test_bandit_env.py",
                            "tests/agents/test_fast_paths.py"],
    "recloop/_summary.py": ["tests/recloop/test_summary.py",
                            "tests/recloop/test_summary_mutants.py",
                            "tests/recloop/test_report.py"],
    "simulator/_fidelity.py": ["tests/simulator/test_fidelity.py",
                               "tests/simulator/test_fidelity_mutants.py",
                               "tests/recloop/test_calibration.py"],
    # issue 33: narrow selections, about a second a mutant (the module's own tests and the
    # file that pins its numbers against independent computations)
    "evaluators/_ab.py": ["tests/evaluators/test_ab.py"],
    "evaluators/_weights.py": ["tests/evaluators/test_weights.py",
                               "tests/evaluators/test_weights_pins.py",
                               "tests/evaluators/test_weights_mutants.py"],
    "evaluators/_loo_kernels.py": ["tests/evaluators/test_loo_knn.py",
                                   "tests/evaluators/test_loo_knn_pins.py",
                                   "tests/evaluators/test_loo_kernels_mutants.py"],
    "evaluators/_loo_knn.py": ["tests/evaluators/test_loo_knn.py",
                               "tests/evaluators/test_loo_knn_pins.py"],
    "evaluators/_replay.py": ["tests/evaluators/test_replay.py",
                              "tests/evaluators/test_replay_pins.py",
                              # BRED walks its replicates with replay's _walk (jitter, reveal)
                              "tests/evaluators/test_bred_pins.py",
                              "tests/evaluators/test_bred.py"],
    "evaluators/_bred.py": ["tests/evaluators/test_bred.py",
                            "tests/evaluators/test_bred_pins.py"],
    # the twins written out record by record (test_twin.py), and every selector's shared
    # contract (the selectors' and the hostile cases' files call select_by_twin too)
    "evaluators/_twin.py": ["tests/evaluators/test_twin.py",
                            "tests/evaluators/test_twin_mutants.py",
                            "tests/evaluators/test_selectors.py",
                            "tests/hostile/test_selector_cases.py"],
    # the model's own tests and the estimators that read it (DM, the DR family, their
    # variances, positions, refusals)
    "evaluators/_reward_models.py": ["tests/evaluators/test_reward_models.py",
                                     "tests/evaluators/test_reward_models_pins.py",
                                     "tests/evaluators/test_reward_models_mutants.py",
                                     "tests/evaluators/test_ope.py",
                                     "tests/evaluators/test_ope_mutants.py",
                                     "tests/evaluators/test_stderr.py",
                                     "tests/evaluators/test_positions.py",
                                     "tests/evaluators/test_refusals.py"],
    # the campaign plan against its law, the world's campaign and CTR code (fast == naive,
    # the kernels), the drift; the truth's numbers read true_ctr
    "simulator/_world.py": ["tests/simulator/test_world.py",
                            "tests/simulator/test_campaign_plan_pins.py",
                            "tests/simulator/test_world_mutants.py",
                            "tests/simulator/test_kernels.py",
                            "tests/simulator/test_drift.py",
                            "tests/simulator/test_truth_numbers.py"],
    # the likelihoods against their written-out forms, the fits end to end
    "simulator/_calibrate.py": ["tests/simulator/test_calibrate.py",
                                "tests/simulator/test_calibrate_mutants.py",
                                "tests/simulator/test_decay_pins.py",
                                "tests/simulator/test_drift.py",
                                "tests/recloop/test_calibration.py"],
}
#: tests that cannot run under mutmut's fork-per-mutant workers (they start a Dask cluster)
IGNORED = ["tests/evaluators/test_distributed.py"]


_KERNEL_DECORATOR = re.compile(r"^@(\w+)\.kernel\n", re.M)
_KERNEL_INSTALL = re.compile(r"^__getattr__ = (\w+)\.install\(\).*$", re.M)


def plain_kernels(source: str) -> str:
    """A lazy numba kernel module (``recloop_base.kernels.LazyKernels``) as plain Python, the
    source mutmut mutates: mutmut leaves out decorated functions, and numba cannot compile
    its trampolines. The ``@kernels.kernel`` decorators go (the decorator only registers the
    function), and the module's ``__getattr__`` that compiles on first access becomes
    ``kernel.py_func = kernel`` for each kernel, so that the callers' compiled path and their
    ``.py_func`` path both run the (mutated) Python function. Any other module: unchanged."""
    names = re.findall(r"^@\w+\.kernel\ndef (\w+)", source, re.M)
    if not names or not _KERNEL_INSTALL.search(source):
        return source
    plain = "\n".join(f"{n}.py_func = {n}  # tools/mutate.py: run as plain Python" for n in names)
    return _KERNEL_INSTALL.sub(lambda m: plain, _KERNEL_DECORATOR.sub("", source))


def core_modules() -> list[str]:
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]
    return list(conf["only_mutate"])


def changed_files(ref: str) -> list[str]:
    """Files changed between ``ref`` and the work tree (committed or not)."""
    out = subprocess.run(["git", "diff", "--name-only", ref], cwd=ROOT, capture_output=True,
                         text=True)
    if out.returncode != 0:
        raise SystemExit(f"tools/mutate.py: `--changed {ref}`: git diff failed: "
                         f"{out.stderr.strip()}")
    return out.stdout.split()


def work_dir(modules: list[str]) -> Path:
    """The scratch tree of a run: one per set of modules, so that runs can go side by side."""
    tag = "+".join(Path(m).stem.lstrip("_") for m in modules)
    return WORK / (tag if len(tag) <= 60 else f"{len(modules)}-modules")


def prepare(modules: list[str], keep: bool) -> Path:
    """The scratch tree: sources and tests copied, pyproject.toml narrowed to ``modules``."""
    work = work_dir(modules)
    if work.exists() and not keep:
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    for name in PACKAGES + ("tests",):
        dst = work / name
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(ROOT / name, dst, ignore=shutil.ignore_patterns("__pycache__"))
    for m in modules:  # kernels compiled by numba are mutated as plain Python
        (work / m).write_text(plain_kernels((ROOT / m).read_text()))
    if keep and (work / "mutants").exists():
        # mutmut copies sources only when missing: drop its copies, but keep its verdicts
        # (the .meta files), which it keeps for each function whose code is unchanged
        metas = {p: p.read_bytes() for p in (work / "mutants").rglob("*.meta")}
        for name in PACKAGES:
            shutil.rmtree(work / "mutants" / name, ignore_errors=True)
        for path, data in metas.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    tests = sorted({t for m in modules for t in TESTS.get(m, ["tests"])
                    if (ROOT / t).exists()})
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    markers = conf["tool"]["pytest"]["ini_options"]["markers"]
    text = "\n".join([
        "[tool.mutmut]",
        f"source_paths = {json.dumps(list(PACKAGES))}",
        f"only_mutate = {json.dumps(modules)}",
        f"pytest_add_cli_args_test_selection = {json.dumps(tests)}",
        "pytest_add_cli_args = " + json.dumps(
            ["-p", "no:cacheprovider", "-o", "addopts="]
            + [f"--ignore={t}" for t in IGNORED]),
        "",
        "[tool.pytest.ini_options]",
        f"markers = {json.dumps(markers)}",
        "",
    ])
    (work / "pyproject.toml").write_text(text)
    return work


def equivalents() -> set[tuple[str, str, str]]:
    """(module, function, mutated line) of the mutants listed as equivalent."""
    out = set()
    if EQUIVALENT.exists():
        for line in EQUIVALENT.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                module, function, mutated = (s.strip() for s in line.split("|", 3)[:3])
                out.add((module, function, mutated))
    return out


def verdicts(work: Path, module: str) -> dict[str, int | None]:
    """mutmut's exit code per mutant of ``module`` (None: not run yet)."""
    return json.loads((work / "mutants" / (module + ".meta")).read_text())["exit_code_by_key"]


def changed_functions(old: str, new: str) -> set[str]:
    """mutmut's names (``x_f``, ``xǁClassǁmethod``) of the functions of source ``new`` whose
    code differs from ``old``'s or is not in it (their mutants are new: no verdict to keep)."""
    def defs(src):
        out = {}
        for node in ast.parse(src).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out[f"x_{node.name}"] = ast.dump(node)
            elif isinstance(node, ast.ClassDef):
                out.update((f"x\u01c1{node.name}\u01c1{f.name}", ast.dump(f)) for f in node.body
                           if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)))
        return out
    before = defs(old)
    return {name for name, code in defs(new).items() if before.get(name) != code}


def selection(work: Path) -> list[str]:
    """The test selection of the scratch tree's last run."""
    conf = tomllib.loads((work / "pyproject.toml").read_text())
    return conf["tool"]["mutmut"]["pytest_add_cli_args_test_selection"]


def restore_verdicts(work: Path, module: str, old: dict, old_tests: list[str]) -> None:
    """Give back the verdicts mutmut dropped (None now, a verdict before), when that is sound:
    the mutant's function has the same code (hash) and no test left the selection."""
    path = work / "mutants" / (module + ".meta")
    meta = json.loads(path.read_text())
    if not set(old_tests) <= set(selection(work)):
        return
    same = {f for f, h in meta["hash_by_function_name"].items()
            if old["hash_by_function_name"].get(f) == h}
    codes = meta["exit_code_by_key"]
    for name, code in old["exit_code_by_key"].items():
        function = name.rsplit(".", 1)[-1].rsplit("__mutmut_", 1)[0]
        if codes.get(name, 0) is None and code is not None and function in same:
            codes[name] = code
    path.write_text(json.dumps(meta, indent=4))


def diffs_of(work: Path, module: str, names: list[str]) -> dict[str, str]:
    """Each mutant's diff (as ``mutmut show`` prints it), read by one process for all names."""
    if not names:
        return {}
    script = ("import json, sys\n"
              "from mutmut.mutation.diff_apply import get_diff_for_mutant\n"
              "names, path = json.load(sys.stdin)\n"
              "print(json.dumps({n: get_diff_for_mutant(n, path=path) for n in names}))\n")
    out = subprocess.run([sys.executable, "-c", script], cwd=work, capture_output=True,
                         text=True, input=json.dumps([names, module]))
    if out.returncode != 0:
        raise SystemExit(f"tools/mutate.py: reading the mutants' diffs failed: "
                         f"{out.stderr.strip()[-2000:]}")
    return json.loads(out.stdout)


def key_of(module: str, name: str, diff: str) -> tuple[str, str, str]:
    """A mutant's identity that survives renumbering: its function and its mutated line."""
    function = name.rsplit(".", 1)[-1].split("__mutmut_")[0]
    function = function[2:] if function.startswith("x_") else function
    function = function.replace("x\u01c1", "").replace("\u01c1", ".")
    plus = [ln[1:].strip() for ln in diff.splitlines()
            if ln.startswith("+") and not ln.startswith("+++")]
    return module, function, " ".join(plus)


def function_pattern(module: str, function: str) -> str:
    """mutmut's name pattern of the mutants of ``function`` (``name`` or ``Class.method``)
    of ``module``."""
    dotted = module.removesuffix(".py").replace("/", ".")
    cls, _, meth = function.rpartition(".")
    name = f"x\u01c1{cls}\u01c1{meth}" if cls else f"x_{meth}"
    return f"{dotted}.{name}__mutmut_*"


def in_functions(name: str, patterns: list[str] | None) -> bool:
    """Whether mutant ``name`` belongs to one of the functions of ``patterns``."""
    return patterns is None or any(name.startswith(p[:-1]) and
                                   name[len(p) - 1:].isdigit() for p in patterns)


def is_equivalent(module: str, name: str, diff: str, known) -> bool:
    """Listed as equivalent: by its mutated line, or, where that line alone is ambiguous
    (``)`` may be the mutant of several calls), by ``<removed line> => <mutated line>``."""
    key = key_of(module, name, diff)
    minus = [ln[1:].strip() for ln in diff.splitlines()
             if ln.startswith("-") and not ln.startswith("---")]
    return key in known or (module, key[1], f"{' '.join(minus)} => {key[2]}") in known


def plant(module: str, old: str, new: str, tests: list[str]) -> int:
    """Plant one bug (``old`` -> ``new``, exactly one occurrence) in a scratch copy of the tree
    and run ``tests`` (default: the module's ``TESTS``) there; print the failing tests. 0: the
    tests caught it; 1: it survived; 2: bad arguments."""
    src_path = ROOT / module
    if not src_path.is_file():
        print(f"tools/mutate.py: --plant: no module {module!r} in {ROOT}", file=sys.stderr)
        return 2
    count = src_path.read_text().count(old)
    if count != 1:
        print(f"tools/mutate.py: --plant: the text to replace must occur exactly once in "
              f"{module}; it occurs {count} times", file=sys.stderr)
        return 2
    tests = tests or [t for t in TESTS.get(module, ["tests"]) if (ROOT / t).exists()]
    work = WORK / "plant"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    for name in PACKAGES + ("tests",):
        shutil.copytree(ROOT / name, work / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", work / "pyproject.toml")
    (work / module).write_text(src_path.read_text().replace(old, new))
    print(f"planted in {module}:\n- {old}\n+ {new}\nrunning {' '.join(tests)}", flush=True)
    env = dict(os.environ, CI="true", PYTHONPATH=str(work))
    start = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-o", "addopts=", "--tb=line", "-rf",
                          *[f"--ignore={t}" for t in IGNORED], *tests],
                         cwd=work, env=env, capture_output=True, text=True,
                         stdin=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    lines = run.stdout.splitlines()
    failed = [ln for ln in lines if ln.startswith("FAILED ") or ln.startswith("ERROR ")]
    tail = lines[-1] if lines else run.stderr.strip()[-500:]
    if run.returncode == 0:
        print(f"SURVIVED: no test failed ({tail}; {seconds:.0f} s)")
        return 1
    if run.returncode != 1:  # collection errors, usage errors, interrupted
        sys.stdout.write(run.stdout[-3000:] + run.stderr[-3000:])
        print(f"KILLED? pytest exited {run.returncode}: read the output above")
        return 0
    print("\n".join(failed))  # each failing test with its assertion
    print(f"KILLED: {len(failed)} test(s) failed ({tail}; {seconds:.0f} s)")
    return 0


def main(argv=None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] == "--plant":
        if len(argv) < 4:
            print("usage: tools/mutate.py --plant MODULE OLD NEW [TEST ...]", file=sys.stderr)
            return 2
        return plant(argv[1], argv[2], argv[3], list(argv[4:]))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("modules", nargs="*", help="modules of the numeric core (default: all)")
    ap.add_argument("--changed", nargs="?", const="main", metavar="REF",
                    help="only the core modules changed since REF (default main)")
    ap.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--target", type=float, default=0.95,
                    help="kill rate of non-equivalent mutants each module must reach")
    ap.add_argument("--keep", action="store_true",
                    help="keep the scratch tree's verdicts: run only the mutants not yet run "
                         "(or of functions changed since)")
    ap.add_argument("--survivors", action="store_true",
                    help="run only the survivors and the mutants not run yet, by name, "
                         "against the current tests (implies --keep)")
    ap.add_argument("--functions", nargs="+", metavar="NAME",
                    help="only the mutants of these functions (name or Class.method) of "
                         "one module: run and report")
    ap.add_argument("--report", action="store_true",
                    help="only report the scratch tree's verdicts (a run stopped or running)")
    args = ap.parse_args(argv)
    core = core_modules()
    unknown = [m for m in args.modules if m not in core]
    if unknown:
        ap.error(f"not in the numeric core ([tool.mutmut] only_mutate): {', '.join(unknown)}; "
                 f"the core is {', '.join(core)}")
    modules = args.modules or core
    if args.changed is not None:
        touched = set(changed_files(args.changed))
        modules = [m for m in modules if m in touched]
    modules = [m for m in modules if (ROOT / m).exists()]
    args.patterns = None
    if args.functions:
        if len(modules) != 1:
            ap.error("--functions: name exactly one module")
        args.patterns = [function_pattern(modules[0], f) for f in args.functions]
    if not modules:
        print("tools/mutate.py: no module of the numeric core to mutate")
        print(json.dumps({"modules": {}, "passed": True}))
        return 0
    mutmut = shutil.which("mutmut", path=str(Path(sys.executable).parent)) or "mutmut"
    known = equivalents()
    work = work_dir(modules)
    if args.report:
        missing = [m for m in modules if not (work / "mutants" / (m + ".meta")).exists()]
        if missing:
            ap.error(f"--report: no run of {', '.join(missing)} in {work}")
        return summarize(work, modules, known, args, seconds=None)
    before = {}
    if args.survivors:
        if not all((work / "mutants" / (m + ".meta")).exists() for m in modules):
            ap.error(f"--survivors: no earlier run of {', '.join(modules)} in {work}")
        before = {m: (json.loads((work / "mutants" / (m + ".meta")).read_text()),
                      selection(work)) for m in modules}
        # (their diffs are read from the last run's mutants, before prepare drops them)
        names = []
        for m in modules:
            codes = before[m][0]["exit_code_by_key"]
            survived = [n for n, code in codes.items() if code == 0]
            names += [n for n, diff in diffs_of(work, m, survived).items()
                      if not is_equivalent(m, n, diff, known)]
            names += [n for n, code in codes.items() if code is None]
            # and every mutant of a function changed or added since that run (patterns)
            dotted = m.removesuffix(".py").replace("/", ".")
            names += [f"{dotted}.{f}__mutmut_*"
                      for f in sorted(changed_functions(
                          (work / m).read_text(), plain_kernels((ROOT / m).read_text())))]
    work = prepare(modules, args.keep or args.survivors)
    start = time.perf_counter()
    env = dict(os.environ, CI="true")  # tests/conftest.py: derandomised hypothesis
    cmd = ["nice", "-n", "10", mutmut, "run", "--max-children", str(args.max_children)]
    if args.survivors:
        names = [n for n in names if in_functions(n, args.patterns)
                 or (n.endswith("*") and n in args.patterns)]
        if not names:
            print("tools/mutate.py: no survivor to run again")
        cmd = cmd + names if names else None
    elif args.patterns:
        cmd = cmd + args.patterns
    try:
        if cmd is not None:
            # stdin from /dev/null: a run in the background whose test (or mutant) reads
            # stdin would otherwise be stopped by SIGTTIN, with all of mutmut's processes
            run = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True,
                                 stdin=subprocess.DEVNULL)
            if run.returncode != 0:
                sys.stdout.write(run.stdout[-3000:])
                sys.stderr.write(run.stderr[-3000:])
                print(f"tools/mutate.py: mutmut exited {run.returncode}", file=sys.stderr)
                return 2
    finally:  # also when the run is stopped (Ctrl-C): the next --survivors goes on from here
        for m, (meta, tests) in before.items():
            restore_verdicts(work, m, meta, tests)
    return summarize(work, modules, known, args, seconds=time.perf_counter() - start)


def summarize(work: Path, modules: list[str], known, args, seconds: float | None) -> int:
    """Print every survivor's diff and the counts per module; the exit status."""
    summary = {}
    # a mutant whose test process died of a signal (SIGSEGV: a compiled kernel handed a
    # mutated array) was noticed by the tests: counted as killed, as mutmut counts it
    status = {0: "survived", 1: "killed", 3: "killed", 33: "no tests", 5: "no tests",
              36: "timeout", 24: "timeout", -24: "timeout", 152: "timeout", 255: "timeout",
              -11: "killed", 139: "killed"}
    for module in modules:
        meta = {n: code for n, code in verdicts(work, module).items()
                if in_functions(n, getattr(args, "patterns", None))}
        counts = {"killed": 0, "survived": 0, "equivalent": 0, "timeout": 0, "no tests": 0,
                  "not run": 0, "other": 0}
        print(f"\n== {module}")
        diffs = diffs_of(work, module, [n for n, code in meta.items() if code == 0])
        for name, code in sorted(meta.items()):
            s = "not run" if code is None else status.get(code, "other")
            if s == "survived":
                diff = diffs[name]
                if is_equivalent(module, name, diff, known):
                    counts["equivalent"] += 1
                    continue
                print(f"# {name}: survived\n{diff}\n")
            elif s in ("no tests", "other"):
                print(f"{name}: {s} (exit code {code})")
            counts[s] += 1
        # a timeout is a mutant the tests noticed (it never finished), as in mutmut's score
        live = counts["killed"] + counts["timeout"] + counts["survived"] + counts["no tests"]
        rate = (counts["killed"] + counts["timeout"]) / live if live else 1.0
        summary[module] = dict(counts, total=len(meta), kill_rate=round(rate, 4))
        print(f"-- {module}: {json.dumps(summary[module])}")
    # the rate is over the mutants run: a module with mutants not run has not passed
    passed = all(s["kill_rate"] >= args.target and not s["not run"] for s in summary.values())
    print(json.dumps({"modules": summary,
                      **({"functions": args.functions} if getattr(args, "functions", None)
                         else {}),
                      "seconds": None if seconds is None else round(seconds, 1),
                      "max_children": args.max_children, "target": args.target,
                      "passed": passed}))
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
