import os

# The suite's processes share the cores as recloop's own workers do (recloop._runner's
# _worker_env): pytest-xdist runs several test processes per core, so BLAS and OpenMP pools
# of more than one thread in each would oversubscribe the cores, and OpenBLAS's threads spin while
# they wait (measured: 18% more CPU for ope_real's figure test, more under load). Set before
# anything imports numpy; inherited by xdist's workers and the subprocesses tests start;
# a value the user has set is kept.
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

from hypothesis import HealthCheck, settings  # noqa: E402 (imports no numpy)

# tests/fixtures holds users' plugins for --path (some end the process when imported): data
# of the tests, never collected (--doctest-modules would import them)
collect_ignore = ["fixtures"]

# CI must not flake: derandomised examples there, no per-example deadline anywhere (2 cores,
# JIT compilation on first call).
settings.register_profile(
    "ci", deadline=None, derandomize=True, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else "dev")


#: Test processes per CPU for ``-n auto`` (pyproject's addopts).
PROCESSES_PER_CPU = 4


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: :data:`PROCESSES_PER_CPU` test processes per CPU this process may run on.

    The suite is CPU-bound, and on a machine shared with other work each runnable process
    gets an equal share of the cores: beside eight busy processes on two cores, two test
    processes get 2 x 2/10 = 0.4 of a core, eight get 2 x 8/16 = 1 (docs/testing.md, "The
    suite's time"). On an idle machine the extra processes cost their start-up and
    collection (about 9 s of CPU each). ``PYTEST_XDIST_AUTO_NUM_WORKERS`` (xdist's own
    variable) and ``-n N`` win.
    """
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist's own hook reads it
    from recloop_base.threads import cpus

    return PROCESSES_PER_CPU * cpus()


def pytest_configure(config):
    """Compile the tree's bytecode once, before the test processes start (the controlling
    process, or the only one with ``-n 0``): :func:`compile_bytecode`."""
    if not hasattr(config, "workerinput"):
        compile_bytecode(config)


def compile_bytecode(config) -> None:
    """Write the bytecode of recloop's packages and of the tests (:func:`write_bytecode`) where
    it is missing or out of date, so that each test process, and each interpreter a test
    starts (commands, guests, workers), reads it instead of compiling the same sources again.

    Where ``PYTHONDONTWRITEBYTECODE`` is set (as on our machines) each test process would
    otherwise rewrite and compile every test module at collection, 5 s of CPU each, and each
    interpreter compile the packages it imports: 56 s of the suite's CPU (docs/testing.md,
    "The suite's time"). Only these sources are written, never a file a test writes.
    """
    from fnmatch import fnmatch
    from pathlib import Path

    from recloop._runner import CODE_PACKAGES

    tests = Path(__file__).resolve().parent
    patterns = ["conftest.py", *config.getini("python_files")]
    plain, rewritten = [], []
    for path in sorted(tests.rglob("*.py")):
        if "fixtures" in path.relative_to(tests).parts:
            continue  # users' plugins (tests/fixtures): data, imported by the tests' guests
        if any(fnmatch(path.name, p) for p in patterns):
            rewritten.append(path)  # by pytest's import hook: its assertions explained
        else:
            plain.append(path)  # the tests' helpers, imported as any module
    for name in CODE_PACKAGES:
        plain.extend(p for p in sorted((tests.parent / name).rglob("*.py"))
                     if "__pycache__" not in p.parts)
    write_bytecode(plain, rewritten if config.getoption("assertmode") == "rewrite" else [],
                   config)


def write_bytecode(plain, rewritten, config) -> None:
    """Bytecode that cannot be stale, for the modules ``plain`` (imported as any module) and
    ``rewritten`` (test modules, imported through pytest's assertion rewriting).

    ``plain`` get hash-checked ``.pyc`` files (PEP 552, ``CHECKED_HASH``: Python compares the
    source's hash at every import, so an edited file is never run from old bytecode,
    whatever its time stamp and size); ``rewritten`` get pytest's own rewritten bytecode,
    written and checked as its import hook does (by the source's hash since pytest 9; by
    its time stamp and size before, as pytest's own writes). Up-to-date files are left
    alone. The bytecode is only a saving: a file that cannot be compiled is left to pytest,
    which reports its error at collection, and if pytest's functions for it moved, every
    test module is (``test_conftest.py`` says so).
    """
    import importlib.util
    import py_compile
    from pathlib import Path

    checked_hash = b"\x03\x00\x00\x00"  # PEP 552's flags: hash-based, checked
    for path in plain:
        pyc = Path(importlib.util.cache_from_source(str(path)))
        try:
            with open(pyc, "rb") as f:
                header = f.read(16)
        except OSError:
            header = b""
        try:
            source = Path(path).read_bytes()
        except OSError:
            continue
        if header != (importlib.util.MAGIC_NUMBER + checked_hash
                      + importlib.util.source_hash(source)):
            py_compile.compile(str(path), cfile=str(pyc), doraise=False, quiet=2,
                               invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
    try:
        from _pytest.assertion import assertstate_key
        from _pytest.assertion.rewrite import (
            PYC_TAIL,
            _read_pyc,
            _rewrite_test,
            _write_pyc,
            get_cache_dir,
        )

        state = config.stash[assertstate_key]
    except (ImportError, AttributeError, KeyError):
        return
    for path in map(Path, rewritten):
        try:
            pyc = get_cache_dir(path) / (path.name[:-3] + PYC_TAIL)
            if _read_pyc(path, pyc) is None:  # as pytest's AssertionRewritingHook does
                key, co = _rewrite_test(path, config)
                pyc.parent.mkdir(exist_ok=True)
                _write_pyc(state, co, key, pyc)
        except Exception:  # a syntax error, a file gone: pytest reports it at collection
            continue


def pytest_collection_modifyitems(config, items):
    """The tests marked ``slow`` (seconds each: whole scenarios, guests, statistical checks)
    first, each group in its collection order: a slow test started last would hold one
    process while the others stand idle, and on a loaded machine that tail is most of the
    wall clock."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
