"""The KV cache's append: the cached rows of the step before, then the new token's row.

``K_cache`` at step t = [K_cache at step t-1; the last row of step t's K] (the same for
V): the keys and values of the tokens before are read from the cache, not recomputed.
:mod:`symformer.blocks.kv_cache` proves the result equal, entry by entry, to the keys
the whole sequence's forward pass computes.
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


def append_row(C, X):
    """The rows of C, then the last row of X."""
    return np.vstack([C, X[-1:]])


@dataclass(frozen=True, eq=False)
class AppendRow(Operation):
    """Reads (cache, new rows): the cache's rows and the new rows' last."""

    notation: Notation | None = None

    name = "append_row"
    rational = True
    renames = True
    reference_function = append_row
    default_notation = Notation("C", "C", "Cache with the new row appended")

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> None:
        """None: rows copied; shown as its table."""
        return None

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return args[0].col_join(args[1][args[1].rows - 1:, :])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return [list(row) for row in args[0]] + [list(args[1][-1])]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return (args[0].astype(dtype), args[1].astype(dtype))
