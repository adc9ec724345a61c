"""The general equation of any stage, as every format prints it.

:func:`equation_lines` gives any stage's printed lines from the index equations the
operations declare (:mod:`symformer.equations`): a gradient stage's are its consumers'
backward rules (:func:`symformer.equations.stage.rules`).
"""

from __future__ import annotations

from typing import Any

from symformer.equations.stage import Line, stage_equation


def equation_lines(stage: Any) -> tuple[Line, ...]:
    """The general equation of any stage as printed everywhere (the export, the trace,
    slides, exercise sheets): its operation's index equation, declared once and proved
    (:mod:`symformer.equations`); a gradient's lines are its consumers' backward rules,
    each path's contribution named, and their sum."""
    found = stage_equation(stage)
    if found is None:
        raise NotImplementedError(f"{stage.name}: the operation {stage.op.name!r} declares "
                                  f"no equation (Operation.equation/backward_equation)")
    return tuple(found.lines())
