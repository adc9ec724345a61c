"""Mixture-of-experts routing: which experts each token goes to, their gates, and the
gate-weighted sum of the experts' outputs.

A router scores every expert per token (``x W_router``, then a softmax: a projection
and a softmax, the existing operations); :func:`symformer.blocks.moe.moe_stages`
decides, exactly, the ``top_k`` experts of each token (certified balls; equal scores
proved equal, a tie at the k-th place reported and broken by the lower expert index --
a stated rule: ``torch.topk`` does not document its order among equal values) and
holds the decision in :class:`ExpertMask`;
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
from symformer.ops.calculus import Arithmetic, Rows


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


# -- the NumPy vector-Jacobian products (crosscheck's float64 backward) ---------------

def expert_mask_backward(p):
    """The choice is piecewise constant: no gradient passes (as through topk's indices)."""
    return np.zeros_like(p)


def gates_backward(dG, G, through, renormalize, total):
    """dL/dp (``through`` = m) or dL/dm (``through`` = p): through * dG without
    renormalising; else through * (dG - rowsum(dG * G)) / rowsum(m * p)."""
    if not renormalize:
        return through * dG
    return through * (dG - np.sum(dG * G, axis=-1, keepdims=True)) / total


def routing_margin_backward(dd, r, k):
    """+dd at each row's k-th ranked score, -dd at its (k+1)-th (a stable sort)."""
    order = np.argsort(-r, axis=1, kind="stable")
    out = np.zeros_like(r)
    rows = np.arange(r.shape[0])
    out[rows, order[:, k - 1]] += dd[:, 0]
    out[rows, order[:, k]] -= dd[:, 0]
    return out


def mixture_backward_gates(dy, *outputs):
    """dL/dG[:, e] = rowsum(dy * outputs[e])."""
    return np.stack([np.sum(dy * out, axis=1) for out in outputs], axis=1)


def mixture_backward_output(dy, g, e):
    """dL/d(output e) = G[:, e] * dy."""
    return g[:, [e]] * dy


@dataclass(frozen=True, eq=False)
class ExpertMask(Operation):
    """The decided n x E mask: 1 for the experts a token is routed to, else 0."""

    kept: tuple[tuple[int, ...], ...]
    notation: Notation | None = None
    #: The decision in words, a line per token (ties and margins named).
    notes: tuple[str, ...] = ()
    #: The proved ties at the k-th place (``token 2: e2 and e3``): this example's, named
    #: in its table's note (:attr:`table_legend`), never in the equation (the rule).
    ties: tuple[str, ...] = ()

    name = "expert_mask"
    rational = True
    heat = False  # a 0/1 decision: no shading by size
    reference_function = expert_mask
    default_notation = Notation(r"\chi", "χ", "Experts chosen (1) and not (0)")

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        """The decision as a given 0/1 table (made by exact comparisons): the rule only,
        the same wherever the equation is printed (this example's ties are in
        :attr:`table_legend`)."""
        return IndexEquation(("m[i, j] = K[i, j]",), {"m": "out", "K": "const:decided"},
                             symbols={"K": ("K", "K")},
                             remark=f"K: 1 for the token's top {self.top_k} router "
                                    "scores, else 0; a tie: the lower expert index")

    @property
    def top_k(self) -> int:
        """How many experts each token goes to (the decided rows' 1s)."""
        return sum(self.kept[0]) if self.kept else 0

    @property
    def table_legend(self) -> tuple[str, ...]:
        """This example's decision, said under its table: the proved ties at the k-th
        place and the rule that broke them (none: nothing to say)."""
        if not self.ties:
            return ()
        return (f"Proved ties at the k-th place: {'; '.join(self.ties)}, broken by the "
                "lower expert index.",)

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """The choice is piecewise constant in the probabilities: 0 (no gradient passes
        through the choice, as none passes through ``torch.topk``'s indices)."""
        return [[num.zero() for _ in row] for row in args[0]]

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        return IndexEquation(("dp[i, j] = 0",), {"dp": "result"},
                             remark="the choice does not change under a small change of "
                                    "the scores")

    def backward_function(self, wrt: int | str):
        return expert_mask_backward

    def backward_arguments(self, wrt, args, out, grad, dtype):
        return (args[0].astype(dtype),)

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

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """d(r_a - r_b)/dr: +1 at the k-th ranked expert a, -1 at the (k+1)-th b."""
        return [[grad[i][0] if j == a else -grad[i][0] if j == b else num.zero()
                 for j in range(len(row))] for i, (row, (a, b)) in
                enumerate(zip(args[0], self.pairs))]

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        return IndexEquation(
            ("dr[i, j] = ddelta[i] * ((1 if j == a[i] else 0) - (1 if j == b[i] else 0))",),
            {"dr": "result", "ddelta": "grad", "a": "const:last_kept", "b": "const:first_out"},
            symbols={"a": ("a", "a"), "b": ("b", "b")})

    def backward_function(self, wrt: int | str):
        return routing_margin_backward

    def backward_arguments(self, wrt, args, out, grad, dtype):
        return grad.astype(dtype), args[0].astype(dtype), self.top_k


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

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """G = m p / S (S = sum m p): dL/dp_j = m_j (dG_j - sum_e dG_e G_e) / S and
        dL/dm_j = p_j (dG_j - sum_e dG_e G_e) / S; without renormalising m dG, p dG."""
        p, m = args
        through = m if wrt == 0 else p
        if not self.renormalize:
            return [[d * t for d, t in zip(ds, ts)] for ds, ts in zip(grad, through)]
        rows = []
        for ds, gs, ps, ms, ts in zip(grad, out, p, m, through):
            total = num.total(x * y for x, y in zip(ms, ps))
            dot = num.total(d * g for d, g in zip(ds, gs))
            rows.append([t * (d - dot) / total for t, d in zip(ts, ds)])
        return rows

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        through = "m" if wrt == 0 else "p"
        arrays = {"dx": "result", "dg": "grad", "p": "in0", "m": "in1"}
        if not self.renormalize:
            return IndexEquation((f"dx[i, j] = {through}[i, j] * dg[i, j]",), arrays)
        return IndexEquation(
            (f"dx[i, j] = {through}[i, j] * (dg[i, j] - sum(dg[i, jp] * g[i, jp] for jp in "
             f"range(E))) / sum(m[i, jp] * p[i, jp] for jp in range(E))",),
            {**arrays, "g": "out"}, sizes={"E": ("p", 1)})

    def backward_function(self, wrt: int | str):
        return gates_backward

    def backward_arguments(self, wrt, args, out, grad, dtype):
        p, m = (a.astype(dtype) for a in args)
        return (grad.astype(dtype), out.astype(dtype), m if wrt == 0 else p,
                self.renormalize, np.sum(m * p, axis=-1, keepdims=True))


@dataclass(frozen=True, eq=False)
class MixtureSum(Operation):
    """Reads (gates, output of expert 1, ..., of expert E): y_i = sum_e g_ie out_e,i."""

    notation: Notation | None = None
    #: The number of experts (the equation's terms when no shapes are given).
    experts: int = 1

    name = "mixture_sum"
    sublayer_of = "feed-forward"  # the mixture is the block's feed-forward sub-layer
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

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """dL/dG_ie = sum_j dy_ij f^(e)_ij; dL/df^(e)_ij = G_ie dy_ij."""
        g, outs = args[0], args[1:]
        if wrt == 0:
            return [[num.total(d * f for d, f in zip(ds, out_e[i])) for out_e in outs]
                    for i, ds in enumerate(grad)]
        return [[g[i][wrt - 1] * d for d in ds] for i, ds in enumerate(grad)]

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        count = len(shapes) - 1 if shapes else self.experts
        if wrt != 0:
            return IndexEquation((f"df[i, j] = g[i, {wrt - 1}] * dy[i, j]",),
                                 {"df": "result", "dy": "grad", "g": "in0"})
        lines = tuple(f"dg[i, {e}] = sum(dy[i, jp] * f{e + 1}[i, jp] for jp in range(d))"
                      for e in range(count))
        return IndexEquation(lines, {"dg": "result", "dy": "grad", **{
            f"f{e + 1}": f"in{e + 1}" for e in range(count)}}, sizes={"d": ("dy", 1)})

    def backward_function(self, wrt: int | str):
        return mixture_backward_gates if wrt == 0 else mixture_backward_output

    def backward_arguments(self, wrt, args, out, grad, dtype):
        if wrt == 0:
            return (grad.astype(dtype), *(a.astype(dtype) for a in args[1:]))
        return grad.astype(dtype), args[0].astype(dtype), wrt - 1
