"""Scaled scores ``u / sqrt(d_k)`` (or ``u / c``), with the causal mask applied.

``scale=None`` divides by sqrt(d_k) (the paper); an exact ``scale`` c divides by it
instead (``1``: unscaled scores, as illustrated self-attention posts print).

``masked`` is the set of (row, column) entries the mask blocks.  With
``mask_value=None`` they are -inf (their weights are exactly 0); with a number
(e.g. -10**9) that number is added instead, as some implementations do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from flint import arb

from symformer.engine.arbmath import NEG_INF, ArbMatrix, rational_ball
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation
from symformer.ops.calculus import EXACT, Arithmetic, Rows
from symformer.ops.facts import FALSE, PROVED, Fact, label

if TYPE_CHECKING:
    from symformer.engine.graph import Stage
    from symformer.ops.gradient import Part


def scaled_scores(U, d_k):
    """U / sqrt(d_k): the raw scores scaled (no mask)."""
    return U / np.sqrt(d_k)


def masked_scores(U, d_k, M):
    """U / sqrt(d_k), and -inf where the mask M is set (those weights are exactly 0)."""
    return np.where(M, -np.inf, U / np.sqrt(d_k))


def offset_scores(U, d_k, M, m):
    """U / sqrt(d_k), plus m (a number such as -1e9) where the mask M is set."""
    return U / np.sqrt(d_k) + np.where(M, m, 0)


def divided_scores(U, c):
    """U / c: the raw scores divided by an exact scale c (1: unscaled)."""
    return U / c


def divided_masked_scores(U, c, M):
    """U / c, and -inf where the mask M is set."""
    return np.where(M, -np.inf, U / c)


def divided_offset_scores(U, c, M, m):
    """U / c, plus m (a number such as -1e9) where the mask M is set."""
    return U / c + np.where(M, m, 0)


def scaled_scores_backward(G, d_k):
    """dL/du = dL/ds / sqrt(d_k) (a finite mask m adds a constant: same derivative)."""
    return G / np.sqrt(d_k)


def masked_scores_backward(G, d_k, M):
    """dL/du = dL/ds / sqrt(d_k), and exactly 0 where M sets the score to -inf."""
    return np.where(M, 0, G / np.sqrt(d_k))


def divided_scores_backward(G, c):
    """dL/du = dL/ds / c."""
    return G / c


def divided_masked_scores_backward(G, c, M):
    """dL/du = dL/ds / c, and exactly 0 where M sets the score to -inf."""
    return np.where(M, 0, G / c)


@dataclass(frozen=True)
class ScaleMask(Operation):
    """``u / sqrt(d_k)``, and -inf (or ``mask_value`` added) at the ``masked`` entries."""

    d_k: int
    masked: frozenset[tuple[int, int]] = frozenset()
    mask_value: sympy.Rational | None = None
    notation: Notation | None = None
    #: None: divide by sqrt(d_k); else divide by this exact positive number.
    scale: sympy.Rational | None = None

    name = "scale_mask"
    part_of_block = "head"
    matrix_form = "scores"
    scales_and_masks = keeps_mask = True
    reference_function = scaled_scores
    default_notation = Notation("s", "s", "Scaled scores")
    trace_step = "attention"
    columns = "keys"
    rational = True

    def _factor(self) -> sympy.Expr:
        return 1 / sympy.sqrt(self.d_k) if self.scale is None else 1 / self.scale

    def _factor_ball(self) -> arb:
        return 1 / arb(self.d_k).sqrt() if self.scale is None else 1 / rational_ball(self.scale)

    def _equation_parts(self) -> tuple[str, dict[str, object], str]:
        """The scaled entry's text, the scalars it uses, and the masked entries' test."""
        scaled = "u[i, j] / sqrt(d_k)" if self.scale is None else "u[i, j] / tau"
        scalars: dict[str, object] = {"d_k": self.d_k} if self.scale is None \
            else {"tau": self.scale}
        n = max((j for _, j in self.masked), default=-1) + 1
        causal = self.masked == {(i, j) for i in range(n) for j in range(i + 1, n)}
        test = "j <= i" if causal else "mask[i, j] == 0"
        return scaled, scalars, test

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        scaled, scalars, test = self._equation_parts()
        arrays = {"s": "out", "u": "in0"}
        if self.masked and test != "j <= i":
            arrays["mask"] = "const:masked"
        if not self.masked:
            line = f"s[i, j] = {scaled}"
        elif self.mask_value is None:
            line = f"s[i, j] = {scaled} if {test} else -inf"
        else:
            line = f"s[i, j] = {scaled} if {test} else {scaled} + M"
            scalars["M"] = self.mask_value
        return IndexEquation((line,), arrays, scalars=scalars,
                             symbols={"tau": (r"\tau", "τ")})

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        scaled, scalars, test = self._equation_parts()
        arrays = {"du": "result", "ds": "grad"}
        scaled = scaled.replace("u[i, j]", "ds[i, j]")
        if self.masked and test != "j <= i":
            arrays["mask"] = "const:masked"
        line = f"du[i, j] = {scaled}"
        if self.masked and self.mask_value is None:
            line += f" if {test} else 0"
        return IndexEquation((line,), arrays, scalars=scalars, symbols={"tau": (r"\tau", "τ")})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        S = args[0]
        return sympy.Matrix(S.rows, S.cols, lambda i, j: self.sympy_entry(args, i, j))

    def sympy_entry(self, args: Sequence[sympy.Matrix], i: int, j: int) -> sympy.Expr:
        S = args[0]
        if (i, j) not in self.masked:
            return S[i, j] * self._factor()
        if self.mask_value is None:
            return -sympy.oo
        return S[i, j] * self._factor() + self.mask_value

    def named_constants(self) -> dict[str, Notation]:
        return {"d_k": Notation("d_k", "d_k", "key width")}

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        S = args[0]
        scale = self._factor_ball()
        if not self.masked:  # no mask: a product per entry, nothing to look up
            return [[s * scale for s in row] for row in S]
        offset = rational_ball(self.mask_value) if self.mask_value is not None else None
        out = []
        for i, row in enumerate(S):
            out_row = []
            for j, s in enumerate(row):
                if (i, j) not in self.masked:
                    out_row.append(s * scale)
                elif offset is None:
                    out_row.append(NEG_INF)
                else:
                    out_row.append(s * scale + offset)
            out.append(out_row)
        return out

    @property
    def finite_mask(self) -> bool:
        return bool(self.masked) and self.mask_value is not None

    def exactly_masked(self) -> ScaleMask:
        return replace(self, mask_value=None)

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        (s0,), (ds,) = x0, dx
        scale = self._factor_ball()
        offset = rational_ball(self.mask_value) if self.mask_value is not None else None
        out = []
        for i, (row0, drow) in enumerate(zip(s0, ds)):
            out_row = []
            for j, (s, d) in enumerate(zip(row0, drow)):
                if (i, j) in self.masked and offset is not None:
                    out_row.append((s + d) * scale + offset)  # the full score: x0 is -inf
                else:
                    out_row.append(d * scale)
            out.append(out_row)
        return out

    def mask_matrix(self, shape: tuple[int, int]) -> np.ndarray:
        """The mask as booleans (True: blocked)."""
        M = np.zeros(shape, dtype=bool)
        for i, j in self.masked:
            M[i, j] = True
        return M

    def function(self):
        if self.scale is not None:
            if not self.masked:
                return divided_scores
            return divided_masked_scores if self.mask_value is None else divided_offset_scores
        if not self.masked:
            return scaled_scores
        return masked_scores if self.mask_value is None else offset_scores

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        U = args[0]
        d = dtype(self.d_k) if self.scale is None else dtype(float(self.scale))
        if not self.masked:
            return U, d
        if self.mask_value is None:
            return U, d, self.mask_matrix(U.shape)
        return U, d, self.mask_matrix(U.shape), dtype(float(self.mask_value))

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """dL/du = dL/ds / sqrt(d_k) (or / c); exactly 0 at a score masked with -inf.

        With a finite mask (``mask_value``) the masked score is u / sqrt(d_k) + m,
        whose derivative is 1 / sqrt(d_k) as everywhere else.
        """
        scale = num.const(self._factor())
        return [[self._backward_entry(i, j, g, scale, num) for j, g in enumerate(row)]
                for i, row in enumerate(grad)]

    def backward_entry(self, args: Sequence[sympy.Matrix], out: sympy.Matrix,
                       grad: sympy.Matrix, wrt: int | str, i: int, j: int) -> sympy.Expr:
        return self._backward_entry(i, j, grad[i, j], EXACT.const(self._factor()), EXACT)

    def _backward_entry(self, i: int, j: int, g, scale, num: Arithmetic):
        """Entry (i, j) of :meth:`backward`."""
        return num.zero() if (i, j) in self.masked and self.mask_value is None else g * scale

    def backward_facts(self, gradient: Stage, part: Part) -> list[Fact]:
        """dL/du is exactly 0 at every score masked with -inf (a constant, decided by the
        mask set); false with a finite mask, whose derivative is 1/sqrt(d_k) there too."""
        if not self.masked:
            return []
        name = f"{gradient.name}.masked_zero{label(gradient)}"
        statement = (f"the masked raw scores get the gradient exactly 0 in "
                     f"{gradient.name}{label(gradient)}")
        for i, j in sorted(self.masked):
            if part.formula[i, j] != 0:
                return [Fact(name, statement, FALSE,
                             f"{gradient.name}[{i},{j}] = {part.formula[i, j]}: the mask "
                             f"adds {self.mask_value}, a constant; the score still varies")]
        return [Fact(name, statement, PROVED, f"{len(self.masked)} masked entries: a -inf "
                     f"score is a constant, its local derivative is the number 0")]

    def backward_function(self, wrt: int | str):
        infinite = bool(self.masked) and self.mask_value is None
        if self.scale is not None:
            return divided_masked_scores_backward if infinite else divided_scores_backward
        return masked_scores_backward if infinite else scaled_scores_backward

    def backward_arguments(self, wrt, args, out, grad, dtype):
        G = grad.astype(dtype)
        d = dtype(self.d_k) if self.scale is None else dtype(float(self.scale))
        if self.masked and self.mask_value is None:
            return G, d, self.mask_matrix(G.shape)
        return G, d
