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
from typing import TYPE_CHECKING, Any

import numpy as np

from symformer.engine.arbmath import ArbMatrix
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation
from symformer.ops.facts import FALSE, PROVED, Fact, cancels, label

if TYPE_CHECKING:
    from symformer.engine.graph import Stage


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
    about_input = True

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

    def facts(self, stage: Stage) -> list[Fact]:
        """J is symmetric (alpha_j alpha_k both ways), and every row sums to exactly 0
        (alpha_j (1 - sum_k alpha_k) with the softmax's own local formulas: the weights
        sum to 1), so J maps every constant shift of the scores to 0."""
        g, where = stage.derivation, label(stage)
        J = stage.local
        facts = []
        asymmetric = [(j, k) for j in range(J.rows) for k in range(j)
                      if sympy.expand(J[j, k] - J[k, j]) != 0]
        name = f"{stage.name}.symmetric{where}"
        statement = f"{stage.name}{where} is symmetric"
        facts.append(Fact(name, statement, FALSE, f"entries {asymmetric[0]} differ")
                     if asymmetric else Fact(name, statement, PROVED,
                                             "J_jk = -alpha_j alpha_k = J_kj off the diagonal"))
        alpha = stage.inputs[0]
        weights = dict(zip(g.symbols(alpha), g.local(alpha)))
        bad = [j for j in range(J.rows) if not cancels(sympy.Add(*J.row(j)).xreplace(weights))]
        name = f"{stage.name}.row_sums_zero{where}"
        statement = f"every row of {stage.name}{where} sums to exactly 0"
        facts.append(Fact(name, statement, FALSE, f"row {bad[0]} does not cancel to 0") if bad
                     else Fact(name, statement, PROVED, "sum_k alpha_j (delta_jk - alpha_k) = "
                               "alpha_j (1 - sum_k alpha_k) = 0, alpha the softmax's formulas"))
        return facts
