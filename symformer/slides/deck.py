"""The plan of a slide deck: frames whose overlays add and never remove.

The deck is a title frame, then for every stage of the derivation, in order, frames
whose overlays reveal, one keystroke each,

1. the stage's general equation (the operation's declared and proved index form, as in
   the exported document: :func:`symformer.codegen.backward.equation_lines`),
2. the same formula with the chosen token's numbers substituted (the worked lines of
   :mod:`symformer.worked`, each recomputable from what it prints),
3. the results of those lines,
4. the stage's table with the token's row highlighted,

each step adding to the frame and nothing taken away.  Nothing is shrunk to fit: a
block of working too tall for one frame continues on the next (the equation repeated
at its top), and a table that does not fit under the working gets the next frame (so
the working is one keystroke back); a table too wide is split by columns
(:mod:`symformer.slides.measure` plans the room).  After the stage a figure draws (an
attention map after each head's weights, the positional encoding, a LayerNorm's input
and output, next-token probabilities) comes one frame with that figure.  A stage that
only renames its input (a block without ``W_O``: ``m = c``) gets no frame, as it gets no
section in the export.  Nothing here knows a stage kind: the stage's operation and the
shared builders say what to show.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from symformer.codegen.backward import equation_lines
from symformer.engine import Derivation, Stage
from symformer.figures.data import Figure, figures
from symformer.figures.data import Options as FigureOptions
from symformer.latex.blocks import Table
from symformer.latex.document import caption, renames, select, slug
from symformer.latex.tables import first_position, stage_table
from symformer.slides import measure
from symformer.worked.build import worked_steps
from symformer.worked.model import Style
from symformer.worked.render_latex import chain
from symformer.worked.render_latex import latex as node_latex

#: The most overlay steps a frame takes: equation, numbers, results, table.
STEPS = 4
#: A line break the worked-line printer puts in for the notes' ``align*``: the deck
#: lets TeX break its lines at operators instead, for the frame's width.
_ALIGN_BREAK = re.compile(r"\s*\\\\\s*&\\qquad\s*")


@dataclass(frozen=True)
class Options:
    """What the deck shows: the token followed, decimals, a stage filter (globs)."""

    token: int = 1
    decimals: int = 3
    stages: tuple[str, ...] | None = None


@dataclass(frozen=True)
class EquationLine:
    """One line of the general equation: ``lhs = rhs`` and a remark in words."""

    lhs: str
    rhs: str
    remark: str = ""


@dataclass(frozen=True)
class WorkedLine:
    """One worked line: ``lhs`` then the substituted ``shown`` pieces (each with its
    relation, ``= x_0 w_0 + ...``), revealed together, then the ``result``
    (``\\approx 0.752``), revealed after."""

    lhs: str
    shown: tuple[str, ...]
    result: str


@dataclass(frozen=True)
class StageFrame:
    """A frame of one stage: the equation, a share of the working, maybe the table.

    ``part``/``parts`` count the frames the stage takes; ``table`` is the table (or a
    column slice of it) shown on this frame, ``columns`` the slice's 0-based range."""

    stage: Stage
    title: str
    token: int  # the row followed in this stage
    equation: tuple[EquationLine, ...]
    lines: tuple[WorkedLine, ...]
    table: Table | None
    part: int = 1
    parts: int = 1
    columns: tuple[int, int] | None = None

    def steps(self) -> tuple[int, int, int]:
        """The overlays at which the substituted numbers, the results and the table
        appear (0: not on this frame).  Each reveal that has something to show takes
        the next keystroke; a frame of a table alone shows it at once."""
        step = 1
        numbers = results = table = 0
        if any(w.shown for w in self.lines):
            step = numbers = step + 1
        if self.lines:
            step = results = step + 1
        if self.table is not None and (self.lines or self.part == 1):
            step = table = step + 1
        elif self.table is not None:
            table = 1
        return numbers, results, table

    @property
    def pages(self) -> int:
        """Overlay steps of the frame (pages in the PDF)."""
        return max(1, *self.steps())


@dataclass(frozen=True)
class FigureFrame:
    """One figure on a frame of its own, titled like the stage it draws."""

    figure: Figure
    title: str = ""  # LaTeX; empty: the figure's own title, up to its first colon


Frame = StageFrame | FigureFrame


def page_count(frames: list[Frame]) -> int:
    """Pages of the deck: the title page and every frame's overlay steps."""
    return 1 + sum(f.pages if isinstance(f, StageFrame) else 1 for f in frames)


def frames(g: Derivation, options: Options,
           progress: Callable[[int, int, str], None] | None = None) -> list[Frame]:
    """The deck's frames, in the order of the stages; ``progress(k, total, name)`` is
    called before stage ``k`` of ``total`` is rendered."""
    names = {s.name for s in select(g, options.stages)}
    chosen = [s for s in g if s.name in names and not renames(s)]  # in the block's order
    drawn = figures(g, FigureOptions(token=options.token, decimals=options.decimals))
    after = _figures_after(chosen, drawn)
    out: list[Frame] = []
    for k, stage in enumerate(chosen, start=1):
        if progress:
            progress(k, len(chosen), stage.name)
        planned = stage_frames(stage, options)
        out.extend(planned)
        out.extend(FigureFrame(f, planned[0].title) for f in after.get(stage.name, ()))
    return out


def stage_frames(stage: Stage, options: Options) -> list[StageFrame]:
    """The frames of one stage for the token ``options.token``: working split so every
    frame fits, the table under the working when it fits, else on frames of its own."""
    row = min(options.token, stage.shape[0] - 1)  # a one-row stage: its only row
    table = stage_table(stage, decimals=options.decimals, highlight=row,
                        caption=caption(stage), label=f"tab:{stage.name}")
    equation = tuple(EquationLine(ln.lhs, _spelled(ln.rhs), ln.remark)
                     for ln in equation_lines(stage))
    lines = worked_lines(stage, row, options.decimals)
    base = StageFrame(stage=stage, title=title(stage), token=row, equation=equation,
                      lines=(), table=None)
    room = measure.BODY_HEIGHT - measure.title_overflow(base.title)
    lhs = max([measure.width(e.lhs) for e in equation]
              + [measure.width(w.lhs) for w in lines], default=0.0)
    top = sum(measure.equation_height(e.lhs, e.rhs, e.remark, lhs) for e in equation)
    chunks: list[list[WorkedLine]] = [[]]
    used = top
    for line in lines:
        h = measure.worked_height(line.lhs, (*line.shown, line.result), lhs)
        if chunks[-1] and used + h > room:
            chunks.append([])
            used = top
        chunks[-1].append(line)
        used += h
    slices = _column_slices(table)
    out = [replace(base, lines=tuple(c)) for c in chunks]
    table_h = measure.table_height(len(table.row_labels), bool(table.legend))
    if len(slices) == 1 and used + table_h <= room:
        out[-1] = replace(out[-1], table=table)
    else:
        for a, b in slices:
            part = _columns(table, a, b) if len(slices) > 1 else table
            out.append(replace(base, table=part, columns=(a, b) if len(slices) > 1 else None,
                               equation=equation if top + table_h <= room
                               else ()))
    out = [f for f in out if f.lines or f.table is not None] or out[:1]
    return [replace(f, part=k, parts=len(out)) for k, f in enumerate(out, 1)]


def worked_lines(stage: Stage, row: int, decimals: int) -> tuple[WorkedLine, ...]:
    """The worked lines of ``stage`` for row ``row``: each step's chain with repeated
    right-hand sides dropped; the last one is the result, the others the substitution.
    Products keep their factors on one line (``\\cdot\\nobreak``): TeX breaks a long
    line at its sums only."""
    out = []
    for step in worked_steps(stage, row, Style(decimals)).steps:
        pieces, previous = [], None
        for relation, rhs in chain(step):
            if rhs != previous:
                pieces.append(_breakable(f"{relation} {rhs}"))
            previous = rhs
        out.append(WorkedLine(node_latex(step.lhs), tuple(pieces[:-1]), pieces[-1]))
    return tuple(out)


#: Names in generated equations that a frame spells as the notes' symbols.
_SPELLING = ((r"\mathrm{eps}", r"\varepsilon"),)


def _spelled(latex: str) -> str:
    for name, symbol in _SPELLING:
        latex = latex.replace(name, symbol)
    return latex


def _breakable(latex: str) -> str:
    return _ALIGN_BREAK.sub(" ", latex).replace(r"\cdot ", r"\cdot\nobreak ")


#: Words in titles that are formulas: set as math, in the notes' notation.
_TITLE_MATH = (
    (re.compile(r"\s*sqrt\(ms \+ eps\)"), ""),
    (re.compile(r"\s*act\(g\) \u2299 h"), ""),
)


def title(stage: Stage) -> str:
    """The frame title in the reader's words: where the stage sits, what it computes,
    and its symbol (LaTeX): ``Layer 1, Head 1: Query $q$``."""
    from symformer.notation import notation

    text = caption(stage)
    for pattern, math in _TITLE_MATH:
        text = pattern.sub(math, text)
    return f"{reader_text(text)} ${notation(stage).latex}$"


_SUBSCRIPTED = re.compile(r"\b([A-Za-z])_([A-Za-z0-9]+)\b")


def reader_text(text: str) -> str:
    """Plain words as LaTeX, a name with a subscript (``W_O``) set as math."""
    from symformer.latex.escape import latex_text

    parts = _SUBSCRIPTED.split(text)
    out = []
    for k in range(0, len(parts), 3):
        out.append(latex_text(parts[k]))
        if k + 2 < len(parts):
            out.append(f"${parts[k + 1]}_{{{parts[k + 2]}}}$")
    return "".join(out)


def _column_slices(table: Table) -> list[tuple[int, int]]:
    """Column ranges of a table, each as wide as fits the frame (at least one column)."""
    widths = [measure.column_width(table.col_labels[j], [row[j].latex for row in table.cells])
              for j in range(len(table.col_labels))]
    labels = measure.label_columns_width([t for _, t in table.row_labels])
    slices, start, used = [], 0, labels
    for j, w in enumerate(widths):
        if j > start and used + w > measure.TEXT_WIDTH:
            slices.append((start, j))
            start, used = j, labels
        used += w
    slices.append((start, len(widths)))
    return slices


def _columns(table: Table, a: int, b: int) -> Table:
    return replace(table, col_labels=table.col_labels[a:b],
                   cells=tuple(row[a:b] for row in table.cells))


def _figures_after(stages: list[Stage], drawn: list[Figure]) -> dict[str, list[Figure]]:
    """Each figure under the chosen stage it draws: the stage whose file-name form is
    the figure's name or its longest prefix (``layer1-add_norm1-token1`` draws
    ``layer1.add_norm1``).  A figure of a stage not chosen is left out."""
    slugs = {slug(s.name): s.name for s in stages}
    out: dict[str, list[Figure]] = {}
    for figure in drawn:
        owners = [k for k in slugs if figure.name == k or figure.name.startswith(k + "-")]
        if owners:
            out.setdefault(slugs[max(owners, key=len)], []).append(figure)
    return out


def row_position(frame: StageFrame) -> int:
    """The position (from 0) of the followed row, as the table prints it."""
    return frame.token + first_position(frame.stage)
