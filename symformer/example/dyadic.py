"""Floating-point weights as exact dyadic matrices, converted in NumPy, not per weight.

Every finite float64, float32, float16 or bfloat16 number is ``M * 2**E`` with
integers M and E, and NumPy gives both for a whole tensor in one call
(:func:`numpy.frexp`).  :func:`dyadic_parts` writes a matrix as one integer matrix
times one power of two, exactly; python-flint then makes the ``arb_mat`` from the
integer matrix (``fmpz_mat`` -> ``arb_mat``, exact) times that power (exact while the
mantissas fit the working precision, else rounded into a rigorous ball): no Python
``Fraction``, ``fmpq`` or SymPy number per weight.  On a 768 x 768 float32 matrix
that is about 0.2 s against 0.35 s for ``fmpq`` entries and 0.55 s for ``arb``
entries built one by one (measured 2026-12-04, idle).

:class:`DyadicMatrix` is the example's matrix of such weights: an
:class:`~symformer.example.exact.ExactMatrix` that holds the float array itself and
builds rationals only when asked (an entry, a row, ``tolist()``, the SymPy matrix),
keeping what it built.  Its transpose, rows and slices are views of the same array,
so a tied head (the embedding table transposed) or a head's columns of a fused
projection cost nothing until they are evaluated.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import Any

import flint
import numpy as np
from flint import arb, arb_mat, fmpq, fmpz_mat

from symformer.errors import InputError
from symformer.example.exact import ExactMatrix
from symformer.example.literals import shorten
from symformer.lazy import sympy

#: Significant bits of each floating-point dtype (bfloat16 arrives widened to float32).
_BITS = {np.dtype(np.float64): 53, np.dtype(np.float32): 24, np.dtype(np.float16): 11}
#: Entries of the ``arb_mat`` s kept across evaluations (each about 48 bytes): an
#: example is evaluated at a few precisions, and building a matrix again costs about
#: 0.3 µs an entry; beyond this budget the oldest are dropped.
KEPT_ENTRIES = 8_000_000
#: The largest magnitude an example entry may have (:mod:`symformer.example.literals`).
_LIMIT = 10**100


def dyadic_parts(array: Any) -> tuple[np.ndarray, int]:
    """``(M, e)`` with ``array == M * 2**e`` exactly: ``M`` an integer array of the same
    shape (int64 when every mantissa fits, else Python integers), ``e`` one exponent.

    The array must be finite (float64, float32 or float16; bfloat16 widened to
    float32).  Trailing zero bits are dropped first, so that a typical weight matrix
    (magnitudes within 2^-38 of each other) fits int64.

    >>> M, e = dyadic_parts(np.array([0.5, -3.0, 0.0, 0.375], np.float32))
    >>> M.tolist(), e
    ([4, -24, 0, 3], -3)
    """
    a = np.asarray(array)
    bits = _BITS.get(a.dtype)
    if bits is None:
        raise TypeError(f"dyadic_parts: expected float64, float32 or float16, found {a.dtype}")
    m, E = np.frexp(a.astype(np.float64, copy=False))  # widening is exact
    M = (m * 2.0**bits).astype(np.int64)  # exact: at most `bits` significant bits
    E = E.astype(np.int64) - bits
    nonzero = M != 0
    if not nonzero.any():
        return np.zeros(a.shape, np.int64), 0
    low = M & -M  # the lowest set bit: 2^(trailing zeros)
    zeros = np.where(nonzero, np.log2(np.where(nonzero, low, 1)).astype(np.int64), 0)
    M >>= zeros
    E += zeros
    e = int(E[nonzero].min())
    shift = np.where(nonzero, E - e, 0)
    length = np.floor(np.log2(np.where(nonzero, np.abs(M), 1))).astype(np.int64) + 1
    if int((length + shift).max()) <= 62:
        return M << shift, e
    return M.astype(object) << shift.astype(object), e


def check_finite(array: np.ndarray, where: str) -> None:
    """Refuse a non-finite weight, or one outside the range examples allow (non-zero
    magnitudes between 1e-100 and 1e100), naming its place."""
    bad = ~np.isfinite(array)
    if bad.any():
        index = _index(np.argwhere(bad)[0])
        raise InputError(f"{where}{index}: the weight {array[tuple(np.argwhere(bad)[0])]} "
                         f"is not finite")
    if array.dtype != np.float64:  # float32 and float16 lie well inside
        return
    size = np.abs(array)
    near = (size != 0) & ((size < 1e-99) | (size > 1e99))  # then decided exactly
    for place in np.argwhere(near):
        value = fmpq(*float(array[tuple(place)]).as_integer_ratio())
        if not fmpq(1, _LIMIT) <= abs(value) <= _LIMIT:
            raise InputError(f"{where}{_index(place)}: the weight "
                             f"{float(array[tuple(place)])!r} is out of the range examples "
                             f"allow (non-zero entries between 1e-100 and 1e100)")


def _index(place: Sequence[int]) -> str:
    return "".join(f"[{int(i)}]" for i in place)


def dyadic_arb_mat(array: np.ndarray) -> arb_mat:
    """The ``arb_mat`` of a finite 2-D float array at the current precision (exact
    while every mantissa of :func:`dyadic_parts` fits it, else rigorous balls)."""
    M, e = dyadic_parts(array)
    rows, cols = M.shape
    if not rows or not cols:
        return arb_mat(rows, cols)
    whole = arb_mat(fmpz_mat(M.tolist()))
    return whole if e == 0 else whole * arb((1, e))


def rationals(array: np.ndarray) -> list[list[fmpq]]:
    """The entries of a 2-D float array as python-flint rationals, exactly."""
    M, e = dyadic_parts(array)
    if e >= 0:
        scale = 1 << e
        return [[fmpq(int(v) * scale) for v in row] for row in M.tolist()]
    q = 1 << -e
    return [[fmpq(int(v), q) for v in row] for row in M.tolist()]


class _Rows(Sequence):
    """The rows of balls of a large matrix, each built when first read (an embedding
    table is read at the sentence's tokens only)."""

    def __init__(self, matrix: DyadicMatrix) -> None:
        self._matrix = matrix
        self._rows: dict[int, list[arb]] = {}

    def __len__(self) -> int:
        return self._matrix.rows

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        row = self._rows.get(i)
        if row is None:
            row = self._rows[i] = dyadic_arb_mat(self._matrix.array[i:i + 1]).tolist()[0]
        return row

    def __iter__(self) -> Iterator[list[arb]]:
        return (self[i] for i in range(len(self)))


class DyadicMatrix(ExactMatrix):
    """An exact matrix of floating-point weights, held as the float array itself.

    ``rows``, ``cols``, ``shape``, ``T``, ``row(i)``, ``col(j)`` and slices need no
    rational (the last four are views); an entry (``m[i, j]``, ``m[k]``) is the SymPy
    ``Rational`` of that weight alone; :meth:`arb_mat` and :meth:`balls` are the
    evaluation's fast path; :meth:`entries`, ``tolist()`` and any other SymPy attribute
    build the rationals, or the SymPy matrix, once.  ``where`` names the weights in
    messages (``h.0.attn.c_attn.weight``); ``origin`` is where they come from in a
    weights file (tensor name and slice), for an example that refers to it.
    """

    __slots__ = ("array", "where", "origin", "vector", "_fmpq")

    def __init__(self, array: Any, where: str = "weights", origin: Any = None,
                 checked: bool = False) -> None:
        a = np.asarray(array)
        #: True for a vector (a bias, a norm's gain): one row, written as one list.
        self.vector = a.ndim == 1
        if a.ndim == 1:
            a = a.reshape(1, -1)
        if a.ndim != 2 or a.dtype not in _BITS:
            raise InputError(f"{where}: expected a matrix of float64, float32 or float16 "
                             f"weights, found shape {a.shape} of {a.dtype}")
        if not checked:
            check_finite(a, where)
        self.array = a
        self.where = where
        self.origin = origin
        self._fmpq: tuple[tuple[fmpq, ...], ...] | None = None
        self._sympy = None
        self.rows, self.cols = a.shape
        self._rational = True

    @property
    def _entries(self) -> tuple[tuple[fmpq, ...], ...]:  # type: ignore[override]
        if self._fmpq is None:
            self._fmpq = tuple(tuple(row) for row in rationals(self.array))
        return self._fmpq

    def fresh(self) -> bool:
        """True while the values are the array's (no SymPy matrix built, which could
        have been changed in place)."""
        return self._sympy is None

    def arb_mat(self) -> arb_mat:
        """The weights as an ``arb_mat`` at the current precision (kept: never change it)."""
        key = (id(self), flint.ctx.prec)
        kept = _KEPT.get(key)
        if kept is not None and kept[0] is self:
            _KEPT.move_to_end(key)
            return kept[1]
        value = dyadic_arb_mat(self.array)
        size = self.rows * self.cols
        global _kept_entries
        if size <= KEPT_ENTRIES:
            while _KEPT and _kept_entries + size > KEPT_ENTRIES:
                _, (old, _mat) = _KEPT.popitem(last=False)
                _kept_entries -= old.rows * old.cols
            _KEPT[key] = (self, value)
            _kept_entries += size
        return value

    def product(self, X: arb_mat, transpose: bool = False) -> list[list[arb]]:
        """The rows of X W (X W^T with ``transpose``), W converted and multiplied a
        block of :data:`BLOCK_COLUMNS` columns at a time (never held whole as balls)."""
        W = self.array.T if transpose else self.array
        rows: list[list[arb]] = [[] for _ in range(X.nrows())]
        for start in range(0, W.shape[1], BLOCK_COLUMNS):
            part = (X * dyadic_arb_mat(W[:, start:start + BLOCK_COLUMNS])).tolist()
            for row, more in zip(rows, part):
                row.extend(more)
        return rows

    def balls(self) -> Sequence[list[arb]]:
        """The rows of balls at the current precision; a large table's rows are each
        built when read (only a sentence's tokens of an embedding table are)."""
        if self.rows * self.cols > _LAZY_ENTRIES:
            return _Rows(self)
        return self.arb_mat().tolist()

    def _view(self, array: np.ndarray) -> DyadicMatrix:
        return DyadicMatrix(array, self.where, None, checked=True)

    @property
    def T(self) -> DyadicMatrix:  # noqa: N802  (SymPy's name)
        """The transpose (a view)."""
        if not self.fresh():
            return self.sympy.T
        return self._view(self.array.T)

    def row(self, i: int) -> Any:
        """Row ``i`` (a 1 x cols view)."""
        if not self.fresh():
            return self.sympy.row(i)
        return self._view(self.array[i:i + 1] if i != -1 else self.array[-1:])

    def col(self, j: int) -> Any:
        """Column ``j`` (a rows x 1 view)."""
        if not self.fresh():
            return self.sympy.col(j)
        return self._view(self.array[:, j:j + 1] if j != -1 else self.array[:, -1:])

    def _rational_at(self, i: int, j: int) -> sympy.Rational:
        p, q = float(self.array[i, j]).as_integer_ratio()
        return sympy.Rational(p, q)

    def __getitem__(self, key: Any) -> Any:
        if not self.fresh():
            return self.sympy[key]
        if isinstance(key, tuple) and len(key) == 2:
            i, j = key
            if isinstance(i, (int, np.integer)) and isinstance(j, (int, np.integer)):
                i, j = _within(int(i), self.rows), _within(int(j), self.cols)
                return self._rational_at(i, j)
            rows = slice(i, i + 1 if i != -1 else None) if isinstance(i, int) else i
            cols = slice(j, j + 1 if j != -1 else None) if isinstance(j, int) else j
            if isinstance(rows, slice) and isinstance(cols, slice):
                return self._view(self.array[rows, cols])
        elif isinstance(key, (int, np.integer)):
            k = _within(int(key), self.rows * self.cols)
            return self._rational_at(*divmod(k, self.cols))
        return self.sympy[key]

    def __iter__(self):
        if not self.fresh():
            return iter(self.sympy)
        return (self._rational_at(i, j) for i in range(self.rows) for j in range(self.cols))

    def tolist(self) -> list[list[Any]]:
        """The entries as rows of SymPy ``Rational`` s."""
        if not self.fresh():
            return self.sympy.tolist()
        return [[sympy.Rational(int(v.p), int(v.q)) for v in row] for row in self._entries]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DyadicMatrix) and self.fresh() and other.fresh():
            return self.shape == other.shape and bool(np.array_equal(self.array, other.array))
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if not self.fresh():
            return self.sympy.__array__(dtype)
        return np.asarray(self.array, dtype=dtype if dtype is not None else np.float64)

    def __repr__(self) -> str:
        tensor = self.origin.get("tensor") if isinstance(self.origin, dict) else None
        if isinstance(tensor, str):  # read from a weights file: named, never printed whole
            return f"{{tensor = {shorten(tensor, 40)!r}}}"
        if self.rows * self.cols > 64:
            return f"DyadicMatrix({self.where}, {self.rows}x{self.cols} {self.array.dtype})"
        return super().__repr__()

    __str__ = __repr__

    def __reduce__(self) -> Any:
        if not self.fresh():
            return super().__reduce__()
        return _rebuilt, (np.asarray(self.array[0] if self.vector else self.array),
                          self.where, self.origin)


def _rebuilt(array: np.ndarray, where: str, origin: Any) -> DyadicMatrix:
    return DyadicMatrix(array, where, origin, checked=True)


def _within(k: int, n: int) -> int:
    if not -n <= k < n:
        raise IndexError(f"index {k} out of range for {n} entries")
    return k % n


#: Matrices of more entries are never held whole as balls (GPT-2's tied head is 38.6
#: million): products with them go a block of columns at a time.
BLOCKED_ENTRIES = 4_000_000
BLOCK_COLUMNS = 2048
#: Matrices of more entries give their rows of balls lazily (:class:`_Rows`).
_LAZY_ENTRIES = 65_536
#: The kept ``arb_mat`` s by (matrix id, precision): the matrix (kept alive, so its id
#: is not reused) and its ``arb_mat``; oldest first.
_KEPT: OrderedDict[tuple[int, int], tuple[DyadicMatrix, arb_mat]] = OrderedDict()
_kept_entries = 0
