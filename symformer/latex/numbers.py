"""Values as LaTeX math: certified decimals, exact weights and short closed forms.

Decimals always come from the engine's certified roundings (``stage.values``);
nothing here rounds a float.  Closed forms are printed by a small SymPy printer
that writes them the way a textbook does: ``4 + \\sin 1`` rather than
``\\sin{\\left(1 \\right)} + 4``.
"""

from __future__ import annotations

from fractions import Fraction

import sympy
from sympy.printing.latex import LatexPrinter

from symformer.engine import Stage
from symformer.errors import ClosedFormTooLarge
from symformer.worked.numbers import latex_decimal, places, terminating

#: Closed forms with more operations than this are shown as decimals in tables.
TABLE_MAX_OPS = 8


def decimal(text: str) -> str:
    """A certified decimal string (``"-0.50"``, ``"-inf"``) as math; a nonzero value
    below 10^-4 in scientific notation (``2.859 \\times 10^{-8}``, its printed digits)."""
    if text == "-inf":
        return r"-\infty"
    return latex_decimal(text)


def places_of(text: str) -> int:
    """The decimals a printed entry shows (0 for ``-inf`` or an integer)."""
    return places(text) if text != "-inf" else 0


class TextbookPrinter(LatexPrinter):
    """SymPy's LaTeX printer with numbers first and ``\\sin 1`` for atomic arguments."""

    _default_settings = {**LatexPrinter._default_settings, "fold_short_frac": False}

    def _print_Add(self, expr: sympy.Add, order: str | None = None) -> str:
        terms = sorted(expr.as_ordered_terms(), key=lambda t: not t.is_Number)
        tex = ""
        for k, term in enumerate(terms):
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

    def _print_Function(self, expr: sympy.Expr, exp: str | None = None) -> str:
        name = type(expr).__name__
        if name in ("sin", "cos") and len(expr.args) == 1 and (
                expr.args[0].is_Integer and expr.args[0] >= 0 or expr.args[0].is_Symbol):
            tex = rf"\{name} {self._print(expr.args[0])}"
            return tex if exp is None else rf"\{name}^{{{exp}}} {self._print(expr.args[0])}"
        if name in ("sin", "cos", "exp") and len(expr.args) == 1 and exp is None:
            return rf"\{name}\left({self._print(expr.args[0])}\right)"
        return super()._print_Function(expr, exp)


_PRINTER = TextbookPrinter()


def exact(expr: sympy.Expr) -> str:
    """A SymPy expression as textbook LaTeX."""
    return _PRINTER.doprint(expr)


def weight(value: sympy.Expr) -> str:
    """An exact weight: a short terminating decimal (``0.25``) or a fraction."""
    value = sympy.nsimplify(value) if not value.is_Rational else value
    if value.is_Rational:
        frac = Fraction(int(value.p), int(value.q))
        text = terminating(frac)
        if text is not None and len(text) <= 8:
            return text
    return exact(value)


def entry(stage: Stage, i: int, j: int, decimals: int, exact_max_ops: int | None,
          values: list[list[str]] | None = None) -> tuple[str, bool]:
    """One entry as math, and whether it is exact.

    With ``exact_max_ops`` the closed form is used when it has at most that many
    operations; otherwise (or without it) the certified decimal.
    """
    if exact_max_ops is not None:
        try:
            form = stage.closed_form(i, j, max_ops=exact_max_ops)
        except ClosedFormTooLarge:
            pass
        else:
            if form.is_finite is not False:
                return exact(form), True
    text = (values or stage.values(decimals=decimals))[i][j]
    return decimal(text), text == "-inf"
