"""The text printer: the tree the LaTeX printer prints, for terminals.

Part of the render stage (:mod:`symformer.equations.render`).  It prints what
:class:`~symformer.equations.latex.LatexPrinter` prints, in plain Unicode, one method
per node class of :mod:`symformer.equations.tree`:
``α_(i,j) = exp(s_(i,j)) / Σ_(m=0..n−1) exp(s_(i,m))``, ``y_(i,j) = γ_j (r_(i,j) −
μ_i) / √(σ²_i + ε) + β_j``.  Subtraction is a minus sign; products of symbols are
juxtaposed; an indicator (cases 1 if c, else 0) is ``𝟙[c]``.  A node or operator
without a text form raises, so a new operation's equation cannot print silently wrong.
"""

from __future__ import annotations

from symformer import math_scripts as scripts
from symformer.equations import tree as t
from symformer.equations.functions import printed
from symformer.equations.latex import NotPrintable, count_of, number

#: Binding strength of each operator (higher binds tighter).
_PREC = {"+": 10, "-": 10, "*": 20, "/": 20, "pow": 30, "//": 20}
_OPS = {"+": " + ", "-": " − ", "*": " ", "/": " / "}
_COMPARE = {">": " > ", "<": " < ", ">=": " ≥ ", "<=": " ≤ ", "==": " = ", "!=": " ≠ "}
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


def _indicator(node: t.Node) -> bool:
    """An indicator, or cases 1 if c, else 0."""
    def constant(e: t.Node, v: int) -> bool:
        return isinstance(e, t.Num) and e.value == v
    return isinstance(node, t.Indicator) or (
        isinstance(node, t.Cases) and len(node.rows) == 2
        and constant(node.rows[0][0], 1) and constant(node.rows[1][0], 0))


def _precedence(node: t.Node) -> int:
    if isinstance(node, t.Binary):
        if node.op not in _PREC:
            raise NotPrintable(f"no text form for the operator {node.op!r}")
        return _PREC[node.op]
    if isinstance(node, t.Unary):
        return 25
    if isinstance(node, (t.Cases, t.Indicator, t.Compare)):
        return 0
    return 100


def _integer(node: t.Node) -> int | None:
    """A whole-number exponent as written (``2``), else None."""
    if isinstance(node, t.Num):
        value = number(node)
        return value if isinstance(value, int) else None
    return None


class TextPrinter(t.Printer):
    """Plain text of a tree's nodes, with a spelling for identifiers."""

    form = "text"

    def _wrap(self, node: t.Node, parent: int, strict: bool = False) -> str:
        text = self.visit(node)
        if _indicator(node):
            return text  # 𝟙[…] is bracketed already
        child = _precedence(node)
        return f"({text})" if child < parent or (strict and child == parent) else text

    def num(self, node: t.Num) -> str:
        return str(number(node))

    def sym(self, node: t.Sym) -> str:
        if node.sub or node.sup or node.primes or node.grad or node.bold:
            raise NotPrintable(f"no text form for the written symbol {node.show()}")
        return self._spelling(node.base).text

    def entry(self, node: t.Entry) -> str:
        if not node.indices:
            return self._spelling(node.name).text
        return entry_text(self._spelling(node.name).text,
                          [self.visit(p).replace(" ", "") for p in node.indices])

    def unary(self, node: t.Unary) -> str:
        return "−" + self._wrap(node.operand, 25)

    def binary(self, node: t.Binary) -> str:
        if node.op == "//":  # of an even size only (RoPE's d / 2)
            return f"{self.visit(node.left)}/{self.visit(node.right)}"
        prec = _precedence(node)
        if node.op == "pow":
            base = self._wrap(node.left, prec, strict=True)
            power = _integer(node.right)
            if power is None:
                return f"{base}^({self.visit(node.right)})"
            if "^" in base and not base.startswith("("):
                base = f"({base})"  # (h^(1)_(i,j))³, as the LaTeX: no script on a script
            return base + str(power).translate(_SUPERSCRIPTS)
        if node.op not in _OPS:
            raise NotPrintable(f"no text form for the operator {node.op!r}")
        left = self._wrap(node.left, prec)
        right = self._wrap(node.right, prec, strict=node.op in ("-", "/"))
        if node.op == "/" and isinstance(node.left, t.Num):
            return f"{left}/{right}"  # a coefficient: 1/d
        if node.op == "*" and isinstance(node.left, t.Binary) and node.left.op == "/":
            left = f"({left})"  # (1/d) Σ ..., not 1/d Σ ...
        if node.op == "*" and right[:1] in tuple("0123456789"):
            return f"{left}·{right}"  # 3·0.044715: two numbers are never juxtaposed
        return left + _OPS[node.op] + right

    def compare(self, node: t.Compare) -> str:
        first, *rest = node.operands
        parts = [self._wrap(first, 5)]
        for op, right in zip(node.ops, rest):
            parts += [_COMPARE[op], self._wrap(right, 5)]
        return "".join(parts)

    def indicator(self, node: t.Indicator) -> str:
        return f"𝟙[{self.visit(node.condition)}]"

    def cases(self, node: t.Cases) -> str:
        if _indicator(node):
            return f"𝟙[{self.visit(node.rows[0][1])}]"
        out = ""
        for value, condition in node.rows:
            if condition is None:
                return out + self.visit(value)
            out += f"{self.visit(value)} if {self.visit(condition)}, else "
        raise NotPrintable("a conditional without its otherwise")

    def reduce(self, node: t.Reduce) -> str:
        (index,) = node.indices
        name = self._spelling(index).text
        if node.op == "sum":
            limit = f"Σ_({name}=0..{self.visit(count_of(node))}−1)"
        elif node.op == "max":
            limit = f"max_{name}"
        else:
            raise NotPrintable(f"no text form for a reduction by {node.op!r}")
        return f"{limit} {self._wrap(node.body, 20)}"

    def call(self, node: t.Call) -> str:
        if node.name == "sqrt":
            (arg,) = node.args
            inner = self.visit(arg)
            return f"√{inner}" if _precedence(arg) == 100 and len(inner) <= 3 \
                else f"√({inner})"
        function = printed(node.name).text  # an unknown function raises
        return f"{function}({', '.join(self.visit(a) for a in node.args)})"
