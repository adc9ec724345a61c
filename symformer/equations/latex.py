"""The LaTeX printer: an equation's tree (:mod:`symformer.equations.tree`) as a
displayed equation sets it, one method per node class.

Part of the render stage (:mod:`symformer.equations.render`).  It sets operators,
brackets and functions as latexify-py's expression codegen sets them (the project's
printed equations kept that form: ``\\mathopen{}\\left( .. \\mathclose{}\\right)``,
``\\frac{}{}``, cases for a conditional), and

* an identifier as the equation's symbol table spells it (``q``, ``d_k``, ``\\gamma``);
* an array entry as its symbol with the indices as subscript (:func:`entry_latex`:
  ``h_{i,j}``, ``\\left(W_{Q}\\right)_{m,j}``, ``\\frac{\\partial L}{\\partial
  \\alpha_{i,j}}``);
* sums and maxima over an index written ``\\sum_{k = 0}^{n - 1} e`` / ``\\max_{k} e``;
* a function as the function table writes it (:mod:`symformer.equations.functions`);
* a fraction in an exponent written inline (``10000^{2i/d}``), a floor division of
  an even size as a fraction (``d/2``), a fraction whose numerator holds a fraction
  factored out (``\\frac{1}{d} \\frac{\\partial L}{\\partial \\mu_{i}}``), ``\\tanh^{2}
  \\xi``, a power of a symbol with a script of its own bracketed
  (``(h^{(1)}_{i,j})^{3}``), and products of symbols by juxtaposition (``\\cdot``
  only before a number).

A node (or an operator) it does not know raises :class:`NotPrintable`, never a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from symformer import math_scripts as scripts
from symformer.equations import tree as t
from symformer.equations.functions import printed

_GRADIENT = scripts.GRADIENT_PREFIXES
#: The superscript saying where a symbol sits (``q^{(2)}``: :func:`symformer.notation.where`).
_LOCATED = re.compile(r"\^\{\(\d+(?:,\d+)*\)\}")


NotPrintable = t.NotPrintable


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


@dataclass(frozen=True)
class _Rule:
    """How a binary operator sets: its three pieces of LaTeX, whether each operand is
    bracketed when it binds less tightly (and, ``force``, as tightly), and whether
    the operator brackets itself (a child needs none)."""

    left: str
    middle: str
    right: str
    wrap: tuple[bool, bool] = (True, True)
    force: tuple[bool, bool] = (False, False)
    wrapped: bool = False


_RULES = {
    "+": _Rule("", " + ", ""),
    "-": _Rule("", " - ", "", force=(False, True)),
    "*": _Rule("", r" \cdot ", ""),
    "/": _Rule(r"\frac{", "}{", "}", wrap=(False, False)),
    "pow": _Rule("", "^{", "}", wrap=(True, False), force=(True, False)),
    "%": _Rule("", r" \mathbin{\%} ", "", force=(False, True)),
    "//": _Rule("", "/", "", wrap=(False, False), wrapped=True),
}
#: How tightly each operator binds (latexify's precedences).
_BINARY_PRECEDENCE = {"+": 90, "-": 90, "*": 100, "/": 100, "//": 100, "%": 100,
                      "pow": 120}
_UNARY, _COMPARE, _AND, _CALL, _ATOM = 110, 40, 20, 111, 1_000_000
_COMPARISONS = {">": ">", "<": "<", ">=": r"\ge", "<=": r"\le", "==": "=", "!=": r"\ne"}
_OPEN, _CLOSE = r"\mathopen{}\left( ", r" \mathclose{}\right)"


def precedence(node: t.Node) -> int:
    """How tightly ``node`` binds as an operand (an atom: tighter than anything)."""
    if isinstance(node, t.Binary):
        if node.op not in _BINARY_PRECEDENCE:
            raise NotPrintable(f"no LaTeX form for the operator {node.op!r}")
        return _BINARY_PRECEDENCE[node.op]
    if isinstance(node, t.Unary):
        return _UNARY
    if isinstance(node, t.Compare):
        return _COMPARE
    if isinstance(node, t.All):
        return _AND
    if isinstance(node, (t.Call, t.Reduce)):
        return _CALL
    return _ATOM


def number(node: t.Num) -> int | float:
    """A number as it was written (an int or a decimal; a whole number the claim reader
    gives without its text, as the int)."""
    if not node.text and node.value.denominator == 1:
        return int(node.value)
    if not node.text:
        raise NotPrintable(f"no printed form for the number {node.value}")
    return float(node.text) if any(c in node.text for c in ".e") else int(node.text)


class LatexPrinter(t.Printer):
    """The LaTeX of a tree's nodes, spelling identifiers with ``spelling``."""

    form = "LaTeX"

    # -- brackets (latexify's rules) ---------------------------------------------------
    def _wrap(self, child: t.Node, parent: int, force: bool = False) -> str:
        latex = self.visit(child)
        return f"{_OPEN}{latex}{_CLOSE}" if force or precedence(child) < parent else latex

    def _operand(self, child: t.Node, parent: int, wrap: bool, force: bool) -> str:
        if not wrap or (isinstance(child, t.Call) and child.name == "sqrt"):
            return self.visit(child)
        if not isinstance(child, t.Binary):
            return self._wrap(child, parent)
        latex = self.visit(child)
        if _RULES[child.op].wrapped:
            return latex
        prec = precedence(child)
        if prec > parent or (prec == parent and not force):
            return latex
        return f"{_OPEN}{latex}{_CLOSE}"

    # -- atoms ----------------------------------------------------------------------
    def num(self, node: t.Num) -> str:
        return str(number(node))

    def name(self, name: str) -> str:
        return scripts.display(self._spelling(name).latex)

    def sym(self, node: t.Sym) -> str:
        if node.sub or node.sup or node.primes or node.grad or node.bold:
            raise NotPrintable(f"no LaTeX form for the written symbol {node.show()}")
        return self.name(node.base)

    def entry(self, node: t.Entry) -> str:
        if not node.indices:
            return self.name(node.name)
        return entry_latex(self._spelling(node.name).latex,
                           [self.visit(p).replace(" ", "") for p in node.indices])

    # -- operators --------------------------------------------------------------------
    def unary(self, node: t.Unary) -> str:
        return "-" + self._wrap(node.operand, _UNARY)

    def binary(self, node: t.Binary) -> str:
        if node.op == "//":  # of an even size only (RoPE's d / 2)
            return f"{self.visit(node.left)}/{self.visit(node.right)}"
        if node.op == "/" and r"\frac" in self.visit(node.left):
            return self._reciprocal(node)  # 1/d times dL/dmu, not a fraction over one
        if node.op == "pow":
            powered = self._power(node)
            if powered is not None:
                return powered
        rule = _RULES.get(node.op)
        if rule is None:
            raise NotPrintable(f"no LaTeX form for the operator {node.op!r}")
        prec = precedence(node)
        lhs = self._operand(node.left, prec, rule.wrap[0], rule.force[0])
        rhs = self._operand(node.right, prec, rule.wrap[1], rule.force[1])
        if node.op == "*" and not rhs[:1].isdigit():
            return f"{lhs} {rhs}"  # juxtaposed, \cdot only before a number
        return f"{rule.left}{lhs}{rule.middle}{rhs}{rule.right}"

    def _power(self, node: t.Binary) -> str | None:
        """A power set as a textbook sets it, or None for the generic form."""
        left, right = node.left, node.right
        if isinstance(left, t.Call) and left.name in ("tanh", "sin", "cos") \
                and isinstance(right, t.Num) and len(left.args) == 1:
            call = self.visit(left)  # tanh^2 xi, as a textbook writes it
            name = printed(left.name).latex
            return f"{name}^{{{self.visit(right)}}}{call[len(name):]}"
        if isinstance(left, t.Entry) and left.indices:
            base = self.visit(left)
            if "^" in base or "'" in base:  # (h^{(1)}_{i,j})^3, never h^{(1)}_{i,j}{}^3
                return scripts.powered(base, self.visit(right))
        if isinstance(right, t.Binary) and right.op == "/":
            prec = precedence(node)
            base = self._operand(left, prec, True, True)
            bottom = self._wrap(right.right, prec)
            return f"{base}^{{{self.visit(right.left)}/{bottom}}}"  # 10000^{2i/d}
        return None

    def _reciprocal(self, node: t.Binary) -> str:
        """``c x / den`` as ``\\frac{c}{den} x`` (``c`` the numerator's number, 1 when it
        has none; a sum bracketed, a minus in front), the way a textbook factors a
        derivative out of a fraction."""
        sign, top = "", node.left
        if isinstance(top, t.Unary):
            sign, top = "-", top.operand
        coefficient, rest = _coefficient(top)
        if coefficient is None:
            coefficient, rest = 1, top
        if coefficient < 0:
            sign, coefficient = ("" if sign else "-"), -coefficient
        numerator = self.visit(rest)
        if isinstance(rest, t.Binary) and rest.op in ("+", "-"):
            numerator = rf"\left( {numerator} \right)"
        return rf"{sign}\frac{{{coefficient}}}{{{self.visit(node.right)}}} {numerator}"

    def compare(self, node: t.Compare) -> str:
        first, *rest = (self._wrap(x, _COMPARE) for x in node.operands)
        return first + "".join(f" {_COMPARISONS[op]} {r}" for op, r in zip(node.ops, rest))

    def all(self, node: t.All) -> str:
        return r" \land ".join(self._wrap(x, _AND) for x in node.conditions)

    def cases(self, node: t.Cases | t.Indicator) -> str:
        """One array of cases; cases in the otherwise continue it (as latexify sets
        ``a if c else (b if d else e)``)."""
        latex = r"\left\{ \begin{array}{ll} "
        rows = list(_rows(node))
        while rows:
            value, condition = rows.pop(0)
            if condition is None and isinstance(value, (t.Cases, t.Indicator)) and not rows:
                rows = list(_rows(value))
            elif condition is None:
                return (latex + self.visit(value)
                        + r", & \mathrm{otherwise} \end{array} \right.")
            else:
                latex += self.visit(value) + r", & \mathrm{if} \ " \
                    + self.visit(condition) + r" \\ "
        raise NotPrintable("a conditional without its otherwise")

    def indicator(self, node: t.Indicator) -> str:
        """1 where the condition holds, else 0: set as its cases."""
        return self.cases(node)

    # -- functions and reductions -----------------------------------------------------
    def call(self, node: t.Call) -> str:
        """A function of the function table: ``\\sqrt{ x }``, an operator ``\\exp x``
        with brackets only where the argument needs them, any other name with its
        arguments in brackets; a name not in the table raises."""
        fn = printed(node.name)
        if fn.key == "sqrt":
            return rf"\sqrt{{ {self.visit(node.args[0])} }}"
        if fn.operator and len(node.args) == 1:
            (arg,) = node.args
            force = isinstance(arg, t.Binary) and arg.op == "pow"
            return f"{fn.latex} {self._wrap(arg, _CALL, force)}"
        args = ", ".join(self.visit(arg) for arg in node.args)
        return rf"{fn.latex} {_OPEN}{args}{_CLOSE}"

    def reduce(self, node: t.Reduce) -> str:
        """``\\sum_{k = 0}^{n - 1} e`` (a sum of several terms bracketed), ``\\max_{k} e``."""
        (index,) = node.indices
        if node.op == "sum":
            count = count_of(node)
            limit = rf"\sum_{{{self.name(index)} = 0}}^{{{self.visit(count)} - 1}}"
        elif node.op == "max":
            limit = rf"\max_{{{self.name(index)}}}"
        else:
            raise NotPrintable(f"no LaTeX form for a reduction by {node.op!r}")
        body = self.visit(node.body)
        if isinstance(node.body, t.Binary) and node.body.op in ("+", "-"):
            body = rf"\left( {body} \right)"
        return f"{limit} {body}"


def _rows(node: t.Cases | t.Indicator) -> tuple[tuple[t.Node, t.Node | None], ...]:
    """A conditional's rows (value, condition; None: otherwise); an indicator's are 1
    where its condition holds, else 0."""
    if isinstance(node, t.Indicator):
        return ((t.Num(Fraction(1), "1"), node.condition), (t.Num(Fraction(0), "0"), None))
    return node.rows


def count_of(node: t.Reduce) -> t.Node:
    """How many terms a sum from 0 runs over: ``n`` of ``\\sum_{k=0}^{n-1}``."""
    high = node.high
    if not (isinstance(node.low, t.Num) and node.low.value == 0 and isinstance(high, t.Binary)
            and high.op == "-" and isinstance(high.right, t.Num) and high.right.value == 1):
        raise NotPrintable("a sum that does not run from 0 to a count minus 1")
    return high.left


def _coefficient(node: t.Node) -> tuple[int | float | None, t.Node | None]:
    """The number a product starts with and the rest: ``-2 * a * b`` -> (-2, a * b)."""
    if isinstance(node, t.Num):
        return number(node), None
    if isinstance(node, t.Unary) and isinstance(node.operand, t.Num):
        return -number(node.operand), None
    if isinstance(node, t.Binary) and node.op == "*":
        value, rest = _coefficient(node.left)
        if value is not None:
            return value, node.right if rest is None else t.Binary("*", rest, node.right)
    return None, None
