"""ALiBi (Press, Smith and Lewis, "Train Short, Test Long", 2022): a linear bias on the
scores instead of positional encodings.

Each head has a slope m; the score of query i for key j gets ``-m * |i - j|`` added
after scaling and before the softmax (on every entry a causal mask keeps, j <= i, this
is the paper's ``-m * (i - j)``).  A score masked with -inf stays -inf; one masked with
a finite number (-1e9) gets the bias too, as the float implementations add it.  The
bias is a constant: the backward rule passes the gradient unchanged.

``alibi = true`` gives the paper's slopes (2^(-8k/h) for head k of h, h a power of 2;
:func:`symformer.example.alibi.paper_slopes`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from flint import arb

from symformer.engine.arbmath import NEG_INF, ArbMatrix, rational_ball, sympy_to_arb
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation
from symformer.ops.calculus import Arithmetic, Rows


def alibi_scores(S, m, D):
    """S - m * D: the scores with the linear bias, D[i, j] = |i - j| the distance."""
    return S - m * D


def alibi_masked_scores(S, m, D, M):
    """S - m * D, and -inf where the mask M is set (a -inf score stays -inf)."""
    return np.where(M, -np.inf, S - m * D)


def alibi_backward(G):
    """dL/ds = dL/da: the bias is a constant."""
    return G


def alibi_masked_backward(G, M):
    """dL/ds = dL/da, and exactly 0 where M keeps the score at -inf (a constant)."""
    return np.where(M, 0, G)


@dataclass(frozen=True)
class ALiBi(Operation):
    """``s - m |i - j|``: the scores of one head with its linear distance bias.

    ``masked`` are the entries the mask set before (a -inf stays -inf; the softmax
    and the printers read it from here, as from the scale-and-mask step).
    """

    #: The head's slope: an exact rational, or an exact SymPy number (2^(-1/2)).
    slope: sympy.Expr
    masked: frozenset[tuple[int, int]] = frozenset()
    #: True: the masked entries are -inf (they stay -inf, no bias is written); False:
    #: masked with a finite number, which gets the bias like any score.
    infinite_mask: bool = True
    notation: Notation | None = None

    name = "alibi"
    part_of_block = "head"
    keeps_mask = True
    reference_function = alibi_scores
    default_notation = Notation(r"\hat{s}", "ŝ", "Scores with the ALiBi bias")
    trace_step = "attention"
    columns = "keys"
    rational = True

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        test, arrays = self._test(), {"a": "out", "s": "in0"}
        if test is None:
            line = "a[i, j] = s[i, j] - m * (i - j) if j <= i else s[i, j] - m * (j - i)"
        elif test == "j <= i":  # causal: every kept entry has j <= i
            line = "a[i, j] = s[i, j] - m * (i - j) if j <= i else -inf"
        else:
            arrays["mask"] = "const:masked"
            line = ("a[i, j] = (s[i, j] - m * (i - j) if j <= i else s[i, j] - m * (j - i)) "
                    "if mask[i, j] == 0 else -inf")
        return IndexEquation((line,), arrays, scalars={"m": self.slope},
                             remark=f"m = {self.slope}: the head's ALiBi slope")

    def _test(self) -> str | None:
        """The kept (-inf) entries' test in an equation, or None when there are none."""
        if not self.infinite_mask or not self.masked:
            return None
        n = max(j for _, j in self.masked) + 1
        causal = self.masked == {(i, j) for i in range(n) for j in range(i + 1, n)}
        return "j <= i" if causal else "mask[i, j] == 0"

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        test = self._test()
        arrays = {"ds": "result", "da": "grad"}
        if test is None:
            return IndexEquation(("ds[i, j] = da[i, j]",), arrays)
        if test != "j <= i":
            arrays["mask"] = "const:masked"
        return IndexEquation((f"ds[i, j] = da[i, j] if {test} else 0",), arrays)

    def _bias(self, i: int, j: int) -> sympy.Expr:
        return -sympy.sympify(self.slope) * abs(i - j)  # the slope may be named (m)

    def named_constants(self) -> dict[str, Notation]:
        return {"slope": Notation("m", "m", "the head's ALiBi slope")}

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        S = args[0]
        return sympy.Matrix(S.rows, S.cols, lambda i, j: self.sympy_entry(args, i, j))

    def sympy_entry(self, args: Sequence[sympy.Matrix], i: int, j: int) -> sympy.Expr:
        if self._kept(i, j):
            return -sympy.oo  # -inf stays -inf (the softmax's facts read it here)
        return args[0][i, j] + self._bias(i, j)

    def exactly_masked(self) -> ALiBi:
        return replace(self, infinite_mask=True)

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        m = self._slope_ball()
        return [[NEG_INF if s is NEG_INF or self._kept(i, j) else s - m * abs(i - j)
                 for j, s in enumerate(row)] for i, row in enumerate(args[0])]

    def _slope_ball(self) -> arb:
        """The slope as a ball: exact when rational (2^-8), else at the working precision
        (the paper's 2^(-1/2) for 16 heads)."""
        if getattr(self.slope, "is_Rational", True) or isinstance(self.slope, int):
            return rational_ball(self.slope)
        return sympy_to_arb(self.slope)

    def _kept(self, i: int, j: int) -> bool:
        """Entry (i, j) is masked with -inf: it stays -inf (no bias is written)."""
        return self.infinite_mask and (i, j) in self.masked

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        # a constant added: f(x0 + dx) - f(x0) = dx (0 where -inf stays -inf)
        return [[arb(0) if self._kept(i, j) else d for j, d in enumerate(row)]
                for i, row in enumerate(dx[0])]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        n, m = args[0].shape
        D = np.abs(np.arange(n)[:, None] - np.arange(m)[None, :]).astype(dtype)
        if not self.infinite_mask or not self.masked:
            return args[0], dtype(float(self.slope)), D
        M = np.zeros((n, m), dtype=bool)
        for i, j in self.masked:
            M[i, j] = True
        return args[0], dtype(float(self.slope)), D, M

    def function(self):
        return alibi_masked_scores if self.infinite_mask and self.masked else alibi_scores

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """The bias is a constant: the gradient passes unchanged (0 at a -inf score, a
        constant)."""
        return [[num.zero() if self._kept(i, j) else g for j, g in enumerate(row)]
                for i, row in enumerate(grad)]

    def backward_entry(self, args: Sequence[sympy.Matrix], out: sympy.Matrix,
                       grad: sympy.Matrix, wrt: int | str, i: int, j: int) -> sympy.Expr:
        return sympy.S.Zero if self._kept(i, j) else grad[i, j]

    def backward_function(self, wrt: int | str):
        return alibi_masked_backward if self.infinite_mask and self.masked else alibi_backward

    def backward_arguments(self, wrt, args, out, grad, dtype):
        if not self.infinite_mask or not self.masked:
            return (grad.astype(dtype),)
        return grad.astype(dtype), self.arguments([grad], dtype)[3]
