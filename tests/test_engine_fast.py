"""The engine's loop helpers (symformer.engine.fast) change no state and no value."""

from __future__ import annotations

import gc
from decimal import ROUND_HALF_EVEN, Context, Decimal
from fractions import Fraction

import flint
import pytest
from flint import arb, fmpq

from symformer.engine.fast import collection_paused, working
from symformer.engine.rounding import round_stage


def test_collection_paused_restores_the_collector():
    assert gc.isenabled()
    with collection_paused():
        assert not gc.isenabled()
        with collection_paused():  # nested: still paused, and not re-enabled early
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collection_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()
    gc.disable()
    try:  # paused by the caller: left paused
        with collection_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_working_sets_and_restores_the_precision():
    saved = flint.ctx.prec
    with working(300):
        assert flint.ctx.prec == 300 and not gc.isenabled()
    assert flint.ctx.prec == saved and gc.isenabled()
    with pytest.raises(ValueError), working(77):
        raise ValueError("boom")
    assert flint.ctx.prec == saved and gc.isenabled()


@pytest.mark.parametrize("ambient", [53, 1000, 53])
def test_stage_rounding_is_independent_of_the_callers_precision(ambient):
    """30 significant digits of k/7 and -k/13 (every magnitude from 1e-12 to 1e12) from
    256-bit balls, against Python's decimal module (correctly rounded, half to even),
    whatever the precision the caller runs at (the rounding keeps balls per precision)."""
    values = [Fraction(k, 7) * Fraction(10) ** (k % 25 - 12) for k in range(1, 60)]
    values += [Fraction(-k, 13) for k in range(1, 30)]
    saved = flint.ctx.prec
    try:
        flint.ctx.prec = 256
        balls = [[arb(fmpq(v.numerator, v.denominator)) for v in values]]
        flint.ctx.prec = ambient
        rounded = round_stage(balls, significant=30)[0]
    finally:
        flint.ctx.prec = saved
    context = Context(prec=30, rounding=ROUND_HALF_EVEN)
    for v, r in zip(values, rounded):
        expected = context.divide(Decimal(v.numerator), Decimal(v.denominator))
        assert r is not None and r.value() == Fraction(expected), (v, r)


@pytest.mark.parametrize("significant", [1, 2, 5, 30])
def test_round_values_and_their_neighbours(significant):
    """Powers of ten (0.1 as a ball, 1 and 100 exact) and values 1e-40 relatively just
    below and above them, each read after an entry of its own size (so the stage's
    guess, not a first read, decides it), against the decimal module."""
    values = []
    for k in range(-6, 7):
        p = Fraction(10) ** k
        for v in (p, p * (1 - Fraction(1, 10**40)), p * (1 + Fraction(1, 10**40))):
            values += [v * Fraction(13, 7), v, -v * Fraction(13, 7), -v]  # no ties
    saved = flint.ctx.prec
    try:
        flint.ctx.prec = 512
        balls = [[arb(fmpq(v.numerator, v.denominator)) for v in values]]
        rounded = round_stage(balls, significant=significant)[0]
    finally:
        flint.ctx.prec = saved
    context = Context(prec=significant, rounding=ROUND_HALF_EVEN)
    for v, r in zip(values, rounded):
        expected = context.divide(Decimal(v.numerator), Decimal(v.denominator))
        assert r is not None and r.value() == Fraction(expected), (v, r)
        digits = abs(r.digits)
        assert 10 ** (significant - 1) <= digits < 10 ** significant, (v, r)
