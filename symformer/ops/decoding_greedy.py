"""The greedy choice after the logits processors: 1 under the largest processed score
(several 1s: an exact tie, reported, never broken).  Decided exactly by
:class:`symformer.engine.argmax.TieProver` (banned tokens, -inf, never win) and held
by the operation; its NumPy function recomputes the argmax in floats."""

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


def greedy_choice(z):
    """1 where the row z is largest (several 1s for a tie), else 0."""
    return np.where(z == np.max(z, axis=-1, keepdims=True), 1, 0)


@dataclass(frozen=True, eq=False)
class GreedyChoice(Operation):
    """The decided argmax indicator (1 x V) of a row of processed scores."""

    winners: tuple[int, ...]
    size: int
    notation: Notation | None = None

    name = "greedy_choice"
    columns = "vocab"
    rational = True
    heat = True
    jumps = True
    reference_function = greedy_choice
    default_notation = Notation(r"\hat{t}", "t̂", "Next token (exact argmax of the scores)")

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> None:
        """None: exact comparisons, decided; shown as its table."""
        return None

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return decided_row([int(j in self.winners) for j in range(self.size)])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return decided_balls([int(j in self.winners) for j in range(self.size)])

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return (args[0].astype(dtype),)
