"""A sum over a row's features runs over a letter of its own (issue 39's chapter notes).

A textbook writes the dot product as u_ij = Σ_λ q_iλ k_jλ: the index of the sum is not
the key's position j′ (a sum over the keys) nor m (the multi-head output).  The scan
reads the notes' LaTeX (not compiled) of the built-in block and of encoder_decoder,
each with its Backward part:

* every displayed sum up to a width (d_in, d_out, d_k, d_v) runs over λ, every sum up
  to n over a position (j′, i′, i), and none over m;
* the notation table lists λ once, as the feature index.
"""

from __future__ import annotations

import re

import pytest
from test_notation_meanings import notation_table
from test_notation_scans import tex_files

#: A displayed sum and its index and upper limit: ``\sum_{\lambda = 0}^{d_{k} - 1}``.
SUM = re.compile(r"\\sum_\{(\\lambda|[a-z]'?) = 0\}\^\{(.*?) - 1\}")
WIDTHS = {r"d_{\text{in}}", r"d_{\text{out}}", "d_{k}", "d_{v}"}


@pytest.mark.parametrize("name", ["builtin", "encoder_decoder"])
def test_sums_over_features_run_over_lambda(name):
    text = "".join(tex_files(name).values())
    sums = SUM.findall(text)
    over_widths = {index for index, top in sums if top in WIDTHS}
    assert over_widths == {r"\lambda"}, over_widths
    over_positions = {index for index, top in sums if top == "n"}
    assert over_positions and r"\lambda" not in over_positions, over_positions
    assert "m" not in {index for index, _ in sums}
    # the projections and the dot products, forward and backward
    assert r"q^{(1)}_{i,\lambda} k^{(1)}_{j,\lambda}" in text
    assert r"\right)_{\lambda,j}" in text


@pytest.mark.parametrize("name", ["builtin", "encoder_decoder"])
def test_lambda_listed_once_as_the_feature_index(name):
    rows = [(s, m) for s, m in notation_table(tex_files(name)["main.tex"]) if s == r"$\lambda$"]
    assert len(rows) == 1 and rows[0][1].startswith("Feature index"), rows
