"""Floating-point weights as the exact dyadic rationals they are, and as example text.

Every finite float32, float64, float16 or bfloat16 number is a dyadic rational
p / 2^k.  An imported weight keeps exactly that value: it is written as a bare TOML
decimal when its exact decimal expansion is short (0.5, -1.25, 0.0078125), else as
the string ``"p/2^k"`` (``"-7318349/2^26"``), which the example grammar reads exactly
(:mod:`symformer.example.literals`).  Never the float's shortest ``repr``: ``0.1`` as a
float32 is 13421773/2^27 = 0.100000001490116119384765625, not 1/10.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from symformer.errors import InputError
from symformer.example.dyadic import DyadicMatrix
from symformer.example.literals import MAX_MAGNITUDE, DecimalText
from symformer.example.write import InlineTable, dump

#: A weight whose exact decimal expansion has at most this many characters is written
#: as that decimal; a longer one as ``"p/2^k"``.
MAX_DECIMAL_CHARS = 24


def number_text(value: float, where: str) -> int | DecimalText | str:
    """``value`` (a finite float) as the example text that reads back as exactly it.

    >>> number_text(0.5, "w"), number_text(-3.0, "w"), number_text(0.1, "w")
    ('0.5', -3, '3602879701896397/2^55')
    """
    if not math.isfinite(value):
        raise InputError(f"{where}: the weight {value} is not finite")
    p, q = float(value).as_integer_ratio()  # exact: q is a power of two
    if p and not 1e-99 < abs(value) < 1e99 and not (  # the cheap test, then the exact one
            q <= abs(p) * MAX_MAGNITUDE and abs(p) <= MAX_MAGNITUDE * q):
        raise InputError(f"{where}: the weight {value!r} is out of the range examples "
                         f"allow (non-zero entries between 1e-100 and 1e100)")
    if q == 1:
        return p
    k = q.bit_length() - 1
    if k + 2 > MAX_DECIMAL_CHARS:  # "0." and k digits after the point at least
        return f"{p}/2^{k}"
    # p / 2^k = p 5^k / 10^k: k digits after the point
    digits = str(abs(p) * 5**k).rjust(k + 1, "0")
    decimal = ("-" if p < 0 else "") + digits[:-k] + "." + digits[-k:]
    if len(decimal) <= MAX_DECIMAL_CHARS:
        return DecimalText(decimal)
    return f"{p}/2^{k}"


def rows(array: Any, where: str) -> list[list[Any]]:
    """A 2-D array of floats as rows of exact example numbers."""
    a = np.asarray(array, dtype=np.float64)  # float32/16 and bfloat16 widen exactly
    if a.ndim != 2:
        raise InputError(f"{where}: expected a matrix, found shape {a.shape}")
    return [[number_text(float(v), f"{where}[{i}][{j}]") for j, v in enumerate(row)]
            for i, row in enumerate(a)]


def row(array: Any, where: str) -> list[Any]:
    """A 1-D array of floats as a list of exact example numbers."""
    a = np.asarray(array, dtype=np.float64)
    if a.ndim != 1:
        raise InputError(f"{where}: expected a vector, found shape {a.shape}")
    return [number_text(float(v), f"{where}[{j}]") for j, v in enumerate(a)]


def printable(text: str) -> str:
    """``text`` with every non-printable character (newline, ESC, bidi controls) as "?"."""
    return "".join(c if c.isprintable() else "?" for c in text)


def example_text(data: dict[str, Any], comments: list[str]) -> str:
    """The TOML text of an example table, ``comments`` as ``#`` lines at the top."""
    # a path or a configuration string must not end the comment (a newline) or steer
    # a terminal: every non-printable character becomes "?"
    lines = [printable(line) for line in comments]
    head = "".join(f"# {line}\n" if line else "#\n" for line in lines)
    title = data.get("title")
    if isinstance(title, str):
        data = {**data, "title": printable(title)}
    return head + ("\n" if head else "") + dump(data)


def dyadic_rows(array: Any, where: str) -> DyadicMatrix:
    """A 2-D array of floats as the exact matrix it is (no text, no rational built),
    knowing where in its weights file it comes from when it is a view of a tensor read
    from one (:func:`origin`)."""
    a = np.asarray(array)
    if a.ndim != 2:
        raise InputError(f"{where}: expected a matrix, found shape {a.shape}")
    return DyadicMatrix(a, where, origin(array))


def dyadic_row(array: Any, where: str) -> DyadicMatrix:
    """A 1-D array of floats as an exact row vector (1 x n), as :func:`dyadic_rows`."""
    a = np.asarray(array)
    if a.ndim != 1:
        raise InputError(f"{where}: expected a vector, found shape {a.shape}")
    return DyadicMatrix(a, where, origin(array))


def origin(array: Any) -> dict[str, Any] | None:
    """Where ``array`` sits in the tensor of a weights file it is a view of, as the
    example's reference table (``{"tensor": NAME, "transpose": True, "columns": [a, b]}``,
    :mod:`symformer.example.weights_file`), or None when it is not such a view."""
    base = array
    while base is not None and not getattr(base, "tensor_name", ""):
        base = getattr(base, "base", None)
    if base is None or not isinstance(array, np.ndarray) or array.dtype != base.dtype \
            or not base.flags.c_contiguous or base.ndim not in (1, 2) \
            or array.ndim != base.ndim:
        return None
    offset, rest = divmod(_address(array) - _address(base), array.itemsize)
    if rest or offset < 0:
        return None
    if base.ndim == 1:
        candidates = [({"columns": [offset, offset + array.shape[0]]},
                       base[offset:offset + array.shape[0]])]
    else:
        h, w = array.shape
        first, second = divmod(offset, base.shape[1])
        candidates = [({"rows": [first, first + h], "columns": [second, second + w]},
                       base[first:first + h, second:second + w]),
                      ({"transpose": True, "rows": [second, second + h],
                        "columns": [first, first + w]},
                       base.T[second:second + h, first:first + w])]
    for ref, view in candidates:
        if _same_view(view, array):
            whole = (base.T if ref.get("transpose") else base).shape == array.shape
            if whole:  # the whole tensor (or its transpose): no slice
                ref.pop("rows", None)
                ref.pop("columns", None)
            return {"tensor": base.tensor_name, **ref}
    return None


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def _same_view(view: np.ndarray, array: np.ndarray) -> bool:
    """True when ``view`` and ``array`` are the same numbers of the same memory."""
    return view.shape == array.shape and _address(view) == _address(array) and all(
        n <= 1 or a == b for n, a, b in zip(array.shape, view.strides, array.strides))


def weights_table(data: Any, reference: bool) -> Any:
    """``data`` with every :class:`DyadicMatrix` written out for an example file: its
    exact numbers (:func:`rows`, :func:`row`), or with ``reference`` its reference to
    the weights file where it has one (:func:`origin`)."""
    if isinstance(data, DyadicMatrix):
        if reference and data.origin is not None:
            return InlineTable(data.origin)
        if data.vector:
            return row(data.array[0], data.where)
        return rows(data.array, data.where)
    if isinstance(data, dict):
        return {k: weights_table(v, reference) for k, v in data.items()}
    if isinstance(data, list):
        return [weights_table(v, reference) for v in data]
    return data
