"""LayerNorm's variance around the row's mean: biased (divide by d) or unbiased (d - 1)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from flint import arb

from symformer.engine.arbmath import ArbMatrix, relu_ball
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation
from symformer.ops.calculus import Arithmetic, Rows


def variance(x, mu, m):
    """sigma^2 = (1/m) sum_j (x_j - mu)^2 per token, m = d (biased) or d - 1: (n, 1)."""
    return 1 / m * np.sum((x - mu) ** 2, axis=-1, keepdims=True)


def variance_backward_x(g, x, mu, m):
    """dL/dx_j = dL/dsigma^2 * 2 (x_j - mu) / m."""
    return g * 2 / m * (x - mu)


def variance_backward_mu(g, x, mu, m):
    """dL/dmu = -dL/dsigma^2 * 2 / m * sum_j (x_j - mu) (0 when mu is the row's mean)."""
    return -g * 2 / m * np.sum(x - mu, axis=-1, keepdims=True)


@dataclass(frozen=True)
class RowVariance(Operation):
    """Each row's variance around the given mean (``unbiased``: divided by d - 1)."""

    unbiased: bool = False
    notation: Notation | None = None

    name = "variance"
    norm_statistic = True
    per_row = True
    reference_function = variance
    default_notation = Notation(r"\sigma^2", "σ²", "Variance")
    trace_step = "folded"
    rational = True
    nonnegative = True

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        count = "d - 1" if self.unbiased else "d"
        return IndexEquation(
            (f"sigma2[i] = 1 / ({count}) * sum((r[i, j] - mu[i]) ** 2 for j in range(d))",),
            {"sigma2": "out", "r": "in0", "mu": "in1"}, sizes={"d": ("r", 1)})

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        count = "d - 1" if self.unbiased else "d"
        if wrt == 0:
            return IndexEquation(
                (f"dr[i, j] = 2 * dsigma2[i] * (r[i, j] - mu[i]) / ({count})",),
                {"dr": "result", "dsigma2": "grad", "r": "in0", "mu": "in1"},
                sizes={"d": ("r", 1)})
        return IndexEquation(
            (f"dmu[i] = -2 * dsigma2[i] * sum(r[i, j] - mu[i] for j in range(d)) / ({count})",),
            {"dmu": "result", "dsigma2": "grad", "r": "in0", "mu": "in1"},
            sizes={"d": ("r", 1)}, remark="zero: the entries are centred on their own mean")

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        X, mu = args
        n = X.cols - 1 if self.unbiased else X.cols
        return sympy.Matrix(X.rows, 1, lambda i, _: sympy.Add(
            *[(x - mu[i, 0]) ** 2 for x in X.row(i)]) / n)

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        X, mu = args
        out = []
        for row, (m,) in zip(X, mu):
            n = len(row) - 1 if self.unbiased else len(row)
            # x * x, not x ** 2 (NaN on a ball containing 0); clipped at 0 like a square.
            out.append([sum((relu_ball((x - m) * (x - m)) for x in row), arb(0)) / n])
        return out

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        (x, mu), (d, dmu) = x0, dx
        out = []
        for row, (m,), drow, (dm,) in zip(x, mu, d, dmu):
            n = len(row) - 1 if self.unbiased else len(row)
            total = sum(((dv - dm) * (2 * (v - m) + dv - dm) for v, dv in zip(row, drow)),
                        arb(0))
            out.append([total / n])
        return out

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        x, mu = args
        return x, mu, dtype(x.shape[-1] - 1 if self.unbiased else x.shape[-1])

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """dsigma^2/dx_j = 2 (x_j - mu) / n, and dsigma^2/dmu = 0.

        The variance is always composed with the mean of the same x (as LayerNorm
        does), so mu = (1/d) sum_k x_k: the rule writes x_j - mu with that sum, whose
        total over the row cancels on sight (the LayerNorm input gradient's row sum
        is then proved 0 in a few steps), and dsigma^2/dmu = -2 sum_j (x_j - mu) / n
        is the exact 0 it equals.
        """
        X = args[0]
        result = []
        for row, (g,) in zip(X, grad):
            n = len(row) - 1 if self.unbiased else len(row)
            m = num.total(row) / len(row)
            result.append([g * 2 * (x - m) / n for x in row] if wrt == 0 else [num.zero()])
        return result

    def backward_function(self, wrt: int | str):
        return variance_backward_x if wrt == 0 else variance_backward_mu

    def backward_arguments(self, wrt, args, out, grad, dtype):
        x, mu, m = self.arguments([a.astype(dtype) for a in args], dtype)
        return grad.astype(dtype), x, mu, m
