"""A scalar objective f(θ, …) of named scalar parameters: an optimiser lesson's loss.

The objective is a small tree (parsed from the example file's text by
:mod:`symformer.example.objective`, never by ``eval``); :func:`evaluate` computes it in
any arithmetic of :mod:`symformer.ops.calculus` (exact SymPy, balls, floats) and
:func:`derivative` differentiates it exactly, rule by rule, so the backward rule is
∂f/∂θ at the step's parameters: a gradient that changes at every step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

import numpy as np

from symformer.engine.arbmath import ArbMatrix
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.ops.base import Notation, Operation
from symformer.ops.calculus import BALLS, EXACT, FLOATS, Arithmetic, Rows

Tree = tuple


def _num(q: Fraction) -> tuple:
    return ("num", Fraction(q))


def _is(tree: Tree, value: int) -> bool:
    return tree[0] == "num" and tree[1] == value


def _add(a: Tree, b: Tree) -> Tree:
    if _is(a, 0):
        return b
    if _is(b, 0):
        return a
    return ("+", a, b)


def _mul(a: Tree, b: Tree) -> Tree:
    if _is(a, 0) or _is(b, 0):
        return _num(0)
    if _is(a, 1):
        return b
    if _is(b, 1):
        return a
    return ("*", a, b)


def derivative(tree: Tree, name: str) -> Tree:
    """∂tree/∂name, rule by rule (sum, product, quotient, power, chain rule)."""
    kind = tree[0]
    if kind == "num":
        return _num(0)
    if kind == "var":
        return _num(1 if tree[1] == name else 0)
    if kind in "+-":
        da, db = derivative(tree[1], name), derivative(tree[2], name)
        return _add(da, db) if kind == "+" else (da if _is(db, 0) else ("-", da, db))
    if kind == "neg":
        d = derivative(tree[1], name)
        return d if _is(d, 0) else ("neg", d)
    if kind == "*":
        a, b = tree[1], tree[2]
        return _add(_mul(derivative(a, name), b), _mul(a, derivative(b, name)))
    if kind == "/":
        a, b = tree[1], tree[2]
        da, db = derivative(a, name), derivative(b, name)
        top = _mul(da, b) if _is(db, 0) else ("-", _mul(da, b), _mul(a, db))
        return _num(0) if _is(top, 0) else ("/", top, ("^", b, Fraction(2)))
    if kind == "^":
        a, q = tree[1], tree[2]
        inner = derivative(a, name)
        if _is(inner, 0):
            return _num(0)
        outer = _num(q) if q == 1 else _mul(_num(q), ("^", a, q - 1) if q != 2 else a)
        return _mul(outer, inner)
    _, fn, a = tree
    inner = derivative(a, name)
    if _is(inner, 0):
        return _num(0)
    outer = {"exp": lambda: tree, "log": lambda: ("/", _num(1), a),
             "sqrt": lambda: ("/", _num(Fraction(1, 2)), tree),
             "tanh": lambda: ("-", _num(1), ("^", tree, Fraction(2)))}[fn]()
    return _mul(outer, inner)


def evaluate(tree: Tree, env: dict[str, Any], num: Arithmetic) -> Any:
    """The tree's value in ``num``'s arithmetic, each parameter's value read from ``env``."""
    kind = tree[0]
    if kind == "num":
        return num.const(sympy.Rational(tree[1].numerator, tree[1].denominator))
    if kind == "var":
        return env[tree[1]]
    if kind == "neg":
        return -evaluate(tree[1], env, num)
    if kind == "^":
        base, q = evaluate(tree[1], env, num), tree[2]
        if q.denominator == 1:
            return base ** int(q) if q > 0 else 1 / base ** int(-q) if q < 0 else \
                num.const(sympy.S.One)
        if q == Fraction(1, 2):
            return num.sqrt(base)
        return num.exp(num.const(sympy.Rational(q.numerator, q.denominator)) * num.log(base))
    if kind == "f":
        x = evaluate(tree[2], env, num)
        return {"exp": num.exp, "log": num.log, "sqrt": num.sqrt, "tanh": num.tanh}[tree[1]](x)
    a, b = evaluate(tree[1], env, num), evaluate(tree[2], env, num)
    return a + b if kind == "+" else a - b if kind == "-" else a * b if kind == "*" else a / b


def _rational(tree: Tree, env: dict[str, Fraction | None]) -> Fraction | None:
    """The tree's exact value when it is rational and every parameter it reads is known
    (``env``), else None (a log, a root, a division by 0)."""
    kind = tree[0]
    if kind == "num":
        return tree[1]
    if kind == "var":
        return env.get(tree[1])
    if kind == "neg":
        value = _rational(tree[1], env)
        return None if value is None else -value
    if kind == "^":
        base, q = _rational(tree[1], env), tree[2]
        if base is None or q.denominator != 1 or (base == 0 and q < 0):
            return None
        return base ** int(q)
    if kind == "f":
        return None
    a, b = _rational(tree[1], env), _rational(tree[2], env)
    if a is None or b is None or (kind == "/" and b == 0):
        return None
    return a + b if kind == "+" else a - b if kind == "-" else a * b if kind == "*" else a / b


def _sign(tree: Tree, balls: dict[str, Any], exact: dict[str, Fraction | None]) -> int | None:
    """The certified sign of the tree's value: its ball's, else its exact rational
    value's; None when neither decides."""
    ball = evaluate(tree, balls, BALLS)
    if ball > 0 or ball < 0:
        return 1 if ball > 0 else -1
    if ball == 0:
        return 0
    value = _rational(tree, exact)
    return None if value is None else (value > 0) - (value < 0)


def outside_domain(tree: Tree, balls: dict[str, Any], exact: dict[str, Fraction | None]
                   ) -> str | None:
    """What the tree does outside its domain at these parameters, certified: ``division
    by zero``, ``log of 0``, ``log of a negative number``, ``square root of a negative
    number``, ``a fractional power of a number <= 0``; None when nothing is shown
    (``balls``: the parameters' balls; ``exact``: their rational values when known)."""
    kind = tree[0]
    if kind in ("num", "var"):
        return None
    for child in tree[1:]:
        if isinstance(child, tuple) and (found := outside_domain(child, balls, exact)):
            return found
    if kind == "/" or kind == "^" and tree[2] < 0 and tree[2].denominator == 1:
        return "division by zero" if _sign(tree[2] if kind == "/" else tree[1],
                                           balls, exact) == 0 else None
    if kind == "^" and tree[2].denominator != 1:
        sign = _sign(tree[1], balls, exact)
        return "a fractional power of a number <= 0" if sign is not None and \
            sign <= 0 and not (sign == 0 and tree[2] > 0) else None
    if kind == "f" and tree[1] in ("log", "sqrt"):
        sign = _sign(tree[2], balls, exact)
        if sign is not None and sign < 0:
            return f"{'log' if tree[1] == 'log' else 'square root'} of a negative number"
        if sign == 0 and tree[1] == "log":
            return "log of 0"
    return None


def objective(theta):
    """f(θ) at the parameter row θ; each instance runs its own tree (``function()``)."""
    raise NotImplementedError  # replaced per instance by the operation's function()


def _text(tree: Tree, names: tuple[str, ...]) -> str:
    """The tree as the equation IR's Python-like text, parameter k as theta[0, k]."""
    kind = tree[0]
    if kind == "num":
        q = tree[1]
        return str(q.numerator) if q.denominator == 1 else f"({q.numerator} / {q.denominator})"
    if kind == "var":
        return f"theta[0, {names.index(tree[1])}]"
    if kind == "neg":
        return f"(-{_text(tree[1], names)})"
    if kind == "^":
        q = tree[2]
        exp = str(q.numerator) if q.denominator == 1 else f"({q.numerator} / {q.denominator})"
        return f"({_text(tree[1], names)}) ** {exp}"
    if kind == "f":
        return f"{tree[1]}({_text(tree[2], names)})"
    return f"({_text(tree[1], names)} {kind} {_text(tree[2], names)})"


@dataclass(frozen=True, eq=False)
class Objective(Operation):
    """f(θ) (1 x 1) of the parameter row θ (1 x k; column k the parameter ``names[k]``):
    the weight ``theta`` that ``train`` updates.

    ``from_stages``: θ is the input stage (a training step's parameters; see
    :meth:`Operation.staged`), the field ``theta`` then unused.  ``trees``: given
    gradients, step t's objective trees[t] (the linear Σ_k g_(t,k) θ_k).
    """

    tree: Tree
    names: tuple[str, ...]
    theta: sympy.Matrix | None = None
    text: str = ""
    notation: Notation | None = None
    trees: tuple[Tree, ...] = ()
    from_stages: bool = False

    name = "objective"
    is_loss = True
    reference_function = objective
    default_notation = Notation("f", "f", "Objective")

    def _row(self, args: Sequence[Any], num: Arithmetic) -> list[Any]:
        if not self.from_stages:
            return [num.const(v) for v in self.theta.row(0)]
        first = args[0]
        return list(first.row(0)) if isinstance(first, sympy.MatrixBase) else list(first[0])

    def _env(self, args: Sequence[Any], num: Arithmetic) -> dict[str, Any]:
        return dict(zip(self.names, self._row(args, num)))

    def function(self):
        names, tree = self.names, self.tree

        def objective(theta):
            """f(theta) (the objective's tree in floats), theta the parameter row."""
            env = dict(zip(names, (float(v) for v in np.asarray(theta).reshape(-1))))
            return np.array([[evaluate(tree, env, FLOATS)]])

        return objective

    def parameters(self) -> dict[str, sympy.Matrix]:
        return {} if self.from_stages else {"theta": self.theta}

    def parameter_columns(self, parameter: str) -> tuple[str, ...]:
        """The parameter row's column labels: the parameters' names."""
        return self.names

    def parameter_notation(self, name: str) -> Notation:
        return Notation(r"\theta", "θ", "the parameters")

    def staged(self) -> Operation | None:
        return None if self.from_stages else replace(self, from_stages=True)

    def for_graph(self, g: Any, rename: Callable[[str], str]) -> Operation:
        """Step t's objective when the gradients are given per step (``rename`` names
        step t's stages): trees[t], or 0 past the last given gradient."""
        if not self.trees or not self.from_stages:
            return self
        t = int(rename("").removeprefix("step").rstrip("."))
        return replace(self, tree=self.trees[t] if t < len(self.trees) else _num(0))

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation | None:
        if self.from_stages:
            return None
        return IndexEquation((f"f[i, j] = {_text(self.tree, self.names)}",),
                             {"f": "out", "theta": "param:theta"},
                             remark="the objective as the example file gives it; " + ", ".join(
                                 f"theta_{k} = {n}" for k, n in enumerate(self.names)))

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation | None:
        """dL/dθ_j = dL/df · ∂f/∂θ_j, each derivative taken rule by rule."""
        if self.from_stages:
            return None
        parts = [f"({_text(derivative(self.tree, n), self.names)})" for n in self.names]
        body = parts[-1]
        for k in range(len(parts) - 2, -1, -1):
            body = f"({parts[k]} if j == {k} else {body})"
        return IndexEquation((f"dtheta[i, j] = dL * {body}",),
                             {"dtheta": "result", "dL": "grad", "theta": "param:theta"})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return sympy.Matrix([[evaluate(self.tree, self._env(args, EXACT), EXACT)]])

    def outside_domain(self, args: Sequence[ArbMatrix], exact: Sequence[Fraction | None],
                       gradient: bool = False) -> str | None:
        """What f (``gradient``: one of its derivatives) does outside its domain at the
        parameters ``args`` (balls; ``exact``: their rational values, None where not
        known), certified (:func:`outside_domain`); None when nothing is shown."""
        balls, known = self._env(args, BALLS), dict(zip(self.names, exact))
        trees = [derivative(self.tree, n) for n in self.names] if gradient else [self.tree]
        return next((found for tree in trees
                     if (found := outside_domain(tree, balls, known))), None)

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return [[evaluate(self.tree, self._env(args, BALLS), BALLS)]]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        if self.from_stages:
            return (np.asarray(args[0], dtype=dtype),)
        return (np.array([[float(v) for v in self.theta.row(0)]], dtype=dtype),)

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """∂L/∂θ_k = ∂L/∂f · ∂f/∂θ_k, each derivative evaluated at θ (the parameter
        ``theta``, or input 0 when read from a stage)."""
        env = self._env(args, num)
        return [[grad[0][0] * evaluate(derivative(self.tree, n), env, num)
                 for n in self.names]]

    def backward_function(self, wrt: int | str):
        names, trees = self.names, [derivative(self.tree, n) for n in self.names]

        def objective_backward(g, theta):
            """dL/dtheta_k = g df/dtheta_k, the objective's derivative at theta."""
            env = dict(zip(names, (float(v) for v in np.asarray(theta).reshape(-1))))
            return np.asarray(g).reshape(1, 1) * np.array(
                [[evaluate(t, env, FLOATS) for t in trees]])

        return objective_backward

    def backward_arguments(self, wrt, args, out, grad, dtype):
        return (grad.astype(dtype), *self.arguments(args, dtype))
