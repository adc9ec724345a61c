"""``train`` trains RMSNorm's gamma (llama_style): each step's gamma against central
finite differences of the exact forward's loss (an independent route: no gradient rule)."""

from __future__ import annotations

import dataclasses

import pytest
import sympy

from symformer.blocks import derive
from symformer.blocks.backward import add_loss
from symformer.blocks.train import train
from symformer.example.loader import example_from_dict, packaged_examples, read_toml

LR = sympy.Rational(1, 10)
H = sympy.Rational(1, 10**12)


@pytest.fixture(scope="module")
def llama():
    """llama_style with a cross-entropy loss (the next token; the last position's target
    is the first token)."""
    path = packaged_examples()["llama_style"]
    data = read_toml(path.read_text(), str(path))
    tokens = data["tokens"]
    data["loss"] = {"kind": "cross_entropy", "targets": tokens[1:] + tokens[:1]}
    return example_from_dict(data, "llama_style with a loss")


def _loss(example) -> sympy.Rational:
    g = derive(example)
    return sympy.Rational(g[add_loss(g)].values(significant=45)[0][0])


def _with_gamma(example, where: str, gamma: sympy.Matrix):
    if where == "final":
        return dataclasses.replace(example, final_norm=dataclasses.replace(
            example.final_norm, gamma_f=gamma))
    layer = dataclasses.replace(example.layers[0], gamma_1=gamma)
    return dataclasses.replace(example, layers=(layer, *example.layers[1:]))


@pytest.mark.parametrize("name,where", [("layer1.norm1.gamma", "layer"),
                                        ("final_norm.gamma", "final")])
def test_rms_norm_gamma_takes_the_finite_difference_step(llama, name, where):
    trained = train(derive(llama), LR, 1)
    weight = next(w for w in trained.weights if w.name == name)
    gamma = sympy.Matrix(weight.value.tolist())
    step1 = trained.graph[trained.weight(1, weight)].values(significant=30)[0]
    slopes = []
    for j in range(gamma.cols):
        up, down = gamma.copy(), gamma.copy()
        up[0, j] += H
        down[0, j] -= H
        slope = (_loss(_with_gamma(llama, where, up))
                 - _loss(_with_gamma(llama, where, down))) / (2 * H)
        slopes.append(slope)
        want = gamma[0, j] - LR * slope
        assert abs(sympy.Rational(step1[j]) - want) <= sympy.Rational(1, 10**18) * (
            1 + abs(want)), (name, j)
    assert any(abs(s) > sympy.Rational(1, 10**6) for s in slopes)  # a real step
