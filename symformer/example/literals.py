"""Exact numbers from user text.

Every number a user writes is read as the exact rational it spells: TOML floats
arrive as their literal text (``tomllib``'s ``parse_float`` hook), so ``0.1`` is
``1/10`` and never the binary double ``0.1000000000000000055...``.

The limits below are checked on the text, before any number is built, so that no
literal (``"1e99999999"``, a fraction of 5,000 digits) costs more than reading it:

* a number is at most :data:`MAX_LITERAL_LENGTH` characters long;
* a decimal exponent lies within +-:data:`MAX_EXPONENT`;
* digits are ASCII ``0``-``9`` (``"٣"``, ``"𝟙"`` and ``"1e1_0"`` are refused, although
  Python's ``int`` and ``Decimal`` accept them; underscores are only accepted where
  TOML itself allows them, between the digits of a bare TOML number);
* non-zero entries lie between 1e-100 and 1e100 in magnitude.

A string may also be a small expression (``"3/2^4"``, ``"log(2)"``, ``"sqrt(2)/2"``), read
by the grammar of :mod:`symformer.example.expression` (never ``eval`` or ``sympify``)
under the same limits; matrix and vector entries may be irrational
(:func:`exact_value`), the other numbers must come out rational.
"""

from __future__ import annotations

import re

from flint import fmpq

from symformer.errors import InputError
from symformer.example.exact import ExactNumber
from symformer.example.expression import Constant, ExpressionError, parse
from symformer.lazy import sympy

#: Entries must lie within these magnitudes (or be 0): far beyond any worked example,
#: and well inside what ball arithmetic evaluates without losing every digit.
MAX_MAGNITUDE = 10**100
#: The longest number literal accepted, in characters.
MAX_LITERAL_LENGTH = 1000
#: The largest decimal exponent accepted in a literal (``1e1000``), in magnitude.
MAX_EXPONENT = 1000

_DECIMAL = re.compile(r"(?P<sign>[+-]?)(?P<int>[0-9]*)(?:\.(?P<frac>[0-9]*))?"
                      r"(?:[eE](?P<exp>[+-]?[0-9]+))?", re.ASCII)
_FRACTION = re.compile(r"(?P<num>[+-]?[0-9]+)[ \t]*/[ \t]*"
                       r"(?:(?P<den>[+-]?[0-9]+)|2\^(?P<k>[0-9]{1,4}))", re.ASCII)


class DecimalText(str):
    """The literal text of a TOML float, kept so it can be read exactly."""


def parse_float_text(text: str) -> DecimalText:
    """``tomllib`` hook: keep a float's literal text instead of a binary double."""
    return DecimalText(text)


def exact_number(value: object, where: str) -> sympy.Rational:
    """Return ``value`` (a TOML integer, float text or string) as an exact SymPy rational.

    ``where`` names the place in the input for the error message
    (:func:`exact_rational`, which reads it).

    >>> exact_number(DecimalText("0.1"), "x")
    1/10
    """
    value = exact_rational(value, where)
    return sympy.Rational(int(value.p), int(value.q))


def exact_scalar(value: object, where: str) -> ExactNumber:
    """``value`` as an exact number of the example (eps, a scale): :func:`exact_rational`'s
    value, whose SymPy form is built only when needed."""
    return ExactNumber(exact_rational(value, where))


def exact_value(value: object, where: str) -> fmpq | Constant:
    """:func:`exact_rational`, also taking irrational expressions (``"log(2)"``): a
    matrix or vector entry of the example.

    >>> exact_value("sqrt(2)/2", "x"), exact_value("1/2^3", "x")
    (Constant('sqrt(2)/2'), 1/8)
    """
    return _exact(value, where, irrational=True)


def exact_rational(value: object, where: str) -> fmpq:
    """Return ``value`` (a TOML integer, float text or string) as an exact rational.

    ``where`` names the place in the input (e.g. ``"layer 1, head 2, W_Q[0][1]"``)
    for the error message.

    >>> exact_rational(DecimalText("0.1"), "x")
    1/10
    >>> exact_rational("-3/4", "x")
    -3/4
    >>> exact_rational("1e-6", "x")
    1/1000000
    >>> exact_rational("-3/2^4", "x")
    -3/16
    """
    return _exact(value, where, irrational=False)


def _exact(value: object, where: str, irrational: bool) -> fmpq | Constant:
    """The exact number ``value`` spells; a :class:`Constant` only when ``irrational``."""
    if isinstance(value, bool):
        raise InputError(f"{where}: expected a number, found the boolean {str(value).lower()}")
    if isinstance(value, int):
        if abs(value).bit_length() > 400:  # beyond 1e100 whatever its digits
            raise InputError(f"{where}: {shorten(str(value))} is out of range: "
                             f"{_RANGE}")
        return _in_range(fmpq(value), str(value), where)
    if not isinstance(value, str):
        raise InputError(f"{where}: expected a number, found {type(value).__name__} "
                         f"{shorten(repr(value))}")
    if len(value) > MAX_LITERAL_LENGTH:
        raise InputError(f"{where}: the number {shorten(value)} has {len(value):,} "
                         f"characters, more than the limit of {MAX_LITERAL_LENGTH:,}")
    text = value.strip()
    if isinstance(value, DecimalText):  # TOML allows 1_000.5: underscores between digits
        text = text.replace("_", "")
    number = _decimal(text, value, where)
    if number is None:
        number = _fraction(text, value, where)
    if number is None:
        if text.lower().lstrip("+-") in {"inf", "nan", "infinity"}:
            raise InputError(f"{where}: entries must be finite, found {value!r}")
        if isinstance(value, DecimalText):
            raise InputError(f"{where}: {shorten(repr(value))} is not a number")
        try:
            number = parse(text)
        except ExpressionError as error:
            raise InputError(
                f"{where}: {shorten(repr(value))} is not a number ({error}; write an "
                f"integer, a decimal such as -1.3 or 1e-6, a fraction such as \"1/4\" or "
                f"\"3/2^10\", or "
                f"an expression such as \"log(2)\" or \"sqrt(2)/2\" with ASCII digits)"
            ) from None
        if isinstance(number, Constant) and not irrational:
            raise InputError(f"{where}: {shorten(repr(value))} is not known to be "
                             f"rational; this number must be written as a rational number "
                             f"(an integer, a decimal or a fraction)")
        return number
    return _in_range(number, value, where)


def _decimal(text: str, value: str, where: str) -> fmpq | None:
    """A decimal literal (``-1.3``, ``1e-6``, ``.5``) as a rational, or None if it is not one."""
    match = _DECIMAL.fullmatch(text)
    if not match or not (match["int"] or match["frac"]):
        return None
    exponent = int(match["exp"] or 0)  # at most MAX_LITERAL_LENGTH digits: cheap
    if abs(exponent) > MAX_EXPONENT:
        raise InputError(f"{where}: the exponent of {shorten(value)} is out of range: "
                         f"exponents must lie between -{MAX_EXPONENT} and {MAX_EXPONENT}")
    frac = match["frac"] or ""
    digits = int(match["int"] + frac or "0")
    if match["sign"] == "-":
        digits = -digits
    shift = exponent - len(frac)
    return fmpq(digits * 10**shift) if shift >= 0 else fmpq(digits, 10**-shift)


def _fraction(text: str, value: str, where: str) -> fmpq | None:
    """A fraction of two integers (``"-3/4"``), or None if ``text`` is not one."""
    match = _FRACTION.fullmatch(text)
    if not match:
        return None
    if match["k"] is not None:  # "p/2^k": a dyadic weight read from a model, exactly
        k = int(match["k"])
        if k > MAX_EXPONENT * 4:  # 2^4000 > 10^1000: as far as a decimal exponent goes
            raise InputError(f"{where}: the power of two in {shorten(value)} is out of "
                             f"range: k must be at most {MAX_EXPONENT * 4}")
        return fmpq(int(match["num"]), 2**k)
    numerator, denominator = int(match["num"]), int(match["den"])
    if denominator == 0:
        raise InputError(f"{where}: division by zero in {shorten(repr(value))}")
    return fmpq(numerator, denominator)


_RANGE = "non-zero entries must lie between 1e-100 and 1e100 in magnitude"


def _in_range(number: fmpq, text: object, where: str) -> fmpq:
    if number != 0 and not fmpq(1, MAX_MAGNITUDE) <= abs(number) <= MAX_MAGNITUDE:
        raise InputError(f"{where}: {shorten(str(text))} is out of range: {_RANGE}")
    return number


def shorten(text: str, keep: int = 20) -> str:
    """``text`` itself, or its start and end with the number of characters left out."""
    if len(text) <= 2 * keep:
        return text
    return f"{text[:keep]}...({len(text) - 2 * keep:,} more characters)...{text[-keep:]}"
