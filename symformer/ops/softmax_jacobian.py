"""The Jacobian of one softmax row: J_jk = d alpha_j / d s_k = alpha_j (delta_jk - alpha_k).

Asked for with ``[stages] jacobian = ["layer1.head1.weights[1]"]`` (or every row of the
stage): a side stage ``layer1.head1.weights.jacobian.row1`` (k x k, rows and columns
the row's entries), read from the softmax's output row ``row``.  Nothing reads it; the
backward pass uses the same Jacobian through its vector product
(:meth:`symformer.ops.softmax.Softmax.backward`).  A masked entry (alpha_j = 0 exactly)
has a row and a column of exact zeros.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from symformer.engine.arbmath import ArbMatrix
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.ops.base import Notation, Operation, Spelling


def softmax_jacobian(alpha, r):
    """J = diag(a) - a a^T for the softmax output row a = alpha[r]."""
    a = alpha[r]
    return np.diag(a) - np.outer(a, a)


@dataclass(frozen=True)
class SoftmaxJacobian(Operation):
    """d alpha[row, j] / d s[row, k] from the softmax's output ``alpha``."""

    row: int
    notation: Notation | None = None

    name = "softmax_jacobian"
    reference_function = softmax_jacobian
    default_notation = Notation("J", "J", "Jacobian of a softmax row (dα_j/ds_k)")
    columns = "keys"

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(("J[j, k] = alpha[r, j] * ((1 if j == k else 0) - alpha[r, k])",),
                             {"J": "out", "alpha": "in0"}, scalars={"r": self.row},
                             symbols={"r": ("r", "r")},
                             remark=f"r = {self.row}: the row differentiated")

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        a = args[0].row(self.row)
        return sympy.Matrix(len(a), len(a), lambda j, k: a[j] * (int(j == k) - a[k]))

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        a = args[0][self.row]
        return [[x * ((1 if j == k else 0) - y) for k, y in enumerate(a)]
                for j, x in enumerate(a)]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return args[0], self.row

    def spelling(self) -> Spelling:
        return Spelling(remark=f"the Jacobian of softmax row {self.row}")
