"""SiLU (swish): h sigma(h) = h / (1 + exp(-h)), element-wise (Llama's SwiGLU gate)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import sympy
from flint import arb

from symformer.engine.arbmath import ArbMatrix
from symformer.ops.base import Notation, Operation, Spelling
from symformer.ops.calculus import Arithmetic, Rows


def silu(h):
    """h / (1 + exp(-h)), element-wise."""
    return h / (1 + np.exp(-h))


def silu_backward(h, g):
    """dL/dh = dL/da (sigma(h) + h sigma(h) (1 - sigma(h)))
    = dL/da (1 + e^-h (1 + h)) / (1 + e^-h)^2."""
    return g * (1 + np.exp(-h) * (1 + h)) / (1 + np.exp(-h)) ** 2


@dataclass(frozen=True)
class SiLU(Operation):
    """The sigmoid linear unit h sigma(h), element-wise."""

    notation: Notation | None = None

    name = "silu"
    reference_function = silu
    default_notation = Notation("a", "a", "FFN activation (SiLU)")
    trace_step = "activation"

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return args[0].applyfunc(lambda h: h / (1 + sympy.exp(-h)))

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return [[h / (1 + (-h).exp()) for h in row] for row in args[0]]

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        def one(h: arb, d: arb) -> arb:  # mean value theorem: silu'(xi) d
            xi = h.union(h + d)
            s = 1 / (1 + (-xi).exp())
            return s * (1 + xi * (1 - s)) * d

        return [[one(h, d) for h, d in zip(r0, dr)] for r0, dr in zip(x0[0], dx[0])]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[np.ndarray]:
        return args

    def spelling(self) -> Spelling:
        return Spelling(index="j", indexed=frozenset({"h"}))

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """silu'(h) = s (1 + h (1 - s)) with s = 1 / (1 + exp(-h))."""
        result = []
        for hs, ds in zip(args[0], grad):
            row = []
            for h, d in zip(hs, ds):
                s = 1 / (1 + num.exp(-h))
                row.append(d * s * (1 + h * (1 - s)))
            result.append(row)
        return result

    def backward_function(self, wrt: int | str):
        return silu_backward

    def backward_arguments(self, wrt, args, out, grad, dtype):
        return args[0].astype(dtype), grad.astype(dtype)
