"""Binary cross-entropy of predicted probabilities ŷ (a sigmoid's output) against targets.

L = −(1/c) Σ_ij [T_ij log ŷ_ij + (1 − T_ij) log(1 − ŷ_ij)], with c the number of
entries (``reduction = "mean"``, PyTorch's ``F.binary_cross_entropy``) or 1 (``"sum"``).
A target is 0, 1 or any exact number in [0, 1] (a soft label).  Its backward rule is
dL/dŷ = −(T/ŷ − (1 − T)/(1 − ŷ))/c, so through the sigmoid's ŷ (1 − ŷ) the gradient at
the logit is the textbook (ŷ − T)/c.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from flint import arb

from symformer.engine.arbmath import ArbMatrix, constant_balls
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.ops.base import Notation, Operation, matrix
from symformer.ops.calculus import Arithmetic, Rows


def binary_cross_entropy(y, T):
    """L = -(1/(n d)) sum_ij [T_ij log y_ij + (1 - T_ij) log(1 - y_ij)]."""
    return -np.mean(T * np.log(y) + (1 - T) * np.log(1 - y), keepdims=True).reshape(1, 1)


def binary_cross_entropy_sum(y, T):
    """L = -sum_ij [T_ij log y_ij + (1 - T_ij) log(1 - y_ij)] (reduction = "sum")."""
    return -np.sum(T * np.log(y) + (1 - T) * np.log(1 - y), keepdims=True).reshape(1, 1)


def binary_cross_entropy_backward(g, y, T, c):
    """dL/dy = -g (T / y - (1 - T) / (1 - y)) / c."""
    return -g * (T / y - (1 - T) / (1 - y)) / c



def _log_terms(op: Any, Y: sympy.Matrix, i: int) -> list[sympy.Expr]:
    """Row i's terms T log y + (1 - T) log(1 - y), the zero ones left out (a hard 0 or 1
    target keeps one log of each entry)."""
    out = []
    for j in range(Y.cols):
        t, u = op._terms(i, j)
        if t != 0:
            out.append(t * sympy.log(Y[i, j]))
        if u != 0:
            out.append(u * sympy.log(1 - Y[i, j]))
    return out

@dataclass(frozen=True, eq=False)
class BinaryCrossEntropy(Operation):
    """−[T log ŷ + (1 − T) log(1 − ŷ)] over every entry of ŷ: their mean or their sum."""

    target: sympy.Matrix
    notation: Notation | None = None
    reduction: str = "mean"

    name = "binary_cross_entropy"
    is_loss = True
    reference_function = binary_cross_entropy
    default_notation = Notation("L", "L", "Loss (binary cross-entropy)")
    nonnegative = True

    def divisor(self) -> int:
        """What the sum is divided by: every entry (mean), or 1 (sum)."""
        return len(self.target) if self.reduction == "mean" else 1

    def function(self):
        return binary_cross_entropy if self.reduction == "mean" else binary_cross_entropy_sum

    def _terms(self, i: int, j: int):
        """The target T_ij and 1 - T_ij, the coefficients of log ŷ and log(1 - ŷ)."""
        t = self.target[i, j]
        return t, 1 - t

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        mean = " / (n * d)" if self.reduction == "mean" else ""
        return IndexEquation(
            (f"L = -sum(T[i, j] * log(y[i, j]) + (1 - T[i, j]) * log(1 - y[i, j]) "
             f"for i in range(n) for j in range(d)){mean}",),
            {"L": "out", "y": "in0", "T": "const:target"},
            sizes={"n": ("T", 0), "d": ("T", 1)}, symbols={"T": ("T", "T")},
            remark="T: the target (0 or 1, or a probability)")

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        mean = " / (n * d)" if self.reduction == "mean" else ""
        return IndexEquation(
            (f"dy[i, j] = -dL * (T[i, j] / y[i, j] - (1 - T[i, j]) / (1 - y[i, j])){mean}",),
            {"dy": "result", "dL": "grad", "y": "in0", "T": "const:target"},
            sizes={"n": ("y", 0), "d": ("y", 1)}, symbols={"T": ("T", "T")})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        Y = args[0]
        total = [t for i in range(Y.rows) for t in _log_terms(self, Y, i)]
        return sympy.Matrix([[-sympy.Add(*total) / self.divisor()]])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        T = constant_balls(self.target)
        total = arb(0)
        for i, row in enumerate(args[0]):
            for j, y in enumerate(row):
                t, u = self._terms(i, j)
                if t != 0:
                    total += T[i][j] * y.log()
                if u != 0:
                    total += (1 - T[i][j]) * (1 - y).log()
        return [[-total / self.divisor()]]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[np.ndarray]:
        return args[0], matrix(self.target, dtype)

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """dL/dŷ_ij = −(T_ij/ŷ_ij − (1 − T_ij)/(1 − ŷ_ij))/c; a term whose coefficient is
        exactly 0 (a hard 0/1 label) is left out."""
        (g,), c = grad[0], self.divisor()
        rows = []
        for i, ys in enumerate(args[0]):
            row = []
            for j, y in enumerate(ys):
                t, u = self._terms(i, j)
                value = num.zero()
                if t != 0:
                    value = value - num.const(t) / y
                if u != 0:
                    value = value + num.const(u) / (1 - y)
                row.append(g * value / c)
            rows.append(row)
        return rows

    def backward_function(self, wrt: int | str):
        return binary_cross_entropy_backward

    def backward_arguments(self, wrt, args, out, grad, dtype):
        return grad.astype(dtype), args[0].astype(dtype), matrix(self.target, dtype), \
            self.divisor()


def position_binary_cross_entropy(y, T):
    """L_i = -sum_j [T_ij log y_ij + (1 - T_ij) log(1 - y_ij)]: each row's own sum."""
    return -np.sum(T * np.log(y) + (1 - T) * np.log(1 - y), axis=-1, keepdims=True)


@dataclass(frozen=True, eq=False)
class PositionBinaryCrossEntropy(BinaryCrossEntropy):
    """Each row's binary cross-entropy (``[stages] per_position_loss``): L_i = −Σ_j [T_ij
    log ŷ_ij + (1 − T_ij) log(1 − ŷ_ij)]; L = (1/c) Σ_i L_i."""

    name = "position_binary_cross_entropy"
    is_loss = False
    per_row = True
    reference_function = position_binary_cross_entropy
    default_notation = Notation("L", "L", "Loss at each position")
    per_position_of = "binary_cross_entropy"

    @classmethod
    def from_loss(cls, loss: Operation) -> Operation:
        return cls(loss.target)

    def function(self):
        return position_binary_cross_entropy

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(
            ("L[i] = -sum(T[i, j] * log(y[i, j]) + (1 - T[i, j]) * log(1 - y[i, j]) "
             "for j in range(d))",),
            {"L": "out", "y": "in0", "T": "const:target"}, sizes={"d": ("T", 1)},
            symbols={"T": ("T", "T")}, remark="T: the target")

    #: Nothing reads the stage: it has no backward rule of its own.
    backward = Operation.backward
    backward_equation = Operation.backward_equation
    backward_function = Operation.backward_function

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        Y = args[0]
        return sympy.Matrix([[-sympy.Add(*_log_terms(self, Y, i))] for i in range(Y.rows)])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        T = constant_balls(self.target)
        out = []
        for i, row in enumerate(args[0]):
            total = arb(0)
            for j, y in enumerate(row):
                t, u = self._terms(i, j)
                if t != 0:
                    total += T[i][j] * y.log()
                if u != 0:
                    total += (1 - T[i][j]) * (1 - y).log()
            out.append([-total])
        return out

