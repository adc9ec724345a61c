"""A document's outline: headings, prose, and sections holding each stage's fragments.

:func:`symformer.latex.document.build` makes the outline; ``main.tex``
(:func:`~symformer.latex.document.latex_files`) and the Markdown export
(:func:`~symformer.latex.markdown.markdown_document`) print it.
"""

from __future__ import annotations

from dataclasses import dataclass

from symformer.latex.blocks import Fragment, Heading


@dataclass
class Section:
    """A heading and the fragments under it (``inline`` ones are not written alone);
    no heading for a stage shown by its table under a sentence said before."""

    heading: Heading | None
    fragments: list[Fragment]


def fragments(outline: list) -> list[Fragment]:
    """Every fragment of an outline, in order."""
    return [f for item in outline if isinstance(item, Section) for f in item.fragments]
