"""Embedding lookup: each token's row of the embedding table (an exact constant)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import sympy
from flint import arb

from symformer.engine.arbmath import ArbMatrix, sympy_to_arb
from symformer.ops.base import Notation, Operation, matrix


def embed(E, ids):
    """X_emb[pos] = E[id(t_pos)]: each token's row of the table, (n, d)."""
    return E[ids]


@dataclass(frozen=True)
class Embedding(Operation):
    """The rows ``token_ids`` of the exact table ``E`` (a stage with no inputs)."""

    E: sympy.Matrix
    token_ids: tuple[int, ...]
    notation: Notation | None = None

    name = "embedding"
    reference_function = embed
    default_notation = Notation("e", "e", "Token embedding")
    rational = True

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return sympy.Matrix([list(self.E.row(t)) for t in self.token_ids])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return [[sympy_to_arb(v) for v in self.E.row(t)] for t in self.token_ids]

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        return [[arb(0) for _ in row] for row in self.arb([])]  # a constant

    def reference(self, args: Sequence[np.ndarray], dtype: type = np.float64) -> np.ndarray:
        return embed(matrix(self.E, dtype), list(self.token_ids))
