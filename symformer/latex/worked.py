"""Worked examples in the document: the generic worked lines (:mod:`symformer.worked`)
as the LaTeX printers' :class:`~symformer.latex.blocks.Worked` block.

Every line is built from the stage's local formula and is recomputable from what
it prints; the block keeps the recomputable items for ``export --format json``.
"""

from __future__ import annotations

import re

from symformer.engine import Stage
from symformer.latex.blocks import Step, Worked
from symformer.worked.build import MASKED, Values, worked_steps
from symformer.worked.model import Step as WorkedStep
from symformer.worked.model import Style
from symformer.worked.render_latex import chain, latex

__all__ = ["Style", "worked_and_left", "worked_example"]


def worked_example(stage: Stage, token: int, style: Style | None = None,
                   values: Values | None = None, masked: bool = True,
                   alike: int | None = None, long_only: bool = False) -> Worked | None:
    """The worked example of ``stage`` for the token at position ``token``.

    ``masked=False`` leaves out the lines of entries the causal mask sets (``s_2 =
    -\\infty``, ``\\alpha_2 = 0``: nothing to work out, one sentence says so);
    ``alike`` keeps only that many lines of each run of entries worked alike (their
    left-hand sides differ only in indices: the table holds the others' results;
    lines whose results later lines use are always kept); ``long_only`` leaves out only
    lines too long for one line of the page (short ones stand several to a line)."""
    return worked_and_left(stage, token, style, values, masked, alike, long_only)[0]


def worked_and_left(stage: Stage, token: int, style: Style | None = None,
                    values: Values | None = None, masked: bool = True,
                    alike: int | None = None, long_only: bool = False
                    ) -> tuple[Worked | None, int]:
    """:func:`worked_example` and how many entry lines ``alike`` left out.  By default
    the operands print as the notes' tables do, exact short decimals in full
    (``Values(short=True)``)."""
    worked = worked_steps(stage, token, style or Style(), values or Values(short=True))
    kept = [s for s in worked.steps if masked or s.note != MASKED]
    before = len(kept)
    if alike is not None:
        kept = _alike_kept(kept, alike, long_only)
    if not kept:
        return None, 0
    steps = tuple(Step(latex(s.lhs), chain(s)) for s in kept)
    return Worked(steps, tuple(item for s in kept for item in s.items)), before - len(kept)


def _entry(step: WorkedStep) -> bool:
    """A line whose result is an entry of the stage's table (no later line uses it)."""
    return step.col is not None and bool(step.items) and all(
        item.result.source is None for item in step.items)


def _shape(step: WorkedStep) -> str:
    return re.sub(r"\d+", "#", latex(step.lhs))


def _long(step: WorkedStep) -> bool:
    """Whether a worked line needs two lines of the page (its formula, then numbers)."""
    from symformer.latex.render import worked_columns
    line = " ".join([latex(step.lhs), *(f"{r} {x}" for r, x in chain(step))])
    return not worked_columns([line])


def _alike_kept(steps: list[WorkedStep], alike: int,
                long_only: bool = False) -> list[WorkedStep]:
    out: list[WorkedStep] = []
    count, shape = 0, None
    for step in steps:
        if not _entry(step) or (long_only and not _long(step)):
            out.append(step)
            count, shape = 0, None
            continue
        if _shape(step) != shape:
            count, shape = 0, _shape(step)
        count += 1
        if count <= alike:
            out.append(step)
    return out
