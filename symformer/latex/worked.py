"""Worked examples in the document: the generic worked lines (:mod:`symformer.worked`)
as the LaTeX printers' :class:`~symformer.latex.blocks.Worked` block.

Every line is built from the stage's local formula and is recomputable from what
it prints; the block keeps the recomputable items for ``export --format json``.
"""

from __future__ import annotations

from symformer.engine import Stage
from symformer.latex.blocks import Step, Worked
from symformer.worked.build import Values, worked_steps
from symformer.worked.model import Style
from symformer.worked.render_latex import chain, latex

__all__ = ["Style", "worked_example"]


def worked_example(stage: Stage, token: int, style: Style | None = None,
                   values: Values | None = None) -> Worked | None:
    """The worked example of ``stage`` for the token at position ``token``."""
    worked = worked_steps(stage, token, style or Style(), values)
    if not worked.steps:
        return None
    steps = tuple(Step(latex(s.lhs), chain(s)) for s in worked.steps)
    return Worked(steps, worked.items)
