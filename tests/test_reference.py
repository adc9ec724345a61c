"""The NumPy reference against hand-derived values and the formulas' own invariants."""

from __future__ import annotations

import math

import numpy as np
import pytest

from symformer import load_example
from symformer.ops.mean import mean
from symformer.ops.normalize import layer_norm, layer_norm_unbiased
from symformer.ops.positional import pe_even, pe_odd
from symformer.ops.variance import variance
from symformer.ops.whole_matrix import whole_mean, whole_variance
from symformer.reference import numpy_ref as ref


@pytest.fixture(scope="module")
def example():
    return load_example()


def test_positional_encoding_by_hand() -> None:
    # d_model = 4: dimension 2 uses the angle pos / 10000^(2/4) = pos / 100.
    assert pe_even(1, 0, 4) == pytest.approx(math.sin(1))
    assert pe_odd(3, 0, 4) == pytest.approx(math.cos(3))
    assert pe_even(2, 1, 4) == pytest.approx(math.sin(0.02))
    assert pe_odd(2, 1, 4) == pytest.approx(math.cos(0.02))


def test_head1_projections_by_hand(example) -> None:
    out = ref.forward(example)
    # "think" at position 1: x = [4 + sin 1, 1 + cos 1, sin(1/100), 2 + cos(1/100)].
    x = [4 + math.sin(1), 1 + math.cos(1), math.sin(0.01), 2 + math.cos(0.01)]
    np.testing.assert_allclose(out["input"][1], x, rtol=1e-15)
    q = [(x[0] + x[1]) / 4, (x[2] + x[3]) / 4]
    np.testing.assert_allclose(out["layer1.head1.Q"][1], q, rtol=1e-15)
    k = [(x[0] + x[2]) / 4, (x[1] + x[3]) / 4]
    np.testing.assert_allclose(out["layer1.head1.K"][1], k, rtol=1e-15)


def test_softmax_rows_and_causal_zeros(example) -> None:
    out = ref.forward(example, causal=True)
    w = out["layer1.head1.weights"]
    np.testing.assert_allclose(w.sum(axis=1), 1.0, rtol=1e-15)
    assert np.all(w[np.triu_indices(4, k=1)] == 0.0)
    nines = ref.forward(example, causal=True, mask="-1e9")["layer1.head1.weights"]
    assert nines[0, 1] == 0.0  # exp(-1e9) underflows in floats; exactly it is positive
    np.testing.assert_allclose(nines, w, atol=1e-300)


def test_layer_norm_conventions() -> None:
    x = np.array([[1.0, 2.0, 4.0, 9.0], [0.0, -1.0, 1.0, 0.5]])
    one, zero = np.ones(4), np.zeros(4)
    mu = mean(x, 4)
    np.testing.assert_allclose(mu, [[4.0], [0.125]], rtol=1e-15)  # 16/4, 0.5/4
    # by hand: row 0 deviations -3, -2, 0, 5 -> squares 9, 4, 0, 25 = 38
    np.testing.assert_allclose(variance(x, mu, 4)[0], [38 / 4], rtol=1e-15)
    np.testing.assert_allclose(variance(x, mu, 3)[0], [38 / 3], rtol=1e-15)
    biased = layer_norm(x, mu, variance(x, mu, 4), one, zero, 0.0)
    np.testing.assert_allclose(biased.mean(axis=1), 0.0, atol=1e-15)
    np.testing.assert_allclose((biased ** 2).mean(axis=1), 1.0, rtol=1e-14)
    unbiased = layer_norm_unbiased(x, mu, variance(x, mu, 3), one, zero, 0.0)
    np.testing.assert_allclose((unbiased ** 2).sum(axis=1) / 3, 1.0, rtol=1e-14)
    whole_mu = whole_mean(x, 2, 4)
    np.testing.assert_allclose(whole_mu, [[16.5 / 8]] * 2, rtol=1e-15)
    whole = layer_norm(x, whole_mu, whole_variance(x, whole_mu, 2, 4), one, zero, 0.0)
    assert whole.mean() == pytest.approx(0.0, abs=1e-15)
    assert (whole ** 2).mean() == pytest.approx(1.0)


def test_conventions_change_the_stage_names_not(example) -> None:
    post = ref.forward(example)
    assert "layer1.add_norm1.sum" in post and "layer1.norm1" not in post
    pre = ref.forward(example, norm="pre")
    assert "layer1.norm1.variance" in pre and "layer1.add_norm1.sum" not in pre
    single = ref.forward(example, dtype=np.float32)
    assert all(v.dtype == np.float32 for v in single.values())
    assert np.max(np.abs(single["output"] - post["output"])) < 1e-5
