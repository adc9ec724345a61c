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
from symformer.equations.ir import IndexEquation
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


def routing_margin(r, k):
    """Per row: the k-th largest router score minus the (k+1)-th (sorted afresh)."""
    s = -np.sort(-r, axis=1)
    return s[:, [k - 1]] - s[:, [k]]


def mixture_sum(g, *outputs):
    """sum_e g[:, e] * outputs[e]."""
    return sum(g[:, [e]] * out for e, out in enumerate(outputs))


@dataclass(frozen=True, eq=False)
class ExpertMask(Operation):
    """The decided n x E mask: 1 for the experts a token is routed to, else 0."""

    kept: tuple[tuple[int, ...], ...]
    notation: Notation | None = None
    #: The decision in words, a line per token (ties and margins named): the notes'.
    notes: tuple[str, ...] = ()

    name = "expert_mask"
    rational = True
    heat = True
    reference_function = expert_mask
    default_notation = Notation(r"\chi", "χ", "Experts chosen (1) and not (0)")

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        """The decision as a given 0/1 table (made by exact comparisons)."""
        return IndexEquation(("m[i, j] = K[i, j]",), {"m": "out", "K": "const:decided"},
                             symbols={"K": ("K", "K")},
                             remark="K: 1 for the top-k router scores of the token, decided "
                                    "exactly (a tie at the k-th place: the lower expert "
                                    "index)")

    def decided(self) -> sympy.Matrix:
        """The decided 0/1 table."""
        return sympy.Matrix([[int(v) for v in row] for row in self.kept])

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return self.decided()

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return [[arb(int(v)) for v in row] for row in self.kept]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return (args[0].astype(dtype), np.array(self.kept, dtype=dtype))


@dataclass(frozen=True, eq=False)
class RoutingMargin(Operation):
    """Reads the router scores: per token, the last kept expert's score minus the first
    left out's (``pairs``: the two experts, decided exactly), >= 0; 0 is a tie at the
    k-th place.  The routing stands while the gap stays above 0."""

    pairs: tuple[tuple[int, int], ...]
    top_k: int
    notation: Notation | None = None

    name = "routing_margin"
    per_row = True
    reference_function = routing_margin
    default_notation = Notation(r"\delta", "δ", "Routing margin (k-th minus (k+1)-th score)")

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        """The last kept expert's score minus the first left out's."""
        return IndexEquation(("delta[i] = r[i, a[i]] - r[i, b[i]]",),
                             {"delta": "out", "r": "in0", "a": "const:last_kept",
                              "b": "const:first_out"},
                             symbols={"a": ("a", "a"), "b": ("b", "b")},
                             remark="a: the token's k-th ranked expert, b: its (k+1)-th, "
                                    "decided exactly")

    @property
    def last_kept(self) -> tuple[int, ...]:
        """Each token's k-th ranked expert (0-based)."""
        return tuple(a for a, _ in self.pairs)

    @property
    def first_out(self) -> tuple[int, ...]:
        """Each token's (k+1)-th ranked expert (0-based)."""
        return tuple(b for _, b in self.pairs)

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        r = args[0]
        return sympy.Matrix([[r[i, a] - r[i, b]] for i, (a, b) in enumerate(self.pairs)])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return [[args[0][i][a] - args[0][i][b]] for i, (a, b) in enumerate(self.pairs)]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return (args[0].astype(dtype), self.top_k)


@dataclass(frozen=True, eq=False)
class Gates(Operation):
    """Reads (router probabilities, mask): the chosen experts' weights per token."""

    renormalize: bool = True
    notation: Notation | None = None

    name = "gates"
    heat = True
    reference_function = gates
    default_notation = Notation("G", "G", "Gates of the chosen experts")

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        """The kept experts' probabilities (over their sum when renormalised)."""
        if not self.renormalize:
            return IndexEquation(("g[i, j] = m[i, j] * p[i, j]",),
                                 {"g": "out", "p": "in0", "m": "in1"})
        return IndexEquation(
            ("g[i, j] = m[i, j] * p[i, j] / sum(m[i, jp] * p[i, jp] for jp in range(E))",),
            {"g": "out", "p": "in0", "m": "in1"}, sizes={"E": ("p", 1)})

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
    #: The number of experts (the equation's terms when no shapes are given).
    experts: int = 1

    name = "mixture_sum"
    reference_function = mixture_sum
    default_notation = Notation(r"\tilde{f}", "f̃", "Mixture of the experts' outputs")

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        """One term per expert: its gate times its output."""
        count = len(shapes) - 1 if shapes else self.experts
        terms = " + ".join(f"g[i, {e}] * f{e + 1}[i, j]" for e in range(count))
        return IndexEquation((f"y[i, j] = {terms}",), {
            "y": "out", "g": "in0", **{f"f{e + 1}": f"in{e + 1}" for e in range(count)}})

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
