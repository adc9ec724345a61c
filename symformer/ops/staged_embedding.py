"""An embedding lookup whose table is a stage: a training step's embedding table.

``train`` makes the whole table a stage (``step0.embedding_table``, then the
optimiser's updates), so that a tied language-model head can read the same table
(:mod:`symformer.ops.transpose`); this operation picks each token's row of it.  Its
gradient is the whole table's: row t is the sum of dL/de over the positions
holding token t, and exactly 0 for a token the sentence does not use (so the SGD
step leaves that row exactly as it was).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from symformer.engine.arbmath import ArbMatrix
from symformer.lazy import sympy
from symformer.ops.base import Notation, Operation, Spelling
from symformer.ops.calculus import Arithmetic, Rows
from symformer.ops.embedding import embed, embed_backward


@dataclass(frozen=True)
class StagedEmbedding(Operation):
    """The rows ``token_ids`` of the input stage (the table, |vocab| x d)."""

    token_ids: tuple[int, ...]
    notation: Notation | None = None

    name = "staged_embedding"
    reference_function = embed
    default_notation = Notation("e", "e", "Token embedding (trained table)")
    rational = True

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return sympy.Matrix([list(args[0].row(t)) for t in self.token_ids])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return [list(args[0][t]) for t in self.token_ids]

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        return self.arb([dx[0]])  # a selection: linear in the table

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return np.asarray(args[0], dtype=dtype), list(self.token_ids)

    def spelling(self) -> Spelling:
        return Spelling(remark="t: the token's id in the vocabulary")

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """Row u of dL/dE: the sum of dL/de over the positions holding token u (an
        exact 0 for a token not used)."""
        d = len(args[0][0]) if args[0] else 0
        return [[num.total(column) for column in zip(*[g for g, t in zip(grad, self.token_ids)
                                                       if t == u])]
                if u in self.token_ids else [num.zero() for _ in range(d)]
                for u in range(len(args[0]))]

    def backward_function(self, wrt: int | str):
        return embed_backward

    def backward_arguments(self, wrt, args, out, grad, dtype):
        vocab = np.asarray(args[0]).shape[0]
        T = np.array([[t == u for u in range(vocab)] for t in self.token_ids], dtype=dtype)
        return grad.astype(dtype), T
