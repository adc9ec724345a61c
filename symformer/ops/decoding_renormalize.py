"""The distribution over the kept tokens: q_j = k_j p_j / sum_i k_i p_i (what a filter
leaves, renormalised; Hugging Face's softmax of the filtered scores)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from flint import arb

from symformer.engine.arbmath import ArbMatrix
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation


def renormalize(p, k):
    """k p / sum(k p)."""
    kept = p * k
    return kept / np.sum(kept, axis=-1, keepdims=True)


@dataclass(frozen=True, eq=False)
class Renormalize(Operation):
    """Reads (probabilities, kept): the kept tokens' probabilities, summing to 1."""

    notation: Notation | None = None

    name = "renormalize"
    columns = "vocab"
    heat = True
    rows_sum_to_one = True
    reference_function = renormalize
    default_notation = Notation(r"q", "q", "Probabilities of the kept tokens")

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> None:
        """None: one division per entry; shown as its table."""
        return None

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        p, k = args
        total = sympy.Add(*(p[0, j] * k[0, j] for j in range(p.cols)))
        return sympy.Matrix([[p[0, j] * k[0, j] / total for j in range(p.cols)]])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        kept = [x * y for x, y in zip(args[0][0], args[1][0])]
        total = sum(kept, arb(0))
        return [[x / total for x in kept]]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return (args[0].astype(dtype), args[1].astype(dtype))
