"""``equations.json``: every shown stage's general equation, printed and checkable.

For each stage, the lines as printed (LaTeX, text) and as a plain Python-syntax index
form over named arrays, with each array name mapped to what it stands for (a stage of
``derive --json``/``backward --json``, a parameter of the example, or a constant the
operation holds, written out), each size and scalar given.  docs/export.md says how
to evaluate it; tests/test_equations_json.py does, against ``derive --json``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from symformer.equations.stage import Bound, StageEquation, result_name, stage_equation


def _exact(value: Any) -> str:
    from symformer.lazy import sympy
    return str(sympy.sympify(value))


def _part(bound: Bound, contribution: int | None) -> dict[str, Any]:
    arrays = {}
    lhs = result_name(bound)
    for name, source in bound.sources.items():
        entry = dict(source)
        if name == lhs and contribution is not None:
            entry = {"contribution": contribution, **entry}
        if "parameter" in entry:  # its exact value: derive --json lists stages only
            m = bound.matrices[name]
            entry["value"] = [[str(v) for v in m.row(i)] for i in range(m.rows)]
        arrays[name] = entry
    return {
        "lines": [{"latex": line.latex, "text": line.text, "plain": line.plain}
                  for line in bound.lines(where=False)],
        "where": [{"latex": line.latex, "text": line.text, "plain": line.plain}
                  for line in bound.lines()[len(bound.printed):]],
        "arrays": arrays,
        "sizes": dict(bound.sizes),
        "scalars": {name: _exact(value) for name, value in bound.eq.scalars.items()},
        "ranges": dict(bound.eq.ranges),
    }


def stage_entry(found: StageEquation) -> dict[str, Any]:
    """One stage's record: its parts (one per rule) and, with several, their sum."""
    several = len(found.parts) > 1
    record: dict[str, Any] = {"stage": found.stage.name,
                              "parts": [_part(b, k if several else None)
                                        for k, b in enumerate(found.parts)]}
    if found.total is not None:
        record["sum"] = {"latex": found.total.latex, "text": found.total.text}
    return record


def equations_json(title: str, stages: Iterable[Any]) -> str:
    """The ``equations.json`` text for these stages (those with an equation)."""
    records = [stage_entry(found) for stage in stages
               if (found := stage_equation(stage)) is not None]
    return json.dumps({"title": title, "equations": records}, ensure_ascii=False,
                      indent=1) + "\n"
