"""The loss of each position on its own: the numbers lessons print before averaging.

With ``[stages] per_position_loss = true`` the backward pass's ``loss`` gets a side
stage ``loss.per_position`` (n x 1, one row per position of the stage the loss reads):

* cross-entropy: L_i = -log p[i, t_i], the target's negative log-probability;
* mse: L_i = sum_j (z_ij - T_ij)^2, the row's sum of squares;

and L_i = 0 at a position without a target (what PyTorch's ``reduction="none"`` gives
at an ``ignore_index`` position).  The loss is then L = (1/c) sum_i L_i, c the
``[loss]`` divisor (the positions with a target for a mean cross-entropy, their entries
for a mean mse, 1 for a sum).  Nothing reads the stage: it has no gradient.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from flint import arb

from symformer.engine.arbmath import ArbMatrix, constant_balls
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation
from symformer.ops.loss import placed_target, target_columns, target_mask

#: The per-position loss's notation: L_i (ℓ already names the logits).
POSITION_LOSS = Notation("L", "L", "Loss at each position")


def position_cross_entropy(p, t, w):
    """L_i = -w_i log p[i, t_i]: the target's -log p at each position (w_i = 0: none)."""
    return -(w * np.log(p[np.arange(len(t)), t])).reshape(-1, 1)


def position_squared_error(z, T, R):
    """L_i = R_i sum_j (z_ij - T_ij)^2: each row's sum of squares (R_i = 0: no target)."""
    return R * np.sum((z - T) ** 2, axis=-1, keepdims=True)


@dataclass(frozen=True, eq=False)
class PositionCrossEntropy(Operation):
    """-log p[i, t_i] at each row of a probabilities stage; 0 where ``targets`` is None."""

    targets: tuple[int | None, ...]
    notation: Notation | None = None

    name = "position_cross_entropy"
    per_row = True
    reference_function = position_cross_entropy
    default_notation = POSITION_LOSS
    nonnegative = True
    per_position_of = "cross_entropy"

    @classmethod
    def from_loss(cls, loss: Operation) -> Operation:
        return cls(loss.targets)

    def target_mask(self) -> tuple[int, ...]:
        """1 for each row with a target, 0 for the others."""
        return target_mask(self.targets)

    def target_columns(self) -> tuple[int, ...]:
        """Each row's target column (0 where it has none: the mask drops it)."""
        return target_columns(self.targets)

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        if all(t is not None for t in self.targets):
            return IndexEquation(("L[i] = -log(p[i, t[i]])",),
                                 {"L": "out", "p": "in0", "t": "const:target_columns"},
                                 symbols={"t": ("t", "t")}, remark="t: the target token ids")
        return IndexEquation(
            ("L[i] = -w[i] * log(p[i, t[i]])",),
            {"L": "out", "p": "in0", "t": "const:target_columns", "w": "const:target_mask"},
            symbols={"t": ("t", "t"), "w": ("w", "w")},
            remark="t: the target token ids; w_i = 1 for a position with a target, else 0 "
                   "(L_i = 0)")

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        P = args[0]
        return sympy.Matrix([[sympy.S.Zero if t is None else -sympy.log(P[i, t])]
                             for i, t in enumerate(self.targets)])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return [[arb(0) if t is None else -args[0][i][t].log()]
                for i, t in enumerate(self.targets)]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return (args[0], np.array(self.target_columns()),
                np.array(self.target_mask(), dtype=dtype))


@dataclass(frozen=True, eq=False)
class PositionSquaredErrors(Operation):
    """sum_j (z_ij - T_ij)^2 at each row of z that has a target; 0 at the others.

    ``positions`` are the rows of z the target's rows belong to (None: every row).
    """

    target: sympy.Matrix
    notation: Notation | None = None
    positions: tuple[int, ...] | None = None

    name = "position_squared_errors"
    per_row = True
    reference_function = position_squared_error
    default_notation = POSITION_LOSS
    rational = True
    nonnegative = True
    per_position_of = "mse"

    @classmethod
    def from_loss(cls, loss: Operation) -> Operation:
        return cls(loss.target, positions=loss.positions)

    def rows(self) -> tuple[int, ...]:
        """The rows of z that have a target, in the target's order."""
        return self.positions if self.positions is not None else tuple(
            range(self.target.rows))

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        if self.positions is None:
            return IndexEquation(("L[i] = sum((z[i, j] - T[i, j]) ** 2 for j in range(d))",),
                                 {"L": "out", "z": "in0", "T": "const:target"},
                                 sizes={"d": ("T", 1)}, symbols={"T": ("T", "T")},
                                 remark="T: the target")
        return IndexEquation(
            ("L[i] = sum((1 if r[k] == i else 0) * (z[i, j] - T[k, j]) ** 2 "
             "for k in range(m) for j in range(d))",),
            {"L": "out", "z": "in0", "T": "const:target", "r": "const:rows"},
            sizes={"m": ("T", 0), "d": ("T", 1)}, symbols={"T": ("T", "T"), "r": ("r", "r")},
            remark="T: the target; r: the positions that have a target (L_i = 0 "
                   "at the others)")

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        Z, T = args[0], self.target
        where = {i: k for k, i in enumerate(self.rows())}
        return sympy.Matrix([[sympy.Add(*[(Z[i, j] - T[where[i], j]) ** 2
                                          for j in range(T.cols)]) if i in where
                              else sympy.S.Zero] for i in range(Z.rows)])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        T = constant_balls(self.target)
        where = {i: k for k, i in enumerate(self.rows())}
        out = []
        for i, zs in enumerate(args[0]):
            total = arb(0)
            if i in where:
                for z, t in zip(zs, T[where[i]]):
                    total += (z - t) * (z - t)
            out.append([total])
        return out

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return (args[0], *placed_target(self.target, self.rows(), len(args[0]), dtype))
