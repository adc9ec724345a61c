"""GIFT (Moodle's plain-text import): one numerical question per asked entry.

GIFT has no embedded blanks, so every entry is its own question in a category per
variant (``$CATEGORY: symformer/v01``); the question names the variant, stage, token
and entry, and the students work from their printed sheet.  ``{#=0.16:0.005
=%100%0.17:0.005}``: the certified rounding, half a unit of tolerance (exact decimal
strings), and the reader-rounding answer where it differs.
"""

from __future__ import annotations

from symformer.lms.moodle import READER_PERCENT
from symformer.lms.question import Question
from symformer.lms.tolerances import tolerance_text

#: Characters GIFT gives a meaning to: written with a backslash in text.
_SPECIAL = "~=#{}:\\"


def gift_text(text: str) -> str:
    """``text`` with GIFT's special characters escaped (and on one line)."""
    text = " ".join(text.split())
    return "".join("\\" + c if c in _SPECIAL else c for c in text)


def gift(questions: list[Question], category: str) -> str:
    """The GIFT file of every variant."""
    out: list[str] = []
    for q in questions:
        out += [f"$CATEGORY: {category}/{q.vid}", ""]
        tol = tolerance_text(q.decimals)
        for b in q.blanks:
            name = gift_text(f"{q.vid} {b.number:03d} {b.label}")
            prompt = gift_text(f"symformer variant {q.vid}, {b.label} ({b.symbol}): the "
                               f"entry of row {b.row}, column {b.col} of your sheet, "
                               f"rounded to {q.decimals} decimals.")
            answers = f"={b.exact}:{tol}"
            if b.reader is not None:
                answers += f" =%{READER_PERCENT}%{b.reader}:{tol}"
            out += [f"::{name}::{prompt} {{#{answers}}}", ""]
    return "\n".join(out)
