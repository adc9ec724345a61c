"""The logistic sigmoid, 1 / (1 + exp(-z)), element-wise: a binary classifier's output.

Its output is a probability, written ŷ (Jurafsky & Martin's ŷ = σ(w·x + b)).  The
function is printed ``\\operatorname{sigmoid}``, not σ: this project's notation keeps σ
for LayerNorm's standard deviation (σ², σ̃), one letter per quantity.  The backward
rule reads the output, as textbooks write it: dL/dz = dL/dŷ ŷ (1 − ŷ).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from symformer.engine.arbmath import ArbMatrix
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.ops.base import Notation
from symformer.ops.calculus import Arithmetic, Rows
from symformer.ops.elementwise import Smooth
from symformer.worked.model import Add, Const, Div, Func, Mul, Neg, Node

#: The sigmoid's output: a predicted probability.
PREDICTED = Notation(r"\hat{y}", "ŷ", "Predicted probability (sigmoid)")


def sigmoid(z):
    """1 / (1 + exp(-z)), element-wise."""
    return 1 / (1 + np.exp(-z))


def sigmoid_backward(y, g):
    """dL/dz = dL/dy * y (1 - y), y = sigmoid(z) the output."""
    return g * y * (1 - y)


@dataclass(frozen=True)
class Sigmoid(Smooth):
    """ŷ = 1 / (1 + e^(−z)) entry by entry; each output lies in (0, 1)."""

    notation: Notation | None = None

    name = "sigmoid"
    reference_function = sigmoid
    default_notation = PREDICTED
    nonnegative = True
    heat = True
    function_name = "sigmoid"
    definition = ("the logistic sigmoid maps a logit to a probability: ",
                  r"\operatorname{sigmoid}(z) = \frac{1}{1 + e^{-z}}", ".")
    torch_function = "torch.sigmoid(x)"

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(("y[i, j] = 1 / (1 + exp(-z[i, j]))",), {"y": "out", "z": "in0"})

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        return IndexEquation(("dz[i, j] = dy[i, j] * y[i, j] * (1 - y[i, j])",),
                             {"dz": "result", "dy": "grad", "y": "out"})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return args[0].applyfunc(lambda z: 1 / (1 + sympy.exp(-z)))

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return [[1 / (1 + (-z).exp()) for z in row] for row in args[0]]

    def worked_tree(self, formula: sympy.Expr, convert: Callable[[sympy.Expr], Node]
                    ) -> Node | None:
        """1 / (1 + e^(−ℓ)) as the equation writes it, rather than SymPy's
        ``1/(exp(-l) + 1)``."""
        if len(formula.free_symbols) != 1:
            return None
        (z,) = formula.free_symbols
        if formula != 1 / (1 + sympy.exp(-z)):
            return None
        one = Const(sympy.S.One)
        return Div(one, Add((one, Func("exp", (Neg(convert(z)),)))))

    def backward_worked_tree(self, formula: sympy.Expr,
                             convert: Callable[[sympy.Expr], Node]) -> Node | None:
        """∂L/∂ŷ · ŷ (1 − ŷ) as the displayed rule writes it."""
        found = formula.free_symbols
        if len(found) != 2:
            return None
        for g, y in itertools.permutations(found):
            if sympy.expand(formula - g * y * (1 - y)) == 0:
                return Mul((convert(g), convert(y),
                            Add((Const(sympy.S.One), Neg(convert(y))))))
        return None

    def slope(self, h: Any, num: Arithmetic) -> Any:
        """sigmoid'(z) = s (1 - s) with s = 1 / (1 + exp(-z)) (the finite-mask bound)."""
        s = 1 / (1 + num.exp(-h))
        return s * (1 - s)

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """dL/dz = dL/dŷ ŷ (1 − ŷ), over the output's entries."""
        return [[d * y * (1 - y) for y, d in zip(ys, ds)] for ys, ds in zip(out, grad)]

    def backward_function(self, wrt: int | str):
        return sigmoid_backward

    def backward_arguments(self, wrt, args, out, grad, dtype):
        return out.astype(dtype), grad.astype(dtype)
