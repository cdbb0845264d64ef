"""Rating data: loaders for local files (never downloads) and a synthetic generator.

Loaders: MovieLens 100K / 1M, MovieLens 10M / 20M / 25M (read in chunks into int32 / float32
arrays, for logs of tens of millions of ratings), Jester, generic CSV. Each returns a
:class:`RatingData`: contiguous 0-based user and item indices in file order, the ratings,
optional timestamps, and the original ids. Malformed rows raise a :class:`DatasetFormatError`
that names the file and the 1-based line number. :func:`synthetic_ratings` draws rating sets
of MovieLens shapes (long-tailed item popularity and user activity) for tests and
benchmarks. No data is ever shipped with recloop.
"""

from __future__ import annotations

import csv
import io
import math
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
    "load_movielens_10m",
    "load_movielens_20m",
    "load_movielens_25m",
    "load_jester",
    "load_csv",
    "synthetic_ratings",
]


class DatasetFormatError(ValueError):
    """A rating file is malformed; the message names the file and the line."""


def _frozen(a: np.ndarray) -> np.ndarray:
    """``a`` itself, made read-only (an array this module just built: no copy)."""
    a.setflags(write=False)
    return a


def _ro(a, dtype=None) -> np.ndarray:
    arr = np.array(a, dtype=dtype, copy=True)
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class RatingData:
    """Ratings as aligned arrays with contiguous indices and the maps back to original ids.

    Attributes
    ----------
    users, items : ndarray of int64 (int32 from the MovieLens 10M/20M/25M loaders), shape
        (n_ratings,)
        0-based indices; ``user_ids[users[j]]`` is the original id of rating ``j``'s user.
    ratings : ndarray of float64 (float32 from the MovieLens 10M/20M/25M loaders, which is
        exact for their half-star ratings), shape (n_ratings,)
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
    if all(str(v) == x for v, x in zip(ints, raw, strict=True)):
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
    data = dict(zip(keys, out, strict=True))
    return _build(p, _id_array(data["user"]), _id_array(data["item"]), data["rating"],
                  data.get("timestamp"), line_nos, rating_range=rating_range)


# -- MovieLens 10M / 20M / 25M: chunked, int32 / float32 -----------------------------------

_CHUNK_BYTES = 1 << 24  # text read and parsed per step (16 MiB, ~550,000 MovieLens lines)
_NEWLINE, _COMMA = ord("\n"), ord(",")
_NUMERIC = np.zeros(256, dtype=bool)  # bytes the vectorised parser accepts
_NUMERIC[np.frombuffer(b"0123456789.,-+eE\n", dtype=np.uint8)] = True
_ML_LARGE_RANGE = (0.5, 5.0)
_ML_CSV_HEADER = "userId,movieId,rating,timestamp"


def _parse_block(path, block: bytes, first_line: int, sep: bytes):
    """``(table (n, 4) float64, line numbers (n,) or None)`` of a block of whole lines
    ``user sep movie sep rating sep timestamp``; ``None``: lines ``first_line, ...``.

    numpy's C parser on the block; on any irregularity (a blank line, a field too many or
    too few, a token that is not a number) the exact line-by-line parser runs, skips blank
    lines and names the first bad line. Both accept the same files.
    """
    text = block.replace(b"\r", b"")
    if sep != b",":
        if b"," in text:  # not a separator of this format: the exact parser names the line
            return _parse_block_exact(path, block, first_line, sep)
        text = text.replace(sep, b",")
    raw = np.frombuffer(text, dtype=np.uint8)
    newlines = np.flatnonzero(raw == _NEWLINE)
    n_lines = newlines.size + 1
    commas = np.flatnonzero(raw == _COMMA)
    # numbers only, and exactly three commas on every line (else the exact parser decides)
    if raw.size and _NUMERIC[raw].all() and commas.size == 3 * n_lines and np.array_equal(
            np.searchsorted(newlines, commas), np.repeat(np.arange(n_lines), 3)):
        try:
            values = np.fromstring(text.replace(b"\n", b","), dtype=np.float64, sep=",")
        except ValueError:
            values = None
        if values is not None and values.size == 4 * n_lines:
            table = values.reshape(n_lines, 4)
            ids = table[:, [0, 1, 3]]
            if np.all(np.isfinite(table)) and np.all(ids == np.rint(ids)):
                return table, None
    return _parse_block_exact(path, block, first_line, sep)


def _parse_block_exact(path, block: bytes, first_line: int, sep: bytes):
    names = ("user id", "movie id", "rating", "timestamp")
    rows, line_nos = [], []
    for ln, raw in enumerate(block.split(b"\n"), start=first_line):
        line = raw.rstrip(b"\r").decode("utf-8", "replace")
        if not line.strip():
            continue  # a blank line carries no rating
        fields = line.split(sep.decode())
        if len(fields) != 4:
            raise _err(path, ln, f"expected 4 fields separated by {sep.decode()!r}; got "
                                 f"{len(fields)} in {line!r}.")
        row = []
        for j, (name, tok) in enumerate(zip(names, fields, strict=True)):
            tok = tok.strip()
            try:
                v = float(tok)
            except ValueError:
                v = math.nan
            if j == 2 and not math.isfinite(v):
                raise _err(path, ln, f"rating must be a finite number; got {tok!r}.")
            if j != 2 and not (math.isfinite(v) and v == int(v)):
                raise _err(path, ln, f"{name} must be an integer; got {tok!r}.")
            row.append(v)
        rows.append(row)
        line_nos.append(ln)
    table = np.array(rows, dtype=np.float64).reshape(-1, 4)
    return table, np.array(line_nos, dtype=np.int64)


def _blocks(f, size):
    """Blocks of whole lines (without their final newline) and the count of lines each spans."""
    rest = b""
    while True:
        chunk = f.read(size)
        if not chunk:
            if rest:
                yield rest
            return
        data = rest + chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            rest = data
            continue
        yield data[:cut]
        rest = data[cut + 1:]


def _dense_index(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, index)``: the sorted distinct ids of ``raw`` (int32, >= 0) and each value's
    position among them (int32), as ``np.unique(raw, return_inverse=True)`` but through a
    lookup table when the ids are not sparse (MovieLens: a few bytes per rating less)."""
    top = int(raw.max())
    if top > raw.size + 1024:
        ids, index = np.unique(raw, return_inverse=True)
        return ids, index.astype(np.int32).ravel()
    present = np.zeros(top + 1, dtype=bool)
    present[raw] = True
    lookup = np.cumsum(present, dtype=np.int32) - 1
    return np.flatnonzero(present), lookup[raw]


def _load_large(path, *, sep: bytes, header: str | None, timestamps: bool) -> RatingData:
    """Read a MovieLens 10M/20M/25M file block by block into int32 / float32 arrays."""
    p = _path(path)
    users, items, ratings, times, where = [], [], [], [], []
    line, n = 1, 0
    lo, hi = _ML_LARGE_RANGE
    with open(p, "rb") as f:
        if header is not None:
            first = f.readline().decode("utf-8-sig", "replace").strip()
            if first != header:
                raise _err(p, 1, f"expected the header {header!r}; got {first!r}.")
            line = 2
        for block in _blocks(f, _CHUNK_BYTES):
            table, line_nos = _parse_block(p, block, line, sep)

            def line_of(j, line=line, line_nos=line_nos):
                return int(line + j if line_nos is None else line_nos[j])

            r = table[:, 2]
            bad = (r < lo) | (r > hi)
            if bad.any():
                j = int(np.argmax(bad))
                raise _err(p, line_of(j), f"rating must be in [{lo:g}, {hi:g}]; got {r[j]:g}.")
            for c, name in ((0, "user id"), (1, "movie id")):
                bad = (table[:, c] < 0) | (table[:, c] >= 2**31)
                if bad.any():
                    j = int(np.argmax(bad))
                    raise _err(p, line_of(j), f"{name} must be in [0, 2^31); got "
                                              f"{table[j, c]:.0f}.")
            users.append(table[:, 0].astype(np.int32))
            items.append(table[:, 1].astype(np.int32))
            ratings.append(table[:, 2].astype(np.float32))
            if timestamps:
                times.append(table[:, 3].astype(np.int64))
            where.append((n, line, line_nos))
            n += table.shape[0]
            line += block.count(b"\n") + 1
    if n == 0:
        raise DatasetFormatError(f"{p}: no ratings found.")

    def line_of_rating(j):
        start, first_line, nos = next(w for w in reversed(where) if w[0] <= j)
        return int(first_line + j - start if nos is None else nos[j - start])

    uid, u = _dense_index(np.concatenate(users))
    del users
    iid, i = _dense_index(np.concatenate(items))
    del items
    # duplicates: sort the (user, item) keys in place; only a duplicate pays for the argsort
    # that finds its lines
    key = u.astype(np.int64) * iid.size + i
    key.sort()
    if np.any(key[1:] == key[:-1]):
        key = u.astype(np.int64) * iid.size + i
        order = np.argsort(key, kind="stable")
        j = int(np.flatnonzero(key[order][1:] == key[order][:-1])[0])
        a, b = int(order[j]), int(order[j + 1])
        raise _err(p, line_of_rating(b), f"duplicate rating of (user {uid[u[b]]}, movie "
                                         f"{iid[i[b]]}); first given on line "
                                         f"{line_of_rating(a)}.")
    del key
    t = _frozen(np.concatenate(times)) if timestamps else None
    return RatingData(users=_frozen(u), items=_frozen(i),
                      ratings=_frozen(np.concatenate(ratings)), timestamps=t,
                      user_ids=_frozen(uid.astype(np.int64)),
                      item_ids=_frozen(iid.astype(np.int64)), source=str(p))


_LARGE_DOC = """

    Parameters
    ----------
    path : str or os.PathLike
        A local file, read in blocks of 16 MiB (never whole).
    timestamps : bool, default False
        Also keep the timestamps (int64, 8 bytes per rating).

    Returns
    -------
    RatingData
        ``users`` and ``items`` int32, ``ratings`` float32 (half stars 0.5 ... 5, exact in
        float32), 12 bytes per rating; ``user_ids`` and ``item_ids`` int64. Measured on a
        4,000,000-line ``ratings.csv``: 1.7 s, a peak of 202 MB above the Python runtime
        (the arrays, 48 MB, plus the concatenation, the id tables, the duplicate check and
        one block's parsing buffers, about 100 MB).

    Raises
    ------
    TypeError, FileNotFoundError
        ``path`` not a path; no such file.
    DatasetFormatError
        A wrong header, a line without exactly 4 fields, a non-integer id or timestamp, a
        rating outside [0.5, 5], a duplicate (user, movie) pair, or no rating at all; the
        message names the file and line.
    """


def load_movielens_10m(path, *, timestamps=False) -> RatingData:
    return _load_large(path, sep=b"::", header=None, timestamps=timestamps)


def load_movielens_20m(path, *, timestamps=False) -> RatingData:
    return _load_large(path, sep=b",", header=_ML_CSV_HEADER, timestamps=timestamps)


def load_movielens_25m(path, *, timestamps=False) -> RatingData:
    return _load_large(path, sep=b",", header=_ML_CSV_HEADER, timestamps=timestamps)


load_movielens_10m.__doc__ = (
    "Load MovieLens 10M ``ratings.dat``: ``UserID::MovieID::Rating::Timestamp`` per line "
    "(69,878 users, 10,677 movies, 10,000,054 ratings)." + _LARGE_DOC)
load_movielens_20m.__doc__ = (
    "Load MovieLens 20M ``ratings.csv``: the header ``userId,movieId,rating,timestamp``, "
    "then one rating per line (138,493 users, 26,744 movies, 20,000,263 ratings)."
    + _LARGE_DOC)
load_movielens_25m.__doc__ = (
    "Load MovieLens 25M ``ratings.csv`` (the 20M format; 162,541 users, 59,047 movies, "
    "25,000,095 ratings)." + _LARGE_DOC)


# -- synthetic ratings -------------------------------------------------------------------------

_KEY_BYTES = 1 << 25  # Gumbel keys drawn per block of users (32 MiB)


def synthetic_ratings(n_users=943, n_items=1682, n_ratings=100_000, *, n_factors=5,
                      rng=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A rating set of MovieLens shape: long-tailed popularity and activity, user and item
    effects, a low-rank taste.

    Parameters
    ----------
    n_users, n_items : int
        Sizes, >= 1.
    n_ratings : int
        Observations, in [1, n_users * n_items]. A user rates at most 70% of the items, or
        the fewest that make room for ``n_ratings``; users may be left without a rating when
        ``n_ratings < 20 * n_users``.
    n_factors : int, default 5
        Rank of the user-item interaction (the taste that neighbours share), >= 0.
    rng : None, int, SeedSequence or Generator

    Returns
    -------
    users, items : int64 ndarray (n_ratings,)
        Sorted by user, then item.
    ratings : float64 ndarray (n_ratings,)
        Integers 1..5.

    Raises
    ------
    TypeError, ValueError
        A size that is not an integer in its range (the message names it).

    Notes
    -----
    Each user rates ``min(20, n_ratings // n_users)`` items plus a log-normal share of the
    rest (heavy-tailed activity, capped), drawn without replacement with weights
    ``(rank + n_items / 80)^-1`` (Gumbel top-k); the rating is
    ``rint(3.5 + b_u + b_i + p_u . q_i + noise)`` clipped to [1, 5], with ``b_u ~ N(0, 0.4)``,
    ``b_i ~ N(0, 0.4)`` plus 0.3 per standard deviation of log-popularity (popular items are
    rated higher, as in MovieLens), an interaction of standard deviation about 0.6 and noise
    ``N(0, 0.8)``. The Gumbel keys are drawn block of users by block (32 MiB at a time, the
    same numbers as one ``(n_users, n_items)`` draw), so memory stays at the output's size
    plus the block: ``n_ratings = 4,000,000`` on 25,000 x 12,000 takes a few seconds. Time
    grows as ``n_users * n_items`` (one key per pair).

    Examples
    --------
    >>> u, i, r = synthetic_ratings(50, 60, 1500, rng=0)
    >>> u.shape, float(r.min()) >= 1.0
    ((1500,), True)
    """
    from recloop_base.validation import as_generator, check_int

    n_users = check_int(n_users, "n_users", low=1)
    n_items = check_int(n_items, "n_items", low=1)
    n_ratings = check_int(n_ratings, "n_ratings", low=1, high=n_users * n_items)
    n_factors = check_int(n_factors, "n_factors", low=0)
    # MovieLens users rate at most ~70% of the catalogue; a denser set raises the cap
    cap = min(n_items, max(1, int(0.7 * n_items), -(-n_ratings // n_users)))
    rng = as_generator(rng)
    base = min(20, n_ratings // n_users, cap)
    counts = np.full(n_users, base, dtype=np.int64)
    weight = rng.lognormal(0.0, 1.0, n_users)
    rest = n_ratings - int(counts.sum())
    while rest > 0:  # ends: the caps hold at least n_ratings in all
        free = weight * (counts < cap)
        counts = np.minimum(counts + rng.multinomial(rest, free / free.sum()), cap)
        rest = n_ratings - int(counts.sum())
    logp = -np.log(np.arange(n_items) + max(1.0, n_items / 80.0))[rng.permutation(n_items)]
    items = np.empty(n_ratings, dtype=np.int64)
    start = np.concatenate([[0], np.cumsum(counts)])
    rows = max(1, _KEY_BYTES // (8 * n_items))
    for lo in range(0, n_users, rows):
        hi = min(n_users, lo + rows)
        keys = logp[None, :] + rng.gumbel(size=(hi - lo, n_items))
        for u in range(lo, hi):
            c = int(counts[u])
            if c == 0:
                continue
            # the c largest keys: the first c of a descending sort, as a set (the order is
            # discarded below; ties have probability 0 with continuous keys)
            top = np.argpartition(-keys[u - lo], c - 1)[:c] if c < n_items else \
                np.arange(n_items)
            items[start[u]:start[u + 1]] = np.sort(top)
    users = np.repeat(np.arange(n_users, dtype=np.int64), counts)
    b_u = rng.normal(0.0, 0.4, n_users)
    b_i = rng.normal(0.0, 0.4, n_items) + 0.3 * (logp - logp.mean()) / max(logp.std(), 1e-12)
    score = 3.5 + b_u[users] + b_i[items] + rng.normal(0.0, 0.8, users.size)
    if n_factors:
        scale = 0.6 ** 0.5 / n_factors ** 0.25  # p.q has standard deviation ~0.6
        P = rng.normal(0.0, scale, (n_users, n_factors))
        Q = rng.normal(0.0, scale, (n_items, n_factors))
        score += np.einsum("nf,nf->n", P[users], Q[items])
    return users, items, np.clip(np.rint(score), 1.0, 5.0)
