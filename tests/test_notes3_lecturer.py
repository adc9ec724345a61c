"""What a lecturer reading the notes with a loss would not publish (issue 39).

* an index letter of a backward equation that is also a quantity's symbol: the
  embedding table's gradient summed into row ``r`` (the residual sum), a tied table's
  into row ``v`` over ``k`` up to ``m`` (the value, the key, the multi-head output);
* a ReLU's clipped entries (certified input <= 0, so exactly 0) printed ``0.00`` in
  the table while the worked line says ``= 0``;
* a table or matrix of gradients repeated in full where the page already has it:
  a gradient exactly 0 is ``= 0``.
"""

from __future__ import annotations

import pytest
from test_notation_scans import _example, tex_files
from test_symbol_meanings import INDEX, indices, meanings

from symformer import derive
from symformer.blocks.backward import with_gradients


@pytest.mark.parametrize("name", ["builtin", "gpt2_style"])
def test_backward_index_letters_name_no_quantity(name):
    forward = meanings(name)
    g = with_gradients(derive(_example(name)))
    letters = set()
    for stage in g:
        if stage.name.startswith("grad."):
            letters |= indices(stage)
    clashes = {x for x in letters if x in forward and INDEX not in forward[x]}
    assert not clashes, clashes
    assert r"\lambda" in letters and "m" not in letters and "r" not in letters


def test_clipped_entries_print_as_exact_zeros():
    files = tex_files("builtin")
    table = files["fragments/layer1-ffn-activation-table.tex"]
    body = table.split(r"\midrule", 1)[1]
    assert "0.00" not in body and body.count(r"\cellcolor{black!12}$0$") == 24  # 4 x 6
    worked = files["fragments/layer1-ffn-activation-worked.tex"]  # the line says 0 too
    assert worked.count(r"\right) = 0") == 6 and "= 0.00" not in worked


def test_a_zero_gradient_is_not_a_matrix_of_zeros():
    files = tex_files("builtin")
    for name in ("W_1", "b_1", "W_2"):
        block = files[f"fragments/grad-layer1-{name}-table.tex"]
        assert block.strip().endswith("= 0\n\\]") and "array" not in block, block


def test_a_wide_table_is_set_small_not_shrunk():
    """A gradient table of eight columns at four significant digits (course_module's
    dL/dW_1: 512 pt at the text's size, the line 478 pt; measured with pdflatex) is set
    in small type with narrow gaps, so the \\resizebox that guards the margin leaves it
    as set; a four-column table keeps the text's size and gaps."""
    from symformer.latex.blocks import Cell, Table
    from symformer.latex.render import to_latex

    def table(columns: int) -> str:
        labels = tuple(rf"\left(\partial L/\partial W_{{1}}\right)_{{{j}}}" for j in range(columns))
        cells = tuple(tuple(Cell("-0.009746") for _ in range(columns)) for _ in range(4))
        return to_latex(Table("c", "tab:x", tuple((i, "") for i in range(4)), labels, cells,
                              row_math=tuple(f"y_{{{i}}}" for i in range(4))))

    assert r"\small\setlength{\tabcolsep}{2pt}" in table(8)
    assert r"\tabcolsep" not in table(4) and r"\small" not in table(4)


def test_no_positional_encoding_named_where_none_is_added():
    """llama_style (RoPE) adds no positional table: its notation table and its backward
    part call x the input row, never "(embedding + positional encoding)"; the built-in
    block (sinusoidal PE) keeps the words."""
    llama = "".join(tex_files("llama_style").values())
    assert "positional encoding)" not in llama
    assert r"\subsubsection{Gradient of the loss at the input row}" in llama
    builtin = tex_files("builtin")["main.tex"]
    assert "Input row (embedding + positional encoding)" in builtin
