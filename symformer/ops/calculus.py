"""The arithmetic a backward rule is written in: exact (SymPy), balls (arb) or floats.

An operation writes its vector-Jacobian product once (``Operation.backward``), as
plain arithmetic on lists of rows, calling the few functions below for what the
three number systems do differently: constants, square roots, exponentials, the
masked score -inf and ReLU's step.  The same code then gives

* the exact local formula of a gradient stage (:data:`EXACT`, over stage symbols),
* its certified value (:data:`BALLS`, at the current ``flint.ctx.prec``),
* its float64 reference (:data:`FLOATS`).

ReLU's derivative at exactly 0 is 0 (a subgradient): :meth:`Arithmetic.step` is
``Heaviside(h, 0)`` exactly, decided later by the certified sign of ``h``; on a
ball that still contains 0 it is the hull [0, 1], so the precision is raised until
the sign is certain, or ``h`` is proved exactly 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
from flint import arb, arb_mat

from symformer.engine.arbmath import NEG_INF, constant_balls, rational_ball, sympy_to_arb
from symformer.lazy import sympy

#: A matrix in any of the three number systems: a list of rows.
Rows = list[list[Any]]


class Arithmetic:
    """Exact SymPy arithmetic (the base class; subclasses override what differs)."""

    def const(self, value: sympy.Expr) -> Any:
        """An exact constant of the example (a weight, eps, sqrt(d_k))."""
        return value

    def zero(self) -> Any:
        """The number 0."""
        return sympy.S.Zero

    def constants(self, m: sympy.Matrix) -> Rows:
        """An exact constant matrix (a weight) in this arithmetic; exact zeros stay the
        SymPy 0 (:func:`matmul` skips them)."""
        return [[self.const(w) if w != 0 else w for w in row] for row in m.tolist()]

    def total(self, terms: Iterable[Any]) -> Any:
        """The sum of ``terms`` (0 for none)."""
        return sympy.Add(*terms)

    def sqrt(self, x: Any) -> Any:
        """The square root."""
        return sympy.sqrt(x)

    def exp(self, x: Any) -> Any:
        """The exponential."""
        return sympy.exp(x)

    def erf(self, x: Any) -> Any:
        """The error function."""
        return sympy.erf(x)

    def tanh(self, x: Any) -> Any:
        """The hyperbolic tangent."""
        return sympy.tanh(x)

    def one_plus_tanh(self, x: Any) -> Any:
        """1 + tanh(x), without the cancellation of its two terms for x << 0 (balls)."""
        return 1 + self.tanh(x)

    def sech_squared(self, x: Any) -> Any:
        """1 - tanh(x)^2, without the cancellation for |x| >> 1 (balls)."""
        t = self.tanh(x)
        return 1 - t * t

    def one_plus_erf(self, x: Any) -> Any:
        """1 + erf(x), without the cancellation for x << 0 (balls)."""
        return 1 + self.erf(x)

    def apply(self, op: Any, args: list[Rows]) -> Rows:
        """The forward operation ``op`` on ``args`` in this arithmetic (a gated
        product's rule reads its activation's value)."""
        return op.sympy([sympy.Matrix(a) for a in args]).tolist()

    def log(self, x: Any) -> Any:
        """The natural logarithm."""
        return sympy.log(x)

    def pi(self) -> Any:
        """pi."""
        return sympy.pi

    def masked(self, x: Any) -> bool:
        """Whether ``x`` is a masked score (-inf): its weight, and its gradient, are 0."""
        return x == -sympy.oo

    def step(self, h: Any) -> Any:
        """ReLU's derivative: 1 for h > 0, 0 for h <= 0 (the subgradient 0 at exactly 0)."""
        return sympy.Heaviside(h, 0)

    def matmul(self, a: Rows, b: Rows) -> Rows:
        """The product a @ b (exact zeros of either factor are skipped)."""
        cols = transpose(b)
        return [[self.total(x * y for x, y in zip(ra, cb) if not (_zero(x) or _zero(y)))
                 for cb in cols] for ra in a]


class Balls(Arithmetic):
    """Ball arithmetic at the current precision (python-flint's ``arb``)."""

    def const(self, value: sympy.Expr) -> arb:
        return rational_ball(value) if value.is_Rational else sympy_to_arb(value)

    def zero(self) -> arb:
        return arb(0)

    def constants(self, m: sympy.Matrix) -> Rows:
        return constant_balls(m)

    def total(self, terms: Iterable[arb]) -> arb:
        result = arb(0)
        for t in terms:
            result += t
        return result

    def sqrt(self, x: arb) -> arb:
        return x.sqrt()

    def exp(self, x: arb) -> arb:
        return x.exp()

    def erf(self, x: arb) -> arb:
        return x.erf()

    def tanh(self, x: arb) -> arb:
        return x.tanh()

    def one_plus_tanh(self, x: arb) -> arb:
        # 1 + tanh(x) = 2 / (1 + exp(-2x)): no two close numbers subtracted (at
        # x = -35757, GELU-tanh's argument for h = -100, it is about e^-71514)
        return 2 / (1 + (-2 * x).exp())

    def sech_squared(self, x: arb) -> arb:
        return x.sech() ** 2

    def one_plus_erf(self, x: arb) -> arb:
        return (-x).erfc()

    def apply(self, op: Any, args: list[Rows]) -> Rows:
        return op.arb(args)

    def log(self, x: arb) -> arb:
        return x.log()

    def pi(self) -> arb:
        return arb.pi()

    def masked(self, x: arb | None) -> bool:
        return x is NEG_INF

    def step(self, h: arb) -> arb:
        if h > 0:
            return arb(1)
        if h < 0 or h == 0:
            return arb(0)
        return arb(0).union(arb(1))  # undecided here: the precision is raised

    def matmul(self, a: Rows, b: Rows) -> Rows:
        """Arb's own matrix product (rigorous; exact zeros stay exact), a few times
        faster than entry by entry; an exact SymPy zero (a weight left unconverted) is
        the ball 0."""
        if not a or not b or not b[0]:
            return super().matmul(a, b)
        if not any(_NONE in map(type, row) for row in a) and \
                not any(_NONE in map(type, row) for row in b):  # (arb_mat reads None as 0)
            try:  # rows of balls as they are (the common case)
                return (arb_mat(a) * arb_mat(b)).tolist()
            except TypeError:  # an exact SymPy zero among them: converted below
                pass
        try:
            product = arb_mat([[_ball(x) for x in row] for row in a]) * \
                arb_mat([[_ball(x) for x in row] for row in b])
        except _NotBall:  # a masked score: entry by entry
            return super().matmul(a, b)
        return product.tolist()


class Floats(Arithmetic):
    """Plain Python floats (the float64 reference of a gradient)."""

    def const(self, value: sympy.Expr) -> float:
        return float(value)

    def zero(self) -> float:
        return 0.0

    def total(self, terms: Iterable[float]) -> float:
        return math.fsum(terms)

    def sqrt(self, x: float) -> float:
        return math.sqrt(x)

    def exp(self, x: float) -> float:
        return math.exp(x)

    def erf(self, x: float) -> float:
        return math.erf(x)

    def tanh(self, x: float) -> float:
        return math.tanh(x)

    def apply(self, op: Any, args: list[Rows]) -> Rows:
        return op.reference([np.array(a, dtype=float) for a in args]).tolist()

    def log(self, x: float) -> float:
        return math.log(x)

    def pi(self) -> float:
        return math.pi

    def masked(self, x: float) -> bool:
        return x == -math.inf

    def step(self, h: float) -> float:
        return 1.0 if h > 0 else 0.0


EXACT = Arithmetic()
BALLS = Balls()
FLOATS = Floats()


def rows(m: Any) -> Rows:
    """A SymPy matrix, a list of rows of balls, or a NumPy array as a list of rows."""
    if isinstance(m, sympy.MatrixBase):
        return m.tolist()
    if hasattr(m, "tolist"):
        return m.tolist()
    return [list(r) for r in m]


def transpose(m: Rows) -> Rows:
    """The transpose of a list of rows."""
    return [list(c) for c in zip(*m)]


def matmul(a: Rows, b: Rows, num: Arithmetic) -> Rows:
    """The product a @ b in the arithmetic ``num`` (:meth:`Arithmetic.matmul`)."""
    return num.matmul(a, b)


def matmul_entry(row: Any, column: Any, num: Arithmetic) -> Any:
    """One entry of a product, ``row`` @ ``column``: the same expression as
    :func:`matmul`'s entry."""
    return num.matmul([list(row)], [[x] for x in column])[0][0]


class _NotBall(Exception):
    pass


#: The type of None (a masked score), for a scan of a row in C.
_NONE = type(None)


def _ball(x: Any) -> arb:
    if isinstance(x, arb):
        return x
    if _zero(x):
        return arb(0)
    raise _NotBall


def _zero(x: Any) -> bool:
    return isinstance(x, (int, sympy.Integer)) and x == 0
