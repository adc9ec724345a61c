"""A tied table's gradient is the total of both uses, over every vocabulary row.

Reference: central finite differences of the exact loss with respect to one entry of
the shared table E (moving the lookup's rows and the head's W_vocab = E^T together, as
PyTorch's shared parameter does), evaluated with mpmath at 110 digits (h = 1e-25).
"""

from __future__ import annotations

import dataclasses

import mpmath
import pytest
import sympy

from symformer import derive
from symformer.blocks.backward import backward
from symformer.cli import main
from symformer.example import load_example
from symformer.example.loader import parse_example

GPT2_TEXT = open(load_example("gpt2_style").source).read()
LOSS = '\n[loss]\nkind = "cross_entropy"\ntargets = ["cat", "sat", "on"]\n'


def mp(ball) -> mpmath.mpf:
    return mpmath.mpf(ball.mid().str(110, radius=False))


def loss_with(example, E) -> mpmath.mpf:
    head = dataclasses.replace(example.lm_head, W_vocab=E.T)
    g = backward(derive(dataclasses.replace(example, embeddings=E, lm_head=head)))
    return mp(g.evaluate(400)["loss"][0][0])


@pytest.mark.parametrize(("token", "col"), [("cat", 2), ("on", 1), ("the", 0)])
def test_table_gradient_is_the_total_of_both_uses(token, col):
    example = parse_example(GPT2_TEXT + LOSS, "tied.toml")
    g = backward(derive(example))
    v = list(example.vocab).index(token)
    h = sympy.Rational(1, 10 ** 25)
    with mpmath.workdps(110):
        shifted = []
        for delta in (h, -h):
            E = example.embeddings.copy()
            E[v, col] += delta
            shifted.append(loss_with(example, E))
        difference = (shifted[0] - shifted[1]) / (2 * mpmath.mpf(10) ** -25)
        balls = g.evaluate(400)
        total = mp(balls["grad.embedding_table"][v][col])
        head = mp(balls["grad.embedding_table.head"][v][col])
        assert abs(difference) > 1e-3
        assert abs(total - difference) <= mpmath.mpf(10) ** -40
        # the two uses: the head's is W_vocab's gradient transposed; the lookup's has
        # only the rows read, and the rows not read get the head's use alone
        assert mp(balls["grad.W_vocab"][col][v]) == head
        lookup = g["grad.embedding_table.lookup"]
        if token in lookup.rows:
            part = mp(balls["grad.embedding_table.lookup"][lookup.rows.index(token)][col])
            assert abs(part + head - total) <= mpmath.mpf(10) ** -90
            assert abs(part) > 1e-3
        else:
            assert total == head


def test_table_stages_named_and_shaped(capsys, tmp_path):
    path = tmp_path / "tied.toml"
    path.write_text(GPT2_TEXT + LOSS)
    assert main(["backward", str(path), "--list", "--stage", "grad.embedding_table*"]) == 0
    listed = capsys.readouterr().out.split()
    assert listed == ["grad.embedding_table.lookup", "3x4", "weight_gradient",
                      "grad.embedding_table.head", "5x4", "weight_gradient",
                      "grad.embedding_table", "5x4", "weight_gradient"]
    assert main(["crosscheck", str(path)]) == 0


def test_untied_table_keeps_its_name():
    g = backward(derive(load_example()))
    assert "grad.embedding_table" in g and "grad.embedding_table.lookup" not in g
