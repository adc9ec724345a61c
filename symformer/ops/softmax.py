"""Row-wise softmax: attention weights, next-token probabilities.  exp(-inf) is 0 exactly."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import sympy
from flint import arb

from symformer.engine.arbmath import NEG_INF, ArbMatrix
from symformer.ops.base import Notation, Operation, WorkedPart


def softmax(s):
    """exp(s_j) / sum_k exp(s_k) per row; subtracting the row maximum only avoids overflow."""
    e = np.exp(s - np.max(s, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


#: The denominator of a softmax row, shown as its own worked step.
SUM = Notation(r"\Sigma", "Σ", "Sum of the exponentials")


@dataclass(frozen=True)
class Softmax(Operation):
    """Each row's exponentials over their sum; a -inf score gets weight exactly 0."""

    notation: Notation | None = None

    name = "softmax"
    reference_function = softmax
    default_notation = Notation(r"\alpha", "α", "Attention weights (softmax)")

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        S = args[0]
        rows = []
        for i in range(S.rows):
            exps = [None if S[i, j] == -sympy.oo else sympy.exp(S[i, j]) for j in range(S.cols)]
            total = sympy.Add(*[e for e in exps if e is not None])
            rows.append([sympy.S.Zero if e is None else e / total for e in exps])
        return sympy.Matrix(rows)

    def worked_parts(self, stage, row: int,
                     formulas: Sequence[sympy.Expr]) -> list[WorkedPart]:
        """The row's shared denominator Σ = exp(s_0) + ..., each exponential rounded first."""
        for entry in formulas:
            for factor in sympy.Mul.make_args(entry):
                if factor.is_Pow and factor.exp == -1 and factor.base.is_Add:
                    return [WorkedPart(SUM, factor.base, termwise=True)]
        return []

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        out = []
        for row in args[0]:
            # No max-subtraction needed: a ball's exponent range does not overflow.
            exps = [None if s is NEG_INF else s.exp() for s in row]
            total = sum((e for e in exps if e is not None), arb(0))
            out.append([arb(0) if e is None else e / total for e in exps])
        return out

    def reference(self, args: Sequence[np.ndarray], dtype: type = np.float64) -> np.ndarray:
        return softmax(args[0])
