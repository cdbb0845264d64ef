"""Writing plain data as TOML (the resolved ``scenario.toml`` of a run directory, ``--set``
values, the defaults shown in ``scenarios/README.md``); reading is ``tomllib``'s."""

from __future__ import annotations

import json
import math
import re

__all__ = ["dumps_toml", "toml_key", "toml_string", "toml_value"]


def toml_key(key: str) -> str:
    """A TOML key: bare when it can be, else a quoted string."""
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else toml_string(key)


def toml_string(text: str) -> str:
    """A TOML basic string of ``text``."""
    # JSON's escapes are TOML's, except that TOML wants no surrogate pairs (hence
    # ensure_ascii=False) and no raw DEL
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def toml_value(v) -> str:
    """The TOML text of a scalar, a list or an inline table."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return toml_string(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{toml_key(k)} = {toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def _is_tables(v) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)


def dumps_toml(data: dict, *, inline=("sweep",)) -> str:
    """Write plain data (tables, arrays of tables, scalars, lists) as TOML."""
    lines: list[str] = []

    def table(d: dict, path: list[str]) -> None:
        for k, v in d.items():
            if (isinstance(v, dict) and k not in inline) or _is_tables(v):
                continue
            lines.append(f"{toml_key(k)} = {toml_value(v)}")
        for k, v in d.items():
            sub = path + [toml_key(k)]
            if isinstance(v, dict) and k not in inline:
                lines.extend(["", f"[{'.'.join(sub)}]"])
                table(v, sub)
            elif _is_tables(v):
                for item in v:
                    lines.extend(["", f"[[{'.'.join(sub)}]]"])
                    table(item, sub)

    table(data, [])
    return "\n".join(lines).strip() + "\n"

