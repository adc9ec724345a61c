"""The polynomial zero proofs (``symformer.engine.polyzero``) behind ``structural_zero``.

Checked against independent references: SymPy's own polynomial expansion for the
sparse polynomial arithmetic, and a float64 forward and backward pass written from
the textbook formulas (``tests/float_reference.py``, ``tests/float_backward.py``) for
the proofs: an entry called zero must be zero in float64, and an entry the float pass
finds clearly non-zero must never be called zero, whichever strategy is tried.
"""

from __future__ import annotations

import numpy as np
import sympy
from float_backward import float_backward
from float_reference import float_forward
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_backward import with_mse_loss
from test_engine_random import examples

from symformer import derive
from symformer.blocks.backward import backward
from symformer.engine.polyzero import PolyProver, Variables, to_poly
from symformer.example import load_example
from symformer.example.loader import example_from_dict

X = sympy.symbols("x0:4")


@st.composite
def polynomials(draw, depth: int = 3) -> sympy.Expr:
    """Random sums, products and small powers of the symbols x0..x3 and rationals."""
    if depth == 0 or draw(st.booleans()):
        if draw(st.booleans()):
            return draw(st.sampled_from(X))
        return sympy.Rational(draw(st.integers(-3, 3)), draw(st.integers(1, 3)))
    kind = draw(st.sampled_from(["add", "mul", "pow"]))
    a = draw(polynomials(depth - 1))
    if kind == "pow":
        return a ** draw(st.integers(0, 3))
    b = draw(polynomials(depth - 1))
    return a + b if kind == "add" else a * b


@settings(max_examples=60, deadline=None)
@given(polynomials(), polynomials())
def test_polynomial_arithmetic_matches_sympy(a, b):
    variables = Variables()
    for expr in (a, b, a * b - b * a, (a + b) ** 2 - a ** 2 - 2 * a * b - b ** 2, a - b):
        p = to_poly(expr, variables.var, variables.var, limit=10**6)
        want = sympy.Poly(sympy.expand(expr), *X)
        got = sympy.Poly(sum((sympy.Rational(int(c.p), int(c.q))
                              * sympy.Mul(*[variables.exprs[v] ** e for v, e in m])
                              for m, c in p.items()), sympy.S.Zero), *X)
        assert got == want
        assert (not p) == (sympy.expand(expr) == 0)


def test_atoms_are_opaque_and_shared():
    variables = Variables()
    e = sympy.exp(X[0])
    p = to_poly(e * X[1] - X[1] * sympy.exp(X[0]), variables.var, variables.var)
    assert p == {}
    q = to_poly(e + sympy.exp(X[1]), variables.var, variables.var)
    assert len(q) == 2


def test_normal_form_keeps_factors_that_may_be_zero():
    """A relation x * r = 0 must not become r = 0 when x is a stage entry (x may be the
    zero); dividing by exp(...) or a reciprocal, never zero, is allowed."""
    g = backward(derive(load_example()))
    prover = PolyProver(g)
    x, y = g.symbols("layer1.head1.V")[0, 0], g.symbols("layer1.head1.V")[1, 0]
    r = to_poly(y + 1, prover.vars.var, prover.vars.var)
    with_entry = to_poly(x * (y + 1), prover.vars.var, prover.vars.var)
    with_exp = to_poly(sympy.exp(x) * (y + 1), prover.vars.var, prover.vars.var)
    with_root = to_poly((y + 1) / sympy.sqrt(x ** 2 + 1), prover.vars.var, prover.vars.var)
    assert prover._normal(with_entry) != prover._normal(r)
    assert prover._normal(with_exp) == prover._normal(r)
    assert prover._normal(with_root) == prover._normal(r)


def test_builtin_equal_values_zero_is_proved_by_canonical_polynomials():
    """grad.layer1.head2.weights[:, 0] = g . v_0: v_0's entries are equal (equal W_V
    columns) and g's opposite; the float pass agrees it is 0."""
    example = load_example()
    want = float_backward(example)["grad.layer1.head2.weights"]
    g = backward(derive(example))
    g.evaluate(163)
    prover = PolyProver(g)
    for i in range(4):
        assert abs(want[i, 0]) < 1e-12
        resolve = g.certification.resolved_local
        assert prover.with_canonical(resolve("grad.layer1.head2.weights", i, 0), resolve)
    for j in range(1, 4):  # the other columns are not 0: never called zero
        assert abs(want[0, j]) > 1e-6
        assert not g.structural_zero(g.local("grad.layer1.head2.weights")[0, j])


def test_causal_first_row_score_gradient_is_zero():
    """Under the causal mask row 0 attends to itself alone: alpha_00 = 1, so
    dL/ds_00 = alpha_00 (g_00 - alpha_00 g_00) = 0 (the float pass agrees)."""
    example = load_example()
    want = float_backward(example, causal=True)["grad.layer1.head1.scores"]
    g = backward(derive(example, causal=True))
    assert abs(want[0, 0]) < 1e-12
    assert g.structural_zero(g.local("grad.layer1.head1.scores")[0, 0])
    assert abs(want[1, 0]) > 1e-6
    assert not g.structural_zero(g.local("grad.layer1.head1.scores")[1, 0])
    assert g["grad.layer1.head1.scores"].values(decimals=3)[0][0] in ("0.000", "-0.000")


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(examples(), st.booleans(), st.data())
def test_called_zero_only_when_zero_in_float64(data, causal, draw):
    small = st.sampled_from(["0", "1", "-1", "1/2", "-1/2"])  # exact zeros are likely
    example = example_from_dict(with_mse_loss(data, lambda: draw.draw(small)), "random")
    g = backward(derive(example, causal=causal))
    g.evaluate(163)
    want = {**float_forward(example, causal=causal), **float_backward(example, causal=causal)}
    names = sorted(n for n in want if n in g and g[n].shape == want[n].shape)
    picks = [(n, i, j) for n in names for (i, j), v in np.ndenumerate(want[n])
             if abs(v) < 1e-9][:15]
    for _ in range(8):
        n = draw.draw(st.sampled_from(names))
        picks.append((n, draw.draw(st.integers(0, want[n].shape[0] - 1)),
                      draw.draw(st.integers(0, want[n].shape[1] - 1))))
    prover = PolyProver(g)
    for name, i, j in picks:
        value = want[name]
        scale = max(1.0, float(np.abs(value).max()))
        local = g.certification.resolved_local(name, i, j)
        for proved in (prover.with_canonical(local, g.certification.resolved_local),
                       prover.structural(local, g.certification.resolved_local),
                       g.structural_zero(local)):
            if proved:
                assert abs(value[i, j]) <= 1e-9 * scale, (name, i, j)
            if abs(value[i, j]) > 1e-6 * scale:
                assert not proved, (name, i, j)
