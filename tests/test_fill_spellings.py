"""``fill``'s two delimiter spellings: Markdown reads both, LaTeX refuses Markdown's
where it names a stage or a loop (naming the file and line), and keeps ``{{x}}`` TeX.

The numbers are the independent float64 pass (tests/float_reference.py) rounded with
Python's decimal module.
"""

from __future__ import annotations

import time
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

import pytest

from symformer.blocks import derive
from symformer.cli import main
from symformer.errors import InputError
from symformer.example import load_example
from symformer.fill import fill
from symformer.fill.syntax import MAX_LOOKED
from tests.float_reference import float_forward

REF = float_forward(load_example(None))
G = derive(load_example(None))


def rounded(x: float, decimals: int) -> str:
    """``x`` to ``decimals`` places, half to even, as Python's decimal module rounds."""
    return str(Decimal(float(x)).quantize(Decimal(1).scaleb(-decimals), ROUND_HALF_EVEN))


def test_markdown_fills_the_latex_spelling_too(tmp_path, capsys):
    notes, out = tmp_path / "post.md", tmp_path / "filled.md"
    w = REF["layer1.head1.weights"]
    notes.write_text("Weight: \\VAR{ layer1.head1.weights[1,3] } and "
                     "{{ layer1.head1.weights[1,3] | percent(1) }}.\n"
                     "\\COMMENT{ a note }\\BLOCK{ for j in [0, 1] }"
                     "[{{ j }}: \\VAR{ layer1.head1.weights[0, j] | decimals(4) }]"
                     "{% endfor %}\n")
    assert main(["fill", str(notes), "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {out}"
    text = out.read_text()
    assert text == (f"Weight: {rounded(w[1, 3], 3)} and {rounded(100 * w[1, 3], 1)}%.\n"
                    f"[0: {rounded(w[0, 0], 4)}][1: {rounded(w[0, 1], 4)}]\n")
    assert "\\VAR" not in text and "{{" not in text


@pytest.mark.parametrize(("tag", "fix"), [
    ("{{ layer1.head1.weights[1,3] }}", r"\VAR{ layer1.head1.weights[1,3] }"),
    ("{{input[0,0]}}", r"\VAR{input[0,0]}"),
    ("{{ input }}", r"\VAR{ input }"),
    ("{{ output | table }}", r"\VAR{ output | table }"),
    ("{{- input[0,0] -}}", r"\VAR{- input[0,0] -}"),
    ("{% for i in range(2) %}", r"\BLOCK{ for i in range(2) }"),
    ("{% endfor %}", r"\BLOCK{ endfor }"),
])
def test_latex_refuses_the_markdown_spelling_naming_the_line(tmp_path, capsys, tag, fix):
    notes, out = tmp_path / "notes.tex", tmp_path / "filled.tex"
    notes.write_text(f"\\VAR{{ input[0,0] }} first\nsecond\n  and {tag} here\n")
    assert main(["fill", str(notes), "--out", str(out)]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and captured.out == ""
    assert err[0] == (f"symformer fill: error: {notes}:3: {tag} is the Markdown spelling "
                      f"of a {'loop tag' if '%' in tag else 'placeholder'}; in LaTeX write "
                      f"{fix}")
    assert not out.exists()


@pytest.mark.parametrize("tex", [
    r"\frac{{a}}{b}", r"a^{{2}}", r"\newcommand\x[1]{{#1}}", r"{{\bf bold}}",
    "{{input}}", "{{ think }}", "{%\n", r"\textbf{{x}} and {{ y.z }}", "{{ 'text' }}",
])
def test_latex_keeps_tex_that_only_looks_like_a_tag(tex):
    first = rounded(REF["input"][0, 0], 3)
    assert fill(tex + r" \VAR{ input[0,0] }", G, "latex") == f"{tex} {first}"


def test_a_markdown_tag_inside_a_latex_loop_is_found():
    with pytest.raises(InputError, match=r"^NOTES:2: \{\{ input\[i, 0\] \}\} is the Markdown"):
        fill("\\BLOCK{ for i in [0] }\n{{ input[i, 0] }}\\BLOCK{ endfor }", G, "latex")


def test_looking_for_markdown_tags_in_latex_is_bounded():
    start = time.process_time()
    text = "{{ x }} " * (MAX_LOOKED + 1) + "{{" * 100_000 + "\n{{ input[0,0] }}"
    assert fill(text, G, "latex").startswith("{{ x }} {{ x }}")  # past the bound: text
    assert time.process_time() - start < 3


def test_the_docs_page_states_the_spellings_and_the_bound():
    root = Path(__file__).parents[1]
    page = (root / "docs" / "fill.md").read_text(encoding="utf-8")
    assert f"{MAX_LOOKED:,}" in page and "is the Markdown spelling of a placeholder" in page
    assert "[fill.md](fill.md)" in (root / "docs" / "figures.md").read_text(encoding="utf-8")
    readme = (root / "README.md").read_text(encoding="utf-8")
    row = next(line for line in readme.splitlines() if line.startswith("| `symformer fill"))
    assert "[docs/fill.md](docs/fill.md)" in row
