"""A SymPy expression as a worked-line tree, written the way a textbook writes it.

SymPy stores ``x/4`` as ``Mul(1/4, x)``, ``a - b`` as ``Add(a, Mul(-1, b))`` and
``u/sqrt(2)`` as ``sqrt(2)*u/2``; the tree written here has a fraction, a
subtraction and ``u/√2``.  Leaves (free symbols) are given by the caller, so the
same formula becomes the symbolic line (notation) and the numeric line (printed
decimals).  Terms keep reading order: a term's position is that of the first
input entry it reads (``position``); constant terms come last, or first in a
closed form (``4 + sin 1``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from symformer.lazy import sympy
from symformer.worked.model import PI, Add, Const, Div, Func, Mul, Neg, Node, Pow, Sym

Leaf = Callable[["sympy.Symbol"], Node]
Position = Callable[["sympy.Symbol"], "tuple | None"]

@cache
def _functions() -> dict[type, str]:
    """The SymPy functions a tree names, and their names."""
    return {sympy.exp: "exp", sympy.erf: "erf", sympy.sin: "sin", sympy.cos: "cos",
            sympy.tanh: "tanh", sympy.log: "log"}
_LAST = (float("inf"),)


class Converter:
    """Turns SymPy expressions into trees; ``leaf`` prints free symbols."""

    def __init__(self, leaf: Leaf, position: Position | None = None,
                 constants_first: bool = False) -> None:
        self.leaf = leaf
        self.position = position or (lambda s: None)
        self.constants_first = constants_first
        #: A named weight's entry as a leaf (``parameter("gamma", (j,))``: γ_j on the
        #: symbolic line, its exact value on the numeric one), where the builder knows
        #: whose weight it is (a backward rule's consumer); else None.
        self.parameter: Callable[[str, tuple], Node] | None = None

    def __call__(self, expr: sympy.Expr) -> Node:
        return self.convert(sympy.sympify(expr))

    # -- ordering ---------------------------------------------------------------
    def _key(self, term: sympy.Expr) -> tuple:
        found = [p for s in term.free_symbols if (p := self.position(s)) is not None]
        if found:
            return (1, min(found))
        return (0 if self.constants_first else 2, _LAST, sympy.default_sort_key(term))

    def _factor_rank(self, f: sympy.Expr) -> tuple:
        """Input entries first (x W), then named constants and numbers, then compounds."""
        if f.is_Symbol and self.position(f) is not None:
            return (0, self.position(f))
        if f.is_Symbol or f.is_Number:
            return (1, ())
        return (2, self._key(f))

    # -- conversion -------------------------------------------------------------
    def convert(self, expr: sympy.Expr) -> Node:
        if expr.is_Symbol:
            return self.leaf(expr)
        if expr.is_Rational:
            return Neg(Const(-expr)) if expr < 0 else Const(expr)
        if expr is sympy.S.NegativeInfinity:
            return Neg(Sym(r"\infty", "inf", "inf"))
        if expr is sympy.S.Infinity:
            return Sym(r"\infty", "inf", "inf")
        if expr is sympy.pi:
            return PI
        if expr is sympy.E:
            return Func("exp", (Const(sympy.S.One),))
        if expr.is_Add:
            content, rest = expr.primitive()
            # r_0/4 + ... + r_3/4 -> (1/4)(r_0 + ... + r_3); not sigma^2 + 1/1000000
            # into (1/1000000)(1000000 sigma^2 + 1)
            if content.q != 1 and rest.is_Add and all(
                    abs(t.as_coeff_Mul()[0]) < 1000 for t in rest.args):
                return Mul((Div(Const(sympy.Integer(content.p)), Const(sympy.Integer(
                    content.q))), self.convert(rest)))
            terms = sorted(expr.args, key=self._key)
            return Add(tuple(Neg(self.convert(-t)) if t.could_extract_minus_sign()
                             else self.convert(t) for t in terms))
        if expr.is_Mul:
            return self._mul(expr)
        if expr.is_Pow:
            return self._pow(expr)
        if isinstance(expr, sympy.Max) or isinstance(expr, sympy.Min):
            args = sorted(expr.args, key=lambda a: (not a.is_Number, self._key(a)))
            return Func("max" if isinstance(expr, sympy.Max) else "min",
                        tuple(self.convert(a) for a in args))
        name = _functions().get(expr.func)
        if name is not None:
            return Func(name, (self.convert(expr.args[0]),))
        raise TypeError(f"cannot write {expr.func.__name__} in a worked line")

    def _pow(self, expr: sympy.Pow) -> Node:
        base, e = expr.args
        if e.is_Rational and e < 0:
            return Div(Const(sympy.S.One), self._pow(sympy.Pow(base, -e, evaluate=False)))
        if e == sympy.S.Half:
            return Func("sqrt", (self.convert(base),))
        if e == 1:
            return self.convert(base)
        return Pow(self.convert(base), self.convert(e))

    def _mul(self, expr: sympy.Mul) -> Node:
        coeff, factors = expr.as_coeff_mul()
        if coeff < 0:
            return Neg(self.convert(-expr))
        numer: list[sympy.Expr] = []
        denom: list[Node] = []
        for f in factors:
            if f.is_Pow and f.exp.is_Rational and f.exp < 0:
                denom.append(self._pow(sympy.Pow(f.base, -f.exp, evaluate=False)))
            else:
                numer.append(f)
        coeff = sympy.Rational(coeff)
        root = next((f for f in numer if f.is_Pow and f.exp == sympy.S.Half
                     and f.base.is_Integer and coeff * f.base == 1), None)
        if root is not None:  # sqrt(2)/2 * u  ->  u / sqrt(2)
            numer.remove(root)
            denom.insert(0, Func("sqrt", (Const(root.base),)))
            coeff = sympy.S.One
        if coeff.q != 1:
            denom.append(Const(sympy.Integer(coeff.q)))
        numer.sort(key=self._factor_rank)
        pairs = [(f, self.convert(f)) for f in numer]
        if coeff.p != 1:
            pairs.insert(0, (sympy.Integer(coeff.p), Const(sympy.Integer(coeff.p))))
        if not denom:
            return _product([node for _, node in pairs])
        den = _product(denom)
        if len(pairs) == 1 and isinstance(pairs[0][1], Add) and isinstance(den, Const):
            return Mul((Div(Const(sympy.S.One), den), pairs[0][1]))  # (1/4)(x_0 + ... + x_3)
        leading = []  # constant factors stay in front of the fraction: gamma (x - mu) / ...
        while len(pairs) > 1 and self._factor_rank(pairs[0][0])[0] == 1:
            leading.append(pairs.pop(0)[1])
        nodes = [node for _, node in pairs]
        fraction = Div(_product(nodes) if nodes else Const(sympy.S.One), den)
        return _product([*leading, fraction])


def _product(nodes: list[Node]) -> Node:
    if not nodes:
        return Const(sympy.S.One)
    return nodes[0] if len(nodes) == 1 else Mul(tuple(nodes))


__all__ = ["Converter"]
