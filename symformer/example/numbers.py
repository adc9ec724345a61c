"""Exact numbers from user text.

Every number a user writes is read as the exact rational it spells: TOML floats
arrive as their literal text (``tomllib``'s ``parse_float`` hook), so ``0.1`` is
``1/10`` and never the binary double ``0.1000000000000000055...``.
"""

from __future__ import annotations

import re

import sympy

from symformer.errors import InputError

#: Entries must lie within these magnitudes (or be 0): far beyond any worked example,
#: and well inside what ball arithmetic evaluates without losing every digit.
MAX_MAGNITUDE = sympy.Integer(10) ** 100

_DECIMAL = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_FRACTION = re.compile(r"^[+-]?\d+\s*/\s*[+-]?\d+$")


class DecimalText(str):
    """The literal text of a TOML float, kept so it can be read exactly."""


def parse_float_text(text: str) -> DecimalText:
    """``tomllib`` hook: keep a float's literal text instead of a binary double."""
    return DecimalText(text)


def exact_number(value: object, where: str) -> sympy.Rational:
    """Return ``value`` (a TOML integer, float text or string) as an exact rational.

    ``where`` names the place in the input (e.g. ``"layer 1, head 2, W_Q[0][1]"``)
    for the error message.

    >>> exact_number(DecimalText("0.1"), "x")
    1/10
    >>> exact_number("-3/4", "x")
    -3/4
    >>> exact_number("1e-6", "x")
    1/1000000
    """
    if isinstance(value, bool):
        raise InputError(f"{where}: expected a number, found the boolean {str(value).lower()}")
    if isinstance(value, int):
        return _in_range(sympy.Integer(value), value, where)
    if isinstance(value, str):
        text = value.strip().replace("_", "")
        if _DECIMAL.match(text) or _FRACTION.match(text):
            numerator, _, denominator = text.partition("/")
            if denominator and int(denominator) == 0:
                raise InputError(f"{where}: division by zero in {value!r}")
            number = sympy.Rational(numerator.strip()) / sympy.Rational(denominator.strip() or 1)
            return _in_range(number, value, where)
        if text.lower().lstrip("+-") in {"inf", "nan", "infinity"}:
            raise InputError(f"{where}: entries must be finite, found {value!r}")
        raise InputError(
            f"{where}: {value!r} is not a number (write an integer, a decimal such as "
            f"-1.3 or 1e-6, or a fraction such as \"1/4\")"
        )
    raise InputError(f"{where}: expected a number, found {type(value).__name__} {value!r}")


def _in_range(number: sympy.Rational, text: object, where: str) -> sympy.Rational:
    if number != 0 and not 1 / MAX_MAGNITUDE <= abs(number) <= MAX_MAGNITUDE:
        raise InputError(f"{where}: {text} is out of range: non-zero entries must lie "
                         f"between 1e-100 and 1e100 in magnitude")
    return number
