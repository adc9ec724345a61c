"""The repetition penalty (Keskar et al. 2019, CTRL; Hugging Face's
``RepetitionPenaltyLogitsProcessor``): a token already in the sequence has its logit
divided by the penalty theta when it is >= 0 and multiplied by theta when it is < 0.

The signs are certified (a logit proved exactly 0 gives 0 either way) and held by the
operation, so its local formula is one branch per entry.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from symformer.engine.arbmath import NEG_INF, ArbMatrix, rational_ball
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation


def repetition_penalty(z, theta, S):
    """HF's rule on the tokens so far (S): z * theta where z < 0, z / theta elsewhere."""
    return np.where(S & (z < 0), z * theta, np.where(S, z / theta, z))


@dataclass(frozen=True, eq=False)
class RepetitionPenalty(Operation):
    """The last position's logits (1 x V) with the penalty on the ``seen`` columns;
    ``negative``: the seen columns whose logit is certified < 0."""

    penalty: Any
    seen: tuple[int, ...]
    negative: tuple[int, ...] = ()
    notation: Notation | None = None

    name = "repetition_penalty"
    columns = "vocab"
    rational = True
    reference_function = repetition_penalty
    default_notation = Notation(r"\tilde{l}", "l̃", "Logits after the repetition penalty")

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> None:
        """None: a branch per entry, decided by a certified sign; shown as its table."""
        return None

    def _entry(self, j: int, z: Any, theta: Any) -> Any:
        if j not in self.seen or z is NEG_INF:
            return z
        return z * theta if j in self.negative else z / theta

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        z = args[0]
        return sympy.Matrix([[self._entry(j, z[0, j], sympy.S(self.penalty))
                              for j in range(z.cols)]])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        theta = rational_ball(self.penalty)
        return [[self._entry(j, z, theta) for j, z in enumerate(args[0][0])]]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        mask = np.zeros(args[0].shape, dtype=bool)
        mask[0, list(self.seen)] = True
        return (args[0].astype(dtype), dtype(float(self.penalty)), mask)
