"""Exact GELU: h/2 (1 + erf(h / sqrt 2)) (not the tanh approximation)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import sympy
from flint import arb

from symformer.engine.arbmath import ArbMatrix
from symformer.ops.base import Notation, Operation, Spelling
from symformer.ops.calculus import Arithmetic, Rows

erf = np.vectorize(math.erf, otypes=[np.float64])


def gelu(h):
    """h/2 (1 + erf(h / sqrt(2))), element-wise."""
    return h / 2 * (1 + erf(h / np.sqrt(2)))


def gelu_backward(h, g):
    """dL/dh = dL/da (Phi(h) + h phi(h)): the normal distribution and density functions."""
    return g * ((1 + erf(h / np.sqrt(2))) / 2 + h * np.exp(-h ** 2 / 2) / np.sqrt(2 * np.pi))


@dataclass(frozen=True)
class GELU(Operation):
    """The Gaussian error linear unit, element-wise."""

    notation: Notation | None = None

    name = "gelu"
    reference_function = gelu
    default_notation = Notation("a", "a", "FFN activation (GELU)")
    trace_step = "activation"

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return args[0].applyfunc(lambda h: h * (1 + sympy.erf(h / sympy.sqrt(2))) / 2)

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        root2 = arb(2).sqrt()
        return [[h * (1 + (h / root2).erf()) / 2 for h in row] for row in args[0]]

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        root2, root2pi = arb(2).sqrt(), (2 * arb.pi()).sqrt()

        def one(h: arb, d: arb) -> arb:  # mean value theorem: gelu'(xi) d
            xi = h.union(h + d)
            return ((1 + (xi / root2).erf()) / 2 + xi * (-xi * xi / 2).exp() / root2pi) * d

        return [[one(h, d) for h, d in zip(r0, dr)] for r0, dr in zip(x0[0], dx[0])]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[np.ndarray]:
        return args

    def spelling(self) -> Spelling:
        return Spelling(index="j", indexed=frozenset({"h"}), symbols={
            "erf": Notation(r"\operatorname{erf}", "erf", "")})

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """gelu'(h) = (1 + erf(h / sqrt 2)) / 2 + h exp(-h^2 / 2) / sqrt(2 pi)."""
        root2, root2pi = num.const(sympy.sqrt(2)), num.sqrt(2 * num.pi())
        return [[d * ((1 + num.erf(h / root2)) / 2 + h * num.exp(-h * h / 2) / root2pi)
                 for h, d in zip(hs, ds)] for hs, ds in zip(args[0], grad)]

    def backward_function(self, wrt: int | str):
        return gelu_backward

    def backward_arguments(self, wrt, args, out, grad, dtype):
        return args[0].astype(dtype), grad.astype(dtype)
