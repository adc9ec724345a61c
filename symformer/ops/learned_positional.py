"""Learned positional embeddings: the first n rows of an exact table (GPT-2's wpe)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from flint import arb

from symformer.engine.arbmath import ArbMatrix, sympy_to_arb
from symformer.lazy import sympy
from symformer.ops.base import Notation, Operation, matrix


def learned_positions(P, pos):
    """PE[pos] = P[pos] for pos = 0..n-1: the table's first n rows, (n, d)."""
    return P[pos]


@dataclass(frozen=True)
class LearnedPositional(Operation):
    """Rows ``start .. start + n - 1`` of the exact table ``P`` (a stage with no inputs)."""

    P: sympy.Matrix
    n: int
    start: int = 0
    notation: Notation | None = None

    name = "learned_positional"
    reference_function = learned_positions
    default_notation = Notation(r"\mathrm{PE}", "PE", "Positional embedding (learned)")
    rational = True

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return self.P[self.start:self.start + self.n, :]

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return [[sympy_to_arb(v) for v in self.P.row(self.start + i)] for i in range(self.n)]

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        return [[arb(0) for _ in row] for row in self.arb([])]  # a constant

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[np.ndarray]:
        return matrix(self.P, dtype), np.arange(self.start, self.start + self.n)
