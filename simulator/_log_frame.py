"""A table (a pandas DataFrame) as a :class:`simulator.logs.BanditLog`: the columns found by
name, ids encoded, every refusal naming the column and the row. pandas is imported by the
caller's frame only (never here at import time).

:meth:`simulator.logs.BanditLog.from_frame` is the public door; this module holds its parts.
"""

from __future__ import annotations

import difflib
import math
import re

import numpy as np

#: Default column names of each role, tried in this order (the plain names, then Open Bandit
#: Pipeline's and the Open Bandit Dataset's).
DEFAULT_COLUMNS = {
    "action": ("action", "item_id", "arm"),
    "reward": ("reward", "click"),
    "pscore": ("pscore", "propensity_score", "propensity"),
    "position": ("position", "slot"),
    "tick": ("timestamp", "tick", "time"),
}
#: Text context columns with more distinct values than this are refused (one-hot columns).
MAX_CATEGORIES = 1000


class LogFrameError(ValueError):
    """A table that does not make a log: ``column`` and ``row`` (0-based position in the
    table, ``None`` for the table as a whole) name where; ``problem`` says what, without
    the place (a file loader re-words it with its line)."""

    def __init__(self, problem: str, *, column: str | None = None, row: int | None = None):
        self.problem, self.column, self.row = problem, column, row
        super().__init__(problem if row is None else f"{problem} at row {row}.")


def _is_index(name) -> bool:
    """A written-out DataFrame index: an unnamed first column (pandas' ``Unnamed: 0``)."""
    return str(name) == "" or bool(re.fullmatch(r"Unnamed: \d+", str(name)))


def _nearest(name: str, columns) -> str:
    close = difflib.get_close_matches(str(name), [str(c) for c in columns], n=1, cutoff=0.6)
    return f" Did you mean {close[0]!r}?" if close else ""


def _shown_columns(columns) -> str:
    cols = [str(c) for c in columns]
    return ", ".join(map(repr, cols[:10])) + (", ..." if len(cols) > 10 else "")


def _column(frame, role: str, given, *, required: bool):
    """The name of the column that plays ``role``: ``given`` (checked), or the first default
    name present; ``None`` when optional and absent (or ``given`` is False)."""
    columns = list(frame.columns)
    if given is False and not required:
        return None
    if given is not None:
        if not isinstance(given, str):
            raise TypeError(f"`{role}` must be a column name (str); got "
                            f"{type(given).__name__}.")
        if given not in columns:
            raise LogFrameError(f"no column {given!r} (asked for by `{role}=`); the table has "
                                f"{_shown_columns(columns)}.{_nearest(given, columns)}",
                                column=given)
        return given
    for name in DEFAULT_COLUMNS[role]:
        if name in columns:
            return name
    if required:
        names = DEFAULT_COLUMNS[role]
        hint = next((h for h in (_nearest(n, columns) for n in names) if h), "")
        raise LogFrameError(f"no {role} column: give `{role}=` the column's name, or name it "
                            f"{' or '.join(map(repr, names))}; the table has "
                            f"{_shown_columns(columns)}.{hint}", column=role)
    return None


def _values(frame, name):
    return frame[name].to_numpy()


def _numbers(frame, name: str, role: str) -> np.ndarray:
    """A column of real numbers as float64; text, bools of another meaning and missing
    values refused, naming the first bad row."""
    col = frame[name]
    kind = col.dtype.kind
    if kind in "biuf":
        x = col.to_numpy(dtype=np.float64)
    else:
        import pandas as pd

        raw = col.to_numpy(dtype=object)
        parsed = pd.to_numeric(col, errors="coerce").to_numpy(dtype=np.float64)
        # the first entry that is no number at all; else the first number given as text
        bad = [j for j in np.flatnonzero(np.isnan(parsed))
               if not (raw[j] is None or (isinstance(raw[j], float) and math.isnan(raw[j])))]
        if not bad:
            bad = [j for j, v in enumerate(raw) if not isinstance(v, (int, float, np.number))
                   or isinstance(v, bool)]
        if bad:
            j = int(bad[0])
            raise LogFrameError(f"column {name!r} (`{role}`) must hold numbers; got "
                                f"{raw[j]!r} ({type(raw[j]).__name__})", column=name, row=j)
        x = parsed
    bad = np.flatnonzero(~np.isfinite(x))
    if bad.size:
        j = int(bad[0])
        what = "no value" if math.isnan(x[j]) else repr(float(x[j]))
        raise LogFrameError(f"column {name!r} (`{role}`) must hold finite numbers; got {what}",
                            column=name, row=j)
    return x


def _ids(frame, name: str, role: str) -> np.ndarray:
    """Ids as int64 (integer columns, integral floats) or str (anything else); missing
    values refused."""
    col = frame[name]
    kind = col.dtype.kind
    if kind in "biu":
        return col.to_numpy(dtype=np.int64)
    if kind == "f":
        x = col.to_numpy(dtype=np.float64)
        bad = np.flatnonzero(~np.isfinite(x) | (x != np.round(x)) | (np.abs(x) >= 2.0**62))
        if bad.size:
            j = int(bad[0])
            raise LogFrameError(f"column {name!r} (`{role}`) must hold ids (integers or "
                                f"text); got {x[j]!r}", column=name, row=j)
        return x.astype(np.int64)
    raw = col.to_numpy(dtype=object)
    if raw.size and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                        and -2**62 < v < 2**62 for v in raw):
        return raw.astype(np.int64)
    out = np.empty(raw.size, dtype=object)
    for j, v in enumerate(raw):
        if v is None or (isinstance(v, float) and math.isnan(v)):
            raise LogFrameError(f"column {name!r} (`{role}`) has no value", column=name, row=j)
        out[j] = v if isinstance(v, str) else str(v)
    return out.astype(str)


def _encode(values: np.ndarray, given, name: str, role: str):
    """``(codes, ids)``: ``ids`` the given list (every value must be in it) or the sorted
    distinct values; ``codes[j]`` the index of ``values[j]`` in ``ids``."""
    if given is None:
        ids, codes = np.unique(values, return_inverse=True)
        return codes.ravel().astype(np.int64), ids
    ids = np.asarray(list(given))
    if ids.ndim != 1 or ids.size == 0:
        raise ValueError(f"`{role}s` must be a non-empty list of ids; got shape {ids.shape}.")
    if values.dtype.kind in "iu" and ids.dtype.kind not in "iu":
        ids = ids.astype(str)
        values = values.astype(str)
    elif values.dtype.kind not in "iu":
        ids = ids.astype(str)
    uniq, first = np.unique(ids, return_index=True)
    if uniq.size != ids.size:
        dup = ids[np.setdiff1d(np.arange(ids.size), first)[0]]
        raise ValueError(f"`{role}s` must list each id once; got {dup!r} twice.")
    order = np.argsort(ids, kind="stable")
    pos = np.searchsorted(ids[order], values)
    pos = np.minimum(pos, ids.size - 1)
    ok = ids[order][pos] == values
    if not ok.all():
        j = int(np.argmax(~ok))
        raise LogFrameError(f"column {name!r} (`{role}`) holds {values[j]!r}, which is not "
                            f"in `{role}s` ({ids.size} ids)", column=name, row=j)
    return order[pos].astype(np.int64), ids


def _context(frame, context, used: set, max_categories: int):
    """``(matrix (n, d) float64, column names)`` of the context columns."""
    columns = list(frame.columns)
    if context is None:
        names = [c for c in columns if c not in used and not _is_index(c)]
    elif isinstance(context, str):
        names = [c for c in columns if str(c).startswith(context) and c not in used]
        if not names:
            raise LogFrameError(f"no column starts with {context!r} (the prefix given by "
                                f"`context=`); the table has {_shown_columns(columns)}.",
                                column=context)
    else:
        if isinstance(context, (bytes, dict)) or not hasattr(context, "__iter__"):
            raise TypeError("`context` must be a list of column names or a str prefix; got "
                            f"{type(context).__name__}.")
        names = list(context)
        for c in names:
            if c not in columns:
                raise LogFrameError(f"no column {c!r} (asked for by `context=`); the table "
                                    f"has {_shown_columns(columns)}.{_nearest(c, columns)}",
                                    column=str(c))
            if c in used:
                raise LogFrameError(f"column {c!r} cannot be both context and another role",
                                    column=str(c))
    n = len(frame)
    blocks, out_names = [], []
    for c in names:
        col = frame[c]
        if col.dtype.kind in "biuf":
            x = col.to_numpy(dtype=np.float64)
            bad = np.flatnonzero(~np.isfinite(x))
            if bad.size:
                j = int(bad[0])
                what = "no value" if math.isnan(x[j]) else repr(float(x[j]))
                raise LogFrameError(f"context column {c!r} must hold finite numbers or text; "
                                    f"got {what}", column=str(c), row=j)
            blocks.append(x[:, None])
            out_names.append(str(c))
            continue
        values = _ids(frame, c, "context")
        uniq, inv = np.unique(values, return_inverse=True)
        if uniq.size > max_categories:
            raise LogFrameError(f"context column {c!r} holds text with {uniq.size:,} distinct "
                                f"values (at most {max_categories:,} are one-hot encoded); "
                                "leave it out with `context=` or encode it yourself",
                                column=str(c))
        # pandas.get_dummies(drop_first=True): sorted categories, the first dropped
        inv = inv.ravel()
        onehot = np.zeros((n, max(uniq.size - 1, 0)))
        rows = np.flatnonzero(inv > 0)
        onehot[rows, inv[rows] - 1] = 1.0
        blocks.append(onehot)
        out_names += [f"{c}={u}" for u in uniq[1:].tolist()]
    matrix = np.concatenate(blocks, axis=1) if blocks else np.zeros((n, 0))
    return matrix, out_names


def _ticks(frame, name: str) -> np.ndarray:
    """Integer times as they are; dates (text) as microseconds since 1970 UTC."""
    col = frame[name]
    if col.dtype.kind in "iu":
        return col.to_numpy(dtype=np.int64)
    if col.dtype.kind == "f":
        return _ids(frame, name, "tick").astype(np.int64)
    raw = col.astype(str)
    ticks, bad = microseconds(raw)
    if bad is not None:
        raise LogFrameError(f"column {name!r} (`tick`) must hold integers or dates "
                            f"(ISO 8601) between the years 1678 and 2261; got "
                            f"{raw.iloc[bad]!r}", column=name, row=bad)
    return ticks


def microseconds(texts) -> tuple[np.ndarray | None, int | None]:
    """ISO 8601 dates (a pandas Series of str) as microseconds since 1970 UTC: ``(ticks,
    None)``, or ``(None, j)`` with ``j`` the first entry that is no date pandas can hold
    (nanoseconds since 1970 in int64: the years 1678-2261)."""
    import pandas as pd

    def parse(x):
        return pd.to_datetime(x, utc=True, format="ISO8601")

    def ticks(x):  # (microseconds since 1970, bad: no date or outside [1678, 2261])
        us = parse(x).dt.tz_localize(None).astype("datetime64[us]").to_numpy()
        t = us.astype(np.int64)
        return t, np.isnat(us) | (t < _FIRST_US) | (t > _LAST_US)

    try:
        t, bad = ticks(texts)
        if not bad.any():
            return t, None
        return None, int(np.argmax(bad))
    except (ValueError, TypeError, OverflowError):  # OutOfBoundsDatetime is a ValueError
        pass
    for j, x in enumerate(texts.tolist()):  # the slow search, only to name the entry
        try:
            if ticks(pd.Series([x]))[1][0]:
                return None, j
        except (ValueError, TypeError, OverflowError):
            return None, j
    return None, 0


#: Dates recloop reads: the years 1678 to 2261 (what pandas holds in nanoseconds), in
#: microseconds since 1970.
_FIRST_US, _LAST_US = -9_214_560_000_000_000, 9_214_646_399_999_999


def _jsonable(ids: np.ndarray) -> list:
    return [int(v) for v in ids] if ids.dtype.kind in "iu" else [str(v) for v in ids]


def from_frame(cls, frame, *, action=None, reward=None, pscore=None, context=None,
               position=None, tick=None, actions=None, first_position="auto",
               len_list=None, max_categories=MAX_CATEGORIES, metadata=None):
    """The body of :meth:`BanditLog.from_frame` (``cls`` the class)."""
    if not (hasattr(frame, "columns") and hasattr(frame, "to_numpy")
            and hasattr(frame, "__getitem__")):
        raise TypeError(f"`frame` must be a pandas DataFrame; got {type(frame).__name__}.")
    cols = [str(c) for c in frame.columns]
    seen = set()
    for c in cols:
        if c in seen:
            raise LogFrameError(f"column {c!r} appears twice; every column name must be "
                                "unique (which one holds the data?)", column=c)
        seen.add(c)
    if len(frame) == 0:
        raise LogFrameError("the table has no rows; a log needs at least one record")
    if isinstance(max_categories, bool) or not isinstance(max_categories, int) or (
            max_categories < 1):
        raise TypeError(f"`max_categories` must be an int >= 1; got {max_categories!r}.")
    roles = {
        "action": _column(frame, "action", action, required=True),
        "reward": _column(frame, "reward", reward, required=True),
        "pscore": _column(frame, "pscore", pscore, required=True),
        "position": _column(frame, "position", position, required=False),
        "tick": _column(frame, "tick", tick, required=False),
    }
    taken = {}
    for role, name in roles.items():
        if name is not None and name in taken:
            raise LogFrameError(f"column {name!r} cannot be both `{taken[name]}` and "
                                f"`{role}`", column=name)
        if name is not None:
            taken[name] = role
    r = _numbers(frame, roles["reward"], "reward")
    p = _numbers(frame, roles["pscore"], "pscore")
    bad = np.flatnonzero(~((p > 0) & (p <= 1)))
    if bad.size:
        j = int(bad[0])
        raise LogFrameError(f"column {roles['pscore']!r} (`pscore`, the logging policy's "
                            f"probability of the logged action) must be in (0, 1]; got "
                            f"{float(p[j])!r}", column=roles["pscore"], row=j)
    codes, ids = _encode(_ids(frame, roles["action"], "action"), actions, roles["action"],
                         "action")
    K = int(ids.size)
    meta = {"columns": {k: v for k, v in roles.items() if v is not None},
            "actions": _jsonable(ids)}
    pos = None
    if roles["position"] is not None:
        name = roles["position"]
        raw = _ids(frame, name, "position")
        if raw.dtype.kind not in "iu":
            bad = [i for i, v in enumerate(raw) if not re.fullmatch(r"-?\d{1,18}", str(v))]
            if bad:
                j = bad[0]
                raise LogFrameError(f"column {name!r} (`position`) must hold integers (the "
                                    f"slot of the list); got {str(raw[j])!r}", column=name,
                                    row=j)
            raw = raw.astype(np.int64)
        if first_position == "auto":
            first = 1 if raw.min() >= 1 else 0
        elif first_position in (0, 1) and not isinstance(first_position, bool):
            first = int(first_position)
        else:
            raise ValueError(f"`first_position` must be 0, 1 or 'auto'; got "
                             f"{first_position!r}.")
        limit = K if len_list is None else int(len_list)
        out = np.flatnonzero((raw < first) | (raw - first >= limit))
        if out.size:
            j = int(out[0])
            rule = (f"`len_list` = {limit}" if len_list is not None else
                    f"a list of distinct actions cannot have more slots than the "
                    f"{K} actions")
            raise LogFrameError(f"column {name!r} (`position`) must be in [{first}, "
                                f"{first + limit - 1}] ({rule}); got {int(raw[j])}",
                                column=name, row=j)
        pos = (raw - first).astype(np.int64)
        L = int(pos.max()) + 1 if len_list is None else int(len_list)
        meta["positions"] = list(range(first, first + L))
        if L == 1:
            pos = None
        len_list = L
    ticks = _ticks(frame, roles["tick"]) if roles["tick"] is not None else None
    ctx, names = _context(frame, context, set(taken), max_categories)
    meta["context_columns"] = names
    meta.update(dict(metadata or {}))
    return cls(context=ctx, action=codes, reward=r, pscore=p, n_actions=K, tick=ticks,
               position=pos, len_list=len_list, metadata=meta)
