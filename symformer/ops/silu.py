"""SiLU (swish): h sigma(h) = h / (1 + exp(-h)), element-wise (Llama's SwiGLU gate)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from symformer.engine.arbmath import ArbMatrix
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.calculus import Arithmetic
from symformer.ops.elementwise import Smooth


def silu(h):
    """h / (1 + exp(-h)), element-wise."""
    return h / (1 + np.exp(-h))


def silu_backward(h, g):
    """dL/dh = dL/da (sigma(h) + h sigma(h) (1 - sigma(h)))
    = dL/da (1 + e^-h (1 + h)) / (1 + e^-h)^2."""
    return g * (1 + np.exp(-h) * (1 + h)) / (1 + np.exp(-h)) ** 2


@dataclass(frozen=True)
class SiLU(Smooth):
    """The sigmoid linear unit h sigma(h), element-wise."""

    notation: Notation | None = None

    name = "silu"
    reference_function = silu
    default_notation = Notation("a", "a", "FFN activation (SiLU)")
    activation_key, activation_rank = "silu", 3
    function_name, gated_name = "SiLU", "SwiGLU"
    function_aliases = ("silu", "Swish")
    definition = ("SiLU (the sigmoid-weighted linear unit): ",
                  r"\operatorname{SiLU}(x) = \frac{x}{1 + e^{-x}}", ".")
    torch_function = "torch.nn.functional.silu(x)"
    hf_names = ("silu", "swish")
    torch_names = ("SiLU", "silu")

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(("a[i, j] = h[i, j] / (1 + exp(-h[i, j]))",),
                             {"a": "out", "h": "in0"})

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        return IndexEquation(
            ("dh[i, j] = da[i, j] * (1 + exp(-h[i, j]) + h[i, j] * exp(-h[i, j])) "
             "/ (1 + exp(-h[i, j])) ** 2",), {"dh": "result", "da": "grad", "h": "in0"})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return args[0].applyfunc(lambda h: h / (1 + sympy.exp(-h)))

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return [[h / (1 + (-h).exp()) for h in row] for row in args[0]]

    def slope(self, h: Any, num: Arithmetic) -> Any:
        """silu'(h) = s (1 + h (1 - s)) with s = 1 / (1 + exp(-h))."""
        s = 1 / (1 + num.exp(-h))
        return s * (1 + h * (1 - s))

    def backward_function(self, wrt: int | str):
        return silu_backward
