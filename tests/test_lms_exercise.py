"""``exercise --format moodle|prairielearn|qti|gift``: every file read back with a small
independent parser (xml.etree, json, ast, a regex for GIFT and Moodle's Cloze syntax),
every stated answer checked against the variant's key.json as a decimal string, bit
for bit, and the files checked against the importers' rules (docs/lms.md)."""

from __future__ import annotations

import ast
import io
import json
import os
import re
import xml.etree.ElementTree as ET
import zipfile
from fractions import Fraction
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from symformer.exercise import SheetRequest, make_exercise
from symformer.lms import FORMATS, exercise_files
from symformer.lms.prairielearn import question_uuid
from symformer.lms.tolerances import decimal_text, tolerance_text


def lms_made(request: SheetRequest, formats) -> dict:
    """An exercise's files with its LMS files (as ``exercise --format`` writes them)."""
    made = make_exercise(request)
    return {**made.files, **exercise_files(made, request, list(formats))}

SEED = 7


@pytest.fixture(scope="module")
def made():
    """Two variants of the built-in example in every format (about 2 s)."""
    return lms_made(SheetRequest(None, 2, SEED), FORMATS)


def keys(files) -> dict[str, list[dict]]:
    """Each variant's key.json entries (the reference every format must state; a masked
    score, -inf with --every-entry, is printed, not asked)."""
    return {name.split("/")[0]: [e for e in json.loads(text)["entries"] if e["exact"] != "-inf"]
            for name, text in files.items() if name.endswith("/key.json")}


def tol(files) -> str:
    """Half a unit in the last asked place, from key.json's decimals (an exact string)."""
    return tolerance_text(json.loads(files["v01/key.json"])["decimals"])


# -- exact decimals --------------------------------------------------------------


@given(st.integers(-10**12, 10**12), st.integers(0, 12))
def test_decimal_text_is_exact(n, places):
    value = Fraction(n, 10 ** places)
    text = decimal_text(value)
    assert Fraction(text) == value and "e" not in text.lower()


def test_tolerances_are_half_a_unit_never_a_floats_repr():
    for d in range(0, 7):
        text = tolerance_text(d)
        assert Fraction(text) == Fraction(1, 2 * 10 ** d) and "e" not in text
    assert tolerance_text(6) == "0.0000005"  # float repr: 5e-07
    with pytest.raises(ValueError):
        decimal_text(Fraction(1, 3))


# -- Moodle: Cloze, per the rules of qtype_multianswer_extract_question ----------------

#: Moodle's Cloze grammar (question/type/multianswer/questiontype.php), rewritten for
#: Python's re (one fixed-width look-behind per alternative).
_FRACTION = r"=|%(-?[0-9]+(?:[.,][0-9]*)?)%"
_ANSWER = r".+?(?<!\\)(?<!&)(?<!&amp;)(?=[~#}]|$)"
_FEEDBACK = r".*?(?<!\\)(?=[~}]|$)"
_ALTERNATIVE = f"({_FRACTION})?({_ANSWER})(#({_FEEDBACK}))?"
_TYPES = r"(NUMERICAL|NM)|(MULTICHOICE|MC)|(SHORTANSWER|SA|MW)"
_CLOZE = re.compile(r"\{([0-9]*):(" + _TYPES + "):(" + _ALTERNATIVE + "(~" + _ALTERNATIVE
                    + r")*)\}", re.S)
_NUMBER = r"-?(([0-9]+[.,]?[0-9]*|[.,][0-9]+)([eE][-+]?[0-9]+)?)"
_NUMERICAL = re.compile("^(" + _NUMBER + ")(:" + _NUMBER + ")?$", re.S)


def cloze_blanks(text: str) -> list[list[tuple[str, str, str]]]:
    """Every blank of a Cloze text as Moodle extracts it: (fraction, answer, tolerance)
    per alternative; a NUMERICAL blank whose answer is not a number fails."""
    blanks = []
    while (m := _CLOZE.search(text)) is not None:
        assert m.group(3), f"not a NUMERICAL blank: {m.group(0)}"
        rest, alternatives = m.group(6), []
        while rest and (a := re.match("~?" + _ALTERNATIVE, rest, re.S)) is not None:
            number = _NUMERICAL.match(a.group(3))
            assert number is not None, f"not a number: {a.group(3)!r}"
            fraction = "100" if a.group(1) == "=" else (a.group(2) or "0")
            alternatives.append((fraction, number.group(1), number.group(6) or "0"))
            rest = rest[len(a.group(0)):]
        blanks.append(alternatives)
        text = text[:m.start()] + "{#}" + text[m.end():]
    return blanks


def test_moodle_xml_imports_and_states_the_key(made):
    root = ET.fromstring(made["moodle.xml"])
    assert root.tag == "quiz"
    questions = root.findall("question")
    # qformat_xml: a category first, then questions of known types
    assert questions[0].get("type") == "category"
    assert questions[0].findtext("category/text").startswith("$course$/top/symformer/")
    clozes = questions[1:]
    reference = keys(made)
    assert [q.get("type") for q in clozes] == ["cloze"] * len(reference)
    for q, (vid, entries) in zip(clozes, sorted(reference.items())):
        assert q.findtext("name/text").startswith(f"{vid}: ")
        assert q.find("questiontext").get("format") == "html"
        text = q.findtext("questiontext/text")
        assert text.startswith(f"<p><strong>symformer variant {vid}</strong>")
        blanks = cloze_blanks(text)
        assert len(blanks) == len(entries) > 0
        readers = 0
        for alternatives, e in zip(blanks, _in_question_order(entries)):
            assert alternatives[0] == ("100", e["exact"], tol(made))  # bit for bit
            # qtype_multianswer_validate_question: some answer has the full fraction
            assert any(f == "100" for f, _, _ in alternatives)
            if e["student"] != e["exact"]:
                readers += 1
                assert alternatives[1] == ("100", e["student"], tol(made))
            else:
                assert len(alternatives) == 1
        assert readers == sum(e["student"] != e["exact"] for e in entries)
        assert q.findtext("idnumber") == f"symformer-{SEED}-{vid}"


def _in_question_order(entries: list[dict]) -> list[dict]:
    """key.json's entries in the question's order: stages as asked, rows, columns."""
    order = list(dict.fromkeys(e["stage"] for e in entries))
    return sorted(entries, key=lambda e: (order.index(e["stage"]), e["row"], e["col"]))


def test_a_reader_rounding_answer_is_offered(made):
    """The built-in example's seed 7 has reader-rounding answers; each format offers
    them (Moodle above, GIFT and QTI below, PrairieLearn's server.py)."""
    entries = [e for es in keys(made).values() for e in es]
    assert any(e["student"] != e["exact"] for e in entries)


# -- GIFT --------------------------------------------------------------------------

_GIFT = re.compile(r"^::(?P<name>(?:\\.|[^:\\])*)::(?P<text>(?:\\.|[^{\\])*)\{#(?P<ans>[^}]*)\}$")


def test_gift_states_the_key(made):
    lines = [line for line in made["gift.txt"].splitlines() if line]
    reference = keys(made)
    got: dict[str, list[list[str]]] = {}
    vid = None
    for line in lines:
        if line.startswith("$CATEGORY: "):
            vid = line.rsplit("/", 1)[1]
            continue
        m = _GIFT.match(line)
        assert m is not None, line
        assert f"symformer variant {vid}" in m.group("text")
        got.setdefault(vid, []).append(m.group("ans").split())
    for vid, entries in reference.items():
        for answers, e in zip(got[vid], _in_question_order(entries)):
            assert answers[0] == f"={e['exact']}:{tol(made)}"
            if e["student"] != e["exact"]:
                assert answers[1] == f"=%100%{e['student']}:{tol(made)}"
        assert len(got[vid]) == len(entries)


# -- QTI 2.1 -----------------------------------------------------------------------

QTI = "{http://www.imsglobal.org/xsd/imsqti_v2p1}"
CP = "{http://www.imsglobal.org/xsd/imscp_v1p1}"


def test_qti_package_states_the_key(made):
    package = zipfile.ZipFile(io.BytesIO(made["qti.zip"]))
    manifest = ET.fromstring(package.read("imsmanifest.xml"))
    resources = manifest.findall(f"{CP}resources/{CP}resource")
    reference = keys(made)
    assert len(resources) == len(reference)
    for resource, (vid, entries) in zip(resources, sorted(reference.items())):
        assert resource.get("type") == "imsqti_item_xmlv2p1"
        item = ET.fromstring(package.read(resource.get("href")))
        assert item.tag == f"{QTI}assessmentItem"
        assert item.get("identifier") == resource.get("identifier") == f"symformer-{SEED}-{vid}"
        declared = {d.get("identifier"): d for d in item.findall(f"{QTI}responseDeclaration")}
        interactions = [i.get("responseIdentifier")
                        for i in item.iter(f"{QTI}textEntryInteraction")]
        assert interactions == list(declared) and len(interactions) == len(entries)
        for rid, e in zip(interactions, _in_question_order(entries)):
            d = declared[rid]
            assert d.get("baseType") == "float" and d.get("cardinality") == "single"
            assert d.findtext(f"{QTI}correctResponse/{QTI}value") == e["exact"]
        equals = list(item.iter(f"{QTI}equal"))
        assert equals and all(x.get("toleranceMode") == "absolute"
                              and x.get("tolerance") == f"{tol(made)} {tol(made)}"
                              for x in equals)
        readers = sorted(v.text for v in item.iter(f"{QTI}baseValue")
                         if v.get("baseType") == "float" and v.text not in ("1", str(len(entries))))
        assert readers == sorted(e["student"] for e in entries if e["student"] != e["exact"])


def test_the_files_are_the_same_bytes_every_run(made):
    again = lms_made(SheetRequest(None, 1, SEED), ("qti", "moodle"))
    one = zipfile.ZipFile(io.BytesIO(made["qti.zip"]))
    two = zipfile.ZipFile(io.BytesIO(again["qti.zip"]))
    name = "items/symformer-7-v01.xml"
    assert one.read(name) == two.read(name)
    assert one.getinfo(name).date_time == (2020, 1, 1, 0, 0, 0)


# -- PrairieLearn ------------------------------------------------------------------

#: PrairieLearn's info.json rules for a question (its schema infoQuestion.json, read
#: from PrairieLearn's source; the schema itself is AGPL-licensed, so it is not
#: vendored: this is the check that replaces it, docs/lms.md)
_PL_REQUIRED = {"uuid", "type", "title", "topic"}
_PL_KNOWN = _PL_REQUIRED | {"comment", "tags", "authors", "clientFiles", "clientTemplates",
                            "template", "gradingMethod", "singleVariant", "showCorrectAnswer",
                            "partialCredit", "options", "externalGradingOptions",
                            "dependencies", "workspaceOptions", "sharingSets",
                            "sharePublicly", "shareSourcePublicly", "preferences"}
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                   r"[0-9a-fA-F]{12}$")


def check_info(info: dict) -> None:
    assert _PL_REQUIRED <= set(info) <= _PL_KNOWN, set(info)
    assert _UUID.match(info["uuid"])
    assert info["type"] in ("Calculation", "MultipleChoice", "Checkbox", "File",
                            "MultipleTrueFalse", "v3")
    assert isinstance(info["title"], str) and isinstance(info["topic"], str)
    assert all(isinstance(t, str) for t in info.get("tags", []))
    for flag in ("singleVariant", "partialCredit", "showCorrectAnswer"):
        assert isinstance(info.get(flag, True), bool)


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        if tag.startswith("pl-"):
            self.found.append((tag, dict(attrs)))


def _constants(source: str) -> dict[str, object]:
    """server.py's top-level constants, read with ast (never run)."""
    out = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, ast.Dict):
            out[node.targets[0].id] = ast.literal_eval(node.value)
    return out


def test_prairielearn_questions_state_the_key(made):
    reference = keys(made)
    uuids = set()
    for vid, entries in sorted(reference.items()):
        folder = f"prairielearn/symformer-{SEED}-{vid}/"
        info = json.loads(made[folder + "info.json"])
        check_info(info)
        uuids.add(info["uuid"])
        parser = _Elements()
        parser.feed(made[folder + "question.html"])
        tags = [t for t, _ in parser.found]
        assert tags[0] == "pl-question-panel"
        assert tags[1:] and set(tags[1:]) <= {"pl-number-input", "pl-matrix-component-input"}
        for _tag, attrs in parser.found[1:]:
            assert attrs["comparison"] == "relabs" and attrs["rtol"] == "0"
            assert attrs["atol"] == tol(made)
        server = made[folder + "server.py"]
        tree = ast.parse(server)
        imports = [a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom | ast.Import)
                   for a in n.names] + [n.module for n in ast.walk(tree)
                                        if isinstance(n, ast.ImportFrom)]
        assert set(imports) <= {"decimal", "Decimal", "InvalidOperation"}, imports
        assert not any(isinstance(n, ast.Name) and n.id in ("eval", "exec", "compile")
                       for n in ast.walk(tree))
        c = _constants(server)
        names = [a["answers-name"] for _, a in parser.found[1:]]
        stated = []
        for name in names:  # in the page's order: a number input, or a matrix's rows
            stated += [v for row in c["MATRICES"][name] for v in row] \
                if name in c["MATRICES"] else [c["NUMBERS"][name]]
        assert sorted(stated) == sorted(e["exact"] for e in entries)
        assert sorted(c["READER"].values()) == sorted(
            e["student"] for e in entries if e["student"] != e["exact"])
        by_label = {f"{e['stage']}[{e['row']},{e['col']}]": e for e in entries}
        for name, value in c["NUMBERS"].items():
            assert by_label[c["LABELS"][name]]["exact"] == value
        _run_server(server, c)
    assert len(uuids) == len(reference)


def _run_server(source: str, c: dict) -> None:
    """generate() gives PrairieLearn the answers as floats of the decimal strings;
    grade() credits a reader-rounding answer in full, and nothing else."""
    space: dict = {}
    exec(compile(source, "server.py", "exec"), space)  # our own generated file
    data: dict = {"correct_answers": {}, "submitted_answers": {}, "partial_scores": {}}
    space["generate"](data)
    for name, value in c["NUMBERS"].items():
        assert data["correct_answers"][name] == float(value)
    for name, rows in c["MATRICES"].items():
        assert data["correct_answers"][name] == [[float(v) for v in r] for r in rows]
    for name, value in c["READER"].items():
        data["submitted_answers"][name] = float(value)
        data["partial_scores"][name] = {"score": 0, "weight": 1}
    wrong = next((n for n in c["NUMBERS"] if n not in c["READER"]), None)
    if wrong is not None:
        data["submitted_answers"][wrong] = 99.0
        data["partial_scores"][wrong] = {"score": 0, "weight": 1}
    space["grade"](data)
    assert all(data["partial_scores"][n]["score"] == 1 for n in c["READER"])
    assert wrong is None or data["partial_scores"][wrong]["score"] == 0


def test_prairielearn_uuids_are_deterministic_and_distinct():
    a = question_uuid("<built-in>:7:2:1:layer1.head1.Q", "v01")
    assert a == question_uuid("<built-in>:7:2:1:layer1.head1.Q", "v01")
    assert a != question_uuid("<built-in>:7:2:1:layer1.head1.Q", "v02")
    assert a != question_uuid("<built-in>:8:2:1:layer1.head1.Q", "v01")


def test_prairielearn_info_against_its_own_schema(made):
    """With PrairieLearn's schema at hand (SYMFORMER_PL_SCHEMA: a copy of its
    apps/prairielearn/src/schemas/schemas/infoQuestion.json), the real validation."""
    path = os.environ.get("SYMFORMER_PL_SCHEMA")
    if not path or not Path(path).is_file():
        pytest.skip("SYMFORMER_PL_SCHEMA is not set to PrairieLearn's infoQuestion.json "
                    "(AGPL, not vendored; check_info above is the check that replaces it)")
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(Path(path).read_text())
    for name, text in made.items():
        if name.endswith("info.json"):
            jsonschema.validate(json.loads(text), schema,
                                format_checker=jsonschema.FormatChecker())


def test_without_format_nothing_new_is_written(made):
    plain = make_exercise(SheetRequest(None, 1, SEED)).files
    assert not any(n.startswith(("moodle", "prairielearn", "qti", "gift", "lms"))
                   for n in plain)
    assert plain["v01/key.json"] == made["v01/key.json"]
    assert plain["v01/sheet.tex"] == made["v01/sheet.tex"]
