"""``export --format values``: every certified value and worked line, for the
authoring stack (docs/values.md).

* ``symformer-values.tex``: one ``\\newcommand`` per entry of every stage
  (``\\symLayerOneHeadOneWeightsOneThree`` -> ``0.163``) and per worked line
  (``\\symWorkedLayerOneHeadOneQOneZero``), named by :mod:`symformer.authoring.names`;
* ``symformer-values.json``: the same as plain data, ``values`` (address -> decimal
  string) and ``worked`` (address -> the line in LaTeX), read by the MyST/Sphinx role
  (``symformer_values_sphinx.py``, also :mod:`symformer.authoring.sphinx`), the mystmd
  plugin (``symformer.mjs``) and the Quarto shortcode (``_extensions/symformer/``).

Every file lists the values in derivation order, one a line, so that a changed example
rewrites exactly the lines of the values that changed.
"""

from __future__ import annotations

import json
from fractions import Fraction
from importlib import resources

from symformer.authoring.names import entry_words, macro_names, words
from symformer.authoring.plugins import MYST_PLUGIN, QUARTO_EXTENSION, QUARTO_SHORTCODE
from symformer.engine import Derivation
from symformer.latex.document import NotesOptions

#: The format number of symformer-values.json.
FORMAT = 1
#: Rows or columns beyond which an entry's indices are written Row…Col… (names.py).
SINGLE_DIGITS = 10


def entry_values(g: Derivation, decimals: int, stages: tuple[str, ...] | None = None
                 ) -> dict[str, str]:
    """Address -> the certified rounding (``-inf`` for a masked score), every entry of
    every stage (or of the stages matching the globs ``stages``), in derivation order."""
    chosen = {s.name for s in g.select(list(stages) if stages else None)}
    out: dict[str, str] = {}
    for stage in (s for s in g if s.name in chosen):
        for i, row in enumerate(stage.rounded(decimals=decimals)):
            for j, r in enumerate(row):
                out[f"{stage.name}[{i},{j}]"] = "-inf" if r is None else r.fixed()
    return out


def worked_lines(g: Derivation, options: NotesOptions
                 ) -> dict[str, tuple[str, str, int, int | None]]:
    """Address -> (the worked line in LaTeX, stage, row, col): every line the export's
    worked examples print for the chosen token (a second line for the same entry gets
    ``#2``)."""
    from symformer.latex.blocks import Worked
    from symformer.latex.document import build
    from symformer.latex.outline import fragments
    from symformer.worked.evaluate import exact_value
    from symformer.worked.render_latex import latex

    outline = build(g, options)
    out: dict[str, tuple[str, str, int, int | None]] = {}
    for block in (b for f in fragments(outline) for b in f.blocks):
        if not isinstance(block, Worked):
            continue
        for item in block.items:
            where = f"{item.stage}[{item.row}" + ("]" if item.col is None
                                                    else f",{item.col}]")
            address, k = where, 2
            while address in out:
                address, k = f"{where}#{k}", k + 1
            exact = exact_value(item.expression)
            rel = "=" if exact is not None and exact == Fraction(item.result.text) \
                else r"\approx"
            line = (f"{latex(item.symbol)} = {latex(item.expression)} {rel} "
                    f"{item.result.text}")
            out[address] = (line, item.stage, item.row, item.col)
    return out


def _latex_number(text: str) -> str:
    if text == "-inf":
        return r"\ensuremath{-\infty}"
    return rf"\ensuremath{{{text}}}" if text.startswith("-") else text


def values_files(g: Derivation, options: NotesOptions) -> dict[str, str]:
    """Every file of ``export --format values``."""
    values = entry_values(g, options.decimals, options.stages)
    worked = worked_lines(g, options)
    wide = {s.name: max(s.shape) > SINGLE_DIGITS for s in g}
    value_names = macro_names(
        {a: entry_words(*_split(a), wide[_split(a)[0]]) for a in values}, "sym")
    worked_names = macro_names(
        {a: _worked_words(a, stage, row, col, wide.get(stage, True))
         for a, (_, stage, row, col) in worked.items()}, "symWorked")
    title = g.example.title
    head = [f"% Certified values of {' '.join(title.split())}, rounded to "
            f"{options.decimals} decimals: written by `symformer export --format values`.",
            "% Do not edit: export again when the example changes (docs/values.md).",
            r"% \symLayerOneHeadOneWeightsOneThree is layer1.head1.weights[1,3]; "
            r"\symWorked... a worked line (math)."]
    lines = head + [f"\\newcommand{{\\{value_names[a]}}}{{{_latex_number(v)}}}"
                    for a, v in values.items()]
    lines += [f"\\newcommand{{\\{worked_names[a]}}}{{\\ensuremath{{{line}}}}}"
              for a, (line, *_) in worked.items()]
    data = {"format": FORMAT, "title": title, "decimals": options.decimals,
            "token": options.token, "values": values,
            "worked": {a: line for a, (line, *_) in worked.items()},
            "macros": {**value_names, **{f"worked:{a}": n for a, n in worked_names.items()}}}
    return {"symformer-values.tex": "\n".join(lines) + "\n",
            "symformer-values.json": json.dumps(data, indent=1, ensure_ascii=False) + "\n",
            "symformer_values_sphinx.py": resources.files("symformer.authoring")
            .joinpath("sphinx.py").read_text(encoding="utf-8"),
            "symformer.mjs": MYST_PLUGIN,
            "_extensions/symformer/_extension.yml": QUARTO_EXTENSION,
            "_extensions/symformer/symformer.lua": QUARTO_SHORTCODE}


def _split(address: str) -> tuple[str, int, int]:
    stage, _, index = address.partition("[")
    i, j = index.rstrip("]").split(",")
    return stage, int(i), int(j)


def _worked_words(address: str, stage: str, row: int, col: int | None, wide: bool) -> str:
    """A worked line's words: its entry's, ``Line Two`` for a second line of it."""
    base = entry_words(stage, row, col, wide)
    _, _, k = address.partition("#")
    return base + (f"Line{words(k)}" if k else "")
