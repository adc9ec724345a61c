"""An index equation instantiated at concrete entries: exact SymPy values.

:func:`entries` runs every line of an :class:`~symformer.equations.ir.IndexEquation`
at every entry its left-hand side covers, over SymPy matrices bound to its arrays
(normally the stage symbols an operation's local formula is written over), so a
proof compares the result with the local formula exactly.  Only the validated tree,
lowered to the one expression tree (:mod:`symformer.equations.tree`), is walked (never
``eval``), its functions SymPy's as the function table names them; a float literal is
read as the exact decimal it is written as (``0.044715`` is 44715/10**6), as the
operations' own formulas read it.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from symformer.equations import tree as t
from symformer.equations.functions import printed
from symformer.equations.ir import EquationError, IndexEquation, array_name, free_indices
from symformer.equations.latex import count_of
from symformer.equations.lower import lower
from symformer.lazy import sympy


def _compare(op: str, a: Any, b: Any) -> Any:
    if op == ">":
        return a > b
    if op == "<":
        return a < b
    if op == ">=":
        return a >= b
    if op == "<=":
        return a <= b
    if op == "==":
        return sympy.Eq(a, b) if isinstance(a, sympy.Basic) else a == b
    return sympy.Ne(a, b) if isinstance(a, sympy.Basic) else a != b


_BINARY = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
           "/": lambda a, b: a / b, "pow": lambda a, b: a ** b, "//": lambda a, b: a // b,
           "%": lambda a, b: a % b}


class Evaluator:
    """Exact values of an equation's expression trees (:mod:`symformer.equations.tree`,
    lowered from the declared lines) over bound arrays and indices."""

    def __init__(self, eq: IndexEquation, arrays: Mapping[str, sympy.Matrix],
                 sizes: Mapping[str, int]) -> None:
        self.eq, self.arrays, self.sizes = eq, arrays, sizes

    def entry(self, name: str, index: list[int]) -> sympy.Expr:
        """Entry ``index`` of array ``name`` (one index: a column's row, a row's column)."""
        m = self.arrays[name]
        if not index:
            if m.shape != (1, 1):
                raise EquationError(f"{name} is written bare but is {m.shape}")
            return m[0, 0]
        if len(index) == 1:
            if m.cols == 1:
                return m[index[0], 0]
            if m.rows == 1:
                return m[0, index[0]]
            raise EquationError(f"{name} has one index but is {m.shape}")
        i, j = index
        if not (0 <= i < m.rows and 0 <= j < m.cols):
            raise EquationError(f"{name}[{i}, {j}] is outside {m.shape}")
        return m[i, j]

    def value(self, node: t.Node, env: dict[str, Any]) -> Any:  # noqa: C901 (one dispatch)
        """The exact value of an expression tree (indices in ``env``); a number is the
        exact decimal it is written as."""
        if isinstance(node, t.Num):
            return sympy.Rational(node.value.numerator, node.value.denominator)
        if isinstance(node, t.Sym):
            return self.name(node.base, env)
        if isinstance(node, t.Entry):
            return self.entry(node.name, [int(self.value(p, env)) for p in node.indices])
        if isinstance(node, t.Unary):
            return -self.value(node.operand, env)
        if isinstance(node, t.Binary) and node.op in _BINARY:
            return _BINARY[node.op](self.value(node.left, env), self.value(node.right, env))
        if isinstance(node, t.Compare):
            left, result = self.value(node.operands[0], env), sympy.true
            for op, right in zip(node.ops, node.operands[1:]):
                r = self.value(right, env)
                result = sympy.And(result, _compare(op, left, r))
                left = r
            return result
        if isinstance(node, t.All):
            return sympy.And(*(self.value(v, env) for v in node.conditions))
        if isinstance(node, t.Indicator):
            return self.cases(((t.Num(Fraction(1)), node.condition),
                               (t.Num(Fraction(0)), None)), env)
        if isinstance(node, t.Cases):
            return self.cases(node.rows, env)
        if isinstance(node, t.Reduce):
            return self.reduce(node, env)
        if isinstance(node, t.Call):
            fn = printed(node.name)
            if not fn.sympy:
                raise EquationError(f"no exact value for the function {node.name!r}")
            return getattr(sympy, fn.sympy)(*(self.value(a, env) for a in node.args))
        raise EquationError(f"cannot evaluate a {type(node).__name__} node")

    def name(self, name: str, env: dict[str, Any]) -> Any:
        """An index, a size, a declared scalar, a bare 1 x 1 array, ∞ or π."""
        if name in env:
            return env[name]
        if name in self.sizes:
            return sympy.Integer(self.sizes[name])
        if name in self.eq.scalars:
            return sympy.sympify(self.eq.scalars[name])  # the operation's own constant
        if name in self.arrays:
            return self.entry(name, [])
        return {"inf": sympy.oo, "pi": sympy.pi}[name]

    def cases(self, rows: tuple[tuple[t.Node, t.Node | None], ...], env: dict[str, Any]
              ) -> Any:
        """The first row whose condition holds (decided here when it can be; else a
        Piecewise)."""
        (body, test_node), (orelse, _) = rows
        test = self.value(test_node, env)
        if test in (sympy.true, True):
            return self.value(body, env)
        if test in (sympy.false, False):
            return self.value(orelse, env)
        return sympy.Piecewise((self.value(body, env), test),
                               (self.value(orelse, env), True))

    def reduce(self, node: t.Reduce, env: dict[str, Any]) -> Any:
        """A sum or maximum over ``range(count)`` of each index in turn."""
        (index,) = node.indices
        count = int(self.value(count_of(node), env))
        terms = [self.value(node.body, {**env, index: sympy.Integer(k)}) for k in range(count)]
        return sympy.Add(*terms) if node.op == "sum" else sympy.Max(*terms)


def _lhs_parts(target: ast.expr) -> list[ast.expr]:
    if isinstance(target, ast.Name):
        return []
    index = target.slice
    return list(index.elts) if isinstance(index, ast.Tuple) else [index]


def entries(eq: IndexEquation, arrays: Mapping[str, sympy.Matrix], sizes: Mapping[str, int],
            shape: tuple[int, int],
            statements: Sequence[tuple[ast.expr, ast.expr]] | None = None
            ) -> dict[tuple[int, int], tuple[int, sympy.Expr]]:
    """(row, column) of the left-hand array -> (line number, the line's exact value there),
    for every entry of ``shape`` some line covers; an entry two lines cover is an error.
    ``statements``: the equation's trees with names renamed (default: its own)."""
    out: dict[tuple[int, int], tuple[int, sympy.Expr]] = {}
    evaluator = Evaluator(eq, arrays, sizes)
    bound = max(shape) + 1
    for number, (target, value) in enumerate(statements or eq.statements):
        names = free_indices(target, eq)
        parts = _lhs_parts(target)
        limits = [int(evaluator.value(lower(ast.parse(eq.ranges[n], mode="eval").body), {}))
                  if n in eq.ranges else bound for n in names]
        parts_tree, value_tree = [lower(p) for p in parts], lower(value)
        for values in itertools.product(*(range(limit) for limit in limits)):
            env = dict(zip(names, (sympy.Integer(v) for v in values)))
            index = [int(evaluator.value(p, env)) for p in parts_tree]
            if len(index) == 2:
                key = (index[0], index[1])
            elif len(index) == 1:
                key = (index[0], 0) if shape[1] == 1 else (0, index[0])
            else:
                key = (0, 0)
            if not (0 <= key[0] < shape[0] and 0 <= key[1] < shape[1]):
                continue
            if key in out:
                if out[key][0] != number:
                    raise EquationError(f"{array_name(target)}{list(key)} is defined twice")
                continue
            out[key] = (number, evaluator.value(value_tree, env))
    return out
