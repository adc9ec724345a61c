"""Examples that start where the lesson starts: given Q, K, V; given input rows with
positions only, a LayerNorm only, an FFN only; ALiBi.

References, independent of the engine: small float64 NumPy implementations written
here (attention forward and its hand-written backward, LayerNorm, RMSNorm, the FFN),
central finite differences of a float64 loss, hand-derived closed forms, the
displayed equations proved at every entry (tests/test_equations_proved.py's prover).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st
from test_equations_proved import prove_stage

from symformer import derive
from symformer.blocks.backward import backward
from symformer.cli import main
from symformer.errors import InputError, NotSupportedError
from symformer.example.alibi import paper_slopes
from symformer.example.loader import parse_example
from symformer.frameworks.torch_out import settings as torch_settings
from symformer.latex.tables import masked_entries
from symformer.verify.check import Checker
from symformer.verify.claims import claims_from_toml, validate

Q = np.array([[1, 0], [0, 1], [1, 1]], float)
K = np.array([[1, 0], [0, 1], [1, -1]], float)
V = np.array([[1, 2], [3, 4], [5, 6]], float)
G = np.array([[1, 0], [0, 1], [1, 1]], float)

QKV = """
title = "attention backward by hand"
tokens = ["a", "b", "c"]
{top}

[attention]
Q = [[1, 0], [0, 1], [1, 1]]
K = [[1, 0], [0, 1], [1, -1]]
V = [[1, 2], [3, 4], [5, 6]]

[loss]
kind = "upstream"
stage = "output"
gradient = [[1, 0], [0, 1], [1, 1]]
"""


def attention_reference(causal: bool, slope: float, scale: float):
    """Forward and the hand-written backward of softmax(QK^T/scale - slope |i-j|) V."""
    n, m = Q.shape[0], K.shape[0]
    distance = np.abs(np.arange(n)[:, None] - np.arange(m)[None, :])
    s = Q @ K.T / scale - slope * distance
    if causal:
        s = np.where(np.triu(np.ones((n, m), bool), 1), -np.inf, s)
    a = np.exp(s - s.max(axis=1, keepdims=True))
    a /= a.sum(axis=1, keepdims=True)
    out = a @ V
    da = G @ V.T
    ds = a * (da - (a * da).sum(axis=1, keepdims=True))
    du = ds / scale
    return {"weights": a, "output": out, "grad.V": a.T @ G, "grad.Q": du @ K,
            "grad.K": du.T @ Q}


@pytest.mark.parametrize("top, causal, slope, scale", [
    ("causal = true\nalibi = true", True, 1 / 256, np.sqrt(2)),
    ('scale = "none"\nalibi_slopes = [0.5]', False, 0.5, 1.0),
])
def test_given_qkv_forward_and_backward(top, causal, slope, scale):
    g = derive(parse_example(QKV.format(top=top), "qkv.toml"))
    backward(g)
    want = attention_reference(causal, slope, scale)
    for name, value in want.items():
        got = np.array(g[name].values(decimals=12), dtype=float)
        assert np.allclose(got, value, atol=1e-11), name
    assert [s.name for s in g][:8] == ["Q", "K", "V", "raw_scores", "scores", "alibi_scores",
                                       "weights", "output"]
    # the tables grey the masked scores and weights, ALiBi's included
    causal_set = {(0, 1), (0, 2), (1, 2)} if causal else set()
    assert masked_entries(g["weights"]) == masked_entries(g["alibi_scores"]) == causal_set


def test_settings_inside_the_attention_table():
    text = QKV.format(top="").replace("[attention]\n", "[attention]\ncausal = true\n"
                                      "scale = 2\nalibi_slopes = [0.125]\n")
    g = derive(parse_example(text, "inside.toml"))
    backward(g)
    for name, value in attention_reference(True, 0.125, 2.0).items():
        assert np.allclose(np.array(g[name].values(decimals=12), dtype=float), value,
                           atol=1e-11), name


def test_alibi_hand_derived_and_proved():
    """Q = K = 0: every score is 0, so row 1 (non-causal, slope 1/2) is softmax([-1/2, 0,
    -1/2]) = [1, e^(1/2), 1] / (2 + e^(1/2)); the equations are proved at every entry."""
    text = QKV.format(top="alibi_slopes = [0.5]").replace(
        "Q = [[1, 0], [0, 1], [1, 1]]", "Q = [[0, 0], [0, 0], [0, 0]]")
    g = derive(parse_example(text, "hand.toml"))
    half = sympy.exp(sympy.Rational(1, 2))
    for j, want in enumerate([1 / (2 + half), half / (2 + half), 1 / (2 + half)]):
        assert abs(sympy.N(g["weights"].closed_form(1, j) - want, 50)) < 1e-45
    assert g["alibi_scores"].closed_form(2, 0) == -1  # -m * |2 - 0|
    backward(g)
    assert prove_stage(g, g["alibi_scores"]) == 9
    assert prove_stage(g, g["grad.scores"]) == 9


def test_alibi_in_layers_matches_the_given_attention():
    """alibi = true on a [[layer]] with identity projections: the same weights as the
    given Q, K, V (slope 2^-8 for one head)."""
    text = """
tokens = ["a", "b", "c"]
inputs = [[1, 0], [0, 1], [1, 1]]
causal = true
alibi = true
norm = "none"
residual = false
[[layer]]
[[layer.head]]
W_Q = [[1, 0], [0, 1]]
W_K = [[1, 0], [0, 1]]
W_V = [[1, 0], [0, 1]]
"""
    g = derive(parse_example(text, "layer.toml"))
    got = np.array(g["layer1.head1.weights"].values(decimals=12), dtype=float)
    x = Q
    s = x @ x.T / np.sqrt(2) - np.abs(np.arange(3)[:, None] - np.arange(3)) / 256
    s = np.where(np.triu(np.ones((3, 3), bool), 1), -np.inf, s)
    a = np.exp(s - s.max(axis=1, keepdims=True))
    assert np.allclose(got, a / a.sum(axis=1, keepdims=True), atol=1e-11)


def test_claims_on_given_attention_gradients():
    g = derive(parse_example(QKV.format(top='scale = "none"\nalibi_slopes = [0.5]'), "c.toml"))
    want = attention_reference(False, 0.5, 1.0)["grad.Q"]
    right = ", ".join("[" + ", ".join(f"{v:.3f}" for v in row) + "]" for row in want)
    body = (f'[[claim]]\nname = "dQ"\nstage = "grad.Q"\ndecimals = 3\nvalues = [{right}]\n'
            '[[claim]]\nname = "w"\nstage = "weights"\ndecimals = 2\n'
            'values = [[0.5, 0.2, 0.3], [0.0, 1.0, 0.0], [0.3, 0.5, 0.2]]\n')
    claims = claims_from_toml(body, "claims.toml")
    validate(claims, g)
    first, second = Checker(g.example).check_all(claims)
    assert not first.wrong and second.wrong


def test_check_reads_claims_in_a_lesson_file(tmp_path, capsys):
    """An [attention] or inputs file holding its own [[claim]] tables: check judges them
    (the LayerNorm's mean of row 0 is 3, not 3.5)."""
    claims = ('\n[[claim]]\nname = "w"\nstage = "alibi_scores"\ndecimals = 3\n'
              'values = [[0.707, "-inf", "-inf"], [-0.004, 0.707, "-inf"], '
              '[0.699, 0.703, 0.0]]\n')
    path = tmp_path / "qkv.toml"
    path.write_text(QKV.format(top="causal = true\nalibi = true") + claims)
    assert main(["check", str(path)]) == 0
    path = tmp_path / "ln.toml"
    path.write_text(LAYER_NORM.replace("[loss]", '[[claim]]\nname = "mu"\nstage = '
                                       '"final_norm.mean"\nvalues = [[3.5], [4]]\n[loss]'))
    assert main(["check", str(path)]) == 1
    assert "1 of 2 numbers correct" in capsys.readouterr().out


def test_positional_encoding_only():
    text = """
inputs = [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 1, 1]]
positional_encoding = "sinusoidal"
positional_encoding_base = 100
"""
    g = derive(parse_example(text, "pe.toml"))
    assert [s.name for s in g] == ["embeddings", "positional_encoding", "input", "output"]
    for p in range(3):
        for j in range(4):
            angle = sympy.Integer(p) / sympy.Integer(100) ** sympy.Rational(j - j % 2, 4)
            pe = sympy.sin(angle) if j % 2 == 0 else sympy.cos(angle)
            assert sympy.simplify(g["output"].closed_form(p, j) - pe
                                  - [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 1, 1]][p][j]) == 0


def test_positional_encoding_table_alone():
    """positions = 3, d_model = 4: the sinusoidal table itself, hand-written; a learned
    table is its own rows."""
    g = derive(parse_example("positions = 3\nd_model = 4", "pe.toml"))
    assert [s.name for s in g] == ["positional_encoding", "output"]
    assert g["output"].rows == ("pos0", "pos1", "pos2")
    want = [[0, 1, 0, 1], [sympy.sin(1), sympy.cos(1), sympy.sin(sympy.Rational(1, 100)),
                           sympy.cos(sympy.Rational(1, 100))]]
    for p, row in enumerate(want):
        for j, value in enumerate(row):
            assert sympy.simplify(g["output"].closed_form(p, j) - value) == 0
    learned = parse_example('positions = 2\nd_model = 2\npositional_encoding = "learned"\n'
                            'positional_embeddings = [[1, 2], [3, 4], [5, 6]]', "l.toml")
    assert derive(learned)["output"].exact() == sympy.Matrix([[1, 2], [3, 4]])


X = np.array([[1, 2, 3, 6], [2, 2, 4, 8]], float)
GAMMA, BETA, EPS = np.array([1, 2, 1, 1.0]), np.array([0, 0, 0.5, 0]), 1e-5
T = np.array([[0, 0, 0, 1], [0, 1, 0, 0]], float)
LAYER_NORM = """
inputs = [[1, 2, 3, 6], [2, 2, 4, 8]]
final_norm = true
gamma_f = [1, 2, 1, 1]
beta_f = [0, 0, 0.5, 0]
eps = 1e-5
[loss]
kind = "mse"
target = [[0, 0, 0, 1], [0, 1, 0, 0]]
"""


def layer_norm_loss(x: np.ndarray) -> float:
    mu = x.mean(axis=1, keepdims=True)
    y = (x - mu) / np.sqrt(((x - mu) ** 2).mean(axis=1, keepdims=True) + EPS) * GAMMA + BETA
    return float(((y - T) ** 2).mean())


def test_layer_norm_only_forward_and_gradient():
    g = derive(parse_example(LAYER_NORM, "ln.toml"))
    backward(g)
    assert [s.name for s in g][:2] == ["input", "final_norm.mean"]
    assert abs(float(g["loss"].values(decimals=12)[0][0]) - layer_norm_loss(X)) < 1e-11
    h, numeric = 1e-6, np.zeros_like(X)
    for i in range(2):
        for j in range(4):
            step = np.zeros_like(X)
            step[i, j] = h
            numeric[i, j] = (layer_norm_loss(X + step) - layer_norm_loss(X - step)) / (2 * h)
    got = np.array(g["grad.input"].values(decimals=12), dtype=float)
    assert np.allclose(got, numeric, atol=1e-7)


def test_ffn_only_layer_pre_rms_with_residual():
    text = """
inputs = [[1, -1], [2, 0]]
norm = "pre"
layer_norm = "rms"
[[layer]]
gamma_1 = [1, 2]
W_1 = [[1, 0, -1], [0, 1, 1]]
b_1 = [0, 0.5, 0]
W_2 = [[1, 0], [0, 1], [1, 1]]
"""
    g = derive(parse_example(text, "ffn.toml"))
    x = np.array([[1, -1], [2, 0]], float)
    n = x / np.sqrt((x ** 2).mean(axis=1, keepdims=True) + 1e-6) * np.array([1, 2])
    W1, W2 = np.array([[1, 0, -1], [0, 1, 1]], float), np.array([[1, 0], [0, 1], [1, 1]], float)
    want = x + np.maximum(n @ W1 + [0, 0.5, 0], 0) @ W2
    assert np.allclose(np.array(g["output"].values(decimals=12), dtype=float), want,
                       atol=1e-11)
    assert "layer1.add_norm1" in g and "layer1.add_norm2" not in g


@pytest.mark.parametrize("text, message", [
    (QKV.format(top="vocab = ['a']"), "vocab has no meaning in a file with an [attention]"),
    (QKV.format(top="").replace("V = [[1, 2], [3, 4], [5, 6]]", "V = [[1, 2]]"),
     "V has shape 1x2, expected 3x?"),
    (QKV.format(top="alibi = true\nalibi_slopes = [1]"), "not both"),
    (QKV.format(top="causal = true").replace("[attention]", "[attention]\ncausal = false"),
     "causal is given both at the top level and in [attention]"),
    (QKV.format(top="alibi_slopes = [1, 2]"),
     "alibi_slopes has 2 slopes but the attention has 1 head"),
    (QKV.format(top="").replace("[attention]\n", '[attention]\nkey_tokens = ["a", "b\\n"'
                                ', "c"]\n'), "contains the control character U+000A"),
    (QKV.format(top="").replace("[attention]\n", '[attention]\nkey_tokens = ["a"]\n'),
     "key_tokens has 1 label but K has 3 rows"),
    (QKV.format(top="alibi_slopes = [0]"), "must be positive"),
    (QKV.format(top='alibi_slopes = ["-sqrt(2)"]'), "must be a positive number"),
    (QKV.format(top="alibi = 1"), "alibi must be true or false"),
    ('inputs = [[1, 2]]\nvocab = ["a"]', "vocab has no meaning with inputs"),
    ('inputs = [[1, 2]]\ntokens = ["a", "b"]', "tokens has 2 labels but inputs has 1 row"),
    ('inputs = [[1, 2]]\n[[layer]]\nnorm = "none"', "needs [[layer.head]] tables"),
    ('inputs = [[1, 2]]\n[[layer]]\nW_1 = [[1], [1]]\nW_2 = [[1, 1]]\ngamma_2 = [1, 1]',
     "gamma_2 has no meaning in a layer without attention"),
    ('inputs = [[1, 2]]\n[lm_head]\ntied = true', "[lm_head] needs a vocabulary"),
    ("positions = 3", "needs both positions = n and d_model = d; d_model is missing"),
    ("positions = 0\nd_model = 2", "positions must be a whole number from 1 to 4096"),
    ('positions = 2\nd_model = 2\nvocab = ["a"]',
     "positional-encoding table alone) has no meaning with vocab"),
    ("inputs = [[1]]\nd_model = 1", "d_model has no meaning with inputs"),
])
def test_bad_lesson_inputs(text, message):
    with pytest.raises(InputError) as error:
        parse_example(text, "bad.toml")
    assert message in str(error.value) and "\n" not in str(error.value)


def reference_slopes(n: int) -> list[float]:
    """The ALiBi paper's get_slopes (its repository's code, in floats)."""
    def power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start ** i for i in range(n)]
    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + reference_slopes(2 * closest)[0::2][:n - closest]


@pytest.mark.parametrize("heads", [1, 2, 3, 6, 8, 12, 16])
def test_paper_slopes_are_the_papers(heads):
    assert np.allclose([float(m) for m in paper_slopes(heads)], reference_slopes(heads),
                       rtol=1e-15)


def test_alibi_with_three_heads_and_an_irrational_slope():
    """alibi = true on 3 heads: slopes 1/16, 1/256, 1/4; a given irrational slope
    sqrt(2)/2 is exact (crosschecked against float64 and proved at every entry)."""
    heads = "".join("[[layer.head]]\nW_Q = [[1], [0]]\nW_K = [[1], [1]]\nW_V = [[1], [0]]\n"
                    for _ in range(3))
    text = f'inputs = [[1, 2], [0, 1]]\nalibi = true\nnorm = "none"\n[[layer]]\n' \
           f'W_O = [[1, 0], [0, 1], [1, 1]]\n{heads}'
    g = derive(parse_example(text, "three.toml"))
    assert [g[f"layer1.head{k}.alibi_scores"].closed_form(1, 0)
            - g[f"layer1.head{k}.scores"].closed_form(1, 0) for k in (1, 2, 3)] == [
        -sympy.Rational(1, 16), -sympy.Rational(1, 256), -sympy.Rational(1, 4)]
    text = QKV.format(top='alibi_slopes = ["sqrt(2)/2"]\nscale = "none"')
    g = derive(parse_example(text, "irrational.toml"))
    assert g["alibi_scores"].closed_form(2, 0) == 1 - sympy.sqrt(2)  # 1 - (sqrt(2)/2) * 2
    backward(g)
    want = attention_reference(False, math.sqrt(2) / 2, 1.0)
    for name, value in want.items():
        assert np.allclose(np.array(g[name].values(decimals=12), dtype=float), value,
                           atol=1e-11), name
    assert prove_stage(g, g["alibi_scores"]) == 9


def test_what_other_commands_cannot_do_is_refused_in_one_line(tmp_path, capsys):
    """train: given matrices are not weights; the PyTorch module: no given Q/K/V, no
    ALiBi (refused rather than written wrong).  Given input rows are
    read by position, whatever their labels."""
    path = tmp_path / "qkv.toml"
    path.write_text(QKV.format(top=""))
    assert main(["train", str(path), "--lr", "0.1"]) == 2
    assert "no weights to train" in capsys.readouterr().err
    for text, what in [(QKV.format(top=""), "[attention]"),
                       ("inputs = [[1]]\nalibi = true\nnorm = 'none'\n[[layer]]\n"
                        "[[layer.head]]\nW_Q = [[1]]\nW_K = [[1]]\nW_V = [[1]]", "ALiBi")]:
        with pytest.raises(NotSupportedError, match=what):
            torch_settings(parse_example(text, "t.toml"))
    example = parse_example('inputs = [[1], [2]]\ntokens = ["a", "a"]', "t.toml")
    assert example.token_ids == (0, 1) and torch_settings(example)[0]["token_ids"] == [0, 1]


def test_residual_around_attention_but_not_the_ffn():
    """An attention-only layer (residual) then an FFN-only layer (residual = false), with
    ALiBi: x + attn(x), then relu(. W_1) W_2 and no residual."""
    text = """
inputs = [[1, 0], [0, 1], [1, 1]]
causal = true
alibi_slopes = [0.5]
norm = "none"
[[layer]]
[[layer.head]]
W_Q = [[1, 0], [0, 1]]
W_K = [[1, 0], [0, 1]]
W_V = [[1, 0], [0, 1]]
[[layer]]
residual = false
W_1 = [[1, -1], [0, 1]]
W_2 = [[1, 0], [2, 1]]
"""
    g = derive(parse_example(text, "mix.toml"))
    x = Q
    s = x @ x.T / np.sqrt(2) - 0.5 * np.abs(np.arange(3)[:, None] - np.arange(3))
    s = np.where(np.triu(np.ones((3, 3), bool), 1), -np.inf, s)
    a = np.exp(s - s.max(axis=1, keepdims=True))
    h = x + (a / a.sum(axis=1, keepdims=True)) @ x
    want = np.maximum(h @ np.array([[1, -1], [0, 1.0]]), 0) @ np.array([[1, 0], [2, 1.0]])
    assert np.allclose(np.array(g["output"].values(decimals=12), dtype=float), want,
                       atol=1e-11)


small_ints = st.integers(-3, 3)


@settings(max_examples=4, deadline=None)
@given(data=st.data())
def test_random_given_attention_matches_float64(data):
    """Random Q, K, V (n queries, m keys), causal or not, an ALiBi slope or none: the
    weights, the output and dQ, dK, dV of an upstream gradient against float64."""
    n, m, d, e = (data.draw(st.integers(1, 3)) for _ in range(4))
    mats = {name: np.array(data.draw(st.lists(st.lists(small_ints, min_size=c, max_size=c),
                                              min_size=r, max_size=r)), float)
            for name, r, c in (("Q", n, d), ("K", m, d), ("V", m, e), ("G", n, e))}
    causal = data.draw(st.booleans())
    slope = data.draw(st.sampled_from([None, 0.5, 0.125]))
    rows = {k: "[" + ", ".join("[" + ", ".join(str(int(v)) for v in r) + "]" for r in M) + "]"
            for k, M in mats.items()}
    text = (f"causal = {str(causal).lower()}\n"
            + (f"alibi_slopes = [{slope}]\n" if slope is not None else "")
            + f"[attention]\nQ = {rows['Q']}\nK = {rows['K']}\nV = {rows['V']}\n"
            + f'[loss]\nkind = "upstream"\nstage = "output"\ngradient = {rows["G"]}\n')
    g = derive(parse_example(text, "random.toml"))
    backward(g)
    s = mats["Q"] @ mats["K"].T / np.sqrt(d)
    s -= (slope or 0) * np.abs(np.arange(n)[:, None] - np.arange(m)[None, :])
    if causal:
        s = np.where(np.arange(m)[None, :] > np.arange(n)[:, None], -np.inf, s)
    a = np.exp(s - s.max(axis=1, keepdims=True))
    a /= a.sum(axis=1, keepdims=True)
    da = mats["G"] @ mats["V"].T
    du = a * (da - (a * da).sum(axis=1, keepdims=True)) / np.sqrt(d)
    want = {"weights": a, "output": a @ mats["V"], "grad.Q": du @ mats["K"],
            "grad.K": du.T @ mats["Q"], "grad.V": a.T @ mats["G"]}
    for name, value in want.items():
        got = np.array(g[name].values(decimals=10), dtype=float)
        assert np.allclose(got, value, atol=1e-9), name


def test_alibi_slopes_per_layer() -> None:
    """A [[layer]]'s own alibi_slopes replace the top level's for that layer only: each
    layer's ALiBi scores are its scores minus its own m |i - j| (the bias by hand)."""
    from fractions import Fraction

    head = ("[[layer.head]]\nW_Q = [[1, 0], [0, 1]]\nW_K = [[1, 0], [0, 1]]\n"
            "W_V = [[1, 0], [0, 1]]\n")
    text = ('tokens = ["a", "b", "c"]\nvocab = ["a", "b", "c"]\n'
            "embeddings = [[1, 0], [0, 1], [1, 1]]\npositional_encoding = \"none\"\n"
            "norm = \"none\"\nalibi_slopes = [0.5]\n"
            "[[layer]]\n" + head + "[[layer]]\nalibi_slopes = [0.125]\n" + head)
    g = derive(parse_example(text))
    for layer, m in ((1, Fraction(1, 2)), (2, Fraction(1, 8))):
        plain = g[f"layer{layer}.head1.scores"].rounded(decimals=30)
        biased = g[f"layer{layer}.head1.alibi_scores"].rounded(decimals=30)
        for i in range(3):
            for j in range(3):
                gap = (Fraction(plain[i][j].digits) * Fraction(10) ** plain[i][j].exponent
                       - Fraction(biased[i][j].digits) * Fraction(10) ** biased[i][j].exponent)
                assert abs(gap - m * abs(i - j)) < Fraction(1, 10**28), (layer, i, j)
    with pytest.raises(InputError, match="alibi_slopes"):
        parse_example(text.replace("alibi_slopes = [0.125]", "alibi_slopes = [0.1, 0.2]"))
