"""Scaled scores ``u / sqrt(d_k)``, with the causal mask applied.

``masked`` is the set of (row, column) entries the mask blocks.  With
``mask_value=None`` they are -inf (their weights are exactly 0); with a number
(e.g. -10**9) that number is added instead, as some implementations do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import sympy
from flint import arb

from symformer.engine.arbmath import NEG_INF, ArbMatrix, rational_ball
from symformer.ops.base import Notation, Operation
from symformer.ops.calculus import Arithmetic, Rows


def scaled_scores(U, d_k, M, m):
    """U / sqrt(d_k), plus m (-inf, or a number such as -1e9) where the mask M is set."""
    return U / np.sqrt(d_k) + np.where(M, m, 0)


@dataclass(frozen=True)
class ScaleMask(Operation):
    """``u / sqrt(d_k)``, and -inf (or ``mask_value`` added) at the ``masked`` entries."""

    d_k: int
    masked: frozenset[tuple[int, int]] = frozenset()
    mask_value: sympy.Rational | None = None
    notation: Notation | None = None

    name = "scale_mask"
    reference_function = scaled_scores
    default_notation = Notation("s", "s", "Scaled scores")
    rational = True

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        S = args[0]
        scale = 1 / sympy.sqrt(self.d_k)

        def entry(i: int, j: int) -> sympy.Expr:
            if (i, j) not in self.masked:
                return S[i, j] * scale
            if self.mask_value is None:
                return -sympy.oo
            return S[i, j] * scale + self.mask_value

        return sympy.Matrix(S.rows, S.cols, entry)

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        S = args[0]
        scale = 1 / arb(self.d_k).sqrt()
        offset = rational_ball(self.mask_value) if self.mask_value is not None else None
        out = []
        for i, row in enumerate(S):
            out_row = []
            for j, s in enumerate(row):
                if (i, j) not in self.masked:
                    out_row.append(s * scale)
                elif offset is None:
                    out_row.append(NEG_INF)
                else:
                    out_row.append(s * scale + offset)
            out.append(out_row)
        return out

    @property
    def finite_mask(self) -> bool:
        return bool(self.masked) and self.mask_value is not None

    def exactly_masked(self) -> ScaleMask:
        return replace(self, mask_value=None)

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        (s0,), (ds,) = x0, dx
        scale = 1 / arb(self.d_k).sqrt()
        offset = rational_ball(self.mask_value) if self.mask_value is not None else None
        out = []
        for i, (row0, drow) in enumerate(zip(s0, ds)):
            out_row = []
            for j, (s, d) in enumerate(zip(row0, drow)):
                if (i, j) in self.masked and offset is not None:
                    out_row.append((s + d) * scale + offset)  # the full score: x0 is -inf
                else:
                    out_row.append(d * scale)
            out.append(out_row)
        return out

    def mask_matrix(self, shape: tuple[int, int]) -> np.ndarray:
        """The mask as booleans (True: blocked)."""
        M = np.zeros(shape, dtype=bool)
        for i, j in self.masked:
            M[i, j] = True
        return M

    def reference(self, args: Sequence[np.ndarray], dtype: type = np.float64) -> np.ndarray:
        U = args[0]
        m = -np.inf if self.mask_value is None else dtype(float(self.mask_value))
        return scaled_scores(U, dtype(self.d_k), self.mask_matrix(U.shape), m).astype(dtype)

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """dL/du = dL/ds / sqrt(d_k); exactly 0 at a score masked with -inf (constant).

        With a finite mask (``mask_value``) the masked score is u / sqrt(d_k) + m,
        whose derivative is 1 / sqrt(d_k) as everywhere else.
        """
        scale = num.const(1 / sympy.sqrt(self.d_k))
        return [[num.zero() if (i, j) in self.masked and self.mask_value is None else g * scale
                 for j, g in enumerate(row)] for i, row in enumerate(grad)]
