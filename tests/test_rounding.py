"""Certified rounding against Python's decimal module (an independent implementation)."""

from __future__ import annotations

import sys
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from fractions import Fraction

import mpmath
import pytest
from flint import arb, ctx, fmpq
from hypothesis import example, given, settings
from hypothesis import strategies as st

from symformer.engine.rounding import (
    Rounded,
    ball_bounds,
    decimal_fraction,
    display_value,
    int_text,
    round_ball,
    round_fraction,
    round_stage,
    start_precision,
)
from symformer.errors import NotSupportedError

fractions = st.fractions(min_value=-10**6, max_value=10**6, max_denominator=10**9)


def decimal_of(x: Fraction, prec: int = 200) -> Decimal:
    with localcontext() as c:
        c.prec = prec
        return Decimal(x.numerator) / Decimal(x.denominator)


@given(fractions, st.integers(0, 12))
def test_fixed_decimals_match_decimal_module(x, places):
    with localcontext() as c:
        c.prec = 200
        want = decimal_of(x).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_EVEN)
    got = Decimal(round_fraction(x, decimals=places).fixed())
    assert got == want


@given(fractions.filter(lambda v: v != 0), st.integers(1, 30))
def test_significant_digits_match_decimal_module(x, digits):
    with localcontext() as c:
        c.prec = digits
        c.rounding = ROUND_HALF_EVEN
        want = +decimal_of(x)
    got = Decimal(round_fraction(x, significant=digits).significant())
    assert got == want


@given(fractions, st.integers(0, 8))
def test_ball_rounding_is_decided_or_honest(x, places):
    """A ball either gives the true rounding of the value it encloses, or nothing."""
    ctx.prec = 80
    ball = arb(fmpq(x.numerator, x.denominator))
    got = round_ball(ball, decimals=places)
    if got is not None:
        assert got == round_fraction(x, decimals=places)


@given(st.integers(-10**60, 10**60), st.integers(-80, 30))
@example(123, -5)
@example(-123, -5)
@example(-5, -8)
@example(5, -7)
@example(12, -9)
@example(10**22, -1)
@example(-10**21, -1)
@example(0, -3)
@example(7, 0)
@example(-7, 21)
def test_printed_digits_are_the_value_with_its_places(digits, exponent):
    """fixed() and significant() print digits * 10**exponent: the same value as the
    decimal module's, with exactly -exponent places (fixed, and significant outside
    scientific notation), no sign on 0, scientific only past 1e21 or below 1e-7."""
    from symformer.engine.rounding import Rounded

    r = Rounded(digits, exponent)
    want = Decimal((0 if digits >= 0 else 1, tuple(map(int, str(abs(digits)))), exponent))
    fixed, significant = r.fixed(), r.significant()
    assert Decimal(fixed) == want and Decimal(significant) == want
    assert len(fixed.partition(".")[2]) == max(-exponent, 0)
    if digits == 0:
        assert significant == "0" and not fixed.startswith("-")
    elif "e" not in significant:
        assert significant == fixed
        assert -7 <= want.adjusted() < 21
    else:
        assert not -7 <= want.adjusted() < 21


def test_ties_round_half_even():
    assert round_fraction(Fraction(5, 2), decimals=0).fixed() == "2"
    assert round_fraction(Fraction(7, 2), decimals=0).fixed() == "4"
    assert round_fraction(Fraction(-1, 8), decimals=2).fixed() == "-0.12"


def test_exact_tie_is_not_decided_by_a_ball():
    ctx.prec = 100
    tie = arb(fmpq(3, 20))  # 0.15 is not dyadic: the ball straddles the tie
    assert round_ball(tie, decimals=1) is None
    assert round_ball(tie, decimals=3).fixed() == "0.150"


def test_negative_values_rounding_to_zero_print_without_sign():
    assert round_fraction(Fraction(-1, 1000), decimals=2).fixed() == "0.00"


# -- round_stage: the whole-stage path (one decimal read per entry) -----------------

def _reference(x: Fraction, decimals: int | None, significant: int | None) -> Decimal:
    """Python's decimal module's half-even rounding of an exact rational."""
    with localcontext() as c:
        c.prec = 400
        c.rounding = ROUND_HALF_EVEN
        value = decimal_of(x, 400)
        if decimals is not None:
            return value.quantize(Decimal(1).scaleb(-decimals))
        c.prec = significant
        return +value


def _ball(x: Fraction, prec: int, radius: Fraction = Fraction(0)) -> arb:
    ctx.prec = prec
    ball = arb(fmpq(x.numerator, x.denominator))
    if radius:
        r = arb(fmpq(radius.numerator, radius.denominator))
        ball = (ball - r).union(ball + r)
    return ball


def _as_decimal(r, decimals: int | None) -> Decimal:
    return Decimal(r.fixed() if decimals is not None else r.significant())


def _mode(data) -> tuple[int | None, int | None]:
    if data.draw(st.booleans()):
        return data.draw(st.integers(0, 30)), None
    return None, data.draw(st.integers(1, 60))


wide_fractions = st.fractions(min_value=-10**9, max_value=10**9, max_denominator=10**40)


@given(wide_fractions, st.data())
def test_round_stage_matches_decimal_module(x, data):
    """A decided entry is the decimal module's rounding; and a ball far from every
    boundary (by 10**-5 of the last kept digit) is decided."""
    decimals, significant = _mode(data)
    ball = _ball(x, start_precision(decimals, significant))
    got = round_stage([[ball]], decimals=decimals, significant=significant)[0][0]
    _check_entry(x, got, decimals, significant)


def _check_entry(x: Fraction, got, decimals: int | None, significant: int | None) -> None:
    """``got``, round_stage's entry for a ball around x at the start precision, is the
    decimal module's rounding of x, and is decided unless x is near a tie or a power of
    ten."""
    if x == 0 and significant is not None:  # an exact 0 prints as 0
        assert got == round_fraction(x, significant=significant) and got.significant() == "0"
        return
    want = _reference(x, decimals, significant)
    unit = Fraction(10) ** (want.as_tuple().exponent)
    ulps = x / unit  # the value in units of the last kept digit
    near_tie = abs(ulps - (ulps - Fraction(1, 2)).__floor__() - Fraction(1, 2)) < \
        Fraction(1, 10**5)
    near_power = any(abs(abs(x) - Fraction(10) ** k) < unit for k in range(-60, 12))
    if got is None:
        assert near_tie or near_power, (x, decimals, significant)
    else:
        assert _as_decimal(got, decimals) == want
        assert got == round_fraction(x, decimals=decimals, significant=significant)


#: Values of a stage's row: magnitudes 10**-30 to 10**30, and the awkward ones (a
#: carry 9.9996, a lead one digit short 0.99996, a dyadic tie, 0, powers of ten).
row_values = st.builds(lambda n, d, k: Fraction(n, d) * Fraction(10) ** k,
                       st.integers(-10**12, 10**12), st.integers(1, 10**6),
                       st.integers(-30, 30)) | st.sampled_from(
    [Fraction(99996, 100000), Fraction(-9996, 1000), Fraction(1, 8), Fraction(0),
     Fraction(10) ** 5, Fraction(1, 10 ** 7), Fraction(5, 2)])


@settings(max_examples=20)
@given(st.lists(row_values, min_size=2, max_size=8), st.data())
def test_round_stage_rows_of_mixed_magnitudes(xs, data):
    """Whole rows: each entry's exponent is guessed from the previous entry's (a finer
    unit, checked by the digits read); every entry still rounds as on its own, against
    the decimal module."""
    decimals, significant = _mode(data)
    if decimals is not None:  # places of values below 10**9, as the start precision plans
        xs = [x for x in xs if abs(x) < 10 ** 9]
    prec = start_precision(decimals, significant)
    row = [_ball(x, prec) for x in xs]
    got = round_stage([row, row[::-1]], decimals=decimals, significant=significant)
    for x, r, back in zip(xs, got[0], got[1][::-1]):
        _check_entry(x, r, decimals, significant)
        _check_entry(x, back, decimals, significant)


@given(st.integers(-10**12, 10**12), st.integers(0, 20), st.integers(1, 40), st.data())
def test_round_stage_at_and_around_boundaries(k, places, bits, data):
    """Exact ties and balls straddling a boundary: never a wrong digit.

    Ties ``(k + 1/2) * 10**-places`` (decimals) and their significant-digit
    counterparts, as exact balls (dyadic ties are exact in binary) and as balls of
    radius 2**-bits units around them, which straddle the tie and must be undecided.
    """
    decimals, significant = _mode(data)
    if decimals is not None:
        tie = (Fraction(k) + Fraction(1, 2)) / Fraction(10) ** decimals
    else:
        digits = max(significant, len(str(abs(k))))
        tie = (Fraction(k) + Fraction(1, 2)) / Fraction(10) ** (digits - significant + places)
    unit = Fraction(1, 10 ** 60)
    for ball, value in ((_ball(tie, 300), tie),
                        (_ball(tie, 300, Fraction(1, 2 ** bits) * abs(tie) * unit), None)):
        got = round_stage([[ball]], decimals=decimals, significant=significant)[0][0]
        if value is None or tie == 0:  # the ball straddles the tie (or holds 0)
            assert got is None or _sides_agree(ball, decimals, significant)
            if got is not None:
                lo, _ = ball_bounds(ball)
                assert got == round_fraction(lo, decimals=decimals, significant=significant)
        elif got is not None:
            assert _as_decimal(got, decimals) == _reference(value, decimals, significant)


def _sides_agree(ball: arb, decimals: int | None, significant: int | None) -> bool:
    """Whether both ends of a ball (exact dyadic rationals) round alike."""
    lo, hi = ball_bounds(ball)
    if significant is not None and lo <= 0 <= hi:
        return False
    return round_fraction(lo, decimals=decimals, significant=significant) == \
        round_fraction(hi, decimals=decimals, significant=significant)


@given(wide_fractions, st.integers(1, 200), st.data())
def test_round_stage_on_wide_balls_rounds_every_point_alike(x, bits, data):
    """A ball of radius 2**-bits * |x| (+ 2**-bits): decided only when its two ends
    round alike, and then to their common rounding."""
    decimals, significant = _mode(data)
    radius = Fraction(1, 2 ** bits) * (abs(x) + 1)
    ball = _ball(x, 400, radius)
    got = round_stage([[ball]], decimals=decimals, significant=significant)[0][0]
    if got is not None:
        assert _sides_agree(ball, decimals, significant)
        lo, _ = ball_bounds(ball)
        assert got == round_fraction(lo, decimals=decimals, significant=significant)


@given(st.integers(-10**6, 10**6), st.integers(1, 10**6), st.sampled_from(["exp", "sin",
                                                                          "sqrt"]),
       st.data())
def test_round_stage_matches_mpmath_on_transcendental_values(p, q, function, data):
    """exp, sin and sqrt of rationals: balls from Arb, digits from mpmath (120 digits)."""
    decimals, significant = _mode(data)
    x = Fraction(p, q)
    if function == "exp":
        x = Fraction(p % 212 - 200, q)  # values within the balls' accuracy
    if x == 0 or function == "sqrt" and all(
            round(abs(v) ** 0.5) ** 2 == abs(v) for v in (x.numerator, x.denominator)):
        return  # a rational value (exp(0), sin(0), sqrt(1/4)): ties are the other tests'
    prec = start_precision(decimals, significant)
    ctx.prec = prec
    arg = arb(fmpq(x.numerator, x.denominator))
    ball = {"exp": arb.exp, "sin": arb.sin, "sqrt": lambda a: abs(a).sqrt()}[function](arg)
    with mpmath.workdps(160):
        marg = mpmath.mpf(x.numerator) / x.denominator
        value = {"exp": mpmath.exp, "sin": mpmath.sin,
                 "sqrt": lambda a: mpmath.sqrt(abs(a))}[function](marg)
        text = mpmath.nstr(value, 150, strip_zeros=False, min_fixed=-10**6, max_fixed=10**6)
    got = round_stage([[ball]], decimals=decimals, significant=significant)[0][0]
    with localcontext() as c:
        c.prec = 150
        c.rounding = ROUND_HALF_EVEN
        reference = Decimal(text)
        if decimals is not None:
            want = reference.quantize(Decimal(1).scaleb(-decimals))
        else:
            c.prec = significant
            want = +reference
    assert got is not None  # transcendental values are never this close to a tie
    assert _as_decimal(got, decimals) == want


@given(st.integers(-10**30, 10**30), st.integers(0, 100), st.data())
def test_round_stage_on_exact_dyadic_values_matches_decimal_module(n, bits, data):
    """Exact balls n / 2**bits (weights such as 0.125, exact ties such as 0.125 at two
    places or 2.5 at one digit, exact zeros): Arb reads them exactly (radius 0), and
    they are rounded exactly, half to even, like the decimal module."""
    decimals, significant = _mode(data)
    x = Fraction(n, 2 ** bits)
    ball = _ball(x, max(start_precision(decimals, significant), 2 * bits + 110))
    assert ball.rad() == 0
    got = round_stage([[ball]], decimals=decimals, significant=significant)[0][0]
    assert got is not None  # an exact value is always decided
    if x == 0 and significant is not None:
        assert got.significant() == "0"
    else:
        assert _as_decimal(got, decimals) == _reference(x, decimals, significant)
    assert got == round_fraction(x, decimals=decimals, significant=significant)


def test_round_stage_exact_ties_half_to_even():
    ctx.prec = 200
    balls = [[arb(fmpq(1, 8)), arb(fmpq(3, 8)), arb(fmpq(-5, 2)), arb(fmpq(7, 2))]]
    assert [r.fixed() for r in round_stage(balls, decimals=2)[0]] == \
        ["0.12", "0.38", "-2.50", "3.50"]
    assert [r.significant() for r in round_stage(balls, significant=1)[0]] == \
        ["0.1", "0.4", "-2", "4"]


def test_round_stage_whole_rows_and_masked_entries():
    ctx.prec = 200
    rows = [[arb(fmpq(1, 3)), None, arb(fmpq(-2, 3))], [arb(fmpq(3, 20)), arb(0), arb(5)]]
    got = round_stage(rows, decimals=2)
    assert [[r and r.fixed() for r in row] for row in got] == \
        [["0.33", None, "-0.67"], ["0.15", "0.00", "5.00"]]
    got = round_stage(rows, significant=3)
    assert [[r and r.significant() for r in row] for row in got] == \
        [["0.333", None, "-0.667"], ["0.150", "0", "5.00"]]  # an exact 0 prints as 0
    # a ball that holds 0 without being 0 has no significant digits yet: left open
    assert round_stage([[arb(0, fmpq(1, 10**30)), arb(fmpq(1, 10**40), fmpq(1, 10**30))]],
                       significant=3) == [[None, None]]
    assert round_stage(rows[:1], decimals=1)[0][0].fixed() == "0.3"
    # 0.15 at one decimal straddles the tie 0.15 (not dyadic): left to the per-entry path
    assert round_stage([[arb(fmpq(3, 20))]], decimals=1) == [[None]]
    # 9.996 to 3 digits carries to 10.0; 0.99996 to 3 digits is 1.00
    assert round_stage([[arb(fmpq(9996, 1000))]], significant=3)[0][0].significant() == "10.0"
    assert round_stage([[arb(fmpq(99996, 100000))]], significant=3)[0][0].significant() \
        == "1.00"


# -- the precision ceiling: balls of ~19,700 digits --------------------------------------

@given(st.integers(min_value=-(10 ** 60), max_value=10 ** 60) | st.integers(0, 5000).map(
    lambda k: 10 ** k) | st.integers(1, 5000).map(lambda k: 10 ** k - 1))
def test_digit_count_is_the_length_of_the_decimal_text(n):
    from symformer.engine.rounding import digit_count

    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        assert digit_count(n) == len(str(abs(n)))
    finally:
        sys.set_int_max_str_digits(old)


def test_a_tie_read_at_the_precision_ceiling_does_not_raise():
    """0.15 at one decimal, in balls of 2^16 bits: Python refuses str() of integers of
    more than 4300 digits, which the decimal read of such a ball gives."""
    from symformer.engine.rounding import MAX_PRECISION, round_ball

    old = ctx.prec
    ctx.prec = MAX_PRECISION
    try:
        assert round_ball(arb(3) / 20, decimals=1) is None  # straddles the tie: undecided
        assert round_ball(arb(1) / 3, decimals=1).fixed() == "0.3"
    finally:
        ctx.prec = old


def test_a_value_of_exp_minus_1e9_is_never_a_fraction():
    """6 significant digits of an exp(-1e9)-small weight: 10**-434,294,487 is refused
    as an exact number and as positional text in one line, drawn at 0, converted to
    float as Python's own parser does (instantly: these hung for minutes)."""
    tiny = Rounded(123457, -434294487)
    for made in (tiny.value, tiny.fixed):
        with pytest.raises(NotSupportedError, match="1e-434294487 is too small"):
            made()
    assert tiny.clipped(300) == 0 and float(tiny) == 0.0
    assert tiny.significant() == "1.23457e-434294482"
    assert display_value(tiny.significant()) == 0
    assert Rounded(123457, -306).clipped(300) == 0  # 1.2e-301 < 10^-300
    assert Rounded(123457, -305).clipped(300) == Fraction(123457, 10 ** 305)
    assert float(Rounded(-15, -1)) == -1.5


@given(st.integers(min_value=100, max_value=10 ** 9990), st.booleans())
@example(10 ** 5000 + 7, True)
@example(3 * 10 ** 9989 + 12345, False)
@settings(max_examples=30, deadline=None)
def test_numbers_past_python_4300_digits(n, negative):
    """int_text, decimal_fraction and fixed() at any digit count (Python's str and
    Fraction refuse more than 4,300 digits: an internal error before; values are
    printed up to 1e10000), against str with the limit lifted."""
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        expected = str(n)
    finally:
        sys.set_int_max_str_digits(limit)
    sign, m = ("-", -n) if negative else ("", n)
    assert int_text(m) == sign + expected
    assert decimal_fraction(sign + expected + ".5") == m + (-1 if negative else 1) * Fraction(1, 2)
    assert Rounded(m, -2).fixed() == f"{sign}{expected[:-2]}.{expected[-2:]}"
