"""The number grammar's exact folds, its messages and its certified limits.

References: hand-derived values (``exp(log(2)) = 2``, ``(2^(1/3))^6 = 4``), mpmath at
60 digits for the irrational values near the limits (``log(1e-100) + 231``), and the
README's "Limits" table for what stays refused.
"""

from __future__ import annotations

import re

import mpmath
import pytest
from flint import arb, fmpq

from symformer.arbcontext import precision
from symformer.cli import main
from symformer.errors import InputError
from symformer.example.expression import Constant
from symformer.example.literals import exact_rational, exact_value

#: mpmath's digits for the references (set per test: other modules set mp.dps globally).
DIGITS = 60


@pytest.mark.parametrize(("text", "value"), [
    ("exp(log(2))", fmpq(2)),
    ("sqrt(2)^2", fmpq(2)),
    ("sqrt(2)**4", fmpq(4)),
    ("(2^(1/3))^6", fmpq(4)),
    ("(3^(1/2))^(-2)", fmpq(1, 3)),
    ("log(exp(3/4))", fmpq(3, 4)),
    ("ln(exp(-5))", fmpq(-5)),
    ("sqrt(exp(log(4)))", fmpq(2)),
    ("3*exp(log(2)) + 1", fmpq(7)),
    ("exp(log(1e-100))", fmpq(1, 10**100)),
    ("exp(log(2)) - 2", fmpq(0)),
    ("(-2)^3", fmpq(-8)),
])
def test_exact_identities_give_rationals(text, value):
    assert exact_value(text, "x") == value and exact_rational(text, "x") == value


@pytest.mark.parametrize("text", ["sqrt(2)^3", "sqrt(2)*sqrt(2) + 1", "exp(log(2)) + pi",
                                  "log(3)", "exp(1)"])
def test_irrational_or_unproved_values_stay_constants(text):
    value = exact_value(text, "x")
    assert isinstance(value, Constant)
    with precision(200):
        ball = value.ball()
    want = mpmath.mpf(mpmath.nstr(eval_mp(text), 60))
    assert abs(mpmath.mpf(ball.mid().str(60, radius=False)) - want) < mpmath.mpf(10) ** -50


@pytest.fixture(autouse=True)
def mp_digits():
    with mpmath.workdps(DIGITS):
        yield


def eval_mp(text: str) -> mpmath.mpf:
    """``text`` evaluated by mpmath (the test's own reading of the grammar)."""
    names = {"sqrt": mpmath.sqrt, "exp": mpmath.exp, "log": mpmath.log, "ln": mpmath.log,
             "pi": mpmath.pi, "mpf": mpmath.mpf}
    literals = re.sub(r"[0-9.]+(?:e[-+]?[0-9]+)?", lambda m: f"mpf('{m[0]}')", text)
    return eval(literals.replace("^", "**"), {"__builtins__": {}}, names)  # noqa: S307


@pytest.mark.parametrize("text", ["sqrt(2)*sqrt(2)", "log(2)", "log(1e-100)+231", "pi/4"])
def test_a_rational_field_says_what_is_known_not_irrational(text):
    with pytest.raises(InputError) as caught:
        exact_rational(text, "f.toml: eps")
    message = str(caught.value)
    assert message.startswith(f"f.toml: eps: {text!r} is not known to be rational")
    assert "irrational" not in message and "\n" not in message


@pytest.mark.parametrize(("text", "digits"), [
    ("log(1e-100)+231", "0.74149070059543159820085453156357924"),
    ("log(1e-100)", "-230.25850929940456840179914546843642"),
    ("1e-100*pi", "3.14159265358979323846264338327950288e-100"),
    ("log(1e100) - 230", "0.25850929940456840179914546843642076"),
    ("sqrt(1e-100)*sqrt(2)", "1.41421356237309504880168872420969807e-50"),
])
def test_values_at_the_magnitude_limits_are_certified(text, digits):
    value = exact_value(text, "x")
    assert isinstance(value, Constant)
    want = eval_mp(text)
    assert mpmath.almosteq(want, mpmath.mpf(digits), rel_eps=mpmath.mpf(10) ** -34)
    with precision(256):
        ball = value.ball()
    assert ball.rad() < abs(ball.mid()) * arb(10) ** -60
    assert abs(mpmath.mpf(ball.mid().str(70, radius=False)) - want) <= abs(want) * 1e-55


@pytest.mark.parametrize(("text", "message"), [
    ("exp(log(1e-101))", "out of range"),   # the literal itself is out of range
    ("log(exp(300))", "out of range"),      # exp(300) is a part beyond 1e100
    ("1e-100/2", "out of range"),
    ("exp(log(1e-100))/2", "out of range"),
    ("sin(pi)", "cannot certify"),          # may be 0: write 0
    ("sqrt(2)*sqrt(2) - 2", "cannot certify"),
    ("1/(exp(log(2)) - 2)", "division by zero"),
])
def test_the_documented_limits_still_hold(text, message):
    with pytest.raises(InputError, match=message):
        exact_value(text, "x")


def test_train_takes_an_exact_two_written_as_an_expression(capsys):
    assert main(["train", "--lr", "exp(log(2))", "--steps", "1"]) == 0
    assert "lr = 2 (sgd)" in capsys.readouterr().out
    assert main(["train", "--lr", "log(1e-100)+231", "--steps", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "is not known to be rational" in err
    assert "certify" not in err
