"""A projection ``x W + b`` with exact constant weights: Q, K, V, W_O, the FFN's layers, logits."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import numpy as np
import sympy
from flint import arb, arb_mat

from symformer.engine.arbmath import ArbMatrix, constant_balls
from symformer.ops.base import Notation, Operation, Spelling, matrix, named
from symformer.ops.calculus import Arithmetic, Rows, matmul, transpose


def project(X, W):
    """X W: (n, d_in) @ (d_in, d_out) -> (n, d_out)."""
    return X @ W


def affine(X, W, b):
    """X W + b: (n, d_in) @ (d_in, d_out) + (1, d_out) -> (n, d_out)."""
    return X @ W + b


@dataclass(frozen=True)
class Projection(Operation):
    """``X @ W (+ b)``; ``weight``/``bias`` name the matrices in formulas (``W_Q``, ``b_1``)."""

    W: sympy.Matrix
    b: sympy.Matrix | None = None
    notation: Notation | None = None
    weight: str = "W"
    bias: str = "b"
    #: What the output columns are ("vocab" for logits; see Operation.columns).
    columns: str = "dims"

    name = "projection"
    reference_function = project
    default_notation = Notation("y", "y", "Projection")
    rational = True

    @cached_property
    def _columns(self) -> list[list[tuple[int, sympy.Expr]]]:
        """Only the non-zero weights of each output column enter its formula."""
        rows = self.W.tolist()  # one conversion: SymPy's entry indexing is slow
        return [[(k, row[j]) for k, row in enumerate(rows) if row[j] != 0]
                for j in range(self.W.cols)]

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        X = args[0]
        rows = []
        for i in range(X.rows):
            row = []
            for j, column in enumerate(self._columns):
                terms = [w * X[i, k] for k, w in column]
                if self.b is not None and self.b[j] != 0:
                    terms.append(self.b[j])
                row.append(sympy.Add(*terms))
            rows.append(row)
        return sympy.Matrix(rows)

    def named_constants(self) -> dict[str, Notation]:
        return {"W": named(self.weight), "b": named(self.bias)}

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        X = args[0]
        W = constant_balls(self.W)  # the balls straight from the exact weights
        bias = [v for row in constant_balls(self.b) for v in row] if self.b is not None \
            else None
        if X and all(v is not None for row in X for v in row):
            # Arb's own matrix product (rigorous, exact zeros stay exact), then the bias.
            product = arb_mat(X) * arb_mat(W)
            return [[product[i, j] + bias[j] if bias is not None else product[i, j]
                     for j in range(self.W.cols)] for i in range(len(X))]
        columns = [[(k, row[j]) for k, row in enumerate(W) if not row[j].is_zero()]
                   for j in range(self.W.cols)]
        out = []
        for row in X:
            out_row = []
            for j, column in enumerate(columns):
                total = bias[j] if bias is not None else arb(0)
                for k, w in column:
                    total += w * row[k]
                out_row.append(total)
            out.append(out_row)
        return out

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        return replace(self, b=None).arb(dx)  # affine: the bias cancels

    def function(self):
        return project if self.b is None else affine

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        if self.b is None:
            return args[0], matrix(self.W, dtype)
        return args[0], matrix(self.W, dtype), matrix(self.b, dtype)

    def spelling(self) -> Spelling:
        return Spelling(names={"W": self.weight, "b": self.bias})

    def parameters(self) -> dict[str, sympy.Matrix]:
        """The weight (named ``weight``, e.g. ``W_Q``) and the bias, if any."""
        found = {self.weight: self.W}
        if self.b is not None:
            found[self.bias] = self.b
        return found

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """Y = X W + b: dL/dX = G W^T, dL/dW = X^T G, dL/db = the column sums of G."""
        if wrt == 0:
            W = [[num.const(w) if w != 0 else w for w in row] for row in self.W.tolist()]
            return matmul(grad, transpose(W), num)
        if wrt == self.weight:
            return matmul(transpose(args[0]), grad, num)
        return [[num.total(column) for column in transpose(grad)]]
