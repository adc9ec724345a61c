"""A gated activation: act(gate) ⊙ hidden, element-wise (SwiGLU with SiLU, GEGLU with GELU)."""

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


def gated(act_g, h):
    """act(g) ⊙ h: the activated gate times the hidden layer, element-wise."""
    return act_g * h


def gated_backward_gate(g, h, dact):
    """dL/dgate = dL/da ⊙ h ⊙ act'(gate) (dact: the activation's derivative)."""
    return g * h * dact


def gated_backward_hidden(g, act_g):
    """dL/dh = dL/da ⊙ act(gate)."""
    return g * act_g


@dataclass(frozen=True)
class GatedProduct(Operation):
    """``activation(gate) * hidden`` element-wise; inputs (gate, hidden)."""

    activation: Operation
    notation: Notation | None = None

    name = "gated_product"
    matrix_form = "hadamard"
    gates = True
    reference_function = gated
    default_notation = Notation("a", "a", "Gated activation")
    trace_step = "activation"

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        """act(g) written out: the activation's own equation with the gate g for its input."""
        act = self.activation.equation()
        (line,) = act.lines
        rhs = line.split(" = ", 1)[1].replace("h[", "g[")
        return IndexEquation((f"a[i, j] = ({rhs}) * h[i, j]",),
                             {"a": "out", "g": "in0", "h": "in1"})

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        act = self.activation
        if wrt == 1:
            (line,) = act.equation().lines
            rhs = line.split(" = ", 1)[1].replace("h[", "g[")
            return IndexEquation((f"dh[i, j] = da[i, j] * ({rhs})",),
                                 {"dh": "result", "da": "grad", "g": "in0"})
        rule = act.backward_equation(0)
        if rule is None:
            return None
        (line,) = rule.lines
        rhs = line.split(" = ", 1)[1].replace("h[", "g[").replace("da[", "DA[")
        rhs = rhs.replace("DA[i, j]", "(da[i, j] * h[i, j])")
        return IndexEquation((f"dg[i, j] = {rhs}",),
                             {"dg": "result", "da": "grad", "g": "in0", "h": "in1"})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        gate, hidden = args
        return self.activation.sympy([gate]).multiply_elementwise(hidden)

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        gate, hidden = args
        act = self.activation.arb([gate])
        return [[a * h for a, h in zip(ra, rh)] for ra, rh in zip(act, hidden)]

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix | None:
        (gate, hidden), (dgate, dhidden) = x0, dx
        dact = self.activation.difference([gate], [dgate])
        if dact is None:
            return None
        act = self.activation.arb([gate])
        # (a + da)(h + dh) - a h = da (h + dh) + a dh
        return [[da * (h + dh) + a * dh for a, da, h, dh in zip(ra, rda, rh, rdh)]
                for ra, rda, rh, rdh in zip(act, dact, hidden, dhidden)]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[np.ndarray]:
        gate, hidden = args
        return self.activation.reference([gate], dtype), hidden

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """a = act(gate) h: dL/dgate = act'(gate) (dL/da h) (the activation's own rule),
        dL/dh = dL/da act(gate)."""
        gate, hidden = args
        if wrt == 0:
            upstream = [[d * h for d, h in zip(ds, hs)] for ds, hs in zip(grad, hidden)]
            return self.activation.backward([gate], None, upstream, 0, num)
        act = num.apply(self.activation, [gate])
        return [[d * a for d, a in zip(ds, acts)] for ds, acts in zip(grad, act)]

    def backward_function(self, wrt: int | str):
        return gated_backward_gate if wrt == 0 else gated_backward_hidden

    def backward_arguments(self, wrt, args, out, grad, dtype):
        gate, hidden = (a.astype(dtype) for a in args)
        if wrt == 0:
            ones = np.ones_like(gate)
            dact = self.activation.backward_reference(0, [gate], None, ones, dtype)
            return grad.astype(dtype), hidden, dact
        return grad.astype(dtype), self.activation.reference([gate], dtype)
