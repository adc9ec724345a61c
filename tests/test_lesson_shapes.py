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
