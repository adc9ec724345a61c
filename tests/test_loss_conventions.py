"""The ``[loss]`` conventions: reduction, targets for some positions, an upstream gradient.

References, all independent of the engine's backward pass:

* the loss recomputed with mpmath from the forward stage it reads, by PyTorch's
  definitions (mean over the entries / positions that have a target, or the sum);
* hand-derived gradients at the loss's own stage (2 (z - T) / c in the targeted rows,
  exactly 0 elsewhere; -1 / (c p) at a target; the given G for an upstream gradient);
* central finite differences of the exact loss with respect to a weight entry,
  evaluated with mpmath at high precision (h = 1e-25);
* bad tables: one-line messages naming the file and key, exit status 2.
"""

from __future__ import annotations

import dataclasses

import mpmath
import pytest
import sympy

from symformer import derive
from symformer.blocks.backward import backward
from symformer.cli import main
from symformer.errors import InputError
from symformer.example import load_example
from symformer.example.loader import builtin_text, parse_example

GPT2 = load_example("gpt2_style")
GPT2_TEXT = open(GPT2.source).read()
BUILTIN = builtin_text().rsplit("\n[loss]", 1)[0]


def example(text: str, loss: str):
    return parse_example(text + "\n[loss]\n" + loss + "\n", "test.toml")


def mp(ball) -> mpmath.mpf:
    return mpmath.mpf(ball.mid().str(110, radius=False))


def values(g, name: str, prec: int = 400) -> list[list[mpmath.mpf]]:
    return [[mp(b) for b in row] for row in g.evaluate(prec)[name]]


@pytest.fixture(autouse=True)
def _precision():
    with mpmath.workdps(110):
        yield


def finite_difference(ex, weight: str, i: int, j: int, head: int | None = None
                      ) -> mpmath.mpf:
    """dL/dW[i, j] by central differences of the exact loss (layer 1's weight)."""
    h = sympy.Rational(1, 10 ** 25)
    layer = ex.layers[0]
    holder = layer.heads[head - 1] if head else layer

    def loss(delta) -> mpmath.mpf:
        W = getattr(holder, weight).copy()
        W[i, j] += delta
        new = dataclasses.replace(holder, **{weight: W})
        if head:
            heads = list(layer.heads)
            heads[head - 1] = new
            new = dataclasses.replace(layer, heads=tuple(heads))
        g = backward(derive(dataclasses.replace(ex, layers=(new, *ex.layers[1:]))))
        return values(g, "loss")[0][0]

    return (loss(h) - loss(-h)) / (2 * mpmath.mpf(10) ** -25)


def close(a: mpmath.mpf, b: mpmath.mpf, tol: int = 40) -> bool:
    return abs(a - b) <= mpmath.mpf(10) ** -tol * max(1, abs(b))


def agrees(engine: mpmath.mpf, difference: mpmath.mpf) -> bool:
    """The engine's gradient equals the finite difference, and is not a trivial 0."""
    return abs(difference) > mpmath.mpf(10) ** -3 and close(engine, difference)


# -- mse ------------------------------------------------------------------------------

MSE_TARGET = [[1, 0, 0, 1], [0, 1, 1, 0]]


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_mse_on_some_positions(reduction):
    ex = example(BUILTIN, f'kind = "mse"\nreduction = "{reduction}"\npositions = [3, 1]\n'
                          f"target = {MSE_TARGET}")
    g = backward(derive(ex))
    z = values(g, "output")
    rows = {3: MSE_TARGET[0], 1: MSE_TARGET[1]}
    squares = sum((z[i][j] - t[j]) ** 2 for i, t in rows.items() for j in range(4))
    c = 8 if reduction == "mean" else 1  # PyTorch: the mean over the 2 x 4 entries
    assert close(values(g, "loss")[0][0], squares / c)
    grad = values(g, "grad.output")
    for i in range(4):
        for j in range(4):
            want = 2 * (z[i][j] - rows[i][j]) / c if i in rows else 0
            assert close(grad[i][j], want), (i, j)
    assert g["grad.output"].values(decimals=3)[0] == ["0.000"] * 4  # exactly 0 rows
    assert agrees(values(g, "grad.layer1.W_O")[2][1], finite_difference(ex, "W_O", 2, 1))
    assert agrees(values(g, "grad.layer1.head1.W_V")[1][0],
                  finite_difference(ex, "W_V", 1, 0, head=1))


# -- cross-entropy --------------------------------------------------------------------

@pytest.mark.parametrize(("targets", "positions"), [
    (["", "", "on"], None), (["on"], [2]), (["cat", "", "mat"], None),
    (["mat", "cat"], [2, 0])])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_cross_entropy_ignores_positions_without_target(targets, positions, reduction):
    quoted = "[" + ", ".join(f'"{t}"' for t in targets) + "]"
    loss = f'kind = "cross_entropy"\nreduction = "{reduction}"\ntargets = {quoted}\n'
    if positions:
        loss += f"positions = {positions}\n"
    ex = example(GPT2_TEXT, loss)
    g = backward(derive(ex))
    p = values(g, "probabilities")
    vocab = list(ex.vocab)
    rows = positions if positions else range(len(targets))
    pairs = [(i, vocab.index(t)) for i, t in zip(rows, targets) if t]
    c = len(pairs) if reduction == "mean" else 1  # PyTorch's ignore_index mean
    assert close(values(g, "loss")[0][0], -sum(mpmath.log(p[i][t]) for i, t in pairs) / c)
    grad = values(g, "grad.probabilities")
    for i in range(len(p)):
        for j in range(len(vocab)):
            want = -1 / (c * p[i][j]) if (i, j) in pairs else 0
            assert close(grad[i][j], want), (i, j)


def test_cross_entropy_gradient_matches_finite_differences():
    ex = example(GPT2_TEXT, 'kind = "cross_entropy"\nreduction = "sum"\n'
                            'targets = ["", "sat", "on"]')
    g = backward(derive(ex))
    assert agrees(values(g, "grad.layer1.W_1")[1][3], finite_difference(ex, "W_1", 1, 3))


# -- upstream -------------------------------------------------------------------------

G = [[1, 0], [0, "1/2"], ["-3/4", 1], [2, -1]]


def test_upstream_gradient_starts_the_backward_pass():
    text = "[" + ", ".join("[" + ", ".join(f'"{v}"' for v in row) + "]" for row in G) + "]"
    ex = example(BUILTIN, f'kind = "upstream"\nstage = "layer1.head1.output"\n'
                          f"gradient = {text}")
    g = backward(derive(ex))
    given = [[mpmath.mpf(sympy.Rational(v).p) / sympy.Rational(v).q for v in row]
             for row in G]
    o = values(g, "layer1.head1.output")
    assert close(values(g, "loss")[0][0],
                 sum(a * b for r, s in zip(given, o) for a, b in zip(r, s)))
    assert g["grad.layer1.head1.output"].values(decimals=6) == [
        [f"{float(sympy.Rational(v)):.6f}" for v in row] for row in G]
    assert "grad.output" not in g and "grad.layer1.W_1" not in g  # downstream: none
    assert "grad.layer1.head2.W_Q" not in g  # head 2 does not feed head 1's output
    assert agrees(values(g, "grad.layer1.head1.W_Q")[2][1],
                  finite_difference(ex, "W_Q", 2, 1, head=1))
    assert agrees(values(g, "grad.layer1.head1.W_V")[0][0],
                  finite_difference(ex, "W_V", 0, 0, head=1))


# -- bad tables -----------------------------------------------------------------------

BAD = [
    (BUILTIN, 'kind = "mse"\nreduction = "avg"\ntarget = [[0, 0, 0, 0]]',
     "reduction must be one of"),
    (BUILTIN, 'kind = "mse"\npositions = [4]\ntarget = [[0, 0, 0, 0]]', "has 4 rows"),
    (BUILTIN, 'kind = "mse"\npositions = [1, 1]\ntarget = [[0, 0, 0, 0], [0, 0, 0, 0]]',
     "repeat"),
    (BUILTIN, 'kind = "mse"\npositions = [1]\ntarget = [[0, 0, 0, 0], [0, 0, 0, 0]]',
     "target has shape 2x4, expected 1x4"),
    (BUILTIN, 'kind = "mse"\npositions = "last"\ntarget = [[0, 0, 0, 0]]',
     "positions must be a non-empty list"),
    (BUILTIN, 'kind = "mse"\nstage = "output"\ntarget = [[0, 0, 0, 0]]',
     "stage belongs to kind"),
    (GPT2_TEXT, 'kind = "cross_entropy"\ntargets = ["", "", ""]', "no position has a target"),
    (GPT2_TEXT, 'kind = "cross_entropy"\ntargets = ["on", "mat"]\npositions = [2]',
     "targets has 2 entries but positions names 1"),
    (GPT2_TEXT, 'kind = "cross_entropy"\ntargets = ["on"]', "expected 3"),
    (BUILTIN, 'kind = "upstream"\ngradient = [[1]]', "needs stage"),
    (BUILTIN, 'kind = "upstream"\nstage = "output"\ngradient = [[1]]\nreduction = "sum"',
     "not reduction"),
    (BUILTIN, 'kind = "upstream"\nstage = "output"', "missing key 'gradient'"),
]


@pytest.mark.parametrize(("text", "table", "message"), BAD)
def test_bad_loss_tables(tmp_path, capsys, text, table, message):
    path = tmp_path / "bad.toml"
    path.write_text(text + "\n[loss]\n" + table + "\n")
    with pytest.raises(InputError, match=message):
        backward(derive(load_example(path)))
    assert main(["backward", str(path)]) == 2
    err = capsys.readouterr().err
    assert "bad.toml, loss" in err and err.count("\n") == 1


@pytest.mark.parametrize(("table", "message"), [
    ('kind = "upstream"\nstage = "layer1.head1.outptu"\ngradient = [[1]]',
     "did you mean layer1.head1.output"),
    ('kind = "upstream"\nstage = "grad.output"\ngradient = [[1]]', "unknown stage"),
    ('kind = "upstream"\nstage = "layer1.head1.output"\ngradient = [[1, 2]]',
     "gradient is 1x2 but layer1.head1.output is 4x2"),
])
def test_upstream_stage_checked_when_derived(tmp_path, capsys, table, message):
    path = tmp_path / "up.toml"
    path.write_text(BUILTIN + "\n[loss]\n" + table + "\n")
    assert main(["backward", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and "up.toml, loss" in err and err.count("\n") == 1


@pytest.mark.parametrize(("text", "table"), [
    (BUILTIN, 'kind = "mse"\nreduction = "sum"\npositions = [2]\ntarget = [[1, 0, 0, 1]]'),
    (GPT2_TEXT, 'kind = "cross_entropy"\ntargets = ["", "sat", "on"]'),
    (BUILTIN, 'kind = "upstream"\nstage = "layer1.ffn.output"\n'
              'gradient = [[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0], [0, 0, 1, 1]]'),
])
def test_crosscheck_float64_agrees(tmp_path, capsys, text, table):
    """The NumPy forward and backward references (each op's own float functions) agree
    with the exact loss and every gradient."""
    path = tmp_path / "loss.toml"
    path.write_text(text + "\n[loss]\n" + table + "\n")
    assert main(["crosscheck", str(path)]) == 0
    assert "within tol" in capsys.readouterr().out
