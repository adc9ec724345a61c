"""The new backward rules (RMSNorm, SwiGLU's SiLU gate, RoPE, grouped key/value heads)
against central finite differences of the exact forward, evaluated with mpmath.

The example is ``llama_style`` with a cross-entropy loss through its ``[lm_head]``; a
weight entry is shifted by +-1e-25 exactly, the loss evaluated to 400 bits, and the
central difference (error O(h^2) = 1e-50) compared with the certified gradient.
"""

from __future__ import annotations

import dataclasses

import mpmath
import sympy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symformer import derive, load_example, parse_example
from symformer.blocks.backward import backward


def llama():
    example = load_example("llama_style")
    targets = [example.vocab[(i + 1) % len(example.vocab)] for i in range(len(example.tokens))]
    text = open(example.source).read() + '\n[loss]\nkind = "cross_entropy"\ntargets = [' \
        + ", ".join(f'"{t}"' for t in targets) + "]\n"
    return parse_example(text)


def loss_at(example) -> mpmath.mpf:
    ball = backward(derive(example)).evaluate(400)["loss"][0][0]
    assert ball.rad() < sympy.Rational(1, 10 ** 80)
    return mpmath.mpf(ball.mid().str(110, radius=False))


#: (field of layer 1, key/value head index or None, the gradient stage)
WEIGHTS = [("W_gate", None, "grad.layer1.W_gate"), ("W_1", None, "grad.layer1.W_1"),
           ("gamma_1", None, "grad.layer1.norm1.gamma"), ("W_K", 0, "grad.layer1.kv_head1.W_K"),
           ("W_V", 1, "grad.layer1.kv_head2.W_V")]


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(WEIGHTS), st.integers(0, 100), st.integers(0, 100))
def test_central_differences_of_the_exact_forward(weight, i, j):
    name, head, gradient = weight
    example = llama()
    layer = example.layers[0]
    holder = layer.kv_heads[head] if head is not None else layer
    W = getattr(holder, name)
    i, j = i % W.rows, j % W.cols
    h = sympy.Rational(1, 10 ** 25)

    def shifted(delta):
        M = W.copy()
        M[i, j] += delta
        new = dataclasses.replace(holder, **{name: M})
        if head is not None:
            heads = list(layer.kv_heads)
            heads[head] = new
            new = dataclasses.replace(layer, kv_heads=tuple(heads))
        return dataclasses.replace(example, layers=(new, *example.layers[1:]))

    mpmath.mp.dps = 110
    difference = (loss_at(shifted(h)) - loss_at(shifted(-h))) / (2 * mpmath.mpf(10) ** -25)
    ball = backward(derive(example)).evaluate(400)[gradient][i][j]
    exact = mpmath.mpf(ball.mid().str(110, radius=False))
    assert abs(difference - exact) <= mpmath.mpf(10) ** -40, (gradient, i, j)
