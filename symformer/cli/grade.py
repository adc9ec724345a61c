"""``symformer grade``: students' answers graded against an exercise key."""

from __future__ import annotations

import argparse
import sys
from functools import lru_cache
from pathlib import Path

from symformer.cli._common import bounded_int, work_limit
from symformer.cli._progress import Progress
from symformer.errors import InputError
from symformer.escape import plain_text
from symformer.files import output_directory, write_files
from symformer.grade.answers import AnswerSheet, read_answers
from symformer.grade.grader import Grader, StudentGrade
from symformer.grade.key import Key, load_key
from symformer.grade.lms import SOURCES
from symformer.grade.points import Points, load_points
from symformer.grade.report import (
    class_table,
    feedback,
    feedback_names,
    gradebook_csv,
    summary_csv,
)
from symformer.parallel import MAX_JOBS, run_tasks
from symformer.words import plural

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
    p.add_argument("--from", dest="source", choices=SOURCES,
                   default=None,
                   help="ANSWERS are an LMS's response export (Moodle's responses CSV, "
                        "PrairieLearn's submissions CSV, Canvas's Student Analysis CSV) of "
                        "an exercise written with --format; also writes gradebook.csv in "
                        "the LMS's import layout (docs/lms.md)")
    p.add_argument("--keep-going", action="store_true",
                   help="skip an answer file that cannot be read or names an unknown "
                        "variant (listed in summary.csv; exit status 1)")
    p.add_argument("--jobs", type=bounded_int(1, MAX_JOBS), default=1, metavar="N",
                   help="grade on N local processes (default 1); the results are the "
                        "serial run's, in the same order")
    p.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="grade each answer file as a task on the Dask scheduler at ADDRESS "
                        "(tcp://host:8786; needs the distributed package)")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")
    p.add_argument("--max-work", type=work_limit, metavar="N", default=None,
                   help="refuse variants estimated to need more than N operations")
    p.set_defaults(func=run)


def answer_files(items: list[str], keep_going: bool = False
                 ) -> tuple[list[Path], list[tuple[Path, str]]]:
    """The files named, a folder standing for its .csv and .toml files (sorted), and
    the folders without any (each with its reason; an error unless ``keep_going``)."""
    files: list[Path] = []
    empty: list[tuple[Path, str]] = []
    for item in items:
        path = Path(item)
        if path.is_dir():
            found = sorted(p for p in path.iterdir()
                           if p.suffix.lower() in (".csv", ".toml") and p.is_file())
            if not found:
                reason = f"{item}: a folder without .csv or .toml answer files"
                if not keep_going:
                    raise InputError(reason)
                empty.append((path, reason))
            files.extend(found)
        else:
            files.append(path)
    return files, empty


def key_fingerprint(key_dir: str, points_path: str | None) -> str:
    """A digest of what grading reads of the key (its manifest, the variants' examples)
    and of the points file: a process's cached grader is reused only for the same."""
    import hashlib

    digest = hashlib.sha256()
    folder = Path(key_dir)
    for path in [folder / "manifest.toml", *sorted(folder.glob("*/example.toml")),
                 *([Path(points_path)] if points_path else [])]:
        digest.update(str(path).encode() + b"\0")
        try:
            digest.update(path.read_bytes()[:2**24] if path.is_file() else b"-")
        except OSError:
            digest.update(b"?")
    return digest.hexdigest()


@lru_cache(maxsize=4)
def _grader(key_dir: str, points_path: str | None, max_work: int | None,
            fingerprint: str) -> Grader:
    """One key's grader, made once per process (it caches what every student shares)."""
    key = load_key(key_dir, max_work)
    return Grader(key, load_points(points_path, key.asked) if points_path else Points())


def grade_file(key_dir: str, points_path: str | None, path: str | AnswerSheet,
               max_work: int | None, fingerprint: str) -> StudentGrade:
    """One task: the answer file ``path`` (or a sheet read from an LMS export) graded
    against the key of ``key_dir``."""
    grader = _grader(key_dir, points_path, max_work, fingerprint)
    sheet = path if isinstance(path, AnswerSheet) else read_answers(Path(path))
    grader.variant(sheet)
    return grader.grade(sheet)


def _exports(args: argparse.Namespace, paths: list[Path], skipped: list[tuple[Path, str]]
             ) -> tuple[list[AnswerSheet], dict[str, dict[str, str]]]:
    """``--from``: every export's sheets and identities; a file or row that cannot be
    graded stops the run, or with --keep-going is reported and added to ``skipped``."""
    from symformer.grade.lms import load_lms_key, read_export

    key = load_lms_key(args.key)
    sheets: list[AnswerSheet] = []
    identity: dict[str, dict[str, str]] = {}
    for path in paths:
        try:
            export = read_export(path, args.source, key)
        except InputError as exc:
            if not args.keep_going:
                raise
            export = None
            problems = [(path, str(exc))]
        else:
            problems = export.problems
        for where, reason in problems:
            if not args.keep_going:
                raise InputError(reason)
            skipped.append((where, reason))
            print(f"symformer grade: skipped: {plain_text(reason)}", file=sys.stderr)
        if export is not None:
            sheets += export.sheets
            identity.update(export.identity)
    return sheets, identity


def run(args: argparse.Namespace) -> int:
    """Run ``symformer grade``; messages show answer files' names and text escaped
    (a file name in a students' folder is theirs to choose)."""
    try:
        return _grade(args)
    except InputError as exc:
        raise InputError(plain_text(str(exc))) from None


def _check_work(key: Key, files: int, max_work: int | None) -> None:
    """Refuse, before any is derived, grading ``files`` answer files over the work limit
    (:func:`symformer.blocks.cost.grade_work`; the first variant's example gives the
    shapes: a variant that cannot be read is left to the grading, which names it)."""
    from symformer.blocks.cost import estimate
    from symformer.blocks.work import check_work
    from symformer.example.loader import load_example

    first = next(iter(key.variants.values()))
    try:
        example = load_example(first.example)
    except (InputError, OSError):
        return
    check_work(estimate("grade", example, variants=len(key.variants), files=files),
               max_work, f"{key.path.parent}: `symformer grade` of "
               f"{plural(files, 'answer file')}")


def _grade(args: argparse.Namespace) -> int:
    output_directory(args.out)  # an empty path or a file is refused before any work
    fingerprint = key_fingerprint(str(args.key), args.points)
    # made (and checked) here once; the serial run's tasks reuse it from the cache
    grader = _grader(str(args.key), args.points, args.max_work, fingerprint)
    key, points = grader.key, grader.points
    grades: list[StudentGrade] = []
    paths, skipped = answer_files(args.answers, args.keep_going)
    for _, reason in skipped:
        print(f"symformer grade: skipped: {plain_text(reason)}", file=sys.stderr)
    identity: dict[str, dict[str, str]] = {}
    items: list[str | AnswerSheet] = [str(p) for p in paths]
    if args.source:
        sheets, identity = _exports(args, paths, skipped)
        items, paths = list(sheets), [s.path for s in sheets]
    _check_work(key, len(items), args.max_work)
    tasks = [(str(args.key), args.points, item, args.max_work, fingerprint)
             for item in items]
    with Progress("symformer grade", total=len(paths), quiet=args.quiet) as bar:
        outcomes = run_tasks(grade_file, tasks, [plain_text(p.name) for p in paths],
                             jobs=args.jobs, scheduler=args.scheduler, progress=bar.step)
    for path, outcome in zip(paths, outcomes):  # in the files' order, as a serial run
        if outcome.ok:
            grades.append(outcome.value)
            continue
        if not args.keep_going:
            raise InputError(outcome.error)
        skipped.append((path, outcome.error))
        print(f"symformer grade: skipped: {plain_text(outcome.error)}", file=sys.stderr)
    files = {"summary.csv": summary_csv(grades, key.asked, skipped)}
    for name, g in zip(feedback_names(grades, bool(args.source)), grades):
        files[f"feedback/{name}"] = feedback(g, key.asked, points)
    if args.source:
        files["gradebook.csv"] = gradebook_csv(args.source, grades, identity)
    write_files(args.out, files)
    if not args.quiet:
        if grades:
            print(class_table(grades))
        print(f"{len(grades)} graded" + (f", {len(skipped)} skipped" if skipped else "")
              + f": {args.out}/summary.csv, {args.out}/feedback/")
    return 1 if skipped else 0
