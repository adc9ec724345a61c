"""A projection ``x W + b`` whose weight and bias are stages: a training step's weights.

After an exact optimisation step the weights are no longer rational (they hold
softmaxes and square roots), so ``train`` makes them stages of the graph
(:mod:`symformer.ops.parameter`, :mod:`symformer.ops.sgd`, :mod:`symformer.ops.adam`)
and the next step's projections read them by name: the local formula stays
``q_0 = x_0 W[0,0] + x_1 W[1,0]``, however many steps came before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from flint import arb

from symformer.engine.arbmath import ArbMatrix
from symformer.lazy import sympy
from symformer.ops.base import Notation, Operation, Spelling
from symformer.ops.calculus import Arithmetic, Rows, matmul, transpose
from symformer.ops.projection import (
    affine,
    bias_backward,
    project,
    project_backward_W,
    project_backward_X,
)


@dataclass(frozen=True)
class StagedProjection(Operation):
    """``X @ W (+ b)`` with inputs X, W (and b, a 1 x d_out stage, when ``has_bias``)."""

    has_bias: bool = False
    notation: Notation | None = None
    weight: str = "W"
    bias: str = "b"
    #: What the output columns are ("vocab" for logits; see Operation.columns).
    columns: str = "dims"

    name = "staged_projection"
    reference_function = project
    default_notation = Notation("y", "y", "Projection (trained weights)")
    rational = True

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        out = args[0] * args[1]
        if self.has_bias:
            out += sympy.Matrix.vstack(*[args[2]] * out.rows)
        return out

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        X, W = args[0], args[1]
        out = []
        for row in X:
            out_row = []
            for j in range(len(W[0])):
                total = args[2][0][j] if self.has_bias else arb(0)
                for k, x in enumerate(row):
                    total += x * W[k][j]
                out_row.append(total)
            out.append(out_row)
        return out

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        # a finite mask perturbs X only (weights are never masked): linear in X
        return StagedProjection().arb([dx[0], x0[1]])

    def function(self):
        return affine if self.has_bias else project

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return tuple(np.asarray(a, dtype=dtype) for a in args)

    def spelling(self) -> Spelling:
        return Spelling(names={"W": self.weight, "b": self.bias})

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """Y = X W + b: dL/dX = G W^T, dL/dW = X^T G, dL/db = the column sums of G."""
        if wrt == 0:
            return matmul(grad, transpose(args[1]), num)
        if wrt == 1:
            return matmul(transpose(args[0]), grad, num)
        return [[num.total(column) for column in transpose(grad)]]

    def backward_function(self, wrt: int | str):
        return {0: project_backward_X, 1: project_backward_W, 2: bias_backward}[wrt]

    def backward_arguments(self, wrt, args, out, grad, dtype):
        G, (X, W) = grad.astype(dtype), (a.astype(dtype) for a in args[:2])
        return {0: (G, W), 1: (X, G), 2: (G,)}[wrt]
