"""Embedding lookup: each token's row of the embedding table.

The table is an exact constant, or (``from_stages``, a training step's:
:mod:`symformer.blocks.train`) a stage: ``train`` makes the whole table a stage
(``step0.embedding_table``, then the optimiser's updates), so that a tied
language-model head can read the same table (:mod:`symformer.ops.transpose`).  The
gradient of a table read from a stage is the whole table's: row t is the sum of dL/de
over the positions holding token t, and exactly 0 for a token the sentence does not
use (so the SGD step leaves that row exactly as it was).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from flint import arb

from symformer.engine.arbmath import ArbMatrix, constant_balls
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation, matrix
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
    """The rows ``token_ids`` of the exact table ``E`` (a stage with no inputs).

    ``from_stages``: the table is the one input stage (|vocab| x d); the field ``E`` is
    then the value it started from, not read (see :meth:`Operation.staged`).
    """

    E: sympy.Matrix
    token_ids: tuple[int, ...]
    notation: Notation | None = None
    #: True: ``E`` is a token-type (segment) table and ``token_ids`` the tokens' types.
    of_types: bool = False
    from_stages: bool = False

    name = "embedding"
    part_of_block = "input"
    lookup = "tokens"
    reference_function = embed
    default_notation = Notation("e", "e", "Token embedding")
    rational = True

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation | None:
        if self.from_stages:
            return None
        return IndexEquation(("e[i, j] = E[t[i], j]",),
                             {"e": "out", "E": f"param:{self.table_name}", "t": "const:token_ids"},
                             symbols={"E": ("E", "E"), "t": ("t", "t")},
                             remark="t: the tokens' types (segments)" if self.of_types
                             else "t: the ids of the tokens in the vocabulary")

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation | None:
        if self.from_stages:
            return None
        return IndexEquation(
            ("dE[ip, j] = sum(de[i, j] * (1 if t[i] == u[ip] else 0) for i in range(n))",),
            {"dE": "result", "de": "grad", "t": "const:token_ids", "u": "const:used_rows"},
            sizes={"n": ("de", 0)}, symbols={"t": ("t", "t"), "u": ("w", "w")},
            remark="w: the distinct token ids used, in order")

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        table = args[0] if self.from_stages else self.E
        return sympy.Matrix([list(table.row(t)) for t in self.token_ids])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        table = args[0] if self.from_stages else constant_balls(self.E)
        return [list(table[t]) for t in self.token_ids]

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        if self.from_stages:
            return self.arb([dx[0]])  # a selection: linear in the table
        return [[arb(0) for _ in row] for row in self.arb([])]  # a constant

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        table = np.asarray(args[0], dtype=dtype) if self.from_stages else matrix(self.E, dtype)
        return table, list(self.token_ids)

    @property
    def table_name(self) -> str:
        """The table's parameter name: ``embedding_table``, or ``token_type_table``."""
        return "token_type_table" if self.of_types else "embedding_table"

    def parameters(self) -> dict[str, sympy.Matrix]:
        """The embedding table (its gradient has only the rows of the tokens used); none
        when it is a stage."""
        return {} if self.from_stages else {self.table_name: self.E}

    def staged(self) -> Operation | None:
        """The lookup reading the whole table from a stage (``train``'s trained table)."""
        return None if self.from_stages else replace(
            self, from_stages=True, notation=self.notation or TRAINED)

    def parameter_notation(self, name: str) -> Notation:
        """The table the rows are read from: W_E (its gradient dL/dW_E; as GPT's W_e: E
        is the matrix of the embedding rows e it gives)."""
        return Notation("W_{E}", "W_E", "the token-type table" if self.of_types
                        else "the embedding table")

    def used_rows(self) -> list[int]:
        """The table's rows the sentence uses, in order of first appearance."""
        return list(dict.fromkeys(self.token_ids))

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """Row t of dL/dE is the sum of dL/de over the positions holding token t
        (only the rows used, in order of first appearance; from a stage, every row of
        the table, an exact 0 for a token not used)."""
        def total(u: int) -> list:
            return [num.total(column)
                    for column in zip(*[g for g, t in zip(grad, self.token_ids) if t == u])]
        if self.from_stages:
            d = len(args[0][0]) if args[0] else 0
            return [total(u) if u in self.token_ids else [num.zero() for _ in range(d)]
                    for u in range(len(args[0]))]
        return [total(used) for used in self.used_rows()]

    def backward_function(self, wrt: int | str):
        return embed_backward

    def backward_arguments(self, wrt, args, out, grad, dtype):
        rows = range(np.asarray(args[0]).shape[0]) if self.from_stages else self.used_rows()
        T = np.array([[t == u for u in rows] for t in self.token_ids], dtype=dtype)
        return grad.astype(dtype), T


#: A lookup's notation reading a trained table, when its role gives it none.
TRAINED = Notation("e", "e", "Token embedding (trained table)")
