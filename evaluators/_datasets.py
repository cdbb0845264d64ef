"""Loaders for local rating files (never downloads): MovieLens 100K / 1M, Jester, generic CSV.

Each returns a :class:`RatingData`: contiguous 0-based user and item indices in file order,
float64 ratings, optional timestamps, and the original ids. Malformed rows raise a
:class:`DatasetFormatError` that names the file and the 1-based line number.
"""

from __future__ import annotations

import csv
import io
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

__all__ = [
    "DatasetFormatError",
    "RatingData",
    "load_movielens_100k",
    "load_movielens_1m",
    "load_jester",
    "load_csv",
]


class DatasetFormatError(ValueError):
    """A rating file is malformed; the message names the file and the line."""


def _ro(a, dtype=None) -> np.ndarray:
    arr = np.array(a, dtype=dtype, copy=True)
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class RatingData:
    """Ratings as aligned arrays with contiguous indices and the maps back to original ids.

    Attributes
    ----------
    users, items : ndarray of int64, shape (n_ratings,)
        0-based indices; ``user_ids[users[j]]`` is the original id of rating ``j``'s user.
    ratings : ndarray of float64, shape (n_ratings,)
        A rating of 0 is a real rating (Jester has them).
    timestamps : ndarray of int64, shape (n_ratings,), or None
        When the file has them.
    user_ids, item_ids : ndarray, shapes (n_users,) and (n_items,)
        Original ids in increasing order (int64, or str for non-integer ids in a generic CSV).
    source : str
        The file the data came from.

    All arrays are read-only; ratings keep the order of the file's lines.
    """

    users: np.ndarray
    items: np.ndarray
    ratings: np.ndarray
    timestamps: np.ndarray | None
    user_ids: np.ndarray
    item_ids: np.ndarray
    source: str = ""

    @property
    def n_ratings(self) -> int:
        return int(self.ratings.size)

    @property
    def n_users(self) -> int:
        return int(self.user_ids.size)

    @property
    def n_items(self) -> int:
        return int(self.item_ids.size)

    def __len__(self) -> int:
        return self.n_ratings

    def triple(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(users, items, ratings)``, the tuple form that ``loo_knn`` accepts."""
        return self.users, self.items, self.ratings

    def to_csr(self) -> sp.csr_array:
        """Users x items ``csr_array`` of the ratings; a rating of 0 stays a stored entry."""
        return sp.csr_array((self.ratings.copy(), (self.users, self.items)),
                            shape=(self.n_users, self.n_items))

    def __repr__(self) -> str:
        return (f"RatingData({self.n_users} users, {self.n_items} items, {self.n_ratings} "
                f"ratings, timestamps={'yes' if self.timestamps is not None else 'no'}, "
                f"source={self.source!r})")


# -- reading ---------------------------------------------------------------------------------

def _path(path) -> Path:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"`path` must be a str or os.PathLike; got {type(path).__name__}.")
    return Path(path)


def _err(path, line: int, msg: str) -> DatasetFormatError:
    return DatasetFormatError(f"{path}:{line}: {msg}")


def _text(path: Path, encoding: str) -> tuple[str, list[str]]:
    data = path.read_bytes()
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise _err(path, line, f"not valid {encoding} text ({exc.reason} at byte "
                               f"{exc.start}).") from None
    return text, text.splitlines()


def _as_int(tok: str) -> int:
    return int(tok)


def _as_float(tok: str) -> float:
    return float(tok)


def _records(path, rows, cols, names, converters):
    """Convert the selected fields of each (line_no, fields) row; columns as lists."""
    out = [[] for _ in cols]
    line_nos = []
    for ln, fields in rows:
        try:
            for j, c in enumerate(cols):
                out[j].append(converters[j](fields[c]))
        except ValueError:
            kind = "an integer" if converters[j] is _as_int else "a number"
            raise _err(path, ln, f"{names[j]} must be {kind}; got {fields[c]!r}.") from None
        line_nos.append(ln)
    return out, np.asarray(line_nos, dtype=np.int64)


def _split_rows(path, lines, *, sep, n_fields, first_line):
    for ln, line in enumerate(lines, start=first_line):
        if not line.strip():
            continue  # blank lines (a trailing newline, an empty last line) carry no rating
        f = line.split(sep) if sep is not None else line.split()
        if len(f) != n_fields:
            where = "whitespace" if sep is None else repr(sep)
            raise _err(path, ln, f"expected {n_fields} fields separated by {where}; got "
                                 f"{len(f)} in {line!r}.")
        yield ln, [x.strip() for x in f]


def _build(path, users, items, ratings, times, line_nos, *, rating_range) -> RatingData:
    if line_nos.size == 0:
        raise DatasetFormatError(f"{path}: no ratings found.")
    r = np.asarray(ratings, dtype=np.float64)
    bad = ~np.isfinite(r)
    if bad.any():
        j = int(np.argmax(bad))
        raise _err(path, int(line_nos[j]), f"rating must be finite; got {r[j]}.")
    if rating_range is not None:
        lo, hi = rating_range
        bad = (r < lo) | (r > hi)
        if bad.any():
            j = int(np.argmax(bad))
            raise _err(path, int(line_nos[j]), f"rating must be in [{lo:g}, {hi:g}]; "
                                               f"got {r[j]:g}.")
    uid, u = np.unique(np.asarray(users), return_inverse=True)
    iid, i = np.unique(np.asarray(items), return_inverse=True)
    u = u.astype(np.int64).ravel()
    i = i.astype(np.int64).ravel()
    # Duplicate (user, item) pairs make a rating ambiguous and break leave-one-out.
    order = np.lexsort((np.arange(u.size), i, u))
    dup = (u[order][1:] == u[order][:-1]) & (i[order][1:] == i[order][:-1])
    if dup.any():
        j = int(np.argmax(dup))
        a, b = order[j], order[j + 1]
        raise _err(path, int(line_nos[b]), f"duplicate rating of (user {uid[u[b]]}, item "
                                           f"{iid[i[b]]}); first given on line "
                                           f"{int(line_nos[a])}.")
    t = None if times is None else _ro(times, np.int64)
    return RatingData(users=_ro(u), items=_ro(i), ratings=_ro(r), timestamps=t,
                      user_ids=_ro(uid), item_ids=_ro(iid), source=str(path))


_DT4 = np.dtype([("u", np.int64), ("i", np.int64), ("r", np.float64), ("t", np.int64)])
_DT3 = np.dtype([("u", np.int64), ("i", np.int64), ("r", np.float64)])


def _fast(text: str, lines: list[str], *, sep, dtype, skip: int):
    """numpy's C parser on a well-formed file; None sends the caller to the exact parser.

    The exact Python parser below stays the authority: it runs whenever the fast one
    objects, and it is the one that names the bad line. numpy's integer parser is stricter
    than Python's ``int`` (no ``1_000``), so anything accepted here parses the same there.
    """
    if sep == "::":
        if "\t" in text:
            return None
        text, sep = text.replace("::", "\t"), "\t"
    try:
        with warnings.catch_warnings():
            # An empty file: the exact parser reports it with the file name.
            warnings.filterwarnings("ignore", "loadtxt: input contained no data")
            arr = np.loadtxt(io.StringIO(text), delimiter=sep, dtype=dtype, comments=None,
                             skiprows=skip, ndmin=1, encoding=None)
    except ValueError:
        return None
    # Line numbers are known only when no line was skipped as blank.
    if arr.size != len(lines) - skip:
        return None
    return arr


def _load_plain(path, *, sep, n_fields, first_line, skip, names, rating_range,
                encoding="utf-8-sig") -> RatingData:
    p = _path(path)
    text, lines = _text(p, encoding)
    dtype = _DT4 if n_fields == 4 else _DT3
    arr = _fast(text, lines, sep=sep, dtype=dtype, skip=skip)
    if arr is not None:
        cols = [arr[name] for name in dtype.names]
        line_nos = np.arange(first_line, first_line + arr.size, dtype=np.int64)
    else:
        rows = _split_rows(p, lines[skip:], sep=sep, n_fields=n_fields, first_line=first_line)
        cols, line_nos = _records(p, rows, tuple(range(n_fields)), names,
                                  (_as_int, _as_int, _as_float, _as_int)[:n_fields])
    times = cols[3] if n_fields == 4 else None
    return _build(p, cols[0], cols[1], cols[2], times, line_nos, rating_range=rating_range)


_ML_NAMES = ("user id", "item id", "rating", "timestamp")


def load_movielens_100k(path) -> RatingData:
    """Load MovieLens 100K ``u.data``: ``user \\t item \\t rating \\t timestamp`` per line.

    Parameters
    ----------
    path : str or os.PathLike
        A local ``u.data`` (or any of its ``u1.base`` ... split files).

    Returns
    -------
    RatingData
        With timestamps (Unix seconds). The full file has 943 users, 1,682 items and
        100,000 ratings in 1..5.

    Raises
    ------
    TypeError
        ``path`` not a path.
    FileNotFoundError
        No such file.
    DatasetFormatError
        A line without exactly 4 tab-separated fields, a non-integer id or timestamp, a
        rating outside [1, 5], a duplicate (user, item) pair, or no rating at all; the
        message names the file and line.
    """
    return _load_plain(path, sep="\t", n_fields=4, first_line=1, skip=0, names=_ML_NAMES,
                       rating_range=(1, 5))


def load_movielens_1m(path) -> RatingData:
    """Load MovieLens 1M ``ratings.dat``: ``UserID::MovieID::Rating::Timestamp`` per line.

    Parameters
    ----------
    path : str or os.PathLike
        A local ``ratings.dat``.

    Returns
    -------
    RatingData
        With timestamps. The full file has 6,040 users, 3,706 rated movies and 1,000,209
        ratings in 1..5.

    Raises
    ------
    TypeError, FileNotFoundError, DatasetFormatError
        As :func:`load_movielens_100k`, with ``::`` as the separator.
    """
    return _load_plain(path, sep="::", n_fields=4, first_line=1, skip=0, names=_ML_NAMES,
                       rating_range=(1, 5))


_JESTER_HEADER = ["userid", "jokeid", "rating"]


def load_jester(path, *, format=None) -> RatingData:
    """Load Jester ratings: the CSV ``userId,jokeId,rating`` or the text ``user joke rating``.

    Parameters
    ----------
    path : str or os.PathLike
        A local file.
    format : {"csv", "text"}, optional
        ``"csv"``: comma-separated with the header ``userId,jokeId,rating``; ``"text"``:
        whitespace-separated ``user joke rating`` lines without header (Jester dataset 2's
        ``jester_ratings.dat``). Default: ``"csv"`` for a ``.csv`` suffix, else ``"text"``.

    Returns
    -------
    RatingData
        No timestamps. Ratings in [-10, 10]; 0 is a real rating and stays one.

    Raises
    ------
    ValueError
        Unknown ``format``.
    DatasetFormatError
        A wrong header, a malformed line, a rating outside [-10, 10] (the wide Jester-1
        sheets use 99 for "not rated": convert them to triples first), duplicates.
    """
    p = _path(path)
    if format is None:
        format = "csv" if p.suffix.lower() == ".csv" else "text"
    if format not in ("csv", "text"):
        raise ValueError(f"`format` must be 'csv' or 'text'; got {format!r}.")
    names = ("user id", "joke id", "rating")
    if format == "csv":
        _, lines = _text(p, "utf-8-sig")
        head = [h.strip().lower() for h in lines[0].split(",")] if lines else []
        if head != _JESTER_HEADER:
            raise _err(p, 1, f"expected the header 'userId,jokeId,rating'; got "
                             f"{lines[0] if lines else ''!r}.")
        return _load_plain(p, sep=",", n_fields=3, first_line=2, skip=1, names=names,
                           rating_range=(-10, 10))
    return _load_plain(p, sep=None, n_fields=3, first_line=1, skip=0, names=names,
                       rating_range=(-10, 10))


def _id_array(raw: list[str]) -> np.ndarray:
    """int64 when every id is a canonical integer ("12", not "012"), else str."""
    try:
        ints = [int(x) for x in raw]
    except ValueError:
        return np.asarray(raw, dtype=str)
    if all(str(v) == x for v, x in zip(ints, raw)):
        return np.asarray(ints, dtype=np.int64)
    return np.asarray(raw, dtype=str)  # "01" and "1" must stay different ids


def load_csv(path, *, user, item, rating, timestamp=None, delimiter=",", header=True,
             rating_range=None, encoding="utf-8-sig") -> RatingData:
    """Load ratings from a delimited text file with a column mapping.

    Parameters
    ----------
    path : str or os.PathLike
        A local file.
    user, item, rating : str or int
        The columns: names from the header (``header=True``) or 0-based positions
        (``header=False``).
    timestamp : str or int, optional
        Column of integer timestamps.
    delimiter : str, default ","
        One character (Python's :mod:`csv` dialect; quoted fields are fine).
    header : bool, default True
        Whether the first line names the columns.
    rating_range : (float, float), optional
        Inclusive bounds every rating must respect.
    encoding : str, default "utf-8-sig"
        A leading byte-order mark (common in spreadsheet exports) is dropped.

    Returns
    -------
    RatingData
        Ids are int64 when every id in a column is a canonical integer, else str.

    Raises
    ------
    TypeError
        Column given with the wrong type for ``header``.
    ValueError
        A column name missing from the header, a position out of range, columns repeated.
    DatasetFormatError
        Malformed lines (field count, numbers), out-of-range ratings, duplicates.

    Examples
    --------
    A file ``"u,i,r\\n7,a,4\\n"`` read with ``load_csv(path, user="u", item="i", rating="r")``
    gives ``user_ids == [7]`` and ``item_ids == ['a']``.
    """
    p = _path(path)
    if not isinstance(delimiter, str) or len(delimiter) != 1:
        raise ValueError(f"`delimiter` must be a single character; got {delimiter!r}.")
    if rating_range is not None:
        try:
            lo, hi = (float(x) for x in rating_range)
        except (TypeError, ValueError):
            raise TypeError(f"`rating_range` must be a pair of numbers; got "
                            f"{rating_range!r}.") from None
        if not lo <= hi:
            raise ValueError(f"`rating_range` must have low <= high; got {rating_range!r}.")
        rating_range = (lo, hi)
    _, lines = _text(p, encoding)
    reader = csv.reader(lines, delimiter=delimiter)
    spec = {"user": user, "item": item, "rating": rating}
    if timestamp is not None:
        spec["timestamp"] = timestamp
    if header:
        try:
            names = [h.strip() for h in next(reader)]
        except StopIteration:
            raise DatasetFormatError(f"{p}: empty file, expected a header line.") from None
        cols = {}
        for arg, col in spec.items():
            if not isinstance(col, str):
                raise TypeError(f"`{arg}` must be a column name (str) when header=True; "
                                f"got {type(col).__name__} {col!r}.")
            if col not in names:
                raise ValueError(f"`{arg}` = {col!r} is not a column of {p}; the header "
                                 f"has {names}.")
            cols[arg] = names.index(col)
        n_fields = len(names)
    else:
        cols = {}
        for arg, col in spec.items():
            if isinstance(col, bool) or not isinstance(col, (int, np.integer)):
                raise TypeError(f"`{arg}` must be a 0-based column position (int) when "
                                f"header=False; got {type(col).__name__} {col!r}.")
            if col < 0:
                raise ValueError(f"`{arg}` must be >= 0; got {col}.")
            cols[arg] = int(col)
        n_fields = None
    used = list(cols.values())
    if len(set(used)) != len(used):
        raise ValueError(f"The columns must be distinct; got {spec}.")
    need = max(used) + 1

    def rows():
        for fields in reader:
            ln = reader.line_num  # the record's last line (a quoted field may span lines)
            if not fields or (len(fields) == 1 and not fields[0].strip()):
                continue
            if n_fields is not None and len(fields) != n_fields:
                raise _err(p, ln, f"expected {n_fields} fields (as in the header); got "
                                  f"{len(fields)}.")
            if len(fields) < need:
                raise _err(p, ln, f"expected at least {need} fields; got {len(fields)}.")
            yield ln, [f.strip() for f in fields]

    keys = list(cols)
    conv = {"user": str, "item": str, "rating": _as_float, "timestamp": _as_int}
    names_ = {"user": "user id", "item": "item id", "rating": "rating",
              "timestamp": "timestamp"}
    out, line_nos = _records(p, rows(), [cols[k] for k in keys], [names_[k] for k in keys],
                             [conv[k] for k in keys])
    data = dict(zip(keys, out))
    return _build(p, _id_array(data["user"]), _id_array(data["item"]), data["rating"],
                  data.get("timestamp"), line_nos, rating_range=rating_range)
