"""Learned positional embeddings: the first n rows of an exact table (GPT-2's wpe)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from flint import arb

from symformer.engine.arbmath import ArbMatrix, constant_balls
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.ops.base import OPERATIONS, Notation, Operation, matrix
from symformer.ops.calculus import Arithmetic, Rows


def learned_positions(P, pos):
    """PE[pos] = P[pos] for pos = 0..n-1: the table's first n rows, (n, d)."""
    return P[pos]


def learned_positions_backward(G):
    """dL/dP[pos] = G: the row of the table read at position pos gets that position's
    gradient (only the rows read, start .. start + n - 1; each is read once)."""
    return G


@dataclass(frozen=True)
class LearnedPositional(Operation):
    """Rows ``start .. start + n - 1`` of the exact table ``P`` (a stage with no inputs)."""

    P: sympy.Matrix
    n: int
    start: int = 0
    notation: Notation | None = None

    name = "learned_positional"
    lookup = "positions"
    reference_function = learned_positions
    default_notation = Notation(r"\mathrm{PE}", "PE", "Positional embedding (learned)")
    rational = True

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        index = f"i + {self.start}" if self.start else "i"
        return IndexEquation((f"PE[i, j] = P[{index}, j]",),
                             {"PE": "out", "P": "param:positional_embeddings"},
                             symbols={"P": ("P", "P")})

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        return IndexEquation(("dP[i, j] = dPE[i, j]",), {"dP": "result", "dPE": "grad"},
                             remark=f"row {self.start} + i of the table" if self.start else "")

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return self.P[self.start:self.start + self.n, :]

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        table = constant_balls(self.P)
        return [list(table[self.start + i]) for i in range(self.n)]

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        return [[arb(0) for _ in row] for row in self.arb([])]  # a constant

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[np.ndarray]:
        return matrix(self.P, dtype), np.arange(self.start, self.start + self.n)

    def parameters(self) -> dict[str, sympy.Matrix]:
        """The learned table (its gradient has only the rows read, start .. start + n - 1)."""
        return {"positional_embeddings": self.P}

    def parameter_notation(self, name: str) -> Notation:
        """The table the rows are read from: P (its gradient dL/dP)."""
        return Notation("P", "P", "the learned positional table")

    def staged(self) -> Operation:
        """The rows read from a stage holding the whole table (``train``'s trained table,
        :mod:`symformer.ops.staged_positional`, found in the registry)."""
        return OPERATIONS["staged_positional"](self.n, self.start, self.notation)

    def used_rows(self) -> list[int]:
        """The table's rows read, in order: start .. start + n - 1."""
        return list(range(self.start, self.start + self.n))

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """Row start + i of dL/dP is dL/dPE at position i (each row is read once)."""
        return [list(row) for row in grad]

    def backward_function(self, wrt: int | str):
        return learned_positions_backward

    def backward_arguments(self, wrt: int | str, args: Sequence[np.ndarray], out: np.ndarray,
                           grad: np.ndarray, dtype: type) -> Sequence[Any]:
        return (grad.astype(dtype),)
