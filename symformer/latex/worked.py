"""Worked examples in the document: the generic worked lines (:mod:`symformer.worked`)
as the LaTeX printers' :class:`~symformer.latex.blocks.Worked` block.

Every line is built from the stage's local formula and is recomputable from what
it prints; the block keeps the recomputable items for ``export --format json``.
"""

from __future__ import annotations

from symformer.engine import Stage
from symformer.latex.blocks import Step, Worked
from symformer.worked.build import MASKED, Values, worked_steps
from symformer.worked.model import Style
from symformer.worked.render_latex import chain, latex

__all__ = ["Style", "worked_example"]


def worked_example(stage: Stage, token: int, style: Style | None = None,
                   values: Values | None = None, masked: bool = True) -> Worked | None:
    """The worked example of ``stage`` for the token at position ``token``;
    ``masked=False`` leaves out the lines of entries the causal mask sets (``s_2 =
    -\\infty``, ``\\alpha_2 = 0``: nothing to work out, one sentence says so)."""
    worked = worked_steps(stage, token, style or Style(), values)
    kept = [s for s in worked.steps if masked or s.note != MASKED]
    if not kept:
        return None
    steps = tuple(Step(latex(s.lhs), chain(s)) for s in kept)
    return Worked(steps, worked.items)
