"""The exact zero test every exact decision falls back on (never numeric)."""

from __future__ import annotations

from symformer.lazy import sympy

#: SymPy's simplify is tried only on expressions this small, with numbers this short
#: (it has no time limit; factoring huge coefficients can run for minutes).
_SIMPLIFY_MAX_OPS = 80
_SIMPLIFY_MAX_BITS = 256
_SIMPLIFY_MAX_ARGUMENT = 2 ** 16


def is_zero(expr: sympy.Expr) -> bool:
    """Exact zero test (never numeric): structural, then SymPy's simplification.

    False (no proof) for expressions too large to simplify in bounded time.
    """
    if expr == 0:
        return True
    if sympy.count_ops(expr) > _SIMPLIFY_MAX_OPS or any(
            max(abs(int(n.p)).bit_length(), int(n.q).bit_length()) > _SIMPLIFY_MAX_BITS
            for n in expr.atoms(sympy.Rational)):
        return False
    # exp(-10**50 a) becomes a polynomial of degree 10**50 in exp(a) inside simplify
    if any(max(abs(int(n.p)), int(n.q)) > _SIMPLIFY_MAX_ARGUMENT
           for f in expr.atoms(sympy.exp, sympy.sin, sympy.cos, sympy.erf)
           for n in f.args[0].atoms(sympy.Rational)):
        return False
    return sympy.simplify(expr) == 0
