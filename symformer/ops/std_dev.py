"""The standard deviation a LayerNorm divides by: sigma = sqrt(sigma^2 + eps).

Walkthroughs print it as a number of its own.  With ``eps = 0`` it is the plain
root (the unbiased convention adds eps outside the root, after this stage); for
RMSNorm the input is the mean square and the stage is the RMS sqrt(ms + eps).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from flint import arb

from symformer.engine.arbmath import ArbMatrix, rational_ball
from symformer.equations.ir import IndexEquation
from symformer.example.exact import ExactNumber
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation
from symformer.ops.calculus import Arithmetic, Rows


def root(v: arb) -> arb:
    """sqrt of a variance ball; one reaching below 0 (an exact 0 variance) has its root
    in [0, sqrt(upper)], where arb's sqrt would give NaN."""
    return v.sqrt() if v > 0 else arb(0).union(v.upper().max(arb(0)).sqrt())


def std_dev(sigma2, eps):
    """sigma = sqrt(sigma^2 + eps), per token: (n, 1)."""
    return np.sqrt(sigma2 + eps)


def std_dev_backward(g, sigma):
    """dL/dsigma^2 = dL/dsigma / (2 sigma)."""
    return g / (2 * sigma)


@dataclass(frozen=True)
class StdDev(Operation):
    """``sqrt(v + eps)`` of a one-column stage (a variance or a mean square)."""

    eps: sympy.Rational = ExactNumber(0)
    notation: Notation | None = None

    name = "std_dev"
    norm_statistic = True
    reference_function = std_dev
    default_notation = Notation(r"\tilde{\sigma}", "σ̃", "Standard deviation, stabilised")
    nonnegative = True

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(("sigma[i] = sqrt(sigma2[i] + eps)",),
                             {"sigma": "out", "sigma2": "in0"}, scalars={"eps": self.eps})

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        return IndexEquation(("dsigma2[i] = dsigma[i] / (2 * sqrt(sigma2[i] + eps))",),
                             {"dsigma2": "result", "dsigma": "grad", "sigma2": "in0"},
                             scalars={"eps": self.eps})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return args[0].applyfunc(lambda v: sympy.sqrt(v + self.eps))

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        eps = rational_ball(self.eps)
        return [[root(v + eps) for v in row] for row in args[0]]

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        eps = rational_ball(self.eps)
        # sqrt(v + dv + eps) - sqrt(v + eps) = dv / (sqrt(v + dv + eps) + sqrt(v + eps))
        return [[d / (root(v + d + eps) + root(v + eps)) for v, d in zip(r0, dr)]
                for r0, dr in zip(x0[0], dx[0])]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return args[0], dtype(float(self.eps))

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """d sqrt(v + eps) / dv = 1 / (2 sqrt(v + eps))."""
        eps = num.const(self.eps)
        return [[d / (2 * num.sqrt(v + eps)) for v, d in zip(vs, ds)]
                for vs, ds in zip(args[0], grad)]

    def backward_function(self, wrt: int | str):
        return std_dev_backward

    def backward_arguments(self, wrt, args, out, grad, dtype):
        return grad.astype(dtype), self.reference([args[0].astype(dtype)], dtype)
