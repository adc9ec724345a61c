"""An equation written with ``\\approx`` (GELU's tanh form, as the GPT-2 paper and most
blog posts print it): read, judged exactly, and when it is not exact the relative
tolerance within which it holds is named -- the verdict stays *fails* (never "holds"
for an approximation that is not an identity) unless ``tolerance`` is given.

The reference is mpmath: the tanh form against the exact (erf) GELU at every entry of
the example's FFN hidden layer, h = x W_1 + b_1, computed here from the example file's
own numbers."""

from __future__ import annotations

import tomllib
from fractions import Fraction
from pathlib import Path

import mpmath
import pytest

from symformer import load_example
from symformer.verify.check import Checker
from symformer.verify.equation_claims import APPROXIMATION_DIGITS, EquationClaim, Judge

DATA = Path(__file__).parent / "data" / "equations"
TANH_FORM = (r"\mathrm{GELU}(x) \approx 0.5x\left(1+\tanh\left[\sqrt{2/\pi}"
             r"\left(x+0.044715x^3\right)\right]\right)")


def _judge(name: str) -> Judge:
    checker = Checker(load_example(DATA / name))
    return Judge(checker.example, checker.derivation, checker.causal)


def _links(judge: Judge, latex: str, tolerance: Fraction | None = None, examples: int = 2):
    return judge.check(EquationClaim("t", "layer1.ffn.activation", latex, examples=examples,
                                     source="t", tolerance=tolerance)).links


def _mpf(value) -> mpmath.mpf:
    """An example file's number (an int, a float as written, "1/2") exactly."""
    f = Fraction(str(value))
    return mpmath.mpf(f.numerator) / f.denominator


def _largest_relative_error() -> mpmath.mpf:
    """max |tanh form - GELU| / |GELU| over the example's hidden entries, in mpmath."""
    mpmath.mp.dps = 50
    table = tomllib.loads((DATA / "gelu.toml").read_text())
    rows = [[_mpf(v) for v in row] for row in table["inputs"]]
    layer = table["layer"][0]
    w1 = [[_mpf(v) for v in row] for row in layer["W_1"]]
    b1 = [_mpf(v) for v in layer["b_1"]]
    worst = mpmath.mpf(0)
    for x in rows:
        for j in range(len(b1)):
            h = sum(x[k] * w1[k][j] for k in range(len(x))) + b1[j]
            exact = h / 2 * (1 + mpmath.erf(h / mpmath.sqrt(2)))
            tanh = mpmath.mpf("0.5") * h * (1 + mpmath.tanh(
                mpmath.sqrt(2 / mpmath.pi) * (h + mpmath.mpf("0.044715") * h ** 3)))
            if exact != 0:
                worst = max(worst, abs(tanh - exact) / abs(exact))
    return worst


def test_approx_is_read_and_holds_where_it_is_the_model():
    (link,) = _links(_judge("gelu_tanh.toml"), TANH_FORM)
    assert link.status == "holds", link.message


def test_approx_that_is_not_exact_fails_and_names_its_tolerance():
    worst = _largest_relative_error()
    # the digits the note may name: the smallest 10^-k tried that bounds the error on
    # the example alone (judged on it alone: no random example)
    k = next(k for k in APPROXIMATION_DIGITS if worst <= mpmath.mpf(10) ** -k)
    assert 1e-5 < worst < 1e-2  # the tanh form is close, not exact
    (link,) = _links(_judge("gelu.toml"), TANH_FORM, examples=0)
    assert link.status == "fails"
    assert link.notes == [f'written with ≈, and not exact: it holds within a relative '
                          f'1e-{k} (tolerance = "1e-{k}" accepts it)']
    # with random examples too, the tolerance named can only be as wide or wider
    (link,) = _links(_judge("gelu.toml"), TANH_FORM)
    assert link.status == "fails"
    named = int(link.notes[0].split("relative 1e-")[1].split(" ")[0]) \
        if "not exact: it holds" in link.notes[0] else 0
    assert named <= k


def test_approx_with_a_tolerance_holds_and_a_wrong_constant_does_not():
    judge = _judge("gelu.toml")
    worst = _largest_relative_error()
    tolerance = Fraction(1, 10 ** 2)
    assert worst <= _mpf(tolerance)  # the reference: within 1e-2 at every entry of the example
    (link,) = _links(judge, TANH_FORM, tolerance, examples=0)
    assert link.status == "holds on this example only", link.message
    wrong = TANH_FORM.replace("0.044715", "0.44715")
    (link,) = _links(judge, wrong, tolerance, examples=0)
    assert link.status == "fails"


@pytest.mark.parametrize("relation", [r"\approx", r"\simeq"])
def test_approx_never_holds_for_a_wrong_equation(relation):
    (link,) = _links(_judge("gelu_tanh.toml"),
                     TANH_FORM.replace(r"\approx", relation).replace("1+", "2+"))
    assert link.status == "fails"
