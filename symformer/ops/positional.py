"""Sinusoidal positional encoding (base 10000), exact: ``sin(1)`` stays ``sin(1)``.

PE[pos, 2i] = sin(pos / 10000^(2i/d)) and PE[pos, 2i+1] = cos(pos / 10000^(2i/d)):
dimensions 0, 2, ... are sines, 1, 3, ... cosines (positions and dimensions
counted from 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
from flint import arb, fmpq

from symformer.engine.arbmath import ArbMatrix, rational_ball
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation
from symformer.ops.facts import FALSE, PROVED, Fact
from symformer.ops.rope import PAIR, POSITION

if TYPE_CHECKING:
    from symformer.engine.graph import Stage


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


def sinusoidal_base(pos, two_i, even, d_model, base):
    """The table with another base: sin on the even columns 2i, cos on the odd 2i+1."""
    return np.where(even, np.sin(pos / base ** (two_i / d_model)),
                    np.cos(pos / base ** (two_i / d_model)))


def no_positions(n, d_model):
    """No positional encoding: the zero table (n, d_model)."""
    return np.zeros((n, d_model))


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
    base: int | sympy.Rational = 10000

    name = "positional_encoding"
    part_of_block = "input"
    encodes_positions = True
    reference_function = sinusoidal
    default_notation = Notation(r"\mathrm{PE}", "PE", "Positional encoding")

    @property
    def adds_nothing(self) -> bool:  # type: ignore[override]
        """A RoPE model's (or a model without positions') table: all zeros."""
        return self.kind != "sinusoidal"

    @cached_property
    def table(self) -> sympy.Matrix:
        """The exact table."""
        return positional_encoding(self.n, self.d_model, self.kind, self.base)

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        p, c = POSITION.text, PAIR.text  # RoPE's letters: pos, l
        if self.kind != "sinusoidal":
            return IndexEquation((f"PE[{p}, j] = 0",), {"PE": "out"})
        angle = f"{p} / base ** (2 * {c} / d_model)"
        return IndexEquation((f"PE[{p}, 2 * {c}] = sin({angle})",
                              f"PE[{p}, 2 * {c} + 1] = cos({angle})"),
                             {"PE": "out"}, sizes={"d_model": ("PE", 1)},
                             scalars={"base": self.base},
                             symbols={"base": (sympy.latex(sympy.sympify(self.base)),
                                               str(self.base))})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return self.table

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        if self.kind != "sinusoidal":
            return [[arb(0) for _ in range(self.d_model)] for _ in range(self.n)]
        # The table's own formula in balls, without building its SymPy constants.
        base = rational_ball(self.base)
        rates = [base ** arb(fmpq(-(j - j % 2), self.d_model)) for j in range(self.d_model)]
        return [[(arb(pos) * rate).sin() if j % 2 == 0 else (arb(pos) * rate).cos()
                 for j, rate in enumerate(rates)] for pos in range(self.n)]

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        return [[arb(0) for _ in row] for row in self.arb([])]  # a constant

    def facts(self, stage: Stage) -> list[Fact]:
        """Every entry lies in [-1, 1]: each is a sine or a cosine (or 0 without PE).

        One fact for every positional-encoding stage (``pe_bounded``): ``prove``
        merges those of the encoder and the decoder.
        """
        statement = "positional encodings lie in [-1, 1]"
        pe = stage.local
        for i in range(pe.rows):
            for j in range(pe.cols):
                e = pe[i, j]
                if not (isinstance(e, (sympy.sin, sympy.cos)) and e.args[0].is_real
                        or e.is_Rational and abs(e) <= 1):
                    return [Fact("pe_bounded", statement, FALSE, f"{stage.name}[{i},{j}] = {e}")]
        return [Fact("pe_bounded", statement, PROVED,
                     "every entry is sin or cos of a real angle (or 0, 1)")]

    def function(self):
        if self.kind != "sinusoidal":
            return no_positions
        return sinusoidal if self.base == 10000 else sinusoidal_base

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        if self.kind == "sinusoidal" and self.base != 10000:
            pos, j = np.arange(self.n)[:, None], np.arange(self.d_model)[None, :]
            return pos, j - j % 2, j % 2 == 0, self.d_model, dtype(float(self.base))
        return self.n, self.d_model
