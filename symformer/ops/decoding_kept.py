"""A decoding filter's decision: which tokens are kept (1) and which dropped (0).

Token j is kept when it was kept before (the filters apply one after the other,
Hugging Face's order: top-k, top-p, min-p) and its margin m_j passes the rule:
``m_j < threshold`` (top-k: rank < k; top-p: the mass of the more probable tokens < p)
or ``m_j >= threshold`` (min-p: p_j / p_max >= min_p).  The comparison is decided
exactly by :mod:`symformer.blocks.decoding` (a margin exactly at the threshold is
proved equal and falls on the side the rule names) and held here.
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


def kept_mask(m, t, below, before):
    """1 where the margin m passes (m < t when ``below``, else m >= t) and ``before`` is 1."""
    passes = m < t if below else m >= t
    return np.where(passes & (before > 0), 1, 0)


@dataclass(frozen=True, eq=False)
class Kept(Operation):
    """The decided mask (1 x V) of a filter reading (margin, [mask before])."""

    kept: tuple[int, ...]
    threshold: Any
    relation: str = "<"
    notation: Notation | None = None

    name = "kept"
    columns = "vocab"
    rational = True
    heat = True
    reference_function = kept_mask
    default_notation = Notation(r"\kappa", "κ", "Kept tokens (1) and dropped (0)")

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> None:
        """None: exact comparisons, decided; shown as its table."""
        return None

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return decided_row(self.kept)

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return decided_balls(self.kept)

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        before = args[1] if len(args) > 1 else np.ones_like(args[0])
        return (args[0].astype(dtype), dtype(float(self.threshold)), self.relation == "<",
                before)
