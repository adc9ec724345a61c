"""ReLU, max(0, h): its branch is decided by the certified sign of h, never by a float."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from flint import arb

from symformer.engine.arbmath import ArbMatrix, relu_ball
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.calculus import Arithmetic, Rows
from symformer.ops.elementwise import Elementwise
from symformer.ops.facts import FALSE, PROVED, VACUOUS, Fact, label

if TYPE_CHECKING:
    from symformer.engine.graph import Stage
    from symformer.ops.gradient import Part


def relu(h):
    """max(0, h), element-wise."""
    return np.maximum(0, h)


def relu_backward(h, g):
    """dL/dh = dL/da where h > 0, else 0 (the subgradient 0 at exactly h = 0)."""
    return g * (h > 0)


@dataclass(frozen=True)
class ReLU(Elementwise):
    """``max(0, h)`` element-wise; at exactly 0 both branches agree (the value is 0)."""

    notation: Notation | None = None
    #: Entries (row, column) whose input h is proved exactly 0: their gradient is the
    #: subgradient 0 without a sign to decide (``train`` sets them; a ball cannot).
    zeros: frozenset[tuple[int, int]] = frozenset()

    name = "relu"
    reference_function = relu
    default_notation = Notation("a", "a", "FFN activation (ReLU)")
    clips = True
    kinked = True
    activation_key, activation_rank = "relu", 0
    function_name, gated_name = "ReLU", "ReGLU"
    function_aliases = ("relu",)
    definition = ("ReLU keeps positive numbers and replaces negative ones by 0: ",
                  r"\operatorname{ReLU}(x) = \max(0, x)", ".")
    torch_function = "torch.relu(x)"
    hf_names = ("relu",)
    torch_names = ("ReLU", "relu")

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(("a[i, j] = max(0, h[i, j])",), {"a": "out", "h": "in0"})

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        return IndexEquation(("dh[i, j] = da[i, j] * (1 if h[i, j] > 0 else 0)",),
                             {"dh": "result", "da": "grad", "h": "in0"})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return args[0].applyfunc(lambda h: sympy.Max(0, h))

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return [[relu_ball(h) for h in row] for row in args[0]]

    def resolve(self, entry: sympy.Expr, sign: Callable[[], int]) -> sympy.Expr:
        if not isinstance(entry, sympy.Max):
            return entry  # a number: nothing to decide
        (h,) = entry.args[1:] if entry.args[0] == 0 else entry.args[:1]
        return h if sign() > 0 else sympy.S.Zero

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        def one(h: arb, d: arb) -> arb:
            if h > 0 and h + d > 0:
                return d
            if h < 0 and h + d < 0:
                return arb(0)
            return relu_ball(h + d) - relu_ball(h)

        return [[one(h, d) for h, d in zip(r0, dr)] for r0, dr in zip(x0[0], dx[0])]

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """dL/dh = dL/da for h > 0, and 0 for h <= 0: the subgradient 0 at exactly h = 0.

        The step is decided exactly (the certified sign of h, or a proof that h = 0).
        """
        return [[num.zero() if (i, j) in self.zeros else d * num.step(h)
                 for j, (h, d) in enumerate(zip(hs, ds))]
                for i, (hs, ds) in enumerate(zip(args[0], grad))]

    def backward_facts(self, gradient: Stage, part: Part) -> list[Fact]:
        """Every clipped unit (h <= 0, by its certified sign or a proof that h = 0) gets
        the gradient exactly 0: the rule's step, decided by that sign, is 0."""
        g, hidden = gradient.derivation, part.consumer.inputs[0]
        name = f"{gradient.name}.clipped_zero{label(gradient)}"
        statement = (f"the clipped ReLU units (h <= 0) get the gradient exactly 0 in "
                     f"{gradient.name}{label(gradient)}")
        clipped = 0
        for i in range(part.formula.rows):
            for j in range(part.formula.cols):
                if g.sign(hidden, i, j) > 0:
                    continue
                clipped += 1
                steps = {}
                for step in part.formula[i, j].atoms(sympy.Heaviside):
                    sign = g.sign(*g.owner(step.args[0]))
                    steps[step] = (sympy.S.One if sign > 0 else sympy.S.Zero if sign < 0
                                   else step.args[1] if len(step.args) > 1 else sympy.S.Half)
                value = part.formula[i, j].xreplace(steps)
                if value != 0:
                    return [Fact(name, statement, FALSE,
                                 f"{gradient.name}[{i},{j}] = {value} where {hidden}[{i},{j}] "
                                 f"{'= 0' if g.sign(hidden, i, j) == 0 else '< 0'}")]
        if not clipped:
            return [Fact(name, statement, VACUOUS, "no unit is clipped")]
        return [Fact(name, statement, PROVED, f"{clipped} clipped units: the step "
                     f"Heaviside(h, 0) is 0 for h < 0 and, the subgradient, at h = 0")]

    def backward_function(self, wrt: int | str):
        return relu_backward
