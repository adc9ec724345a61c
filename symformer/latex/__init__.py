"""LaTeX and Markdown export: tables, equations, worked examples and whole documents.

>>> from symformer import derive, load_example
>>> from symformer.latex import NotesOptions, export_files
>>> files = export_files(derive(load_example()), NotesOptions(decimals=2, token=1))
>>> sorted(files)[:2]
['fragments/embeddings-equation.tex', 'fragments/embeddings-matrix.tex']
"""

from __future__ import annotations

from symformer.latex.document import NotesOptions, build, latex_files, resolve_token
from symformer.latex.markdown import markdown_document

#: The name docs/export.md gave these options before they were named apart from the other
#: renderers': kept importable (the same class).
Options = NotesOptions

__all__ = ["NotesOptions", "Options", "build", "export_files", "latex_files", "markdown_document",
           "resolve_token"]


def export_files(g, options: NotesOptions, fmt: str = "latex",
                 figures: dict[str, str] | None = None, figure_preamble: str = "",
                 progress=None, heat: bool = False) -> dict[str, str]:
    """Every file of an export, by relative path: LaTeX (main.tex + fragments), Markdown
    (main.md) or JSON (worked.json: every worked line's recomputable roundings, and
    equations.json: every shown stage's general equation in a checkable plain form).

    ``figures`` (LaTeX only; relative path -> LaTeX, e.g. the TikZ files of
    :func:`symformer.figures.figure_files` as ``figures/NAME.tex``) are input in a final
    *Figures* part, ``figure_preamble`` added to the preamble; ``progress(k, total,
    name)`` is called before each stage is rendered; ``heat`` (Markdown only) colours the
    attention weights' cells, as math, where by default the tables are plain."""
    if fmt == "json" and options.backward:  # the gradient stages, for equations.json
        from symformer.latex.backward import with_backward_pass
        g = with_backward_pass(g)
    outline = build(g, options, progress)
    if fmt == "markdown":
        return {"main.md": markdown_document(g, outline, heat=heat)}
    if fmt == "json":
        from symformer.equations.export import equations_json
        from symformer.latex.blocks import Equation, Worked
        from symformer.latex.outline import fragments
        from symformer.worked.to_json import worked_json

        blocks = [b for f in fragments(outline) for b in f.blocks]
        items = [item for b in blocks if isinstance(b, Worked) for item in b.items]
        shown = [b.label.removeprefix("eq:") for b in blocks
                 if isinstance(b, Equation) and b.label and b.label.startswith("eq:")]
        stages = [g[name] for name in dict.fromkeys(shown) if name in g]
        return {"worked.json": worked_json(g.example.title, items),
                "equations.json": equations_json(g.example.title, stages)}
    return latex_files(g, outline, figures=figures, figure_preamble=figure_preamble)
