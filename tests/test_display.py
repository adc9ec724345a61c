"""Notebook reprs of stages, derivations and traces: labelled, with the certified numbers."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from float_reference import float_forward

from symformer.trace import trace_token


class _Cells(HTMLParser):
    """Collects the text of every table row as a list of cells."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def test_stage_html_is_a_labelled_table(block, builtin):
    stage = block["layer1.head1.weights"]
    parser = _Cells()
    parser.feed(stage._repr_html_())
    header, *rows = parser.rows
    assert header == ["", "I", "think", "I", "understand"]
    assert [r[0] for r in rows] == ["0 I", "1 think", "2 I", "3 understand"]
    floats = float_forward(builtin)["layer1.head1.weights"]
    for i, row in enumerate(rows):
        assert all(abs(float(v) - floats[i][j]) <= 0.0005 for j, v in enumerate(row[1:]))
    assert "layer1.head1.weights" in stage._repr_html_()


def test_stage_markdown_and_latex(block):
    stage = block["layer1.head1.Q"]
    md = stage._repr_markdown_()
    assert "| token | q0 | q1 |" in md and "| 1 think | 1.595 | 0.752 |" in md
    latex = stage._repr_latex_()
    assert latex.startswith("$$") and latex.endswith("$$")
    assert r"\text{1 think} & 1.595 & 0.752" in latex


def test_causal_scores_show_minus_infinity(causal_block):
    latex = causal_block["layer1.head1.scores"]._repr_latex_()
    assert r"-\infty" in latex and "-inf" not in latex


def test_derivation_reprs_list_every_stage(block):
    html = block._repr_html_()
    assert len(re.findall(r"<tr><td><code>", html)) == len(block)
    assert "layer1.ffn.hidden" in block._repr_markdown_()
    assert block._repr_latex_().count(r"\times") == len(block)


def test_trace_reprs(block):
    trace = trace_token(block, "understand")
    html = trace._repr_html_()
    assert html.count('<section class="step"') == len(trace.steps)
    assert "<script" not in html  # static in notebooks: every step shown
    assert trace._repr_markdown_().startswith("# I think I understand")
    latex = trace._repr_latex_()
    assert latex.startswith("$$\\begin{aligned}") and "q^{(1)}_{0} &=" in latex
