"""Correct rounding decided from balls.

A ball [m - r, m + r] decides the rounding of the exact value it encloses when both
ends round to the same decimal: rounding is monotone, so every point between does
too.  Ties round half to even, as NumPy and Python do.  Everything here is integer
arithmetic; no float is involved.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from flint import arb


@dataclass(frozen=True)
class Rounded:
    """A correctly rounded value: ``digits * 10**exponent``."""

    digits: int
    exponent: int

    def fixed(self) -> str:
        """Positional notation: ``-1.50``, ``0.000``, ``12``."""
        sign = "-" if self.digits < 0 else ""
        text = str(abs(self.digits))
        if self.exponent >= 0:
            return sign + text + "0" * self.exponent
        places = -self.exponent
        text = text.rjust(places + 1, "0")
        return f"{sign}{text[:-places]}.{text[-places:]}"

    def significant(self) -> str:
        """Like :meth:`fixed`, but scientific (``1.234e-9``) for very large or small values."""
        if self.digits == 0:
            return "0"
        n = len(str(abs(self.digits)))
        magnitude = self.exponent + n - 1  # position of the leading digit
        if -7 <= magnitude < 21:
            return self.fixed()
        sign = "-" if self.digits < 0 else ""
        text = str(abs(self.digits))
        mantissa = text[0] + ("." + text[1:] if n > 1 else "")
        return f"{sign}{mantissa}e{magnitude:+d}".replace("e+", "e")

    def __float__(self) -> float:  # for display helpers only, never for decisions
        return float(Fraction(self.digits) * Fraction(10) ** self.exponent)


def _round_int(numerator: int, denominator: int) -> int:
    """numerator / denominator rounded to the nearest integer, ties to even."""
    q, r = divmod(numerator, denominator)
    twice = 2 * r
    if twice > denominator or (twice == denominator and q % 2 == 1):
        q += 1
    return q


def round_fraction(value: Fraction, *, decimals: int | None = None,
                   significant: int | None = None) -> Rounded:
    """Round an exact rational to ``decimals`` places or ``significant`` digits."""
    if value == 0:
        return Rounded(0, -decimals if decimals is not None else 0)
    if decimals is not None:
        exponent = -decimals
    else:
        exponent = _leading_exponent(abs(value)) - significant + 1
    scaled = value / Fraction(10) ** exponent
    digits = _round_int(scaled.numerator, scaled.denominator)
    if significant is not None and len(str(abs(digits))) > significant:
        # 9.99 -> 10.0: the carry added a digit; re-round one place higher.
        return round_fraction(value, decimals=-(exponent + 1))
    return Rounded(digits, exponent)


def _leading_exponent(x: Fraction) -> int:
    """floor(log10(x)) for x > 0, exactly."""
    e = len(str(x.numerator)) - len(str(x.denominator))
    if Fraction(10) ** e > x:
        e -= 1
    elif Fraction(10) ** (e + 1) <= x:
        e += 1
    return e


def ball_bounds(x: arb) -> tuple[Fraction, Fraction]:
    """Exact rational lower and upper bounds of a ball."""
    m, e = x.mid().man_exp()
    r, f = x.rad().man_exp()
    mid = Fraction(int(m)) * (Fraction(2) ** int(e))
    rad = Fraction(int(r)) * (Fraction(2) ** int(f))
    return mid - rad, mid + rad


def round_ball(x: arb, *, decimals: int | None = None,
               significant: int | None = None) -> Rounded | None:
    """The correct rounding of the value enclosed by ``x``, or None if undecided."""
    if not x.is_finite():
        return None
    lo, hi = ball_bounds(x)
    if lo == hi:
        return round_fraction(lo, decimals=decimals, significant=significant)
    if decimals is None and lo <= 0 <= hi:
        return None  # significant digits of a value that may be zero: undecided
    low = round_fraction(lo, decimals=decimals, significant=significant)
    high = round_fraction(hi, decimals=decimals, significant=significant)
    if low == high or (low.digits == high.digits == 0):
        return low
    if low.digits * 10**max(low.exponent - high.exponent, 0) == \
            high.digits * 10**max(high.exponent - low.exponent, 0):
        return low if low.exponent <= high.exponent else high
    return None
