"""What the figures show, taken from the certified values of a derivation.

Each figure is described once, independently of how it is drawn (TikZ or
matplotlib): the texts written on it are the stage's certified decimals and the
positions of marks and bars are those same rounded values (exact fractions), never a
float computation.  Only the positional encoding's continuous curves are sampled
with NumPy (:func:`pe_curve`); the marked points on them are certified.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from symformer.engine import Derivation, Stage
from symformer.engine.rounding import Rounded, Undecided
from symformer.latex.escape import latex_text
from symformer.ops.positional import pe_even, pe_odd

#: Significant digits of the positions of marks and bars (finer than any printout).
POSITION_DIGITS = 6


@dataclass(frozen=True)
class HeatMap:
    """An attention-weight map: one cell per (query row, key column)."""

    name: str
    caption: str  # LaTeX
    title: str  # the same in plain text (SVG <title>, PNG metadata)
    rows: tuple[str, ...]
    cols: tuple[str, ...]
    texts: tuple[tuple[str, ...], ...]
    shades: tuple[tuple[Fraction, ...], ...]  # in [0, 1]: the colour of each cell
    masked: tuple[tuple[bool, ...], ...]
    row_title: str = "query token"
    col_title: str = "key token"


@dataclass(frozen=True)
class Curves:
    """The positional encoding: one panel per dimension, marks at the tokens."""

    name: str
    caption: str  # LaTeX
    title: str  # the same in plain text (SVG <title>, PNG metadata)
    tokens: tuple[str, ...]
    d_model: int
    points: tuple[tuple[Fraction, ...], ...]  # [position][dimension], certified
    texts: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Bars:
    """Grouped bars: one group per category, one bar per series."""

    name: str
    caption: str  # LaTeX
    title: str  # the same in plain text (SVG <title>, PNG metadata)
    categories: tuple[str, ...]
    category_title: str
    #: (legend in LaTeX, legend in plain text, bar heights, certified texts) per series
    series: tuple[tuple[str, str, tuple[Fraction, ...], tuple[str, ...]], ...]
    value_title: str
    fixed_range: tuple[int, int] | None = None


Figure = HeatMap | Curves | Bars


@dataclass(frozen=True)
class Options:
    """Which token and how many decimals."""

    token: int = 1
    decimals: int = 2
    extra: dict = field(default_factory=dict)


def label(figure: Figure) -> str:
    """The LaTeX label of a figure: ``fig:layer1-head1-weights``."""
    return f"fig:{figure.name}"


def figures(g: Derivation, options: Options) -> list[Figure]:
    """Every figure of the derivation, in the order of its stages."""
    out: list[Figure] = []
    for stage in g:
        if stage.kind == "positional_encoding" and _nonzero_pe(stage):
            out.append(positional_curves(stage, options))
        elif stage.kind == "weights":
            out.append(attention_map(g, stage, options))
        elif stage.kind == "layer_norm":
            out.append(layer_norm_bars(g, stage, options))
        elif stage.kind == "probabilities":
            out.extend(probability_bars(stage, i, options) for i in range(stage.shape[0]))
    return out


def _value(r: Rounded | None) -> Fraction:
    """The rounded value (an undecided entry's lower end; a masked entry is 0)."""
    if r is None:
        return Fraction(0)
    return r.low.value() if isinstance(r, Undecided) else r.value()


def _nonzero_pe(stage: Stage) -> bool:
    op = stage.op
    return getattr(op, "kind", "sinusoidal") != "none"


def _slug(name: str) -> str:
    return name.replace(".", "-")


def _where(stage: Stage) -> str:
    parts = ["decoder"] if stage.side == "decoder" else []
    if stage.layer:
        parts.append(f"layer {stage.layer}")
    if ".cross." in stage.name:
        parts.append("cross-attention")
    elif ".self." in stage.name:
        parts.append("self-attention")
    return ", ".join(parts)


def attention_map(g: Derivation, stage: Stage, options: Options) -> HeatMap:
    """The attention weights of one head, masked cells marked (their score is -inf)."""
    texts = stage.values(decimals=options.decimals)
    fine = stage.rounded(significant=POSITION_DIGITS)
    scores = g[stage.inputs[0]]
    masked = [[r is None for r in row] for row in scores.rounded(decimals=0)]
    shades = [[min(max(_value(r), Fraction(0)), Fraction(1)) for r in row] for row in fine]
    where = _where(stage)
    head = f"Attention weights of head {stage.head}" + (f" ({where})" if where else "")
    caption = head + (": row $i$ (query token) puts the weight $\\alpha_{ij}$ on column $j$ "
                      "(key token); each row sums to 1.")
    title = head + ": row i (query token) puts the weight α_ij on column j (key token)."
    if any(any(row) for row in masked):
        caption += " Hatched cells are masked (weight exactly 0)."
        title += " Hatched cells are masked (weight exactly 0)."
    return HeatMap(name=_slug(stage.name), caption=caption, title=title,
                   rows=stage.rows, cols=stage.cols,
                   texts=_tuple2(texts), shades=_tuple2(shades), masked=_tuple2(masked))


def positional_curves(stage: Stage, options: Options) -> Curves:
    """The sinusoids of the positional encoding with the tokens' positions marked."""
    fine = stage.rounded(significant=POSITION_DIGITS)
    texts = stage.values(decimals=options.decimals)
    side = "decoder " if stage.side == "decoder" else ""
    caption = (f"The {side}positional encoding: dimension $2k$ is "
               "$\\sin(\\mathit{pos}/10000^{2k/d})$, dimension $2k+1$ is "
               "$\\cos(\\mathit{pos}/10000^{2k/d})$; the dots are the tokens' positions "
               "(their certified values).")
    title = (f"The {side}positional encoding: dimension 2k is sin(pos/10000^(2k/d)), "
             "dimension 2k+1 is cos(pos/10000^(2k/d)); the dots are the tokens' positions.")
    return Curves(name=_slug(stage.name), caption=caption, title=title, tokens=stage.rows,
                  d_model=stage.shape[1],
                  points=_tuple2([[_value(r) for r in row] for row in fine]),
                  texts=_tuple2(texts))


def pe_curve(dimension: int, d_model: int, last: float, samples: int = 121
             ) -> tuple[np.ndarray, np.ndarray]:
    """The continuous curve of one dimension over positions 0..last (NumPy, drawing only)."""
    pos = np.linspace(0.0, last, samples)
    f = pe_even if dimension % 2 == 0 else pe_odd
    return pos, f(pos, dimension // 2, d_model)


def layer_norm_bars(g: Derivation, stage: Stage, options: Options) -> Bars:
    """The LayerNorm input (residual sum) and output of the chosen token."""
    rows = stage.shape[0]
    i = options.token if stage.side == "encoder" else options.extra.get("target", rows - 1)
    i = min(i, rows - 1)
    source = g[stage.inputs[0]]
    series = []
    for legend, s in (("input", source), ("output", stage)):
        fine = s.rounded(significant=POSITION_DIGITS)[i]
        texts = s.values(decimals=options.decimals)[i]
        letter = "r" if legend == "input" else "y"
        series.append((f"{legend} ${letter}$", f"{legend} {letter}",
                       tuple(_value(r) for r in fine), tuple(texts)))
    token = stage.rows[i]
    what = stage.name.replace(".", " ").replace("_", " ")
    caption = (f"LayerNorm {what}, token {i} (``{latex_text(token)}''): its input $r$ "
               "and its output $y$, dimension by dimension.")
    title = f"LayerNorm {what}, token {i} (“{token}”): its input r and its output y."
    return Bars(name=f"{_slug(stage.name)}-token{i}", caption=caption, title=title,
                categories=tuple(str(k) for k in range(stage.shape[1])),
                category_title="dimension", series=tuple(series), value_title="value")


def probability_bars(stage: Stage, i: int, options: Options) -> Bars:
    """The next-token probabilities after target position ``i``."""
    fine = stage.rounded(significant=POSITION_DIGITS)[i]
    texts = stage.values(decimals=options.decimals)[i]
    caption = (f"Next-token probabilities after target position {i} "
               f"(``{latex_text(stage.rows[i])}''), over the vocabulary.")
    title = f"Next-token probabilities after target position {i} (“{stage.rows[i]}”)."
    return Bars(name=f"{_slug(stage.name)}-position{i}", caption=caption, title=title,
                categories=stage.cols, category_title="next token",
                series=(("$p$", "p", tuple(_value(r) for r in fine), tuple(texts)),),
                value_title="probability", fixed_range=(0, 1))


def _tuple2(rows) -> tuple:
    return tuple(tuple(r) for r in rows)
