"""Sinusoidal positional encoding (base 10000), exact: ``sin(1)`` stays ``sin(1)``.

PE[pos, 2i] = sin(pos / 10000^(2i/d)) and PE[pos, 2i+1] = cos(pos / 10000^(2i/d)):
dimensions 0, 2, ... are sines, 1, 3, ... cosines (positions and dimensions
counted from 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import sympy
from flint import arb

from symformer.engine.arbmath import ArbMatrix, sympy_to_arb
from symformer.ops.base import Notation, Operation


def pe_even(pos, i, d_model):
    """PE[pos, 2i]: the sine of dimension 2i."""
    return np.sin(pos / 10000 ** (2 * i / d_model))


def pe_odd(pos, i, d_model):
    """PE[pos, 2i+1]: the cosine of dimension 2i+1."""
    return np.cos(pos / 10000 ** (2 * i / d_model))


def sinusoidal(n, d_model):
    """The table (n, d_model): pe_even on the columns 2i, pe_odd on 2i+1."""
    pe = np.zeros((n, d_model))
    for pos in range(n):
        for j in range(d_model):
            pe[pos, j] = (pe_even if j % 2 == 0 else pe_odd)(pos, j // 2, d_model)
    return pe


def sinusoidal_base(n, d_model, base):
    """The table (n, d_model) with another base: sin/cos(pos / base^(2i/d_model))."""
    pos, j = np.arange(n)[:, None], np.arange(d_model)[None, :]
    angle = pos / base ** ((j - j % 2) / d_model)
    return np.where(j % 2 == 0, np.sin(angle), np.cos(angle))


def positional_encoding(seq_len: int, d_model: int, kind: str = "sinusoidal",
                        base: int | sympy.Rational = 10000) -> sympy.Matrix:
    """The exact table: sinusoidal (``base``, default 10000), or zeros for any other
    ``kind`` (``"none"``; ``"rope"`` rotates queries and keys instead)."""
    if kind != "sinusoidal":
        return sympy.zeros(seq_len, d_model)

    def entry(pos: int, j: int) -> sympy.Expr:
        angle = sympy.Integer(pos) * sympy.Rational(base) ** sympy.Rational(-(j - j % 2),
                                                                          d_model)
        return sympy.sin(angle) if j % 2 == 0 else sympy.cos(angle)

    return sympy.Matrix(seq_len, d_model, entry)


@dataclass(frozen=True)
class PositionalEncoding(Operation):
    """The positional-encoding table of ``n`` positions (a stage with no inputs)."""

    n: int
    d_model: int
    kind: str = "sinusoidal"
    notation: Notation | None = None
    base: sympy.Rational = sympy.Integer(10000)

    name = "positional_encoding"
    reference_function = sinusoidal
    default_notation = Notation(r"\mathrm{PE}", "PE", "Positional encoding")

    @cached_property
    def table(self) -> sympy.Matrix:
        """The exact table."""
        return positional_encoding(self.n, self.d_model, self.kind, self.base)

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return self.table

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return [[sympy_to_arb(v) for v in self.table.row(i)] for i in range(self.n)]

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        return [[arb(0) for _ in row] for row in self.arb([])]  # a constant

    def reference(self, args: Sequence[np.ndarray], dtype: type = np.float64) -> np.ndarray:
        if self.kind != "sinusoidal":
            return np.zeros((self.n, self.d_model), dtype=dtype)
        if self.base != 10000:
            return sinusoidal_base(self.n, self.d_model, float(self.base)).astype(dtype)
        return sinusoidal(self.n, self.d_model).astype(dtype)
