"""The notes' paragraph saying what an example leaves inactive at a stage.

The findings and their words are :mod:`symformer.analysis.inactive`'s (one wording for
every format); here they become :class:`~symformer.latex.blocks.Prose` with inline
math, which the LaTeX and the Markdown renderers both print.  Most stages get none.
"""

from __future__ import annotations

from symformer.analysis.inactive import at_stage
from symformer.engine import Stage
from symformer.latex.blocks import Fragment, Math, Prose


def inactive_fragments(stage: Stage, name: str) -> list[Fragment]:
    """``NAME-inactive``: a paragraph per finding at ``stage`` (a ReLU that clips every
    unit, an output equal to its bias, a sub-layer that is nearly the identity, a
    weight's gradient exactly 0, and why), or nothing."""
    paragraphs = at_stage(stage.derivation, stage) if stage.derivation is not None else []
    if not paragraphs:
        return []
    return [Fragment(f"{name}-inactive", [
        Prose(tuple(p if isinstance(p, str) else Math(p.latex) for p in pieces))
        for pieces in paragraphs])]
