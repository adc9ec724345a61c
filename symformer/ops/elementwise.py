"""What element-wise activations (a = f(h), entry by entry) share.

:class:`Elementwise` gives the NumPy arguments and the backward reference's arguments
(h, dL/da).  :class:`Smooth` adds, from one derivative
written once (:meth:`Smooth.slope`, in any arithmetic of :mod:`symformer.ops.calculus`),
the backward rule dL/dh = dL/da f'(h) and the mean-value enclosure of f(h + d) - f(h)
for finite masks: f'(xi) d with xi the ball joining h and h + d.
"""

from __future__ import annotations

import re
from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np

from symformer.engine.arbmath import ArbMatrix
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.ops.base import Operation
from symformer.ops.calculus import BALLS, EXACT, Arithmetic, Rows


class Elementwise(Operation):
    """An activation applied entry by entry to its one input h."""

    trace_step = "activation"

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[np.ndarray]:
        return args

    def backward_arguments(self, wrt, args, out, grad, dtype):
        return args[0].astype(dtype), grad.astype(dtype)


class Smooth(Elementwise):
    """A differentiable element-wise activation: its derivative gives the rest."""

    @abstractmethod
    def slope(self, h: Any, num: Arithmetic) -> Any:
        """f'(h), in the arithmetic ``num`` (exact, balls or floats)."""

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        # mean value theorem: f(h + d) - f(h) = f'(xi) d for some xi between them
        return [[self.slope(h.union(h + d), BALLS) * d for h, d in zip(r0, dr)]
                for r0, dr in zip(x0[0], dx[0])]

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        """dL/dh = dL/da f'(h) with f' the exact :meth:`slope` (printed by SymPy)."""
        h = sympy.Symbol("h")
        slope = re.sub(r"\bh\b", "h[i, j]", str(self.slope(h, EXACT)))
        return IndexEquation((f"dh[i, j] = da[i, j] * ({slope})",),
                             {"dh": "result", "da": "grad", "h": "in0"})

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """dL/dh = dL/da f'(h), entry by entry."""
        return [[d * self.slope(h, num) for h, d in zip(hs, ds)]
                for hs, ds in zip(args[0], grad)]
