"""PrairieLearn question folders: ``info.json``, ``question.html``, ``server.py``.

One folder per variant (``prairielearn/symformer-SEED-vNN/``).  A stage whose asked
cells fill whole rows, with no reader-rounding alternative, is one
``pl-matrix-component-input``; any other asked entry is a ``pl-number-input`` in its
table cell.  Both compare with ``comparison="relabs" rtol="0"`` and ``atol`` half a
unit in the last asked place (PrairieLearn's ``decdig`` allows 0.51 units, not 0.5).
``server.py`` holds the variant's answers as decimal strings, converts them with
``float()`` in ``generate`` and, in ``grade``, credits an answer within half a unit of
the reader-rounding answer in full (compared as :class:`decimal.Decimal`): it imports
nothing from symformer and evaluates no text.  The uuid is a UUID-5 of the template,
seed, decimals, asked stages and variant id: the same exercise gives the same uuids,
another gives others.
"""

from __future__ import annotations

import html
import json
import uuid

from symformer.lms.question import Blank, Question, question_html
from symformer.lms.tolerances import tolerance_text

#: The namespace of the questions' uuids (a UUID-5 of the project's name).
NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://github.com/symformer/symformer/lms")


def question_uuid(identity: str, vid: str) -> str:
    """The variant's uuid: UUID-5 of the exercise's identity and the variant id."""
    return str(uuid.uuid5(NAMESPACE, f"{identity}:{vid}"))


def entry_name(b: Blank) -> str:
    """A blank's answers-name: ``e07`` (its number)."""
    return f"e{b.number:02d}"


def matrix_name(k: int) -> str:
    """The answers-name of the k-th asked stage's matrix input: ``m3_`` (its entries are
    submitted as ``m3_1``, ``m3_2``, ..., row by row)."""
    return f"m{k}_"


def _matrices(q: Question) -> dict[str, tuple[str, list[list[Blank]]]]:
    """The stages asked as whole rows, without a reader-rounding alternative: stage ->
    (answers-name, rows of blanks)."""
    out = {}
    # k counts the stages with blanks, in order (grade --from reads m{k}_{entry} so)
    for k, stage in enumerate(dict.fromkeys(b.stage for b in q.blanks), 1):
        blanks = [b for b in q.blanks if b.stage == stage]
        if not blanks or any(b.reader is not None for b in blanks):
            continue
        rows = sorted({b.row for b in blanks})
        cols = sorted({b.col for b in blanks})
        grid = [[q.blank(stage, i, j) for j in cols] for i in rows]
        width = max(b.col for b in blanks) + 1
        if cols == list(range(width)) and all(all(c is not None for c in r) for r in grid):
            out[stage] = (matrix_name(k), grid)
    return out


def question_files(q: Question, asked: list[str], identity: str, topic: str
                   ) -> dict[str, str]:
    """The three files of one variant's question folder."""
    atol = tolerance_text(q.decimals)
    matrices = _matrices(q)
    in_matrix = {b.number for _, grid in matrices.values() for r in grid for b in r}

    def blank(b: Blank) -> str:
        if b.number in in_matrix:
            return "\u2193"  # in the matrix input below the table
        return (f'<pl-number-input answers-name="{entry_name(b)}" comparison="relabs" '
                f'rtol="0" atol="{atol}" size="8" aria-label="{html.escape(b.label)}">'
                "</pl-number-input>")

    def after(stage: str) -> str:
        if stage not in matrices:
            return ""
        name, grid = matrices[stage]
        rows = ", ".join(str(r[0].row) for r in grid)
        return (f"<p>Rows {rows} of the table above, every column:</p>\n"
                f'<pl-matrix-component-input answers-name="{name}" comparison="relabs" '
                f'rtol="0" atol="{atol}" label="{html.escape(stage)}">'
                "</pl-matrix-component-input>")

    body = question_html(q, blank, asked, after).replace("{{", "{ {").replace("}}", "} }")
    info = {"uuid": question_uuid(identity, q.vid), "type": "v3",
            "title": f"{q.title}", "topic": topic, "tags": ["symformer", q.vid],
            "singleVariant": True, "partialCredit": True}
    numbers = {entry_name(b): b.exact for b in q.blanks if b.number not in in_matrix}
    readers = {entry_name(b): b.reader for b in q.blanks if b.reader is not None}
    grids = {name: [[b.exact for b in r] for r in grid] for name, grid in matrices.values()}
    labels = {entry_name(b): b.label for b in q.blanks}
    return {"info.json": json.dumps(info, indent=2) + "\n",
            "question.html": f'<pl-question-panel>\n{body}</pl-question-panel>\n',
            "server.py": _server(q, numbers, grids, readers, labels, atol)}


def _server(q: Question, numbers: dict, grids: dict, readers: dict, labels: dict,
            atol: str) -> str:
    """``server.py``: the variant's answers as constants (decimal strings)."""
    def const(value: object) -> str:
        return json.dumps(value, indent=4, ensure_ascii=True)

    return f'''"""symformer exercise, variant {q.vid}: the certified key of this variant.

Written by `symformer exercise --format prairielearn`; no symformer import and no
eval: every answer is a decimal string, converted with float() for PrairieLearn's
elements, and the reader-rounding answers are compared as exact decimals.
"""

from decimal import Decimal, InvalidOperation

#: answers-name -> the certified correct rounding (a pl-number-input each)
NUMBERS = {const(numbers)}
#: answers-name -> rows of certified roundings (a pl-matrix-component-input each)
MATRICES = {const(grids)}
#: answers-name -> the answer from the key's rounded earlier answers, where it differs
READER = {const(readers)}
#: answers-name -> the entry it asks (stage[row,col])
LABELS = {const(labels)}
#: half a unit in the last asked place ({q.decimals} decimals)
HALF_UNIT = Decimal("{atol}")


def generate(data):
    for name, value in NUMBERS.items():
        data["correct_answers"][name] = float(value)
    for name, rows in MATRICES.items():
        data["correct_answers"][name] = [[float(v) for v in row] for row in rows]


def grade(data):
    """Full credit for the reader-rounding answer (as symformer grade gives it)."""
    for name, value in READER.items():
        submitted = data["submitted_answers"].get(name)
        if submitted is None or isinstance(submitted, (dict, list)):
            continue
        try:
            close = abs(Decimal(str(submitted)) - Decimal(value)) <= HALF_UNIT
        except (InvalidOperation, ValueError):
            continue
        if close:
            data["partial_scores"].setdefault(name, {{}})["score"] = 1
            data["partial_scores"][name]["feedback"] = (
                "right up to the rounding of the earlier steps")
    scores = data["partial_scores"]
    if scores:
        total = sum(s.get("weight", 1) for s in scores.values())
        data["score"] = sum((s.get("score") or 0) * s.get("weight", 1)
                            for s in scores.values()) / total
'''
