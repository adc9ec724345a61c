"""Markdown rendering of the blocks, with ``$…$`` / ``$$…$$`` math for KaTeX and MathJax.

Tables become pipe tables with math cells (bold for the chosen token's row,
grey for masked entries, struck-through look for ReLU-clipped ones is not
available, so they are marked with a dagger; heat-map cells are inline HTML
spans with the LaTeX tables' background colour); equations and worked examples
become ``aligned`` displays.
"""

from __future__ import annotations

import re
from functools import singledispatch

from symformer.latex.blocks import (
    Equation,
    Fragment,
    Glossary,
    Heading,
    Math,
    Matrices,
    MatrixBlock,
    Prose,
    Table,
    Worked,
)
from symformer.latex.escape import markdown_text, unicode_math
from symformer.latex.outline import Section
from symformer.latex.render import bmatrix, heat_colour, step_lines

#: A plain decimal, which a heat-map cell shows as text inside its coloured span.
_DECIMAL = re.compile(r"-?\d+(\.\d+)?")


@singledispatch
def to_markdown(block: object) -> str:
    """A block as Markdown."""
    raise TypeError(f"no Markdown rendering for {type(block).__name__}")


def _math(latex: str) -> str:
    return unicode_math(latex)


def _display(latex: str) -> str:
    return f"$$\n{_math(latex)}\n$$"


@to_markdown.register
def _(block: Fragment) -> str:
    return "\n\n".join(to_markdown(b) for b in block.blocks)


@to_markdown.register
def _(block: Heading) -> str:
    return f"{'#' * (block.level + 1)} {markdown_text(block.text)}"


@to_markdown.register
def _(block: Prose) -> str:
    return "".join(f"${_math(p.latex)}$" if isinstance(p, Math) else markdown_text(p)
                   for p in block.parts)


@to_markdown.register
def _(block: Equation) -> str:
    rows = " \\\\\n".join(f"{lhs} &= {rhs}" for lhs, rhs in block.lines)
    return _display(f"\\begin{{aligned}}\n{rows}\n\\end{{aligned}}")


@to_markdown.register
def _(block: Worked) -> str:
    rows = []
    for step in block.steps:
        first, rest = step_lines(step)
        rows.append(f"{step.lhs} &{first}")
        if rest:
            rows.append(f"&{rest}")
    return _display("\\begin{aligned}\n" + " \\\\\n".join(rows) + "\n\\end{aligned}")


@to_markdown.register
def _(block: Matrices) -> str:
    return "\n\n".join(_display(r" \qquad ".join(f"{m.lhs} = {bmatrix(m.rows)}"
                                                  for m in line)) for line in block.lines)


@to_markdown.register
def _(block: MatrixBlock) -> str:
    return _display(f"{block.lhs} = {bmatrix(block.rows)}")


def _heat_cell(cell, bold: bool) -> str | None:
    """A heat-map cell as an inline HTML span with its background, or None when the
    entry is not a plain decimal (math inside HTML is not rendered everywhere)."""
    if cell.heat is None or cell.marks or not _DECIMAL.fullmatch(cell.latex):
        return None
    colour, white = heat_colour(cell.heat)
    text = f"**{cell.latex}**" if bold else cell.latex
    ink = "#FFFFFF" if white else "#000000"
    return (f'<span style="background-color:#{colour};color:{ink};'
            f'padding:0 0.3em">{text}</span>')


def _cell(cell, bold: bool) -> str:
    heat = _heat_cell(cell, bold)
    if heat is not None:
        return heat
    latex = cell.latex
    if "masked" in cell.marks:
        latex = rf"\color{{gray}}{{{latex}}}"
    if bold:
        latex = rf"\mathbf{{{latex}}}"
    mark = "\u2020" if "clipped" in cell.marks else ""
    return f"${_math(latex)}${mark}"


@to_markdown.register
def _(block: Table) -> str:
    header = [*map(markdown_text, block.row_header),
              *(f"${_math(c)}$" for c in block.col_labels)]
    lines = ["| " + " | ".join(header) + " |",
             "|" + "---:|:---|" + "---:|" * len(block.col_labels)]
    for k, ((pos, token), cells) in enumerate(zip(block.row_labels, block.cells)):
        bold = k == block.highlight_row
        label = markdown_text(token) if block.row_math is None else \
            (f"${_math(block.row_math[k])}$" if block.row_math[k] else "")  # escapes "|"
        row = [str(pos), f"**{label}**" if bold else label,
               *(_cell(c, bold) for c in cells)]
        lines.append("| " + " | ".join(row) + " |")
    legend = " ".join(item.replace("Shaded:", "\u2020:") for item in block.legend)
    caption = markdown_text(f"{block.caption} {legend}".strip())
    return f"*{caption}*\n\n" + "\n".join(lines)


@to_markdown.register
def _(block: Glossary) -> str:
    lines = ["| symbol | meaning |", "|:---|:---|"]
    lines += [f"| ${_math(latex)}$ | {markdown_text(meaning)} |" for latex, meaning in block.rows]
    return f"*{markdown_text(block.caption)}*\n\n" + "\n".join(lines)


def markdown_document(g, outline: list) -> str:
    """The whole outline (from :func:`symformer.latex.document.build`) as one Markdown file."""
    title = markdown_text(g.example.title) + (" (causal mask)" if g.causal else "")
    parts = [f"# {title}"]
    for item in outline:
        if isinstance(item, Section):
            parts.append(to_markdown(item.heading))
            parts.extend(to_markdown(f) for f in item.fragments
                         if not f.name.endswith("-matrix"))
        else:
            parts.append(to_markdown(item))
    return "\n\n".join(parts) + "\n"
