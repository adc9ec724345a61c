"""Markdown export: every math snippet parses in a real KaTeX."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from symformer import derive
from symformer.latex import Options, export_files
from symformer.latex.escape import markdown_text

KATEX = Path(__file__).resolve().parents[1] / ".ci" / "node_modules" / "katex"
_SCRIPT = """
const katex = require(process.argv[1]);
const snippets = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const bad = [];
for (const [tex, display] of snippets) {
  try { katex.renderToString(tex, {throwOnError: true, displayMode: display}); }
  catch (e) { bad.push([tex, e.message]); }
}
console.log(JSON.stringify(bad));
"""


def math_snippets(markdown: str) -> list[tuple[str, bool]]:
    """Every ``$$…$$`` display and ``$…$`` inline snippet (escaped ``\\$`` is text)."""
    displays = re.findall(r"^\$\$\n(.*?)\n\$\$$", markdown, flags=re.S | re.M)
    rest = re.sub(r"^\$\$\n.*?\n\$\$$", "", markdown, flags=re.S | re.M)
    inline = re.findall(r"(?<![\\$])\$([^$\n]+?)(?<!\\)\$", rest)
    return [(d, True) for d in displays] + [(i, False) for i in inline]


def katex_errors(snippets: list[tuple[str, bool]]) -> list:
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    if not KATEX.exists():
        pytest.skip("KaTeX is missing: run `npm install --prefix .ci katex@0.16`")
    run = subprocess.run(["node", "-e", _SCRIPT, str(KATEX)], input=json.dumps(snippets),
                         capture_output=True, text=True, check=True)
    return json.loads(run.stdout)


def test_markdown_math_parses_in_katex(block, causal_block):
    from test_latex_compile import hostile_example

    snippets = []
    for g, options in [(block, Options(exact=True)), (causal_block, Options(token=3)),
                       (derive(hostile_example()), Options(stages=("input", "*weights")))]:
        snippets += math_snippets(export_files(g, options, "markdown")["main.md"])
    assert len(snippets) > 100
    assert katex_errors(snippets) == []


def test_hostile_tokens_stay_unicode_in_markdown_math():
    from test_latex_compile import hostile_example

    md = export_files(derive(hostile_example()), Options(stages=("input",)),
                      "markdown")["main.md"]
    assert r"| αβ |" in md and r"\text{中}" not in md  # tokens label rows as prose
    assert markdown_text("a*b $x$ [l](u)") == r"a\*b \$x\$ \[l\](u)"


def test_markdown_has_tables_equations_and_worked_examples(block):
    md = export_files(block, Options(decimals=2), "markdown")["main.md"]
    assert "| 1 | **think** | $\\mathbf{1.60}$ | $\\mathbf{0.75}$ |" in md
    assert r"s^{(1)}_{i,j} &= \frac{u^{(1)}_{i,j}}{\sqrt{ d_{k} }}" in md
    assert "&= 4.84 \\cdot 0.25 + 1.54 \\cdot 0.25 \\approx 1.60" in md
