"""A small AST transformer, in latexify's style: an equation as a textbook writes it.

It changes notation, never value: ``1 * x`` is ``x``.
"""

from __future__ import annotations

import ast


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
