"""Equations: the operations' declared index equations printed in textbook form.

The expected LaTeX is written here by hand from the textbook formulas.
"""

from __future__ import annotations

import re

from symformer import derive, load_example
from symformer.conventions import Convention, derive_variant
from symformer.latex.equations import numbered_equation
from symformer.latex.render import to_latex


def _all_equations(g) -> str:
    return "\n".join(to_latex(e) for s in g if (e := numbered_equation(s)) is not None)


def _lines(stage) -> list[str]:
    return [f"{lhs} = {rhs}" for lhs, rhs in numbered_equation(stage).lines]


def test_no_code_notation_leaks(block, causal_block):
    text = _all_equations(block) + _all_equations(causal_block)
    for leak in ("np.", r"\mathrm{np}", r"\_", ".T", r"\mathrm{d", "dtype", "shape", "@",
                 "axis", "keepdims", r"\mathrm{where}", r"\mathrm{maximum}", "concatenate",
                 "-1 + n", "- 1 + n"):
        assert leak not in text, leak


def test_textbook_forms(block, causal_block):
    """Index form, every index bound and every sum explicit (the equations' proofs are
    in test_equations_proved.py)."""
    assert _lines(block["layer1.head1.weights"])[0] == (
        r"\alpha^{(1)}_{i,j} = \frac{\exp s^{(1)}_{i,j}}"
        r"{\sum_{j' = 0}^{n - 1} \exp s^{(1)}_{i,j'}}")
    assert _lines(block["layer1.head1.scores"]) == [
        r"s^{(1)}_{i,j} = \frac{u^{(1)}_{i,j}}{\sqrt{ d_{k} }}"]
    assert _lines(block["layer1.head1.raw_scores"]) == [
        r"u^{(1)}_{i,j} = \sum_{\lambda = 0}^{d_{k} - 1} q^{(1)}_{i,\lambda} k^{(1)}_{j,\lambda}"]
    assert _lines(block["layer1.add_norm1"]) == [
        r"y_{i,j} = \frac{\gamma_{j} \mathopen{}\left( r_{i,j} - \mu_{i} \mathclose{}\right)}"
        r"{\sqrt{ \sigma^2_{i} + \varepsilon }} + \beta_{j}"]
    assert _lines(block["layer1.add_norm1.variance"]) == [
        r"\sigma^2_{i} = \frac{1}{d} \sum_{j = 0}^{d - 1} \mathopen{}\left( r_{i,j} - \mu_{i} "
        r"\mathclose{}\right)^{2}"]
    assert _lines(block["layer1.ffn.activation"]) == [
        r"a_{i,j} = \max \mathopen{}\left( 0, h_{i,j} \mathclose{}\right)"]
    assert _lines(block["positional_encoding"])[0] == (
        r"\mathrm{PE}_{\mathit{pos},2l} = \sin \mathopen{}\left( "
        r"\frac{\mathit{pos}}{10000^{2 l/d_{\text{model}}}} "
        r"\mathclose{}\right)")
    assert _lines(block["layer1.head2.K"]) == [
        r"k^{(2)}_{i,j} = \sum_{\lambda = 0}^{d_{\text{in}} - 1} x_{i,\lambda} "
        r"\left(W_{K}^{(2)}\right)_{\lambda,j}"]
    # no sum runs over m, the attention output, nor over k, the key (issue 39, item 5);
    # a sum over a row's features runs over the feature index λ
    assert r"\sum_{\lambda = 0}" in _lines(block["layer1.attention.output"])[0]
    assert _lines(block["layer1.add_norm1.sum"]) == [r"r_{i,j} = x_{i,j} + m_{i,j}"]
    assert _lines(block["layer1.attention.concat"]) == [
        r"c_{i,j} = \left\{ \begin{array}{ll} o^{(1)}_{i,j}, & \mathrm{if} \ j < d_{v} \\ "
        r"o^{(2)}_{i,j-d_{v}}, & \mathrm{otherwise} \end{array} \right."]


def test_every_stage_has_a_numbered_labelled_equation(block):
    for stage in block:
        latex = to_latex(numbered_equation(stage))
        assert re.search(r"\\begin\{(equation|align)\}", latex)
        assert f"\\label{{eq:{stage.name}}}" in latex


def test_causal_mask_appears_only_when_masked(block, causal_block):
    assert r"-\infty" not in to_latex(numbered_equation(block["layer1.head1.scores"]))
    masked = _lines(causal_block["layer1.head1.scores"])[0]
    assert r"\mathrm{if} \ j \le i \\ -\infty, & \mathrm{otherwise}" in masked


def test_conventions_change_the_equations():
    example = load_example()
    unbiased = derive_variant(example, Convention(layer_norm="unbiased"))
    assert _lines(unbiased["layer1.add_norm1.variance"])[0].startswith(
        r"\hat{\sigma}^2_{i} = \frac{1}{d - 1} \sum_{j = 0}^{d - 1}")
    assert r"\sqrt{ \hat{\sigma}^2_{i} } + \varepsilon" in _lines(unbiased["layer1.add_norm1"])[0]
    whole = derive_variant(example, Convention(layer_norm="whole_matrix"))
    assert _lines(whole["layer1.add_norm1.mean"])[0].startswith(
        r"\mu_{i} = \frac{1}{n d} \sum_{i' = 0}^{n - 1} \sum_{j = 0}^{d - 1} r_{i',j}")
    nines = derive_variant(example, Convention(mask="-1e9"), causal=True)
    assert r"\frac{u^{(1)}_{i,j}}{\sqrt{ d_{k} }} + M, & \mathrm{otherwise}" in _lines(
        nines["layer1.head1.scores"])[0]
    pre = derive(example, causal=False)
    assert _lines(pre["output"]) == ["z_{i,j} = y'_{i,j}"]  # the second sub-layer's y′


def test_the_backward_rules_a_reader_found_wrong_are_right(block):
    """Issue 21: dL/dq is a sum over the keys, dL/do reads dL/dc's own columns (no
    undefined S), ReLU's rule has an indicator, a gradient read by several stages is a
    sum of named contributions (never several equalities), 2 (σ² + ε)^{3/2}."""
    from symformer.blocks.backward import with_gradients
    from symformer.equations.render import mathml
    from symformer.equations.stage import equation_lines

    g = with_gradients(block)

    def text(name):
        return [line.text for line in equation_lines(g[name])]

    assert text("grad.layer1.head1.Q") == [
        "∂L/∂q^(1)_(i,j) = Σ_(j′=0..n−1) ∂L/∂u^(1)_(i,j′) k^(1)_(j′,j)"]
    assert text("grad.layer1.head1.output") == ["∂L/∂o^(1)_(i,j) = ∂L/∂c_(i,j)"]
    assert text("grad.layer1.head2.output") == ["∂L/∂o^(2)_(i,j) = ∂L/∂c_(i,j+2)"]
    assert text("grad.layer1.ffn.hidden") == ["∂L/∂h_(i,j) = ∂L/∂a_(i,j) 𝟙[h_(i,j) > 0]"]
    total, *parts = text("grad.layer1.add_norm2.sum")
    # the second sub-layer's statistics are primed as its r' and y' are (issue 29)
    assert total == "∂L/∂r′_(i,j) = δ^(μ′)_(i,j) + δ^(σ′²)_(i,j) + δ^(y′)_(i,j)"
    assert [p.split(" = ")[0] for p in parts] == ["δ^(μ′)_(i,j)", "δ^(σ′²)_(i,j)",
                                                  "δ^(y′)_(i,j)"]
    (variance,) = text("grad.layer1.add_norm2.variance")
    assert variance.endswith("/ (2 (σ′²_i + ε)^(3/2))") and "1.5" not in variance
    for stage in g:  # every line converts to MathML (the HTML trace)
        for line in equation_lines(stage):
            assert mathml(line.latex).startswith("<math")
