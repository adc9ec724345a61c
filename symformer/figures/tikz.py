"""Figures as TikZ/PGFPlots code for LaTeX documents and slides.

Each figure is a ``figure`` environment with its caption and label, to ``\\input``
into a document whose preamble loads ``tikz`` (library ``patterns``) and
``pgfplots`` (:data:`PREAMBLE`); the fonts are the document's own.  Heat maps and
RoPE's circles are plain TikZ; curves and bars are PGFPlots axes (``scale only
axis``, so their size is known and the value labels can be laid out,
:mod:`symformer.figures.layout`).  Every figure is drawn for a :class:`Canvas`: the
room it has and the size of its text, so it is set at its natural size, never scaled
(its text stays at least 9 pt: :data:`NOTES` for the notes' 11 pt page,
:data:`SLIDES` for a 160 mm x 90 mm Beamer frame).  Texts are the certified decimals,
written as given; nothing is recomputed by TeX.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from symformer.colors import (
    LINE,
    MARK,
    MASKED_FILL,
    MASKED_HATCH,
    SERIES,
    diverging,
    sequential,
    text_colour,
)
from symformer.escape import latex_text
from symformer.figures.data import (
    LABEL_MODES,
    POSITION_COLOURS,
    Bars,
    Curves,
    Figure,
    HeatMap,
    Rotations,
    axis_labels,
    decimal_text,
    label,
    nice_ticks,
    pe_curve,
    positions_key,
)
from symformer.figures.layout import LINE_EM, bar_labels
from symformer.notation import ROPE_POSITION

#: RoPE's position letter, as the notes' equations write it.
POS = ROPE_POSITION.latex

#: What a document needs to typeset the figures.
PREAMBLE = r"""\usepackage{tikz}
\usetikzlibrary{patterns}
\usepackage{pgfplots}
\pgfplotsset{compat=1.18}
"""

DOCUMENT = r"""\documentclass[11pt]{article}
\usepackage[T1]{fontenc}
\usepackage[utf8]{inputenc}
\usepackage{lmodern}
\usepackage[a4paper,margin=2.2cm]{geometry}
%(preamble)s\begin{document}
%(body)s\end{document}
"""


@dataclass(frozen=True)
class Canvas:
    """The room a figure has (cm) and its text: a font switch and its size in cm."""

    width: float
    height: float
    font: str
    em: float


#: The notes (11 pt article, A4 with 2.2 cm margins: 16.6 cm of text); \small is 10 pt.
NOTES = Canvas(width=16.0, height=19.0, font=r"\small", em=10 / 72.27 * 2.54)
#: A 16:9 Beamer frame (160 mm x 90 mm, 11 pt): 14 cm of text width and about 6.3 cm
#: under the frame title; \small is 10 pt there (9 pt is the least a projector allows).
SLIDES = Canvas(width=13.6, height=6.0, font=r"\small", em=10 / 72.27 * 2.54)


def colour(rgb: tuple[int, int, int]) -> str:
    """An xcolor colour expression: ``{rgb,255:red,0;green,34;blue,78}``."""
    r, g, b = rgb
    return f"{{rgb,255:red,{r};green,{g};blue,{b}}}"


def number(x: Fraction | float) -> str:
    """A coordinate for TeX (drawing only: the texts are the certified decimals)."""
    return f"{float(x):.6g}"


def draw(figure: Figure, canvas: Canvas = NOTES) -> str:
    """The ``tikzpicture`` of one figure, for ``canvas``."""
    if isinstance(figure, HeatMap):
        return heat_map(figure, canvas)
    if isinstance(figure, Curves):
        return curves(figure, canvas)
    if isinstance(figure, Rotations):
        return rotations(figure, canvas)
    return bars(figure, canvas)


def render(figure: Figure, canvas: Canvas = NOTES) -> str:
    """The ``figure`` environment of one figure."""
    return ("\\begin{figure}[htbp]\n\\centering\n" + draw(figure, canvas)
            + f"\\caption{{{figure.caption}}}\n\\label{{{label(figure)}}}\n\\end{{figure}}\n")


def document(names: list[str]) -> str:
    """A standalone document that inputs the figure files ``names`` (without .tex)."""
    body = "".join(f"\\input{{{n}}}\n" for n in names)
    return DOCUMENT % {"preamble": PREAMBLE, "body": body}


def _width(text: str, canvas: Canvas) -> float:
    """An estimate of a short text's width in cm (Latin Modern: under 0.5 em a
    character on average)."""
    return (len(text) * 0.5 + 0.3) * canvas.em


def _token_labels(labels: tuple[str, ...], mode: str, canvas: Canvas
                  ) -> tuple[list[str], float]:
    """Axis labels in ``mode`` (:data:`~symformer.figures.data.LABEL_MODES`) as LaTeX,
    and the widest label's width in cm."""
    out, widest = [], 0.0
    for text in axis_labels(labels, mode):
        parts = text.split("\n")
        widest = max([widest] + [_width(p, canvas) for p in parts])
        out.append(latex_text(text) if len(parts) == 1 else
                   "\\shortstack{" + "\\\\".join(latex_text(p) for p in parts) + "}")
    return out, widest


def heat_map(h: HeatMap, canvas: Canvas = NOTES) -> str:
    """One rectangle per cell, its certified value written in it, masked cells hatched;
    the key labels above, the query labels left (both horizontal, the same form), a
    labelled colour bar on the right."""
    n_rows, n_cols = len(h.rows), len(h.cols)
    paint = diverging if h.diverging else sequential
    widest_value = max(_width(t, canvas) for row in h.texts for t in row)
    cell_w = max(1.0, widest_value + 0.25)
    bar_room = max(2.0, _width(h.bar_title, canvas) + 0.6)
    # both axes alike, the first of LABEL_MODES whose key labels fit the width
    for mode in LABEL_MODES:
        rows, row_w = _token_labels(h.rows, mode, canvas)
        cols, col_w = _token_labels(h.cols, mode, canvas)
        left = max(row_w, _width(h.row_title, canvas) + 0.3 - _width(h.col_title, canvas) / 2)
        if (max(cell_w, col_w + 0.2)) * n_cols + left + 0.3 + bar_room <= canvas.width:
            break
    one_line = mode != "stacked"
    label_lines = 1 if one_line else 2
    # cells as large as the room allows (up to 2.2 cm x 0.9 cm), never smaller than text
    free_w = (canvas.width - left - 0.3 - bar_room) / n_cols
    cell_w = max(cell_w, col_w + 0.2, min(2.2, free_w))
    below = 2 if mode == "positions" else 0  # the lines of positions_key
    free_h = (canvas.height - (label_lines + 2 + below) * LINE_EM * canvas.em) / n_rows
    cell_h = max(LINE_EM * canvas.em * (label_lines + 0.3), min(0.9, free_h))
    lines = [f"\\begin{{tikzpicture}}[x={number(cell_w)}cm, y=-{number(cell_h)}cm, "
             f"font={canvas.font}]"]
    for i in range(n_rows):
        for j in range(n_cols):
            cell = f"({j},{i}) rectangle ++(1,1)"
            if h.masked[i][j]:
                fill, ink = MASKED_FILL, (0, 0, 0)
                lines.append(f"\\fill[fill={colour(fill)}] {cell};")
                hatch = colour(MASKED_HATCH)
                lines.append(f"\\fill[pattern=north east lines, pattern color={hatch}] {cell};")
            else:
                fill = paint(h.shades[i][j])
                ink = text_colour(fill)
                lines.append(f"\\fill[fill={colour(fill)}] {cell};")
            lines.append(f"\\node[text={colour(ink)}] at ({j + 0.5},{i + 0.5}) "
                         f"{{${h.texts[i][j]}$}};")
    for j in range(n_cols + 1):
        lines.append(f"\\draw[white, line width=0.8pt] ({j},0) -- ({j},{n_rows});")
    for i in range(n_rows + 1):
        lines.append(f"\\draw[white, line width=0.8pt] (0,{i}) -- ({n_cols},{i});")
    for j, text in enumerate(cols):
        lines.append(f"\\node[anchor=south] (key{j}) at ({j + 0.5},-0.05) {{{text}}};")
    for i, text in enumerate(rows):
        lines.append(f"\\node[anchor=east] at (-0.05,{i + 0.5}) {{{text}}};")
    lift = (label_lines + 0.7) * LINE_EM * canvas.em
    # the axis titles side by side above the corner, horizontal (no rotated text): the
    # rows' title ends where the keys' title begins
    lines.append(f"\\node[anchor=south west] at (0,-0.05) [yshift={number(lift)}cm] "
                 f"{{{h.col_title}}};")
    lines.append(f"\\node[anchor=south east] at (0,-0.05) [yshift={number(lift)}cm, "
                 f"xshift=-0.3cm] {{{h.row_title}}};")
    lines += _colour_bar(h, paint, n_cols, n_rows, cell_w, cell_h, canvas)
    if mode == "positions":
        width = number(min(canvas.width, n_cols * cell_w + left))
        lines.append(f"\\node[anchor=north west, text width={width}cm, align=left] at "
                     f"(0,{n_rows}) [yshift=-0.15cm, xshift=-{number(left)}cm] "
                     f"{{{latex_text(positions_key(h))}}};")
    lines.append("\\end{tikzpicture}")
    return "\n".join(lines) + "\n"


def _colour_bar(h: HeatMap, paint, n_cols: int, n_rows: int, cell_w: float,
                cell_h: float, canvas: Canvas) -> list[str]:
    """The colour bar beside the map: ``scale[0]`` at the bottom, ``scale[1]`` at the top,
    round ticks written in the document's font, its title above it (horizontal)."""
    low, high = h.scale
    x0, x1 = n_cols + 0.3 / cell_w, n_cols + 0.7 / cell_w
    steps = 24
    lines = []
    for k in range(steps):
        top = n_rows * (1 - Fraction(k + 1, steps))
        lines.append(f"\\fill[fill={colour(paint(Fraction(2 * k + 1, 2 * steps)))}] "
                     f"({number(x0)},{number(top)}) rectangle ({number(x1)},"
                     f"{number(top + Fraction(n_rows, steps))});")
    room = n_rows * cell_h / (1.2 * LINE_EM * canvas.em)  # tick labels that fit the bar
    for t in nice_ticks(low, high, int(room)):
        y = number(n_rows * (1 - (t - low) / (high - low))) if high > low else n_rows / 2
        text = decimal_text(t)
        lines.append(f"\\draw ({number(x1)},{y}) -- ++({number(0.1 / cell_w)},0) "
                     f"node[anchor=west] {{${text}$}};")
    lines.append(f"\\node[anchor=south west, inner xsep=0pt] at ({number(x0)},0) "
                 f"[yshift=0.25cm] {{{h.bar_title}}};")
    return lines


def _axis_style(canvas: Canvas) -> str:
    return (f"scale only axis, tick label style={{font={canvas.font}}}, "
            f"label style={{font={canvas.font}}}, title style={{font={canvas.font}}}")


def curves(c: Curves, canvas: Canvas = NOTES) -> str:
    """One small PGFPlots axis per dimension: the sinusoid (the engine's formula) and the
    certified points at the tokens' positions."""
    n = len(c.tokens)
    last = max(n - 1, 1)
    wide = canvas.width / canvas.height > 1.8
    per_row = min(c.d_model, 4) if wide else (2 if c.d_model <= 4 else 3)
    n_rows = -(-c.d_model // per_row)
    gap_x, gap_y = 1.0, 1.9
    axis_w = (canvas.width - 1.0 - gap_x * (per_row - 1)) / per_row
    axis_h = min(3.0, (canvas.height - 1.2 - gap_y * n_rows) / n_rows)
    ticks = ",".join(str(k) for k in range(n))
    lines = [f"\\begin{{tikzpicture}}[font={canvas.font}]"]
    for dim in range(c.d_model):
        row, col = divmod(dim, per_row)
        xs, ys = pe_curve(dim, c.d_model, last, c.base)
        samples = " ".join(f"({number(x)},{number(y)})" for x, y in zip(xs, ys))
        points = " ".join(f"({p},{number(c.points[p][dim])})" for p in range(n))
        title = (c.panel_titles[dim] if c.panel_titles else f"dimension {dim}"
                 ).replace("\n", NEWLINE)
        lines.append(
            f"\\begin{{axis}}[at={{({number(col * (axis_w + gap_x))}cm,"
            f"{number(-row * (axis_h + gap_y))}cm)}}, width={number(axis_w)}cm, "
            f"height={number(axis_h)}cm, {_axis_style(canvas)}, title={{{title}}},"
            " title style={align=center},"
            f" xmin=-0.3, xmax={number(last + 0.3)}, ymin=-1.2, ymax=1.2,"
            f" xtick={{{ticks}}}, ytick={{-1,0,1}}, grid=major, grid style={{gray!25}},"
            " axis x line*=bottom, axis y line*=left]")
        lines.append(f"\\addplot[thick, color={colour(LINE)}, no marks] "
                     f"coordinates {{{samples}}};")
        lines.append(f"\\addplot[only marks, mark=*, mark size=2pt, color={colour(MARK)}] "
                     f"coordinates {{{points}}};")
        lines.append("\\end{axis}")
    words = ", ".join(latex_text(t) for t in c.tokens)
    middle = (per_row * axis_w + (per_row - 1) * gap_x) / 2
    lines.append(f"\\node[anchor=north] at ({number(middle)}cm,"
                 f"{number(-(n_rows - 1) * (axis_h + gap_y) - 0.7)}cm) "
                 f"{{position: {words}}};")
    lines.append("\\end{tikzpicture}")
    return "\n".join(lines) + "\n"


def rotations(r: Rotations, canvas: Canvas = NOTES) -> str:
    """RoPE: per pair c, each token's key pair before the rotation (dashed) and after
    it (solid), arrows from the origin in one colour per position p, on a circle as
    large as the longest of them (it is the same length after the rotation), each
    solid arrow's tip labelled with its position; the angles listed under the circle.
    The circles are as large as the canvas allows (at most 1.8 cm)."""
    n = len(r.pairs)
    listing = max(_width(r.labels(k)[1], canvas) for k in range(n)) / 2
    best = (0.0, 1)
    for per_row in range(n, 0, -1):
        rows = -(-n // per_row)
        radius = min(1.8, (canvas.width / per_row - 1.2) / 2,
                     (canvas.height - 1.2) / rows / 2 - 1.0)
        best = max(best, (radius, per_row))
    radius, per_row = max(best[0], 0.6), best[1]
    panel_w = max(2 * radius + 1.4, 2 * listing + 0.6)
    panel_h = 2 * radius + 2.2
    lines = [f"\\begin{{tikzpicture}}[font={canvas.font}, >=stealth]"]
    for k, title in enumerate(r.pairs):
        row, col = divmod(k, per_row)
        cx, cy = col * panel_w, -row * panel_h
        at = f"({number(cx)},{number(cy)})"
        vectors = r.before[k] if r.before else ()
        lines.append(f"\\draw[gray!40] ({number(cx - radius)},{number(cy)}) -- "
                     f"({number(cx + radius)},{number(cy)});")
        lines.append(f"\\draw[gray!40] ({number(cx)},{number(cy - radius)}) -- "
                     f"({number(cx)},{number(cy + radius)});")
        lines.append(f"\\draw[gray!70] {at} circle ({number(radius)});")
        lines.append(f"\\node[anchor=south] at ({number(cx)},{number(cy + radius + 0.3)}) "
                     f"{{{title}}};")
        if vectors:
            for m, ((x0, y0), (x1, y1)) in enumerate(zip(r.before[k], r.after[k])):
                ink = colour(POSITION_COLOURS[m % len(POSITION_COLOURS)])
                scale = radius * r.scale(k, m)  # every rotation visible: Rotations.scale
                a = (cx + scale * float(x0), cy + scale * float(y0))
                b = (cx + scale * float(x1), cy + scale * float(y1))
                lines.append(f"\\draw[->, dashed, color={ink}] {at} -- "
                             f"({number(a[0])},{number(a[1])});")
                lines.append(f"\\draw[->, very thick, color={ink}] {at} -- "
                             f"({number(b[0])},{number(b[1])}) node[anchor="
                             f"{_anchor(float(x1), float(y1))}, inner sep=2pt, text=black] "
                             f"{{${m}$}};")
        else:  # no stages given: where the pair (1, 0) goes
            for c, s_ in r.points[k]:
                x, y = cx + radius * float(c), cy + radius * float(s_)
                lines.append(f"\\draw[color={colour(LINE)}, thick] {at} -- "
                             f"({number(x)},{number(y)});")
        angles = ", ".join(f"${t}$" for t in r.texts[k])
        lines.append(f"\\node[anchor=north] at ({number(cx)},{number(cy - radius - 0.25)})"
                     f" {{angles ${POS}\\,\\theta_{{{k}}}$, "
                     f"${POS} = 0, \\dots, {len(r.texts[k]) - 1}$: {angles}}};")
    rows = -(-n // per_row)
    bottom = -(rows - 1) * panel_h - radius - 0.9
    middle = (min(n, per_row) - 1) * panel_w / 2
    note = r.note(latex=True).replace("; dashed", NEWLINE + "dashed", 1).replace(
        "; arrows under", NEWLINE + "arrows under", 1)
    lines.append(f"\\node[anchor=north, align=center] at ({number(middle)},{number(bottom)}) "
                 f"{{{note}}};")
    lines.append("\\end{tikzpicture}")
    return "\n".join(lines) + "\n"


#: A line break inside a TikZ node or a PGFPlots title.
NEWLINE = " \\\\ "


def _anchor(c: float, s: float) -> str:
    """The anchor that puts a label outside the circle, on the side its point faces."""
    vertical = "south" if s > 0.3 else "north" if s < -0.3 else ""
    horizontal = "west" if c > 0.3 else "east" if c < -0.3 else ""
    return " ".join(p for p in (vertical, horizontal) if p) or "west"


def bar_layout(b: Bars, canvas: Canvas) -> tuple[float, float, list, tuple[float, float]]:
    """The axis' width and height (cm), the value labels' boxes (data coordinates) and
    the y range that holds the bars and their labels."""
    m, k = len(b.categories), len(b.series)
    axis_w = min(canvas.width - 2.2, max(6.0, 1.25 * m * k + 1.0))
    axis_h = min(canvas.height - 2.0, 5.0)
    texts = [t for _, _, _, ts in b.series for t in ts]
    boxes, y_range = bar_labels([vs for _, _, vs, _ in b.series], texts, b.fixed_range,
                                axis_w, axis_h, canvas.em, "latin modern")
    return axis_w, axis_h, boxes, y_range


def bars(b: Bars, canvas: Canvas = NOTES) -> str:
    """Grouped bars, each labelled with its certified value outside its end, no label on
    another label or on a bar."""
    m, k = len(b.categories), len(b.series)
    axis_w, axis_h, boxes, (low, high) = bar_layout(b, canvas)
    ticks = ",".join(str(x) for x in range(m))
    labels = ",".join(f"{{{latex_text(t)}}}" for t in b.categories)
    lines = [f"\\begin{{tikzpicture}}[font={canvas.font}]",
             f"\\begin{{axis}}[ybar=0pt, width={number(axis_w)}cm, height={number(axis_h)}cm,"
             f" {_axis_style(canvas)}, bar width={number(0.8 / k * axis_w / m)}cm,"
             f" xtick={{{ticks}}}, xticklabels={{{labels}}}, xmin=-0.5, xmax={m - 0.5},"
             f" ymin={number(low)}, ymax={number(high)},"
             + (f" ytick={{{b.fixed_range[0]},{number(Fraction(sum(b.fixed_range), 2))},"
                f"{b.fixed_range[1]}}}," if b.fixed_range else "")
             + f" xlabel={{{b.category_title}}}, ylabel={{{b.value_title}}},"
             " axis x line*=bottom, axis y line*=left, ymajorgrids, grid style={gray!25},"
             " legend style={at={(0.5,1.02)}, anchor=south, legend columns=-1, draw=none,"
             f" font={canvas.font}}},"
             " /tikz/every odd column/.append style={column sep=0.12cm},"
             " /tikz/every even column/.append style={column sep=0.5cm},"
             " extra y ticks={0}, extra y tick labels={}, extra y tick style={grid style={black}},"
             " enlarge x limits=false]"]
    for s, (legend, _, vs, _) in enumerate(b.series):
        rgb = SERIES[s % len(SERIES)]
        coords = " ".join(f"({x},{number(v)})" for x, v in enumerate(vs))
        lines.append(f"\\addplot[fill={colour(rgb)}, draw=black, area legend] "
                     f"coordinates {{{coords}}};")
        if k > 1:
            lines.append(f"\\addlegendentry{{{legend}}}")
    if m * k <= 16:
        texts = [t for _, _, _, ts in b.series for t in ts]
        for box, text in zip(boxes, texts):
            x, y = box.centre
            lines.append(f"\\node[inner sep=0pt] at (axis cs:{number(x)},{number(y)}) "
                         f"{{${text}$}};")
    lines.append("\\end{axis}\n\\end{tikzpicture}")
    return "\n".join(lines) + "\n"

