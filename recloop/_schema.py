"""The small type language of scenario values, and the parameter declarations built on it.

Each type describes itself ("an integer >= 1") and checks a value, returning ``None`` when
the value is fine or ``"expected ..., got ..."`` otherwise. A :class:`Param` is one key of a
scenario table: its type, default (:data:`REQUIRED` if none) and meaning. The scenario
loader validates against them and ``scenarios/README.md`` is generated from them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "REQUIRED", "Bool", "EstimatorList", "FilePath", "Float", "Int", "ListOf", "OneOf", "Param",
    "Reference",
    "Str", "Table", "fmt",
]


class _Required:
    def __repr__(self):
        return "REQUIRED"


#: Marks a parameter without a default.
REQUIRED = _Required()


def fmt(value) -> str:
    """How a received value is shown in an error message (type and value, shortened)."""
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


# --- the small type language of scenario values ------------------------------------------
# Each type can describe itself ("an integer >= 1") and check a value, returning None when
# the value is fine or "expected ..., got ..." otherwise.


@dataclass(frozen=True)
class Int:
    low: int | None = None
    high: int | None = None

    def describe(self) -> str:
        from recloop_base.validation import describe_range  # numpy: not at import time

        return "an integer" + describe_range(self.low, self.high)

    def check(self, value) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int):
            return f"expected {self.describe()}, got {fmt(value)}"
        if ((self.low is not None and value < self.low)
                or (self.high is not None and value > self.high)):
            return f"expected {self.describe()}, got {value}"
        return None


@dataclass(frozen=True)
class Float:
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def describe(self) -> str:
        from recloop_base.validation import describe_range

        return "a number" + describe_range(self.low, self.high, low_open=self.low_open,
                                           high_open=self.high_open)

    def check(self, value) -> str | None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"expected {self.describe()}, got {fmt(value)}"
        v = float(value)
        bad = not math.isfinite(v)
        if self.low is not None:
            bad |= v <= self.low if self.low_open else v < self.low
        if self.high is not None:
            bad |= v >= self.high if self.high_open else v > self.high
        return f"expected {self.describe()}, got {value!r}" if bad else None


@dataclass(frozen=True)
class Bool:
    def describe(self) -> str:
        return "true or false"

    def check(self, value) -> str | None:
        return None if isinstance(value, bool) else f"expected {self.describe()}, got {fmt(value)}"


@dataclass(frozen=True)
class Str:
    choices: tuple[str, ...] | None = None
    pattern: str | None = None
    pattern_text: str = ""

    def describe(self) -> str:
        if self.choices is not None:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        return self.pattern_text or "a string"

    def check(self, value) -> str | None:
        if not isinstance(value, str):
            return f"expected {self.describe()}, got {fmt(value)}"
        if self.choices is not None and value not in self.choices:
            import difflib

            close = difflib.get_close_matches(value, self.choices, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            return f"expected {self.describe()}{hint}, got {value!r}"
        if self.pattern is not None:
            if not re.fullmatch(self.pattern, value):
                return f"expected {self.describe()}, got {value!r}"
        return None


@dataclass(frozen=True)
class OneOf:
    options: tuple[Any, ...]

    def describe(self) -> str:
        return " or ".join(o.describe() for o in self.options)

    def check(self, value) -> str | None:
        if any(o.check(value) is None for o in self.options):
            return None
        return f"expected {self.describe()}, got {fmt(value)}"


@dataclass(frozen=True)
class ListOf:
    item: Any
    min_len: int = 1
    max_len: int | None = None
    unique: bool = False

    def describe(self) -> str:
        size = f"at least {self.min_len}" if self.min_len else "any number of"
        if self.max_len is not None:
            size = (f"exactly {self.min_len}" if self.min_len == self.max_len
                    else f"{self.min_len} to {self.max_len}")
        return f"a list of {size} ({self.item.describe()})"

    def check(self, value) -> str | None:
        if not isinstance(value, list):
            return f"expected {self.describe()}, got {fmt(value)}"
        if len(value) < self.min_len or (self.max_len is not None and len(value) > self.max_len):
            return f"expected {self.describe()}, got a list of {len(value)}"
        for j, v in enumerate(value):
            problem = self.item.check(v)
            if problem is not None:
                return f"[{j}]: {problem}"
        if self.unique:
            seen = [repr(v) for v in value]
            if len(set(seen)) != len(seen):
                return f"expected {self.describe()} without repeats, got {value!r}"
        return None


@dataclass(frozen=True)
class FilePath:
    """A path to an existing file, relative to the scenario file's folder (stored absolute)."""

    def describe(self) -> str:
        return "a path to an existing file (relative to the scenario file)"

    def check(self, value) -> str | None:
        if not isinstance(value, str) or not value or "\0" in value:
            return f"expected {self.describe()}, got {fmt(value)}"
        return None


@dataclass(frozen=True)
class Table:
    """A free-form table whose keys are validated elsewhere (e.g. world overrides)."""

    def describe(self) -> str:
        return "a table"

    def check(self, value) -> str | None:
        return None if isinstance(value, dict) else f"expected {self.describe()}, got {fmt(value)}"


@dataclass(frozen=True)
class Param:
    """One key of a scenario table: its type, default (``REQUIRED`` if none) and meaning."""

    name: str
    type: Any
    default: Any = REQUIRED
    doc: str = ""
    sweepable: bool = True

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


#: Names of scenarios, evaluations' results, estimators.
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"

#: ``package.module:attribute`` (the attribute may be dotted: ``module:Class.method``).
REFERENCE_PATTERN = r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*"


@dataclass(frozen=True)
class Reference:
    """An import path ``package.module:attribute`` naming a user's class or function."""

    def describe(self) -> str:
        return "an import path \"package.module:attribute\""

    def check(self, value) -> str | None:
        if not isinstance(value, str) or not re.fullmatch(REFERENCE_PATTERN, value):
            return (f"expected {self.describe()}, got "
                    f"{fmt(value) if not isinstance(value, str) else repr(value)}")
        return None


@dataclass(frozen=True)
class EstimatorList:
    """An evaluation's ``estimators``: names of estimator kinds (built-in or plugin), import
    paths, or tables ``{name, factory, params}``; each entry is resolved and tried by the
    loader (which knows the registry)."""

    family: str = "static"
    min_len: int = 1

    def describe(self) -> str:
        return ("a list of estimators: kind names, import paths \"package.module:attribute\" "
                "or tables {name = ..., factory = ..., params = {...}}")

    def check(self, value) -> str | None:
        if not isinstance(value, list):
            return f"expected {self.describe()}, got {fmt(value)}"
        if len(value) < self.min_len:
            return f"expected {self.describe()} (at least {self.min_len}), got an empty list"
        for j, v in enumerate(value):
            if isinstance(v, str):
                continue
            if not isinstance(v, dict):
                return f"[{j}]: expected a name, an import path or a table, got {fmt(v)}"
        return None
