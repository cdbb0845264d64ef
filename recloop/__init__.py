"""recloop: the harness that runs scenario files and puts every estimate beside the truth.

The command line (``recloop run | validate | list | report``) is the usual entry point; the
same steps are available from Python, with the results as pandas DataFrames::

    import recloop

    res = recloop.run("quickstart")       # a built-in name, a scenario file or a dict
    res.summary()                         # bias, RMSE and coverage over logs, per estimator
    res.per_log()                         # every estimate on every log, beside the truth
    res.frame()                           # every row of results.csv
    res = recloop.load_results("runs/quickstart")

``run``, ``load_results``, ``run_scenario``, ``write_report`` and ``summarize`` are imported on
first use (they pull in numpy, tqdm, matplotlib or pandas), so ``import recloop`` stays light.
"""

from recloop._results import Measurement
from recloop._rundir import RunDirError
from recloop._scenario import Scenario, ScenarioError, builtin_scenarios, load_scenario

__version__ = "0.1.0"

__all__ = [
    "CellError",
    "Measurement",
    "Results",
    "RunDirError",
    "Scenario",
    "ScenarioError",
    "SummaryRow",
    "__version__",
    "builtin_scenarios",
    "load_results",
    "load_scenario",
    "main",
    "run",
    "run_scenario",
    "summarize",
    "write_report",
]

_LAZY = {"run_scenario": "recloop._runner", "CellError": "recloop._runner",
         "write_report": "recloop._report", "main": "recloop._cli",
         "run": "recloop._api", "Results": "recloop._api", "load_results": "recloop._api",
         "summarize": "recloop._summary", "SummaryRow": "recloop._summary"}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'recloop' has no attribute {name!r}")
