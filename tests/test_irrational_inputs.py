"""Exact irrational inputs: ``"log(2)"``, ``"sqrt(2)/2"``, ``"pi/4"`` in matrix and vector
entries, read by a grammar of our own (``symformer/example/expression.py``).

References, independent of the engine:

* hand-derived values: softmax([ln 2, 0, 0]) = [1/2, 1/4, 1/4], the head's output
  sqrt(2)/4, the mse gradient of W_Q (2/3)(sqrt(2)/4 - ln 2)(sqrt(2) ln 2 / 8);
* mpmath at 110 digits for every constant's ball and the certified digits;
* a tree evaluator written here with mpmath for random expressions (hypothesis);
* an injection corpus: nothing runs, every text is refused with a one-line message.
"""

from __future__ import annotations

import builtins

import mpmath
import pytest
import sympy
from flint import arb, fmpq
from hypothesis import given, settings
from hypothesis import strategies as st

from symformer import derive
from symformer.blocks.backward import backward
from symformer.engine.arbmath import constant_balls, precision
from symformer.errors import InputError
from symformer.example.exact import ExactMatrix
from symformer.example.expression import Constant, ExpressionError, parse
from symformer.example.literals import exact_rational, exact_value
from symformer.example.loader import parse_example

LN2 = """
title = "softmax of ln 2, 0, 0"
tokens = ["a", "b", "c"]
vocab = ["a", "b", "c"]
embeddings = [[1], [0], [0]]
positional_encoding = "none"
scale = "none"
norm = "none"
residual = false

[[layer]]

[[layer.head]]
W_Q = [[1]]
W_K = [["ln(2)"]]
W_V = [["sqrt(2)/2"]]

[loss]
kind = "mse"
target = [["log(2)"], [0], ["1/2"]]
"""


@pytest.fixture(autouse=True)
def _digits():
    with mpmath.workdps(110):
        yield


def mp(ball: arb) -> mpmath.mpf:
    return mpmath.mpf(ball.mid().str(110, radius=False))


def contains(ball: arb, value: mpmath.mpf) -> bool:
    """The ball holds the mpmath value (up to mpmath's own 1e-100 error)."""
    return abs(mp(ball) - value) <= mpmath.mpf(ball.rad().str(20, radius=False)) + \
        mpmath.mpf(10) ** -100 * max(1, abs(value))


# -- the grammar: values -------------------------------------------------------------

@pytest.mark.parametrize("text, value", [
    ("3/2^4", fmpq(3, 16)), ("5/2^10", fmpq(5, 1024)), ("-7/2^3", fmpq(-7, 8)),
    ("1/3", fmpq(1, 3)), ("2^-1", fmpq(1, 2)), ("sqrt(9/4)", fmpq(3, 2)),
    ("8^(1/3)", fmpq(2)), ("exp(0)", fmpq(1)), ("log(1)", fmpq(0)), ("cos(0)", fmpq(1)),
    ("-2^2", fmpq(-4)), ("(1 + 2) * 3", fmpq(9)), ("1.5e2 - 50", fmpq(100)),
    ("2**3", fmpq(8)), (".5", fmpq(1, 2)),
])
def test_rational_expressions_fold_exactly(text, value):
    assert parse(text) == value
    assert exact_rational(text, "x") == value


@pytest.mark.parametrize("text, reference", [
    ("log(2)", lambda: mpmath.log(2)), ("ln(2)", lambda: mpmath.log(2)),
    ("-ln(2)", lambda: -mpmath.log(2)), ("sqrt(2)/2", lambda: mpmath.sqrt(2) / 2),
    ("pi/4", lambda: mpmath.pi / 4), ("exp(-1)", lambda: mpmath.exp(-1)),
    ("2*sin(1)", lambda: 2 * mpmath.sin(1)), ("tanh(1/2)^2", lambda: mpmath.tanh(0.5) ** 2),
    ("1/(1 + e)", lambda: 1 / (1 + mpmath.e)), ("2^(1/3)", lambda: mpmath.cbrt(2)),
    ("cos(pi/3) + sqrt(3)", lambda: mpmath.mpf(1) / 2 + mpmath.sqrt(3)),
])
def test_irrational_constants_against_mpmath(text, reference):
    value = exact_value(text, "x")
    assert isinstance(value, Constant)
    for bits in (64, 400):
        with precision(bits):
            ball = value.ball()
        assert contains(ball, reference())
    assert abs(sympy.N(value.sympy(), 60) - sympy.Float(str(reference()), 60)) < 1e-55


@pytest.mark.parametrize("text, message", [
    ("x", "unknown name 'x'"), ("__import__('os')", "unexpected character '_'"),
    ("1e999999", "exponent of 1e999999 is out of range"), ("(" * 25 + "1" + ")" * 25,
                                                          "nested more than 20 deep"),
    ("-" * 30 + "1", "nested more than 20 deep"), ("2e", "unexpected 'e'"),
    ("log(0)", "log of the non-positive number 0"), ("sqrt(-2)", "sqrt of the negative"),
    ("1/0", "division by zero"), ("1/(pi - pi)", "cannot certify"),
    ("sin(pi)", "cannot certify"), ("exp(300)", "out of range"),
    ("1e-60 * 1e-60", "out of range"), ("10^101", "out of range"),
    ("2^(pi)", "exponents must be rational"), ("(-2)^(1/2)", "positive base"),
    ("", "empty"), ("1 +", "unexpected end"), ("sin 1", "expected '('"),
    ("π", "unexpected character"), ("log(2", "expected ')'"), ("2^1001", "out of range"),
])
def test_refusals(text, message):
    with pytest.raises(ExpressionError, match=None) as error:
        parse(text)
    assert message in str(error.value)
    with pytest.raises(InputError) as located:
        exact_value(text, "f.toml: W_K[0][1]")
    text_of = str(located.value)
    assert text_of.startswith("f.toml: W_K[0][1]: ") and "\n" not in text_of


def test_rational_only_fields_refuse_irrationals():
    with pytest.raises(InputError,
                       match=r"f.toml: eps: 'log\(2\)' is not known to be rational"):
        exact_rational("log(2)", "f.toml: eps")
    base = LN2.replace('positional_encoding = "none"', 'positional_encoding = "none"\n'
                       'eps = "sqrt(2)"')
    with pytest.raises(InputError, match="test.toml.*eps.*not known to be rational"):
        parse_example(base, "test.toml")


INJECTIONS = [
    "__import__('os').system('touch PWNED')", "eval('1')", "exec", "lambda: 1",
    "open('/etc/passwd')", "().__class__", "1; import os", "${7*7}", "{{7*7}}",
    "Symbol('x')", "sympify('1')", "1 if 1 else 2", "[1]", "'1'", "1\n2", "sin(x)",
    "E", "I", "oo", "zoo", "nan", "Rational(1, 2)", "0x10", "1_0", "１", "log(2)#",
    "exp(exp(exp(10)))", "sqrt(" * 10 + "2" + ")" * 10 + "+" + "(" * 30,
]


@pytest.mark.parametrize("text", INJECTIONS)
def test_injection_corpus_runs_nothing(text, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    called = []
    for name in ("eval", "exec", "__import__", "open", "compile"):
        original = getattr(builtins, name)
        monkeypatch.setattr(builtins, name, lambda *a, _o=original, _n=name, **k: (
            called.append(_n), _o(*a, **k))[1])
    monkeypatch.setattr(sympy, "sympify", lambda *a, **k: called.append("sympify"))
    with pytest.raises(InputError) as error:
        exact_value(text, "f.toml: W_Q[0][0]")
    monkeypatch.undo()
    assert "\n" not in str(error.value) and str(error.value).startswith("f.toml: W_Q[0][0]")
    assert not list(tmp_path.iterdir())
    assert "eval" not in called and "exec" not in called and "sympify" not in called


# -- random expressions: round trip and values ----------------------------------------

_FUNCTIONS = {"sqrt": mpmath.sqrt, "exp": mpmath.exp, "log": mpmath.log, "sin": mpmath.sin,
              "cos": mpmath.cos, "tanh": mpmath.tanh}


def _binary(op: str):
    return {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
            "/": lambda a, b: a / b}[op]


def _expressions():
    """Pairs (text, a function computing its value with mpmath): the value is built
    beside the text, never by reading the text back."""
    leaves = st.one_of(
        st.integers(1, 9).map(lambda n: (str(n), lambda n=n: mpmath.mpf(n))),
        st.sampled_from([("pi", lambda: +mpmath.pi), ("e", lambda: +mpmath.e),
                         ("1/3", lambda: mpmath.mpf(1) / 3), ("0.5", lambda: mpmath.mpf(0.5))]))

    def extend(inner):
        return st.one_of(
            st.tuples(inner, st.sampled_from(["+", "-", "*", "/"]), inner).map(
                lambda t: (f"({t[0][0]}) {t[1]} ({t[2][0]})",
                           lambda t=t: _binary(t[1])(t[0][1](), t[2][1]()))),
            st.tuples(st.sampled_from(sorted(_FUNCTIONS)), inner).map(
                lambda t: (f"{t[0]}({t[1][0]})", lambda t=t: _FUNCTIONS[t[0]](t[1][1]()))),
            st.tuples(inner, st.sampled_from([("2", 2), ("-1", -1), ("(1/2)", 0.5)])).map(
                lambda t: (f"({t[0][0]})^{t[1][0]}",
                           lambda t=t: t[0][1]() ** mpmath.mpf(t[1][1]))),
            inner.map(lambda t: (f"-({t[0]})", lambda t=t: -t[1]())),
        )
    return st.recursive(leaves, extend, max_leaves=6)


def _mp_value(function) -> mpmath.mpf:
    value = function()
    if isinstance(value, mpmath.mpc) or not mpmath.isfinite(value):
        raise ValueError("undefined")
    return value


@settings(max_examples=60, deadline=None)
@given(_expressions())
def test_random_expressions_round_trip_and_match_mpmath(pair):
    text, function = pair
    try:
        value = parse(text)
    except ExpressionError as error:
        assert "\n" not in str(error)  # refused (log of a negative, out of range, ...)
        return
    try:
        reference = _mp_value(function)
    except (ValueError, ZeroDivisionError):
        pytest.fail(f"{text!r} was accepted but mpmath finds it undefined")
    if isinstance(value, fmpq):
        assert abs(mpmath.mpf(int(value.p)) / int(value.q) - reference) <= \
            mpmath.mpf(10) ** -90 * max(1, abs(reference))
        return
    assert parse(str(value)) == value  # the canonical text reads back to the same tree
    with precision(300):
        assert contains(value.ball(), reference)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="0123456789.+-*/^()eplnsiqrtxco_ ,'\"[]", max_size=40))
def test_random_text_is_read_or_refused(text):
    try:
        value = parse(text)
    except ExpressionError as error:
        assert "\n" not in str(error)
        return
    assert isinstance(value, (fmpq, Constant))


# -- an example with irrational entries -----------------------------------------------

def test_softmax_of_ln2_0_0_is_exact():
    g = derive(parse_example(LN2, "test.toml"))
    weights = g["layer1.head1.weights"]
    expected = [[sympy.Rational(1, 2), sympy.Rational(1, 4), sympy.Rational(1, 4)],
                [sympy.Rational(1, 3)] * 3, [sympy.Rational(1, 3)] * 3]
    for i in range(3):
        for j in range(3):
            assert sympy.simplify(weights.closed_form(i, j) - expected[i][j]) == 0
    assert weights.values(decimals=3)[0] == ["0.500", "0.250", "0.250"]
    output = g["layer1.head1.output"]
    assert sympy.simplify(output.closed_form(0, 0) - sympy.sqrt(2) / 4) == 0
    digits = output.values(significant=40)
    reference = [mpmath.sqrt(2) / 4, mpmath.sqrt(2) / 6, mpmath.sqrt(2) / 6]
    for row, value in zip(digits, reference):
        assert row[0] == mpmath.nstr(value, 40, min_fixed=-5, max_fixed=5, strip_zeros=False)


def test_gradient_through_irrational_weights_is_hand_derived():
    g = backward(derive(parse_example(LN2, "test.toml")))
    ln2, r2 = mpmath.log(2), mpmath.sqrt(2)
    expected = mpmath.mpf(2) / 3 * (r2 / 4 - ln2) * (r2 * ln2 / 8)
    ball = g.evaluate(400)["grad.layer1.head1.W_Q"][0][0]
    assert contains(ball, expected)
    loss = g.evaluate(400)["loss"][0][0]
    assert contains(loss, ((r2 / 4 - ln2) ** 2 + (r2 / 6) ** 2 + (r2 / 6 - 0.5) ** 2) / 3)


def test_irrational_matrix_balls_and_pickle():
    import pickle
    m = ExactMatrix([[fmpq(1, 2), exact_value("log(2)", "x")]])
    ((half, log2),) = m.entries()
    assert half == fmpq(1, 2) and not isinstance(log2, fmpq)  # log 2 stays a constant
    with precision(200):
        balls = constant_balls(m)
    assert balls[0][0] == arb(fmpq(1, 2)) and contains(balls[0][1], mpmath.log(2))
    copy = pickle.loads(pickle.dumps(m))
    assert copy == m and copy.sympy == sympy.Matrix([[sympy.Rational(1, 2), sympy.log(2)]])
