"""An index equation instantiated at concrete entries: exact SymPy values.

:func:`entries` runs every line of an :class:`~symformer.equations.ir.IndexEquation`
at every entry its left-hand side covers, over SymPy matrices bound to its arrays
(normally the stage symbols an operation's local formula is written over), so a
proof compares the result with the local formula exactly.  Only the validated
tree is walked (never ``eval``); a float literal is read as the exact decimal it is
written as (``0.044715`` is 44715/10**6), as the operations' own formulas read it.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from symformer.equations.ir import EquationError, IndexEquation, array_name, free_indices
from symformer.lazy import sympy


def _functions() -> dict[str, Any]:
    return {"exp": sympy.exp, "sqrt": sympy.sqrt, "tanh": sympy.tanh, "sin": sympy.sin,
            "cos": sympy.cos, "log": sympy.log, "erf": sympy.erf, "max": sympy.Max}


def _compare(op: ast.cmpop, a: Any, b: Any) -> Any:
    if isinstance(op, ast.Gt):
        return a > b
    if isinstance(op, ast.Lt):
        return a < b
    if isinstance(op, ast.GtE):
        return a >= b
    if isinstance(op, ast.LtE):
        return a <= b
    if isinstance(op, ast.Eq):
        return sympy.Eq(a, b) if isinstance(a, sympy.Basic) else a == b
    return sympy.Ne(a, b) if isinstance(a, sympy.Basic) else a != b


class Evaluator:
    """Exact values of an equation's expressions over bound arrays and indices."""

    def __init__(self, eq: IndexEquation, arrays: Mapping[str, sympy.Matrix],
                 sizes: Mapping[str, int]) -> None:
        self.eq, self.arrays, self.sizes = eq, arrays, sizes
        self.functions = _functions()

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

    def value(self, node: ast.AST, env: dict[str, Any]) -> Any:  # noqa: C901 (one dispatch)
        """The exact value of an expression tree (indices in ``env``)."""
        if isinstance(node, ast.Constant):
            v = node.value
            return sympy.Rational(repr(v)) if isinstance(v, float) else sympy.Integer(v)
        if isinstance(node, ast.Name):
            if node.id in env:
                return env[node.id]
            if node.id in self.sizes:
                return sympy.Integer(self.sizes[node.id])
            if node.id in self.eq.scalars:
                return sympy.sympify(self.eq.scalars[node.id])
            if node.id in self.arrays:
                return self.entry(node.id, [])
            return {"inf": sympy.oo, "pi": sympy.pi}[node.id]
        if isinstance(node, ast.Subscript):
            index = node.slice
            parts = index.elts if isinstance(index, ast.Tuple) else [index]
            return self.entry(node.value.id, [int(self.value(p, env)) for p in parts])
        if isinstance(node, ast.UnaryOp):
            v = self.value(node.operand, env)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp):
            a, b = self.value(node.left, env), self.value(node.right, env)
            op = type(node.op)
            if op is ast.Add:
                return a + b
            if op is ast.Sub:
                return a - b
            if op is ast.Mult:
                return a * b
            if op is ast.Div:
                return a / b
            if op is ast.Pow:
                return a ** b
            if op is ast.FloorDiv:
                return a // b
            return a % b
        if isinstance(node, ast.Compare):
            left, result = self.value(node.left, env), sympy.true
            for op, right in zip(node.ops, node.comparators):
                r = self.value(right, env)
                result = sympy.And(result, _compare(op, left, r))
                left = r
            return result
        if isinstance(node, ast.BoolOp):
            return sympy.And(*(self.value(v, env) for v in node.values))
        if isinstance(node, ast.IfExp):
            test = self.value(node.test, env)
            if test in (sympy.true, True):
                return self.value(node.body, env)
            if test in (sympy.false, False):
                return self.value(node.orelse, env)
            return sympy.Piecewise((self.value(node.body, env), test),
                                   (self.value(node.orelse, env), True))
        if isinstance(node, ast.Call):
            return self._call(node, env)
        raise EquationError(f"cannot evaluate {ast.unparse(node)!r}")

    def _call(self, node: ast.Call, env: dict[str, Any]) -> Any:
        name = node.func.id
        args = node.args
        if name in ("sum", "max") and isinstance(args[0], ast.GeneratorExp):
            gen = args[0]
            ranges = [range(int(self.value(c.iter.args[0], env))) for c in gen.generators]
            names = [c.target.id for c in gen.generators]
            terms = [self.value(gen.elt, {**env, **dict(zip(names, values))})
                     for values in itertools.product(*ranges)]
            return sympy.Add(*terms) if name == "sum" else sympy.Max(*terms)
        return self.functions[name](*(self.value(a, env) for a in args))


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
        limits = [int(evaluator.value(ast.parse(eq.ranges[n], mode="eval").body, {}))
                  if n in eq.ranges else bound for n in names]
        for values in itertools.product(*(range(limit) for limit in limits)):
            env = dict(zip(names, (sympy.Integer(v) for v in values)))
            index = [int(evaluator.value(p, env)) for p in parts]
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
            out[key] = (number, evaluator.value(value, env))
    return out
