"""Certified values against independent references: float64, mpmath, hand-derived forms."""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import sympy
from float_reference import float_forward

from symformer import derive


def certified_array(stage, digits: int = 20) -> np.ndarray:
    rows = stage.values(significant=digits)
    return np.array([[-np.inf if v == "-inf" else float(Fraction(v)) for v in r] for r in rows])


@pytest.mark.parametrize("causal", [False, True])
def test_every_stage_matches_float64(builtin, causal):
    g = derive(builtin, causal=causal)
    reference = float_forward(builtin, causal=causal)
    for stage in g:
        got, want = certified_array(stage), reference[stage.name]
        assert got.shape == want.shape, stage.name
        finite = np.isfinite(want)
        assert np.array_equal(finite, np.isfinite(got)), stage.name
        scale = max(1.0, np.abs(want[finite]).max())
        assert np.abs(got[finite] - want[finite]).max() <= 1e-12 * scale, stage.name


def test_hand_derived_closed_forms(block):
    s1 = sympy.sin(1)
    assert sympy.simplify(block["input"].closed_form(1, 0) - (4 + s1)) == 0
    assert block["positional_encoding"].closed_form(2, 2) == sympy.sin(sympy.Rational(1, 50))
    assert block["positional_encoding"].closed_form(3, 3) == sympy.cos(sympy.Rational(3, 100))
    # Q = X W_Q: "think" row, first column = (x0 + x1) / 4 = (4 + sin 1 + 1 + cos 1) / 4
    q = block["layer1.head1.Q"].closed_form(1, 0)
    assert sympy.simplify(q - (sympy.Rational(5, 4) + s1 / 4 + sympy.cos(1) / 4)) == 0
    assert block["embeddings"].exact() == sympy.Matrix(
        [[1, 0, 3, 2], [4, 1, 0, 2], [1, 0, 3, 2], [0, 3, 1, 4]])


def test_post_q_row_think_two_decimals(block):
    # 5/4 + sin(1)/4 + cos(1)/4 = 1.5954..., (1 + cos(1/100) + 2 + sin(1/100))/4 = 0.7525...
    assert block["layer1.head1.Q"].values(decimals=2)[1] == ["1.60", "0.75"]


def test_masked_weights_are_exact_zeros(causal_block):
    w = causal_block["layer1.head1.weights"]
    for i in range(4):
        for j in range(i + 1, 4):
            assert w.closed_form(i, j) == 0
            assert w.values(significant=10)[i][j] == "0"
            assert causal_block["layer1.head1.scores"].values(decimals=2)[i][j] == "-inf"
    assert w.closed_form(0, 0) == 1  # the first token sees only itself
    assert w.values(significant=30)[0][0] == "1." + "0" * 29


def mp_input(pos: int, j: int, emb: list[list[int]], ids: list[int]):
    rate = mpmath.mpf(10000) ** (-mpmath.mpf(j - j % 2) / 4)
    pe = mpmath.sin(pos * rate) if j % 2 == 0 else mpmath.cos(pos * rate)
    return emb[ids[pos]][j] + pe


def test_fifty_digits_against_mpmath(block, builtin):
    """Head-1 attention weights recomputed in mpmath at 90 digits, rounded independently."""
    emb = [[int(v) for v in builtin.embeddings.row(i)] for i in range(builtin.embeddings.rows)]
    ids = list(builtin.token_ids)
    head = builtin.layers[0].heads[0]
    with mpmath.workdps(90):
        X = mpmath.matrix([[mp_input(p, j, emb, ids) for j in range(4)] for p in range(4)])

        def mat(m):
            return mpmath.matrix([[mpmath.mpf(Fraction(str(v)).numerator)
                                   / Fraction(str(v)).denominator for v in m.row(i)]
                                  for i in range(m.rows)])

        Q, K = X * mat(head.W_Q), X * mat(head.W_K)
        S = Q * K.T / mpmath.sqrt(2)
        expected = []
        for i in range(4):
            e = [mpmath.exp(S[i, j]) for j in range(4)]
            expected.append([mpmath.nstr(v / sum(e), 80, strip_zeros=False) for v in e])
    got = block["layer1.head1.weights"].values(significant=50)
    with localcontext() as ctx:
        ctx.prec = 50
        ctx.rounding = ROUND_HALF_EVEN
        for i in range(4):
            for j in range(4):
                want = +Decimal(expected[i][j])  # unary plus rounds to 50 digits
                assert Decimal(got[i][j]) == want
                assert len(got[i][j].lstrip("0.").replace(".", "")) == 50


def test_local_formula_is_short_at_depth(block):
    """No swell: the last stage's local formulas stay as small as the first's."""
    ops = sympy.count_ops(block["layer1.add_norm2"].local[0, 0])
    assert ops < 40


def test_closed_form_size_limit(block):
    from symformer import ClosedFormTooLarge

    with pytest.raises(ClosedFormTooLarge, match="max_ops"):
        block["layer1.add_norm2"].closed_form(0, 0, max_ops=50)


def test_local_formulas_agree_with_ball_evaluation(block):
    """The two implementations of every op (SymPy formula, balls) agree entry by entry."""
    from symformer.engine.arbmath import sympy_to_arb

    balls = block.evaluate(256)
    for stage in block:
        if stage.kind in {"scores", "weights"}:
            continue  # covered by the float64 comparison (masked -oo has no ball)
        local = stage.local
        env = {}
        for name in stage.inputs:
            sym = block.symbols(name)
            for i in range(sym.rows):
                for j in range(sym.cols):
                    env[sym[i, j]] = balls[name][i][j]
        for i in range(local.rows):
            for j in range(local.cols):
                a = sympy_to_arb(local[i, j], env)
                assert a.overlaps(balls[stage.name][i][j]), (stage.name, i, j)


def test_constant_balls_follow_a_matrix_changed_in_place():
    """Weights' balls are kept per matrix and precision, but a SymPy matrix is mutable:
    after an in-place change (and after a change back) the balls are the new entries."""
    from flint import arb, fmpq

    from symformer.engine.arbmath import constant_balls, precision

    m = sympy.Matrix([[sympy.Rational(1, 3), 0], [sympy.Rational(-5, 8), 2]])
    with precision(200):
        first = constant_balls(m)
        assert first[0][0].overlaps(arb(fmpq(1, 3))) and first[1][0] == arb(fmpq(-5, 8))
        assert constant_balls(m)[1][1] == 2
        m[1, 1] = sympy.Rational(7, 4)
        m[0, 1] = 3  # a zero entry becomes nonzero
        changed = constant_balls(m)
        assert changed[1][1] == arb(fmpq(7, 4)) and changed[0][1] == 3
        m[1, 1], m[0, 1] = 2, 0
        back = constant_balls(m)
        assert back[1][1] == 2 and back[0][1] == 0
    with precision(64):  # another precision: the 1/3 ball is wider
        assert constant_balls(m)[0][0].rad() > first[0][0].rad()
