"""A reader's recomputation of a printed worked line, independent of symformer.

``expression`` (plain arithmetic over printed decimal literals: ``+ - * / **``,
parentheses, ``exp sqrt max min erf tanh sin cos log``, the constant ``pi``) is parsed
with :mod:`ast` and evaluated exactly: with :class:`fractions.Fraction` while only
rational operations occur, with mpmath at 80 digits otherwise.  Literals are read from their source
text (``"0.1"`` is 1/10, never the float 0.1).
"""

from __future__ import annotations

import ast
from fractions import Fraction

import mpmath

mpmath.mp.dps = 80
FUNCTIONS = {"exp": mpmath.exp, "sqrt": mpmath.sqrt, "erf": mpmath.erf,
             "tanh": mpmath.tanh, "sin": mpmath.sin, "cos": mpmath.cos, "log": mpmath.log}
#: A non-rational value this close to a rounding tie is refused as undecidable here.
TOO_CLOSE = mpmath.mpf(10) ** -60


def evaluate(expression: str) -> Fraction | mpmath.mpf:
    """The exact value of ``expression`` (a Fraction when it is rational)."""
    tree = ast.parse(expression, mode="eval")
    return _eval(tree.body, expression)


def _mp(x: Fraction | mpmath.mpf) -> mpmath.mpf:
    if isinstance(x, Fraction):
        return mpmath.mpf(x.numerator) / x.denominator
    return x


def _eval(node: ast.AST, source: str) -> Fraction | mpmath.mpf:
    if isinstance(node, ast.Name) and node.id == "pi":
        return mpmath.pi()
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return Fraction(ast.get_source_segment(source, node))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _eval(node.operand, source)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left, source), _eval(node.right, source)
        exact = isinstance(a, Fraction) and isinstance(b, Fraction)
        if isinstance(node.op, ast.Add):
            return a + b if exact else _mp(a) + _mp(b)
        if isinstance(node.op, ast.Sub):
            return a - b if exact else _mp(a) - _mp(b)
        if isinstance(node.op, ast.Mult):
            if exact:
                return a * b
            if Fraction(0) in (a, b):
                return Fraction(0)  # 0 * sin(1) is exactly 0
            return _mp(a) * _mp(b)
        if isinstance(node.op, ast.Div):
            return a / b if exact else _mp(a) / _mp(b)
        if isinstance(node.op, ast.Pow):
            if exact and b.denominator == 1:
                return a ** int(b)
            return _mp(a) ** _mp(b)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        args = [_eval(a, source) for a in node.args]
        name = node.func.id
        if name in ("max", "min"):
            pick = max if name == "max" else min
            if all(isinstance(a, Fraction) for a in args):
                return pick(args)
            return pick(_mp(a) for a in args)
        if name in FUNCTIONS and len(args) == 1:
            return FUNCTIONS[name](_mp(args[0]))
    raise ValueError(f"not in the worked-line grammar: {ast.dump(node)} in {source!r}")


def decimals_of(text: str) -> int:
    """How many decimals a printed result shows."""
    return len(text.split(".")[1]) if "." in text else 0


def correctly_rounded(value: Fraction | mpmath.mpf, decimals: int) -> Fraction:
    """``value`` rounded to ``decimals`` places, ties to even (as NumPy and Python)."""
    scale = 10 ** decimals
    if isinstance(value, Fraction):
        scaled = value * scale
        q, r = divmod(scaled.numerator, scaled.denominator)
        twice = 2 * r
        if twice > scaled.denominator or (twice == scaled.denominator and q % 2):
            q += 1
        return Fraction(q, scale)
    scaled = value * scale
    floor = mpmath.floor(scaled)
    assert abs(scaled - floor - mpmath.mpf(1) / 2) > TOO_CLOSE, "too close to a tie"
    return Fraction(int(mpmath.nint(scaled)), scale)


def check_item(item: dict) -> None:
    """Assert that an item's expression, recomputed, gives its printed result."""
    value = evaluate(item["expression"])
    decimals = decimals_of(item["result"])
    want = correctly_rounded(value, decimals)
    assert Fraction(item["result"]) == want, (
        f"{item['stage']}[{item['row']},{item['col']}] {item['symbol']}: "
        f"{item['expression']} = {mpmath.nstr(_mp(value), 20)} rounds to {want}, "
        f"not {item['result']}")
