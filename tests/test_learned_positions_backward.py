"""The gradient of a learned positional table (GPT-2's wpe), against independent references.

* central finite differences of the exact forward pass (mpmath at 110 digits, from
  certified balls of the loss) on ``gpt2_style`` with a cross-entropy loss, for
  random entries of the rows the sentence reads; a row it does not read changes
  nothing (and has no gradient row);
* crosscheck's float64 NumPy backward (the operation's own VJP, not the engine's
  stages) agrees with the certified gradient;
* a hand-derived case: with no layers and an mse loss the output is e + PE, so
  dL/dP[i] = 2 (e_i + P_i - target_i) / (n d).
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import mpmath
import sympy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symformer import derive, load_example
from symformer.blocks.backward import backward
from symformer.conventions import Convention
from symformer.example.loader import parse_example
from symformer.verify.crosscheck import crosscheck

LOSS = '\n[loss]\nkind = "cross_entropy"\ntargets = ["cat", "sat", "on"]\n'


def gpt2_with_loss(tmp_path):
    path = tmp_path / "gpt2_loss.toml"
    path.write_text(open(load_example("gpt2_style").source).read() + LOSS)
    return load_example(str(path))


def loss_at(example, prec: int = 400) -> mpmath.mpf:
    ball = backward(derive(example)).evaluate(prec)["loss"][0][0]
    assert ball.rad() < sympy.Rational(1, 10 ** 80)
    return mpmath.mpf(ball.mid().str(110, radius=False))


def shifted(example, i: int, j: int, delta) -> object:
    P = example.positional_embeddings.copy()
    P[i, j] += delta
    return dataclasses.replace(example, positional_embeddings=P)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(st.integers(0, 2), st.integers(0, 3))
def test_central_differences_of_the_exact_forward(tmp_path, i, j):
    example = gpt2_with_loss(tmp_path)
    h = sympy.Rational(1, 10 ** 25)
    mpmath.mp.dps = 110
    difference = (loss_at(shifted(example, i, j, h)) - loss_at(shifted(example, i, j, -h))) \
        / (2 * mpmath.mpf(10) ** -25)
    g = backward(derive(example))
    stage = g["grad.positional_embeddings"]
    assert stage.rows == ("position 0", "position 1", "position 2") and stage.shape == (3, 4)
    ball = g.evaluate(400)["grad.positional_embeddings"][i][j]
    exact = mpmath.mpf(ball.mid().str(110, radius=False))
    assert abs(difference - exact) <= mpmath.mpf(10) ** -40, (i, j, difference, exact)
    assert abs(exact) > mpmath.mpf(10) ** -6  # not a vacuous comparison


def test_rows_not_read_do_not_change_the_loss(tmp_path):
    example = gpt2_with_loss(tmp_path)  # 3 tokens: rows 3, 4, 5 are not read
    mpmath.mp.dps = 110
    assert loss_at(shifted(example, 4, 1, sympy.Rational(1, 2))) == loss_at(example)


def test_float64_backward_agrees(tmp_path):
    rows = {r.stage: r for r in crosscheck(gpt2_with_loss(tmp_path), Convention())}
    assert rows["grad.positional_embeddings"].ok
    assert rows["grad.embedding_table"].ok


NO_LAYERS = """
title = "learned positions, a layer that adds 0"
tokens = ["a", "b", "a"]
vocab = ["a", "b"]
embeddings = [[1, 0], [0, 1]]
positional_encoding = "learned"
positional_embeddings = [[1, 2], [3, 4], [5, 6], [7, 8]]
norm = "none"
[[layer]]
W_O = [[0, 0], [0, 0]]
W_1 = [[0], [0]]
W_2 = [[0, 0]]
[[layer.head]]
W_Q = [[1, 0], [0, 1]]
W_K = [[1, 0], [0, 1]]
W_V = [[0, 0], [0, 0]]
[loss]
kind = "mse"
target = [[0, 0], [0, 0], [0, 0]]
"""


def test_hand_derived_without_layers():
    # the layer adds 0 (W_O, W_2 = 0, no norm): output = e + PE = [[2, 2], [3, 5],
    # [6, 6]]; L = mean of squares over n d = 6 entries, dL/dPE = 2 (e + PE) / 6
    # = (e + PE) / 3, and dL/dP = dL/dPE row by row
    g = backward(derive(parse_example(NO_LAYERS)))
    got = [[g.exact_rational("grad.positional_embeddings", i, j) for j in range(2)]
           for i in range(3)]
    F = Fraction
    assert got == [[F(2, 3), F(2, 3)], [F(1), F(5, 3)], [F(2), F(2)]]
    # the embedding table's rows: token a at positions 0 and 2, b at position 1
    table = [[g.exact_rational("grad.embedding_table", i, j) for j in range(2)]
             for i in range(2)]
    assert table == [[F(8, 3), F(8, 3)], [F(1), F(5, 3)]]
    assert g["grad.embedding_table"].rows == ("a", "b")
    # the tables' gradients are written with the tables' symbols
    # (W_P and W_E as GPT writes them: P and E are the probabilities' and the embedding
    # rows' matrices, issue 39)
    assert g["grad.positional_embeddings"].op.symbol.text == "∂L/∂W_P"
    assert g["grad.embedding_table"].op.symbol.latex == r"\partial L/\partial W_{E}"
