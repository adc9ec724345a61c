"""Grading students' worked answers against an exercise key (``symformer grade``).

* :mod:`~symformer.grade.key`: the key folder ``symformer exercise`` writes (its
  ``manifest.toml`` and one example file per variant), derived on demand;
* :mod:`~symformer.grade.answers`: one student's answer file (CSV or TOML);
* :mod:`~symformer.grade.points`: the points file (points per entry, credit shares);
* :mod:`~symformer.grade.grader`: every asked entry graded right, reader rounding,
  follow-through, wrong, missing or unreadable;
* :mod:`~symformer.grade.report`: the class summary (CSV) and the feedback (Markdown).
"""
