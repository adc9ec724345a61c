"""moe4: the shipped ``moe_dropout`` example's notation and worked lines (issues 39, 40).

The numbers are the example file's, worked by hand / NumPy here: the token "cat" is
x = [0, 1] after the first residual sum; router scores x W_router = [0, 2, 1]: e2 and
e3 kept, gates e^2/(e^2+e) and e/(e^2+e); expert 2 gives ReLU(x W_1) W_2 = [1, 0],
expert 3 gives ReLU(x W_1 + b_1) W_2 + b_2 = [0, 1]; the mixture is [g2, g3] and the
FFN dropout (p = 1/2, mask row [1, 1]) doubles it.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from symformer import derive, load_example
from symformer.equations.stage import equation_lines
from symformer.latex.render import worked_latex
from symformer.latex.tables import stage_table
from symformer.latex.worked import worked_example
from symformer.notation import glossary, parameter


@functools.cache
def graph():
    return derive(load_example("moe_dropout"))


def test_expert_mask_equation_states_the_rule_not_this_examples_ties():
    """Item 1: the equation's remark is the rule (printed on every variant's sheet);
    this example's proved tie (token 2, scores [4, 4, 4]) is in its table's note."""
    op = graph()["layer1.moe.experts"].op
    remark = op.equation().remark
    assert "lower expert index" in remark and "token 2" not in remark and "e2" not in remark
    assert op.table_legend == ("Proved ties at the k-th place: token 2: e2 and e3, broken "
                               "by the lower expert index.",)
    assert any("token 2: e2 and e3" in line
               for line in stage_table(graph()["layer1.moe.experts"]).legend)


def test_ffn_dropout_worked_line_is_inverted_dropout_with_p():
    """Item 2: f̆_0 = f̃_0 / (1 − p) with p = 0.5 substituted, the value by NumPy."""
    e = math.e
    g2, g3 = e ** 2 / (e ** 2 + e), e / (e ** 2 + e)
    mixed = np.array([g2, g3])  # g2 * [1, 0] + g3 * [0, 1]
    dropped = np.array([1, 1]) * mixed / (1 - 0.5)
    text = worked_latex(worked_example(graph()["layer1.moe.output.dropout"], 1))
    assert r"\frac{\tilde{f}_{0}}{1 - 0.5}" in text
    assert rf"\frac{{{mixed[0]:.2f}}}{{1 - 0.5}} = {dropped[0]:.2f}" in text
    assert rf"\frac{{{mixed[1]:.2f}}}{{1 - 0.5}} = {dropped[1]:.2f}" in text
    assert "2 \\cdot" not in text


def test_dropout_masks_marked_by_site_and_listed_once():
    """Item 3: the attention's and the FFN's masks print as D^att and D^ffn, in their
    equations and once each in the notation table; p = 1/3 printed exactly."""
    g = graph()
    att = " ".join(line.latex for line in equation_lines(g["layer1.attention.output.dropout"]))
    ffn = " ".join(line.latex for line in equation_lines(g["layer1.moe.output.dropout"]))
    assert r"D^{\text{att}}_{i,j}" in att and r"D^{\text{ffn}}" not in att
    assert r"D^{\text{ffn}}_{i,j}" in ffn
    assert "p = 1/3" in g["layer1.attention.output.dropout"].op.equation().remark
    rows = [n.latex for n in glossary(list(g))]
    assert rows.count(r"D^{\text{att}}") == 1 and rows.count(r"D^{\text{ffn}}") == 1
    assert "D" not in rows and len(rows) == len(set(rows))


def test_expert_weights_carry_their_number():
    """Item 4: every expert's W_1, W_2 (and expert 3's b_1, b_2) print with [E]."""
    g = graph()
    for e in (1, 2, 3):
        hidden, out = g[f"layer1.moe.expert{e}.ffn.hidden"], g[f"layer1.moe.expert{e}.ffn.output"]
        assert parameter(hidden, "W_1").latex == f"W_{{1}}^{{[{e}]}}"
        assert parameter(out, "W_2").latex == f"W_{{2}}^{{[{e}]}}"
    assert parameter(g["layer1.moe.expert3.ffn.hidden"], "b_1").latex == "b_{1}^{[3]}"


def test_attention_dropout_worked_line_prints_p_as_a_fraction():
    """Item 2 with p = 1/3: "sat"'s attention output is [2/3, 2/3] (the mean of the
    values), both kept: m_0 / (1 − 1/3) = 1; "the"'s second entry is dropped: 0."""
    text = worked_latex(worked_example(graph()["layer1.attention.output.dropout"], 2))
    assert r"\frac{m_{0}}{1 - \frac{1}{3}} = \frac{0.67}{1 - \frac{1}{3}} \approx 1" in text
    assert (2 / 3) / (1 - 1 / 3) == pytest.approx(1)
    first = worked_latex(worked_example(graph()["layer1.attention.output.dropout"], 0))
    assert r"\breve{m}_{1} &= 0" in first


def test_the_decision_table_is_not_shaded_as_probabilities():
    """The experts chosen are a 0/1 decision: no cell shaded by size and no "Darker:
    larger probability" legend (the gates, the chosen experts' weights, keep both)."""
    experts = stage_table(graph()["layer1.moe.experts"])
    assert not any("Darker" in line for line in experts.legend)
    assert all(c.heat is None for row in experts.cells for c in row)
    gates = stage_table(graph()["layer1.moe.gates"])
    assert any("Darker" in line for line in gates.legend)
