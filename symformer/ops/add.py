"""Element-wise sum of two stages: embeddings + positional encoding, residual connections."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from symformer.engine.arbmath import ArbMatrix
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation
from symformer.ops.calculus import Arithmetic, Rows


def add(x, y):
    """x + y, element-wise: (n, d)."""
    return x + y


def add_backward(g):
    """dL/dx = dL/dy = dL/dr: the gradient passes unchanged to both summands."""
    return g


@dataclass(frozen=True)
class Add(Operation):
    """``x + y`` (the input row, a residual sum)."""

    notation: Notation | None = None
    #: True for a residual connection's sum x + F(x) (a sub-layer's input and its
    #: output), not the input row's sum of embeddings: what the analysis of the
    #: inactive sub-layers reads (:mod:`symformer.analysis.inactive`).
    residual: bool = False

    name = "add"
    matrix_form = "sum"
    reference_function = add
    default_notation = Notation("r", "r", "Residual sum")
    rational = True

    @property
    def part_of_block(self) -> str:  # type: ignore[override]
        """A residual sum is in its sub-layer's Add & Norm; the input row's sum of the
        embeddings and the positional encoding is in the input."""
        return "add_norm" if self.residual else "input"

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(("r[i, j] = a[i, j] + b[i, j]",),
                             {"r": "out", "a": "in0", "b": "in1"})

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        return IndexEquation(("da[i, j] = dr[i, j]",), {"da": "result", "dr": "grad"})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return args[0] + args[1]

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        a, b = args
        return [[x + y for x, y in zip(ra, rb)] for ra, rb in zip(a, b)]

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        return self.arb(dx)  # linear

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[np.ndarray]:
        return args

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """d(x + y)/dx = d(x + y)/dy = 1: the gradient passes unchanged to both."""
        return grad

    def backward_entry(self, args: Sequence[sympy.Matrix], out: sympy.Matrix,
                       grad: sympy.Matrix, wrt: int | str, i: int, j: int) -> sympy.Expr:
        return grad[i, j]

    def backward_function(self, wrt: int | str):
        return add_backward

    def backward_arguments(self, wrt, args, out, grad, dtype):
        return (grad.astype(dtype),)
