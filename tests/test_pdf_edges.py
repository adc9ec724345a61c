"""The PDF's rough edges (issue 12): integer tables, empty sections, headings, colours."""

from __future__ import annotations

import functools
import re
from fractions import Fraction

from symformer.blocks import derive
from symformer.example import load_example
from symformer.latex import Options, export_files


def _main(example=None, **options) -> dict[str, str]:
    """The LaTeX export's files (exported once per example and options: read only)."""
    return _exported(example, tuple(sorted(options.items())))


@functools.cache
def _exported(example, options: tuple) -> dict[str, str]:
    g = derive(load_example(example) if example else load_example())
    return export_files(g, Options(**dict(options)), "latex")


def test_integer_embeddings_print_without_decimals() -> None:
    # The built-in example's embeddings, by hand: think = [4, 1, 0, 2].
    table = _main()["fragments/embeddings-table.tex"]
    row = next(line for line in table.splitlines() if "think" in line)
    assert re.findall(r"\$([^$]*)\$", row) == ["4", "1", "0", "2"]
    assert "4.00" not in table
    assert "exact integer" in table


def test_fractional_stage_keeps_its_decimals() -> None:
    # Scaled scores are not integers: they keep their two decimals.
    table = _main(decimals=2)["fragments/layer1-head1-scores-table.tex"]
    assert re.search(r"\$-?\d+\.\d\d\$", table)


ATTENTION_ONLY = "symformer/examples/attention_only.toml"


def _headings(main: str) -> list[tuple[str, str]]:
    return re.findall(r"\\(part|section|subsection|subsubsection)\{([^}]*)\}", main)


def test_block_without_w_o_has_no_output_projection_section() -> None:
    main = _main(ATTENTION_ONLY)["main.tex"]
    titles = [t for _, t in _headings(main)]
    assert not any("Multi-head output" in t or "Output projection" in t for t in titles)
    # The renaming is still stated once, as a sentence: m_1 = c_1.
    assert "No $W_O$: the concatenation is the output: $m = c$." in main


def test_every_stage_has_a_group_a_lecturer_would_name() -> None:
    """llama_style: RMSNorm, RoPE, the gate, the LM head all sit in named groups (no
    "Other stages"); a key/value head is one ("Key/value head 1"), not "Attention head
    0"; the stages after the last layer are in "Output", never a second "Input"."""
    headings = _headings(_main("llama_style", decimals=2)["main.tex"])
    titles = [t for _, t in headings]
    assert "Other stages" not in titles
    assert "Attention head 0" not in titles and "Key/value head 1" in titles
    sections = [t for kind, t in headings if kind == "section"]
    assert sections.count("Input") == 1 and sections[-1] == "Output"


def test_block_with_w_o_keeps_its_output_projection_section() -> None:
    titles = [t for _, t in _headings(_main()["main.tex"])]
    assert any("Multi-head output" in t for t in titles)


def test_no_heading_repeats_its_parent() -> None:
    for example in (None, ATTENTION_ONLY):
        headings = _headings(_main(example)["main.tex"])
        for (_, first), (_, second) in zip(headings, headings[1:]):
            assert first != second, (example, first)
        assert ("section", "Output") in headings


def _contrast(hex_a: str, hex_b: str) -> float:
    """WCAG contrast ratio, computed independently of the renderer."""
    def lum(h: str) -> float:
        c = [int(h[k:k + 2], 16) / 255 for k in (0, 2, 4)]
        c = [x / 12.92 if x <= 0.04045 else ((x + 0.055) / 1.055) ** 2.4 for x in c]
        return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]
    a, b = sorted((lum(hex_a), lum(hex_b)), reverse=True)
    return (a + 0.05) / (b + 0.05)


def test_heat_map_is_strong_and_its_text_legible() -> None:
    from symformer.latex.render import to_latex
    from symformer.latex.tables import stage_table

    # Causal mask: the first token attends only to itself, weight exactly 1.
    g = derive(load_example(), causal=True)
    table = to_latex(stage_table(g["layer1.head1.weights"]))
    cells = re.findall(r"\\cellcolor\[HTML\]\{(\w{6})\}(\\textcolor\{white\})?", table)
    assert cells and "orange" not in table
    for colour, white in cells:
        text = "FFFFFF" if white else "000000"
        assert _contrast(colour, text) >= 4.5, colour  # WCAG AA for every cell
    # Weight 1 is dark: far from the page's white (a pale peach was not).
    first = re.search(r"^0 & .*$", table, re.M).group(0)
    colour, white = re.search(r"\\cellcolor\[HTML\]\{(\w{6})\}(\\textcolor)?", first).groups()
    assert white and _contrast(colour, "FFFFFF") >= 7


def test_only_exact_tables_get_taller_rows() -> None:
    stretch = r"\renewcommand{\arraystretch}{1.6}"
    # the one stage's export (its table is the whole export's; all stages in closed
    # form cost ten times more)
    exact = _main(exact=True, stages=("layer1.head1.scores",))[
        "fragments/layer1-head1-scores-table.tex"]
    assert stretch in exact and (r"\frac" in exact or r"\sqrt" in exact)
    plain = _main()["fragments/layer1-head1-scores-table.tex"]
    assert stretch not in plain


def test_trace_tables_stay_under_their_heading(tmp_path) -> None:
    import shutil
    import subprocess

    import pytest

    from symformer.cli import main

    if shutil.which("pdflatex") is None or shutil.which("pdftotext") is None:
        pytest.skip("pdflatex or pdftotext is not installed")
    tex = tmp_path / "trace.tex"
    assert main(["trace", "--token", "think", "--format", "latex", "--out", str(tex)]) == 0
    assert r"\floatplacement{table}{H}" in tex.read_text(encoding="utf-8")
    subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", tex.name],
                   cwd=tmp_path, check=True, capture_output=True)
    text = subprocess.run(["pdftotext", "trace.pdf", "-"], cwd=tmp_path, check=True,
                          capture_output=True, text=True).stdout.splitlines()
    captions = [(k, re.match(r"Table \d+: (.*): the row of", line).group(1))
                for k, line in enumerate(text) if re.match(r"Table \d+: .*: the row of", line)]
    assert captions
    for k, title in captions:
        # The nearest heading above the table is its own step's.
        above = [j for j in range(k) if text[j].strip() == title]
        assert above, title
        between = text[above[-1] + 1:k]
        assert not any(line.startswith("Table ") for line in between), title


def test_markdown_heat_map_darkens_with_the_weight() -> None:
    """``heat=True`` (export --heat) colours the weights as math boxes, no HTML."""
    g = derive(load_example())
    md = export_files(g, Options(), "markdown", heat=True)["main.md"]
    boxes = re.findall(r"\$\\colorbox\{#(\w{6})\}\{(?:\\textcolor\{#(\w{6})\}\{)?"
                       r"(?:\\textbf\{)?([-\d.]+)\}", md)
    spans = [(c, ink or "000000", v) for c, ink, v in boxes]
    assert spans and "Darker: larger weight." in md and "<span" not in md
    def brightness(colour: str) -> int:
        return sum(int(colour[k:k + 2], 16) for k in (0, 2, 4))
    by_value = sorted({(Fraction(v), brightness(c)) for c, _, v in spans})
    # Larger weight, never lighter shade (compare distinct values only).
    for (v0, b0), (v1, b1) in zip(by_value, by_value[1:]):
        if v1 > v0:
            assert b1 <= b0, (v0, v1)
    for colour, ink, _ in spans:
        assert _contrast(colour, ink) >= 4.5
