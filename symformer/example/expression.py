"""Exact numbers written as small expressions: ``"log(2)"``, ``"sqrt(2)/2"``, ``"pi/4"``.

A hand-written recursive-descent parser over a fixed grammar; the text never reaches
``eval``, ``sympify`` or any other parser that could run it::

    expr   := term (("+" | "-") term)*
    term   := unary (("*" | "/") unary)*
    unary  := ("+" | "-") unary | power
    power  := atom (("^" | "**") unary)?
    atom   := number | "pi" | "e" | function "(" expr ")" | "(" expr ")"
    number := ASCII decimal literal (``3``, ``-1.25``, ``.5``, ``1e-6``)
    function := sqrt | exp | log | ln | sin | cos | tanh      (log = ln, the natural log)

Rational parts are folded exactly (``"3/2^4"`` is the rational 3/16, ``"2^-1"`` is 1/2);
after the limits are certified, a few identities that are exact and cheap make a
rational of what is one (``exp(log(q))`` and ``log(exp(q))`` are q, ``sqrt(q)^2`` and
``(q^(1/3))^6`` are powers of q: :func:`_rational`).  What is left is a
:class:`Constant`: a value not shown rational (irrational, or rational by an identity
the folds do not know, such as ``sqrt(2)*sqrt(2)``), held as a small tree that
evaluates itself in ball arithmetic (:meth:`Constant.ball`) and builds its SymPy form
(:meth:`Constant.sympy`).  Every part of an expression obeys the limits of a plain
number: each non-zero part lies between 1e-100 and 1e100 in magnitude (certified with
balls; a rational literal, and a part the identities show rational, exactly), exponents
are rationals of bounded size, nesting is at most :data:`MAX_DEPTH` deep, and the text
at most ``MAX_LITERAL_LENGTH`` characters (checked by the caller).  A value that balls
cannot separate from 0 (``"sin(pi)"``) is refused, unless the identities show it is
exactly 0 (``"exp(log(2)) - 2"``): write 0.
"""

from __future__ import annotations

import re
from typing import Any

import flint
from flint import arb, fmpq

from symformer.arbcontext import precision as _precision
from symformer.lazy import sympy

#: The deepest nesting of parentheses, signs, powers and functions accepted.
MAX_DEPTH = 20
#: The largest exponent (numerator) of a power, and of its denominator.
MAX_POWER = 1000
MAX_ROOT = 100
#: Magnitudes every non-zero part of an expression must lie between.
_LOW, _HIGH = fmpq(1, 10**100), fmpq(10**100)
#: Working precisions (bits) tried in turn to certify every part's magnitude.
_PRECISIONS = (128, 512, 2048)
#: exp(x) stays below 1e100 only for x below ln(1e100) = 230.26...
_EXP_LIMIT = 231

FUNCTIONS = ("sqrt", "exp", "log", "ln", "sin", "cos", "tanh")
_TOKEN = re.compile(r"[ \t]*(?:(?P<num>(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
                    r"|(?P<name>[a-z]+)|(?P<op>\*\*|[-+*/^()]))", re.ASCII)

Tree = tuple  # ("q", p, q) | ("pi",) | ("e",) | ("+", a, b) | ("*", a, b) | ("inv", a)
#             | ("neg", a) | ("^", a, p, q) | ("f", name, a)


class ExpressionError(ValueError):
    """The text is not an expression of the grammar, or breaks a limit (the message
    says which); the caller names the place."""


class Constant:
    """An exact irrational number given by an expression (``log(2)``), kept as a tree.

    ``ball()`` evaluates it at the current ``arb`` precision (rigorous), ``sympy()`` is
    its SymPy value; it compares and hashes by its tree and prints as its canonical text.
    """

    __slots__ = ("tree",)

    def __init__(self, tree: Tree) -> None:
        self.tree = tree

    def ball(self) -> arb:
        """The value as a ball at the current precision."""
        return _ball(self.tree)

    def sympy(self) -> Any:
        """The SymPy number (SymPy may simplify it: ``exp(log(2))`` is 2)."""
        return _sympy(self.tree)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Constant) and other.tree == self.tree

    def __hash__(self) -> int:
        return hash(self.tree)

    def __float__(self) -> float:
        with _precision(64):
            return float(self.ball().mid())

    def __str__(self) -> str:
        return _text(self.tree)

    def __repr__(self) -> str:
        return f"Constant({_text(self.tree)!r})"

    def __reduce__(self) -> tuple[type, tuple[Tree]]:
        return Constant, (self.tree,)


def parse(text: str) -> fmpq | Constant:
    """The exact value of ``text`` (an expression of the grammar above): a rational when
    it is one by exact folding, else a :class:`Constant`.

    >>> parse("3/2^4"), parse("-ln(2)")
    (3/16, Constant('-log(2)'))
    """
    tokens = _tokens(text)
    parser = _Parser(tokens)
    value = parser.expr(0)
    if parser.at < len(tokens):
        raise ExpressionError(f"unexpected {tokens[parser.at][1]!r}")
    if isinstance(value, fmpq):
        return value
    _certify(value)
    rational = _rational(value)
    return rational if rational is not None else Constant(value)


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens, at, text = [], 0, text.rstrip(" \t")
    while at < len(text):
        match = _TOKEN.match(text, at)
        if not match:
            rest = text[at:].lstrip(" \t")
            raise ExpressionError(f"unexpected character {rest[:1]!r}")
        kind = match.lastgroup
        value = match[kind]
        if kind == "name" and value not in FUNCTIONS and value not in ("pi", "e"):
            raise ExpressionError(f"unknown name {value!r} (known: pi, e, "
                                  f"{', '.join(FUNCTIONS)})")
        tokens.append((kind, "^" if value == "**" else value))
        at = match.end()
    if not tokens:
        raise ExpressionError("empty")
    return tokens


class _Parser:
    """Recursive descent over the tokens; rationals folded as they are met."""

    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens, self.at = tokens, 0

    def peek(self) -> str | None:
        return self.tokens[self.at][1] if self.at < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        if self.at >= len(self.tokens):
            raise ExpressionError("unexpected end")
        token = self.tokens[self.at]
        self.at += 1
        return token

    def expect(self, op: str) -> None:
        found = self.peek()
        if found != op:
            raise ExpressionError(f"expected {op!r}, found "
                                  f"{'the end' if found is None else repr(found)}")
        self.at += 1

    def expr(self, depth: int) -> fmpq | Tree:
        value = self.term(depth)
        while self.peek() in ("+", "-"):
            op = self.take()[1]
            right = self.term(depth)
            value = _add(value, _neg(right) if op == "-" else right)
        return value

    def term(self, depth: int) -> fmpq | Tree:
        value = self.unary(depth)
        while self.peek() in ("*", "/"):
            op = self.take()[1]
            right = self.unary(depth)
            value = _mul(value, right) if op == "*" else _mul(value, _inverse(right))
        return value

    def unary(self, depth: int) -> fmpq | Tree:
        if depth > MAX_DEPTH:
            raise ExpressionError(f"nested more than {MAX_DEPTH} deep")
        if self.peek() in ("+", "-"):
            op = self.take()[1]
            value = self.unary(depth + 1)
            return _neg(value) if op == "-" else value
        return self.power(depth)

    def power(self, depth: int) -> fmpq | Tree:
        base = self.atom(depth)
        if self.peek() != "^":
            return base
        self.take()
        exponent = self.unary(depth + 1)
        if not isinstance(exponent, fmpq):
            raise ExpressionError("exponents must be rational")
        return _power(base, exponent)

    def atom(self, depth: int) -> fmpq | Tree:
        kind, value = self.take()
        if kind == "num":
            return _literal(value)
        if value == "(":
            inner = self.expr(depth + 1)
            self.expect(")")
            return inner
        if value == "pi":
            return ("pi",)
        if value == "e":
            return ("e",)
        if kind == "name":
            self.expect("(")
            argument = self.expr(depth + 1)
            self.expect(")")
            return _function("log" if value == "ln" else value, argument)
        raise ExpressionError(f"unexpected {value!r}")


def _literal(text: str) -> fmpq:
    mantissa, _, exponent = text.lower().partition("e")
    power = int(exponent or 0)
    if abs(power) > MAX_POWER:
        raise ExpressionError(f"the exponent of {text} is out of range: exponents must "
                              f"lie between -{MAX_POWER} and {MAX_POWER}")
    whole, _, frac = mantissa.partition(".")
    digits = int(whole + frac or "0")
    shift = power - len(frac)
    return _in_range(fmpq(digits * 10**shift) if shift >= 0 else fmpq(digits, 10**-shift))


def _in_range(value: fmpq) -> fmpq:
    if value != 0 and not _LOW <= abs(value) <= _HIGH:
        raise ExpressionError(f"{_short(value)} is out of range: non-zero parts must lie "
                              f"between 1e-100 and 1e100 in magnitude")
    return value


def _short(value: fmpq) -> str:
    text = str(value)
    return text if len(text) <= 40 else f"{text[:20]}...{text[-20:]}"


def _tree(value: fmpq | Tree) -> Tree:
    return ("q", int(value.p), int(value.q)) if isinstance(value, fmpq) else value


def _add(a: fmpq | Tree, b: fmpq | Tree) -> fmpq | Tree:
    if isinstance(a, fmpq) and isinstance(b, fmpq):
        return _in_range(a + b)
    if isinstance(a, fmpq) and a == 0:
        return b
    if isinstance(b, fmpq) and b == 0:
        return a
    return ("+", _tree(a), _tree(b))


def _mul(a: fmpq | Tree, b: fmpq | Tree) -> fmpq | Tree:
    if isinstance(a, fmpq) and isinstance(b, fmpq):
        return _in_range(a * b)
    if isinstance(a, fmpq) and a == 1:
        return b
    if isinstance(b, fmpq) and b == 1:
        return a
    if (isinstance(a, fmpq) and a == 0) or (isinstance(b, fmpq) and b == 0):
        return fmpq(0)
    return ("*", _tree(a), _tree(b))


def _neg(a: fmpq | Tree) -> fmpq | Tree:
    if isinstance(a, fmpq):
        return -a
    return a[1] if a[0] == "neg" else ("neg", a)


def _inverse(a: fmpq | Tree) -> fmpq | Tree:
    if isinstance(a, fmpq):
        if a == 0:
            raise ExpressionError("division by zero")
        return _in_range(1 / a)
    return a[1] if a[0] == "inv" else ("inv", a)


def _power(base: fmpq | Tree, exponent: fmpq) -> fmpq | Tree:
    p, q = int(exponent.p), int(exponent.q)
    if abs(p) > MAX_POWER or q > MAX_ROOT:
        raise ExpressionError(f"the exponent {exponent} is out of range: exponents are "
                              f"fractions p/q with |p| <= {MAX_POWER} and q <= {MAX_ROOT}")
    if isinstance(base, fmpq):
        if base == 0:
            if p < 0:
                raise ExpressionError("division by zero")
            return fmpq(0) if p else fmpq(1)
        # |base^p| has about |p| * log2|base| bits: refuse before computing a giant
        bits = abs(p) * abs(max(int(base.p).bit_length(), int(base.q).bit_length()) - 1) // q
        if bits > 400:
            raise ExpressionError(f"{_short(base)}^{exponent} is out of range: non-zero "
                                  f"parts must lie between 1e-100 and 1e100 in magnitude")
        if q == 1:
            return _in_range(base ** p)
        root = _exact_root(base, q)
        if root is not None:
            return _in_range(root ** p)
    return ("^", _tree(base), p, q)


def _exact_root(value: fmpq, q: int) -> fmpq | None:
    """The rational q-th root of a positive rational, or None when it is not rational."""
    if value < 0:
        return None
    num, den = int(value.p), int(value.q)
    roots = [round(x ** (1 / q)) if x < 2**50 else _int_root(x, q) for x in (num, den)]
    if all(r ** q == x for r, x in zip(roots, (num, den))):
        return fmpq(roots[0], roots[1])
    return None


def _int_root(x: int, q: int) -> int:
    return int(flint.fmpz(x).root(q))


_FOLD = {"sqrt": (0, 0), "exp": (0, 1), "log": (1, 0), "sin": (0, 0), "cos": (0, 1),
         "tanh": (0, 0)}


def _function(name: str, argument: fmpq | Tree) -> fmpq | Tree:
    if isinstance(argument, fmpq):
        at, value = _FOLD[name]
        if argument == at:  # the one rational point where the function is rational
            return fmpq(value)
        if name == "sqrt":
            if argument < 0:
                raise ExpressionError(f"sqrt of the negative number {argument}")
            root = _exact_root(argument, 2)
            if root is not None:
                return root
        if name == "log" and argument <= 0:
            raise ExpressionError(f"log of the non-positive number {argument}")
    return ("f", name, _tree(argument))


def _rational(tree: Tree) -> fmpq | None:
    """The rational value of a certified ``tree`` when exact identities show it, else
    None: ``exp(log(q)) = q`` (q > 0), ``log(exp(q)) = q``, a power of a power of a
    positive rational (``sqrt(2)^2 = 2``), and rational arithmetic over those.  Not a
    decision procedure: ``sqrt(2)*sqrt(2)`` stays a Constant."""
    kind = tree[0]
    if kind == "q":
        return fmpq(tree[1], tree[2])
    if kind in ("pi", "e"):
        return None
    if kind in ("+", "*"):
        a, b = _rational(tree[1]), _rational(tree[2])
        if a is None or b is None:
            return None
        return a + b if kind == "+" else a * b
    if kind in ("neg", "inv"):
        a = _rational(tree[1])
        return None if a is None else (-a if kind == "neg" else 1 / a)
    if kind == "^" or (kind == "f" and tree[1] == "sqrt"):
        power = _as_power(tree)
        return None if power is None else _rational_power(*power)
    name, inner = tree[1], tree[2]
    if inner[0] == "f" and {name, inner[1]} == {"exp", "log"}:
        return _rational(inner[2])  # exp(log(x)) = x for x > 0 (certified); log(exp(x)) = x
    argument = _rational(inner)
    if argument is not None and argument == _FOLD[name][0]:
        return fmpq(_FOLD[name][1])
    return None


def _as_power(tree: Tree) -> tuple[fmpq, fmpq] | None:
    """``(b, x)`` with ``tree = b^x`` for a rational b (b > 0 unless x is whole)."""
    if tree[0] == "f" and tree[1] == "sqrt":
        base = _rational(tree[2])
        return None if base is None else (base, fmpq(1, 2))  # certified: base >= 0
    if tree[0] == "^":
        inner = _as_power(tree[1])
        if inner is None:
            base = _rational(tree[1])
            inner = None if base is None else (base, fmpq(1))
        if inner is None:
            return None
        base, x = inner
        exponent = fmpq(tree[2], tree[3])
        if base > 0 or (x.q == 1 and exponent.q == 1):  # (b^x)^y = b^(xy)
            return base, x * exponent
        return None
    base = _rational(tree)
    return None if base is None else (base, fmpq(1))


def _rational_power(base: fmpq, exponent: fmpq) -> fmpq | None:
    """``base^exponent`` when it is rational (an exact root), else None."""
    p, q = int(exponent.p), int(exponent.q)
    if base == 0:
        return fmpq(0) if p > 0 else None
    bits = abs(p) * max(int(base.p).bit_length(), int(base.q).bit_length()) // q
    if bits > 4000 or q > 4000:  # far beyond what a certified part can be: not folded
        return None
    root = base if q == 1 else _exact_root(base, q)
    return None if root is None else root ** p


class _Uncertain(Exception):
    """A ball did not decide a sign or a limit at this precision."""


def _certify(tree: Tree) -> None:
    """Check every part's magnitude, each function's domain, with balls at rising
    precision; refuse (ExpressionError) what is out of range or undecidable."""
    for bits in _PRECISIONS:
        with _precision(bits):
            try:
                _ball(tree, check=True)
                return
            except _Uncertain:
                continue
    raise ExpressionError("cannot certify that a part of it is non-zero or within its "
                          "limits (write an exact 0 as 0)")


def _ball(tree: Tree, check: bool = False) -> arb:
    kind = tree[0]
    if kind == "q":
        value = arb(fmpq(tree[1], tree[2]))
    elif kind == "pi":
        value = arb.pi()
    elif kind == "e":
        value = arb(1).exp()
    elif kind == "+":
        value = _ball(tree[1], check) + _ball(tree[2], check)
    elif kind == "*":
        value = _ball(tree[1], check) * _ball(tree[2], check)
    elif kind == "neg":
        value = -_ball(tree[1], check)
    elif kind == "inv":
        inner = _ball(tree[1], check)
        if check and _nonzero(inner) is not True:
            zero = _nonzero(inner) is False or _rational(tree[1]) == 0
            raise _refuse_or_retry(zero, "division by zero")
        value = 1 / inner
    elif kind == "^":
        base = _ball(tree[1], check)
        if check and tree[3] != 1 and not base > 0:
            raise _refuse_or_retry(base <= 0, "a fractional power needs a positive base")
        if check and tree[2] < 0 and _nonzero(base) is not True:
            raise _refuse_or_retry(_nonzero(base) is False, "division by zero")
        value = base ** tree[2] if tree[3] == 1 else (base ** fmpq(tree[2], tree[3]))
    else:
        value = _apply(tree[1], _ball(tree[2], check), check)
    if check:
        try:
            _check_range(value, exact=kind == "q")
        except _Uncertain:
            # a part the balls cannot place (exactly 0, or exactly a limit, such as
            # exp(log(1e-100))) is decided exactly when identities show it rational
            rational = _rational(tree)
            if rational is None:
                raise
            _in_range(rational)
    return value


def _apply(name: str, x: arb, check: bool) -> arb:
    if check:
        if name == "log" and not x > 0:
            raise _refuse_or_retry(x <= 0, "log needs a positive argument")
        if name == "sqrt" and not x >= 0:
            raise _refuse_or_retry(x < 0, "sqrt needs a non-negative argument")
        if name == "exp" and not x < _EXP_LIMIT:
            raise _refuse_or_retry(x >= _EXP_LIMIT, "exp of it is out of range (beyond 1e100)")
    return getattr(x, name)()


def _refuse_or_retry(certainly_bad: bool, message: str) -> Exception:
    """The domain is broken for certain (refuse) or undecided at this precision (retry)."""
    return ExpressionError(message) if certainly_bad else _Uncertain()


def _nonzero(x: arb) -> bool | None:
    if x.is_exact() and x == 0:
        return False
    return True if (x > 0 or x < 0) else None


def _check_range(x: arb, exact: bool = False) -> None:
    """Is the part ``x`` zero or within the magnitudes?  ``exact``: a rational leaf,
    whose range was checked exactly (1e-100 itself is never inside its own ball's
    bounds test, at any precision)."""
    if exact or (x.is_exact() and x == 0):
        return
    if not (x > 0 or x < 0):  # the ball holds 0: undecided at this precision
        raise _Uncertain()
    magnitude = abs(x)
    if magnitude > _HIGH or magnitude < _LOW:
        raise ExpressionError("a part of it is out of range: non-zero parts must lie "
                              "between 1e-100 and 1e100 in magnitude")
    if not (magnitude >= _LOW and magnitude <= _HIGH):
        raise _Uncertain()


def _sympy(tree: Tree) -> Any:
    kind = tree[0]
    if kind == "q":
        return sympy.Rational(tree[1], tree[2])
    if kind == "pi":
        return sympy.pi
    if kind == "e":
        return sympy.E
    if kind == "+":
        return _sympy(tree[1]) + _sympy(tree[2])
    if kind == "*":
        return _sympy(tree[1]) * _sympy(tree[2])
    if kind == "neg":
        return -_sympy(tree[1])
    if kind == "inv":
        return 1 / _sympy(tree[1])
    if kind == "^":
        return _sympy(tree[1]) ** sympy.Rational(tree[2], tree[3])
    return getattr(sympy, tree[1])(_sympy(tree[2]))


_PRECEDENCE = {"+": 1, "*": 2, "inv": 2, "neg": 3, "^": 4}


def _text(tree: Tree, outer: int = 0) -> str:
    """Canonical text of a tree, parsed back by :func:`parse` to the same value."""
    kind = tree[0]
    if kind == "q":
        text = str(tree[1]) if tree[2] == 1 else f"{tree[1]}/{tree[2]}"
        return f"({text})" if (tree[2] != 1 and outer >= 2) or (tree[1] < 0 and outer >= 1) \
            else text
    if kind in ("pi", "e"):
        return kind
    if kind == "f":
        return f"{tree[1]}({_text(tree[2])})"
    if kind == "+":
        right = tree[2]
        if right[0] == "neg":
            text = f"{_text(tree[1], 1)} - {_text(right[1], 2)}"
        else:
            text = f"{_text(tree[1], 1)} + {_text(right, 2)}"
    elif kind == "*":
        right = tree[2]
        if right[0] == "inv":
            text = f"{_text(tree[1], 2)}/{_text(right[1], 3)}"
        elif right[0] == "q" and right[1] == 1:
            text = f"{_text(tree[1], 2)}/{right[2]}"
        else:
            text = f"{_text(tree[1], 2)}*{_text(right, 3)}"
    elif kind == "neg":
        text = f"-{_text(tree[1], 4)}"
    elif kind == "inv":
        text = f"1/{_text(tree[1], 3)}"
    else:
        exponent = str(tree[2]) if tree[3] == 1 else f"({tree[2]}/{tree[3]})"
        if tree[2] < 0 and tree[3] == 1:
            exponent = f"({exponent})"
        text = f"{_text(tree[1], 5)}^{exponent}"
    return f"({text})" if _PRECEDENCE[kind] < outer else text
