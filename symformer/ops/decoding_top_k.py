"""Top-k's margin: each token's rank, the number of allowed tokens with a strictly
larger score (Fan et al. 2018; Hugging Face's ``TopKLogitsWarper`` keeps every score
>= the k-th largest, so tokens tied with the k-th are all kept: rank < k).

The comparisons are decided exactly (certified balls; equal scores proved equal) by
:mod:`symformer.blocks.decoding` and held by the operation.  A banned token (-inf) has
rank V, the vocabulary's size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from symformer.engine.arbmath import ArbMatrix
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation
from symformer.ops.decoding_common import decided_balls, decided_row


def rank_above(z):
    """For each column j: how many finite scores are > z_j (V for a -inf score)."""
    row = z[0]
    finite = np.isfinite(row)
    return np.array([[np.sum(finite & (row > x)) if np.isfinite(x) else row.size
                      for x in row]])


@dataclass(frozen=True, eq=False)
class RankAbove(Operation):
    """The decided ranks (1 x V) of a row of scores."""

    ranks: tuple[int, ...]
    notation: Notation | None = None

    name = "rank_above"
    columns = "vocab"
    rational = True
    reference_function = rank_above
    default_notation = Notation(r"r", "r", "Tokens with a larger score (rank)")

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> None:
        """None: counts of exact comparisons, decided; shown as its table."""
        return None

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return decided_row(self.ranks)

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return decided_balls(self.ranks)

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return (args[0].astype(dtype),)
