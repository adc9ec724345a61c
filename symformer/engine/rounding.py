"""Correct rounding decided from balls.

A ball [m - r, m + r] decides the rounding of the exact value it encloses when both
ends round to the same decimal: rounding is monotone, so every point between does
too.  Ties round half to even, as NumPy and Python do.  Everything here is integer
arithmetic; no float is involved.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from flint import arb, fmpq, fmpz

from symformer.engine.arbmath import precision
from symformer.engine.fast import working
from symformer.errors import NotSupportedError, UndecidedError, UndecidedWarning

#: The working precision (bits) is never raised past this ceiling.  An entry still
#: undecided there is printed in the undecided form (see :class:`Undecided`), or,
#: when even its enclosure is useless (an overflow), ends the run naming the entry.
MAX_PRECISION = 2 ** 16
#: Bits of margin below the last kept digit before a ball counts as narrow.
_MARGIN = 20
#: Values above 10**MAX_PRINTED_MAGNITUDE are refused rather than printed digit by digit.
MAX_PRINTED_MAGNITUDE = 10_000
#: A rounded value is made an exact fraction (:meth:`Rounded.value`) or written in
#: positional notation (:meth:`Rounded.fixed`) only while its decimal exponent is within
#: +-MAX_EXACT_EXPONENT: 6 significant digits of an exp(-1e9)-small attention weight
#: have the exponent -434,294,487, a fraction no machine holds.
MAX_EXACT_EXPONENT = 100_000


@dataclass(frozen=True)
class Rounded:
    """A correctly rounded value: ``digits * 10**exponent``."""

    digits: int
    exponent: int

    def fixed(self) -> str:
        """Positional notation: ``-1.50``, ``0.000``, ``12``.

        Refused (:class:`~symformer.errors.NotSupportedError`) for an exponent past
        :data:`MAX_EXACT_EXPONENT` (a string of millions of zeros)."""
        digits, exponent = self.digits, self.exponent
        _check_exponent(exponent, "written out")
        if exponent < 0 and digits:
            text = int_text(digits)  # with its sign
            if len(text) - (digits < 0) > -exponent:  # d.dd, the common case
                return f"{text[:exponent]}.{text[exponent:]}"
        return _fixed("-" if digits < 0 else "", int_text(abs(digits)), exponent)

    def significant(self) -> str:
        """Like :meth:`fixed`, but scientific (``1.234e-9``) for very large or small values."""
        digits, exponent = self.digits, self.exponent
        if digits == 0:
            return "0"
        text = int_text(digits)  # with its sign
        magnitude = exponent + len(text) - (1 if digits > 0 else 2)  # the leading digit's
        if exponent < 0 and 0 <= magnitude < 21:  # d.ddd, the common case
            return f"{text[:exponent]}.{text[exponent:]}"
        sign, text = ("-", text[1:]) if digits < 0 else ("", text)
        if exponent < 0 and -7 <= magnitude < 0:  # 0.0ddd
            return f"{sign}0.{_ZEROS[:-magnitude - 1]}{text}"
        if -7 <= magnitude < 21:
            return _fixed(sign, text, exponent)
        n = len(text)
        mantissa = text[0] + ("." + text[1:] if n > 1 else "")
        return f"{sign}{mantissa}e{magnitude:+d}".replace("e+", "e")

    def value(self) -> Fraction:
        """The rounded value as an exact fraction (refused, as :meth:`fixed`, for an
        exponent past :data:`MAX_EXACT_EXPONENT`: see :meth:`clipped`)."""
        _check_exponent(self.exponent, "made an exact number")
        return Fraction(self.digits) * Fraction(10) ** self.exponent

    def clipped(self, places: int) -> Fraction:
        """The value, or exactly 0 when its magnitude is below 10**-``places`` (a
        position to draw at, finer than any drawing: never a 10**-434,294,487)."""
        if not self.digits or self.exponent + digit_count(self.digits) <= -places:
            return Fraction(0)  # |value| < 10**(exponent + digit count) <= 10**-places
        return self.value()

    def __float__(self) -> float:  # for display helpers only, never for decisions
        return float(f"{self.digits}e{self.exponent}")  # correctly rounded, any exponent


_ZEROS = "0" * 7  # the zeros after "0." of significant()'s positional values


def int_text(n: int) -> str:
    """``str(n)`` for an integer of any number of digits (Python refuses to convert one
    of more than 4,300: a value of 1e5000 printed to 3 decimals has 5,004)."""
    if n.bit_length() <= _STR_BITS:
        return str(n)
    high, low = divmod(abs(n), _STR_CHUNK)
    return ("-" if n < 0 else "") + int_text(high) + str(low).rjust(_STR_DIGITS, "0")


#: :func:`int_text`'s pieces: 4,000 digits (below Python's 4,300), and the bits of an
#: integer ``str`` converts whole (14,000 bits: fewer than 4,215 digits).
_STR_DIGITS = 4000
_STR_CHUNK = 10 ** _STR_DIGITS
_STR_BITS = 14_000


def _check_exponent(exponent: int, what: str) -> None:
    if abs(exponent) > MAX_EXACT_EXPONENT:
        raise NotSupportedError(
            f"a value of about 1e{exponent} is too {'small' if exponent < 0 else 'large'} "
            f"to be {what} (decimal exponents past +-{MAX_EXACT_EXPONENT:,} are not)")


def _fixed(sign: str, text: str, exponent: int) -> str:
    """``sign`` and the digits ``text`` times 10**exponent in positional notation."""
    if exponent >= 0:
        return sign + text + "0" * exponent
    places = -exponent
    if len(text) <= places:
        text = text.rjust(places + 1, "0")
    return f"{sign}{text[:-places]}.{text[-places:]}"


@dataclass(frozen=True)
class Undecided(Rounded):
    """An entry whose rounding is not decided: printed ``low..high?``.

    ``digits``/``exponent`` give ``low`` and ``high`` the other end of the value's
    certified enclosure rounded outward to the requested places: the exact value lies
    in [low, high] and its correct rounding is one of the two.  It happens only when a
    ball still straddles a rounding boundary (an exact tie or zero that no proof
    settled) at :data:`MAX_PRECISION` bits.
    """

    high: Rounded = Rounded(0, 0)

    @property
    def low(self) -> Rounded:
        """The lower end as a plain :class:`Rounded`."""
        return Rounded(self.digits, self.exponent)

    def fixed(self) -> str:
        """``0.187..0.188?``."""
        return f"{self.low.fixed()}..{self.high.fixed()}?"

    def significant(self) -> str:
        """``1.87e-9..1.88e-9?``."""
        return f"{self.low.significant()}..{self.high.significant()}?"


def display_value(text: str) -> Fraction:
    """A printed value as a fraction, for display helpers (heat maps) only.

    Accepts the undecided form ``low..high?`` (its lower end).  A value below
    10**-:data:`MAX_EXACT_EXPONENT` (``1.2e-434294482``) is 0 here: no display tells it
    from 0, and its exact fraction would not fit in memory.
    """
    number = Decimal(text.split("..")[0].rstrip("?"))
    if number.is_finite() and (not number or number.adjusted() < -MAX_EXACT_EXPONENT):
        return Fraction(0)
    return decimal_fraction(number)


def decimal_fraction(text: str | Decimal) -> Fraction:
    """The exact value of a printed decimal (``-1.250``, ``3e-5``), of any number of
    digits (``Fraction(text)`` refuses more than Python's 4,300); refused
    (:class:`~symformer.errors.NotSupportedError`) past 10**+-:data:`MAX_EXACT_EXPONENT`."""
    number = Decimal(text)
    if number.is_finite() and number:
        _check_exponent(number.adjusted(), "made an exact number")
    return Fraction(number)


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


def digit_count(n: int) -> int:
    """The number of decimal digits of ``abs(n)`` (1 for 0), without ``str``: Python
    refuses to print integers of more than 4300 digits, which a ball read at the
    precision ceiling (2^16 bits, ~19,700 digits) gives."""
    n = abs(n)
    k = max(1, (n.bit_length() - 1) * 30103 // 100000 + 1)  # 10^(k-1) <= 2^(bits-1) <= n
    while n >= 10 ** k:
        k += 1
    while k > 1 and n < 10 ** (k - 1):
        k -= 1
    return k


def round_scaled(n: int, e: int, *, decimals: int | None = None,
                 significant: int | None = None) -> Rounded:
    """Round ``n * 10**e`` (exact integers) to ``decimals`` places or ``significant`` digits.

    Works on decimal exponents directly, so values such as exp(-10**9) never turn
    into integers with a billion digits.
    """
    if n == 0:
        return Rounded(0, -decimals if decimals is not None else 0)
    lead = e + digit_count(n) - 1  # exponent of the leading digit
    target = _target(lead, decimals, significant)
    if e >= target:
        return Rounded(n * 10 ** (e - target), target)
    if target - e > digit_count(n) + 1:  # far below half a unit of the last place
        return Rounded(0, target)
    digits = _round_int(n, 10 ** (target - e))
    if significant is not None and digit_count(digits) > significant:
        # 9.99 -> 10.0: the carry added a digit; keep the same number of digits.
        return Rounded(digits // 10, target + 1)
    return Rounded(digits, target)


def round_fraction(value: Fraction, *, decimals: int | None = None,
                   significant: int | None = None) -> Rounded:
    """Round an exact rational to ``decimals`` places or ``significant`` digits."""
    if value == 0:
        return Rounded(0, -decimals if decimals is not None else 0)
    lead = leading_exponent(abs(value))
    target = _target(lead, decimals, significant)
    scaled = value / Fraction(10) ** target
    digits = _round_int(scaled.numerator, scaled.denominator)
    if significant is not None and digit_count(digits) > significant:
        return Rounded(digits // 10, target + 1)
    return Rounded(digits, target)


def leading_exponent(x: Fraction) -> int:
    """floor(log10(x)) for x > 0, exactly."""
    # bit lengths, not decimal strings: exact bounds of 2^-65536 have ~20,000 digits
    e = (x.numerator.bit_length() - x.denominator.bit_length()) * 30103 // 100000
    while Fraction(10) ** e > x:
        e -= 1
    while Fraction(10) ** (e + 1) <= x:
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
    # Read a few digits more than wanted (enough for almost every ball); only a ball
    # still on a boundary is read again, to as many digits as it is accurate to.
    quick = max(wanted, 1) + 10
    rounded = _round_read(x, quick, decimals, significant)
    if rounded is None and (accurate := _digits(x, wanted)) > quick:
        rounded = _round_read(x, accurate, decimals, significant)
    return rounded


def round_stage(balls: list[list[arb | None]], *, decimals: int | None = None,
                significant: int | None = None) -> list[list[Rounded | None]]:
    """Round a whole stage of balls at once: the common case, in one read per entry.

    Each ball is read once as a decimal enclosure ``[m - r, m + r] * 10**e`` (Arb's
    rigorous conversion, :data:`_EXTRA` digits past the last kept one); with
    ``q = 10**(t - e)`` the unit of the last kept digit ``10**t``, every point v of the
    enclosure rounds to ``D = floor(v / q + 1/2)`` unless v is a tie.  When both ends
    give the same ``D`` and the lower end is not a tie, no point of the enclosure is a
    tie or crosses a boundary, so the value rounds to ``D * 10**t`` (half to even never
    applies).  Under ``significant`` the lead digit is checked from ``D`` itself
    (see :func:`_significant_from`).  A read with ``r = 0`` is the exact value
    ``m * 10**e`` (an exact 0, a dyadic weight such as 0.125): rounded exactly, ties
    to even included (:func:`round_scaled`).  An entry this cannot decide (a ball
    straddling a boundary, an inexact tie, a value that may be 0 under ``significant``, a magnitude
    past 10**:data:`_FAST_MAGNITUDE`, a masked score ``None``) is ``None``: the caller gives it
    the per-entry path (:func:`round_ball`, :func:`certified_rounding`).
    """
    wanted = significant if significant is not None else decimals
    if not 0 < wanted + _EXTRA + 1 < len(_POWERS):
        return [[None for _ in row] for row in balls]  # rare: all per entry
    if significant is not None:
        read = significant + _EXTRA
        low, high, powers = _POWERS[significant - 1], _POWERS[significant], _POWERS
        doubled, new = _DOUBLED, object.__new__
        zero = _rounded(0, 0)

        def entry(x: arb | None) -> Rounded | None:
            if x is None or not x.is_finite():
                return None
            m, r, e = x.mid_rad_10exp(read)
            m, r = int(m), int(r)
            size = m if m >= 0 else -m
            if r >= size:
                return zero if r == 0 else None  # exactly 0, or a ball that may hold 0
            count = size.bit_length() * 30103 // 100000  # m's digit count, or one less
            if count < len(powers) and size >= powers[count]:
                count += 1
            e = int(e)
            if e + count > _FAST_MAGNITUDE:
                return None  # large values: the per-entry path refuses the huge ones
            if r == 0:  # an exact decimal read: the value is m * 10**e
                return round_scaled(m, e, significant=significant)
            shift = count - significant  # digits of m below the last kept one
            if 0 < shift < len(powers):  # the common case of _significant_from, inline
                # every point of [m - r, m + r] / q rounds to D = floor((2(m - r) + q) / 2q)
                # when the lower end is no tie (remainder > 0) and the upper end's
                # numerator, 4r more, stays below the next multiple of 2q
                q2 = doubled[shift]
                digits, tie = divmod(2 * (m - r) + powers[shift], q2)
                if tie and tie + 4 * r < q2 and \
                        low < (digits if digits >= 0 else -digits) < high:
                    made = new(Rounded)  # _rounded(digits, e + shift), inline
                    fields = made.__dict__
                    fields["digits"], fields["exponent"] = digits, e + shift
                    return made
            return _significant_from(m - r, m + r, e + shift, shift, significant)
    else:
        read = decimals + _EXTRA + 1  # digits of a value below 1, and more for larger ones
        zero = _rounded(0, -decimals)

        def entry(x: arb | None) -> Rounded | None:
            if x is None or not x.is_finite():
                return None
            m, r, e = x.mid_rad_10exp(read)
            shift = -decimals - int(e)  # digits dropped below the last kept one
            if -_FAST_MAGNITUDE < shift < 0:  # a value of 10**10 or more: read further
                m, r, e = x.mid_rad_10exp(read - shift)
                shift = -decimals - int(e)
            m, r = int(m), int(r)
            if m == r == 0:
                return zero
            if shift >= len(_POWERS) and (abs(m) + r).bit_length() < 3 * shift:
                return zero  # below 8**shift < 10**shift / 2: rounds to 0
            if not 0 <= shift < len(_POWERS):
                return None  # a value too large to have been read far enough
            if r == 0:  # an exact decimal read: the value is m * 10**e (ties included)
                return round_scaled(m, -decimals - shift, decimals=decimals)
            digits = _rounded_int(m - r, m + r, shift)
            return None if digits is None else _rounded(digits, -decimals)

    return _round_scaled_balls(balls, entry, decimals, significant)


def _round_scaled_balls(balls: list[list[arb | None]], read: Callable[[arb], Rounded | None],
                        decimals: int | None, significant: int | None
                        ) -> list[list[Rounded | None]]:
    """:func:`round_stage`'s loop: each ball decided in ball arithmetic where it can be,
    by ``read`` (the decimal read) otherwise.

    With ``10**t`` a unit, ``z = x * 10**-t + [-1/2, 1/2]`` is a ball (Arb's rigorous
    product and sum); when it holds exactly one integer F (``unique_fmpz``), every
    point v of x has ``F - 1/2 < v * 10**-t < F + 1/2`` (z holds an integer, so it is
    at least one wide; two would fit if any point were at or past F +- 1/2).  Under
    ``decimals``, t is the last kept digit's and v rounds to ``F * 10**t``, no tie.
    Under ``significant``, t is a finer unit (about :data:`_SPREAD` digits finer,
    guessed from the previous entry's) and F's digit count, when F is no power of ten,
    proves v's lead digit; the ``s`` kept digits are then F rounded at that digit, since
    the open interval holds no rounding boundary of the coarser unit unless F's dropped
    digits are exactly half of it (then ``read`` decides).  A guess too coarse (F with
    fewer than ``s`` digits) moves once.  Three Arb calls and one integer per entry,
    where the decimal read costs about twice that in Python integer work (a 64-token,
    4-layer model rounds 760,000 entries).  A ball this does not decide (an exact 0
    under ``significant``, a straddling or too wide ball, a huge value, an infinite
    one) goes to ``read``; None stays None.
    """
    wanted = significant if significant is not None else decimals
    # the digits read (for significant, up to 2 * _SPREAD decades above the guess), and
    # 64 bits below them: a ball of the working precision stays as narrow
    bits = (wanted + 3 * _SPREAD + _EXTRA) * 10 // 3 + 64
    new, scales = object.__new__, _scales(bits)
    widen = _WIDEN.get(bits)
    if widen is None:
        # [-1/2, 1/2] and a little more: a midpoint of 2**-bits keeps z's midpoint at a
        # working exponent when x is tiny (a midpoint of 10**-(10**29) would make
        # unique_fmpz's shift too large: FLINT aborts the process); z still holds
        # x * 10**-t + [-1/2, 1/2], which is all the argument above needs (a dyadic
        # midpoint, a radius rounded up): kept per ``bits``.
        with precision(bits):  # made at ``bits``, whatever the caller's precision
            widen = _WIDEN[bits] = arb(fmpq(1, 2**bits), fmpq(1, 2) + fmpq(1, 2**bits))
    out = []
    with working(bits):  # the collector paused: a Rounded per entry, no cycle
        if significant is None:
            t = -decimals
            scale = scales(t)
            for row in balls:
                done = []
                for x in row:
                    if x is not None:
                        digits = (x * scale + widen).unique_fmpz()
                        if digits is not None:
                            made = new(Rounded)  # _rounded(int(digits), t), inline
                            fields = made.__dict__
                            fields["digits"], fields["exponent"] = int(digits), t
                            done.append(made)
                            continue
                        done.append(read(x))
                    else:
                        done.append(None)
                out.append(done)
            return out
        powers, doubled = _POWERS, _DOUBLED
        low, high, top = powers[significant - 1], powers[significant], len(powers)
        t = None  # the unit of the last entry's read: the next one's guess
        scale = None  # 10**-t
        zero = _rounded(0, 0)
        # the usual case, first and inline: F has s + _SPREAD digits, no power of ten
        usual_low, usual_high = powers[significant + _SPREAD - 1], powers[significant + _SPREAD]
        usual_half, usual_unit = powers[_SPREAD], doubled[_SPREAD]
        for row in balls:
            done = []
            for x in row:
                if x is None:
                    done.append(None)
                    continue
                read_once = scale is not None  # the loop's first read, made here
                if read_once:
                    fine = (x * scale + widen).unique_fmpz()
                    if fine is not None:
                        fine = int(fine)
                        if usual_low < (fine if fine >= 0 else -fine) < usual_high:
                            digits, rest = divmod(2 * fine + usual_half, usual_unit)
                            if rest and digits != high and digits != -high:
                                made = new(Rounded)  # _rounded(digits, t + _SPREAD)
                                fields = made.__dict__
                                fields["digits"], fields["exponent"] = digits, t + _SPREAD
                                done.append(made)
                                continue
                made, tries = None, 2 if t is not None else 0  # the guess, then once moved
                while tries:
                    tries -= 1
                    if read_once:  # F at this scale, read above: not again
                        read_once = False
                    else:
                        if scale is None:
                            scale = scales(t)
                        fine = (x * scale + widen).unique_fmpz()
                        if fine is not None:
                            fine = int(fine)
                    if fine is None:
                        break
                    size = fine if fine >= 0 else -fine
                    count = size.bit_length() * 30103 // 100000  # digits, or one less
                    if count + 1 >= top:
                        break  # past the table of powers (hundreds of digits): read it
                    if size >= powers[count]:
                        count += 1
                    shift = count - significant  # F's digits below the last kept one
                    if shift > 0:
                        if size == powers[count - 1]:
                            # F = +-10**k (a round value: 0.1, 1, 100): every point v has
                            # |v| / 10**t in (10**k - 1/2, 10**k + 1/2).  From 10**k up it
                            # rounds to 10**(s-1) units of 10**(t + shift), the dropped
                            # part below half a unit; just below, its lead digit is one
                            # lower and it rounds up (above the half: shift >= 1) to 10**s
                            # units of 10**(t + shift - 1): the same value either way
                            made = new(Rounded)  # _rounded(+-low, t + shift), inline
                            fields = made.__dict__
                            fields["digits"], fields["exponent"] = \
                                low if fine > 0 else -low, t + shift
                            if shift > 2 * _SPREAD:  # a guess far too fine
                                t, scale = t + shift - _SPREAD, None
                            break
                        digits, rest = divmod(2 * fine + powers[shift], doubled[shift])
                        if rest:  # no tie: every point rounds to ``digits``
                            made = new(Rounded)  # _rounded(digits, t + shift), inline
                            fields = made.__dict__
                            if digits == high or digits == -high:  # 9.99 -> 10.0
                                fields["digits"], fields["exponent"] = \
                                    digits // 10, t + shift + 1
                            else:
                                fields["digits"], fields["exponent"] = digits, t + shift
                            if shift > 2 * _SPREAD:  # a guess far too fine
                                t, scale = t + shift - _SPREAD, None
                        break
                    if shift == 0:
                        if size > low:  # F has s digits and is no power of ten
                            made = new(Rounded)  # _rounded(fine, t), inline
                            fields = made.__dict__
                            fields["digits"], fields["exponent"] = fine, t
                        break
                    if size == 0:
                        if x.is_zero():
                            made = zero
                        break
                    t, scale = t + shift - _SPREAD, None  # too coarse: s + _SPREAD next
                if made is None:
                    made = read(x)
                    # the next guess; never a power of ten of an exp(-1e9)-small value's size
                    if made is not None and made.digits and \
                            -_FAST_MAGNITUDE < made.exponent < _FAST_MAGNITUDE:
                        t, scale = made.exponent - _SPREAD, None
                done.append(made)
            out.append(done)
    return out


def _scales(bits: int) -> Callable[[int], arb]:
    """``scale(t)``: ``10**-t`` as a ball at ``bits`` (exact for t <= 0), kept per
    (t, bits) in :data:`_SCALES`."""
    def scale(t: int) -> arb:
        key = (t, bits)
        ball = _SCALES.get(key)
        if ball is None:
            if len(_SCALES) > 4096:
                _SCALES.clear()
            ball = _SCALES[key] = arb(fmpz(10) ** -t) if t <= 0 else \
                arb(1) / arb(fmpz(10) ** t)
        return ball
    return scale


#: :func:`_scales`' balls by (exponent, precision).
_SCALES: dict[tuple[int, int], arb] = {}
#: :func:`_round_scaled_balls`' widening balls by precision.
_WIDEN: dict[int, arb] = {}


def _rounded(digits: int, exponent: int) -> Rounded:
    """``Rounded(digits, exponent)``, built without the frozen dataclass's slow __init__
    (the same object: its fields are its ``__dict__``)."""
    made = object.__new__(Rounded)
    fields = made.__dict__
    fields["digits"], fields["exponent"] = digits, exponent
    return made


def _rounded_int(lo: int, hi: int, shift: int) -> int | None:
    """The integer every point of [lo, hi] / 10**shift rounds to, if none is a tie."""
    q2 = 2 * _POWERS[shift]
    low = 2 * lo + _POWERS[shift]
    digits, tie = divmod(low, q2)
    if tie == 0 or digits != (2 * hi + _POWERS[shift]) // q2:
        return None
    return digits


def _significant_from(lo: int, hi: int, t: int, shift: int, significant: int
                      ) -> Rounded | None:
    """``significant`` digits of every point of [lo, hi] * 10**(t - shift), or None.

    ``t`` is an estimate of the exponent of the last kept digit (from the midpoint's
    lead digit), checked from the rounded digits D themselves: ``low < |D| < high``
    (``low = 10**(significant-1)``, ``high = 10**significant``) proves the lead
    digit right; ``|D| == high`` is the carry 9.99 -> 10.0, the same answer from
    either lead; ``|D| == low`` may be 0.99996 read one digit short, so ``t - 1``
    decides it.  Otherwise the estimate moves by one digit.
    """
    low, high = _POWERS[significant - 1], _POWERS[significant]
    for _ in range(3):
        if not 0 <= shift < len(_POWERS):
            return None
        digits = _rounded_int(lo, hi, shift)
        if digits is None:
            return None
        size = abs(digits)
        if low < size < high:  # |v| / 10**t in [low + 1/2, high - 1/2]: lead is right
            return Rounded(digits, t)
        if size == high:  # 9.99.. -> 10.0, whichever the lead
            return Rounded(digits // 10, t + 1)
        if size == low:  # 1.00 at t, or 0.99996 read one digit short: look at t - 1
            if shift == 0:
                return None
            below = _rounded_int(lo, hi, shift - 1)
            if below is None:
                return None
            if abs(below) >= high:  # |v| >= 10**(t + significant - 1), or a carry
                return Rounded(digits, t)
            return Rounded(below, t - 1)  # |v| < 10**(t + significant - 1)
        step = 1 if size > high else -1
        t, shift = t + step, shift + step
    return None


#: Decimal exponents past which :func:`round_stage` leaves a value to the per-entry
#: path (which refuses those past :data:`MAX_PRINTED_MAGNITUDE`).
_FAST_MAGNITUDE = 1000
#: Decimal digits read past the last kept one by :func:`round_stage`.
_EXTRA = 10
#: Decimal digits :func:`_round_scaled_balls` reads past the last kept one of an entry
#: as large as the previous one: entries up to this many decades smaller are read
#: with the same unit (a stage's entries vary by a few decades).
_SPREAD = 8
#: Powers of ten by exponent, for :func:`round_stage`'s reads.
_POWERS = tuple(10 ** k for k in range(400))
#: Twice the powers of ten.
_DOUBLED = tuple(2 * p for p in _POWERS)


def _round_read(x: arb, digits: int, decimals: int | None,
                significant: int | None) -> Rounded | None:
    """:func:`round_ball` from the ball read as ``digits`` decimal digits."""
    m, r, e = (int(v) for v in x.mid_rad_10exp(digits))
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


def _digits(x: arb, wanted: int) -> int:
    """Decimal digits of the midpoint to read: those wanted, or as many as the ball is
    accurate to (a value 1e-198 from a tie needs 200 digits to be seen off it)."""
    digits = max(wanted, 1) + 10
    m, e = x.rad().man_exp()
    if int(m):
        top, f = x.abs_upper().man_exp()
        top_bits = int(f) + int(top).bit_length()
        rad_bits = int(e) + int(m).bit_length()
        digits = max(digits, (top_bits - rad_bits) * 3011 // 10000 + 5)
    return min(digits, MAX_PRECISION // 3 + 20)


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


def enclose_ball(x: arb, *, decimals: int | None = None,
                 significant: int | None = None) -> Undecided:
    """The undecided form of a finite ball: its bounds rounded outward.

    Integer arithmetic on Arb's decimal enclosure [m - r, m + r] * 10**e, so balls
    of any exponent (exp(-1e50)) are fine.
    """
    m, r, e = (int(v) for v in x.mid_rad_10exp(max(significant or 0, 1) + 10))
    lo, hi = m - r, m + r
    if decimals is not None:
        exponent = -decimals
    else:
        top = max(abs(lo), abs(hi))
        exponent = e + digit_count(top) - significant if top else 0
    return Undecided(_floor_scaled(lo, e - exponent), exponent,
                     Rounded(-_floor_scaled(-hi, e - exponent), exponent))


def _floor_scaled(n: int, shift: int) -> int:
    """floor(n * 10**shift) for integers n and shift (shift may be hugely negative)."""
    if shift >= 0:
        return n * 10 ** shift
    if -shift > digit_count(n) + 1:
        return -1 if n < 0 else 0
    return n // 10 ** -shift


def moderate(x: arb) -> bool:
    """Whether a finite ball's exponents are small enough for :func:`ball_bounds`."""
    if not x.is_finite():
        return False
    return all(abs(int(e)) < 2 ** 20 for _, e in (x.mid().man_exp(), x.rad().man_exp()))


def missing_bits(x: arb, *, decimals: int | None = None,
                 significant: int | None = None) -> int | None:
    """Bits of precision the ball lacks to resolve the last kept digit with a margin.

    ``<= 0``: the ball is *narrow* (a boundary it straddles is probably the value
    itself); ``None``: the ball is not finite (an overflow or NaN).
    """
    if not x.is_finite():
        return None
    m, e = x.rad().man_exp()
    if int(m) == 0:
        return 0
    rad_bits = int(e) + int(m).bit_length()
    if significant is not None and x.contains(0):
        # significant digits of a value that may be 0: narrow once within 2^-64 of 0
        return rad_bits + 64
    if decimals is not None:
        unit_exponent = -decimals
    else:
        top, f = x.abs_upper().man_exp()
        unit_exponent = (int(f) + int(top).bit_length()) * 3 // 10 - significant
    unit_bits = unit_exponent * 3321 // 1000 - 1  # log2(10) > 3.321
    return rad_bits - unit_bits + _MARGIN


def start_precision(decimals: int | None, significant: int | None) -> int:
    """The first working precision tried for ``decimals`` places or ``significant`` digits."""
    wanted = significant if significant is not None else max(decimals, 0) + 6
    return int(wanted * 3.33) + 64


def certified_rounding(ball_at: Callable[[int], arb], where: str, *,
                       decimals: int | None = None, significant: int | None = None,
                       exact: Callable[[arb, int], Rounded | None] | None = None,
                       start: int | None = None) -> Rounded:
    """The correct rounding of one value, raising the precision up to :data:`MAX_PRECISION`.

    ``ball_at(prec)`` is the value's ball at ``prec`` bits (evaluated inside
    :func:`~symformer.engine.arbmath.precision`).  The precision doubles, or jumps
    by what a wide ball lacks (huge magnitudes need more bits).  ``exact(ball, prec)``
    is tried whenever the ball is narrow but still straddles a boundary (an exact tie
    or zero): it returns the proved rounding or None.  At the ceiling a narrow ball gives
    :class:`Undecided` and an :class:`~symformer.errors.UndecidedWarning` naming
    ``where``; a ball that is not even narrow raises :class:`UndecidedError`.
    ``start``: the first precision (default :func:`start_precision`; a derivation
    passes the one it has evaluated at, so no evaluation at a lower one is added).
    """
    prec = start or start_precision(decimals, significant)
    while True:
        with precision(prec):
            ball = ball_at(prec)
        if ball is None:  # a masked score
            return None
        rounded = round_ball(ball, decimals=decimals, significant=significant)
        if rounded is not None:
            return rounded
        missing = missing_bits(ball, decimals=decimals, significant=significant)
        if exact is not None and missing is not None and missing <= 0:
            rounded = exact(ball, prec)
            if rounded is not None:
                return rounded
        if prec >= MAX_PRECISION:
            break
        wanted = prec + max(missing or 0, 0) + 32
        while prec < wanted:
            prec *= 2
        prec = min(prec, MAX_PRECISION)
    if missing is not None and missing <= 0:
        undecided = enclose_ball(ball, decimals=decimals, significant=significant)
        text = undecided.fixed() if decimals is not None else undecided.significant()
        warnings.warn(UndecidedWarning(
            f"{where}: rounding undecided at {MAX_PRECISION} bits (a tie or zero that no "
            f"proof settled); printed as {text}: the value lies in that range and its "
            f"correct rounding is one of its ends"), stacklevel=2)
        return undecided
    state = "is not finite (an overflow)" if missing is None else \
        f"is still {ball.str(5, radius=True)}"
    raise UndecidedError(
        f"cannot decide the rounding of {where}: at the precision ceiling of "
        f"{MAX_PRECISION} bits its ball {state}")
