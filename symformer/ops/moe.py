"""Mixture-of-experts routing: which experts each token goes to, their gates, and the
gate-weighted sum of the experts' outputs.

A router scores every expert per token (``x W_router``, then a softmax: a projection
and a softmax, the existing operations); :func:`symformer.blocks.moe.moe_stages`
decides, exactly, the ``top_k`` experts of each token (certified balls; equal scores
proved equal, a tie at the k-th place reported and broken by the lower expert index,
as ``torch.topk`` on CPU does) and holds the decision in :class:`ExpertMask`;
:class:`Gates` gives the kept experts' probabilities (renormalised over them:
Mixtral's ``softmax(top-k logits)``; or as they are: the Switch Transformer's); each
expert is a feed-forward network (its stages ``moe.expertE.ffn.*``) and
:class:`MixtureSum` adds their outputs weighted by the gates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from flint import arb

from symformer.engine.arbmath import ArbMatrix
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation


def expert_mask(p, m):
    """The decided mask itself (the float reference recomputes nothing: a decision)."""
    return m


def gates(p, m, renormalize):
    """m p, over its row sum when ``renormalize``."""
    kept = p * m
    return kept / np.sum(kept, axis=-1, keepdims=True) if renormalize else kept


def mixture_sum(g, *outputs):
    """sum_e g[:, e] * outputs[e]."""
    return sum(g[:, [e]] * out for e, out in enumerate(outputs))


@dataclass(frozen=True, eq=False)
class ExpertMask(Operation):
    """The decided n x E mask: 1 for the experts a token is routed to, else 0."""

    kept: tuple[tuple[int, ...], ...]
    notation: Notation | None = None

    name = "expert_mask"
    rational = True
    heat = True
    reference_function = expert_mask
    default_notation = Notation(r"m", "m", "Experts chosen (1) and not (0)")

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> None:
        """None: exact comparisons, decided; shown as its table."""
        return None

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return sympy.Matrix([[int(v) for v in row] for row in self.kept])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return [[arb(int(v)) for v in row] for row in self.kept]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return (args[0].astype(dtype), np.array(self.kept, dtype=dtype))


@dataclass(frozen=True, eq=False)
class Gates(Operation):
    """Reads (router probabilities, mask): the chosen experts' weights per token."""

    renormalize: bool = True
    notation: Notation | None = None

    name = "gates"
    heat = True
    reference_function = gates
    default_notation = Notation(r"g", "g", "Gates of the chosen experts")

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> None:
        """None: one division per entry; shown as its table."""
        return None

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        p, m = args
        rows = []
        for i in range(p.rows):
            kept = [p[i, e] * m[i, e] for e in range(p.cols)]
            total = sympy.Add(*kept) if self.renormalize else sympy.S.One
            rows.append([x / total for x in kept])
        return sympy.Matrix(rows)

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        out = []
        for prow, mrow in zip(args[0], args[1]):
            kept = [x * y for x, y in zip(prow, mrow)]
            total = sum(kept, arb(0)) if self.renormalize else arb(1)
            out.append([x / total for x in kept])
        return out

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return (args[0].astype(dtype), args[1].astype(dtype), self.renormalize)


@dataclass(frozen=True, eq=False)
class MixtureSum(Operation):
    """Reads (gates, output of expert 1, ..., of expert E): y_i = sum_e g_ie out_e,i."""

    notation: Notation | None = None

    name = "mixture_sum"
    reference_function = mixture_sum
    default_notation = Notation(r"y", "y", "Mixture of the experts' outputs")

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> None:
        """None: a gate-weighted sum per entry; shown as its table."""
        return None

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        g, outs = args[0], args[1:]
        return sympy.Matrix([[sympy.Add(*(g[i, e] * out[i, j] for e, out in enumerate(outs)))
                              for j in range(outs[0].cols)] for i in range(g.rows)])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        g, outs = args[0], args[1:]
        return [[sum((g[i][e] * out[i][j] for e, out in enumerate(outs)), arb(0))
                 for j in range(len(outs[0][0]))] for i in range(len(g))]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return tuple(a.astype(dtype) for a in args)
