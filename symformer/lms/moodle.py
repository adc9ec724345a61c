"""Moodle XML: one Cloze (embedded answers) question per variant.

Every asked entry is one ``NUMERICAL`` blank, ``{1:NUMERICAL:=0.16:0.005}``: the key's
certified rounding with a tolerance of half a unit in the last asked place, both
written as exact decimal strings; where the key's line from the rounded earlier
answers rounds differently (reader rounding), that answer is a second alternative
with :data:`READER_PERCENT` of the credit (``~%100%0.17:0.005``).  The syntax is the
one Moodle's Cloze importer reads (``qtype_multianswer_extract_question``:
docs/lms.md lists the rules and the test that checks them).
"""

from __future__ import annotations

import html

from symformer.lms.question import Blank, Question, question_html
from symformer.lms.tolerances import tolerance_text

#: Credit for the reader-rounding answer, in percent: ``grade``'s default share (1).
READER_PERCENT = 100
#: The longest question name Moodle stores (its question table's name column).
NAME_LENGTH = 255


def cloze(b: Blank, decimals: int) -> str:
    """One NUMERICAL blank (weight 1)."""
    tol = tolerance_text(decimals)
    text = f"{{1:NUMERICAL:={b.exact}:{tol}"
    if b.reader is not None:
        text += f"~%{READER_PERCENT}%{b.reader}:{tol}"
    return text + "}"


def _cdata(text: str) -> str:
    return "<![CDATA[" + text.replace("]]>", "]]]]><![CDATA[>") + "]]>"


def moodle_xml(questions: list[Question], asked: list[str], category: str,
               idnumber: str) -> str:
    """The quiz file: a category, then one Cloze question per variant."""
    out = ['<?xml version="1.0" encoding="UTF-8"?>', "<quiz>",
           '  <question type="category">',
           f"    <category><text>{html.escape(f'$course$/top/{category}')}</text></category>",
           "  </question>"]
    for q in questions:
        text = question_html(q, lambda b, d=q.decimals: cloze(b, d), asked)
        out += ['  <question type="cloze">',
                f"    <name><text>{html.escape(f'{q.vid}: {q.title}'[:NAME_LENGTH])}</text></name>",
                f'    <questiontext format="html"><text>{_cdata(text)}</text></questiontext>',
                '    <generalfeedback format="html"><text></text></generalfeedback>',
                "    <penalty>0</penalty>",
                "    <hidden>0</hidden>",
                f"    <idnumber>{html.escape(f'{idnumber}-{q.vid}')}</idnumber>",
                "  </question>"]
    return "\n".join(out + ["</quiz>"]) + "\n"
