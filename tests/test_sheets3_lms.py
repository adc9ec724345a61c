"""The LMS exports of a second example (sheets3): moe_dropout's dropout step, whose sheet
gives a mask D and a rate p (LaTeX braces and fractions in the question text).  Each
format is read back with the independent parsers of test_lms_exercise (Moodle's Cloze
grammar, GIFT's, QTI 2.1's XML, PrairieLearn's folder) and every stated answer must be
key.json's, which is checked against the template's mask worked by hand."""

from __future__ import annotations

import ast
import io
import json
import xml.etree.ElementTree as ET
import zipfile
from fractions import Fraction

import pytest
from test_lms_exercise import (
    _GIFT,
    QTI,
    _constants,
    _Elements,
    _in_question_order,
    check_info,
    cloze_blanks,
    keys,
    lms_made,
)

from symformer.exercise import SheetRequest
from symformer.lms import FORMATS

SEED = 5
DROPOUT = "layer1.attention.output.dropout"


@pytest.fixture(scope="module")
def made():
    """Two variants, token 2 ("sat": its mask row [1, 1] keeps both entries); 0.2 s."""
    return lms_made(SheetRequest("moe_dropout", 2, SEED, ask=(DROPOUT,), token="2"), FORMATS)


def _given_m(example: str) -> list[Fraction]:
    """Row 2 of the given multi-head output m, as the variant's sheet prints it."""
    sheet = example.split("## Layer 1: Attention output after dropout")[0]
    row = next(line for line in sheet.splitlines() if line.startswith("| 2 | sat |"))
    return [Fraction(c.strip().strip("$")) for c in row.strip("|").split("|")[2:]]


def test_the_key_is_the_mask_worked_by_hand(made):
    for vid, entries in keys(made).items():
        m = _given_m(made[f"{vid}/sheet.md"])
        for e in entries:  # mask row 2 is [1, 1], p = 1/3: m / (2/3), to 2 decimals
            assert e["row"] == 2
            assert Fraction(e["student"]) == round(m[e["col"]] * Fraction(3, 2), 2)


def test_moodle_cloze_states_the_key_and_gives_the_mask(made):
    root = ET.fromstring(made["moodle.xml"])
    clozes = root.findall("question")[1:]
    reference = keys(made)
    assert len(clozes) == len(reference) == 2
    for q, (_vid, entries) in zip(clozes, sorted(reference.items())):
        text = q.findtext("questiontext/text")
        # the attention's mask, marked by its site
        assert (r"D^{\text{att}} = \begin{bmatrix} 1 &amp; 0 \cr  0 &amp; 0 \cr  1 &amp; 1 "
                r"\end{bmatrix}") in text
        assert r"\(p = \frac{1}{3}\)" in text
        blanks = cloze_blanks(text)
        assert [b[0][1] for b in blanks] == [e["exact"] for e in _in_question_order(entries)]


def test_gift_and_qti_state_the_key(made):
    reference = keys(made)
    answers = [m.group("ans").split()[0] for line in made["gift.txt"].splitlines()
               if (m := _GIFT.match(line))]
    assert answers == [f"={e['exact']}:0.005" for _, es in sorted(reference.items())
                       for e in _in_question_order(es)]
    package = zipfile.ZipFile(io.BytesIO(made["qti.zip"]))
    for vid, entries in sorted(reference.items()):
        item = ET.fromstring(package.read(f"items/symformer-{SEED}-{vid}.xml"))
        stated = [d.findtext(f"{QTI}correctResponse/{QTI}value")
                  for d in item.findall(f"{QTI}responseDeclaration")]
        assert stated == [e["exact"] for e in _in_question_order(entries)]


def test_prairielearn_folder(made):
    for vid, entries in sorted(keys(made).items()):
        folder = f"prairielearn/symformer-{SEED}-{vid}/"
        check_info(json.loads(made[folder + "info.json"]))
        parser = _Elements()
        parser.feed(made[folder + "question.html"])
        names = [a["answers-name"] for _, a in parser.found[1:]]
        server = made[folder + "server.py"]
        assert not any(isinstance(n, ast.Name) and n.id in ("eval", "exec", "compile")
                       for n in ast.walk(ast.parse(server)))
        c = _constants(server)
        stated = [v for n in names for row in c["MATRICES"].get(n, [[c["NUMBERS"].get(n)]])
                  for v in row]
        assert sorted(stated) == sorted(e["exact"] for e in entries)
