"""Random equations built from the grammar's pieces never end in anything but a verdict
or one line naming what cannot be read (no internal error), quickly."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symformer import load_example
from symformer.errors import InputError
from symformer.verify.check import Checker
from symformer.verify.equation_claims import EquationClaim, Judge

ATOMS = [r"q_{ic}", r"k_{jc}", r"\alpha_{ij}", r"s_{ij}", "x", "r_j", r"\mu", r"\sigma^2",
         "Q", "K", "V", "S", r"W_Q", "d", "n", "d_k", "2", "0.5", r"\epsilon", "h", "a",
         "dS", r"\frac{\partial L}{\partial a_{ij}}", "t", "i", "j", r"\gamma_j", "e"]
OPS = [" + ", " - ", " ", r" \cdot ", r" \odot ", "/", "^{2}", "^\\top", "^{t}", "_{i}"]
WRAPS = [r"\sqrt{%s}", r"\exp(%s)", r"\frac{%s}{%s}", r"\sum_j %s", r"\sum_{j \le i} %s",
         r"\max_k %s", r"\mathrm{softmax}(%s)", r"(%s)", r"\mathbb{1}[%s > 0]",
         r"\tanh^{2} %s", r"\begin{bmatrix} %s & %s \end{bmatrix}", r"[%s, %s]^\top",
         r"\operatorname{diag}(%s)", r"E[%s]", r"\sigma(%s)", r"\mathrm{GELU}'(%s)"]
LHS = [r"\alpha_{ij}", "S", r"q_{ic}", r"\mu", r"y_j", r"\frac{\partial L}{\partial s_{ij}}",
       "dK", r"\mathbf{y}_i", r"\alpha_{in}", "O",
       r"\begin{bmatrix} q_{i,2c} \\ q_{i,2c+1} \end{bmatrix}"]
STAGES = ["layer1.head1.weights", "layer1.head1.scores", "layer1.head1.Q",
          "layer1.add_norm1.mean", "layer1.add_norm1", "grad.layer1.head1.scores",
          "grad.layer1.head1.K", "layer1.head1.output"]


@pytest.fixture(scope="module")
def builtin():
    example = load_example()
    checker = Checker(example)
    return Judge(example, checker.derivation, checker.causal)


def _expression(depth: int):
    if depth == 0:
        return st.sampled_from(ATOMS)
    inner = _expression(depth - 1)
    return st.one_of(
        st.sampled_from(ATOMS),
        st.tuples(inner, st.sampled_from(OPS), inner).map("".join),
        st.tuples(st.sampled_from(WRAPS), inner, inner).map(
            lambda w: w[0] % (w[1:3] if w[0].count("%s") == 2 else w[1:2])))


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.sampled_from(LHS), _expression(3), st.sampled_from(STAGES))
def test_random_equations_end_in_a_verdict_or_one_line(builtin, lhs, rhs, stage):
    try:
        found = builtin.check(EquationClaim("f", stage, f"{lhs} = {rhs}", examples=1,
                                            source="f"))
    except InputError as error:
        assert "\n" not in str(error)
        return
    for link in found.links:
        assert link.status in ("holds", "fails", "example only", "undecided",
                               "incomplete", "holds on this example only")
