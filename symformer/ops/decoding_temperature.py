"""Temperature: the logits divided by T before the softmax (T < 1 sharpens, T > 1
flattens; Hugging Face's ``TemperatureLogitsWarper``).  A -inf logit stays -inf."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from symformer.engine.arbmath import ArbMatrix
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation
from symformer.ops.decoding_common import scaled_row


def temperature(z, T):
    """z / T."""
    return z / T


@dataclass(frozen=True, eq=False)
class Temperature(Operation):
    """A 1 x V row of logits over the exact temperature ``T``."""

    T: Any
    notation: Notation | None = None

    name = "temperature"
    columns = "vocab"
    rational = True
    reference_function = temperature
    default_notation = Notation(r"l/T", "l/T", "Logits over the temperature")

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> None:
        """None: one division per entry, l_j / T; shown as its table."""
        return None

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return args[0] / sympy.S(self.T)

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return [scaled_row(row, self.T, divide=True) for row in args[0]]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return (args[0].astype(dtype), dtype(float(self.T)))
