"""Conventions named when an equation fails (issue "Check an equation as its author wrote
it", What to build 4 and 5): column layout (also a claim option), ε inside or outside
the root, √d_k missing, β^t for β^{t-1}, and constants printed to a few digits (with
``tolerance`` on a claim).  The failing values are recomputed here in float64."""

from __future__ import annotations

import re
from fractions import Fraction
from math import sqrt, tanh
from pathlib import Path

import pytest

from symformer import load_example
from symformer.errors import InputError
from symformer.verify.check import Checker
from symformer.verify.claims import training_run
from symformer.verify.equation_claims import EquationClaim, Judge, equations_from_toml

DATA = Path(__file__).parent / "data" / "equations"


def _judge(path=None) -> Judge:
    example = load_example(path) if path else load_example()
    checker = Checker(example, run=training_run(path) if path else None)
    return Judge(example, checker.derivation, checker.causal, checker.run)


@pytest.fixture(scope="module")
def builtin():
    return _judge()


def link(judge, stage, latex, **options):
    (found,) = judge.check(EquationClaim("t", stage, latex, examples=1, source="t",
                                         **options)).links
    return found


def test_column_layout_is_named_and_is_a_claim_option(builtin):
    found = link(builtin, "layer1.head1.Q", r"Q = W_Q X")
    assert found.status == "fails"
    assert 'it holds if tokens are columns (layout = "columns")' in found.notes
    latex = r"O = V \mathrm{softmax}(K^\top Q / \sqrt{d_k})"
    assert link(builtin, "layer1.head1.output", latex, layout="columns").status == "holds"
    wrong = r"O = V \mathrm{softmax}(Q^\top K / \sqrt{d_k})"
    assert link(builtin, "layer1.head1.output", wrong, layout="columns").status == "fails"


def test_epsilon_and_sqrt_dk_are_named(builtin):
    found = link(builtin, "layer1.add_norm1",
                 r"y_j = \gamma_j \frac{r_j - \mu}{\sqrt{\sigma^2} + \varepsilon} + \beta_j")
    assert "it holds with ε inside the square root" in found.notes
    found = link(builtin, "layer1.head1.scores", r"S = QK^\top")
    assert "it holds divided by √d_k (the scaling by 1/√d_k missing)" in found.notes


def test_a_bias_correction_a_step_off_is_named():
    judge = _judge(DATA / "adam1.toml")
    found = link(judge, "step2.adam_vhat.theta", r"\hat{v}_t = v_t/(1-\beta_2^{t-1})")
    assert found.status == "fails"
    assert any("β^{t} for β^{t-1}" in note for note in found.notes)


GELU = r"a = \frac{h}{2}\left(1 + \tanh\left(C (h + 0.044715 h^3)\right)\right)"


@pytest.fixture(scope="module")
def gelu_tanh():
    return _judge(DATA / "gelu_tanh.toml")


def test_a_constant_printed_to_7_digits_is_named_and_forgiven_by_tolerance(gelu_tanh):
    latex = GELU.replace("C", "0.7978846")
    found = link(gelu_tanh, "layer1.ffn.activation", latex)
    assert found.status == "fails"
    assert 'it holds to the 7 digits of 0.7978846 as printed (tolerance = "1e-6")' \
        in found.notes
    mine = float(re.search(r"is (\S+), the stage", found.message)[1])
    h = 0.25 + 1 * 1 + (-0.5) * 0.5  # h[0,0] = x W_1 + b_1 of gelu_tanh.toml's token 0
    assert mine == pytest.approx(h / 2 * (1 + tanh(0.7978846 * (h + 0.044715 * h ** 3))),
                                 rel=1e-10)
    exact = h / 2 * (1 + tanh(sqrt(2 / 3.141592653589793) * (h + 0.044715 * h ** 3)))
    assert float(re.search(r"the stage is (\S+)", found.message)[1]) == \
        pytest.approx(exact, rel=1e-10)
    held = link(gelu_tanh, "layer1.ffn.activation", latex,
                tolerance=Fraction(1, 10 ** 6))
    assert held.status == "holds" and "relative tolerance 1e-6" in held.message
    wrong = GELU.replace("C", "0.7978846").replace("0.044715", "0.04")
    assert link(gelu_tanh, "layer1.ffn.activation", wrong,
                tolerance=Fraction(1, 10 ** 6)).status == "fails"


@pytest.mark.parametrize("value, message", [
    ('"1e-6"', None), ("1e-6", None), ('"0"', "above 0 and below 1"),
    ('"abc"', "relative tolerance"), ('"2"', "above 0 and below 1"),
])
def test_tolerance_is_read_exactly_or_refused_in_one_line(value, message):
    import tomllib
    data = tomllib.loads("[[equation]]\nstage = \"s\"\nlatex = 'a = b'\n"
                         f"tolerance = {value}\n")
    if message is None:
        (claim,) = equations_from_toml(data, "c.toml")
        assert claim.tolerance == Fraction(1, 10 ** 6)
    else:
        with pytest.raises(InputError, match=message):
            equations_from_toml(data, "c.toml")
