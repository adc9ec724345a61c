"""Sign decisions and roundings that need exact arithmetic, not smaller balls."""

from __future__ import annotations

import sympy

from symformer import derive, load_example, parse_example

# Two tokens, d_model 2, no positional encoding.  W_1 = [[1], [1]] makes the FFN's
# hidden unit the sum of a LayerNorm row, which is exactly 0 (gamma 1, beta 0), but
# only an exact check can tell: every ball around it straddles 0.
ZERO_HIDDEN = """
title = "exact zero"
tokens = ["a", "b"]
vocab = ["a", "b"]
embeddings = [[1, 3], [2, 0]]
positional_encoding = "none"
[[layer]]
W_O = [[1, 0], [0, 1]]
W_1 = [[1], [1]]
b_1 = [0]
W_2 = [[1, 1]]
b_2 = [0, 0]
[[layer.head]]
W_Q = [[1, 0], [0, 1]]
W_K = [[1, 0], [0, 1]]
W_V = [[1, 0], [0, 1]]
"""


def test_relu_of_an_exact_zero_is_decided_exactly():
    g = derive(parse_example(ZERO_HIDDEN))
    hidden = g["layer1.ffn.hidden"]
    assert not hidden.balls(256)[0][0] == 0  # the ball alone cannot prove it
    assert g.sign("layer1.ffn.hidden", 0, 0) == 0
    assert hidden.values(significant=20) == [["0"], ["0"]]
    assert g["layer1.ffn.activation"].closed_form(0, 0) == 0


def test_exact_decimal_tie_rounds_half_even():
    # 0.15 and 0.25 are exact ties at one decimal; 0.15 is not a binary fraction.
    text = ZERO_HIDDEN.replace("[[1, 3], [2, 0]]", '[["0.15", "0.25"], [2, 0]]')
    g = derive(parse_example(text))
    assert g["embeddings"].values(decimals=1)[0] == ["0.2", "0.2"]
    assert g["embeddings"].closed_form(0, 0) == sympy.Rational(3, 20)


def test_decimal_text_is_read_exactly():
    text = ZERO_HIDDEN.replace("[[1, 3], [2, 0]]", "[[0.1, 1e-6], [2, 0]]")
    g = derive(parse_example(text))
    assert g["embeddings"].closed_form(0, 0) == sympy.Rational(1, 10)
    assert g["embeddings"].closed_form(0, 1) == sympy.Rational(1, 10**6)


def test_failed_deciding_proofs_share_one_budget(monkeypatch):
    """Proofs that decide a rounding or a sign give up after a bounded total of failed
    steps per derivation (an exp(-1e5)-small gradient has hundreds of entries that look
    0 at every precision: 111 s of proofs before); a proof that succeeds is not charged."""
    from symformer.engine import certify

    monkeypatch.setattr(certify, "_DECIDING_BUDGET", 3)
    g = derive(load_example())
    c = g.certification
    q = g.symbols("layer1.head1.Q")
    calls = []
    original = c.prove_zero

    def counted(expr, *args, **kwargs):
        calls.append(expr)
        return original(expr, *args, **kwargs)

    c.prove_zero = counted
    for _ in range(10):
        assert not c._deciding_proof(q[0, 0] - q[1, 1])  # 1.60 vs 0.75: no proof
    assert 0 < len(calls) <= certify._DECIDING_BUDGET
    assert c._failed_steps >= certify._DECIDING_BUDGET
    assert original(q[0, 0] - q[0, 0])  # an explicit proof is still made
