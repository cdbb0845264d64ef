import os

from hypothesis import HealthCheck, settings

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
