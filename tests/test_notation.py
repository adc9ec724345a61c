"""One notation everywhere: the same stage is written with the same symbol and 0-based
indices in the PDF's LaTeX, the Markdown export, the trace (text, LaTeX, Markdown,
HTML) and ``check``'s messages, and every document states the notation once.

The expected symbols are the project's decision, written out here by hand (the
issue's list: queries q, attention weights α, a LayerNorm row's mean μ), not read
from the code; each format is parsed with its own pattern.
"""

from __future__ import annotations

import re

import pytest

from symformer.cli import main
from symformer.latex import Options, export_files
from symformer.trace import render, trace_token

TOKEN, POSITION = "think", 1
#: stage -> (text symbol, LaTeX symbol, subscripts of the traced row; () for a whole row);
#: the built-in example has two heads, so a head's symbols carry the head: q^(1)
STAGES = {
    "layer1.head1.Q": ("q^(1)", "q^{(1)}", (0, 1)),
    "layer1.head1.weights": ("α^(1)", r"\alpha^{(1)}", (0, 1, 2, 3)),
    "layer1.add_norm1.mean": ("μ", r"\mu", ()),
}
LEGEND = "counted from 0"
#: The tables' captions: where the step sits and its title.
CAPTIONS = {"layer1.head1.Q": "Layer 1, Head 1: Query",
            "layer1.head1.weights": "Layer 1, Head 1: Attention weights (softmax)",
            "layer1.add_norm1.mean": "Layer 1, Add & Norm 1: Mean"}


def _latex_indices(text: str, symbol: str) -> set[int]:
    return {int(k) for k in re.findall(rf"(?<![A-Za-z]){re.escape(symbol)}_\{{(\d+)\}}", text)}


def _text_indices(text: str, symbol: str) -> set[int]:
    return {int(k) for k in re.findall(rf"(?<![\w]){re.escape(symbol)}_(\d+)\b", text)}


def _mathml_indices(text: str, symbol: str) -> set[int]:
    base, _, where = symbol.partition("^")
    if where:  # q^(1): a subscript and the head, (1), as a superscript
        sup = "<mo[^>]*>,</mo>".join(rf"<mn>{n}</mn>" for n in where.strip("()").split(","))
        return {int(k) for k in re.findall(
            rf"<msubsup><mi>{re.escape(base)}</mi>(?:<mrow>)?<mn>(\d+)</mn>(?:</mrow>)?"
            rf"<mrow><mo[^>]*>\(</mo>{sup}<mo[^>]*>\)</mo></mrow></msubsup>", text)}
    return {int(k) for k in re.findall(
        rf"<msub><mi>{re.escape(symbol)}</mi>(?:<mrow>)?<mn>(\d+)</mn>", text)}


@pytest.fixture(scope="module")
def trace(block):
    return trace_token(block, TOKEN, decimals=3)


@pytest.fixture(scope="module")
def formats(block, trace):
    """Per format: the whole document, and each stage's own part of it."""
    pdf = export_files(block, Options(decimals=2, token=POSITION))
    markdown = export_files(block, Options(decimals=2, token=POSITION), "markdown")["main.md"]
    text, html = render(trace, "text"), render(trace, "html")
    latex, md = render(trace, "latex"), render(trace, "markdown")
    parts: dict[str, dict[str, str]] = {}
    for stage in STAGES:
        slug = stage.replace(".", "-")
        table = pdf[f"fragments/{slug}-table.tex"]
        md_table = markdown.split(f"*{CAPTIONS[stage]}.")[1].split("\n\n|")[1].split("\n")[0]
        step = stage
        number = next(n for n, s in enumerate(trace.steps, start=1) if s.stage == stage)
        text_step = text.split(f"\n[{number}/")[1].split("\n\n")[0]
        html_step = html.split(f'data-stage="{step}"')[1].split("</section>")[0]
        latex_step = latex.split("\\subsection")[number]  # the steps' headings, in order
        md_step = md.split(f"\n### {number}. ")[1].split("\n### ")[0]
        parts[stage] = {"pdf table": table, "markdown table": md_table, "trace text": text_step,
                        "trace html": html_step, "trace latex": latex_step,
                        "trace markdown": md_step}
    return {"documents": {"pdf": pdf["main.tex"], "markdown": markdown, "trace text": text,
                          "trace html": html, "trace latex": latex, "trace markdown": md},
            "parts": parts}


def test_every_document_states_the_notation_once(formats):
    for name, document in formats["documents"].items():
        document = document.replace("\n    ", " ")  # the text trace wraps its legend
        assert document.count("Notation:") == 1, name
        assert document.count(LEGEND) == 1, name
        head = document[:document.index(LEGEND)]
        # the block diagram's figure may open the notes before the notation
        head = re.sub(r"\\begin\{figure\}.*?\\end\{figure\}", "", head, flags=re.S)
        assert "Query" in document[document.index("Notation:"):], name  # q is listed
        assert len(head) < len(document) // 4, f"{name}: the legend is not at the start"


@pytest.mark.parametrize("stage", [s for s, v in STAGES.items() if v[2]])
def test_same_symbol_and_indices_in_every_format(formats, stage):
    text_symbol, latex_symbol, indices = STAGES[stage]
    parts = formats["parts"][stage]
    found = {
        "trace text": _text_indices(parts["trace text"], text_symbol),
        "trace html": _mathml_indices(parts["trace html"], text_symbol),
        "trace latex": _latex_indices(parts["trace latex"], latex_symbol),
        "trace markdown": _latex_indices(parts["trace markdown"], latex_symbol),
    }
    if stage == "layer1.head1.Q":  # attention tables are headed by the key tokens
        found["pdf table"] = _latex_indices(parts["pdf table"], latex_symbol)
        found["markdown table"] = _latex_indices(parts["markdown table"], latex_symbol)
    for name, got in found.items():
        assert got == set(indices), f"{name}: {latex_symbol} with indices {sorted(got)}"


def test_a_whole_row_quantity_has_no_index(formats, trace):
    parts = formats["parts"]["layer1.add_norm1.mean"]
    assert r"$\mu$" in parts["pdf table"] and r"\mu_{" not in parts["pdf table"]
    assert "$\\mu$" in parts["markdown table"]
    number = next(n for n, s in enumerate(trace.steps, start=1)
                  if s.stage == "layer1.add_norm1.mean")
    norm = formats["documents"]["trace text"].split(f"\n[{number}/")[1]
    # the token's value is μ; the general equation (index form) writes the row's μ_i,
    # never a column index
    assert re.search(r"^  μ = ", norm, re.M) and "μ_(" not in norm.split("\n\n")[0]
    assert "μ_i" in norm.split("\n\n")[0]


def test_key_positions_count_from_0_in_the_tables(formats):
    """An attention table's columns are the key tokens with their 0-based positions."""
    table = formats["parts"]["layer1.head1.weights"]["pdf table"]
    header = table.split("\\midrule")[0]
    assert re.findall(r"\\text\{[^}]*\}_\{(\d+)\}", header) == ["0", "1", "2", "3"]


def test_the_traced_token_is_at_position_1_in_every_header(formats):
    text, html = formats["documents"]["trace text"], formats["documents"]["trace html"]
    assert f"token '{TOKEN}' at position {POSITION} (positions 0–3" in text
    assert f"token “{TOKEN}” at position {POSITION} (positions 0–3)" in html
    assert f"position {POSITION} (positions 0--3)" in formats["documents"]["trace latex"]
    assert f"position {POSITION} (positions 0–3)" in formats["documents"]["trace markdown"]
    assert f"position {POSITION}" in formats["documents"]["pdf"]
    assert "token 1 of 4" not in html and "of 4" not in text.splitlines()[0]


def test_check_names_entries_the_same_way(tmp_path, block, capsys):
    q = block["layer1.head1.Q"].values(decimals=2)
    weights = block["layer1.head1.weights"].values(decimals=3)
    mean = block["layer1.add_norm1.mean"].values(decimals=3)

    def wrong(text: str) -> str:  # one unit in the last place off
        step = "0." + "0" * (len(text.split(".")[1]) - 1) + "1"
        return f"{float(text) + float(step):.{len(text.split('.')[1])}f}"

    q_row = [wrong(q[POSITION][0]), q[POSITION][1]]
    w_row = [weights[POSITION][0], wrong(weights[POSITION][1]), *weights[POSITION][2:]]
    claims = tmp_path / "claims.toml"
    claims.write_text("\n".join([
        "[[claim]]", 'name = "Q"', 'stage = "layer1.head1.Q"', "decimals = 2",
        f"rows = [{POSITION}]", f"values = [[{', '.join(q_row)}]]",
        "[[claim]]", 'name = "w"', 'stage = "layer1.head1.weights"', "decimals = 3",
        f"rows = [{POSITION}]", f"values = [[{', '.join(w_row)}]]",
        "[[claim]]", 'name = "mu"', 'stage = "layer1.add_norm1.mean"', "decimals = 3",
        f"rows = [{POSITION}]", f"values = [[{wrong(mean[POSITION][0])}]]",
    ]) + "\n")
    assert main(["check", str(claims)]) == 1
    out = capsys.readouterr().out
    assert f"q^(1)_0 of '{TOKEN}' (position {POSITION}): claimed" in out
    assert f"α^(1)_1 of '{TOKEN}' (position {POSITION}), column 'think': claimed" in out
    assert f"μ of '{TOKEN}' (position {POSITION}): claimed" in out
    assert "row " not in out and "col " not in out


def test_pdf_worked_lines_use_the_same_indices(block):
    worked = export_files(block, Options(decimals=2, token=POSITION))[
        "fragments/layer1-head1-Q-worked.tex"]
    lhs = {int(k) for k in re.findall(r"^\s*q\^\{\(1\)\}_\{(\d+)\} &", worked, re.M)}
    assert lhs == {0, 1}
