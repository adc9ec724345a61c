"""Worked examples: formula, the token's numbers substituted, the result."""

from __future__ import annotations

import math
import re

from float_reference import float_forward

from symformer.latex.render import to_latex
from symformer.latex.worked import Style, worked_example


def test_query_row_term_by_term(block):
    latex = to_latex(worked_example(block["layer1.head1.Q"], 1))
    assert r"q_{0} &= x_{0} (W_{Q})_{0,0} + x_{1} (W_{Q})_{1,0}" in latex
    # from 4.84 and 1.54 a reader gets 1.595, a tie; one more digit decides it
    # (the exact value is (4 + sin 1)/4 + (1 + cos 1)/4 = 1.5954...)
    assert r"&= 4.841 \cdot 0.25 + 1.540 \cdot 0.25 \approx 1.60" in latex
    assert r"&= 0.01 \cdot 0.25 + 3.00 \cdot 0.25 \approx 0.75" in latex


def test_exact_substitution_keeps_closed_forms(block):
    latex = to_latex(worked_example(block["layer1.head1.Q"], 1, Style(exact=True)))
    assert (r"\left(4 + \sin 1\right) \cdot 0.25 + \left(1 + \cos 1\right) \cdot 0.25"
            r" = \frac{1}{4} \left(5 + \sin 1 + \cos 1\right) \approx 1.60") in latex


def test_softmax_shows_exponentials_that_add_up(block, builtin):
    latex = to_latex(worked_example(block["layer1.head1.weights"], 1, Style(decimals=3)))
    scores = float_forward(builtin)["layer1.head1.scores"][1]
    sigma_line = next(line for line in latex.splitlines() if line.startswith("  &= e^{"))
    shown = [float(x) for x in re.findall(r"e\^\{([-0-9.]+)\}", sigma_line)]
    assert shown == [round(s, 3) for s in scores]
    # each exponential is rounded from the printed score, and the sum from those
    exps = sigma_line.split(r"\approx", 1)[1].rsplit("=", 1)
    terms = [float(x) for x in exps[0].split("+")]
    assert terms == [round(math.exp(s), 3) for s in shown]
    assert float(exps[1].strip(" \\")) == round(sum(terms), 3)
    weights = float_forward(builtin)["layer1.head1.weights"][1]
    results = [float(x) for x in re.findall(r"\\approx ([-0-9.]+)\s*(?:\\\\)?$", latex, re.M)]
    assert results[-4:] == [round(w, 3) for w in weights]


def test_masked_keys_get_zero_weight(causal_block):
    latex = to_latex(worked_example(causal_block["layer1.head1.weights"], 1))
    assert latex.count(r"(\text{masked})") == 2
    assert "e^{s_{2}}" not in latex


def test_layer_norm_shows_mean_variance_and_the_normalised_row(block, builtin):
    ref = float_forward(builtin)
    x = ref["layer1.add_norm1.sum"][1]
    mu_latex = to_latex(worked_example(block["layer1.add_norm1.mean"], 1))
    assert rf"\approx {x.mean():.2f}" in mu_latex
    var_latex = to_latex(worked_example(block["layer1.add_norm1.variance"], 1))
    assert rf"\approx {x.var():.2f}" in var_latex
    ln = to_latex(worked_example(block["layer1.add_norm1"], 1))
    assert r"\sqrt{\sigma^2 + \epsilon}" in ln
    results = re.findall(r"\\approx ([-0-9.]+)", ln)
    assert [float(v) for v in results] == [round(v, 2) for v in ref["layer1.add_norm1"][1]]


def test_relu_clipped_entries_are_exactly_zero(block):
    latex = to_latex(worked_example(block["layer1.ffn.activation"], 0))
    assert latex.count(") = 0") == 6


def test_every_stage_has_a_worked_example(block):
    for stage in block:
        assert worked_example(stage, 2) is not None, stage.kind
