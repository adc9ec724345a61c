"""LayerNorm's last step with gamma and beta read from stages: a training step's weights.

``gamma (x - mu) / D + beta`` is affine in gamma and beta, so this operation is
:class:`~symformer.ops.normalize.Normalize` with gamma = 1 and beta = 0 (the
normalised row n, its formula, balls and backward rule written once, there), then
``gamma_j n_j + beta_j`` with gamma and beta the stage symbols of the step before
(:mod:`symformer.blocks.train`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from symformer.engine.arbmath import ArbMatrix
from symformer.lazy import sympy
from symformer.ops.base import Notation, Operation, Spelling
from symformer.ops.calculus import Arithmetic, Rows
from symformer.ops.normalize import Normalize, backward_arguments, layer_norm


@dataclass(frozen=True)
class StagedNormalize(Operation):
    """Inputs x, mu, sigma^2 (as :class:`Normalize`), then gamma and beta (1 x d stages)."""

    eps: sympy.Rational
    unbiased: bool = False
    notation: Notation | None = None

    name = "staged_normalize"
    reference_function = layer_norm
    default_notation = Notation("y", "y", "LayerNorm (trained scale and shift)")
    trace_step = "norm"

    def _plain(self, d: int) -> Normalize:
        """The same LayerNorm with gamma = 1 and beta = 0 on rows of width ``d``."""
        return Normalize(self.eps, sympy.ones(1, d), sympy.zeros(1, d), self.unbiased)

    def function(self):
        return self._plain(1).function()

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        X, _, _, gamma, beta = args
        n = self._plain(X.cols).sympy(args[:3])
        return sympy.Matrix(X.rows, X.cols, lambda i, j: gamma[0, j] * n[i, j] + beta[0, j])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        (gamma,), (beta,) = args[3], args[4]
        n = self._plain(len(args[0][0])).arb(args[:3])
        return [[g * x + b for x, g, b in zip(row, gamma, beta)] for row in n]

    def denominators(self, row: int) -> list[tuple[int, int, int]]:
        return self._plain(1).denominators(row)

    def undefined(self, stage, row: int) -> Exception:
        return self._plain(1).undefined(stage, row)

    def backward_denominators(self, wrt: int | str, row: int) -> list[tuple[int, int, int]]:
        # the plain rule's (unbiased: the variance, input 2 here as there), so that a
        # training step names an undefined gradient instead of overflowing
        return self._plain(1).backward_denominators(_PARAMETER.get(wrt, wrt), row)

    def backward_undefined(self, stage, row: int) -> Exception:
        return self._plain(1).backward_undefined(stage, row)

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        x, mu, sigma2, gamma, beta = (np.asarray(a, dtype=dtype) for a in args)
        return x, mu, sigma2, gamma, beta, dtype(float(self.eps))

    def spelling(self) -> Spelling:
        return Spelling(names={"eps": "varepsilon"}, index="j",
                        indexed=frozenset({"x", "gamma", "beta"}))

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """dL/dn_j = gamma_j g_j through the plain LayerNorm's rule (x, mu, sigma^2);
        dL/dgamma_j = sum_i g_ij n_ij, the plain rule's own gamma gradient with g;
        dL/dbeta_j = sum_i g_ij."""
        plain = self._plain(len(args[0][0]))
        if wrt == 3:
            return plain.backward(args[:3], out, grad, "gamma", num)
        if wrt == 4:
            return plain.backward(args[:3], out, grad, "beta", num)
        (gamma,) = args[3]
        scaled = [[g * c for g, c in zip(row, gamma)] for row in grad]
        return plain.backward(args[:3], out, scaled, wrt, num)

    def backward_function(self, wrt: int | str):
        return self._plain(1).backward_function(_PARAMETER.get(wrt, wrt))

    def backward_arguments(self, wrt, args, out, grad, dtype):
        x, mu, sigma2, gamma, _beta, eps = self.arguments(args, dtype)
        return backward_arguments(_PARAMETER.get(wrt, wrt), x, mu, sigma2, gamma, eps,
                                  grad.astype(dtype))


#: gamma and beta: inputs 3 and 4 here, the plain LayerNorm's parameters.
_PARAMETER = {3: "gamma", 4: "beta"}
