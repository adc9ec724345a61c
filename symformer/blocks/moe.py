"""Mixture-of-experts routing, exactly (:mod:`symformer.ops.moe`).

:func:`moe_stages` appends to a derivation, for the rows of a stage ``x``:
``moe.router_logits`` (x W_router), ``moe.router_probabilities`` (their softmax),
``moe.experts`` (the decided top-k mask), ``moe.gates``, each expert's FFN
(``moe.expertE.ffn.hidden``, ``.activation``, ``.output``) and ``moe.output`` (the
gate-weighted sum).  Which experts a token goes to is decided exactly: certified
balls at rising precision; scores no precision separates are proved equal (their
formulas, then closed forms) and the tie reported -- at the k-th place it is broken
by the lower expert index (``torch.topk`` on CPU) and said so in the notes.
:func:`route` does it on given rows (a lecturer's worked example).
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
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops import Parameter, Projection, Softmax
from symformer.ops.moe import ExpertMask, Gates, MixtureSum

#: Doublings of the precision (from 128 bits) before a comparison is undecidable.
_MAX_DOUBLINGS = 6


@dataclass(frozen=True)
class Expert:
    """One expert: an FFN ``act(x W_1 + b_1) W_2 + b_2``."""

    W_1: Any
    W_2: Any
    b_1: Any = None
    b_2: Any = None
    activation: str = "relu"


@dataclass
class Routing:
    """The decided experts per token and the notes in words (ties named)."""

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


def moe_stages(g: Derivation, x: str, W_router: Any, experts: list[Expert], top_k: int,
               renormalize: bool = True) -> Routing:
    """Append the routing's stages for the rows of ``x`` (see the module's docstring)."""
    E = len(experts)
    if not 1 <= top_k <= E:
        raise InputError(f"moe: top_k must be from 1 to {E} (the experts), found {top_k}")
    rows, names = g[x].rows, tuple(f"e{e + 1}" for e in range(E))
    logits = g.add("moe.router_logits", "moe", Projection(
        W_router, None, Notation("r", "r", "Router scores"), "W_router", "b_router"),
        (x,), rows, names)
    probs = g.add("moe.router_probabilities", "moe",
                  Softmax(Notation(r"\pi", "π", "Router probabilities"), "E"), (logits,),
                  rows, names)
    prover, routing = TieProver(g, logits), Routing()
    for i, token in enumerate(rows):
        order = {(a, b): _compare(g, prover, logits, i, a, b)
                 for a in range(E) for b in range(E) if a < b}
        above = [sum(1 for b in range(E) if b != e and order.get((b, e), -order.get(
            (e, b), 0)) > 0) for e in range(E)]
        ranked = sorted(range(E), key=lambda e: (above[e], e))
        kept = tuple(sorted(ranked[:top_k]))
        routing.chosen.append(kept)
        line = (f"token {i} ({token}): experts "
                + ", ".join(f"e{e + 1}" for e in kept) + " (the top " + str(top_k) + ")")
        if top_k < E:
            last, first_out = ranked[top_k - 1], ranked[top_k]
            tied = above[last] == above[first_out]
            if tied:
                routing.ties.append(f"token {i}: e{last + 1} and e{first_out + 1}")
                line += (f"; tie at the k-th place: e{last + 1} and e{first_out + 1} have "
                         f"proved equal scores, broken by the lower expert index "
                         f"(torch.topk on CPU): e{last + 1} kept")
        routing.notes.append(line)
    mask = g.add("moe.experts", "moe", ExpertMask(tuple(
        tuple(int(e in kept) for e in range(E)) for kept in routing.chosen)), (probs,),
        rows, names)
    gate = g.add("moe.gates", "moe", Gates(renormalize), (probs, mask), rows, names)
    outputs = []
    for e, expert in enumerate(experts, start=1):
        W_1 = sympy.Matrix(expert.W_1)
        block = SimpleNamespace(W_1=W_1, b_1=expert.b_1, W_2=sympy.Matrix(expert.W_2),
                                b_2=expert.b_2, W_gate=None, b_gate=None,
                                activation=expert.activation, d_ff=W_1.cols)
        outputs.append(feed_forward(g, f"moe.expert{e}", x, block, 1))
    g.add("moe.output", "moe", MixtureSum(), (gate, *outputs), rows, g[x].cols)
    return routing


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
