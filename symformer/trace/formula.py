"""Formulas with numbers in them: one SymPy expression, printed as text, LaTeX or MathML.

A :class:`Formula` is an expression over placeholder symbols plus the decimal text
each placeholder stands for.  The placeholders are named in the order of the
operands (``n0000``, ``n0001``, ...) so SymPy's canonical ordering keeps the terms
in reading order; the printers below then print each placeholder as its number,
never substituting a float into the expression.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy
from sympy.printing.mathml import MathMLPresentationPrinter
from sympy.printing.str import StrPrinter

#: Printer settings shared by every output: keep the terms in construction order.
_ORDER = "none"


@dataclass(frozen=True)
class Formula:
    """An expression whose placeholder symbols print as the decimals in ``numbers``.

    ``lhs`` is printed before an equals sign when given (``q_1 = ...``); ``value``
    after a second one (``... = 1.85``).
    """

    expr: sympy.Expr
    numbers: dict[sympy.Symbol, str] = field(default_factory=dict)
    lhs: sympy.Expr | None = None
    value: str | None = None


def substitute(local: sympy.Expr, decimal_of, lhs: sympy.Expr | None = None,
               value: str | None = None) -> Formula:
    """Replace every free symbol of ``local`` by a placeholder printing as its number.

    ``decimal_of(symbol)`` gives the decimal text of one symbol and a sort key
    (operand number, row, column) so placeholders sort in reading order.
    """
    found = sorted((decimal_of(s) + (s,) for s in local.free_symbols), key=lambda t: t[1])
    mapping, numbers = {}, {}
    for n, (text, _key, symbol) in enumerate(found):
        placeholder = sympy.Symbol(f"n{n:04d}")
        mapping[symbol] = placeholder
        numbers[placeholder] = text
    return Formula(local.xreplace(mapping), numbers, lhs, value)


def _wrapped(text: str) -> str:
    return f"({text})" if text.startswith("-") and text != "-inf" else text


class _Text(StrPrinter):
    def __init__(self, numbers: dict[sympy.Symbol, str]) -> None:
        super().__init__({"order": _ORDER})
        self.numbers = numbers

    def _print_Symbol(self, expr: sympy.Symbol) -> str:
        if expr in self.numbers:
            return _wrapped(self.numbers[expr])
        return super()._print_Symbol(expr)

    def _print_Pow(self, expr: sympy.Pow, rational: bool = False) -> str:
        return super()._print_Pow(expr, rational).replace("**", "^")

    def _print_Max(self, expr: sympy.Max) -> str:
        return "max(" + ", ".join(self._print(a) for a in expr.args) + ")"


class _MathML(MathMLPresentationPrinter):
    def __init__(self, numbers: dict[sympy.Symbol, str]) -> None:
        super().__init__({"order": _ORDER})
        self.numbers = numbers

    def _print_Symbol(self, sym: sympy.Symbol, style: str = "plain"):
        if sym in self.numbers and self.numbers[sym] == "-inf":
            row = self.dom.createElement("mrow")
            for tag, content in (("mo", "\u2212"), ("mi", "\u221e")):
                node = self.dom.createElement(tag)
                node.appendChild(self.dom.createTextNode(content))
                row.appendChild(node)
            return row
        if sym in self.numbers:
            text = self.numbers[sym]
            mn = self.dom.createElement("mn")
            mn.appendChild(self.dom.createTextNode(text.lstrip("-")))
            if not text.startswith("-"):
                return mn
            row = self.dom.createElement("mrow")
            for tag, content in (("mo", "("), ("mo", "\u2212"), (None, mn), ("mo", ")")):
                if tag is None:
                    row.appendChild(content)
                    continue
                node = self.dom.createElement(tag)
                node.appendChild(self.dom.createTextNode(content))
                row.appendChild(node)
            return row
        return super()._print_Symbol(sym, style)


def _sides(f: Formula, print_one, number) -> list[str]:
    parts = [] if f.lhs is None else [print_one(f.lhs)]
    parts.append(print_one(f.expr))
    if f.value is not None:
        parts.append(number(f.value))
    return parts


def as_text(f: Formula) -> str:
    """``q1 = 5.84/4 + 1.54/4 = 1.85``: plain text for terminals."""
    return " = ".join(_sides(f, _Text(f.numbers).doprint, str))


def as_latex(f: Formula) -> str:
    """The formula as LaTeX math (no surrounding ``$``)."""
    names = {s: _wrapped(t) for s, t in f.numbers.items()}
    return " = ".join(_sides(
        f, lambda e: sympy.latex(e, symbol_names=names, order=_ORDER), latex_number))


def latex_number(text: str) -> str:
    """A decimal as LaTeX (``-inf`` as ``-\\infty``)."""
    return text.replace("-inf", r"-\infty")


def as_mathml(f: Formula, display: bool = False) -> str:
    """The formula as a ``<math>`` element (MathML Core; no network needed to show it)."""
    printer = _MathML(f.numbers)
    body = "<mo>=</mo>".join(_sides(f, lambda e: printer._print(e).toxml(), mathml_number))
    mode = ' display="block"' if display else ' displaystyle="true"'
    return f'<math{mode}><mrow>{body}</mrow></math>'


def mathml_number(text: str) -> str:
    """A decimal as MathML (``-inf`` as minus infinity)."""
    if text == "-inf":
        return "<mrow><mo>\u2212</mo><mi>\u221e</mi></mrow>"
    if text.startswith("-"):
        return f"<mrow><mo>\u2212</mo><mn>{text[1:]}</mn></mrow>"
    return f"<mn>{text}</mn>"


def general_latex(expr: sympy.Basic) -> str:
    """A general formula (a SymPy ``Eq``) as LaTeX, terms in the order written."""
    return sympy.latex(expr, order=_ORDER)


def general_mathml(expr: sympy.Basic) -> str:
    """A general formula as a display ``<math>`` element, terms in the order written."""
    from sympy.printing.mathml import mathml

    return f'<math display="block">{mathml(expr, printer="presentation", order=_ORDER)}</math>'
