"""General formulas (SymPy equations over named vectors) as LaTeX and MathML, and numbers.

Worked lines (a formula with the numbers substituted) are built and printed by
:mod:`symformer.worked`.  The printers here keep the terms in the order written
(``order="none"``), except that a number added to a symbol follows it: a sum runs
``j = 0..n - 1``, never ``-1 + n``.
"""

from __future__ import annotations

import sympy
from sympy.printing.latex import LatexPrinter
from sympy.printing.mathml import MathMLPresentationPrinter

#: Printer settings shared by every output: keep the terms in construction order.
_ORDER = "none"


def _written_order(expr: sympy.Add) -> list[sympy.Expr]:
    """The terms of a sum in the order written, numbers last (``n - 1``)."""
    return sorted(expr.args, key=lambda t: t.is_Number)


class _GeneralLatex(LatexPrinter):
    def _print_Add(self, expr: sympy.Add, order: str | None = None) -> str:
        tex = ""
        for k, term in enumerate(_written_order(expr)):
            if k and term.could_extract_minus_sign():
                tex += " - "
                term = -term
            elif k:
                tex += " + "
            term_tex = self._print(term)
            if self._needs_add_brackets(term):
                term_tex = rf"\left({term_tex}\right)"
            tex += term_tex
        return tex


class _GeneralMathML(MathMLPresentationPrinter):
    def _print_Add(self, expr: sympy.Add, order: str | None = None):
        row = self.dom.createElement("mrow")
        for k, term in enumerate(_written_order(expr)):
            negative = term.could_extract_minus_sign()
            if k or negative:
                mo = self.dom.createElement("mo")
                mo.appendChild(self.dom.createTextNode("\u2212" if negative else "+"))
                row.appendChild(mo)
            row.appendChild(self._print(-term if negative else term))
        return row


def latex_number(text: str) -> str:
    """A decimal as LaTeX (``-inf`` as ``-\\infty``)."""
    return text.replace("-inf", r"-\infty")


def mathml_number(text: str) -> str:
    """A decimal as MathML (``-inf`` as minus infinity)."""
    if text == "-inf":
        return "<mrow><mo>\u2212</mo><mi>\u221e</mi></mrow>"
    if text.startswith("-"):
        return f"<mrow><mo>\u2212</mo><mn>{text[1:]}</mn></mrow>"
    return f"<mn>{text}</mn>"


def general_latex(expr: sympy.Basic) -> str:
    """A general formula (a SymPy ``Eq``) as LaTeX, terms in the order written."""
    return _GeneralLatex({"order": _ORDER}).doprint(expr)


def general_mathml(expr: sympy.Basic) -> str:
    """A general formula as a display ``<math>`` element, terms in the order written."""
    body = _GeneralMathML({"order": _ORDER}).doprint(expr)
    return f'<math display="block">{body}</math>'
