"""The properties a chapter states where it teaches (issue 39, item 8), only as proved.

Checked against the definitions by hand: a softmax row of exponentials over their sum
sums to 1 and is non-negative; LayerNorm's normalised row (x - μ)/√(σ² + ε) has mean 0
and variance σ²/(σ² + ε), which is below 1 for ε > 0 (checked here with fractions on
a row of the example's own input).  A fact shown false or unproved is never stated.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from symformer import derive, load_example
from symformer.latex.blocks import Math
from symformer.latex.properties import property_prose
from symformer.ops.facts import FALSE, Fact


@pytest.fixture(scope="module")
def g():
    return derive(load_example())


def _text(prose) -> str:
    return "".join(p.latex if isinstance(p, Math) else p for p in prose.parts)


def test_attention_weights_are_a_convex_combination(g):
    text = _text(property_prose(g["layer1.head1.weights"]))
    assert r"\alpha" in text and "sums to exactly 1" in text and "convex combination" in text
    # the claim itself, on the certified table: rows sum to 1 within rounding, entries >= 0
    for row in g["layer1.head1.weights"].values(decimals=6):
        values = [Fraction(t) for t in row]
        assert min(values) >= 0 and abs(sum(values) - 1) <= Fraction(len(values), 2 * 10 ** 6)


def test_layer_norm_variance_is_not_one(g):
    stage = g["layer1.add_norm1"]
    text = _text(property_prose(stage))
    assert r"\frac{\sigma^2}{\sigma^2 + \varepsilon}" in text and "not 1" in text
    # by hand on row 0 with fractions: (x - mu) / sqrt(var + eps) has variance var/(var+eps)
    x = [Fraction(t) for t in g[stage.inputs[0]].values(decimals=30)[0]]
    mu = sum(x) / len(x)
    var = sum((v - mu) ** 2 for v in x) / len(x)
    eps = Fraction(stage.op.eps.p, stage.op.eps.q)
    assert 0 < var / (var + eps) < 1


def test_nothing_said_without_a_proof(g, monkeypatch):
    assert property_prose(g["layer1.head1.scores"]) is None
    assert property_prose(g["embeddings"]) is None
    stage = g["layer1.head1.weights"]
    monkeypatch.setattr(type(stage.op), "facts", lambda self, s: [
        Fact(f"{s.name}.row_sums", "every row sums to 1", FALSE, "row 0 does not")])
    assert property_prose(stage) is None


def test_the_notes_state_them_after_the_table(g):
    """latex/document.py's hook: the notes' fragments carry each paragraph right after
    the stage's table, and the causal section adds only the last token's row."""
    from symformer.latex import Options, export_files

    files = export_files(g, Options(decimals=2, token=1), "latex")
    order = [k for k in files if k.startswith("fragments/layer1-head1-weights-")]
    assert order.index("fragments/layer1-head1-weights-property.tex") == \
        order.index("fragments/layer1-head1-weights-table.tex") + 1
    assert "convex combination" in files["fragments/layer1-head1-weights-property.tex"]
    assert r"\varepsilon" in files["fragments/layer1-add_norm1-property.tex"]
    causal = files["fragments/causal-layer1-head1-weights-property.tex"]
    assert "last token" in causal and "convex" not in causal
    main = files["main.tex"]
    assert main.index("layer1-head1-weights-table") < main.index(
        "layer1-head1-weights-property") < main.index("layer1-head1-weights-worked")


def test_last_token_unchanged_by_the_mask(g):
    """What the causal sentence says, checked on the values: the built-in block's last
    output row is the same (to 30 decimals) with and without the mask, while an earlier
    row differs; and the last row of the masked weights has no masked entry."""
    from symformer import derive, load_example

    masked = derive(load_example(), causal=True)
    last = g["output"].shape[0] - 1
    plain_rows, masked_rows = g["output"].values(decimals=30), masked["output"].values(
        decimals=30)
    assert plain_rows[last] == masked_rows[last]
    assert plain_rows[0] != masked_rows[0]
    weights = masked["layer1.head1.weights"].values(decimals=6)
    assert all(Fraction(w) > 0 for w in weights[last])
    assert "last token" in _text(property_prose(masked["layer1.head1.weights"], again=True))
