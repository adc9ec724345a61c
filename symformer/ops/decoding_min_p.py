"""Min-p's margin (Nguyen et al. 2024; Hugging Face's ``MinPLogitsWarper``): each
token's probability over the largest, r_j = p_j / p_max; a token is kept when
r_j >= min_p (exactly at min_p: kept, as Hugging Face removes only p_j < min_p p_max).
The most probable token (``top``, decided exactly) is held by the operation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from symformer.engine.arbmath import ArbMatrix
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation


def ratio_to_top(p):
    """p / max(p), per entry."""
    return p / np.max(p, axis=-1, keepdims=True)


@dataclass(frozen=True, eq=False)
class RatioToTop(Operation):
    """r_j = p_j / p_top for the decided most probable column ``top``."""

    top: int
    notation: Notation | None = None

    name = "ratio_to_top"
    columns = "vocab"
    reference_function = ratio_to_top
    default_notation = Notation(r"p/p_{\max}", "p/p_max", "Probability over the largest")

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> None:
        """None: one division per entry; shown as its table."""
        return None

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        p = args[0]
        return p / p[0, self.top]

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        row = args[0][0]
        return [[x / row[self.top] for x in row]]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return (args[0].astype(dtype),)
