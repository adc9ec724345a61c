"""GELU's tanh approximation (GPT-2, BERT's code): h/2 (1 + tanh(sqrt(2/pi) (h + 0.044715 h^3))).

The constant 0.044715 is exact (``8943/200000``); sqrt(2/pi) and tanh stay symbolic.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from flint import arb, fmpq

from symformer.engine.arbmath import ArbMatrix, rational_ball
from symformer.equations.ir import IndexEquation
from symformer.example.exact import ExactNumber
from symformer.lazy import sympy
from symformer.ops.base import Notation
from symformer.ops.calculus import BALLS, Arithmetic
from symformer.ops.elementwise import Smooth
from symformer.worked.model import PI, Add, Const, Div, Func, Mul, Node, Pow

#: The cubic coefficient of the approximation, exactly.
CUBIC = ExactNumber(fmpq(44715, 10**6))


def _formula(h: sympy.Expr) -> sympy.Expr:
    """One entry, exactly: h/2 (1 + tanh(sqrt(2/pi) (h + 8943/200000 h^3)))."""
    return h * (1 + sympy.tanh(sympy.sqrt(2 / sympy.pi) * (h + CUBIC * h ** 3))) / 2


def gelu_tanh(h):
    """h/2 (1 + tanh(sqrt(2/pi) (h + 0.044715 h^3))), element-wise."""
    return h / 2 * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3)))


def gelu_tanh_backward(h, t, g):
    """dL/dh = dL/da ((1 + t) / 2 + h / 2 (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 h^2)),
    t = tanh(sqrt(2/pi) (h + 0.044715 h^3))."""
    return g * ((1 + t) / 2 + h / 2 * (1 - t ** 2) * np.sqrt(2 / np.pi)
                * (1 + 3 * 0.044715 * h ** 2))


@dataclass(frozen=True)
class GELUTanh(Smooth):
    """The tanh approximation of GELU, element-wise."""

    notation: Notation | None = None

    name = "gelu_tanh"
    reference_function = gelu_tanh
    default_notation = Notation("a", "a", "FFN activation (GELU, tanh approximation)")

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(
            ("a[i, j] = h[i, j] / 2 * (1 + tanh(sqrt(2 / pi) * (h[i, j] + 0.044715 * "
             "h[i, j] ** 3)))",), {"a": "out", "h": "in0"})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return args[0].applyfunc(_formula)

    def worked_tree(self, formula: sympy.Expr, convert: Callable[[sympy.Expr], Node]
                    ) -> Node | None:
        """(h/2)(1 + tanh(sqrt(2/pi) (h + 0.044715 h^3))) with h written by ``convert``,
        rather than SymPy's ``h (tanh(sqrt(2) (8943 h^3 + 200000 h)/...) + 1)/2``."""
        if len(formula.free_symbols) != 1:
            return None
        (h,) = formula.free_symbols
        if formula != _formula(h):
            return None
        x = convert(h)
        two = Const(sympy.Integer(2))
        inner = Add((x, Mul((Const(CUBIC), Pow(x, Const(sympy.Integer(3)))))))
        root = Func("sqrt", (Div(two, PI),))
        return Mul((Div(x, two), Add((Const(sympy.S.One),
                                      Func("tanh", (Mul((root, inner)),))))))

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        c, k = (2 / arb.pi()).sqrt(), rational_ball(CUBIC)
        return [[h * BALLS.one_plus_tanh(c * (h + k * h * h * h)) / 2 for h in row]
                for row in args[0]]

    def slope(self, h: Any, num: Arithmetic) -> Any:
        """a' = (1 + t) / 2 + h (1 - t^2) c (1 + 3 k h^2) / 2 with t = tanh(c (h + k h^3)),
        c = sqrt(2 / pi) and k = 0.044715 exactly."""
        c, k = num.sqrt(2 / num.pi()), num.const(CUBIC)
        u = c * (h + k * h * h * h)
        return num.one_plus_tanh(u) / 2 + h * num.sech_squared(u) * c * (1 + 3 * k * h * h) / 2

    def backward_function(self, wrt: int | str):
        return gelu_tanh_backward

    def backward_arguments(self, wrt, args, out, grad, dtype):
        h = args[0].astype(dtype)
        return h, np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3)), grad.astype(dtype)
