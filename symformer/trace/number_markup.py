"""Certified decimals as LaTeX, MathML and text, for the trace's tables and lines.

One rule for every format (issue 39): a nonzero value below 10^-4 in scientific
notation with exactly its printed digits (:func:`~symformer.worked.numbers.scientific`),
any other as printed (an exact short decimal in full, an exact 0 as ``0``).

General formulas are the operations' declared index equations (:mod:`symformer.equations`);
worked lines are built and printed by :mod:`symformer.worked`.
"""

from __future__ import annotations

import re

from symformer.worked.numbers import latex_decimal, scientific
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


def number_text(value: str, minus: str = "\u2212") -> str:
    """A certified number as text: ``-inf`` as −∞, below 10^-4 in scientific notation
    (``0.00000004792`` as 4.792×10⁻⁸, ``0.00001`` as 10⁻⁵, as the LaTeX and MathML
    print them; ``1.2e-9`` as 1.2×10⁻⁹), a negative with ``minus`` (the true minus sign,
    U+2212, as in the PDFs; a terminal's ``-``)."""
    if value == "-inf":
        return minus + "\u221e"
    small = scientific(value)
    if small is not None:
        value = f"{small[0]}e{small[1]}"
    if "e" in value:
        mantissa, exponent = value.split("e")
        power = f"10{exponent.translate(_SUPERSCRIPT)}"
        body = mantissa.lstrip("-")
        value = mantissa[:len(mantissa) - len(body)] + (
            power if body == "1" else f"{body}\u00d7{power}")
    return minus + value[1:] if value.startswith("-") else value


_SUPERSCRIPT = str.maketrans("-0123456789", "\u207b\u2070\u00b9\u00b2\u00b3\u2074\u2075"
                                             "\u2076\u2077\u2078\u2079")
#: A decimal in a line of text (not a part of a word, a symbol's index or another
#: number): what :func:`numbers_text` rewrites.
_DECIMAL = re.compile(r"(?<![\w.])-?\d+\.\d+(?![\w.])")


def numbers_text(line: str) -> str:
    """A worked line's text with each decimal below 10^-4 in scientific notation
    (:func:`number_text`, a terminal's ``-``): ``4·0.00000002859`` as
    ``4·2.859×10⁻⁸``."""
    return _DECIMAL.sub(lambda m: number_text(m[0], "-"), line)
