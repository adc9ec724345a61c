"""LaTeX rendering of the blocks in :mod:`symformer.latex.blocks`.

One ``singledispatch`` registration per kind of block.  Tables need ``booktabs``,
``xcolor`` with the ``table`` option (colortbl) and ``graphicx``; equations need
``amsmath``.  Every one of them ships with TeX Live's latex-base/recommended.
"""

from __future__ import annotations

from functools import singledispatch

from symformer.latex.blocks import (
    Equation,
    Fragment,
    Heading,
    Math,
    MatrixBlock,
    Prose,
    Step,
    Table,
    Worked,
)
from symformer.latex.escape import label_text, latex_text

#: Packages a fragment needs in the including document's preamble.
PACKAGES = (r"\usepackage{amsmath,amssymb}", r"\usepackage{booktabs}",
            r"\usepackage[table]{xcolor}", r"\usepackage{graphicx}")
#: Colours: named xcolor mixes, so a fragment needs no \definecolor.
CLIPPED = "black!12"
HIGHLIGHT = "yellow!35"
_SECTIONS = {0: "part", 1: "section", 2: "subsection", 3: "subsubsection"}


@singledispatch
def to_latex(block: object) -> str:
    """A block as LaTeX source."""
    raise TypeError(f"no LaTeX rendering for {type(block).__name__}")


@to_latex.register
def _(block: Fragment) -> str:
    return "\n\n".join(to_latex(b) for b in block.blocks) + "\n"


@to_latex.register
def _(block: Heading) -> str:
    label = f"\\label{{{block.label}}}" if block.label else ""
    return f"\\{_SECTIONS[block.level]}{{{latex_text(block.text, breaks=True)}}}{label}"


@to_latex.register
def _(block: Prose) -> str:
    return "".join(f"${p.latex}$" if isinstance(p, Math) else latex_text(p, breaks=True)
                   for p in block.parts)


@to_latex.register
def _(block: Equation) -> str:
    label = f"\\label{{{block.label}}}" if block.label else ""
    if len(block.lines) == 1:
        lhs, rhs = block.lines[0]
        return f"\\begin{{equation}}{label}\n  {lhs} = {rhs}\n\\end{{equation}}"
    rows = [f"  {lhs} &= {rhs}" for lhs, rhs in block.lines]
    rows[0] += label
    return "\\begin{align}\n" + " \\\\\n".join(rows) + "\n\\end{align}"


@to_latex.register
def _(block: Worked) -> str:
    rows = []
    for step in block.steps:
        first, rest = step_lines(step)
        rows.append(f"  {step.lhs} &{first}")
        if rest:
            rows.append(f"  &{rest}")
    return "\\begin{align*}\n" + " \\\\\n".join(rows) + "\n\\end{align*}"


def step_lines(step: Step) -> tuple[str, str]:
    """A step's chain as two lines: the formula, then substitution and result.

    A relation whose right-hand side repeats the previous one is dropped.
    """
    chain, previous = [], None
    for relation, rhs in step.chain:
        if rhs != previous:
            chain.append(f"{relation} {rhs}")
        previous = rhs
    return chain[0], " ".join(chain[1:])


@to_latex.register
def _(block: MatrixBlock) -> str:
    return f"\\[\n  {block.lhs} = {bmatrix(block.rows)}\n\\]"


def bmatrix(rows: tuple[tuple[str, ...], ...]) -> str:
    """Math rows as a ``bmatrix`` (amsmath)."""
    body = " \\\\ ".join(" & ".join(row) for row in rows)
    return f"\\begin{{bmatrix}} {body} \\end{{bmatrix}}"


def heat_colour(percent: int) -> tuple[str, bool]:
    """The heat shade of ``percent`` (0..100) as hex ``RRGGBB``, and whether its text
    should be white: the project's one sequential scale (:mod:`symformer.colors`)."""
    from fractions import Fraction

    from symformer.colors import heat

    fill, ink = heat(Fraction(percent, 100))
    return "".join(f"{c:02X}" for c in fill), ink == (255, 255, 255)


def _cell(cell, highlighted: bool = False) -> str:
    """One value cell; in the highlighted row a shaded (heat) cell's number is bold,
    since its own shade hides the row's colour."""
    bold = highlighted and cell.heat is not None and "clipped" not in cell.marks
    text = f"$\\mathbf{{{cell.latex}}}$" if bold else f"${cell.latex}$"
    if "masked" in cell.marks:
        text = f"\\textcolor{{gray}}{{{text}}}"
    if "clipped" in cell.marks:
        return f"\\cellcolor{{{CLIPPED}}}{text}"
    if cell.heat is not None:
        colour, white = heat_colour(cell.heat)
        text = f"\\textcolor{{white}}{{{text}}}" if white else text
        return f"\\cellcolor[HTML]{{{colour}}}{text}"
    return text


@to_latex.register
def _(block: Table) -> str:
    tabular = table_body(block)
    legend = " ".join(block.legend)
    caption = latex_text(f"{block.caption} {legend}".rstrip(), breaks=True)
    # Shrink (never enlarge) a table wider than the text block.
    fitted = ("\\resizebox{\\ifdim\\width>\\linewidth\\linewidth\\else\\width\\fi}{!}{%\n"
              f"{tabular}}}")
    # Fractions and roots would touch the rules at the default row height.
    stretch = "\\renewcommand{\\arraystretch}{1.6}\n" if block.tall else ""
    return (f"\\begin{{table}}\n\\centering\n{stretch}"
            f"\\caption{{{caption}}}\\label{{{block.label}}}\n"
            f"{fitted}\n\\end{{table}}")


def table_body(block: Table) -> str:
    """The ``tabular`` of a table (booktabs rules, heat shades, the highlighted row),
    without float, caption or resizing: for documents that place it themselves."""
    spec = "rl" + "r" * len(block.col_labels)
    header = " & ".join([*map(latex_text, block.row_header),
                         *(f"${c}$" for c in block.col_labels)])
    lines = [f"\\begin{{tabular}}{{@{{}}{spec}@{{}}}}", r"\toprule", header + r" \\",
             r"\midrule"]
    for k, ((pos, token), cells) in enumerate(zip(block.row_labels, block.cells)):
        prefix = f"\\rowcolor{{{HIGHLIGHT}}}" if k == block.highlight_row else ""
        row = [f"{prefix}{pos}", label_text(token),
               *(_cell(c, k == block.highlight_row) for c in cells)]
        lines.append(" & ".join(row) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines)
