"""An index equation printed: LaTeX (KaTeX-safe), text, MathML and the plain form.

The LaTeX comes from latexify-py's expression codegen (as the rest of
:mod:`symformer.codegen`), told how this project's arrays print: an array name
prints as the symbol of the stage or parameter it is bound to (a
:class:`~symformer.notation_types.Notation`), an entry with its indices as subscript
(``h_{i,j}``, ``(W_Q)_{m,j}``, ``\\sigma^2_{i}``, ``\\partial L/\\partial \\alpha_{i,j}``),
an indicator ``(1 if c else 0)`` as ``\\mathbf{1}[c]``.  The text form is the same
tree through :class:`~symformer.codegen.text.TextCodegen`; MathML is latex2mathml's
conversion of the LaTeX (:func:`mathml`, the project's one such conversion, mended where
Chromium would draw it wrongly: spacing hints, function names, overlines, brackets);
the plain form is the tree unparsed (valid Python over the array names, what
``equations.json`` writes).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping
from functools import lru_cache

from symformer import math_scripts as scripts
from symformer.codegen import symbols as sym
from symformer.codegen.latex import LatexCodegen
from symformer.codegen.text import TextCodegen
from symformer.notation_types import Notation

_GRADIENT = scripts.GRADIENT_PREFIXES
#: The superscript saying where a symbol sits (``q^{(2)}``: :func:`symformer.notation.where`).
_LOCATED = re.compile(r"\^\{\(\d+(?:,\d+)*\)\}")
_INF = Notation(r"\infty", "∞", "")


def _indicator(node: ast.IfExp) -> bool:
    def constant(e: ast.expr, v: int) -> bool:
        return isinstance(e, ast.Constant) and e.value == v
    return constant(node.body, 1) and constant(node.orelse, 0)


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


def entry_text(symbol: str, index: list[str]) -> str:
    """A symbol's entry in text: ``h_(i,j)``, ``h_j``, ``(W_Q)_(m,j)``, ``∂L/∂α_(i,j)``,
    ``(σ^(1)_i)²``."""
    if not index:
        return symbol
    if symbol.startswith("∂L/∂"):
        return "∂L/∂" + entry_text(symbol[4:], index)
    sub = index[0] if len(index) == 1 else f"({','.join(index)})"
    if "_" in symbol or "/" in symbol:
        return f"({symbol})_{sub}"
    return scripts.subscripted_text(symbol, sub, "^(" in symbol)


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
        if isinstance(node.op, ast.Div):
            numerator = self.visit(node.left)
            if r"\frac" in numerator:  # 1/d times dL/dmu, not a fraction over a fraction
                return self._reciprocal(node, numerator)
        if isinstance(node.op, ast.Pow) and isinstance(node.left, ast.Call) \
                and isinstance(node.left.func, ast.Name) \
                and node.left.func.id in ("tanh", "sin", "cos") \
                and isinstance(node.right, ast.Constant) and len(node.left.args) == 1:
            call = self.visit(node.left)  # tanh^2 xi, as a textbook writes it
            name = rf"\{node.left.func.id}"
            return f"{name}^{{{self.visit(node.right)}}}{call[len(name):]}"
        if isinstance(node.op, ast.Pow) and isinstance(node.left, ast.Subscript):
            base = self.visit(node.left)
            if "^" in base or "'" in base:  # (h^{(1)}_{i,j})^3, never h^{(1)}_{i,j}{}^3
                return scripts.powered(base, self.visit(node.right))
        return super().visit_BinOp(node)

    def visit_Name(self, node: ast.Name) -> str:
        return scripts.display(super().visit_Name(node))

    def _reciprocal(self, node: ast.BinOp, numerator: str) -> str:
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


#: latexify's spacing hints around ``\\left(``: latex2mathml writes each as an ``<mo>``
#: holding an ``<mrow>``, which is not MathML, and Chromium then shows the whole
#: bracket as upright text (``(rj−μ)2``).  Without them the spacing is the same.
_SPACING_HINTS = re.compile(r"\\math(?:open|close)\{\}")
#: Function names (``\\exp``, ``\\sin``, ``\\max``) as latex2mathml writes them.
_FUNCTION = re.compile(r"<m[io]>(exp|log|sin|cos|tan|tanh|max|min|erf)</m[io]>"
                       r"(?=(<mrow><mo[^>]*>(?:&#x00028;|\[))?)")
#: The slash of ``\\partial L/\\partial y``: an operator with space each side by default;
#: TeX sets it as an ordinary symbol.
_SLASH = "<mo>&#x0002F;</mo>"
#: ∂, an ordinary symbol in TeX, which latex2mathml writes as a spaced operator.
_PARTIAL = "<mo>&#x02202;</mo>"


def _function(match: re.Match) -> str:
    """``exp`` upright, then an invisible function application, and TeX's thin space
    before an argument that is not bracketed (``exp s_{i,j}``, not ``exps``)."""
    space = "" if match[2] else '<mspace width="0.1667em"/>'
    return f"<mi>{match[1]}</mi><mo>&#x2061;</mo>{space}"


@lru_cache(maxsize=4096)  # a trace converts the same symbols (x_{0}, σ²) many times
def mathml(latex_source: str, display: bool = False) -> str:
    """The MathML of a LaTeX equation (latex2mathml), as Chromium and Firefox render it:
    the ``<math>`` element without ``xmlns`` (HTML needs none), ``display="block"`` for
    a displayed equation.  Every LaTeX-to-MathML conversion of the project goes here."""
    from latex2mathml.converter import convert

    out = convert(_SPACING_HINTS.sub("", latex_source),
                  display="block" if display else "inline")
    out = out.replace(' xmlns="http://www.w3.org/1998/Math/MathML"', "", 1)
    out = _FUNCTION.sub(_function, out)
    out = out.replace(_SLASH, '<mo lspace="0em" rspace="0em">/</mo>')
    out = out.replace(_PARTIAL, '<mo lspace="0em" rspace="0em">&#x02202;</mo>')
    return _ENTITY.sub(_character, _fences(_overlines(out)))


_OVERLINE_OPEN = "<mover><mrow>"
_OVERLINE_CLOSE = '<mo accent="true">&#x02015;</mo></mover>'
_FENCE_OPEN = '<mrow><mo stretchy="true" fence="true" form="prefix">'
_FENCE_CLOSE = '<mo stretchy="true" fence="true" form="postfix">'
#: Elements taller than a line: brackets around one of them stretch.
TALL = ("<mfrac", "<msqrt", "<mroot", "<munder", "<mover", "<mtable", "<msubsup><mo")


def _mrow_end(out: str, start: int) -> int:
    """The index just after the ``</mrow>`` closing the ``<mrow`` at ``start``."""
    depth, k = 0, start
    while True:
        k = out.index("mrow", k)
        if out[k - 2:k] == "</":
            depth -= 1
        elif not out[k:out.index(">", k)].endswith("/"):  # <mrow /> opens nothing
            depth += 1
        k += 4
        if depth == 0:
            return k + 1


def _overlines(out: str) -> str:
    """``\\overline{x^2}`` as a rule above its whole base (a CSS border on the base's
    ``<mrow>``): latex2mathml's bar character stretches only with a math font, and
    without one Chromium drew it over the x alone, which reads as the square of a mean."""
    start = out.find(_OVERLINE_OPEN)
    while start >= 0:
        end = _mrow_end(out, start + len("<mover>"))
        if out.startswith(_OVERLINE_CLOSE, end):
            base = out[start + len(_OVERLINE_OPEN):end - len("</mrow>")]
            out = (out[:start] + '<mrow style="border-top:0.06em solid;padding-top:0.12em">'
                   + base + "</mrow>" + out[end + len(_OVERLINE_CLOSE):])
        start = out.find(_OVERLINE_OPEN, start + 1)
    return out


def _fences(out: str) -> str:
    """``\\left( r - \\mu \\right)`` around nothing taller than a line: brackets that
    do not stretch (Chromium sets stretchy ones, without a math font, apart from their
    contents: ``( r − μ )``)."""
    start = out.find(_FENCE_OPEN)
    while start >= 0:
        end = _mrow_end(out, start)
        group = out[start:end]
        if not any(tag in group for tag in TALL) and _FENCE_CLOSE in group:
            group = group.replace('stretchy="true" fence="true"', 'stretchy="false"')
            out = out[:start] + group + out[end:]
        start = out.find(_FENCE_OPEN, start + 1)
    return out


#: latex2mathml writes every character as a numeric reference (``&#x003B1;``).
_ENTITY = re.compile(r"&#x([0-9A-Fa-f]+);")


def _character(match: re.Match) -> str:
    """The character itself (the page is UTF-8: σ, ∑, = read as such in the source),
    except the few that markup needs escaped."""
    char = chr(int(match[1], 16))
    return match[0] if char in "<>&\"'" or not char.isprintable() else char


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


def mathml_fragment(latex_source: str) -> str:
    """:func:`mathml` without its ``<math>`` element, to go inside another (a symbol
    such as ``\\sigma^2`` or ``\\partial L/\\partial h_{0}`` in a worked line)."""
    out = mathml(latex_source)
    return out[out.index(">") + 1:out.rindex("</math>")]
