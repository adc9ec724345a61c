"""A gated activation: act(gate) ⊙ hidden, element-wise (SwiGLU with SiLU, GEGLU with GELU)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import sympy

from symformer.engine.arbmath import ArbMatrix
from symformer.ops.base import Notation, Operation, Spelling


def gated(act_g, h):
    """act(g) ⊙ h: the activated gate times the hidden layer, element-wise."""
    return act_g * h


@dataclass(frozen=True)
class GatedProduct(Operation):
    """``activation(gate) * hidden`` element-wise; inputs (gate, hidden)."""

    activation: Operation
    notation: Notation | None = None

    name = "gated_product"
    reference_function = gated
    default_notation = Notation("a", "a", "Gated activation act(g) ⊙ h")
    trace_step = "activation"

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        gate, hidden = args
        return self.activation.sympy([gate]).multiply_elementwise(hidden)

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        gate, hidden = args
        act = self.activation.arb([gate])
        return [[a * h for a, h in zip(ra, rh)] for ra, rh in zip(act, hidden)]

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix | None:
        (gate, hidden), (dgate, dhidden) = x0, dx
        dact = self.activation.difference([gate], [dgate])
        if dact is None:
            return None
        act = self.activation.arb([gate])
        # (a + da)(h + dh) - a h = da (h + dh) + a dh
        return [[da * (h + dh) + a * dh for a, da, h, dh in zip(ra, rda, rh, rdh)]
                for ra, rda, rh, rdh in zip(act, dact, hidden, dhidden)]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[np.ndarray]:
        gate, hidden = args
        return self.activation.reference([gate], dtype), hidden

    def spelling(self) -> Spelling:
        return Spelling(index="j", indexed=frozenset({"act_g", "h"}), symbols={
            "act_g": Notation(r"\operatorname{act}(g)", "act(g)", "")})
