import os

# The suite's processes share the cores as recloop's own workers do (recloop._runner's
# _worker_env): pytest-xdist runs a test process per core, so BLAS and OpenMP pools of more
# than one thread in each would oversubscribe the cores, and OpenBLAS's threads spin while
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
