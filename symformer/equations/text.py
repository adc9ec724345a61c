"""The text codegen: the same transformed tree the LaTeX codegen prints, for terminals.

Part of the render stage (:mod:`symformer.equations.render`).  It prints what
:class:`~symformer.equations.latex.LatexCodegen` prints, in plain Unicode:
``α_(i,j) = exp(s_(i,j)) / Σ_(m=0..n−1) exp(s_(i,m))``, ``y_(i,j) = γ_j (r_(i,j) −
μ_i) / √(σ²_i + ε) + β_j``.  Subtraction is a minus sign; products of symbols are
juxtaposed; an indicator ``(1 if c else 0)`` is ``𝟙[c]``.  Only the nodes of the
index language (:mod:`symformer.equations.ir`) are supported; any other node
raises, so a new operation's equation cannot print silently wrong.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from symformer import math_scripts as scripts
from symformer.equations.functions import printed
from symformer.notation_types import Notation

#: Binding strength of each operator (higher binds tighter).
_PREC = {ast.Add: 10, ast.Sub: 10, ast.Mult: 20, ast.Div: 20, ast.Pow: 30,
         ast.FloorDiv: 20, ast.Mod: 20}
_OPS = {ast.Add: " + ", ast.Sub: " − ", ast.Mult: " ", ast.Div: " / "}
_COMPARE = {ast.Gt: " > ", ast.Lt: " < ", ast.GtE: " ≥ ", ast.LtE: " ≤ ", ast.Eq: " = ",
            ast.NotEq: " ≠ "}
_SUPERSCRIPTS = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


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


def _indicator(node: ast.IfExp) -> bool:
    def constant(e: ast.expr, v: int) -> bool:
        return isinstance(e, ast.Constant) and e.value == v
    return constant(node.body, 1) and constant(node.orelse, 0)


def _precedence(node: ast.AST) -> int:
    if isinstance(node, ast.BinOp):
        return _PREC[type(node.op)]
    if isinstance(node, ast.UnaryOp):
        return 25
    if isinstance(node, (ast.IfExp, ast.Compare)):
        return 0
    return 100


class TextCodegen(ast.NodeVisitor):
    """Plain-text codegen over an equation's tree, with a spelling for identifiers."""

    def __init__(self, spelling: Callable[[str], Notation]) -> None:
        self._spelling = spelling

    def generic_visit(self, node: ast.AST) -> str:
        raise NotImplementedError(f"no text form for {type(node).__name__}")

    def _wrap(self, node: ast.AST, parent: int, strict: bool = False) -> str:
        text = self.visit(node)
        if isinstance(node, ast.IfExp) and _indicator(node):
            return text  # 𝟙[…] is bracketed already
        child = _precedence(node)
        return f"({text})" if child < parent or (strict and child == parent) else text

    def visit_Name(self, node: ast.Name) -> str:
        return self._spelling(node.id).text

    def visit_Constant(self, node: ast.Constant) -> str:
        return str(node.value)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> str:
        sign = {ast.USub: "−", ast.UAdd: "+"}[type(node.op)]
        return sign + self._wrap(node.operand, 25)

    def visit_BinOp(self, node: ast.BinOp) -> str:
        if isinstance(node.op, ast.FloorDiv):  # of an even size only (RoPE's d / 2)
            return f"{self.visit(node.left)}/{self.visit(node.right)}"
        prec = _PREC[type(node.op)]
        if isinstance(node.op, ast.Pow):
            base = self._wrap(node.left, prec, strict=True)
            if not (isinstance(node.right, ast.Constant) and isinstance(node.right.value, int)):
                return f"{base}^({self.visit(node.right)})"
            if "^" in base and not base.startswith("("):
                base = f"({base})"  # (h^(1)_(i,j))³, as the LaTeX: no script on a script
            return base + str(node.right.value).translate(_SUPERSCRIPTS)
        left = self._wrap(node.left, prec)
        strict = isinstance(node.op, (ast.Sub, ast.Div))
        right = self._wrap(node.right, prec, strict=strict)
        if isinstance(node.op, ast.Div) and isinstance(node.left, ast.Constant):
            return f"{left}/{right}"  # a coefficient: 1/d
        if isinstance(node.op, ast.Mult) and isinstance(node.left, ast.BinOp) \
                and isinstance(node.left.op, ast.Div):
            left = f"({left})"  # (1/d) Σ ..., not 1/d Σ ...
        if isinstance(node.op, ast.Mult) and right[:1] in tuple("0123456789"):
            return f"{left}·{right}"  # 3·0.044715: two numbers are never juxtaposed
        return left + _OPS[type(node.op)] + right

    def visit_Compare(self, node: ast.Compare) -> str:
        parts = [self._wrap(node.left, 5)]
        for op, right in zip(node.ops, node.comparators):
            parts += [_COMPARE[type(op)], self._wrap(right, 5)]
        return "".join(parts)

    def visit_IfExp(self, node: ast.IfExp) -> str:
        if _indicator(node):
            return f"𝟙[{self.visit(node.test)}]"
        return (f"{self.visit(node.body)} if {self.visit(node.test)}, "
                f"else {self.visit(node.orelse)}")

    def visit_Subscript(self, node: ast.Subscript) -> str:
        index = node.slice
        parts = index.elts if isinstance(index, ast.Tuple) else [index]
        return entry_text(self._spelling(node.value.id).text,
                          [self.visit(p).replace(" ", "") for p in parts])

    def visit_Call(self, node: ast.Call) -> str:
        name = node.func.id if isinstance(node.func, ast.Name) else None
        args = node.args
        if name in ("sum", "max") and args and isinstance(args[0], ast.GeneratorExp):
            gen = args[0]
            limits = []
            for comp in gen.generators:
                index = self.visit(comp.target)
                if name == "sum":
                    limits.append(f"Σ_({index}=0..{self.visit(comp.iter.args[0])}−1)")
                else:
                    limits.append(f"max_{index}")
            return " ".join(limits) + " " + self._wrap(gen.elt, 20)
        if name == "sqrt":
            inner = self.visit(args[0])
            return f"√{inner}" if _precedence(args[0]) == 100 and len(inner) <= 3 \
                else f"√({inner})"
        function = printed(name).text  # an unknown function raises
        return f"{function}({', '.join(self.visit(a) for a in args)})"
