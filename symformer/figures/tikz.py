"""Figures as TikZ/PGFPlots code for LaTeX documents.

Each figure is a ``figure`` environment with its caption and label, to ``\\input``
into a document whose preamble loads ``tikz`` (library ``patterns``) and
``pgfplots`` (:data:`PREAMBLE`); the fonts are the document's own.  Heat maps are
plain TikZ (one filled rectangle per cell); curves and bars are PGFPlots axes.
Texts are the certified decimals, written as given; nothing is recomputed by TeX.
"""

from __future__ import annotations

from fractions import Fraction

from symformer.figures.colors import MASKED_FILL, MASKED_HATCH, SERIES, cividis, text_colour
from symformer.figures.data import Bars, Curves, Figure, HeatMap, label, pe_curve
from symformer.latex.escape import latex_text

#: What a document needs to typeset the figures.
PREAMBLE = r"""\usepackage{tikz}
\usetikzlibrary{patterns}
\usepackage{pgfplots}
\pgfplotsset{compat=1.18}
"""

DOCUMENT = r"""\documentclass{article}
\usepackage[T1]{fontenc}
\usepackage[utf8]{inputenc}
\usepackage{lmodern}
\usepackage[a4paper,margin=2.2cm]{geometry}
%(preamble)s\begin{document}
%(body)s\end{document}
"""


def colour(rgb: tuple[int, int, int]) -> str:
    """An xcolor colour expression: ``{rgb,255:red,0;green,34;blue,78}``."""
    r, g, b = rgb
    return f"{{rgb,255:red,{r};green,{g};blue,{b}}}"


def number(x: Fraction | float) -> str:
    """A coordinate for TeX (drawing only: the texts are the certified decimals)."""
    return f"{float(x):.6g}"


def render(figure: Figure) -> str:
    """The ``figure`` environment of one figure."""
    if isinstance(figure, HeatMap):
        body = heat_map(figure)
    elif isinstance(figure, Curves):
        body = curves(figure)
    else:
        body = bars(figure)
    return ("\\begin{figure}[htbp]\n\\centering\n" + body
            + f"\\caption{{{figure.caption}}}\n\\label{{{label(figure)}}}\n\\end{{figure}}\n")


def document(names: list[str]) -> str:
    """A standalone document that inputs the figure files ``names`` (without .tex)."""
    body = "".join(f"\\input{{{n}}}\n" for n in names)
    return DOCUMENT % {"preamble": PREAMBLE, "body": body}


def _token(token: str, position: int) -> str:
    return f"\\shortstack{{{latex_text(token)}\\\\[-1pt]\\scriptsize {position}}}"


def heat_map(h: HeatMap) -> str:
    """One rectangle per cell, its certified value written in it, masked cells hatched."""
    n_rows, n_cols = len(h.rows), len(h.cols)
    lines = ["\\begin{tikzpicture}[x=1.35cm, y=-0.85cm, font=\\small]"]
    for i in range(n_rows):
        for j in range(n_cols):
            cell = f"({j},{i}) rectangle ++(1,1)"
            if h.masked[i][j]:
                fill, ink = MASKED_FILL, (0, 0, 0)
                lines.append(f"\\fill[fill={colour(fill)}] {cell};")
                hatch = colour(MASKED_HATCH)
                lines.append(f"\\fill[pattern=north east lines, pattern color={hatch}] {cell};")
            else:
                fill = cividis(h.shades[i][j])
                ink = text_colour(fill)
                lines.append(f"\\fill[fill={colour(fill)}] {cell};")
            lines.append(f"\\node[text={colour(ink)}] at ({j + 0.5},{i + 0.5}) "
                         f"{{${h.texts[i][j]}$}};")
    for j in range(n_cols + 1):
        lines.append(f"\\draw[white, line width=0.8pt] ({j},0) -- ({j},{n_rows});")
    for i in range(n_rows + 1):
        lines.append(f"\\draw[white, line width=0.8pt] (0,{i}) -- ({n_cols},{i});")
    for j, tok in enumerate(h.cols):
        lines.append(f"\\node[anchor=south] at ({j + 0.5},-0.05) {{{_token(tok, j)}}};")
    for i, tok in enumerate(h.rows):
        lines.append(f"\\node[anchor=east] at (-0.05,{i + 0.5}) {{{_token(tok, i)}}};")
    lines.append(f"\\node[anchor=south] at ({n_cols / 2},-1.1) {{{h.col_title} $j$}};")
    lines.append(f"\\node[anchor=south, rotate=90] at (-1.35,{n_rows / 2}) {{{h.row_title} $i$}};")
    # colour bar: 0 at the bottom, 1 at the top
    x0, steps = n_cols + 0.35, 20
    for k in range(steps):
        top = n_rows * (1 - Fraction(k + 1, steps))
        lines.append(f"\\fill[fill={colour(cividis(Fraction(k, steps - 1)))}] "
                     f"({x0},{number(top)}) rectangle ({x0 + 0.25},"
                     f"{number(top + Fraction(n_rows, steps))});")
    for t in (0, Fraction(1, 2), 1):
        y = number(n_rows * (1 - t))
        lines.append(f"\\node[anchor=west, font=\\scriptsize] at ({x0 + 0.3},{y}) "
                     f"{{${number(t)}$}};")
    lines.append("\\end{tikzpicture}")
    return "\n".join(lines) + "\n"


def curves(c: Curves) -> str:
    """One small PGFPlots axis per dimension: the sinusoid and the certified points."""
    n = len(c.tokens)
    per_row = 2 if c.d_model <= 4 else 4
    ticks = ",".join(str(k) for k in range(n))
    labels = ",".join(f"{{{latex_text(t)}}}" for t in c.tokens)
    lines = ["\\begin{tikzpicture}[font=\\small]"]
    line_colour, mark_colour = colour(SERIES[0]), colour((0, 0, 0))
    for dim in range(c.d_model):
        row, col = divmod(dim, per_row)
        kind = "sin" if dim % 2 == 0 else "cos"
        xs, ys = pe_curve(dim, c.d_model, max(n - 1, 1))
        samples = " ".join(f"({number(x)},{number(y)})" for x, y in zip(xs, ys))
        points = " ".join(f"({p},{number(c.points[p][dim])})" for p in range(n))
        lines.append(
            f"\\begin{{axis}}[at={{({col * 6.2}cm,{-row * 4.6}cm)}}, width=6cm, height=4cm,"
            f" title={{dimension {dim} ({kind})}}, xmin=-0.3, xmax={number(max(n - 1, 1) + 0.3)},"
            f" ymin=-1.15, ymax=1.15, xtick={{{ticks}}}, xticklabels={{{labels}}},"
            " xticklabel style={font=\\scriptsize}, ytick={-1,0,1},"
            " tick label style={font=\\scriptsize}, grid=major, grid style={gray!25}]")
        lines.append(f"\\addplot[thick, color={line_colour}, no marks] coordinates {{{samples}}};")
        lines.append(f"\\addplot[only marks, mark=*, mark size=2pt, color={mark_colour}] "
                     f"coordinates {{{points}}};")
        lines.append("\\end{axis}")
    lines.append("\\end{tikzpicture}")
    return "\n".join(lines) + "\n"


_VALUE_LABELS = (", point meta=explicit symbolic, nodes near coords,"
                 " nodes near coords style={font=\\scriptsize},"
                 " nodes near coords align={vertical}")


def bars(b: Bars) -> str:
    """Grouped bars, each labelled with its certified value."""
    m = len(b.categories)
    ticks = ",".join(str(k) for k in range(m))
    labels = ",".join(f"{{{latex_text(t)}}}" for t in b.categories)
    width = max(8.0, min(15.0, 1.3 * m * len(b.series) + 2.5))
    values = [v for _, _, vs, _ in b.series for v in vs]
    if b.fixed_range:
        lo, hi = b.fixed_range
    else:
        lo, hi = min(0, *values), max(0, *values)
        pad = (hi - lo) * Fraction(15, 100) or 1
        lo, hi = lo - (pad if lo < 0 else 0), hi + pad
    show_values = m * len(b.series) <= 16
    lines = ["\\begin{tikzpicture}[font=\\small]",
             f"\\begin{{axis}}[ybar, width={width}cm, height=6cm,"
             f" bar width={0.8 / len(b.series)}cm,"
             f" xtick={{{ticks}}}, xticklabels={{{labels}}}, xmin=-0.6, xmax={m - 0.4},"
             f" ymin={number(lo)}, ymax={number(hi * Fraction(112, 100) if b.fixed_range else hi)},"
             f" xlabel={{{b.category_title}}}, ylabel={{{b.value_title}}},"
             " axis x line*=bottom, axis y line*=left, ymajorgrids, grid style={gray!25},"
             " legend style={at={(0.5,1.02)}, anchor=south, legend columns=-1, draw=none},"
             " /tikz/every even column/.append style={column sep=0.4cm},"
             " enlarge x limits=false"
             + (_VALUE_LABELS if show_values else "") + "]"]
    for k, (legend, _, vs, texts) in enumerate(b.series):
        rgb = SERIES[k % len(SERIES)]
        coords = " ".join(f"({x},{number(v)})" + (f" [${t}$]" if show_values else "")
                          for x, (v, t) in enumerate(zip(vs, texts)))
        lines.append(f"\\addplot[fill={colour(rgb)}, draw=black] coordinates {{{coords}}};")
        if len(b.series) > 1:
            lines.append(f"\\addlegendentry{{{legend}}}")
    lines.append("\\end{axis}\n\\end{tikzpicture}")
    return "\n".join(lines) + "\n"
