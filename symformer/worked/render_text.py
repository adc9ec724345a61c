"""Worked lines as plain text for terminals: ``q_0 = 4.841·0.25 + 1.540·0.25 ≈ 1.595``.

:class:`TextPrinter` is also the base of the machine-readable printer
(:mod:`symformer.worked.to_json`), which only changes the operator spellings.
"""

from __future__ import annotations

from symformer.worked.model import (
    ADD,
    APPROX,
    ATOM,
    MUL,
    POW,
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


def constant_text(value) -> str:
    """An exact rational: an integer, a short terminating decimal, or ``p/q``."""
    numerator, denominator = constant_parts(value)
    return numerator if denominator is None else f"{numerator}/{denominator}"


class TextPrinter:
    """Prints trees with Unicode operators; subclasses change the spellings."""

    times = "·"
    power = "^"
    functions = {"exp": "exp", "sqrt": "sqrt", "max": "max", "min": "min", "erf": "erf",
                 "sin": "sin", "cos": "cos", "tanh": "tanh", "log": "log"}

    def print(self, node: Node) -> str:
        return self._print(node)[0]

    def _print(self, node: Node) -> tuple[str, int]:
        """(text, precedence) of a node."""
        if isinstance(node, Num):
            return node.text, (ADD if node.text.startswith("-") else ATOM)
        if isinstance(node, Const):
            text = constant_text(node.value)
            return text, (MUL if "/" in text else ADD if text.startswith("-") else ATOM)
        if isinstance(node, Sym):
            return self.symbol(node), ATOM
        if isinstance(node, Neg):
            return "-" + self._wrap(node.arg, MUL), ADD
        if isinstance(node, Add):
            out = ""
            for k, term in enumerate(node.terms):
                if isinstance(term, Neg):
                    sign, shown = "-", self._wrap(term.arg, MUL)
                else:
                    shown = self._print(term)[0]
                    sign, shown = ("-", shown[1:]) if shown.startswith("-") else ("+", shown)
                out += (f" {sign} " if k else ("-" if sign == "-" else "")) + shown
            return out, ADD
        if isinstance(node, Mul):
            last = len(node.factors) - 1
            return self.times.join(self._factor(f, k == last)
                                   for k, f in enumerate(node.factors)), MUL
        if isinstance(node, Div):
            # A negative number needs no brackets over a fraction bar: (-a)/b = -(a/b).
            num = node.num.text if isinstance(node.num, Num) else self._wrap(node.num, MUL)
            return f"{num}/{self._wrap(node.den, POW)}", MUL
        if isinstance(node, Pow):
            exponent = self._wrap(node.exp, ATOM)
            if isinstance(node.exp, Const) and node.exp.value.q != 1:  # (3/2), as displayed
                exponent = f"({node.exp.value.p}/{node.exp.value.q})"
            return f"{self._wrap(node.base, ATOM)}{self.power}{exponent}", POW
        if isinstance(node, Func):
            args = ", ".join(self.print(a) for a in node.args)
            return f"{self.functions[node.name]}({args})", ATOM
        if isinstance(node, Vector):
            return "[" + ", ".join(self.print(i) for i in node.items) + "]", ATOM
        raise TypeError(f"cannot print {type(node).__name__}")

    def symbol(self, node: Sym) -> str:
        return node.text

    def _factor(self, node: Node, last: bool = False) -> str:
        text, prec = self._print(node)
        if prec < MUL or (prec == MUL and not (last and isinstance(node, Div))):
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
    if step.exact is not None:
        line += f" (exact: {step.exact.text})"
    return f"{line} ({step.note})" if step.note else line
