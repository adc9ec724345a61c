"""Markdown rendering of the blocks, with ``$…$`` / ``$$…$$`` math for KaTeX and MathJax.

Tables become plain GitHub-flavoured pipe tables with math cells (bold for the chosen
token's row, grey for masked entries; ReLU-clipped ones are marked with a dagger).  No
raw HTML is written, so a safe Markdown renderer (HTML disabled) shows every table;
``heat=True`` colours the attention weights' cells with the LaTeX tables' shades, as
math (``\\colorbox``, which KaTeX and MathJax draw), still without HTML.  A ``|``
in a cell's math is written ``\\vert`` (it would end the cell).  Equations and worked
examples become ``aligned`` displays.
"""

from __future__ import annotations

import re
from functools import singledispatch

from symformer.escape import portable
from symformer.latex.blocks import (
    Cell,
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
from symformer.words import with_causal_mask

#: A plain decimal, which a heat-map cell shows in its coloured box.
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
def _(block: Fragment, heat: bool = False) -> str:
    return "\n\n".join(to_markdown(b, heat=heat) if isinstance(b, Table) else to_markdown(b)
                         for b in block.blocks)


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
    return "\n\n".join(_display(r" \qquad ".join(_matrix_equation(m) for m in line))
                       for line in block.lines)


@to_markdown.register
def _(block: MatrixBlock) -> str:
    return _display(_matrix_equation(block))


def _matrix_equation(block: MatrixBlock) -> str:
    return f"{block.lhs} = {block.value if block.value is not None else bmatrix(block.rows)}"


def _heat_cell(cell: Cell, bold: bool) -> str | None:
    """A heat-map cell as a coloured box of math (KaTeX and MathJax ``\\colorbox``,
    the LaTeX table's shade and ink), or None when the entry is not a plain decimal."""
    if cell.heat is None or cell.marks or not _DECIMAL.fullmatch(cell.latex):
        return None
    colour, white = heat_colour(cell.heat)
    text = rf"\textbf{{{cell.latex}}}" if bold else cell.latex
    if white:
        text = rf"\textcolor{{#FFFFFF}}{{{text}}}"
    return rf"$\colorbox{{#{colour}}}{{{text}}}$"


def cell_math(latex: str) -> str:
    """Math for a table cell: ``|`` (which would end the cell in every pipe-table
    parser, before the math is seen) as ``\\vert``."""
    return _math(latex).replace(r"\|", r"\Vert ").replace("|", r"\vert ")


def _cell(cell: Cell, bold: bool, heat: bool = False) -> str:
    coloured = _heat_cell(cell, bold) if heat else None
    if coloured is not None:
        return coloured
    latex = cell.latex
    if not latex.strip():
        return ""  # "$$" would open display maths in Markdown + KaTeX
    if "masked" in cell.marks:
        latex = rf"\color{{gray}}{{{latex}}}"
    if bold:
        latex = rf"\mathbf{{{latex}}}"
    mark = "\u2020" if "clipped" in cell.marks else ""
    return f"${cell_math(latex)}${mark}"


@to_markdown.register
def _(block: Table, heat: bool = False) -> str:
    header = [*map(markdown_text, block.row_header),
              *(f"${cell_math(c)}$" for c in block.col_labels)]
    lines = ["| " + " | ".join(header) + " |",
             "|" + "---:|:---|" + "---:|" * len(block.col_labels)]
    for k, ((pos, token), cells) in enumerate(zip(block.row_labels, block.cells)):
        bold = k == block.highlight_row
        label = markdown_text(token) if block.row_math is None else \
            (f"${cell_math(block.row_math[k])}$" if block.row_math[k] else "")
        row = [str(pos), f"**{label}**" if bold else label,
               *(_cell(c, bold, heat) for c in cells)]
        lines.append("| " + " | ".join(row) + " |")
    shown = [item for item in block.legend  # a plain table has no shading to explain
             if heat or not item.startswith("Darker:")]
    legend = " ".join(item.replace("Shaded:", "\u2020:") for item in shown)
    caption = markdown_text(f"{block.caption} {legend}".strip())
    return f"*{caption}*\n\n" + "\n".join(lines)


@to_markdown.register
def _(block: Glossary) -> str:
    lines = ["| symbol | meaning |", "|:---|:---|"]
    lines += [f"| ${_math(latex)}$ | "
              f"{markdown_text(meaning) if isinstance(meaning, str) else to_markdown(meaning)} |"
              for latex, meaning in block.rows]
    return f"*{markdown_text(block.caption)}*\n\n" + "\n".join(lines)


def markdown_document(g, outline: list, heat: bool = False) -> str:
    """The whole outline (from :func:`symformer.latex.document.build`) as one Markdown
    file; ``heat`` colours the attention weights (see the module doc)."""
    title = markdown_text(with_causal_mask(g.example.title, g.causal))
    parts = [f"# {title}"]
    for item in outline:
        if isinstance(item, Section):
            if item.heading is not None:
                parts.append(to_markdown(item.heading))
            parts.extend(to_markdown(f, heat=heat) for f in item.fragments
                         if not f.name.endswith("-matrix"))
        else:
            parts.append(to_markdown(item, heat=heat) if isinstance(item, Fragment)
                         else to_markdown(item))
    return portable("\n\n".join(parts) + "\n")  # MathJax reads it as KaTeX does
