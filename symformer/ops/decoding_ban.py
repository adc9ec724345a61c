"""Banned tokens: their logits become -inf, so their probability is exactly 0.

One operation for every reason a token may not come next (Hugging Face's
``NoBadWordsLogitsProcessor``, ``MinNewTokensLengthLogitsProcessor`` masking the end
tokens for the first steps, ``forced_decoder_ids`` banning every token but one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from symformer.engine.arbmath import NEG_INF, ArbMatrix
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation


def ban_tokens(z, M):
    """z, with -inf at the banned columns M."""
    return np.where(M, -np.inf, z)


@dataclass(frozen=True, eq=False)
class BanTokens(Operation):
    """A 1 x V row with -inf at the ``banned`` columns; ``why`` says why, in words."""

    banned: tuple[int, ...]
    why: str = ""
    notation: Notation | None = None

    name = "ban_tokens"
    columns = "vocab"
    rational = True
    reference_function = ban_tokens
    default_notation = Notation(r"\hat{l}", "l̂", "Logits of the allowed tokens (-inf: banned)")

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> None:
        """None: a row copied with -inf at fixed columns; shown as its table."""
        return None

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        z = args[0]
        return sympy.Matrix([[-sympy.oo if j in self.banned else z[0, j]
                              for j in range(z.cols)]])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return [[NEG_INF if j in self.banned else z for j, z in enumerate(args[0][0])]]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        mask = np.zeros(args[0].shape, dtype=bool)
        mask[0, list(self.banned)] = True
        return (args[0].astype(dtype), mask)
