"""Issue 10's pieces on cases small enough to derive by hand, and the shipped examples."""

from __future__ import annotations

import numpy as np
import pytest
import sympy
from blocks_reference import forward
from flint import arb

from symformer.blocks import derive, generate
from symformer.engine.arbmath import precision
from symformer.example.loader import load_example
from symformer.ops import GELUTanh, RMSNormalize, RoPE, RowMeanSquare, SiLU, StdDev

ONE = sympy.Integer(1)


@pytest.mark.parametrize("style", ["interleaved", "half"])
def test_rope_at_position_1_of_a_2_vector(style) -> None:
    # d = 2: theta_0 = base^0 = 1, so position m rotates (x, y) by m radians.
    X = sympy.Matrix([[1, 0], [1, 0], [0, 1]])
    out = RoPE(3, 2, sympy.Integer(10000), style).sympy([X])
    assert list(out.row(0)) == [1, 0]
    assert list(out.row(1)) == [sympy.cos(1), sympy.sin(1)]
    assert list(out.row(2)) == [-sympy.sin(2), sympy.cos(2)]


def test_rope_pairs_differ_between_styles() -> None:
    # d = 4, position 1: interleaved rotates (x0, x1) by 1 and (x2, x3) by 10000^(-1/2);
    # half rotates (x0, x2) by 1 and (x1, x3) by 1/100.
    X = sympy.Matrix([[0, 0, 0, 0], [1, 0, 0, 0]])
    inter = RoPE(2, 4, sympy.Integer(10000), "interleaved").sympy([X]).row(1)
    half = RoPE(2, 4, sympy.Integer(10000), "half").sympy([X]).row(1)
    assert list(inter) == [sympy.cos(1), sympy.sin(1), 0, 0]
    assert list(half) == [sympy.cos(1), 0, sympy.sin(1), 0]
    Y = sympy.Matrix([[0, 0, 0, 0], [0, 1, 0, 0]])
    assert list(RoPE(2, 4, sympy.Integer(10000), "half").sympy([Y]).row(1)) == [
        0, sympy.cos(sympy.Rational(1, 100)), 0, sympy.sin(sympy.Rational(1, 100))]


def test_rmsnorm_of_1_2() -> None:
    # ms = (1 + 4) / 2 = 5/2; y = [1, 2] / sqrt(5/2) = [sqrt(10)/5, 2 sqrt(10)/5]
    x = sympy.Matrix([[1, 2]])
    ms = RowMeanSquare().sympy([x])
    assert ms[0, 0] == sympy.Rational(5, 2)
    y = RMSNormalize(sympy.S.Zero, sympy.Matrix([[1, 1]])).sympy([x, ms])
    assert [sympy.simplify(v) for v in y] == [sympy.sqrt(10) / 5, 2 * sympy.sqrt(10) / 5]
    assert StdDev(sympy.S.Zero).sympy([ms])[0, 0] == sympy.sqrt(10) / 2


def test_silu_and_gelu_tanh_at_0() -> None:
    zero = sympy.Matrix([[0]])
    assert SiLU().sympy([zero])[0, 0] == 0
    assert GELUTanh().sympy([zero])[0, 0] == 0
    with precision(64):
        assert SiLU().arb([[[arb(0)]]])[0][0] == 0
        assert GELUTanh().arb([[[arb(0)]]])[0][0] == 0
    # SiLU(1) = 1 / (1 + e^-1); GELU-tanh(1) = (1 + tanh(sqrt(2/pi) * 1.044715)) / 2
    assert SiLU().sympy([sympy.Matrix([[1]])])[0, 0] == 1 / (1 + sympy.exp(-1))
    expected = (1 + sympy.tanh(sympy.sqrt(2 / sympy.pi) * sympy.Rational(1044715, 10**6))) / 2
    assert sympy.simplify(GELUTanh().sympy([sympy.Matrix([[1]])])[0, 0] - expected) == 0


def test_attention_only_by_hand() -> None:
    # The file's comment: u_{0,1} = q_0 . k_1 = [1, 0, 1] . [2, 2, 0] = 2; row 0 of the raw
    # scores is [1, 2, 2], unscaled, so alpha_{0,0} = e / (e + 2 e^2) = 1 / (1 + 2e).
    g = derive(load_example("attention_only"))
    assert list(g["layer1.head1.raw_scores"].exact().row(0)) == [1, 2, 2]
    assert sympy.simplify(g["layer1.head1.weights"].closed_form(0, 0)
                          - 1 / (1 + 2 * sympy.E)) == 0
    assert g["layer1.attention.output"].name == g["output"].inputs[0]


@pytest.mark.parametrize("name", ["attention_only", "gpt2_style", "llama_style"])
def test_shipped_examples_match_the_paper_formulas(name) -> None:
    example = load_example(name)
    g = derive(example)
    reference = forward(example)
    assert set(g.stages) <= set(reference)
    for stage in g:
        got = np.array([[-np.inf if b is None else float(b.mid()) for b in row]
                        for row in stage.balls(128)])
        want = reference[stage.name]
        assert np.array_equal(np.isfinite(got), np.isfinite(want)), stage.name
        finite = np.isfinite(want)
        assert np.allclose(got[finite], want[finite], rtol=1e-12, atol=1e-12), stage.name


def test_llama_query_heads_share_their_key_value_head() -> None:
    g = derive(load_example("llama_style"))
    assert g["layer1.head1.raw_scores"].inputs[1] == "layer1.kv_head1.K_rot"
    assert g["layer1.head2.raw_scores"].inputs[1] == "layer1.kv_head1.K_rot"
    assert g["layer1.head3.raw_scores"].inputs[1] == "layer1.kv_head2.K_rot"
    assert g["layer1.head4.output"].inputs[1] == "layer1.kv_head2.V"
    assert g["layer1.ffn.activation"].inputs == ("layer1.ffn.gate", "layer1.ffn.hidden")


def test_generate_appends_to_a_language_model() -> None:
    example = load_example("gpt2_style")
    steps = generate(example, 2)
    assert steps[1].tokens == example.tokens + (steps[0].choice.token,)
    ref = forward(example, causal=True)
    assert steps[0].choice.token == example.vocab[int(np.argmax(ref["logits"][-1]))]


def test_generate_stops_when_the_learned_table_runs_out() -> None:
    example = load_example("gpt2_style")  # 3 tokens, 6 learned positions
    steps = generate(example, 10)
    assert len(steps) <= 4 and len(steps[-1].tokens) <= 6


def test_rmsnorm_rows_have_mean_square_ms_over_ms_plus_eps() -> None:
    g = derive(load_example("llama_style"))
    facts = [f for s in g if isinstance(s.op, RMSNormalize) for f in s.op.facts(s)]
    assert len(facts) == 5 and all(f.status == "proved" for f in facts)
    # and numerically: row 0 of layer1.norm1 (gamma = 1), ms / (ms + eps) to 30 digits
    with precision(200):
        y = g["layer1.norm1"].balls(200)[0]
        ms = g["layer1.norm1.mean_square"].balls(200)[0][0]
        target = ms / (ms + arb(1) / 10**6)
        assert abs(sum(v * v for v in y) / len(y) - target) < arb(10) ** -30


def test_rope_scores_are_unchanged_by_a_shift_of_every_position() -> None:
    # the proved fact, and the exact scores themselves: positions 0..2 vs 5..7
    q = sympy.Matrix([[1, sympy.Rational(1, 2)], [0, 1], [-1, 2]])
    k = sympy.Matrix([[2, 1], [1, -1], [sympy.Rational(1, 3), 1]])
    base = sympy.Integer(10000)
    scores = [(RoPE(3, 2, base, start=s).sympy([q]) * RoPE(3, 2, base, start=s).sympy([k]).T)
              for s in (0, 5)]
    assert all(sympy.simplify(sympy.expand_trig(a - b)) == 0
               for a, b in zip(scores[0], scores[1]))
    g = derive(load_example("llama_style"))
    facts = [f for s in g if isinstance(s.op, RoPE) for f in s.op.facts(s)]
    assert facts and all(f.status == "proved" for f in facts)
