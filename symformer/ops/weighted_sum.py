"""A head's output: the values weighted by the attention weights, ``A V``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from symformer.engine.arbmath import ArbMatrix, dot, product
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation, bilinear_difference
from symformer.ops.calculus import EXACT, Arithmetic, Rows, matmul, matmul_entry, transpose


def weighted_sum(A, V):
    """Row i is sum_j A[i, j] V[j]: (n, m) @ (m, d_v) -> (n, d_v)."""
    return A @ V


def weighted_sum_backward_A(G, V):
    """O = A V: dL/dA = G V^T."""
    return G @ V.T


def weighted_sum_backward_V(A, G):
    """O = A V: dL/dV = A^T G."""
    return A.T @ G


@dataclass(frozen=True)
class WeightedSum(Operation):
    """``A V``: each token's weighted average of the value rows."""

    notation: Notation | None = None

    name = "weighted_sum"
    part_of_block = "head"
    matrix_form = "product"
    reference_function = weighted_sum
    default_notation = Notation("o", "o", "Head output (weighted sum of values)")
    rational = True

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(("o[i, j] = sum(alpha[i, jp] * v[jp, j] for jp in range(n))",),
                             {"o": "out", "alpha": "in0", "v": "in1"},
                             sizes={"n": ("alpha", 1)})

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        if wrt == 0:
            return IndexEquation(
                ("dalpha[i, j] = sum(do[i, lam] * v[j, lam] for lam in range(d_v))",),
                {"dalpha": "result", "do": "grad", "v": "in1"}, sizes={"d_v": ("v", 1)})
        return IndexEquation(("dv[i, j] = sum(alpha[ip, i] * do[ip, j] for ip in range(n))",),
                             {"dv": "result", "do": "grad", "alpha": "in0"},
                             sizes={"n": ("alpha", 0)})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        A, V = args
        return sympy.Matrix(EXACT.matmul(A.tolist(), V.tolist()))

    def sympy_entry(self, args: Sequence[sympy.Matrix], i: int, j: int) -> sympy.Expr:
        A, V = args
        return matmul_entry(A.row(i), V.col(j), EXACT)

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        A, V = args
        AV = product(A, V)
        if AV is not None:
            return AV
        columns = [list(col) for col in zip(*V)]
        return [[dot(ra, col) for col in columns] for ra in A]

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        return bilinear_difference(self, x0, dx)

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[np.ndarray]:
        return args

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """O = A V: dL/dA = G V^T, dL/dV = A^T G."""
        A, V = args
        return matmul(grad, transpose(V), num) if wrt == 0 else matmul(transpose(A), grad, num)

    def backward_entry(self, args: Sequence[sympy.Matrix], out: sympy.Matrix,
                       grad: sympy.Matrix, wrt: int | str, i: int, j: int) -> sympy.Expr:
        A, V = args
        if wrt == 0:
            return matmul_entry(grad.row(i), V.row(j), EXACT)
        return matmul_entry(A.col(i), grad.col(j), EXACT)

    def backward_function(self, wrt: int | str):
        return weighted_sum_backward_A if wrt == 0 else weighted_sum_backward_V

    def backward_arguments(self, wrt, args, out, grad, dtype):
        A, V = (a.astype(dtype) for a in args)
        return (grad.astype(dtype), V) if wrt == 0 else (A, grad.astype(dtype))
