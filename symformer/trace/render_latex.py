"""The trace as a LaTeX document, built from the LaTeX printers' blocks.

Vectors are row ``bmatrix``es, attention weights a coloured table (heat map), the
worked formulas an ``align*`` chain per step: formula = numbers substituted = value.
"""

from __future__ import annotations

from functools import singledispatch
from typing import TYPE_CHECKING

from symformer.latex.blocks import Cell, Equation, Heading, Math, MatrixBlock, Prose, Table, Worked
from symformer.latex.blocks import Step as Line
from symformer.latex.document import legend_prose
from symformer.latex.escape import latex_text, word_label
from symformer.latex.render import PACKAGES, to_latex
from symformer.latex.tables import heat_of
from symformer.trace.number_markup import latex_number
from symformer.trace.steps import ActivationStep, AttentionStep, Entry, Step
from symformer.worked import as_latex
from symformer.worked.render_latex import chain, latex

if TYPE_CHECKING:
    from symformer.trace.result import Trace


def render_latex(trace: Trace) -> str:
    """A complete pdflatex document with every step of the trace."""
    preamble = "\n".join(["\\documentclass{article}", "\\usepackage[T1]{fontenc}",
                          "\\usepackage[utf8]{inputenc}", "\\usepackage{lmodern}",
                          "\\usepackage[margin=2cm]{geometry}", *PACKAGES,
                          # tables stay under their step's heading, never float away
                          "\\usepackage{float}", "\\floatplacement{table}{H}",
                          "\\allowdisplaybreaks"])
    title = f"{trace.title}: the token \u201c{trace.token}\u201d through the block"
    body = [to_latex(b) for b in trace_blocks(trace)]
    title = latex_text(title, breaks=True)
    return (f"{preamble}\n\\title{{{title}}}\n\\date{{}}\n\\begin{{document}}\n"
            f"\\maketitle\n\n" + "\n\n".join(body) + "\n\\end{document}\n")


def trace_blocks(trace: Trace) -> list:
    """The trace as the LaTeX printers' blocks (headings, equations, worked lines)."""
    sentence = ", ".join(f"{i}: {t}" for i, t in enumerate(trace.tokens))
    mask = (" With the causal mask." if trace.causal else "") + trace.direction
    blocks: list = [Prose((f"The sentence ({sentence}); the token at position "
                           f"{trace.position} (positions {trace.positions}), rounded to "
                           f"{trace.precision} (certified).{mask}",)),
                    legend_prose(trace.notation)]
    current: tuple[str, ...] = ()
    for step in trace.steps:
        if step.part != current:
            current = step.part
            blocks.append(Heading(" / ".join(step.part), level=1))
        blocks.append(Heading(step.title, level=2))  # no stage name: the title says it
        blocks.extend(step_blocks(step, trace))
    return blocks


def _equations(step: Step) -> list:
    lines = tuple((g.lhs, g.full_rhs) for g in step.general)
    return [Equation(lines)] if lines else []


def _worked(entries: list[Entry] | tuple[Entry, ...]) -> list:
    lines = []
    for e in entries:
        if e.worked is None:
            continue
        if len(e.worked.chain) > 2:  # formula, numbers, result (the backward trace):
            lines.append(Line(latex(e.worked.lhs), chain(e.worked)))  # as the export
            continue
        lhs, rest = as_latex(e.worked).split(" = ", 1)
        lines.append(Line(lhs, (("=", rest),)))
    return [Worked(tuple(lines))] if lines else []


def _note(step: Step) -> list:
    return [Prose((step.note,))] if step.note else []


def _symbol(step: Step) -> str:
    """The token's vector at this step, as LaTeX (``q``, ``\\alpha``)."""
    return step.notation.latex if step.notation is not None else r"\mathrm{v}"


@singledispatch
def step_blocks(step: Step, trace: Trace) -> list:
    """The blocks of one step (vector steps: the row as a ``bmatrix``)."""
    vector = MatrixBlock(_symbol(step), (tuple(latex_number(v) for v in step.values),))
    return _equations(step) + [vector] + _worked(step.lines) + _note(step)


@step_blocks.register(AttentionStep)
def _(step: AttentionStep, trace: Trace) -> list:
    heat = [heat_of(v) if step.heat else None for v in step.values]
    cells = tuple(Cell(latex_number(v), frozenset({"masked"} if v == "-inf" else ()), h)
                  for v, h in zip(step.values, heat))
    table = Table(f"{step.title}: the row of \u201c{trace.token}\u201d (position "
                  f"{trace.position}), one entry per key.",
                  f"tab:{step.stage}", ((trace.position, trace.token),),
                  tuple(f"{e.symbol('latex')}\\,{word_label(e.label.split(' ', 1)[1])}"
                        for e in step.entries), (cells,), 0)
    return _equations(step) + [table] + _worked(step.lines) + _note(step)


@step_blocks.register(ActivationStep)
def _(step: ActivationStep, trace: Trace) -> list:
    row = tuple(f"\\boxed{{{latex_number(v)}}}" if clip else latex_number(v)
                for v, clip in zip(step.values, step.clipped or [False] * len(step.values)))
    note = [Prose((f"Boxed entries were clipped by {step.function} (certified ",
                   Math(f"{step.hidden.entry('j')} \\le 0"), ").",))] if any(step.clipped) else []
    return _equations(step) + [MatrixBlock(_symbol(step), (row,))] + note + _worked(step.lines)


def notebook_latex(trace: Trace) -> str:
    """A trace's worked formulas as one display-math ``aligned`` block (notebooks)."""
    lines = []
    for step in trace.steps:
        for e in step.entries:
            if e.worked is not None:
                lhs, rest = as_latex(e.worked).split(" = ", 1)
                lines.append(f"{lhs} &= {rest}")
    return "$$\\begin{aligned} " + r" \\ ".join(lines) + r" \end{aligned}$$"
