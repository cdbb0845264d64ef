"""``recloop evaluate LOG --target TARGET``: a user's bandit log and target policy to a report.

Reads the log (``evaluators.datasets.read_bandit_log``) and the target
(``evaluators.datasets.read_target``), runs ``evaluators.evaluate_log`` and writes into
``--out`` (default ``runs/evaluate-<log name>``):

* ``estimates.csv`` -- one row per estimator (value, standard error, interval, effective
  sample size, the selection's score and its standard error, selected);
* ``report.md`` and ``report.html`` -- the sentence to act on, the table, the figure, the
  diagnostics and the inputs;
* ``figures/estimates.png`` -- every estimate with its interval, the selected one marked.

The terminal shows the table and one plain sentence. The folder is written to a temporary
sibling and renamed into place: a failure leaves no half-written report (and an earlier
evaluation in the same folder is replaced only by a complete one). Same inputs and
``--seed``: the same bytes. Bad input (a missing column, an impossible propensity, a target
whose rows do not sum to 1, ...) is one line naming the file, line and column, exit code 2,
and nothing is written.

The report is one :mod:`recloop._document` document: every string that comes from the user's
files (column names, ids, paths) is escaped for each format, never read as markup or a path.
"""

from __future__ import annotations

import os
import re
import shutil
import unicodedata
from pathlib import Path

__all__ = ["add_parser", "evaluate_command"]

OK, FAILED, USAGE = 0, 1, 2
#: The files an evaluation folder holds (an existing folder with anything else is not
#: replaced).
OUTPUTS = ("estimates.csv", "report.md", "report.html", "figures")


def add_parser(sub) -> None:
    """The ``evaluate`` subcommand's options (no heavy import: ``recloop --help`` stays
    instant)."""
    ev = sub.add_parser(
        "evaluate", help="evaluate a target policy on your own bandit log (CSV): every "
        "estimator, the one to trust, how sure, a report")
    ev.add_argument("log", metavar="LOG", help="the log: a CSV (or .parquet with pyarrow), "
                    "one record per line")
    ev.add_argument("--target", required=True, metavar="TARGET",
                    help="the target policy: a .npy action_dist, a .csv of (record, action, "
                         "[position,] probability) in your ids, or module:attribute of a "
                         "policy(context) -> probabilities")
    ev.add_argument("--out", default=None, metavar="DIR",
                    help="folder of the report (default: runs/evaluate-<log name>); an "
                         "earlier evaluation there is replaced")
    for role, default in (("action", "action, item_id, arm"), ("reward", "reward, click"),
                          ("pscore", "pscore, propensity_score, propensity"),
                          ("position", "position, slot")):
        ev.add_argument(f"--{role}", default=None, metavar="COLUMN",
                        help=f"the {role} column (default: the first of {default})")
    ev.add_argument("--no-position", action="store_true",
                    help="ignore a position column (one slot)")
    ev.add_argument("--context", default=None, metavar="COLUMNS",
                    help="context columns, comma-separated, or PREFIX* for every column "
                         "starting with PREFIX (default: every other column)")
    ev.add_argument("--estimators", default=None, metavar="NAMES",
                    help="comma-separated estimator names (default: the selectors' candidates)")
    ev.add_argument("--select", choices=("twin", "cv", "pasif", "slope", "none"),
                    default="twin",
                    help="who picks the estimate to use (default: twin)")
    ev.add_argument("--seed", type=int, default=0, metavar="N",
                    help="seed of every draw (default 0)")
    ev.add_argument("--ci", type=float, default=0.95, metavar="LEVEL",
                    help="level of the intervals (default 0.95)")
    ev.add_argument("--path", action="append", default=[], metavar="DIR",
                    help="put DIR on the import path (repeatable), for --target "
                         "module:attribute")
    ev.add_argument("--force", action="store_true",
                    help="read a log file larger than 1 GiB")
    ev.add_argument("-q", "--quiet", action="store_true",
                    help="print only the sentence and the report's path")


def _fail(err, msg: str) -> int:
    print(f"recloop evaluate: {msg}", file=err)
    return USAGE


def _out_dir(args, err) -> Path | None:
    if args.out is not None:
        return Path(args.out)
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(args.log).stem).strip("._") or "log"
    return Path("runs") / f"evaluate-{stem[:60]}"


def _check_out(out: Path) -> str | None:
    """Why ``out`` cannot receive the evaluation, or None."""
    if out.exists() and not out.is_dir():
        return f"--out {out}: exists and is not a folder"
    if out.is_dir():
        extra = sorted(p.name for p in out.iterdir() if p.name not in OUTPUTS)
        if extra:
            return (f"--out {out}: the folder holds other files ({', '.join(extra[:3])}"
                    f"{', ...' if len(extra) > 3 else ''}); choose another --out")
    return None


def _context(text):
    if text is None:
        return None
    if text.endswith("*") and "," not in text:
        return text[:-1]
    return [c.strip() for c in text.split(",") if c.strip()]


def evaluate_command(args, out, err) -> int:
    """Run ``recloop evaluate``; returns the exit code."""
    if not 0 < args.ci < 1:
        return _fail(err, f"--ci: expected a level in (0, 1), got {args.ci}")
    if args.seed < 0:
        return _fail(err, f"--seed: expected an integer >= 0, got {args.seed}")
    log_path = Path(args.log)
    if not log_path.is_file():
        return _fail(err, f"{log_path}: no such file")
    dest = _out_dir(args, err)
    problem = _check_out(dest)
    if problem:
        return _fail(err, problem + " (nothing was written)")
    for folder in args.path:
        if not Path(folder).is_dir():
            return _fail(err, f"--path {folder}: no such folder")
    import evaluators
    from evaluators.datasets import DatasetFormatError, read_bandit_log

    size, limit = log_path.stat().st_size, evaluators.datasets.MAX_LOG_BYTES
    if size > limit and not args.force:
        return _fail(err, f"{log_path} is {size / 2**30:.2f} GiB, above the "
                          f"{limit / 2**30:.2f} GiB read without asking (reading a CSV takes "
                          "several times its size in memory); --force reads it anyway "
                          "(nothing was written)")
    estimators = None if args.estimators is None else [
        e.strip() for e in args.estimators.split(",") if e.strip()]
    try:
        log = read_bandit_log(log_path, action=args.action, reward=args.reward,
                              pscore=args.pscore,
                              position=False if args.no_position else args.position,
                              context=_context(args.context),
                              max_bytes=None)
        target = _target(args, log)
        res = evaluators.evaluate_log(log, target, estimators=estimators,
                                      select=args.select, ci=args.ci, rng=args.seed)
    except (DatasetFormatError, FileNotFoundError, ImportError, TypeError,
            ValueError) as exc:
        return _fail(err, " ".join(str(exc).split()))
    argv = ["recloop", "evaluate", *getattr(args, "argv", [])]
    try:
        _write(dest, res, log, args, argv)
    except OSError as exc:
        print(f"recloop evaluate: cannot write {dest}: {exc} (nothing was written)", file=err)
        return FAILED
    if not args.quiet:
        print(_table_text(res), file=out)
        print(file=out)
    print(res.summary(), file=out)
    print(f"report: {dest / 'report.html'}", file=out)
    return OK


# -- a policy given by import path: called in a guest -----------------------------------------
#: Seconds of its own time a policy given by import path may take (a load that slows it down
#: does not count; a hang does).
POLICY_TIMEOUT = 600.0


#: ``module:attribute``: a target given by import path (a file of that name wins).
_IMPORT_PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")


def _target(args, log):
    """The target as ``evaluate_log`` takes it. A ``module:attribute`` policy is users' code:
    it is imported and called in a guest process (:class:`recloop_base.guard.Guest`), never
    in recloop's own, with ``--path`` first on its import path; only the array it returns
    comes back (read with :func:`recloop_base.guard.safe_loads`), and recloop checks it
    again (``read_target`` of the array)."""
    text = str(args.target)
    if not _IMPORT_PATH.fullmatch(text) or Path(text).exists():
        return args.target
    from multiprocessing.connection import wait

    from evaluators.datasets import read_target
    from recloop_base.guard import Guest, UnsafeMessage

    guest = Guest("recloop._evaluate:policy_server", guest=True, paths=args.path)
    try:
        guest.send((text, log))
        guest.mark()
        ended = ValueError(f"`target` {text!r}: its process ended before returning "
                           "probabilities (sys.exit or os._exit in the policy's module?)")
        while not guest.poll():
            if not guest.alive():
                raise ended
            if guest.own_seconds() > POLICY_TIMEOUT:
                raise ValueError(f"`target` {text!r} did not return within "
                                 f"{POLICY_TIMEOUT:g} s")
            wait(guest.waitables, timeout=0.5)
        try:
            status, value = guest.recv()
        except EOFError:
            raise ended from None
        except (OSError, UnsafeMessage, TypeError, ValueError) as exc:
            raise ValueError(f"`target` {text!r}: its process sent no probabilities "
                             f"({type(exc).__name__}: {exc})") from None
    finally:
        guest.kill()
    if status != "ok":
        raise ValueError(str(value))
    return read_target(value, log)


def policy_server(conn, args) -> None:
    """A guest's loop for :func:`_target`: the policy imported, called on the log's contexts
    and checked (``read_target``); sends back ``("ok", array)`` or ``("error", message)``."""
    import pickle

    from evaluators.datasets import read_target

    spec, log = pickle.loads(conn.recv_bytes())  # from recloop: its own data
    try:
        reply = ("ok", read_target(spec, log))
    except BaseException as exc:  # noqa: BLE001 - every failure is a message to the parent
        reply = ("error", " ".join(str(exc).split()) or f"{spec}: {type(exc).__name__}")
    conn.send_bytes(pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL))


# -- files ------------------------------------------------------------------------------------
def _write(dest: Path, res, log, args, argv) -> None:
    """Every file into a temporary sibling of ``dest``, then renamed into place."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    old = dest.with_name(f".{dest.name}.{os.getpid()}.old")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        (tmp / "figures").mkdir(parents=True)
        (tmp / "estimates.csv").write_text(_csv(res), encoding="utf-8", newline="")
        fig = res.plot()
        fig.savefig(tmp / "figures" / "estimates.png", format="png", dpi=110,
                    metadata={"Software": None})
        from recloop._document import write_document

        write_document(tmp, _report_blocks(res, log, args, argv), title="recloop evaluate")
        if dest.exists():
            os.replace(dest, old)
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old.exists() and not dest.exists():
            os.replace(old, dest)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _num(x: float) -> str:
    """A float as the shortest text that reads back to the same float ('' for nan)."""
    import math

    return "" if not math.isfinite(x) else repr(float(x))


def _csv(res) -> str:
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["estimator", "value", "stderr", "ci_low", "ci_high", "ess", "score",
                "score_se", "selected"])
    for r in res.rows:
        w.writerow([r.estimator, _num(r.value), _num(r.stderr), _num(r.ci_low),
                    _num(r.ci_high), _num(r.ess), _num(r.score), _num(r.score_se),
                    "yes" if r.selected else ""])
    return buf.getvalue()


def _g(x: float) -> str:
    import math

    return "" if not math.isfinite(x) else f"{x:.4g}"


def _table_text(res) -> str:
    """The terminal's table: fixed-width columns."""
    pct = f"{res.level:.0%}"
    head = ["estimator", "value", "stderr", f"{pct} interval", "ESS"]
    if res.score_name:
        head += [res.score_name, "±"]
    rows = []
    for r in res.rows:
        row = [("* " if r.selected else "  ") + _plain(r.estimator), _g(r.value), _g(r.stderr),
               f"[{_g(r.ci_low)}, {_g(r.ci_high)}]" if r.ci_low == r.ci_low else "",
               f"{r.ess:,.0f}" if r.ess == r.ess else ""]
        if res.score_name:
            row += [_g(r.score), _g(r.score_se)]
        rows.append(row)
    head[0] = "  " + head[0]
    widths = [max(len(x) for x in col) for col in zip(head, *rows, strict=True)]
    lines = ["  ".join(x.ljust(w) for x, w in zip(line, widths, strict=True)).rstrip()
             for line in [head, *rows]]
    if res.selected is not None:
        lines.append(f"(* selected by {res.selector})")
    return "\n".join(lines)


def _plain(text: str) -> str:
    """User text for the terminal: control characters (escape sequences) shown, not run."""
    return "".join(c if unicodedata.category(c)[0] != "C" else "\ufffd" for c in str(text))


# -- the report -------------------------------------------------------------------------------
def _report_blocks(res, log, args, argv) -> list:
    """report.md and report.html as one document (:mod:`recloop._document` escapes every
    string for its format: column names, ids and paths come from the user's files)."""
    from recloop._document import Bullets, Code, Figure, Heading, Paragraph, Side, Table

    d = res.diagnostics
    pct = f"{res.level:.0%}"
    meta = log.metadata
    head = ["estimator", "value", "stderr", f"{pct} interval", "ESS"]
    if res.score_name:
        head += [res.score_name, f"{res.score_name} stderr"]
    head.append("selected")
    rows = []
    for r in res.rows:
        row = [Code(str(r.estimator)), _g(r.value), _g(r.stderr),
               f"[{_g(r.ci_low)}, {_g(r.ci_high)}]" if r.ci_low == r.ci_low else "",
               f"{r.ess:.0f}" if r.ess == r.ess else ""]
        if res.score_name:
            row += [_g(r.score), _g(r.score_se)]
        row.append("yes" if r.selected else "")
        rows.append(row)
    diagnostics = Table(["diagnostic", "value", "what it says"], [
        ["records, actions, positions", f"{d.n_rounds:,}, {d.n_actions}, {d.len_list}",
         "the log's size"],
        ["effective sample size", f"{d.ess:,.0f} ({d.ess_share:.1%})",
         "of the target's importance weights, (sum w)^2 / sum w^2"],
        ["largest weight", f"{_g(d.max_weight)} (record {d.max_weight_record})",
         "pi(a | x) / pscore at one record"],
        ["target's mass outside the log's support", f"{d.unsupported_mass:.2%}",
         "on actions the log never shows at that position"],
        [("reward model (", Code(str(d.reward_model)), "), held-out MSE"),
         _g(d.reward_model_mse), "cross-fitted, at the logged actions"],
        ["reward model, held-out R^2", _g(d.reward_model_r2),
         "1 - MSE / var(reward): 0 is no better than the mean"]])
    cols = meta.get("columns", {})
    ctx = [str(c) for c in meta.get("context_columns", [])]
    acts = [str(a) for a in meta.get("actions", [])]

    def codes(names, most=12):
        out: list = []
        for j, name in enumerate(names[:most]):
            out += ([", "] if j else []) + [Code(name)]
        return out + ([f", ... ({len(names)} in all)"] if len(names) > most else [])

    roles: list = []
    for j, (role, name) in enumerate(cols.items()):
        roles += ([", "] if j else []) + [f"{role} ", Code(str(name))]
    inputs = [
        ["log: ", Code(str(args.log)), f": {d.n_rounds:,} records, columns ", *roles],
        [f"context: {len(ctx)} columns", *([": ", *codes(ctx)] if ctx else [])],
        [f"actions: {len(acts) or log.n_actions} ids: ", *codes(acts)],
        ["target: ", Code(str(args.target))],
        [f"selector: {res.selector}; seed {args.seed}; intervals at {pct}"],
        ["command: ", Code(" ".join(map(str, argv)))]]
    return [Heading(f"Evaluation of a target policy on {Path(args.log).name}", 1),
            Paragraph(res.summary(label=str)),
            Heading("Estimates"),
            Side(Figure(f"Estimates with {pct} intervals", "estimates.png"),
                 Table(head, rows)),
            Paragraph("Every estimate's own standard error and interval; the selected one's "
                      "interval does not account for the selection. ", Code("estimates.csv"),
                      " has every number in full."),
            Heading("Diagnostics"), diagnostics,
            Heading("Inputs"), Bullets(inputs)]
