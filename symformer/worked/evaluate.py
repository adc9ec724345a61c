"""What a reader gets from a printed expression: its exact value, correctly rounded.

A printed expression's leaves are exact rationals (the printed decimals, the
exact weights), so its value is exact: computed with fractions when the
expression is rational, otherwise enclosed in balls (python-flint's ``arb``) at
rising precision.  :func:`reader_rounding` returns the rounding only when it is
unambiguous -- a value exactly half-way between two roundings (a tie, such as
1.595 at two decimals) is ambiguous for a reader, and counts as undecided.
"""

from __future__ import annotations

from fractions import Fraction

import flint

from symformer.engine.arbmath import precision, rational_ball
from symformer.engine.rounding import Rounded, round_ball, round_fraction
from symformer.lazy import sympy
from symformer.worked.model import (
    PI,
    Add,
    Const,
    Div,
    Func,
    Mul,
    Neg,
    Node,
    Num,
    Pow,
    Sym,
    children,
)

_PRECISIONS = (96, 192, 384, 768, 1536)


class _NotRational(Exception):
    pass


def exact_value(node: Node) -> Fraction | None:
    """The exact value when only rational operations occur (None otherwise)."""
    try:
        return _exact(node)
    except (_NotRational, ZeroDivisionError):
        return None


def _exact(node: Node) -> Fraction:
    if isinstance(node, Num):
        return node.value
    if isinstance(node, Const):
        return Fraction(int(node.value.p), int(node.value.q))
    if isinstance(node, Neg):
        return -_exact(node.arg)
    if isinstance(node, Add):
        return sum((_exact(t) for t in node.terms), Fraction(0))
    if isinstance(node, Mul):
        out, irrational = Fraction(1), []
        for f in node.factors:
            try:
                out *= _exact(f)
            except _NotRational:
                irrational.append(f)
        if irrational and not (out == 0 and all(_nonzero_finite(f, zero=True)
                                                for f in irrational)):
            raise _NotRational
        return out
    if isinstance(node, Div):
        num = _exact(node.num)
        if num == 0 and _nonzero_finite(node.den):  # 0 / sqrt(...): exactly 0
            return num
        return num / _exact(node.den)
    if isinstance(node, Pow):
        e = _exact(node.exp)
        if e.denominator == 1:
            return _exact(node.base) ** int(e)
    if isinstance(node, Func) and node.name == "exp" and _exact(node.args[0]) == 0:
        return Fraction(1)  # e^0 = 1 (an integer score of 0)
    if isinstance(node, Func) and node.name in ("max", "min"):
        values = [_exact(a) for a in node.args]
        return max(values) if node.name == "max" else min(values)
    raise _NotRational


def _nonzero_finite(node: Node, zero: bool = False) -> bool:
    """Whether ``node``'s value is certainly finite and (unless ``zero``) not 0, by its
    ball at 64 bits (a root or an exponential of the printed numbers)."""
    try:
        with precision(64):
            value = ball(node)
    except (_NotRational, ZeroDivisionError, ValueError, TypeError):
        return False
    return value.is_finite() and (zero or not value.contains(0))


def ball(node: Node) -> flint.arb:
    """The value as a ball at the current ``flint.ctx.prec``."""
    if isinstance(node, (Num, Const)):
        value = _exact(node)
        return rational_ball(sympy.Rational(value.numerator, value.denominator))
    if isinstance(node, Neg):
        return -ball(node.arg)
    if isinstance(node, Add):
        total = flint.arb(0)
        for t in node.terms:
            total += ball(t)
        return total
    if isinstance(node, Mul):
        out = flint.arb(1)
        for f in node.factors:
            out *= ball(f)
        return out
    if isinstance(node, Div):
        return ball(node.num) / ball(node.den)
    if isinstance(node, Pow):
        e = exact_value(node.exp)
        if e is not None and e.denominator == 1:
            return ball(node.base) ** int(e)
        return ball(node.base) ** ball(node.exp)
    if isinstance(node, Func):
        args = [ball(a) for a in node.args]
        if node.name in ("max", "min"):
            out = args[0]
            for a in args[1:]:
                out = out.max(a) if node.name == "max" else out.min(a)
            return out
        return getattr(args[0], node.name)()
    if node == PI:
        return flint.arb.pi()
    if isinstance(node, Sym):
        raise TypeError(f"the symbol {node.text} has no value")
    raise TypeError(f"cannot evaluate {type(node).__name__}")


def reader_rounding(node: Node, decimals: int) -> Rounded | None:
    """The correct rounding of the expression's exact value, or None if it is a tie
    (or too close to one to decide)."""
    value = exact_value(node)
    if value is not None:
        scaled = value * Fraction(10) ** decimals
        if (scaled - (scaled.numerator // scaled.denominator)) == Fraction(1, 2):
            return None  # a tie: a reader may round either way
        return round_fraction(value, decimals=decimals)
    for prec in _PRECISIONS:
        with precision(prec):
            enclosure = ball(node)
        rounded = round_ball(enclosure, decimals=decimals)
        if rounded is not None:
            return rounded
    return None


def has_rounded_leaves(node: Node) -> bool:
    """True when a printed decimal (not an exact constant) occurs in the expression."""
    return isinstance(node, Num) or any(has_rounded_leaves(c) for c in children(node))
