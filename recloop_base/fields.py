"""Configuration fields whose meaning and constraints are data, not prose.

A config dataclass declares each field with :func:`spec`: its default, a one-paragraph
``doc`` and, for numbers, its range. From that single declaration

* :func:`check_fields` validates an instance (in ``__post_init__``), raising the structured
  errors of :mod:`recloop_base.validation` (``ArgumentError.name``, ``.rule``, ``.got``);
* :func:`documented` writes the numpydoc ``Parameters`` section of the class docstring;
* a harness (recloop's scenario loader) derives its schema and its reference tables from
  :func:`field_specs` -- no parsing of annotations, docstrings or error messages.

Cross-field rules (``n_universal <= n_items``) stay in the class's ``__post_init__`` and
raise the same structured errors.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from dataclasses import MISSING, dataclass

from recloop_base.validation import check_choice, check_float, check_int, describe_range

__all__ = ["FieldSpec", "check_fields", "documented", "field_specs", "spec"]

_KEY = "recloop"


@dataclass(frozen=True)
class FieldSpec:
    """What a field declares: its name, Python type (``typing`` form), default (``MISSING``
    when required), doc and constraints (``low``/``high`` bounds, open or not; ``choices``
    for strings; ``optional``: ``None`` allowed; ``settable``: whether a scenario file may
    set it)."""

    name: str
    type: object
    default: object
    doc: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple | None = None
    optional: bool = False
    settable: bool = True

    @property
    def base(self):
        """The type without ``None``: ``int`` for ``int | None``."""
        args = [a for a in typing.get_args(self.type) if a is not type(None)]
        return args[0] if self.optional and len(args) == 1 else self.type


def spec(default=MISSING, *, doc: str, low=None, high=None, low_open: bool = False,
         high_open: bool = False, choices=None, settable: bool = True):
    """A dataclass field with its documentation and constraints as metadata."""
    meta = {_KEY: dict(doc=" ".join(doc.split()), low=low, high=high, low_open=low_open,
                       high_open=high_open,
                       choices=tuple(choices) if choices is not None else None,
                       settable=settable)}
    return dataclasses.field(default=default, metadata=meta)


@functools.cache
def field_specs(cls) -> tuple[FieldSpec, ...]:
    """The :class:`FieldSpec` of every field of ``cls`` declared with :func:`spec` (computed
    once per class: ``typing.get_type_hints`` compiles the annotations' text each time, about
    2 ms a config)."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        meta = f.metadata.get(_KEY)
        if meta is None:
            continue
        t = hints[f.name]
        optional = type(None) in typing.get_args(t)
        out.append(FieldSpec(f.name, t, f.default, optional=optional, **meta))
    return tuple(out)


def check_fields(obj) -> None:
    """Validate every declared int, float and str field of ``obj`` against its spec and
    store the converted value (``1`` -> ``1.0`` for a float field)."""
    for s in field_specs(type(obj)):
        value = getattr(obj, s.name)
        if value is None and s.optional:
            continue
        base = s.base
        if base is int:
            value = check_int(value, s.name, low=s.low, high=s.high)
        elif base is float:
            value = check_float(value, s.name, low=s.low, high=s.high, low_open=s.low_open,
                                high_open=s.high_open)
        elif base is str and s.choices is not None:
            value = check_choice(value, s.name, s.choices)
        else:
            continue
        object.__setattr__(obj, s.name, value)


def _type_text(s: FieldSpec) -> str:
    base = s.base
    if s.choices is not None:
        text = "{" + ", ".join(repr(c) for c in s.choices) + "}"
    else:
        text = getattr(base, "__name__", None) or str(base).replace("typing.", "")
        if typing.get_origin(base) is tuple:
            text = str(base).replace("typing.", "")
    if s.optional:
        text += " or None"
    if s.default is not MISSING:
        text += f", default {s.default!r}"
    return text


def _range_text(s: FieldSpec) -> str:
    text = describe_range(s.low, s.high, low_open=s.low_open, high_open=s.high_open)
    return text.replace(" in ", " In ", 1) + "." if text else ""


def documented(cls):
    """Class decorator: append the numpydoc ``Parameters`` section of the declared fields
    to the class docstring (before a ``Raises`` section if there is one)."""
    import textwrap

    lines = ["Parameters", "----------"]
    for s in field_specs(cls):
        lines.append(f"{s.name} : {_type_text(s)}")
        lines += textwrap.wrap(f"{s.doc}{_range_text(s)}", 88, initial_indent="    ",
                               subsequent_indent="    ")
    section = "\n".join("    " + line if line else "" for line in lines)
    doc = cls.__doc__ or ""
    marker = "\n    Raises\n"
    if marker in doc:
        head, tail = doc.split(marker, 1)
        cls.__doc__ = f"{head.rstrip()}\n\n{section}\n{marker}{tail}"
    else:
        cls.__doc__ = f"{doc.rstrip()}\n\n{section}\n"
    return cls
