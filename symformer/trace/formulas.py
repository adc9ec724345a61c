"""The general formula of each step of the trace, from the step's operation.

Nothing is written here per kind of step: a stage's general formula is its
operation's declared, proved index equation (:mod:`symformer.equations`, through
:func:`symformer.codegen.backward.equation_lines`), the same the LaTeX export
prints, with its text form for terminals.  A step that shows some of its inputs too (LayerNorm
shows the mean and variance it divides by) shows their equations first: an input
computed from the same first input as the stage is part of the step.
"""

from __future__ import annotations

import re

from symformer.codegen.backward import equation_lines
from symformer.engine.graph import Derivation, Stage
from symformer.equations.stage import Line
from symformer.latex.equations import remark_latex
from symformer.ops.gradient import Gradient
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


def parts(g: Derivation, stage: Stage) -> list[Stage]:
    """The input stages shown within ``stage``'s step: computed from its first input
    (none for a gradient: its equation is its consumers' backward rules)."""
    if not stage.inputs or isinstance(stage.op, Gradient):
        return []
    first = stage.inputs[0]
    return [g[name] for name in stage.inputs[1:] if g[name].inputs[:1] == (first,)]


def _general(line: Line) -> General:
    rhs = f"{line.rhs} {remark_latex(line.remark)}" if line.remark else line.rhs
    return General(line.text, line.lhs, rhs)


def general(g: Derivation, stage: Stage) -> tuple[General, ...]:
    """The general formula(s) of ``stage``: its parts' equations, then its own."""
    return tuple(_general(line) for s in [*parts(g, stage), stage]
                 for line in equation_lines(s))
