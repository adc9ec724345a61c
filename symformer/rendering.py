"""How every renderer prints an example: one set of options with one default each.

:class:`Rendering` is carried in the :class:`~symformer.pipeline.Request` every
command builds (``Request.rendering``) and extended by every renderer's options
(:class:`symformer.latex.NotesOptions`, :class:`symformer.slides.SlideOptions`,
:class:`symformer.figures.FigureOptions`), and the notebook display reads
:data:`DEFAULT_DECIMALS` too: a renderer called from Python with its defaults prints
what the command line prints.  This module imports nothing of the package, so every
renderer (and the engine's notebook display) may read it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TypeVar

#: Decimals of every printed value unless a request says otherwise (every command, and
#: every renderer called from Python: :class:`Rendering`).
DEFAULT_DECIMALS = 3
#: A renderer's options class (:meth:`Rendering.extended`).
R = TypeVar("R", bound="Rendering")


@dataclass(frozen=True)
class Rendering:
    """How every renderer prints an example: one set of options, one default each.

    ``decimals``: places of every printed value (tables, worked lines, figures, the
    trace); ``token``: the position the worked examples follow (the command line
    resolves a word to it); ``exact``: short closed forms (``4 + sin 1``) instead of
    decimals where they are short; ``full``: every stage worked, not only the first
    of each equation.  The command line carries it in its :class:`Request`
    (``Request.rendering``), and each renderer's options extend it
    (:class:`symformer.latex.NotesOptions`, :class:`symformer.slides.SlideOptions`), so a
    notebook calling a renderer with its defaults prints what the command prints.
    """

    decimals: int = DEFAULT_DECIMALS
    token: int = 1
    exact: bool = False
    full: bool = False

    def extended(self, options: type[R], **fields: object) -> R:
        """These options as a renderer's ``options`` class (one extending
        :class:`Rendering`), with its own ``fields`` and any of these replaced."""
        mine = {f.name: getattr(self, f.name) for f in dataclasses.fields(Rendering)}
        return options(**(mine | fields))
