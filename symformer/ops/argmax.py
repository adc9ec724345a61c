"""The next token: 1 for every vocabulary entry whose last-position logit is maximal.

One 1 names the next token; several 1s are an exact tie (proved, never broken by a
float).  The decision belongs to a *prover* (:class:`symformer.engine.argmax.TieProver`)
that proves logits equal exactly; this operation only asks it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np
from flint import arb

from symformer.engine.arbmath import ArbMatrix
from symformer.engine.rounding import ball_bounds
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation, WorkedPart


class ArgmaxProver(Protocol):
    """Decides the argmax of a row of logits exactly."""

    def argmax(self, balls: Sequence[arb], row: int) -> frozenset[int] | None:
        """The argmax set decided from one row of balls, or None if undecided here."""

    def winners(self, row: int) -> frozenset[int]:
        """The exact argmax set of a row (raising the precision as needed)."""

    def rebound(self, g: Any, rename: Callable[[str], str]) -> ArgmaxProver:
        """The same prover over ``g``, whose logits stage is this one's renamed."""


def argmax_indicator(z):
    """1 where the row z (the last position's logits) is largest (several 1s for a tie),
    else 0: (1, |vocab|)."""
    return np.where(z == np.max(z, axis=-1, keepdims=True), 1, 0)


@dataclass(frozen=True, eq=False)
class ArgmaxIndicator(Operation):
    """The indicator of the last row's largest entries (a 1 x |vocab| stage).

    A row whose argmax the balls cannot decide yet gets the ball [0, 1] on its
    candidates, so the engine raises the precision.
    """

    prover: ArgmaxProver = field(repr=False)
    notation: Notation | None = None

    name = "argmax"
    jumps = picks_token = True
    reference_function = argmax_indicator
    default_notation = Notation(r"\hat{t}", "t̂", "Next token (exact argmax)")
    columns = "vocab"
    heat = True

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(
            ("t[j] = 1 if l[n - 1, j] == max(l[n - 1, jp] for jp in range(V)) else 0",),
            {"t": "out", "l": "in0"}, sizes={"n": ("l", 0), "V": ("l", 1)},
            symbols={"V": ("|V|", "|V|")}, remark="the last position's logits")

    def for_graph(self, g: Any, rename: Callable[[str], str]) -> Operation:
        return replace(self, prover=self.prover.rebound(g, rename))

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        logits = args[0]
        winners = self.prover.winners(logits.rows - 1)
        return sympy.Matrix([[int(j in winners) for j in range(logits.cols)]])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        row = len(args[0]) - 1
        balls = args[0][row]
        winners = self.prover.argmax(balls, row)
        if winners is not None:
            return [[arb(int(j in winners)) for j in range(len(balls))]]
        undecided = arb(0).union(arb(1))
        if not all(x.is_finite() for x in balls):
            return [[undecided for _ in balls]]
        best_low = max(ball_bounds(x)[0] for x in balls)
        return [[undecided if ball_bounds(x)[1] >= best_low else arb(0) for x in balls]]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[np.ndarray]:
        return [args[0][-1:]]

    def worked_parts(self, stage, row: int,
                     formulas: Sequence[sympy.Expr]) -> list[WorkedPart]:
        """The largest logit of the last position, max(l_0, l_1, ...)."""
        logits = stage.derivation[stage.inputs[0]]
        last = logits.shape[0] - 1
        symbol = logits.op.symbol
        # the index j′ of the equation's max_{j′} l_{n-1,j′}
        sub = f"{last},j'" if logits.shape[0] > 1 else "j'"
        base = f"{{{symbol.latex}}}" if "^" in symbol.latex else symbol.latex
        text_sub = sub.replace("'", "\u2032")
        notation = Notation(rf"\max\nolimits_{{j'}} {base}_{{{sub}}}",
                            f"max_j\u2032 {symbol.text}_{text_sub}", "Largest logit")
        return [WorkedPart(notation, sympy.Max(*logits.symbols.row(last)))]
