"""Student sheets and answer keys, as the export's blocks rendered to LaTeX and Markdown.

A sheet gives, for one variant: the sentence, the notation and the definition of every
function and symbol the equations use (:mod:`~symformer.exercise.definitions`); the
numbers the asked stages start from (the weights of the asked steps, and every input
table that is not itself asked, rounded to ``decimals + 2`` places so the given
rounding cannot move an answer across the margin); then for each asked stage, under
its title (never its stage name), its general equation
(:func:`symformer.latex.equations.stage_equation`), an empty table with ruled cells and
a box for the working.  The key has the same parts with the tables filled (certified
roundings) and the worked lines for the chosen token on the student's path
(:mod:`~symformer.exercise.path`): each entry from the earlier answers as written, the
exact value's rounding beside it where the two differ; ``key.json`` gives every entry
so, its line as plain arithmetic.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from fractions import Fraction

from symformer.engine import Derivation, Stage
from symformer.exercise.definitions import activation_name, definitions
from symformer.exercise.margin import asked_balls
from symformer.exercise.path import PathEntry, stage_path, student_tables
from symformer.exercise.settings import GIVEN_EXTRA_DECIMALS
from symformer.latex.blocks import (
    Cell,
    Equation,
    Heading,
    MatrixBlock,
    Prose,
    Step,
    Table,
    Worked,
)
from symformer.latex.document import PREAMBLE, caption, legend_prose
from symformer.latex.equations import stage_equation
from symformer.latex.escape import latex_text, markdown_text
from symformer.latex.markdown import to_markdown
from symformer.latex.render import PACKAGES, to_latex
from symformer.latex.tables import stage_table
from symformer.notation import legend
from symformer.ops.gated import GatedProduct
from symformer.words import plural
from symformer.worked.build import symbol
from symformer.worked.evaluate import exact_value
from symformer.worked.model import APPROX, EQUALS, Num
from symformer.worked.model import Step as ModelStep
from symformer.worked.render_latex import chain as latex_chain
from symformer.worked.render_latex import latex
from symformer.worked.render_text import text
from symformer.worked.to_json import plain

#: An empty answer cell: room for a signed three-digit answer with four decimals.
_BLANK = r"\hphantom{-000.0000}"


def _param_latex(name: str) -> str:
    """``W_Q`` -> ``W_{Q}``, ``W_O_self`` -> ``W_{O,\\mathrm{self}}`` (valid math)."""
    head, _, rest = name.partition("_")
    if not rest:
        if name in ("alpha", "beta", "gamma"):
            return "\\" + name
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
            named = stage.op.named_constants().get(pname)  # gamma -> \gamma
            out.append(MatrixBlock(named.latex if named else _param_latex(pname), rows))
    places = decimals + GIVEN_EXTRA_DECIMALS
    for stage in g:
        if stage.name in asked or not any(stage.name in g[a].inputs for a in asked):
            continue
        table = stage_table(stage, decimals=places, heat=False,
                            caption=f"Given: {caption(stage)}, rounded to "
                                    f"{plural(places, 'decimal')}.",
                            label=f"tab:{tag}given:{stage.name}")
        out.append(replace(table, legend=_extra_legend(table)))
    return out


def _extra_legend(table: Table) -> tuple[str, ...]:
    """A table's legend without its rounding sentence (the caption says it once)."""
    return tuple(item for item in table.legend
                 if not item.startswith(("Values correctly rounded", "Exact values where")))


@dataclass(frozen=True)
class Together:
    """Start a new page unless ``share`` of a page is left: a stage's heading, equation,
    table and working stay on one page (LaTeX only)."""

    share: float = 0.5


@dataclass(frozen=True)
class Working:
    """Room for the student's working below an asked table (a box on paper)."""

    height_cm: float = 3.5


def stage_blocks(stage: Stage, decimals: int, token: int, key: bool, level: int,
                 tag: str, path: list[list[PathEntry]] | None = None) -> list:
    """One asked stage: heading, general equation, and its table (empty on a sheet,
    with room for working); the key's worked lines follow the student's path (``path``:
    the stage's entries recomputed from the earlier answers as written)."""
    out: list = [Together(0.3 if key else 0.44), Heading(caption(stage), level)]
    equation = gated_equation(stage) or stage_equation(stage)
    if equation is not None:
        out.append(replace(equation, label=f"eq:{tag}{stage.name}"))
    table = stage_table(stage, decimals=decimals, highlight=token if key else None,
                        label=f"tab:{tag}{stage.name}",
                        caption=f"{stage.op.symbol.title}: exact values, correctly rounded "
                                f"to {plural(decimals, 'decimal')}." if key else
                                f"{stage.op.symbol.title}: fill in every entry, rounded to "
                                f"{plural(decimals, 'decimal')}.")
    if not key:
        blank = tuple(tuple(Cell(rf"\underline{{{_BLANK}}}") for _ in row)
                      for row in table.cells)
        table = replace(table, cells=blank, tall=True, highlight_row=None, legend=())
        return [*out, table, Working()]
    out.append(replace(table, legend=_extra_legend(table)))
    worked = path_worked(stage, path[token]) if path is not None else None
    if worked is not None:
        out.append(Prose((f"Worked lines for \u201c{stage.rows[token]}\u201d "
                          f"(position {token}), from the earlier tables as written:",)))
        out.append(worked)
    return out


def gated_equation(stage: Stage) -> Equation | None:
    """A gated activation's equation with its activation named, ``a_j = SiLU(g_j) h_j``
    (the generated equation writes ``a_j = g_j h_j``: the activation is an argument of
    the NumPy function it is printed from), else None."""
    op = stage.op
    if not isinstance(op, GatedProduct):
        return None
    name = activation_name(op.activation)
    return Equation(((op.symbol.latex + "_{j}", rf"\operatorname{{{name}}}(g_{{j}})\, "
                                                 r"h_{j}"),))


def path_worked(stage: Stage, row: list[PathEntry]) -> Worked | None:
    """The student's-path lines of one row: ``lhs = formula = numbers ≈ value``, and the
    exact value's rounding beside it where the two differ."""
    steps = []
    for e in row:
        if e.line is None or not e.student:
            continue
        chain = ([(EQUALS, e.symbolic)] if e.symbolic is not None else []) + [
            (EQUALS, e.line)]
        exact = exact_value(e.line)
        rel = EQUALS if exact is not None and exact == Fraction(e.student) else APPROX
        chain.append((rel, Num(e.student, Fraction(e.student))))
        note = "" if e.student == e.exact else f"exact value rounds to {e.exact}"
        step = ModelStep(symbol(stage.op.symbol, (e.col,) if stage.shape[1] > 1 else ()),
                         tuple(chain), note=note)
        steps.append(Step(latex(step.lhs), latex_chain(step)))
    return Worked(tuple(steps)) if steps else None


def document_blocks(g: Derivation, asked: list[str], decimals: int, token: int, key: bool,
                    level: int = 1, tag: str = "",
                    paths: dict[str, list[list[PathEntry]]] | None = None) -> list:
    """The blocks of a sheet (``key=False``) or a key, headings from ``level``."""
    what = ("Answer key. Each table gives the exact values, correctly rounded (certified) to "
            f"{plural(decimals, 'decimal')}. Each worked line computes an entry the way a "
            "student does: from the earlier tables of this key as a student writes them "
            f"(rounded to {plural(decimals, 'decimal')}) and the given numbers as printed. "
            "Where that "
            "line's value rounds differently from the exact value, both answers are right "
            "(the exact value's rounding is given beside the line), as symformer grade "
            f"accepts them. The worked lines follow token position {token}."
            if key else
            f"Compute the tables of the asked steps by hand from the numbers given, and "
            f"write every entry rounded to {plural(decimals, 'decimal')}. Use each answer "
            f"as you wrote it (rounded) in the later steps.")
    given = [s for s in g if s.name not in asked and any(s.name in g[a].inputs for a in asked)]
    out: list = [Prose((what,)), legend_prose(legend([*given, *(g[a] for a in asked)])),
                 *definitions(g, asked), Heading("Given", level),
                 *given_blocks(g, asked, decimals, tag)]
    for name in asked:
        out += stage_blocks(g[name], decimals, token, key, level, tag,
                            paths.get(name) if paths else None)
    gated = [g[n].op for n in asked if isinstance(g[n].op, GatedProduct)]
    if gated:  # the operation's title says "act(g) ⊙ h": name the function, in words
        words = {"act(g) \u2299 h": f"{activation_name(gated[0].activation)}(g) times h"}
        out = [_reworded(b, words) for b in out]
    return out


def _reworded(block: object, words: dict[str, str]) -> object:
    """``block`` with its text (headings, captions, prose) reworded by ``words``."""
    def say(text: str) -> str:
        for old, new in words.items():
            text = text.replace(old, new)
        return text
    if isinstance(block, Heading):
        return replace(block, text=say(block.text))
    if isinstance(block, Table):
        return replace(block, caption=say(block.caption))
    if isinstance(block, Prose):
        return replace(block, parts=tuple(say(p) if isinstance(p, str) else p
                                          for p in block.parts))
    return block


def _render(block: object, latex_output: bool) -> str:
    """A block as LaTeX or Markdown (the :class:`Working` box here, the rest by the
    document renderers)."""
    if isinstance(block, Together):
        return rf"\needspace{{{block.share}\textheight}}" if latex_output else ""
    if isinstance(block, Working):
        if latex_output:
            return (r"\par\medskip\noindent\textit{Working:}\par\nobreak\noindent"
                    r"\fbox{\begin{minipage}[t][" + f"{block.height_cm}cm"
                    + r"]{\dimexpr\linewidth-2\fboxsep-2\fboxrule\relax}"
                    r"\mbox{}\end{minipage}}\par\medskip")
        return "*Working:*\n\n```text\n" + "\n" * 6 + "```"
    return to_latex(block) if latex_output else to_markdown(block)


def latex_document(title: str, blocks: list) -> str:
    """A standalone LaTeX document of ``blocks`` (compiles with pdflatex)."""
    body = "\n\n".join(text for b in blocks if (text := _render(b, True)))
    return (PREAMBLE % {"packages": "\n".join((*PACKAGES, r"\usepackage{needspace}"))}
            + f"\\title{{{latex_text(title, breaks=True)}}}\n\\author{{}}\n\\date{{}}\n"
            + "\\begin{document}\n\\maketitle\n\n" + body + "\n\n\\end{document}\n")


def markdown_document(title: str, blocks: list) -> str:
    """``blocks`` as one Markdown file (KaTeX/MathJax math); answer cells left blank."""
    body = "\n\n".join(text for b in blocks if (text := _render(b, False)))
    return (f"# {markdown_text(title)}\n\n"
            + body.replace(f"$\\underline{{{_BLANK}}}$", " ") + "\n")


def sheet_files(g: Derivation, asked: list[str], decimals: int, token: int, tag: str = ""
                ) -> tuple[dict[str, str], list]:
    """``sheet.tex``, ``sheet.md``, ``key.tex``, ``key.md``, ``key.json`` of one variant,
    and the key's blocks (for :func:`key_all_files`; labels carry ``tag``, unique in the
    combined key)."""
    files = {}
    key_blocks: list = []
    balls = asked_balls(g, asked)
    paths = {name: stage_path(g, name, student_tables(g, name, asked, decimals, balls),
                              decimals) for name in asked}
    files["key.json"] = key_json(g, asked, decimals, token, paths)
    for name, key in (("sheet", False), ("key", True)):
        title = f"{'Answer key' if key else 'Exercise'}: {g.example.title}"
        blocks = document_blocks(g, asked, decimals, token, key, tag=tag, paths=paths)
        files[f"{name}.tex"] = latex_document(title, blocks)
        files[f"{name}.md"] = markdown_document(title, blocks)
        if key:
            key_blocks = blocks
    return files, key_blocks


def key_json(g: Derivation, asked: list[str], decimals: int, token: int,
             paths: dict[str, list[list[PathEntry]]]) -> str:
    """``key.json``: for every asked entry, the exact value's rounding, the student's-path
    value and that line as plain arithmetic (docs/exercises.md)."""
    entries = []
    for name in asked:
        stage = g[name]
        for row in paths[name]:
            for e in row:
                entries.append({
                    "stage": name, "title": caption(stage), "row": e.row, "col": e.col,
                    "symbol": text(symbol(stage.op.symbol,
                                          (e.col,) if stage.shape[1] > 1 else ())),
                    "exact": e.exact, "student": e.student,
                    "line": None if e.line is None else plain(e.line)})
    data = {"format": 1, "title": g.example.title, "decimals": decimals,
            "given_decimals": decimals + GIVEN_EXTRA_DECIMALS, "token": token,
            "asked": asked, "entries": entries}
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


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
