"""Figures of a derivation: attention maps, positional encoding, LayerNorm, probabilities.

:func:`figure_files` gives the files to write for one output format: TikZ/PGFPlots
(``NAME.tex`` per figure, the block diagram of the architecture
:mod:`symformer.figures.diagram` among them, and a ``main.tex`` that compiles with
pdflatex) or
matplotlib's SVG, PNG and PDF.  Every value written or plotted is a certified value
of the derivation (:mod:`symformer.figures.data`).
"""

from __future__ import annotations

from collections.abc import Callable

from symformer.engine import Derivation
from symformer.figures.data import Figure, FigureOptions, figures, label

FORMATS = ("tikz", "svg", "png", "pdf")

#: The name docs/export.md gave these options before they were named apart from the other
#: renderers': kept importable (the same class).
Options = FigureOptions

__all__ = ["FORMATS", "Figure", "FigureOptions", "Options", "figure_files", "figures", "label"]


def figure_files(g: Derivation, options: FigureOptions, fmt: str = "tikz",
                 progress: Callable[[int, int, str], None] | None = None,
                 diagram: bool = True) -> dict[str, str | bytes]:
    """The files of every figure in format ``fmt``, by relative path.

    ``progress(k, total, name)`` is called before each figure is drawn.  ``diagram``:
    the block diagram too (the exported notes start with it already); in SVG, PNG and
    PDF it is compiled from its TikZ with pdflatex, and left out without pdflatex.
    """
    if fmt not in FORMATS:
        from symformer.errors import InputError

        raise InputError(f"unknown figure format {fmt!r}; choose one of {', '.join(FORMATS)}")
    chosen = figures(g, options)
    files: dict[str, str | bytes] = {}
    for k, figure in enumerate(chosen, start=1):
        if progress:
            progress(k, len(chosen), figure.name)
        if fmt == "tikz":
            from symformer.figures import tikz

            files[f"{figure.name}.tex"] = tikz.render(figure)
        else:
            from symformer.figures import mpl

            files[f"{figure.name}.{fmt}"] = mpl.render(figure, fmt)
    if fmt != "tikz" and diagram:  # the block diagram first, compiled from its TikZ
        from symformer.figures import diagram as block

        drawn = block.compiled(g, fmt)
        if drawn is not None:
            files = {f"{block.NAME}.{fmt}": drawn, **files}
    if fmt == "tikz":
        from symformer.figures import diagram as block
        from symformer.figures import tikz

        names = [f.name for f in chosen]
        if diagram:  # the block diagram first: the architecture before its numbers
            files[f"{block.NAME}.tex"] = block.figure_latex(g)
            names.insert(0, block.NAME)
        files["main.tex"] = tikz.document(names)
    return files
