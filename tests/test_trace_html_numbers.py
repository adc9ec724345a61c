"""The HTML trace's numbers as a lecturer reads them (issue 29, item 8).

Read from the page's text, never from the engine: true minus signs (U+2212) in the
tables, the heat maps and the MathML lines; integers printed as integers; the
backward trace at significant figures (every nonzero table entry with at least 4
significant digits, where fixed decimals printed 0.001 for 0.001234); the notation as a
collapsed table; the forward softmax with each e^{s_j} and their sum Σ.
"""

from __future__ import annotations

import re
from fractions import Fraction
from html.parser import HTMLParser

import pytest

from symformer.blocks import derive
from symformer.example import load_example
from symformer.trace import render, trace_token


class _Text(HTMLParser):
    """Table cells' text and MathML numbers of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[str] = []
        self.numbers: list[str] = []
        self._in: str | None = None
        self._text = ""

    def handle_starttag(self, tag, attrs):
        if tag in ("td", "mn"):
            self._in, self._text = tag, ""

    def handle_endtag(self, tag):
        if tag == self._in:
            (self.cells if tag == "td" else self.numbers).append(self._text.strip())
            self._in = None

    def handle_data(self, data):
        if self._in:
            self._text += data


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    g = derive(load_example())
    return {"forward": render(trace_token(g, "think"), "html"),
            "backward": render(trace_token(g, "think", backward=True), "html")}


def _read(page: str) -> _Text:
    parser = _Text()
    parser.feed(re.sub(r"<(style|script)>.*?</\1>", "", page, flags=re.S))
    return parser


@pytest.mark.parametrize("which", ["forward", "backward"])
def test_true_minus_signs(pages, which):
    text = _read(pages[which])
    assert any(c.startswith("\u2212") for c in text.cells)
    for value in text.cells + text.numbers:
        assert not re.search(r"-\d", value), value
    visible = re.sub(r"<(style|script)>.*?</\1>|<[^>]+>", " ", pages[which], flags=re.S)
    assert not re.search(r"(?<![\w-])-\d", visible)


def _number(cell: str) -> Fraction | None:
    cell = cell.replace("\u2212", "-")
    if "\u00d710" in cell:  # 4.792×10⁻⁸
        mantissa, power = cell.split("\u00d710")
        power = power.translate(str.maketrans("\u207b\u2070\u00b9\u00b2\u00b3\u2074\u2075"
                                              "\u2076\u2077\u2078\u2079", "-0123456789"))
        return Fraction(mantissa) * Fraction(10) ** int(power)
    return Fraction(cell) if re.fullmatch(r"-?\d+(\.\d+)?", cell) else None


def test_integers_as_integers(pages):
    """The built-in example's token embeddings are integers: 4, not 4.000."""
    step = pages["forward"].split('data-stage="embeddings"', 1)[1].split("</section>")[0]
    cells = _read(step).cells
    assert cells and all(re.fullmatch(r"\d+", c) for c in cells), cells


def _significant(cell: str) -> int:
    digits = cell.replace("\u2212", "").split("\u00d7")[0].replace(".", "").lstrip("0")
    return len(digits)


def test_backward_at_significant_figures(pages):
    """Every nonzero entry of the backward tables with at least 4 significant digits
    (0.001077, not 0.001), and every worked line on its table (at most one remark where
    a near-cancellation's line gives 0)."""
    cells = [c for c in _read(pages["backward"]).cells if _number(c) is not None]
    assert len(cells) > 60
    for c in cells:
        if _number(c) != 0 and "." in c:
            assert _significant(c) >= 4, c
    assert any(c.startswith(("0.00", "\u22120.00")) for c in cells)  # small gradients
    assert pages["backward"].count("exact: ") <= 1


@pytest.mark.parametrize("which", ["forward", "backward"])
def test_the_notation_is_a_collapsed_table(pages, which):
    head = pages[which].split("<main>", 1)[0]
    legend = re.search(r'<details class="legend"><summary>Notation: (\d+) symbols'
                       r'</summary><table class="notation">(.*?)</table>', head, re.S)
    assert legend
    assert legend.group(2).count("<tr>") == int(legend.group(1)) + 1  # and the header


def test_forward_softmax_shows_each_exponential_and_the_sum(pages):
    step = pages["forward"].split('data-stage="layer1.head1.weights"', 1)[1]
    step = step.split("</section>")[0]
    items = re.findall(r"<li>(.*?)</li>", step, re.S)
    assert len(items) == 4 + 1 + 4  # e^{s_j}, Σ, then each α_j = e^{s_j}/Σ
    assert all("<msup><mi>e</mi>" in item for item in items[:4])
    assert "\u03a3" in items[4]
