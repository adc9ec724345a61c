"""symformer crosscheck: float64 agrees with the exact values, float32 drifts, conventions."""

from __future__ import annotations

import json

import numpy as np
import pytest

from symformer import load_example
from symformer.cli import main
from symformer.conventions import Convention
from symformer.verify.crosscheck import crosscheck


@pytest.mark.parametrize("convention", [
    Convention(), Convention(mask="-1e9"), Convention(layer_norm="unbiased"),
    Convention(layer_norm="whole_matrix"), Convention(norm="pre"),
])
def test_float64_within_1e12_under_every_convention(convention) -> None:
    rows = crosscheck(load_example(), convention, causal=True)
    assert all(r.ok for r in rows), [r for r in rows if not r.ok]
    # float64 is not exact either: some stage shows a relative rounding error, far below tol
    assert 0 < max(r.rel_error for r in rows) < 1e-12


def test_float32_drifts() -> None:
    rows = crosscheck(load_example(), Convention(), dtype=np.float32)
    worst = max(r.rel_error for r in rows)
    assert 1e-9 < worst < 1e-5
    assert not all(r.ok for r in rows)


def test_a_wrong_reference_is_caught(monkeypatch) -> None:
    from symformer.ops import Softmax

    softmax = Softmax.reference_function
    monkeypatch.setattr(Softmax, "reference_function",
                        staticmethod(lambda s: softmax(s) * (1 + 1e-9)))
    rows = {r.stage: r for r in crosscheck(load_example(), Convention())}
    assert not rows["layer1.head1.weights"].ok and rows["layer1.head1.Q"].ok


def test_cli(capsys) -> None:
    assert main(["crosscheck", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    # 31 + two .std stages, the loss and its 48 gradient stages (the example has a [loss];
    # the LayerNorm outputs' mean and variance are asked for with [stages])
    assert data["ok"] and len(data["stages"]) == 33 + 1 + 48
    assert sum(s["stage"].startswith("grad.") for s in data["stages"]) == 48
    assert main(["crosscheck", "--dtype", "float32"]) == 1
    assert "> tol" in capsys.readouterr().out
    assert main(["crosscheck", "--mask=5"]) == 2
    assert "mask" in capsys.readouterr().err


# -- the backward pass: the operations' NumPy VJPs ------------------------------------

def test_gradients_are_compared_with_a_float64_backward_pass() -> None:
    rows = {r.stage: r for r in crosscheck(load_example(), Convention(), causal=True)}
    assert rows["loss"].ok and rows["grad.layer1.head1.W_Q"].ok
    grads = [r for name, r in rows.items() if name.startswith("grad.")]
    assert len(grads) == 48 and all(r.ok for r in grads)
    assert 0 < max(r.rel_error for r in grads) < 1e-12


def test_a_wrong_vjp_is_caught(monkeypatch) -> None:
    """A softmax VJP off by a factor breaks the gradients behind the softmax only."""
    from symformer.ops import Softmax

    real = Softmax.backward_function
    monkeypatch.setattr(Softmax, "backward_function",
                        lambda self, wrt: lambda a, g: 1.001 * real(self, wrt)(a, g))
    rows = {r.stage: r for r in crosscheck(load_example(), Convention())}
    assert rows["grad.layer1.head1.weights"].ok and rows["grad.layer1.W_2"].ok
    assert not rows["grad.layer1.head1.scores"].ok and not rows["grad.layer1.head1.W_Q"].ok
    assert all(r.ok for name, r in rows.items() if not name.startswith("grad."))


def test_the_float_backward_pass_reads_no_engine_gradient(monkeypatch) -> None:
    """numpy_backward runs with every gradient operation broken: it never evaluates them."""
    from float_backward import float_backward

    from symformer import derive
    from symformer.blocks.backward import backward
    from symformer.ops.gradient import Gradient, Seed
    from symformer.reference import numpy_backward

    for piece in ("sympy", "arb", "reference", "backward"):
        monkeypatch.setattr(Gradient, piece, None)
        monkeypatch.setattr(Seed, piece, None)
    example = load_example()
    for causal in (False, True):
        got = numpy_backward.run(backward(derive(example, causal=causal)))
        want = float_backward(example, causal=causal)  # tests/: written independently
        assert set(want) - {"loss"} <= set(got)
        for name, value in want.items():
            if name != "loss":
                np.testing.assert_allclose(got[name], value, rtol=1e-10, atol=1e-13,
                                           err_msg=name)


def test_cross_entropy_gradients_of_a_decoder(tmp_path) -> None:
    from symformer.example.loader import load_example as load

    source = open(load_example("encoder_decoder").source).read()
    path = tmp_path / "ce.toml"
    path.write_text(source + '\n[loss]\nkind = "cross_entropy"\ntargets = ["je", "pense"]\n')
    rows = {r.stage: r for r in crosscheck(load(path), Convention())}
    assert rows["grad.W_vocab"].ok and rows["grad.decoder.embeddings"].ok
    assert all(r.ok for r in rows.values()), [r for r in rows.values() if not r.ok]


@pytest.mark.parametrize("name", ["llama_style", "gpt2_style", "course_module",
                                  "attention_only"])
def test_gradients_of_every_packaged_architecture(tmp_path, name) -> None:
    """RMSNorm, SwiGLU, RoPE, GELU (tanh), learned positions: every gradient agrees."""
    from symformer import derive
    from symformer.example.loader import load_example as load

    example = load_example(name)
    n, d = derive(example)["output"].shape
    target = [[f'"{(i + j) % 3 - 1}/3"' for j in range(d)] for i in range(n)]
    path = tmp_path / f"{name}.toml"
    path.write_text(open(example.source).read() + '\n[loss]\nkind = "mse"\ntarget = ['
                    + ", ".join("[" + ", ".join(row) + "]" for row in target) + "]\n")
    rows = {r.stage: r for r in crosscheck(load(path), Convention(), causal=True)}
    grads = [r for s, r in rows.items() if s.startswith("grad.")]
    assert len(grads) >= 10 and all(r.ok for r in rows.values()), [
        r for r in rows.values() if not r.ok]
