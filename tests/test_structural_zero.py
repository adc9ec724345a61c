"""The cheap symbolic zero proof (``Derivation.structural_zero``) tried first for a ball around 0.

It must prove the zeros of structural origin (the built-in example's gradient at
LayerNorm 1's mean is exactly 0: with gamma = 1 it is minus the row sum of LayerNorm
2's input gradient over sigma, and such rows sum to 0), and never "prove" a non-zero
entry: on random examples every entry it calls zero has a float64 reference within
rounding noise of 0 and a ball that contains 0.
"""

from __future__ import annotations

import numpy as np
from float_backward import float_backward
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_backward import with_mse_loss
from test_engine_random import examples

from symformer import derive
from symformer.blocks.backward import backward
from symformer.example import load_example
from symformer.example.loader import example_from_dict


def test_builtin_mean_gradient_is_a_structural_zero():
    g = backward(derive(load_example()))
    name = "grad.layer1.add_norm1.mean"
    # dL/dmu = -sum_d gamma_d dL/dy_d / sigma with gamma = 1: the independent float
    # pass's rows of dL/dy sum to 0 up to noise.
    want = float_backward(load_example())["grad.layer1.add_norm1"]
    assert np.abs(want.sum(axis=1)).max() < 1e-12
    for i in range(g[name].shape[0]):
        assert g.structural_zero(g.local(name)[i, 0])
    assert all(str(v) in ("0.000", "-0.000") for row in g[name].values(decimals=3)
               for v in row)


def test_non_zero_gradients_are_not_called_zero():
    g = backward(derive(load_example()))
    want = float_backward(load_example())["grad.output"]
    for i in range(want.shape[0]):
        for j in range(want.shape[1]):
            assert abs(want[i, j]) > 1e-6
            assert not g.structural_zero(g.local("grad.output")[i, j])


@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(examples(), st.data())
def test_structural_zeros_are_zero_in_float64(data, draw):
    small = st.sampled_from(["0", "1", "-1", "1/2", "-1/2"])  # exact zeros are likely
    example = example_from_dict(with_mse_loss(data, lambda: draw.draw(small)), "random")
    g = backward(derive(example))
    want = float_backward(example)
    names = sorted(want)
    # Every entry the float pass finds near 0, and a few drawn at random: those the
    # proof calls zero must be 0 in float64 too (an attempt costs up to ~0.1 s).
    picks = [(n, i, j) for n in names for (i, j), v in np.ndenumerate(want[n])
             if abs(v) < 1e-9][:12]
    for _ in range(6):
        n = draw.draw(st.sampled_from(names))
        i = draw.draw(st.integers(0, want[n].shape[0] - 1))
        j = draw.draw(st.integers(0, want[n].shape[1] - 1))
        picks.append((n, i, j))
    for name, i, j in picks:
        value = want[name]
        scale = max(1.0, float(np.abs(value).max()))
        if g.structural_zero(g.local(name)[i, j]):
            assert abs(value[i, j]) <= 1e-9 * scale, (name, i, j)
