"""The exact zero test every exact decision falls back on (never numeric)."""

from __future__ import annotations

import sympy


def is_zero(expr: sympy.Expr) -> bool:
    """Exact zero test (never numeric): structural, then SymPy's simplification."""
    if expr == 0:
        return True
    return sympy.simplify(expr) == 0
