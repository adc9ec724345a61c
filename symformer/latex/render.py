"""LaTeX rendering of the blocks in :mod:`symformer.latex.blocks`.

One ``singledispatch`` registration per kind of block.  Tables need ``booktabs``,
``xcolor`` with the ``table`` option (colortbl) and ``graphicx``; equations need
``amsmath``.  Every one of them ships with TeX Live's latex-base/recommended.
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
    Step,
    Table,
    Worked,
)
from symformer.latex.escape import label_text, latex_text, short_name
from symformer.worked.render_latex import width

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
    # a sentence that introduces a display stays in its paragraph: no page break
    # between them (TeX's \predisplaypenalty)
    out = ""
    for k, b in enumerate(block.blocks):
        if k:
            glued = isinstance(block.blocks[k - 1], Prose) and isinstance(b, (Worked, Matrices))
            out += "\n" if glued else "\n\n"
        out += to_latex(b)
    return out + "\n"


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
    lines = [_remark_below(lhs, rhs) for lhs, rhs in block.lines]
    if len(lines) == 1 and "\\\\" not in lines[0][1]:
        lhs, rhs = lines[0]
        return f"\\begin{{equation}}{label}\n  {lhs} = {rhs}\n\\end{{equation}}"
    if len(lines) == 1:
        lhs, rhs = lines[0]
        return (f"\\begin{{equation}}{label}\n\\begin{{split}}\n  {lhs} &= {rhs}\n"
                "\\end{split}\n\\end{equation}")
    # a remark moved below its formula is not numbered; the label stays on the formula
    rows = [f"  {lhs} &= {rhs}" + (r" \notag" if " \\\\ &" in rhs else "")
            for lhs, rhs in lines]
    rows[0] = rows[0].replace(" \\\\ &", f"{label} \\\\ &", 1) if " \\\\ &" in rows[0] \
        else rows[0] + label
    return "\\begin{align}\n" + " \\\\\n".join(rows) + "\n\\end{align}"


def _remark_below(lhs: str, rhs: str) -> tuple[str, str]:
    """An equation line too wide for the page with a remark (``\\quad \\text{...}``)
    after it: the remark goes on a line of its own below."""
    cut = rhs.rfind(r"\quad \text{")
    if cut < 0 or width(f"{lhs} = {rhs}") <= TEXT_WIDTH - 6:  # 6: the equation number
        return lhs, rhs
    return lhs, rf"{rhs[:cut].rstrip()} \\ &\qquad {rhs[cut + len(chr(92) + 'quad '):]}"


#: Rough width (characters of visible math, :func:`symformer.worked.render_latex.width`)
#: of one line of the text block, and the most worked results set side by side.
TEXT_WIDTH = 70
MAX_COLUMNS = 4


@to_latex.register
def _(block: Worked) -> str:
    """Runs of steps that fit on one line are set one line each, several side by side
    where they fit; a longer step takes two lines (the formula, then its numbers)."""
    return worked_latex(block)


def worked_latex(block: Worked, room: int = 0) -> str:
    """A worked block's LaTeX for a line of ``room`` characters (default: the text
    block's, :data:`TEXT_WIDTH`)."""
    out = []
    for packed, steps in _runs(block.steps, room or TEXT_WIDTH):
        rows = []
        if packed:
            cells = [f"{step.lhs} &{' '.join(step_lines(step)).rstrip()}" for step in steps]
            rows = ["  " + " & ".join(cells[k:k + packed]) for k in range(0, len(cells), packed)]
        for step in steps if not packed else ():
            first, rest = step_lines(step)
            rows.append(f"  {step.lhs} &{first}")
            if rest:
                rows.append(f"  &{rest}")
        out.append("\\begin{align*}\n" + " \\\\\n".join(rows) + "\n\\end{align*}")
    return "\n".join(out)


def _one_line(step: Step) -> str:
    return " ".join([step.lhs, *step_lines(step)]).rstrip()


def _runs(steps: tuple[Step, ...], room: int = TEXT_WIDTH) -> list[tuple[int, list[Step]]]:
    """Consecutive steps grouped as (columns, steps): 0 columns for steps that need two
    lines, else how many one-line steps stand side by side (:func:`worked_columns`)."""
    runs: list[tuple[int, list[Step]]] = []
    for step in steps:
        line = _one_line(step)
        kind = 0 if not worked_columns([line], room) else 1 if width(line) > room // 2 else 2
        if runs and runs[-1][0] == kind:
            runs[-1][1].append(step)
        else:
            runs.append((kind, [step]))
    merged: list[tuple[int, list[Step]]] = []
    for kind, run in runs:
        columns = worked_columns([_one_line(s) for s in run], room) if kind else 0
        if merged and columns == 1 and merged[-1][0] == 1:  # one line each: one display
            merged[-1][1].extend(run)
        else:
            merged.append((columns, list(run)))
    return merged


def worked_columns(lines: list[str], room: int = TEXT_WIDTH) -> int:
    """How many one-line steps fit side by side on a line of ``room`` characters (0: a
    step needs two lines).

    A step with a line break of its own (a long sum) keeps the two-line layout."""
    if not lines or any("\\\\" in line for line in lines):
        return 0
    widest = max(width(line) for line in lines)
    if widest > room:
        return 0
    fit = max(1, min(MAX_COLUMNS, (room + 6) // (widest + 6), len(lines)))  # 6: gap
    rows = -(-len(lines) // fit)
    return -(-len(lines) // rows)  # as many columns as rows need: 4 steps in 2 x 2


def worked_width(block: Worked) -> int:
    """The widest line of a worked block as :func:`worked_latex` sets it (characters of
    visible math): a one-line step whole, a longer one's formula and numbers apart."""
    out = 0
    for step in block.steps:
        first, rest = step_lines(step)
        if "\\\\" in first + rest:
            return TEXT_WIDTH + 1  # a line broken by hand: the full width
        one = width(_one_line(step))
        out = max(out, one if one <= TEXT_WIDTH else max(width(f"{step.lhs} {first}"),
                                                         width(rest) + 4))
    return out


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
def _(block: Glossary) -> str:
    # two symbol-meaning pairs side by side, read down the left pair first
    half = (len(block.rows) + 1) // 2
    left, right = block.rows[:half], block.rows[half:]
    # a longtable: the table may begin under the introduction and go on overleaf (a
    # float would leave the first page half empty)
    head = r"\toprule symbol & meaning & symbol & meaning \\ \midrule"
    lines = [r"{\small",
             r"\begin{longtable}{@{}lp{0.36\linewidth}@{\hspace{1.2em}}lp{0.36\linewidth}@{}}",
             f"\\caption{{{latex_text(block.caption, breaks=True)}}}\\label{{tab:notation}}"
             r" \\", head, r"\endfirsthead",
             r"\multicolumn{4}{@{}l}{\emph{Notation, continued}} \\", head, r"\endhead"]
    def words(meaning: str | Prose) -> str:
        return latex_text(meaning) if isinstance(meaning, str) else to_latex(meaning)

    for k, (latex, meaning) in enumerate(left):
        cells = [f"${latex}$", words(meaning)]
        if k < len(right):
            cells += [f"${right[k][0]}$", words(right[k][1])]
        else:
            cells += ["", ""]
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{longtable}", "}"]
    return "\n".join(lines)


@to_latex.register
def _(block: MatrixBlock) -> str:
    return f"\\[\n  {matrix_equation(block)}\n\\]"


def matrix_equation(block: MatrixBlock) -> str:
    """``lhs = [matrix]``, or ``lhs = value`` for a block with a value."""
    return f"{block.lhs} = {block.value if block.value is not None else aligned_matrix(block.rows)}"


@to_latex.register
def _(block: Matrices) -> str:
    lines = [r" \qquad ".join(matrix_equation(m) for m in line) for line in block.lines]
    if len(lines) == 1:
        return f"\\[\n  {lines[0]}\n\\]"
    return "\\begin{gather*}\n  " + " \\\\\n  ".join(lines) + "\n\\end{gather*}"


def aligned_matrix(rows: tuple[tuple[str, ...], ...]) -> str:
    """Math rows in brackets, each column aligned on the decimal point (a bmatrix
    centres its entries: 0.5 over -1 would not line up)."""
    widths = [max((decimals_shown(v) or 0 for v in col), default=0) for col in zip(*rows)]
    body = " \\\\ ".join(" & ".join(v + decimal_pad(v, w) for v, w in zip(row, widths))
                          for row in rows)
    return (f"\\left[\\begin{{array}}{{@{{\\,}}{'r' * len(widths)}@{{\\,}}}} {body} "
            f"\\end{{array}}\\right]")


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


_DECIMAL = re.compile(r"-?\d+(?:\.(\d+))?")


def decimals_shown(latex: str) -> int | None:
    """The decimals a plain decimal cell shows (0 for an integer); None for anything
    else (a fraction, a closed form, -infinity)."""
    m = _DECIMAL.fullmatch(latex)
    return None if m is None else len(m.group(1) or "")


def decimal_pad(latex: str, decimals: int) -> str:
    """Invisible digits after a decimal cell so that, right-aligned, its decimal point
    lines up with a column showing ``decimals`` decimals (empty for other cells)."""
    shown = decimals_shown(latex)
    if shown is None or shown >= decimals:
        return ""
    return f"\\phantom{{{'' if shown else '.'}{'0' * (decimals - shown)}}}"


def _cell(cell, highlighted: bool = False, decimals: int = 0) -> str:
    """One value cell; in the highlighted row a shaded (heat) cell's number is bold,
    since its own shade hides the row's colour.  ``decimals``: the column's most
    decimals (a cell with fewer is padded to align on the decimal point)."""
    bold = highlighted and cell.heat is not None and "clipped" not in cell.marks
    pad = decimal_pad(cell.latex, decimals)
    text = f"$\\mathbf{{{cell.latex}{pad}}}$" if bold else f"${cell.latex}{pad}$"
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
    if table_chars(block) > WIDE_TABLE:  # in small type, narrower gaps: not shrunk
        stretch += "\\small\\setlength{\\tabcolsep}{2pt}\n"
    return (f"\\begin{{table}}\n\\centering\n{stretch}"
            f"\\caption{{{caption}}}\\label{{{block.label}}}\n"
            f"{fitted}\n\\end{{table}}")


def table_chars(table: Table) -> int:
    """A table's width in characters of visible math: its label columns and each
    column's widest entry or label, with the gaps between columns."""
    labels = max((len(short_name(t)) for _, t in table.row_labels), default=0) + 6
    columns = [max([width(table.col_labels[j])] + [width(row[j].latex) for row in table.cells])
               for j in range(len(table.col_labels))]
    return labels + sum(w + 3 for w in columns)


#: The widest table (:func:`table_chars`) set in the text's size with the default gap
#: between columns; a wider one (a gradient's eight columns at four significant
#: digits, headed (∂L/∂W_1)_j: 104, 512 pt at 2 pt gaps, the line 478 pt) is set in
#: small type (as the captions are) with 2 pt gaps, so it fits the line unshrunk.
WIDE_TABLE = 90


def table_body(block: Table) -> str:
    """The ``tabular`` of a table (booktabs rules, heat shades, the highlighted row),
    without float, caption or resizing: for documents that place it themselves."""
    spec = "rl" + "r" * len(block.col_labels)
    header = " & ".join([*map(latex_text, block.row_header),
                         *(f"${c}$" for c in block.col_labels)])
    lines = [f"\\begin{{tabular}}{{@{{}}{spec}@{{}}}}", r"\toprule", header + r" \\",
             r"\midrule"]
    widths = [max((decimals_shown(row[j].latex) or 0 for row in block.cells), default=0)
              for j in range(len(block.col_labels))]
    for k, ((pos, token), cells) in enumerate(zip(block.row_labels, block.cells)):
        prefix = f"\\rowcolor{{{HIGHLIGHT}}}" if k == block.highlight_row else ""
        label = label_text(token) if block.row_math is None else \
            (f"${block.row_math[k]}$" if block.row_math[k] else "")
        row = [f"{prefix}{pos}", label,
               *(_cell(c, k == block.highlight_row, w) for c, w in zip(cells, widths))]
        lines.append(" & ".join(row) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines)
