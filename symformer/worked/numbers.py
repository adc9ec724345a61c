"""Exact numbers as worked lines print them: integers, short decimals, fractions."""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

from symformer.lazy import sympy

if TYPE_CHECKING:
    from symformer.engine.graph import Stage

#: Exact decimals longer than this (digits and point) print as fractions.
MAX_DECIMAL = 8


def terminating(value: Fraction) -> str | None:
    """The exact decimal of a fraction whose denominator is 2^a 5^b, else None."""
    q, twos, fives = value.denominator, 0, 0
    while q % 2 == 0:
        q, twos = q // 2, twos + 1
    while q % 5 == 0:
        q, fives = q // 5, fives + 1
    if q != 1:
        return None
    places = max(twos, fives)
    scaled = abs(value.numerator) * 10 ** places // value.denominator
    digits = str(scaled).rjust(places + 1, "0")
    sign = "-" if value < 0 else ""
    return sign + (digits if places == 0 else f"{digits[:-places]}.{digits[-places:]}")


def places(text: str) -> int:
    """The number of decimals a printed decimal shows."""
    return len(text.split(".")[1]) if "." in text else 0


def constant_parts(value: sympy.Rational) -> tuple[str, str | None]:
    """An exact rational as (numerator text, denominator text or None): an integer, a
    short terminating decimal (``0.25``, ``0.000001``), or a fraction ``p/q``."""
    if value.q == 1:
        return str(value.p), None
    text = terminating(Fraction(int(value.p), int(value.q)))
    if text is not None and len(text.lstrip("-")) <= MAX_DECIMAL:
        return text, None
    return str(value.p), str(value.q)


def integer_values(stage: Stage, decimals: int) -> list[list[str]] | None:
    """The stage's entries as integers (``4``, not ``4.00``) when every one is certified
    an exact integer, else None.

    Two certificates per entry: its certified rounding is an integer, and the exact
    forward pass finds the exact value a rational with denominator 1 (so the rounding
    did not hide a fraction).  The cheap first test rules out most stages.
    """
    rounded = stage.rounded(decimals=decimals)
    if any(r is None or r.value().denominator != 1 for row in rounded for r in row):
        return None
    g = stage.derivation
    rows, cols = stage.shape
    for i in range(rows):
        for j in range(cols):
            value = g.exact_rational(stage.name, i, j)
            if value is None or value.denominator != 1:
                return None
    return [[str(r.value().numerator) for r in row] for row in rounded]
