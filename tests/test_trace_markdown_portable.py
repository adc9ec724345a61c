"""The Markdown trace (and the exercise Markdown) render alike in KaTeX and MathJax.

MathJax typesets a page after its Markdown parser has run, and CommonMark reads a
backslash before ASCII punctuation as an escape (``\\\\`` becomes ``\\``, ``\\{`` becomes
``{``): a line break or a brace in the math would be lost.  KaTeX plugins take the math
out first.  So no math of these files holds such a sequence, nor a macro only KaTeX
knows; and every worked line of the trace is one line of Markdown (one ``$...$``).
"""

from __future__ import annotations

import re

import pytest

from symformer.blocks import derive
from symformer.example import load_example
from symformer.exercise import SheetRequest, make_exercise
from symformer.trace import render, trace_token

#: Macros KaTeX defines that MathJax's TeX input (with its default packages) does not.
KATEX_ONLY = ("\\htmlClass", "\\htmlId", "\\htmlStyle", "\\htmlData", "\\gdef",
              "\\operatorname*", "\\mathclap", "\\vcenter", "\\Set", "\\set")
#: A backslash before ASCII punctuation, as a Markdown parser would read an escape.
ESCAPE = re.compile(r"\\[!-/:-@\[-`{-~]")


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    g = derive(load_example())
    made = make_exercise(SheetRequest(None, 1, 3, max_work=0))
    from symformer.latex import Options, export_files

    notes = export_files(g, Options(), "markdown")["main.md"]  # the notes, Backward too
    return {"notes": notes, "forward": render(trace_token(g, "think"), "markdown"),
            "backward": render(trace_token(g, "think", backward=True), "markdown"),
            "key": made.files["v01/key.md"], "sheet": made.files["v01/sheet.md"]}


def _math(markdown: str) -> list[str]:
    return re.findall(r"\$\$.*?\$\$|\$[^$\n]+\$", markdown, flags=re.S)


@pytest.mark.parametrize("which", ["notes", "forward", "backward", "key", "sheet"])
def test_math_survives_a_markdown_parser(pages, which):
    maths = _math(pages[which])
    assert len(maths) > 20
    for math in maths:
        assert not ESCAPE.search(math), (which, ESCAPE.findall(math), math[:120])
        assert not any(m in math for m in KATEX_ONLY), (which, math[:120])
        assert math.count("{") == math.count("}"), (which, math[:120])


@pytest.mark.parametrize("which", ["forward", "backward"])
def test_each_worked_line_is_one_line(pages, which):
    lines = [line for line in pages[which].splitlines() if line.startswith("- $")]
    assert len(lines) > 30
    for line in lines:
        assert line.endswith("$") and line.count("$") == 2, line[:120]
        assert "\\cr" not in line and "\\\\" not in line


def test_the_softmax_shows_each_exponential_and_the_sum(pages):
    step = re.split(r"\n### \d+\. Attention weights \(softmax\)\n", pages["forward"])[1]
    step = step.split("\n### ", 1)[0]
    exps = re.findall(r"^- \$e\^\{s\^\{\(1\)\}_\{(\d)\}\} = e\^\{", step, re.M)
    assert exps == ["0", "1", "2", "3"]
    assert re.search(r"^- \$\\Sigma = ", step, re.M)
    assert len(re.findall(r"^- \$\\alpha\^\{\(1\)\}_\{\d\} = \\frac", step, re.M)) == 4
