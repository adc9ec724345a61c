"""``symformer train`` against independent references.

* one SGD step on a one-token, d = 2 example, the updated weights and the loss
  derived by hand (exact rationals);
* a few SGD and Adam steps against a float64 training loop written here (NumPy,
  the textbook gradients of ``float_backward.py``, the textbook Adam update);
* the step where the loss does not decrease (too large a learning rate), and an
  exactly equal loss;
* ``--write``: the rational case written and read back, the non-rational case
  rounded (which the file says); bad input: one line, exit 2.
"""

from __future__ import annotations

import dataclasses
import io
from fractions import Fraction

import numpy as np
import pytest
import sympy
from float_backward import float_backward
from float_reference import float_forward
from test_backward import ONE_TOKEN

from symformer import derive
from symformer.blocks.backward import backward
from symformer.blocks.train import rational_weights, train
from symformer.cli import main
from symformer.cli._progress import Progress
from symformer.example import load_example
from symformer.example.loader import parse_example
from symformer.example.write import updated_example

R = sympy.Rational


def exact(g, name: str) -> list[list[Fraction | None]]:
    rows, cols = g[name].shape
    return [[g.exact_rational(name, i, j) for j in range(cols)] for i in range(rows)]


def certified(g, name: str, digits: int = 25) -> np.ndarray:
    return np.array([[float(Fraction(v)) for v in row]
                     for row in g[name].values(significant=digits)])


def agrees(g, name: str, want: Fraction, digits: int = 30) -> bool:
    """The 1 x 1 stage, certified to ``digits`` significant digits, is ``want``'s rounding."""
    got = Fraction(g[name].values(significant=digits)[0][0])
    return abs(got - want) <= Fraction(1, 10 ** digits)


# -- by hand ---------------------------------------------------------------------------

def hand_loss(lr: sympy.Rational) -> sympy.Expr:
    """Step 1's loss on the one-token example after one SGD step of ``lr``, by hand.

    test_backward's one-token example: x = (2, -1), LN1 (gamma 2, eps 7/4) normalises
    it to n1 = (3/4, -3/4) (D = 2); the attention adds 0 (W_O = 0) and the FFN adds
    b_2 (its unit is clipped); LN2 (gamma 1) gives z = (3/4, -3/4), L = 9/16.  The
    non-zero gradients: b_2 and beta_1 (21/128, -21/128), gamma_1 (63/512, 63/512),
    gamma_2 (9/16, 9/16), beta_2 (3/4, -3/4), and the embedding row e = x: with
    a = (x_0 - x_1)/2, n1 = (a, -a)/sqrt(a^2 + 7/4), dn1_0/da = (7/4)/2^3 = 7/32 and
    dL/dn1 = gamma_1 dL/dy1 = (21/64, -21/64), so dL/da = 2 (21/64)(7/32) = 147/1024
    and dL/de = (147/2048, -147/2048); every other weight's is exactly 0 (the FFN's
    unit is clipped, V and W_O are 0, a one-token softmax is 1).  After the step
    a' = 3/2 - 147 lr/2048, n1' = a' / sqrt(a'^2 + 7/4), and every row is
    sigma (1, -1): sigma = gamma_1' n1' + beta_1' + b_2' with gamma_1' = 2 - 63 lr/512,
    beta_1' = b_2' = -21 lr/128; LN2 gives n2 = sigma / sqrt(sigma^2 + 7/4),
    z = (gamma_2' n2 + beta_2') (1, -1) with gamma_2' = 1 - 9 lr/16, beta_2' = -3 lr/4,
    and L = z_0^2.
    """
    a = R(3, 2) - 147 * lr / 2048
    n1 = a / sympy.sqrt(a ** 2 + R(7, 4))
    sigma = (2 - 63 * lr / 512) * n1 - 2 * 21 * lr / 128
    n2 = sigma / sympy.sqrt(sigma ** 2 + R(7, 4))
    return ((1 - 9 * lr / 16) * n2 - 3 * lr / 4) ** 2


def test_one_sgd_step_derived_by_hand():
    lr = R(8, 7)
    t = train(derive(parse_example(ONE_TOKEN)), lr, 1)
    g = t.graph
    assert exact(g, "step0.loss") == [[Fraction(9, 16)]]
    want = Fraction(str(sympy.N(hand_loss(lr), 50)))
    assert agrees(g, "step1.loss", want, digits=40)
    assert want < Fraction(9, 16)
    # the updated weights, exactly: W - (8/7) dL/dW
    assert exact(g, "step1.layer1.b_2") == [[Fraction(-3, 16), Fraction(3, 16)]]
    assert exact(g, "grad.step0.layer1.b_2") == [[Fraction(21, 128), Fraction(-21, 128)]]
    weights, irrational = rational_weights(t)
    assert irrational is None
    F = Fraction
    assert weights["layer1.add_norm1.gamma"] == sympy.Matrix([[R(119, 64), R(119, 64)]])
    assert weights["layer1.add_norm1.beta"] == sympy.Matrix([[R(-3, 16), R(3, 16)]])
    assert weights["layer1.add_norm2.gamma"] == sympy.Matrix([[R(5, 14), R(5, 14)]])
    assert weights["layer1.add_norm2.beta"] == sympy.Matrix([[R(-6, 7), R(6, 7)]])
    assert weights["layer1.W_1"] == sympy.Matrix([[0], [0]])  # gradient exactly 0
    assert weights["layer1.b_1"] == sympy.Matrix([[-1]])
    # the embedding row: e - (8/7)(147/2048, -147/2048) = e - (21/256, -21/256)
    assert weights["embedding_table"] == sympy.Matrix([[R(491, 256), R(-235, 256)]])
    assert exact(g, "step1.layer1.add_norm2.beta") == [[F(-6, 7), F(6, 7)]]
    # the step's local formula reads the step before's stages by name
    formula = g.local("step1.layer1.b_2")[0, 0]
    assert {str(s) for s in formula.free_symbols} == {
        "step0.layer1.b_2[0,0]", "grad.step0.layer1.b_2[0,0]"}


def test_write_round_trip(tmp_path, capsys):
    source = tmp_path / "one.toml"
    source.write_text(ONE_TOKEN)
    out = tmp_path / "trained.toml"
    assert main(["train", str(source), "--lr", "8/7", "--steps", "1", "--write",
                 str(out)]) == 0
    want = Fraction(str(sympy.N(hand_loss(R(8, 7)), 30)))
    assert f"step 1  loss {round(float(want), 3):.3f}" in capsys.readouterr().out
    written = load_example(out)
    assert written.layers[0].b_2 == sympy.Matrix([[R(-3, 16), R(3, 16)]])
    assert written.layers[0].gamma_1 == sympy.Matrix([[R(119, 64), R(119, 64)]])
    assert written.layers[0].beta_2 == sympy.Matrix([[R(-6, 7), R(6, 7)]])
    assert written.layers[0].heads[0].W_Q == sympy.Matrix([[0], [0]])
    assert written.layers[0].eps == R(7, 4)
    assert written.embeddings == sympy.Matrix([[R(491, 256), R(-235, 256)]])
    g = backward(derive(written))
    assert agrees(g, "loss", want, digits=25)


@pytest.mark.parametrize("name", [None, "encoder_decoder", "course_module"])
def test_the_toml_writer_keeps_every_number(name):
    # what --write saves, with no weight replaced, loads as the same example
    example = load_example(name)
    again = parse_example(updated_example(example, {}), source="again")
    for field in ("tokens", "vocab", "embeddings", "layers", "decoder", "lm_head"):
        assert getattr(again, field) == getattr(example, field), field
    assert (again.loss is None) == (example.loss is None)


def test_write_rounds_when_a_weight_is_not_rational(tmp_path, capsys):
    out = tmp_path / "trained.toml"
    assert main(["train", "--lr", "0.1", "--steps", "1", "--write", str(out)]) == 0
    first = out.read_text().splitlines()[0]
    assert first.startswith("# symformer train:") and "rounding to 3 decimals" in first
    assert "not rational" in first and "step1." in first
    load_example(out)  # a valid example


# -- the step where the loss does not decrease ----------------------------------------

def test_too_large_a_learning_rate_is_reported(tmp_path, capsys):
    # lr = 32 overshoots: gamma_2' = -17, and the loss jumps from 9/16 to about 50
    source = tmp_path / "one.toml"
    source.write_text(ONE_TOKEN)
    assert main(["train", str(source), "--lr", "32", "--decimals", "6"]) == 0
    out = capsys.readouterr().out
    printed = Fraction(out.split("step 1  loss ")[1].split()[0])
    want = Fraction(str(sympy.N(hand_loss(R(32)), 30)))
    assert abs(printed - want) <= Fraction(1, 10 ** 6) and want > Fraction(9, 16)
    assert "step 1: the loss does not decrease (it increases)" in out


def test_an_exactly_equal_loss_is_reported(tmp_path, capsys):
    # the target is the output itself: the loss is 0, every gradient exactly 0, the
    # weights do not move and the loss stays 0 (exactly, by the exact forward pass)
    source = tmp_path / "one.toml"
    source.write_text(ONE_TOKEN.replace("target = [[0, 0]]", 'target = [["3/4", "-3/4"]]'))
    assert main(["train", str(source), "--lr", "1/2"]) == 0
    out = capsys.readouterr().out
    assert "step 1  loss 0.000" in out
    assert "step 1: the loss does not decrease (exactly equal)" in out


def test_decreasing_losses_are_certified(capsys):
    assert main(["train", "--lr", "0.1", "--steps", "2"]) == 0
    out = capsys.readouterr().out
    assert "step 0  loss 2.024" in out and "decreases at every step" in out


# -- an independent float64 training loop ------------------------------------------------

def _parts(name: str) -> list[str]:
    """``layer1.add_norm2.gamma`` -> ``["layer1", "gamma_2"]`` (the Layer field)."""
    parts = name.split(".")
    if parts[-1] in ("gamma", "beta"):
        return [parts[0], f"{parts[-1]}_{parts[1][-1]}"]
    return parts


#: The example's fields of the tables ``train`` trains whole.
TABLES = {"embedding_table": "embeddings", "positional_embeddings": "positional_embeddings"}


def _set(example, name: str, value: np.ndarray):
    """The example with weight ``name`` (``layer1.head2.W_Q``, ``layer1.b_1``) replaced."""
    if name in TABLES:
        return dataclasses.replace(example, **{TABLES[name]: sympy.Matrix(value.tolist())})
    parts = _parts(name)
    number = int(parts[0].removeprefix("layer")) - 1
    layer = example.layers[number]
    matrix = sympy.Matrix(value.tolist())
    if parts[1].startswith("head"):
        k = int(parts[1].removeprefix("head")) - 1
        heads = list(layer.heads)
        heads[k] = dataclasses.replace(heads[k], **{parts[2]: matrix})
        layer = dataclasses.replace(layer, heads=tuple(heads))
    else:
        layer = dataclasses.replace(layer, **{parts[1]: matrix})
    layers = list(example.layers)
    layers[number] = layer
    return dataclasses.replace(example, layers=tuple(layers) if isinstance(
        example.layers, tuple) else layers)


def _get(example, name: str) -> np.ndarray:
    if name in TABLES:
        return np.array(getattr(example, TABLES[name]).tolist(), dtype=np.float64)
    parts = _parts(name)
    layer = example.layers[int(parts[0].removeprefix("layer")) - 1]
    if parts[1].startswith("head"):
        value = getattr(layer.heads[int(parts[1].removeprefix("head")) - 1], parts[2])
    else:
        value = getattr(layer, parts[1])
    return np.array(value.tolist(), dtype=np.float64)


def float_training(example, names, lr: float, steps: int, optimizer: str,
                   beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8,
                   decay: float = 0.0, frozen=()):
    """Losses and final weights of a float64 loop: textbook SGD, or PyTorch's Adam and
    AdamW (``decay``: W (1 - lr decay) before the update); ``frozen`` weights are kept."""
    m = {n: 0.0 for n in names}
    v = {n: 0.0 for n in names}
    losses = []
    for t in range(1, steps + 2):
        grads = float_backward(example)
        losses.append(float(grads["loss"][0, 0]))
        if t == steps + 1:
            break
        for n in names:
            if n in frozen:
                continue
            w, g = _get(example, n), _float_gradient(example, grads, n)
            if optimizer == "sgd":
                w = w - lr * g
            else:
                m[n] = beta1 * m[n] + (1 - beta1) * g
                v[n] = beta2 * v[n] + (1 - beta2) * g * g
                w = w * (1 - lr * decay) - lr * (m[n] / (1 - beta1 ** t)) / (
                    np.sqrt(v[n] / (1 - beta2 ** t)) + eps)
            example = _set(example, n, w)
    return losses, example


def _float_gradient(example, grads: dict, name: str) -> np.ndarray:
    """The float gradient of weight ``name``, shaped like it: a table's rows not read
    get 0 (the float backward gives the rows used, in order of first appearance, and
    the gradient at the positions)."""
    shape = _get(example, name).shape
    if name == "embedding_table":
        full = np.zeros(shape)
        for k, u in enumerate(dict.fromkeys(example.token_ids)):
            full[u] = grads["grad.embedding_table"][k]
        return full
    if name == "positional_embeddings":
        full = np.zeros(shape)
        full[:len(example.tokens)] = grads["grad.positional_encoding"]
        return full
    return grads[f"grad.{name}"].reshape(shape)


def _learned_positions():
    """The built-in example with a learned positional table of 6 rows (2 not read)."""
    example = load_example()
    n, d = len(example.tokens), example.d_model
    P = sympy.Matrix(n + 2, d, lambda i, j: R((i + 2 * j) % 5 - 2, 4))
    return dataclasses.replace(example, positional_encoding="learned",
                               positional_embeddings=P)


def _active_ffn(b: sympy.Rational | None = None):
    """The built-in example with b_1 = (b, ..., b) (default 1/10), so that ReLU passes
    some units."""
    b = R(1, 10) if b is None else b
    example = load_example()
    layer = dataclasses.replace(example.layers[0], b_1=sympy.Matrix([[b] * 6]))
    return dataclasses.replace(example, layers=(layer, *example.layers[1:]))


@pytest.mark.parametrize("optimizer,lr", [("sgd", "1/10"), ("adam", "1/100")])
@pytest.mark.parametrize("make", [load_example, _active_ffn, _learned_positions])
def test_steps_agree_with_a_float64_training_loop(optimizer, lr, make):
    example = make()
    steps = 3
    t = train(derive(example), sympy.Rational(lr), steps, optimizer)
    names = [w.name for w in t.weights]
    assert {"layer1.head2.W_V", "layer1.b_2", "layer1.add_norm1.gamma",
            "layer1.add_norm2.beta", "embedding_table"} <= set(names)
    assert ("positional_embeddings" in names) == (make is _learned_positions)
    losses, trained = float_training(example, names, float(sympy.Rational(lr)), steps,
                                     optimizer)
    for k, want in enumerate(losses):
        got = certified(t.graph, t.loss(k))[0, 0]
        assert got == pytest.approx(want, rel=1e-10), (k, got, want)
    assert losses[-1] < losses[0]
    for name in names:
        got = certified(t.graph, t.weight(steps, next(w for w in t.weights
                                                      if w.name == name)))
        want = _get(trained, name)
        assert np.abs(got - want).max() <= 1e-10 * max(1.0, np.abs(want).max()), name


def test_relu_inputs_exactly_zero_get_the_subgradient_zero():
    # b_1 = 0: two of the first token's ReLU inputs are exactly 0 (symmetric rows);
    # their gradient is 0 by proof, so the next step's weights are certified
    t = train(derive(_active_ffn(R(0))), R(1, 10), 1)
    g = t.graph
    assert g["step0.layer1.ffn.activation"].op.zeros == {(0, 1), (0, 3)}
    hidden = float_forward(_active_ffn(R(0)))["layer1.ffn.hidden"]  # independently
    assert abs(hidden[0, 1]) < 1e-15 and abs(hidden[0, 3]) < 1e-15
    assert Fraction(g["step1.loss"].values(significant=20)[0][0]) < Fraction(
        g["step0.loss"].values(significant=20)[0][0])


# -- bad input ---------------------------------------------------------------------------

@pytest.mark.parametrize("argv,message", [
    (["--lr", "0"], "--lr must be positive"),
    (["--lr", "-0.5"], "--lr must be positive"),
    (["--lr", "abc"], "is not a number"),
    (["--lr", "0.1", "--steps", "0"], "--steps must be from 1 to 50"),
    (["--lr", "0.1", "--steps", "51"], "--steps must be from 1 to 50"),
    (["course_module", "--lr", "0.1"], "has no [loss] table"),
    (["--lr", "0.1", "--steps", "x"], "--steps"),
    (["--lr", "0.1", "--optimizer", "rmsprop"], "--optimizer"),
])
def test_bad_input(argv, message, capsys):
    try:
        status = main(["train", *argv])
    except SystemExit as stop:  # argparse's own exit 2, with the usage line
        status = stop.code
    assert status == 2
    err = capsys.readouterr().err.strip()
    assert message in err
    assert "Traceback" not in err


def test_progress_only_on_a_terminal(capsys):
    assert main(["train", "--lr", "0.1", "--steps", "1"]) == 0
    assert capsys.readouterr().err == ""  # stderr is not a terminal here

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    shown = Terminal()
    progress = Progress("train", stream=shown)
    progress.update("step 1/2")
    progress.done()
    assert "train: step 1/2" in shown.getvalue()
    quiet = Terminal()
    Progress("train", quiet=True, stream=quiet).update("step 1/2")
    assert quiet.getvalue() == ""
