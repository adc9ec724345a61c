"""Exact dyadic weights: every finite float reads back as exactly itself (no torch)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from symformer.errors import InputError
from symformer.example.loader import parse_example
from symformer.example.numbers import exact_rational
from symformer.frameworks.weights import MAX_DECIMAL_CHARS, example_text, number_text


def _read_back(value: float) -> Fraction:
    q = exact_rational(number_text(value, "w"), "w")
    return Fraction(int(q.p), int(q.q))


@given(st.floats(allow_nan=False, allow_infinity=False, width=32))
def test_float32_reads_back_bit_for_bit(x: float) -> None:
    assert _read_back(x) == Fraction(x)  # Fraction(float) is the float's exact value
    assert np.float32(float(_read_back(x))) == np.float32(x)


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e50, max_value=1e50))
def test_float64_reads_back_bit_for_bit(x: float) -> None:
    if x != 0 and abs(x) < 1e-50:
        return
    assert _read_back(x) == Fraction(x)


@given(st.integers(0, 2**16 - 1))
def test_bfloat16_reads_back_bit_for_bit(bits: int) -> None:
    x = float(np.array([bits << 16], dtype=np.uint32).view(np.float32)[0])
    if not math.isfinite(x) or (x != 0 and not 1e-100 <= abs(x) <= 1e100):
        return
    assert _read_back(x) == Fraction(x)


def test_written_forms() -> None:
    assert number_text(0.5, "w") == "0.5"
    assert number_text(-3.0, "w") == -3
    assert number_text(0.1, "w") == "3602879701896397/2^55"  # not "0.1": that is 1/10
    assert number_text(float(np.float32(0.1)), "w") == "13421773/2^27"
    assert number_text(2.0**-20, "w") == "0.00000095367431640625"
    assert number_text(2.0**-40, "w") == "1/2^40"  # its decimal has 40 digits
    assert len(number_text(2.0**-21, "w")) <= MAX_DECIMAL_CHARS


def test_out_of_range_and_not_finite_are_one_line_errors() -> None:
    with pytest.raises(InputError, match="not finite"):
        number_text(math.inf, "layer 1 W_Q[0][1]")
    with pytest.raises(InputError, match=r"out of the range"):
        number_text(1e-200, "w")


def test_example_text_is_loaded_exactly_and_comments_are_safe() -> None:
    data = {"title": "t\nx", "tokens": ["a"], "vocab": ["a"],
            "embeddings": [[number_text(0.1, "e"), number_text(0.25, "e")]],
            "positional_encoding": "none", "norm": "none", "residual": False,
            "layer": [{"head": [{"W_Q": [[1, 0], [0, 1]], "W_K": [[1, 0], [0, 1]],
                                 "W_V": [[1, 0], [0, 1]]}]}]}
    text = example_text(data, ["from a\nsneaky = 1 path"])
    assert "\nsneaky" not in text
    e = parse_example(text)
    assert Fraction(int(e.embeddings[0, 0].p), int(e.embeddings[0, 0].q)) == Fraction(0.1)
    assert e.embeddings[0, 1] * 4 == 1
