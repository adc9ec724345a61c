"""LayerNorm's last step from (x, mu, sigma^2): gamma (x - mu) / denominator + beta.

``unbiased=False``: denominator sqrt(sigma^2 + eps), the biased variance, eps inside
the root (PyTorch, the post).  ``unbiased=True``: denominator sqrt(s^2) + eps with the
unbiased variance s^2, eps outside the root (the Annotated Transformer).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import sympy
from flint import arb

from symformer.engine.arbmath import ArbMatrix, rational_ball
from symformer.ops.base import Notation, Operation, matrix


def layer_norm(x, mu, sigma2, gamma, beta, eps):
    """gamma (x - mu) / sqrt(sigma^2 + eps) + beta, per token (PyTorch, the post)."""
    return gamma * (x - mu) / np.sqrt(sigma2 + eps) + beta


def layer_norm_unbiased(x, mu, sigma2, gamma, beta, eps):
    """gamma (x - mu) / (sqrt(s^2) + eps) + beta, s^2 unbiased (the Annotated Transformer)."""
    return gamma * (x - mu) / (np.sqrt(sigma2) + eps) + beta


@dataclass(frozen=True)
class Normalize(Operation):
    """gamma * (x - mu) / denominator + beta, with exact gamma, beta and eps."""

    eps: sympy.Rational
    gamma: sympy.Matrix
    beta: sympy.Matrix
    unbiased: bool = False
    notation: Notation | None = None

    name = "normalize"
    reference_function = layer_norm
    default_notation = Notation("y", "y", "LayerNorm")

    def function(self):
        return layer_norm_unbiased if self.unbiased else layer_norm

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        X, mu, var = args

        def entry(i: int, j: int) -> sympy.Expr:
            if self.unbiased:
                denominator = sympy.sqrt(var[i, 0]) + self.eps
            else:
                denominator = sympy.sqrt(var[i, 0] + self.eps)
            return self.gamma[j] * (X[i, j] - mu[i, 0]) / denominator + self.beta[j]

        return sympy.Matrix(X.rows, X.cols, entry)

    def named_constants(self) -> dict[str, Notation]:
        return {"gamma": Notation(r"\gamma", "γ", "scale"),
                "beta": Notation(r"\beta", "β", "shift"),
                "eps": Notation(r"\epsilon", "ε", "epsilon")}

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        X, mu, var = args
        eps = rational_ball(self.eps)
        gamma = [rational_ball(g) for g in self.gamma]
        beta = [rational_ball(b) for b in self.beta]
        out = []
        for row, (m,), (v,) in zip(X, mu, var):
            # A variance ball reaching below 0 (an exact 0 variance) has its root in
            # [0, sqrt(upper)]; arb's sqrt would give NaN there.
            root = v.sqrt() if v > 0 else arb(0).union(v.upper().max(arb(0)).sqrt())
            denominator = root + eps if self.unbiased else (v + eps).sqrt()
            out.append([g * (x - m) / denominator + b for x, g, b in zip(row, gamma, beta)])
        return out

    def reference(self, args: Sequence[np.ndarray], dtype: type = np.float64) -> np.ndarray:
        x, mu, sigma2 = args
        return self.function()(x, mu, sigma2, matrix(self.gamma, dtype), matrix(self.beta, dtype),
                        dtype(float(self.eps)))
