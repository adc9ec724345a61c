"""The terms a worked line prints before it adds them up, as operations of side stages.

Nothing reads these stages: :mod:`symformer.blocks.side_stages` adds one when a claim,
a tagged note or a fill template names it, so that every number a worked example
prints is claimable (docs/verify.md, "Addresses of the terms").

* :class:`Exponentials` -- e^{s_ij} of a softmax's input (a -inf score: exactly 0);
* :class:`ExpSums` -- the softmax's denominator Σ_j e^{s_ij}, one per row;
* :class:`Squares` -- the squares inside a mean square (x_ij²) or a variance
  ((x_ij - μ_i)²);
* :class:`ConstantTable` -- an exact matrix of given values (RoPE's θ_i and angles p θ_i);
* :class:`AdamPart` -- a part of an Adam step: m̂, v̂, √v̂ + ε, the update
  lr m̂ / (√v̂ + ε), or AdamW's decayed weight W (1 - lr λ).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from flint import arb

from symformer.engine.arbmath import NEG_INF, ArbMatrix, rational_ball, relu_ball, sympy_to_arb
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation, matrix


def exponentials(s):
    """e^{s_ij}, entry by entry (e^{-inf} = 0)."""
    return np.exp(s)


def exp_sums(s):
    """Σ_j e^{s_ij}: each row's sum of exponentials, a column."""
    return np.sum(np.exp(s), axis=1, keepdims=True)


def squares(x, mu):
    """(x_ij - mu_i)^2: the squares a variance averages (mu = 0: a mean square's)."""
    return (x - mu) ** 2


def constant(C):
    """The given exact matrix C itself."""
    return C


def adam_part(W, M, V, eta, c1, c2, epsilon, keep, part):
    """One part of an Adam step: m^ = M/c1, v^ = V/c2, sqrt(v^) + epsilon, the update
    eta m^ / (sqrt(v^) + epsilon), or the decayed weight keep W (keep = 1 - eta lambda)."""
    mhat, vhat = M / c1, V / c2
    denominator = np.sqrt(vhat) + epsilon
    return {"mhat": mhat, "vhat": vhat, "denominator": denominator,
            "update": eta * mhat / denominator, "decayed": keep * W}[part]


def _root(v: arb) -> arb:
    """sqrt(v) for v >= 0 (a second moment): a ball reaching below 0 gives
    [0, sqrt(upper end)], never NaN (as Adam's step takes it)."""
    return v.sqrt() if v > 0 else arb(0).union(v.upper().sqrt())


def _exp(s: sympy.Expr) -> sympy.Expr:
    return sympy.S.Zero if s == -sympy.oo else sympy.exp(s)


@dataclass(frozen=True)
class Exponentials(Operation):
    """e^{s_ij} of the one input (a softmax's scores)."""

    notation: Notation | None = None

    name = "exponentials"
    reference_function = exponentials
    default_notation = Notation(r"e^{s}", "e^s", "Exponentials of the softmax's inputs")

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(("e[i, j] = exp(s[i, j])",), {"e": "out", "s": "in0"})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return args[0].applyfunc(_exp)

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return [[arb(0) if s is NEG_INF else s.exp() for s in row] for row in args[0]]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return (np.asarray(args[0], dtype=dtype),)


@dataclass(frozen=True)
class ExpSums(Operation):
    """Σ_j e^{s_ij} of the one input: each row's softmax denominator (a column)."""

    notation: Notation | None = None

    name = "exp_sums"
    reference_function = exp_sums
    default_notation = Notation(r"\Sigma", "Σ", "Sum of the exponentials")

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(("S[i, 0] = sum(exp(s[i, j]) for j in range(n))",),
                             {"S": "out", "s": "in0"}, sizes={"n": ("s", 1)})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        S = args[0]
        return sympy.Matrix(S.rows, 1, lambda i, _: sympy.Add(*[_exp(s) for s in S.row(i)]))

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return [[sum((s.exp() for s in row if s is not NEG_INF), arb(0))] for row in args[0]]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return (np.asarray(args[0], dtype=dtype),)


@dataclass(frozen=True)
class Squares(Operation):
    """(x_ij - μ_i)² from the inputs (x, μ) (a variance's), or x_ij² from (x,) (a mean
    square's)."""

    notation: Notation | None = None

    name = "squares"
    reference_function = squares
    default_notation = Notation(r"x^2", "x²", "Squares inside the mean")
    rational = True

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        if len(shapes) == 2:
            return IndexEquation(("q[i, j] = (x[i, j] - mu[i, 0]) ** 2",),
                                 {"q": "out", "x": "in0", "mu": "in1"})
        return IndexEquation(("q[i, j] = x[i, j] ** 2",), {"q": "out", "x": "in0"})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        X = args[0]
        mu = args[1] if len(args) == 2 else sympy.zeros(X.rows, 1)
        return sympy.Matrix(X.rows, X.cols, lambda i, j: (X[i, j] - mu[i, 0]) ** 2)

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        mu = args[1] if len(args) == 2 else [[arb(0)] for _ in args[0]]
        # d * d, not d ** 2 (NaN on a ball containing 0: an entry at its mean, or 0),
        # clipped at 0 like a square
        return [[relu_ball((x - m[0]) * (x - m[0])) for x in row]
                for row, m in zip(args[0], mu)]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        x = np.asarray(args[0], dtype=dtype)
        mu = np.asarray(args[1], dtype=dtype) if len(args) == 2 else np.zeros(
            (x.shape[0], 1), dtype=dtype)
        return x, mu


@dataclass(frozen=True)
class ConstantTable(Operation):
    """The exact matrix ``value`` (exact expressions: RoPE's θ_i = 10000^(-2i/d))."""

    value: sympy.Matrix
    notation: Notation | None = None
    #: True for an optimizer's state (Adam's m_0 = 0; see
    #: :attr:`Operation.optimizer_state`).
    optimizer_state: bool = False
    #: True when its rows are the tokens' positions (RoPE's cos and sin of each
    #: position's angles, the sinusoids' angles).
    by_token: bool = False

    name = "constant"

    @property
    def example_constant(self) -> bool:  # type: ignore[override]
        """A constant of the example: neither one row per token nor an optimizer's state."""
        return not (self.by_token or self.optimizer_state)
    reference_function = constant
    default_notation = Notation(r"\theta", "θ", "Given constants")

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(("C[i, j] = C0[i, j]",), {"C": "out", "C0": "const:value"},
                             symbols={"C0": (r"C^{(0)}", "C⁽⁰⁾")},
                             remark="the exact values the example implies")

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return sympy.Matrix(self.value)

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return [[sympy_to_arb(v) for v in self.value.row(i)] for i in range(self.value.rows)]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return (np.array([[float(sympy.N(v, 30)) for v in self.value.row(i)]
                          for i in range(self.value.rows)], dtype=dtype)
                if not all(v.is_Rational for v in self.value) else matrix(self.value, dtype),)


#: The parts of an Adam step :class:`AdamPart` computes.
ADAM_PARTS = ("mhat", "vhat", "denominator", "update", "decayed")


@dataclass(frozen=True)
class AdamPart(Operation):
    """One part of the Adam step t from the step's inputs (W_(t-1), m_t, v_t): ``part``
    is one of :data:`ADAM_PARTS`."""

    part: str
    lr: sympy.Rational
    t: int
    beta1: sympy.Rational
    beta2: sympy.Rational
    eps: sympy.Rational
    decay: sympy.Rational = 0
    notation: Notation | None = None

    name = "adam_part"
    optimizer_state = True
    reference_function = adam_part
    default_notation = Notation(r"\hat{m}", "m̂", "Part of an Adam step")

    def _constants(self) -> tuple:
        return (1 - self.beta1 ** self.t, 1 - self.beta2 ** self.t,
                1 - self.lr * self.decay)

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        W, M, V = args
        c1, c2, keep = self._constants()

        def entry(i: int, j: int) -> sympy.Expr:
            mhat, vhat = M[i, j] / c1, V[i, j] / c2
            denominator = sympy.sqrt(vhat) + self.eps
            return {"mhat": lambda: mhat, "vhat": lambda: vhat,
                    "denominator": lambda: denominator,
                    "update": lambda: self.lr * mhat / denominator,
                    "decayed": lambda: keep * W[i, j]}[self.part]()
        return sympy.Matrix(W.rows, W.cols, entry)

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        W, M, V = args
        c1, c2, keep = (rational_ball(c) for c in self._constants())
        lr, eps = rational_ball(self.lr), rational_ball(self.eps)

        def entry(w: arb, m: arb, v: arb) -> arb:
            if self.part == "mhat":
                return m / c1
            if self.part == "vhat":
                return v / c2
            if self.part == "decayed":
                return keep * w
            denominator = _root(v / c2) + eps
            return denominator if self.part == "denominator" else lr * (m / c1) / denominator
        return [[entry(w, m, v) for w, m, v in zip(rw, rm, rv)] for rw, rm, rv in zip(W, M, V)]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        c1, c2, keep = self._constants()
        return (*(np.asarray(a, dtype=dtype) for a in args), dtype(float(self.lr)),
                dtype(float(c1)), dtype(float(c2)), dtype(float(self.eps)),
                dtype(float(keep)), self.part)
