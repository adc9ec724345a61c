"""Tables: every cell against an independent float64 pass, highlighting, closed forms."""

from __future__ import annotations

import re

import mpmath
import numpy as np
import pytest
from float_reference import float_forward

from symformer.latex.render import to_latex
from symformer.latex.tables import column_label, stage_table

STAGES = ["input", "layer1.head1.Q", "layer1.head1.weights", "layer1.ffn.hidden",
          "layer1.add_norm1.variance", "layer1.add_norm2"]


def _number(latex: str) -> float:
    return float(latex.replace(r"-\infty", "-inf"))


@pytest.mark.parametrize("name", STAGES)
def test_cells_match_an_independent_float_pass(block, builtin, name):
    table = stage_table(block[name], decimals=3)
    reference = float_forward(builtin)[name]
    assert len(table.cells) == reference.shape[0]
    for i, row in enumerate(table.cells):
        assert len(row) == reference.shape[1]
        for j, cell in enumerate(row):
            # a correctly rounded 3-decimal value is within half a unit of the truth
            assert abs(_number(cell.latex) - reference[i, j]) <= 0.0005 + 1e-9


def test_think_row_of_q_shows_the_posts_numbers(block):
    """q1 = 5/4 + sin(1)/4 + cos(1)/4 = 1.5954..., q2 = 1/2 + (sin .01 + cos .01)/4."""
    mpmath.mp.dps = 30
    q1 = mpmath.mpf(5) / 4 + (mpmath.sin(1) + mpmath.cos(1)) / 4
    q2 = mpmath.mpf(1) / 2 + (mpmath.sin(mpmath.mpf(1) / 100) + mpmath.cos(mpmath.mpf(1) / 100)) / 4
    assert mpmath.nstr(q1, 5) == "1.5954"
    latex = to_latex(stage_table(block["layer1.head1.Q"], decimals=2))
    think = next(line for line in latex.splitlines() if "& think &" in line)
    assert re.findall(r"\$([-0-9.]+)\$", think) == ["1.60", "0.75"]
    assert f"{float(q2):.2f}" == "0.75"


def test_exact_cells_use_short_closed_forms(block):
    table = stage_table(block["input"], exact=True)
    assert table.cells[1][0].latex == r"4 + \sin 1"
    assert "exact" in table.cells[1][0].marks
    assert table.cells[0][0].latex == "1"


def test_labels_and_caption(block):
    q, w = block["layer1.head1.Q"], block["layer1.head1.weights"]
    assert [column_label(q, j) for j in range(2)] == ["q^{(1)}_{0}", "q^{(1)}_{1}"]
    assert column_label(block["layer1.ffn.hidden"], 5) == "h_{5}"
    assert column_label(block["layer1.add_norm1.mean"], 0) == r"\mu"
    assert column_label(w, 3) == r"\text{understand}_{3}"
    latex = to_latex(stage_table(q, caption="Queries.", label="tab:q", highlight=1, decimals=2))
    assert r"\caption{Queries. Values correctly rounded to 2 decimals.}\label{tab:q}" in latex
    assert r"\toprule" in latex and r"\bottomrule" in latex
    assert latex.count(r"\rowcolor") == 1 and r"\rowcolor{yellow!35}1 & think" in latex


def test_masked_and_heat_cells(causal_block):
    table = stage_table(causal_block["layer1.head1.weights"])
    for i, row in enumerate(table.cells):
        for j, cell in enumerate(row):
            assert ("masked" in cell.marks) == (j > i)
            assert (cell.heat is None) == (j > i)
    assert table.cells[0][0].heat == 100  # weight 1 gets the strongest shade
    scores = stage_table(causal_block["layer1.head1.scores"])
    assert scores.cells[0][1].latex == r"-\infty" and "masked" in scores.cells[0][1].marks
    assert all(c.heat is None for row in scores.cells for c in row)


def test_clipped_relu_entries_follow_the_sign_of_the_hidden_layer(block, builtin):
    table = stage_table(block["layer1.ffn.activation"])
    hidden = float_forward(builtin)["layer1.ffn.hidden"]
    marks = np.array([["clipped" in c.marks for c in row] for row in table.cells])
    assert (marks == (hidden <= 0)).all()
    assert r"\cellcolor{black!12}" in to_latex(table)


def test_heat_outside_unit_interval_uses_the_tables_own_range():
    """A heat map of values outside [0, 1] shades from the table's smallest to its
    largest value (compared with the float64 reference, rounded with decimal)."""
    from decimal import ROUND_HALF_EVEN, Decimal
    from fractions import Fraction

    from symformer import derive, load_example
    from symformer.latex.tables import stage_table

    q = float_forward(load_example())["layer1.head1.Q"]
    printed = [[Fraction(Decimal(float(v)).quantize(Decimal("0.001"), ROUND_HALF_EVEN))
                for v in row] for row in q]
    low, high = min(map(min, printed)), max(map(max, printed))
    assert low < 0 or high > 1
    table = stage_table(derive(load_example())["layer1.head1.Q"], decimals=3, heat=True)
    shades = [[c.heat for c in row] for row in table.cells]
    assert shades == [[round((v - low) / (high - low) * 100) for v in row] for row in printed]
    assert {0, 100} <= {s for row in shades for s in row}
    assert any("smallest" in text for text in table.legend)


def test_the_highlighted_row_of_a_heat_table_is_bold(block):
    """A shaded cell's own colour hides the row's highlight: its number is bold instead
    (every value of that row, and no other row's)."""
    latex = to_latex(stage_table(block["layer1.head1.weights"], decimals=3, highlight=1))
    rows = [line for line in latex.splitlines() if line.endswith(r"\\") and "&" in line]
    body = rows[1:]  # the header first
    assert body[1].count(r"\mathbf{") == 4 and r"\rowcolor" in body[1]
    assert all(r"\mathbf{" not in row for k, row in enumerate(body) if k != 1)
