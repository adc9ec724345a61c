"""A tied table's whole gradient: the lookup's rows plus the head's use of every row.

With ``[lm_head] tied = true`` the embedding table E is read twice: by the lookup
(the rows of the tokens in the sentence) and by the head (W_vocab = E^T, every row).
The table's gradient, what PyTorch reports for the shared parameter, is the sum of
both uses over every vocabulary row: dL/dE = R dL/dE_lookup + dL/dE_head, with R the
0/1 matrix placing the lookup's rows (only the tokens used) at their vocabulary rows.
The backward pass (:func:`symformer.blocks.backward.backward`) appends it as
``grad.embedding_table``, after its two contributions ``grad.embedding_table.lookup``
and ``grad.embedding_table.head``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from symformer.engine.arbmath import ArbMatrix
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation


def table_sum(L, H, R):
    """dL/dE = R L + H: the lookup's rows L placed at their vocabulary rows, plus the
    head's gradient H (every vocabulary row)."""
    return R @ L + H


@dataclass(frozen=True)
class TableSum(Operation):
    """Inputs: the lookup's gradient (one row per token used, in ``rows`` order: the
    vocabulary row of each) and the head's (every vocabulary row)."""

    rows: tuple[int, ...]
    notation: Notation | None = None

    name = "table_sum"
    reference_function = table_sum
    default_notation = Notation("W_{E}", "W_E", "Tied table's gradient (both uses)")
    rational = True
    of_weight = True  # the tied table's whole gradient

    def _lookup_row(self) -> dict[int, int]:
        """Vocabulary row -> the lookup gradient's row holding it."""
        return {v: k for k, v in enumerate(self.rows)}

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        L, H = args
        at = self._lookup_row()
        return sympy.Matrix(H.rows, H.cols, lambda v, j: H[v, j] + L[at[v], j]
                            if v in at else H[v, j])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        L, H = args
        at = self._lookup_row()
        return [[h + L[at[v]][j] if v in at else h for j, h in enumerate(row)]
                for v, row in enumerate(H)]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        L, H = (np.asarray(a, dtype=dtype) for a in args)
        R = np.zeros((len(H), len(L)), dtype=dtype)
        for k, v in enumerate(self.rows):
            R[v, k] = 1
        return L, H, R

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(
            ("E[i, j] = B[i, j] + sum((1 if u[ip] == i else 0) * A[ip, j] for ip in range(n_w))",),
            {"E": "out", "A": "in0", "B": "in1", "u": "const:rows"},
            sizes={"n_w": ("A", 0)}, symbols={"u": ("w", "w")},
            remark="w: the vocabulary rows of the lookup's rows, in order")
