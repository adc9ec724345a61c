"""What ``grade`` writes: the class summary (CSV) and one feedback file per student
(Markdown), and the short table it prints."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

from symformer.engine.rounding import round_fraction
from symformer.escape import markdown_text, plain_text
from symformer.grade.grader import VERDICTS, EntryGrade, StudentGrade
from symformer.grade.points import Points
from symformer.worked.numbers import terminating

#: Decimals of a score that has no exact decimal (points of 1/3).
SCORE_DECIMALS = 3
#: Verdicts as the feedback and the summary's header words them.
WORDS = {"right": "right", "reader_rounding": "reader rounding",
         "follow_through": "follow-through", "wrong": "wrong", "missing": "missing",
         "unreadable": "unreadable"}
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def score(value: Fraction) -> str:
    """Points as text: exact when they have a finite decimal, else to 3 decimals."""
    return terminating(value) or round_fraction(value, decimals=SCORE_DECIMALS).fixed()


#: First characters that make a spreadsheet read a cell as a formula.
_FORMULA = ("=", "+", "-", "@")


def _cell(text: str) -> str:
    """A text cell a spreadsheet will not run as a formula and that hides nothing:
    leading ASCII spaces are dropped, every invisible character (a BOM, a zero-width
    space, a Hangul filler, a tab) escaped (:func:`plain_text`), leading ones too, so a
    name never looks blank nor like another; a cell still starting with a formula
    character gets a quote."""
    shown = plain_text(text.lstrip(" "))
    return "'" + shown if shown[:1] in _FORMULA else shown


def summary_csv(grades: list[StudentGrade], asked: tuple[str, ...],
                skipped: Sequence[tuple[Path, str]] = ()) -> str:
    """One row per student: variant, score per asked stage, total, counts, note; then
    a row for each skipped file (no scores, the reason as its note)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["student", "file", "variant", *asked, "total", "maximum", *VERDICTS,
                     "extra", "note"])
    for g in grades:
        writer.writerow([_cell(g.sheet.student), _cell(str(g.sheet.path)),
                         _cell(g.sheet.variant),
                         *(score(g.stage_score(s)) for s in asked), score(g.total),
                         score(g.maximum), *(g.count(v) for v in VERDICTS), len(g.extra),
                         _cell(g.copied)])
    blank = [""] * (len(asked) + 3 + len(VERDICTS))
    for path, why in skipped:
        writer.writerow([_cell(path.stem), _cell(str(path)), "", *blank,
                         _cell(f"not graded: {why}")])
    return out.getvalue()


def feedback_names(grades: list[StudentGrade], by_student: bool = False) -> list[str]:
    """A distinct file name per student, from the answer file's name (``by_student``:
    from the student's name, for the many students of one LMS export)."""
    names: list[str] = []
    for g in grades:
        stem = g.sheet.student if by_student else g.sheet.path.stem
        base = _UNSAFE.sub("_", stem).strip("._") or "student"
        name, k = f"{base}.md", 2
        while name in names:
            name, k = f"{base}-{k}.md", k + 1
        names.append(name)
    return names


def _entry_name(e: EntryGrade) -> str:
    return f"`{e.stage}[{e.row},{e.col}]` ({markdown_text(e.place)})"


def _written(e: EntryGrade) -> str:
    if e.answer is None:
        return "no answer"
    line = f" (line {e.line})" if e.line else ""
    return f"you wrote {_code(e.answer.strip())}{line}"


def _code(text: str) -> str:
    """``text`` as a Markdown code span (its invisible characters escaped; a fence
    longer than any run of backticks in it)."""
    shown = plain_text(text)
    fence = "`" * (max((len(r) for r in re.findall("`+", shown)), default=0) + 1)
    pad = " " if shown.startswith("`") or shown.endswith("`") else ""
    return f"{fence}{pad}{shown}{pad}{fence}"


def _prose(text: str) -> str:
    """Text from an answer file for Markdown prose: invisible characters escaped."""
    return markdown_text(plain_text(text))


def feedback(g: StudentGrade, asked: tuple[str, ...], points: Points) -> str:
    """The student's feedback in Markdown: scores per stage, then every entry not right
    with the first step that went wrong and the correct value."""
    sheet = g.sheet
    lines = [f"# Feedback: {_prose(sheet.student)} (variant "
             f"{_prose(sheet.variant)})", "",
             f"Answers: {_prose(str(sheet.path))}. Score: **{score(g.total)} of "
             f"{score(g.maximum)}** points.", ""]
    if g.copied:
        lines += [f"**Note:** {_prose(g.copied)}.", ""]
    lines += ["| stage | points | " + " | ".join(WORDS[v] for v in VERDICTS) + " |",
              "|---|---:|" + "---:|" * len(VERDICTS)]
    for stage in asked:
        mine = [e for e in g.entries if e.stage == stage]
        maximum = sum((e.points for e in mine), Fraction(0))
        counts = [str(sum(e.verdict == v for e in mine)) for v in VERDICTS]
        lines.append(f"| `{stage}` | {score(g.stage_score(stage))} of {score(maximum)} | "
                     + " | ".join(counts) + " |")
    by_place = {(e.stage, e.row, e.col): e for e in g.entries}
    problems = [e for e in g.entries if e.verdict not in ("right", "reader_rounding")]
    if problems:
        lines += ["", "## Entries to look at again", ""]
    for e in problems:
        text = f"- {_entry_name(e)}: **{WORDS[e.verdict]}**, {_written(e)}"
        if e.note:
            text += f" ({_prose(e.note)})"
        text += f"; correct: `{e.correct}`."
        if e.verdict == "follow_through":
            text += (f" It follows from your own previous numbers: "
                     f"{score(points.follow_through)} of the entry's points.")
        first = e.first_wrong
        if first is not None and first != (e.stage, e.row, e.col):
            f = by_place[first]
            text += (f" The first step that went wrong: {_entry_name(f)}, "
                     f"{_written(f)}, correct `{f.correct}`.")
        elif first is not None:
            text += " This is the first step that went wrong."
        lines.append(text)
    reader = [e for e in g.entries if e.verdict == "reader_rounding"]
    if reader:
        lines += ["", "## Reader rounding (credited)", "",
                  "These differ from the exact value's rounding but are what the step gives "
                  "from the key's previous tables as printed:", ""]
        lines += [f"- {_entry_name(e)}: {_written(e)}; the exact value rounds to "
                  f"`{e.correct}`." for e in reader]
    if g.extra:
        lines += ["", "## Not graded", ""]
        lines += [f"- {'line ' + str(r.line) + ': ' if r.line else ''}{_prose(r.text)}"
                  for r in g.extra]
    return "\n".join(lines) + "\n"


def class_table(grades: list[StudentGrade]) -> str:
    """The lines ``grade`` prints: one per student (text from the files escaped)."""
    names = [plain_text(g.sheet.student) for g in grades]
    width = max((len(n) for n in names), default=7)
    rows = []
    for g, name in zip(grades, names):
        flags = [f"{g.count(v)} {WORDS[v]}" for v in VERDICTS[1:] if g.count(v)]
        if g.extra:
            flags.append(f"{len(g.extra)} not graded")
        rows.append(f"{name:<{width}}  {plain_text(g.sheet.variant):<5} "
                    f"{score(g.total):>7} of {score(g.maximum):<6} " + ", ".join(flags)
                    + (f"  [{plain_text(g.copied)}]" if g.copied else ""))
    return "\n".join(rows)


#: The gradebook's grade column (an LMS creates the grade item on import).
GRADE_ITEM = "symformer exercise"


def gradebook_csv(source: str, grades: list[StudentGrade],
                  identity: dict[str, dict[str, str]]) -> str:
    """The class's points in the LMS's gradebook import layout (docs/lms.md): Moodle
    (Grades -> Import -> CSV: email, username, names, points), PrairieLearn (Upload new
    question scores: uid, instance, qid, score_perc, feedback), Canvas (Gradebook ->
    Import: Student, ID, SIS User ID, Section, points, with a Points Possible row).
    Every text cell is written as :func:`_cell` writes it (no formula runs)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    ids = [identity.get(str(g.sheet.path), {}) for g in grades]
    if source == "moodle":
        writer.writerow(["Email address", "Username", "First name", "Surname", GRADE_ITEM])
        for g, i in zip(grades, ids):
            writer.writerow([*(_cell(i.get(k, "")) for k in ("Email address", "Username",
                                                             "First name", "Surname")),
                             score(g.total)])
    elif source == "prairielearn":
        writer.writerow(["uid", "instance", "qid", "score_perc", "feedback"])
        for g, i in zip(grades, ids):
            percent = g.total * 100 / g.maximum if g.maximum else Fraction(0)
            words = ", ".join(f"{g.count(v)} {WORDS[v]}" for v in VERDICTS if g.count(v))
            writer.writerow([_cell(i.get("uid", "")), _cell(i.get("instance", "1")),
                             _cell(i.get("qid", "")), score(percent),
                             _cell(f"symformer grade: {words}")])
    else:
        writer.writerow(["Student", "ID", "SIS User ID", "Section", GRADE_ITEM])
        maximum = max((g.maximum for g in grades), default=Fraction(0))
        writer.writerow(["Points Possible", "", "", "", score(maximum)])
        for g, i in zip(grades, ids):
            writer.writerow([_cell(i.get("name", "")), _cell(i.get("id", "")),
                             _cell(i.get("sis_id", "")), _cell(i.get("section", "")),
                             score(g.total)])
    return out.getvalue()
