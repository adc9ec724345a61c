"""RMSNorm with gamma read from a stage: a training step's weight.

``gamma_j x_j / sqrt(ms + eps)`` is linear in gamma, so this operation is
:class:`~symformer.ops.rms_norm.RMSNormalize` with gamma = 1 (the normalised row n, its
formula, balls and backward rule written once, there), then ``gamma_j n_j`` with gamma
the stage symbols of the step before (:mod:`symformer.blocks.train`).
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
from symformer.ops.rms_norm import RMSNormalize, rms_backward_arguments, rms_norm


@dataclass(frozen=True)
class StagedRMSNormalize(Operation):
    """Inputs x and ms (as :class:`RMSNormalize`), then gamma (a 1 x d stage)."""

    eps: sympy.Rational
    notation: Notation | None = None

    name = "staged_rms_normalize"
    reference_function = rms_norm
    default_notation = Notation("y", "y", "RMSNorm (trained scale)")

    def _plain(self, d: int) -> RMSNormalize:
        """The same RMSNorm with gamma = 1 on rows of width ``d``."""
        return RMSNormalize(self.eps, sympy.ones(1, d))

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        X, _, gamma = args
        n = self._plain(X.cols).sympy(args[:2])
        return sympy.Matrix(X.rows, X.cols, lambda i, j: gamma[0, j] * n[i, j])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        (gamma,) = args[2]
        n = self._plain(len(args[0][0])).arb(args[:2])
        return [[g * x for x, g in zip(row, gamma)] for row in n]

    def denominators(self, row: int) -> list[tuple[int, int, int]]:
        return self._plain(1).denominators(row)

    def undefined(self, stage, row: int) -> Exception:
        return self._plain(1).undefined(stage, row)

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        x, ms, gamma = (np.asarray(a, dtype=dtype) for a in args)
        return x, ms, gamma, dtype(float(self.eps))

    def spelling(self) -> Spelling:
        return self._plain(1).spelling()

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """dL/dn_j = gamma_j g_j through the plain RMSNorm's rule (x, ms);
        dL/dgamma_j = sum_i g_ij n_ij, the plain rule's own gamma gradient with g."""
        plain = self._plain(len(args[0][0]))
        if wrt == 2:
            return plain.backward(args[:2], out, grad, "gamma", num)
        (gamma,) = args[2]
        scaled = [[g * c for g, c in zip(row, gamma)] for row in grad]
        return plain.backward(args[:2], out, scaled, wrt, num)

    def backward_function(self, wrt: int | str):
        return self._plain(1).backward_function("gamma" if wrt == 2 else wrt)

    def backward_arguments(self, wrt, args, out, grad, dtype):
        x, ms, gamma, eps = self.arguments(args, dtype)
        return rms_backward_arguments("gamma" if wrt == 2 else wrt, x, ms, gamma, eps,
                                      grad.astype(dtype))
