"""The products inside one query's dot products: P_jc = q_c k_{j,c}, summed to u_j.

Asked for with ``[stages] products = ["layer1.head1.raw_scores[1]"]`` (or every row):
a side stage ``layer1.head1.raw_scores.products.row1`` (one row per key, one column per
component c), read from the queries and keys the scores read, so that the terms a
lesson prints before adding them (``1.595 · 1.213 = 1.935``) are claimable.  Row j sums
to the score u_{r,j}.  Nothing reads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from symformer.engine.arbmath import ArbMatrix
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation


def dot_products(Q, K, r):
    """P[j, c] = Q[r, c] K[j, c]: query r's products with every key, component by
    component (row j sums to (Q K^T)[r, j])."""
    return Q[r] * K


@dataclass(frozen=True)
class DotProducts(Operation):
    """Query ``row``'s component products with every key."""

    row: int
    notation: Notation | None = None

    name = "dot_products"
    part_of_block = "head"
    reference_function = dot_products
    default_notation = Notation("P", "P", "Products q_c k_{j,c} inside each dot product")
    rational = True

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(("P[j, c] = q[r, c] * k[j, c]",), {"P": "out", "q": "in0",
                                                                "k": "in1"},
                             scalars={"r": self.row}, symbols={"r": ("r", "r")},
                             remark=f"r = {self.row}: the query; row j adds up to its "
                                    f"score with key j")

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        Q, K = args
        return sympy.Matrix(K.rows, K.cols, lambda j, c: Q[self.row, c] * K[j, c])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        q = args[0][self.row]
        return [[a * b for a, b in zip(q, k)] for k in args[1]]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return args[0], args[1], self.row
