"""symformer prove: the backward identities, proved exactly, and shown false where they fail.

Each fact is stated by the operation whose backward rule it is about
(``Operation.backward_facts``); every one is also checked false on a modified
example (a whole-matrix LayerNorm, a finite -1e9 mask) or a deliberately wrong rule.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import sympy

from symformer import derive, load_example, parse_example
from symformer.blocks.backward import backward
from symformer.example.loader import builtin_text
from symformer.ops import Projection, Softmax, calculus
from symformer.verify.prove import FALSE, PROVED, VACUOUS, causal_gradient


def by_name(facts):
    return {f.name: f for f in facts}


def gradient_facts(example, causal: bool = False) -> dict:
    g = backward(derive(example, causal=causal))
    return by_name(f for s in g if s.kind in ("gradient", "weight_gradient")
                   for f in s.op.facts(s))


def variant(**changes: str) -> str:
    """The built-in example's text with top-level keys set (TOML values as text)."""
    text = builtin_text()
    head, sep, rest = text.partition("\n[[layer]]")
    lines = [line for line in head.splitlines()
             if line.split("=")[0].strip() not in changes]
    return "\n".join([*(f"{k} = {v}" for k, v in changes.items()), *lines]) + sep + rest


def test_builtin_backward_facts_are_proved(builtin_prove_json) -> None:
    """The built-in example's facts, as ``symformer prove --json`` reports them (the
    session's one run, tests/conftest.py)."""
    status, out = builtin_prove_json
    assert status == 0
    facts = {f["name"]: SimpleNamespace(**f) for f in json.loads(out)["facts"]}
    for name in ["grad.layer1.head1.scores.row_sums_zero",
                 "grad.layer1.head2.scores.row_sums_zero (causal)",
                 "grad.layer1.head1.scores.masked_zero (causal)",
                 "grad.layer1.head2.raw_scores.masked_zero (causal)",
                 "grad.layer1.add_norm1.sum.layer_norm_row_sums_zero",
                 "grad.layer1.add_norm2.sum.layer_norm_row_sums_zero (causal)",
                 "grad.layer1.ffn.hidden.clipped_zero",
                 "grad.layer1.b_2.column_sums", "causal_gradient"]:
        assert facts[name].status == PROVED, facts[name]
    assert "24 clipped units" in facts["grad.layer1.ffn.hidden.clipped_zero"].detail


def test_pre_norm_layer_norm_part_still_sums_to_zero() -> None:
    # pre-norm: the LayerNorm's input is also the residual stream; its LayerNorm part
    # (mean, variance and normalisation rules) still sums to 0 over each row
    facts = gradient_facts(parse_example(variant(norm='"pre"')))
    found = [f for n, f in facts.items() if "layer_norm_row_sums_zero" in n]
    assert len(found) == 2 and all(f.status == PROVED for f in found)


def test_whole_matrix_layer_norm_gradient_rows_do_not_sum_to_zero() -> None:
    facts = gradient_facts(parse_example(variant(layer_norm='"whole_matrix"')))
    fact = facts["grad.layer1.add_norm1.sum.layer_norm_row_sums_zero"]
    assert fact.status == FALSE and "does not cancel" in fact.detail


def test_finite_mask_gradients_are_not_zero() -> None:
    example = parse_example(variant(mask='"-1e9"'))
    facts = gradient_facts(example, causal=True)
    assert facts["grad.layer1.head1.scores.masked_zero (causal)"].status == FALSE
    assert facts["grad.layer1.head1.raw_scores.masked_zero (causal)"].status == FALSE
    # the rows still sum to 0: that holds for any softmax
    assert facts["grad.layer1.head1.scores.row_sums_zero (causal)"].status == PROVED
    fact = causal_gradient(example)
    assert fact.status == FALSE and "position 0" in fact.detail


def test_a_wrong_softmax_rule_is_caught(monkeypatch) -> None:
    real = Softmax.backward

    def no_mean(self, args, out, grad, wrt, num):  # alpha_j g_j: the mean term dropped
        return [[a * d for a, d in zip(ra, rg)] for ra, rg in zip(out, grad)]

    monkeypatch.setattr(Softmax, "backward", no_mean)
    facts = gradient_facts(load_example())
    assert facts["grad.layer1.head1.scores.row_sums_zero"].status == FALSE
    monkeypatch.setattr(Softmax, "backward", real)
    assert gradient_facts(load_example())[
        "grad.layer1.head1.scores.row_sums_zero"].status == PROVED


def test_a_wrong_bias_rule_is_caught(monkeypatch) -> None:
    real = Projection.backward

    def mean_not_sum(self, args, out, grad, wrt, num):
        result = real(self, args, out, grad, wrt, num)
        return [[v / len(grad) for v in result[0]]] if wrt == self.bias else result

    monkeypatch.setattr(Projection, "backward", mean_not_sum)
    assert gradient_facts(load_example())["grad.layer1.b_2.column_sums"].status == FALSE


ZERO_UNIT = """
title = "one token, a ReLU input exactly 0"
tokens = ["a"]
vocab = ["a"]
embeddings = [[2, -1]]
positional_encoding = "none"
eps = "7/4"
[[layer]]
W_O = [[0, 0]]
W_1 = [[0], [0]]
b_1 = [0]
W_2 = [[1, 0]]
b_2 = [0, 0]
[[layer.head]]
W_Q = [[0], [0]]
W_K = [[0], [0]]
W_V = [[0], [0]]
[loss]
kind = "mse"
target = [[0, 0]]
"""


def test_relu_at_exactly_zero(monkeypatch) -> None:
    # h = 0 exactly and a gradient arrives: the subgradient 0 makes the fact hold ...
    fact = gradient_facts(parse_example(ZERO_UNIT))["grad.layer1.ffn.hidden.clipped_zero"]
    assert fact.status == PROVED and "1 clipped unit" in fact.detail
    # ... and a rule taking the step's value 1/2 at h = 0 breaks it (the exact zeros
    # are then left to the step, not given the subgradient 0 beforehand)
    monkeypatch.setattr(calculus.Arithmetic, "step",
                        lambda self, h: sympy.Heaviside(h, sympy.S.Half))
    monkeypatch.setattr("symformer.blocks.backward.decide_relu_zeros",
                        lambda g, relus, prec=64: None)
    fact = gradient_facts(parse_example(ZERO_UNIT))["grad.layer1.ffn.hidden.clipped_zero"]
    assert fact.status == FALSE and "= 0" in fact.detail


def test_no_clipped_unit_is_vacuous() -> None:
    text = ZERO_UNIT.replace("b_1 = [0]", "b_1 = [1]")
    fact = gradient_facts(parse_example(text))["grad.layer1.ffn.hidden.clipped_zero"]
    assert fact.status == VACUOUS


def test_one_position_has_no_later_position() -> None:
    assert causal_gradient(parse_example(ZERO_UNIT)).status == VACUOUS
