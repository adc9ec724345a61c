"""The transform stage: an equation's parsed trees written as a textbook writes them.

Between parsing (:mod:`symformer.equations.ir`) and rendering
(:mod:`symformer.equations.render`), in latexify-py's style: small passes over the
trees, each changing notation, never value --

* :func:`printed_names` and :func:`renamed`: each array named as it prints (``k``,
  ``W_Q``) and a sum's index moved off a letter the equation already uses (the
  attention output ``m`` summed over ``m``);
* :func:`index_swap` and :func:`rename_indices`: a gradient's contribution written
  with the free indices of the sum it is a term of;
* :func:`inline_lets`: a named inner quantity (GELU's ``xi``) read into the lines
  that use it, the form that is evaluated and proved;
* :class:`DropOne` and :func:`constant_grad`: the loss's own gradient dL/dL = 1
  written as the number, ``1 * x`` as ``x``.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Mapping, Sequence
from dataclasses import replace

from symformer.equations.ir import CONSTANTS, FUNCTIONS, IndexEquation, free_indices
from symformer.equations.render import plain

Trees = list[tuple[ast.expr, ast.expr]]

#: Letters a sum's index takes, in order of preference (the first that clashes with
#: no symbol of the equation).
_SUM_INDICES = ("jp", "ip", "l", "r", "t", "k")


class Rename(ast.NodeTransformer):
    """Every name in ``names`` renamed."""

    def __init__(self, names: Mapping[str, str]) -> None:
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.Name:
        return ast.Name(id=self.names.get(node.id, node.id), ctx=node.ctx)


class _RenameIndices(Rename):
    """Index names renamed, array names (an entry's base, a bare 1 x 1 array) kept."""

    def __init__(self, names: Mapping[str, str], arrays: set[str]) -> None:
        super().__init__(names)
        self.arrays = arrays

    def visit_Name(self, node: ast.Name) -> ast.Name:
        return node if node.id in self.arrays else super().visit_Name(node)


def printed_names(eq: IndexEquation, texts: Mapping[str, str]) -> dict[str, str]:
    """Each array name -> the name it is written with: its symbol's text (``texts``)
    when that is a plain identifier (``k``, ``W_Q``; ``alpha`` stays: ``α`` is not
    ASCII) clashing with no other name, else its own; all their own names when two
    would clash."""
    taken = set(eq.sizes) | set(eq.scalars) | set(CONSTANTS) | set(FUNCTIONS)
    arrays: dict[str, str] = {}
    for name in eq.arrays:
        text = texts[name]
        wanted = text if text.isidentifier() and text.isascii() and text not in taken \
            and text not in arrays.values() else name
        if wanted in arrays.values() or wanted in taken:
            wanted = name
        arrays[name] = wanted
    if len(set(arrays.values())) != len(arrays):
        arrays = {name: name for name in eq.arrays}
    return arrays


def renamed(statements: Sequence[tuple[ast.expr, ast.expr]], arrays: Mapping[str, str],
            eq: IndexEquation, shown: set[str]) -> Trees:
    """The trees with each array renamed (``arrays``, from :func:`printed_names`), and
    each sum's index renamed when its letter is one of the symbols ``shown``."""
    out = []
    for target, value in statements:
        target, value = Rename(arrays).visit(target), Rename(arrays).visit(value)
        free = set(free_indices(target, eq))
        sums: dict[str, str] = {}
        for node in ast.walk(value):
            if isinstance(node, ast.comprehension) and node.target.id in shown:
                used = shown | free | set(sums.values()) | {
                    n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
                sums[node.target.id] = next(c for c in _SUM_INDICES if c not in used)
        out.append((target, Rename(sums).visit(value) if sums else value))
    return out


def index_swap(target: ast.expr, eq: IndexEquation, arrays: set[str], wanted: list[str]
               ) -> dict[str, str] | None:
    """The renaming of free indices that writes ``target`` with the indices ``wanted``
    (δ_{i,j} = Σ_m ..., not δ_{i,m} = Σ_j ... under ∂L/∂y_{i,j} = δ_{i,j} + ...: the
    names swapped, which changes no entry); None when there is nothing to rename or
    it cannot be done by a swap of plain index names."""
    free = free_indices(target, eq)
    if len(free) != len(wanted) or free == wanted or not all(
            isinstance(p, ast.Name) for p in ast.walk(target.slice)
            if not isinstance(p, (ast.Tuple, ast.Load))):
        return None
    swap: dict[str, str] = {}
    for old, new in zip(free, wanted):
        if old != new:
            swap.setdefault(old, new)
            swap.setdefault(new, old)
    if len(set(swap.values())) != len(swap) or arrays & set(swap):
        return None
    return swap


def rename_indices(trees: Trees, swap: Mapping[str, str], arrays: set[str]) -> Trees:
    """Copies of ``trees`` with the indices renamed by ``swap`` (the arrays kept)."""
    rename = _RenameIndices(swap, arrays)
    return [(rename.visit(copy.deepcopy(t)), rename.visit(copy.deepcopy(v)))
            for t, v in trees]


def inline_lets(definitions: Mapping[str, ast.expr], node: ast.expr) -> ast.expr:
    """``node`` with each named inner quantity (``xi[i, j]``: array name -> its
    definition's tree) read in: the form that is evaluated and proved (a definition
    uses the same indices as the lines)."""
    if not definitions:
        return node

    class Inline(ast.NodeTransformer):
        def visit_Subscript(self, sub: ast.Subscript) -> ast.expr:
            if isinstance(sub.value, ast.Name) and sub.value.id in definitions:
                return Inline().visit(copy.deepcopy(definitions[sub.value.id]))
            return self.generic_visit(sub)
    return Inline().visit(copy.deepcopy(node))


class DropOne(ast.NodeTransformer):
    """``1 * x``, ``x * 1`` and ``x / 1`` -> ``x``, and ``-1 * x``, ``x * -1``, ``x / -1``
    -> ``-x`` (a parameter spelled 1: the loss's own gradient dL/dL in a backward rule,
    ``-dL * w[i]`` written -w_i, not -1 w_i)."""

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)

        def one(e: ast.expr) -> bool:
            return isinstance(e, ast.Constant) and e.value == 1

        if isinstance(node.op, ast.Mult) and one(node.left):
            return node.right
        if isinstance(node.op, (ast.Mult, ast.Div)) and one(node.right):
            return node.left

        def minus_one(e: ast.expr) -> bool:
            return (isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub) and one(e.operand)
                    ) or (isinstance(e, ast.Constant) and e.value == -1)

        if isinstance(node.op, ast.Mult) and minus_one(node.left):
            return ast.UnaryOp(ast.USub(), node.right)
        if isinstance(node.op, (ast.Mult, ast.Div)) and minus_one(node.right):
            return ast.UnaryOp(ast.USub(), node.left)
        return node


def constant_grad(eq: IndexEquation, value: int) -> IndexEquation:
    """A backward rule with its upstream gradient written as the number it is (dL/dL =
    1: the loss's own gradient), the factor 1 dropped."""
    names = set(eq.names_of("grad"))

    class Number(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.expr:
            return ast.Constant(value) if node.id in names else node

    lines = tuple(f"{plain(t)} = {plain(DropOne().visit(Number().visit(v)))}"
                  for t, v in eq.statements)
    return replace(eq, lines=lines, arrays={n: r for n, r in eq.arrays.items()
                                            if n not in names})
