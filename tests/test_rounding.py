"""Certified rounding against Python's decimal module (an independent implementation)."""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from fractions import Fraction

from flint import arb, ctx, fmpq
from hypothesis import given
from hypothesis import strategies as st

from symformer.engine.rounding import round_ball, round_fraction

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
