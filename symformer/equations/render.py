"""The render stage: an equation's transformed tree printed as LaTeX (KaTeX-safe),
text, MathML and the plain form.

* the transformed tree is lowered to the one expression tree
  (:func:`symformer.equations.lower.lower`, the nodes the claim reader also gives);
* LaTeX: :class:`~symformer.equations.latex.LatexPrinter`, one method per node class
  (latexify-py's forms for operators and brackets): an array name as the symbol of the
  stage or parameter it is bound to (a :class:`~symformer.notation_types.Notation`), an
  entry with its indices as subscript (``h_{i,j}``, ``\\left(W_{Q}\\right)_{m,j}``,
  ``\\frac{\\partial L}{\\partial \\alpha_{i,j}}``), every other identifier as
  :func:`symformer.equations.symbols.spell` writes it;
* text: the same tree through :class:`~symformer.equations.text.TextPrinter`
  (``h_(i,j)``, an indicator ``(1 if c else 0)`` as ``𝟙[c]``);
* MathML: latex2mathml's conversion of the LaTeX (:func:`mathml`, the project's one
  such conversion, mended where Chromium would draw it wrongly: spacing hints,
  function names, overlines, brackets);
* plain: the tree unparsed (:func:`plain`: valid Python over the array names, what
  ``equations.json`` writes).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping
from functools import lru_cache

from symformer.equations.latex import LatexPrinter
from symformer.equations.lower import lower
from symformer.equations.symbols import spell
from symformer.equations.text import TextPrinter
from symformer.notation_types import Notation


def speller(symbols: Mapping[str, Notation]) -> Callable[[str], Notation]:
    """A spelling function: the bound symbols first, then the defaults (:func:`spell`)."""
    def spelled(name: str) -> Notation:
        return symbols[name] if name in symbols else spell(name)
    return spelled


def latex(node: ast.expr, symbols: Mapping[str, Notation]) -> str:
    """The LaTeX of an expression or left-hand side (lowered to the one tree)."""
    return LatexPrinter(speller(symbols)).visit(lower(node))


def text(node: ast.expr, symbols: Mapping[str, Notation]) -> str:
    """The text form of an expression or left-hand side (lowered to the one tree)."""
    return TextPrinter(speller(symbols)).visit(lower(node))


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
