"""Sampling by the inverse CDF: the cumulative sums C_j = q_0 + ... + q_j in
vocabulary order, and the drawn token, the first j with C_j > u for the uniform
number u in [0, 1) (so C_{j-1} <= u < C_j).  u is an exact rational (k / 2^53 from a
stated generator and seed, :mod:`symformer.blocks.decoding`), and each comparison is
decided exactly (u exactly equal to some C_j is proved and falls to the next token)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from flint import arb

from symformer.engine.arbmath import ArbMatrix
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation
from symformer.ops.decoding_common import decided_balls, decided_row


def cumulative(q):
    """Running sums along the row."""
    return np.cumsum(q, axis=-1)


def draw(C, u):
    """1 at the first column with C_j > u, else 0."""
    chosen = int(np.argmax(C[0] > u[0, 0]))
    return np.array([[int(j == chosen) for j in range(C.shape[1])]])


@dataclass(frozen=True, eq=False)
class Cumulative(Operation):
    """C_j = q_0 + ... + q_j (1 x V)."""

    notation: Notation | None = None

    name = "cumulative"
    columns = "vocab"
    reference_function = cumulative
    default_notation = Notation(r"C", "C", "Cumulative probability (vocabulary order)")

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> None:
        """None: running sums; shown as its table."""
        return None

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        q = args[0]
        return sympy.Matrix([[sympy.Add(*(q[0, i] for i in range(j + 1)))
                              for j in range(q.cols)]])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        out, total = [], arb(0)
        for x in args[0][0]:
            total = total + x
            out.append(total)
        return [out]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return (args[0].astype(dtype),)


@dataclass(frozen=True, eq=False)
class Draw(Operation):
    """The decided drawn token (1 x V indicator), reading (cumulative, uniform)."""

    chosen: int
    size: int
    notation: Notation | None = None

    name = "draw"
    columns = "vocab"
    rational = True
    heat = True
    jumps = True
    reference_function = draw
    default_notation = Notation(r"\hat{t}", "t̂", "Drawn token")

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> None:
        """None: exact comparisons with u, decided; shown as its table."""
        return None

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return decided_row([int(j == self.chosen) for j in range(self.size)])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return decided_balls([int(j == self.chosen) for j in range(self.size)])

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return (args[0].astype(dtype), args[1].astype(dtype))
