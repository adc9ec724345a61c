"""Learned positional embeddings whose table is a stage: a training step's table.

``train`` makes the whole learned table a stage (``step0.positional_embeddings``,
then the optimiser's updates); this operation reads its rows ``start .. start +
n - 1``.  Its gradient is the whole table's: those rows get the gradient at their
positions, the others an exact 0 (so an SGD step leaves them exactly as they were).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from symformer.engine.arbmath import ArbMatrix
from symformer.lazy import sympy
from symformer.ops.base import Notation, Operation
from symformer.ops.calculus import Arithmetic, Rows
from symformer.ops.embedding import embed_backward
from symformer.ops.learned_positional import learned_positions


@dataclass(frozen=True)
class StagedPositional(Operation):
    """Rows ``start .. start + n - 1`` of the input stage (the learned table)."""

    n: int
    start: int = 0
    notation: Notation | None = None

    name = "staged_positional"
    reference_function = learned_positions
    default_notation = Notation(r"\mathrm{PE}", "PE", "Positional embedding (trained table)")
    rational = True

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return args[0][self.start:self.start + self.n, :]

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return [list(args[0][self.start + i]) for i in range(self.n)]

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        return self.arb([dx[0]])  # a selection: linear in the table

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return np.asarray(args[0], dtype=dtype), np.arange(self.start, self.start + self.n)

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """Row start + i of dL/dP is dL/dPE at position i; the other rows are 0."""
        d = len(args[0][0]) if args[0] else 0
        return [list(grad[r - self.start]) if self.start <= r < self.start + self.n
                else [num.zero() for _ in range(d)] for r in range(len(args[0]))]

    def backward_function(self, wrt: int | str):
        return embed_backward  # S^T G with S the 0/1 matrix of the rows read

    def backward_arguments(self, wrt, args, out, grad, dtype):
        rows = np.asarray(args[0]).shape[0]
        S = np.array([[r == self.start + i for r in range(rows)] for i in range(self.n)],
                     dtype=dtype)
        return grad.astype(dtype), S
