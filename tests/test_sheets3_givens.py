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
    # a decision asked with nothing on the sheet to decide it from (moe4: with the
    # router's steps it is asked, tests/test_moe4_exercise.py; the masks and the experts'
    # weights are marked, so both dropouts and two experts are one sheet)
    (("layer1.moe.experts",), ["layer1.moe.experts", "'expert_mask'", "reads no table",
                               "decided from"]),
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
        assert (r"D^{\text{att}} = \begin{bmatrix} 1 & 0 \cr  0 & 0 \cr  1 & 1 \end{bmatrix}"
                in text)
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
    assert r"W_{1}^{[3]} = \begin{bmatrix} 1 & 1 \cr  0 & 1 \end{bmatrix}" in sheet
    assert r"b_{1}^{[3]} = \begin{bmatrix} 0 & -1 \end{bmatrix}" in sheet


def test_one_precision_per_sheet():
    from fractions import Fraction as Fr

    from symformer.exercise.path import weight_places

    assert weight_places([Fr(2), Fr(0), Fr(-1)]) == 0          # whole numbers as such
    assert weight_places([Fr(-1, 2), Fr(-1, 2)]) == 2          # -0.50, like 0.25 beside it
    assert weight_places([Fr(1, 4), Fr(3, 4)]) == 2
    assert weight_places([Fr(1, 8)]) is None                   # 0.125: a fraction
    assert weight_places([Fr(1, 3)]) is None


def test_a_perfect_square_root_is_said(moe):
    from symformer.exercise.definitions import definitions

    def text(g) -> str:
        return "".join(getattr(part, "latex", part) for prose in
                       definitions(g, ["layer1.head1.scores"]) for part in prose.parts)

    said = text(moe)
    assert r"\sqrt{d_k} = \sqrt{2}" in said and r"\sqrt{2} = " not in said  # d_k = 2
    path = packaged_examples()["decoding_lesson"]
    one = derive(parse_example(path.read_text(), str(path)))   # d_k = 1
    assert r"\sqrt{d_k} = \sqrt{1} = 1" in text(one)


def test_every_size_a_sum_runs_to_is_defined(moe):
    from symformer.exercise.definitions import sizes

    def text(g, asked) -> str:
        return "".join(getattr(part, "latex", part) for prose in sizes(g, asked)
                       for part in prose.parts)

    # moe_dropout by hand: d_model = 2, three tokens, three experts
    said = text(moe, ["layer1.head1.Q", "layer1.head1.weights", "layer1.moe.gates"])
    assert "d_{\\text{in}} = 2" in said and "n = 3" in said and "E = 3" in said
    # an expert reads the residual sum r (the sheet's symbol), not the generic x
    said = text(moe, ["layer1.moe.expert2.ffn.hidden"])
    assert said == "The sums run to these sizes: d_{\\text{in}} = 2, the number of columns of r."
    # course_module: W_1 reads d_model = 4 columns, W_2 reads d_ff = 8: given per step
    path = packaged_examples()["course_module"]
    g = derive(parse_example(path.read_text(), str(path)))
    said = text(g, ["layer1.ffn.hidden", "layer1.ffn.output"])
    assert "depends on the step: 4 in " in said and ", 8 in " in said
