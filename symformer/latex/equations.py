"""The general formula of every stage, as a numbered equation.

Each equation is the operation's index equation, declared once in its module and
proved equal to its exact local formula at every entry (:mod:`symformer.equations`,
tests/test_equations_proved.py).  Nothing here knows a stage kind.
"""

from __future__ import annotations

from symformer.engine import Stage
from symformer.equations.stage import Line, equation_lines
from symformer.latex.blocks import Equation


def remark_latex(remark: str) -> str:
    """A remark (plain words written by an operation) as LaTeX text, parenthesised;
    valid in pdflatex, KaTeX and MathML converters alike."""
    for char in "\\{}_&%#$^~":
        remark = remark.replace(char, " ")
    return rf"\quad \text{{({remark})}}"


def _rhs(line: Line) -> str:
    """The right-hand side, with the remark as text after it."""
    return f"{line.rhs} {remark_latex(line.remark)}" if line.remark else line.rhs


def numbered_equation(stage: Stage) -> Equation:
    """The numbered general formula of ``stage``, labelled ``eq:<stage name>``: its
    operation's declared index equation as printed
    (:func:`~symformer.equations.stage.equation_lines`), each remark as text after its
    line."""
    return Equation(tuple((line.lhs, _rhs(line)) for line in equation_lines(stage)),
                    label=f"eq:{stage.name}")


def sublayer(stage: Stage) -> str | None:
    """``"self"`` or ``"cross"`` for a decoder attention stage, else None."""
    part = stage.name.split(".")[2:3]
    return part[0] if stage.side == "decoder" and part in (["self"], ["cross"]) else None
