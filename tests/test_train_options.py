"""Training you can check: optimiser options, freezing, the steps' stages, rounded writes.

Reference: the float64 training loop of test_train.py (NumPy; the textbook gradients of
``float_backward.py``; PyTorch's Adam and AdamW updates, eps added to the square root
of the bias-corrected second moment, AdamW's decay W (1 - lr wd) before the update).
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal

import numpy as np
import pytest
import sympy
from flint import arb, fmpq
from test_train import _get, certified
from test_train import float_training as float_loop

from symformer import derive
from symformer.blocks.train import options, train
from symformer.cli import main
from symformer.example import load_example

R = sympy.Rational


def compare(t, example, steps, **loop):
    names = [w.name for w in t.weights]
    losses, trained = float_loop(example, names, steps=steps, **loop)
    for k, want in enumerate(losses):
        assert certified(t.graph, t.loss(k))[0, 0] == pytest.approx(want, rel=1e-10), k
    for w in t.weights:
        got = certified(t.graph, t.weight(steps, w))
        want = _get(trained, w.name)
        assert np.abs(got - want).max() <= 1e-10 * max(1.0, np.abs(want).max()), w.name
    return trained


@pytest.mark.parametrize(("optimizer", "numbers"), [
    ("adam", {"beta1": "0.8", "beta2": "0.99", "eps": "1e-3"}),
    ("adamw", {"weight_decay": "0.5"}),
    ("adamw", {"beta1": "0.5", "eps": "1/10"}),  # PyTorch's default decay, 0.01
])
def test_adam_and_adamw_options_agree_with_a_float64_loop(optimizer, numbers):
    example = load_example()
    settings = options(optimizer, **numbers)
    t = train(derive(example), R(1, 20), 2, optimizer, settings=settings)
    floats = {k: float(R(v)) for k, v in numbers.items()}
    decay = floats.pop("weight_decay", 0.01 if optimizer == "adamw" else 0.0)
    compare(t, example, 2, lr=0.05, optimizer="adam", decay=decay, **floats)


def test_freezing_keeps_weights_exactly_and_trains_the_rest():
    example = load_example()
    settings = options("sgd", freeze=("embedding_table", "layer1.head2.*"))
    t = train(derive(example), R(1, 10), 2, "sgd", settings=settings)
    assert t.frozen == {"embedding_table", "layer1.head2.W_Q", "layer1.head2.W_K",
                        "layer1.head2.W_V"}
    balls = t.graph.evaluate(t.precision)
    for w in t.weights:
        if w.name in t.frozen:  # exactly the example's own value after every step
            for i, row in enumerate(balls[t.weight(2, w)]):
                for j, b in enumerate(row):
                    value = R(w.value[i, j])
                    assert b.rad() == 0 and b == arb(fmpq(int(value.p), int(value.q)))
    compare(t, example, 2, lr=0.1, optimizer="sgd", frozen=t.frozen)


def test_train_glob_trains_only_the_matching_weights():
    example = load_example()
    settings = options("sgd", train=("layer1.W_*", "layer1.b_2"))
    t = train(derive(example), R(1, 10), 1, "sgd", settings=settings)
    trained = {w.name for w in t.weights} - t.frozen
    assert trained == {"layer1.W_1", "layer1.W_2", "layer1.W_O", "layer1.b_2"}
    compare(t, example, 1, lr=0.1, optimizer="sgd", frozen=t.frozen)


def rounded(x: float, decimals: int) -> str:
    return str(Decimal(repr(float(x))).quantize(Decimal(1).scaleb(-decimals),
                                                ROUND_HALF_EVEN))


def test_stage_option_prints_the_steps_weights_and_losses(capsys):
    argv = ["train", "--lr", "0.1", "--steps", "2", "--optimizer", "adamw",
            "--weight-decay", "0.1", "--stage", "step2.layer1.head1.W_Q", "--stage",
            "step*.loss", "--decimals", "5"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    example = load_example()
    names = [w.name for w in train(derive(example), R(1, 10), 1).weights]
    losses, trained = float_loop(example, names, 0.1, 2, "adam", decay=0.1)
    table = out.split("step2.layer1.head1.W_Q  (4x2)")[1].split("\n\n")[0]
    W = _get(trained, "layer1.head1.W_Q")
    for i, line in enumerate(table.strip().splitlines()[1:]):
        assert line.split()[2:] == [rounded(x, 5) for x in W[i]]
    for k in range(3):
        assert f"step{k}.loss  (1x1)" in out
        assert f"step {k}  loss {rounded(losses[k], 5)}" in out


def test_write_decimals_rounds_every_weight_and_says_so(tmp_path):
    out = tmp_path / "trained.toml"
    assert main(["train", "--lr", "0.1", "--steps", "1", "--write", str(out),
                 "--decimals", "4", "--quiet"]) == 0
    text = out.read_text()
    assert text.startswith("# symformer train: the weights after 1 step (sgd, lr = 1/10), "
                           "each the correct rounding to 4 decimals")
    example = load_example()
    names = [w.name for w in train(derive(example), R(1, 10), 1).weights]
    _, trained = float_loop(example, names, 0.1, 1, "sgd")
    written = load_example(out)
    for name in names:
        want = np.vectorize(lambda x: float(rounded(x, 4)))(_get(trained, name))
        assert np.array_equal(_get(written, name), want), name


@pytest.mark.parametrize(("argv", "message"), [
    (["--beta1", "0.9"], "--beta1 applies to adam and adamw, not sgd"),
    (["--optimizer", "adam", "--weight-decay", "0.1"], "use optimizer adamw"),
    (["--optimizer", "adam", "--beta2", "1"], "beta2 must be from 0 to below 1"),
    (["--optimizer", "adamw", "--eps", "0"], "eps must be positive"),
    (["--optimizer", "adamw", "--weight-decay", "-1"], "weight decay must be 0 or more"),
    (["--optimizer", "adam", "--eps", "tiny"], "is not a number"),
    (["--freeze", "layer9.*"], "--freeze 'layer9.*' matches no weight"),
    (["--train", "W_Z"], "--train 'W_Z' matches no weight"),
    (["--stage", "step3.loss"], "unknown stage 'step3.loss'"),
])
def test_bad_options(argv, message, capsys):
    assert main(["train", "--lr", "0.1", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
