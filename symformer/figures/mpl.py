"""Figures as SVG, PNG or PDF, drawn with matplotlib.

Fonts are Computer Modern (``cmr10`` for text, mathtext ``cm``), as in the LaTeX
documents.  SVG text is kept as ``<text>`` elements (not outlines), so the values
written in the cells can be read, searched and checked; each SVG starts with a
``<title>`` for screen readers.  PNGs are rendered at :data:`DPI` dots per inch.
Output is reproducible: no date, a fixed hash salt.
"""

from __future__ import annotations

import io
import re
from fractions import Fraction
from xml.sax.saxutils import escape

from symformer.figures.colors import (
    MASKED_FILL,
    MASKED_HATCH,
    SERIES,
    cividis,
    hex_colour,
    text_colour,
)
from symformer.figures.data import Bars, Curves, Figure, HeatMap, pe_curve

DPI = 200
STYLE = {
    "font.family": "serif",
    "font.serif": ["cmr10", "Computer Modern Roman", "DejaVu Serif"],
    "mathtext.fontset": "cm",
    "axes.formatter.use_mathtext": True,
    "axes.unicode_minus": False,
    "font.size": 11,
    "svg.fonttype": "none",
    "svg.hashsalt": "symformer",
    "hatch.linewidth": 0.8,
}


def render(figure: Figure, fmt: str) -> bytes:
    """The figure as ``svg``, ``png`` or ``pdf`` bytes."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    with matplotlib.rc_context(STYLE):
        if isinstance(figure, HeatMap):
            fig = heat_map(plt, figure)
        elif isinstance(figure, Curves):
            fig = curves(plt, figure)
        else:
            fig = bars(plt, figure)
        buffer = io.BytesIO()
        metadata = {"svg": {"Title": figure.title, "Date": None},
                    "pdf": {"Title": figure.title, "CreationDate": None, "ModDate": None},
                    "png": {"Title": figure.title}}[fmt]
        fig.savefig(buffer, format=fmt, dpi=DPI, bbox_inches="tight", metadata=metadata)
        plt.close(fig)
    data = buffer.getvalue()
    return with_title(data, figure.title) if fmt == "svg" else data


def with_title(svg: bytes, title: str) -> bytes:
    """The SVG with a ``<title>`` as the first child of its root element."""
    text = svg.decode("utf-8")
    match = re.search(r"<svg\b[^>]*>", text)
    at = match.end()
    return (text[:at] + f"\n <title>{escape(title)}</title>" + text[at:]).encode("utf-8")


def _plain(text: str) -> str:
    """Text as matplotlib prints it literally (a ``$`` would start mathtext)."""
    return text.replace("\\", "\\\\").replace("$", r"\$")


def _rgb(rgb: tuple[int, int, int]) -> str:
    return hex_colour(rgb)


def heat_map(plt, h: HeatMap):
    """One square per cell, the certified value written in it, masked cells hatched."""
    from matplotlib.patches import Rectangle

    n_rows, n_cols = len(h.rows), len(h.cols)
    fig, ax = plt.subplots(figsize=(1.05 * n_cols + 2.2, 0.75 * n_rows + 1.6))
    for i in range(n_rows):
        for j in range(n_cols):
            if h.masked[i][j]:
                ax.add_patch(Rectangle((j, i), 1, 1, facecolor=_rgb(MASKED_FILL),
                                       edgecolor=_rgb(MASKED_HATCH), hatch="///", linewidth=0))
                ink = (0, 0, 0)
            else:
                fill = cividis(h.shades[i][j])
                ax.add_patch(Rectangle((j, i), 1, 1, facecolor=_rgb(fill), linewidth=0))
                ink = text_colour(fill)
            ax.text(j + 0.5, i + 0.5, h.texts[i][j], ha="center", va="center",
                    color=_rgb(ink), fontsize=12, gid=f"cell-{i}-{j}")
    for k in range(n_cols + 1):
        ax.axvline(k, color="white", linewidth=1.2)
    for k in range(n_rows + 1):
        ax.axhline(k, color="white", linewidth=1.2)
    ax.set_xlim(0, n_cols)
    ax.set_ylim(n_rows, 0)
    ax.set_xticks([j + 0.5 for j in range(n_cols)],
                  [f"{_plain(t)}\n{j}" for j, t in enumerate(h.cols)])
    ax.set_yticks([i + 0.5 for i in range(n_rows)],
                  [f"{_plain(t)} {i}" for i, t in enumerate(h.rows)])
    ax.xaxis.tick_top()
    ax.xaxis.set_label_position("top")
    ax.tick_params(length=0)
    ax.set_xlabel(f"{h.col_title} $j$")
    ax.set_ylabel(f"{h.row_title} $i$")
    for side in ax.spines.values():
        side.set_visible(False)
    _colour_bar(fig, ax)
    return fig


def _colour_bar(fig, ax) -> None:
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import ListedColormap, Normalize

    table = ListedColormap([[c / 255 for c in cividis(Fraction(k, 255))] for k in range(256)])
    bar = fig.colorbar(ScalarMappable(norm=Normalize(0, 1), cmap=table), ax=ax,
                       fraction=0.05, pad=0.04, ticks=[0, 0.5, 1])
    bar.outline.set_visible(False)
    bar.ax.tick_params(labelsize=9)


def curves(plt, c: Curves):
    """One panel per dimension: the sinusoid (NumPy samples) and the certified points."""
    n = len(c.tokens)
    per_row = 2 if c.d_model <= 4 else 4
    rows = -(-c.d_model // per_row)
    fig, axes = plt.subplots(rows, per_row, figsize=(3.4 * per_row, 2.5 * rows),
                             squeeze=False, sharey=True)
    last = max(n - 1, 1)
    for dim in range(rows * per_row):
        ax = axes[dim // per_row][dim % per_row]
        if dim >= c.d_model:
            ax.set_visible(False)
            continue
        xs, ys = pe_curve(dim, c.d_model, last)
        ax.plot(xs, ys, color=_rgb(SERIES[0]), linewidth=1.8)
        ax.plot(range(n), [float(c.points[p][dim]) for p in range(n)], "o", color="black",
                markersize=5, zorder=3)
        ax.set_title(f"dimension {dim} ({'sin' if dim % 2 == 0 else 'cos'})", fontsize=11)
        ax.set_xticks(range(n), [_plain(t) for t in c.tokens], fontsize=9)
        ax.set_yticks([-1, 0, 1])
        ax.set_ylim(-1.15, 1.15)
        ax.set_xlim(-0.3, last + 0.3)
        ax.grid(color="#dddddd", linewidth=0.6)
    fig.tight_layout()
    return fig


def bars(plt, b: Bars):
    """Grouped bars, each labelled with its certified value."""
    m, k = len(b.categories), len(b.series)
    fig, ax = plt.subplots(figsize=(max(5.0, min(11.0, 0.55 * m * k + 2)), 3.6))
    width = 0.8 / k
    show_values = m * k <= 16
    for s, (legend, _, values, texts) in enumerate(b.series):
        xs = [x - 0.4 + width * (s + 0.5) for x in range(m)]
        heights = [float(v) for v in values]
        drawn = ax.bar(xs, heights, width, color=_rgb(SERIES[s % len(SERIES)]),
                       edgecolor="black", linewidth=0.6, label=legend)
        if show_values:
            ax.bar_label(drawn, labels=list(texts), fontsize=9, padding=2)
    ax.set_xticks(range(m), [_plain(t) for t in b.categories])
    ax.set_xlabel(b.category_title)
    ax.set_ylabel(b.value_title)
    ax.axhline(0, color="black", linewidth=0.8)
    if b.fixed_range:
        ax.set_ylim(b.fixed_range[0], b.fixed_range[1] * 1.12)
    else:
        ax.margins(y=0.15)
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(axis="y", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    if k > 1:
        ax.legend(frameon=False, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=k)
    return fig
