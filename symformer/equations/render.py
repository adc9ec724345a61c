"""An index equation printed: LaTeX (KaTeX-safe), text, MathML and the plain form.

The LaTeX comes from latexify-py's expression codegen (as the rest of
:mod:`symformer.codegen`), told how this project's arrays print: an array name
prints as the symbol of the stage or parameter it is bound to (a
:class:`~symformer.ops.base.Notation`), an entry with its indices as subscript
(``h_{i,j}``, ``(W_Q)_{m,j}``, ``\\sigma^2_{i}``, ``\\partial L/\\partial \\alpha_{i,j}``),
an indicator ``(1 if c else 0)`` as ``\\mathbf{1}[c]``.  The text form is the same
tree through :class:`~symformer.codegen.text.TextCodegen`; MathML is latex2mathml's
conversion of the LaTeX; the plain form is the tree unparsed (valid Python over the
array names, what ``equations.json`` writes).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping

from symformer.codegen import symbols as sym
from symformer.codegen.latex import LatexCodegen
from symformer.codegen.text import TextCodegen
from symformer.ops.base import Notation

_GRADIENT = (r"\partial L/\partial ", r"\partial L / \partial ")
_INF = Notation(r"\infty", "∞", "")


def _indicator(node: ast.IfExp) -> bool:
    def constant(e: ast.expr, v: int) -> bool:
        return isinstance(e, ast.Constant) and e.value == v
    return constant(node.body, 1) and constant(node.orelse, 0)


def entry_latex(symbol: str, index: list[str]) -> str:
    """A symbol's entry in LaTeX: ``h_{i,j}``; a symbol with a subscript of its own is
    bracketed, ``\\left(W_{Q}\\right)_{m,j}``; a gradient's index goes on the symbol it
    differentiates, ``\\partial L/\\partial \\alpha_{i,j}``."""
    if not index:
        return symbol
    for prefix in _GRADIENT:
        if symbol.startswith(prefix):
            return prefix + entry_latex(symbol[len(prefix):], index)
    sub = ",".join(index)
    if "_" in symbol or symbol.startswith(r"\frac"):
        return rf"\left({symbol}\right)_{{{sub}}}"
    return f"{symbol}_{{{sub}}}"


def entry_text(symbol: str, index: list[str]) -> str:
    """A symbol's entry in text: ``h_(i,j)``, ``h_j``, ``(W_Q)_(m,j)``, ``∂L/∂α_(i,j)``."""
    if not index:
        return symbol
    if symbol.startswith("∂L/∂"):
        return "∂L/∂" + entry_text(symbol[4:], index)
    sub = index[0] if len(index) == 1 else f"({','.join(index)})"
    if "_" in symbol or "/" in symbol:
        return f"({symbol})_{sub}"
    return f"{symbol}_{sub}"


class EquationLatex(LatexCodegen):
    """latexify's codegen with array entries and indicators written as above."""

    def __init__(self, spelling: Callable[[str], Notation]) -> None:
        super().__init__(spelling)
        self._spell = spelling

    def visit_Subscript(self, node: ast.Subscript) -> str:
        index = node.slice
        parts = index.elts if isinstance(index, ast.Tuple) else [index]
        return entry_latex(self._spell(node.value.id).latex,
                           [self.visit(p).replace(" ", "") for p in parts])

    def visit_BinOp(self, node: ast.BinOp) -> str:
        if isinstance(node.op, ast.FloorDiv):  # of an even size only (RoPE's d / 2)
            return f"{self.visit(node.left)}/{self.visit(node.right)}"
        if isinstance(node.op, ast.Pow) and isinstance(node.left, ast.Subscript):
            base = self.visit(node.left)
            if "^" in base:  # h^{(1)}_{i,j} cubed: braced, never a double superscript
                return f"{{{base}}}^{{{self.visit(node.right)}}}"
        return super().visit_BinOp(node)

    def visit_IfExp(self, node: ast.IfExp) -> str:
        if _indicator(node):
            return rf"\mathbf{{1}}\left[{self.visit(node.test)}\right]"
        return super().visit_IfExp(node)


class EquationText(TextCodegen):
    """The text codegen with array entries and indicators written as above."""

    def _wrap(self, node: ast.AST, parent: int, strict: bool = False) -> str:
        if isinstance(node, ast.IfExp) and _indicator(node):
            return self.visit(node)  # 𝟙[…] is bracketed already
        return super()._wrap(node, parent, strict)

    def visit_Subscript(self, node: ast.Subscript) -> str:
        index = node.slice
        parts = index.elts if isinstance(index, ast.Tuple) else [index]
        return entry_text(self._spelling(node.value.id).text,
                          [self.visit(p).replace(" ", "") for p in parts])

    def visit_IfExp(self, node: ast.IfExp) -> str:
        if _indicator(node):
            return f"𝟙[{self.visit(node.test)}]"
        return super().visit_IfExp(node)

    def visit_BinOp(self, node: ast.BinOp) -> str:
        if isinstance(node.op, ast.FloorDiv):  # of an even size only (RoPE's d / 2)
            return f"{self.visit(node.left)}/{self.visit(node.right)}"
        if isinstance(node.op, ast.Pow) and not (
                isinstance(node.right, ast.Constant) and isinstance(node.right.value, int)):
            return f"{self._wrap(node.left, 30, strict=True)}^({self.visit(node.right)})"
        return super().visit_BinOp(node)


def speller(symbols: Mapping[str, Notation]) -> Callable[[str], Notation]:
    """A spelling function: the bound symbols first, then ``inf``, then the defaults."""
    def spell(name: str) -> Notation:
        if name in symbols:
            return symbols[name]
        return _INF if name == "inf" else sym.spell(name)
    return spell


def latex(node: ast.expr, symbols: Mapping[str, Notation]) -> str:
    """The LaTeX of an expression or left-hand side."""
    return EquationLatex(speller(symbols)).visit(node)


def text(node: ast.expr, symbols: Mapping[str, Notation]) -> str:
    """The text form of an expression or left-hand side."""
    return EquationText(speller(symbols)).visit(node)


def mathml(latex_source: str) -> str:
    """The MathML of a LaTeX equation (latex2mathml, as the HTML trace uses)."""
    from latex2mathml.converter import convert
    return convert(latex_source)


class _Plain(ast._Unparser):  # type: ignore[name-defined]  # ast.unparse's printer
    """ast.unparse without the redundant parentheses of a generator as sole argument."""

    def visit_Call(self, node: ast.Call) -> None:
        if len(node.args) == 1 and isinstance(node.args[0], ast.GeneratorExp) \
                and not node.keywords:
            self.set_precedence(ast._Precedence.ATOM, node.func)  # type: ignore[attr-defined]
            self.traverse(node.func)
            gen = node.args[0]
            with self.delimit("(", ")"):
                self.traverse(gen.elt)
                for comp in gen.generators:
                    self.traverse(comp)
            return
        super().visit_Call(node)


def plain(node: ast.expr) -> str:
    """The plain Python-syntax form (``a[i, j]``, ``sum(x[i, m] for m in range(n))``)."""
    return _Plain().visit(node)
