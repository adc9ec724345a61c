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
