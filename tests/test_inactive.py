"""What an example leaves inactive (symformer.analysis.inactive), against float64 NumPy.

The built-in block (the blog post's weights): every FFN hidden unit is negative for
every token, so the FFN outputs exactly b_2 and the gradients of W_1, b_1 and W_2 are
exactly 0.  The reference is an independent float64 forward pass
(tests/float_reference.py) and a float64 finite-difference loss written here from the
textbook formulas; the engine's exactness is checked on its closed forms.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import mpmath
import numpy as np
import pytest
from float_backward import float_backward
from float_reference import as_float, float_forward

from symformer.analysis.inactive import (
    AttentionPattern,
    ConstantOutput,
    DeadUnits,
    NearIdentity,
    ZeroGradient,
    inactive,
    summary,
)
from symformer.blocks import derive
from symformer.blocks.backward import with_gradients
from symformer.cli import main
from symformer.example import load_example, parse_example
from symformer.example.loader import builtin_text
from symformer.latex.inactive import inactive_fragments
from symformer.latex.render import to_latex
from symformer.lazy import sympy

#: One unit (h_2) of three dead, and a head whose queries are 0 (uniform weights).
ONE_DEAD = """
title = "One dead unit"
tokens = ["a", "b"]
vocab = ["a", "b"]
embeddings = [[1, 0], [0, 2]]
positional_encoding = "none"
norm = "none"

[[layer]]
W_1 = [[1, 0, 1], [0, 1, 1]]
b_1 = [0, 0, -5]
W_2 = [[1, 0], [0, 1], [1, 1]]
b_2 = [0, 0]

[[layer.head]]
W_Q = [[0, 0], [0, 0]]
W_K = [[1, 0], [0, 1]]
W_V = [[1, 0], [0, 1]]
"""


@pytest.fixture(scope="module")
def builtin():
    example = load_example()
    g = with_gradients(derive(example))
    return example, g, inactive(g)


def _float_loss(example, y: np.ndarray, W_1, b_1, W_2, b_2) -> float:
    """The built-in's FFN, second Add & Norm and MSE loss in float64, from the first
    norm's output ``y`` (textbook formulas, not the engine's)."""
    layer = example.layers[0]
    f = np.maximum(y @ W_1 + b_1, 0.0) @ W_2 + b_2
    r = y + f
    mu = r.mean(axis=1, keepdims=True)
    z = (r - mu) / np.sqrt(r.var(axis=1, keepdims=True) + float(layer.eps))
    z = as_float(layer.gamma_2) * z + as_float(layer.beta_2)
    return float(np.mean((z - as_float(example.loss.target)) ** 2))


def test_builtin_every_hidden_unit_is_dead(builtin):
    example, g, found = builtin
    dead = [r for r in found if isinstance(r, DeadUnits)]
    assert dead == [DeadUnits("layer1.ffn.activation", "layer1.ffn.hidden",
                              (0, 1, 2, 3, 4, 5), 6, False)]
    hidden = float_forward(example)["layer1.ffn.hidden"]
    assert hidden.shape == (4, 6) and (hidden < -0.05).all()  # well clear of 0 in floats


def test_builtin_ffn_output_is_b2_exactly(builtin):
    example, g, found = builtin
    assert ConstantOutput("layer1.ffn.output", "layer1.ffn.activation", "b_2") in found
    b_2 = example.layers[0].b_2
    exact = g["layer1.ffn.output"].exact()
    assert exact == sympy.Matrix([list(b_2.row(0))] * 4)  # 1/10 in every entry
    assert all(v == sympy.Rational(1, 10) for v in exact)
    ref = float_forward(example)["layer1.ffn.output"]
    assert np.array_equal(ref, np.tile(as_float(b_2), (4, 1)))


def test_builtin_second_sublayer_nearly_identity(builtin):
    example, g, found = builtin
    near = [r for r in found if isinstance(r, NearIdentity)]
    assert near == [NearIdentity("layer1.add_norm2", "layer1.add_norm1", 6,
                                 "layer1.ffn.output")]
    ref = float_forward(example)
    gap = np.abs(ref["layer1.add_norm2"] - ref["layer1.add_norm1"]).max()
    assert 1e-8 < gap < 1e-6  # the bound 10^-6 holds and is not loose by much


def test_builtin_ffn_weight_gradients_are_zero(builtin):
    example, g, found = builtin
    zero = {r.stage: r for r in found if isinstance(r, ZeroGradient)}
    assert set(zero) == {"grad.layer1.W_1", "grad.layer1.b_1", "grad.layer1.W_2"}
    assert all(r.through == "layer1.ffn.activation" for r in zero.values())
    assert zero["grad.layer1.W_2"].reads and not zero["grad.layer1.W_1"].reads
    balls = g.evaluate(128)
    for name in zero:  # exactly 0: balls of radius 0 at 0 (certified, not small)
        assert all(b == 0 for row in balls[name] for b in row)
    floats = float_backward(example)
    for name in zero:
        assert floats[name].shape == g[name].shape and not floats[name].any()
    assert np.abs(floats["grad.layer1.b_2"]).min() > 1e-3  # the reference sees gradients
    # float64 finite differences: moving W_1, b_1 or W_2 leaves the loss unchanged,
    # moving b_2 does not (the reference can tell a zero gradient from a non-zero one)
    layer = example.layers[0]
    y = float_forward(example)["layer1.add_norm1"]
    weights = [as_float(m) for m in (layer.W_1, layer.b_1, layer.W_2, layer.b_2)]
    base = _float_loss(example, y, *weights)
    for k in range(4):
        for index in np.ndindex(weights[k].shape):
            moved = [w.copy() for w in weights]
            moved[k][index] += 1e-3
            change = _float_loss(example, y, *moved) - base
            if k < 3:
                assert change == 0.0, (k, index)
            elif index == (0, 0):
                assert abs(change) > 1e-6


def test_builtin_sentences(builtin):
    example, g, found = builtin
    text = " ".join(summary(g, found))
    assert "Every unit of the FFN hidden layer (h_0, …, h_5) is negative for every " \
           "token, so the ReLU clips them all: a = 0 for every token." in text
    assert "∂L/∂W_1, ∂L/∂b_1 and ∂L/∂W_2 are exactly 0 at every entry" in text
    assert "less than 10^-6" in text
    latex = to_latex(inactive_fragments(g["layer1.ffn.activation"], "x")[0])
    assert r"$h_{0}, \dots, h_{5}$" in latex and r"$\partial L/\partial W_{1}$" in latex
    assert inactive_fragments(g["layer1.head1.Q"], "x") == []


def test_derive_prints_the_note(capsys):
    assert main(["derive", "--stage", "layer1.ffn.*"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert out.count("What this example leaves inactive:") == 1
    assert "Layer 1, Feed-forward: Every unit of the FFN hidden layer (h_0, …, h_5) is " \
           "negative for every token" in out
    assert "exactly its bias, f = b_2" in out


def test_one_dead_unit_of_three_and_a_uniform_head(tmp_path):
    path = tmp_path / "one_dead.toml"
    path.write_text(ONE_DEAD)
    example = load_example(path)
    g = derive(example)
    found = inactive(g)
    hidden = float_forward(example)["layer1.ffn.hidden"]  # hand check: [1.5, 1, -2.5], ...
    assert (hidden[:, 2] < 0).all() and (hidden[:, :2] > 0).any(axis=0).all()
    assert [r for r in found if isinstance(r, DeadUnits)] == [
        DeadUnits("layer1.ffn.activation", "layer1.ffn.hidden", (2,), 3, False)]
    assert AttentionPattern("layer1.head1.weights", "uniform") in found
    assert not any(isinstance(r, ConstantOutput) for r in found)
    text = " ".join(summary(g, found))
    assert "Unit h_2 of the FFN hidden layer is negative for every token" in text
    assert "h_0" not in text and "h_1" not in text
    assert "the output o is the plain mean of the values v it sees" in text


@pytest.mark.parametrize("name", ["gpt2_style", "llama_style"])
def test_nothing_inactive_no_sentence(name):
    g = derive(load_example(f"symformer/examples/{name}.toml"))
    assert inactive(g) == ()
    assert summary(g) == []


def test_a_sublayer_exactly_the_identity(tmp_path):
    """Every unit clipped and b_2 = 0, no norm: x + f = x exactly (decided by an exact
    comparison, the balls alone cannot tell)."""
    path = tmp_path / "all_dead.toml"
    path.write_text(ONE_DEAD.replace("b_1 = [0, 0, -5]", "b_1 = [-9, -9, -9]"))
    example = load_example(path)
    g = derive(example)
    found = inactive(g)
    assert (float_forward(example)["layer1.ffn.hidden"] < 0).all()
    assert ConstantOutput("layer1.ffn.output", "layer1.ffn.activation", "b_2") in found
    assert NearIdentity("layer1.add_norm2", "layer1.add_norm1", None,
                        "layer1.ffn.output") in found
    text = " ".join(summary(g, found))
    assert "the feed-forward sub-layer is exactly the identity" in text


def test_near_identity_with_a_tiny_eps_is_decided_by_balls_quickly():
    """eps = 1e-100 in the encoder-decoder: the second Add & Norm changes its input by
    about 1e-101, which no ball at the working precision separates from 0; the analysis
    decides it with balls at a higher precision (bounded), not with an unbounded
    symbolic proof (81 s before).  float64 agrees that the change is below 10^-12."""
    text = Path("symformer/examples/encoder_decoder.toml").read_text()
    text = re.sub(r'(?m)^eps = .*$', 'eps = "1e-100"', text)
    example = parse_example(text)
    g = derive(example)
    start = time.process_time()
    found = inactive(g)
    assert time.process_time() - start < 2
    assert NearIdentity("layer1.add_norm2", "layer1.add_norm1", 12,
                        "layer1.ffn.output") in found
    ref = float_forward(example)
    assert np.abs(ref["layer1.add_norm2"] - ref["layer1.add_norm1"]).max() < 1e-12


def test_undecided_equalities_are_not_called_exact(monkeypatch):
    """With no precision to spare and no proof, the same sub-layer is only 'nearly' the
    identity (a certified bound), never 'exactly'."""
    from symformer.analysis import inactive as module

    text = Path("symformer/examples/encoder_decoder.toml").read_text()
    g = derive(parse_example(re.sub(r'(?m)^eps = .*$', 'eps = "1e-100"', text)))
    monkeypatch.setattr(module, "REFINE_PRECISION", 64)
    monkeypatch.setattr(module, "MAX_PROOFS", 0)
    near = [r for r in module.inactive(g) if isinstance(r, NearIdentity)]
    assert [r.digits for r in near] == [12]


def test_a_huge_key_weight_is_no_internal_error(capsys):
    """A key weight of 1e50 (within the examples' 1e100): the header analysis meets a
    difference ball that is not finite at the working precision and says nothing of it
    (was 'internal error: man_exp requires an exact, finite value'); the output is
    float64's (the softmax is one-hot to 1e-40)."""
    text = builtin_text().replace("[0, 0.25], [0.25, 0.25]]", '[0, "1e50"], [0.25, 0.25]]', 1)
    assert '"1e50"' in text
    example = parse_example(text)
    g = derive(example)
    inactive(g)  # no exception
    last = g.stages[list(g.stages)[-1]]
    ref = float_forward(example)[last.name]
    got = np.array([[float(v) for v in row] for row in last.values(decimals=12)])
    assert np.abs(got - ref).max() < 1e-9


@pytest.mark.parametrize("setting, angle", [
    ('rope_theta = "1e100"', lambda p: p * mpmath.mpf(10) ** 100),  # one pair: p θ
    ('rope_angles = [["1e100"], ["1e100"], ["1e100"], ["1e100"]]',
     lambda p: mpmath.mpf(10) ** 100)])
def test_huge_rope_settings_derive_in_full(setting, angle, tmp_path, capsys):
    """RoPE with θ = 1e100 or angles of 1e100 rad in the built-in (was an internal error
    in the header analysis): derive prints every stage (equal angles make exact ties of
    the scores, printed as certified ranges with a warning), and the rotated keys are
    the keys turned by the angle, computed with mpmath at 150 digits (cos(1e100) needs
    the argument reduction)."""
    text = builtin_text().replace('positional_encoding = "sinusoidal"',
                                  f'positional_encoding = "rope"\n{setting}', 1)
    path = tmp_path / "rope.toml"
    path.write_text(text)
    assert main(["derive", str(path)]) == 0
    assert "internal error" not in capsys.readouterr().err
    g = derive(parse_example(text))
    keys = g["layer1.head1.K"].exact()
    got = g["layer1.head1.K_rot"].values(decimals=12)
    with mpmath.workdps(150):
        for p in range(keys.rows):
            a = angle(p)
            k0, k1 = (mpmath.mpf(sympy.Rational(v).p) / sympy.Rational(v).q
                      for v in keys.row(p))
            expected = (k0 * mpmath.cos(a) - k1 * mpmath.sin(a),
                        k0 * mpmath.sin(a) + k1 * mpmath.cos(a))
            for j, value in enumerate(expected):
                assert abs(mpmath.mpf(got[p][j]) - value) <= mpmath.mpf("5e-13"), (p, j)
