"""Ball arithmetic helpers on python-flint's ``arb``.

A stage's certified value is a list of rows of ``arb`` balls (each a midpoint and
a rigorous error radius); the masked score ``-inf`` is represented by ``None``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache

import flint
from flint import arb, arb_mat, fmpq, fmpz

from symformer.arbcontext import precision  # noqa: F401  (re-exported: the engine's name for it)
from symformer.errors import NotSupportedError
from symformer.example.dyadic import BLOCKED_ENTRIES, DyadicMatrix
from symformer.example.exact import ExactNumber
from symformer.lazy import sympy

NEG_INF = None  # a masked score: exp(-inf) = 0 exactly
ArbRow = list["arb | None"]
ArbMatrix = list[ArbRow]


def dot(a: Sequence[arb], b: Sequence[arb]) -> arb:
    """The dot product of two rows of balls."""
    total = arb(0)
    for x, y in zip(a, b):
        total += x * y
    return total


def product(A: ArbMatrix, B: ArbMatrix | arb_mat, *, transpose: bool = False
            ) -> ArbMatrix | None:
    """The matrix product A B (A B^T with ``transpose``) by Arb's own ``arb_mat``
    product (rigorous, exact zeros stay exact), or None when A is empty or has empty
    rows, or holds a masked score (the caller's entry-by-entry loop then decides)."""
    if not A or not A[0] or not all(v is not None for row in A for v in row):
        return None
    if isinstance(B, DyadicMatrix):  # too large to hold as balls: by blocks of columns
        return B.product(arb_mat(A), transpose=transpose)
    if not isinstance(B, arb_mat):
        if not B or not B[0] or not all(v is not None for row in B for v in row):
            return None
        B = arb_mat(B)
    return (arb_mat(A) * (B.transpose() if transpose else B)).tolist()


def rational_ball(value: sympy.Rational | ExactNumber | fmpq | int) -> arb:
    """An exact rational (SymPy's, the example's, python-flint's or an integer) as a
    ball at the current precision (exact when dyadic)."""
    if isinstance(value, int):
        return arb(value)
    return arb(fmpq(int(value.p), int(value.q)))


def constant_balls(m: sympy.Matrix) -> ArbMatrix:
    """An exact constant matrix (weights, embeddings) as rows of balls at the current
    precision; exact for dyadic rationals.  The rows are shared: read, never change them.

    The example's own matrices (:class:`~symformer.example.exact.ExactMatrix`) give
    their entries (``entries()``: ``fmpq``, or an irrational constant that is its own
    ball at the current precision): SymPy is not needed.  A rational SymPy
    matrix is read from SymPy's own domain matrix, whose entries are already
    python-flint ``fmpq``/``fmpz`` (SymPy's flint ground types): no SymPy number is
    built.  The balls are kept per matrix and precision (an example's weights are
    derived again and again: the example's own matrices whatever their size, SymPy
    matrices up to :data:`_MAX_KEPT_ENTRIES` entries), and given again only while the
    matrix still holds the same entries (a SymPy matrix is mutable: its sparse entries are
    compared with a copy).  Anything else (``sin(1)``, other ground types) goes
    through :func:`sympy_to_arb`.  Floating-point weights
    (:class:`~symformer.example.dyadic.DyadicMatrix`) are converted in NumPy, whole.
    """
    if isinstance(m, DyadicMatrix) and m.fresh():
        return m.balls()
    entries = getattr(m, "entries", None)
    rows = entries() if callable(entries) else None
    if rows is not None:  # the example's exact matrix, not changed: its own entries
        key = (id(m), flint.ctx.prec)
        kept = _CONSTANTS.get(key)
        if kept is not None and kept[0] is m and kept[2] is rows:
            return kept[3]
        # an irrational entry (log(2)) evaluates itself at the current precision
        return _keep(key, m, rows, [[arb(v) if isinstance(v, fmpq) else v.ball()
                                     for v in row] for row in rows])
    rep = getattr(m, "_rep", None)
    if rep is not None and (rep.domain.is_QQ or rep.domain.is_ZZ):
        entries = rep.rep
        sparse = type(entries) is sympy.polys.matrices.sdm.SDM and \
            m.rows * m.cols <= _MAX_KEPT_ENTRIES
        key = (id(m), flint.ctx.prec)
        if sparse:
            kept = _CONSTANTS.get(key)
            if kept is not None and kept[0] is m and kept[1] == m.shape and \
                    kept[2] == entries:
                return kept[3]
        rows = rep.to_list()
        if all(isinstance(v, (fmpq, fmpz)) for row in rows for v in row):
            balls = [[arb(v) for v in row] for row in rows]
            if sparse:
                _keep(key, m, {i: dict(row) for i, row in entries.items()}, balls)
            return balls
    return [[sympy_to_arb(v) for v in row] for row in m.tolist()]


def _keep(key: tuple[int, int], m, entries, balls: ArbMatrix) -> ArbMatrix:
    """Keep ``m``'s balls under ``key`` with what identifies its entries (see
    :data:`_CONSTANTS`); returns the balls."""
    if len(_CONSTANTS) >= _MAX_CONSTANTS:
        _CONSTANTS.clear()
    _CONSTANTS[key] = [m, m.shape, entries, balls, None]
    return balls


def constant_mat(m: sympy.Matrix) -> arb_mat:
    """:func:`constant_balls` as an ``arb_mat`` (shared like the rows: never change it)."""
    if isinstance(m, DyadicMatrix) and m.fresh():
        # a matrix too large to hold as balls (a vocabulary's head) is given as itself:
        # :func:`product` multiplies by it a block of columns at a time
        return m if m.rows * m.cols > BLOCKED_ENTRIES else m.arb_mat()
    balls = constant_balls(m)
    kept = _CONSTANTS.get((id(m), flint.ctx.prec))
    if kept is None or kept[3] is not balls:
        return arb_mat(balls)
    if kept[4] is None:
        kept[4] = arb_mat(balls)
    return kept[4]


def constant_vector(m: sympy.Matrix) -> list[arb]:
    """A constant row or column (gamma, beta, a bias) as a flat list of balls."""
    return [v for row in constant_balls(m) for v in row]


#: :func:`constant_balls`' balls by (matrix id, precision): the matrix itself (kept
#: alive, so its id is not reused), its shape, a copy of its sparse entries (an
#: ExactMatrix: its own rows, compared by identity), the balls, and their ``arb_mat``
#: once :func:`constant_mat` asked for it.
_CONSTANTS: dict[tuple[int, int], list] = {}
#: Matrices kept before :data:`_CONSTANTS` starts again.
_MAX_CONSTANTS = 256
#: Only matrices of at most this many entries are kept: converting a larger one costs
#: little beside the products it enters, and keeping it would cost memory.
_MAX_KEPT_ENTRIES = 1024


def relu_ball(x: arb) -> arb:
    """max(0, x) on a ball: exact branches when the sign is certain, else the hull."""
    if x > 0:
        return x
    if x < 0 or x == 0:
        return arb(0)
    return arb(0).union(x.upper())


@cache
def _functions() -> dict[type, Callable[[arb], arb]]:
    """The SymPy functions :func:`sympy_to_arb` evaluates, and their ``arb`` methods."""
    return {sympy.sin: arb.sin, sympy.cos: arb.cos, sympy.exp: arb.exp, sympy.erf: arb.erf,
            sympy.log: arb.log, sympy.tanh: arb.tanh}


def sympy_to_arb(expr: sympy.Expr, env: dict[sympy.Symbol, arb] | None = None) -> arb:
    """Evaluate a SymPy expression in ball arithmetic at the current precision.

    ``env`` gives balls for free symbols.  Supported: rationals, ``pi``, ``E``,
    ``+``, ``*``, powers, sin, cos, exp, erf, log, tanh, Max.  Anything else raises
    :class:`NotSupportedError` rather than guessing through a float.
    """
    if isinstance(expr, ExactNumber):
        return arb(expr.rational())
    if expr.is_Rational:
        return rational_ball(expr)
    if expr.is_Symbol:
        if env is None or expr not in env:
            raise NotSupportedError(f"no value for the symbol {expr}")
        return env[expr]
    if expr is sympy.pi:
        return arb.pi()
    if expr is sympy.E:
        return arb(1).exp()
    if expr.is_Add and len(expr.args) == 2 and sympy.S.One in expr.args:
        cancelling = _one_plus(expr, env)
        if cancelling is not None:
            return cancelling
    args = [sympy_to_arb(a, env) for a in expr.args]
    if expr.is_Add:
        return _fold(args, lambda a, b: a + b)
    if expr.is_Mul:
        return _fold(args, lambda a, b: a * b)
    if expr.is_Pow:
        base, exponent = args
        if expr.exp.is_Integer:
            return base ** int(expr.exp)
        if expr.exp == sympy.S.Half:
            return base.sqrt()
        return base ** exponent
    if isinstance(expr, sympy.Max):
        result = args[0]
        for a in args[1:]:
            result = result.max(a)
        return result
    function = _functions().get(expr.func)
    if function is not None:
        return function(args[0])
    raise NotSupportedError(f"cannot evaluate {expr.func.__name__} in ball arithmetic")


def _one_plus(expr: sympy.Expr, env: dict[sympy.Symbol, arb] | None) -> arb | None:
    """1 + tanh(u), 1 + erf(u) and 1 - tanh(u)^2 without the cancellation of their two
    terms (GELU's for u << 0: 1 + tanh(-35757) is about e^-71514), or None."""
    other = expr.args[0] if expr.args[1] == 1 else expr.args[1]
    if isinstance(other, sympy.tanh):
        return 2 / (1 + (-2 * sympy_to_arb(other.args[0], env)).exp())
    if isinstance(other, sympy.erf):
        return (-sympy_to_arb(other.args[0], env)).erfc()
    if other.is_Mul and len(other.args) == 2 and other.args[0] == -1 and \
            other.args[1].is_Pow and other.args[1].exp == 2 and \
            isinstance(other.args[1].base, sympy.tanh):
        return sympy_to_arb(other.args[1].base.args[0], env).sech() ** 2
    return None


def _fold(items: Sequence[arb], combine) -> arb:
    result = items[0]
    for item in items[1:]:
        result = combine(result, item)
    return result
