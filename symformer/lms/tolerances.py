"""Exact decimal strings for the LMS files: tolerances and bounds, never a float's repr."""

from __future__ import annotations

from fractions import Fraction

from symformer.worked.numbers import terminating


def decimal_text(value: Fraction) -> str:
    """``value`` (a terminating decimal) as its exact decimal string: ``1/200`` ->
    ``0.005``, ``-3/4`` -> ``-0.75``, ``2`` -> ``2``.  Raises ValueError otherwise."""
    text = terminating(value)
    if text is None:
        raise ValueError(f"{value} has no finite decimal expansion")
    return text


def half_unit(decimals: int) -> Fraction:
    """Half a unit in the last asked place: 0.005 at 2 decimals."""
    return Fraction(1, 2 * 10 ** decimals)


def tolerance_text(decimals: int) -> str:
    """:func:`half_unit` as an exact decimal string (``0.005``)."""
    return decimal_text(half_unit(decimals))
