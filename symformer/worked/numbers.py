"""Exact numbers as worked lines print them: integers, short decimals, fractions."""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

import flint

from symformer.lazy import sympy

if TYPE_CHECKING:
    from symformer.engine.graph import Stage

#: Exact decimals longer than this (digits and point) print as fractions.
MAX_DECIMAL = 8
#: An entry whose exact value is a decimal of at most this many places more than a
#: table's prints in full (5/16 = 0.3125 at 3 decimals, not 0.312): its worked lines
#: then compute with the exact value and land on their own table.
SHORT_EXTRA = 2
#: Nonzero values below this print in scientific notation (2.859 × 10⁻⁸).
SCIENTIFIC_BELOW = Fraction(1, 10 ** 4)


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


def scientific(text: str) -> tuple[str, int] | None:
    """A printed decimal whose value is nonzero and below :data:`SCIENTIFIC_BELOW` in
    magnitude as (mantissa, exponent): ``-0.00000002859`` is ``("-2.859", -8)``; None
    for any other text (``0.0001``, ``0``, ``-inf``).  The mantissa keeps exactly the
    digits printed, so every digit stays the certified rounding's."""
    body = text.lstrip("-")
    if not body.startswith("0.") or not body[2:].isdigit():
        return None
    fraction = body[2:]
    digits = fraction.lstrip("0")
    if not digits or Fraction(text).__abs__() >= SCIENTIFIC_BELOW:
        return None
    exponent = -(len(fraction) - len(digits) + 1)
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return ("-" if text.startswith("-") else "") + mantissa, exponent


def latex_decimal(text: str) -> str:
    """A printed decimal as LaTeX: in scientific notation below
    :data:`SCIENTIFIC_BELOW` (``-2.859 \\times 10^{-8}``), else as printed."""
    small = scientific(text)
    if small is None:
        return text
    mantissa, exponent = small
    if mantissa.lstrip("-") == "1":  # 0.000001: 10^{-6}
        return f"{mantissa[:-1]}10^{{{exponent}}}"
    return rf"{mantissa} \times 10^{{{exponent}}}"


def short_exact(stage: Stage, decimals: int, values: list[list[str]]) -> list[list[str]]:
    """``values`` (the certified roundings at ``decimals``) with every entry whose exact
    value is a decimal of at most ``decimals + SHORT_EXTRA`` places (and more than
    ``decimals``) printed exactly: ``0.3125``, not ``0.312``.

    Certified twice: the entry's rounding at ``decimals + SHORT_EXTRA`` places is the
    candidate, and the entry's 128-bit ball is that point exactly (a dyadic value) or
    the exact forward pass finds the rational equal to it.  An irrational entry's ball
    never contains a short decimal, so the exact pass runs for few entries."""
    wider = decimals + SHORT_EXTRA
    rounded = stage.rounded(decimals=wider)
    scale = 10 ** decimals
    out, balls = None, None
    for i, row in enumerate(rounded):
        for j, r in enumerate(row):
            if r is None or (r.value() * scale).denominator == 1:
                continue  # masked, or already exact at the table's decimals
            candidate = r.value()
            balls = balls or stage.balls(128)
            ball = balls[i][j]
            if not ball.overlaps(flint.arb(candidate.numerator) / candidate.denominator):
                continue
            if not (_point(ball) == candidate or stage.derivation.exact_rational(
                    stage.name, i, j) == candidate):
                continue
            text = terminating(candidate)
            if text is None or len(text.lstrip("-")) > MAX_DECIMAL:
                continue
            out = out or [list(row) for row in values]
            out[i][j] = text
    return values if out is None else out


def _point(ball: flint.arb) -> Fraction | None:
    """A ball of radius 0 as the exact rational it is, else None."""
    if ball.rad() != 0 or not ball.is_finite():
        return None
    man, exp = ball.mid().man_exp()
    man, exp = int(man), int(exp)
    return Fraction(man * 2 ** exp) if exp >= 0 else Fraction(man, 2 ** -exp)


def printed_values(stage: Stage, decimals: int) -> list[list[str]]:
    """A stage's entries as every table and worked line prints them at ``decimals``:
    integers for a stage of exact integers, else the certified roundings with exact
    short decimals in full (:func:`short_exact`)."""
    return integer_values(stage, decimals) or short_exact(
        stage, decimals, stage.values(decimals=decimals))


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
