"""Student sheets and answer keys, as the export's blocks rendered to LaTeX and Markdown.

A sheet gives, for one variant: the sentence; the numbers the asked stages start
from (the weights of the asked steps, and every input table that is not itself
asked, rounded to ``decimals + 2`` places so the given rounding cannot move an
answer across the margin); then for each asked stage its general equation
(:func:`symformer.latex.equations.stage_equation`) and an empty table.  The key
has the same parts with the tables filled (certified roundings) and the worked
lines for the chosen token (:func:`symformer.latex.worked.worked_example`).
"""

from __future__ import annotations

from dataclasses import replace

from symformer.engine import Derivation, Stage
from symformer.exercise.settings import GIVEN_EXTRA_DECIMALS
from symformer.latex.blocks import Cell, Heading, MatrixBlock, Prose
from symformer.latex.document import PREAMBLE, caption, legend_prose
from symformer.latex.equations import stage_equation
from symformer.latex.escape import latex_text, markdown_text
from symformer.latex.markdown import to_markdown
from symformer.latex.render import PACKAGES, to_latex
from symformer.latex.tables import stage_table
from symformer.latex.worked import Style, worked_example
from symformer.notation import legend
from symformer.words import plural

#: An empty answer cell: as wide as a signed two-digit answer.
_BLANK = r"\hphantom{-00.00}"


def _param_latex(name: str) -> str:
    """``W_Q`` -> ``W_{Q}``, ``W_O_self`` -> ``W_{O,\\mathrm{self}}`` (valid math)."""
    head, _, rest = name.partition("_")
    if not rest:
        return rf"\mathrm{{{name}}}" if len(name) > 1 else name
    parts = [p if len(p) == 1 or p.isdigit() else rf"\mathrm{{{p}}}" for p in rest.split("_")]
    base = head if len(head) == 1 else rf"\mathrm{{{head}}}"
    return f"{base}_{{{','.join(parts)}}}"


def _number(x) -> str:
    from fractions import Fraction

    from symformer.exercise.toml_text import number_text

    text = number_text(Fraction(int(x.p), int(x.q)))
    if text.startswith('"'):
        return rf"\tfrac{{{abs(int(x.p))}}}{{{int(x.q)}}}" if x >= 0 else \
            rf"-\tfrac{{{abs(int(x.p))}}}{{{int(x.q)}}}"
    return text


def given_blocks(g: Derivation, asked: list[str], decimals: int, tag: str) -> list:
    """The sentence, the asked steps' weights and the input tables that are not asked."""
    tokens = ", ".join(f"{k} \u201c{t}\u201d" for k, t in enumerate(g.example.tokens))
    out: list = [Prose((f"The sentence (token positions from 0): {tokens}.",))]
    shown: set[tuple[int, int, str]] = set()
    for name in asked:
        stage = g[name]
        for pname, matrix in stage.op.parameters().items():
            key = (stage.layer, stage.head, pname)
            if key in shown or pname == "embedding_table":
                continue
            shown.add(key)
            out.append(Prose((f"{caption(stage)}, weights:",)))
            rows = tuple(tuple(_number(matrix[i, j]) for j in range(matrix.cols))
                         for i in range(matrix.rows))
            out.append(MatrixBlock(_param_latex(pname), rows))
    places = decimals + GIVEN_EXTRA_DECIMALS
    for stage in g:
        if stage.name in asked or not any(stage.name in g[a].inputs for a in asked):
            continue
        out.append(stage_table(stage, decimals=places, heat=False,
                               caption=f"Given: {caption(stage)} ({stage.name}), rounded "
                                       f"to {plural(places, 'decimal')}.",
                               label=f"tab:{tag}given:{stage.name}"))
    return out


def stage_blocks(stage: Stage, decimals: int, token: int, key: bool, level: int,
                 tag: str, asked: list[str]) -> list:
    """One asked stage: heading, general equation, and its table (empty on a sheet);
    the key's worked lines substitute the given inputs (the stages not asked) at the
    sheet's ``decimals + 2`` places, exactly the numbers the student was given."""
    out: list = [Heading(f"{caption(stage)} ({stage.name})", level)]
    equation = stage_equation(stage)
    if equation is not None:
        out.append(replace(equation, label=f"eq:{tag}{stage.name}"))
    table = stage_table(stage, decimals=decimals, highlight=token if key else None,
                        label=f"tab:{tag}{stage.name}", caption=f"{caption(stage)}.")
    if not key:
        blank = tuple(tuple(Cell(_BLANK) for _ in row) for row in table.cells)
        table = replace(table, cells=blank, tall=True, highlight_row=None, legend=(
            f"Fill in every entry, rounded to {plural(decimals, 'decimal')}.",))
        return [*out, table]
    out.append(table)
    given = tuple((name, decimals + GIVEN_EXTRA_DECIMALS) for name in stage.inputs
                  if name not in asked)
    worked = worked_example(stage, token, Style(decimals, False, given=given))
    if worked is not None:
        out.append(Prose((f"Worked lines for \u201c{stage.rows[token]}\u201d "
                          f"(position {token}):",)))
        out.append(worked)
    return out


def document_blocks(g: Derivation, asked: list[str], decimals: int, token: int, key: bool,
                    level: int = 1, tag: str = "") -> list:
    """The blocks of a sheet (``key=False``) or a key, headings from ``level``."""
    what = ("Answer key: every entry is the exact value correctly rounded (certified) to "
            f"{plural(decimals, 'decimal')}; the worked lines follow token position {token}."
            if key else
            f"Compute the tables of the asked steps by hand from the numbers given, and "
            f"write every entry rounded to {plural(decimals, 'decimal')}.")
    out: list = [Prose((what,)), legend_prose(legend([g[a] for a in asked])),
                 Heading("Given", level), *given_blocks(g, asked, decimals, tag)]
    for name in asked:
        out += stage_blocks(g[name], decimals, token, key, level, tag, asked)
    return out


def latex_document(title: str, blocks: list) -> str:
    """A standalone LaTeX document of ``blocks`` (compiles with pdflatex)."""
    body = "\n\n".join(to_latex(b) for b in blocks)
    return (PREAMBLE % {"packages": "\n".join(PACKAGES)}
            + f"\\title{{{latex_text(title, breaks=True)}}}\n\\author{{}}\n\\date{{}}\n"
            + "\\begin{document}\n\\maketitle\n\n" + body + "\n\n\\end{document}\n")


def markdown_document(title: str, blocks: list) -> str:
    """``blocks`` as one Markdown file (KaTeX/MathJax math); answer cells left blank."""
    body = "\n\n".join(to_markdown(b) for b in blocks)
    return f"# {markdown_text(title)}\n\n" + body.replace(f"${_BLANK}$", " ") + "\n"


def sheet_files(g: Derivation, asked: list[str], decimals: int, token: int, tag: str = ""
                ) -> tuple[dict[str, str], list]:
    """``sheet.tex``, ``sheet.md``, ``key.tex``, ``key.md`` of one variant, and the key's
    blocks (for :func:`key_all_files`; labels carry ``tag``, unique in the combined key)."""
    files = {}
    key_blocks: list = []
    for name, key in (("sheet", False), ("key", True)):
        title = f"{'Answer key' if key else 'Exercise'}: {g.example.title}"
        blocks = document_blocks(g, asked, decimals, token, key, tag=tag)
        files[f"{name}.tex"] = latex_document(title, blocks)
        files[f"{name}.md"] = markdown_document(title, blocks)
        if key:
            key_blocks = blocks
    return files, key_blocks


def key_all_files(keys: list[tuple[str, list]], title: str) -> dict[str, str]:
    """``key-all.tex`` and ``key-all.md``: every variant's key (its id and the blocks
    :func:`sheet_files` built), one section each, the key's headings one level down."""
    blocks: list = []
    for vid, key in keys:
        blocks.append(Heading(f"Variant {vid}", 1))
        blocks += [replace(b, level=b.level + 1) if isinstance(b, Heading) else b
                   for b in key]
    heading = f"Answer key, all variants: {title}"
    return {"key-all.tex": latex_document(heading, blocks).replace(
                "\\section{Variant", "\\clearpage\n\\section{Variant"),
            "key-all.md": markdown_document(heading, blocks)}
