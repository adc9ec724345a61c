"""The LaTeX codegen: latexify-py's expression codegen, told how this project's
arrays, sums and symbols print.

Part of the render stage (:mod:`symformer.equations.render`).  latexify's
:class:`~latexify.codegen.ExpressionCodegen` does the work over an equation's
transformed tree; :class:`LatexCodegen` only gives it

* an identifier converter reading the equation's symbol table (``q``, ``d_k``,
  ``\\gamma``) instead of ``\\mathrm{d\\_k}``;
* an array entry as its symbol with the indices as subscript (:func:`entry_latex`:
  ``h_{i,j}``, ``\\left(W_{Q}\\right)_{m,j}``, ``\\frac{\\partial L}{\\partial
  \\alpha_{i,j}}``);
* sums and maxima over an index written ``\\sum_{k = 0}^{n - 1} e`` / ``\\max_{k} e``
  (latexify's own sum form, without its forced parentheses around a single term);
* a fraction in an exponent written inline (``10000^{2i/d}``), a floor division of
  an even size as a fraction (``d/2``), a fraction whose numerator holds a fraction
  factored out (``\\frac{1}{d} \\frac{\\partial L}{\\partial \\mu_{i}}``), ``\\tanh^{2}
  \\xi``, a power of a symbol with a script of its own bracketed
  (``(h^{(1)}_{i,j})^{3}``), and products of symbols by juxtaposition (``\\cdot``
  only before a number).

An indicator ``(1 if c else 0)`` prints as latexify's cases.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

from latexify.codegen import ExpressionCodegen, expression_rules

from symformer import math_scripts as scripts
from symformer.equations.functions import printed
from symformer.notation_types import Notation

_GRADIENT = scripts.GRADIENT_PREFIXES
#: The superscript saying where a symbol sits (``q^{(2)}``: :func:`symformer.notation.where`).
_LOCATED = re.compile(r"\^\{\(\d+(?:,\d+)*\)\}")


def entry_latex(symbol: str, index: list[str]) -> str:
    """A symbol's entry in LaTeX, as a displayed equation sets it: ``h_{i,j}``; a symbol
    with a subscript of its own is bracketed, ``\\left(W_{Q}\\right)_{m,j}``; a located
    power's subscript goes inside its parentheses, ``(\\sigma^{(1)}_{i})^{2}``; a
    gradient is a display fraction with the index on the symbol it differentiates,
    ``\\frac{\\partial L}{\\partial \\alpha_{i,j}}``."""
    for prefix in _GRADIENT:
        if symbol.startswith(prefix):
            return scripts.display(prefix + _entry(symbol[len(prefix):], index))
    return scripts.display(_entry(symbol, index))


def _entry(symbol: str, index: list[str]) -> str:
    if not index:
        return symbol
    sub = ",".join(index)
    if "_" in symbol or symbol.startswith(r"\frac"):
        return rf"\left({symbol}\right)_{{{sub}}}"
    return scripts.subscripted(symbol, sub, _LOCATED.search(symbol) is not None)


class _Converter:
    """latexify's IdentifierConverter interface over a spelling function."""

    def __init__(self, spelling: Callable[[str], Notation]) -> None:
        self._spelling = spelling

    def convert(self, name: str) -> tuple[str, bool]:
        latex = self._spelling(name).latex
        return latex, len(latex) == 1


class LatexCodegen(ExpressionCodegen):
    """latexify's expression codegen with the project's symbols (see the module doc)."""

    def __init__(self, spelling: Callable[[str], Notation]) -> None:
        super().__init__(use_math_symbols=True)
        self._identifier_converter = _Converter(spelling)
        self._spelling = spelling

    def _reduction(self, node: ast.Call) -> str | None:
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name not in ("sum", "max") or not node.args \
                or not isinstance(node.args[0], ast.GeneratorExp):
            return None
        gen = node.args[0]
        limits = []
        for comp in gen.generators:
            index = self.visit(comp.target)
            if name == "sum":
                count = self.visit(comp.iter.args[0])
                limits.append(rf"\sum_{{{index} = 0}}^{{{count} - 1}}")
            else:
                limits.append(rf"\max_{{{index}}}")
        body = self.visit(gen.elt)
        if isinstance(gen.elt, ast.BinOp) and isinstance(gen.elt.op, (ast.Add, ast.Sub)):
            body = rf"\left( {body} \right)"
        return " ".join(limits) + " " + body

    def visit_Call(self, node: ast.Call) -> str:
        """A reduction, or a function of the function table set as latexify sets its
        own: ``\\sqrt{ x }``, an operator ``\\exp x`` with brackets only where the
        argument needs them, any other name with its arguments in brackets; a name not
        in the table raises."""
        reduction = self._reduction(node)
        if reduction is not None:
            return reduction
        fn = printed(node.func.id if isinstance(node.func, ast.Name) else "")
        if fn.key == "sqrt":
            return rf"\sqrt{{ {self.visit(node.args[0])} }}"
        if fn.operator and len(node.args) == 1:
            arg = node.args[0]
            wrap = isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Pow)
            precedence = expression_rules.get_precedence(node)
            return f"{fn.latex} {self._wrap_operand(arg, precedence, wrap)}"
        args = ", ".join(self.visit(arg) for arg in node.args)
        return rf"{fn.latex} \mathopen{{}}\left( {args} \mathclose{{}}\right)"

    def visit_Subscript(self, node: ast.Subscript) -> str:
        index = node.slice
        parts = index.elts if isinstance(index, ast.Tuple) else [index]
        return entry_latex(self._spelling(node.value.id).latex,
                           [self.visit(p).replace(" ", "") for p in parts])

    def visit_Name(self, node: ast.Name) -> str:
        return scripts.display(super().visit_Name(node))

    def visit_BinOp(self, node: ast.BinOp) -> str:
        if isinstance(node.op, ast.FloorDiv):  # of an even size only (RoPE's d / 2)
            return f"{self.visit(node.left)}/{self.visit(node.right)}"
        if isinstance(node.op, ast.Div):
            numerator = self.visit(node.left)
            if r"\frac" in numerator:  # 1/d times dL/dmu, not a fraction over a fraction
                return self._reciprocal(node)
        if isinstance(node.op, ast.Pow):
            powered = self._power(node)
            if powered is not None:
                return powered
        return super().visit_BinOp(node)

    def _power(self, node: ast.BinOp) -> str | None:
        """A power set as a textbook sets it, or None for latexify's own form."""
        if isinstance(node.left, ast.Call) and isinstance(node.left.func, ast.Name) \
                and node.left.func.id in ("tanh", "sin", "cos") \
                and isinstance(node.right, ast.Constant) and len(node.left.args) == 1:
            call = self.visit(node.left)  # tanh^2 xi, as a textbook writes it
            name = printed(node.left.func.id).latex
            return f"{name}^{{{self.visit(node.right)}}}{call[len(name):]}"
        if isinstance(node.left, ast.Subscript):
            base = self.visit(node.left)
            if "^" in base or "'" in base:  # (h^{(1)}_{i,j})^3, never h^{(1)}_{i,j}{}^3
                return scripts.powered(base, self.visit(node.right))
        if isinstance(node.right, ast.BinOp) and isinstance(node.right.op, ast.Div):
            rule = expression_rules.BIN_OP_RULES[ast.Pow]
            prec = expression_rules.get_precedence(node)
            base = self._wrap_binop_operand(node.left, prec, rule.operand_left)
            top = self.visit(node.right.left)
            bottom = self._wrap_operand(node.right.right, prec)
            return f"{base}^{{{top}/{bottom}}}"  # 10000^{2i/d}
        return None

    def _reciprocal(self, node: ast.BinOp) -> str:
        """``c x / den`` as ``\\frac{c}{den} x`` (``c`` the numerator's number, 1 when it
        has none; a sum bracketed, a minus in front), the way a textbook factors a
        derivative out of a fraction."""
        sign, top = "", node.left
        if isinstance(top, ast.UnaryOp) and isinstance(top.op, ast.USub):
            sign, top = "-", top.operand
        coefficient, rest = _coefficient(top)
        if coefficient is None:
            coefficient, rest = 1, top
        if coefficient < 0:
            sign, coefficient = ("" if sign else "-"), -coefficient
        numerator = self.visit(rest)
        if isinstance(rest, ast.BinOp) and isinstance(rest.op, (ast.Add, ast.Sub)):
            numerator = rf"\left( {numerator} \right)"
        return rf"{sign}\frac{{{coefficient}}}{{{self.visit(node.right)}}} {numerator}"

    def _should_remove_multiply_op(self, l_latex: str, r_latex: str, l_expr: ast.expr,
                                   r_expr: ast.expr) -> bool:
        """latexify's hook: juxtapose the factors unless the right one is a number."""
        return not r_latex[:1].isdigit()


def _coefficient(node: ast.expr) -> tuple[int | float | None, ast.expr | None]:
    """The number a product starts with and the rest: ``-2 * a * b`` -> (-2, a * b)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value, None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) \
            and isinstance(node.operand, ast.Constant):
        return -node.operand.value, None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        value, rest = _coefficient(node.left)
        if value is not None:
            return value, node.right if rest is None else ast.BinOp(rest, ast.Mult(), node.right)
    return None, None
