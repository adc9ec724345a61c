"""GELU's tanh approximation (GPT-2, BERT's code): h/2 (1 + tanh(sqrt(2/pi) (h + 0.044715 h^3))).

The constant 0.044715 is exact (``8943/200000``); sqrt(2/pi) and tanh stay symbolic.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from flint import arb, fmpq

from symformer.engine.arbmath import ArbMatrix, rational_ball
from symformer.equations.ir import IndexEquation
from symformer.example.exact import ExactNumber
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import WorkedPart
from symformer.ops.calculus import BALLS, EXACT, Arithmetic
from symformer.ops.elementwise import Smooth
from symformer.worked.model import PI, Add, Const, Div, Func, Mul, Neg, Node, Pow

#: The cubic coefficient of the approximation, exactly.
CUBIC = ExactNumber(fmpq(44715, 10**6))


def _formula(h: sympy.Expr) -> sympy.Expr:
    """One entry, exactly: h/2 (1 + tanh(sqrt(2/pi) (h + 8943/200000 h^3)))."""
    return h * (1 + sympy.tanh(sympy.sqrt(2 / sympy.pi) * (h + CUBIC * h ** 3))) / 2


def _inner(h: Any, num: Arithmetic) -> Any:
    """ξ = c (h + k h^3), the tanh's argument (c = sqrt(2 / pi), k = 0.044715)."""
    return num.sqrt(2 / num.pi()) * (h + num.const(CUBIC) * h * h * h)


def _slope(h: Any, u: Any, num: Arithmetic) -> Any:
    """a'(h) = (1 + tanh u) / 2 + h (1 - tanh^2 u) c (1 + 3 k h^2) / 2 at u = ξ(h)."""
    c, k = num.sqrt(2 / num.pi()), num.const(CUBIC)
    return num.one_plus_tanh(u) / 2 + h * num.sech_squared(u) * c * (1 + 3 * k * h * h) / 2


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
    activation_key, activation_rank = "gelu_tanh", 2
    function_name, gated_name = "GELU", "GEGLU"
    definition = ("GELU (tanh approximation): ",
                  r"\operatorname{GELU}(x) = \frac{x}{2}\left(1 + \tanh\left(\sqrt{2/\pi}\,"
                  r"(x + 0.044715\,x^{3})\right)\right)", ".")
    torch_function = 'torch.nn.functional.gelu(x, approximate="tanh")'
    hf_names = ("gelu_new", "gelu_pytorch_tanh")
    torch_names = ("GELU(approximate='tanh')",)
    backward_symbols = (Notation(r"\xi", "ξ", "Argument of the tanh in the derivative of GELU "
                                 "(tanh approximation)"),)

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(
            ("a[i, j] = h[i, j] / 2 * (1 + tanh(sqrt(2 / pi) * (h[i, j] + 0.044715 * "
             "h[i, j] ** 3)))",), {"a": "out", "h": "in0"})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return args[0].applyfunc(_formula)

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        """dL/dh = dL/da a'(h) as a textbook writes a'(h): with the named inner
        ξ = sqrt(2/pi) (h + 0.044715 h^3) (the tanh's argument) and the paper's constant,
        a'(h) = (1 + tanh ξ)/2 + h/2 (1 - tanh² ξ) sqrt(2/pi) (1 + 3 · 0.044715 h²).
        (ξ, not u: u is the raw attention scores.)"""
        return IndexEquation(
            ("dh[i, j] = da[i, j] * ((1 + tanh(xi[i, j])) / 2 + h[i, j] / 2 * "
             "(1 - tanh(xi[i, j]) ** 2) * sqrt(2 / pi) * (1 + 3 * 0.044715 * h[i, j] ** 2))",),
            {"dh": "result", "da": "grad", "h": "in0", "xi": "let"},
            symbols={"xi": (r"\xi", "ξ")},
            lets=(("xi[i, j] = sqrt(2 / pi) * (h[i, j] + 0.044715 * h[i, j] ** 3)",
                   "the argument of tanh"),))

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

    def backward_worked_parts(self, stage, row: int, formulas: Sequence[sympy.Expr]
                              ) -> list[WorkedPart]:
        """Each entry's ξ_j = sqrt(2/pi) (h_j + 0.044715 h_j³) worked first, as its
        displayed rule names it; the entry then reads the printed ξ_j."""
        parts = []
        for j, f in enumerate(formulas):
            found = {t.args[0] for t in f.atoms(sympy.tanh)}
            if len(found) != 1:
                return []
            parts.append(WorkedPart(Notation(rf"\xi_{{{j}}}", f"ξ_{j}",
                                             "The argument of GELU's tanh"), found.pop()))
        return parts

    def backward_worked_tree(self, formula: sympy.Expr,
                             convert: Callable[[sympy.Expr], Node]) -> Node | None:
        """dL/da ((1 + tanh ξ)/2 + h/2 (1 - tanh² ξ) sqrt(2/pi) (1 + 3 · 0.044715 h²)) and
        ξ = sqrt(2/pi) (h + 0.044715 h³) as the displayed rule writes them (ξ read in
        where it has no worked step of its own), rather than SymPy's
        ``26829 h^2/200000``."""
        found = formula.free_symbols
        one, two = Const(sympy.S.One), Const(sympy.Integer(2))
        root = Func("sqrt", (Div(two, PI),))

        def xi(h: sympy.Symbol) -> Node:
            x = convert(h)
            return Mul((root, Add((x, Mul((Const(CUBIC), Pow(x, Const(sympy.Integer(3)))))))))

        if len(found) == 1 and formula == _inner(*found, EXACT):
            return xi(*found)
        for names in itertools.permutations(found):
            g, h, u = (*names, None) if len(names) == 2 else names
            if formula == g * _slope(h, _inner(h, EXACT) if u is None else u, EXACT):
                break
        else:
            return None
        x = convert(h)
        tanh = Func("tanh", (xi(h) if u is None else convert(u),))
        first = Div(Add((one, tanh)), two)
        slope = Add((one, Mul((Const(sympy.Integer(3)), Const(CUBIC),
                               Pow(x, Const(sympy.Integer(2)))))))  # 3 · 0.044715, as displayed
        second = Mul((Div(x, two), Add((one, Neg(Pow(tanh, two)))), root, slope))
        return Mul((convert(g), Add((first, second))))

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        c, k = (2 / arb.pi()).sqrt(), rational_ball(CUBIC)
        return [[h * BALLS.one_plus_tanh(c * (h + k * h * h * h)) / 2 for h in row]
                for row in args[0]]

    def slope(self, h: Any, num: Arithmetic) -> Any:
        """a' = (1 + t) / 2 + h (1 - t^2) c (1 + 3 k h^2) / 2 with t = tanh(c (h + k h^3)),
        c = sqrt(2 / pi) and k = 0.044715 exactly."""
        return _slope(h, _inner(h, num), num)

    def backward_function(self, wrt: int | str):
        return gelu_tanh_backward

    def backward_arguments(self, wrt, args, out, grad, dtype):
        h = args[0].astype(dtype)
        return h, np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3)), grad.astype(dtype)
