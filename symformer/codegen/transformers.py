"""Small AST transformers, in latexify's style, from NumPy code to textbook notation.

Each one rewrites one NumPy idiom of the operations' reference functions into
the mathematical expression it computes, so latexify's codegen (and the text
codegen beside it) print mathematics rather than code.  They change notation,
never value: every rewrite is an identity on the arrays the function computes.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping

#: Reductions over an axis that are written with an index: np.sum -> Σ, np.max -> max.
REDUCTIONS = ("sum", "max")


def _name(node: ast.AST) -> str | None:
    """The called function's name (``np.`` already trimmed by latexify's PrefixTrimmer)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id
    return None


def _axis(node: ast.Call) -> object:
    """The ``axis=`` keyword of a call as a Python value (None when absent)."""
    for keyword in node.keywords:
        if keyword.arg == "axis":
            return ast.literal_eval(keyword.value)
    return None


def call(name: str, *args: ast.expr) -> ast.Call:
    """``name(*args)`` as an AST node."""
    return ast.Call(func=ast.Name(id=name, ctx=ast.Load()), args=list(args), keywords=[])


class DropMaxShift(ast.NodeTransformer):
    """``x - np.max(x, axis=-1, keepdims=True)`` -> ``x`` inside a softmax.

    The code subtracts each row's maximum before ``exp`` so that nothing
    overflows; the ratio exp(x_j - M) / Σ_k exp(x_k - M) equals exp(x_j) / Σ_k exp(x_k)
    exactly, which is what the textbook writes (the operation's remark says so).
    """

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        right = node.right
        if (isinstance(node.op, ast.Sub) and _name(right) == "max" and _axis(right) == -1
                and len(right.args) == 1 and ast.dump(right.args[0]) == ast.dump(node.left)):
            return node.left
        return node


class NumpyCalls(ast.NodeTransformer):
    """NumPy calls as the mathematics they compute.

    * ``np.where(c, a, b)`` -> ``a if c else b`` (latexify prints cases);
    * ``np.maximum(a, b)`` -> ``max(a, b)``;
    * ``np.full(shape, v)`` -> ``v`` (a value repeated over the shape);
    * ``np.zeros(shape)`` -> ``0``;
    * ``np.concatenate([a, b], axis=-1)`` -> ``concatenate(a, b)`` (printed Concat);
    * ``A @ B.T`` -> ``dot(A, B)`` (rows against rows: q·k_j) in an equation written
      for an entry (``dot``), any other ``B.T`` -> ``B ** top`` (printed B^⊤): a
      matrix-form equation keeps ``A B^⊤`` (a backward rule's ``g @ W.T``).
    """

    def __init__(self, dot: bool = True) -> None:
        self._dot = dot

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        name, args = _name(node), node.args
        if name == "where" and len(args) == 3:
            return ast.IfExp(test=args[0], body=args[1], orelse=args[2])
        if name == "maximum":
            return call("max", *args)
        if name == "full" and len(args) == 2:
            return args[1]
        if name == "zeros":
            return ast.Constant(value=0)
        if name == "concatenate" and isinstance(args[0], (ast.List, ast.Tuple)):
            return call("concatenate", *args[0].elts)
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        right = node.right
        if (self._dot and isinstance(node.op, ast.MatMult) and isinstance(right, ast.Attribute)
                and right.attr == "T"):
            return call("dot", self.visit(node.left), self.visit(right.value))
        self.generic_visit(node)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if node.attr == "T":
            return ast.BinOp(left=node.value, op=ast.Pow(), right=ast.Name(id="top",
                                                                         ctx=ast.Load()))
        return node


class Indexer(ast.NodeTransformer):
    """Array names as indexed entries, reductions as sums with their index.

    ``indexed`` names (arrays whose entries the equation writes) get the current
    index: outside any reduction the equation's own ``index`` (``h`` -> ``h_j``);
    inside ``np.sum(e, axis=-1)`` or ``np.max(e, axis=-1)`` the reduction's
    ``axis`` = (index, count), and the call becomes
    ``sum(e_k for k in range(count))`` -- latexify's own form of a sum, printed
    Σ_{k=0}^{count-1}.  A reduction over the rows (``axis=0``) runs over i < n: inside
    it ``indexed`` names get i before the current index (``g_{i,j}``), ``rows`` names
    i alone (a row, in matrix form) and ``per_row`` names (one value per row) i alone;
    ``per_row`` names have no index elsewhere.  A reduction with no axis runs over
    every entry (i over n rows, j over d columns).
    """

    def __init__(self, indexed: frozenset[str], index: str | None,
                 axis: tuple[str, str], rows: frozenset[str] = frozenset(),
                 per_row: frozenset[str] = frozenset()) -> None:
        self._indexed, self._rows, self._per_row = indexed, rows, per_row
        self._current: tuple[str, ...] = (index,) if index else ()
        self._axis = axis
        self._row: str | None = None  # the row index, inside a reduction over the rows

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self._per_row:
            current: tuple[str, ...] = (self._row,) if self._row else ()
        elif node.id in self._indexed or node.id in self._rows and self._row:
            current = self._current
        else:
            return node
        if not current:
            return node
        names = [ast.Name(id=i, ctx=ast.Load()) for i in current]
        index = names[0] if len(names) == 1 else ast.Tuple(elts=names, ctx=ast.Load())
        return ast.Subscript(value=node, slice=index, ctx=ast.Load())

    def visit_Call(self, node: ast.Call) -> ast.AST:
        name = _name(node)
        if name not in REDUCTIONS or len(node.args) != 1:
            self.generic_visit(node)
            return node
        axis = _axis(node)
        outer, outer_row = self._current, self._row
        if axis == 0:
            ranges = [("i", "n")]
            self._current, self._row = ("i", *outer), "i"
        else:
            ranges = [self._axis] if axis == -1 else [("i", "n"), ("j", "d")]
            self._current = tuple(i for i, _ in ranges)
        body = self.visit(node.args[0])
        self._current, self._row = outer, outer_row
        generators = [ast.comprehension(
            target=ast.Name(id=i, ctx=ast.Store()),
            iter=call("range", ast.Name(id=count, ctx=ast.Load())), ifs=[], is_async=0)
            for i, count in ranges]
        return call(name, ast.GeneratorExp(elt=body, generators=generators))


class DropOne(ast.NodeTransformer):
    """``1 * x``, ``x * 1`` and ``x / 1`` -> ``x`` (a parameter spelled 1: the loss's
    own gradient dL/dL in a backward rule)."""

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)

        def one(e: ast.expr) -> bool:
            return isinstance(e, ast.Constant) and e.value == 1

        if isinstance(node.op, ast.Mult) and one(node.left):
            return node.right
        if isinstance(node.op, (ast.Mult, ast.Div)) and one(node.right):
            return node.left
        return node


class Substitute(ast.NodeTransformer):
    """Names replaced by expressions (a parameter by its role's symbol or expression)."""

    def __init__(self, replacements: Mapping[str, ast.expr]) -> None:
        self._replacements = replacements

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return self._replacements.get(node.id, node)


class Inline(ast.NodeTransformer):
    """A name (or its entry ``name_j``) replaced by the expression that defines it."""

    def __init__(self, name: str, index: str | None, expression: ast.expr) -> None:
        self._name, self._index, self._expression = name, index, expression

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        if (isinstance(node.value, ast.Name) and node.value.id == self._name
                and isinstance(node.slice, ast.Name) and node.slice.id == self._index):
            return self._expression
        self.generic_visit(node)
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return self._expression if node.id == self._name and self._index is None else node
