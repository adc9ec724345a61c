"""Row-wise softmax: attention weights, next-token probabilities.  exp(-inf) is 0 exactly."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import sympy
from flint import arb

from symformer.engine.arbmath import NEG_INF, ArbMatrix
from symformer.ops.base import Notation, Operation
from symformer.ops.calculus import Arithmetic, Rows


def softmax(s):
    """exp(s_j) / sum_k exp(s_k) per row; subtracting the row maximum only avoids overflow."""
    e = np.exp(s - np.max(s, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


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

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        out = []
        for row in args[0]:
            # No max-subtraction needed: a ball's exponent range does not overflow.
            exps = [None if s is NEG_INF else s.exp() for s in row]
            total = sum((e for e in exps if e is not None), arb(0))
            out.append([arb(0) if e is None else e / total for e in exps])
        return out

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        (s0,), (ds,) = x0, dx
        out = []
        for row0, drow in zip(s0, ds):
            e0 = [arb(0) if s is NEG_INF else s.exp() for s in row0]
            de = [d.exp() if s is NEG_INF else s.exp() * d.expm1() for s, d in zip(row0, drow)]
            z0, dz = sum(e0, arb(0)), sum(de, arb(0))
            z = z0 + dz
            out.append([(d * z0 - e * dz) / (z * z0) for e, d in zip(e0, de)])
        return out

    def reference(self, args: Sequence[np.ndarray], dtype: type = np.float64) -> np.ndarray:
        return softmax(args[0])

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """dL/ds_j = alpha_j (dL/dalpha_j - sum_k alpha_k dL/dalpha_k); 0 at a -inf score."""
        result = []
        for scores, alpha, g in zip(args[0], out, grad):
            mean = num.total(a * d for s, a, d in zip(scores, alpha, g) if not num.masked(s))
            result.append([num.zero() if num.masked(s) else a * (d - mean)
                           for s, a, d in zip(scores, alpha, g)])
        return result
