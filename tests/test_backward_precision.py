"""What keeps the backward pass cheap, checked as behaviour (no timing):

* the gradient of a score row with a single unmasked score (a causal mask's first
  query) is the exact 0 ball, no proof needed: alpha = exp(s) / exp(s) = 1, so
  alpha (g - alpha g) = 0 for any g (derived by hand below, and 0.0 in the
  independent float64 backward pass);
* printing every stage of a forward + backward pass evaluates the graph at one
  precision, shared with the ReLU sign decisions, also for a deeper stack.
"""

from __future__ import annotations

import dataclasses

import pytest
import sympy
from float_backward import float_backward

from symformer import derive
from symformer.blocks.backward import backward
from symformer.example import load_example


def test_causal_first_query_score_gradient_is_the_exact_zero_ball():
    example = load_example()
    g = backward(derive(example, causal=True))
    floats = float_backward(example, causal=True)
    for head in (1, 2):
        name = f"grad.layer1.head{head}.scores"
        ball = g.evaluate(128)[name][0][0]
        assert ball == 0 and ball.rad() == 0  # exact: no proof, no higher precision
        assert floats[name][0, 0] == 0.0
        # by hand: the first row's only weight is exp(s_00) / exp(s_00) = 1
        scores = f"layer1.head{head}.scores"
        masked = {g.symbols(scores)[0, j]: g.local(scores)[0, j] for j in range(1, 4)}
        assert set(masked.values()) == {-sympy.oo}
        weights = f"layer1.head{head}.weights"
        alphas = {g.symbols(weights)[0, j]: g.local(weights)[0, j].xreplace(masked)
                  for j in range(4)}
        assert list(alphas.values()) == [1, 0, 0, 0]
        formula = g.local(name)[0, 0]  # alpha_0 (g_0 - sum_k alpha_k g_k), over symbols
        assert formula != 0
        assert sympy.expand(formula.xreplace(alphas)) == 0
        # rows with two or more unmasked scores keep the general rule (non-zero balls)
        balls = g.evaluate(128)[name]
        assert any(not balls[i][j].contains(0) for i in range(1, 4) for j in range(i + 1))


@pytest.mark.parametrize("layers", [1, 3])
def test_forward_and_backward_are_printed_from_one_evaluation(layers):
    example = load_example()
    example = dataclasses.replace(example, layers=example.layers * layers)
    g = backward(derive(example))
    for stage in g:
        stage.values(significant=30)
    assert len(g._balls) == 1  # no second evaluation at a higher precision
