"""Random examples (hypothesis): every convention against the independent float64 pass."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from float_reference import float_forward
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import rationals

from symformer import derive
from symformer.example.loader import example_from_dict

#: The values of ``st.fractions(-2, 2, max_denominator=8)``, as strings.
small = rationals(Fraction(-2), Fraction(2)).map(str)


def mat(draw, rows: int, cols: int) -> list[list[str]]:
    return [[draw(small) for _ in range(cols)] for _ in range(rows)]


@st.composite
def examples(draw) -> dict:
    n, d = draw(st.integers(2, 4)), draw(st.sampled_from([2, 4]))
    vocab = [f"w{i}" for i in range(draw(st.integers(2, 4)))]
    layers = []
    for _ in range(draw(st.integers(1, 2))):
        heads = [{"W_Q": mat(draw, d, dk), "W_K": mat(draw, d, dk), "W_V": mat(draw, d, dk)}
                 for dk in [draw(st.integers(1, 2)) for _ in range(draw(st.integers(1, 2)))]]
        width = sum(len(h["W_V"][0]) for h in heads)
        d_ff = draw(st.integers(1, 4))
        layers.append({
            "head": heads, "W_O": mat(draw, width, d), "W_1": mat(draw, d, d_ff),
            "b_1": [draw(small) for _ in range(d_ff)], "W_2": mat(draw, d_ff, d),
            "b_2": [draw(small) for _ in range(d)],
            "gamma_1": [draw(small) for _ in range(d)],
            "activation": draw(st.sampled_from(["relu", "gelu"])),
            "norm": draw(st.sampled_from(["post", "pre"])),
            "layer_norm": draw(st.sampled_from(["biased", "unbiased"])),
        })
    return {
        "title": "random", "vocab": vocab,
        "tokens": [draw(st.sampled_from(vocab)) for _ in range(n)],
        "embeddings": mat(draw, len(vocab), d), "eps": "1/100", "layer": layers,
        "positional_encoding": draw(st.sampled_from(["sinusoidal", "none"])),
    }


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(examples(), st.booleans())
def test_random_examples_match_float64(data, causal):
    example = example_from_dict(data, "random")
    g = derive(example, causal=causal)
    reference = float_forward(example, causal=causal)
    for stage in g:
        want = reference[stage.name]
        got = np.array([[-np.inf if v == "-inf" else float(Fraction(v)) for v in row]
                        for row in stage.values(significant=20)])
        finite = np.isfinite(want)
        assert np.array_equal(finite, np.isfinite(got)), stage.name
        scale = max(1.0, float(np.abs(want[finite]).max()))
        assert np.abs(got[finite] - want[finite]).max() <= 1e-9 * scale, stage.name
