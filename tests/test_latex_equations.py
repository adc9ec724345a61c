"""Equations: generated from the NumPy reference by latexify, in textbook notation."""

from __future__ import annotations

import re

import pytest

from symformer.latex.equations import code, stage_equation
from symformer.latex.render import to_latex


def _all_equations(g) -> str:
    return "\n".join(to_latex(e) for s in g if (e := stage_equation(s)) is not None)


def test_no_code_notation_leaks(block, causal_block):
    text = _all_equations(block) + _all_equations(causal_block)
    for leak in ("np.", r"\mathrm{np}", r"\_", ".T", r"\mathrm{d", "dtype", "shape", "@"):
        assert leak not in text, leak


@pytest.mark.parametrize(("function", "wanted"), [
    ("scores", r"\frac{Q K^\top}{\sqrt{ d_k }}"),
    ("raw_scores", r"Q K^\top"),
    ("pe_even", r"\sin \left(\frac{\mathit{pos}}{10000^{2 i/d_{\text{model}}}}\right)"),
    ("normalize", r"\frac{\gamma \left(x - \mu\right)}{\sqrt{ \sigma^2 + \epsilon }} + \beta"),
    ("relu", r"\max \left(0, x\right)"),
    ("ffn", r"\operatorname{ReLU} \left(x W_1 + b_1\right) W_2 + b_2"),
    ("concat_project", r"\operatorname{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_h) W_O"),
])
def test_rendered_reference_functions(function, wanted):
    assert code(function) == wanted


def test_every_stage_kind_has_a_numbered_labelled_equation(block):
    for stage in block:
        equation = stage_equation(stage)
        assert equation is not None, stage.kind
        latex = to_latex(equation)
        assert re.search(r"\\begin\{(equation|align)\}", latex)
        assert f"\\label{{eq:{stage.name}}}" in latex


def test_causal_mask_appears_only_when_masked(block, causal_block):
    assert r"-\infty" not in to_latex(stage_equation(block["layer1.head1.scores"]))
    assert r"-\infty" in to_latex(stage_equation(causal_block["layer1.head1.scores"]))


def test_projections_name_their_weights(block):
    assert to_latex(stage_equation(block["layer1.head2.K"])).count("K = X W_K") == 1
