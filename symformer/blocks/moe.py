"""Mixture-of-experts routing, exactly (:mod:`symformer.ops.moe`).

:func:`moe_stages` appends to a derivation, for the rows of a stage ``x``:
``moe.router_logits`` (x W_router), ``moe.router_probabilities`` (their softmax),
``moe.margin`` (per token, the k-th score minus the (k+1)-th: the certified margin
of the decision, 0 on a tie; with top_k < E), ``moe.experts`` (the decided top-k
mask), ``moe.gates``, each expert's FFN
(``moe.expertE.ffn.hidden``, ``.activation``, ``.output``) and ``moe.output`` (the
gate-weighted sum).  Which experts a token goes to is decided exactly: certified
balls at rising precision; scores no precision separates are proved equal (their
formulas, then closed forms) and the tie reported -- at the k-th place it is broken
by the lower expert index (a stated rule: ``torch.topk`` does not document its order
among equal values) and said so in the notes.
:func:`route` does it on given rows (a lecturer's worked example);
:func:`mixture_of_experts` in a ``[[layer]]`` (``[layer.moe]``: ``layerN.moe.*``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from symformer.arbcontext import precision
from symformer.blocks.sublayers import feed_forward
from symformer.engine.argmax import TieProver
from symformer.engine.graph import Derivation
from symformer.engine.rounding import ball_bounds
from symformer.errors import InputError, UndecidedError
from symformer.example.schema import Expert, MixtureOfExperts
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops import Parameter, Projection, Softmax
from symformer.ops.moe import ExpertMask, Gates, MixtureSum, RoutingMargin

#: Doublings of the precision (from 128 bits) before a comparison is undecidable.
_MAX_DOUBLINGS = 6
#: Decimals of the margins the notes print.
_DECIMALS = 4


@dataclass
class Routing:
    """The decided experts per token and the notes in words (ties and margins named)."""

    chosen: list[tuple[int, ...]] = field(default_factory=list)
    ties: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _compare(g: Derivation, prover: TieProver, scores: str, i: int, a: int, b: int) -> int:
    """sign(s_ia - s_ib), 0 only when proved equal."""
    prec = 128
    for doubling in range(_MAX_DOUBLINGS):
        values = g.evaluate(prec)
        with precision(prec):
            low, high = ball_bounds(values[scores][i][a] - values[scores][i][b])
        if low > 0:
            return 1
        if high < 0:
            return -1
        if doubling >= 1 and prover.equal(i, a, b, closed_forms=True):
            return 0
        prec *= 2
    raise UndecidedError(f"cannot decide whether expert {a} or {b} scores higher for "
                         f"token {i}: the balls agree to {prec // 2} bits, no proof")


def _ranked(g: Derivation, prover: TieProver, logits: str, i: int, E: int
            ) -> tuple[list[int], list[int]]:
    """Token ``i``'s experts from the highest score down, equal scores (proved) by the
    lower index first (the stated rule), and how many score above each."""
    order = {(a, b): _compare(g, prover, logits, i, a, b)
             for a in range(E) for b in range(E) if a < b}
    above = [sum(1 for b in range(E) if b != e and order.get((b, e), -order.get(
        (e, b), 0)) > 0) for e in range(E)]
    return sorted(range(E), key=lambda e: (above[e], e)), above


def moe_stages(g: Derivation, x: str, W_router: Any, experts: list[Expert], top_k: int,
               renormalize: bool = True, prefix: str = "moe", number: int | None = None
               ) -> Routing:
    """Append the routing's stages for the rows of ``x`` (see the module's docstring),
    named ``PREFIX.*`` (in a ``[[layer]]``: ``layerN.moe.*``, ``number`` = N)."""
    E = len(experts)
    if not 1 <= top_k <= E:
        raise InputError(f"moe: top_k must be from 1 to {E} (the experts), found {top_k}")
    where = {} if number is None else {"layer": number}
    rows, names = g[x].rows, tuple(f"e{e + 1}" for e in range(E))
    logits = g.add(f"{prefix}.router_logits", "moe", Projection(
        W_router, None, Notation(r"\rho", "ρ", "Router scores"), "W_router", "b_router"),
        (x,), rows, names, **where)
    probs = g.add(f"{prefix}.router_probabilities", "moe",
                  Softmax(Notation(r"\pi", "π", "Router probabilities"), "E"), (logits,),
                  rows, names, **where)
    prover, routing, pairs, tied = TieProver(g, logits), Routing(), [], set()
    for i, token in enumerate(rows):
        ranked, above = _ranked(g, prover, logits, i, E)
        kept = tuple(sorted(ranked[:top_k]))
        routing.chosen.append(kept)
        line = (f"token {i} ({token}): experts "
                + ", ".join(f"e{e + 1}" for e in kept) + " (the top " + str(top_k) + ")")
        if top_k < E:
            last, first_out = ranked[top_k - 1], ranked[top_k]
            pairs.append((last, first_out))
            if above[last] == above[first_out]:
                tied.add(i)
                routing.ties.append(f"token {i}: e{last + 1} and e{first_out + 1}")
                line += (f"; tie at the k-th place: e{last + 1} and e{first_out + 1} have "
                         f"proved equal scores, broken by the lower expert index "
                         f"(the stated rule): e{last + 1} kept")
        routing.notes.append(line)
    if pairs:  # the certified margin of each token's decision
        margin = g.add(f"{prefix}.margin", "moe", RoutingMargin(tuple(pairs), top_k),
                       (logits,), rows, ("margin",), **where)
        shown = g[margin].values(decimals=_DECIMALS)
        for i, (last, first_out) in enumerate(pairs):
            if i not in tied:
                routing.notes[i] += (f"; margin ρ_e{last + 1} - ρ_e{first_out + 1} ≈ "
                                     f"{shown[i][0]} > 0 (certified): e{last + 1} stays "
                                     f"chosen unless its score falls that much against "
                                     f"e{first_out + 1}'s")
    mask = g.add(f"{prefix}.experts", "moe", ExpertMask(tuple(
        tuple(int(e in kept) for e in range(E)) for kept in routing.chosen),
        notes=tuple(routing.notes), ties=tuple(routing.ties)), (probs,), rows, names,
        **where)
    gate = g.add(f"{prefix}.gates", "moe", Gates(renormalize), (probs, mask), rows, names,
                 **where)
    outputs = []
    for e, expert in enumerate(experts, start=1):
        W_1, W_2 = (w if hasattr(w, "cols") else sympy.Matrix(w)  # an example's: exact
                    for w in (expert.W_1, expert.W_2))
        block = SimpleNamespace(W_1=W_1, b_1=expert.b_1, W_2=W_2, b_2=expert.b_2,
                                W_gate=None, b_gate=None, activation=expert.activation,
                                d_ff=W_1.cols)
        outputs.append(feed_forward(g, f"{prefix}.expert{e}", x, block, number or 1, e))
    g.add(f"{prefix}.output", "moe_output", MixtureSum(experts=E), (gate, *outputs), rows,
          g[x].cols, **where)
    return routing


def mixture_of_experts(g: Derivation, p: str, x: str, moe: MixtureOfExperts,
                       number: int) -> str:
    """A ``[[layer]]``'s mixture of experts on ``x``: the stages ``P.moe.*``; returns
    ``P.moe.output``."""
    moe_stages(g, x, moe.router, list(moe.experts), moe.top_k, moe.renormalize,
               prefix=f"{p}.moe", number=number)
    return f"{p}.moe.output"


def route(inputs: Any, W_router: Any, experts: list[Expert], top_k: int,
          renormalize: bool = True, tokens: tuple[str, ...] | None = None
          ) -> tuple[Derivation, Routing]:
    """Route given rows (numbers, SymPy expressions) through the experts: a derivation
    whose stage ``input`` is the rows, with the routing's stages appended."""
    x = sympy.Matrix([[sympy.S(v) for v in row] for row in inputs])
    tokens = tokens or tuple(f"t{i}" for i in range(x.rows))
    g = Derivation(None, False)
    g.add("input", "input", Parameter(x, Notation("x", "x", "Input rows"),
                                      remark="the rows as given", source=("x", "x")),
          (), tokens, tuple(f"d{j}" for j in range(x.cols)))
    return g, moe_stages(g, "input", sympy.Matrix(W_router), experts, top_k, renormalize)
