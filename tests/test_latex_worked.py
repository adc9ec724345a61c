"""Worked examples: formula, the token's numbers substituted, the result."""

from __future__ import annotations

import math
import re

from float_reference import float_forward

from symformer.latex.render import to_latex
from symformer.latex.worked import Style, worked_example


def test_query_row_term_by_term(block):
    latex = to_latex(worked_example(block["layer1.head1.Q"], 1))
    assert r"q^{(1)}_{0} &= x_{0} (W_{Q}^{(1)})_{0,0} + x_{1} (W_{Q}^{(1)})_{1,0}" in latex
    # from the printed 4.84 and 1.54 a reader gets exactly 1.595, a tie, rounded half
    # to even at the block's 2 decimals: 1.60, also the exact value's rounding
    # ((4 + sin 1)/4 + (1 + cos 1)/4 = 1.5954...), so no note
    assert r"= 4.84 \cdot 0.25 + 1.54 \cdot 0.25 \approx 1.60" in latex
    assert r"= 0.01 \cdot 0.25 + 3.00 \cdot 0.25 \approx 0.75" in latex


def test_exact_substitution_keeps_closed_forms(block):
    latex = to_latex(worked_example(block["layer1.head1.Q"], 1, Style(exact=True)))
    assert (r"\left(4 + \sin 1\right) \cdot 0.25 + \left(1 + \cos 1\right) \cdot 0.25"
            r" = \frac{1}{4} \left(5 + \sin 1 + \cos 1\right) \approx 1.60") in latex


def test_softmax_shows_exponentials_that_add_up(block, builtin):
    latex = to_latex(worked_example(block["layer1.head1.weights"], 1, Style(decimals=3)))
    scores = float_forward(builtin)["layer1.head1.scores"][1]
    # each exponential on a line of its own, rounded from the printed score
    exps = re.findall(r"e\^\{s\^\{\(1\)\}_\{\d\}\} &= e\^\{([-0-9.]+)\} \\approx ([-0-9.]+)",
                      latex)
    shown = [float(s) for s, _ in exps]
    assert shown == [round(s, 3) for s in scores]
    terms = [float(e) for _, e in exps]
    assert terms == [round(math.exp(s), 3) for s in shown]
    # the sum of the printed terms, exactly
    sigma_line = next(line for line in latex.splitlines() if line.startswith(r"  \Sigma"))
    total = sigma_line.split(r"\approx", 1)[1].rsplit("=", 1)
    assert [float(x) for x in total[0].split("+")] == terms
    assert float(total[1].strip(" \\")) == round(sum(terms), 3)
    # each weight from its printed exponential and the printed sum; a reader's result
    # within one unit of the last digit of the exact weight (the float reference's)
    weights = float_forward(builtin)["layer1.head1.weights"][1]
    alphas = re.findall(r"\\alpha\^\{\(1\)\}_\{(\d)\} &= \\frac\{e\^\{s\^\{\(1\)\}_\{\d\}\}\}"
                        r"\{\\Sigma\} = "
                        r"\\frac\{([-0-9.]+)\}\{([-0-9.]+)\} \\approx ([-0-9.]+)", latex)
    assert [int(j) for j, *_ in alphas] == [0, 1, 2, 3]
    for (j, num, den, result), weight in zip(alphas, weights):
        assert float(num) == terms[int(j)] and float(den) == float(total[1].strip(" \\"))
        assert float(result) == round(float(num) / float(den), 3)
        assert abs(float(result) - weight) < 0.0015


def test_masked_keys_get_zero_weight(causal_block):
    latex = to_latex(worked_example(causal_block["layer1.head1.weights"], 1))
    assert latex.count(r"(\text{masked})") == 2
    assert "e^{s^{(1)}_{2}}" not in latex


def test_layer_norm_shows_mean_variance_and_the_normalised_row(block, builtin):
    ref = float_forward(builtin)
    x = ref["layer1.add_norm1.sum"][1]
    mu_latex = to_latex(worked_example(block["layer1.add_norm1.mean"], 1))
    assert rf"\approx {x.mean():.2f}" in mu_latex
    var_latex = to_latex(worked_example(block["layer1.add_norm1.variance"], 1))
    assert rf"\approx {x.var():.2f}" in var_latex
    ln = to_latex(worked_example(block["layer1.add_norm1"], 1))
    assert r"\sqrt{\sigma^2 + \varepsilon}" in ln
    results = re.findall(r"\\approx ([-0-9.]+)", ln)
    assert [float(v) for v in results] == [round(v, 2) for v in ref["layer1.add_norm1"][1]]


def test_relu_clipped_entries_are_exactly_zero(block):
    latex = to_latex(worked_example(block["layer1.ffn.activation"], 0))
    assert latex.count(") = 0") == 6


def test_every_stage_has_a_worked_example(block):
    for stage in block:
        assert worked_example(stage, 2) is not None, stage.kind
