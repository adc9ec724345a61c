"""The backward pass against independent references.

* an independent float64 NumPy backward pass (``float_backward.py``, textbook formulas)
  on the built-in example and on random examples (hypothesis), every convention;
* central finite differences of the exact forward, evaluated with mpmath at high
  precision, for random weight entries;
* a one-token, d = 2 example whose gradients are derived by hand (exact rationals);
* exact proofs: softmax-gradient rows sum to 0, masked scores and clipped ReLU units
  get the gradient exactly 0;
* bad [loss] tables: one-line errors naming the file and key, exit 2.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import sympy
from float_backward import float_backward
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_engine_random import examples, small

from symformer import derive
from symformer.blocks.backward import backward
from symformer.cli import main
from symformer.errors import InputError
from symformer.example import load_example
from symformer.example.loader import example_from_dict, parse_example


def certified(stage, digits: int = 20) -> np.ndarray:
    return np.array([[float(Fraction(v)) for v in row]
                     for row in stage.values(significant=digits)])


def compare_with_float(example, causal: bool = False) -> int:
    """Every gradient the float pass computes against the certified one; returns how many."""
    g = backward(derive(example, causal=causal))
    want = float_backward(example, causal=causal)
    compared = 0
    for name, value in want.items():
        got = certified(g[name])
        assert got.shape == value.shape, name
        scale = max(1.0, float(np.abs(value).max()))
        assert np.abs(got - value).max() <= 1e-9 * scale, name
        compared += 1
    return compared


def test_builtin_gradients_match_float64():
    assert compare_with_float(load_example()) >= 30


def test_builtin_causal_gradients_match_float64():
    assert compare_with_float(load_example(), causal=True) >= 30


def with_mse_loss(data: dict, draw_target) -> dict:
    n, d = len(data["tokens"]), len(data["embeddings"][0])
    data = dict(data)
    data["loss"] = {"kind": "mse", "target": [[draw_target() for _ in range(d)]
                                              for _ in range(n)]}
    return data


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(examples(), st.booleans(), st.data())
def test_random_gradients_match_float64(data, causal, draw):
    example = example_from_dict(with_mse_loss(data, lambda: draw.draw(small)), "random")
    assert compare_with_float(example, causal=causal) > 10


# -- finite differences of the exact forward ------------------------------------------

def loss_at(example, prec: int = 400) -> mpmath.mpf:
    """The loss of the exact forward pass as an mpmath number (from its certified ball)."""
    g = backward(derive(example))
    ball = g.evaluate(prec)["loss"][0][0]
    assert ball.rad() < sympy.Rational(1, 10 ** 80)
    return mpmath.mpf(ball.mid().str(110, radius=False))


WEIGHTS = [("W_1", None), ("W_2", None), ("b_1", None), ("b_2", None), ("W_O", None),
           ("gamma_1", None), ("beta_2", None), ("W_Q", 1), ("W_K", 2), ("W_V", 1)]


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(WEIGHTS), st.integers(0, 100), st.integers(0, 100))
def test_central_differences_of_the_exact_forward(weight, i, j):
    name, head = weight
    example = load_example()
    layer = example.layers[0]
    holder = layer.heads[head - 1] if head else layer
    W = getattr(holder, name)
    i, j = i % W.rows, j % W.cols
    h = sympy.Rational(1, 10 ** 25)

    def shifted(delta):
        M = W.copy()
        M[i, j] += delta
        new = dataclasses.replace(holder, **{name: M})
        if head:
            heads = list(layer.heads)
            heads[head - 1] = new
            new = dataclasses.replace(layer, heads=tuple(heads))
        return dataclasses.replace(example, layers=(new,))

    mpmath.mp.dps = 110
    difference = (loss_at(shifted(h)) - loss_at(shifted(-h))) / (2 * mpmath.mpf(10) ** -25)
    g = backward(derive(example))
    gradient_name = {"gamma_1": "grad.layer1.add_norm1.gamma",
                     "beta_2": "grad.layer1.add_norm2.beta"}.get(
        name, f"grad.layer1.head{head}.{name}" if head else f"grad.layer1.{name}")
    ball = g.evaluate(400)[gradient_name][i][j]
    exact = mpmath.mpf(ball.mid().str(110, radius=False))
    # central differences err by O(h^2) = 1e-50
    assert abs(difference - exact) <= mpmath.mpf(10) ** -40, (gradient_name, i, j)


# -- hand-derived: one token, d = 2 ---------------------------------------------------

ONE_TOKEN = """
title = "one token"
tokens = ["a"]
vocab = ["a"]
embeddings = [[2, -1]]
positional_encoding = "none"
eps = "7/4"
[[layer]]
W_O = [[0, 0]]
W_1 = [[0], [0]]
b_1 = [-1]
W_2 = [[0, 0]]
b_2 = [0, 0]
gamma_1 = [2, 2]
[[layer.head]]
W_Q = [[0], [0]]
W_K = [[0], [0]]
W_V = [[0], [0]]
[loss]
kind = "mse"
target = [[0, 0]]
"""


def test_one_token_gradients_derived_by_hand():
    # x = (2, -1): mean 1/2, variance 9/4, D = sqrt(9/4 + 7/4) = 2, LN1 = 2 (3/4, -3/4);
    # the attention adds 0 (W_O = 0), the FFN adds b_2 = 0 (its ReLU input is -1).
    # LN2 of (3/2, -3/2): variance 9/4, D = 2, z = (3/4, -3/4); L = (9/16 + 9/16) / 2.
    # dL/dz = 2 z / 2 = (3/4, -3/4).  LayerNorm's input gradient (G = gamma g, y^ the
    # normalised row): (G - mean G - y^ mean(G y^)) / D.
    # LN2: ((3/4, -3/4) - (3/4, -3/4) 9/16) / 2 = (21/128, -21/128).
    # LN1: G = (21/64, -21/64), mean(G y^) = 63/256: (21/64 - 3/4 * 63/256) / 2 = 147/2048.
    g = backward(derive(parse_example(ONE_TOKEN)))
    r = sympy.Rational
    expected = {
        "loss": [[r(9, 16)]],
        "grad.output": [[r(3, 4), r(-3, 4)]],
        "grad.layer1.add_norm2.gamma": [[r(9, 16), r(9, 16)]],
        "grad.layer1.add_norm2.beta": [[r(3, 4), r(-3, 4)]],
        "grad.layer1.add_norm2.sum": [[r(21, 128), r(-21, 128)]],
        "grad.layer1.b_2": [[r(21, 128), r(-21, 128)]],
        "grad.layer1.ffn.hidden": [[0]],
        "grad.layer1.b_1": [[0]],
        "grad.layer1.add_norm1": [[r(21, 128), r(-21, 128)]],
        "grad.layer1.add_norm1.gamma": [[r(63, 512), r(63, 512)]],
        "grad.layer1.add_norm1.beta": [[r(21, 128), r(-21, 128)]],
        "grad.layer1.add_norm1.sum": [[r(147, 2048), r(-147, 2048)]],
        "grad.embeddings": [[r(147, 2048), r(-147, 2048)]],
        "grad.embedding_table": [[r(147, 2048), r(-147, 2048)]],
        "grad.layer1.W_O": [[0, 0]],
    }
    for name, rows in expected.items():
        got = g[name].values(significant=30)
        want = [[str(sympy.Float(v, 40)) for v in row] for row in rows]
        for got_row, want_row in zip(got, want):
            for a, b in zip(got_row, want_row):
                assert abs(Fraction(a) - Fraction(b)) < Fraction(1, 10 ** 25), (name, a, b)


# -- exact proofs ---------------------------------------------------------------------

def row_sum_numerator(g, head: int, i: int) -> sympy.Expr:
    """The numerator of sum_j dL/ds_ij from the local formulas: the softmax gradient's
    rule, with the weights unfolded into their own local formula (exp(s_j) / sum)."""
    name = f"layer1.head{head}"
    weights = dict(zip(g.symbols(f"{name}.weights"), g.local(f"{name}.weights")))
    total = sympy.Add(*g.local(f"grad.{name}.scores").row(i)).xreplace(weights)
    return sympy.expand(sympy.together(total).as_numer_denom()[0])


def test_softmax_gradient_rows_sum_to_zero_exactly():
    # holds whatever the upstream gradient dL/dalpha: its symbols stay free
    for causal in (False, True):
        g = backward(derive(load_example(), causal=causal))
        for head in (1, 2):
            for i in range(4):
                assert row_sum_numerator(g, head, i) == 0


def test_softmax_gradient_row_sum_fails_on_a_modified_rule():
    g = backward(derive(load_example()))
    name = "layer1.head1"
    weights = dict(zip(g.symbols(f"{name}.weights"), g.local(f"{name}.weights")))
    local = g.local(f"grad.{name}.scores")
    wrong = sympy.Add(*local.row(0)) + g.symbols(f"grad.{name}.weights")[0, 0] * \
        g.symbols(f"{name}.weights")[0, 0]  # a term too many
    numerator = sympy.expand(sympy.together(wrong.xreplace(weights)).as_numer_denom()[0])
    assert numerator != 0


def test_masked_scores_get_gradient_exactly_zero():
    g = backward(derive(load_example(), causal=True))
    for head in (1, 2):
        for name in (f"grad.layer1.head{head}.scores", f"grad.layer1.head{head}.raw_scores"):
            local = g.local(name)
            balls = g.evaluate(128)[name]
            for i in range(4):
                for j in range(i + 1, 4):
                    if name.endswith("raw_scores"):
                        assert local[i, j] == 0  # the mask set decides, not a number
                    assert balls[i][j] == 0 and g.sign(name, i, j) == 0
            assert any(balls[i][j] != 0 for i in range(4) for j in range(i + 1))


def test_clipped_relu_units_get_gradient_exactly_zero():
    # the built-in block's FFN clips every unit (every ReLU input is negative)
    g = backward(derive(load_example()))
    for i in range(4):
        for j in range(6):
            assert g.sign("layer1.ffn.hidden", i, j) == -1
            assert g.certification.resolved_local("grad.layer1.ffn.hidden", i, j) == 0
            assert g.sign("grad.layer1.ffn.hidden", i, j) == 0
    assert all(v == "0" for row in g["grad.layer1.W_1"].values(significant=5) for v in row)


def test_relu_input_exactly_zero_gets_subgradient_zero():
    text = ONE_TOKEN.replace("b_1 = [-1]", "b_1 = [0]").replace("W_2 = [[0, 0]]",
                                                                 "W_2 = [[1, 0]]")
    g = backward(derive(parse_example(text)))
    assert g.sign("layer1.ffn.hidden", 0, 0) == 0  # h = 0 exactly
    assert g.sign("grad.layer1.ffn.activation", 0, 0) != 0  # a gradient arrives ...
    assert g.sign("grad.layer1.ffn.hidden", 0, 0) == 0  # ... and the subgradient is 0


# -- the command and bad input --------------------------------------------------------

def test_backward_command_prints_the_gradients(capsys):
    assert main(["backward", "--stage", "loss", "--stage", "grad.layer1.b_2",
                 "--decimals", "5"]) == 0
    out = capsys.readouterr().out
    assert "2.02444" in out and "grad.layer1.b_2" in out
    assert main(["derive", "--list"]) == 0
    assert "grad.layer1.head1.W_Q" in capsys.readouterr().out


BAD = [
    ('[loss]\nkind = "mse"\ntarget = [[1, 2]]', "target has shape 1x2, expected 4x4"),
    ('[loss]\nkind = "cross_entropy"\ntargets = ["I", "I", "I", "I"]', "needs next-token"),
    ('[loss]\nkind = "hinge"', "kind must be one of"),
    ('[loss]\ntarget = [[1]]', "missing key 'kind'"),
]


@pytest.mark.parametrize(("table", "message"), BAD)
def test_bad_loss_tables(tmp_path, capsys, table, message):
    from symformer.example.loader import builtin_text

    text = builtin_text().rsplit("\n[loss]", 1)[0] + "\n" + table + "\n"
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(InputError, match=message):
        load_example(path)
    assert main(["backward", str(path)]) == 2
    err = capsys.readouterr().err
    assert "bad.toml, loss" in err and err.count("\n") == 1


def test_cross_entropy_target_not_in_the_vocabulary(tmp_path, capsys):
    from symformer.example.loader import load_example as load

    path = tmp_path / "ce.toml"
    source = load_example("encoder_decoder").source
    text = open(source).read() + '\n[loss]\nkind = "cross_entropy"\ntargets = ["zebra"]\n'
    path.write_text(text)
    with pytest.raises(InputError, match="ce.toml, loss: targets"):
        load(path)


def test_a_missing_loss_suggests_one_that_works(tmp_path, capsys):
    """A language model without [loss] is told a cross-entropy table naming its next
    tokens; pasted into the file, that table is a valid loss."""
    import re

    source = load_example("gpt2_style").source
    assert main(["backward", source]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and 'kind = "cross_entropy"' in err
    targets = re.search(r"targets = (\[[^]]*\])", err)[1]
    path = tmp_path / "with_loss.toml"
    path.write_text(open(source).read() + f'\n[loss]\nkind = "cross_entropy"\n'
                    f"targets = {targets}\n")
    assert main(["backward", str(path), "--stage", "loss"]) == 0


CONSTANT_ROWS = """\
title = "constant rows"
tokens = ["a", "b"]
vocab = ["a", "b"]
embeddings = [[1, 1], [1, 1]]
positional_encoding = "none"
layer_norm = "LAYER_NORM"
eps = "1/100"

[[layer]]
W_O = [[1, 0], [0, 1]]
W_1 = [[1, 0], [0, 1]]
W_2 = [[1, 0], [0, 1]]
[[layer.head]]
W_Q = [[1, 0], [0, 1]]
W_K = [[1, 0], [0, 1]]
W_V = [[1, 0], [0, 1]]

[loss]
kind = "mse"
target = [[1, 0], [0, 1]]
"""


def test_unbiased_layer_norm_of_a_constant_row_has_no_derivative(tmp_path, capsys):
    """sqrt(s^2) + eps is |x - mu| / sqrt(d - 1) + eps: a kink where every entry equals
    the mean, so the gradient there is undefined: one line naming stage and row, exit 2.
    The biased LayerNorm, sqrt(sigma^2 + eps), is smooth there and differentiates."""
    path = tmp_path / "constant.toml"
    path.write_text(CONSTANT_ROWS.replace("LAYER_NORM", "unbiased"))
    assert main(["backward", str(path)]) == 2
    err = capsys.readouterr().err
    assert "grad.layer1.add_norm2.variance: row 0 ('a') is undefined" in err
    assert "no derivative" in err and "Traceback" not in err
    path.write_text(CONSTANT_ROWS.replace("LAYER_NORM", "biased"))
    assert main(["backward", str(path)]) == 0
    # ... its ReLU inputs are exactly 0 (subgradient 0, decided by proof), and every
    # gradient agrees with crosscheck's float64 backward pass (ReLU' = (h > 0) there)
    assert main(["crosscheck", str(path)]) == 0
    assert "grad.layer1.ffn.hidden" in capsys.readouterr().out
