"""A stage's general equation, generated from the NumPy function its operation runs.

One source per operation: the function ``stage.op.function()`` that the float
reference runs (:mod:`symformer.reference.numpy_ref`) is parsed and rendered by
latexify-py, following latexify's own architecture -- its parser and
transformers (prefixes trimmed, docstring removed, assignments reduced), then
this project's small transformers (:mod:`symformer.codegen.transformers`: NumPy
idioms as mathematics), then latexify's expression codegen told the stage's
symbols (:mod:`symformer.codegen.latex`).  The same transformed tree is printed
as plain text by :mod:`symformer.codegen.text`, so the PDF, Markdown, the trace
(text, LaTeX, JSON, HTML's MathML) all show one equation.

What differs between operations is data their own module gives
(:class:`~symformer.ops.base.Spelling`): which parameter is which symbol, the
entry index, the reduction's index and count, a remark.  A function parameter
that receives an input stage is written with that stage's symbol (``q``, ``r``,
``σ²``); an input whose operation is ``inline`` (the raw dot product) is also
shown substituted (``s_j = u_j/√d_k = q·k_j/√d_k``).
"""

from __future__ import annotations

import ast
import copy
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from latexify import parser
from latexify import transformers as lt

from symformer.codegen import symbols as sym
from symformer.codegen import transformers as tr
from symformer.codegen.latex import LatexCodegen
from symformer.codegen.text import TextCodegen
from symformer.ops.base import Notation, Spelling

#: latexify's own configuration: NumPy/math prefixes trimmed, assignments reduced.
PREFIXES = {"np", "math"}


@dataclass(frozen=True)
class Line:
    """One line of a general equation: ``lhs = rhs`` (LaTeX) and its text form.

    ``rhs`` may be a chain (``\\frac{u_j}{\\sqrt{d_k}} = \\frac{q \\cdot k_j}{...}``);
    ``function`` is the NumPy function it was rendered from; ``remark`` a short
    plain-text note (what a parameter stands for, what the code does besides).
    """

    lhs: str
    rhs: str
    text: str
    function: Callable[..., Any]
    remark: str = ""

    @property
    def latex(self) -> str:
        """``lhs = rhs``."""
        return f"{self.lhs} = {self.rhs}"


@cache
def function_body(function: Callable[..., Any]) -> tuple[tuple[str, ...], str]:
    """The function's parameters and its single return expression (as source),
    after latexify's parser and transformers."""
    tree = parser.parse_function(function)
    tree = lt.AugAssignReplacer().visit(tree)
    tree = lt.PrefixTrimmer(PREFIXES).visit(tree)
    tree = lt.DocstringRemover().visit(tree)
    tree = lt.AssignmentReducer().visit(tree)
    definition = tree.body[0]
    (statement,) = definition.body
    return tuple(a.arg for a in definition.args.args), ast.unparse(statement.value)


def input_notations(stage: Any) -> list[Notation]:
    """The symbols of the stage's inputs; several heads' outputs get ``^(k)``."""
    stages = [stage.derivation[name] for name in stage.inputs]
    notations = [s.op.symbol for s in stages]
    if len(stages) > 1 and len({n.latex for n in notations}) == 1 and all(s.head for s in stages):
        return [Notation(f"{n.latex}^{{({s.head})}}", f"{n.text}^({s.head})", n.title)
                for n, s in zip(notations, stages)]
    return notations


def expression_tree(stage: Any, spelling: Spelling, function: Callable[..., Any],
                prefix: str, inputs: list[Notation] | None = None
                ) -> tuple[ast.expr, dict[str, Notation]]:
    """The transformed expression tree of ``function`` and the symbols it uses.

    Identifiers standing for input stages are named ``{prefix}in{i}`` so that an
    inlined input's own inputs do not clash; ``inputs`` (default: the stage's
    inputs' symbols) are the notations of the function's first parameters.
    """
    params, source = function_body(function)
    expr = ast.parse(source, mode="eval").body
    expr = tr.DropMaxShift().visit(expr)
    expr = tr.NumpyCalls(dot=spelling.index is not None).visit(expr)
    expr = tr.Indexer(spelling.indexed, spelling.index, spelling.axis, spelling.rows,
                      spelling.per_row).visit(expr)
    symbols = dict(spelling.symbols)
    replacements: dict[str, ast.expr] = {}
    if inputs is None:
        inputs = input_notations(stage) if stage.derivation is not None else []
    names = [f"{prefix}in{i}" for i in range(len(inputs))]
    symbols.update(zip(names, inputs))
    for i, param in enumerate(params):
        if param in spelling.names:
            replacements[param] = ast.parse(spelling.names[param], mode="eval").body
        elif len(params) == 1 and len(inputs) > 1:  # one parameter takes every input
            replacements[param] = ast.List(
                elts=[ast.Name(id=n, ctx=ast.Load()) for n in names], ctx=ast.Load())
        elif i < len(inputs):
            replacements[param] = ast.Name(id=names[i], ctx=ast.Load())
    expr = tr.DropOne().visit(tr.Substitute(replacements).visit(expr))
    # again: a list of inputs reaching concatenate
    expr = tr.NumpyCalls(dot=spelling.index is not None).visit(expr)
    return ast.fix_missing_locations(expr), symbols


def _spellings(stage: Any) -> tuple[Spelling, ...]:
    spelling = stage.op.spelling()
    return spelling if isinstance(spelling, tuple) else (spelling,)


def _text_remark(text: str, remark: str) -> str:
    return f"{text}  ({remark})" if remark else text


def lines(stage: Any) -> tuple[Line, ...]:
    """The general equation of ``stage``: one :class:`Line` per spelling of its op
    (a gradient stage's are its consumers' backward rules:
    :func:`symformer.codegen.backward.equation_lines` gives either)."""
    out = []
    for spelling in _spellings(stage):
        function = spelling.function or stage.op.function()
        expr, symbols = expression_tree(stage, spelling, function, "")
        forms = [expr]
        for i, name in enumerate(stage.inputs):
            source = stage.derivation[name]
            if not source.op.inline:
                continue
            (inner,) = _spellings(source)
            if inner.index != spelling.index:
                continue
            inner_expr, inner_symbols = expression_tree(source, inner, source.op.function(),
                                                    f"i{i}_")
            symbols.update(inner_symbols)
            forms.append(tr.Inline(f"in{i}", spelling.index, inner_expr).visit(
                copy.deepcopy(expr)))

        def spell(name: str, symbols: dict[str, Notation] = symbols) -> Notation:
            return symbols.get(name) or sym.spell(name)

        lhs = spelling.lhs or entry_lhs(stage.op.symbol, spelling.index)
        latex = " = ".join(LatexCodegen(spell).visit(f) for f in forms)
        text = " = ".join(TextCodegen(spell).visit(f) for f in forms)
        out.append(Line(lhs.latex, latex, _text_remark(f"{lhs.text} = {text}",
                                                      spelling.remark),
                        function, spelling.remark))
    return tuple(out)


def render(expr: ast.expr, symbols: dict[str, Notation]) -> tuple[str, str]:
    """An expression tree printed in LaTeX and as text with the given symbols."""
    def spell(name: str) -> Notation:
        return symbols.get(name) or sym.spell(name)

    return LatexCodegen(spell).visit(expr), TextCodegen(spell).visit(expr)


def entry_lhs(symbol: Notation, index: str | None) -> Notation:
    """An equation's left-hand side: the symbol with the entry index (``α_j``), if any."""
    if index is None:
        return symbol
    return Notation(symbol.entry(index), symbol.entry(index, fmt="text"), symbol.title)


def rendered_functions(stage: Any) -> tuple[Callable[..., Any], ...]:
    """The NumPy functions the stage's equation is rendered from (for tests and docs)."""
    return tuple(s.function or stage.op.function() for s in _spellings(stage))


def source(function: Callable[..., Any]) -> str:
    """The source of a rendered function (for a document's appendix or a test)."""
    return inspect.getsource(function)
