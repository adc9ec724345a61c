"""Losses: the mean squared error of the encoder output, the cross-entropy of probabilities,
and a given upstream gradient at any stage.

Each is a 1 x 1 stage ``loss``; its backward rule starts the backward pass
(:mod:`symformer.blocks.backward`).  The mse and the cross-entropy follow PyTorch's
conventions: ``reduction = "mean"`` divides by the number of terms that have a target
(entries of the targeted rows for the mse, positions for the cross-entropy, as
``ignore_index`` does), ``"sum"`` does not divide.  :class:`UpstreamGradient` is
L = sum_ij G_ij S_ij, whose gradient at S is the given G (``S.backward(G)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from flint import arb

from symformer.engine.arbmath import ArbMatrix, constant_balls, rational_ball
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation, matrix
from symformer.ops.calculus import Arithmetic, Rows


def mse(z, T):
    """L = (1 / (n d)) sum_ij (z_ij - T_ij)^2: the mean over every entry."""
    return np.mean((z - T) ** 2, keepdims=True).reshape(1, 1)


def cross_entropy(p, t):
    """L = -(1/n) sum_i log p[i, t_i]: the mean over positions of the target's -log p."""
    return -np.mean(np.log(p[np.arange(len(t)), t]), keepdims=True).reshape(1, 1)


def mse_sum(z, T):
    """L = sum_ij (z_ij - T_ij)^2: the sum over every entry (reduction = "sum")."""
    return np.sum((z - T) ** 2, keepdims=True).reshape(1, 1)


def cross_entropy_sum(p, t):
    """L = -sum_i log p[i, t_i]: the sum over positions (reduction = "sum")."""
    return -np.sum(np.log(p[np.arange(len(t)), t]), keepdims=True).reshape(1, 1)


def upstream(s, G):
    """L = sum_ij G_ij s_ij: the loss whose gradient at s is the given G."""
    return np.sum(G * s, keepdims=True).reshape(1, 1)


def position_mse(z, T, i):
    """L_i = (1/d) sum_j (z_ij - T_ij)^2: the squared error of position i alone."""
    return np.mean((z[i] - T[i]) ** 2, keepdims=True).reshape(1, 1)


def position_mse_backward(g, z, T, R, d):
    """dL_i/dz = g * 2 R (z - T) / d, R the column with 1 in row i and 0 elsewhere."""
    return g * 2 / d * R * (z - T)


def mse_backward(g, z, T, n, d):
    """dL/dz = g * 2 (z - T) / (n d)."""
    return g * 2 / (n * d) * (z - T)


def mse_rows_backward(g, z, T, R, c):
    """dL/dz = g * 2 R (z - T) / c: R the column with 1 in the rows with a target, c the
    divisor (the entries of those rows for the mean, 1 for the sum)."""
    return g * 2 * R * (z - T) / c


def upstream_backward(g, G):
    """dL/ds = g G."""
    return g * G


def cross_entropy_backward(g, p, Y, n):
    """dL/dp = -g Y / (n p), Y the targets' one-hot rows (Y[i, t_i] = 1): -g / (n p[i, t_i])
    at each target, 0 at every other entry."""
    return -g / n * Y / p


def target_mask(targets: Sequence[int | None]) -> tuple[int, ...]:
    """1 for each row with a target column, 0 for a row without (None)."""
    return tuple(int(t is not None) for t in targets)


def target_columns(targets: Sequence[int | None]) -> tuple[int, ...]:
    """Each row's target column, 0 where it has none (the mask drops that row)."""
    return tuple(0 if t is None else t for t in targets)


def placed_target(target: sympy.Matrix, rows: Sequence[int], n: int, dtype: type
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(T, R) as floats: the target's rows placed at ``rows`` of an n-row matrix (0
    elsewhere), and R the column with 1 in those rows."""
    T, R = np.zeros((n, target.cols), dtype=dtype), np.zeros((n, 1), dtype=dtype)
    T[list(rows)] = matrix(target, dtype)
    R[list(rows)] = 1
    return T, R


#: The reductions of the mse and the cross-entropy (PyTorch's ``reduction``).
REDUCTIONS = ("mean", "sum")


@dataclass(frozen=True, eq=False)
class MeanSquaredError(Operation):
    """(z - target)^2 over the rows with a target: their mean (every entry of those
    rows) or their sum.

    ``positions`` are the rows of z that have a target (None: every row), the
    target's rows in that order.
    """

    target: sympy.Matrix
    notation: Notation | None = None
    positions: tuple[int, ...] | None = None
    reduction: str = "mean"

    name = "mse"
    is_loss = True
    reference_function = mse
    default_notation = Notation("L", "L", "Loss (mean squared error)")
    rational = True
    nonnegative = True
    target_symbol = Notation("T", "T", "target")

    def rows(self) -> tuple[int, ...]:
        """The rows of z that have a target, in the target's order."""
        return self.positions if self.positions is not None else tuple(
            range(self.target.rows))

    @property
    def plain(self) -> bool:
        """The mean over every entry (no positions left out)."""
        return self.positions is None and self.reduction == "mean"

    def divisor(self) -> int:
        """What the sum of squares is divided by: the entries with a target, or 1."""
        return len(self.target) if self.reduction == "mean" else 1

    def function(self):
        return mse if self.reduction == "mean" else mse_sum

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        arrays = {"L": "out", "z": "in0", "T": "const:target"}
        row = "i"
        if self.positions is not None:  # T's row i is z's row r[i]
            arrays["r"] = "const:rows"
            row = "r[i]"
        mean = " / (n * d)" if self.reduction == "mean" else ""
        remark = "T: the target" + (
            "" if self.positions is None else "; r: the positions that have a target")
        return IndexEquation(
            (f"L = sum((z[{row}, j] - T[i, j]) ** 2 for i in range(n) for j in range(d)){mean}",),
            arrays, sizes={"n": ("T", 0), "d": ("T", 1)},
            symbols={"T": ("T", "T"), "r": ("r", "r")}, remark=remark)

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        mean = " / (n * d)" if self.reduction == "mean" else ""
        if self.positions is None:
            return IndexEquation((f"dz[i, j] = 2 * dL * (z[i, j] - T[i, j]){mean}",),
                                 {"dz": "result", "dL": "grad", "z": "in0",
                                  "T": "const:target"},
                                 sizes={"n": ("z", 0), "d": ("z", 1)},
                                 symbols={"T": ("T", "T")})
        return IndexEquation(
            (f"dz[i, j] = 2 * dL * sum((1 if r[k] == i else 0) * (z[i, j] - T[k, j]) "
             f"for k in range(n)){mean}",),
            {"dz": "result", "dL": "grad", "z": "in0", "T": "const:target", "r": "const:rows"},
            sizes={"n": ("T", 0), "d": ("T", 1)}, symbols={"T": ("T", "T"), "r": ("r", "r")},
            remark="r: the positions that have a target")

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        Z, T = args[0], self.target
        return sympy.Matrix([[sympy.Add(*[(Z[i, j] - T[k, j]) ** 2
                                          for k, i in enumerate(self.rows())
                                          for j in range(T.cols)]) / self.divisor()]])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        T = constant_balls(self.target)  # kept per precision
        total = arb(0)
        for k, i in enumerate(self.rows()):
            for z, t in zip(args[0][i], T[k]):
                total += (z - t) * (z - t)
        return [[total / self.divisor()]]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[np.ndarray]:
        z = args[0] if self.positions is None else args[0][list(self.positions)]
        return z, matrix(self.target, dtype)

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """dL/dz_ij = 2 (z_ij - T_ij) / c in a row with a target (c: the divisor), exactly
        0 in the others."""
        (g,), c = grad[0], self.divisor()
        T = self.target.tolist()
        where = {i: k for k, i in enumerate(self.rows())}
        return [[g * 2 * (z - num.const(T[where[i]][j])) / c if i in where else num.zero()
                 for j, z in enumerate(zs)] for i, zs in enumerate(args[0])]

    def backward_function(self, wrt: int | str):
        return mse_backward if self.plain else mse_rows_backward

    def backward_arguments(self, wrt, args, out, grad, dtype):
        z = args[0].astype(dtype)
        if self.plain:
            return (grad.astype(dtype), z, matrix(self.target, dtype), *z.shape)
        T, R = placed_target(self.target, self.rows(), len(z), dtype)
        return grad.astype(dtype), z, T, R, self.divisor()


@dataclass(frozen=True, eq=False)
class CrossEntropy(Operation):
    """-log p[i, t_i] over the rows of a probabilities stage that have a target: their
    mean (over those rows, as PyTorch's ``ignore_index``) or their sum.

    ``targets`` has one entry per row: the target's column, or None (no target).
    """

    targets: tuple[int | None, ...]
    notation: Notation | None = None
    reduction: str = "mean"

    name = "cross_entropy"
    is_loss = True
    reference_function = cross_entropy
    default_notation = Notation("L", "L", "Loss (cross-entropy)")
    nonnegative = True

    def pairs(self) -> list[tuple[int, int]]:
        """(row, target column) of every row with a target."""
        return [(i, t) for i, t in enumerate(self.targets) if t is not None]

    def divisor(self) -> int:
        """The positions with a target (mean), or 1 (sum)."""
        return len(self.pairs()) if self.reduction == "mean" else 1

    def function(self):
        return cross_entropy if self.reduction == "mean" else cross_entropy_sum

    def target_mask(self) -> tuple[int, ...]:
        """1 for each row with a target, 0 for the others."""
        return target_mask(self.targets)

    def target_columns(self) -> tuple[int, ...]:
        """Each row's target column (0 where it has none: :meth:`target_mask` drops it)."""
        return target_columns(self.targets)

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        mean = " / m" if self.reduction == "mean" else ""
        if all(t is not None for t in self.targets):
            return IndexEquation((f"L = -sum(log(p[i, t[i]]) for i in range(n)){mean}",),
                                 {"L": "out", "p": "in0", "t": "const:target_columns"},
                                 sizes={"n": ("p", 0), "m": ("p", 0)},
                                 symbols={"t": ("t", "t"), "m": ("n", "n")},
                                 remark="t: the target token ids")
        return IndexEquation(
            (f"L = -sum(w[i] * log(p[i, t[i]]) for i in range(n)){mean}",),
            {"L": "out", "p": "in0", "t": "const:target_columns", "w": "const:target_mask"},
            sizes={"n": ("p", 0)}, scalars={"m": len(self.pairs())},
            symbols={"t": ("t", "t"), "w": ("w", "w"), "m": ("m", "m")},
            remark="t: the target token ids; w_i = 1 for a position with a target, else 0; "
                   "m: the positions with a target")

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        scale = "m * " if self.reduction == "mean" else ""
        arrays = {"dp": "result", "dL": "grad", "p": "in0", "t": "const:target_columns"}
        if all(t is not None for t in self.targets):
            return IndexEquation((f"dp[i, j] = -dL / ({scale}p[i, j]) if j == t[i] else 0",),
                                 arrays, sizes={"n": ("p", 0), "m": ("p", 0)},
                                 symbols={"t": ("t", "t"), "m": ("n", "n")})
        arrays["w"] = "const:target_mask"
        return IndexEquation(
            (f"dp[i, j] = -dL * w[i] / ({scale}p[i, j]) if j == t[i] else 0",),
            arrays, sizes={"n": ("p", 0)}, scalars={"m": len(self.pairs())},
            symbols={"t": ("t", "t"), "w": ("w", "w"), "m": ("m", "m")})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        P = args[0]
        return sympy.Matrix([[-sympy.Add(*[sympy.log(P[i, t]) for i, t in self.pairs()])
                              / self.divisor()]])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        total = arb(0)
        for i, t in self.pairs():
            total += args[0][i][t].log()
        return [[-total / self.divisor()]]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[object]:
        rows, cols = zip(*self.pairs())
        return args[0][list(rows)], np.array(cols)

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """dL/dp[i, t_i] = -1 / (c p[i, t_i]) (c: the divisor); 0 at every other entry and
        in the rows without a target."""
        (g,), c = grad[0], self.divisor()
        return [[-g / (c * p) if j == t else num.zero() for j, p in enumerate(row)]
                for row, t in zip(args[0], self.targets)]

    def backward_function(self, wrt: int | str):
        return cross_entropy_backward

    def backward_arguments(self, wrt, args, out, grad, dtype):
        p = args[0].astype(dtype)
        Y = np.zeros_like(p)
        for i, t in self.pairs():
            Y[i, t] = 1
        return grad.astype(dtype), p, Y, self.divisor()


@dataclass(frozen=True, eq=False)
class UpstreamGradient(Operation):
    """L = sum_ij G_ij s_ij over a stage s: the backward pass then starts at s with the
    given gradient G (what ``s.backward(G)`` does in PyTorch)."""

    gradient: sympy.Matrix
    notation: Notation | None = None

    name = "upstream"
    is_loss = True
    reference_function = upstream
    default_notation = Notation("L", "L", "Loss with the given gradient G at its stage")
    rational = True

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(
            ("L = sum(G[i, j] * s[i, j] for i in range(n) for j in range(d))",),
            {"L": "out", "s": "in0", "G": "const:gradient"},
            sizes={"n": ("s", 0), "d": ("s", 1)}, symbols={"G": ("G", "G")},
            remark="G: the gradient given at the stage")

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        return IndexEquation(("ds[i, j] = dL * G[i, j]",),
                             {"ds": "result", "dL": "grad", "s": "in0",
                              "G": "const:gradient"}, symbols={"G": ("G", "G")})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return sympy.Matrix([[sympy.Add(*[G * s for G, s in zip(self.gradient, args[0])])]])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        total = arb(0)
        for G, s in zip(constant_balls(self.gradient), args[0]):
            for a, b in zip(G, s):
                total += a * b
        return [[total]]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[np.ndarray]:
        return args[0], matrix(self.gradient, dtype)

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """dL/ds_ij = G_ij."""
        (g,) = grad[0]
        return [[g * num.const(G) for G in row] for row in self.gradient.tolist()]

    def backward_function(self, wrt: int | str):
        return upstream_backward

    def backward_arguments(self, wrt, args, out, grad, dtype):
        return grad.astype(dtype), matrix(self.gradient, dtype)


@dataclass(frozen=True, eq=False)
class PositionSquaredError(Operation):
    """The mean of (z - target)^2 over row ``position`` only: one position's loss
    (``prove`` differentiates it to show that, under the causal mask, it does not
    depend on later positions)."""

    target: sympy.Matrix
    position: int
    notation: Notation | None = None

    name = "position_mse"
    is_loss = True
    reference_function = position_mse
    default_notation = Notation("L_i", "L_i", "Loss at one position (squared error)")
    rational = True
    nonnegative = True

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(
            ("L = sum((z[P, j] - T[P, j]) ** 2 for j in range(d)) / d",),
            {"L": "out", "z": "in0", "T": "const:target"}, sizes={"d": ("z", 1)},
            scalars={"P": self.position}, symbols={"T": ("T", "T"), "P": ("P", "P")},
            remark=f"P = {self.position}: the position whose loss this is")

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        return IndexEquation(("dz[i, j] = 2 * dL * (z[i, j] - T[i, j]) / d if i == P else 0",),
                             {"dz": "result", "dL": "grad", "z": "in0", "T": "const:target"},
                             sizes={"d": ("z", 1)}, scalars={"P": self.position},
                             symbols={"T": ("T", "T"), "P": ("P", "P")})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        z, t = args[0].row(self.position), self.target.row(self.position)
        return sympy.Matrix([[sympy.Add(*[(a - b) ** 2 for a, b in zip(z, t)]) / len(z)]])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        z = args[0][self.position]
        total = arb(0)
        for a, b in zip(z, self.target.row(self.position)):
            total += (a - rational_ball(b)) * (a - rational_ball(b))
        return [[total / len(z)]]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[object]:
        return args[0], matrix(self.target, dtype), self.position

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """dL_i/dz_ij = 2 (z_ij - T_ij) / d in row i, exactly 0 in the others."""
        (g,) = grad[0]
        T = self.target.tolist()
        return [[g * 2 * (z - num.const(t)) / len(zs) if i == self.position else num.zero()
                 for z, t in zip(zs, ts)] for i, (zs, ts) in enumerate(zip(args[0], T))]

    def backward_function(self, wrt: int | str):
        return position_mse_backward

    def backward_arguments(self, wrt, args, out, grad, dtype):
        z, T, i = self.arguments([args[0].astype(dtype)], dtype)
        R = (np.arange(len(z)) == i).astype(dtype)[:, None]
        return grad.astype(dtype), z, T, R, z.shape[-1]
