"""Pooling: one row for the whole sequence, read by a classification or regression head.

Three textbook choices (``[head] pooling``): the first position's row (BERT's [CLS]
token, Devlin et al. 2019), the last position's row (GPT's classifier on the last
token, Radford et al. 2018; a causal model's only row that has read every token), or
the mean over the positions (Sentence-BERT's mean pooling).  The output is 1 x d.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from flint import arb

from symformer.engine.arbmath import ArbMatrix
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.ops.base import Notation, Operation
from symformer.ops.calculus import Arithmetic, Rows

#: The pooled row.
POOLED = Notation(r"\bar{z}", "z̄", "Pooled output (the row the head reads)")
#: The ways to pool, as the example file names them.
POOLINGS = ("first", "last", "mean")


def pool_row(z, P):
    """The row z[P] of the sequence (first: P = 0, last: P = n - 1), as a 1 x d matrix."""
    return z[P:P + 1]


def pool_mean(z):
    """The mean of the rows, (1/n) sum_i z_i, as a 1 x d matrix."""
    return np.mean(z, axis=0, keepdims=True)


def pool_row_backward(g, R):
    """dL/dz = R g: R the column with 1 in row P, g = dL/dz-bar (1 x d)."""
    return R * g


def pool_mean_backward(g, n):
    """dL/dz_i = g / n in every row."""
    return np.ones((n, 1)) * g / n


@dataclass(frozen=True)
class Pool(Operation):
    """``how`` = "mean" (the rows' mean) or "row" (row ``position``: the first or last)."""

    how: str
    position: int = 0
    notation: Notation | None = None

    name = "pool"
    default_notation = POOLED
    reference_function = pool_row
    rational = True

    def function(self):
        return pool_mean if self.how == "mean" else pool_row

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        if self.how == "mean":
            return IndexEquation(("c[i, j] = sum(z[ip, j] for ip in range(n)) / n",),
                                 {"c": "out", "z": "in0"}, sizes={"n": ("z", 0)})
        return IndexEquation(("c[i, j] = z[P, j]",), {"c": "out", "z": "in0"},
                             scalars={"P": self.position}, symbols={"P": ("P", "P")},
                             remark=f"P = {self.position}: the position read")

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        if self.how == "mean":
            return IndexEquation(("dz[i, j] = dc[0, j] / n",),
                                 {"dz": "result", "dc": "grad", "z": "in0"},
                                 sizes={"n": ("z", 0)})
        return IndexEquation(("dz[i, j] = dc[0, j] if i == P else 0",),
                             {"dz": "result", "dc": "grad", "z": "in0"},
                             scalars={"P": self.position}, symbols={"P": ("P", "P")})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        z = args[0]
        if self.how == "mean":
            return sympy.Matrix([[sympy.Add(*z.col(j)) / z.rows for j in range(z.cols)]])
        return z[self.position:self.position + 1, :]

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        z = args[0]
        if self.how == "mean":
            return [[sum((row[j] for row in z), arb(0)) / len(z) for j in range(len(z[0]))]]
        return [list(z[self.position])]

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        return self.arb(dx)  # linear

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[object]:
        return (args[0],) if self.how == "mean" else (args[0], self.position)

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """dL/dz_i = dL/dz̄ / n (mean) or dL/dz̄ in row P and exactly 0 elsewhere."""
        n, (g,) = len(args[0]), grad
        if self.how == "mean":
            return [[d / n for d in g] for _ in range(n)]
        return [list(g) if i == self.position else [num.zero() for _ in g] for i in range(n)]

    def backward_function(self, wrt: int | str):
        return pool_mean_backward if self.how == "mean" else pool_row_backward

    def backward_arguments(self, wrt, args, out, grad, dtype):
        n = len(args[0])
        if self.how == "mean":
            return grad.astype(dtype), n
        R = (np.arange(n) == self.position).astype(dtype)[:, None]
        return grad.astype(dtype), R
