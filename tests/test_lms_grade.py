"""``grade --from moodle|prairielearn|canvas``: a class of planted students answered
through each LMS's own response layout (right, reader rounding, another variant's
answers carried through, wrong), graded, and the gradebook written in the LMS's import
layout; hostile exports (CSV injection, a huge file, a huge cell, unknown students and
variants) refused in one line, nothing lost (docs/lms.md)."""

from __future__ import annotations

import ast
import csv
import io
import json
from pathlib import Path

import pytest

from symformer.cli import main
from symformer.exercise import SheetRequest, make_exercise
from symformer.files import write_files
from symformer.lms import FORMATS, exercise_files


def lms_made(request: SheetRequest, formats) -> dict:
    """An exercise's files with its LMS files (as ``exercise --format`` writes them)."""
    made = make_exercise(request)
    return {**made.files, **exercise_files(made, request, list(formats))}


@pytest.fixture(scope="module")
def key(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("lmskey") / "class"
    write_files(str(folder), lms_made(SheetRequest(None, 2, 7), FORMATS))
    return folder


def blanks(key: Path) -> dict[str, list[dict]]:
    return {v["id"]: v["blanks"] for v in json.loads((key / "lms.json").read_text())["variants"]}


def students(key: Path) -> list[tuple[str, str, list[str]]]:
    """(name, variant, answers in blank order): all right, the key's own lines (reader
    rounding where they differ), another variant's answers, all wrong."""
    b = blanks(key)
    return [("Ada Lovelace", "v01", [x["exact"] for x in b["v01"]]),
            ("Rita Reader", "v02", [x["student"] for x in b["v02"]]),
            ("Carl Copy", "v01", [x["exact"] for x in b["v02"]]),
            ("Walt Wrong", "v02", ["9"] * len(b["v02"]))]


def expect(summary: Path, key: Path) -> None:
    rows = {r["student"]: r for r in csv.DictReader(summary.open())}
    b = blanks(key)
    n = len(b["v01"])
    assert rows["Ada Lovelace"]["right"] == str(n)
    assert int(rows["Rita Reader"]["reader_rounding"]) >= 1
    assert int(rows["Rita Reader"]["right"]) + int(rows["Rita Reader"]["reader_rounding"]) \
        == len(b["v02"])
    assert int(rows["Carl Copy"]["follow_through"]) > 0 and "v02" in rows["Carl Copy"]["note"]
    assert rows["Walt Wrong"]["wrong"] == str(len(b["v02"]))


def csv_text(rows: list[list[str]]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def moodle_export(key: Path, extra: list[list[str]] = ()) -> str:
    rows = [["Surname", "First name", "Email address", "State", "Grade/32.00", "Question 1",
             "Response 1", "Right answer 1"]]
    for name, vid, answers in students(key):
        first, last = name.split()
        email = f"{first.lower()}@uni.example"
        if first == "Rita":
            email = "=HYPERLINK(\"http://evil\")"  # CSV injection, neutralised on output
        rows.append([last, first, email, "Finished", "1", f"symformer variant {vid}: ...",
                     "; ".join(f"part {k}: {a}" for k, a in enumerate(answers, 1)), ""])
    average = ["Overall average", "", "", "", "0.5", "", "", ""]  # Moodle's summary row
    return csv_text(rows + [average] + list(extra))


def run(args: list[str], capsys) -> tuple[int, str]:
    status = main(["grade", *args])
    return status, capsys.readouterr().err


def graded(export: Path, text: str, source: str, key: Path, capsys) -> Path:
    """``export`` written and graded (exit 0); the output folder."""
    export.write_text(text)
    out = export.parent / "grades"
    status, err = run([str(export), "--key", str(key), "--out", str(out), "--from", source,
                       "--quiet"], capsys)
    assert status == 0, err
    return out


def test_moodle_responses_are_graded(tmp_path, capsys, key):
    out = graded(tmp_path / "responses.csv", moodle_export(key), "moodle", key, capsys)
    expect(out / "summary.csv", key)
    book = list(csv.reader((out / "gradebook.csv").open()))
    assert book[0] == ["Email address", "Username", "First name", "Surname",
                       "symformer exercise"]
    emails = [r[0] for r in book[1:]]
    assert "ada@uni.example" in emails and "'=HYPERLINK(\"http://evil\")" in emails
    assert {"Ada_Lovelace.md", "Rita_Reader.md"} <= {p.name for p in (out / "feedback").iterdir()}


def test_prairielearn_submissions_are_graded(tmp_path, capsys, key):
    rows = [["UID", "Name", "Assessment instance", "Question", "Submitted answer"]]
    for name, vid, answers in students(key):
        server = (key / f"prairielearn/symformer-7-{vid}/server.py").read_text()
        consts = {n.targets[0].id: ast.literal_eval(n.value) for n in ast.parse(server).body
                  if isinstance(n, ast.Assign) and isinstance(n.value, ast.Dict)}
        order = [x for x in blanks(key)[vid]]
        by_cell = {f"{x['stage']}[{x['row']},{x['col']}]": a for x, a in zip(order, answers)}
        submitted = {n: by_cell[label] for n, label in consts["LABELS"].items()
                     if n in consts["NUMBERS"]}
        stages = list(dict.fromkeys(x["stage"] for x in order))
        for mname, grid in consts["MATRICES"].items():
            k = int(mname[1:-1])
            mine = [a for x, a in zip(order, answers) if x["stage"] == stages[k - 1]]
            assert len(mine) == sum(len(r) for r in grid)
            submitted.update({f"{mname}{i}": a for i, a in enumerate(mine, 1)})
        uid = name.split()[0].lower() + "@uni.example"
        rows.append([uid, name, "1", f"symformer/symformer-7-{vid}", "{}"])  # an early try
        rows.append(["mallory@uni.example", "M", "1", f"symformer/symformer-7-{vid}",
                     "[" * 50_000 + "]" * 50_000])  # nested past the stack: unreadable
        rows.append([uid, name, "1", f"symformer/symformer-7-{vid}", json.dumps(submitted)])
    out = graded(tmp_path / "all_submissions.csv", csv_text(rows), "prairielearn", key, capsys)
    rows = {r["student"].split("@")[0]: r for r in csv.DictReader((out / "summary.csv").open())}
    assert rows["ada"]["right"] == str(len(blanks(key)["v01"]))
    assert int(rows["carl"]["follow_through"]) > 0
    assert rows["mallory"]["missing"] == str(len(blanks(key)["v02"]))
    book = list(csv.DictReader((out / "gradebook.csv").open()))
    assert [b["qid"] for b in book][0] == "symformer/symformer-7-v01"
    assert {b["uid"]: b["score_perc"] for b in book}["ada@uni.example"] == "100"
    assert {b["uid"]: b["score_perc"] for b in book}["walt@uni.example"] == "0"


def test_canvas_report_is_graded(tmp_path, capsys, key):
    header = ["name", "id", "sis_id", "section", "section_id", "section_sis_id", "submitted",
              "attempt", "101: symformer variant v01: I think", "1.0",
              "102: symformer variant v02: I think", "1.0", "n correct", "n incorrect",
              "score"]
    rows = [header]
    for k, (name, vid, answers) in enumerate(students(key)):
        cells = {"v01": ["", ""], "v02": ["", ""]}
        cells[vid] = [",".join(answers), "1"]
        rows.append([name, str(1000 + k), f"S{k}", "A", "1", "", "2026-12-07", "1",
                     *cells["v01"], *cells["v02"], "", "", ""])
    out = graded(tmp_path / "student_analysis.csv", csv_text(rows), "canvas", key, capsys)
    expect(out / "summary.csv", key)
    book = list(csv.reader((out / "gradebook.csv").open()))
    assert book[0][:4] == ["Student", "ID", "SIS User ID", "Section"]
    assert book[1][0] == "Points Possible"


@pytest.mark.parametrize("bad, words", [
    (["X", "Yan", "yan@x", "Finished", "1", "symformer variant v09: ...", "part 1: 1", ""],
     "unknown variant 'v09'"),
    (["Z", "Zed", "zed@x", "Finished", "1", "a question of another quiz", "1", ""],
     "no question (Question N columns) names a symformer variant"),
    (["", "", "", "Finished", "1", "symformer variant v01", "part 1: 1", ""],
     "no student"),
])
def test_a_row_that_cannot_be_graded_is_one_line(tmp_path, capsys, key, bad, words):
    export = tmp_path / "responses.csv"
    export.write_text(moodle_export(key, [bad]))
    out = tmp_path / "grades"
    status, err = run([str(export), "--key", str(key), "--out", str(out), "--from", "moodle",
                       "--quiet"], capsys)
    lines = err.strip().splitlines()
    assert status == 2 and len(lines) == 1 and words in lines[0] and "responses.csv, line 7" \
        in lines[0] and not out.exists()
    status, err = run([str(export), "--key", str(key), "--out", str(out), "--from", "moodle",
                       "--quiet", "--keep-going"], capsys)
    assert status == 1 and words in err
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert sum(r["total"] != "" for r in rows) == 4  # nothing lost
    assert any(r["note"].startswith("not graded: ") and words in r["note"] for r in rows)


def test_hostile_files_are_refused_in_one_line(tmp_path, capsys, key):
    out = tmp_path / "grades"
    huge = tmp_path / "huge.csv"
    with huge.open("w") as f:
        f.write("Surname,First name\n")
        f.write(("x," * 1000 + "\n") * 4200)  # past the 8 MiB limit
    wide = tmp_path / "wide.csv"
    wide.write_text("Surname,First name,Question 1,Response 1\nA,B,symformer variant v01,\""
                    + "1" * 200_000 + "\"\n")
    other = tmp_path / "other.csv"
    other.write_text("stage,row,col,value\nlayer1.head1.Q,0,0,1\n")
    for path, words in ((huge, "MiB"), (wide, "not CSV"),
                        (other, "not Moodle's responses report")):
        status, err = run([str(path), "--key", str(key), "--out", str(out), "--from",
                           "moodle", "--quiet"], capsys)
        lines = err.strip().splitlines()
        assert status == 2 and len(lines) == 1 and words in lines[0], err
        assert path.name in lines[0] and "Traceback" not in err
    assert not out.exists()


def test_a_key_without_lms_json_is_named(tmp_path, capsys, key):
    plain = tmp_path / "plain"
    write_files(str(plain), make_exercise(SheetRequest(None, 1, 7)).files)
    export = tmp_path / "responses.csv"
    export.write_text(moodle_export(key))
    status, err = run([str(export), "--key", str(plain), "--out", str(tmp_path / "o"),
                       "--from", "moodle"], capsys)
    assert status == 2 and "lms.json: no such file" in err and "--format" in err
