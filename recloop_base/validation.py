"""Argument validation shared by every package: one checker per kind of argument.

Modelled on Hypothesis's ``internal/validation.py`` and scikit-learn's ``check_scalar``. Each
checker returns the converted value or raises an :class:`ArgumentError` subclass --
:class:`ArgumentTypeError` (a ``TypeError``) or :class:`ArgumentValueError` (a
``ValueError``) -- whose message follows the house style::

    `k` must be an int >= 1; got 0.

and whose attributes ``name``, ``rule`` and ``got`` carry the same facts as data, so that
callers (the scenario loader) can re-word them without parsing text.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = [
    "DEFAULT_SEED", "ArgumentError", "ArgumentTypeError", "ArgumentValueError", "as_generator",
    "as_seed_sequence", "check_callable", "check_choice", "check_float", "check_int",
    "check_level", "describe_range",
]


#: The seed that ``rng=None`` stands for, everywhere in recloop: every estimator, selector,
#: agent, simulator and loader called without ``rng`` gives the same bytes on the same input.
#: Fresh entropy only when asked for, by passing ``numpy.random.default_rng()`` or
#: ``numpy.random.SeedSequence()``. (Gymnasium environments keep Gymnasium's own contract:
#: ``reset(seed=None)`` draws fresh entropy on the first reset.)
DEFAULT_SEED = 0


class ArgumentError(Exception):
    """An argument broke its rule: ``name`` (the argument or key path), ``rule`` (what it
    must be, e.g. ``"an int >= 1"``) and ``got`` (what was received, as text)."""

    def __init__(self, name: str, rule: str, got: str):
        self.name, self.rule, self.got = name, rule, got
        super().__init__(f"`{name}` must be {rule}; got {got}.")


class ArgumentTypeError(ArgumentError, TypeError):
    """The argument has the wrong type."""


class ArgumentValueError(ArgumentError, ValueError):
    """The argument has the right type and a wrong value."""


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def describe_range(low=None, high=None, *, low_open=False, high_open=False) -> str:
    """``" >= 1"``, ``" in (0, 1]"``, ... (empty when unbounded)."""
    if low is not None and high is not None:
        return f" in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
    if low is not None:
        return f" {'>' if low_open else '>='} {low}"
    if high is not None:
        return f" {'<' if high_open else '<='} {high}"
    return ""


def check_int(value, name: str, *, low=None, high=None) -> int:
    """``value`` as an ``int`` in ``[low, high]`` (bools are not ints here)."""
    rule = "an int" + describe_range(low, high)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ArgumentTypeError(name, rule, f"{type(value).__name__} {_shown(value)}")
    value = int(value)
    if (low is not None and value < low) or (high is not None and value > high):
        raise ArgumentValueError(name, rule, str(value))
    return value


def check_float(value, name: str, *, low=None, high=None, low_open=False, high_open=False,
                finite=True) -> float:
    """``value`` as a ``float`` within the given bounds (ints accepted, bools not)."""
    rule = ("a finite number" if finite else "a number") + describe_range(
        low, high, low_open=low_open, high_open=high_open)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ArgumentTypeError(name, rule, f"{type(value).__name__} {_shown(value)}")
    v = float(value)
    bad = math.isnan(v) or (finite and not math.isfinite(v))
    if low is not None:
        bad |= v <= low if low_open else v < low
    if high is not None:
        bad |= v >= high if high_open else v > high
    if bad:
        raise ArgumentValueError(name, rule, repr(v))
    return v


def check_level(value, name: str = "ci") -> float:
    """A confidence level in (0, 1)."""
    return check_float(value, name, low=0.0, high=1.0, low_open=True, high_open=True)


def check_choice(value, name: str, choices) -> str:
    """One of ``choices`` (strings)."""
    choices = tuple(choices)
    if not isinstance(value, str) or value not in choices:
        raise (ArgumentValueError if isinstance(value, str) else ArgumentTypeError)(
            name, "one of " + ", ".join(map(repr, choices)), _shown(value))
    return value


def check_callable(value, name: str, what: str = "callable"):
    """A callable (``what`` says which signature is expected)."""
    if not callable(value):
        raise ArgumentTypeError(name, what, type(value).__name__)
    return value


def as_generator(rng, name: str = "rng") -> np.random.Generator:
    """``rng`` (``None``, int, ``SeedSequence`` or ``Generator``) as a Generator, converted once.

    ``None`` means :data:`DEFAULT_SEED` (0), not fresh entropy: the same call gives the same
    bytes every time. Fresh entropy only when asked for: pass ``numpy.random.default_rng()``
    (or ``numpy.random.SeedSequence()``). A Generator is returned as is (the caller's stream
    goes on); legacy ``RandomState`` is refused, since it would mix numpy's two random APIs.

    Examples
    --------
    >>> as_generator(None).random() == as_generator(None).random()
    True
    """
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, np.random.RandomState):
        raise ArgumentTypeError(name, "a numpy Generator, SeedSequence, int or None "
                                "(legacy RandomState is not accepted)", "RandomState")
    if rng is None:
        rng = DEFAULT_SEED
    try:
        return np.random.default_rng(rng)
    except (TypeError, ValueError):
        raise ArgumentTypeError(name, "a numpy Generator, SeedSequence, int >= 0 or None",
                                f"{type(rng).__name__} {_shown(rng)}") from None


def as_seed_sequence(rng, name: str = "rng") -> np.random.SeedSequence:
    """The root ``SeedSequence`` of ``rng``: itself, a new one from an int (``None``:
    :data:`DEFAULT_SEED`, as :func:`as_generator`), or one seeded by a draw of a Generator."""
    if isinstance(rng, np.random.SeedSequence):
        return rng
    if isinstance(rng, np.random.Generator):
        return np.random.SeedSequence(int(rng.integers(0, 2**63)))
    if rng is None or (isinstance(rng, numbers.Integral) and not isinstance(rng, bool)
                       and rng >= 0):
        return np.random.SeedSequence(DEFAULT_SEED if rng is None else int(rng))
    raise ArgumentTypeError(name, "None, an int >= 0, a SeedSequence or a Generator",
                            f"{type(rng).__name__} {_shown(rng)}")
