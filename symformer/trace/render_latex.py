"""The trace as a LaTeX document, built from the LaTeX printers' blocks.

Vectors are row ``bmatrix``es, attention weights a coloured table (heat map), the
worked formulas an ``align*`` chain per step: formula = numbers substituted = value.
"""

from __future__ import annotations

from functools import singledispatch

import sympy

from symformer.latex.blocks import Cell, Equation, Heading, MatrixBlock, Prose, Table, Worked
from symformer.latex.blocks import Step as Line
from symformer.latex.escape import latex_text, word_label
from symformer.latex.render import PACKAGES, to_latex
from symformer.trace.formula import general_latex, latex_number
from symformer.trace.formulas import kind_letter
from symformer.trace.steps import ActivationStep, AttentionStep, Entry, NormStep, Step, Trace
from symformer.worked import as_latex


def render_latex(trace: Trace) -> str:
    """A complete pdflatex document with every step of the trace."""
    preamble = "\n".join(["\\documentclass{article}", "\\usepackage[T1]{fontenc}",
                          "\\usepackage[utf8]{inputenc}", "\\usepackage{lmodern}",
                          "\\usepackage[margin=2cm]{geometry}", *PACKAGES,
                          "\\allowdisplaybreaks"])
    title = f"{trace.title}: the token \u201c{trace.token}\u201d through the block"
    body = [to_latex(b) for b in trace_blocks(trace)]
    title = latex_text(title, breaks=True)
    return (f"{preamble}\n\\title{{{title}}}\n\\date{{}}\n\\begin{{document}}\n"
            f"\\maketitle\n\n" + "\n\n".join(body) + "\n\\end{document}\n")


def trace_blocks(trace: Trace) -> list:
    """The trace as the LaTeX printers' blocks (headings, equations, worked lines)."""
    sentence = ", ".join(f"{i}: {t}" for i, t in enumerate(trace.tokens))
    mask = " With the causal mask." if trace.causal else ""
    blocks: list = [Prose((f"The sentence ({sentence}); the token at position "
                           f"{trace.position}, rounded to {trace.decimals} decimals "
                           f"(certified).{mask}",))]
    current: tuple[str, ...] = ()
    for step in trace.steps:
        if step.part != current:
            current = step.part
            blocks.append(Heading(" / ".join(step.part), level=1))
        blocks.append(Heading(f"{step.title} ({step.stage})", level=2))
        blocks.extend(step_blocks(step, trace))
    return blocks


def _equations(step: Step) -> list:
    lines = tuple((general_latex(g.expr.lhs), general_latex(g.expr.rhs)) for g in step.general)
    return [Equation(lines)] if lines else []


def _worked(entries: list[Entry] | tuple[Entry, ...]) -> list:
    lines = []
    for e in entries:
        if e.worked is None:
            continue
        lhs, rest = as_latex(e.worked).split(" = ", 1)
        lines.append(Line(lhs, (("=", rest),)))
    return [Worked(tuple(lines))] if lines else []


def _note(step: Step) -> list:
    return [Prose((step.note,))] if step.note else []


@singledispatch
def step_blocks(step: Step, trace: Trace) -> list:
    """The blocks of one step (vector steps: the row as a ``bmatrix``)."""
    vector = MatrixBlock(sympy.latex(sympy.Symbol(kind_letter(step.kind))),
                         (tuple(latex_number(v) for v in step.values),))
    return _equations(step) + [vector] + _worked(step.entries) + _note(step)


@step_blocks.register
def _(step: AttentionStep, trace: Trace) -> list:
    heat = [None if v == "-inf" else round(100 * float(v)) if step.heat else None
            for v in step.values]  # colour only: never used for a decision
    cells = tuple(Cell(latex_number(v), frozenset({"masked"} if v == "-inf" else ()), h)
                  for v, h in zip(step.values, heat))
    table = Table(f"{step.title}: the row of token {trace.position} ({trace.token}).",
                  f"tab:{step.stage}", ((trace.position, trace.token),),
                  tuple(word_label(lab) for lab in step.labels), (cells,), 0)
    return _equations(step) + [table] + _worked(step.entries) + _note(step)


@step_blocks.register
def _(step: NormStep, trace: Trace) -> list:
    vector = MatrixBlock("y", (tuple(latex_number(v) for v in step.values),))
    return (_equations(step) + _worked([step.mean, step.variance]) + [vector]
            + _worked(step.entries) + _note(step))


@step_blocks.register
def _(step: ActivationStep, trace: Trace) -> list:
    row = tuple(f"\\boxed{{{latex_number(v)}}}" if clip else latex_number(v)
                for v, clip in zip(step.values, step.clipped or [False] * len(step.values)))
    note = [Prose(("Boxed entries were clipped by ReLU (certified h_j <= 0).",))] \
        if any(step.clipped) else []
    return _equations(step) + [MatrixBlock("a", (row,))] + note + _worked(step.entries)
