"""recloop: the harness that runs scenario files and puts every estimate beside the truth.

The command line (``recloop run | validate | list | report``) is the usual entry point; the
same steps are available from Python::

    from recloop import load_scenario, run_scenario
    run_dir = run_scenario(load_scenario("quickstart"), out="runs")

``run_scenario`` and ``write_report`` are imported on first use (they pull in numpy, tqdm and
matplotlib), so ``import recloop`` stays light.
"""

from recloop._results import Measurement
from recloop._scenario import Scenario, ScenarioError, builtin_scenarios, load_scenario

__version__ = "0.1.0"

__all__ = [
    "Measurement",
    "Scenario",
    "ScenarioError",
    "__version__",
    "builtin_scenarios",
    "load_scenario",
    "main",
    "run_scenario",
    "write_report",
]

_LAZY = {"run_scenario": "recloop._runner", "write_report": "recloop._report",
         "main": "recloop._cli"}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'recloop' has no attribute {name!r}")
