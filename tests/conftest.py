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


def pytest_collection_modifyitems(config, items):
    """The tests marked ``slow`` (seconds each: whole scenarios, guests, statistical checks)
    first, each group in its collection order: a slow test started last would hold one
    process while the others stand idle, and on a loaded machine that tail is most of the
    wall clock."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
