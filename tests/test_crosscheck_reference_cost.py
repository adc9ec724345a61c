"""The NumPy reference of ``crosscheck FILE`` reads a weights file's floats as the floats
they are: no exact rational is built per weight (that made ``crosscheck`` of an imported
model cost 5-10 times its ``derive``), and every float is the one ``float()`` of the exact
value rounded to the dtype would give."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from symformer.example.dyadic import DyadicMatrix
from symformer.ops.base import matrix

FLOATS32 = arrays(np.float32, st.tuples(st.integers(1, 4), st.integers(1, 4)),
                  elements=st.floats(width=32, allow_nan=False, allow_infinity=False,
                                                 allow_subnormal=False))


@settings(max_examples=40, deadline=None)
@given(FLOATS32, st.sampled_from([np.float64, np.float32, np.float16]))
def test_weights_file_floats_become_the_reference_floats_without_rationals(
        array, dtype) -> None:
    weights = DyadicMatrix(array, "w")

    def no_rational(*_a):  # the slow path: a SymPy Rational per entry
        raise AssertionError("a Rational was built for a weight")

    with pytest.MonkeyPatch.context() as patch, np.errstate(over="ignore"):  # to float16
        patch.setattr(DyadicMatrix, "_rational_at", no_rational)
        got = matrix(weights, dtype)
    # independent: each entry's exact rational (Fraction), then rounded to dtype
    with np.errstate(over="ignore"):
        want = np.array([[float(Fraction(float(v))) for v in row] for row in array]
                        ).astype(dtype)
    assert got.dtype == np.dtype(dtype) and got.shape == array.shape
    assert np.array_equal(got, want, equal_nan=False)
    assert weights.fresh()  # no SymPy matrix built either


def test_exact_values_are_compared_at_one_shared_precision_unless_too_wide(
        monkeypatch) -> None:
    """The exact values are evaluated once, at the precision the next token is decided
    at (the same cache), and at a finer one only when a stage's balls are not far
    narrower than its largest magnitude."""
    import symformer
    from symformer.verify import crosscheck as module

    g = symformer.derive(symformer.load_example("gpt2_style"))
    exact, bits = module.exact_values(g)
    assert bits == module.BITS and exact is g.evaluate(module.BITS)
    for rows in exact.values():  # independently: each radius against 2^-80 of the scale
        balls = [x for row in rows for x in row if x is not None]
        scale = max(abs(float(x.mid())) for x in balls)
        assert all(float(x.rad()) <= 2.0 ** -80 * scale for x in balls)
    monkeypatch.setattr(module, "_NARROW", 0.0)  # no ball narrow enough: the finest
    assert module.exact_values(g)[1] == max(module._FINER)


def test_crosscheck_is_bounded_by_its_own_estimate(tmp_path) -> None:
    """A 256-wide imported model: its forward pass counts about 3.2 M multiply-adds, but
    a crosscheck costs well under a second (products with constant weights are cheap):
    a limit between the two admits it; a limit under the estimate refuses it in one line
    naming the command."""
    from model_dirs import gpt2_config, gpt2_dir, gpt2_tensors

    from symformer.blocks.cost import estimate
    from symformer.blocks.work import estimated_work
    from symformer.conventions import Convention
    from symformer.errors import InputError
    from symformer.frameworks import from_pretrained
    from symformer.verify.crosscheck import crosscheck

    folder = gpt2_dir(tmp_path / "m", config=gpt2_config(n_embd=256, n_head=2),
                      tensors=gpt2_tensors(d=256))
    example = from_pretrained(folder, [1, 2, 3, 4], max_work=0)
    work = estimate("crosscheck", example)
    assert work < estimated_work(example)
    rows = crosscheck(example, Convention(), max_work=work)
    assert rows and all(r.ok for r in rows)
    with pytest.raises(InputError, match="`symformer crosscheck` on this example is estimated at"):
        crosscheck(example, Convention(), max_work=work - 1)
