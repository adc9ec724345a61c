"""Exact GELU: h/2 (1 + erf(h / sqrt 2)) (not the tanh approximation)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from flint import arb

from symformer.engine.arbmath import ArbMatrix
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.calculus import Arithmetic
from symformer.ops.elementwise import Smooth

erf = np.vectorize(math.erf, otypes=[np.float64])


def gelu(h):
    """h/2 (1 + erf(h / sqrt(2))), element-wise."""
    return h / 2 * (1 + erf(h / np.sqrt(2)))


def gelu_backward(h, g):
    """dL/dh = dL/da (Phi(h) + h phi(h)): the normal distribution and density functions."""
    return g * ((1 + erf(h / np.sqrt(2))) / 2 + h * np.exp(-h ** 2 / 2) / np.sqrt(2 * np.pi))


@dataclass(frozen=True)
class GELU(Smooth):
    """The Gaussian error linear unit, element-wise."""

    notation: Notation | None = None

    name = "gelu"
    reference_function = gelu
    default_notation = Notation("a", "a", "FFN activation (GELU)")
    activation_key, activation_rank = "gelu", 1
    function_name, gated_name = "GELU", "GEGLU"
    function_aliases = ("gelu",)
    definition = ("GELU: ", r"\operatorname{GELU}(x) = x\,\Phi(x) = \frac{x}{2}"
                  r"\left(1 + \operatorname{erf}\frac{x}{\sqrt{2}}\right)",
                  ", with ", r"\Phi", " the standard normal distribution function.")
    torch_function = "torch.nn.functional.gelu(x)"
    hf_names = ("gelu",)
    torch_names = ("GELU(approximate='none')", "gelu")

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(("a[i, j] = h[i, j] * (1 + erf(h[i, j] / sqrt(2))) / 2",),
                             {"a": "out", "h": "in0"})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return args[0].applyfunc(lambda h: h * (1 + sympy.erf(h / sympy.sqrt(2))) / 2)

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        root2 = arb(2).sqrt()
        # 1 + erf(x) = erfc(-x): no cancellation for h << 0
        return [[h * (-h / root2).erfc() / 2 for h in row] for row in args[0]]

    def slope(self, h: Any, num: Arithmetic) -> Any:
        """gelu'(h) = (1 + erf(h / sqrt 2)) / 2 + h exp(-h^2 / 2) / sqrt(2 pi)."""
        root2, root2pi = num.const(sympy.sqrt(2)), num.sqrt(2 * num.pi())
        return num.one_plus_erf(h / root2) / 2 + h * num.exp(-h * h / 2) / root2pi

    def backward_function(self, wrt: int | str):
        return gelu_backward
