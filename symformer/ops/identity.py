"""The input unchanged: a block's output, or heads concatenated with no W_O."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from symformer.engine.arbmath import ArbMatrix
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation
from symformer.ops.calculus import Arithmetic, Rows


def identity(x):
    """x, unchanged."""
    return x


def identity_backward(g):
    """dL/dx = dL/dz: the gradient passes unchanged."""
    return g


@dataclass(frozen=True)
class Identity(Operation):
    """Names its input anew (``output`` is the last block's result)."""

    notation: Notation | None = None
    remark: str = ""  # said after its equation ("no W_O: the concatenation is the output")
    #: True for a side's final output (see :attr:`Operation.final`).
    final: bool = False
    #: "attention" for the heads concatenated with no W_O, the attention sub-layer's
    #: output (see :attr:`Operation.sublayer_of`).
    sublayer_of: str | None = None

    name = "identity"
    matrix_form = "identity"
    renames = True
    reference_function = identity
    default_notation = Notation("z", "z", "Output")
    rational = True
    function_name = ""  # a matrix equation writes the argument alone

    @property
    def part_of_block(self) -> str | None:  # type: ignore[override]
        """A side's final output is the output's; the heads concatenated with no W_O,
        the heads'; any other renaming, none."""
        return "output" if self.final else "heads" if self.sublayer_of else None

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(("z[i, j] = y[i, j]",), {"z": "out", "y": "in0"},
                             remark=self.remark)

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        return IndexEquation(("dy[i, j] = dz[i, j]",), {"dy": "result", "dz": "grad"})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return args[0]

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return args[0]

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        return self.arb(dx)  # linear

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[np.ndarray]:
        return args

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """The gradient passes unchanged."""
        return grad

    def backward_function(self, wrt: int | str):
        return identity_backward

    def backward_arguments(self, wrt, args, out, grad, dtype):
        return (grad.astype(dtype),)
