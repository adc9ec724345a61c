"""The HTML trace and the Markdown as a reader gets them.

* Markdown: parsed by a safe CommonMark renderer (markdown-it-py with its dollar-math
  plugin, the renderer of MyST and Jupyter Book): no raw HTML by default (the parser's
  own ``html_inline``/``html_block`` tokens, not a text search), every table row has
  its header's cells, every ``$…$`` reaches the math renderer whole; ``heat=True``
  colours with math, still no HTML.
* MathML: well formed (an XML parser), no element inside an ``<mo>`` (latex2mathml's
  ``\\mathopen{}`` made one, and Chromium then showed the variance as upright text),
  the variance's square a real superscript, ``exp`` followed by a function application.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from markdown_it import MarkdownIt
from mdit_py_plugins.dollarmath import dollarmath_plugin

from symformer.latex import Options, export_files
from symformer.latex.blocks import Cell, Table
from symformer.latex.markdown import to_markdown
from symformer.trace import render, trace_token
from symformer.trace.render_html import STYLE, _row_table, worked_line
from symformer.trace.steps import Entry


def _parse(markdown: str) -> list:
    """Tokens of a CommonMark parser with raw HTML recognised (so that it shows up as
    html tokens), pipe tables and ``$``/``$$`` math."""
    parser = MarkdownIt("commonmark").enable("table").use(dollarmath_plugin)
    return parser.parse(markdown)


def _tables(tokens: list) -> list[list[list]]:
    """Every table as rows of cells, each cell the list of its inline child tokens."""
    tables, rows = [], None
    for k, t in enumerate(tokens):
        if t.type == "table_open":
            rows = []
            tables.append(rows)
        elif t.type == "tr_open":
            rows.append([])
        elif t.type in ("th_open", "td_open"):
            rows[-1].append(tokens[k + 1].children or [])
    return tables


def _raw_html(tokens: list) -> list[str]:
    found = [t.content for t in tokens if t.type == "html_block"]
    for t in tokens:
        found += [c.content for c in t.children or [] if c.type == "html_inline"]
    return found


def _check_tables(tokens: list) -> int:
    tables = _tables(tokens)
    for rows in tables:
        assert all(len(row) == len(rows[0]) for row in rows), rows
    return len(tables)


@pytest.fixture(scope="module")
def traces(block):
    return {"forward": trace_token(block, "think"),
            "backward": trace_token(block, "think", backward=True)}


def test_export_markdown_is_plain_gfm_unless_heat_is_asked(block):
    options = Options(stages=("layer1.head1.Q", "layer1.head1.weights"))
    plain = export_files(block, options, "markdown")["main.md"]
    coloured = export_files(block, options, "markdown", heat=True)["main.md"]
    for markdown in (plain, coloured):
        tokens = _parse(markdown)
        assert _raw_html(tokens) == []
        assert _check_tables(tokens) == 3  # the notation table, q's and alpha's
    weights = block["layer1.head1.weights"].values(decimals=options.decimals)
    rows = _tables(_parse(plain))[2]
    for k, row in enumerate(rows[1:]):  # the weights' cells: math of the exact decimals
        maths = [c[0].content for c in row[2:]]
        assert maths == [rf"\mathbf{{{v}}}" if k == 1 else v for v in weights[k]]
    assert "colorbox" not in plain and "Darker" not in plain
    assert coloured.count(r"\colorbox{#") == 16 and "Darker: larger weight." in coloured


def test_markdown_table_cells_survive_pipes_underscores_and_stars():
    """A token a_b*|c and math holding | stay in their cells (one row, four cells),
    the token as typed and the math whole."""
    table = Table("Caption with a_b*c.", "tab:x", ((0, "a_b*|c"),), (r"|x|_{0}", r"\|y\|"),
                  ((Cell(r"\left|q_{0}\right|"), Cell("1.5")),), highlight_row=None)
    rows = _tables(_parse(to_markdown(table)))[0]
    assert [len(row) for row in rows] == [4, 4]
    header, row = rows
    assert [c[0].content for c in header[2:]] == [r"\vert x\vert _{0}", r"\Vert y\Vert "]
    assert "".join(c.content for c in row[1]) == "a_b*|c"
    assert row[2][0].type == "math_inline" and row[2][0].content == r"\left\vert q_{0}\right\vert "


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_trace_markdown_parses_to_tables_without_html(traces, direction):
    trace = traces[direction]
    markdown = render(trace, "markdown")
    tokens = _parse(markdown)
    assert _raw_html(tokens) == []
    assert _check_tables(tokens) == len(trace.steps)
    assert "`" not in markdown and "layer1." not in markdown  # no stage names shown
    # every inline $…$ of the source became one math token (none split by a | or _)
    inline = [c for t in tokens for c in t.children or [] if c.type == "math_inline"]
    assert len(inline) == markdown.count("$") // 2 - 2 * markdown.count("$$") // 2


def _elements(mathml: str) -> ET.Element:
    return ET.fromstring(mathml.replace("&#x2061;", "\u2061").replace("&#x000A0;", "\u00a0"))


def test_variance_and_softmax_mathml_render_as_math(traces):
    steps = {s.stage: s for s in traces["forward"].steps}
    for step in traces["forward"].steps:
        for general in step.general:
            root = _elements(general.mathml())  # well formed
            assert all(len(mo) == 0 for mo in root.iter("mo")), step.stage  # no <mo><mrow>
            assert r"\math" not in general.mathml()
    variance = _elements(steps["layer1.add_norm1.variance"].general[0].mathml())
    # σ²_i on the left; (r_ij − μ_i)² on the right: a superscript over a bracket
    assert variance.find("./mrow/msubsup/mi").text == "σ"
    assert variance.find("./mrow/msubsup/mn").text == "2"
    squared = [m for m in variance.iter("msup") if m[0].tag == "mrow"
               and m[0][0].text == "(" and m[1][0].text == "2"]
    assert len(squared) == 1
    softmax = steps["layer1.head1.weights"].general[0].mathml()
    assert softmax.count('<mi>exp</mi><mo>&#x2061;</mo><mspace width="0.1667em"/>') == 2
    # the worked line's variance symbol is σ with a superscript 2, not the text "σ²"
    line = render(traces["forward"], "html").split('data-stage="layer1.add_norm1.variance"')[1]
    assert "<msup><mi>σ</mi><mn>2</mn></msup>" in line and "<mi>σ²</mi>" not in line


def test_backward_lines_wrap_and_wide_rows_continue():
    """A worked line is several <math> pieces (the page wraps between them); a row of
    20 entries is three tables of at most 8; wide equations scroll inside their box."""
    entries = tuple(Entry(f"h{j}", "0.5") for j in range(20))
    html = _row_table(entries, [f"<td>{j}</td>" for j in range(20)])
    assert html.count('<table class="row">') == 3 and html.count("<td>") == 20
    assert ".general,.scroll{max-width:100%;overflow-x:auto" in STYLE
    assert "text-indent:-2em" in STYLE  # continuation lines of a worked line indented


def test_backward_html_worked_lines_are_pieces(traces):
    """∂L/∂r_0 = ¼·(2·∂L/∂σ²·… + ∂L/∂μ + …) = … ≈ −0.06788 (4 significant digits): one
    <math> per piece, the sum cut before its + signs, which stay binary operators."""
    step = next(s for s in traces["backward"].steps if s.stage == "grad.layer1.add_norm2.sum")
    line = worked_line(step.entries[0].worked)
    assert line.count("<math") > 5 and line.count("<math") == line.count("</math>")
    assert '<math displaystyle="true"><mrow><mo form="infix" lspace="0em">+</mo>' in line
    assert '<math displaystyle="true"><mrow><mo>\u2248</mo><mrow><mo>\u2212</mo><mn>0.06788' \
        in line


def test_heat_needs_markdown(tmp_path, capsys):
    from symformer.cli import main

    assert main(["export", "--heat", "--out", str(tmp_path / "out")]) == 2
    assert "--heat needs --format markdown" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
