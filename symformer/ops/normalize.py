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
from symformer.errors import InputError
from symformer.ops.base import Notation, Operation, matrix
from symformer.ops.calculus import Arithmetic, Rows


def layer_norm(x, mu, sigma2, gamma, beta, eps):
    """gamma (x - mu) / sqrt(sigma^2 + eps) + beta, per token (PyTorch, the post)."""
    return gamma * (x - mu) / np.sqrt(sigma2 + eps) + beta


def layer_norm_unbiased(x, mu, sigma2, gamma, beta, eps):
    """gamma (x - mu) / (sqrt(s^2) + eps) + beta, s^2 unbiased (the Annotated Transformer)."""
    return gamma * (x - mu) / (np.sqrt(sigma2) + eps) + beta


def root(v: arb) -> arb:
    """sqrt of a variance ball; one reaching below 0 (an exact 0 variance) has its root
    in [0, sqrt(upper)], where arb's sqrt would give NaN."""
    return v.sqrt() if v > 0 else arb(0).union(v.upper().max(arb(0)).sqrt())


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

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        X, mu, var = args
        eps = rational_ball(self.eps)
        gamma = [rational_ball(g) for g in self.gamma]
        beta = [rational_ball(b) for b in self.beta]
        out = []
        for row, (m,), (v,) in zip(X, mu, var):
            # A variance ball reaching below 0 (an exact 0 variance) has its root in
            # [0, sqrt(upper)]; arb's sqrt would give NaN there.
            denominator = root(v) + eps if self.unbiased else (v + eps).sqrt()
            out.append([g * (x - m) / denominator + b for x, g, b in zip(row, gamma, beta)])
        return out

    def denominators(self, row: int) -> list[tuple[int, int, int]]:
        # sqrt(var + eps) and sqrt(var) + eps are > 0 unless eps = 0
        return [(2, row, 0)] if self.eps == 0 else []

    def undefined(self, stage, row: int) -> Exception:
        token = stage.rows[row] if row < len(stage.rows) else str(row)
        return InputError(
            f"{stage.name}: row {row} ({token!r}) is undefined: eps = 0 and every entry of "
            f"the row equals its mean, so LayerNorm divides 0 by 0 (give eps > 0)")

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        (x, mu, var), (d, dmu, dvar) = x0, dx
        eps = rational_ball(self.eps)
        gamma = [rational_ball(g) for g in self.gamma]
        out = []
        for row, (m,), (v,), drow, (dm,), (dv,) in zip(x, mu, var, d, dmu, dvar):
            if self.unbiased:
                r0, r = root(v), root(v + dv)
                den0, den = r0 + eps, r + eps
                dden = dv / (r + r0)
            else:
                den0, den = (v + eps).sqrt(), (v + dv + eps).sqrt()
                dden = dv / (den + den0)
            out.append([g * ((dv_ - dm) / den - (v_ - m) * dden / (den * den0))
                        for v_, dv_, g in zip(row, drow, gamma)])
        return out

    def reference(self, args: Sequence[np.ndarray], dtype: type = np.float64) -> np.ndarray:
        x, mu, sigma2 = args
        return self.function()(x, mu, sigma2, matrix(self.gamma, dtype), matrix(self.beta, dtype),
                        dtype(float(self.eps)))

    def parameters(self) -> dict[str, sympy.Matrix]:
        """gamma and beta."""
        return {"gamma": self.gamma, "beta": self.beta}

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """y_j = gamma_j (x_j - mu) / D + beta_j with D = sqrt(sigma^2 + eps) (biased) or
        sqrt(s^2) + eps (unbiased), mu and sigma^2 being stages of their own:

        dL/dx_j = gamma_j g_j / D;  dL/dmu = -sum_j gamma_j g_j / D;
        dL/dsigma^2 = -sum_j gamma_j g_j (x_j - mu) / D^2 * dD/dsigma^2, where dD/dsigma^2 is
        1 / (2 D) (biased) or 1 / (2 sqrt(s^2)) (unbiased);
        dL/dgamma_j = sum_i g_ij (x_ij - mu_i) / D_i;  dL/dbeta_j = sum_i g_ij.
        """
        X, mu, var = args
        eps = num.const(self.eps)
        gamma = [num.const(v) for v in self.gamma]
        if wrt == "beta":
            return [[num.total(column) for column in zip(*grad)]]
        result, centred = [], []
        for row, (m,), (v,), g in zip(X, mu, var, grad):
            root = num.sqrt(v)
            D = root + eps if self.unbiased else num.sqrt(v + eps)
            centred.append([(x - m) / D for x in row])
            if wrt == 0:
                result.append([c * d / D for c, d in zip(gamma, g)])
            elif wrt == 1:
                result.append([-num.total(c * d for c, d in zip(gamma, g)) / D])
            elif wrt == 2:
                slope = 1 / (2 * root) if self.unbiased else 1 / (2 * D)
                result.append([-num.total(c * d * (x - m) for c, d, x in zip(gamma, g, row))
                               * slope / (D * D)])
        if wrt == "gamma":
            return [[num.total(d * c for d, c in zip(ds, cs))
                     for ds, cs in zip(zip(*grad), zip(*centred))]]
        return result
