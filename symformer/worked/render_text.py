"""Worked lines as plain text for terminals: ``q_0 = 4.841·0.25 + 1.540·0.25 ≈ 1.595``.

:class:`TextPrinter` is also the base of the machine-readable printer
(:mod:`symformer.worked.to_json`), which only changes the operator spellings.
"""

from __future__ import annotations

from symformer.worked.model import (
    APPROX,
    Add,
    Const,
    Div,
    Func,
    Mul,
    Neg,
    Node,
    Num,
    Pow,
    Step,
    Sym,
    Vector,
)
from symformer.worked.numbers import constant_parts

_ADD, _MUL, _POW, _ATOM = 1, 2, 3, 4


def constant_text(value) -> str:
    """An exact rational: an integer, a short terminating decimal, or ``p/q``."""
    numerator, denominator = constant_parts(value)
    return numerator if denominator is None else f"{numerator}/{denominator}"


class TextPrinter:
    """Prints trees with Unicode operators; subclasses change the spellings."""

    times = "·"
    power = "^"
    functions = {"exp": "exp", "sqrt": "sqrt", "max": "max", "min": "min", "erf": "erf",
                 "sin": "sin", "cos": "cos", "tanh": "tanh"}

    def print(self, node: Node) -> str:
        return self._print(node)[0]

    def _print(self, node: Node) -> tuple[str, int]:
        """(text, precedence) of a node."""
        if isinstance(node, Num):
            return node.text, (_ADD if node.text.startswith("-") else _ATOM)
        if isinstance(node, Const):
            text = constant_text(node.value)
            return text, (_MUL if "/" in text else _ADD if text.startswith("-") else _ATOM)
        if isinstance(node, Sym):
            return self.symbol(node), _ATOM
        if isinstance(node, Neg):
            return "-" + self._wrap(node.arg, _MUL), _ADD
        if isinstance(node, Add):
            out = ""
            for k, term in enumerate(node.terms):
                if isinstance(term, Neg):
                    sign, shown = "-", self._wrap(term.arg, _MUL)
                else:
                    shown = self._print(term)[0]
                    sign, shown = ("-", shown[1:]) if shown.startswith("-") else ("+", shown)
                out += (f" {sign} " if k else ("-" if sign == "-" else "")) + shown
            return out, _ADD
        if isinstance(node, Mul):
            last = len(node.factors) - 1
            return self.times.join(self._factor(f, k == last)
                                   for k, f in enumerate(node.factors)), _MUL
        if isinstance(node, Div):
            return f"{self._wrap(node.num, _MUL)}/{self._wrap(node.den, _POW)}", _MUL
        if isinstance(node, Pow):
            return f"{self._wrap(node.base, _ATOM)}{self.power}{self._wrap(node.exp, _ATOM)}", \
                _POW
        if isinstance(node, Func):
            args = ", ".join(self.print(a) for a in node.args)
            return f"{self.functions[node.name]}({args})", _ATOM
        if isinstance(node, Vector):
            return "[" + ", ".join(self.print(i) for i in node.items) + "]", _ATOM
        raise TypeError(f"cannot print {type(node).__name__}")

    def symbol(self, node: Sym) -> str:
        return node.text

    def _factor(self, node: Node, last: bool = False) -> str:
        text, prec = self._print(node)
        if prec < _MUL or (prec == _MUL and not (last and isinstance(node, Div))):
            return f"({text})"
        return text

    def _wrap(self, node: Node, at_least: int) -> str:
        text, prec = self._print(node)
        return f"({text})" if prec < at_least else text


_TEXT = TextPrinter()


def text(node: Node) -> str:
    """A tree as terminal text."""
    return _TEXT.print(node)


def step_text(step: Step) -> str:
    """``lhs = form = form ≈ result`` (a form repeating the previous one is dropped)."""
    parts, previous = [text(step.lhs)], None
    for relation, form in step.chain:
        shown = text(form)
        if shown != previous:
            parts.append(f"{'≈' if relation == APPROX else '='} {shown}")
        previous = shown
    line = " ".join(parts)
    return f"{line} ({step.note})" if step.note else line
