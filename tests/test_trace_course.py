"""The course module's block: no W_O, and what a whole-matrix LayerNorm does.

The whole-matrix LayerNorm (mean and variance over every entry, as
``x.mean()``/``x.var()`` without an axis compute) is written here independently in
float64 and compared with the per-token LayerNorm of the same residual sums.
"""

from __future__ import annotations

from importlib import resources

import numpy as np
import pytest
from float_reference import float_forward

from symformer import derive, load_example
from symformer.cli import main
from symformer.conventions import Convention, derive_variant
from symformer.trace import trace_token


@pytest.fixture(scope="module")
def course():
    path = resources.files("symformer").joinpath("examples/course_module.toml")
    return load_example(str(path))


@pytest.fixture(scope="module")
def course_block(course):
    return derive(course)


def whole_matrix_layer_norm(x: np.ndarray, eps: float) -> np.ndarray:
    """The course code's layer_norm: one mean and one variance for the whole matrix."""
    mu = x.sum() / x.size
    var = ((x - mu) ** 2).sum() / x.size
    return (x - mu) / np.sqrt(var + eps)


def per_token_layer_norm(x: np.ndarray, eps: float) -> np.ndarray:
    mu = x.sum(axis=1, keepdims=True) / x.shape[1]
    var = ((x - mu) ** 2).sum(axis=1, keepdims=True) / x.shape[1]
    return (x - mu) / np.sqrt(var + eps)


def test_the_module_example(course, course_block):
    assert course.tokens[1] == "export" and len(course.tokens) == 4
    assert course.layers[0].W_O is None and len(course.layers[0].heads) == 2
    concat = course_block["layer1.attention.concat"].values(decimals=12)
    assert course_block["layer1.attention.output"].values(decimals=12) == concat
    # PE(1) as the module prints it: [0.84, 0.54, 0.01, 1.00]
    assert course_block["positional_encoding"].values(decimals=2)[1] == \
        ["0.84", "0.54", "0.01", "1.00"]


def test_trace_of_export(course_block):
    trace = trace_token(course_block, "export", decimals=3)
    assert trace.position == 1
    steps = {s.stage: s for s in trace.steps}
    assert "Multi-head output" in steps["layer1.attention.output"].title
    assert "no W_O" in steps["layer1.attention.output"].general[0].text
    for name, step in steps.items():
        assert step.values == course_block[name].values(decimals=3)[1]


def test_whole_matrix_layer_norm_changes_the_numbers(course, course_block):
    eps = 1e-5
    ref = float_forward(course)
    total = ref["layer1.add_norm1.sum"]
    per_token = per_token_layer_norm(total, eps)
    whole = whole_matrix_layer_norm(total, eps)
    # the engine follows the per-token definition ...
    engine = np.array([[float(v) for v in row]
                       for row in course_block["layer1.add_norm1"].values(decimals=12)])
    assert np.allclose(engine, per_token, atol=1e-11)
    # ... and the whole-matrix version is a different matrix: export's row moves a lot
    assert np.abs(whole - per_token).max() > 0.5
    assert abs(whole[1].mean()) > 0.5 and abs(per_token[1].mean()) < 1e-9
    # the exact whole-matrix variant (symformer.conventions) agrees with the float one
    variant = derive_variant(course, Convention(layer_norm="whole_matrix"))
    exact = np.array([[float(v) for v in row]
                      for row in variant["layer1.add_norm1"].values(decimals=12)])
    assert np.allclose(exact, whole, atol=1e-11)


def test_cli_traces_the_whole_matrix_variant(capsys, course_block):
    path = str(resources.files("symformer").joinpath("examples/course_module.toml"))
    assert main(["trace", path, "--token", "export", "--decimals", "2"]) == 0
    per_token = capsys.readouterr().out
    assert main(["trace", path, "--token", "export", "--decimals", "2",
                 "--layer-norm", "whole_matrix"]) == 0
    whole = capsys.readouterr().out
    assert "μ_i = (1/(n d)) Σ_(i′=0..n−1) Σ_(j=0..d−1) r_(i′,j)" in whole
    assert "(over every entry of the" in whole  # the remark (wrapped to the terminal)
    assert "every entry of the matrix" not in per_token
    assert "μ_i = (1/d) Σ_(j=0..d−1) r_(i,j)" in per_token
    block = per_token.split("[24/33]")[1].split("[25/33]")[0]  # after mu, sigma^2, s
    row = course_block["layer1.add_norm1"].values(decimals=2)[1]
    lines = block.splitlines()
    header = next(k for k, line in enumerate(lines) if line.split()[:1] == ["y_0"])
    assert lines[header + 1].split() == row
