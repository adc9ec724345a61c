"""LayerNorm's mean: each token's mean over its d dimensions (a column)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from flint import arb

from symformer.engine.arbmath import ArbMatrix
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation
from symformer.ops.calculus import Arithmetic, Rows


def mean(x, d):
    """mu = (1/d) sum_j x_j for each token: (n, d) -> (n, 1)."""
    return 1 / d * np.sum(x, axis=-1, keepdims=True)


def mean_backward(g, x, d):
    """dL/dx_j = dL/dmu / d for each of the row's d entries: (n, 1) -> (n, d)."""
    return np.full(x.shape, g / d)


@dataclass(frozen=True)
class RowMean(Operation):
    """Each row's mean."""

    notation: Notation | None = None

    name = "mean"
    norm_statistic = True
    per_row = True
    reference_function = mean
    default_notation = Notation(r"\mu", "μ", "Mean")
    trace_step = "folded"
    rational = True

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(("mu[i] = 1 / d * sum(r[i, j] for j in range(d))",),
                             {"mu": "out", "r": "in0"}, sizes={"d": ("r", 1)})

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        return IndexEquation(("dr[i, j] = dmu[i] / d",), {"dr": "result", "dmu": "grad"},
                             sizes={"d": ("dr", 1)})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        X = args[0]
        return sympy.Matrix(X.rows, 1, lambda i, _: sympy.Add(*X.row(i)) / X.cols)

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return [[sum(row, arb(0)) / len(row)] for row in args[0]]

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        return self.arb(dx)  # linear

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return args[0], dtype(args[0].shape[-1])

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """dmu/dx_j = 1/d: each entry of the row gets the row's gradient over d."""
        return [[g / len(row) for _ in row] for row, (g,) in zip(args[0], grad)]

    def backward_function(self, wrt: int | str):
        return mean_backward

    def backward_arguments(self, wrt, args, out, grad, dtype):
        return grad.astype(dtype), args[0].astype(dtype), args[0].shape[-1]
