"""Token types (segments) and the embedding norm (BERT's input), without torch.

Checked against hand computations with Fractions and mpmath: the typed input row is
e + e^seg + p exactly, the embedding norm is LayerNorm of it; bad keys are refused in
one line; ``train --write`` puts both tables, the norms' weights and the masked-LM
head's back.
"""

from __future__ import annotations

from fractions import Fraction

import mpmath
import pytest

import symformer
from symformer.errors import InputError
from symformer.example.write import updated_example
from symformer.lazy import sympy

TEXT = """
title = "token types"
tokens = ["a", "b", "a"]
vocab = ["a", "b"]
embeddings = [[1, 0, 2], [0, 1, 1]]
positional_encoding = "none"
token_type_embeddings = [[0.5, 0, 0], [0, 0.5, 0]]
segments = [0, 1, 1]
eps = "1/8"

[embedding_norm]
gamma = [1, 2, 1]
beta = [0, 0, 1]

[[layer]]
W_1 = [[1, 0], [0, 1], [1, 1]]
W_2 = [[1, 0, 0], [0, 1, 0]]

[[layer.head]]
W_Q = [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
W_K = [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
W_V = [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
"""


HEAD = """
[lm_head]
tied = true
b_vocab = [0.5, -0.5]
W_transform = [[1, 0, 0], [0, 1, 0], [0, 1, 1]]
b_transform = [0, 0.25, 0]

[lm_head.transform_norm]
gamma = [1, 1, 2]
"""


def test_token_types_and_the_embedding_norm_by_hand(tmp_path) -> None:
    g = symformer.derive(symformer.parse_example(TEXT))
    rows = [[Fraction(1), Fraction(0), Fraction(2)], [0, 1, 1], [1, 0, 2]]
    types = [[Fraction(1, 2), 0, 0], [0, Fraction(1, 2), 0], [0, Fraction(1, 2), 0]]
    x = [[Fraction(a) + b for a, b in zip(r, t)] for r, t in zip(rows, types)]
    assert [[g.exact_rational("input", i, j) for j in range(3)] for i in range(3)] == x
    mpmath.mp.dps = 50
    gamma, beta = [1, 2, 1], [0, 0, 1]
    balls = g["embedding_norm"].balls(160)
    for i, row in enumerate(x):
        mu = sum(row) / 3
        var = sum((v - mu) ** 2 for v in row) / 3
        root = mpmath.sqrt(mpmath.mpf(var.numerator) / var.denominator + mpmath.mpf(1) / 8)
        for j, v in enumerate(row):
            want = mpmath.mpf((v - mu).numerator) / (v - mu).denominator / root * gamma[j] \
                + beta[j]
            got = mpmath.mpf(balls[i][j].mid().str(45, radius=False))
            assert abs(got - want) < mpmath.mpf(10) ** -40
    assert g["layer1.head1.Q"].inputs == ("embedding_norm",)  # the blocks read the norm


@pytest.mark.parametrize(("edit", "message"), [
    (("segments = [0, 1, 1]", "segments = [0, 2, 1]"), r"segments\[1\] = 2 is not a row"),
    (("segments = [0, 1, 1]", "segments = [0, 1]"), "list of 3 token types"),
    (("token_type_embeddings = [[0.5, 0, 0], [0, 0.5, 0]]\n", ""), "segments needs "
                                                                     "token_type_embeddings"),
    (("beta = [0, 0, 1]", "bias = [0, 0, 1]"), "embedding_norm: unknown key 'bias'"),
    (("W_transform = [[1, 0, 0], [0, 1, 0], [0, 1, 1]]\n", ""), "b_transform needs "
                                                                 "W_transform"),
    (("b_transform = [0, 0.25, 0]", "transform_activation = \"tanh\""),
     "transform_activation"),
])
def test_bad_token_types_and_norms_are_refused(edit, message) -> None:
    with pytest.raises(InputError, match=message):
        symformer.parse_example((TEXT + HEAD).replace(*edit))


def test_train_write_puts_both_tables_and_the_norm_back(tmp_path) -> None:
    path = tmp_path / "t.toml"
    path.write_text(TEXT + HEAD)
    example = symformer.load_example(path)
    table = sympy.Matrix([[1, 2, 3], [4, 5, 6]])
    row = sympy.Matrix([[3, 2, 1]])
    text = updated_example(example, {"token_type_table": table, "embedding_table": table * 2,
                                     "embedding_norm.gamma": row, "b_vocab": row[:, :2],
                                     "lm_head.W_transform": sympy.eye(3) * 2,
                                     "lm_head.transform_norm.beta": row})
    again = symformer.parse_example(text)
    assert again.token_type_embeddings == table and again.embeddings == table * 2
    assert list(again.embedding_norm.gamma_f) == [3, 2, 1]
    head = again.lm_head
    assert list(head.b_vocab) == [3, 2] and head.W_transform == sympy.eye(3) * 2
    assert list(head.transform_norm.beta_f) == [3, 2, 1]


def test_generation_continues_the_segment_and_refuses_a_masked_lm_head() -> None:
    from symformer.blocks.generate import generate

    with pytest.raises(InputError, match="masked-LM head"):
        generate(symformer.parse_example(TEXT + HEAD), 1)
    plain = HEAD.split("W_transform")[0]  # tied, b_vocab: a language model's head
    steps = generate(symformer.parse_example(TEXT + plain), 2)
    assert len(steps) == 2 and len(steps[1].tokens) == 4
    assert steps[1].derivation.example.segments == (0, 1, 1, 1)
