"""Certified decimals as LaTeX and MathML, for the trace's tables.

General formulas are the operations' declared index equations (:mod:`symformer.equations`);
worked lines are built and printed by :mod:`symformer.worked`.
"""

from __future__ import annotations


def latex_number(text: str) -> str:
    """A decimal as LaTeX (``-inf`` as ``-\\infty``)."""
    return text.replace("-inf", r"-\infty")


def mathml_number(text: str) -> str:
    """A decimal as MathML (``-inf`` as minus infinity)."""
    if text == "-inf":
        return "<mrow><mo>\u2212</mo><mi>\u221e</mi></mrow>"
    if text.startswith("-"):
        return f"<mrow><mo>\u2212</mo><mn>{text[1:]}</mn></mrow>"
    return f"<mn>{text}</mn>"
