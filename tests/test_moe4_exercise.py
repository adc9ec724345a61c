"""moe4: a sheet never hands out a decision it asks about (the experts chosen), and a
full ``layer1.moe.*`` sheet can be made.  References: the moe_dropout template's own
numbers by hand -- "cat" (position 1) is x = [0, 1] after the first residual sum, router
scores x W_router = [0, 2, 1], so its top 2 are e2 and e3: chi = [0, 1, 1]; "sat" is
[2, 2] -> [4, 4, 4], a tie kept by the lower index: [1, 1, 0]."""

from __future__ import annotations

import re

import pytest

from symformer.blocks import derive
from symformer.example.loader import packaged_examples, parse_example
from symformer.exercise.cells import token_path
from symformer.exercise.givens import check_givens, givens, with_decisions
from symformer.exercise.sheets import sheet_files

EXPERTS = "layer1.moe.experts"


@pytest.fixture(scope="module")
def moe():
    path = packaged_examples()["moe_dropout"]
    return derive(parse_example(path.read_text(), str(path)))


def _key_row(key: str, title: str, row: str) -> list[float]:
    part = key.split(f"## Layer 1: {title}")[1]
    line = next(x for x in part.splitlines() if x.startswith(f"| {row} |"))
    return [float(c.strip().strip("$")) for c in line.strip("|").split("|")[2:]]


@pytest.mark.parametrize("token, chosen", [(1, [0, 1, 1]), (2, [1, 1, 0])])
def test_router_and_gates_asked_the_decision_is_asked_not_given(moe, token, chosen):
    names = with_decisions(moe, ["layer1.moe.router_probabilities", "layer1.moe.gates"])
    assert names == ["layer1.moe.router_probabilities", EXPERTS, "layer1.moe.gates"]
    check_givens(moe, names, "moe_dropout")
    files, _ = sheet_files(moe, token_path(moe, names, token), token, 2)
    sheet, key = files["sheet.md"], files["key.md"]
    assert "Given: Layer 1: Experts chosen" not in sheet
    assert "## Layer 1: Experts chosen (1) and not (0)" in sheet
    assert "top 2 router scores" in sheet and "lower expert index" in sheet
    assert not re.search(r"K = \\begin", sheet)  # the decided table is not given
    assert _key_row(key, "Experts chosen (1) and not (0)", str(token)) == chosen


def test_gates_alone_get_the_decision_given(moe):
    """Nothing asked leads to the decision: it is given, as the router's output is."""
    assert with_decisions(moe, ["layer1.moe.gates"]) == ["layer1.moe.gates"]


def test_a_full_moe_sheet_gives_every_experts_weights_marked(moe):
    names = with_decisions(moe, [s.name for s in moe if s.name.startswith("layer1.moe.")])
    check_givens(moe, names, "moe_dropout")  # no refusal: nothing printed alike
    symbols = [g.symbol for g in givens(moe, names)]
    for e in (1, 2, 3):
        assert f"W_{{1}}^{{[{e}]}}" in symbols and f"W_{{2}}^{{[{e}]}}" in symbols
    assert {"b_{1}^{[3]}", "b_{2}^{[3]}", r"D^{\text{ffn}}"} <= set(symbols)
    assert "K" not in symbols and len(symbols) == len(set(symbols))
