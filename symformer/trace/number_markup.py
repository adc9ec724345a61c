"""Certified decimals as LaTeX and MathML, for the trace's tables.

General formulas are the operations' declared index equations (:mod:`symformer.equations`);
worked lines are built and printed by :mod:`symformer.worked`.
"""

from __future__ import annotations

from symformer.worked.numbers import latex_decimal
from symformer.worked.render_mathml import number_mathml


def latex_number(text: str) -> str:
    """A decimal as LaTeX (``-inf`` as ``-\\infty``; below 10^-4 in scientific notation,
    :func:`~symformer.worked.numbers.latex_decimal`)."""
    return r"-\infty" if text == "-inf" else latex_decimal(text)


def mathml_number(text: str) -> str:
    """A decimal as MathML (``-inf`` as minus infinity; below 10^-4 in scientific
    notation, :func:`~symformer.worked.render_mathml.number_mathml`)."""
    if text == "-inf":
        return "<mrow><mo>\u2212</mo><mi>\u221e</mi></mrow>"
    return number_mathml(text)
