"""The plan of a slide deck: well-filled frames whose overlays add and never remove.

The deck is a title frame, the block diagram of the example's architecture
(:mod:`symformer.figures.diagram`), then the stages of the derivation in order.  A stage that is
worked shows on its frame

1. its general equation (the operation's declared and proved index form, as in the
   exported document: :func:`symformer.equations.stage.equation_lines`) and the same
   formula with the chosen token's numbers substituted (the worked lines of
   :mod:`symformer.worked`, each recomputable from what it prints) -- the audience can
   predict the result;
2. one keystroke later, the results of those lines and the stage's table with the
   token's row highlighted (beside the working when it is narrow), the working still
   on the frame.  Lines with one operation each (``= 4 + 0.841``) have nothing to
   predict: their results come with them.

Of a run of alike lines (``q_0``, ``q_1``, ...: more than two) the first is worked and a
\\vdots stands for the others, whose results the table has.  Where the worked lines
leave out terms whose weight is exactly 0, the frame says so in the notes' words.
Nothing is shrunk to fit: a block of working too tall for one frame continues on the
next (the equation repeated at its top), and a table that does not fit under the
working gets the next frame (the working one keystroke back); a table too wide is never
split by columns: its headings are abbreviated, its columns set closer, its small entries
shown in units of a power of ten (:mod:`symformer.slides.fit`), a table too tall is split
by rows (:mod:`symformer.slides.measure` plans the room).

A stage whose general equation the deck has already worked (the second head, the second
layer: same operation, same equation) shows its table only, several to a frame where
they fit, under a sentence saying where it was worked; ``SlideOptions.full`` works every
stage and every line.  After the stage a figure draws (an attention map after each
head's weights, the positional encoding, a LayerNorm's input and output, next-token
probabilities) comes one frame with that figure.  A stage that only renames its input
(a block without ``W_O``: ``m = c``) gets no frame, as it gets no section in the export.
Nothing here knows a stage kind: the stage's operation and the shared builders say what
to show.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from symformer.analysis.inactive import at_stage
from symformer.engine import Derivation, Stage
from symformer.equations.stage import equation_lines
from symformer.figures import diagram
from symformer.figures.data import Figure, FigureOptions, figures
from symformer.figures.diagram import Diagram
from symformer.latex import decoder, head_flow
from symformer.latex.backward import is_backward
from symformer.latex.blocks import Table
from symformer.latex.document import caption, renames, select, slug
from symformer.latex.parameters import zero_terms_note
from symformer.latex.places import where as part_of
from symformer.latex.repeats import equation_key as _equation_key
from symformer.latex.tables import first_position, rounding_legend, stage_table
from symformer.notation import notation
from symformer.pipeline import Rendering
from symformer.slides import fit, layout, measure
from symformer.slides.decoding import decoding_parts
from symformer.worked.build import worked_steps
from symformer.worked.model import Style
from symformer.worked.render_latex import chain
from symformer.worked.render_latex import latex as node_latex

#: The most overlay steps a stage takes on a frame: equation and numbers, then results
#: and table.
STEPS = 2
#: The widest table set beside the working, as a share of the frame's width, and the
#: gap between them (em).
BESIDE = 0.45
GUTTER = 1.0
#: Tables are set narrower than the sum of their columns' estimates (measured: 0.88 of
#: it on the shipped decks; pdflatex reports a table wider than its room as overfull).
TABLE_FIT = 0.92
#: The width (em) of a table's heading set at its left.
HEADING = 8.0
#: A line break the worked-line printer puts in for the notes' ``align*``: the deck
#: lets TeX break its lines at operators instead, for the frame's width.
_ALIGN_BREAK = re.compile(r"\s*\\\\\s*&\\qquad\s*")


@dataclass(frozen=True)
class SlideOptions(Rendering):
    """What the deck shows: how it is printed (:class:`~symformer.pipeline.Rendering`:
    the token followed, decimals, ``full``: every stage worked, default: a stage whose
    equation the deck has worked already shows its table only), a stage filter (globs)."""

    stages: tuple[str, ...] | None = None
    #: With a ``[loss]`` in the example: a Backward section after the forward pass (the
    #: loss worked, then every gradient's table; the notes' Backward part works them).
    backward: bool = True


@dataclass(frozen=True)
class EquationLine:
    """One line of the general equation: ``lhs = rhs`` and a remark in words;
    ``compact``: a matrix in it has its columns set closer (:mod:`fit`'s
    :data:`~fit.COMPACT_SEP`)."""

    lhs: str
    rhs: str
    remark: str = ""
    compact: bool = False


def display(lhs: str, rhs: str, remark: str = "") -> EquationLine:
    """A general equation's line as a frame sets it: a remark in words at its end set
    as text, after the maths (TeX breaks text, never words in maths), and a bracket
    around a sum too wide for the frame sized as ``\\Bigl(``...``\\Bigr)``
    (:func:`_opened`), so TeX may break the line at the sum's operators (never inside
    ``\\left``...``\\right``)."""
    said = _REMARK.search(rhs)
    if said and not remark:  # words in maths never break: set as the line's remark
        rhs, remark = rhs[:said.start()], said["words"]
    room = measure.TEXT_WIDTH - measure.width(lhs) - measure.HANG
    if measure.widest_unbreakable(rhs) * measure.MARGIN > room:
        rhs = _opened(rhs)
    return EquationLine(lhs, rhs, remark)


#: A remark in words at the end of an equation's right-hand side
#: (``\quad \text{(rowsum: a row's sum, ...)}``), nothing but words in it.
_REMARK = re.compile(r"\s*\\quad\s*\\text\{\((?P<words>[^{}$\\]*)\)\}\s*$")


@dataclass(frozen=True)
class WorkedLine:
    """One worked line: ``lhs`` then the substituted ``shown`` pieces (each with its
    relation, ``= x_0 w_0 + ...``), revealed together, then the ``result``
    (``\\approx 0.752``), revealed after."""

    lhs: str
    shown: tuple[str, ...]
    result: str


@dataclass(frozen=True)
class Item:
    """One stage's share of a frame: its equation, some of its working, maybe its table
    (set as :func:`symformer.slides.fit.fitted` makes it fit: ``key``, LaTeX under it,
    says what its abbreviated headings and the unit of its entries are; ``compact``: its
    columns set closer), and ``note``, a sentence said before its working (LaTeX: terms
    with a weight of exactly 0 left out)."""

    stage: Stage
    token: int  # the row followed in this stage
    equation: tuple[EquationLine, ...]
    lines: tuple[WorkedLine, ...]
    table: Table | None
    note: str = ""
    #: the rows (0-based, end excluded) of a table too tall for one frame
    row_range: tuple[int, int] | None = None
    beside: bool = False  # the table right of the working, not under it
    key: str = ""
    compact: bool = False

    @property
    def working_width(self) -> float:
        """The width in em of the working's column: the frame's, or what the table
        beside it leaves."""
        if self.beside and self.table is not None:
            return measure.TEXT_WIDTH - table_width(self.table, self.compact) - GUTTER
        return measure.TEXT_WIDTH

    @property
    def heading(self) -> str:
        """The stage's title and symbol, without where it sits (LaTeX): ``Query $q$``."""
        return heading(self.stage)


#: An operation in substituted numbers: what the audience would work out to predict.
_OPERATION = re.compile(r"(?<![{(=])\s[+-]\s|\\cdot|\\frac|\^|\\sqrt|\\exp|\\max|\\tanh")


def plain(item: Item) -> bool:
    """Whether every worked line of the item has at most one operation in its numbers
    (``= 4 + 0.841``): nothing worth predicting, so its result comes with them."""
    return all(len(_OPERATION.findall(w.shown[-1])) <= 1 for w in item.lines if w.shown)


@dataclass(frozen=True)
class StageFrame:
    """A frame of one worked stage, or of the tables of several stages worked before.

    ``items`` is one worked stage's share, or (``row``) tables of stages worked before,
    set side by side where they fit; ``note`` is a sentence under the title (LaTeX);
    ``part``/``parts`` count the frames a stage too big for one frame takes."""

    title: str
    items: tuple[Item, ...]
    note: str = ""
    said: str = ""  # the note that holds for the frame, shown or not
    row: bool = False
    part: int = 1
    parts: int = 1
    footer: str = ""  # what the frame is about, for the footer (default: the row's token)

    @property
    def stage(self) -> Stage:
        """The frame's first stage."""
        return self.items[0].stage

    @property
    def token(self) -> int:
        """The row followed in the frame's first stage."""
        return self.items[0].token

    def steps(self) -> list[tuple[int, int, int]]:
        """Per item, the overlays at which its substituted numbers, its results and its
        table appear (0: not on this frame).  The equation and the numbers come at once;
        the results and the table one keystroke later, so the audience can predict them
        (at once when the lines are :func:`plain`).  A table alone is shown at once."""
        out = []
        for item in self.items:
            numbers = 1 if any(w.shown for w in item.lines) else 0
            results = (2 if numbers and not plain(item) else 1) if item.lines else 0
            table = (results or 1) if item.table is not None else 0
            out.append((numbers, results, table))
        return out

    @property
    def pages(self) -> int:
        """Overlay steps of the frame (pages in the PDF)."""
        return max(1, *(max(s) for s in self.steps()))


@dataclass(frozen=True)
class FigureFrame:
    """One figure on a frame of its own, titled like the stage it draws."""

    figure: Figure
    title: str = ""  # LaTeX; empty: the figure's own title, up to its first colon


@dataclass(frozen=True)
class SectionFrame:
    """A frame that opens a part of the deck: its title and a sentence (LaTeX)."""

    title: str
    text: str


@dataclass(frozen=True)
class DiagramFrame:
    """The block diagram of the example's architecture (or of one side of an
    encoder-decoder, ``diagram.extra["part"]``) on a frame of its own."""

    diagram: Diagram


@dataclass(frozen=True)
class HeadFlowFrame:
    """One attention head's data flow (:mod:`symformer.latex.head_flow`), before the
    first head's frames: ``tikz`` and ``caption`` (LaTeX)."""

    title: str
    tikz: str
    caption: str


@dataclass(frozen=True)
class WeightsFrame:
    """The weights a stage is the first to use, as matrices (the notes' "this
    example's weights"), on a frame before the stage's: ``lines`` of matrices, LaTeX."""

    title: str
    text: str
    lines: tuple[str, ...]


Frame = StageFrame | FigureFrame | DiagramFrame | SectionFrame | WeightsFrame | HeadFlowFrame

#: The most rows and (estimated) characters a matrix of weights may have on a frame;
#: a larger one (an imported vocabulary's table) is left to the notes, and said so.
WEIGHT_ROWS = 7
WEIGHT_LINE = 60
WEIGHT_LINES = 2


def weights_frames(stage: Stage, group: list[Stage], seen: set) -> list[WeightsFrame]:
    """The frames of the weights first used by ``stage`` and the stages of its ``group``
    after it (nothing when there are none new; those of a later stage wait for it when
    it has none yet), each as a matrix, as many side by side as fit, at most
    :data:`WEIGHT_LINES` display lines a frame; one too large for a frame is named
    instead (the notes print it)."""
    from symformer.latex.blocks import Matrices
    from symformer.latex.parameters import fits_line, matrix_lines, parameter_blocks
    from symformer.latex.render import to_latex

    first = parameter_blocks(stage, seen)
    if not first:
        return []
    found = [first] + [b for s in group[1:] if (b := parameter_blocks(s, seen))]
    every = [m for _, matrices in found for line in matrices.lines for m in line]
    shown = [m for m in every if len(m.rows) <= WEIGHT_ROWS and fits_line(m, WEIGHT_LINE)]
    left = [m.lhs for m in every if m not in shown]
    prose = first[0] if len(found) == 1 else None
    text = to_latex(prose).strip() if prose is not None else "This example\u2019s weights:"
    if left:
        text += (" (" + ", ".join(f"${lhs}$" for lhs in left)
                 + (" is" if len(left) == 1 else " are") + " printed in the notes)")
    lines = matrix_lines(shown, WEIGHT_LINE) if shown else []
    pages = [lines[k:k + WEIGHT_LINES] for k in range(0, len(lines), WEIGHT_LINES)] or [[]]
    return [WeightsFrame(title(stage), text if k == 0 else "This example\u2019s weights, "
                         "continued:", tuple(to_latex(Matrices(tuple(page))).split("\n"))
                         if page else ()) for k, page in enumerate(pages)]


def page_count(frames: list[Frame]) -> int:
    """Pages of the deck: the title page and every frame's overlay steps."""
    return 1 + sum(f.pages if isinstance(f, StageFrame) else 1 for f in frames)


def frames(g: Derivation, options: SlideOptions,
           progress: Callable[[int, int, str], None] | None = None) -> list[Frame]:
    """The deck's frames, in the order of the stages; ``progress(k, total, name)`` is
    called before stage ``k`` of ``total`` is planned."""
    names = {s.name for s in select(g, options.stages)}
    chosen = [s for s in g if s.name in names and not renames(s)]  # in the block's order
    drawn = figures(g, FigureOptions(token=options.token, decimals=options.decimals))
    after = _figures_after(chosen, drawn)
    worked: dict[tuple, Stage] = {}  # each equation worked so far -> its stage
    # the architecture first, as the notes open with it
    whole = diagram.plan(g.example, g, g.causal)
    out: list[Frame] = [DiagramFrame(part) for part in
                        diagram.parts(whole, diagram.SLIDES, diagram.SLIDES_LAYOUT)]
    seen: set = set()  # the weights shown so far
    flow = head_flow.first_head_output(g)
    for k, stage in enumerate(chosen, start=1):
        if progress:
            progress(k, len(chosen), stage.name)
        if flow is not None and head_flow.in_head(stage, flow):  # before its first stage
            out.append(HeadFlowFrame(reader_text(", ".join(part_of(flow))) + ": data flow",
                                     head_flow.draw(g, flow, SLIDE_FLOW_FONT, 2.0,
                                                    spread=1.3),
                                     head_flow.caption(g, flow, forms=False)))
            flow = None
        # the weights of this stage and of the next ones of the same head or sub-layer,
        # on one frame before them
        part = title(stage).split(":")[0]  # "Layer 1, Head 2", "Layer 1, Feed-forward"
        group = list(itertools.takewhile(lambda s, part=part: title(s).split(":")[0]
                                         == part, chosen[k - 1:]))
        out.extend(weights_frames(stage, group, seen))
        key = _equation_key(stage)
        first = worked.setdefault(key, stage)
        if first is stage or options.full:
            planned = stage_frames(stage, options)
        else:
            planned = table_frames(stage, first, options)
        for frame in planned:
            _add(out, frame)
        for figure in after.get(stage.name, ()):
            out.append(FigureFrame(figure, title(stage)))
    if options.backward and g.example.loss is not None:
        out.extend(backward_frames(g, options))
    for head, note, stage, table, about in decoding_parts(g, options.decimals):  # [decoding]
        out += [SectionFrame(head, note)] if table is None else [
            replace(f, title=head, footer=about)
            for f in _table_only_frames(stage, 0, table, note)]
    return out


#: The font of the head's data-flow figure on a slide.
SLIDE_FLOW_FONT = r"\small"
#: What the Backward section's first frame says.
BACKWARD_TEXT = (
    "The loss $L$ of the forward pass, then its gradient at every step, from the output "
    "back to the input (the forward order reversed), each by its operation's backward "
    "rule (the chain rule): in matrix form, entry by entry, worked for the token, then "
    "its table, the token's row highlighted; a step computed by the same rules as one "
    "worked before shows its table.")
#: A gradient table's columns (``\partial L/\partial u_{0}``) are wider than the
#: estimate of them: their slices are planned this much wider.
GRADIENT_WIDTH = 1.3
#: The layout model's heights of a gradient's frame are taken this much taller: its
#: lines (fractions, sized brackets) are taller than the model's estimate of them.
GRADIENT_HEIGHT = 1.05
#: A table's key (:mod:`symformer.slides.fit`, its symbols with scripts) is wider than
#: the estimate of its text: planned this much wider.
KEY_WIDTH = 1.6
#: A weight's gradient is shown as matrices of at most this many rows each.
MATRIX_ROWS = 4
#: The layout model's height of a frame with such a matrix is taken this much taller.
MATRIX_SLACK = 1.1


def backward_frames(g: Derivation, options: SlideOptions) -> list[Frame]:
    """The Backward section, as the forward one: a frame saying what it is, the loss (a
    scalar: its equation and its worked line), then each gradient in the notes' order
    (:func:`symformer.latex.backward.ordered`): a step worked first has its display
    equations (matrix form, then entry by entry), its substituted numbers in overlays
    and its table; a step computed by the same rules as one worked before its table."""
    from symformer.latex import backward as notes

    full = notes.with_backward_pass(g)
    names = {s.name for s in select(full, options.stages)}
    stages = notes.ordered([s for s in full if is_backward(s) and s.name in names
                            and (notes.taught(s) or s.op.of_weight)
                            and not notes.no_gradient(s)])
    if not stages:
        return []
    out: list[Frame] = [SectionFrame("Backward pass", BACKWARD_TEXT)]
    repeats = notes.preferred(stages)
    for stage in stages:
        first = repeats.first(stage)
        if first is stage or options.full:
            planned = _worked_gradient_frames(stage, options)
        else:
            where_first = ", ".join(part_of(first))
            note = reader_text(f"Computed by the same rules as in {where_first}, with its "
                               "own numbers:" if part_of(first) != part_of(stage) else
                               "Computed by the same rules as above, with its own numbers:")
            planned = _gradient_frames(stage, options, note)
        for frame in planned:
            _add(out, frame)
    return out


def _worked_gradient_frames(stage: Stage, options: SlideOptions) -> list[StageFrame]:
    """A gradient worked as the forward stages are (:func:`stage_frames`): its matrix
    form and index form as display equations, the token's lines at the significant
    digits with which they land on the table, then the table; the loss, a scalar, has
    no table; a gradient exactly 0 says why (a dead FFN).  A weight's gradient not exactly 0
    is worked at one entry (a sum over the tokens), before its matrices."""
    from symformer.latex import backward as notes
    from symformer.latex import matrix_form

    row = notes.worked_row(stage, options.token, None)
    worked, values, _ = notes.worked_values(stage, row, options.decimals, False,
                                            None if options.full else notes.ALIKE)
    forms = tuple(display(lhs, rhs) for lhs, rhs in matrix_form.backward_lines(stage))
    equation = forms + tuple(display(ln.lhs, ln.rhs, ln.remark)
                             for ln in equation_lines(stage))
    said = inactive_note(stage)
    entry = stage.op.of_weight and worked is not None and not said
    lines = () if worked is None or (stage.op.of_weight and not entry) else worked_lines(
        stage, row, max(options.decimals, values.digits + 2), values)
    lines = lines[:1] if stage.op.of_weight else lines  # one entry of a weight's
    scalar = stage.shape == (1, 1) and not stage.op.of_weight
    matrices: tuple = ()
    if stage.op.of_weight and notes.as_matrix(stage):  # matrices, as the weight is shown
        index = equation[len(forms):]
        matrices = matrix_lines(stage, values)
        if not lines:
            return _matrix_frames(stage, row, forms or index[:1], matrices, said)
        # else its equations and the entry worked, then the matrices: one line of them
        # (a bias, a norm's scale) the working's last line, revealed with its result
        if len(matrices) == 1 and not matrices[0].compact:
            lines = (*lines, WorkedLine(matrices[0].lhs, (), "= " + matrices[0].rhs))
            matrices = ()
    if scalar and lines and sum(measure.width(p) for p in lines[-1].shown) \
            > 2 * measure.TEXT_WIDTH:  # a long sum (every output entry): its value
        lines = (replace(lines[-1], shown=()),)
    table = None if scalar or stage.op.of_weight and notes.as_matrix(stage) else \
        _gradient_table(stage, row, options, values)
    space = room(title(stage)) / GRADIENT_HEIGHT
    index = equation[len(forms):]
    # a step read by many (the input row): its matrix form and the sum of its paths
    equation = _shortest(stage, equation, forms, index, said)
    base = _equation_frame(stage, equation, said)
    def alone(line: WorkedLine, under: StageFrame) -> float:
        return height(replace(under, items=(replace(under.items[0], lines=(line,)),)))
    # a line too tall for a frame of its own (under the shortest equation): its numbers
    # only, else its result only
    short = _equation_frame(stage, (forms or index)[:1], said)
    lines = tuple(next((x for x in (line, replace(line, shown=line.shown[-1:]))
                        if alone(x, short) <= space), replace(line, shown=()))
                  for line in lines)
    tallest = max((alone(line, base) for line in lines), default=height(base))
    if tallest <= space:
        out = stage_frames(stage, options, parts=(equation, lines, table, said),
                           slack=GRADIENT_HEIGHT)
    else:  # the equations leave no room for a line: a frame of their own, the working
        # after (under the shortest of the equations: its matrix form, or its index
        # form's first)
        out = [base, *stage_frames(stage, options, parts=((forms or index)[:1], lines,
                                                          table, ""), slack=GRADIENT_HEIGHT)]
    out = [*out, *_matrix_frames(stage, row, (), matrices, "")]
    return [replace(f, part=k, parts=len(out)) for k, f in enumerate(out, 1)]


def _equation_frame(stage: Stage, equation: tuple, note: str) -> StageFrame:
    """A frame of a gradient's display equations (and ``note``) only."""
    row = min(1, stage.shape[0] - 1)
    return StageFrame(title=title(stage), items=(Item(
        stage=stage, token=row, equation=equation, lines=(), table=None, note=note),))


def _shortest(stage: Stage, equation: tuple, forms: tuple, index: tuple, note: str
              ) -> tuple:
    """A gradient's display equations as many as fit a frame: all of them, else its
    matrix form and its index form's first line, its matrix form, or that line."""
    space = room(title(stage)) / GRADIENT_HEIGHT
    return next((e for e in (equation, (*forms, *index[:1]), forms, index[:1])
                 if e and height(_equation_frame(stage, e, note)) <= space),
                forms or index[:1])


def matrix_lines(stage: Stage, values=None) -> tuple[EquationLine, ...]:
    """A weight's gradient as matrices, as the weight itself is shown (no column
    headings to widen it): ``∂L/∂W = [bmatrix]`` (``10^{-6} [bmatrix]`` when every
    entry is small: :func:`fit.scaled_rows`), its rows :data:`MATRIX_ROWS` at a time
    (``rows 4–7``) when it has more; ``∂L/∂W = 0`` when it is exactly 0.  A matrix too
    wide for the frame is made narrower as a table is, never split by columns nor
    rounded again: in another unit (:func:`fit.scalings`), then its columns closer."""
    from symformer.latex import backward as notes
    from symformer.worked.significant import DEFAULT_DIGITS, SignificantValues

    block = notes.gradient_matrix(stage, values or SignificantValues(DEFAULT_DIGITS))
    if all(t == "0" for row in block.rows for t in row):  # the note says why
        return (EquationLine(block.lhs, r"\mathbf{0}"),)
    # entries all small: a power of ten taken out, as a textbook writes it (exact: the
    # decimal point moved, every printed digit kept)
    rows = [list(row) for row in block.rows]
    first = fit.scaled_rows(rows) or (None, rows)
    units = [first, *(u for u in fit.scalings(rows) if u[0] != first[0])]
    forms = [_matrix_pieces(block.lhs, *unit, compact) for compact in (False, True)
             for unit in units]
    return next((f for f in forms if all(matrix_fits(line) for line in f)),
                min(forms[len(units):], key=lambda f: max(map(_line_width, f))))


def _matrix_pieces(lhs: str, exponent: int | None, table: list[list[str]],
                   compact: bool) -> tuple[EquationLine, ...]:
    """``lhs = 10^{exponent} [table]`` (no factor when ``exponent`` is None), its rows
    :data:`MATRIX_ROWS` a line."""
    factor = "" if exponent is None else rf"10^{{{exponent}}} "
    out = []
    for a in range(0, len(table), MATRIX_ROWS):
        rows = table[a:a + MATRIX_ROWS]
        where = "" if len(table) <= MATRIX_ROWS else \
            rf"\quad \text{{(rows {a}\textendash{a + len(rows) - 1} of {len(table)})}}"
        body = r" \\ ".join(" & ".join(row) for row in rows)
        out.append(EquationLine(lhs, rf"{factor}\begin{{bmatrix}} {body} "
                                     rf"\end{{bmatrix}}{where}", compact=compact))
    return tuple(out)


def matrix_width(lhs: str, rhs: str, compact: bool = False) -> float:
    """The width (pt) of a line ``lhs rhs`` (``rhs`` with its relation) as TeX sets it
    (the layout model's; a ``compact`` matrix's columns closer)."""
    closer = 0.0
    if compact:
        columns = rhs.split(r"\\")[0].count("&") + 1
        closer = 2 * (layout.ARRAYCOLSEP - fit.COMPACT_SEP) * columns
    return layout.box(lhs).w + layout.box(rhs).w - closer


def matrix_fits(line: EquationLine) -> bool:
    """Whether a line with a matrix fits the frame's width."""
    return _line_width(line) <= layout.TEXT_WIDTH


def _line_width(line: EquationLine) -> float:
    return matrix_width(line.lhs, "{}= " + line.rhs, line.compact)


#: A worked line's piece that is a matrix (a row of a vector step).
_MATRIX = re.compile(r"^(?P<relation>[^\\]*)\\begin\{bmatrix\}(?P<body>.*)\\end\{bmatrix\}$",
                     re.S)


def narrower(piece: str, lhs: str) -> str:
    """A worked line's matrix (``= [1.314 \\times 10^{-6} & 0 & ...]``) too wide for the
    frame in the unit that prints it narrowest (``= 10^{-6} [1.314 & 0 & ...]``), as
    :func:`matrix_lines` sets a weight's gradient; any other piece as it is."""
    found = _MATRIX.match(piece)
    if found is None or matrix_width(lhs, piece) * measure.MARGIN <= layout.TEXT_WIDTH:
        return piece
    rows = [[c.strip() for c in row.split("&")] for row in found["body"].split(r"\\")]
    first = fit.scaled_rows(rows)
    units = [u for u in (first, *fit.scalings(rows)) if u is not None]
    forms = [f"{found['relation']}10^{{{e}}} \\begin{{bmatrix}} "
             + r" \\ ".join(" & ".join(row) for row in table) + r" \end{bmatrix}"
             for e, table in units]
    return next((f for f in forms if matrix_width(lhs, f) * measure.MARGIN
                 <= layout.TEXT_WIDTH), min(forms, key=lambda f: matrix_width(lhs, f),
                                                  default=piece))


def _matrix_frames(stage: Stage, row: int, equation: tuple, value: tuple, note: str,
                   said: str = "") -> list[StageFrame]:
    """A weight's gradient as matrices (:func:`matrix_lines`), one part a frame, the
    first under ``equation`` when it fits; ``note`` under the first (why it is 0), or,
    with ``said`` (a step computed as one worked before), over it."""
    out = []
    for k, line in enumerate(value):
        shown = equation if k == 0 else ()
        first = note if k == 0 else ""
        # a repeat's sentence (its colon) before the matrix, a reason (exactly 0) after
        frame = StageFrame(title=title(stage), items=(Item(
            stage=stage, token=row, equation=(*shown, line), lines=(), table=None,
            note="" if said else first),), note=first if said else "", said=said or note)
        if shown and height(frame) * MATRIX_SLACK > room(frame.title):
            frame = replace(frame, items=(replace(frame.items[0], equation=(line,)),))
        out.append(frame)
    return [replace(f, part=k, parts=len(out)) for k, f in enumerate(out, 1)]


def inactive_note(stage: Stage) -> str:
    """What the notes say is inactive at ``stage`` (a ReLU clipping every unit, a
    weight's gradient exactly 0 and why), as a frame's sentence (LaTeX), or ``""``."""
    return " ".join(reader_text(p) if isinstance(p, str) else f"${p.latex}$"
                    for pieces in at_stage(stage.derivation, stage) for p in pieces)


def _gradient_table(stage: Stage, row: int, options: SlideOptions, values=None) -> Table:
    """A gradient's table at significant digits (as the notes print it); a weight's has
    no highlighted row (its rows are the weight's, not token positions); fewer digits
    when the default's would not fit the frame's width in any of its narrower forms
    (:func:`fit.fitted`; never split by columns).  Its legend says the rounding only
    when it is not the default's, which the footer says (:func:`significant_digits`)."""
    from symformer.worked.significant import DEFAULT_DIGITS, SignificantValues

    for digits in (DEFAULT_DIGITS, 3, 2):
        table = stage_table(stage, decimals=options.decimals, caption=caption(stage),
                            label=f"tab:{stage.name}",
                            significant=values if values is not None and
                            digits == DEFAULT_DIGITS else SignificantValues(digits),
                            highlight=None if stage.op.of_weight else row)
        if _fits_width(fit.fitted(table, _width_fits(GRADIENT_WIDTH)), GRADIENT_WIDTH):
            break
    return replace(table, legend=tuple(t for t in table.legend if significant_digits(t)
                                       != DEFAULT_DIGITS))


#: A table's legend saying its rounding at significant digits (a gradient's).
_SIGNIFICANT = re.compile(r"^Values correctly rounded to (\d+) significant digits\.$")


def significant_digits(legend: str) -> int | None:
    """The significant digits a legend's sentence says a table is rounded to, or None
    (a sentence about something else)."""
    found = _SIGNIFICANT.match(legend)
    return int(found[1]) if found else None


def _gradient_frames(stage: Stage, options: SlideOptions, note: str) -> list[StageFrame]:
    """A gradient's table under ``note``, titled by where it sits (a weight's as
    matrices, :func:`matrix_lines`)."""
    from symformer.latex import backward as notes

    row = min(options.token, stage.shape[0] - 1)
    if stage.op.of_weight and notes.as_matrix(stage):
        return _matrix_frames(stage, row, (), matrix_lines(stage), note, said=note)
    table = _gradient_table(stage, row, options)
    return _table_only_frames(stage, row, table, note, GRADIENT_WIDTH)


def _table_only_frames(stage: Stage, row: int, table: Table, note: str,
                       width: float = 1.0) -> list[StageFrame]:
    """``table`` alone under ``note``, made narrow enough when too wide (its columns
    planned ``width`` times wider: :func:`_fitted_item`), its rows split over frames
    when too tall, each titled by where it sits."""
    item = _fitted_item(Item(stage=stage, token=row, equation=(), lines=(), table=table),
                        width)
    frame = StageFrame(title=_row_title((item,)), items=(item,), note=note, said=note,
                       row=True)
    out = _row_parts(frame)
    return [replace(f, part=k, parts=len(out)) for k, f in enumerate(out, 1)]


def _fitted_item(item: Item, width: float = 1.0) -> Item:
    """``item`` with its table as wide as the frame allows (:func:`fit.fitted`, its
    columns planned ``width`` times wider)."""
    form = fit.fitted(item.table, _width_fits(width))
    return replace(item, table=form.table, key=form.key, compact=form.compact)


def _width_fits(scale: float) -> Callable[[fit.Fitted], bool]:
    return lambda form: _fits_width(form, scale)


def _fits_width(form: fit.Fitted, scale: float = 1.0) -> bool:
    """Whether a table fits the frame's width, its columns planned ``scale`` times
    wider (a correction for wide headings: none once they are cut to their index)."""
    return table_width(form.table, form.compact, 1.0 if form.short else scale) \
        <= measure.TEXT_WIDTH


def _row_parts(frame: StageFrame) -> list[StageFrame]:
    """A frame of one table, its rows split over frames where it is too tall for one
    (each part as many rows as fit; the footer says which)."""
    if fits(frame):
        return [frame]
    item = frame.items[0]
    table = item.table
    n = len(table.cells)
    out, start = [], 0
    while start < n:
        end = start + 1
        while end < n and fits(replace(frame, items=(_row_slice(item, start, end + 1),))):
            end += 1
        out.append(replace(frame, items=(_row_slice(item, start, end),)))
        start = end
    return out


def _row_slice(item: Item, a: int, b: int) -> Item:
    table = item.table
    highlight = table.highlight_row
    part = replace(table, row_labels=table.row_labels[a:b], cells=table.cells[a:b],
                   row_math=table.row_math[a:b] if table.row_math else None,
                   highlight_row=highlight - a if highlight is not None
                   and a <= highlight < b else None)
    return replace(item, table=part, row_range=(a, b))


def _add(out: list[Frame], frame: StageFrame) -> None:
    """Put ``frame`` at the end of the deck; a frame of tables of stages worked before
    goes on the last frame when that is one too, with the same sentence (the heads
    after the first of one layer), and the two fit together; so does a frame of a
    weight's gradient computed as one before, as a matrix (a norm's scale and shift).
    The sentence is said only when the frame of tables before (maybe before a figure)
    does not say the same.  A worked stage keeps its frames: with its table, two never
    fit one frame."""
    previous = next((f for f in reversed(out) if isinstance(f, StageFrame)), None)
    if frame.row and previous is not None and previous.row and previous.said == frame.said:
        frame = replace(frame, note="")
    if _matrices_only(frame) and _matrices_only(previous) and previous.said == frame.said:
        frame = replace(frame, note="")
    last = out[-1] if out else None
    if (isinstance(last, StageFrame) and last.said == frame.said and last.parts == 1
            and frame.parts == 1 and (frame.row and last.row or _matrices_only(frame)
                                      and _matrices_only(last))):
        items = last.items + frame.items
        merged = replace(last, items=items, title=_row_title(items))
        if fits(merged):
            out[-1] = merged
            return
    out.append(frame)


def _matrices_only(frame: Frame | None) -> bool:
    """Whether ``frame`` shows the gradient of a weight computed as one worked before,
    as a matrix (under its sentence): such frames go together as frames of tables do."""
    return isinstance(frame, StageFrame) and not frame.row and bool(frame.said) \
        and frame.said.startswith("Computed by") \
        and all(not i.lines and i.table is None for i in frame.items)


def _row_title(items: tuple[Item, ...]) -> str:
    """A frame of tables is titled by the part its stages share (``Layer 1``)."""
    return reader_text(", ".join(_common_part(items))) or title(items[0].stage)


def _common_part(items: tuple[Item, ...]) -> tuple[str, ...]:
    parts = [part_of(i.stage) for i in items]
    common = parts[0]
    for p in parts[1:]:
        k = 0
        while k < min(len(common), len(p)) and common[k] == p[k]:
            k += 1
        common = common[:k]
    return common


def row_heading(frame: StageFrame, item: Item) -> str:
    """A table's heading on a frame of tables: its title and symbol, after where it
    sits beyond the frame's title (``Head 3: Query $q$``) when the frame spans parts."""
    return _heading_words(item, frame.items)


def _heading_words(item: Item, items: tuple[Item, ...]) -> str:
    rest = part_of(item.stage)[len(_common_part(items)):]
    return (reader_text(", ".join(rest)) + ": " if rest else "") + item.heading


def fits(frame: StageFrame) -> bool:
    """Whether the frame's content fits under its title (the layout model's height,
    :func:`height`, against the room pdflatex gives)."""
    return height(frame) <= room(frame.title)


def room(title: str) -> float:
    """The height in pt under a frame title."""
    return measure.ROOM - measure.title_overflow(title)


class Column:
    """The height of a vertical list as TeX stacks it: paragraphs (their lines joined by
    the baseline skip, each after ``\\parskip``) and skips; ``depth``: the last line's,
    which the next paragraph's first line is spaced from (the top of a frame's body
    counts as a line of depth 0: measured, its first line is spaced as any other)."""

    def __init__(self) -> None:
        self.total = 0.0
        self.depth: float | None = 0.0

    def paragraph(self, lines: tuple, baseline: float | None = None) -> None:

        previous = layout.BASELINE
        if baseline is not None:
            layout.BASELINE = baseline
        try:
            extra, self.depth = layout.stacked(lines, self.depth)
        finally:
            layout.BASELINE = previous
        self.total += layout.PARSKIP + extra

    def skip(self, pt: float) -> None:
        self.total += pt


def height(frame: StageFrame) -> float:
    """The height in pt of a frame's body, as pdflatex sets it (the layout model)."""
    column = Column()
    if frame.note:
        column.paragraph(measure.text_lines(frame.note))
        column.skip(measure.SMALLSKIP)
    if frame.row:
        from symformer.slides.layout import Line

        for row in rows(frame.items):
            if heading_beside(row):  # two top-aligned minipages: the line hangs down
                (item,), (w,) = row, row_widths(row)
                words = measure.text_lines(row_heading(frame, item), HEADING)
                heading = 8.5 + (len(words) - 1) * measure.LINE + 2.5
                column.paragraph((Line(0.0, max(heading, _table_block(item.table, w,
                                                                      item.key))),))
            else:  # minipages aligned on their headings' first lines
                depths = []
                for item, w in zip(row, row_widths(row)):
                    words = measure.text_lines(row_heading(frame, item), w)
                    depths.append((len(words) - 1) * measure.LINE + 2.5 + measure.SMALLSKIP
                                  + 1.0 + _table_block(item.table, w, item.key))
                column.paragraph((Line(8.5, max(depths)),))
            column.skip(measure.MEDSKIP)
        return column.total
    lhs = _lhs_pt(frame.items)
    for k, item in enumerate(frame.items):
        if k:
            column.skip(measure.MEDSKIP)
        _stack_item(column, item, lhs)
    return column.total


def _stack_item(column: Column, item: Item, lhs: float) -> None:
    """One item's equation, note, working and table, as :func:`beamer._item` sets them."""
    for e in item.equation:
        column.paragraph(measure.equation_lines(e.lhs, e.rhs, e.remark, lhs))
    if item.note:
        column.skip(measure.SMALLSKIP)
        column.paragraph(measure.text_lines(item.note))
    elif item.equation and item.lines:
        column.skip(measure.SMALLSKIP)
    if item.beside and item.table is not None and item.lines:
        inner = Column()
        for w in item.lines:
            inner.paragraph(_worked(w, lhs, item.working_width))
        table = _table_height(item.table, key=item.key)
        column.paragraph((_line(inner.total - measure_parskip(), inner.depth or 0.0,
                                table),))
        return
    for w in item.lines:
        column.paragraph(_worked(w, lhs, item.working_width))
    if item.table is not None:
        column.skip(measure.MEDSKIP)
        column.total += _table_height(item.table, key=item.key)
        column.depth = TABLE_DEPTH


def measure_parskip() -> float:
    return layout.PARSKIP


def _line(working: float, depth: float, table: float):
    """The line holding the working's minipage (its first line on the baseline) and the
    table's beside it (hanging from the top)."""
    first = min(working, 14.0)
    return layout.Line(first, max(working - first, table - first))


def _worked(w: WorkedLine, lhs: float, room: float) -> tuple:
    return measure.worked_lines(w.lhs, (*w.shown, w.result), lhs, room)


#: The depth (pt) a table's last line (its legend) leaves for what follows.
TABLE_DEPTH = 3.0


def _lhs_pt(items: tuple[Item, ...]) -> float:
    """The width (pt) of the frame's left-hand side column (``\\symlhs``)."""
    return max([measure.lhs_width(e.lhs) for i in items for e in i.equation]
               + [measure.lhs_width(w.lhs) for i in items for w in i.lines], default=0.0)


def _lhs_width(items: tuple[Item, ...]) -> float:
    return max([measure.width(e.lhs) for i in items for e in i.equation]
               + [measure.width(w.lhs) for i in items for w in i.lines], default=0.0)


def _table_block(table: Table, room: float, key: str = "") -> float:
    """The height in pt of a table and its legend in a minipage ``room`` em wide (no
    paragraph skip there): the ``tabular``, a small skip, the legend's lines (and
    ``key``'s, :class:`Item`)."""
    total = measure.tabular_height(tuple(table.col_labels), _table_rows(table))
    if table.legend or key:
        n = _legend_lines(table, key, room)
        total += measure.SMALLSKIP + 1.0 + 9.5 + (n - 1) * measure.TABLE_BASELINE
    return total


def _table_rows(table: Table) -> list[tuple[str, ...]]:
    math = table.row_math or ("",) * len(table.cells)
    return [(m or "", *(c.latex for c in cells)) for m, cells in zip(math, table.cells)]


def _table_height(table: Table, room: float = measure.TEXT_WIDTH, key: str = "") -> float:
    """The height in pt of a table paragraph and its legend (:func:`beamer._table`):
    the ``tabular`` (centred on the axis, so its line is spaced by ``\\lineskip``
    from the line above), a small skip, the legend's lines (and ``key``'s) at the
    tables' baseline skip, in a column ``room`` em wide."""
    total = measure_parskip() + 1.0 + measure.tabular_height(tuple(table.col_labels),
                                                            _table_rows(table))
    if table.legend or key:
        n = _legend_lines(table, key, room)
        total += measure.SMALLSKIP + measure_parskip() + 1.0 + 9.5 \
            + (n - 1) * measure.TABLE_BASELINE
    return total


def legend(table: Table) -> str:
    """A table's legend as one paragraph."""
    return " ".join(table.legend)


def _legend_lines(table: Table, key: str, room: float) -> int:
    """The lines of a table's legend and, on lines of its own, its ``key``
    (:class:`Item`), in a column ``room`` em wide; a key's scripted symbols take a
    line's height more (measured with pdflatex: about 10 pt)."""
    return (1 if key else 0) + sum(len(measure.text_lines(text, room / measure.TABLE_MATH / wide))
               for text, wide in ((legend(table), 1.0),
                                  *((line, KEY_WIDTH) for line in key.split(fit.NEWLINE)))
               if text)


def table_width(table: Table, compact: bool = False, scale: float = 1.0) -> float:
    """The estimated width in em of a table on a frame (``compact``: its columns set
    closer, :mod:`symformer.slides.fit`), its columns planned ``scale`` times wider."""
    pad = fit.COMPACT_PAD if compact else fit.PAD
    widths = [measure.column_width(table.col_labels[j], [row[j].latex for row in table.cells],
                                   pad) for j in range(len(table.col_labels))]
    labels = measure.label_columns_width([t for _, t in table.row_labels], pad)
    return labels + scale * sum(widths)


def rows(items: tuple[Item, ...]) -> list[list[Item]]:
    """The items' tables set side by side: as many to a row as fit the frame's width."""
    out: list[list[Item]] = []
    used = 0.0
    for item in items:
        w = TABLE_FIT * table_width(item.table, item.compact) + GUTTER  # a long heading is broken
        if not out or used + w > measure.TEXT_WIDTH:
            out.append([])
            used = 0.0
        out[-1].append(item)
        used += w
    return out


def row_widths(row: list[Item]) -> list[float]:
    """The widths in em of a row's tables' columns (minipages): each table's estimate,
    scaled down to share the frame's width when the estimates together exceed it (the
    row was packed by :data:`TABLE_FIT` of them, so each keeps at least that); one
    table gets the frame's width, or the rest of the line beside its heading."""
    if heading_beside(row):  # the rest of the line: an estimate too short never overflows
        return [measure.TEXT_WIDTH - HEADING - GUTTER]
    if len(row) == 1:
        return [measure.TEXT_WIDTH]
    widths = [table_width(i.table, i.compact) for i in row]
    room = measure.TEXT_WIDTH - GUTTER * (len(row) - 1)
    scale = min(1.0, room / sum(widths))
    return [w * scale for w in widths]


def heading_beside(row: list[Item]) -> bool:
    """Whether a row of tables is one table with room for its heading at its left
    (else the headings go above the tables)."""
    wider = GRADIENT_WIDTH if is_backward(row[0].stage) else 1.0
    return len(row) == 1 and (TABLE_FIT * table_width(row[0].table, row[0].compact, wider)
                              + HEADING
                              + GUTTER <= measure.TEXT_WIDTH)


def stage_frames(stage: Stage, options: SlideOptions, parts: tuple | None = None,
                 slack: float = 1.0) -> list[StageFrame]:
    """The frames of one worked stage for the token ``options.token``: working split so
    every frame fits, the table under the working when it fits, else on frames of its
    own.  ``parts``: the (equation, lines, table, note) to show instead of the stage's
    own (a gradient's: :func:`_worked_gradient_frames`; table None: a scalar);
    ``slack``: the layout model's heights taken that much taller."""

    def fits(frame: StageFrame) -> bool:
        return height(frame) * slack <= room(frame.title)

    row = min(options.token, stage.shape[0] - 1)  # a one-row stage: its only row
    if parts is None:
        table = _table(stage, row, options)
        equation = tuple(display(ln.lhs, ln.rhs, ln.remark) for ln in equation_lines(stage))
        lines = worked_lines(stage, row, options.decimals)
        omitted = zero_terms_note(stage) if lines else ""
        note = " ".join(filter(None, (
            reader_text(omitted[:1].upper() + omitted[1:] + ".") if omitted else "",
            inactive_note(stage))))  # a dead FFN, said where it dies
    else:
        equation, lines, table, note = parts
    lines = lines if options.full else elided(lines)
    item = Item(stage=stage, token=row, equation=equation, lines=lines, table=table,
                note=note)
    whole = StageFrame(title=title(stage), items=(item,))
    if table is None:  # a scalar (the loss): its working says its value
        return _working_frames(whole, item, lines, slack)
    item = _fitted_item(item)
    table, whole = item.table, replace(whole, items=(item,))
    if _fits_width(fit.Fitted(table, item.key, item.compact)):
        beside = replace(whole, items=(replace(item, beside=True),))
        for frame in (whole, beside):
            if fits(frame) and (frame is whole or _narrow_enough(beside.items[0])):
                return [frame]
    out = _working_frames(whole, item, lines, slack)
    base = StageFrame(title=whole.title, items=(replace(item, lines=(), table=None),))
    last = replace(out[-1], items=(replace(out[-1].items[0], table=table),))
    if fits(last):
        out[-1] = last
    else:
        alone = replace(base, items=(replace(item, lines=(), note="", table=table),))
        # (with no working, the equation, or its first line, stays when it fits
        # without the slack)
        first = replace(alone, items=(replace(alone.items[0], equation=equation[:1]),))
        shown = equation if fits(alone) or (not lines and height(alone) <= room(
            alone.title)) else equation[:1] if not lines and height(first) <= room(
                first.title) else ()
        out.extend(_row_parts(replace(base, items=(replace(
            item, lines=(), note="", table=table, equation=shown),))))
    # a frame of the equation alone goes when a later frame shows the equation again
    again = any(f.items[0].equation and f.items[0].table is not None for f in out[1:])
    out = [f for f in out if f.items[0].lines or f.items[0].table is not None
           or not again] or out[:1]
    return [replace(f, part=k, parts=len(out)) for k, f in enumerate(out, 1)]


def _working_frames(whole: StageFrame, item: Item, lines, slack: float = 1.0
                    ) -> list[StageFrame]:
    """The working split over frames so each fits (no table)."""
    base = StageFrame(title=whole.title, items=(replace(item, lines=(), table=None),))
    space = room(base.title) / slack
    chunks: list[list[WorkedLine]] = [[]]
    for line in lines:
        trial = replace(base, items=(replace(item, lines=(*chunks[-1], line), table=None),))
        if chunks[-1] and height(trial) > space:
            chunks.append([])
        chunks[-1].append(line)
    if len(chunks) > 1 and all(w is ELLIPSIS for w in chunks[-1]):
        chunks.pop()  # a lone \vdots says nothing a frame of its own should show
    out = [replace(base, items=(replace(item, lines=tuple(c), table=None),)) for c in chunks]
    return [replace(f, part=k, parts=len(out)) for k, f in enumerate(out, 1)]


def _narrow_enough(item: Item) -> bool:
    """Whether a table may sit beside the working: it is narrow, and every piece of the
    working TeX cannot break (a bracketed sum) fits the column left to it."""
    if table_width(item.table, item.compact) > BESIDE * measure.TEXT_WIDTH:
        return False
    room = item.working_width - _lhs_width((item,)) - measure.HANG
    return all(measure.widest_unbreakable(p) * measure.MARGIN <= room
               for w in item.lines for p in (*w.shown, w.result))


def table_frames(stage: Stage, first: Stage, options: SlideOptions) -> list[StageFrame]:
    """The frames of a stage computed as ``first`` was worked: its table (made narrow
    enough when too wide), under a sentence saying where it was worked."""
    row = min(options.token, stage.shape[0] - 1)
    table = _table(stage, row, options)
    note = reader_text(f"Worked as in {where(first)}, with its own inputs and weights:"
                       if where(first) != where(stage) else
                       "Worked as above, with its own inputs and weights:")
    return _table_only_frames(stage, row, table, note)


def _table(stage: Stage, row: int, options: SlideOptions) -> Table:
    """The stage's table, the token's row highlighted; its legend without the rounding,
    which every frame's footer says; a cross-attention table's says what its rows and
    columns are (not the frame's title: :func:`_caption`)."""
    table = stage_table(stage, decimals=options.decimals, highlight=row,
                        caption=caption(stage), label=f"tab:{stage.name}")
    return replace(table, legend=_rows_and_columns(stage) + tuple(
        t for t in table.legend if t != rounding_legend(options.decimals)))


def worked_lines(stage: Stage, row: int, decimals: int, values=None
                 ) -> tuple[WorkedLine, ...]:
    """The worked lines of ``stage`` for row ``row``: each step's chain with repeated
    right-hand sides dropped; the last one is the result, the others the substitution.
    Products keep their factors on one line (``\\cdot\\nobreak``): TeX breaks a long
    line at its sums only."""
    out = []
    for step in worked_steps(stage, row, Style(decimals), values).steps:
        pieces, previous = [], None
        for relation, rhs in chain(step):
            if rhs != previous:
                pieces.append(_breakable(f"{relation} {rhs}"))
            previous = rhs
        lhs = node_latex(step.lhs)
        room = measure.TEXT_WIDTH - measure.width(lhs) - measure.HANG
        pieces = [narrower(p, lhs) for p in pieces]
        pieces = [_opened(p) if measure.widest_unbreakable(p) * measure.MARGIN > room
                  else _kept(p, room) for p in pieces]
        out.append(WorkedLine(lhs, tuple(pieces[:-1]), pieces[-1]))
    return tuple(out)


#: A bracket sized by a command (``\left(``, ``\Bigl(``; ``\right)``, ``\Bigr)``).
_SIZED = re.compile(r"\\(?:left|[Bb]igg?l?)\s*$")
_SIZED_CLOSE = re.compile(r"\\(?:right|[Bb]igg?r?)\s*$")


def _kept(latex: str, room: float) -> str:
    """``latex`` with each outermost plain bracket ``(5.557 - 3.587)`` set as one group,
    so TeX never breaks a line inside it, where the group fits the ``room`` (em)."""
    out, k, depth, start = [], 0, 0, 0
    for j, char in enumerate(latex):
        if char == "(" and not _SIZED.search(latex[:j]):
            if depth == 0:
                start = j
            depth += 1
        elif char == ")" and depth and not _SIZED_CLOSE.search(latex[:j]):
            depth -= 1
            if depth == 0:
                group = latex[start:j + 1]
                if measure.width(group) * measure.MARGIN <= room:
                    out.append(latex[k:start] + "{" + group + "}")
                    k = j + 1
    return "".join(out) + latex[k:]


_DELIMITER = re.compile(r"\\(left|right)\s*(\\[{}|]|[()\[\].|])")


def _opened(latex: str) -> str:
    """``latex`` with its outermost ``\\left(``...``\\right)`` set as ``\\Bigl(``...``\\Bigr)``:
    TeX may break a line at a sum inside those (never inside \\left...\\right), for a
    bracketed sum wider than the frame (``\\frac{1}{4} (\\dots + \\dots)`` of head symbols)."""
    pairs, stack = [], []
    for m in _DELIMITER.finditer(latex):
        if m.group(1) == "left":
            stack.append(m)
        elif stack:
            opener = stack.pop()
            if not stack and (opener.group(2), m.group(2)) == ("(", ")"):
                pairs.append((opener, m))
    out, k = [], 0
    for opener, closer in pairs:
        out.append(latex[k:opener.start()] + r"\Bigl(" + latex[opener.end():closer.start()]
                   + r"\Bigr)")
        k = closer.end()
    return "".join(out) + latex[k:]


#: How many lines of a run of alike lines (``q_0 = ...``, ``q_1 = ...``, ...) a frame
#: works before a \vdots stands for the rest (their results are in the table).
ALIKE = 1
#: The line that stands for the alike lines left out.
ELLIPSIS = WorkedLine(r"\vdots", ("",), "")


def elided(lines: tuple[WorkedLine, ...]) -> tuple[WorkedLine, ...]:
    """The worked lines with each run of more than :data:`ALIKE` alike lines (their
    left-hand sides differ only in their indices) cut to its first :data:`ALIKE` and a
    \vdots: the entries of one stage are worked alike, and the table has them all."""
    out: list[WorkedLine] = []
    run: list[WorkedLine] = []
    for line in (*lines, None):
        if run and (line is None or _shape(line.lhs) != _shape(run[0].lhs)):
            out.extend(run if len(run) <= ALIKE + 1 else (*run[:ALIKE], ELLIPSIS))
            run = []
        if line is not None:
            run.append(line)
    return tuple(out)


def _shape(lhs: str) -> str:
    return re.sub(r"\d+", "#", lhs)


def _breakable(latex: str) -> str:
    return _ALIGN_BREAK.sub(" ", latex).replace(r"\cdot ", r"\cdot\nobreak ")


def where(stage: Stage) -> str:
    """Where the stage sits, in the reader's words: ``Layer 1, Head 1``."""
    return ", ".join(part_of(stage))


def _caption(stage: Stage) -> str:
    """The stage's caption in a frame's title: without a cross-attention table's note on
    its rows and columns, which its table's legend says (:func:`_table`), so a title
    stays on two lines."""
    return caption(stage).removesuffix(decoder.caption_note(stage))


def _rows_and_columns(stage: Stage) -> tuple[str, ...]:
    """The legend's sentence saying what a cross-attention table's rows and columns are
    (none for another table)."""
    note = decoder.caption_note(stage).removeprefix(". ")
    return (note + ".",) if note else ()


def heading(stage: Stage) -> str:
    """The stage's title and symbol without where it sits (LaTeX): ``Query $q$``."""
    text, place = _caption(stage), where(stage)
    text = text.removeprefix(place + ": ")
    return f"{reader_text(text)} ${notation(stage).latex}$"


def title(stage: Stage) -> str:
    """The frame title in the reader's words: where the stage sits, what it computes,
    and its symbol (LaTeX): ``Layer 1, Head 1: Query $q$``.  The words and the symbol
    are the shared notation's (:func:`symformer.notation.notation`)."""
    return f"{reader_text(_caption(stage))} ${notation(stage).latex}$"


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
