"""Single-entry local formulas of gradient stages (``Gradient.sympy_entry``, built from
the operations' ``backward_entry``) and the zero proofs that unfold them.

* every single entry a gradient stage gives is the same expression as the entry of its
  whole local formula (the matrix the backward rules build row by row), on the built-in
  example, on ``llama_style`` (RoPE, grouped KV heads, causal mask, RMSNorm, SwiGLU) and
  on random examples;
* every entry the backward pass's cheap proof calls exactly 0 (the path that unfolds
  single entries) is 0 in the independent float64 backward pass of ``float_backward``.
"""

from __future__ import annotations

import numpy as np
from float_backward import float_backward
from float_reference import float_forward
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_backward import with_mse_loss
from test_backward_llama import llama
from test_engine_random import examples

from symformer import derive
from symformer.blocks.backward import backward
from symformer.example import load_example
from symformer.example.loader import example_from_dict


def _single_entries_agree(g) -> int:
    """Assert each gradient entry given alone equals the whole matrix's; how many."""
    checked = 0
    for stage in g:
        if stage.kind not in ("gradient", "weight_gradient"):
            continue
        args = [g.symbols(name) for name in stage.inputs]
        whole = g.local(stage.name)
        for i in range(whole.rows):
            for j in range(whole.cols):
                entry = stage.op.sympy_entry(args, i, j)
                if entry is not None:
                    assert entry == whole[i, j], (stage.name, i, j)
                    checked += 1
    return checked


def test_builtin_single_gradient_entries_equal_the_matrix():
    assert _single_entries_agree(backward(derive(load_example()))) > 100


def test_llama_single_gradient_entries_equal_the_matrix():
    assert _single_entries_agree(backward(derive(llama(), max_work=10**9))) > 300


@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(examples(), st.data())
def test_random_single_gradient_entries_equal_the_matrix(data, draw):
    small = st.sampled_from(["0", "1", "-1", "1/2", "-3/2"])
    example = example_from_dict(with_mse_loss(data, lambda: draw.draw(small)), "random")
    _single_entries_agree(backward(derive(example)))


def _proved_zeros_are_float_zeros(example) -> int:
    """Round every gradient stage; each entry the cheap proof called 0 must be 0 in the
    float64 backward pass (up to rounding noise).  Returns how many were called 0."""
    g = backward(derive(example))
    for stage in g:
        stage.values(significant=30)  # a zero ball is not rounded: proved
    want = float_backward(example)
    forward = float_forward(example)  # forward stages proved 0 too (a LayerNorm's output mean)
    zeros = [key for key, proved in g.certification.cheap_zeros.items() if proved]
    for name, i, j in zeros:
        if not name.startswith("grad."):
            value, scale = forward[name][i, j], float(np.abs(forward[name]).max())
        elif name.endswith(".mean"):
            # dL/dmu = -sum_j gamma_j dL/dy_j / D (the variance's term is 0), D > 0
            norm = name.removesuffix(".mean")
            gamma = np.array([float(v) for v in g[norm.removeprefix("grad.")].op.gamma])
            value, scale = (want[norm][i] * gamma).sum(), np.abs(want[norm][i]).sum()
        else:
            value, scale = want[name][i, j], float(np.abs(want[name]).max())
        assert abs(value) <= 1e-9 * max(1.0, scale), (name, i, j, value)
    return len(zeros)


def test_builtin_proved_zeros_are_zero_in_float64():
    # the LayerNorm means' gradients (every FFN unit clipped) and head 2's weights'
    assert _proved_zeros_are_float_zeros(load_example()) >= 8


@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(examples(), st.data())
def test_random_proved_zeros_are_zero_in_float64(data, draw):
    small = st.sampled_from(["0", "1", "-1", "1/2"])  # exact zeros are likely
    example = example_from_dict(with_mse_loss(data, lambda: draw.draw(small)), "random")
    g = backward(derive(example))
    want = float_backward(example)
    names = sorted(n for n in want if n in g.stages)
    # the entries the float pass finds near 0, and a few drawn at random, through the
    # backward pass's own path (single entries unfolded; an attempt may cost ~0.1 s)
    picks = [(n, i, j) for n in names for (i, j), v in np.ndenumerate(want[n])
             if abs(v) < 1e-9][:12]
    for _ in range(6):
        n = draw.draw(st.sampled_from(names))
        picks.append((n, draw.draw(st.integers(0, want[n].shape[0] - 1)),
                      draw.draw(st.integers(0, want[n].shape[1] - 1))))
    for name, i, j in picks:
        if g.certification.cheap_zero(name, i, j):
            scale = max(1.0, float(np.abs(want[name]).max()))
            assert abs(want[name][i, j]) <= 1e-9 * scale, (name, i, j)
