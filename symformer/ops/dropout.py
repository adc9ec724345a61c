"""Dropout with a given mask: y = x * m / (1 - p), m the example's 0/1 mask (inverted
dropout, PyTorch's ``nn.Dropout`` in training: the kept entries scaled by 1/(1-p))."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from symformer.engine.arbmath import ArbMatrix, rational_ball
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation
from symformer.ops.calculus import Arithmetic, Rows
from symformer.worked.model import Add, Const, Div, Neg, Node

#: The mask's symbol when no site marks it (dropout of any stage, from Python).
MASK = Notation("D", "D", "Dropout mask (1: kept, 0: dropped)")


def dropout(x, m, p):
    """x m / (1 - p)."""
    return x * m / (1 - p)


def dropout_backward(dy, m, p):
    """dL/dx = dL/dy m / (1 - p)."""
    return dy * m / (1 - p)


@dataclass(frozen=True, eq=False)
class Dropout(Operation):
    """Reads x: each entry times its mask entry (0 or 1) over 1 - ``p``."""

    mask: tuple[tuple[int, ...], ...]
    p: Any
    notation: Notation | None = None
    #: The mask's symbol, marked by its site (``D^att``: the attention output's; one
    #: meaning per symbol in a document with two dropouts).
    mask_notation: Notation = MASK

    name = "dropout"
    reference_function = dropout
    default_notation = Notation(r"\tilde{x}", "x̃", "After dropout (the given mask)")

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        """Each entry times its mask entry over 1 - p (inverted dropout)."""
        return IndexEquation(("y[i, j] = D[i, j] * x[i, j] / (1 - p)",),
                             {"y": "out", "x": "in0", "D": "const:mask_matrix"},
                             scalars={"p": sympy.S(self.p)}, symbols={"D": self._mask_symbol},
                             remark=f"the mask: given, 1 kept and 0 dropped; the rate p = "
                                    f"{sympy.S(self.p)}")

    @property
    def _mask_symbol(self) -> tuple[str, str]:
        return self.mask_notation.latex, self.mask_notation.text

    @property
    def constant_symbols(self) -> tuple[Notation, ...]:
        """The symbols the equation names besides stages and weights (the notation
        table lists them): the mask."""
        return (self.mask_notation,)

    def worked_tree(self, formula: sympy.Expr, convert: Callable[[sympy.Expr], Node]
                    ) -> Node | None:
        """A kept entry as a textbook prints inverted dropout: x / (1 − p), p
        substituted (``m_0 / (1 − 1/3)``), not SymPy's ``3 m_0 / 2``; a dropped one is 0."""
        scale = 1 / (1 - sympy.S(self.p))
        x = sympy.expand(formula / scale)
        if formula == 0 or x.free_symbols != formula.free_symbols:
            return None
        one = Const(sympy.S.One)
        return Div(convert(x), Add((one, Neg(Const(sympy.S(self.p))))))

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """dL/dx = dL/dy m / (1 - p): a dropped entry passes no gradient."""
        scale = num.const(1 / (1 - sympy.S(self.p)))
        return [[d * scale if self.mask[i][j] else num.zero() for j, d in enumerate(row)]
                for i, row in enumerate(grad)]

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        return IndexEquation(("dx[i, j] = D[i, j] * dy[i, j] / (1 - p)",),
                             {"dx": "result", "dy": "grad", "D": "const:mask_matrix"},
                             scalars={"p": sympy.S(self.p)}, symbols={"D": self._mask_symbol})

    def backward_function(self, wrt: int | str):
        return dropout_backward

    def backward_arguments(self, wrt, args, out, grad, dtype):
        return (grad.astype(dtype), np.array(self.mask, dtype=dtype),
                dtype(float(sympy.S(self.p))))

    def mask_matrix(self) -> sympy.Matrix:
        """The given mask."""
        return sympy.Matrix([list(row) for row in self.mask])

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        x, scale = args[0], 1 / (1 - sympy.S(self.p))
        return sympy.Matrix([[x[i, j] * scale if self.mask[i][j] else sympy.S.Zero
                              for j in range(x.cols)] for i in range(x.rows)])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        scale = 1 / (1 - rational_ball(self.p))
        return [[v * scale if self.mask[i][j] else v * 0 for j, v in enumerate(row)]
                for i, row in enumerate(args[0])]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return (args[0].astype(dtype), np.array(self.mask, dtype=dtype),
                dtype(float(sympy.S(self.p))))
