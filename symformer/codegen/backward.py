"""The general equation of any stage, and the consumers' rules behind a gradient stage.

A gradient stage dL/dS sums one vector-Jacobian product per consumer C of S
(:class:`~symformer.ops.gradient.Gradient`); :func:`rules` lists them with the stages
they read, and :func:`equation_lines` gives any stage's printed lines from the index
equations the operations declare (:mod:`symformer.equations`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from symformer.ops.gradient import Term

if TYPE_CHECKING:
    from symformer.equations.stage import Line


@dataclass(frozen=True)
class Rule:
    """One term of a gradient stage: the consumer stage, its gradient stage, the term."""

    consumer: Any
    grad: Any
    term: Term


def rules(stage: Any) -> list[Rule]:
    """The terms of a gradient stage with the stages they read, in order."""
    g, k, out = stage.derivation, 0, []
    for term in stage.op.terms:
        consumer = g[stage.inputs[k + term.arity]]
        grad = g[stage.inputs[k + term.arity + 1]]
        out.append(Rule(consumer, grad, term))
        k += term.arity + 2
    return out


def equation_lines(stage: Any) -> tuple[Line, ...]:
    """The general equation of any stage as printed everywhere (the export, the trace,
    slides, exercise sheets): its operation's index equation, declared once and proved
    (:mod:`symformer.equations`); a gradient's lines are its consumers' backward rules,
    each path's contribution named, and their sum."""
    from symformer.equations.stage import stage_equation
    found = stage_equation(stage)
    if found is None:
        raise NotImplementedError(f"{stage.name}: the operation {stage.op.name!r} declares "
                                  f"no equation (Operation.equation/backward_equation)")
    return tuple(found.lines())
