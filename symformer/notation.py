"""One notation in every format: the operation's symbol, with indices counted from 0.

Every format (the LaTeX document, the Markdown export, the trace as text, LaTeX,
Markdown and HTML, and ``check``'s messages) names an entry of a stage the same
way: the symbol of the stage's operation (``stage.op.symbol``, a composition may
give a role's symbol such as ``q``) with the entry's 0-based column as subscript
(``q_0``, ``α_2``: the weight on key position 2).  A whole-row quantity (a
LayerNorm row's mean μ and variance σ²) has no subscript.  Token positions are
counted from 0 too.  :func:`legend` lists the symbols a document uses, stated
once at its start with :data:`INDEX_RULE`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

import sympy

from symformer.ops import (
    Notation,
    PositionCrossEntropy,
    PositionSquaredErrors,
    RowMean,
    RowVariance,
    WholeMean,
    WholeVariance,
)

if TYPE_CHECKING:
    from symformer.engine.graph import Stage

#: How every format counts, stated once at the start of every document and page.
INDEX_RULE = ("Token positions and vector dimensions are counted from 0; sums over the n "
              "key positions run over j = 0, …, n−1.")
#: Operations giving one number per token row (their entries carry no subscript).
#: Operations with one number per token row (a per-position loss L_i too).
_PER_ROW = (RowMean, RowVariance, WholeMean, WholeVariance, PositionCrossEntropy,
            PositionSquaredErrors)
_NUMBERED = re.compile(r"([^\d]*)0")


def notation(stage: Stage) -> Notation:
    """The symbol and title of ``stage`` (its operation's, or the role's it plays)."""
    return stage.op.symbol


def per_row(stage: Stage) -> bool:
    """True when the stage has one number per token row (no subscript: ``μ``); so has
    the gradient at such a stage (``∂L/∂μ``)."""
    source = stage.name.removeprefix("grad.")
    if source != stage.name and stage.derivation is not None and source in stage.derivation:
        return per_row(stage.derivation[source])
    return isinstance(stage.op, _PER_ROW)


def index(stage: Stage, j: int) -> int | None:
    """The subscript of column ``j`` (0-based), or None for a whole-row quantity or a
    single number (the loss ``L``)."""
    return None if per_row(stage) or stage.shape == (1, 1) else j


def entry(stage: Stage, j: int, fmt: str = "text") -> str:
    """Column ``j``'s symbol: ``q_0`` (text), ``q_{0}`` (latex); ``μ`` for a whole row."""
    k = index(stage, j)
    return notation(stage).entry(*(() if k is None else (k,)), fmt=fmt)


class EntrySymbol(sympy.Symbol):
    """A SymPy symbol that prints as a notation with its subscript in every printer.

    ``α_2`` in text, ``\\alpha_{2}`` in LaTeX, ``<msub><mi>α</mi><mn>2</mn></msub>``
    in MathML: the left-hand side of a worked line.
    """

    notation: Notation
    index: int | None

    def __new__(cls, note: Notation, k: int | None = None) -> EntrySymbol:
        name = note.entry(*(() if k is None else (k,)), fmt="text")
        obj = super().__new__(cls, name)
        obj.notation, obj.index = note, k
        return obj

    def __getnewargs_ex__(self):
        return (self.notation, self.index), {}

    def _indices(self) -> tuple[int, ...]:
        return () if self.index is None else (self.index,)

    def _sympystr(self, printer) -> str:
        return self.notation.entry(*self._indices(), fmt="text")

    def _latex(self, printer) -> str:
        return self.notation.entry(*self._indices(), fmt="latex")

    def _mathml_presentation(self, printer):
        dom = printer.dom
        base = dom.createElement("mi")
        base.appendChild(dom.createTextNode(self.notation.text))
        if self.index is None:
            return base
        sub = dom.createElement("msub")
        number = dom.createElement("mn")
        number.appendChild(dom.createTextNode(str(self.index)))
        sub.appendChild(base)
        sub.appendChild(number)
        return sub


def entry_symbol(stage: Stage, j: int) -> EntrySymbol:
    """Column ``j``'s symbol as a SymPy symbol (the left-hand side of a worked line)."""
    return EntrySymbol(notation(stage), index(stage, j))


def matrix_latex(stage: Stage) -> str:
    """The symbol of the whole stage as a matrix: ``Q`` for rows of ``q``, else the symbol."""
    latex = notation(stage).latex
    return latex.upper() if re.fullmatch(r"[a-z]", latex) else latex


def numbered(stage: Stage) -> bool:
    """True when the stage's columns are numbered dimensions (``q0``, ``d0``, ...),
    False when they name something (a key token, a vocabulary word) or a whole row."""
    if per_row(stage):
        return False
    m = _NUMBERED.fullmatch(stage.cols[0])
    return m is not None and stage.cols == tuple(
        f"{m.group(1)}{j}" for j in range(len(stage.cols)))


#: Stages whose rows are a weight's rows (a weight's gradient, a training run's weights
#: and Adam's moments), not token positions.
_WEIGHT_KINDS = ("weight_gradient", "parameter", "optimizer_state")


def place(stage: Stage, i: int, j: int) -> str:
    """An entry in words: ``q_0 of 'think' (position 1)``.

    Columns that name something add it: ``α_1 of 'I' (position 0), column 'think'``.
    """
    if stage.kind in _WEIGHT_KINDS:  # a weight's rows are not token positions
        text = f"{entry(stage, j)} of row {i} ({stage.rows[i]!r})"
    else:
        text = f"{entry(stage, j)} of {stage.rows[i]!r} (position {i})"
    if not numbered(stage) and not per_row(stage):
        text += f", column {stage.cols[j]!r}"
    return text


def legend(stages: Iterable[Stage]) -> tuple[Notation, ...]:
    """The symbols the stages use, each once, in order of first use.

    A symbol used with several titles (``z``: the encoder's and the decoder's output)
    gets them joined.
    """
    found: dict[str, Notation] = {}
    for stage in stages:
        note = notation(stage)
        known = found.get(note.latex)
        if known is None:
            found[note.latex] = note
        elif note.title not in known.title.split(" / "):
            found[note.latex] = Notation(known.latex, known.text,
                                         f"{known.title} / {note.title}")
    return tuple(found.values())


def legend_text(notes: Iterable[Notation]) -> str:
    """The legend as one line of plain text (terminals): ``Notation: e token ...``."""
    items = "; ".join(f"{n.text}: {n.title}" for n in notes)
    return f"Notation: {items}. {INDEX_RULE}"

