"""Mean and variance over the WHOLE matrix (every token at once), repeated in each row.

What ``x.mean()`` and ``x.var()`` without an axis compute: a course's code does this
where LayerNorm normalises each token on its own; ``check`` and ``trace
--layer-norm whole_matrix`` use it to explain such numbers.
"""

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


def whole_mean(x, n, d):
    """The mean of every entry of the (n, d) matrix, repeated in a column: (n, 1)."""
    return np.full((n, 1), 1 / (n * d) * np.sum(x))


def whole_variance(x, mu, n, d):
    """The biased variance of every entry around the whole-matrix mean mu (a column
    holding one value), repeated in a column: (n, 1)."""
    return np.full((n, 1), 1 / (n * d) * np.sum((x - mu) ** 2))


def whole_mean_backward(g, n, d):
    """Every entry x_ij gets sum_k dL/dmu_k / (n d): each of the n repeated means
    reads every entry with weight 1/(n d)."""
    return np.full((n, d), np.sum(g) / (n * d))


def whole_variance_backward_x(g, x, mu, n, d):
    """dL/dx_ij = sum_k dL/dsigma^2_k * 2 (x_ij - mu) / (n d)."""
    return np.sum(g) * 2 / (n * d) * (x - mu)


def whole_variance_backward_mu(g, x, mu, e, n, d):
    """dL/dmu = -sum_k dL/dsigma^2_k * 2 / (n d) * sum_ij (x_ij - mu) (0 when mu is the mean).

    mu is one number repeated in n rows: its derivative goes to the first copy (the
    one the exact formula reads; e = (1, 0, ..., 0) as a column), the others get 0.
    """
    return -np.sum(g) * 2 / (n * d) * np.sum(x - mu) * e


@dataclass(frozen=True)
class WholeMean(Operation):
    """The mean of every entry of the matrix, repeated in each row (n x 1)."""

    notation: Notation | None = None

    name = "whole_mean"
    norm_statistic = True
    per_row = True
    whole_matrix = True
    reference_function = whole_mean
    default_notation = Notation(r"\mu", "μ", "Mean (whole matrix)")
    trace_step = "folded"
    rational = True

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(
            ("mu[i] = 1 / (n * d) * sum(r[ip, j] for ip in range(n) for j in range(d))",),
            {"mu": "out", "r": "in0"}, sizes={"n": ("r", 0), "d": ("r", 1)},
            remark="over every entry of the matrix: all tokens at once")

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        return IndexEquation(("dr[i, j] = sum(dmu[ip] for ip in range(n)) / (n * d)",),
                             {"dr": "result", "dmu": "grad"},
                             sizes={"n": ("dr", 0), "d": ("dr", 1)})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        X = args[0]
        mu = sympy.Add(*X) / (X.rows * X.cols)
        return sympy.Matrix(X.rows, 1, lambda i, _: mu)

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        X = args[0]
        mu = sum((x for row in X for x in row), arb(0)) / (len(X) * len(X[0]))
        return [[mu] for _ in X]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return args[0], *args[0].shape

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """Each of the n repeated means reads every entry with weight 1/(n d): every
        entry gets the sum of the column of gradients over n d."""
        X = args[0]
        share = num.total(g for (g,) in grad) / (len(X) * len(X[0]))
        return [[share for _ in row] for row in X]

    def backward_function(self, wrt: int | str):
        return whole_mean_backward

    def backward_arguments(self, wrt, args, out, grad, dtype):
        return grad.astype(dtype), *args[0].shape


@dataclass(frozen=True)
class WholeVariance(Operation):
    """The biased variance of every entry around the whole-matrix mean (n x 1)."""

    notation: Notation | None = None

    name = "whole_variance"
    norm_statistic = True
    per_row = True
    whole_matrix = True
    reference_function = whole_variance
    default_notation = Notation(r"\sigma^2", "σ²", "Variance (whole matrix)")
    trace_step = "folded"
    rational = True
    nonnegative = True

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(
            ("sigma2[i] = 1 / (n * d) * sum((r[ip, j] - mu[ip]) ** 2 for ip in range(n) "
             "for j in range(d))",),
            {"sigma2": "out", "r": "in0", "mu": "in1"}, sizes={"n": ("r", 0), "d": ("r", 1)},
            remark="over every entry of the matrix: all tokens at once")

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        if wrt == 0:
            return IndexEquation(
                ("dr[i, j] = 2 * sum(dsigma2[ip] for ip in range(n)) * (r[i, j] - mu[i]) "
                 "/ (n * d)",),
                {"dr": "result", "dsigma2": "grad", "r": "in0", "mu": "in1"},
                sizes={"n": ("r", 0), "d": ("r", 1)})
        return IndexEquation(
            ("dmu[i] = -2 * sum(dsigma2[ip] for ip in range(n)) * sum(r[ip, j] - mu[ip] "
             "for ip in range(n) for j in range(d)) / (n * d)",),
            {"dmu": "result", "dsigma2": "grad", "r": "in0", "mu": "in1"},
            sizes={"n": ("r", 0), "d": ("r", 1)},
            remark="zero: the entries are centred on their own mean")

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        X, mu = args
        var = sympy.Add(*[(x - mu[0, 0]) ** 2 for x in X]) / (X.rows * X.cols)
        return sympy.Matrix(X.rows, 1, lambda i, _: var)

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        X, mu = args
        m = mu[0][0]
        var = sum(((x - m) * (x - m) for row in X for x in row), arb(0)) / (len(X) * len(X[0]))
        return [[var] for _ in X]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return args[0], args[1], *args[0].shape

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """dsigma^2/dx_ij = 2 (x_ij - mu) / (n d) for each repeated copy, and dsigma^2/dmu = 0.

        As for the row variance, the variance is always taken around the whole
        matrix's own mean, so mu is written as the sum of every entry over n d (its
        total cancels on sight) and the derivative with respect to mu,
        -2 sum_ij (x_ij - mu) / (n d), is the exact 0 it equals.
        """
        X = args[0]
        N = len(X) * len(X[0])
        if wrt != 0:
            return [[num.zero()] for _ in X]
        share = num.total(g for (g,) in grad)
        m = num.total(x for row in X for x in row) / N
        return [[share * 2 * (x - m) / N for x in row] for row in X]

    def backward_function(self, wrt: int | str):
        return whole_variance_backward_x if wrt == 0 else whole_variance_backward_mu

    def backward_arguments(self, wrt, args, out, grad, dtype):
        x, mu, n, d = self.arguments([a.astype(dtype) for a in args], dtype)
        if wrt == 0:
            return grad.astype(dtype), x, mu, n, d
        e = (np.arange(n) == 0).astype(dtype)[:, None]
        return grad.astype(dtype), x, mu[0, 0], e, n, d
