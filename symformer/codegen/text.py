"""A tiny text codegen: the same transformed AST as latexify prints, for terminals.

It prints what :class:`~symformer.codegen.latex.LatexCodegen` prints, in plain
Unicode: ``α_j = exp(s_j) / Σ_{k=0}^{n−1} exp(s_k)``, ``y_j = γ_j (r_j − μ) /
√(σ² + ε) + β_j``.  Subtraction is a minus sign; products of symbols are
juxtaposed.  Only the nodes the operations' functions use are supported; any
other node raises, so a new operation's function cannot print silently wrong.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from symformer.notation_types import Notation

#: Binding strength of each operator (higher binds tighter).
_PREC = {ast.Add: 10, ast.Sub: 10, ast.Mult: 20, ast.MatMult: 20, ast.Div: 20, ast.Pow: 30,
         ast.FloorDiv: 20, ast.Mod: 20}
_OPS = {ast.Add: " + ", ast.Sub: " − ", ast.Mult: " ", ast.MatMult: " ", ast.Div: " / "}
_COMPARE = {ast.Gt: " > ", ast.Lt: " < ", ast.GtE: " ≥ ", ast.LtE: " ≤ ", ast.Eq: " = ",
            ast.NotEq: " ≠ "}
_SUPERSCRIPTS = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")
#: Functions printed with their argument in parentheses.
_FUNCTIONS = {"exp": "exp", "sin": "sin", "cos": "cos", "tanh": "tanh", "log": "log"}


def _precedence(node: ast.AST) -> int:
    if isinstance(node, ast.BinOp):
        return _PREC[type(node.op)]
    if isinstance(node, ast.UnaryOp):
        return 25
    if isinstance(node, (ast.IfExp, ast.Compare)):
        return 0
    return 100


class TextCodegen(ast.NodeVisitor):
    """Plain-text codegen over an expression AST, with a spelling for identifiers."""

    def __init__(self, spelling: Callable[[str], Notation]) -> None:
        self._spelling = spelling

    def generic_visit(self, node: ast.AST) -> str:
        raise NotImplementedError(f"no text form for {type(node).__name__}")

    def _wrap(self, node: ast.AST, parent: int, strict: bool = False) -> str:
        text = self.visit(node)
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
        prec = _PREC[type(node.op)]
        if isinstance(node.op, ast.Pow):
            base = self._wrap(node.left, prec, strict=True)
            if "^" in base and not base.startswith("("):
                base = f"({base})"  # (h^(1)_(i,j))³, as the LaTeX: no script on a script
            if isinstance(node.right, ast.Constant) and isinstance(node.right.value, int):
                return base + str(node.right.value).translate(_SUPERSCRIPTS)
            if isinstance(node.right, ast.Name) and node.right.id == "top":
                return base + self.visit(node.right)
            return f"{base}^({self.visit(node.right)})"
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
        return (f"{self.visit(node.body)} if {self.visit(node.test)}, "
                f"else {self.visit(node.orelse)}")

    def visit_Subscript(self, node: ast.Subscript) -> str:
        index = node.slice
        parts = [self.visit(p) for p in (index.elts if isinstance(index, ast.Tuple)
                                         else [index])]
        base = self.visit(node.value)
        return f"{base}_{parts[0]}" if len(parts) == 1 else f"{base}_({','.join(parts)})"

    def visit_Call(self, node: ast.Call) -> str:
        name = node.func.id if isinstance(node.func, ast.Name) else None
        args = node.args
        if name in ("sum", "max") and args and isinstance(args[0], ast.GeneratorExp):
            gen = args[0]
            scripts = []
            for comp in gen.generators:
                index = self.visit(comp.target)
                if name == "sum":
                    scripts.append(f"Σ_({index}=0..{self.visit(comp.iter.args[0])}−1)")
                else:
                    scripts.append(f"max_{index}")
            return " ".join(scripts) + " " + self._wrap(gen.elt, 20)
        if name == "dot":
            return " · ".join(self._wrap(a, 20) for a in args)
        if name == "sqrt":
            inner = self.visit(args[0])
            return f"√{inner}" if _precedence(args[0]) == 100 and len(inner) <= 3 \
                else f"√({inner})"
        function = _FUNCTIONS.get(name) or self.visit(node.func)
        return f"{function}({', '.join(self.visit(a) for a in args)})"
