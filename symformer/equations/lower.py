"""An index equation's validated Python tree, lowered to the one expression tree.

:mod:`symformer.equations.ir` declares an operation's equation in a Python-syntax index
language and validates it (``ast``); the transform stage rewrites that tree as a
textbook writes it.  :func:`lower` then gives the nodes of
:mod:`symformer.equations.tree` -- the nodes the claim reader gives an author's LaTeX --
which the printers dispatch on: a name is a :class:`~.tree.Sym`, an array's entry an
:class:`~.tree.Entry`, ``sum``/``max`` over ``range(n)`` a :class:`~.tree.Reduce` from 0
to ``n - 1`` (one per generator), a conditional a :class:`~.tree.Cases` (``(1 if c
else 0)`` an :class:`~.tree.Indicator`).  A node outside
the index language raises (:class:`~.ir.EquationError`).
"""

from __future__ import annotations

import ast
from fractions import Fraction

from symformer.equations import tree as t

_BINARY = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "pow",
           ast.FloorDiv: "//", ast.Mod: "%"}
_COMPARE = {ast.Gt: ">", ast.Lt: "<", ast.GtE: ">=", ast.LtE: "<=", ast.Eq: "==",
            ast.NotEq: "!="}


class LoweringError(ValueError):
    """A node outside the index language (a programming error in an operation)."""


def lower(node: ast.expr) -> t.Node:
    """The expression tree of an index-language expression or left-hand side."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return t.Num(Fraction(str(node.value)), str(node.value))
    if isinstance(node, ast.Name):
        return t.Sym(node.id)
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        index = node.slice
        parts = index.elts if isinstance(index, ast.Tuple) else [index]
        return t.Entry(node.value.id, tuple(lower(p) for p in parts))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return t.Binary(_BINARY[type(node.op)], lower(node.left), lower(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return t.Unary(lower(node.operand))
    if isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
        return t.Compare(tuple(_COMPARE[type(op)] for op in node.ops),
                         tuple(lower(x) for x in (node.left, *node.comparators)))
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        return t.All(tuple(lower(x) for x in node.values))
    if isinstance(node, ast.IfExp) and _written(node.body, 1) and _written(node.orelse, 0):
        return t.Indicator(lower(node.test))  # (1 if c else 0): the indicator of c
    if isinstance(node, ast.IfExp):  # a if c else (b if d else e): cases in the otherwise
        return t.Cases(((lower(node.body), lower(node.test)), (lower(node.orelse), None)))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        return _call(node)
    raise LoweringError(f"{ast.unparse(node)!r}: not in the index language")


def _written(node: ast.expr, value: int) -> bool:
    """Is ``node`` the integer ``value`` written as such (``1``, not ``1.0``)?"""
    return isinstance(node, ast.Constant) and type(node.value) is int and node.value == value


def _call(node: ast.Call) -> t.Node:
    name = node.func.id
    args = node.args
    if name in ("sum", "max") and len(args) == 1 and isinstance(args[0], ast.GeneratorExp):
        body = lower(args[0].elt)
        for comp in reversed(args[0].generators):  # the first generator outermost
            (count,) = comp.iter.args
            body = t.Reduce(name, (comp.target.id,), t.Num(Fraction(0)),
                            t.Binary("-", lower(count), t.Num(Fraction(1), "1")), body)
        return body
    return t.Call(name, tuple(lower(a) for a in args))
