"""One student's answer file, CSV or TOML (the formats: docs/grading.md).

A file that cannot be read at all (missing, not UTF-8 text, invalid TOML, no variant
id, two students in one file) raises :class:`InputError` naming the file and line.
Inside a readable file nothing raises: a value that is not a number is kept as an
*unreadable* answer, a line that names no entry as an *unreadable line*, both with
their line numbers, for the grader to report.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from symformer.errors import InputError
from symformer.example.literals import exact_number
from symformer.example.loader import read_text_file, read_toml
from symformer.grade.lines import at_line, line_of, table_line

#: Answer texts meaning a masked score (the key's "-inf").
MINUS_INFINITY = {"-inf", "-infinity", "-∞", "−∞", "−inf"}
#: Column names of a CSV answer file's header row ("column" is accepted for "col").
COLUMNS = ("student", "variant", "stage", "row", "col", "value")
_ALIASES = {"column": "col", "name": "student", "entry": "value", "answer": "value"}
_TOML_KEYS = {"student", "variant", "answers"}
#: A plain decimal such as -1.25 (short enough to need no range check).
_PLAIN = re.compile(r"[+-]?[0-9]{1,20}(?:\.[0-9]{1,30})?", re.ASCII)


@dataclass
class Entry:
    """One answered entry as written: stage name, 0-based row and column, value text."""

    stage: str
    row: int
    col: int
    text: str
    line: int | None        # 1-based line of the file (TOML: the stage's line)
    label: str = ""         # how the file addresses it, for messages: "[1][0]"

    @property
    def value(self) -> Fraction | None:
        """The exact number written (None for -inf); InputError when it is not one."""
        return parse_value(self.text)


@dataclass
class Remark:
    """A line of the file that names no asked entry, and why."""

    line: int | None
    text: str


@dataclass
class AnswerSheet:
    """A student's answers: who, which variant, every entry written."""

    path: Path
    student: str
    variant: str
    variant_line: int | None
    entries: list[Entry] = field(default_factory=list)
    unreadable_lines: list[Remark] = field(default_factory=list)

    def where(self, line: int | None) -> str:
        """``FILE, line N``."""
        return at_line(str(self.path), line)


def parse_value(text: str) -> Fraction | None:
    """A student's number, exactly: ``1.25``, ``-0.5``, ``1,25`` (a decimal comma),
    ``3/4``, ``−0.5`` (a typographic minus); ``-inf`` for a masked score (None).

    >>> parse_value("1,25"), parse_value("−0.5"), parse_value("-inf")
    (Fraction(5, 4), Fraction(-1, 2), None)
    """
    cleaned = text.strip().replace("−", "-").replace(" ", "")
    if cleaned.lower() in MINUS_INFINITY:
        return None
    if cleaned.count(",") == 1 and "." not in cleaned:
        cleaned = cleaned.replace(",", ".")
    if _PLAIN.fullmatch(cleaned):  # the usual answer: read directly, exactly
        return Fraction(cleaned)
    r = exact_number(cleaned, repr(text))
    return Fraction(int(r.p), int(r.q))


def read_answers(path: str | Path) -> AnswerSheet:
    """Read one answer file: ``.toml`` as TOML, anything else as CSV."""
    path = Path(path)
    text = read_text_file(path, "an answer file (CSV or TOML)").removeprefix("\ufeff")
    if path.suffix.lower() == ".toml":
        return _from_toml(text, path)
    return _from_csv(text, path)


# -- CSV --------------------------------------------------------------------------
def _delimiter(text: str) -> str:
    """The separator of the first line with cells: ``,``, or ``;`` / tab if more frequent
    (spreadsheets that write decimal commas separate cells with ``;``)."""
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            return max((",", ";", "\t"), key=line.count)  # "," wins a tie (listed first)
    return ","


def _from_csv(text: str, path: Path) -> AnswerSheet:
    source = str(path)
    meta: dict[str, tuple[str, int]] = {}
    columns: dict[str, int] | None = None
    entries: list[Entry] = []
    unreadable: list[Remark] = []
    reader = csv.reader(io.StringIO(text), delimiter=_delimiter(text))
    try:
        rows = [(reader.line_num, row) for row in reader]
    except csv.Error as exc:
        raise InputError(f"{source}, line {reader.line_num}: not CSV ({exc})") from None
    for line, row in rows:
        cells = [c.strip() for c in row]
        while cells and not cells[-1]:
            cells.pop()
        if not cells or cells[0].startswith("#"):
            continue
        names = [_ALIASES.get(c.lower(), c.lower()) for c in cells]
        if names[0] in ("student", "variant") and len(cells) == 2 and \
                (columns is None or "stage" not in columns):
            _set(meta, names[0], cells[1], line, source)
            continue
        if {"stage", "row", "col", "value"} <= set(names) and set(names) <= set(COLUMNS):
            columns = {n: k for k, n in enumerate(names)}
            continue
        cols = columns or {"stage": 0, "row": 1, "col": 2, "value": 3}
        for key in ("student", "variant"):
            if key in cols and cols[key] < len(cells) and cells[cols[key]]:
                _set(meta, key, cells[cols[key]], line, source)
        entry = _csv_entry(cells, cols, line)
        if isinstance(entry, Remark):
            unreadable.append(entry)
        elif entry is not None:
            entries.append(entry)
    return _sheet(path, meta, entries, unreadable)


def _set(meta: dict[str, tuple[str, int]], key: str, value: str, line: int,
         source: str) -> None:
    if key in meta and meta[key][0] != value:
        raise InputError(f"{source}, line {line}: {key} {value!r} differs from "
                         f"{meta[key][0]!r} on line {meta[key][1]} (one file per student)")
    meta.setdefault(key, (value, line))


def _csv_entry(cells: list[str], cols: dict[str, int], line: int) -> Entry | Remark | None:
    """An entry (its value unread), a remark on an unreadable line, or None (blank)."""
    need = [cols[k] for k in ("stage", "row", "col")]
    if max(need) >= len(cells):
        return Remark(line, f"expected stage, row, col, value; found {','.join(cells)!r}")
    stage, row, col = (cells[k] for k in need)
    value = cells[cols["value"]] if cols["value"] < len(cells) else ""
    for what, text in (("row", row), ("col", col)):
        if not (text.isascii() and text.isdigit()) or len(text) > 9:
            return Remark(line, f"{what} {text!r} is not a 0-based {what} number")
    if not value:
        return None  # a blank cell: the entry is missing
    return Entry(stage, int(row), int(col), value, line, f"[{row},{col}]")


def _sheet(path: Path, meta: dict[str, tuple[str, int]], entries: list[Entry],
           unreadable: list[Remark]) -> AnswerSheet:
    if "variant" not in meta:
        raise InputError(f"{path}: no variant id: add a line `variant,ID` (CSV) or "
                         f"variant = \"ID\" (TOML), ID as on the student's sheet")
    student = meta["student"][0] if "student" in meta else path.stem
    return AnswerSheet(path, student, meta["variant"][0], meta["variant"][1], entries,
                       unreadable)


# -- TOML -------------------------------------------------------------------------
def _from_toml(text: str, path: Path) -> AnswerSheet:
    source = str(path)
    data = read_toml(text, source)
    meta: dict[str, tuple[str, int]] = {}
    unreadable: list[Remark] = []
    for key in sorted(set(data) - _TOML_KEYS):
        unreadable.append(Remark(line_of(text, key), f"unknown key {key!r} (expected "
                                                     f"student, variant, [answers])"))
    for key in ("student", "variant"):
        if key in data:
            line = line_of(text, key) or 0
            if not isinstance(data[key], str) or not data[key].strip():
                raise InputError(f"{at_line(source, line)}: {key} must be a non-empty "
                                 f"string")
            meta[key] = (data[key].strip(), line)
    answers = data.get("answers", {})
    if not isinstance(answers, dict):
        raise InputError(f"{at_line(source, line_of(text, 'answers'))}: answers must be a "
                         f"table: [answers] with one line per stage")
    entries: list[Entry] = []
    after = table_line(text, "answers") or 0
    for stage, matrix in answers.items():
        line = line_of(text, stage, after=after) or line_of(text, stage)
        if not isinstance(matrix, list) or not all(isinstance(r, list) for r in matrix):
            unreadable.append(Remark(line, f"{stage}: expected a list of rows "
                                           f"[[...], [...]]"))
            continue
        for i, row in enumerate(matrix):
            for j, value in enumerate(row):
                if isinstance(value, str) and not value.strip():
                    continue  # "": left blank, missing
                text_value = value if isinstance(value, str) else \
                    str(value) if type(value) is int else repr(value)
                entries.append(Entry(stage, i, j, text_value, line, f"[{i}][{j}]"))
    return _sheet(path, meta, entries, unreadable)
