"""The PDF's rough edges (issue 12): integer tables, empty sections, headings, colours."""

from __future__ import annotations

import re

from symformer.blocks import derive
from symformer.example import load_example
from symformer.latex import Options, export_files


def _main(example=None, **options) -> dict[str, str]:
    g = derive(load_example(example) if example else load_example())
    return export_files(g, Options(**options), "latex")


def test_integer_embeddings_print_without_decimals() -> None:
    # The built-in example's embeddings, by hand: think = [4, 1, 0, 2].
    table = _main()["fragments/embeddings-table.tex"]
    row = next(line for line in table.splitlines() if "think" in line)
    assert re.findall(r"\$([^$]*)\$", row) == ["4", "1", "0", "2"]
    assert "4.00" not in table
    assert "exact integer" in table


def test_fractional_stage_keeps_its_decimals() -> None:
    # Scaled scores are not integers: they keep two decimals.
    table = _main()["fragments/layer1-head1-scores-table.tex"]
    assert re.search(r"\$-?\d+\.\d\d\$", table)


ATTENTION_ONLY = "symformer/examples/attention_only.toml"


def _headings(main: str) -> list[tuple[str, str]]:
    return re.findall(r"\\(part|section|subsection|subsubsection)\{([^}]*)\}", main)


def test_block_without_w_o_has_no_output_projection_section() -> None:
    main = _main(ATTENTION_ONLY)["main.tex"]
    titles = [t for _, t in _headings(main)]
    assert not any("Multi-head output" in t or "Output projection" in t for t in titles)
    # The renaming is still stated once, as a sentence: m_1 = c_1.
    assert "the output: $m = c$." in main


def test_block_with_w_o_keeps_its_output_projection_section() -> None:
    titles = [t for _, t in _headings(_main()["main.tex"])]
    assert any("Multi-head output" in t for t in titles)


def test_no_heading_repeats_its_parent() -> None:
    for example in (None, ATTENTION_ONLY):
        headings = _headings(_main(example)["main.tex"])
        for (_, first), (_, second) in zip(headings, headings[1:]):
            assert first != second, (example, first)
        assert ("section", "Output") in headings
