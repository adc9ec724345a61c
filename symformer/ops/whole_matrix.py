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
import sympy
from flint import arb

from symformer.engine.arbmath import ArbMatrix
from symformer.ops.base import Notation, Operation, Spelling


def whole_mean(x, n, d):
    """The mean of every entry of the (n, d) matrix, repeated in a column: (n, 1)."""
    return np.full((n, 1), 1 / (n * d) * np.sum(x))


def whole_variance(x, mu, n, d):
    """The biased variance of every entry around the whole-matrix mean mu (a column
    holding one value), repeated in a column: (n, 1)."""
    return np.full((n, 1), 1 / (n * d) * np.sum((x - mu) ** 2))


#: How both functions are written: sums over every entry, x_(i,j).
_WHOLE = Spelling(indexed=frozenset({"x"}), names={"n": "n", "d": "d"},
                  remark="over every entry of the matrix: all tokens at once")


@dataclass(frozen=True)
class WholeMean(Operation):
    """The mean of every entry of the matrix, repeated in each row (n x 1)."""

    notation: Notation | None = None

    name = "whole_mean"
    reference_function = whole_mean
    default_notation = Notation(r"\mu", "μ", "Mean (whole matrix)")
    trace_step = "folded"
    rational = True

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

    def spelling(self) -> Spelling:
        return _WHOLE


@dataclass(frozen=True)
class WholeVariance(Operation):
    """The biased variance of every entry around the whole-matrix mean (n x 1)."""

    notation: Notation | None = None

    name = "whole_variance"
    reference_function = whole_variance
    default_notation = Notation(r"\sigma^2", "σ²", "Variance (whole matrix)")
    trace_step = "folded"
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

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return args[0], args[1], *args[0].shape

    def spelling(self) -> Spelling:
        return _WHOLE
