"""Saving and loading logs as ``.npz`` without pickle, and the array checks of the log
containers: what :mod:`simulator.logs` and :mod:`simulator._slate_log` share."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np

__all__ = ["LogFormatError"]

_FORMAT_VERSION = 1


class LogFormatError(ValueError):
    """A file is not a recloop log of the expected kind."""


def _frozen(a, dtype, name: str, ndim: int) -> np.ndarray:
    arr = np.array(a, dtype=dtype, copy=True)
    if arr.ndim != ndim:
        raise ValueError(f"`{name}` must be {ndim}-dimensional; got shape {arr.shape}.")
    arr.setflags(write=False)
    return arr


def _check_int_array(a, name: str) -> None:
    arr = np.asarray(a)
    if arr.size and not (np.issubdtype(arr.dtype, np.integer)
                         or np.issubdtype(arr.dtype, np.bool_)):
        if not np.issubdtype(arr.dtype, np.floating) or not np.all(np.mod(arr, 1) == 0):
            raise TypeError(f"`{name}` must hold integers; got dtype {arr.dtype}.")


def _metadata(meta) -> Mapping[str, Any]:
    if meta is None:
        meta = {}
    if not isinstance(meta, Mapping):
        raise TypeError(f"`metadata` must be a mapping; got {type(meta).__name__}.")
    try:
        json.dumps(dict(meta))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`metadata` must be JSON-serialisable; {exc}") from None
    return MappingProxyType(dict(meta))


def _atomic_savez(path, arrays: dict) -> Path:
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"`path` {str(path)!r} is an existing directory; give a file "
                                "name (a '.npz' suffix is added when missing).")
    if path.suffix != ".npz":
        path = path.with_name(path.name + ".npz")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **arrays)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _open_npz(path, kind: str):
    try:
        data = np.load(Path(path), allow_pickle=False)
    except (FileNotFoundError, IsADirectoryError):
        raise
    except Exception as exc:  # zipfile / format errors
        raise LogFormatError(f"{path}: not a readable .npz file ({exc}).") from None
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise LogFormatError(f"{path}: expected a .npz archive of a recloop {kind}; got a "
                             "single .npy array.")
    try:
        header = _read_header(data, path)
    except BaseException:
        data.close()
        raise
    if header.get("kind") != kind:
        data.close()
        raise LogFormatError(
            f"{path}: expected a recloop {kind}; got {header.get('kind', 'an unknown file')!r}."
        )
    return data, header


def _read_header(data, path) -> dict:
    if "__header__" not in data.files:
        return {}
    try:
        raw = data["__header__"]
    except ValueError as exc:  # an object array, refused without pickle
        raise LogFormatError(f"{path}: the header is not a plain array ({exc}).") from None
    if raw.shape != () or raw.dtype.kind != "U":
        raise LogFormatError(f"{path}: the header must be one JSON string; got an array of "
                             f"dtype {raw.dtype} and shape {raw.shape}.")
    try:
        header = json.loads(str(raw))
    except ValueError as exc:
        raise LogFormatError(f"{path}: the header is not valid JSON ({exc}).") from None
    if not isinstance(header, dict):
        raise LogFormatError(f"{path}: the header must be a JSON object; got "
                             f"{type(header).__name__}.")
    return header


def _read_arrays(data, path, required, optional) -> dict:
    """The arrays of a log file: all ``required`` present, nothing outside both lists, no
    object arrays; LogFormatError otherwise."""
    names = set(data.files) - {"__header__"}
    missing = [k for k in required if k not in names]
    if missing:
        raise LogFormatError(f"{path}: missing array(s) {', '.join(missing)}.")
    extra = sorted(names - set(required) - set(optional))
    if extra:
        raise LogFormatError(f"{path}: unexpected array(s) {', '.join(extra)}.")
    out = {}
    for k in sorted(names):
        try:
            out[k] = data[k]
        except ValueError as exc:  # object arrays need pickle, which is never allowed
            raise LogFormatError(f"{path}: array {k!r} cannot be read without pickle "
                                 f"({exc}).") from None
        if out[k].dtype.kind not in "biuf":
            raise LogFormatError(f"{path}: array {k!r} must be numeric; got dtype "
                                 f"{out[k].dtype}.")
    return out


def _header_int(header, key, path) -> int:
    v = header.get(key)
    if isinstance(v, bool) or not isinstance(v, int):
        raise LogFormatError(f"{path}: header field {key!r} must be an int; got {v!r}.")
    return v


def _header_metadata(header, path) -> dict:
    meta = header.get("metadata", {})
    if not isinstance(meta, dict):
        raise LogFormatError(f"{path}: header field 'metadata' must be an object; got "
                             f"{type(meta).__name__}.")
    return meta
