"""Mean and variance over the WHOLE matrix (every token at once), repeated in each row.

What ``x.mean()`` and ``x.var()`` without an axis compute: a course's code does this
where LayerNorm normalises each token on its own; ``check`` and ``trace
--layer-norm whole_matrix`` use it to explain such numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import sympy
from flint import arb

from symformer.engine.arbmath import ArbMatrix
from symformer.ops.base import Notation, Operation


def whole_mean(x):
    """The mean of every entry of the matrix, as a column: (n, 1)."""
    return np.full((x.shape[0], 1), np.mean(x), dtype=x.dtype)


def whole_variance(x, mu):
    """The biased variance of every entry around the whole-matrix mean, as a column: (n, 1)."""
    return np.full((x.shape[0], 1), np.mean((x - mu[0, 0]) ** 2), dtype=x.dtype)


@dataclass(frozen=True)
class WholeMean(Operation):
    """The mean of every entry of the matrix, repeated in each row (n x 1)."""

    notation: Notation | None = None

    name = "whole_mean"
    reference_function = whole_mean
    default_notation = Notation(r"\mu", "μ", "Mean (whole matrix)")
    rational = True

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        X = args[0]
        mu = sympy.Add(*X) / (X.rows * X.cols)
        return sympy.Matrix(X.rows, 1, lambda i, _: mu)

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        X = args[0]
        mu = sum((x for row in X for x in row), arb(0)) / (len(X) * len(X[0]))
        return [[mu] for _ in X]

    def reference(self, args: Sequence[np.ndarray], dtype: type = np.float64) -> np.ndarray:
        return whole_mean(args[0])


@dataclass(frozen=True)
class WholeVariance(Operation):
    """The biased variance of every entry around the whole-matrix mean (n x 1)."""

    notation: Notation | None = None

    name = "whole_variance"
    reference_function = whole_variance
    default_notation = Notation(r"\sigma^2", "σ²", "Variance (whole matrix)")
    rational = True
    nonnegative = True

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        X, mu = args
        var = sympy.Add(*[(x - mu[0, 0]) ** 2 for x in X]) / (X.rows * X.cols)
        return sympy.Matrix(X.rows, 1, lambda i, _: var)

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        X, mu = args
        m = mu[0][0]
        var = sum(((x - m) * (x - m) for row in X for x in row), arb(0)) / (len(X) * len(X[0]))
        return [[var] for _ in X]

    def reference(self, args: Sequence[np.ndarray], dtype: type = np.float64) -> np.ndarray:
        return whole_variance(*args)
