"""Adam (Kingma & Ba, 2015), exactly: the moment estimates and the weight update.

With g = dL/dW at step t (1-based):

    m_t = beta1 m_(t-1) + (1 - beta1) g        (m_0 = 0)
    v_t = beta2 v_(t-1) + (1 - beta2) g^2      (v_0 = 0)
    W_t = W_(t-1) - lr (m_t / (1 - beta1^t)) / (sqrt(v_t / (1 - beta2^t)) + eps)

The usual defaults beta1 = 0.9, beta2 = 0.999, eps = 1e-8 are exact rationals read
from that text (9/10, 999/1000, 1/100000000); m_t and v_t are stages of their own
(``step2.adam_m.layer1.W_1``), so every local formula stays one line.

AdamW (Loshchilov & Hutter; PyTorch's ``torch.optim.AdamW``) decays the weight apart
from the gradient, before the Adam update: W_t = W_(t-1) (1 - lr lambda) - lr m^ /
(sqrt(v^) + eps), lambda the ``decay`` (PyTorch's ``weight_decay``, default 0.01).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from flint import arb

from symformer.engine.arbmath import ArbMatrix, rational_ball
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation

#: The defaults, as text read exactly (``symformer.example.literals.exact_number``).
DEFAULTS = {"beta1": "0.9", "beta2": "0.999", "eps": "1e-8", "weight_decay": "0.01"}


def adam_moment(m, g, beta, p):
    """beta m + (1 - beta) g^p: Adam's running mean of g (p = 1) or of g^2 (p = 2)."""
    return beta * m + (1 - beta) * g ** p


def adam_step(W, m, v, eta, beta1, beta2, t, epsilon):
    """W - eta m^ / (sqrt(v^) + epsilon) with the bias-corrected moments m^, v^."""
    return W - eta * (m / (1 - beta1 ** t)) / (np.sqrt(v / (1 - beta2 ** t)) + epsilon)


def adamw_step(W, m, v, eta, beta1, beta2, t, epsilon, lam):
    """W (1 - eta lam) - eta m^ / (sqrt(v^) + epsilon): AdamW's decoupled weight decay."""
    return W * (1 - eta * lam) - eta * (m / (1 - beta1 ** t)) / (
        np.sqrt(v / (1 - beta2 ** t)) + epsilon)


@dataclass(frozen=True)
class AdamMoment(Operation):
    """m_t (``power`` 1) or v_t (``power`` 2); inputs (G,) at step 1, else (M_prev, G)."""

    beta: sympy.Rational
    power: int = 1
    notation: Notation | None = None

    name = "adam_moment"
    optimizer_state = True
    reference_function = adam_moment
    default_notation = Notation("m", "m", "Adam moment estimate")
    rational = True

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        G = args[-1]
        new = G.applyfunc(lambda g: (1 - self.beta) * g ** self.power)
        return self.beta * args[0] + new if len(args) == 2 else new

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        beta = rational_ball(self.beta)
        G = args[-1]
        old = args[0] if len(args) == 2 else [[arb(0)] * len(row) for row in G]
        return [[beta * m + (1 - beta) * (g * g if self.power == 2 else g)
                 for m, g in zip(rm, rg)] for rm, rg in zip(old, G)]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        G = np.asarray(args[-1], dtype=dtype)
        old = args[0] if len(args) == 2 else np.zeros_like(G)
        return old, G, dtype(float(self.beta)), self.power


@dataclass(frozen=True)
class AdamStep(Operation):
    """W_t from the inputs (W_(t-1), m_t, v_t); ``t`` is the 1-based step; ``decay``:
    AdamW's decoupled weight decay (0: Adam)."""

    lr: sympy.Rational
    t: int
    beta1: sympy.Rational
    beta2: sympy.Rational
    eps: sympy.Rational
    notation: Notation | None = None
    decay: sympy.Rational = 0

    name = "adam_step"
    is_weight = True
    reference_function = adam_step
    default_notation = Notation("W'", "W'", "Weight after an Adam step")

    def function(self):
        return adamw_step if self.decay else adam_step

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        W, M, V = args
        c1, c2 = 1 - self.beta1 ** self.t, 1 - self.beta2 ** self.t
        keep = 1 - self.lr * self.decay
        return sympy.Matrix(W.rows, W.cols, lambda i, j: keep * W[i, j] - self.lr * (
            M[i, j] / c1) / (sympy.sqrt(V[i, j] / c2) + self.eps))

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        W, M, V = args
        lr, eps = rational_ball(self.lr), rational_ball(self.eps)
        keep = rational_ball(1 - self.lr * self.decay)
        c1 = rational_ball(1 - self.beta1 ** self.t)
        c2 = rational_ball(1 - self.beta2 ** self.t)
        return [[keep * w - lr * (m / c1) / (_root(v / c2) + eps)
                 for w, m, v in zip(rw, rm, rv)] for rw, rm, rv in zip(W, M, V)]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        W, M, V = args
        found = (W, M, V, dtype(float(self.lr)), dtype(float(self.beta1)),
                 dtype(float(self.beta2)), self.t, dtype(float(self.eps)))
        return (*found, dtype(float(self.decay))) if self.decay else found


def _root(v: arb) -> arb:
    """sqrt(v) for v >= 0 (a second moment): a ball reaching below 0 (v exactly 0,
    or not yet separated from it) gives [0, sqrt(upper end)], never NaN."""
    if v > 0:
        return v.sqrt()
    return arb(0).union(v.upper().sqrt())
