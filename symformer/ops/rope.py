"""Rotary position embedding (RoPE): rotate each query/key by angles that grow with position.

Position m (0-based, plus ``start``), pair i = 0..d/2-1, angle m * theta_i with
theta_i = base^(-2i/d).  ``style="interleaved"`` rotates the pairs (x_{2i}, x_{2i+1})
(the RoFormer paper); ``style="half"`` rotates (x_i, x_{i+d/2}) (Hugging Face's
Llama, ``rotate_half``).  cos and sin of the angles are exact SymPy constants.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import sympy

from symformer.engine.arbmath import ArbMatrix, sympy_to_arb
from symformer.ops.base import Notation, Operation


def rope_interleaved(X, C, S):
    """Pairs (2i, 2i+1): x_{2i} cos - x_{2i+1} sin, x_{2i} sin + x_{2i+1} cos (RoFormer)."""
    out = np.empty_like(X)
    out[:, 0::2] = X[:, 0::2] * C - X[:, 1::2] * S
    out[:, 1::2] = X[:, 0::2] * S + X[:, 1::2] * C
    return out


def rope_half(X, C, S):
    """Pairs (i, i + d/2): x cos + rotate_half(x) sin (Hugging Face's Llama)."""
    h = X.shape[1] // 2
    return np.concatenate([X[:, :h] * C - X[:, h:] * S, X[:, h:] * C + X[:, :h] * S], axis=1)


def angles(n, d, base, start=0):
    """(n, d/2) angles (start + m) * base^(-2i/d)."""
    m = np.arange(start, start + n)[:, None]
    return m * base ** (-2 * np.arange(d // 2)[None, :] / d)


@dataclass(frozen=True)
class RoPE(Operation):
    """Rotate each row of an (n x d) stage by its position's angles (d even)."""

    n: int
    d: int
    base: sympy.Rational = sympy.Integer(10000)
    style: str = "interleaved"
    start: int = 0
    notation: Notation | None = None

    name = "rope"
    reference_function = rope_interleaved
    default_notation = Notation(r"\tilde{x}", "x̃", "Rotated (RoPE)")

    def function(self):
        return rope_half if self.style == "half" else rope_interleaved

    def angle(self, m: int, i: int) -> sympy.Expr:
        """The exact angle of position m (0-based row), pair i."""
        return sympy.Integer(self.start + m) * self.base ** sympy.Rational(-2 * i, self.d)

    @cached_property
    def pairs(self) -> list[tuple[int, int]]:
        """The dimensions rotated together, pair i = (a, b)."""
        h = self.d // 2
        if self.style == "half":
            return [(i, i + h) for i in range(h)]
        return [(2 * i, 2 * i + 1) for i in range(h)]

    @cached_property
    def trig(self) -> list[list[tuple[sympy.Expr, sympy.Expr]]]:
        """(cos, sin) of every angle, exact: row m, pair i."""
        return [[(sympy.cos(self.angle(m, i)), sympy.sin(self.angle(m, i)))
                 for i in range(self.d // 2)] for m in range(self.n)]

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        X = args[0]
        out = sympy.zeros(X.rows, X.cols)
        for m in range(X.rows):
            for (a, b), (c, s) in zip(self.pairs, self.trig[m]):
                out[m, a] = X[m, a] * c - X[m, b] * s
                out[m, b] = X[m, a] * s + X[m, b] * c
        return out

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        out = []
        for m, row in enumerate(args[0]):
            new = list(row)
            for (a, b), (c, s) in zip(self.pairs, self.trig[m]):
                cb, sb = sympy_to_arb(c), sympy_to_arb(s)
                new[a] = row[a] * cb - row[b] * sb
                new[b] = row[a] * sb + row[b] * cb
            out.append(new)
        return out

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        return self.arb(dx)  # linear

    def reference(self, args: Sequence[np.ndarray], dtype: type = np.float64) -> np.ndarray:
        X = args[0]
        theta = angles(X.shape[0], self.d, float(self.base), self.start)
        return self.function()(X, np.cos(theta), np.sin(theta)).astype(dtype)
