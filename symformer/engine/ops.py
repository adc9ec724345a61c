"""The operations a stage applies to the stages before it.

Each operation is written twice, side by side, so the two cannot drift apart
unnoticed (a test evaluates the SymPy form in ball arithmetic and compares):

* ``sympy(args)`` -- the exact local formula.  ``args`` are SymPy matrices; normally
  the matrices of symbols that *name* the input stages' entries, so the formula of
  an entry stays short however deep the stage sits (no expression swell).  Given
  rational matrices instead (an author's printed numbers), it recomputes the stage
  exactly from them.
* ``arb(args)`` -- the same operation in ball arithmetic on whole matrices, used for
  certified digits and for interval checks of an author's rounded numbers.

Weights are exact constants baked into the op (they are part of the formula, as
in ``q = x1/4 + x2/4``), never stages of their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import sympy
from flint import arb

from symformer.engine.arbmath import NEG_INF, ArbMatrix, rational_ball, relu_ball, sympy_to_arb


class Op:
    """An operation from input matrices to one output matrix."""

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        """The exact local formula of every entry, over the given input matrices."""
        raise NotImplementedError

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        """The same operation in ball arithmetic at the current ``flint.ctx.prec``."""
        raise NotImplementedError


def _shape(m: ArbMatrix) -> tuple[int, int]:
    return len(m), len(m[0])


@dataclass(frozen=True)
class Constant(Op):
    """A stage with no inputs: an exact SymPy matrix (embeddings, positional encoding)."""

    value: sympy.Matrix

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return self.value

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return [[sympy_to_arb(v) for v in self.value.row(i)] for i in range(self.value.rows)]


@dataclass(frozen=True)
class Identity(Op):
    """The input unchanged (``output`` names the last block's result)."""

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return args[0]

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return args[0]


@dataclass(frozen=True)
class Add(Op):
    """Element-wise sum of two stages (positional encoding, residual connections)."""

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return args[0] + args[1]

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        a, b = args
        return [[x + y for x, y in zip(ra, rb)] for ra, rb in zip(a, b)]


@dataclass(frozen=True)
class Affine(Op):
    """``X @ W (+ b)`` with exact constant weights: projections and the FFN's layers."""

    W: sympy.Matrix
    b: sympy.Matrix | None = None
    _columns: list = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        # Only the non-zero weights of each output column enter its formula.
        columns = [
            [(k, self.W[k, j]) for k in range(self.W.rows) if self.W[k, j] != 0]
            for j in range(self.W.cols)
        ]
        object.__setattr__(self, "_columns", columns)

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        X = args[0]
        rows = []
        for i in range(X.rows):
            row = []
            for j, column in enumerate(self._columns):
                terms = [w * X[i, k] for k, w in column]
                if self.b is not None and self.b[j] != 0:
                    terms.append(self.b[j])
                row.append(sympy.Add(*terms))
            rows.append(row)
        return sympy.Matrix(rows)

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        X = args[0]
        columns = [[(k, rational_ball(w)) for k, w in column] for column in self._columns]
        bias = [rational_ball(v) for v in self.b] if self.b is not None else None
        out = []
        for row in X:
            out_row = []
            for j, column in enumerate(columns):
                total = bias[j] if bias is not None else arb(0)
                for k, w in column:
                    total += w * row[k]
                out_row.append(total)
            out.append(out_row)
        return out


@dataclass(frozen=True)
class MatMul(Op):
    """Product of two stages, ``A @ B`` or ``A @ B^T`` (scores ``Q K^T``, ``weights @ V``)."""

    transpose_b: bool = False

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        A, B = args
        if self.transpose_b:
            B = B.T
        return sympy.Matrix(A.rows, B.cols, lambda i, j: sympy.Add(
            *[A[i, k] * B[k, j] for k in range(A.cols) if A[i, k] != 0 and B[k, j] != 0]))

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        A, B = args
        if not self.transpose_b:
            B = [list(col) for col in zip(*B)]
        return [[_dot(ra, rb) for rb in B] for ra in A]


def _dot(a: Sequence[arb], b: Sequence[arb]) -> arb:
    total = arb(0)
    for x, y in zip(a, b):
        total += x * y
    return total


@dataclass(frozen=True)
class ScaleMask(Op):
    """Scaled scores ``S / sqrt(d_k)`` with the causal mask applied.

    ``masked`` is the set of (row, column) entries blocked by the mask.  With
    ``mask_value=None`` they are -inf (their weights are exactly 0); with a number
    (e.g. -10**9) that number is added instead, as some implementations do.
    """

    d_k: int
    masked: frozenset[tuple[int, int]] = frozenset()
    mask_value: sympy.Rational | None = None

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


@dataclass(frozen=True)
class Softmax(Op):
    """Row-wise softmax; a -inf score gets weight exactly 0."""

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


@dataclass(frozen=True)
class Concat(Op):
    """Concatenate the heads' outputs along the columns."""

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return sympy.Matrix.hstack(*args)

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return [sum((list(m[i]) for m in args), []) for i in range(len(args[0]))]


@dataclass(frozen=True)
class Activation(Op):
    """The FFN's non-linearity: ``relu`` = max(0, h) or exact ``gelu`` = h/2 (1 + erf(h/sqrt 2))."""

    kind: str = "relu"

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        H = args[0]
        if self.kind == "relu":
            return H.applyfunc(lambda h: sympy.Max(0, h))
        return H.applyfunc(lambda h: h * (1 + sympy.erf(h / sympy.sqrt(2))) / 2)

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        if self.kind == "relu":
            return [[relu_ball(h) for h in row] for row in args[0]]
        root2 = arb(2).sqrt()
        return [[h * (1 + (h / root2).erf()) / 2 for h in row] for row in args[0]]


@dataclass(frozen=True)
class RowMean(Op):
    """Each row's mean (a column vector): LayerNorm's mu."""

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        X = args[0]
        return sympy.Matrix(X.rows, 1, lambda i, _: sympy.Add(*X.row(i)) / X.cols)

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return [[sum(row, arb(0)) / len(row)] for row in args[0]]


@dataclass(frozen=True)
class RowVariance(Op):
    """Each row's variance around the given mean: biased (divide by d) or unbiased (d - 1)."""

    unbiased: bool = False

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        X, mu = args
        n = X.cols - 1 if self.unbiased else X.cols
        return sympy.Matrix(X.rows, 1, lambda i, _: sympy.Add(
            *[(x - mu[i, 0]) ** 2 for x in X.row(i)]) / n)

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        X, mu = args
        out = []
        for row, (m,) in zip(X, mu):
            n = len(row) - 1 if self.unbiased else len(row)
            # x * x, not x ** 2 (NaN on a ball containing 0); clipped at 0 like a square.
            out.append([sum((relu_ball((x - m) * (x - m)) for x in row), arb(0)) / n])
        return out


@dataclass(frozen=True)
class Normalize(Op):
    """LayerNorm's last step from (x, mu, var): gamma * (x - mu) / denominator + beta.

    ``unbiased=False``: denominator sqrt(var + eps) (PyTorch, the post).
    ``unbiased=True``: denominator sqrt(var) + eps, var the unbiased variance
    (the Annotated Transformer).
    """

    eps: sympy.Rational
    gamma: sympy.Matrix
    beta: sympy.Matrix
    unbiased: bool = False

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        X, mu, var = args

        def entry(i: int, j: int) -> sympy.Expr:
            if self.unbiased:
                denominator = sympy.sqrt(var[i, 0]) + self.eps
            else:
                denominator = sympy.sqrt(var[i, 0] + self.eps)
            return self.gamma[j] * (X[i, j] - mu[i, 0]) / denominator + self.beta[j]

        return sympy.Matrix(X.rows, X.cols, entry)

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        X, mu, var = args
        eps = rational_ball(self.eps)
        gamma = [rational_ball(g) for g in self.gamma]
        beta = [rational_ball(b) for b in self.beta]
        out = []
        for row, (m,), (v,) in zip(X, mu, var):
            # A variance ball reaching below 0 (an exact 0 variance) has its root in
            # [0, sqrt(upper)]; arb's sqrt would give NaN there.
            root = v.sqrt() if v > 0 else arb(0).union(v.upper().max(arb(0)).sqrt())
            denominator = root + eps if self.unbiased else (v + eps).sqrt()
            out.append([g * (x - m) / denominator + b for x, g, b in zip(row, gamma, beta)])
        return out
