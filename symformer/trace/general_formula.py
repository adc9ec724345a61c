"""The general formula of each step of the trace, from the step's operation.

Nothing is written here per kind of step: a stage's general formula is its
operation's declared, proved index equation (:mod:`symformer.equations`, through
:func:`symformer.equations.stage.equation_lines`), the same the LaTeX export
prints, with its text form for terminals.  Each step shows its own equation only: the
quantities it reads (a LayerNorm's mean and variance, an RMSNorm's mean square) are
steps of their own, before it (:mod:`symformer.trace.build`).
"""

from __future__ import annotations

import re

from symformer.engine.graph import Derivation, Stage
from symformer.equations.stage import Line, equation_lines
from symformer.trace.steps import General


def letter(stage: Stage) -> str:
    """The symbol of the token's vector at ``stage`` as a SymPy symbol name.

    From the operation's LaTeX notation: ``\\alpha`` -> ``alpha``, ``\\sigma^2`` ->
    ``sigma^2``, ``\\mathrm{PE}`` -> ``PE``, ``\\hat{t}`` -> ``that`` (SymPy prints
    these back as the same LaTeX).
    """
    latex = stage.op.symbol.latex
    latex = re.sub(r"\\mathrm\{(\w+)\}", r"\1", latex)
    latex = re.sub(r"\\hat\{(\w+)\}", r"\1hat", latex)
    return latex.lstrip("\\")


def _general(line: Line) -> General:
    return General(line.text, line.lhs, line.rhs, line.remark)


def general(g: Derivation, stage: Stage) -> tuple[General, ...]:
    """The general formula(s) of ``stage``: its operation's equation lines."""
    return tuple(_general(line) for line in equation_lines(stage))
