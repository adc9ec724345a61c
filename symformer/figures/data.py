"""What the figures show, taken from the certified values of a derivation.

Each figure is described once, independently of how it is drawn (TikZ or
matplotlib): the texts written on it are the stage's certified decimals and the
positions of marks and bars are those same rounded values (exact fractions), never a
float computation.  Only the positional encoding's continuous curves are sampled
with NumPy (:func:`pe_curve`, the engine's own formula); the marked points on them are
certified.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from symformer.engine import Derivation, Stage
from symformer.engine.rounding import Rounded, Undecided, digit_count, int_text
from symformer.escape import latex_text, short_name
from symformer.notation import ROPE_PAIR, ROPE_POSITION
from symformer.notation import symbol as notation_symbol
from symformer.ops.positional import sinusoidal_base
from symformer.placement import part_of
from symformer.rendering import Rendering

#: Significant digits of the positions of marks and bars (finer than any printout).
POSITION_DIGITS = 6
#: A position below 10**-POSITION_PLACES is drawn at 0 (no drawing tells them apart; an
#: exp(-1e9)-small weight is never made a fraction of 10**-434,294,487).
POSITION_PLACES = 300
#: One colour per token position in RoPE's figure: Okabe and Ito's palette (told apart
#: with every common colour-vision deficiency), black first.
POSITION_COLOURS = ((0, 0, 0), (230, 159, 0), (86, 180, 233), (0, 158, 115),
                    (213, 94, 0), (0, 114, 178), (204, 121, 167), (240, 228, 66))


@dataclass(frozen=True)
class HeatMap:
    """A table drawn as coloured cells with its certified values written in them.

    Attention weights (sequential map, query rows, key columns) or a signed table
    (``diverging``: the learned positional embeddings, zero in the middle of the map).
    ``scale`` is the value at each end of the colour bar; ``shades`` place each cell
    on it (0 at ``scale[0]``, 1 at ``scale[1]``).
    """

    name: str
    caption: str  # LaTeX
    title: str  # the same in plain text (SVG <title>, PNG metadata)
    rows: tuple[str, ...]  # row labels, plain text: ``think (1)``
    cols: tuple[str, ...]
    texts: tuple[tuple[str, ...], ...]
    shades: tuple[tuple[Fraction, ...], ...]  # in [0, 1]: the colour of each cell
    masked: tuple[tuple[bool, ...], ...]
    scale: tuple[Fraction, Fraction] = (Fraction(0), Fraction(1))
    bar_title: str = "attention weight"
    diverging: bool = False
    row_title: str = "query token $i$"
    col_title: str = "key token $j$"


@dataclass(frozen=True)
class Curves:
    """The sinusoidal positional encoding: one panel per dimension, marks at the tokens."""

    name: str
    caption: str  # LaTeX
    title: str  # the same in plain text (SVG <title>, PNG metadata)
    tokens: tuple[str, ...]
    d_model: int
    points: tuple[tuple[Fraction, ...], ...]  # [position][dimension], certified
    texts: tuple[tuple[str, ...], ...]
    base: Fraction = Fraction(10000)
    #: one per dimension, two lines (``\n``), the second LaTeX math (mathtext reads it too)
    panel_titles: tuple[str, ...] = ()


@dataclass(frozen=True)
class Rotations:
    """RoPE: each pair c of a head's key (or query) dimensions turned by the angle
    p*theta_c at position p (the notes' symbols).

    One panel per pair c: for each position p, the pair of the key of the token there
    before RoPE (dashed) and after (solid, the rotated key: the notes' table), drawn as
    arrows from the origin in one colour per position, on a circle as large as the
    longest of them; the angles p*theta_c are listed under it.  ``points`` are the
    (cos, sin) of the angles (where the pair (1, 0) goes).
    """

    name: str
    caption: str  # LaTeX
    title: str  # the same in plain text (SVG <title>, PNG metadata)
    tokens: tuple[str, ...]  # one label per position p
    pairs: tuple[str, ...]  # panel titles (LaTeX math): pair c, its dimensions, theta_c
    #: [pair][position]: (cos, sin) of the angle, certified to POSITION_DIGITS
    points: tuple[tuple[tuple[Fraction, Fraction], ...], ...]
    texts: tuple[tuple[str, ...], ...]  # [pair][position]: the angle, certified decimals
    #: [pair][position]: the pair before and after the rotation (certified, the stages')
    before: tuple[tuple[tuple[Fraction, Fraction], ...], ...] = ()
    after: tuple[tuple[tuple[Fraction, Fraction], ...], ...] = ()
    #: the symbols (LaTeX, plain) of the vector before and after: ``k``, ``\tilde{k}``
    symbols: tuple[str, str, str, str] = ("k", r"\tilde{k}", "k", "k̃")

    def labels(self, pair: int, apart: bool = False) -> tuple[list[str], str]:
        """Pair ``pair``'s angles: one line listing them (``p = 0–3: 0.00, 1.00, ...``);
        ``apart``: one label per position instead (``p = 2: 2.00``)."""
        texts, p = self.texts[pair], ROPE_POSITION.text
        if apart:
            return [f"{p} = {m}: {t}" for m, t in enumerate(texts)], ""
        return [], f"angles {p}θ, {p} = 0–{len(texts) - 1}: " + ", ".join(texts)

    def note(self, latex: bool = False) -> str:
        """The line under the figure: which token is at which position p, and what the
        arrows are (LaTeX with ``latex``, the positions' words escaped)."""
        from symformer.escape import latex_text

        p = ROPE_POSITION
        short = (f"; arrows under {SHORTEST_ARROW} of the longest drawn at {SHORTEST_ARROW}"
                 if self.lengthened() else "")
        if latex:
            words = ", ".join(latex_text(t) for t in self.tokens)
            return (f"positions ${p.latex}$: {words}; dashed: ${self.symbols[0]}$ before "
                    f"RoPE, solid: the rotated ${self.symbols[1]}$; angles in "
                    f"radians{short}")
        return (f"positions {p.text}: {', '.join(self.tokens)}; dashed: {self.symbols[2]} "
                f"before RoPE, solid: the rotated {self.symbols[3]}; angles in radians{short}")

    def scale(self, pair: int, m: int) -> float:
        """The factor from token ``m``'s pair ``pair`` (before and after RoPE: one length)
        to the drawing, in radii of the circle: the longest arrow of the pair reaches the
        circle, and none is shorter than :data:`SHORTEST_ARROW` of it, so that every
        drawn rotation can be seen (a worked token's key may be a hundredth of the
        longest).  A zero vector stays a point."""
        lengths = self._lengths(pair)
        longest, length = max(lengths, default=0.0), lengths[m]
        if length == 0 or longest == 0:
            return 0.0
        return max(length / longest, SHORTEST_ARROW) / length

    def lengthened(self) -> bool:
        """Whether some arrow is drawn longer than its length (:meth:`scale`)."""
        for pair in range(len(self.before)):
            lengths = self._lengths(pair)
            if any(0 < v < SHORTEST_ARROW * max(lengths) for v in lengths):
                return True
        return False

    def _lengths(self, pair: int) -> list[float]:
        """The length of each token's pair ``pair`` (for drawing only, never a value)."""
        return [math.hypot(float(x), float(y)) for x, y in self.before[pair]]


def heading(figure) -> str:
    """The figure's heading, drawn above a standalone PNG, PDF or SVG: what it shows
    and where (``Attention weights — layer 1, head 2``; ``LayerNorm — …, token 1
    (“think”)``; ``Next-token probabilities after position 1 (“cat”)``): its
    title's first clause."""
    return figure.title.split(": ", 1)[0].rstrip(".")


#: The shortest arrow a RoPE figure draws, as a fraction of its circle's radius.
SHORTEST_ARROW = 0.4


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


Figure = HeatMap | Curves | Rotations | Bars


@dataclass(frozen=True)
class FigureOptions(Rendering):
    """Which token, how many decimals (:class:`~symformer.rendering.Rendering`'s, the
    command line's defaults), and the attention maps' colour scale.

    ``absolute_scale``: attention maps coloured on the fixed scale [0, 1] (maps of
    different heads compare) instead of each map's own smallest to largest weight.
    """

    extra: dict = field(default_factory=dict)
    absolute_scale: bool = False


def label(figure: Figure) -> str:
    """The LaTeX label of a figure: ``fig:layer1-head1-weights``."""
    return f"fig:{figure.name}"


def figures(g: Derivation, options: FigureOptions) -> list[Figure]:
    """Every figure of the derivation, in the order of its stages."""
    out: list[Figure] = []
    for stage in g:
        op = stage.op
        if op.encodes_positions:
            out.extend(positional_figure(g, stage, options))
        elif op.weighs_keys:
            out.append(attention_map(g, stage, options))
        elif op.matrix_form == "layer_norm":  # a LayerNorm (its bars say "LayerNorm")
            out.append(layer_norm_bars(g, stage, options))
        elif op.rows_sum_to_one and op.columns == "vocab" and stage.side != "decoding":
            out.extend(probability_bars(stage, i, options) for i in range(stage.shape[0]))
    return out


def _value(r: Rounded | None) -> Fraction:
    """The rounded value as a position (an undecided entry's lower end; a masked entry,
    or one below 10**-:data:`POSITION_PLACES`, is 0)."""
    if r is None:
        return Fraction(0)
    return (r.low if isinstance(r, Undecided) else r).clipped(POSITION_PLACES)


def _slug(name: str) -> str:
    return name.replace(".", "-")


def token_label(token: str, position: int) -> str:
    """A row or column label, the same on both axes: ``think (1)`` (a long word cut
    around an ellipsis, :func:`~symformer.escape.short_name`)."""
    return f"{short_name(token)} ({position})"


#: How a heat map's axes are labelled, tried in this order until the map fits: the word
#: and its position on one line, the word over its position, the position alone (the
#: words then listed under the map, :func:`positions_key`).  Both axes alike.
LABEL_MODES = ("line", "stacked", "positions")


def axis_labels(labels: tuple[str, ...], mode: str) -> list[str]:
    """Labels ``think (1)`` in one of :data:`LABEL_MODES` (``\n`` between lines)."""
    out = []
    for label in labels:
        word, _, rest = label.rpartition(" (")
        if mode == "line" or not word:
            out.append(label)
        elif mode == "stacked":
            out.append(f"{word}\n({rest}")
        else:
            out.append(rest.removesuffix(")"))
    return out


def positions_key(h: HeatMap) -> str:
    """The line under a map labelled by positions alone: which word is at which."""
    def listing(labels: tuple[str, ...]) -> str:
        return ", ".join(f"{rest.removesuffix(')')} {word}"
                         for word, _, rest in (t.rpartition(" (") for t in labels))

    if h.rows == h.cols:
        return "positions: " + listing(h.rows)
    return f"rows: {listing(h.rows)}; columns: {listing(h.cols)}"


def _where(stage: Stage) -> str:
    """Where the stage sits, in the notes' words: ``Layer 1, Head 2``."""
    return ", ".join(part_of(stage))


def nice_ticks(low: Fraction, high: Fraction, most: int = 6) -> tuple[Fraction, ...]:
    """Round tick values inside [low, high]: the longest step (1, 2 or 5 times a power of
    ten) that gives at least 3 of them; of a longer run than ``most`` (at least 3),
    every second or third one."""
    span = high - low
    if span <= 0:
        return (low,)
    exponent = digit_count(span.numerator // span.denominator) if span >= 1 else \
        -digit_count(span.denominator // span.numerator)
    for e in range(exponent, exponent - 3, -1):
        for mantissa in (5, 2, 1):
            step = Fraction(mantissa) * Fraction(10) ** e
            first, last = -((-low) // step), high // step  # whole steps within the range
            if last - first + 1 >= 3:
                ticks = [k * step for k in range(first, last + 1)]
                return tuple(ticks[::-(-len(ticks) // max(most, 3))])
    return (low, high)


def decimal_text(x: Fraction) -> str:
    """A tick value written exactly with as few digits as it needs (``0.25``, ``-0.5``,
    ``1``); a value that is no short terminating decimal, to 6 significant digits."""
    sign, x = ("-" if x < 0 else ""), abs(x)
    places = 0
    while (x * 10 ** places).denominator != 1:
        places += 1
        if places > 12:
            return sign + f"{float(x):.6g}"
    digits = int_text(int(x * 10 ** places)).rjust(places + 1, "0")
    text = digits if places == 0 else f"{digits[:-places]}.{digits[-places:]}"
    return sign + text


def attention_map(g: Derivation, stage: Stage, options: FigureOptions) -> HeatMap:
    """The attention weights of one head, masked cells marked (their score is -inf).

    Coloured from the map's smallest to its largest weight (so weights of 0.15 and
    0.39 look different), or on [0, 1] with ``options.absolute_scale``.
    """
    texts = stage.values(decimals=options.decimals)
    fine = stage.rounded(significant=POSITION_DIGITS)
    scores = g[stage.inputs[0]]
    masked = [[r is None for r in row] for row in scores.rounded(decimals=0)]
    values = [_value(r) for row, m in zip(fine, masked) for r, hidden in zip(row, m)
              if not hidden]
    low, high = min(values), max(values)
    if options.absolute_scale or high <= low:
        low, high = Fraction(0), Fraction(1)
    shades = [[min(max((_value(r) - low) / (high - low), Fraction(0)), Fraction(1))
               for r in row] for row in fine]
    where = _where(stage)
    caption = (f"Attention weights --- {latex_text(where)}: row $i$ (query token) puts the "
               "weight $\\alpha_{ij}$ on column $j$ (key token); each row sums to 1.")
    title = (f"Attention weights \u2014 {where}: row i (query token) puts the weight α_ij "
             "on column j (key token).")
    if (low, high) != (0, 1):
        caption += " Colours run from the smallest to the largest weight of this map."
        title += " Colours run from the smallest to the largest weight of this map."
    if any(any(row) for row in masked):
        caption += " Hatched cells are masked (weight exactly 0)."
        title += " Hatched cells are masked (weight exactly 0)."
    return HeatMap(name=_slug(stage.name), caption=caption, title=title,
                   rows=tuple(token_label(t, i) for i, t in enumerate(stage.rows)),
                   cols=tuple(token_label(t, j) for j, t in enumerate(stage.cols)),
                   texts=_tuple2(texts), shades=_tuple2(shades), masked=_tuple2(masked),
                   scale=(low, high))


def positional_figure(g: Derivation, stage: Stage, options: FigureOptions) -> list[Figure]:
    """The figure of the example's positional encoding, by its kind: the sinusoids, the
    learned table, RoPE's rotation angles, or none (no positions added or rotated)."""
    op = stage.op
    if op.lookup == "positions":
        return [learned_map(stage, options)]
    kind = getattr(op, "kind", "sinusoidal")
    if kind == "sinusoidal":
        return [positional_curves(stage, options)]
    if kind == "rope" and stage.side == "encoder":
        rope = next((s for s in g if s.op.rotates), None)
        return [rope_rotations(rope, stage, options, g[rope.inputs[0]])] \
            if rope is not None else []
    return []


def _side(stage: Stage) -> str:
    return "decoder " if stage.side == "decoder" else ""


def positional_curves(stage: Stage, options: FigureOptions) -> Curves:
    """The sinusoids of the positional encoding with the tokens' positions marked.

    The curves are the engine's own formula with the example's base, so each certified
    point lies on its curve."""
    fine = stage.rounded(significant=POSITION_DIGITS)
    texts = stage.values(decimals=options.decimals)
    base = Fraction(int(stage.op.base.p), int(stage.op.base.q)) \
        if hasattr(stage.op.base, "p") else Fraction(stage.op.base)
    b = _number_latex(base)
    d = stage.shape[1]
    caption = (f"The {_side(stage)}positional encoding: dimension $2k$ is "
               f"$\\sin(\\mathit{{pos}}/{b}^{{2k/{d}}})$, dimension $2k+1$ is "
               f"$\\cos(\\mathit{{pos}}/{b}^{{2k/{d}}})$; the curves are these functions "
               "of a continuous position, the dots the tokens' positions (their "
               "certified values).")
    title = (f"The {_side(stage)}positional encoding: dimension 2k is "
             f"sin(pos/{_number_latex(base)}^(2k/{d})), dimension 2k+1 is "
             f"cos(pos/{_number_latex(base)}^(2k/{d})); the dots are the tokens' positions.")
    panels = tuple(f"dimension {j}\n$\\{'sin' if j % 2 == 0 else 'cos'}"
                   f"(\\mathit{{pos}}{_rate(base, j - j % 2, d)})$" for j in range(d))
    return Curves(name=_slug(stage.name), caption=caption, title=title,
                  tokens=tuple(token_label(t, i) for i, t in enumerate(stage.rows)),
                  d_model=d, points=_tuple2([[_value(r) for r in row] for row in fine]),
                  texts=_tuple2(texts), base=base, panel_titles=panels)


def pe_curve(dimension: int, d_model: int, last: float, base: Fraction = Fraction(10000),
             per_position: int = 24) -> tuple[np.ndarray, np.ndarray]:
    """The continuous curve of one dimension over positions 0..last (NumPy, drawing only):
    the engine's own formula (:func:`~symformer.ops.positional.sinusoidal_base`), sampled
    ``per_position`` times per unit so the integer positions are among the samples."""
    pos = np.linspace(0.0, last, int(round(last * per_position)) + 1)
    two_i = dimension - dimension % 2
    return pos, sinusoidal_base(pos, two_i, dimension % 2 == 0, d_model, float(base))


def learned_map(stage: Stage, options: FigureOptions) -> HeatMap:
    """The learned positional embeddings of the sentence's positions, as a signed heat
    map (zero white, the colour bar symmetric about it)."""
    texts = stage.values(decimals=options.decimals)
    fine = [[_value(r) for r in row] for row in stage.rounded(significant=POSITION_DIGITS)]
    top = max((abs(v) for row in fine for v in row), default=Fraction(0)) or Fraction(1)
    shades = [[(v + top) / (2 * top) for v in row] for row in fine]
    start = getattr(stage.op, "start", 0)
    caption = (f"The learned positional embeddings: row $p$ of the table is added to the "
               f"token at position $p$ (rows {start} to {start + stage.shape[0] - 1}, one "
               "per token); white is 0.")
    title = (f"The learned positional embeddings: row p of the table is added to the token "
             f"at position p (rows {start} to {start + stage.shape[0] - 1}); white is 0.")
    rows = tuple(token_label(t, start + i) for i, t in enumerate(stage.rows))
    return HeatMap(name=_slug(stage.name), caption=caption, title=title, rows=rows,
                   cols=tuple(str(j) for j in range(stage.shape[1])), texts=_tuple2(texts),
                   shades=_tuple2(shades),
                   masked=_tuple2([[False] * stage.shape[1]] * stage.shape[0]),
                   scale=(-top, top), bar_title="embedding value", diverging=True,
                   row_title="position $p$", col_title="dimension")


def rope_rotations(rope: Stage, stage: Stage, options: FigureOptions,
                   source: Stage | None = None) -> Rotations:
    """RoPE's rotation of one head's key (or query) pairs: pair c at position p is turned
    by p*theta_c, theta_c = base^(-2c/d_k); the angles written are certified decimals,
    the points their exact cos and sin rounded (certified), and the arrows the stage
    ``source`` (the keys before RoPE) and ``rope`` (after), rounded (certified)."""
    from flint import arb, fmpq

    from symformer.engine.arbmath import rational_ball
    from symformer.engine.rounding import certified_rounding
    from symformer.notation import notation

    op = rope.op
    base = Fraction(int(op.base.p), int(op.base.q)) if hasattr(op.base, "p") \
        else Fraction(op.base)
    b = _number_latex(base)
    d = op.d
    points, texts, pairs = [], [], []
    for i, (first, second) in enumerate(op.pairs):
        row_points, row_texts = [], []
        for m in range(op.n):
            def angle(prec: int, m: int = m, i: int = i) -> arb:
                return arb(op.start + m) * rational_ball(op.base) ** arb(fmpq(-2 * i, d))

            def cos(prec: int, angle=angle) -> arb:
                return angle(prec).cos()

            def sin(prec: int, angle=angle) -> arb:
                return angle(prec).sin()

            where = f"RoPE angle of pair {i} at position {m}"
            c = certified_rounding(cos, where, significant=POSITION_DIGITS)
            s = certified_rounding(sin, where, significant=POSITION_DIGITS)
            row_points.append((_value(c), _value(s)))
            row_texts.append(certified_rounding(angle, where, decimals=options.decimals).fixed())
        points.append(tuple(row_points))
        texts.append(tuple(row_texts))
        theta = "1" if i == 0 else f"{b}^{{-{2 * i}/{d}}}"
        pairs.append(f"pair {i}: dimensions {first}, {second}; $\\theta_{{{i}}} = {theta}$")
    before: list = []
    after: list = []
    symbols = ("k", r"\tilde{k}", "k", "k̃")
    if source is not None:
        old = [[_value(r) for r in row] for row in source.rounded(significant=POSITION_DIGITS)]
        new = [[_value(r) for r in row] for row in rope.rounded(significant=POSITION_DIGITS)]
        before = [tuple((row[a], row[b_]) for row in old) for a, b_ in op.pairs]
        after = [tuple((row[a], row[b_]) for row in new) for a, b_ in op.pairs]
        was, now = notation(source), notation(rope)
        symbols = (was.latex, now.latex, was.text, now.text)
    what = "query" if rope.kind.startswith("Q") else "key"
    p, c = ROPE_POSITION.latex, ROPE_PAIR.latex  # the notes' letters (their equations')
    pt, ct = ROPE_POSITION.text, ROPE_PAIR.text
    caption = (f"What RoPE does: in every head the query and key dimensions are taken in "
               f"pairs, and pair ${c}$ of the token at position ${p}$ is rotated by the angle "
               f"${p}\\,\\theta_{{{c}}}$, $\\theta_{{{c}}} = {b}^{{-2{c}/{d}}}$ ($d_k = {d}$). "
               f"Drawn: pair ${c}$ of each token\u2019s {what} ${symbols[0]}$ before the "
               f"rotation (dashed) and after it, ${symbols[1]}$ (solid, one colour per "
               f"position), so each solid arrow is its dashed one turned by "
               f"${p}\\,\\theta_{{{c}}}$ radians (listed under the circle); the positional table "
               "itself is zero.")
    title = (f"What RoPE does: pair {ct} of a query or key at position {pt} is rotated by "
             f"the angle {pt}·θ_{ct}, θ_{ct} = {_number_latex(base)}^(-2{ct}/{d}); drawn: "
             f"each token's {what} {symbols[2]} (dashed) and the rotated {symbols[3]} (solid).")
    start = op.start
    return Rotations(name=_slug(stage.name), caption=caption, title=title,
                     tokens=tuple(token_label(t, start + m) for m, t in enumerate(rope.rows)),
                     pairs=tuple(pairs), points=tuple(points), texts=tuple(texts),
                     before=tuple(before), after=tuple(after), symbols=symbols)


def _rate(base: Fraction, two_i: int, d: int) -> str:
    """``/base^(2i/d)`` in LaTeX math, as a plain number when it is one (``/100``),
    nothing for dimension 0 and 1."""
    if two_i == 0:
        return ""
    e = Fraction(two_i, d)
    num, den = _root(base.numerator, e.denominator), _root(base.denominator, e.denominator)
    if num is not None and den is not None:
        return "/" + _number_latex(Fraction(num, den) ** e.numerator)
    return f"/{_number_latex(base)}^{{{e.numerator}/{e.denominator}}}"


def _root(n: int, k: int) -> int | None:
    """The exact integer k-th root of n >= 0, or None."""
    r = round(n ** (1 / k))
    return next((c for c in (r - 1, r, r + 1) if c >= 0 and c ** k == n), None)


def _number_latex(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"({x.numerator}/{x.denominator})"


def layer_norm_bars(g: Derivation, stage: Stage, options: FigureOptions) -> Bars:
    """The LayerNorm input (the residual sum, or the sub-layer's input before a pre-norm)
    and output of the chosen token."""
    rows = stage.shape[0]
    i = options.token if stage.side == "encoder" else options.extra.get("target", rows - 1)
    i = min(i, rows - 1)
    source = g[stage.inputs[0]]
    series, letters = [], []
    for legend, s in (("input", source), ("output", stage)):
        fine = s.rounded(significant=POSITION_DIGITS)[i]
        texts = s.values(decimals=options.decimals)[i]
        symbol = notation_symbol(s)  # the second sub-layer's r′ and y′, as the notes
        letters.append((symbol.latex, symbol.text))
        series.append((f"{legend} ${symbol.latex}$", f"{legend} {symbol.text}",
                       tuple(_value(r) for r in fine), tuple(texts)))
    token = stage.rows[i]
    (r_latex, r_text), (y_latex, y_text) = letters
    where = _where(stage)
    caption = (f"LayerNorm --- {latex_text(where)}, token {i} (``{latex_text(token)}''): its input "
               f"${r_latex}$ and its output ${y_latex}$, dimension by dimension.")
    title = (f"LayerNorm \u2014 {where}, token {i} (“{token}”): its input {r_text} and its "
             f"output {y_text}, dimension by dimension.")
    return Bars(name=f"{_slug(stage.name)}-token{i}", caption=caption, title=title,
                categories=tuple(str(k) for k in range(stage.shape[1])),
                category_title="dimension", series=tuple(series), value_title="value")


def probability_bars(stage: Stage, i: int, options: FigureOptions) -> Bars:
    """The next-token probabilities after position ``i`` (a target position: a
    decoder's, beside an encoder)."""
    fine = stage.rounded(significant=POSITION_DIGITS)[i]
    texts = stage.values(decimals=options.decimals)[i]
    where = f"{'target ' if stage.side == 'decoder' else ''}position {i}"
    caption = (f"Next-token probabilities after {where} "
               f"(``{latex_text(stage.rows[i])}''), over the vocabulary.")
    title = f"Next-token probabilities after {where} (“{stage.rows[i]}”)."
    return Bars(name=f"{_slug(stage.name)}-position{i}", caption=caption, title=title,
                categories=stage.cols, category_title="next token",
                series=(("$p$", "p", tuple(_value(r) for r in fine), tuple(texts)),),
                value_title="probability", fixed_range=(0, 1))


def _tuple2(rows) -> tuple:
    return tuple(tuple(r) for r in rows)
