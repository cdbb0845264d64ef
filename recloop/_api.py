"""The Python API: run a scenario from a notebook and get its results as DataFrames.

::

    import recloop

    res = recloop.run("quickstart", workers=1)
    res.summary()          # the first screen: bias, RMSE, coverage over logs (full_summary())
    res.per_log()          # every estimator's estimate on every log, with the truth
    res.frame()            # every row of results.csv, params as columns
    res.report_path        # report.md (report.html beside it)

    res = recloop.load_results("runs/quickstart")   # a finished run directory

pandas is imported when a DataFrame is asked for, never at ``import recloop``.
"""

from __future__ import annotations

import numbers
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path

from recloop import _rundir
from recloop._scenario import Scenario, ScenarioError

__all__ = ["Results", "load_results", "run"]


class Results:
    """The results of a run directory, read from its verified cell files.

    Built by :func:`run` and :func:`load_results`. Every table is read from the cell files
    (checked against ``scenario.toml`` and their checksums when the object is made), the
    source ``results.csv``, ``estimates.csv.gz`` and ``report.md`` are written from.

    Attributes
    ----------
    run_dir : Path
        The run directory (a temporary one, removed with this object, when :func:`run` was
        given ``out=None``).
    report_path : Path
        ``report.md`` (``report.html`` is beside it).
    scenario : dict
        The resolved scenario (every default filled in).
    """

    def __init__(self, run_dir, *, _keep=None):
        from recloop._cells import iter_cells
        from recloop._report import verified_cells

        self.run_dir = Path(run_dir)
        self._keep = _keep  # the TemporaryDirectory of an `out=None` run: lives with us
        scenario, cells, digest = verified_cells(self.run_dir)
        self.scenario = scenario
        rows, estimates = [], []
        for payload in iter_cells(self.run_dir, cells, scenario=digest):
            rows += payload["rows"]
            estimates += payload["estimates"]
        self._rows, self._estimates = rows, estimates

    @property
    def report_path(self) -> Path:
        return self.run_dir / "report.md"

    def __repr__(self) -> str:
        return (f"<Results {self.scenario['run']['name']!r}: {len(self._rows)} rows, "
                f"{len(self._estimates)} per-log estimates in {self.run_dir}>")

    def frame(self):
        """Every row of ``results.csv`` as a tidy DataFrame: one row per measurement, the
        cell's parameters (``params``) expanded into columns (a parameter whose name is a
        column already -- e.g. ``n`` -- becomes ``params.n``)."""
        return _frame(self._rows, _rundir.COLUMNS)

    def per_log(self):
        """The per-log estimates (``estimates.csv.gz``) as a DataFrame: for every estimator
        and log its ``estimate``, ``stderr``, interval (``ci_low``, ``ci_high``),
        ``truth`` and ``error``, the ``seed`` of the cell and the ``log`` index within it
        (the seed is the log for evaluations that make one estimate per seed); params
        expanded as in :meth:`frame`. Compute your own metrics from it."""
        return _frame(self._estimates, _rundir.ESTIMATE_COLUMNS)

    def summary(self):
        """The first screen as a DataFrame: the rows ``recloop run`` shows on the terminal,
        in its order -- each evaluation's headline metric first, estimates beside a truth,
        and where there are more than a screen's rows the key rows (the last tick, the
        largest value of each numeric swept parameter within each categorical one). The
        columns of :meth:`full_summary`; the truth itself (the twin's score, an exact LOO)
        and rows that are errors already are in :meth:`full_summary` only."""
        from recloop._report import screen_rows

        return self._summary_frame(screen_rows(self._estimates, self.scenario))

    def full_summary(self):
        """Every row of the summary as a DataFrame: :func:`recloop.summarize` of the
        per-log estimates -- per (evaluation, agent, variant, metric, tick, params) the
        number of logs (``n``; ``n_nan`` without an estimate), the mean ``estimate``, its
        ``sd`` and ``se``, the ``truth``, ``bias``, ``rmse`` and ``coverage`` of the
        intervals (``NaN`` where the estimator gives none)."""
        from recloop._summary import summarize

        return self._summary_frame(summarize(self._estimates))

    @staticmethod
    def _summary_frame(rows):
        records = []
        for s in rows:
            d = {f.name: getattr(s, f.name) for f in fields(s)}
            d["params"] = dict(s.params)
            records.append(d)
        columns = [f for f in ("evaluation", "agent", "variant", "metric", "tick", "params",
                               "n", "n_nan", "estimate", "sd", "se", "truth", "bias", "rmse",
                               "coverage", "n_ci")]
        return _frame(records, columns)


#: Columns of any of the frames: a parameter of one of these names is ``params.NAME`` in
#: every frame (``log`` is estimates.csv.gz's integer column and calibrated_loo_cf's
#: parameter "real" / "simulated").
_RESERVED = frozenset(_rundir.ESTIMATE_COLUMNS) | {
    "n_nan", "sd", "se", "bias", "rmse", "coverage", "n_ci"}
#: recloop's own integer columns (nullable: a row without a tick).
_INTEGERS = ("tick", "n", "log", "n_ci")


def _frame(records: list[dict], columns: Sequence[str]):
    import pandas as pd

    names: list[str] = []
    for r in records:
        for k in r.get("params") or {}:
            if k not in names:
                names.append(k)
    base = [c for c in columns if c != "params"]
    renamed = {k: (f"params.{k}" if k in _RESERVED or k in base else k) for k in names}
    data = {c: [r.get(c) for r in records] for c in base}
    for k in names:
        data[renamed[k]] = [(r.get("params") or {}).get(k) for r in records]
    frame = pd.DataFrame(data, columns=base + [renamed[k] for k in names])
    for c in _INTEGERS:
        if c in base:  # never a parameter's column, whatever it holds
            frame[c] = frame[c].astype("Int64")
    for c in ("agent", "variant"):
        if c in frame:
            frame[c] = frame[c].fillna("")
    return frame


def load_results(run_dir) -> Results:
    """The results of a finished run directory (``recloop run``'s, or :func:`run`'s).

    Raises
    ------
    recloop.RunDirError
        ``run_dir`` is not a run directory, or one whose ``scenario.toml`` or cell files
        are missing or damaged (the message names the file; an unfinished run continues
        with ``recloop run SCENARIO --resume``).
    TypeError
        ``run_dir`` is not a path.
    """
    if not isinstance(run_dir, (str, os.PathLike)):
        raise TypeError(f"`run_dir` must be a path (str or os.PathLike); got "
                        f"{type(run_dir).__name__}.")
    path = Path(run_dir)
    if not path.is_dir():
        raise _rundir.RunDirError(f"{path}: expected a run directory, got "
                                  f"{'no such folder' if not path.exists() else 'a file'}")
    if not (path / "scenario.toml").exists() and not (path / "cells").is_dir():
        raise _rundir.RunDirError(f"{path}: expected a run directory (with scenario.toml and "
                                  "cells/), got a folder without them")
    wrong = _rundir.layout_problems(path)
    if wrong:  # e.g. cells/ a file: named, not a bare NotADirectoryError
        raise _rundir.RunDirError(f"{wrong[0]} (the run directory {path} cannot be read as "
                                  "it is)")
    return Results(path)


def _scenario(scenario, overrides: list[str]) -> Scenario:
    from recloop._scenario import apply_overrides, find_scenario, load_scenario, validate

    if isinstance(scenario, Scenario):
        data = scenario.data
        if overrides:
            data = apply_overrides(data, overrides, scenario.path)
        return validate(data, scenario.path)
    if isinstance(scenario, Mapping):
        file = "<dict>"
        data = apply_overrides(dict(scenario), overrides, file) if overrides else dict(scenario)
        return validate(data, file)
    if isinstance(scenario, (str, os.PathLike)):
        return load_scenario(find_scenario(os.fspath(scenario)), overrides=overrides)
    raise TypeError(f"`scenario` must be a built-in scenario name, a path, a dict or a "
                    f"Scenario; got {type(scenario).__name__}.")


def _overrides(set) -> list[str]:
    """``set`` as ``KEY=VALUE`` strings: a mapping (``{"evaluations.0.n_logs": 20}``) or a
    sequence of strings (as ``--set``)."""
    from recloop._toml import toml_value

    if set is None:
        return []
    if isinstance(set, Mapping):
        out, bad = [], []
        for k, v in set.items():
            if not isinstance(k, str) or not k:
                bad.append(f"set: expected keys that are dotted key paths (strings), got {k!r}")
                continue
            try:
                out.append(f"{k}={toml_value(v)}")
            except (TypeError, ValueError) as exc:
                bad.append(f"set {k}: expected a TOML value (number, string, boolean, list, "
                           f"table), got {v!r} ({exc})")
        if bad:
            raise ScenarioError(bad)
        return out
    if isinstance(set, (str, bytes)) or not isinstance(set, Sequence):
        raise ScenarioError([f"set: expected a mapping key -> value or a list of "
                             f"\"KEY=VALUE\" strings, got {set!r}"])
    bad = [f"set[{j}]: expected a \"KEY=VALUE\" string, got {x!r}"
           for j, x in enumerate(set) if not isinstance(x, str)]
    if bad:
        raise ScenarioError(bad)
    return list(set)


def run(scenario, *, out=None, seed=None, workers=None, executor: str = "local", set=None,
        progress: bool = True, force: bool = False, cell_timeout=None) -> Results:
    """Run a scenario (as ``recloop run`` does) and return its :class:`Results`.

    Parameters
    ----------
    scenario : str, path, dict or Scenario
        A built-in scenario name (``"quickstart"``; ``recloop list`` shows them), a
        scenario file, or the scenario as a dict (the TOML document's tables).
    out : path, optional
        Folder receiving the run directory ``OUT/NAME`` (``NAME-2``, ... when it exists).
        ``None``: a temporary folder, removed when the returned ``Results`` is.
    seed : int, optional
        First replicate seed (overrides ``run.seed`` / ``run.seeds``), in [0, 2**62].
    workers : int, optional
        Parallel worker processes (default: the number of CPUs; 1 runs the cells here).
    executor : {"local", "dask"}
        Local processes, or a Dask LocalCluster of ``workers`` (``recloop[dask]``).
    set : mapping or list of str, optional
        Overrides applied before validation, as ``recloop run --set``:
        ``{"evaluations.0.n_logs": 20}`` or ``["evaluations.0.n_logs=20"]``.
    progress : bool, default True
        Progress bars and messages (on standard error and standard output).
    force : bool, default False
        Run a scenario whose cells' estimated memory exceeds the memory available, or whose
        estimated time exceeds :data:`recloop._limits.MAX_RUN_SECONDS` (a day): refused
        otherwise, with the estimate and the keys behind it.
    cell_timeout : float, optional
        Seconds a cell's worker may go without a sign of progress before the cell is
        stopped and recorded as failed (default: ``[run] cell_timeout``, else an hour;
        ``docs/running.md``).

    Returns
    -------
    Results

    Raises
    ------
    recloop.ScenarioError
        An unknown scenario name, a missing file, a bad dict or a bad ``set``: every
        problem listed, as ``recloop validate`` does; nothing is written.
    TypeError, ValueError
        A bad ``seed``, ``workers``, ``executor``, ``out`` or ``cell_timeout``; a run that
        cannot start (the run directory cannot be made, the Dask extra is missing) or that
        would not fit in memory or in a day (without ``force``).
    recloop.CellError
        A cell raised (its traceback is in the run directory's ``errors.log``; finished
        cells are kept: run again with ``recloop run SCENARIO --resume``).

    Examples
    --------
    >>> import recloop
    >>> res = recloop.run("quickstart", workers=1, progress=False,
    ...                   set={"evaluations.0.sweep.n": [50]})  # doctest: +SKIP
    >>> res.summary()[["agent", "metric", "estimate", "truth", "rmse"]]  # doctest: +SKIP
    """
    from recloop._runner import _UsageError, run_scenario

    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)):
        raise TypeError(f"`seed` must be an int or None; got {type(seed).__name__}.")
    if seed is not None and not 0 <= seed <= 2**62:
        raise ValueError(f"`seed` must be in [0, 2**62]; got {seed}.")
    if workers is not None and (isinstance(workers, bool)
                                or not isinstance(workers, numbers.Integral)):
        raise TypeError(f"`workers` must be an int or None; got {type(workers).__name__}.")
    if workers is not None and workers < 1:
        raise ValueError(f"`workers` must be >= 1; got {workers}.")
    if executor not in ("local", "dask"):
        raise ValueError(f"`executor` must be 'local' or 'dask'; got {executor!r}.")
    if out is not None and not isinstance(out, (str, os.PathLike)):
        raise TypeError(f"`out` must be a path or None; got {type(out).__name__}.")
    if cell_timeout is not None:
        if isinstance(cell_timeout, bool) or not isinstance(cell_timeout, numbers.Real):
            raise TypeError(f"`cell_timeout` must be a number of seconds or None; got "
                            f"{type(cell_timeout).__name__}.")
        if not 0 < cell_timeout <= 30 * 86400:
            raise ValueError(f"`cell_timeout` must be in (0, {30 * 86400}] seconds; got "
                             f"{cell_timeout!r}.")
    sc = _scenario(scenario, _overrides(set))
    if seed is not None:
        sc = sc.with_seed(int(seed))
    if workers is None:
        from recloop_base.threads import cpus

        workers = cpus()
    # recloop's own workers and guests are fresh interpreters that never import the caller's
    # script; a Dask LocalCluster starts its workers with multiprocessing, which does
    where = _unguarded_script_call() if executor == "dask" and workers > 1 else None
    if where is not None:
        raise RuntimeError(
            f"recloop.run(executor=\"dask\") is called at the top level of the script {where}, "
            "outside `if __name__ == \"__main__\":`. Dask's LocalCluster starts its workers "
            "by importing the script, which would call recloop.run again in each of them. "
            "Put the call under `if __name__ == \"__main__\":` (the local executor, the "
            "default, needs no guard).")
    keep = None
    if out is None:
        keep = tempfile.TemporaryDirectory(prefix="recloop-")
        out = keep.name
    try:
        run_dir = run_scenario(sc, out=out, workers=int(workers), executor=executor,
                               quiet=not progress, argv=["recloop.run", sc.path], force=force,
                               cell_timeout=cell_timeout)
    except _UsageError as exc:
        if keep is not None:
            keep.cleanup()
        raise ValueError(str(exc).replace("pass --force", "pass force=True")) from None
    except BaseException:
        if keep is not None:
            keep.cleanup()
        raise
    return Results(run_dir, _keep=keep)


def _is_main_test(test) -> bool:
    """``__name__ == "__main__"`` (either side)."""
    import ast

    if not (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return (any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides)
            and any(isinstance(x, ast.Constant) and x.value == "__main__" for x in sides))


def _unguarded_script_call() -> str | None:
    """``"script.py, line 12"`` when a script calls :func:`run` from its top level outside
    ``if __name__ == "__main__":`` (a Dask LocalCluster's workers import the script and would
    run the call again), else ``None``; read from the caller's frame and the script's
    source."""
    import ast
    import sys

    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if not isinstance(path, str) or not path.endswith(".py"):
        return None
    frame = sys._getframe(1)
    while frame is not None and not (frame.f_globals is vars(main)
                                     and frame.f_code.co_name == "<module>"):
        frame = frame.f_back
    if frame is None:  # not from the script's own code (a notebook, recloop's command)
        return None
    line = frame.f_lineno
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_main_test(node.test) and (
                node.lineno <= line <= (node.end_lineno or node.lineno)):
            return None
    return f"{path}, line {line}"
