"""``moe_dropout`` through every format: the notes (the mixture's equation and the
decided table), slides, the HTML trace, the figures (a "Mixture of experts" box),
``check`` on claims about the router's probabilities, the chosen experts, the gates,
the margin, the dropout output, mask and factor (right and wrong), and PyTorch's own float64
forward of the exported module (``torch.topk``) against the exact stages."""

from __future__ import annotations

import pytest

from symformer.cli import main
from symformer.example.loader import packaged_examples

TEXT = packaged_examples()["moe_dropout"].read_text(encoding="utf-8")
CLAIMS = """
[[claim]]
stage = "layer1.moe.router_probabilities"
decimals = 3
values = [[0.867, 0.016, 0.117], [0.090, 0.665, 0.245], [0.333, 0.333, 0.333]]

[[claim]]
stage = "layer1.moe.experts"
values = [[1, 0, 1], [0, 1, 1], [1, 1, 0]]

[[claim]]
stage = "layer1.moe.gates"
decimals = 3
values = [[0.881, 0, 0.119], [0, 0.731, 0.269], [0.5, 0.5, 0]]

[[claim]]
stage = "layer1.moe.margin"
values = [[2], [1], [0]]

[[claim]]
stage = "layer1.attention.output.dropout"
values = [[1, 0], [0, 0], [1, 1]]

[[claim]]
stage = "layer1.moe.output.dropout.mask"
values = [[1, 0], [1, 1], [0, 1]]

[[claim]]
stage = "layer1.attention.output.dropout.keep_scale"
values = 1.5
"""


def test_notes_slides_trace_and_figures(tmp_path):
    assert main(["export", "moe_dropout", "--format", "markdown", "--quiet",
                 "--out", str(tmp_path / "md")]) == 0
    notes = (tmp_path / "md" / "main.md").read_text(encoding="utf-8")
    assert r"\tilde{f}_{i,j} &= G_{i,0} f^{[1]}_{i,j} + G_{i,1} f^{[2]}_{i,j}" in notes
    assert r"\chi_{i,j} &= K_{i,j}" in notes and r"\delta_{i} &= \rho_{i,a_{i}}" in notes
    assert main(["slides", "moe_dropout", "--quiet", "--out", str(tmp_path / "s")]) == 0
    assert main(["trace", "moe_dropout", "--token", "2", "--format", "html",
                 "--out", str(tmp_path / "t.html")]) == 0
    assert "Mixture of the experts" in (tmp_path / "t.html").read_text(encoding="utf-8")
    assert main(["figures", "moe_dropout", "--quiet", "--out", str(tmp_path / "f")]) == 0
    diagram = (tmp_path / "f" / "block-diagram.tex").read_text(encoding="utf-8")
    assert "Mixture of experts" in diagram and "top-2" in diagram
    assert "dropout $p = 1/3$ (given mask)" in diagram


def test_check_judges_claims_on_the_routing(tmp_path, capsys):
    path = tmp_path / "claims.toml"
    path.write_text(TEXT + CLAIMS, encoding="utf-8")
    assert main(["check", str(path)]) == 0
    assert "43 of 43 numbers correct" in capsys.readouterr().out
    # the tied token's gates written as if the tie were not broken (1/3 each): wrong
    path.write_text(TEXT + CLAIMS.replace("[0.5, 0.5, 0]]", "[0.333, 0.333, 0.333]]"),
                    encoding="utf-8")
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "claimed 0.333, correct 0.500" in out and "claimed 0.333, correct 0.000" in out
    # the Switch Transformer's gates (the router's probabilities, not renormalised): wrong
    # here, and check names the convention that gives every one of them
    switch = CLAIMS.replace("[[0.881, 0, 0.119], [0, 0.731, 0.269], [0.5, 0.5, 0]]",
                            "[[0.867, 0, 0.117], [0, 0.665, 0.245], [0.333, 0.333, 0]]")
    path.write_text(TEXT + switch, encoding="utf-8")
    assert main(["check", str(path)]) == 1
    assert "why: every number is right under another convention: the kept experts' router " \
        "probabilities as they are, not renormalised (the Switch Transformer's gates" \
        in capsys.readouterr().out


def test_pytorch_forward_agrees_stage_by_stage(capsys):
    pytest.importorskip("torch")
    assert main(["crosscheck", "moe_dropout", "--torch"]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()
            if line.startswith(("layer1.", "output"))}
    for stage in ("layer1.moe.experts", "layer1.moe.margin", "layer1.moe.gates",
                  "layer1.attention.output.dropout", "layer1.moe.output.dropout", "output"):
        assert float(rows[stage][1]) <= 1e-15, rows[stage]  # max abs error
