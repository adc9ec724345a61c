"""Dropout with a given mask: x m / (1 - p) against a float64 computation written
here, the rate read as written (0.1 is 1/10), and bad masks and rates refused in one
line."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from symformer import derive, load_example
from symformer.blocks.dropout import add_dropout
from symformer.errors import InputError


def _floats(stage) -> np.ndarray:
    return np.array([[float(v) for v in row] for row in stage.values(decimals=15)])


@settings(max_examples=5, deadline=None)
@given(data=st.data(), p=st.sampled_from(["0", "0.1", "0.5", "1/3"]))
def test_dropout_of_the_attention_weights_matches_float64(data, p):
    g = derive(load_example("gpt2_style"))
    w = g["layer1.head1.weights"]
    n, m = w.shape
    mask = [data.draw(st.lists(st.integers(0, 1), min_size=m, max_size=m)) for _ in range(n)]
    name = add_dropout(g, "layer1.head1.weights", mask, p)
    assert name == "layer1.head1.weights.dropout" and g[name].layer == w.layer
    rate = float(Fraction(p))
    want = _floats(w) * np.array(mask) / (1 - rate)
    assert np.allclose(_floats(g[name]), want, rtol=0, atol=1e-13)
    if p == "0.1":  # exact: a kept weight times 10/9
        i, j = next(((i, j) for i in range(n) for j in range(m) if mask[i][j]), (0, 0))
        if mask[i][j]:
            assert g[name].closed_form(i, j) == g[w.name].closed_form(i, j) * 10 / 9


@pytest.mark.parametrize(("mask", "p", "what"), [
    ([[1]], "0.1", "mask must be"), ("x", "0.1", "mask must be"),
    (None, "0.1", "mask must be"), ("ones", "1", "p must be from 0"),
    ("ones", "-0.5", "p must be from 0"), ("ones", "abc", "p must be a number"),
    ("twos", "0.1", "0 or 1")])
def test_bad_masks_and_rates_are_refused(mask, p, what):
    g = derive(load_example("gpt2_style"))
    n, m = g["output"].shape
    mask = {"ones": [[1] * m] * n, "twos": [[2] * m] * n}.get(mask, mask) \
        if isinstance(mask, str) else mask
    with pytest.raises(InputError, match=what):
        add_dropout(g, "output", mask, p)
