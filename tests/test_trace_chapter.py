"""The HTML trace as the chapter sets it (issue 39):

* each step shows the weights its operation reads, exactly, in a collapsed <details>;
* a backward step states its matrix form (as the notes do) and its worked lines are
  set in the notes' LaTeX (display fractions, a power 3/2), never with an inline slash
  ∂L/∂y or a decimal power ^1.5;
* a pre-norm model's navigation says "Residual".
"""

from __future__ import annotations

import re
import tomllib
from fractions import Fraction
from pathlib import Path

import pytest

from symformer import derive, load_example
from symformer.trace import trace_token
from symformer.trace.render_html import latex_pieces, render_html

LLAMA = Path("symformer/examples/llama_style.toml")


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    path = tmp_path_factory.mktemp("llama") / "llama.toml"
    path.write_text(LLAMA.read_text(encoding="utf-8") + '\n[loss]\nkind = "cross_entropy"\n'
                    'targets = ["cat", "sat", "on"]\n', encoding="utf-8")
    return derive(load_example(str(path)))


def test_every_step_shows_its_weights_collapsed(llama):
    trace = trace_token(llama, 1)
    page = render_html(trace)
    key = next(s for s in trace.steps if s.stage == "layer1.kv_head1.K")
    ((name, rows),) = key.weights
    assert name == "W_{K}^{(1,1)}"
    # the example file's own W_K (read here with tomllib, not through the engine)
    data = tomllib.loads(LLAMA.read_text(encoding="utf-8"))
    expected = [[Fraction(str(x)) for x in row] for row in data["layer"][0]["kv_head"][0]["W_K"]]

    def exact(t: str) -> Fraction:
        m = re.fullmatch(r"(-?)\\frac\{(\d+)\}\{(\d+)\}", t)
        return Fraction(int(m[2]), int(m[3])) * (-1 if m[1] else 1) if m else Fraction(t)
    assert [[exact(t) for t in row] for row in rows] == expected
    assert page.count('<details class="weights">') == sum(1 for s in trace.steps if s.weights)
    assert "<details class=\"weights\" open" not in page  # collapsed
    # every step with a projection has its weights
    assert all(s.weights for s in trace.steps if s.stage.endswith((".Q", ".K", ".V")))


def test_backward_lines_as_the_notes_set_them(llama):
    trace = trace_token(llama, 1, backward=True)
    page = render_html(trace)
    steps = {s.stage: s for s in trace.steps}
    assert steps["grad.layer2.head1.raw_scores"].matrix_form
    assert '<div class="general matrix">' in page
    lines = [p for s in trace.steps for e in s.lines if e.worked for p in latex_pieces(e.worked)]
    assert lines and not any(re.search(r"\\partial \w+/", p) for p in lines)
    assert not any("^{1.5}" in p or "^1.5" in p for p in lines)
    assert any("^{3/2}" in p for p in lines)  # the RMSNorm's mean square, as the notes
    items = re.findall(r'<ul class="worked">(.*?)</ul>', page, flags=re.S)
    assert items and not any("<mo>/</mo>" in i for i in items)


def test_pre_norm_navigation_says_residual(llama):
    page = render_html(trace_token(llama, 1))
    assert "Layer 1 \u203a Residual 1" in page and "Add &amp; Norm" not in page
