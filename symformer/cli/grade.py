"""``symformer grade``: students' answers graded against an exercise key."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from symformer.cli._common import work_limit
from symformer.display import Progress
from symformer.errors import InputError
from symformer.escape import plain_text
from symformer.files import output_directory, write_files
from symformer.grade.answers import AnswerSheet, read_answers
from symformer.grade.grader import Grader, StudentGrade
from symformer.grade.key import load_key
from symformer.grade.points import Points, load_points
from symformer.grade.report import class_table, feedback, feedback_names, summary_csv

ORDER = 47

EPILOG = """\
examples:
  symformer grade answers/*.csv --key exercise/ --out grades/
  symformer grade answers/ --key exercise/ --out grades/ --points points.toml --quiet
  symformer grade ada.toml bob.csv --key exercise/ --out grades/ --keep-going

Every asked entry is graded right, reader rounding (what the step gives from the
key's printed previous tables), follow-through (wrong, but consistent with the
student's own previous numbers), wrong, missing or unreadable. Writes
OUT/summary.csv and OUT/feedback/FILE.md, all or nothing. Answer formats (CSV
`stage,row,col,value` with `student,NAME` and `variant,ID` lines, or TOML) and the
points file: docs/grading.md. An answer file that cannot be read at all, or names
an unknown variant, stops the run (exit 2) unless --keep-going skips it (exit 1).
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``grade`` sub-command."""
    p = sub.add_parser("grade", help="grade students' answers against an exercise key",
                       description="Grade every asked entry of each student's answers, with "
                                   "credit for reader rounding and follow-through.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("answers", nargs="+", metavar="ANSWERS",
                   help="answer files (.csv or .toml), or folders holding them")
    p.add_argument("--key", required=True, metavar="DIR",
                   help="the folder `symformer exercise` wrote (manifest.toml, variants)")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="where summary.csv and feedback/ go")
    p.add_argument("--points", metavar="FILE", default=None,
                   help="points file (TOML): entry, reader_rounding, follow_through, "
                        "[stage] (default: 1 point an entry, reader rounding full, "
                        "follow-through half)")
    p.add_argument("--keep-going", action="store_true",
                   help="skip an answer file that cannot be read or names an unknown "
                        "variant (listed in summary.csv; exit status 1)")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")
    p.add_argument("--max-work", type=work_limit, metavar="N", default=None,
                   help="refuse variants estimated to need more than N operations")
    p.set_defaults(func=run)


def answer_files(items: list[str]) -> list[Path]:
    """The files named, a folder standing for its .csv and .toml files (sorted)."""
    files: list[Path] = []
    for item in items:
        path = Path(item)
        if path.is_dir():
            found = sorted(p for p in path.iterdir()
                           if p.suffix.lower() in (".csv", ".toml") and p.is_file())
            if not found:
                raise InputError(f"{item}: a folder without .csv or .toml answer files")
            files.extend(found)
        else:
            files.append(path)
    return files


def run(args: argparse.Namespace) -> int:
    """Run ``symformer grade``; messages show answer files' names and text escaped
    (a file name in a students' folder is theirs to choose)."""
    try:
        return _grade(args)
    except InputError as exc:
        raise InputError(plain_text(str(exc))) from None


def _grade(args: argparse.Namespace) -> int:
    output_directory(args.out)  # an empty path or a file is refused before any work
    key = load_key(args.key, args.max_work)
    points = load_points(args.points, key.asked) if args.points else Points()
    grader = Grader(key, points)
    grades: list[StudentGrade] = []
    skipped: list[tuple[Path, str]] = []
    paths = answer_files(args.answers)
    with Progress("symformer grade", total=len(paths), quiet=args.quiet) as bar:
        for path in paths:
            bar.update(plain_text(path.name))
            try:
                sheet: AnswerSheet = read_answers(path)
                grader.variant(sheet)
            except InputError as exc:
                if not args.keep_going:
                    raise
                skipped.append((path, str(exc)))
                print(f"symformer grade: skipped: {plain_text(str(exc))}", file=sys.stderr)
                continue
            grades.append(grader.grade(sheet))
    files = {"summary.csv": summary_csv(grades, key.asked, skipped)}
    for name, g in zip(feedback_names(grades), grades):
        files[f"feedback/{name}"] = feedback(g, key.asked, points)
    write_files(args.out, files)
    if not args.quiet:
        if grades:
            print(class_table(grades))
        print(f"{len(grades)} graded" + (f", {len(skipped)} skipped" if skipped else "")
              + f": {args.out}/summary.csv, {args.out}/feedback/")
    return 1 if skipped else 0
