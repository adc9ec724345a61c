"""Equation claims are bounded (issue "Never a confident wrong number", item 9 and the
attack's H2, H3, I1, I2, M1, M12): a sum over literal limits is counted before it runs
and refused with the estimate over the work limit; helper definitions expanding into
copies are counted after expansion and refused; a flat sum of thousands of terms is
read (the nesting limit is about depth); Unicode digits and numbers of thousands of
digits are one line naming what and where -- every refusal quick."""

from __future__ import annotations

import time

import numpy as np
import pytest
from float_reference import float_forward

from symformer import load_example
from symformer.errors import InputError
from symformer.verify import latex_math as lm
from symformer.verify.check import Checker
from symformer.verify.equation_claims import EquationClaim, Judge

STAGE = "layer1.add_norm1.mean"


@pytest.fixture(scope="module")
def builtin():
    example = load_example()
    checker = Checker(example)
    return Judge(example, checker.derivation, checker.causal)


def _check(judge, latex, **options):
    return judge.check(EquationClaim("t", STAGE, latex, examples=1, source="t", **options))


@pytest.mark.parametrize("latex, operations", [
    (r"\mu = \sum_{i=1}^{10000000} 0", 10 ** 8),
    (r"\mu = \sum_{i=1}^{1000}\sum_{j=1}^{1000}\sum_{k=1}^{1000} 1", 10 ** 11),
    (r"\mu = \sum_{i=1}^{10^{12}} 1", 10 ** 13),
    (r"\mu = \sum_{i=1}^{2^{2^{100}}} 1", 10 ** 17),
    (" = ".join([r"\mu"] + ["r_0"] * 3300), 10 ** 7),  # a 3,300-link chain
])
def test_work_is_counted_before_it_runs_and_refused_with_the_estimate(builtin, latex,
                                                                     operations):
    start = time.process_time()
    with pytest.raises(InputError) as error:
        _check(builtin, latex)
    assert time.process_time() - start < 2
    message = str(error.value)
    assert "\n" not in message and "over the limit of 5 M" in message
    shown = message.split("estimated at ")[1].split(" operations")[0]  # "1,280 M", "286,496"
    estimate = float(shown.removesuffix(" M").replace(",", "")) \
        * (10 ** 6 if shown.endswith(" M") else 1)
    assert estimate >= operations


def test_the_work_limit_is_the_callers(builtin):
    """A sum of 200 terms is within the default limit; a limit of 1,000 refuses it."""
    example = load_example()
    checker = Checker(example)
    small = Judge(example, checker.derivation, checker.causal, max_work=1_000)
    latex = r"\mu = \frac{1}{200}\sum_{i=1}^{200} \frac{1}{d}\sum_j r_j"
    (link,) = _check(builtin, latex).links
    assert link.status == "holds", link.message
    with pytest.raises(InputError, match="over the limit of 1,000"):
        _check(small, latex)


def test_definitions_expanding_into_copies_are_refused_before_they_are_built(builtin):
    levels = ["a", "b", "c", "e_1", "f"]
    body = r"\mu = a, " + ", ".join(
        rf"\quad {x} = " + "+".join([y] * 60) for x, y in zip(levels, levels[1:]))
    body += r", \quad f = r_0"
    start = time.process_time()
    with pytest.raises(InputError, match=r"about 25,\d{3},\d{3} nodes; at most 200,000"):
        _check(builtin, body)
    assert time.process_time() - start < 2


def test_a_shared_definition_used_many_times_is_read(builtin):
    """a = b + b + b + b with b = r/d summed over j: one subtree, used four times."""
    latex = r"\mu = \frac{a}{4}, \quad a = b + b + b + b, \quad b = \frac{1}{d}\sum_j r_j"
    (link,) = _check(builtin, latex).links
    assert link.status == "holds", link.message


def test_a_flat_sum_of_thousands_of_terms_is_read(builtin):
    """4,998 terms (20,000 characters, no nesting) parse into a shallow tree; 300 of
    them are judged, the value recomputed in float64 (300 r_0 of token 0)."""
    (chain,) = lm.parse_equations(r"\mu = " + "+".join(["r_0"] * 4998))
    depth, stack = 0, [(chain.rhs[0], 1)]
    while stack:
        node, level = stack.pop()
        depth = max(depth, level)
        if isinstance(node, lm.Binary):
            stack += [(node.left, level + 1), (node.right, level + 1)]
    assert depth < 20
    (link,) = _check(builtin, r"\mu = " + "+".join(["r_0"] * 300)).links
    assert link.status == "fails"
    r = float_forward(load_example())["layer1.add_norm1.sum"]
    shown = float(link.message.split(" is ")[1].split(",")[0])
    assert shown == pytest.approx(300 * r[0, 0], rel=1e-9)
    assert np.isfinite(shown)


@pytest.mark.parametrize("text, column, name", [
    ("\\mu = r_0\u00b2", 10, "SUPERSCRIPT TWO: write ^{2}"),
    ("\\mu = r_0\u00b9", 10, "SUPERSCRIPT ONE: write ^{1}"),
    ("\\mu = \u2460 r_0", 7, "CIRCLED DIGIT ONE"),
    ("\\mu = \u0661 r_0", 7, "ARABIC-INDIC DIGIT ONE"),
    ("\\mu = \uff11 r_0", 7, "FULLWIDTH DIGIT ONE"),
    ("\\mu = \U0001d7d9 r_0", 7, "MATHEMATICAL DOUBLE-STRUCK DIGIT ONE"),
    ("\\mu = r_\u2080", 9, "SUBSCRIPT ZERO: write _{0}"),
])
def test_unicode_digits_are_refused_naming_the_character(text, column, name):
    with pytest.raises(InputError) as error:
        lm.parse_equations(text)
    message = str(error.value)
    assert "\n" not in message and name in message and f"at column {column}" in message


@pytest.mark.parametrize("latex", [
    r"\mu = " + "9" * 5000,
    r"\mu = 2^{" + "9" * 5000 + "}",
    r"\mu = r_{" + "1" * 5000 + "}",
    r"\mu = 0." + "5" * 19990,
])
def test_numbers_of_thousands_of_digits_are_one_line(builtin, latex):
    start = time.process_time()
    with pytest.raises(InputError, match=r"digits \(at most 100 are read\)"):
        _check(builtin, latex[:20_000])
    assert time.process_time() - start < 1


@pytest.mark.parametrize("latex, where, message", [
    (r"\mu = m", {"mu": STAGE}, r"where['mu']: write the symbol as in the equation, \mu"),
    (r"\mu = m", {"m" * 100_000: STAGE}, "a where key of 100,000 characters"),
    (r"\mu = \max_j \max_k r_j", {}, r"how far the maximum over k runs: give its limits "
                                     r"(\max_{k=0}^{n-1})"),
])
def test_equation_messages_say_what_is_wrong(builtin, latex, where, message):
    with pytest.raises(InputError) as error:
        _check(builtin, latex, where=where)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_value_too_large_is_not_called_infinite(builtin):
    (link,) = _check(builtin, r"\mu = 2^{2^{2^{100}}}").links
    assert link.status == "fails" and "too large to evaluate" in link.message
