"""An optimiser lesson: a scalar objective f(θ, …) written in a small, strict grammar.

```toml
title = "Adam on f(theta) = theta^2"
[objective]
f = "(theta - 3)^2 + 2*phi^2"    # the objective, in the grammar below
theta = 1                        # each parameter's starting value (exact numbers)
phi = "1/2"

[train]                          # the run its claims mean (docs/backward.md#training)
optimizer = "adam"
lr = "1/10"
steps = 3
```

Or, for a lesson that gives each step's gradient instead of an objective, ``gradients =
[[g_11, g_12], [g_21, g_22], ...]`` in place of ``f``: step t's objective is the linear
sum_k g_(t+1),k theta_k, whose gradient is the given row.

A hand-written recursive-descent parser; the text never reaches ``eval`` or
``sympify``::

    expr   := term (("+" | "-") term)*
    term   := unary (("*" | "/") unary)*
    unary  := ("+" | "-") unary | power
    power  := atom ("^" exponent)?
    exponent := ["-"] number | "(" ["-"] number ["/" number] ")"
    atom   := number | NAME | function "(" expr ")" | "(" expr ")"
    function := exp | log | sqrt | tanh   (log: the natural logarithm)

NAME is a parameter declared in the table (letters, digits and ``_``, starting with a
letter; not a function's name).  An exponent is an exact rational of at most
:data:`MAX_POWER`; the text is at most :data:`MAX_TEXT` characters and nests at most
:data:`MAX_DEPTH` deep.  The tree (:mod:`symformer.ops.objective`) is differentiated
exactly; each step's gradient is the derivative at that step's parameters.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from symformer.errors import InputError
from symformer.example.literals import exact_scalar

MAX_TEXT = 400
MAX_DEPTH = 20
MAX_POWER = 100
FUNCTIONS = ("exp", "log", "sqrt", "tanh")
_TOKEN = re.compile(r"\s*(?:(?P<num>(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
                    r"|(?P<name>[A-Za-z][A-Za-z0-9_]*)|(?P<op>\*\*|[-+*/^()]))", re.ASCII)


def tokens(text: str, where: str) -> list[tuple[str, str]]:
    """(kind, text) of each token; anything else is a one-line error naming it."""
    found, at = [], 0
    while at < len(text):
        m = _TOKEN.match(text, at)
        if m is None or m.end() == at:
            rest = text[at:].strip()
            if not rest:
                break
            raise InputError(f"{where}: cannot read {rest[:20]!r} (at character {at + 1}); "
                             f"the objective uses numbers, parameter names, + - * / ^, "
                             f"parentheses and {', '.join(FUNCTIONS)}")
        kind = m.lastgroup
        found.append((kind, m.group(kind)))
        at = m.end()
    return found


class _Parser:
    def __init__(self, text: str, names: set[str], where: str) -> None:
        self.items, self.k, self.names, self.where, self.depth = tokens(text, where), 0, \
            names, where, 0

    def fail(self, what: str) -> InputError:
        return InputError(f"{self.where}: {what}")

    def peek(self) -> tuple[str, str] | None:
        return self.items[self.k] if self.k < len(self.items) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        item = self.peek()
        if item is None or (value is not None and item[1] != value):
            found = "the end" if item is None else repr(item[1])
            raise self.fail(f"expected {value or 'more'} but found {found}")
        self.k += 1
        return item

    def nest(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.fail(f"the objective nests more than {MAX_DEPTH} levels deep")

    def expr(self) -> tuple:
        self.nest()
        tree = self.term()
        while self.peek() is not None and self.peek()[1] in "+-":
            op = self.take()[1]
            tree = (op, tree, self.term())
        self.depth -= 1
        return tree

    def term(self) -> tuple:
        tree = self.unary()
        while self.peek() is not None and self.peek()[1] in ("*", "/"):
            op = self.take()[1]
            tree = (op, tree, self.unary())
        return tree

    def unary(self) -> tuple:
        item = self.peek()
        if item is not None and item[1] in "+-":
            self.take()
            self.nest()
            inner = self.unary()
            self.depth -= 1
            return ("neg", inner) if item[1] == "-" else inner
        return self.power()

    def power(self) -> tuple:
        base = self.atom()
        item = self.peek()
        if item is not None and item[1] in ("^", "**"):
            self.take()
            return ("^", base, self.exponent())
        return base

    def exponent(self) -> Fraction:
        paren = self.peek() is not None and self.peek()[1] == "("
        if paren:
            self.take("(")
        sign = -1 if self.peek() is not None and self.peek()[1] == "-" and self.take() else 1
        kind, text = self.take()
        if kind != "num":
            raise self.fail(f"an exponent is an exact number (2, 1/2, -1), found {text!r}")
        value = Fraction(text) * sign
        if paren and self.peek() is not None and self.peek()[1] == "/":
            self.take("/")
            kind, den = self.take()
            if kind != "num" or Fraction(den) == 0:
                raise self.fail(f"an exponent's denominator is a non-zero number, found "
                                f"{den!r}")
            value /= Fraction(den)
        if paren:
            self.take(")")
        if abs(value.numerator) > MAX_POWER or value.denominator > MAX_POWER:
            raise self.fail(f"the exponent {value} is too large (at most {MAX_POWER})")
        return value

    def atom(self) -> tuple:
        kind, text = self.take()
        if kind == "num":
            return ("num", Fraction(text))
        if text == "(":
            tree = self.expr()
            self.take(")")
            return tree
        if kind == "name" and text in FUNCTIONS:
            self.take("(")
            tree = self.expr()
            self.take(")")
            return ("f", text, tree)
        if kind == "name":
            if text not in self.names:
                known = ", ".join(sorted(self.names)) or "none"
                raise self.fail(f"{text!r} is not a parameter of the objective (give its "
                                f"starting value as {text} = ...; parameters: {known})")
            return ("var", text)
        raise self.fail(f"unexpected {text!r}")


def parse_objective(text: Any, names: set[str], where: str) -> tuple:
    """The objective's tree (``("num", q)``, ``("var", name)``, ``(op, a, b)`` for + - * /,
    ``("neg", a)``, ``("^", a, q)``, ``("f", name, a)``); one-line errors otherwise."""
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"{where}: f must be the objective as text, e.g. f = \"theta^2\"")
    if len(text) > MAX_TEXT:
        raise InputError(f"{where}: the objective is longer than {MAX_TEXT} characters")
    parser = _Parser(text, names, where)
    tree = parser.expr()
    if parser.peek() is not None:
        raise parser.fail(f"unexpected {parser.peek()[1]!r} after the objective")
    return tree


def parse_objective_table(data: Any, where: str) -> tuple[str, tuple, dict[str, Any]]:
    """``[objective]``: the text ``f``, its tree, and each parameter's exact start value
    (every other key of the table, in the file's order)."""
    if not isinstance(data, dict):
        raise InputError(f"{where}: [objective] must be a table")
    if ("f" in data) == ("gradients" in data):
        raise InputError(f"{where}: give the objective, f = \"theta^2\", or each step's "
                         f"gradient, gradients = [[...], ...] (one of the two)")
    starts = {}
    for key, value in data.items():
        if key in ("f", "gradients"):
            continue
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", key) or key in FUNCTIONS:
            raise InputError(f"{where}: {key!r} cannot name a parameter")
        starts[key] = exact_scalar(value, f"{where}: {key}")
    if not starts:
        raise InputError(f"{where}: give each parameter's starting value, e.g. theta = 1")
    if "gradients" in data:
        return "", (), starts
    tree = parse_objective(data["f"], set(starts), where)
    used = _names(tree)
    unused = [k for k in starts if k not in used]
    if unused:
        raise InputError(f"{where}: {unused[0]} is not used by the objective f")
    if _degree(tree) > MAX_POWER:
        raise InputError(f"{where}: the objective's powers multiply to more than "
                         f"{MAX_POWER} (a power of a power); write a smaller one")
    _check_magnitudes(tree, starts, where)
    return data["f"], tree, starts


def _degree(tree: tuple) -> Fraction:
    """The largest product of |exponents| along a path of nested powers."""
    if tree[0] == "^":
        return abs(tree[2]) * max(_degree(tree[1]), Fraction(1))
    inner = [_degree(t) for t in tree[1:] if isinstance(t, tuple)]
    return max(inner, default=Fraction(1))


#: Every part of the objective at the starting values lies below this in magnitude.
MAX_MAGNITUDE = 10**100


def _check_magnitudes(tree: tuple, starts: dict[str, Any], where: str) -> None:
    """Every part of f at the starting values is a finite number of magnitude at most
    1e100, and log/sqrt get a positive argument, certified with balls (128 bits): the
    steps that follow start from numbers that can be printed."""
    from flint import arb, ctx

    def ball(t: tuple) -> arb:
        kind = t[0]
        if kind == "num":
            value = arb(t[1].numerator) / t[1].denominator
        elif kind == "var":
            value = arb(int(starts[t[1]].p)) / int(starts[t[1]].q)
        elif kind == "neg":
            value = -ball(t[1])
        elif kind == "^":
            base, q = ball(t[1]), t[2]
            if q.denominator != 1 and not base > 0:
                raise InputError(f"{where}: a fractional power of a number that is not "
                                 f"positive at the starting values")
            if q.denominator == 1 and q < 0 and not (base > 0 or base < 0):
                raise InputError(f"{where}: a negative power of 0 at the starting values")
            value = base ** int(q) if q.denominator == 1 else (
                arb(q.numerator) / q.denominator * base.log()).exp()
        elif kind == "f":
            x = ball(t[2])
            if t[1] in ("log", "sqrt") and not x > 0:
                raise InputError(f"{where}: {t[1]} of a number that is not positive at "
                                 f"the starting values")
            value = getattr(x, t[1])()
        else:
            a, b = ball(t[1]), ball(t[2])
            if kind == "/" and not (b > 0 or b < 0):
                raise InputError(f"{where}: the objective divides by 0 at the starting "
                                 f"values")
            value = a + b if kind == "+" else a - b if kind == "-" else a * b if kind == "*" \
                else a / b
        if not value.is_finite() or abs(value) > MAX_MAGNITUDE:
            raise InputError(f"{where}: a part of the objective exceeds 1e100 in magnitude "
                             f"at the starting values")
        return value

    old = ctx.prec
    ctx.prec = 128
    try:
        ball(tree)
    finally:
        ctx.prec = old


def _names(tree: tuple) -> set[str]:
    if tree[0] == "var":
        return {tree[1]}
    return set().union(*(_names(t) for t in tree[1:] if isinstance(t, tuple)))


def objective_example(data: dict[str, Any], here: Any) -> Any:
    """A file with an ``[objective]`` table: no sentence and no layers, the objective as
    the loss and its parameters as the weights ``train`` updates."""
    from symformer.example.exact import ExactMatrix
    from symformer.example.schema import Example, GivenObjective, Loss

    extra = sorted(set(data) - {"title", "description", "objective", "train", "claim",
                                "equation"})
    if extra:
        raise InputError(f"{here}: {extra[0]} has no meaning in a file with an [objective] "
                         f"table (an optimiser lesson: no tokens, layers or heads)")
    where = str(here.sub("objective"))
    text, tree, starts = parse_objective_table(data["objective"], where)
    trees: tuple = ()
    if not tree:  # given gradients: step t's objective is the linear sum_k g_tk theta_k
        rows = given_gradients(data["objective"]["gradients"], len(starts), where)
        trees = tuple(linear(row, tuple(starts)) for row in rows)
        tree = trees[0]
        text = "given gradients"
    title = data.get("title", "Untitled example")
    if not isinstance(title, str):
        raise InputError(f"{here}: title must be a string, found {title!r}")
    return Example(title=title, tokens=("f",), vocab=("f",),
                   embeddings=ExactMatrix([[0]]), layers=(), positional_encoding="none",
                   source=here.parts[0], given_inputs=True,
                   loss=Loss("objective", str(here.sub("objective"))),
                   objective=GivenObjective(text, tree, tuple(starts.items()), trees))


def linear(gradient: list[Fraction], names: tuple[str, ...]) -> tuple:
    """The tree of sum_k g_k theta_k: the objective whose gradient is the given row g."""
    tree: tuple = ("num", Fraction(0))
    for g, n in zip(gradient, names):
        if g != 0:
            term = ("*", ("num", g), ("var", n))
            tree = term if tree == ("num", Fraction(0)) else ("+", tree, term)
    return tree


#: The most steps whose gradients a lesson may give.
MAX_GIVEN_STEPS = 50


def given_gradients(value: Any, width: int, where: str) -> list[list[Fraction]]:
    """``gradients``: one row per step, one exact rational per parameter (a flat list
    when there is one parameter)."""
    if not isinstance(value, list) or not value:
        raise InputError(f"{where}: gradients must be a list with one gradient per step")
    if len(value) > MAX_GIVEN_STEPS:
        raise InputError(f"{where}: gradients gives {len(value)} steps, more than "
                         f"{MAX_GIVEN_STEPS}")
    rows = []
    for t, row in enumerate(value):
        row = row if isinstance(row, list) else [row]
        if len(row) != width:
            raise InputError(f"{where}: gradients row {t} has {len(row)} entries, expected "
                             f"{width} (one per parameter, in the table's order)")
        exact = [exact_scalar(v, f"{where}: gradients[{t}]") for v in row]
        rows.append([Fraction(int(e.p), int(e.q)) for e in exact])
    return rows
