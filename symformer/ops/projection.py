"""A projection ``x W + b``: Q, K, V, W_O, the FFN's layers, logits.

The weights are exact constants of the operation, or (``from_stages``, a training
step's: :mod:`symformer.blocks.train`) stages the projection reads by name: after an
exact optimisation step they are no longer rational, so the local formula stays
``q_0 = x_0 W[0,0] + x_1 W[1,0]`` however many steps came before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
from flint import arb

from symformer.engine.arbmath import (
    ArbMatrix,
    constant_balls,
    constant_mat,
    constant_vector,
    product,
)
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.notation_types import Notation, named
from symformer.ops.base import Operation, matrix
from symformer.ops.calculus import EXACT, Arithmetic, Rows, matmul, matmul_entry, transpose
from symformer.ops.facts import FALSE, PROVED, Fact, cancels, label

if TYPE_CHECKING:
    from symformer.engine.graph import Stage
    from symformer.ops.gradient import Part


def project(X, W):
    """X W: (n, d_in) @ (d_in, d_out) -> (n, d_out)."""
    return X @ W


def affine(X, W, b):
    """X W + b: (n, d_in) @ (d_in, d_out) + (1, d_out) -> (n, d_out)."""
    return X @ W + b


def project_backward_X(G, W):
    """Y = X W + b: dL/dX = G W^T."""
    return G @ W.T


def project_backward_W(X, G):
    """Y = X W + b: dL/dW = X^T G."""
    return X.T @ G


def bias_backward(G):
    """Y = X W + b (b added to every row): dL/db = the column sums of G."""
    return np.sum(G, axis=0, keepdims=True)


@dataclass(frozen=True)
class Projection(Operation):
    """``X @ W (+ b)``; ``weight``/``bias`` name the matrices in formulas (``W_Q``, ``b_1``).

    ``from_stages``: W (and b) are the input stages after X, a 1 x d_out stage for b;
    the fields ``W`` and ``b`` are then the values they started from, read only for
    whether there is a bias (see :meth:`Operation.staged`).
    """

    W: sympy.Matrix
    b: sympy.Matrix | None = None
    notation: Notation | None = None
    weight: str = "W"
    bias: str = "b"
    #: What the output columns are ("vocab" for logits; see Operation.columns).
    columns: str = "dims"
    from_stages: bool = False
    #: What the projection gives in its block (see :attr:`Operation.role`).
    role: str = ""
    #: A mark its weights' symbols carry (an expert of a mixture: ``W_1^[2]``); "": none.
    weight_mark: str = ""

    name = "projection"
    matrix_form = "affine"
    reference_function = project
    default_notation = Notation("y", "y", "Projection")
    rational = True

    def parameter_notation(self, name: str) -> Notation:
        """The weight's symbol, with the projection's ``weight_mark`` over it."""
        return self._marked(super().parameter_notation(name))

    def _marked(self, note: Notation) -> Notation:
        if not self.weight_mark:
            return note
        return Notation(f"{note.latex}^{{[{self.weight_mark}]}}",
                        f"{note.text}^[{self.weight_mark}]", note.title)

    @cached_property
    def _columns(self) -> list[list[tuple[int, sympy.Expr]]]:
        """Only the non-zero weights of each output column enter its formula."""
        rows = self.W.tolist()  # one conversion: SymPy's entry indexing is slow
        return [[(k, row[j]) for k, row in enumerate(rows) if row[j] != 0]
                for j in range(self.W.cols)]

    @property
    def sublayer_of(self) -> str | None:  # type: ignore[override]
        """W_O's projection gives the attention sub-layer's output, W_2's the FFN's."""
        return {"heads": "attention", "ffn_output": "feed-forward"}.get(self.role)

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation | None:
        if self.from_stages:
            return None
        bias = f" + {self.bias}[j]" if self.b is not None else ""
        arrays = {"q": "out", "x": "in0", self.weight: f"param:{self.weight}"}
        if self.b is not None:
            arrays[self.bias] = f"param:{self.bias}"
        return IndexEquation(
            (f"q[i, j] = sum(x[i, lam] * {self.weight}[lam, j] for lam in range(d_in)){bias}",),
            arrays, sizes={"d_in": ("x", 1)})

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation | None:
        if self.from_stages:
            return None
        W = self.weight
        if wrt == 0:
            return IndexEquation(
                (f"dx[i, j] = sum(dq[i, lam] * {W}[j, lam] for lam in range(d_out))",),
                {"dx": "result", "dq": "grad", W: f"param:{W}"}, sizes={"d_out": ("dq", 1)})
        if wrt == W:
            return IndexEquation((f"d{W}[lam, j] = sum(x[i, lam] * dq[i, j] for i in range(n))",),
                                 {f"d{W}": "result", "dq": "grad", "x": "in0"},
                                 sizes={"n": ("dq", 0)})
        return IndexEquation((f"d{self.bias}[j] = sum(dq[i, j] for i in range(n))",),
                             {f"d{self.bias}": "result", "dq": "grad"}, sizes={"n": ("dq", 0)})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        if self.from_stages:
            out = args[0] * args[1]
            if self.b is not None:
                out += sympy.Matrix.vstack(*[args[2]] * out.rows)
            return out
        return sympy.Matrix([[self._entry(row, j) for j in range(len(self._columns))]
                             for row in args[0].tolist()])

    def sympy_entry(self, args: Sequence[sympy.Matrix], i: int, j: int) -> sympy.Expr | None:
        return None if self.from_stages else self._entry(args[0].row(i), j)

    def _entry(self, x: Sequence[sympy.Expr], j: int) -> sympy.Expr:
        """Entry j of the row x W + b."""
        terms = [w * x[k] for k, w in self._columns[j]]
        if self.b is not None and self.b[j] != 0:
            terms.append(self.b[j])
        return sympy.Add(*terms)

    def named_constants(self) -> dict[str, Notation]:
        return {} if self.from_stages else {"W": self._marked(named(self.weight)),
                                            "b": self._marked(named(self.bias))}

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        X = args[0]
        if self.from_stages:
            W = args[1]
            return [[sum((x * W[k][j] for k, x in enumerate(row)),
                         args[2][0][j] if self.b is not None else arb(0))
                     for j in range(len(W[0]))] for row in X]
        bias = constant_vector(self.b) if self.b is not None else None
        XW = product(X, constant_mat(self.W)) if self.W.rows else None
        if XW is not None:
            return XW if bias is None else [[p + b for p, b in zip(row, bias)] for row in XW]
        W = constant_balls(self.W)  # the balls straight from the exact weights
        columns = [[(k, row[j]) for k, row in enumerate(W) if not row[j].is_zero()]
                   for j in range(self.W.cols)]
        out = []
        for row in X:
            out_row = []
            for j, column in enumerate(columns):
                total = bias[j] if bias is not None else arb(0)
                for k, w in column:
                    total += w * row[k]
                out_row.append(total)
            out.append(out_row)
        return out

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        # affine: the bias cancels; a finite mask perturbs X only (never the weights)
        return replace(self, b=None).arb([dx[0], x0[1]] if self.from_stages else dx)

    def function(self):
        return project if self.b is None else affine

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        if self.from_stages:
            return tuple(np.asarray(a, dtype=dtype) for a in args)
        if self.b is None:
            return args[0], matrix(self.W, dtype)
        return args[0], matrix(self.W, dtype), matrix(self.b, dtype)

    def output_at_zero(self) -> str | None:
        """x W + b at x = 0 is the bias ``b`` in every row (exactly 0 without one)."""
        if self.from_stages:
            return None
        return self.bias if self.b is not None else ""

    def parameters(self) -> dict[str, sympy.Matrix]:
        """The weight (named ``weight``, e.g. ``W_Q``) and the bias, if any (none when
        they are stages)."""
        if self.from_stages:
            return {}
        found = {self.weight: self.W}
        if self.b is not None:
            found[self.bias] = self.b
        return found

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """Y = X W + b: dL/dX = G W^T, dL/dW = X^T G, dL/db = the column sums of G.

        ``wrt``: 0 (X), then the weight and the bias by name, or (``from_stages``) as
        inputs 1 and 2."""
        if wrt == 0:
            # W's own constants (kept per weight), transposed: W.T would be a new matrix
            W = args[1] if self.from_stages else num.constants(self.W)
            return matmul(grad, transpose(W), num)
        if self._is_weight(wrt):
            return matmul(transpose(args[0]), grad, num)
        return [[num.total(column) for column in transpose(grad)]]

    def _is_weight(self, wrt: int | str) -> bool:
        """Is ``wrt`` the weight W (input 1 when the weights are stages)?"""
        return wrt == (1 if self.from_stages else self.weight)

    def backward_entry(self, args: Sequence[sympy.Matrix], out: sympy.Matrix,
                       grad: sympy.Matrix, wrt: int | str, i: int, j: int
                       ) -> sympy.Expr | None:
        if wrt != 0 or self.from_stages:
            return None
        return matmul_entry(grad.row(i), EXACT.constants(self.W.row(j))[0], EXACT)

    def staged(self) -> Operation | None:
        """The same projection reading its weight (and bias) from stages."""
        return None if self.from_stages else replace(
            self, from_stages=True, notation=self.notation or TRAINED)

    def backward_facts(self, gradient: Stage, part: Part) -> list[Fact]:
        """dL/db equals the column sums of dL/dY (b is added to every row)."""
        if part.wrt != self.bias or self.b is None:
            return []
        G = gradient.derivation.symbols(part.upstream)
        name = f"{gradient.name}.column_sums{label(gradient)}"
        statement = (f"{gradient.name}{label(gradient)} equals the column sums of "
                     f"{part.upstream}")
        for j in range(part.formula.cols):
            if not cancels(part.formula[0, j] - sympy.Add(*G.col(j))):
                return [Fact(name, statement, FALSE, f"column {j} differs")]
        return [Fact(name, statement, PROVED, f"each entry's local formula is sum_i "
                     f"{part.upstream}[i, j]")]

    def backward_function(self, wrt: int | str):
        if wrt == 0:
            return project_backward_X
        return project_backward_W if self._is_weight(wrt) else bias_backward

    def backward_arguments(self, wrt, args, out, grad, dtype):
        G = grad.astype(dtype)
        if wrt == 0:
            return G, args[1].astype(dtype) if self.from_stages else matrix(self.W, dtype)
        return (args[0].astype(dtype), G) if self._is_weight(wrt) else (G,)


#: A projection's notation reading trained weights, when its role gives it none.
TRAINED = Notation("y", "y", "Projection (trained weights)")
