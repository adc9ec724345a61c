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
