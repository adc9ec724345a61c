"""The shapes lessons come in: RoPE with given frequencies or angles.

References, independent of the engine: the rotation written by hand (pair (a, b) at
angle phi goes to (a cos phi - b sin phi, a sin phi + b cos phi)), an independent
float64 NumPy rotation, the displayed equation proved at every entry
(tests/test_equations_proved.py's prover), bad values refused in one line.
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy
from test_equations_proved import prove_stage

from symformer import derive
from symformer.blocks.backward import backward
from symformer.errors import InputError
from symformer.example.loader import parse_example

HEAD = """
[[layer]]

[[layer.head]]
W_Q = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
W_K = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
W_V = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
"""


def rope_example(keys: str, style: str = "interleaved") -> str:
    return f"""
title = "rope"
tokens = ["a", "b", "c"]
vocab = ["a", "b", "c"]
embeddings = [[1, 0, 2, 0], [0, 1, 0, -1], [1, 1, "1/2", 3]]
positional_encoding = "rope"
rope_style = "{style}"
norm = "none"
residual = false
{keys}
""" + HEAD


X = [[1, 0, 2, 0], [0, 1, 0, -1], [1, 1, sympy.Rational(1, 2), 3]]


def hand_rotation(angles, style: str) -> sympy.Matrix:
    """Each pair (a, b) of row m turned by angles[m][i], written out by hand."""
    pairs = [(0, 1), (2, 3)] if style == "interleaved" else [(0, 2), (1, 3)]
    out = sympy.zeros(3, 4)
    for m in range(3):
        for i, (a, b) in enumerate(pairs):
            phi = angles[m][i]
            out[m, a] = X[m][a] * sympy.cos(phi) - X[m][b] * sympy.sin(phi)
            out[m, b] = X[m][a] * sympy.sin(phi) + X[m][b] * sympy.cos(phi)
    return out


CASES = [
    ("rope_theta = 0.5", lambda m, i: sympy.Rational(m, 2)),
    ('rope_theta = ["1/2", "pi/4"]', lambda m, i: m * [sympy.Rational(1, 2), sympy.pi / 4][i]),
    ('rope_angles = [[0, 0], ["0.5", 1], ["pi/3", "-1/4"], [7, 7]]',
     lambda m, i: [[0, 0], [sympy.Rational(1, 2), 1], [sympy.pi / 3, -sympy.Rational(1, 4)]][m][i]),
]


@pytest.mark.parametrize("style", ["interleaved", "half"])
@pytest.mark.parametrize("keys, angle", CASES)
def test_given_rope_angles_are_the_hand_rotation(keys, angle, style):
    g = derive(parse_example(rope_example(keys, style), "t.toml"))
    angles = [[angle(m, i) for i in range(2)] for m in range(3)]
    expected = hand_rotation(angles, style)
    stage = g["layer1.head1.Q_rot"]
    for m in range(3):
        for j in range(4):
            assert sympy.simplify(stage.closed_form(m, j) - expected[m, j]) == 0
    # an independent float64 rotation against the certified digits
    floats = np.array(expected.evalf(30).tolist(), dtype=float)
    printed = np.array(stage.values(decimals=12), dtype=float)
    assert np.allclose(printed, floats, atol=1e-12)
    assert prove_stage(g, stage) == 12


def test_given_rope_backward_equation_is_proved():
    text = rope_example('rope_theta = ["1/2", "pi/4"]') + (
        '\n[loss]\nkind = "mse"\ntarget = [[0, 1, 0, 0], [1, 0, 2, 0], [0, 0, 0, 1]]\n')
    g = backward(derive(parse_example(text, "t.toml")))
    assert prove_stage(g, g["grad.layer1.head1.Q"]) == 12


def test_default_frequencies_unchanged():
    g = derive(parse_example(rope_example(""), "t.toml"))
    angles = [[m * sympy.Integer(10000) ** sympy.Rational(-2 * i, 4) for i in range(2)]
              for m in range(3)]
    expected = hand_rotation(angles, "interleaved")
    assert sympy.simplify(g["layer1.head1.K_rot"].closed_form(2, 3) - expected[2, 3]) == 0


@pytest.mark.parametrize("keys, message", [
    ("rope_theta = [1, 2, 3]", "t.toml: rope_theta has 3 entries, expected 2"),
    ('rope_theta = "x"', "t.toml: rope_theta[0]: 'x' is not a number"),
    ("rope_angles = [[0, 0], [1, 1]]", "t.toml: rope_angles has 2 rows, fewer than the 3"),
    ("rope_angles = [[0], [1], [2]]", "t.toml: rope_angles has shape 3x1, expected ?x2"),
    ("rope_theta = 1\nrope_angles = [[0, 0]]", "t.toml: rope_theta and rope_angles both"),
    ("rope_theta = 1\npositional_encoding_base = 100",
     "t.toml: rope_theta and positional_encoding_base both"),
])
def test_bad_rope_keys(keys, message):
    with pytest.raises(InputError) as error:
        parse_example(rope_example(keys), "t.toml")
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_rope_theta_needs_rope():
    text = rope_example("rope_theta = 1").replace('encoding = "rope"', 'encoding = "none"')
    with pytest.raises(InputError, match="t.toml: rope_theta is used by the rope encoding "
                                         "only; positional_encoding is 'none'"):
        parse_example(text, "t.toml")


# -- a head narrower than d_model without W_O -----------------------------------------

NARROW = """
title = "narrow head"
tokens = ["a", "b", "c"]
vocab = ["a", "b", "c"]
embeddings = [[1, 0, 1], [0, 2, 0], [1, 1, 1]]
positional_encoding = "none"
norm = "none"
residual = false
{top}
[[layer]]
{layer}
[[layer.head]]
W_Q = [[1, 0], [0, 1], [1, 1]]
W_K = [[0, 1], [1, 0], [1, 1]]
W_V = [[1, 0], [0, 3], [2, 1]]
"""


def _softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_narrow_head_output_is_the_head_output():
    ex = parse_example(NARROW.format(top="", layer=""), "t.toml")
    g = derive(ex)
    X = np.array([[1, 0, 1], [0, 2, 0], [1, 1, 1]], float)
    Q = X @ np.array([[1, 0], [0, 1], [1, 1]], float)
    K = X @ np.array([[0, 1], [1, 0], [1, 1]], float)
    V = X @ np.array([[1, 0], [0, 3], [2, 1]], float)
    expected = _softmax(Q @ K.T / np.sqrt(2)) @ V  # an independent float64 pass
    out = g["output"]
    assert out.shape == (3, 2)
    assert np.allclose(np.array(out.values(decimals=12), float), expected, atol=1e-12)


def test_narrow_head_takes_a_loss_of_its_width():
    text = NARROW.format(top="", layer="") + (
        '\n[loss]\nkind = "mse"\ntarget = [[0, 1], [1, 0], [0, 0]]\n')
    g = backward(derive(parse_example(text, "t.toml")))
    assert g["grad.layer1.head1.W_V"].shape == (3, 2)


@pytest.mark.parametrize("top, layer, where", [
    ("", "residual = true", "t.toml, layer 1"),
    ("", "W_1 = [[1], [1]]\nW_2 = [[1, 1]]", "t.toml, layer 1"),
    ("", 'norm = "post"', "t.toml, layer 1"),
    ("final_norm = true", "", "t.toml, layer 1"),
])
def test_narrow_head_refused_where_a_width_must_fit(top, layer, where):
    with pytest.raises(InputError) as error:
        parse_example(NARROW.format(top=top, layer=layer), "t.toml")
    text = str(error.value)
    assert text.startswith(f"{where}: W_O is missing and the heads' value widths add up to "
                           f"2, not d_model = 3") and "the last [[layer]]" in text
    assert "\n" not in text


def test_narrow_head_only_in_the_last_layer():
    text = NARROW.format(top="", layer="") + "[[layer]]" + NARROW.split("[[layer]]", 1)[1].format(
        top="", layer="")
    with pytest.raises(InputError, match=r"t.toml, layer 1: W_O is missing"):
        parse_example(text, "t.toml")


# -- vocabulary words the sentence does not use, without embeddings -----------------

UNUSED = """
title = "unused words"
tokens = ["tea", "I", "tea"]
vocab = ["I", "like", "tea", "coffee"]
positional_encoding = "none"
norm = "none"
residual = false
{head}
[embeddings]
{rows}

[[layer]]

[[layer.head]]
W_Q = [[1, 0], [0, 1]]
W_K = [[1, 0], [0, 1]]
W_V = [[1, 0], [0, 1]]
"""
ROWS = 'tea = [0, "1/2"]\nI = [1, 0]'
W_VOCAB = "[lm_head]\nW_vocab = [[1, 0, 0, 1], [0, 1, 1, 0]]\n"


def test_unused_words_need_no_row():
    ex = parse_example(UNUSED.format(head=W_VOCAB, rows=ROWS), "t.toml")
    g = derive(ex)
    assert g["embeddings"].values(decimals=1) == [["0.0", "0.5"], ["1.0", "0.0"],
                                                  ["0.0", "0.5"]]
    X = np.array([[0, 0.5], [1, 0], [0, 0.5]])
    H = _softmax(X @ X.T / np.sqrt(2)) @ X  # an independent float64 pass
    P = _softmax(H @ np.array([[1, 0, 0, 1], [0, 1, 1, 0]], float))
    assert np.allclose(np.array(g["probabilities"].values(decimals=12), float), P,
                       atol=1e-12)
    assert g["probabilities"].cols == ("I", "like", "tea", "coffee")


def test_unused_words_train_and_label_rows():
    text = UNUSED.format(head=W_VOCAB, rows=ROWS) + (
        '\n[loss]\nkind = "cross_entropy"\ntargets = ["I", "coffee", "like"]\n')
    g = backward(derive(parse_example(text, "t.toml")))
    assert g["grad.embedding_table"].rows == ("tea", "I")


@pytest.mark.parametrize("head, rows, message", [
    ("", 'I = [1, 0]', "t.toml: embeddings has no row for 'tea', a token of the sentence"),
    ("", ROWS + '\nmilk = [1, 1]', "t.toml: embeddings has a row for 'milk', which is not"),
    ("", 'tea = [0, 1]\nI = [1]', "t.toml: embeddings.tea has 2 entries, but embeddings.I has 1"),
    ("", 'tea = [0, "x"]\nI = [1, 0]', "t.toml: embeddings.tea[1]: 'x' is not a number"),
    ("[lm_head]\ntied = true\n", ROWS, "t.toml: [lm_head] tied = true reads every word's "
                                      "embedding row; embeddings has none for 'like', "
                                      "'coffee'"),
])
def test_bad_keyed_embeddings(head, rows, message):
    with pytest.raises(InputError) as error:
        parse_example(UNUSED.format(head=head, rows=rows), "t.toml")
    assert str(error.value).startswith(message), str(error.value)


def test_trained_keyed_embeddings_written_under_their_words(tmp_path):
    from symformer.example.write import updated_example
    path = tmp_path / "u.toml"
    path.write_text(UNUSED.format(head=W_VOCAB, rows=ROWS))
    from symformer.example import load_example
    ex = load_example(str(path))
    text = updated_example(ex, {"embedding_table": sympy.Matrix([[1, 2], [3, 4]])})
    again = parse_example(text, "again.toml")
    assert again.embedded_vocab == ("I", "tea")
    assert again.embeddings.sympy == sympy.Matrix([[1, 2], [3, 4]])  # I's row, then tea's


# -- intermediate stages lessons print ------------------------------------------------

def test_gate_activation_on_its_own_is_silu_of_the_gate():
    import mpmath

    from symformer.example import load_example
    g = derive(load_example("llama_style"))
    balls = g.evaluate(200)
    gate, phi = balls["layer1.ffn.gate"], balls["layer1.ffn.gate_activation"]
    product, hidden = balls["layer1.ffn.activation"], balls["layer1.ffn.hidden"]
    with mpmath.workdps(50):
        for i, row in enumerate(gate):
            for j, x in enumerate(row):
                x = mpmath.mpf(x.mid().str(50, radius=False))
                silu = x / (1 + mpmath.exp(-x))  # SiLU by its definition, in mpmath
                assert abs(mpmath.mpf(phi[i][j].mid().str(50, radius=False)) - silu) < 1e-40
                h = mpmath.mpf(hidden[i][j].mid().str(50, radius=False))
                assert abs(mpmath.mpf(product[i][j].mid().str(50, radius=False)) - silu * h) \
                    < 1e-40
    assert g["layer1.ffn.gate_activation"].op.notation.text == "φ"


def test_layer_norm_output_mean_and_variance():
    """Asked for with [stages] output_moments = true (an example without it has none)."""
    import dataclasses

    from symformer.example import load_example
    from symformer.example.fields import Where
    from symformer.example.stages import parse_stages
    assert "layer1.add_norm1.output_mean" not in derive(load_example())
    ex = dataclasses.replace(load_example(), stages=parse_stages({"output_moments": True},
                                                                 Where("t.toml")))
    g = derive(ex)
    y = np.array(g["layer1.add_norm1"].values(decimals=15), float)
    means = np.array(g["layer1.add_norm1.output_mean"].values(decimals=15), float)[:, 0]
    variances = np.array(g["layer1.add_norm1.output_variance"].values(decimals=15),
                         float)[:, 0]
    assert np.allclose(means, y.mean(axis=1), atol=1e-12)  # an independent float64 pass
    assert np.allclose(variances, y.var(axis=1), atol=1e-12)
    # hand-derived: with gamma = 1 and beta = 0 the mean is 0 and the variance is
    # sigma^2 / (sigma^2 + eps), sigma^2 the input's variance (certified balls)
    from flint import arb
    balls = g.evaluate(400)
    eps = arb(ex.layers[0].eps.rational())
    for i in range(len(ex.tokens)):
        assert abs(balls["layer1.add_norm1.output_mean"][i][0]) < arb(10) ** -12
        sigma2 = balls["layer1.add_norm1.variance"][i][0]
        difference = balls["layer1.add_norm1.output_variance"][i][0] - sigma2 / (sigma2 + eps)
        assert abs(difference) < arb(10) ** -12
