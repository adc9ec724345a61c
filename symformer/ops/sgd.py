"""One step of stochastic gradient descent: W - lr * dL/dW, exactly."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from symformer.engine.arbmath import ArbMatrix, rational_ball
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation


def sgd_step(W, G, eta):
    """W - eta G: the weight after one gradient-descent step."""
    return W - eta * G


@dataclass(frozen=True)
class SgdStep(Operation):
    """Inputs: the weight W (a stage) and its gradient G; ``lr`` is exact (from its text)."""

    lr: sympy.Rational
    notation: Notation | None = None

    name = "sgd_step"
    is_weight = True
    reference_function = sgd_step
    default_notation = Notation("W'", "W'", "Weight after a gradient-descent step")
    rational = True

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return args[0] - self.lr * args[1]

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        lr = rational_ball(self.lr)
        return [[w - lr * g for w, g in zip(rw, rg)] for rw, rg in zip(*args)]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return args[0], args[1], dtype(float(self.lr))
