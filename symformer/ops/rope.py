"""Rotary position embedding (RoPE): rotate each query/key by angles that grow with position.

Position m (0-based, plus ``start``), pair i = 0..d/2-1, angle m * theta_i with
theta_i = base^(-2i/d) by default, or given frequencies theta_i (``rope_theta``), or a
given angle phi[m, i] per position and pair (``rope_angles``).  ``style="interleaved"``
rotates the pairs (x_{2i}, x_{2i+1}) (the RoFormer paper); ``style="half"`` rotates
(x_i, x_{i+d/2}) (Hugging Face's Llama, ``rotate_half``).  cos and sin of the angles
are exact SymPy constants.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from symformer.engine.arbmath import ArbMatrix, sympy_to_arb
from symformer.equations.ir import IndexEquation
from symformer.errors import InputError
from symformer.example.schema import DEFAULT_BASE
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation
from symformer.ops.calculus import EXACT, Arithmetic, Rows
from symformer.ops.facts import FALSE, PROVED, Fact

#: RoPE's two indices, one spelling for the equations, the figures and their captions:
#: the token's position and the pair of dimensions turned together.
#: ``pos`` as in Vaswani et al.'s PE_(pos, 2i); the pair ``l`` (``i`` is a row, ``c`` the
#: heads' concatenation, ``p`` the probabilities: one meaning per symbol).
POSITION = Notation(r"\mathit{pos}", "pos", "the token's position")
PAIR = Notation("l", "l", "the pair of dimensions rotated together")

if TYPE_CHECKING:
    from symformer.engine.graph import Stage


def rope(X, C, S, R):
    """X cos + (X R) sin: R maps each pair (a, b) to (-b, a); C, S are (n, d)."""
    return X * C + (X @ R) * S


def rope_backward(G, C, S, R):
    """dL/dX = G cos + (G sin) R^T: each pair rotated back by its angle."""
    return G * C + (G * S) @ R.T


@dataclass(frozen=True)
class RoPE(Operation):
    """Rotate each row of an (n x d) stage by its position's angles (d even): pair i of
    position m (m counted from ``start``) turns by m * theta_i, with
    theta_i = base^(-2i/d), i = 0 .. d/2 - 1 (d is the head's width d_k; ``base`` is
    ``positional_encoding_base``, default 10000).  ``thetas`` gives the frequencies
    theta_i instead; ``angles`` gives every angle, row m + start, pair i (exact values)."""

    n: int
    d: int
    base: sympy.Rational = DEFAULT_BASE
    style: str = "interleaved"
    start: int = 0
    notation: Notation | None = None
    thetas: tuple | None = None
    angles: tuple | None = None

    name = "rope"
    part_of_block = "head"
    rotates = True
    matrix_form = "rotate"
    reference_function = rope
    default_notation = Notation(r"\tilde{x}", "x̃", "Rotated (RoPE)")

    def angle(self, m: int, i: int) -> sympy.Expr:
        """The exact angle of position m (0-based row), pair i."""
        if self.angles is not None:
            if self.start + m >= len(self.angles):
                raise InputError(f"rope_angles has {len(self.angles)} rows; position "
                                 f"{self.start + m} has no angles (add a row per position)")
            return sympy.sympify(self.angles[self.start + m][i])
        if self.thetas is not None:
            return sympy.Integer(self.start + m) * sympy.sympify(self.thetas[i])
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

    def _pair(self) -> tuple[str, str, str]:
        """The two columns rotated together (pair c) and the angle of position p."""
        p, c = POSITION.text, PAIR.text
        start = f"({p} + {self.start})" if self.start else p
        if self.angles is not None:
            angle = f"phi[{p + ' + ' + str(self.start) if self.start else p}, {c}]"
        elif self.thetas is not None:
            angle = f"{start} * theta[{c}]"
        else:
            angle = f"{start} * base ** (-2 * {c} / d)"
        if self.style == "half":
            return c, f"{c} + d // 2", angle
        return f"2 * {c}", f"2 * {c} + 1", angle

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        a, b, angle = self._pair()
        p, c = POSITION.text, PAIR.text
        return IndexEquation(
            (f"y[{p}, {a}] = x[{p}, {a}] * cos({angle}) - x[{p}, {b}] * sin({angle})",
             f"y[{p}, {b}] = x[{p}, {a}] * sin({angle}) + x[{p}, {b}] * cos({angle})"),
            {"y": "out", "x": "in0", **self._given()}, sizes={"d": ("x", 1)},
            ranges={c: "d // 2"}, remark=f"pairs {c} below d/2; {p}: the position",
            **self._constants())

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        a, b, angle = self._pair()
        p = POSITION.text
        return IndexEquation(
            (f"dx[{p}, {a}] = dy[{p}, {a}] * cos({angle}) + dy[{p}, {b}] * sin({angle})",
             f"dx[{p}, {b}] = -dy[{p}, {a}] * sin({angle}) + dy[{p}, {b}] * cos({angle})"),
            {"dx": "result", "dy": "grad", **self._given()}, sizes={"d": ("dy", 1)},
            ranges={PAIR.text: "d // 2"}, **self._constants())

    def _given(self) -> dict[str, str]:
        """The given frequencies or angles as constant arrays of the equation."""
        if self.angles is not None:
            return {"phi": "const:angle_table"}
        if self.thetas is not None:
            return {"theta": "const:thetas"}
        return {}

    def angle_table(self) -> sympy.Matrix:
        """The given angles as a matrix (a row per position, a column per pair)."""
        return sympy.Matrix([list(row) for row in self.angles])

    def _constants(self) -> dict:
        """The equation's scalars (the base) and how the given arrays print."""
        if self.angles is not None:
            return {"symbols": {"phi": (r"\phi", "φ")}}
        if self.thetas is not None:
            return {"symbols": {"theta": (r"\theta", "θ")}}
        return {"scalars": {"base": self.base},
                "symbols": {"base": (sympy.latex(sympy.sympify(self.base)), str(self.base))}}

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

    def facts(self, stage: Stage) -> list[Fact]:
        """Raw scores of rotated queries and keys depend only on m - n (proved symbolically).

        Shifting every position by t rotates each pair (a, b) of both vectors by the
        same extra angle t theta_i: with C = cos(t theta_i), S = sin(t theta_i), the dot
        product of the shifted pairs minus the unshifted one reduces to 0 once
        S^2 = 1 - C^2, for symbolic entries and symbolic positions' cos/sin.
        """
        qa, qb, ka, kb, cm, sm, cn, sn, C, S = sympy.symbols("qa qb ka kb cm sm cn sn C S")

        def rotate(a, b, c, s):
            return a * c - b * s, a * s + b * c

        q, k = rotate(qa, qb, cm, sm), rotate(ka, kb, cn, sn)
        shifted = [rotate(*q, C, S), rotate(*k, C, S)]
        difference = (shifted[0][0] * shifted[1][0] + shifted[0][1] * shifted[1][1]
                      - (q[0] * k[0] + q[1] * k[1]))
        zero = sympy.expand(sympy.expand(difference).subs(S ** 2, 1 - C ** 2)) == 0
        return [Fact("rope_relative", "raw scores of RoPE-rotated queries and keys depend "
                     "only on m - n (shifting every position by the same offset leaves them "
                     "unchanged)", PROVED if zero else FALSE,
                     "a shift by t rotates both vectors of each pair by t theta_i, and "
                     "R(t theta_i)^T R(t theta_i) = I")]

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        return self.arb(dx)  # linear

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[np.ndarray]:
        X = args[0]
        C = np.zeros(X.shape, dtype)
        S = np.zeros(X.shape, dtype)
        R = np.zeros((self.d, self.d), dtype)
        for i, (a, b) in enumerate(self.pairs):
            if self.angles is None and self.thetas is None:
                theta = (np.arange(self.start, self.start + X.shape[0])
                         * float(self.base) ** (-2 * i / self.d))
            else:  # given: each exact angle read as a double
                theta = np.array([float(self.angle(m, i)) for m in range(X.shape[0])])
            C[:, a] = C[:, b] = np.cos(theta)
            S[:, a] = S[:, b] = np.sin(theta)
            R[b, a], R[a, b] = -1, 1  # (X R)_a = -x_b, (X R)_b = x_a
        return X, C, S, R

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """The transpose of each pair's rotation: dx_a = g_a cos + g_b sin,
        dx_b = -g_a sin + g_b cos."""
        return [self._backward_row(m, g, num) for m, g in enumerate(grad)]

    def backward_entry(self, args: Sequence[sympy.Matrix], out: sympy.Matrix,
                       grad: sympy.Matrix, wrt: int | str, i: int, j: int) -> sympy.Expr:
        return self._backward_row(i, list(grad.row(i)), EXACT)[j]

    def _backward_row(self, m: int, g: list, num: Arithmetic) -> list:
        """Row ``m`` (a position) of :meth:`backward`."""
        row = list(g)
        for (a, b), (c, s) in zip(self.pairs, self.trig[m]):
            cn, sn = num.const(c), num.const(s)
            row[a] = g[a] * cn + g[b] * sn
            row[b] = -g[a] * sn + g[b] * cn
        return row

    def backward_function(self, wrt: int | str):
        return rope_backward

    def backward_arguments(self, wrt, args, out, grad, dtype):
        _X, C, S, R = self.arguments([args[0].astype(dtype)], dtype)
        return grad.astype(dtype), C, S, R
