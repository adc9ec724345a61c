"""Figures as SVG, PNG or PDF, drawn with matplotlib.

One sans-serif family for text and mathematics (DejaVu Sans, matplotlib's own, and
mathtext ``dejavusans``), so an SVG names one family and a browser draws it in one
face (the SVG's text names the generic ``sans-serif`` after DejaVu Sans, so a machine
without it still uses one sans face).  Minus signs are real minus signs (U+2212).
Text is at least :data:`SMALL` pt at the figure's own size, and figures are at most
:data:`MAX_WIDTH` inches wide, so placed at their size on a page or on a 16 cm slide
nothing is smaller.  SVG text is kept as ``<text>`` elements, so the values written in
the cells can be read, searched and checked; each SVG has exactly one ``<title>`` (the
caption, for screen readers).  PNGs are rendered at :data:`DPI` dots per inch.  Output
is reproducible: no date, a fixed hash salt.
"""

from __future__ import annotations

import io
import math
import re
from fractions import Fraction
from xml.sax.saxutils import escape

from symformer.colors import (
    LINE,
    MARK,
    MASKED_FILL,
    MASKED_HATCH,
    SERIES,
    diverging,
    hex_colour,
    sequential,
    text_colour,
)
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
    heading,
    nice_ticks,
    pe_curve,
    positions_key,
)
from symformer.figures.layout import bar_labels, text_width
from symformer.notation import ROPE_POSITION

#: RoPE's position letter, as the notes' equations write it.
POS = ROPE_POSITION.latex

DPI = 200
#: Text sizes in points: tick labels, values and legends; axis titles and panel titles.
SMALL = 10
NORMAL = 11
#: The widest figure, in inches (16 cm: a slide's or an A4 page's text width).
MAX_WIDTH = 6.3
MINUS = "\u2212"
#: The mathematics of PNG and PDF figures: Computer Modern (italic letters), as in the
#: notes and slides.
MATH_CM = {"mathtext.fontset": "cm"}
STYLE = {
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans"],
    "mathtext.fontset": "dejavusans",
    "axes.formatter.use_mathtext": False,
    "axes.unicode_minus": True,
    "font.size": SMALL,
    "axes.titlesize": NORMAL,
    "axes.labelsize": NORMAL,
    "xtick.labelsize": SMALL,
    "ytick.labelsize": SMALL,
    "legend.fontsize": SMALL,
    "svg.fonttype": "none",
    "svg.hashsalt": "symformer",
    "hatch.linewidth": 0.8,
}


def render(figure: Figure, fmt: str) -> bytes:
    """The figure as ``svg``, ``png`` or ``pdf`` bytes."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    # PNG and PDF set their mathematics in Computer Modern, italic letters as in the
    # LaTeX documents; SVG keeps DejaVu Sans, whose text a browser can draw as text
    with matplotlib.rc_context(STYLE if fmt == "svg" else {**STYLE, **MATH_CM}):
        fig = draw(plt, figure)
        # the heading above everything drawn (the saved box grows to hold it)
        fig.text(0.5, 1.0, plain(heading(figure)), ha="center", va="bottom",
                 fontsize=NORMAL, fontweight="bold")
        buffer = io.BytesIO()
        metadata = {"svg": {"Date": None},
                    "pdf": {"Title": figure.title, "CreationDate": None, "ModDate": None},
                    "png": {"Title": figure.title}}[fmt]
        fig.savefig(buffer, format=fmt, dpi=DPI, bbox_inches="tight", metadata=metadata)
        plt.close(fig)
    data = buffer.getvalue()
    return svg_clean(data, figure.title) if fmt == "svg" else data


def draw(plt, figure: Figure):
    """The matplotlib figure of one figure description."""
    if isinstance(figure, HeatMap):
        return heat_map(plt, figure)
    if isinstance(figure, Curves):
        return curves(plt, figure)
    if isinstance(figure, Rotations):
        return rotations(plt, figure)
    return bars(plt, figure)


#: A font family as matplotlib writes it in SVG text styles.
_FAMILY = re.compile(r"font-family: *'?DejaVu Sans'?(?=[;\"])")


def svg_clean(svg: bytes, title: str) -> bytes:
    """The SVG with one ``<title>`` (the caption) as the first child of its root, and the
    generic ``sans-serif`` after DejaVu Sans in every font family."""
    text = svg.decode("utf-8")
    text = re.sub(r"<title>.*?</title>\s*", "", text, flags=re.S)
    text = _FAMILY.sub("font-family: 'DejaVu Sans', sans-serif", text)
    match = re.search(r"<svg\b[^>]*>", text)
    at = match.end()
    return (text[:at] + f"\n <title>{escape(title)}</title>" + text[at:]).encode("utf-8")


def plain(text: str) -> str:
    """Text as matplotlib draws it literally: a ``$`` would start mathtext, so it is
    escaped (``\\$``); every other character, a backslash too, is drawn as typed."""
    return text.replace("$", r"\$")


def number(text: str) -> str:
    """A certified decimal as drawn: the hyphen-minus becomes a minus sign."""
    return text.replace("-", MINUS)


def _rgb(rgb: tuple[int, int, int]) -> str:
    return hex_colour(rgb)


def _em(points: float) -> float:
    return points / 72


def heat_map(plt, h: HeatMap):
    """One square per cell, the certified value written in it, masked cells hatched,
    a labelled colour bar beside it.  Laid out in inches, so the text keeps its size."""
    from matplotlib.patches import Rectangle

    n_rows, n_cols = len(h.rows), len(h.cols)
    colour = diverging if h.diverging else sequential
    em = _em(SMALL)
    widest_value = max(text_width(number(t), em) for row in h.texts for t in row)
    # both axes alike: the first of LABEL_MODES that fits MAX_WIDTH
    for mode in LABEL_MODES:
        rows, cols = axis_labels(h.rows, mode), axis_labels(h.cols, mode)
        col_w = max(_label_width(c, em) for c in cols)
        row_w = max(_label_width(r, em) for r in rows)
        cell_w = max(0.7, widest_value + 0.15, col_w + 0.05)
        title_w = len(h.row_title.replace("$", "")) * 0.55 * _em(NORMAL)
        left = max(row_w, title_w) + 0.15  # the row labels, or the rows' title over them
        fig_w = left + n_cols * cell_w + _BAR_ROOM
        if fig_w <= MAX_WIDTH:
            break
    lines = 2 if mode == "stacked" else 1
    cell_h = 0.55 if mode == "stacked" else 0.42
    top = 0.25 + 0.2 * lines  # the column labels and the axis title
    bottom = 0.1 + (0.5 if mode == "positions" else 0)  # positions_key under the map
    fig_h = bottom + n_rows * cell_h + top
    fig = plt.figure(figsize=(fig_w, fig_h))
    ax = fig.add_axes((left / fig_w, bottom / fig_h, n_cols * cell_w / fig_w,
                       n_rows * cell_h / fig_h))
    cax = fig.add_axes(((left + n_cols * cell_w + 0.2) / fig_w, bottom / fig_h,
                        0.16 / fig_w, n_rows * cell_h / fig_h))
    if mode == "positions":
        fig.text(0.02, 0.02, plain(positions_key(h)), fontsize=SMALL, ha="left",
                 va="bottom", wrap=True)
    low, high = h.scale
    for i in range(n_rows):
        for j in range(n_cols):
            if h.masked[i][j]:
                ax.add_patch(Rectangle((j, i), 1, 1, facecolor=_rgb(MASKED_FILL),
                                       edgecolor=_rgb(MASKED_HATCH), hatch="///", linewidth=0))
                ink = (0, 0, 0)
            else:
                fill = colour(h.shades[i][j])
                ax.add_patch(Rectangle((j, i), 1, 1, facecolor=_rgb(fill), linewidth=0))
                ink = text_colour(fill)
            ax.text(j + 0.5, i + 0.5, number(h.texts[i][j]), ha="center", va="center",
                    color=_rgb(ink), fontsize=SMALL, gid=f"cell-{i}-{j}")
    for k in range(n_cols + 1):
        ax.axvline(k, color="white", linewidth=1.2)
    for k in range(n_rows + 1):
        ax.axhline(k, color="white", linewidth=1.2)
    ax.set_xlim(0, n_cols)
    ax.set_ylim(n_rows, 0)
    ax.set_xticks([j + 0.5 for j in range(n_cols)], [plain(t) for t in cols])
    ax.set_yticks([i + 0.5 for i in range(n_rows)], [plain(t) for t in rows])
    ax.xaxis.tick_top()
    ax.xaxis.set_label_position("top")
    ax.tick_params(length=0)
    # the axis titles side by side above the corner, horizontal (no rotated text)
    above = lines * 1.25 * SMALL + 6  # points: over the key labels
    for text, dx, align in ((h.col_title, 0, "left"), (h.row_title, -8, "right")):
        ax.annotate(text, xy=(0, 1), xycoords="axes fraction", xytext=(dx, above),
                    textcoords="offset points", ha=align, va="bottom", fontsize=NORMAL)
    for side in ax.spines.values():
        side.set_visible(False)
    _colour_bar(fig, cax, colour, low, high, h.bar_title,
                int(n_rows * cell_h / (1.5 * _em(SMALL))))
    return fig


#: Inches right of the map: the gap, the colour bar, its ticks and its title.
_BAR_ROOM = 1.0


def _label_width(label: str, em: float) -> float:
    """An estimate of a label's width in inches (DejaVu Sans: about 0.58 em a
    lower-case letter on average)."""
    return max(len(line) for line in label.split("\n")) * 0.58 * em + 0.1


def _colour_bar(fig, cax, colour, low: Fraction, high: Fraction, title: str,
                most: int) -> None:
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import ListedColormap, Normalize

    table = ListedColormap([[c / 255 for c in colour(Fraction(k, 255))] for k in range(256)])
    ticks = nice_ticks(low, high, most)
    bar = fig.colorbar(ScalarMappable(norm=Normalize(float(low), float(high)), cmap=table),
                       cax=cax)
    bar.set_ticks([float(t) for t in ticks], labels=[number(decimal_text(t)) for t in ticks])
    bar.outline.set_visible(False)
    bar.ax.tick_params(labelsize=SMALL)
    bar.set_label(title, fontsize=SMALL)  # along the bar: the map stays within MAX_WIDTH


def _panels(plt, count: int, per_row: int, height: float):
    rows = -(-count // per_row)
    fig, axes = plt.subplots(rows, per_row, figsize=(MAX_WIDTH, height * rows),
                             squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[count:]:
        ax.set_visible(False)
    return fig, flat[:count]


def curves(plt, c: Curves):
    """One panel per dimension: the sinusoid (the engine's formula, NumPy samples) and
    the certified points at the tokens' positions."""
    n = len(c.tokens)
    last = max(n - 1, 1)
    fig, axes = _panels(plt, c.d_model, 2 if c.d_model <= 4 else 3, 2.3)
    for dim, ax in enumerate(axes):
        xs, ys = pe_curve(dim, c.d_model, last, c.base)
        ax.plot(xs, ys, color=_rgb(LINE), linewidth=1.8)
        ax.plot(range(n), [float(c.points[p][dim]) for p in range(n)], "o",
                color=_rgb(MARK), markersize=5, zorder=3)
        ax.set_title(c.panel_titles[dim] if c.panel_titles else f"dimension {dim}",
                     fontsize=SMALL)
        ax.set_xticks(range(n))
        ax.set_yticks([-1, 0, 1])
        ax.set_ylim(-1.2, 1.2)
        ax.set_xlim(-0.3, last + 0.3)
        ax.grid(color="#dddddd", linewidth=0.6)
        ax.spines[["top", "right"]].set_visible(False)
    fig.supxlabel("position: " + ", ".join(plain(t) for t in c.tokens), fontsize=SMALL)
    fig.tight_layout()
    return fig


def rotations(plt, r: Rotations):
    """RoPE: per pair c, each token's key pair before the rotation (dashed) and after it
    (solid), arrows from the origin in one colour per position p, on a circle as large
    as the longest; the angles listed under it."""
    fig, axes = _panels(plt, len(r.pairs), min(len(r.pairs), 2), 3.1)
    for pair, ax in enumerate(axes):
        t = [k / 200 * 2 * math.pi for k in range(201)]
        ax.plot([math.cos(a) for a in t], [math.sin(a) for a in t], color="#bbbbbb",
                linewidth=1)
        ax.plot([-1, 1], [0, 0], color="#dddddd", linewidth=0.6)
        ax.plot([0, 0], [-1, 1], color="#dddddd", linewidth=0.6)
        if r.before:
            for m, ((x0, y0), (x1, y1)) in enumerate(zip(r.before[pair], r.after[pair])):
                ink = _rgb(POSITION_COLOURS[m % len(POSITION_COLOURS)])
                scale = r.scale(pair, m)
                for (x, y), style, width in (((x0, y0), "--", 1.0), ((x1, y1), "-", 2.2)):
                    x, y = float(x) * scale, float(y) * scale
                    ax.annotate("", xy=(x, y), xytext=(0, 0), arrowprops=dict(
                        arrowstyle="-|>", color=ink, linestyle=style, linewidth=width,
                        shrinkA=0, shrinkB=0))
                x, y = float(x1) * scale, float(y1) * scale
                ax.text(x * 1.12, y * 1.12 if abs(y) > 0.05 else y + 0.08, str(m),
                        fontsize=SMALL, ha="left" if x > 0.3 else "right" if x < -0.3
                        else "center", va="bottom" if y > 0.3 else "top" if y < -0.3
                        else "center")
        else:
            for c, s in r.points[pair]:
                ax.plot([0, float(c)], [0, float(s)], color=_rgb(LINE), linewidth=1.2)
        angles = ", ".join(number(t) for t in r.texts[pair])
        ax.text(0, -1.18, f"angles ${POS}\\,\\theta_{{{pair}}}$, ${POS} = 0, \\ldots, "
                f"{len(r.texts[pair]) - 1}$: {angles}", ha="center", va="top", fontsize=SMALL)
        ax.set_title(r.pairs[pair], fontsize=SMALL)
        ax.set_aspect("equal")
        ax.set_xlim(-2.2, 2.2)
        ax.set_ylim(-1.5, 1.45)
        ax.axis("off")
    short = r.note().partition("radians; ")[2]  # a lengthened arrow, said
    fig.supxlabel(plain("positions p: " + ", ".join(r.tokens)) + f"\ndashed: ${r.symbols[0]}$ "
                  f"before RoPE, solid: the rotated ${r.symbols[1]}$; angles in radians"
                  + (f"\n{short}" if short else ""), fontsize=SMALL)
    fig.tight_layout()
    return fig


#: The bars' axes, inches: left margin, bottom margin, height.
_BAR_AXES = (0.8, 0.6, 2.6)


def bar_geometry(b: Bars) -> tuple[float, float]:
    """The bar figure's width and the axes' width, in inches."""
    m, k = len(b.categories), len(b.series)
    width = max(4.2, min(MAX_WIDTH, 0.6 * m * k + 1.6))
    return width, width - _BAR_AXES[0] - 0.2


def bars(plt, b: Bars):
    """Grouped bars, each labelled with its certified value outside its end."""
    m, k = len(b.categories), len(b.series)
    fig_w, axes_w = bar_geometry(b)
    left, bottom, axes_h = _BAR_AXES
    fig_h = bottom + axes_h + 0.6
    fig = plt.figure(figsize=(fig_w, fig_h))
    ax = fig.add_axes((left / fig_w, bottom / fig_h, axes_w / fig_w, axes_h / fig_h))
    width = 0.8 / k
    show_values = m * k <= 16
    for s, (legend, _, values, _) in enumerate(b.series):
        xs = [x - 0.4 + width * (s + 0.5) for x in range(m)]
        ax.bar(xs, [float(v) for v in values], width, color=_rgb(SERIES[s % len(SERIES)]),
               edgecolor="black", linewidth=0.6, label=legend)
    texts = [t for _, _, _, ts in b.series for t in ts]
    boxes, (low, high) = bar_labels([vs for _, _, vs, _ in b.series], texts, b.fixed_range,
                                    axes_w, axes_h, _em(SMALL), "dejavu sans")
    if show_values:
        for box, text in zip(boxes, texts):
            x, y = box.centre
            ax.text(x, y, number(text), ha="center", va="center", fontsize=SMALL)
    ax.set_xlim(-0.5, m - 0.5)
    ax.set_ylim(low, high)
    if b.fixed_range:  # probabilities: ticks within [0, 1] only
        lo_tick, hi_tick = b.fixed_range
        ax.set_yticks([lo_tick + (hi_tick - lo_tick) * k / 5 for k in range(6)])
    ax.set_xticks(range(m), [plain(t) for t in b.categories])
    ax.set_xlabel(b.category_title)
    ax.set_ylabel(b.value_title)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(axis="y", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    if k > 1:
        ax.legend(frameon=False, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=k)
    return fig
