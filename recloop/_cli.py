"""The ``recloop`` command line: run, validate, list and report scenarios; evaluate a user's log.

Exit codes: 0 success; 1 the run failed (a cell raised -- its traceback is in the run
directory's ``errors.log`` --, a worker died, the Dask scheduler went away: finished cells are
kept, ``--resume`` continues); 2 bad input (scenario problems, usage errors, a run that would
not fit in memory -- nothing is created then --, or a damaged run directory, repaired as far
as possible); 130 interrupted by Ctrl-C, 143 by SIGTERM, 129 by SIGHUP (finished cells are
kept, continue with ``--resume``).

Every failure the user can cause or meet is one line on standard error; tracebacks go to
``errors.log`` only (of the run directory, or a file in the temporary folder named in that
line when there is none).
"""

from __future__ import annotations

import argparse
import os
import re
import sys

__all__ = ["main"]

#: Exit codes.
OK, FAILED, USAGE = 0, 1, 2


def _cpus() -> int:
    # as recloop_base.threads.cpus, without importing numpy (keeps --help instant)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _parser() -> argparse.ArgumentParser:
    from recloop import __version__

    parser = argparse.ArgumentParser(
        prog="recloop", description="Run recommender-evaluation scenarios against a simulated "
        "ground truth.")
    parser.add_argument("--version", action="version", version=f"recloop {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="run scenario files (or built-in scenario names)")
    run.add_argument("files", nargs="+", metavar="FILE", help="scenario file or built-in name")
    run.add_argument("--out", default="runs", metavar="DIR",
                     help="folder that receives the run directories (default: runs)")
    run.add_argument("--seed", type=int, default=None, metavar="N",
                     help="first replicate seed (overrides run.seed / run.seeds)")
    run.add_argument("--workers", type=int, default=None, metavar="N",
                     help=f"parallel workers (default: the number of CPUs, {_cpus()} here)")
    run.add_argument("--executor", choices=("local", "dask"), default="local",
                     help="local process pool (default) or a Dask cluster")
    run.add_argument("--scheduler", default=None, metavar="ADDRESS",
                     help="Dask scheduler address (default: a LocalCluster)")
    run.add_argument("--scheduler-timeout", type=float, default=30.0, metavar="SECONDS",
                     help="seconds the Dask scheduler has to answer (default 30)")
    run.add_argument("--resume", action="store_true",
                     help="continue the newest run directory of the scenario")
    run.add_argument("--dry-run", action="store_true",
                     help="validate, print each evaluation's memory and time estimates and "
                          "list the cells, without running anything")
    run.add_argument("--force", action="store_true",
                     help="run even when a cell's memory estimate exceeds the memory "
                          "available, the run's time estimate exceeds a day, or with more "
                          "than 4 workers per CPU")
    run.add_argument("-q", "--quiet", action="store_true",
                     help="no progress (a bar on a terminal, else a line every 30 s with "
                          "the fraction done and an ETA) and no messages")
    _path_option(run)
    _set_option(run)
    _cell_timeout_option(run)

    val = sub.add_parser("validate", help="check scenario files; report every problem")
    val.add_argument("files", nargs="+", metavar="FILE")
    _path_option(val)
    _set_option(val)

    cal = sub.add_parser("calibrate", help="fit a world to a rating file, print how faithful "
                         "it is, save it (.npz)")
    cal.add_argument("data", metavar="PATH", help="the rating file")
    cal.add_argument("--format", choices=("movielens", "jester", "csv"), default="movielens",
                     help="movielens (100K u.data or 1M ratings.dat), jester or csv "
                          "(default: movielens)")
    cal.add_argument("--columns", default=None, metavar="USER,ITEM,RATING[,TIMESTAMP]",
                     help="csv only: header names of the columns")
    cal.add_argument("--rating-scale", nargs=2, type=float, default=None,
                     metavar=("LOW", "HIGH"), help="csv only: the ratings' scale")
    cal.add_argument("--min-rating", type=float, default=None, metavar="R",
                     help="count only ratings >= R as interactions")
    cal.add_argument("--n-factors", type=int, default=8, metavar="N",
                     help="rank of the fitted tastes (default 8)")
    cal.add_argument("--ctr", type=float, default=0.3, metavar="P",
                     help="assumed mean adoption probability of the observed pairs (0.3)")
    cal.add_argument("--exposure", type=float, default=1.0, metavar="E",
                     help="assumed exposure exponent of organic meetings (1.0)")
    cal.add_argument("--no-ratings", action="store_true",
                     help="fit no rating model (the world generates no ratings)")
    cal.add_argument("--holdout", type=float, default=None, metavar="F",
                     help="also fit on the first 1-F of the log's time span and compare the "
                          "world's continuation with the last F (0 < F <= 0.5; default 0.2 "
                          "for a log with timestamps; 0: in-sample fidelity only)")
    cal.add_argument("--force", action="store_true",
                     help="read a rating file larger than 256 MiB")
    cal.add_argument("--seed", type=int, default=0, metavar="N",
                     help="seed of the fit (as [world] seed) and of the fidelity check "
                          "(default 0)")
    cal.add_argument("--markdown", action="store_true", help="print the report as Markdown")
    cal.add_argument("--out", default=None, metavar="FILE.npz",
                     help="save the fitted world (load it with [world] file = ...)")

    lst = sub.add_parser("list", help="list the built-in scenarios and every kind a scenario "
                         "may name (plugins included)")
    _path_option(lst)

    _verify_parser(sub)

    rep = sub.add_parser("report", help="verify a run directory, rebuild its tables, "
                         "report.md, report.html and figures from its cell files")
    rep.add_argument("run_dir", metavar="RUN_DIR")
    rep.add_argument("--open", action="store_true",
                     help="open report.html in the web browser afterwards")

    from recloop._evaluate import add_parser as add_evaluate  # recloop evaluate (issue 37)

    add_evaluate(sub)
    return parser


def _cell_timeout_option(parser) -> None:
    parser.add_argument("--cell-timeout", type=float, default=None, metavar="SECONDS",
                        help="stop a cell whose worker shows no sign of progress for SECONDS "
                             "of its own time, recording it as failed (default: [run] "
                             "cell_timeout, else 3600; see docs/running.md)")


def _cell_timeout_problem(args) -> str | None:
    import math

    value = getattr(args, "cell_timeout", None)
    if value is not None and not (math.isfinite(value) and 0 < value <= 30 * 86400):
        return (f"--cell-timeout: expected seconds in (0, {30 * 86400}] (30 days), got "
                f"{value:g}")
    return None


def _verify_parser(sub) -> None:
    ver = sub.add_parser("verify", help="recompute a run directory's cells (all, or N chosen) "
                         "and compare them byte for byte with the stored ones")
    ver.add_argument("run_dir", metavar="RUN_DIR")
    ver.add_argument("--cells", type=int, default=None, metavar="N",
                     help="recompute N cells, spread over the evaluations and drawn with "
                          "--seed (default: all)")
    ver.add_argument("--seed", type=int, default=0, metavar="S",
                     help="seed of the choice of --cells (default 0)")
    ver.add_argument("--workers", type=int, default=1, metavar="N",
                     help="parallel workers (default 1)")
    ver.add_argument("--any-code", action="store_true",
                     help="recompute even when this code differs from the code that computed "
                          "the run (differences may then be the code's)")
    _path_option(ver)
    _cell_timeout_option(ver)


def _cmd_verify(args, out, err) -> int:
    """``recloop verify``: 0 when every chosen cell agrees, 1 naming each that does not, 2
    for unusable input."""
    from recloop._runner import VerifyError, verify_run, workers_problem

    problems = []
    if args.cells is not None and args.cells < 1:
        problems.append(f"--cells: expected an integer >= 1, got {args.cells}")
    if args.workers < 1:
        problems.append(f"--workers: expected an integer >= 1, got {args.workers}")
    elif workers_problem(args.workers, "local", None):
        problems.append(f"--workers: expected {workers_problem(args.workers, 'local', None)}")
    if not 0 <= args.seed <= 2**63 - 1:
        problems.append(f"--seed: expected an integer in [0, 2**63 - 1], got {args.seed}")
    problems += [p for p in [_cell_timeout_problem(args)] if p]
    for p in problems:
        print(f"recloop verify: {p}", file=err)
    if problems or not _use_paths(args, err):
        return USAGE
    try:
        verdicts = verify_run(args.run_dir, cells=args.cells, seed=args.seed,
                              workers=args.workers, paths=args.path, any_code=args.any_code,
                              echo=lambda line: print(line, file=out),
                              cell_timeout=args.cell_timeout)
    except VerifyError as exc:
        print(f"recloop verify: {exc}", file=err)
        return USAGE
    bad = [v for v in verdicts if not v.ok]
    for v in bad:
        print(f"recloop verify: cell {v.cell} does not agree with its recomputation: "
              f"{v.detail}", file=err)
    if not bad:
        print(f"{args.run_dir}: the {len(verdicts)} cell(s) recomputed agree with the stored "
              "ones byte for byte", file=out)
    return FAILED if bad else OK


def _set_option(parser) -> None:
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a scenario key before validation (repeatable), e.g. "
                             "--set world.calibrate_from=ml-100k/u.data --set "
                             "evaluations.0.n_logs=20")


def _path_option(parser) -> None:
    parser.add_argument("--path", action="append", default=[], metavar="DIR",
                        help="put DIR on the import path (repeatable): your agents and "
                             "estimators named \"package.module:attribute\" live there; "
                             "workers get it too")


def _use_paths(args, err) -> bool:
    """Give the ``--path`` folders to the guest processes (recloop's own process never puts
    them on its import path: users' code is never imported here); False (after a message)
    if one is missing or holds a module that would shadow one recloop needs
    (``logging.py``)."""
    from pathlib import Path

    ok = True
    for p in args.path:
        if not Path(p).is_dir():
            print(f"recloop: --path: expected a folder, got {p!r} (no such folder)", file=err)
            ok = False
    if ok and args.path:
        from recloop._plugins import path_problems

        for line in path_problems(args.path):
            print(f"recloop: {line}", file=err)
            ok = False
    if ok:
        from recloop._plugins import set_guest_paths

        args.path = [str(Path(p).resolve()) for p in args.path]
        set_guest_paths(args.path)
    return ok


def _registry_problems(err) -> bool:
    """Print the installed plugins' problems (a kind clashing with another); True if any."""
    from recloop._registry import registry

    for line in registry().problems:
        print(f"recloop: {line}", file=err)
    return bool(registry().problems)


def _load_all(files: list[str], err, overrides=()) -> list | None:
    """Load every file, printing every problem of every file; ``None`` if any."""
    from recloop._scenario import ScenarioError, find_scenario, load_scenario

    scenarios, ok = [], True
    for arg in files:
        try:
            scenarios.append(load_scenario(find_scenario(arg), overrides=overrides))
        except ScenarioError as exc:
            ok = False
            for line in exc.problems:
                print(line, file=err)
    return scenarios if ok else None


def _cmd_validate(args, out, err) -> int:
    from recloop._cells import plan_cells

    if not _use_paths(args, err) or _registry_problems(err):
        return 2
    scenarios = _load_all(args.files, err, args.set)
    if scenarios is None:
        return 2
    for sc in scenarios:
        print(f"{sc.path}: ok ({len(plan_cells(sc.data))} cells)", file=out)
    return 0


def _cmd_list(args, out, err) -> int:
    from recloop._registry import registry
    from recloop._scenario import ScenarioError, builtin_scenarios, load_scenario

    if not _use_paths(args, err):
        return 2
    bad = _registry_problems(err)
    print("Built-in scenarios (recloop run NAME):", file=out)
    for name, path in builtin_scenarios().items():
        try:
            sc = load_scenario(path)
        except ScenarioError as exc:
            # listed with what it lacks here (e.g. a data file that is not shipped)
            import tomllib

            try:
                run = tomllib.loads(path.read_text(encoding="utf-8")).get("run", {})
            except (OSError, ValueError):
                continue
            first = exc.problems[0] if exc.problems else ""
            needs = (f"needs your data: --set {first.split('--set ')[1].split(')')[0]}"
                     if "--set " in first
                     else f"cannot run here: recloop validate {name} says why")
            print(f"  {name:<24} {run.get('description', '')} [{needs}]", file=out)
            continue
        print(f"  {name:<24} {sc.description}", file=out)
    from recloop._plugins import GuestTrials

    reg = registry()
    with GuestTrials() as trials:  # plugins' kinds are loaded there, never here
        for title, table in (("Evaluation kinds", "evaluations"), ("Agent kinds", "agents"),
                             ("Estimator kinds", "estimators")):
            print(f"\n{title}:", file=out)
            for name, kind in getattr(reg, table).items():
                if kind.origin == "built-in":
                    family = getattr(kind, "family", "") or getattr(kind, "agent_family", "")
                    summary = kind.summary
                else:
                    family, summary, problem = trials.describe(table, name)
                    if problem is not None:
                        print(f"recloop: {problem}", file=err)
                        bad = True
                        continue
                tag = f"[{family}] " if family and table != "evaluations" else ""
                origin = "" if kind.origin == "built-in" else f" ({kind.origin})"
                summary = summary if len(summary) <= 70 else summary[:67] + "..."
                print(f"  {name:<24} {tag}{summary}{origin}", file=out)
    return 2 if bad else 0


def _cmd_report(args, out, err) -> int:
    from pathlib import Path

    from recloop._report import rebuild_report
    from recloop._rundir import RunDirError

    run_dir = Path(args.run_dir)
    known = ("scenario.toml", "results.jsonl", "environment.json", "cells")
    if not run_dir.is_dir() or not any((run_dir / f).exists() for f in known):
        got = "no such folder" if not run_dir.exists() else (
            "not a folder" if not run_dir.is_dir() else f"a folder without {', '.join(known)}")
        print(f"recloop report: expected a run directory, got {run_dir} ({got})", file=err)
        return USAGE
    damages = []
    try:
        path = rebuild_report(run_dir, on_damage=damages.append)
    except RunDirError as exc:
        print(f"recloop report: {exc}", file=err)
        return USAGE
    for d in damages:
        print(f"recloop report: {d}", file=err)
    if path is None:
        return USAGE
    print(f"{run_dir.name}: {path}", file=out)
    if args.open:
        import webbrowser

        html = path.with_name("report.html").resolve()
        if not webbrowser.open(html.as_uri()):
            print(f"recloop report: --open: no web browser found; open {html} yourself",
                  file=err)
    return USAGE if any(d.kind == "file" for d in damages) else OK


#: A Dask scheduler address: [scheme://]host:port (a name, IPv4 or [IPv6] host).
_ADDRESS = re.compile(r"((tcp|tls|ws|wss|ucx)://)?([A-Za-z0-9]([A-Za-z0-9.-]{0,252})?"
                      r"|\[[0-9A-Fa-f:.]+\]):([0-9]{1,5})/?")


def _scheduler_problem(address: str) -> str | None:
    m = _ADDRESS.fullmatch(address)
    if m is None or not 1 <= int(m.group(5)) <= 65535:
        return (f"--scheduler: expected a Dask scheduler address like tcp://HOST:8786, got "
                f"{address!r}")
    return None


def _threads_problem() -> str | None:
    from recloop_base.threads import MAX_THREADS, THREADS_ENV, n_threads

    try:
        n_threads()
    except ValueError:
        value = os.environ.get(THREADS_ENV, "")
        shown = repr(value[:40]) + ("..." if len(value) > 40 else "")
        return (f"environment variable {THREADS_ENV}: expected an integer in [1, "
                f"{MAX_THREADS}], got {shown}")
    return None


def _memory(sc, workers: int, executor: str, scheduler) -> tuple[list[str], list[str]]:
    """``(lines for --dry-run, problems)``: memory and time (see
    :func:`recloop._runner.scenario_limits`)."""
    from recloop._runner import scenario_limits

    return scenario_limits(sc, workers, executor, scheduler)


def _cmd_run(args, out, err, argv) -> int:
    from concurrent.futures.process import BrokenProcessPool

    from recloop._cells import CellError, plan_cells
    from recloop._rundir import RunDirError
    from recloop._runner import ExecutorError, ReportError, _UsageError, run_scenario

    problems = []
    if args.workers is not None and args.workers < 1:
        problems.append(f"--workers: expected an integer >= 1, got {args.workers}")
    elif args.workers is not None and not args.force:
        from recloop._runner import workers_problem

        found = workers_problem(args.workers, args.executor, args.scheduler)
        if found:
            problems.append(f"--workers: expected {found} (pass --force to run anyway)")
    if not 0 < args.scheduler_timeout <= 86400:
        problems.append(f"--scheduler-timeout: expected seconds in (0, 86400], got "
                        f"{args.scheduler_timeout:g}")
    if args.seed is not None and not 0 <= args.seed <= 2**62:
        problems.append(f"--seed: expected an integer in [0, {2**62}], got {args.seed}")
    if args.scheduler is not None and args.executor != "dask":
        problems.append("--scheduler: expected --executor dask with it, got --executor local")
    elif args.scheduler is not None:
        problems += [p for p in [_scheduler_problem(args.scheduler)] if p]
    problems += [p for p in [_threads_problem(), _cell_timeout_problem(args)] if p]
    if not _use_paths(args, err) or _registry_problems(err):
        return USAGE
    scenarios = _load_all(args.files, err, args.set)
    for p in problems:
        print(f"recloop run: {p}", file=err)
    if scenarios is None or problems:
        return USAGE
    if args.seed is not None:
        scenarios = [sc.with_seed(args.seed) for sc in scenarios]
    workers = args.workers or _cpus()
    too_big = False
    estimates = {}
    for sc in scenarios:
        estimates[sc.path], found = _memory(sc, workers, args.executor, args.scheduler)
        if found and not args.force:
            too_big = True
            for line in found:
                print(line, file=err)
    if args.dry_run:
        for sc in scenarios:
            cells = plan_cells(sc.data)
            print(f"{sc.path}: {len(cells)} cells", file=out)
            for line in estimates[sc.path]:
                print(line, file=out)
            for cell in cells:
                print(f"  {cell.id}", file=out)
    if too_big or args.dry_run:
        return USAGE if too_big else OK
    damaged = False
    for sc in scenarios:
        damages = []

        def on_damage(d, damages=damages):
            damages.append(d)
            print(f"recloop run: {d}", file=err)

        try:
            run_dir = run_scenario(sc, out=args.out, workers=workers, executor=args.executor,
                                   scheduler=args.scheduler, resume=args.resume,
                                   quiet=args.quiet, argv=["recloop"] + list(argv),
                                   paths=args.path, echo=lambda s: print(s, file=out),
                                   on_damage=on_damage,
                                   scheduler_timeout=args.scheduler_timeout, force=args.force,
                                   cell_timeout=args.cell_timeout)
        except (_UsageError, RunDirError) as exc:
            print(f"recloop run: {exc}", file=err)
            return USAGE
        except CellError as exc:
            print(f"recloop run: {_first_line(str(exc))} (the other cells ran and are kept; "
                  "traceback in errors.log of the run directory; fix it and continue with "
                  "--resume)", file=err)
            return FAILED
        except ReportError as exc:
            print(f"recloop run: {_first_line(str(exc))}", file=err)
            return FAILED
        except ExecutorError as exc:
            print(f"recloop run: {exc} (finished cells, if any, are kept: continue with "
                  "--resume)", file=err)
            return FAILED
        except (BrokenProcessPool, OSError, TimeoutError, MemoryError) as exc:
            # a worker died (killed, out of memory), a full or read-only disk
            print(f"recloop run: {type(exc).__name__}: {_first_line(str(exc))} (finished "
                  "cells, if any, are kept: continue with --resume)", file=err)
            return FAILED
        damaged |= any(d.kind == "file" for d in damages)
        if not args.quiet:
            from recloop._report import summary_lines

            print("", *summary_lines(run_dir), "", sep="\n", file=out)
        print(f"{sc.name}: {run_dir / 'report.md'}", file=out)
    return USAGE if damaged else OK


def _first_line(text: str, limit: int = 400) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[:limit - 3] + "..."


class _Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP, turned into the same clean stop as Ctrl-C."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _on_signal(signum, frame):
    raise _Stopped(signum)


class _StopSignals:
    """SIGTERM (``kill``, ``timeout``, a job scheduler) and SIGHUP (a lost terminal) raise
    :class:`_Stopped` in the main thread while the block runs, like Ctrl-C; the previous
    handlers come back afterwards. A signal the process inherited as ignored (``nohup``)
    stays ignored."""

    def __enter__(self):
        import signal
        import threading

        self.saved = {}
        if threading.current_thread() is not threading.main_thread():
            return self
        for name in ("SIGTERM", "SIGHUP"):
            sig = getattr(signal, name, None)
            # an ignored signal stays ignored: `nohup recloop run ...` must survive its terminal
            if sig is None or signal.getsignal(sig) is signal.SIG_IGN:
                continue
            try:
                self.saved[sig] = signal.signal(sig, _on_signal)
            except (ValueError, OSError):  # pragma: no cover
                pass
        return self

    def __exit__(self, *exc):
        import signal

        for sig, handler in self.saved.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        return False


def _internal_error(exc: BaseException, err) -> int:
    """A failure no message was written for: one line, the traceback in a file."""
    import tempfile
    import traceback

    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    where = os.path.join(tempfile.gettempdir(), f"recloop-errors-{os.getpid()}.log")
    try:
        with open(where, "a", encoding="utf-8") as f:
            f.write(text)
        note = f"traceback in {where}"
    except OSError:
        note = "no traceback could be written"
    print(f"recloop: {type(exc).__name__}: {_first_line(str(exc), 300)} ({note})", file=err)
    return FAILED


def main(argv=None) -> int:
    """Entry point of ``recloop`` and ``python -m recloop``; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    out, err = sys.stdout, sys.stderr
    with _StopSignals():
        try:
            return _main(argv, out, err)
        except _Stopped as exc:
            import signal

            name = signal.Signals(exc.signum).name
            print(f"recloop: stopped by {name}; finished cells are kept, continue with "
                  "--resume", file=err)
            return 128 + exc.signum
        except KeyboardInterrupt:
            print("recloop: interrupted; finished cells are kept, continue with --resume",
                  file=err)
            return 130
        except BrokenPipeError:  # `recloop list | head`: the reader left, nothing to say
            try:
                sys.stdout = open(os.devnull, "w")
            except OSError:
                pass
            return 141
        except Exception as exc:  # the user's situation gets a line, not a traceback
            return _internal_error(exc, err)


def _main(argv, out, err) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors
        return int(exc.code or 0) if not isinstance(exc.code, str) else USAGE
    if args.command is None:
        parser.print_help(out)
        return USAGE
    if args.command == "run":
        return _cmd_run(args, out, err, argv)
    if args.command == "evaluate":
        from recloop._evaluate import evaluate_command

        args.argv = argv[1:]
        return evaluate_command(args, out, err)
    return {"validate": _cmd_validate, "list": _cmd_list, "report": _cmd_report,
            "calibrate": _cmd_calibrate, "verify": _cmd_verify}[args.command](args, out, err)


def _cmd_calibrate(args, out, err) -> int:
    from recloop.calibration import calibrate_command

    if args.seed < 0:
        print(f"recloop calibrate: error: --seed: expected an integer >= 0, got {args.seed}",
              file=err)
        return USAGE
    return calibrate_command(args.data, format=args.format, columns=args.columns,
                             out=args.out, n_factors=args.n_factors, ctr=args.ctr,
                             exposure=args.exposure, min_rating=args.min_rating,
                             rating_scale=args.rating_scale, ratings=not args.no_ratings,
                             holdout="auto" if args.holdout is None else args.holdout,
                             force=args.force, seed=args.seed, markdown=args.markdown,
                             stdout=out, stderr=err)


if __name__ == "__main__":
    sys.exit(main())
