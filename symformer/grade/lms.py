"""Answers back from an LMS: Moodle's responses CSV, PrairieLearn's submissions CSV and
Canvas's quiz report, read as one :class:`AnswerSheet` per student, and the gradebook
CSV in each LMS's import layout (docs/lms.md).

An export is untrusted input like an answer file: read as text of at most 8 MiB (the
example files' limit), at most :data:`MAX_ROWS` rows and :data:`MAX_CELL` characters a
cell; nothing in it is evaluated (PrairieLearn's answers are JSON, read with numbers
kept as their text).  A file that cannot be read at all (not CSV, not the LMS's layout)
is an :class:`InputError`; a row that cannot be tied to a student or to a variant of the
key is one *problem* (its file and line), which stops the run or, with
``--keep-going``, is skipped and listed.  Which blank is which entry comes from the
key's ``lms.json`` (written by ``exercise --format``).
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from symformer.errors import InputError
from symformer.example.loader import read_text_file
from symformer.grade.answers import AnswerSheet, Entry, Remark

#: The LMS exports ``grade --from`` reads.
SOURCES = ("moodle", "prairielearn", "canvas")
#: Rows an export may have (students, or submissions).
MAX_ROWS = 100_000
#: Characters in one cell (a PrairieLearn answer's JSON included).
MAX_CELL = 100_000
_VARIANT = re.compile(r"symformer variant (v[0-9]{2,3})\b")


@dataclass(frozen=True)
class Blank:
    """One blank of a variant's question, as ``lms.json`` lists it."""

    stage: str
    row: int
    col: int


@dataclass
class LmsKey:
    """The key folder's ``lms.json``: every variant's blanks, in question order, and its
    question id (``symformer-7-v01``)."""

    path: Path
    blanks: dict[str, list[Blank]]
    questions: dict[str, str]      # question id -> variant id

    def variant_of_question(self, qid: str) -> str | None:
        """The variant of a question id (a PrairieLearn QID may carry folders)."""
        return self.questions.get(qid.strip().replace("\\", "/").rsplit("/", 1)[-1])


def load_lms_key(key_dir: str | Path) -> LmsKey:
    """Read ``KEY/lms.json``; an error naming it when it is missing or malformed."""
    path = Path(key_dir) / "lms.json"
    if not path.is_file():
        raise InputError(f"{path}: no such file; --from needs the key written with "
                         f"`symformer exercise --format ...` (docs/lms.md)")
    try:
        data = json.loads(read_text_file(path, "lms.json"))
        blanks = {str(v["id"]): [Blank(str(b["stage"]), int(b["row"]), int(b["col"]))
                                 for b in v["blanks"]] for v in data["variants"]}
        questions = {str(v["question"]): str(v["id"]) for v in data["variants"]}
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{path}: not the lms.json `symformer exercise --format` writes "
                         f"({type(exc).__name__}: {str(exc)[:80]})") from None
    return LmsKey(path, blanks, questions)


@dataclass
class Export:
    """What one export gave: a sheet per student, the rows that could not be graded
    (their place, and why), and each student's identity columns for the gradebook."""

    sheets: list[AnswerSheet] = field(default_factory=list)
    problems: list[tuple[Path, str]] = field(default_factory=list)
    identity: dict[str, dict[str, str]] = field(default_factory=dict)  # sheet path -> ids


def _rows(path: Path) -> list[tuple[int, dict[str, str]]]:
    """The export's rows as dicts by header, with their lines, within the limits."""
    text = read_text_file(path, "an LMS export (CSV)").removeprefix("\ufeff")
    reader = csv.reader(io.StringIO(text))
    rows: list[tuple[int, list[str]]] = []
    limit = csv.field_size_limit()
    try:
        csv.field_size_limit(MAX_CELL)
        for row in reader:
            if len(rows) > MAX_ROWS:
                raise InputError(f"{path}: more than {MAX_ROWS:,} rows")
            rows.append((reader.line_num, row))
    except csv.Error as exc:
        raise InputError(f"{path}, line {reader.line_num}: not CSV ({exc})") from None
    finally:
        csv.field_size_limit(limit)
    rows = [(n, r) for n, r in rows if any(c.strip() for c in r)]
    if not rows:
        raise InputError(f"{path}: empty: no header row")
    header = [c.strip() for c in rows[0][1]]
    return [(n, dict(zip(header, r))) for n, r in rows[1:]]


def _need(path: Path, rows: list[tuple[int, dict[str, str]]], columns: tuple[str, ...],
          what: str) -> None:
    if rows and not all(c in rows[0][1] for c in columns):
        missing = [c for c in columns if c not in rows[0][1]]
        raise InputError(f"{path}: not {what}: no column {', '.join(map(repr, missing))}")


def _sheet(export: Path, student: str, vid: str, line: int, values: list[tuple[int, str]],
           blanks: list[Blank], label: str) -> AnswerSheet:
    """A student's sheet from their answers by blank number (from 1)."""
    safe = re.sub(r"[/\\]", "_", student)
    sheet = AnswerSheet(export.parent / f"{export.name}, student {safe}", student, vid, line)
    for number, text in values:
        if not 1 <= number <= len(blanks):
            sheet.unreadable_lines.append(Remark(line, f"{label} {number}: the question has "
                                                       f"{len(blanks)} blanks"))
            continue
        if text.strip():
            b = blanks[number - 1]
            sheet.entries.append(Entry(b.stage, b.row, b.col, text.strip(), line,
                                       f"{label} {number}"))
    return sheet


def _add(out: Export, sheet: AnswerSheet, ids: dict[str, str]) -> None:
    out.sheets.append(sheet)
    out.identity[str(sheet.path)] = ids


def read_export(path: str | Path, source: str, key: LmsKey) -> Export:
    """One LMS export as sheets (the last attempt or submission of each student)."""
    path = Path(path)
    rows = _rows(path)
    reader = {"moodle": _moodle, "prairielearn": _prairielearn, "canvas": _canvas}[source]
    out = Export()
    reader(path, rows, key, out)
    return out


def _known(path: Path, line: int, sid: str, found: list, key: LmsKey, out: Export,
           where: str) -> tuple | None:
    """The first (place, variant) found when its variant is in the key; else a problem
    is recorded (none found, or an unknown variant) and None returned."""
    if not found:
        out.problems.append((path, f"{path}, line {line}: {sid}: no {where} names a "
                                   f"symformer variant"))
        return None
    if found[0][1] not in key.blanks:
        out.problems.append((path, f"{path}, line {line}: {sid}: unknown variant "
                                   f"{found[0][1]!r} (not in {key.path})"))
        return None
    return found[0]


# -- Moodle: Quiz -> Results -> Responses, "Download table data as CSV" --------------
_PART = re.compile(r"(?:^|; )part ([0-9]{1,6}): ")


def _moodle(path: Path, rows, key: LmsKey, out: Export) -> None:
    _need(path, rows, ("Surname", "First name"), "Moodle's responses report")
    latest: dict[str, tuple[int, dict[str, str]]] = {}
    for line, row in rows:
        if row.get("Surname", "").strip() == "Overall average":  # Moodle's summary row
            continue
        sid = (row.get("Email address") or row.get("Username") or row.get("ID number")
               or f"{row.get('First name', '')} {row.get('Surname', '')}").strip()
        if not sid:
            out.problems.append((path, f"{path}, line {line}: no student (no name or email)"))
            continue
        latest[sid] = (line, row)  # the last attempt listed
    for sid, (line, row) in latest.items():
        slots = sorted((m.group(1) for c in row
                        if (m := re.fullmatch(r"Question ([0-9]{1,4})", c))), key=int)
        found = [(n, _VARIANT.search(row.get(f"Question {n}", ""))) for n in slots]
        picked = _known(path, line, sid, [(n, m.group(1)) for n, m in found if m], key, out,
                        "question (Question N columns)")
        if picked is None:
            continue
        n, vid = picked
        response = row.get(f"Response {n}", "")
        pieces = _PART.split(response)
        values = [(int(pieces[k]), pieces[k + 1]) for k in range(1, len(pieces) - 1, 2)]
        sheet = _sheet(path, f"{row.get('First name', '')} {row.get('Surname', '')}".strip()
                       or sid, vid, line, values, key.blanks[vid], "part")
        _add(out, sheet, {"Email address": row.get("Email address", ""),
                          "Username": row.get("Username", ""),
                          "First name": row.get("First name", ""),
                          "Surname": row.get("Surname", ""), "id": sid})


# -- PrairieLearn: Downloads -> <assessment>_all_submissions.csv (or best) -----------
def _prairielearn(path: Path, rows, key: LmsKey, out: Export) -> None:
    _need(path, rows, ("UID", "Question", "Submitted answer"),
          "PrairieLearn's submissions CSV")
    latest: dict[tuple[str, str], tuple[int, dict[str, str]]] = {}
    for line, row in rows:
        uid, qid = row.get("UID", "").strip(), row.get("Question", "").strip()
        if not uid:
            out.problems.append((path, f"{path}, line {line}: no student (UID empty)"))
            continue
        latest[(uid, qid)] = (line, row)  # the last submission listed
    for (uid, qid), (line, row) in latest.items():
        vid = key.variant_of_question(qid)
        if vid is None:
            out.problems.append((path, f"{path}, line {line}: {uid}: unknown question "
                                       f"{qid[:80]!r} (not in {key.path})"))
            continue
        try:
            answer = json.loads(row.get("Submitted answer") or "{}", parse_float=str,
                                parse_int=str)
        except (ValueError, RecursionError):  # not JSON, or nested past Python's stack
            answer = None
        blanks = key.blanks[vid]
        if not isinstance(answer, dict):
            sheet = _sheet(path, uid, vid, line, [], blanks, "e")
            sheet.unreadable_lines.append(Remark(line, "Submitted answer is not a JSON "
                                                       "object"))
        else:
            sheet = _sheet(path, uid, vid, line, _pl_values(answer, blanks), blanks, "blank")
        _add(out, sheet, {"uid": uid, "instance": row.get("Assessment instance", "1") or "1",
                          "qid": qid, "id": uid})


def _pl_values(answer: dict, blanks: list[Blank]) -> list[tuple[int, str]]:
    """Blank numbers and answers from PrairieLearn's submitted answers: ``e07`` (a
    number input) and ``m3_2`` (the 2nd entry, row by row, of the 3rd asked stage's
    matrix input: its stage's asked rows, every column)."""
    stages = list(dict.fromkeys(b.stage for b in blanks))
    out: list[tuple[int, str]] = []
    for name, value in answer.items():
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            continue
        if m := re.fullmatch(r"e([0-9]{1,6})", name):
            out.append((int(m.group(1)), str(value)))
        elif m := re.fullmatch(r"m([0-9]{1,4})_([0-9]{1,6})", name):
            k, idx = int(m.group(1)), int(m.group(2))
            if not 1 <= k <= len(stages):
                continue
            mine = [n for n, b in enumerate(blanks, 1) if b.stage == stages[k - 1]]
            if 1 <= idx <= len(mine):
                out.append((mine[idx - 1], str(value)))
    return out


# -- Canvas: Quiz -> Student Analysis (CSV) -----------------------------------------
def _canvas(path: Path, rows, key: LmsKey, out: Export) -> None:
    _need(path, rows, ("name", "id"), "Canvas's Student Analysis report")
    latest: dict[str, tuple[int, dict[str, str]]] = {}
    for line, row in rows:
        sid = row.get("id", "").strip()
        if not sid:
            out.problems.append((path, f"{path}, line {line}: no student (id empty)"))
            continue
        latest[sid] = (line, row)
    for sid, (line, row) in latest.items():
        found = [(c, m.group(1)) for c in row if (m := _VARIANT.search(c)) and row[c].strip()]
        picked = _known(path, line, sid, found, key, out, "answered question")
        if picked is None:
            continue
        column, vid = picked
        answers = [a.strip() for a in row[column].split(",")]
        sheet = _sheet(path, row.get("name", "").strip() or sid, vid, line,
                       list(enumerate(answers, 1)), key.blanks[vid], "blank")
        _add(out, sheet, {"name": row.get("name", ""), "id": sid,
                          "sis_id": row.get("sis_id", ""), "section": row.get("section", "")})
