"""A sheet gives every array its asked steps read, each under one symbol, or refuses in
one line (sheets3): the moe_dropout template (a mixture of three experts, dropout with
given masks).  References are the template's own numbers worked by hand (its comment:
every attention output row is [2/3, 2/3]; the attention mask's row 2 is [1, 1], p = 1/3)."""

from __future__ import annotations

import pytest

from symformer.blocks import derive
from symformer.errors import InputError
from symformer.example.loader import packaged_examples, parse_example
from symformer.exercise import SheetRequest, make_exercise
from symformer.exercise.cells import token_path
from symformer.exercise.sheets import sheet_files

DROPOUT = "layer1.attention.output.dropout"


@pytest.fixture(scope="module")
def moe():
    path = packaged_examples()["moe_dropout"]
    return derive(parse_example(path.read_text(), str(path)))


@pytest.mark.parametrize("ask, words", [
    (("layer1.moe.*",), ["layer1.moe.experts", "'expert_mask'", "reads no table"]),
    (("layer1.*dropout",), [DROPOUT, "layer1.moe.output.dropout", "$D$", "two meanings"]),
    (("layer1.moe.expert1.*", "layer1.moe.expert2.*"),
     ["layer1.moe.expert1.ffn.hidden", "layer1.moe.expert2.ffn.hidden", "W_{1}"]),
])
def test_what_no_author_hands_out_is_refused_in_one_line(ask, words):
    with pytest.raises(InputError) as caught:
        make_exercise(SheetRequest("moe_dropout", 1, 1, ask=ask))
    text = str(caught.value)
    assert "\n" not in text and "moe_dropout" in text
    assert all(w in text for w in words), text


def test_dropout_sheet_gives_its_mask_and_rate_and_the_key_agrees(moe):
    asked = token_path(moe, [DROPOUT], 2)
    files, _ = sheet_files(moe, asked, 2, 2)
    sheet, key = files["sheet.md"], files["key.md"]
    for text in (sheet, key):  # the template's mask, exactly, and its rate
        assert r"D = \begin{bmatrix} 1 & 0 \cr  0 & 0 \cr  1 & 1 \end{bmatrix}" in text
        assert r"$p = \frac{1}{3}$" in text
    # by hand: m[2] = [2/3, 2/3], both kept, times 1/(1 - 1/3) = 3/2: [1, 1]
    given, asked_part = key.split("## Layer 1: Attention output after dropout")
    assert "| 2 | sat | $0.67$ | $0.67$ |" in given  # the given m, rounded
    row = next(line for line in asked_part.splitlines() if line.startswith("| 2 |"))
    cells = [c.strip().strip("$") for c in row.strip("|").split("|")][2:]
    assert [float(c) for c in cells] == [1.0, 1.0], row


def test_each_experts_weights_are_given_under_the_equations_symbol(moe):
    asked = token_path(moe, ["layer1.moe.expert3.ffn.hidden"], 2)
    sheet = sheet_files(moe, asked, 2, 2)[0]["sheet.md"]
    # the template's expert 3: W_1 = [[1, 1], [0, 1]], b_1 = [0, -1]
    assert r"W_{1} = \begin{bmatrix} 1 & 1 \cr  0 & 1 \end{bmatrix}" in sheet
    assert r"b_{1} = \begin{bmatrix} 0 & -1 \end{bmatrix}" in sheet
