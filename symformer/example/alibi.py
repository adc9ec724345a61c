"""ALiBi's slopes in an example file: ``alibi = true`` or ``alibi_slopes = [...]``.

One slope per head: the paper's 2^(-8k/h) (:func:`paper_slopes`) or the file's own
exact positive numbers.  The linear bias itself is :mod:`symformer.ops.alibi`; the
loader (:mod:`symformer.example.loader`) reads a layer's slopes, and
:mod:`symformer.example.given_inputs` the one slope of a given attention.
"""

from __future__ import annotations

from typing import Any

from flint import fmpq

from symformer.errors import InputError
from symformer.example.exact import ExactNumber
from symformer.example.fields import Where
from symformer.example.literals import exact_value
from symformer.lazy import sympy
from symformer.words import plural


def paper_slopes(heads: int) -> tuple[sympy.Expr, ...]:
    """ALiBi's slopes as the paper's code computes them: 2^(-8k/h) for head k = 1 ... h
    when h is a power of 2; otherwise those of the power of 2 just below h, c, then
    every other slope of 2c (exact: 2^(-1/2) stays a square root)."""
    def power_of_two(count: int) -> list[sympy.Expr]:
        return [sympy.Integer(2) ** sympy.Rational(-8 * k, count)
                for k in range(1, count + 1)]

    closest = 1 << (heads.bit_length() - 1)
    if closest == heads:
        return tuple(power_of_two(heads))
    return tuple(power_of_two(closest) + power_of_two(2 * closest)[0::2][:heads - closest])


def alibi_slopes(data: dict[str, Any], here: Where, heads: int
                 ) -> tuple[sympy.Rational, ...] | None:
    """``alibi = true`` (the paper's slopes 2^(-8k/h)) or ``alibi_slopes = [m_1, ...]``
    (one positive number per head); None without either.  ``here`` names the layer."""
    if "alibi" in data and "alibi_slopes" in data:
        raise InputError(f"{here}: give alibi = true (the paper's slopes) or alibi_slopes = "
                         f"[...], not both")
    if "alibi_slopes" in data:
        value = data["alibi_slopes"]
        if not isinstance(value, list) or not value or any(isinstance(v, (list, dict))
                                                           for v in value):
            raise InputError(f"{here}: alibi_slopes must be a list of numbers, one per head")
        if len(value) != heads:
            raise InputError(f"{here}: alibi_slopes has {plural(len(value), 'slope')} but "
                             f"the attention has {plural(heads, 'head')} (one slope per "
                             f"head)")
        return tuple(_slope(v, f"{here}: alibi_slopes[{k}]") for k, v in enumerate(value))
    value = data.get("alibi", False)
    if not isinstance(value, bool):
        raise InputError(f"{here}: alibi must be true or false, found {value!r}")
    if not value or heads == 0:
        return None
    return paper_slopes(heads)


def _slope(value: object, where: str) -> sympy.Expr:
    """One given slope: an exact positive number (rational, or an expression such as
    ``"2^(-1/2)"`` or ``"sqrt(2)/2"``), as a SymPy number."""
    number = exact_value(value, where)
    if isinstance(number, fmpq):
        if number <= 0:
            raise InputError(f"{where}: must be positive, found {number}")
        return ExactNumber(number)
    if not number.ball() > 0:  # certified at the working precision
        raise InputError(f"{where}: must be a positive number, found {number}")
    return number.sympy()
