"""Beamer slides that walk a derivation one stage per frame.

>>> from symformer import derive, load_example
>>> from symformer.slides import Options, frames, page_count
>>> g = derive(load_example())
>>> deck = frames(g, Options(token=1, stages=("layer1.head1.*",)))
>>> page_count(deck) > 1 + 7 * 3  # the title, 3 or 4 steps per stage, the head's map
True
"""

from __future__ import annotations

from symformer.engine import Derivation
from symformer.slides.deck import STEPS, FigureFrame, Frame, Options, StageFrame, frames, page_count

__all__ = ["STEPS", "FigureFrame", "Frame", "Options", "StageFrame", "frames", "page_count",
           "slides_files"]


def slides_files(g: Derivation, options: Options) -> dict[str, str]:
    """``slides.tex`` for the derivation (relative path -> text)."""
    from symformer.slides.beamer import document

    return {"slides.tex": document(g, options, frames(g, options))}
