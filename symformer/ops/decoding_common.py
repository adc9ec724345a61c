"""What the decoding operations share: a decided row (a mask, a rank, a draw) as a stage.

A decoding decision (top-k's, top-p's, min-p's mask, the drawn token) is decided once,
exactly, by :mod:`symformer.blocks.decoding` (certified balls, ties and boundary
equalities proved); the operation holds the decided integers, so its local formula
and its balls are those integers, and its NumPy function recomputes the decision in
floats (what ``crosscheck`` compares).
"""

from __future__ import annotations

from collections.abc import Sequence

from flint import arb

from symformer.engine.arbmath import NEG_INF, ArbMatrix, rational_ball
from symformer.lazy import sympy


def decided_row(values: Sequence[int]) -> sympy.Matrix:
    """The decided integers as a 1 x V SymPy matrix."""
    return sympy.Matrix([[int(v) for v in values]])


def decided_balls(values: Sequence[int]) -> ArbMatrix:
    """The decided integers as exact balls (one row)."""
    return [[arb(int(v)) for v in values]]


def scaled_row(row: Sequence[arb | None], factor: object, divide: bool = False
               ) -> list[arb | None]:
    """Each ball times (or over) the exact ``factor``; a masked entry (-inf) stays masked."""
    c = rational_ball(factor)
    return [NEG_INF if x is NEG_INF else (x / c if divide else x * c) for x in row]
