"""Exercises where lecturers already work: Moodle, PrairieLearn, QTI 2.1 and GIFT files
beside the sheets and keys (``symformer exercise --format``), and the map ``grade``
reads an LMS's responses back with (``lms.json``).  See docs/lms.md."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from symformer.lms.question import Question, make_question

if TYPE_CHECKING:
    from symformer.exercise import Exercise, SheetRequest

__all__ = ["FORMATS", "Question", "exercise_files", "lms_files", "make_question"]

#: The formats of ``exercise --format``.
FORMATS = ("moodle", "prairielearn", "qti", "gift")
#: The format number of ``lms.json``.
LMS_FORMAT = 1


def exercise_id(seed: int) -> str:
    """The prefix of every question's id: ``symformer-7``."""
    return f"symformer-{seed}"


def lms_files(questions: list[Question], formats: list[str], *, asked: list[str],
              seed: int, identity: str, title: str) -> dict[str, str | bytes]:
    """Every file of the requested formats, and ``lms.json`` (each variant's blanks in
    order, and its question id in each format)."""
    from symformer.lms.gift import gift
    from symformer.lms.moodle import moodle_xml
    from symformer.lms.prairielearn import question_files, question_uuid
    from symformer.lms.qti import qti_package

    prefix = exercise_id(seed)
    category = "symformer/" + re.sub(r"[/\s]+", " ", f"{title} (seed {seed})").strip()
    files: dict[str, str | bytes] = {}
    if "moodle" in formats:
        files["moodle.xml"] = moodle_xml(questions, asked, category, prefix)
    if "gift" in formats:
        files["gift.txt"] = gift(questions, category)
    if "qti" in formats:
        files["qti.zip"] = qti_package(questions, asked, prefix)
    if "prairielearn" in formats:
        for q in questions:
            for name, text in question_files(q, asked, identity, title).items():
                files[f"prairielearn/{prefix}-{q.vid}/{name}"] = text
    data = {"format": LMS_FORMAT, "seed": seed, "formats": sorted(formats),
            "variants": [{"id": q.vid, "question": f"{prefix}-{q.vid}",
                          "uuid": question_uuid(identity, q.vid),
                          "blanks": [{"stage": b.stage, "row": b.row, "col": b.col,
                                      "exact": b.exact, "student": b.student}
                                     for b in q.blanks]}
                         for q in questions]}
    files["lms.json"] = json.dumps(data, indent=1) + "\n"
    return files


def exercise_files(made: Exercise, request: SheetRequest, formats: list[str]
                   ) -> dict[str, str | bytes]:
    """The LMS files of ``formats`` for an exercise just made (``exercise --format``),
    from each variant's derivation and the ``key.json`` written for it."""
    questions = [make_question(v.id, v.derivation, made.asked, request.decimals, made.token,
                               str(made.files[f"{v.id}/key.json"])) for v in made.variants]
    identity = (f"{request.template or '<built-in>'}:{request.seed}:{request.decimals}:"
                f"{made.token}:{','.join(made.asked)}")
    return lms_files(questions, formats, asked=made.asked, seed=request.seed,
                     identity=identity, title=made.title)
