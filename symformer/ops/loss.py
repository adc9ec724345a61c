"""Losses: the mean squared error of the encoder output, the cross-entropy of probabilities.

Each is a 1 x 1 stage ``loss``; its backward rule starts the backward pass
(:mod:`symformer.blocks.backward`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from flint import arb

from symformer.engine.arbmath import ArbMatrix, constant_balls, rational_ball
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.ops.base import Notation, Operation, Spelling, matrix
from symformer.ops.calculus import Arithmetic, Rows


def mse(z, T):
    """L = (1 / (n d)) sum_ij (z_ij - T_ij)^2: the mean over every entry."""
    return np.mean((z - T) ** 2, keepdims=True).reshape(1, 1)


def cross_entropy(p, t):
    """L = -(1/n) sum_i log p[i, t_i]: the mean over positions of the target's -log p."""
    return -np.mean(np.log(p[np.arange(len(t)), t]), keepdims=True).reshape(1, 1)


def mse_equation(z, T):
    """The mse as the textbook writes it (the general equation; same value as mse)."""
    return np.sum((z - T) ** 2) / (n * d)  # noqa: F821 -- n, d: the sizes, as symbols


def cross_entropy_equation(p, t):
    """The cross-entropy as the textbook writes it (same value as cross_entropy)."""
    return -np.sum(np.log(p_target), axis=-1) / n  # noqa: F821 -- p[i, t_i], as a symbol


#: The target entries of the cross-entropy, p_{i,t_i}.
P_TARGET = Notation("p_{i,t_i}", "p_(i,t_i)", "probability of the target token")

def position_mse(z, T, i):
    """L_i = (1/d) sum_j (z_ij - T_ij)^2: the squared error of position i alone."""
    return np.mean((z[i] - T[i]) ** 2, keepdims=True).reshape(1, 1)


def position_mse_backward(g, z, T, R, d):
    """dL_i/dz = g * 2 R (z - T) / d, R the column with 1 in row i and 0 elsewhere."""
    return g * 2 / d * R * (z - T)


def mse_backward(g, z, T, n, d):
    """dL/dz = g * 2 (z - T) / (n d)."""
    return g * 2 / (n * d) * (z - T)


def cross_entropy_backward(g, p, Y, n):
    """dL/dp = -g Y / (n p), Y the targets' one-hot rows (Y[i, t_i] = 1): -g / (n p[i, t_i])
    at each target, 0 at every other entry."""
    return -g / n * Y / p


@dataclass(frozen=True, eq=False)
class MeanSquaredError(Operation):
    """The mean of (z - target)^2 over every entry of the input stage."""

    target: sympy.Matrix
    notation: Notation | None = None

    name = "mse"
    reference_function = mse
    default_notation = Notation("L", "L", "Loss (mean squared error)")
    rational = True
    nonnegative = True

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(
            ("L = sum((z[i, j] - T[i, j]) ** 2 for i in range(n) for j in range(d)) / (n * d)",),
            {"L": "out", "z": "in0", "T": "const:target"}, sizes={"n": ("z", 0), "d": ("z", 1)},
            symbols={"T": ("T", "T")}, remark="T: the [loss] target")

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        return IndexEquation(("dz[i, j] = 2 * dL * (z[i, j] - T[i, j]) / (n * d)",),
                             {"dz": "result", "dL": "grad", "z": "in0", "T": "const:target"},
                             sizes={"n": ("z", 0), "d": ("z", 1)}, symbols={"T": ("T", "T")})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        Z = args[0]
        return sympy.Matrix([[sympy.Add(*[(z - t) ** 2 for z, t in zip(Z, self.target)])
                              / len(self.target)]])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        T = [t for row in constant_balls(self.target) for t in row]  # kept per precision
        Z = [z for row in args[0] for z in row]
        total = arb(0)
        for z, t in zip(Z, T):
            total += (z - t) * (z - t)
        return [[total / len(T)]]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[np.ndarray]:
        return args[0], matrix(self.target, dtype)

    def spelling(self) -> Spelling:
        return Spelling(function=mse_equation, indexed=frozenset({"z", "T"}),
                        symbols={"T": Notation("T", "T", "target")},
                        remark="T is the [loss] target")

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """dL/dz_ij = 2 (z_ij - T_ij) / (n d)."""
        (g,), N = grad[0], len(self.target)
        T = self.target.tolist()
        return [[g * 2 * (z - num.const(t)) / N for z, t in zip(zs, ts)]
                for zs, ts in zip(args[0], T)]

    def backward_function(self, wrt: int | str):
        return mse_backward

    def backward_arguments(self, wrt, args, out, grad, dtype):
        return (grad.astype(dtype), *self.arguments([args[0].astype(dtype)], dtype),
                *args[0].shape)


@dataclass(frozen=True, eq=False)
class CrossEntropy(Operation):
    """-(1/n) sum_i log p[i, t_i] over the rows of a probabilities stage."""

    targets: tuple[int, ...]
    notation: Notation | None = None

    name = "cross_entropy"
    reference_function = cross_entropy
    default_notation = Notation("L", "L", "Loss (cross-entropy)")
    nonnegative = True

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(("L = -sum(log(p[i, t[i]]) for i in range(n)) / n",),
                             {"L": "out", "p": "in0", "t": "const:targets"},
                             sizes={"n": ("p", 0)}, symbols={"t": ("t", "t")},
                             remark="t: the target token ids")

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        return IndexEquation(("dp[i, j] = -dL / (n * p[i, j]) if j == t[i] else 0",),
                             {"dp": "result", "dL": "grad", "p": "in0", "t": "const:targets"},
                             sizes={"n": ("p", 0)}, symbols={"t": ("t", "t")})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        P = args[0]
        return sympy.Matrix([[-sympy.Add(*[sympy.log(P[i, t]) for i, t in
                                           enumerate(self.targets)]) / len(self.targets)]])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        total = arb(0)
        for row, t in zip(args[0], self.targets):
            total += row[t].log()
        return [[-total / len(self.targets)]]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[object]:
        return args[0], np.array(self.targets)

    def spelling(self) -> Spelling:
        return Spelling(function=cross_entropy_equation, axis=("i", "n"),
                        symbols={"p_target": P_TARGET},
                        remark="t_i is the target token of position i")

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """dL/dp[i, t_i] = -1 / (n p[i, t_i]); 0 at every other entry."""
        (g,), n = grad[0], len(self.targets)
        return [[-g / (n * p) if j == t else num.zero() for j, p in enumerate(row)]
                for row, t in zip(args[0], self.targets)]

    def backward_function(self, wrt: int | str):
        return cross_entropy_backward

    def backward_arguments(self, wrt, args, out, grad, dtype):
        p = args[0].astype(dtype)
        Y = np.eye(p.shape[-1], dtype=dtype)[list(self.targets)]
        return grad.astype(dtype), p, Y, len(self.targets)


@dataclass(frozen=True, eq=False)
class PositionSquaredError(Operation):
    """The mean of (z - target)^2 over row ``position`` only: one position's loss
    (``prove`` differentiates it to show that, under the causal mask, it does not
    depend on later positions)."""

    target: sympy.Matrix
    position: int
    notation: Notation | None = None

    name = "position_mse"
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
