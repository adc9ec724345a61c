"""An optimiser lesson: a scalar objective f(θ) in a strict grammar, trained exactly.

References, all independent of the engine:

* Adam and SGD written again with mpmath from their definitions (Kingma & Ba; PyTorch's
  ε outside the root, bias corrections 1 − β^t), on the objective written by hand as a
  Python function (not parsed), its gradient by hand-derived closed forms and by central
  finite differences;
* ``torch.optim.Adam`` in float64 (skipped without torch);
* SymPy's ``diff`` of the objective built by hand, against the rule-by-rule derivative;
* ``check`` on claims of every Adam stage (m, v, m̂, v̂, √v̂ + ε, the update, θ, f);
* hostile and malformed objectives: one-line errors, exit 2, nothing evaluated.
"""

from __future__ import annotations

from pathlib import Path

import mpmath
import pytest

from symformer import derive
from symformer.blocks.backward import with_gradients
from symformer.blocks.train import options, train
from symformer.cli import main
from symformer.errors import InputError
from symformer.example.loader import load_example, parse_example
from symformer.lazy import sympy

LESSON = Path(__file__).resolve().parents[1] / "symformer" / "examples" / "optimizer_lesson.toml"


@pytest.fixture(autouse=True)
def _precision():
    with mpmath.workdps(60):
        yield


def mp(ball) -> mpmath.mpf:
    return mpmath.mpf(ball.mid().str(60, radius=False))


def adam_by_hand(grad, theta0, lr, steps) -> list[dict[str, mpmath.mpf]]:
    """Each step's g, m, v, m-hat, v-hat, sqrt(v-hat) + eps, update and theta (t = 1 ...),
    with PyTorch's defaults beta1 = 0.9, beta2 = 0.999, eps = 1e-8."""
    beta1, beta2, eps = mpmath.mpf("0.9"), mpmath.mpf("0.999"), mpmath.mpf("1e-8")
    theta, m, v, out = mpmath.mpf(theta0), 0, 0, []
    for t in range(1, steps + 1):
        g = grad(theta)
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        mhat, vhat = m / (1 - beta1 ** t), v / (1 - beta2 ** t)
        den = mpmath.sqrt(vhat) + eps
        update = lr * mhat / den
        theta = theta - update
        out.append({"g": g, "m": m, "v": v, "mhat": mhat, "vhat": vhat, "den": den,
                    "update": update, "theta": theta})
    return out


def test_adam_three_steps_every_stage_matches_the_definition(tmp_path, capsys):
    """f(θ) = (θ − 3)², g = 2(θ − 3): every stage of the shipped lesson's three Adam
    steps, claimed at 12 decimals, is right; one claim off in the last place is wrong."""
    steps = adam_by_hand(lambda th: 2 * (th - 3), 1, mpmath.mpf(1) / 10, 3)
    claims = []
    names = {"m": "adam_m", "v": "adam_v", "mhat": "adam_mhat", "vhat": "adam_vhat",
             "den": "adam_denominator", "update": "adam_update"}
    for t, s in enumerate(steps, start=1):
        claims.append((f"grad.step{t - 1}.theta", s["g"]))
        claims.append((f"step{t}.theta", s["theta"]))
        claims.append((f"step{t}.loss", (s["theta"] - 3) ** 2))
        claims += [(f"step{t}.{stage}.theta", s[key]) for key, stage in names.items()]
    text = "".join(f'[[claim]]\nstage = "{stage}"\ndecimals = 12\n'
                   f'values = [[{mpmath.nstr(value, 30, min_fixed=-1, max_fixed=2)}]]\n\n'
                   for stage, value in claims)
    path = tmp_path / "claims.toml"
    path.write_text(text)
    status = main(["check", str(path), "--example", str(LESSON)])
    out = capsys.readouterr().out
    assert status == 0, out
    assert out.count("all right") == len(claims) == 27
    wrong = steps[1]["update"] + mpmath.mpf(10) ** -12
    path.write_text(f'[[claim]]\nstage = "step2.adam_update.theta"\ndecimals = 12\n'
                    f'values = [[{mpmath.nstr(wrong, 20)}]]\n')
    assert main(["check", str(path), "--example", str(LESSON)]) == 1
    assert "wrong" in capsys.readouterr().out


def test_the_gradient_changes_every_step():
    g = derive(load_example(LESSON))
    run = train(g, sympy.Rational(1, 10), 3, "adam", settings=options("adam"))
    balls = run.graph.evaluate(run.precision)
    grads = [mp(balls[f"grad.step{t}.theta"][0][0]) for t in range(3)]
    assert grads[0] == -4 and len(set(grads)) == 3 and grads[0] < grads[1] < grads[2] < 0


def test_adam_against_torch():
    torch = pytest.importorskip("torch")
    theta = torch.tensor([1.0], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([theta], lr=0.1)
    want = []
    for _ in range(5):
        opt.zero_grad()
        loss = (theta - 3) ** 2
        loss.sum().backward()
        opt.step()
        want.append(theta.item())
    g = derive(load_example(LESSON))
    run = train(g, sympy.Rational(1, 10), 5, "adam", settings=options("adam"))
    balls = run.graph.evaluate(run.precision)
    got = [float(mp(balls[f"step{t}.theta"][0][0])) for t in range(1, 6)]
    assert got == pytest.approx(want, abs=1e-12)


TWO = """
title = "two parameters"
[objective]
f = "exp(x/2) * sqrt(y^2 + 1) - log(2 + x^2) + tanh(x*y) + 3/(1 + y)^2"
x = "1/2"
y = -0.25
"""


def f_by_hand(x, y):
    return (mpmath.exp(x / 2) * mpmath.sqrt(y * y + 1) - mpmath.log(2 + x * x)
            + mpmath.tanh(x * y) + 3 / (1 + y) ** 2)


def test_sgd_on_two_parameters_matches_finite_differences():
    """Each SGD step's gradient row (∂f/∂x, ∂f/∂y) is the central difference of the
    objective written by hand; θ_t = θ_(t−1) − lr g."""
    g = derive(parse_example(TWO, "two.toml"))
    run = train(g, sympy.Rational(1, 4), 3, "sgd")
    balls = run.graph.evaluate(run.precision)
    x, y, h = mpmath.mpf(1) / 2, mpmath.mpf(-1) / 4, mpmath.mpf(10) ** -20
    for t in range(3):
        assert abs(mp(balls[f"step{t}.loss"][0][0]) - f_by_hand(x, y)) < 1e-25  # x, y: FD
        gx = (f_by_hand(x + h, y) - f_by_hand(x - h, y)) / (2 * h)
        gy = (f_by_hand(x, y + h) - f_by_hand(x, y - h)) / (2 * h)
        got = [mp(b) for b in balls[f"grad.step{t}.theta"][0]]
        assert abs(got[0] - gx) < 1e-30 and abs(got[1] - gy) < 1e-30, t
        x, y = x - gx / 4, y - gy / 4
        assert run.graph[f"step{t + 1}.theta"].cols == ("x", "y")


def test_rule_by_rule_derivative_equals_sympys_diff():
    """The derivative tree, evaluated exactly, is SymPy's diff of the same function built
    by hand (never from the text)."""
    from symformer.ops.calculus import EXACT
    from symformer.ops.objective import derivative, evaluate

    g = derive(parse_example(TWO, "two.toml"))
    tree = g["loss"].op.tree
    X, Y = sympy.symbols("X Y")
    f = (sympy.exp(X / 2) * sympy.sqrt(Y ** 2 + 1) - sympy.log(2 + X ** 2) + sympy.tanh(X * Y)
         + 3 / (1 + Y) ** 2)
    for name, var in (("x", X), ("y", Y)):
        mine = evaluate(derivative(tree, name), {"x": X, "y": Y}, EXACT)
        assert sympy.simplify(mine - sympy.diff(f, var)) == 0, name


def test_backward_of_the_lesson_is_the_hand_gradient():
    g = with_gradients(derive(load_example(LESSON)))
    assert g["grad.theta"].rounded(decimals=6)[0][0].digits == -4_000_000
    assert g["loss"].op.symbol.text == "f"


@pytest.mark.parametrize("f, message", [
    ('__import__(\\"os\\").system(\\"true\\")', "cannot read '__import__"),
    ("theta.real", "cannot read"),
    ("sin(theta)", "'sin' is not a parameter"),
    ("theta^theta", "exponent is an exact number"),
    ("theta^1000", "too large"),
    ("x + theta", "'x' is not a parameter"),
    ("theta +", "expected"),
    ("(" * 30 + "theta" + ")" * 30, "nests more than"),
    ("theta; 1", "cannot read"),
    ("", "objective as text"),
])
def test_hostile_or_malformed_objectives_are_one_line_errors(f, message, tmp_path, capsys):
    text = f'[objective]\nf = "{f}"\ntheta = 1\n'
    with pytest.raises(InputError) as err:
        parse_example(text, "o.toml")
    assert message in str(err.value) and "\n" not in str(err.value), str(err.value)
    path = tmp_path / "o.toml"
    path.write_text(text)
    assert main(["derive", str(path)]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("text, message", [
    ('[objective]\nf = "theta^2"\ntheta = 1\nphi = 2\n', "phi is not used"),
    ('[objective]\nf = "theta^2"\n', "starting value"),
    ('[objective]\ntheta = 1\n', "one of the two"),
    ('[objective]\nf = "theta^2"\ntheta = 1\ntokens = ["a"]\n', "tokens"),
    ('tokens = ["a"]\n[objective]\nf = "theta^2"\ntheta = 1\n', "tokens has no meaning"),
    ('[objective]\nf = "theta^2"\ntheta = "abc"\n', "theta"),
])
def test_bad_objective_tables(text, message):
    with pytest.raises(InputError) as err:
        parse_example(text, "o.toml")
    assert message in str(err.value), str(err.value)


GIVEN = """
title = "Adam with given gradients"
[objective]
gradients = [[-4, 1], [2, "1/2"], [-1, 0]]   # g_1, g_2, g_3, one entry per parameter
w = 1
b = 0
[train]
optimizer = "adam"
lr = "1/10"
steps = 3
"""


def test_given_gradients_adam_against_the_definition_and_torch(tmp_path, capsys):
    """Each step reads its own given gradient: the moments, m̂, v̂, the update and the
    weights are Adam's (mpmath, from the definition) and torch.optim.Adam's with the
    same gradients set by hand."""
    grads = [[mpmath.mpf(-4), mpmath.mpf(1)], [mpmath.mpf(2), mpmath.mpf(1) / 2],
             [mpmath.mpf(-1), mpmath.mpf(0)]]
    columns = []
    for k, start in enumerate((1, 0)):
        steps = iter(g[k] for g in grads)
        columns.append(adam_by_hand(lambda _th, s=steps: next(s), start,
                                    mpmath.mpf(1) / 10, 3))
    path = tmp_path / "given.toml"
    path.write_text(GIVEN)
    claims = []
    for t in range(1, 4):
        for stage, key in (("grad.step{}.theta", "g"), ("step{}.theta", "theta"),
                           ("step{}.adam_mhat.theta", "mhat"),
                           ("step{}.adam_denominator.theta", "den"),
                           ("step{}.adam_update.theta", "update")):
            name = stage.format(t - 1 if key == "g" else t)
            row = ", ".join(mpmath.nstr(c[t - 1][key], 25, min_fixed=-1, max_fixed=2)
                            for c in columns)
            claims.append(f'[[claim]]\nstage = "{name}"\ndecimals = 12\nvalues = [[{row}]]\n')
    (tmp_path / "c.toml").write_text("\n".join(claims))
    assert main(["check", str(tmp_path / "c.toml"), "--example", str(path)]) == 0
    assert capsys.readouterr().out.count("all right") == 15
    torch = pytest.importorskip("torch")
    theta = torch.tensor([1.0, 0.0], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([theta], lr=0.1)
    g = derive(parse_example(GIVEN, "given.toml"))
    run = train(g, sympy.Rational(1, 10), 3, "adam", settings=options("adam"))
    balls = run.graph.evaluate(run.precision)
    for t, grad in enumerate(grads, start=1):
        theta.grad = torch.tensor([float(v) for v in grad], dtype=torch.float64)
        opt.step()
        got = [float(mp(b)) for b in balls[f"step{t}.theta"][0]]
        assert got == pytest.approx(theta.tolist(), abs=1e-12), t


@pytest.mark.parametrize("table, message", [
    ('f = "w^2"\ngradients = [[1]]\nw = 1\n', "one of the two"),
    ('gradients = [[1, 2]]\nw = 1\n', "expected 1"),
    ('gradients = []\nw = 1\n', "one gradient per step"),
    ('gradients = [["x"]]\nw = 1\n', "gradients[0]"),
])
def test_bad_given_gradients(table, message):
    with pytest.raises(InputError) as err:
        parse_example("[objective]\n" + table, "o.toml")
    assert message in str(err.value) and "\n" not in str(err.value), str(err.value)


@pytest.mark.parametrize("f, message", [
    ("((theta^100)^100)^100", "multiply to more than"),
    ("exp(exp(exp(theta + 2)))", "exceeds 1e100"),
    ("log(theta - 1)", "log of a number that is not positive"),
    ("1/(theta - 1)", "divides by 0"),
    ("(theta - 2)^(1/2)", "fractional power"),
])
def test_objectives_that_cannot_be_printed_are_refused(f, message):
    """Limits, as for the example's numbers: nothing is computed that cannot be printed
    (2^(10^6) exactly, e^(e^(e^10))), and a log, root or division undefined at the start
    is a one-line error at load."""
    with pytest.raises(InputError) as err:
        parse_example(f'[objective]\nf = "{f}"\ntheta = 1\n', "o.toml")
    assert message in str(err.value), str(err.value)


def test_the_parameters_are_claimable_and_labelled_by_name(tmp_path, capsys):
    """The weight address ``theta`` (the example's starting values) and its gradient
    carry the parameters' names as columns."""
    g = with_gradients(derive(parse_example(TWO, "two.toml")))
    assert g["grad.theta"].cols == ("x", "y")
    path = tmp_path / "two.toml"
    path.write_text(TWO + '\n[[claim]]\nstage = "theta"\nvalues = [[0.5, -0.4]]\n'
                    'decimals = 1\n')
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "column 'y'" in out and "claimed -0.4" in out, out


def test_train_write_puts_the_trained_parameters_back_by_name(tmp_path):
    """``train --write``: the trained θ goes back into [objective] under each name (exact
    when rational: one SGD step of f = (θ − 3)² from 1 with lr 1/4 gives 2)."""
    out = tmp_path / "trained.toml"
    assert main(["train", str(LESSON), "--optimizer", "sgd", "--lr", "1/4", "--steps", "1",
                 "--write", str(out), "--quiet"]) == 0
    written = parse_example(out.read_text(), str(out))
    assert dict(written.objective.starts) == {"theta": 2}
    assert "theta = [" not in out.read_text()  # nothing at the top level


@pytest.mark.parametrize("argv", [["figures", "--out", "OUT"], ["prove"],
                                  ["exercise", "--variants", "1", "--seed", "1", "--out",
                                   "OUT"], ["export", "--out", "OUT"],
                                  ["slides", "--out", "OUT"], ["trace", "--token", "0"]])
def test_commands_without_tokens_say_so_in_one_line(tmp_path, capsys, argv):
    """figures, prove, exercise, export, slides and trace follow tokens (notes about the
    lesson's one "token" were worded for a Transformer it is not); on an optimiser
    lesson each is one line naming the file and what to run instead."""
    from symformer.cli import main
    from symformer.example import load_example

    source = load_example("optimizer_lesson").source
    argv = [a.replace("OUT", str(tmp_path / "out")) for a in argv]
    assert main([argv[0], source, *argv[1:]]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "optimizer_lesson.toml: an optimiser lesson ([objective]) has no tokens" in err
    assert "symformer train FILE --stage 'step*'" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("f, theta, lr, message", [
    # f'(2) = 101 - 1/(1/10)^2 = 1: theta_1 = 2 - 1/10 = 19/10, the pole (decided exactly:
    # no ball at any precision excludes 0 there)
    ("101*theta + 1/(theta - 19/10)", "2", "1/10", "division by zero at step 1 (step1.loss)"),
    # f'(2) = 2 + 1 = 3: theta_1 = -1, log(-2)
    ("theta^2/2 + log(theta - 1)", "2", "1", "log of a negative number at step 1"),
    # f'(2) = 2 + 1/(2 sqrt(1/2)) > 2: theta_1 < 0, sqrt(theta_1 - 3/2)
    ("theta^2/2 + sqrt(theta - 3/2)", "2", "1", "square root of a negative number at step 1"),
    # f'(1/4) = 1 + 1/(2 * 1/2) = 2: theta_1 = 0, where f is 0 but f' = 1 + 1/(2 sqrt(0))
    ("theta + sqrt(theta)", "1/4", "1/8", "division by zero at step 1 (grad.step1.theta)"),
])
def test_a_later_step_outside_the_domain_is_named(f, theta, lr, message, tmp_path, capsys):
    """A step that lands on a pole (or a log/root of a negative number): one line naming
    the step and what happens there, not an 'overflow' after the whole precision ladder."""
    path = tmp_path / "o.toml"
    path.write_text(f'[objective]\nf = "{f}"\ntheta = "{theta}"\n\n'
                    f'[train]\noptimizer = "sgd"\nlr = "{lr}"\nsteps = 3\n')
    assert main(["train", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and "overflow" not in err and err.count("\n") == 1, err


def test_a_loss_of_9600_digits_is_printed_exactly(tmp_path, capsys):
    """f = (theta^10)^10 from theta = 1, lr 1/10: theta_1 = 1 - 10 = -9, theta_2 = -9 +
    10 * 9^99, and the loss theta_2^100 has 9,600 digits (Python's str refuses more than
    4,300: an internal error before); the printed loss is that integer exactly."""
    import sys

    path = tmp_path / "o.toml"
    path.write_text('[objective]\nf = "(theta^10)^10"\ntheta = 1\n\n'
                    '[train]\noptimizer = "sgd"\nlr = "1/10"\nsteps = 2\n')
    assert main(["train", str(path)]) == 0
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        expected = str((-9 + 10 * 9 ** 99) ** 100)
    finally:
        sys.set_int_max_str_digits(limit)
    assert len(expected) > 9000
    assert f"step 2  loss {expected}.000" in capsys.readouterr().out
