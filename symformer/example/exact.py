"""The example's exact numbers, held as python-flint rationals; SymPy built on first need.

The loader reads every number of a file into :class:`ExactMatrix` and :class:`ExactNumber`.
Evaluation reads their ``fmpq`` entries straight into balls
(:func:`symformer.engine.arbmath.constant_balls`), so deriving and rounding an example
never imports SymPy (:mod:`symformer.lazy`).  Everything else sees SymPy's own objects:
an attribute, an index, arithmetic or ``sympify`` builds the SymPy matrix or number once
(kept), and from then on the SymPy object is the value (a mutable SymPy matrix may be
changed in place; its entries are read from it).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

from flint import fmpq

from symformer.example.expression import Constant
from symformer.lazy import sympy


class _SympyBacked:
    """What both kinds share: the SymPy object built once by :meth:`_build`, given to
    ``sympify`` and answering every attribute the class does not have itself."""

    __slots__ = ("_sympy",)

    def _build(self) -> Any:
        raise NotImplementedError

    @property
    def sympy(self) -> Any:
        """The SymPy object (built once)."""
        if self._sympy is None:
            self._sympy = self._build()
        return self._sympy

    def _sympy_(self) -> Any:
        return self.sympy

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.sympy, name)


class ExactMatrix(_SympyBacked):
    """An exact rational matrix whose SymPy form is built the first time it is needed.

    ``rows``, ``cols`` and ``shape`` are read without SymPy, and so are the rational
    entries, by :meth:`rationals`; any other attribute (``row``, ``T``, ``tolist``),
    an index and arithmetic are the SymPy matrix's.  An entry may be an exact irrational
    :class:`~symformer.example.expression.Constant` (``log(2)``): :meth:`entries` gives
    it, which evaluates itself as a ball; :meth:`rationals` then gives None.
    """

    __slots__ = ("_entries", "rows", "cols", "_rational")

    def __init__(self, entries: Sequence[Sequence[fmpq | Constant]]) -> None:
        self._entries = tuple(tuple(row) for row in entries)
        self._sympy: sympy.Matrix | None = None
        self.rows = len(self._entries)
        self.cols = len(self._entries[0]) if self._entries else 0
        self._rational = not any(isinstance(v, Constant) for row in self._entries
                                 for v in row)

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, cols), as SymPy's."""
        return self.rows, self.cols

    def entries(self) -> tuple[tuple[fmpq | Constant, ...], ...] | None:
        """The entries (``fmpq`` or :class:`Constant`), or None once the SymPy matrix
        exists (it may have been changed in place: then it holds the values)."""
        return self._entries if self._sympy is None else None

    def _build(self) -> sympy.Matrix:
        """The SymPy matrix of the entries."""
        if not self._rational:
            return sympy.Matrix([[v.sympy() if isinstance(v, Constant)
                                  else sympy.Rational(int(v.p), int(v.q)) for v in row]
                                 for row in self._entries])
        QQ = sympy.QQ
        return sympy.polys.matrices.DomainMatrix(
            [[QQ(int(v.p), int(v.q)) for v in row] for row in self._entries],
            self.shape, QQ).to_Matrix()

    def __getitem__(self, key: Any) -> Any:
        return self.sympy[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self.sympy[key] = value

    def __iter__(self):
        return iter(self.sympy)

    def __len__(self) -> int:
        return self.rows * self.cols

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ExactMatrix) and self._sympy is None and other._sympy is None:
            return self._entries == other._entries
        return self.sympy == (other.sympy if isinstance(other, ExactMatrix) else other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # type: ignore[assignment]  # as SymPy's (mutable) Matrix

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        return self.sympy.__array__(*args, **kwargs)

    def __repr__(self) -> str:
        return repr(self.sympy)

    def __str__(self) -> str:
        return str(self.sympy)

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        if self._sympy is not None:  # it holds the values: pickled as what it is
            return _same, (self._sympy,)
        return _from_pairs, ([[v if isinstance(v, Constant) else (int(v.p), int(v.q))
                                for v in row] for row in self._entries],)


def _same(value: Any) -> Any:
    return value


def _from_pairs(rows: list[list[tuple[int, int] | Constant]]) -> ExactMatrix:
    return ExactMatrix([[v if isinstance(v, Constant) else fmpq(*v) for v in row]
                        for row in rows])


class ExactNumber(_SympyBacked):
    """An exact rational (eps, a scale, a base) whose SymPy number is built when needed.

    Compares, hashes (as :class:`fractions.Fraction` does) and prints (``1/1000000``)
    without SymPy; ``p``, ``q`` and :meth:`rational` read it; arithmetic and any other
    attribute (``is_zero``) are the SymPy ``Rational``'s.
    """

    __slots__ = ("_value",)

    def __init__(self, value: fmpq | int) -> None:
        self._value = fmpq(value)
        self._sympy: sympy.Rational | None = None

    @property
    def p(self) -> int:
        """The numerator (in lowest terms, the sign's)."""
        return int(self._value.p)

    @property
    def q(self) -> int:
        """The denominator (positive)."""
        return int(self._value.q)

    def rational(self) -> fmpq:
        """The value as a python-flint ``fmpq``."""
        return self._value

    def _build(self) -> sympy.Rational:
        """The SymPy ``Rational``."""
        return sympy.Rational(self.p, self.q)

    def _compare(self, other: object, op: Callable[[Any, Any], bool]) -> Any:
        if isinstance(other, ExactNumber):
            return op(self._value, other._value)
        if isinstance(other, (int, fmpq)):
            return op(self._value, other)
        return op(self.sympy, other)

    def __eq__(self, other: object) -> bool:
        return self._compare(other, operator.eq)

    def __ne__(self, other: object) -> bool:
        return self._compare(other, operator.ne)

    def __lt__(self, other: object) -> bool:
        return self._compare(other, operator.lt)

    def __le__(self, other: object) -> bool:
        return self._compare(other, operator.le)

    def __gt__(self, other: object) -> bool:
        return self._compare(other, operator.gt)

    def __ge__(self, other: object) -> bool:
        return self._compare(other, operator.ge)

    def __hash__(self) -> int:
        return hash(self._value)

    def __bool__(self) -> bool:
        return bool(self._value)

    def __float__(self) -> float:
        return self.p / self.q

    def __int__(self) -> int:
        return int(self.sympy)

    def __str__(self) -> str:
        return str(self._value)

    __repr__ = __str__

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def __reduce__(self) -> tuple[Callable[..., ExactNumber], tuple[Any, ...]]:
        return _number, (self.p, self.q)


def _number(p: int, q: int) -> ExactNumber:
    return ExactNumber(fmpq(p, q))


def _forward(name: str) -> Callable[..., Any]:
    """The SymPy object's operator ``name``, the example's numbers among the operands
    given as SymPy's."""
    def method(self: Any, *args: Any) -> Any:
        return getattr(self.sympy, name)(*(a.sympy if isinstance(a, _SympyBacked) else a
                                           for a in args))
    method.__name__ = name
    return method


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
              "__truediv__", "__rtruediv__", "__pow__", "__rpow__", "__neg__", "__pos__",
              "__abs__"):
    setattr(ExactNumber, _name, _forward(_name))
for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
              "__matmul__", "__rmatmul__", "__truediv__", "__pow__", "__neg__"):
    setattr(ExactMatrix, _name, _forward(_name))
