"""A user's own bandit log and target policy from files (re-exported by
:mod:`evaluators.datasets`).

* :func:`read_bandit_log` reads a CSV (or Parquet, with pyarrow) into a
  :class:`simulator.logs.BanditLog` through :meth:`BanditLog.from_frame`, every refusal
  naming the file, line and column;
* :func:`read_target` turns a target policy -- an ``action_dist`` array (``.npy``), a CSV of
  (record, action, [position,] probability) in the user's own ids, or a callable
  ``policy(context) -> probabilities`` (by import path ``module:attr``) -- into the
  ``action_dist`` array every estimator takes.

pandas is imported on first use only.
"""

from __future__ import annotations

import codecs
import csv
import importlib
import os
import re
from pathlib import Path

import numpy as np

from evaluators._datasets import DatasetFormatError
from recloop_base.validation import ArgumentTypeError, ArgumentValueError
from simulator.logs import BanditLog, LogFrameError

__all__ = ["MAX_LOG_BYTES", "read_bandit_log", "read_target", "TARGET_COLUMNS"]

#: Files larger than this are refused unless ``max_bytes`` says otherwise: reading a CSV
#: takes several times its size in memory (pandas' columns, then the log's arrays).
MAX_LOG_BYTES = 1 << 30
#: Columns of a target-policy CSV.
TARGET_COLUMNS = ("record", "action", "position", "probability")
_PARQUET = (".parquet", ".pq")
_IMPORT_PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")


def _err(path, line, msg) -> DatasetFormatError:
    return DatasetFormatError(f"{path}:{line}: {msg}" if line else f"{path}: {msg}")


def utf8_error(path: Path) -> tuple[int, int] | None:
    """``(line, byte offset)`` of the first byte of ``path`` that is not UTF-8, read in
    blocks (never the whole file at once); ``None`` when it is all valid."""
    dec = codecs.getincrementaldecoder("utf-8")()
    line, offset = 1, 0
    with open(path, "rb") as fh:
        while True:
            block = fh.read(1 << 20)
            try:
                dec.decode(block, final=not block)
            except UnicodeDecodeError as exc:
                # the decoder's buffer holds at most 3 bytes of an incomplete character
                start = max(0, exc.start - len(exc.object) + len(block))
                return line + block[:start].count(b"\n"), offset + start
            if not block:
                return None
            line += block.count(b"\n")
            offset += len(block)


def _size_check(path: Path, max_bytes) -> None:
    if max_bytes is None:
        return
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
        raise ArgumentTypeError("max_bytes", "an int >= 1 or None", repr(max_bytes))
    size = path.stat().st_size
    if size > max_bytes:
        raise ArgumentValueError(
            "max_bytes", f"at least the file's size to read it ({path} is {size / 2**30:.2f} "
            f"GiB; reading a CSV takes several times its size in memory, so files above "
            f"{max_bytes / 2**30:.2f} GiB are refused unless asked: pass a larger "
            "`max_bytes`, or None, or `--force` on the command line)", str(max_bytes))


def _header(path: Path, sep: str) -> list[str]:
    with open(path, "rb") as fh:
        first = fh.readline(1 << 20)
    try:
        text = first.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _err(path, 1, f"not valid UTF-8 text (byte {exc.start} of the header: "
                            f"{exc.reason}); save the file as UTF-8.") from None
    if not text.strip():
        raise _err(path, 1, "the file is empty; expected a CSV header.")
    return next(csv.reader([text.rstrip("\r\n")], delimiter=sep))


def _duplicates(path: Path, header: list[str]) -> None:
    seen: dict[str, int] = {}
    for j, c in enumerate(header):
        if c in seen:
            raise _err(path, 1, f"column {c!r} appears twice (columns {seen[c] + 1} and "
                                f"{j + 1} of the header); which one holds the data? Every "
                                "column name must be unique.")
        seen[c] = j


def _read_csv(path: Path, sep: str, what: str):
    """The CSV as a DataFrame (pandas' types), and whether row ``j`` sits on line ``j + 2``
    (no blank or multi-line records)."""
    import pandas as pd

    header = _header(path, sep)
    _duplicates(path, header)
    try:
        frame = pd.read_csv(path, sep=sep, encoding="utf-8", low_memory=False)
    except UnicodeDecodeError:
        where = utf8_error(path)
        line, byte = where if where else (0, 0)
        raise _err(path, line, f"not valid UTF-8 text (byte {byte}); save the {what} as "
                               "UTF-8.") from None
    except pd.errors.ParserError as exc:
        raise _err(path, 0, f"not a CSV {what} pandas can read: {exc}") from None
    except pd.errors.EmptyDataError:
        raise _err(path, 0, f"the file is empty; expected a CSV {what} with a header.") \
            from None
    with open(path, "rb") as fh:
        newlines = sum(block.count(b"\n") for block in iter(lambda: fh.read(1 << 20), b""))
    aligned = newlines in (len(frame), len(frame) + 1)
    return frame, aligned


def _as_written(column, j: int):
    """Row ``j`` of a CSV column as a Python value, quoted in messages as the user wrote it
    (``1.2``, ``'x'``; not ``np.float64(1.2)``)."""
    return column.iloc[[j]].tolist()[0]


def _where(path: Path, row: int | None, aligned: bool) -> str:
    if row is None:
        return f"{path}"
    return f"{path}:{row + 2}" if aligned else f"{path}: data row {row + 1}"


def read_bandit_log(path, *, action=None, reward=None, pscore=None, context=None,
                    position=None, tick=None, actions=None, first_position="auto",
                    len_list=None, max_categories=1000, sep=",",
                    max_bytes=MAX_LOG_BYTES) -> BanditLog:
    """Read a bandit log from a CSV file (or Parquet, when pyarrow is installed).

    Parameters
    ----------
    path : str or os.PathLike
        A CSV file (UTF-8, a header line, one record per line, in log order) or a
        ``.parquet`` file.
    action, reward, pscore, context, position, tick, actions, first_position, len_list, \
max_categories
        As :meth:`simulator.logs.BanditLog.from_frame`: the columns are found by the
        documented default names (``action``/``item_id``, ``reward``/``click``,
        ``pscore``/``propensity_score``, ``position``, ``timestamp``) unless given.
    sep : str, default ","
        The CSV's field separator.
    max_bytes : int or None, default :data:`MAX_LOG_BYTES` (1 GiB)
        Larger files are refused before anything is read (a CSV takes several times its
        size in memory); ``None`` reads any size.

    Returns
    -------
    BanditLog
        Record ``j`` is the file's data row ``j``; ``metadata["source"]`` is the path and
        the encoding of the ids is in ``metadata`` (see ``from_frame``).

    Raises
    ------
    FileNotFoundError
        No such file.
    ImportError
        A Parquet file without pyarrow installed (the message names the package).
    DatasetFormatError
        (a ``ValueError``) naming the file and line (``path:line``) and the column: every
        refusal of ``from_frame``, a column named twice in the header, text that is not
        UTF-8, a file pandas cannot parse.
    ValueError
        The file is larger than ``max_bytes`` (named).

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "my_log.csv")
    >>> with open(path, "w") as f:
    ...     _ = f.write("item_id,click,propensity_score,user_age,user_city\\n"
    ...                 "shoes,1,0.5,31,Lyon\\nhat,0,0.25,45,Paris\\nshoes,0,0.5,27,Paris\\n")
    >>> log = read_bandit_log(path, context="user_")
    >>> log.n_actions, list(log.metadata["actions"]), log.reward.tolist()
    (2, ['hat', 'shoes'], [1.0, 0.0, 0.0])
    >>> list(log.metadata["context_columns"])
    ['user_age', 'user_city=Paris']
    """
    if not isinstance(path, (str, os.PathLike)):
        raise ArgumentTypeError("path", "a str or os.PathLike", type(path).__name__)
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file.")
    _size_check(path, max_bytes)
    if path.suffix.lower() in _PARQUET:
        frame, aligned = _read_parquet(path), False
    else:
        frame, aligned = _read_csv(path, sep, "log")
    try:
        return BanditLog.from_frame(
            frame, action=action, reward=reward, pscore=pscore, context=context,
            position=position, tick=tick, actions=actions, first_position=first_position,
            len_list=len_list, max_categories=max_categories,
            metadata={"source": str(path)})
    except LogFrameError as exc:
        raise DatasetFormatError(f"{_where(path, exc.row, aligned)}: {exc.problem}"
                                 f"{'' if exc.problem.endswith('.') else '.'}") from None


def _read_parquet(path: Path):
    import importlib.util

    if importlib.util.find_spec("pyarrow") is None:
        raise ImportError(f"{path}: reading Parquet needs the package pyarrow, which is not "
                          "installed (pip install pyarrow), or save the log as CSV.")
    import pandas as pd

    try:
        return pd.read_parquet(path)
    except Exception as exc:  # pyarrow's errors are many and unnamed
        raise _err(path, 0, f"not a Parquet file pyarrow can read: {type(exc).__name__}: "
                            f"{exc}") from None


# -- target policies --------------------------------------------------------------------------
def _check_dist(a: np.ndarray, log: BanditLog, what: str) -> np.ndarray:
    """``a`` as ``(n, K)`` or ``(n, K, L)`` float64 probabilities of ``log``'s records (a
    context-free ``(K,)`` or ``(K, L)`` broadcast, without a copy)."""
    if a.dtype.kind not in "biuf":
        raise ArgumentTypeError("target", "action probabilities (numbers)",
                                f"{what} of dtype {a.dtype}")
    a = a.astype(np.float64, copy=False)
    n, K, L = log.n_rounds, log.n_actions, log.len_list
    shapes = {(K,): "(n_actions,)", (n, K): "(n_rounds, n_actions)"}
    if L > 1:
        shapes.update({(K, L): "(n_actions, len_list)", (n, K, L): "(n_rounds, n_actions, "
                                                                    "len_list)"})
    else:
        shapes[(n, K, 1)] = "(n_rounds, n_actions, 1)"
    if a.shape not in shapes:
        raise ArgumentValueError("target", "action probabilities of shape " + " or ".join(
            f"{v} = {k}" for k, v in shapes.items()) + f" (the log has {n:,} records, {K} "
            f"actions{f', {L} positions' if L > 1 else ''})", f"{what} of shape {a.shape}")
    if a.shape[0] != n or a.ndim == 1:
        a = np.broadcast_to(a, (n, *a.shape))
    # sums and minima over the actions of each record (and position); a broadcast row once
    head = a[:1] if a.strides[0] == 0 else a
    sums, mins = head.sum(axis=1), head.min(axis=1)
    ok = np.isfinite(sums) & (mins >= 0) & (np.abs(sums - 1.0) <= 1e-6)
    if not ok.all():
        rec, *pos = (int(i) for i in np.argwhere(~ok)[0])
        where = f"record {rec}" + (f", position {pos[0]}" if pos and L > 1 else "")
        raise ArgumentValueError("target", "probabilities >= 0 summing to 1 over the actions "
                                 "of each record (and position)",
                                 f"{what}: sum {float(sums[rec, *pos]):.6g} (min "
                                 f"{float(mins[rec, *pos]):.3g}) at {where}")
    if L > 1 and a.ndim == 2:  # one distribution for every position: a view, no copy
        a = np.broadcast_to(a[:, :, None], (n, K, L))
    return a


def _import(spec: str):
    module, _, attr = spec.partition(":")
    try:
        obj = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except Exception as exc:  # a user's module may fail to import in any way
        raise ArgumentValueError("target", "an importable `module:attribute` (is its folder "
                                 "on the import path? `--path DIR` on the command line)",
                                 f"{spec!r}: {type(exc).__name__}: {exc}") from None
    return obj


def _call(policy, log: BanditLog, what: str) -> np.ndarray:
    try:
        out = policy(log.context)
    except Exception as exc:  # a user's policy may fail in any way
        raise ArgumentValueError("target", "a policy(context) that returns the action "
                                 "probabilities", f"{what} raised {type(exc).__name__}: "
                                 f"{exc}") from None
    try:
        arr = np.asarray(out)
    except Exception as exc:
        raise ArgumentTypeError("target", "a policy returning an array",
                                f"{what} returned {type(out).__name__} ({exc})") from None
    return _check_dist(arr, log, f"{what}(context)")


def _ids(log: BanditLog, key: str, count: int) -> list:
    return list(log.metadata.get(key, range(count)))


def _lookup(values, ids: list, path, column, aligned) -> np.ndarray:
    """Indices of ``values`` (a column of the target CSV, a pandas Series) among the log's
    ``ids`` (hashed, vectorised; ids compared as text where their types differ)."""
    import pandas as pd

    if values.dtype.kind == "f":
        x = values.to_numpy()
        if np.all(np.isfinite(x) & (x == np.round(x))):
            values = pd.Series(x.astype(np.int64))
    k = pd.Index(ids).get_indexer(values)
    miss = np.flatnonzero(k < 0)
    if miss.size:
        k[miss] = pd.Index([str(v) for v in ids]).get_indexer(
            [str(v) for v in values.iloc[miss]])
    bad = np.flatnonzero(k < 0)
    if bad.size:
        j = int(bad[0])
        key = values.iloc[j]
        key = key.item() if isinstance(key, np.generic) else key
        shown = ", ".join(map(repr, ids[:8])) + (", ..." if len(ids) > 8 else "")
        raise DatasetFormatError(
            f"{_where(path, j, aligned)}: column {column!r} holds {key!r}, which the log "
            f"never had (its {len(ids)} {column}s: {shown}).")
    return k.astype(np.int64)


def _read_target_csv(path: Path, log: BanditLog) -> np.ndarray:
    import pandas as pd

    frame, aligned = _read_csv(path, ",", "target policy")
    cols = list(frame.columns)
    need = ["record", "action", "probability"]
    for c in need:
        if c not in cols:
            import difflib

            close = difflib.get_close_matches(c, [str(x) for x in cols], n=1)
            raise _err(path, 1, f"missing column {c!r}; a target policy CSV has the columns "
                                f"record, action, [position,] probability; got "
                                f"{', '.join(map(repr, cols[:8]))}."
                                + (f" Did you mean {close[0]!r}?" if close else ""))
    n, K, L = log.n_rounds, log.n_actions, log.len_list
    if len(frame) == 0:
        raise _err(path, 0, "no rows; expected the target's probabilities.")
    rec = pd.to_numeric(frame["record"], errors="coerce").to_numpy(dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(rec) | (rec != np.round(rec)) | (rec < 0) | (rec >= n))
    if bad.size:
        j = int(bad[0])
        raise DatasetFormatError(f"{_where(path, j, aligned)}: column 'record' must be a "
                                 f"record of the log, an integer in [0, {n - 1}]; got "
                                 f"{_as_written(frame['record'], j)!r}.")
    rec = rec.astype(np.int64)
    prob = pd.to_numeric(frame["probability"], errors="coerce").to_numpy(dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(prob) | (prob < 0) | (prob > 1))
    if bad.size:
        j = int(bad[0])
        raise DatasetFormatError(f"{_where(path, j, aligned)}: column 'probability' must be "
                                 f"a number in [0, 1]; got "
                                 f"{_as_written(frame['probability'], j)!r}.")
    act = _lookup(frame["action"], _ids(log, "actions", K), path, "action", aligned)
    has_pos = "position" in cols
    if has_pos:
        pos = _lookup(frame["position"], _ids(log, "positions", L), path, "position",
                      aligned)
    else:
        pos = np.zeros(len(frame), dtype=np.int64)
    width = L if has_pos else 1
    key = (rec * width + pos) * K + act
    order = np.argsort(key, kind="stable")
    dup = np.flatnonzero(key[order][1:] == key[order][:-1])
    if dup.size:
        a, b = order[dup[0]], order[dup[0] + 1]
        raise DatasetFormatError(f"{_where(path, int(b), aligned)}: (record, action"
                                 f"{', position' if has_pos else ''}) given twice; first at "
                                 f"{_where(path, int(a), aligned)}.")
    dist = np.zeros((n, width, K))
    dist[rec, pos, act] = prob
    given = np.zeros((n, width), dtype=bool)
    given[rec, pos] = True
    own = log.positions() if has_pos else np.zeros(n, dtype=np.int64)
    missing = np.flatnonzero(~given[np.arange(n), own])
    if missing.size:
        j = int(missing[0])
        slot = f" at position {_ids(log, 'positions', L)[own[j]]!r}" if has_pos else ""
        raise DatasetFormatError(f"{path}: record {j} has no probabilities{slot}; the file "
                                 "must give every record's distribution (at its own "
                                 "position).")
    sums = dist.sum(axis=2)
    bad = np.argwhere(given & (np.abs(sums - 1.0) > 1e-6))
    if bad.size:
        j, k = map(int, bad[0])
        slot = f" at position {_ids(log, 'positions', L)[k]!r}" if has_pos else ""
        raise DatasetFormatError(f"{path}: the probabilities of record {j}{slot} sum to "
                                 f"{sums[j, k]:.6g}, not 1.")
    if has_pos:
        # slots a record was not shown in are never read by the estimators: its own slot's
        # distribution stands in for them, so that every slot is a distribution
        fill = ~given
        if fill.any():
            r_, k_ = np.nonzero(fill)
            dist[r_, k_] = dist[r_, own[r_]]
        return np.ascontiguousarray(dist.transpose(0, 2, 1))
    if L > 1:  # the same distribution at every position: a view, no copy
        return np.broadcast_to(dist[:, 0, :, None], (n, K, L))
    return dist[:, 0, :]


def read_target(target, log: BanditLog) -> np.ndarray:
    """A target policy as the ``action_dist`` of ``log``'s records.

    Parameters
    ----------
    target : array, callable, str or os.PathLike
        * an array of action probabilities: ``(n_rounds, n_actions)``, ``(n_rounds,
          n_actions, len_list)``, or one context-free distribution ``(n_actions,)`` /
          ``(n_actions, len_list)``; actions in the log's order (``metadata["actions"]``);
        * a path to such an array saved by ``numpy.save`` (``.npy``, no pickle);
        * a path to a CSV with the columns ``record`` (0-based data row of the log),
          ``action`` (the user's own action ids, as in the log's file), optionally
          ``position`` (the user's position ids) and ``probability``; a pair not listed
          has probability 0; every record's rows (at its own position) must sum to 1;
        * a callable ``policy(context) -> probabilities``, or its import path
          ``"module:attribute"``: called once with ``log.context`` (``(n_rounds,
          dim_context)`` float64, columns named in ``metadata["context_columns"]``), it
          returns an array as in the first case.
    log : BanditLog

    Returns
    -------
    ndarray
        ``(n_rounds, n_actions)`` or ``(n_rounds, n_actions, len_list)`` float64, checked:
        finite, >= 0, each record's (and position's) row summing to 1 (within 1e-6).

    Raises
    ------
    TypeError, ValueError
        Naming ``target``: a wrong shape (with the expected one), rows that do not sum to 1
        (the record and position named), a policy that raises or returns a wrong shape,
        an import path that does not import.
    DatasetFormatError
        A target CSV, naming file, line and column: a missing column, an action or position
        the log never had, a record out of range, a pair given twice, a record without
        probabilities, sums other than 1.
    """
    if not isinstance(log, BanditLog):
        raise ArgumentTypeError("log", "a simulator.logs.BanditLog", type(log).__name__)
    if isinstance(target, (str, os.PathLike)):
        text = os.fspath(target)
        path = Path(text)
        if isinstance(target, str) and _IMPORT_PATH.fullmatch(text) and not path.exists():
            policy = _import(text)
            if not callable(policy):
                raise ArgumentTypeError("target", "a callable policy(context)",
                                        f"{text!r}, a {type(policy).__name__}")
            return _call(policy, log, text)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such file (`target` must be a .npy array, "
                                    "a .csv of (record, action, [position,] probability) or "
                                    "an import path module:attribute).")
        if path.suffix.lower() == ".npy":
            try:
                arr = np.load(path, allow_pickle=False)
            except (ValueError, OSError, EOFError) as exc:
                raise DatasetFormatError(f"{path}: not a .npy array numpy can read without "
                                         f"pickle: {exc}") from None
            return _check_dist(np.asarray(arr), log, str(path))
        if path.suffix.lower() == ".csv":
            return _read_target_csv(path, log)
        raise ArgumentValueError("target", "a .npy or .csv file, or module:attribute",
                                 repr(text))
    if callable(target):
        return _call(target, log, getattr(target, "__name__", "the policy"))
    if isinstance(target, (np.ndarray, list, tuple)):
        return _check_dist(np.asarray(target), log, "the array")
    raise ArgumentTypeError("target", "an array, a callable policy(context), a path to a "
                            ".npy or .csv file, or module:attribute", type(target).__name__)

