"""Beamer slides that walk a derivation stage by stage, frames well filled.

>>> from symformer import derive, load_example
>>> from symformer.slides import SlideOptions, frames, page_count
>>> g = derive(load_example())
>>> deck = frames(g, SlideOptions(token=1, stages=("layer1.head1.*",)))
>>> 1 + 7 < page_count(deck) < 1 + 7 * 4  # the title, a page or two per stage, the map
True
"""

from __future__ import annotations

from symformer.engine import Derivation
from symformer.slides.deck import (
    STEPS,
    DiagramFrame,
    FigureFrame,
    Frame,
    SlideOptions,
    StageFrame,
    frames,
    page_count,
)

#: The name docs/slides.md gave these options before they were named apart from the other
#: renderers': kept importable (the same class).
Options = SlideOptions

__all__ = ["STEPS", "DiagramFrame", "FigureFrame", "Frame", "Options", "SlideOptions",
           "StageFrame", "frames", "page_count", "slides_files"]


def slides_files(g: Derivation, options: SlideOptions) -> dict[str, str]:
    """``slides.tex`` for the derivation (relative path -> text)."""
    from symformer.slides.beamer import document

    return {"slides.tex": document(g, options, frames(g, options))}
