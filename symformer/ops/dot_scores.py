"""Raw attention scores: every query dotted with every key, ``Q K^T`` (no scaling yet)."""

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


def raw_scores(Q, K):
    """Every query against every key: (n, d_k) @ (d_k, m) -> (n, m)."""
    return Q @ K.T


def raw_scores_backward_Q(G, K):
    """U = Q K^T: dL/dQ = G K."""
    return G @ K


def raw_scores_backward_K(G, Q):
    """U = Q K^T: dL/dK = G^T Q."""
    return G.T @ Q


@dataclass(frozen=True)
class DotScores(Operation):
    """``Q K^T``: entry (i, j) is query i's dot product with key j."""

    notation: Notation | None = None

    name = "dot_scores"
    matrix_form = "dot_products"
    reference_function = raw_scores
    default_notation = Notation("u", "u", "Dot products with every key")
    trace_step = "attention"
    columns = "keys"
    rational = True
    score_key, score_rank = "dot", 0
    torch_scores = "q @ k.T"

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(("u[i, j] = sum(q[i, lam] * k[j, lam] for lam in range(d_k))",),
                             {"u": "out", "q": "in0", "k": "in1"}, sizes={"d_k": ("q", 1)})

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        if wrt == 0:
            return IndexEquation(("dq[i, j] = sum(du[i, jp] * k[jp, j] for jp in range(n))",),
                                 {"dq": "result", "du": "grad", "k": "in1"},
                                 sizes={"n": ("du", 1)})
        return IndexEquation(("dk[i, j] = sum(du[ip, i] * q[ip, j] for ip in range(n))",),
                             {"dk": "result", "du": "grad", "q": "in0"}, sizes={"n": ("du", 0)})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        Q, K = args
        return sympy.Matrix(EXACT.matmul(Q.tolist(), K.T.tolist()))

    def sympy_entry(self, args: Sequence[sympy.Matrix], i: int, j: int) -> sympy.Expr:
        Q, K = args
        return matmul_entry(Q.row(i), K.row(j), EXACT)

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        A, B = args
        AB = product(A, B, transpose=True)
        return AB if AB is not None else [[dot(ra, rb) for rb in B] for ra in A]

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        return bilinear_difference(self, x0, dx)

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[np.ndarray]:
        return args

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """U = Q K^T: dL/dQ = G K, dL/dK = G^T Q."""
        Q, K = args
        return matmul(grad, K, num) if wrt == 0 else matmul(transpose(grad), Q, num)

    def backward_entry(self, args: Sequence[sympy.Matrix], out: sympy.Matrix,
                       grad: sympy.Matrix, wrt: int | str, i: int, j: int) -> sympy.Expr:
        Q, K = args
        if wrt == 0:
            return matmul_entry(grad.row(i), K.col(j), EXACT)
        return matmul_entry(grad.col(i), Q.col(j), EXACT)

    def backward_function(self, wrt: int | str):
        return raw_scores_backward_Q if wrt == 0 else raw_scores_backward_K

    def backward_arguments(self, wrt, args, out, grad, dtype):
        return grad.astype(dtype), args[1 - wrt].astype(dtype)

