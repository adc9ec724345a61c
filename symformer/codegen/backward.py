"""The general equation of a gradient stage: its consumers' backward rules.

A gradient stage dL/dS sums one vector-Jacobian product per consumer C of S
(:class:`~symformer.ops.gradient.Gradient`).  Each rule is rendered by latexify-py,
like a forward equation, from the NumPy function the consumer's operation gives
for it (``Operation.backward_function(wrt)``, e.g. ``softmax_backward(alpha, g)
= alpha * (g - np.sum(alpha * g, axis=-1, keepdims=True))``), so the equation is the
code ``crosscheck`` runs as the float64 backward reference.  An operation without a
``backward_function`` (yet) contributes no line; its rule still shows in the
worked lines, which are built from the exact local formula.

Which parameter is which symbol is found without asking the operation to spell it
twice: ``backward_arguments`` is called on marker arrays (each input stage, the
consumer's output and its gradient filled with a value of its own), and every
parameter receiving a marker is written with that stage's symbol -- ``alpha`` with
``α``, ``g`` with ``∂L/∂α``.  The other parameters (weights, ``d_k``, ``ε``) and the
entry index are spelled as the consumer's forward equation spells them
(``Operation.spelling``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from symformer.codegen import (
    Line,
    entry_lhs,
    expression_tree,
    function_body,
    input_notations,
    render,
)
from symformer.notation import per_row
from symformer.ops.base import Notation, Spelling
from symformer.ops.gradient import Term

#: The value the marker arrays are filled with, plus the argument's number.
_MARKER = 7919.0


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


def _marked(rule: Rule, function: Callable[..., Any]) -> dict[str, tuple[Notation, bool]]:
    """Parameter name -> the notation of the stage it receives (found by markers), and
    whether that stage has one entry per row (a mean, a variance: no entry index)."""
    g, consumer = rule.consumer.derivation, rule.consumer
    shapes = [g[name].shape for name in consumer.inputs]
    args = [np.full(shape, _MARKER + i) for i, shape in enumerate(shapes)]
    out = np.full(consumer.shape, _MARKER + 100)
    grad = np.full(consumer.shape, _MARKER + 200)
    notations = {_MARKER + i: n for i, n in enumerate(input_notations(consumer))}
    notations[_MARKER + 100] = consumer.op.symbol
    notations[_MARKER + 200] = rule.grad.op.symbol
    values = rule.term.op.backward_arguments(rule.term.wrt, args, out, grad, np.float64)
    params, _ = function_body(function)
    found = {}
    for param, value in zip(params, values):
        if isinstance(value, np.ndarray) and value.size:
            first = float(value.flat[0])
            if first in notations and np.all(value == first):
                one_column = value.ndim == 2 and value.shape[1] == 1 < consumer.shape[1]
                found[param] = (notations[first], one_column)
    return found


def _forward(consumer: Any) -> Spelling:
    """The consumer's forward spelling (several lines: their names and symbols merged)."""
    spelling = consumer.op.spelling()
    if not isinstance(spelling, tuple):
        return spelling
    names, symbols = {}, {}
    for s in spelling:
        names.update(s.names)
        symbols.update(s.symbols)
    first = next((s for s in spelling if s.index), spelling[0])
    return Spelling(names, symbols, first.index, first.indexed, first.axis)


def rule_line(stage: Any, rule: Rule, remark: str = "") -> Line | None:
    """The rule's general equation, or None when its operation has no NumPy VJP."""
    function = rule.term.op.backward_function(rule.term.wrt)
    if function is None:
        return None
    forward = _forward(rule.consumer)
    marked = _marked(rule, function)
    names = {p: n for p, n in forward.names.items() if p not in marked}
    symbols = dict(forward.symbols)
    for i, (param, (notation, _)) in enumerate(marked.items()):
        names[param] = f"bw{i}"
        symbols[f"bw{i}"] = notation
        if rule.grad.op.constant is not None and notation == rule.grad.op.symbol:
            names[param] = str(rule.grad.op.constant)  # dL/dL = 1: the loss's derivative
    index = forward.index  # entry-wise (alpha_j) as the forward, or in matrix form
    entries = frozenset(p for p, (_, one_column) in marked.items() if not one_column)
    indexed = (entries if index else frozenset()) | forward.indexed
    spelling = Spelling(names, symbols, index, indexed, forward.axis, rows=entries,
                        per_row=frozenset(marked) - entries)
    expr, symbols = expression_tree(rule.consumer, spelling, function, "", inputs=[])
    latex, text = render(expr, symbols)
    # one entry per row (a mean, a variance): no index, as in the forward equation; a
    # one-row parameter's gradient (a bias, gamma) is written entry by entry
    entry = not per_row(stage) and (isinstance(rule.term.wrt, int) or stage.shape[0] == 1)
    lhs = entry_lhs(stage.op.symbol, index if entry else None)
    shown = f"{lhs.text} = {text}" + (f"  ({remark})" if remark else "")
    return Line(lhs.latex, latex, shown, function, remark)


def backward_lines(stage: Any) -> tuple[Line, ...]:
    """The general equation of a gradient stage: one line per consumer's rule that
    has a NumPy VJP (with several consumers, each line says which one it is)."""
    found = rules(stage)
    out = []
    for rule in found:
        remark = f"the term through {rule.consumer.op.symbol.title.lower()}" \
            if len(found) > 1 else ""
        line = rule_line(stage, rule, remark)
        if line is not None:
            out.append(line)
    return tuple(out)


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
