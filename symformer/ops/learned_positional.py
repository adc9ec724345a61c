"""Learned positional embeddings: the first n rows of a table (GPT-2's wpe).

The table is an exact constant, or (``from_stages``, a training step's:
:mod:`symformer.blocks.train`) a stage holding the whole table
(``step0.positional_embeddings``, then the optimiser's updates).  The gradient of a
table read from a stage is the whole table's: the rows read get the gradient at their
positions, the others an exact 0 (so an SGD step leaves them exactly as they were).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from flint import arb

from symformer.engine.arbmath import ArbMatrix, constant_balls
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation, matrix
from symformer.ops.calculus import Arithmetic, Rows
from symformer.ops.embedding import embed_backward


def learned_positions(P, pos):
    """PE[pos] = P[pos] for pos = 0..n-1: the table's first n rows, (n, d)."""
    return P[pos]


def learned_positions_backward(G):
    """dL/dP[pos] = G: the row of the table read at position pos gets that position's
    gradient (only the rows read, start .. start + n - 1; each is read once)."""
    return G


@dataclass(frozen=True)
class LearnedPositional(Operation):
    """Rows ``start .. start + n - 1`` of the exact table ``P`` (a stage with no inputs).

    ``from_stages``: the table is the one input stage; the field ``P`` is then the value
    it started from, not read (see :meth:`Operation.staged`).
    """

    P: sympy.Matrix
    n: int
    start: int = 0
    notation: Notation | None = None
    from_stages: bool = False

    name = "learned_positional"
    part_of_block = "input"
    encodes_positions = True
    lookup = "positions"
    hf_positions = {"absolute": "learned"}
    reference_function = learned_positions
    default_notation = Notation(r"\mathrm{PE}", "PE", "Positional embedding (learned)")
    rational = True

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation | None:
        if self.from_stages:
            return None
        index = f"i + {self.start}" if self.start else "i"
        return IndexEquation((f"PE[i, j] = P[{index}, j]",),
                             {"PE": "out", "P": "param:positional_embeddings"},
                             symbols={"P": ("P", "P")})

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation | None:
        if self.from_stages:
            return None
        return IndexEquation(("dP[i, j] = dPE[i, j]",), {"dP": "result", "dPE": "grad"},
                             remark=f"row {self.start} + i of the table" if self.start else "")

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        table = args[0] if self.from_stages else self.P
        return table[self.start:self.start + self.n, :]

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        table = args[0] if self.from_stages else constant_balls(self.P)
        return [list(table[self.start + i]) for i in range(self.n)]

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        if self.from_stages:
            return self.arb([dx[0]])  # a selection: linear in the table
        return [[arb(0) for _ in row] for row in self.arb([])]  # a constant

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[np.ndarray]:
        table = np.asarray(args[0], dtype=dtype) if self.from_stages else matrix(self.P, dtype)
        return table, np.arange(self.start, self.start + self.n)

    def parameters(self) -> dict[str, sympy.Matrix]:
        """The learned table (its gradient has only the rows read, start .. start + n - 1);
        none when it is a stage."""
        return {} if self.from_stages else {"positional_embeddings": self.P}

    def parameter_notation(self, name: str) -> Notation:
        """The table the rows are read from: W_P (its gradient dL/dW_P; as GPT's W_p: P
        is the probabilities' matrix)."""
        return Notation("W_{P}", "W_P", "the learned positional table")

    def staged(self) -> Operation | None:
        """The rows read from a stage holding the whole table (``train``'s trained table)."""
        return None if self.from_stages else replace(
            self, from_stages=True, notation=self.notation or TRAINED)

    def used_rows(self) -> list[int]:
        """The table's rows read, in order: start .. start + n - 1."""
        return list(range(self.start, self.start + self.n))

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """Row start + i of dL/dP is dL/dPE at position i (each row is read once); from a
        stage, every row of the table, the rows not read exactly 0."""
        if self.from_stages:
            d = len(args[0][0]) if args[0] else 0
            return [list(grad[r - self.start]) if self.start <= r < self.start + self.n
                    else [num.zero() for _ in range(d)] for r in range(len(args[0]))]
        return [list(row) for row in grad]

    def backward_function(self, wrt: int | str):
        # from a stage: S^T G with S the 0/1 matrix of the rows read
        return embed_backward if self.from_stages else learned_positions_backward

    def backward_arguments(self, wrt: int | str, args: Sequence[np.ndarray], out: np.ndarray,
                           grad: np.ndarray, dtype: type) -> Sequence[Any]:
        if self.from_stages:
            rows = np.asarray(args[0]).shape[0]
            S = np.array([[r == self.start + i for r in range(rows)] for i in range(self.n)],
                         dtype=dtype)
            return grad.astype(dtype), S
        return (grad.astype(dtype),)


#: A positional table's notation when trained, when its role gives it none.
TRAINED = Notation(r"\mathrm{PE}", "PE", "Positional embedding (trained table)")
