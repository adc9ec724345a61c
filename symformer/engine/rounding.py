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

from symformer.errors import NotSupportedError

#: Values above 10**MAX_PRINTED_MAGNITUDE are refused rather than printed digit by digit.
MAX_PRINTED_MAGNITUDE = 10_000


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

    def value(self) -> Fraction:
        """The rounded value as an exact fraction."""
        return Fraction(self.digits) * Fraction(10) ** self.exponent

    def __float__(self) -> float:  # for display helpers only, never for decisions
        return float(Fraction(self.digits) * Fraction(10) ** self.exponent)


def _round_int(numerator: int, denominator: int) -> int:
    """numerator / denominator rounded to the nearest integer, ties to even."""
    q, r = divmod(numerator, denominator)
    twice = 2 * r
    if twice > denominator or (twice == denominator and q % 2 == 1):
        q += 1
    return q


def _target(lead: int, decimals: int | None, significant: int | None) -> int:
    """The decimal exponent of the last kept digit."""
    return -decimals if decimals is not None else lead - significant + 1


def round_scaled(n: int, e: int, *, decimals: int | None = None,
                 significant: int | None = None) -> Rounded:
    """Round ``n * 10**e`` (exact integers) to ``decimals`` places or ``significant`` digits.

    Works on decimal exponents directly, so values such as exp(-10**9) never turn
    into integers with a billion digits.
    """
    if n == 0:
        return Rounded(0, -decimals if decimals is not None else 0)
    lead = e + len(str(abs(n))) - 1  # exponent of the leading digit
    target = _target(lead, decimals, significant)
    if e >= target:
        return Rounded(n * 10 ** (e - target), target)
    if target - e > len(str(abs(n))) + 1:  # far below half a unit of the last place
        return Rounded(0, target)
    digits = _round_int(n, 10 ** (target - e))
    if significant is not None and len(str(abs(digits))) > significant:
        # 9.99 -> 10.0: the carry added a digit; keep the same number of digits.
        return Rounded(digits // 10, target + 1)
    return Rounded(digits, target)


def round_fraction(value: Fraction, *, decimals: int | None = None,
                   significant: int | None = None) -> Rounded:
    """Round an exact rational to ``decimals`` places or ``significant`` digits."""
    if value == 0:
        return Rounded(0, -decimals if decimals is not None else 0)
    lead = _leading_exponent(abs(value))
    target = _target(lead, decimals, significant)
    scaled = value / Fraction(10) ** target
    digits = _round_int(scaled.numerator, scaled.denominator)
    if significant is not None and len(str(abs(digits))) > significant:
        return Rounded(digits // 10, target + 1)
    return Rounded(digits, target)


def _leading_exponent(x: Fraction) -> int:
    """floor(log10(x)) for x > 0, exactly."""
    e = len(str(x.numerator)) - len(str(x.denominator))
    if Fraction(10) ** e > x:
        e -= 1
    elif Fraction(10) ** (e + 1) <= x:
        e += 1
    return e


def ball_bounds(x: arb) -> tuple[Fraction, Fraction]:
    """Exact rational lower and upper bounds of a ball (for balls of moderate exponent)."""
    m, e = x.mid().man_exp()
    r, f = x.rad().man_exp()
    mid = Fraction(int(m)) * (Fraction(2) ** int(e))
    rad = Fraction(int(r)) * (Fraction(2) ** int(f))
    return mid - rad, mid + rad


def round_ball(x: arb, *, decimals: int | None = None,
               significant: int | None = None) -> Rounded | None:
    """The correct rounding of the value enclosed by ``x``, or None if undecided.

    The ball is read as decimal integers ``[m - r, m + r] * 10**e`` (a rigorous
    enclosure from Arb), so the decision is pure integer arithmetic.
    """
    if not x.is_finite():
        return None
    if x == 0:
        return round_scaled(0, 0, decimals=decimals, significant=significant)
    magnitude = _magnitude(x)
    if magnitude > MAX_PRINTED_MAGNITUDE:
        raise NotSupportedError(f"a value of about 1e{magnitude} (such as exp of a huge "
                                f"score) is too large to print")
    wanted = significant if significant is not None else decimals + magnitude + 1
    m, r, e = (int(v) for v in x.mid_rad_10exp(max(wanted, 1) + 10))
    lo, hi = m - r, m + r
    if r == 0:
        return round_scaled(m, e, decimals=decimals, significant=significant)
    if decimals is None and lo <= 0 <= hi:
        return None  # significant digits of a value that may be zero: undecided
    low = round_scaled(lo, e, decimals=decimals, significant=significant)
    high = round_scaled(hi, e, decimals=decimals, significant=significant)
    if low.digits == high.digits == 0:
        return low
    if _value_key(low) == _value_key(high):
        return low if low.exponent <= high.exponent else high
    return None


def _magnitude(x: arb) -> int:
    """A decimal exponent at least that of the ball's largest point (0 for small values)."""
    m, e = x.abs_upper().man_exp()
    bits = int(e) + int(m).bit_length()
    return max(0, bits * 3 // 10 + 1)


def _value_key(r: Rounded) -> tuple[int, int]:
    """A normal form of a rounded value, so 1.0e1 and 10 compare equal."""
    digits, exponent = r.digits, r.exponent
    while digits and digits % 10 == 0:
        digits //= 10
        exponent += 1
    return digits, exponent if digits else 0
