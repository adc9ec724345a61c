"""The trace as Markdown with ``$...$`` math (GitHub, Jupyter, KaTeX-based sites)."""

from __future__ import annotations

from functools import singledispatch
from typing import TYPE_CHECKING

from symformer.escape import portable
from symformer.latex.escape import markdown_text
from symformer.latex.markdown import cell_math
from symformer.notation import INDEX_RULE
from symformer.trace.number_markup import latex_number
from symformer.trace.steps import ActivationStep, AttentionStep, Entry, Step
from symformer.worked import as_latex

if TYPE_CHECKING:
    from symformer.trace.result import Trace


def render_markdown(trace: Trace) -> str:
    """Every step as a heading, its formula, a table of the token's row, worked lines;
    math that MathJax renders as KaTeX does (:func:`portable`)."""
    sentence = ", ".join(f"{i}: {markdown_text(t)}" for i, t in enumerate(trace.tokens))
    mask = (" With the causal mask." if trace.causal else "") + trace.direction
    out = [f"# {markdown_text(trace.title)}: token “{markdown_text(trace.token)}”",
           "", f"Sentence: {sentence}. The token at position {trace.position} (positions "
           f"{trace.positions}); numbers rounded to {trace.precision} (certified)."
           f"{mask}", "", legend(trace)]
    current: tuple[str, ...] = ()
    for n, step in enumerate(trace.steps, start=1):
        if step.part != current:
            current = step.part
            out += ["", f"## {markdown_text(' / '.join(step.part))}"]
        out += ["", f"### {n}. {markdown_text(step.title)}", ""]
        out += [f"$${g.latex}$$" for g in step.general]
        out += [""] + body(step)
        if step.note:
            out += ["", markdown_text(step.note)]
    return portable("\n".join(out) + "\n")


def legend(trace: Trace) -> str:
    """The notation: every symbol the trace uses, and how indices count."""
    items = "; ".join(f"${n.latex}$: {markdown_text(n.title)}" for n in trace.notation)
    return f"Notation: {items}. {markdown_text(INDEX_RULE)}"


def _table(symbols: list[str], values: list[str]) -> list[str]:
    return ["| " + " | ".join(f"${cell_math(sym)}$" for sym in symbols) + " |",
            "|" + "---:|" * len(symbols),
            "| " + " | ".join(values) + " |"]


def _number(value: str, bold: bool = False) -> str:
    """A certified decimal as math (a true minus sign; ``-inf`` as −∞)."""
    latex = latex_number(value)
    return f"$\\mathbf{{{latex}}}$" if bold else f"${latex}$"


def _worked(entries: list[Entry] | tuple[Entry, ...]) -> list[str]:
    lines = [f"- ${as_latex(e.worked)}$" for e in entries if e.worked is not None]
    return [""] + lines if lines else []


@singledispatch
def body(step: Step) -> list[str]:
    """The token's row as a one-row table, then each entry's worked formula."""
    return (_table(step.symbols("latex"), [_number(v) for v in step.values])
            + _worked(step.lines))


@body.register
def _(step: AttentionStep) -> list[str]:
    return (["| | key | value |", "|---|---|---:|"]
            + [f"| ${cell_math(e.symbol('latex'))}$ | {markdown_text(e.label)} "
               f"| {_number(e.value)} |"
               for e in step.entries]
            + _worked(step.lines))


@body.register
def _(step: ActivationStep) -> list[str]:
    values = [f"{_number(v, bold=True)} (clipped)" if clip else _number(v)
              for v, clip in zip(step.values, step.clipped or [False] * len(step.values))]
    why = (["", f"Clipped: {step.function} set the entry to 0 (the certified sign of "
                f"${step.hidden.entry('j')}$ is ≤ 0)."] if any(step.clipped) else [])
    return _table(step.symbols("latex"), values) + why + _worked(step.lines)

