"""The trace as plain text for a terminal: aligned, readable at 80 columns.

Its numbers follow the notes' rule (:mod:`symformer.trace.number_markup`): below 10^-4
in scientific notation (``2.859×10⁻⁸``), an exact short decimal in full, an exact 0 as
``0``; a terminal's minus sign, ``-``.
"""

from __future__ import annotations

import textwrap
from functools import singledispatch
from typing import TYPE_CHECKING

from symformer.engine.rounding import display_value
from symformer.notation import legend_text
from symformer.trace.number_markup import number_text, numbers_text
from symformer.trace.steps import ActivationStep, AttentionStep, Entry, Step
from symformer.worked import as_text

if TYPE_CHECKING:
    from symformer.trace.result import Trace

WIDTH = 80
_INDENT = "    "


def render_text(trace: Trace) -> str:
    """Every step: where it is, its formula, the token's numbers and how each was computed."""
    lines = [header(trace), ""]
    total = len(trace.steps)
    for n, step in enumerate(trace.steps, start=1):
        lines.extend(step_lines(step, n, total))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def header(trace: Trace) -> str:
    """Title line, the sentence with its positions, and the notation."""
    sentence = "  ".join(f"{i}:{t}" for i, t in enumerate(trace.tokens))
    mask = ", causal mask" if trace.causal else ""
    return (f"{trace.title}: token {trace.token!r} at position {trace.position} "
            f"(positions {trace.positions}{mask}; {trace.precision})\n"
            + (_wrap(trace.direction.strip(), "") + "\n" if trace.backward else "")
            + _wrap(f"sentence: {sentence}", "") + "\n"
            + _wrap(legend_text(trace.notation), ""))


def step_lines(step: Step, n: int, total: int) -> list[str]:
    """One step: a title line, its general formula(s), then its kind's body."""
    where = " > ".join(step.part)
    lines = [f"[{n}/{total}] {where} > {step.title}"]  # no stage name: the title says it
    lines.extend(_wrap(g.text, "  ") for g in step.general)
    lines.extend(body(step))
    if step.note:
        lines.append(_wrap(step.note, "  "))
    return lines


def _wrap(text: str, indent: str) -> str:
    return "\n".join(textwrap.wrap(text, WIDTH, initial_indent=indent,
                                   subsequent_indent=indent + _INDENT,
                                   break_long_words=False, break_on_hyphens=False))


def _worked(entries: tuple[Entry, ...] | list[Entry]) -> list[str]:
    return [_wrap(numbers_text(as_text(e.worked)), "  ") for e in entries
            if e.worked is not None]


def _number(value: str) -> str:
    """A table's value as the terminal prints it."""
    return number_text(value, "-")


def _table(labels: list[str], values: list[str]) -> list[str]:
    """A horizontal table of labels over values, wrapped to the terminal width."""
    widths = [max(len(a), len(b)) for a, b in zip(labels, values)]
    lines, start = [], 0
    while start < len(labels):
        end, used = start, 2
        while end < len(labels) and (end == start or used + widths[end] + 2 <= WIDTH):
            used += widths[end] + 2
            end += 1
        cells = range(start, end)
        lines.append("  " + "  ".join(labels[j].rjust(widths[j]) for j in cells))
        lines.append("  " + "  ".join(values[j].rjust(widths[j]) for j in cells))
        start = end
    return lines


@singledispatch
def body(step: Step) -> list[str]:
    """The token's numbers and their worked formulas (vector steps)."""
    return _table(step.symbols(), [_number(v) for v in step.values]) + _worked(step.lines)


@body.register
def _(step: AttentionStep) -> list[str]:
    width = max(len(e.label) for e in step.entries)
    sym = max(len(e.symbol()) for e in step.entries)
    lines = []
    for e in step.entries:
        bar = ""
        if step.heat and e.value != "-inf":
            bar = "  " + "#" * round(40 * abs(float(display_value(e.value))))  # display only
        lines.append(f"  {e.symbol().ljust(sym)}  key {e.label.ljust(width)}  "
                     f"{_number(e.value).rjust(8)}{bar}")
    return lines + _worked(step.lines)


@body.register
def _(step: ActivationStep) -> list[str]:
    if not step.clipped:
        return body.dispatch(Step)(step)
    values = [_number(v) + ("*" if clip else " ")
              for v, clip in zip(step.values, step.clipped)]
    lines = _table([symbol + " " for symbol in step.symbols()], values)
    if any(step.clipped):
        lines.append(f"  (* clipped: {step.hidden.entry('j', fmt='text')} ≤ 0, "
                     f"so {step.function} gives 0)")
    return lines + _worked(step.lines)
