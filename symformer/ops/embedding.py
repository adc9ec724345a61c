"""Embedding lookup: each token's row of the embedding table (an exact constant)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from flint import arb

from symformer.engine.arbmath import ArbMatrix, constant_balls
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.ops.base import OPERATIONS, Notation, Operation, Spelling, matrix
from symformer.ops.calculus import Arithmetic, Rows


def embed(E, t):
    """Row t of the table E for each token id t: (n, d)."""
    return E[t]


def embed_backward(G, T):
    """dL/dE = T^T G: row u is the sum of dL/de_i over the positions i holding token u,
    T the 0/1 matrix with T[i, u] = 1 where position i holds token u (only the rows of
    the tokens used)."""
    return T.T @ G


@dataclass(frozen=True)
class Embedding(Operation):
    """The rows ``token_ids`` of the exact table ``E`` (a stage with no inputs)."""

    E: sympy.Matrix
    token_ids: tuple[int, ...]
    notation: Notation | None = None
    #: True: ``E`` is a token-type (segment) table and ``token_ids`` the tokens' types.
    of_types: bool = False

    name = "embedding"
    lookup = "tokens"
    reference_function = embed
    default_notation = Notation("e", "e", "Token embedding")
    rational = True

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(("e[i, j] = E[t[i], j]",),
                             {"e": "out", "E": f"param:{self.table_name}", "t": "const:token_ids"},
                             symbols={"E": ("E", "E"), "t": ("t", "t")},
                             remark="t: the tokens' types (segments)" if self.of_types
                             else "t: the ids of the tokens in the vocabulary")

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        return IndexEquation(
            ("dE[r, j] = sum(de[i, j] * (1 if t[i] == u[r] else 0) for i in range(n))",),
            {"dE": "result", "de": "grad", "t": "const:token_ids", "u": "const:used_rows"},
            sizes={"n": ("de", 0)}, symbols={"t": ("t", "t"), "u": ("u", "u")},
            remark="u: the distinct token ids used, in order")

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return sympy.Matrix([list(self.E.row(t)) for t in self.token_ids])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        table = constant_balls(self.E)
        return [list(table[t]) for t in self.token_ids]

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        return [[arb(0) for _ in row] for row in self.arb([])]  # a constant

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return matrix(self.E, dtype), list(self.token_ids)

    def spelling(self) -> Spelling:
        return Spelling(remark="t: the token's type (segment)" if self.of_types
                        else "t: the token's id in the vocabulary")

    @property
    def table_name(self) -> str:
        """The table's parameter name: ``embedding_table``, or ``token_type_table``."""
        return "token_type_table" if self.of_types else "embedding_table"

    def parameters(self) -> dict[str, sympy.Matrix]:
        """The embedding table (its gradient has only the rows of the tokens used)."""
        return {self.table_name: self.E}

    def staged(self) -> Operation:
        """The lookup reading the whole table from a stage (``train``'s trained table,
        :mod:`symformer.ops.staged_embedding`, found in the registry)."""
        return OPERATIONS["staged_embedding"](self.token_ids, self.notation)

    def parameter_notation(self, name: str) -> Notation:
        """The table the rows are read from: E (its gradient dL/dE)."""
        return Notation("E", "E", "the token-type table" if self.of_types
                        else "the embedding table")

    def used_rows(self) -> list[int]:
        """The table's rows the sentence uses, in order of first appearance."""
        return list(dict.fromkeys(self.token_ids))

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """Row t of dL/dE is the sum of dL/de over the positions holding token t
        (only the rows used, in order of first appearance)."""
        return [[num.total(column) for column in zip(*[g for g, t in zip(grad, self.token_ids)
                                                       if t == used])]
                for used in self.used_rows()]

    def backward_function(self, wrt: int | str):
        return embed_backward

    def backward_arguments(self, wrt, args, out, grad, dtype):
        T = np.array([[t == u for u in self.used_rows()] for t in self.token_ids], dtype=dtype)
        return grad.astype(dtype), T
