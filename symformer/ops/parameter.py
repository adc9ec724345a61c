"""A weight as a stage: the exact matrix an example gives (a stage with no inputs).

``train`` starts every trained weight as a parameter stage (``step0.layer1.W_1``)
so that every step reads its weights the same way, from stages
(:meth:`~symformer.ops.base.Operation.staged`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from symformer.engine.arbmath import ArbMatrix, sympy_to_arb
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation, matrix


def given(W):
    """The given weight W itself."""
    return W


@dataclass(frozen=True)
class Parameter(Operation):
    """The exact matrix ``value`` (a weight of the example)."""

    value: sympy.Matrix
    notation: Notation | None = None
    #: Said after its equation (a given input is not a weight).
    remark: str = "the weight as the example gives it"
    #: How the given matrix is written in the equation (LaTeX, text).
    source: tuple[str, str] = (r"W^{(0)}", "W⁽⁰⁾")
    #: What a given matrix stands for (see :attr:`Operation.role`); "" : a weight.
    role: str = ""
    #: True for a training run's or a claim's weight (see :attr:`Operation.is_weight`).
    is_weight: bool = False

    name = "parameter"
    reference_function = given
    default_notation = Notation("W", "W", "Weight")
    rational = True

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(("W[i, j] = W0[i, j]",), {"W": "out", "W0": "const:value"},
                             symbols={"W0": self.source},
                             remark=self.remark)

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return sympy.Matrix(self.value)

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return [[sympy_to_arb(v) for v in self.value.row(i)] for i in range(self.value.rows)]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return (matrix(self.value, dtype),)
