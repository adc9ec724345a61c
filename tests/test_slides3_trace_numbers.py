"""The terminal trace prints numbers as the notes, slides and HTML do (issue 39): a
nonzero value below 10^-4 in scientific notation with exactly its printed digits, an
exact short decimal in full, an exact 0 as 0 (one formatter,
:mod:`symformer.trace.number_markup`, for the HTML's text and the terminal's).

The built-in example's backward trace is checked against an independent float64
computation of the gradient at Add & Norm 1's variance (tests/float_backward.py and
tests/float_reference.py, the LayerNorm formula written here), -4.792 × 10^-8.
"""

from __future__ import annotations

import re
from decimal import Decimal

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from symformer import derive, load_example
from symformer.trace import trace_token
from symformer.trace.number_markup import number_text, numbers_text
from symformer.trace.render_text import render_text

_SUPERSCRIPTS = dict(zip("\u207b\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079",
                         "-0123456789"))
#: A printed decimal below 10^-4 in fixed point (what must not reach the terminal).
FIXED_TINY = re.compile(r"(?<![\d.])-?0\.0000\d*")


def parsed(text: str) -> Decimal:
    """The value of a number as printed: ``-2.859×10⁻⁸``, ``10⁻⁵``, ``0.3125``."""
    sign = -1 if text.startswith("-") else 1
    body = text.lstrip("-")
    if "10" in body and any(c in _SUPERSCRIPTS for c in body):
        mantissa, _, power = body.rpartition("10")
        exponent = int("".join(_SUPERSCRIPTS[c] for c in power))
        value = Decimal(mantissa.rstrip("\u00d7") or "1").scaleb(exponent)
    else:
        value = Decimal(body)
    return sign * value


@given(st.integers(-10**6, 10**6), st.integers(0, 14))
def test_number_text_keeps_the_value_and_its_digits(mantissa, places):
    text = format(Decimal(mantissa).scaleb(-places), "f")
    shown = number_text(text, "-")
    assert parsed(shown) == Decimal(text)
    small = mantissa != 0 and abs(Decimal(text)) < Decimal("0.0001")
    assert any(c in _SUPERSCRIPTS for c in shown) == small
    if not small:
        assert shown == text  # as printed: 0.3125 stays 0.3125, 0 stays 0
    else:  # every printed digit kept, none added
        assert shown.split("\u00d7")[0].lstrip("-").replace(".", "") in (
            text.lstrip("-").replace(".", "").lstrip("0"), "10")


def test_numbers_text_rewrites_only_decimals():
    line = "∂L/∂y′_3·(r′_3 - μ′))/((σ′² + 0.00001)^(3/2)·2) ≈ -0.000000009240 (exact: 0.3125)"
    assert numbers_text(line) == ("∂L/∂y′_3·(r′_3 - μ′))/((σ′² + 10⁻⁵)^(3/2)·2) ≈ "
                                  "-9.240×10⁻⁹ (exact: 0.3125)")
    assert number_text("-inf", "-") == "-\u221e" and number_text("-inf") == "\u2212\u221e"


def test_terminal_backward_trace_in_scientific_notation():
    from tests.float_backward import float_backward
    from tests.float_reference import as_float, float_forward

    example = load_example()
    text = render_text(trace_token(derive(example), 1, backward=True))
    assert not FIXED_TINY.search(text), FIXED_TINY.search(text)
    step = text.split("Add & Norm 1 > Gradient of the loss at the variance")[1].split("\n[")[0]
    value = step.splitlines()[4].strip()
    assert value == "-4.792\u00d710\u207b\u2078"
    # independent: ∂L/∂σ² = -Σ_j γ_j ∂L/∂y_j (r_j - μ) / (2 (σ² + ε)^{3/2}), float64
    forward, backward = float_forward(example), float_backward(example)
    layer = example.layers[0]
    r = forward["layer1.add_norm1.sum"]
    mu = r.mean(axis=1, keepdims=True)
    var = ((r - mu) ** 2).mean(axis=1)
    gamma = np.asarray(as_float(layer.gamma_1)).reshape(1, -1)
    want = -(gamma * backward["grad.layer1.add_norm1"] * (r - mu)).sum(axis=1) \
        / (2 * (var + float(layer.eps)) ** 1.5)
    assert float(parsed(value)) == float(f"{want[1]:.3e}")
    assert "10\u207b\u2076" in step  # ε = 10^-6 in the line, as the notes print it
