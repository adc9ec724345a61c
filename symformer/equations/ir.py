"""The equation IR: an operation's general equation in index notation, declared once.

An :class:`IndexEquation` is a few lines of a tiny Python-syntax index language,
``a[i, j] = g[i, j] / (1 + exp(-g[i, j])) * h[i, j]`` or ``dq[i, c] = sum(du[i, m] *
k[m, c] for m in range(n))``, over *named arrays* whose roles the operation states
(an input stage, its output, a parameter, the upstream gradient).  Every index is
bound: by the left-hand side (free indices, each entry of the stage) or by a
``sum``/``max`` over ``range(size)`` -- :func:`parse` refuses anything else, so a
declared equation cannot use an undefined symbol.  This is the parse stage
of :mod:`symformer.equations`: the same parsed tree, bound to a stage and transformed,
gives the LaTeX, text and MathML (:mod:`symformer.equations.render`), the exact SymPy
value of any entry (:mod:`symformer.equations.evaluate`, which the proofs compare with
the operation's local formula) and the plain form written to ``equations.json``.

An array written with one index is a column (n x 1: the index is the row, a
LayerNorm's mean ``mu[i]``) or a row (1 x d: the column, ``gamma[j]``); an array
written bare is 1 x 1 (the loss ``L``).  Only the operation's own source text is
parsed here (never user input).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from symformer.equations.functions import index_functions

#: Functions an equation may call (the plain form's vocabulary, documented in
#: docs/export.md): the function table's index functions, and ``sum``/``max`` over
#: ``range`` (:mod:`symformer.equations.functions`).
FUNCTIONS = index_functions()
#: Names every equation may use without declaring them.
CONSTANTS = frozenset({"inf", "pi"})
_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow, ast.FloorDiv, ast.Mod)
_COMPARES = (ast.Gt, ast.Lt, ast.GtE, ast.LtE, ast.Eq, ast.NotEq)


class EquationError(ValueError):
    """A declared equation that is not well formed (a programming error in an op)."""


@dataclass(frozen=True)
class IndexEquation:
    """An operation's general equation in index form, and what its names mean.

    ``lines`` are statements ``lhs = rhs`` (several when the entries are defined by
    cases of the left-hand index, as the sinusoidal encoding's even and odd
    columns); ``arrays`` maps each array name to its role: ``"in0"``, ``"in1"``, ...
    (the stage's inputs, in order), ``"out"`` (the stage itself; for a backward rule
    the consumer's output), ``"grad"`` (a backward rule's upstream gradient
    dL/d out), ``"result"`` (a backward rule's left-hand side) or ``"param:NAME"``
    (the operation's parameter NAME).  ``sizes`` maps a size name to (array name,
    axis) whose length it is; ``scalars`` maps a scalar's name to its exact value
    (``eps``); ``symbols`` overrides how a scalar or size prints (LaTeX, text).
    """

    lines: tuple[str, ...]
    arrays: Mapping[str, str]
    sizes: Mapping[str, tuple[str, int]] = field(default_factory=dict)
    scalars: Mapping[str, Any] = field(default_factory=dict)
    symbols: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    remark: str = ""
    #: A free index's range when it is not the whole axis (RoPE's pair c < d // 2).
    ranges: Mapping[str, str] = field(default_factory=dict)
    #: Named inner quantities, (line, what it is), printed after the lines and read into
    #: them wherever they are used (``xi[i, j] = sqrt(2 / pi) * (h[i, j] + ...)``: GELU's
    #: tanh argument); each is an array of role ``"let"`` written with the lines' indices.
    lets: tuple[tuple[str, str], ...] = ()

    @cached_property
    def statements(self) -> tuple[tuple[ast.expr, ast.expr], ...]:
        """Each line as (lhs, rhs) trees, validated (:func:`parse`)."""
        return tuple(parse(line, self) for line in self.lines)

    @cached_property
    def let_statements(self) -> tuple[tuple[ast.expr, ast.expr], ...]:
        """Each named inner quantity as (lhs, rhs) trees, validated."""
        out = tuple(parse(line, self) for line, _ in self.lets)
        for target, _ in out:
            if self.arrays.get(array_name(target)) != "let":
                raise EquationError(f"{ast.unparse(target)!r}: a let's array has role 'let'")
        return out

    def names_of(self, role: str) -> list[str]:
        """The array names with ``role``."""
        return [name for name, r in self.arrays.items() if r == role]


def _lhs_indices(target: ast.expr) -> list[ast.expr]:
    if isinstance(target, ast.Name):
        return []
    if isinstance(target, ast.Subscript):
        index = target.slice
        return list(index.elts) if isinstance(index, ast.Tuple) else [index]
    raise EquationError(f"left-hand side {ast.unparse(target)!r} is not an array entry")


def array_name(node: ast.expr) -> str:
    """The array an entry ``a[i, j]`` (or a bare 1 x 1 array ``L``) reads."""
    return node.value.id if isinstance(node, ast.Subscript) else node.id


def free_indices(target: ast.expr, eq: IndexEquation) -> list[str]:
    """The free indices of a left-hand side (its names other than sizes and scalars),
    in order of appearance."""
    found: list[str] = []
    fixed = set(eq.sizes) | set(eq.scalars)
    for index in _lhs_indices(target):
        for node in ast.walk(index):
            if isinstance(node, ast.Name) and node.id not in found and node.id not in fixed:
                found.append(node.id)
    return found


def parse(line: str, eq: IndexEquation) -> tuple[ast.expr, ast.expr]:
    """``lhs = rhs`` as two expression trees, refusing any node, name or unbound index
    outside the index language (see the module doc)."""
    try:
        module = ast.parse(line, mode="exec")
    except SyntaxError as error:
        raise EquationError(f"{line!r}: {error.msg}") from None
    if len(module.body) != 1 or not isinstance(module.body[0], ast.Assign) \
            or len(module.body[0].targets) != 1:
        raise EquationError(f"{line!r}: not one assignment lhs = rhs")
    statement = module.body[0]
    target, value = statement.targets[0], statement.value
    if array_name(target) not in eq.arrays:
        raise EquationError(f"{line!r}: {array_name(target)!r} is not a declared array")
    bound = set(free_indices(target, eq))
    for index in _lhs_indices(target):
        _check(index, eq, bound, line)
    _check(value, eq, bound, line)
    return target, value


def _check(node: ast.AST, eq: IndexEquation, bound: set[str], line: str) -> None:
    """Every node of ``node`` is in the language and every name is bound or declared."""
    def fail(what: str) -> None:
        raise EquationError(f"{line!r}: {what}")

    if isinstance(node, ast.Constant):
        if type(node.value) not in (int, float):
            fail(f"constant {node.value!r}")
    elif isinstance(node, ast.Name):
        known = bound | set(eq.sizes) | set(eq.scalars) | CONSTANTS
        if node.id in eq.arrays:
            return  # a bare 1 x 1 array
        if node.id not in known:
            fail(f"unbound name {node.id!r}")
    elif isinstance(node, ast.BinOp) and isinstance(node.op, _BINOPS):
        _check(node.left, eq, bound, line)
        _check(node.right, eq, bound, line)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        _check(node.operand, eq, bound, line)
    elif isinstance(node, ast.Subscript):
        if not isinstance(node.value, ast.Name) or node.value.id not in eq.arrays:
            fail(f"{ast.unparse(node)!r} does not index a declared array")
        index = node.slice
        for part in index.elts if isinstance(index, ast.Tuple) else [index]:
            _check(part, eq, bound, line)
    elif isinstance(node, ast.IfExp):
        for part in (node.test, node.body, node.orelse):
            _check(part, eq, bound, line)
    elif isinstance(node, ast.Compare) and all(isinstance(o, _COMPARES) for o in node.ops):
        for part in (node.left, *node.comparators):
            _check(part, eq, bound, line)
    elif isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        for part in node.values:
            _check(part, eq, bound, line)
    elif isinstance(node, ast.Call):
        _check_call(node, eq, bound, line, fail)
    else:
        fail(f"{type(node).__name__} is not in the index language")


def _check_call(node: ast.Call, eq: IndexEquation, bound: set[str], line: str,
                fail: Any) -> None:
    name = node.func.id if isinstance(node.func, ast.Name) else None
    if name not in FUNCTIONS or name == "range" or node.keywords:
        fail(f"call of {ast.unparse(node.func)!r}")
    args = node.args
    if name in ("sum", "max") and len(args) == 1 and isinstance(args[0], ast.GeneratorExp):
        inner = set(bound)
        for comp in args[0].generators:
            if comp.ifs or not isinstance(comp.target, ast.Name) \
                    or not (isinstance(comp.iter, ast.Call) and isinstance(comp.iter.func, ast.Name)
                            and comp.iter.func.id == "range" and len(comp.iter.args) == 1):
                fail("a reduction runs over `for k in range(size)` only")
            _check(comp.iter.args[0], eq, inner, line)
            if comp.target.id in inner:
                fail(f"index {comp.target.id!r} bound twice")
            inner.add(comp.target.id)
        _check(args[0].elt, eq, inner, line)
        return
    if name == "sum":
        fail("sum takes one generator over range(size)")
    for arg in args:
        _check(arg, eq, bound, line)
