"""The ``recloop`` command line: run, validate, list and report scenarios.

Exit codes: 0 success; 1 a cell raised (its traceback is in the run directory's
``errors.log``); 2 bad input (scenario problems, usage errors) -- nothing is created then;
130 interrupted (continue with ``--resume``).
"""

from __future__ import annotations

import argparse
import os
import sys

__all__ = ["main"]


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
    run.add_argument("--resume", action="store_true",
                     help="continue the newest run directory of the scenario")
    run.add_argument("--dry-run", action="store_true",
                     help="validate and list the cells without running anything")
    run.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    _path_option(run)

    val = sub.add_parser("validate", help="check scenario files; report every problem")
    val.add_argument("files", nargs="+", metavar="FILE")
    _path_option(val)

    lst = sub.add_parser("list", help="list the built-in scenarios and every kind a scenario "
                         "may name (plugins included)")
    _path_option(lst)

    rep = sub.add_parser("report", help="rebuild report.md and figures of a run directory")
    rep.add_argument("run_dir", metavar="RUN_DIR")
    return parser


def _path_option(parser) -> None:
    parser.add_argument("--path", action="append", default=[], metavar="DIR",
                        help="put DIR on the import path (repeatable): your agents and "
                             "estimators named \"package.module:attribute\" live there; "
                             "workers get it too")


def _use_paths(args, err) -> bool:
    """Put ``--path`` folders on ``sys.path``; False (after a message) if one is missing."""
    from pathlib import Path

    ok = True
    for p in args.path:
        if not Path(p).is_dir():
            print(f"recloop: --path: expected a folder, got {p!r} (no such folder)", file=err)
            ok = False
    if ok:
        for p in reversed(args.path):
            resolved = str(Path(p).resolve())
            if resolved not in sys.path:
                sys.path.insert(0, resolved)
    return ok


def _registry_problems(err) -> bool:
    """Print the installed plugins' problems (a kind clashing with another); True if any."""
    from recloop._registry import registry

    for line in registry().problems:
        print(f"recloop: {line}", file=err)
    return bool(registry().problems)


def _load_all(files: list[str], err) -> list | None:
    """Load every file, printing every problem of every file; ``None`` if any."""
    from recloop._scenario import ScenarioError, find_scenario, load_scenario

    scenarios, ok = [], True
    for arg in files:
        try:
            scenarios.append(load_scenario(find_scenario(arg)))
        except ScenarioError as exc:
            ok = False
            for line in exc.problems:
                print(line, file=err)
    return scenarios if ok else None


def _cmd_validate(args, out, err) -> int:
    from recloop._runner import plan_cells

    if not _use_paths(args, err) or _registry_problems(err):
        return 2
    scenarios = _load_all(args.files, err)
    if scenarios is None:
        return 2
    for sc in scenarios:
        print(f"{sc.path}: ok ({len(plan_cells(sc.data))} cells)", file=out)
    return 0


def _cmd_list(args, out, err) -> int:
    from recloop._registry import PluginError, registry
    from recloop._scenario import ScenarioError, builtin_scenarios, load_scenario

    if not _use_paths(args, err):
        return 2
    bad = _registry_problems(err)
    print("Built-in scenarios (recloop run NAME):", file=out)
    for name, path in builtin_scenarios().items():
        try:
            sc = load_scenario(path)
        except ScenarioError:
            continue  # not listed: it asks for something this installation cannot run
        print(f"  {name:<24} {sc.description}", file=out)
    reg = registry()
    for title, table in (("Evaluation kinds", "evaluations"), ("Agent kinds", "agents"),
                         ("Estimator kinds", "estimators")):
        print(f"\n{title}:", file=out)
        for name in getattr(reg, table):
            try:
                kind = reg.get(table, name)
            except PluginError as exc:
                print(f"recloop: {exc}", file=err)
                bad = True
                continue
            family = getattr(kind, "family", "") or getattr(kind, "agent_family", "")
            tag = f"[{family}] " if family and table != "evaluations" else ""
            origin = "" if kind.origin == "built-in" else f" ({kind.origin})"
            summary = kind.summary if len(kind.summary) <= 70 else kind.summary[:67] + "..."
            print(f"  {name:<24} {tag}{summary}{origin}", file=out)
    return 2 if bad else 0


def _cmd_report(args, out, err) -> int:
    from pathlib import Path

    from recloop._report import write_report

    run_dir = Path(args.run_dir)
    missing = [f for f in ("scenario.toml", "results.jsonl") if not (run_dir / f).is_file()]
    if missing:
        print(f"{run_dir}: expected a finished run directory, got no {', '.join(missing)}",
              file=err)
        return 2
    print(write_report(run_dir), file=out)
    return 0


def _cmd_run(args, out, err, argv) -> int:
    from concurrent.futures.process import BrokenProcessPool

    from recloop._runner import CellError, _UsageError, plan_cells, run_scenario

    problems = []
    if args.workers is not None and args.workers < 1:
        problems.append(f"--workers: expected an integer >= 1, got {args.workers}")
    if args.seed is not None and not 0 <= args.seed <= 2**62:
        problems.append(f"--seed: expected an integer in [0, {2**62}], got {args.seed}")
    if args.scheduler and args.executor != "dask":
        problems.append("--scheduler: expected --executor dask with it, got --executor local")
    if not _use_paths(args, err) or _registry_problems(err):
        return 2
    scenarios = _load_all(args.files, err)
    for p in problems:
        print(f"recloop run: {p}", file=err)
    if scenarios is None or problems:
        return 2
    if args.seed is not None:
        scenarios = [sc.with_seed(args.seed) for sc in scenarios]
    if args.dry_run:
        for sc in scenarios:
            cells = plan_cells(sc.data)
            print(f"{sc.path}: {len(cells)} cells", file=out)
            for cell in cells:
                print(f"  {cell.id}", file=out)
        return 0
    workers = args.workers or _cpus()
    for sc in scenarios:
        try:
            run_dir = run_scenario(sc, out=args.out, workers=workers, executor=args.executor,
                                   scheduler=args.scheduler, resume=args.resume,
                                   quiet=args.quiet, argv=["recloop"] + list(argv),
                                   paths=args.path, echo=lambda s: print(s, file=out))
        except _UsageError as exc:
            print(f"recloop run: {exc}", file=err)
            return 2
        except CellError as exc:
            print(f"recloop run: {exc} (traceback in errors.log of the run directory; fix it "
                  "and continue with --resume)", file=err)
            return 1
        except (BrokenProcessPool, OSError, TimeoutError) as exc:
            # a worker died (killed, out of memory) or the Dask scheduler is unreachable
            print(f"recloop run: {type(exc).__name__}: {exc} (finished cells, if any, are "
                  "kept: continue with --resume)", file=err)
            return 1
        except KeyboardInterrupt:
            print("recloop run: interrupted; finished cells are kept, continue with --resume",
                  file=err)
            return 130
        if not args.quiet:
            from recloop._report import summary_lines

            print("", *summary_lines(run_dir), "", sep="\n", file=out)
        print(f"{sc.name}: {run_dir / 'report.md'}", file=out)
    return 0


def main(argv=None) -> int:
    """Entry point of ``recloop`` and ``python -m recloop``; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    out, err = sys.stdout, sys.stderr
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors
        return int(exc.code or 0)
    if args.command is None:
        parser.print_help(out)
        return 2
    if args.command == "run":
        return _cmd_run(args, out, err, argv)
    return {"validate": _cmd_validate, "list": _cmd_list, "report": _cmd_report}[
        args.command](args, out, err)


if __name__ == "__main__":
    sys.exit(main())
