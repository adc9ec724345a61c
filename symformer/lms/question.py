"""One variant as an LMS question: the sheet's blocks with a blank in every asked cell.

The question is the student's sheet (:func:`symformer.exercise.sheets.document_blocks`,
the same sentence, definitions, given numbers, equations and tables) rendered as HTML
with MathJax delimiters (``\\(..\\)``, ``\\[..\\]``), every asked cell a
:class:`Blank` that each format writes its own way (a Cloze blank, a
``pl-number-input``, a QTI ``textEntryInteraction``).  A blank's answers come from the
variant's ``key.json``: ``exact`` (the certified correct rounding) and ``student`` (the
key's own line from the rounded earlier answers, credited as reader rounding when it
differs).  Blanks are numbered in the order they appear: the asked stages in order,
each stage's rows and columns in order (docs/lms.md).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from symformer.engine import Derivation
from symformer.escape import portable
from symformer.latex.blocks import Heading, Math, Prose, Table
from symformer.latex.markdown import to_markdown

#: An asked cell of a sheet's table (:data:`symformer.exercise.sheets._BLANK`).
_BLANK_CELL = r"\underline{\hphantom{-000.0000}}"
#: A cell of an asked row that is not asked.
_OFF_CELL = r"\text{---}"


@dataclass(frozen=True)
class Blank:
    """One asked entry: its stage, position, label and the key's answers."""

    number: int     # from 1, in the order of the question
    stage: str
    row: int
    col: int
    symbol: str     # the key's plain-text symbol (``q_0``, ``k_(0,1)``)
    exact: str      # the certified correct rounding (key.json ``exact``)
    student: str    # the key's line from the rounded earlier answers (key.json ``student``)

    @property
    def reader(self) -> str | None:
        """The reader-rounding answer when it differs from ``exact`` (else None)."""
        return self.student if self.student and self.student != self.exact else None

    @property
    def label(self) -> str:
        """``layer1.head1.Q[1,0]``: the stage and entry, as ``grade`` names it."""
        return f"{self.stage}[{self.row},{self.col}]"


@dataclass(frozen=True)
class Question:
    """One variant: its id, title, the blocks of its sheet and its blanks."""

    vid: str
    title: str
    decimals: int
    blocks: tuple
    blanks: tuple[Blank, ...]

    def blank(self, stage: str, row: int, col: int) -> Blank | None:
        """The blank of an asked cell (None: not asked)."""
        return self._index.get((stage, row, col))

    @cached_property
    def _index(self) -> dict[tuple[str, int, int], Blank]:
        return {(b.stage, b.row, b.col): b for b in self.blanks}


def make_question(vid: str, g: Derivation, asked: list[str], decimals: int, token: int,
                  key_json: str) -> Question:
    """The question of one variant from its derivation and its ``key.json`` text."""
    from symformer.exercise.sheets import document_blocks

    key = json.loads(key_json)
    by_cell = {(e["stage"], e["row"], e["col"]): e for e in key["entries"]}
    blocks = tuple(b for b in document_blocks(g, asked, decimals, token, key=False)
                   if isinstance(b, (Heading, Prose, Table)) or _is_math(b))
    blanks: list[Blank] = []
    for block in blocks:
        stage = _asked_stage(block, asked)
        if stage is None:
            continue
        for (pos, _), row in zip(block.row_labels, block.cells):
            for j, cell in enumerate(row):
                e = by_cell.get((stage, pos, j))
                if cell.latex == _BLANK_CELL and e is not None and e["exact"] != "-inf":
                    blanks.append(Blank(len(blanks) + 1, stage, pos, j, e["symbol"],
                                        e["exact"], e["student"] or ""))
    return Question(vid, str(key["title"]), decimals, blocks, tuple(blanks))


def _is_math(block: object) -> bool:
    """Display math (an equation, a weight matrix): rendered through Markdown."""
    return type(block).__name__ in ("Equation", "MatrixBlock", "Matrices")


def _asked_stage(block: object, asked: list[str]) -> str | None:
    """The asked stage whose table ``block`` is (labels ``tab:STAGE``), else None."""
    if not isinstance(block, Table) or not block.label.startswith("tab:"):
        return None
    name = block.label[4:]
    return name if name in asked else None


def inline(latex: str) -> str:
    """Inline math for MathJax: ``\\(latex\\)`` (HTML-escaped)."""
    return r"\(" + html.escape(latex, quote=False) + r"\)"


def _prose(block: Prose) -> str:
    return "".join(inline(p.latex) if isinstance(p, Math) else html.escape(p, quote=False)
                   for p in block.parts)


def _display(block: object) -> str:
    """An equation or matrix: its Markdown ``$$..$$`` as MathJax ``\\[..\\]``."""
    text = portable(to_markdown(block))
    text = re.sub(r"\$\$(.*?)\$\$", lambda m: r"\[" + m.group(1).strip() + r"\]", text,
                  flags=re.S)
    return '<div class="symformer-math">' + html.escape(text, quote=False) + "</div>"


def _table(block: Table, question: Question, stage: str | None,
           blank: Callable[[Blank], str]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in block.row_header) + "".join(
        f"<th>{inline(c)}</th>" for c in block.col_labels)
    rows = []
    for (pos, token), row in zip(block.row_labels, block.cells):
        cells = [f"<td>{pos}</td>", f"<td>{html.escape(token)}</td>"]
        for j, cell in enumerate(row):
            b = question.blank(stage, pos, j) if stage is not None else None
            if b is not None:
                cells.append(f"<td>{blank(b)}</td>")
            elif cell.latex in (_BLANK_CELL, _OFF_CELL):
                cells.append("<td>\u2014</td>")
            else:
                cells.append(f"<td>{inline(cell.latex)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (f'<table class="symformer"><caption>{html.escape(block.caption)}'
            f"</caption><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody>"
            "</table>")


def question_html(question: Question, blank: Callable[[Blank], str],
                  asked: list[str], after: Callable[[str], str] | None = None) -> str:
    """The question as HTML, ``blank(b)`` written in each asked cell and ``after(stage)``
    after each asked stage's table.  It starts with ``symformer variant vNN`` so that an
    LMS's response report (which shows the question's text) names the variant."""
    parts = [f"<p><strong>symformer variant {html.escape(question.vid)}</strong>: "
             f"{html.escape(question.title)}</p>"]
    for block in question.blocks:
        if isinstance(block, Heading):
            level = min(6, block.level + 2)
            parts.append(f"<h{level}>{html.escape(block.text)}</h{level}>")
        elif isinstance(block, Prose):
            parts.append(f"<p>{_prose(block)}</p>")
        elif isinstance(block, Table):
            stage = _asked_stage(block, asked)
            parts.append(_table(block, question, stage, blank))
            if stage is not None and after is not None:
                parts.append(after(stage))
        else:
            parts.append(_display(block))
    return "\n".join(parts) + "\n"
