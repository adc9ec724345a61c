"""The transpose of a stage: a tied language-model head's W_vocab = E^T while training.

With ``[lm_head] tied = true`` the head's weight is the embedding table transposed.
``train`` keeps one trained table (``stepT.embedding_table``) and makes W_vocab the
stage ``stepT.W_vocab`` = its transpose, so the table's gradient is the sum of both
uses (the lookup's rows and the head's columns) and the tie holds after every step.
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
from symformer.ops.calculus import Arithmetic, Rows, transpose


def transposed(E):
    """E^T."""
    return E.T


def transposed_backward(G):
    """dL/dE = (dL/dE^T)^T."""
    return G.T


@dataclass(frozen=True)
class Transpose(Operation):
    """The input stage transposed (rows become columns); ``of_weight``: a weight's
    gradient so (a tied table's, the head's use: dL/dW_vocab transposed)."""

    notation: Notation | None = None
    of_weight: bool = False
    #: True for a tied weight's own value (see :attr:`Operation.is_weight`).
    is_weight: bool = False

    name = "transpose"
    reference_function = transposed
    default_notation = Notation("W", "W", "Tied weight (a table transposed)")
    rational = True

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(("W[i, j] = E[j, i]",), {"W": "out", "E": "in0"})

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        return IndexEquation(("dE[i, j] = dW[j, i]",), {"dE": "result", "dW": "grad"})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return args[0].T

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return [list(column) for column in zip(*args[0])]

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        return self.arb([dx[0]])  # linear

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return (np.asarray(args[0], dtype=dtype),)

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """dL/dE = the gradient at E^T, transposed."""
        return transpose(grad)

    def backward_function(self, wrt: int | str):
        return transposed_backward

    def backward_arguments(self, wrt, args, out, grad, dtype):
        return (grad.astype(dtype),)
