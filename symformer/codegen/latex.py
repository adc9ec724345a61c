"""latexify's expression codegen, told how this project's identifiers and sums print.

latexify's :class:`~latexify.codegen.ExpressionCodegen` does the work; this
subclass only gives it

* an identifier converter reading the equation's symbol table (``_in0`` -> ``q``,
  ``d_k`` -> ``d_k``, ``gamma`` -> ``\\gamma``) instead of ``\\mathrm{d\\_k}``;
* sums and maxima over an index written ``\\sum_{k=0}^{n-1} e`` / ``\\max_k e``
  (latexify's own sum form, without its forced parentheses around a single term);
* the dot product ``q \\cdot k_j`` (from :class:`~symformer.codegen.transformers.NumpyCalls`);
* a fraction in an exponent written inline (``10000^{2i/d}``), products of symbols
  by juxtaposition (``\\cdot`` only before a number), and a subscript on a
  symbol that already has a superscript braced (``{\\sigma^2}_j``).
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from latexify.codegen import ExpressionCodegen, expression_rules

from symformer.notation_types import Notation


class _Converter:
    """latexify's IdentifierConverter interface over a spelling function."""

    def __init__(self, spelling: Callable[[str], Notation]) -> None:
        self._spelling = spelling

    def convert(self, name: str) -> tuple[str, bool]:
        latex = self._spelling(name).latex
        return latex, len(latex) == 1


def _atomic(latex: str) -> str:
    return f"{{{latex}}}" if "^" in latex or "_" in latex else latex


class LatexCodegen(ExpressionCodegen):
    """latexify's expression codegen with the project's symbols (see the module doc)."""

    def __init__(self, spelling: Callable[[str], Notation]) -> None:
        super().__init__(use_math_symbols=True)
        self._identifier_converter = _Converter(spelling)

    def _reduction(self, node: ast.Call) -> str | None:
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name not in ("sum", "max") or not node.args \
                or not isinstance(node.args[0], ast.GeneratorExp):
            return None
        gen = node.args[0]
        scripts = []
        for comp in gen.generators:
            index = self.visit(comp.target)
            if name == "sum":
                count = self.visit(comp.iter.args[0])
                scripts.append(rf"\sum_{{{index} = 0}}^{{{count} - 1}}")
            else:
                scripts.append(rf"\max_{{{index}}}")
        body = self.visit(gen.elt)
        if isinstance(gen.elt, ast.BinOp) and isinstance(gen.elt.op, (ast.Add, ast.Sub)):
            body = rf"\left( {body} \right)"
        return " ".join(scripts) + " " + body

    def visit_Call(self, node: ast.Call) -> str:
        reduction = self._reduction(node)
        if reduction is not None:
            return reduction
        if isinstance(node.func, ast.Name) and node.func.id == "dot":
            left, right = (self.visit(a) for a in node.args)
            return rf"{left} \cdot {right}"
        return super().visit_Call(node)

    def visit_BinOp(self, node: ast.BinOp) -> str:
        if isinstance(node.op, ast.Pow) and isinstance(node.right, ast.BinOp) \
                and isinstance(node.right.op, ast.Div):
            rule = expression_rules.BIN_OP_RULES[ast.Pow]
            prec = expression_rules.get_precedence(node)
            base = self._wrap_binop_operand(node.left, prec, rule.operand_left)
            top = self.visit(node.right.left)
            bottom = self._wrap_operand(node.right.right, prec)
            return f"{base}^{{{top}/{bottom}}}"
        return super().visit_BinOp(node)

    def _should_remove_multiply_op(self, l_latex: str, r_latex: str, l_expr: ast.expr,
                                   r_expr: ast.expr) -> bool:
        return not r_latex[:1].isdigit()

    def visit_Subscript(self, node: ast.Subscript) -> str:
        value = _atomic(self.visit(node.value))
        index = node.slice
        parts = index.elts if isinstance(index, ast.Tuple) else [index]
        return f"{value}_{{{', '.join(self.visit(p) for p in parts)}}}"
