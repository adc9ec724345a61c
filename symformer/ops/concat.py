"""The heads' outputs side by side (columns)."""

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
from symformer.ops.calculus import Arithmetic, Rows


def concat(heads):
    """Concat(head_1, ..., head_h): h x (n, d_v) -> (n, h d_v)."""
    return np.concatenate(heads, axis=-1)


def concat_backward(G, S):
    """dL/do^(k) = dL/dc S: the columns of dL/dc that head k filled, picked by the 0/1
    matrix S (an identity block at head k's columns)."""
    return G @ S


@dataclass(frozen=True)
class Concat(Operation):
    """Concatenate the input stages along the columns."""

    notation: Notation | None = None

    name = "concat"
    part_of_block = "heads"
    matrix_form = "columns"
    reference_function = concat
    default_notation = Notation("c", "c", "Concatenation of the heads")
    rational = True

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        """One case per input, by column; inputs of one width (the heads' outputs,
        d_v each) are written with d_v."""
        widths = [w for _, w in shapes]
        names = [f"o{k + 1}" for k in range(len(widths))]
        arrays = {"c": "out", **{n: f"in{k}" for k, n in enumerate(names)}}
        same = len(set(widths)) == 1

        def offset(k: int) -> str:
            if same:
                return "d_v" if k == 1 else f"{k} * d_v"
            return str(sum(widths[:k]))

        cases = [f"{n}[i, j - {offset(k)}]" if k else f"{n}[i, j]"
                 for k, n in enumerate(names)]
        expr = cases[-1]
        for k in range(len(widths) - 2, -1, -1):
            expr = f"{cases[k]} if j < {offset(k + 1)} else {expr}"
        return IndexEquation((f"c[i, j] = {expr}",), arrays,
                             sizes={"d_v": ("o1", 1)} if same else {})

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        """Input ``wrt``'s own columns of the gradient."""
        start = sum(w for _, w in shapes[:wrt])
        shift = f" + {start}" if start else ""
        return IndexEquation((f"do[i, j] = dc[i, j{shift}]",), {"do": "result", "dc": "grad"})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return sympy.Matrix.hstack(*args)

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return [sum((list(m[i]) for m in args), []) for i in range(len(args[0]))]

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        return self.arb(dx)  # linear

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return [list(args)]

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """Input ``wrt`` gets its own columns of the gradient."""
        start = sum(len(a[0]) for a in args[:wrt])
        width = len(args[wrt][0])
        return [row[start:start + width] for row in grad]

    def backward_function(self, wrt: int | str):
        return concat_backward

    def backward_arguments(self, wrt, args, out, grad, dtype):
        start, width = sum(a.shape[-1] for a in args[:wrt]), args[wrt].shape[-1]
        return grad.astype(dtype), np.eye(grad.shape[-1], dtype=dtype)[:, start:start + width]
