"""Student sheets and answer keys, as the export's blocks rendered to LaTeX and Markdown.

A sheet gives, for one variant: the sentence, the notation and the definition of every
function and symbol the equations use (:mod:`~symformer.exercise.definitions`); the
numbers the asked stages start from (the weights of the asked steps, and every input
table that is not itself asked, rounded as :func:`given_places` says, so the given
rounding cannot move an answer across the margin); then for each asked stage, under
its title (never its stage name), its general equation
(:func:`symformer.latex.equations.numbered_equation`), an empty table with ruled cells and
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
from symformer.engine.rounding import round_fraction
from symformer.exercise.cells import asked_rows, entries_of
from symformer.exercise.definitions import activation_name, definitions
from symformer.exercise.givens import givens
from symformer.exercise.margin import asked_balls
from symformer.exercise.path import (
    EXP_DIGITS,
    PathEntry,
    stage_path,
    student_chain,
    student_tables,
    weight_places,
)
from symformer.exercise.settings import given_places
from symformer.latex.blocks import (
    Cell,
    Heading,
    Math,
    MatrixBlock,
    Prose,
    Step,
    Table,
    Worked,
)
from symformer.latex.document import PREAMBLE, caption, legend_prose
from symformer.latex.equations import numbered_equation
from symformer.latex.escape import latex_text, markdown_text
from symformer.latex.markdown import to_markdown
from symformer.latex.render import PACKAGES, to_latex
from symformer.latex.tables import stage_table
from symformer.lazy import sympy
from symformer.notation import legend
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


def _number(x, places: int | None = None) -> str:
    """An exact weight: at ``places`` decimals when that states it exactly (every entry
    of a matrix at the same decimals: 0.50, -0.25, 0.00), else as its fraction."""
    from symformer.exercise.toml_text import number_text

    value = Fraction(int(x.p), int(x.q))
    if places is not None and value * 10 ** places == int(value * 10 ** places):
        return _fixed(value, places)
    text = number_text(value)
    if text.startswith('"'):
        return rf"\tfrac{{{abs(int(x.p))}}}{{{int(x.q)}}}" if x >= 0 else \
            rf"-\tfrac{{{abs(int(x.p))}}}{{{int(x.q)}}}"
    return text


def _fixed(value: Fraction, places: int) -> str:
    return round_fraction(value, decimals=places).fixed()


def given_blocks(g: Derivation, asked: list[str], decimals: int, tag: str) -> list:
    """The sentence, the asked steps' weights and the input tables that are not asked."""
    tokens = ", ".join(f"{k} \u201c{t}\u201d" for k, t in enumerate(g.example.tokens))
    out: list = [Prose((f"The sentence (token positions from 0): {tokens}.",))]
    for given in givens(g, asked):
        matrix = given.matrix
        out.append(Prose((f"{caption(given.stage)}, "
                          f"{'weights' if given.owner[0] != given.stage.name else 'given'}:",)))
        places = weight_places([Fraction(int(matrix[i, j].p), int(matrix[i, j].q))
                                for i in range(matrix.rows) for j in range(matrix.cols)])
        rows = tuple(tuple(_number(matrix[i, j], places) for j in range(matrix.cols))
                     for i in range(matrix.rows))
        out.append(MatrixBlock(given.symbol, rows))
        for letter, value in given.scalars:
            out.append(Prose((Math(f"{letter} = {sympy.latex(sympy.S(value))}"), ".")))
    places = given_places(asked, decimals)
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
                 tag: str, path: list[PathEntry] | None = None,
                 asked: list[str] | None = None) -> list:
    """One asked stage: heading, general equation, and the table of its asked rows
    (empty on a sheet, with room for working).  The key's table holds the student's
    path (``path``: each asked entry from the earlier answers as written) and its
    worked lines follow, one per asked entry."""
    out: list = [Together(0.3 if key else 0.44), Heading(caption(stage), level)]
    equation = numbered_equation(stage)
    if equation is not None:
        out.append(replace(equation, label=f"eq:{tag}{stage.name}"))
    rows = asked_rows(asked if asked is not None else [], stage.name, stage.shape)
    cells = entries_of(asked if asked is not None else [], stage.name, stage.shape)
    table = stage_table(stage, decimals=decimals, highlight=token if key else None,
                        label=f"tab:{tag}{stage.name}",
                        caption=f"{stage.op.symbol.title}: each entry as a student computes "
                                f"it from the numbers given, rounded to "
                                f"{plural(decimals, 'decimal')}." if key else
                                f"{stage.op.symbol.title}: fill in every entry, rounded to "
                                f"{plural(decimals, 'decimal')}.")
    table = _rows_only(table, rows)
    if not key:
        blank = tuple(tuple(Cell(rf"\underline{{{_BLANK}}}") if (i, j) in cells
                            else _off_cell(c) for j, c in enumerate(row))
                      for i, row in zip(rows, table.cells))
        table = replace(table, cells=blank, tall=True, highlight_row=None, legend=())
        if stage.op.weighs_keys:
            out.append(Prose(("In the box, write each exponential ", Math("e^{s_j}"),
                              f" (the largest to {EXP_DIGITS} significant digits, the "
                              "others at the same decimals) and their sum ",
                              Math(r"\Sigma"), ", then each weight as ",
                              Math(r"e^{s_j} / \Sigma"), ".")))
        return [*out, table, Working()]
    if path is not None:
        table = _student_cells(table, rows, path)
    else:
        table = replace(table, cells=tuple(
            tuple(c if (i, j) in cells else _off_cell(c) for j, c in enumerate(row))
            for i, row in zip(rows, table.cells)))
    out.append(replace(table, legend=_extra_legend(table)))
    worked = path_worked(stage, path) if path is not None else None
    if worked is not None:
        whose = (f"\u201c{stage.rows[token]}\u201d (position {token})" if rows == [token]
                 else f"every position \u201c{stage.rows[token]}\u201d (position {token}) "
                      f"reads")
        out.append(Prose((f"Worked lines for {whose}, each from the numbers printed "
                          f"before it:",)))
        out.append(worked)
    return out


#: A cell of an asked row that is not asked (a key behind the causal mask): left empty.
_OFF = r"\text{---}"


def _off_cell(cell: Cell) -> Cell:
    """A cell that is not asked: a masked entry as the table prints it (−∞, 0: known
    from the mask), any other left empty."""
    if "masked" in cell.marks:
        return replace(cell, latex=cell.latex.replace(r"\mathbf", ""))
    return Cell(_OFF)


def _rows_only(table: Table, rows: list[int]) -> Table:
    """``table`` with only ``rows`` (its highlight kept on the same token)."""
    if len(rows) == len(table.cells):
        return table
    picked = [table.row_labels.index(next(r for r in table.row_labels if r[0] == i))
              for i in rows]
    highlight = table.highlight_row
    highlight = rows.index(highlight) if highlight in rows and len(rows) > 1 else None
    return replace(table, cells=tuple(table.cells[k] for k in picked), highlight_row=highlight,
                   row_labels=tuple(table.row_labels[k] for k in picked),
                   row_math=(tuple(table.row_math[k] for k in picked)
                             if table.row_math else table.row_math))


def _student_cells(table: Table, rows: list[int], path: list[PathEntry]) -> Table:
    """The key's table with the student's-path values in the asked cells (the exact
    value's rounding is the table's only where no line was built)."""
    value = {(e.row, e.col): e for e in path}
    out = []
    for i, row in zip(rows, table.cells):
        cells = []
        for j, cell in enumerate(row):
            e = value.get((i, j))
            if e is None:
                cells.append(_off_cell(cell))
            elif e.line is None or not e.student:
                cells.append(cell)
            else:
                text = e.student
                bold = cell.latex.startswith(r"\mathbf")
                cells.append(replace(cell, latex=rf"\mathbf{{{text}}}" if bold else text))
        out.append(tuple(cells))
    return replace(table, cells=tuple(out))


def path_worked(stage: Stage, path: list[PathEntry]) -> Worked | None:
    """The student's-path lines: ``lhs = formula = numbers ≈ value``, the exact value's
    rounding beside it where the two differ; a softmax row as the notes work it: each
    e^{s_j}, their sum Σ, then every weight e^{s_j}/Σ."""
    steps = []
    many = len({e.row for e in path}) > 1
    done: set[int] = set()
    for e in path:
        if e.line is None or not e.student:
            continue
        index = ((e.row,) if many else ()) + ((e.col,) if stage.shape[1] > 1 else ())
        if e.exps is not None and e.row not in done:
            done.add(e.row)
            steps += _exp_steps(stage, e)
        if e.exps is not None:
            total = Num(e.exps.total, Fraction(e.exps.total), None)
            exps = dict(e.exps.exps)
            chain = [(EQUALS, _over(_exp_symbol(stage, e.col), _sigma())),
                     (EQUALS, _over(Num(exps[e.col], Fraction(exps[e.col])), total))]
        else:
            chain = ([(EQUALS, e.symbolic)] if e.symbolic is not None else []) + [
                (EQUALS, e.line)]
        exact = exact_value(e.line)
        rel = EQUALS if exact is not None and exact == Fraction(e.student) else APPROX
        chain.append((rel, Num(e.student, Fraction(e.student))))
        step = ModelStep(symbol(stage.op.symbol, index), tuple(chain),
                         exact=None if e.student == e.exact else
                         Num(e.exact, Fraction(e.exact)))
        steps.append(_one_line(step))
    return Worked(tuple(steps)) if steps else None


#: A worked line this short (LaTeX characters of its chain) stays on one line.
ONE_LINE = 110


def _one_line(step: ModelStep) -> Step:
    """A worked step, its chain on one line when short (``e^{s_0} = e^{2.41} ≈ 11.13``)."""
    chain = latex_chain(step)
    joined = " ".join([chain[0][1], *(f"{rel} {form}" for rel, form in chain[1:])])
    if len(chain) > 1 and len(joined) <= ONE_LINE and r"\\" not in joined:
        chain = ((chain[0][0], joined),)
    return Step(latex(step.lhs), chain)


def _over(num, den):
    from symformer.worked.model import Div

    return Div(num, den)


def _sigma():
    from symformer.worked.model import Sym

    return Sym(r"\Sigma", "Σ", "Σ")


def _exp_symbol(stage: Stage, j: int):
    from symformer.worked.model import Func

    source = stage.derivation[stage.inputs[0]]
    return Func("exp", (symbol(source.op.symbol, (j,)),))


def _exp_steps(stage: Stage, e: PathEntry) -> list[Step]:
    """``e^{s_j} = e^{2.41} ≈ 11.13`` for every unmasked key, then ``Σ = ... = 25.60``."""
    from symformer.worked.model import Add, Func

    out = []
    scores = dict(e.exps.scores)
    for j, value in e.exps.exps:
        step = ModelStep(_exp_symbol(stage, j),
                         ((EQUALS, Func("exp", (Num(scores[j], Fraction(scores[j])),))),
                          (APPROX, Num(value, Fraction(value)))))
        out.append(_one_line(step))
    terms = tuple(Num(v, Fraction(v)) for _, v in e.exps.exps)
    symbols = tuple(_exp_symbol(stage, j) for j, _ in e.exps.exps)
    total = Num(e.exps.total, Fraction(e.exps.total))
    chain = ((EQUALS, Add(symbols)), (EQUALS, Add(terms)), (EQUALS, total)) \
        if len(symbols) > 1 else ((EQUALS, symbols[0]), (EQUALS, total))  # one key
    step = ModelStep(_sigma(), chain)
    out.append(_one_line(step))
    return out


def document_blocks(g: Derivation, asked: list[str], decimals: int, token: int, key: bool,
                    level: int = 1, tag: str = "",
                    paths: dict[str, list[list[PathEntry]]] | None = None) -> list:
    """The blocks of a sheet (``key=False``) or a key, headings from ``level``."""
    what = ("Answer key. Each worked line computes an entry the way a student does: from "
            "the given numbers as printed and the earlier answers of this key as written "
            f"(rounded to {plural(decimals, 'decimal')}), so every line can be recomputed "
            "from the numbers printed before it; the tables hold these answers. Where a "
            "line's value rounds differently from the exact value (certified), the exact "
            "value's rounding is given beside it: both answers are right, as symformer "
            f"grade accepts them. The sheet follows token position {token}."
            if key else
            f"Follow the token at position {token} through the asked steps: compute each "
            f"table by hand from the numbers given, and write every entry rounded to "
            f"{plural(decimals, 'decimal')}. Use each answer as you wrote it (rounded) in "
            f"the later steps.")
    given = [s for s in g if s.name not in asked and any(s.name in g[a].inputs for a in asked)]
    out: list = [Prose((what,)), legend_prose(legend([*given, *(g[a] for a in asked)])),
                 *definitions(g, asked), Heading("Given", level),
                 *given_blocks(g, asked, decimals, tag)]
    for name in asked:
        out += stage_blocks(g[name], decimals, token, key, level, tag,
                            paths.get(name) if paths else None, asked)
    gated = [g[n].op for n in asked if g[n].op.gates]
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
    """``blocks`` as one Markdown file (math that KaTeX and MathJax render alike:
    :func:`symformer.escape.portable`); answer cells left blank."""
    from symformer.escape import portable

    body = portable("\n\n".join(text for b in blocks if (text := _render(b, False))))
    return (f"# {markdown_text(title)}\n\n"
            + body.replace(f"$\\underline{{{_BLANK}}}$", " ").replace(f"${_OFF}$", "\u2014")
            + "\n")


def sheet_files(g: Derivation, asked: list[str], decimals: int, token: int, tag: str = ""
                ) -> tuple[dict[str, str], list]:
    """``sheet.tex``, ``sheet.md``, ``key.tex``, ``key.md``, ``key.json`` of one variant,
    and the key's blocks (for :func:`key_all_files`; labels carry ``tag``, unique in the
    combined key)."""
    files = {}
    key_blocks: list = []
    balls = asked_balls(g, asked)
    chain, _ = student_chain(g, asked, decimals, balls)
    paths = {name: stage_path(g, name, student_tables(g, name, asked, decimals, balls,
                                                      chain), decimals, asked)
             for name in asked}
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
        many = len({e.row for e in paths[name]}) > 1
        for e in paths[name]:
            entries.append({
                    "stage": name, "title": caption(stage), "row": e.row, "col": e.col,
                    "symbol": text(symbol(stage.op.symbol, ((e.row,) if many else ())
                                          + ((e.col,) if stage.shape[1] > 1 else ()))),
                    "exact": e.exact, "student": e.student,
                    "line": None if e.line is None else plain(e.line)})
    data = {"format": 1, "title": g.example.title, "decimals": decimals,
            "given_decimals": given_places(asked, decimals), "token": token,
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
