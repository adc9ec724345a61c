"""More terms a worked line prints, as operations of side stages (docs/verify.md,
"Addresses of the terms"); :mod:`symformer.blocks.side_stages` adds them when named.

* :class:`RowTerms` -- the terms a_{r,k} B_{k,j} of one row of a product A B: the
  x_c W_{c,j} inside a projection row, the α_j v_j inside a weighted sum;
* :class:`MaxShift` -- s_ij − max_m s_im, the max-subtracted softmax input;
* :class:`Centred` -- x_ij − μ_i, LayerNorm's centred values;
* :class:`Affine` -- a x^p + c entry by entry: σ² + ε, lr·g, β₁ m, (1 − β₂) g², 1 − p;
* :class:`RowDot` -- Σ_j a_ij b_ij: the softmax backward's Σ_j α_j g_j;
* :class:`RowSum` -- Σ_j x_ij: the sums a mean or a variance divides by d;
* :class:`LogSoftmax` -- log p_ij = s_ij − log Σ_m e^{s_im}, log-probabilities.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from flint import arb

from symformer.engine.arbmath import NEG_INF, ArbMatrix, constant_balls, rational_ball
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation, matrix

#: The operations here whose masked entries (a -inf score) stay -inf: a claim may
#: print "-inf" for them, as for masked scores.
MINUS_INF_OPS = ("max_shift", "log_softmax")


def row_terms(A, B, r):
    """T[k, j] = A[r, k] B[k, j]: the terms of row r of A B (column j sums to (A B)[r, j])."""
    return A[r][:, None] * B


def max_shift(s):
    """s_ij - max_m s_im (a -inf score stays -inf)."""
    return s - np.max(s, axis=1, keepdims=True)


def centred(x, mu):
    """x_ij - mu_i."""
    return x - mu


def affine(x, a, c, p):
    """a x^p + c, entry by entry."""
    return a * x ** p + c


def row_dot(A, B):
    """Σ_j A_ij B_ij, a column."""
    return np.sum(A * B, axis=1, keepdims=True)


def row_sum(x):
    """Σ_j x_ij, a column."""
    return np.sum(x, axis=1, keepdims=True)


def log_softmax(s):
    """log softmax(s) = s - max - log Σ e^{s - max} (a -inf score: -inf)."""
    shifted = s - np.max(s, axis=1, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))


def _arb_max(row: Sequence[arb]) -> arb:
    """The largest finite entry of a row, as a ball (the balls' maximum: it holds the
    exact maximum however close two entries are)."""
    finite = [s for s in row if s is not NEG_INF]
    best = finite[0]
    for s in finite[1:]:
        best = best.max(s)
    return best


@dataclass(frozen=True)
class RowTerms(Operation):
    """Row ``row`` of a product A B as its terms: inputs (A, B), or (A,) with the
    constant ``W`` as B (a projection's exact weights)."""

    row: int
    W: sympy.Matrix | None = None
    notation: Notation | None = None
    #: True for a projection's terms: row c is the weight's row c (x_c W_{c,j}), not a
    #: token position (a weighted sum's rows are its key positions).
    weight_rows: bool = False  # type: ignore[assignment]

    name = "row_terms"
    reference_function = row_terms
    default_notation = Notation("T", "T", "Terms inside a row of a product")
    rational = True

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        arrays = {"T": "out", "a": "in0", "B": "const:W" if self.W is not None else "in1"}
        return IndexEquation(("T[k, j] = a[r, k] * B[k, j]",), arrays,
                             scalars={"r": self.row}, symbols={"r": ("r", "r")},
                             remark=f"r = {self.row}: column j adds up to entry j of row r")

    def _b(self, args: Sequence) -> Any:
        return self.W if self.W is not None else args[1]

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        A, B = args[0], self._b(args)
        return sympy.Matrix(B.rows, B.cols, lambda k, j: A[self.row, k] * B[k, j])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        B = constant_balls(self.W) if self.W is not None else args[1]
        a = args[0][self.row]
        return [[a[k] * b for b in row] for k, row in enumerate(B)]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        B = matrix(self.W, dtype) if self.W is not None else np.asarray(args[1], dtype=dtype)
        return np.asarray(args[0], dtype=dtype), B, self.row


@dataclass(frozen=True)
class MaxShift(Operation):
    """s_ij − max_m s_im of the one input (a softmax's scores; -inf stays -inf)."""

    notation: Notation | None = None

    name = "max_shift"
    reference_function = max_shift
    default_notation = Notation(r"s - \max s", "s − max s", "Scores minus their row's maximum")

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(("z[i, j] = s[i, j] - max(s[i, jp] for jp in range(n))",),
                             {"z": "out", "s": "in0"}, sizes={"n": ("s", 1)})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        S = args[0]

        def row(i: int) -> list:
            top = sympy.Max(*[s for s in S.row(i) if s != -sympy.oo])
            return [s if s == -sympy.oo else s - top for s in S.row(i)]
        return sympy.Matrix([row(i) for i in range(S.rows)])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        out = []
        for row in args[0]:
            top, first = _arb_max(row), _certified_argmax(row)
            out.append([NEG_INF if s is NEG_INF else arb(0) if k == first else s - top
                        for k, s in enumerate(row)])
        return out

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return (np.asarray(args[0], dtype=dtype),)


def _certified_argmax(row: Sequence[arb]) -> int | None:
    """The entry certainly above every other finite one (its shift is exactly 0, its
    exponential exactly 1), or None when the balls do not separate the largest."""
    finite = [k for k, s in enumerate(row) if s is not NEG_INF]
    if not finite:
        return None
    k = finite[0]
    for m in finite[1:]:  # the largest centre (exact points: decided), then certified
        if row[m].mid() > row[k].mid():
            k = m
    return k if all(row[k] > row[m] for m in finite if m != k) else None


@dataclass(frozen=True)
class Centred(Operation):
    """x_ij − μ_i from the inputs (x, μ)."""

    notation: Notation | None = None

    name = "centred"
    reference_function = centred
    default_notation = Notation(r"x - \mu", "x − μ", "Centred values")
    rational = True

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(("c[i, j] = x[i, j] - mu[i, 0]",),
                             {"c": "out", "x": "in0", "mu": "in1"})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        X, mu = args
        return sympy.Matrix(X.rows, X.cols, lambda i, j: X[i, j] - mu[i, 0])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return [[x - m[0] for x in row] for row, m in zip(args[0], args[1])]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return np.asarray(args[0], dtype=dtype), np.asarray(args[1], dtype=dtype)


@dataclass(frozen=True)
class Affine(Operation):
    """``scale`` x^``power`` + ``shift`` of the one input, entry by entry (exact
    rational constants; ``power`` 1 or 2)."""

    scale: sympy.Rational = 1
    shift: sympy.Rational = 0
    power: int = 1
    notation: Notation | None = None
    #: True for an optimizer's state (see :attr:`Operation.optimizer_state`).
    optimizer_state: bool = False

    name = "affine"
    reference_function = affine
    default_notation = Notation("y", "y", "A scaled and shifted copy")
    rational = True

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        power = " ** 2" if self.power == 2 else ""
        return IndexEquation((f"y[i, j] = a * x[i, j]{power} + c",), {"y": "out", "x": "in0"},
                             scalars={"a": self.scale, "c": self.shift})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        a, c = sympy.Rational(self.scale), sympy.Rational(self.shift)
        return args[0].applyfunc(lambda x: a * x ** self.power + c)

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        a, c = rational_ball(self.scale), rational_ball(self.shift)
        return [[a * (x * x if self.power == 2 else x) + c for x in row] for row in args[0]]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return (np.asarray(args[0], dtype=dtype), dtype(float(self.scale)),
                dtype(float(self.shift)), self.power)


@dataclass(frozen=True)
class RowDot(Operation):
    """Σ_j a_ij b_ij of the inputs (A, B): one number per row."""

    notation: Notation | None = None

    name = "row_dot"
    reference_function = row_dot
    default_notation = Notation(r"\Sigma", "Σ", "Each row's dot product")
    rational = True

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(("S[i, 0] = sum(a[i, j] * b[i, j] for j in range(n))",),
                             {"S": "out", "a": "in0", "b": "in1"}, sizes={"n": ("a", 1)})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        A, B = args
        return sympy.Matrix(A.rows, 1, lambda i, _: sympy.Add(
            *[A[i, m] * B[i, m] for m in range(A.cols)]))

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return [[sum((a * b for a, b in zip(ra, rb)), arb(0))] for ra, rb in zip(*args)]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return np.asarray(args[0], dtype=dtype), np.asarray(args[1], dtype=dtype)


@dataclass(frozen=True)
class RowSum(Operation):
    """Σ_j x_ij of the one input: one number per row."""

    notation: Notation | None = None

    name = "row_sum"
    reference_function = row_sum
    default_notation = Notation(r"\Sigma", "Σ", "Each row's sum")
    rational = True

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(("S[i, 0] = sum(x[i, j] for j in range(n))",),
                             {"S": "out", "x": "in0"}, sizes={"n": ("x", 1)})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        X = args[0]
        return sympy.Matrix(X.rows, 1, lambda i, _: sympy.Add(*X.row(i)))

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return [[sum(row, arb(0))] for row in args[0]]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return (np.asarray(args[0], dtype=dtype),)


@dataclass(frozen=True)
class LogSoftmax(Operation):
    """log softmax of the one input: s_ij − log Σ_m e^{s_im} (a -inf score: -inf)."""

    notation: Notation | None = None

    name = "log_softmax"
    reference_function = log_softmax
    default_notation = Notation(r"\log p", "log p", "Log-probabilities")

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(("y[i, j] = s[i, j] - log(sum(exp(s[i, jp]) for jp in range(n)))",),
                             {"y": "out", "s": "in0"}, sizes={"n": ("s", 1)})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        S = args[0]

        def row(i: int) -> list:
            total = sympy.log(sympy.Add(*[sympy.exp(s) for s in S.row(i) if s != -sympy.oo]))
            return [s if s == -sympy.oo else s - total for s in S.row(i)]
        return sympy.Matrix([row(i) for i in range(S.rows)])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        out = []
        for row in args[0]:
            top = _arb_max(row)  # shifted: e^s never overflows
            total = sum(((s - top).exp() for s in row if s is not NEG_INF), arb(0)).log() + top
            out.append([NEG_INF if s is NEG_INF else s - total for s in row])
        return out

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return (np.asarray(args[0], dtype=dtype),)
