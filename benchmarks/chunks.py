"""Every core busy (issue 26, section 3): one large cell on 1 and on 2 local workers.

The study: ONE ``ope`` cell -- ``--logs`` logs (default 200) of ``--n`` records (default
10,000) of the ``bred_linear`` world, softmax logging (beta 10), the three default targets,
seven estimators (IPS, SNIPS, DM, DR, SNDR, Switch-DR, DRos), the ridge reward model: the
shape of ``benchmarks/study.py``, run as users run it, ``recloop run FILE -q`` in a fresh
process (start-up, validation, tables and report included). With ``--workers 1`` the cell
runs whole in the command's process; with ``--workers 2`` the runner cuts it into chunks of
logs (``recloop._cells.plan_units``: 8 chunks of 25 logs at the default size) that the two
worker processes run, and merges them in log order (before issue 26 section 3 the second
core idled: the issue measured 328 and 341 ms per log). A chunk must carry a second of
estimated work (``MIN_CHUNK_SECONDS``): at 40 logs (1.7 s of work on an idle core) the cell
stays whole on 2 workers as well -- starting the workers would cost what the second core
saves -- and ``chunks`` says so.

Each setting runs ``--repeat`` times, interleaved; the best wall time of each counts. The
whole command is timed at ``--logs`` and at twice as many logs: the difference is the
marginal time of ``--logs`` logs (start-up, validation, pool start, tables and report
subtracted), the figure the issue's per-log table uses. Prints ONE JSON object on its last
line: the wall seconds of each setting, per-log milliseconds (marginal), the speed-ups (1
worker / 2 workers: marginal and of the whole command at ``--logs``), ``same_bytes``
(results.csv, results.jsonl, estimates.csv.gz and the cell file without its timing are
byte-identical between 1 and 2 workers), the CPUs and the load average before and after
(the machine may be shared: quote the figures with it).

Usage: ``.venv/bin/python benchmarks/chunks.py [--n 10000] [--logs 200] [--repeat 2]``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]

SCENARIO = """
[run]
name = "one_cell"

[world]
preset = "bred_linear"

[[evaluations]]
kind = "ope"
logging = "softmax"
beta = 10.0
n_rounds = {n}
n_logs = {logs}
estimators = ["ips", "snips", "direct_method", "doubly_robust", "sndr", "switch_dr", "dr_os"]
"""


def _outputs(run_dir: Path) -> tuple:
    cells = []
    for p in sorted((run_dir / "cells").glob("*.json")):
        payload = json.loads(p.read_text())
        payload.pop("seconds"), payload.pop("checksum")
        cells.append(payload)
    return ((run_dir / "results.csv").read_bytes(), (run_dir / "results.jsonl").read_bytes(),
            gzip.decompress((run_dir / "estimates.csv.gz").read_bytes()), cells)


def _run(scenario: Path, out: Path, workers: int) -> tuple[float, float, Path]:
    """Wall seconds, CPU seconds (the command and its workers) and the run directory."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "recloop", "run", str(scenario), "-q", "--workers",
                    str(workers), "--out", str(out)], check=True, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    return seconds, cpu, run_dir


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--logs", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    load_before = os.getloadavg()
    sizes = (args.logs, 2 * args.logs)
    times: dict[tuple[int, int], list[float]] = {}
    outputs: dict[tuple[int, int], tuple] = {}
    cpus: dict[tuple[int, int], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeat):
            for logs in sizes:
                scenario = Path(tmp) / f"one_cell_{logs}.toml"
                scenario.write_text(SCENARIO.format(n=args.n, logs=logs))
                for workers in (1, 2):
                    seconds, cpu, run_dir = _run(scenario,
                                                 Path(tmp) / f"w{workers}_{logs}_{r}", workers)
                    times.setdefault((workers, logs), []).append(seconds)
                    cpus.setdefault((workers, logs), []).append(cpu)
                    outputs.setdefault((workers, logs), _outputs(run_dir))
                    print(f"{logs} logs, --workers {workers}: {seconds:.1f} s", file=sys.stderr)
    chunks = {}
    for logs in sizes:  # what the runner planned
        from recloop._cells import Chunk, plan_cells, plan_units
        from recloop._scenario import loads_scenario

        data = loads_scenario(SCENARIO.format(n=args.n, logs=logs)).data
        units = plan_units(data, plan_cells(data), 2)
        chunks[str(logs)] = sum(isinstance(u, Chunk) for u in units) or 1
    best = {k: min(v) for k, v in times.items()}
    marginal = {w: best[w, sizes[1]] - best[w, sizes[0]] for w in (1, 2)}
    out = {
        "study": {"cells": 1, "logs": args.logs, "n_rounds": args.n, "targets": 3,
                  "estimators": 7, "world": "bred_linear", "logging": "softmax(beta=10)"},
        "workers_1_s": round(best[1, args.logs], 2), "workers_2_s": round(best[2, args.logs], 2),
        "speedup_whole_command": round(best[1, args.logs] / best[2, args.logs], 2),
        "workers_1_ms_per_log": round(1000 * marginal[1] / args.logs, 1),
        "workers_2_ms_per_log": round(1000 * marginal[2] / args.logs, 1),
        "speedup_per_log": round(marginal[1] / marginal[2], 2),
        "all_times_s": {f"workers={w},logs={n}": [round(t, 2) for t in v]
                        for (w, n), v in times.items()},
        # the CPU time of the command and its workers: what the second worker's start-up
        # and the chunks' set-ups add (on a shared machine the wall clock also depends on
        # how much of the second core the others leave)
        "cpu_s": {f"workers={w},logs={n}": [round(t, 2) for t in v]
                  for (w, n), v in cpus.items()},
        "same_bytes": all(outputs[1, n] == outputs[2, n] for n in sizes),
        "units_on_2_workers": chunks,
        "cpus": len(os.sched_getaffinity(0)),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
