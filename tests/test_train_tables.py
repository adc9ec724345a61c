"""``symformer train`` on the embedding tables, a learned positional table and a tied head.

Independent references:

* a tied language-model head (gpt2_style, W_vocab = E^T): central finite differences
  of the exact forward pass (mpmath, 110 digits) shifting an entry of E *and* its
  copy in W_vocab together -- the derivative of the shared table, which the trained
  table's gradient must equal (the sum of the lookup's and the head's gradients);
  after the step the tie still holds exactly;
* ``--write`` round trips: a one-token example with a learned table and an unused
  vocabulary entry (the written file loads, its weights are the updated ones, the
  rows nobody reads are unchanged), and every decoder weight of encoder_decoder
  placed in its own table (written, loaded, compared with what was put in).
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import mpmath
import sympy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_backward import ONE_TOKEN

from symformer import derive, load_example
from symformer.blocks.backward import backward
from symformer.blocks.train import rational_weights, train
from symformer.cli import main
from symformer.example.loader import parse_example
from symformer.example.write import updated_example

R = sympy.Rational
LOSS = '\n[loss]\nkind = "cross_entropy"\ntargets = ["cat", "sat", "on"]\n'


def gpt2_with_loss(tmp_path):
    path = tmp_path / "gpt2_loss.toml"
    path.write_text(open(load_example("gpt2_style").source).read() + LOSS)
    return load_example(str(path))


def loss_at(example) -> mpmath.mpf:
    ball = backward(derive(example)).evaluate(400)["loss"][0][0]
    assert ball.rad() < sympy.Rational(1, 10 ** 80)
    return mpmath.mpf(ball.mid().str(110, radius=False))


def tied_shift(example, i: int, j: int, delta):
    """E[i, j] and W_vocab[j, i] (its tied copy) both shifted by ``delta``."""
    E = example.embeddings.copy()
    E[i, j] += delta
    head = dataclasses.replace(example.lm_head, W_vocab=E.T)
    return dataclasses.replace(example, embeddings=E, lm_head=head)


@settings(max_examples=4, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.integers(0, 4), st.integers(0, 3))
def test_tied_table_gradient_is_the_derivative_of_the_shared_table(tmp_path, i, j):
    # rows 0-2 (the, cat, sat) are read by the lookup and the head; 3-4 (on, mat)
    # by the head only
    example = gpt2_with_loss(tmp_path)
    t = train(derive(example), R(1, 10), 1)
    assert "W_vocab" not in [w.name for w in t.weights if w.tied is None]
    mpmath.mp.dps = 110
    h = R(1, 10 ** 25)
    difference = (loss_at(tied_shift(example, i, j, h))
                  - loss_at(tied_shift(example, i, j, -h))) / (2 * mpmath.mpf(10) ** -25)
    ball = t.graph.evaluate(400)["grad.step0.embedding_table"][i][j]
    got = mpmath.mpf(ball.mid().str(110, radius=False))
    assert abs(difference - got) <= mpmath.mpf(10) ** -40, (i, j, difference, got)
    assert abs(got) > mpmath.mpf(10) ** -6


def test_the_tie_holds_after_the_step(tmp_path):
    t = train(derive(gpt2_with_loss(tmp_path)), R(1, 10), 2)
    g = t.graph
    for step in (1, 2):
        table = g.evaluate(t.precision)[f"step{step}.embedding_table"]
        head = g.evaluate(t.precision)[f"step{step}.W_vocab"]
        assert g.local(f"step{step}.W_vocab") == sympy.Matrix(
            [[sympy.Symbol(f"step{step}.embedding_table[{i},{j}]") for i in range(5)]
             for j in range(4)])
        assert all(head[j][i].mid() == table[i][j].mid() and head[j][i].rad()
                   == table[i][j].rad() for i in range(5) for j in range(4))
    assert Fraction(g["step2.loss"].values(significant=10)[0][0]) < Fraction(
        g["step0.loss"].values(significant=10)[0][0])


def test_tied_write_rounds_when_not_rational(tmp_path, capsys):
    source = tmp_path / "gpt2_loss.toml"
    source.write_text(open(load_example("gpt2_style").source).read() + LOSS)
    out = tmp_path / "trained.toml"
    assert main(["train", str(source), "--lr", "0.1", "--write", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("# symformer train:") and "is not rational" in text
    again = load_example(out)
    assert again.lm_head.tied  # the tie kept: the table is the trained embeddings


LEARNED = ONE_TOKEN.replace('vocab = ["a"]', 'vocab = ["a", "z"]').replace(
    "embeddings = [[2, -1]]", "embeddings = [[2, -1], [7, 9]]").replace(
    'positional_encoding = "none"',
    'positional_encoding = "learned"\npositional_embeddings = [[0, 0], [5, -5]]')


def test_write_round_trip_with_a_learned_table(tmp_path):
    # the one-token example of test_backward with position 0 adding (0, 0): the
    # gradient at x is (147/2048, -147/2048) (see test_train.hand_loss), which both
    # the embedding row of "a" and row 0 of the learned table receive; "z" and
    # position 1 are not read and stay exactly as they were
    source = tmp_path / "learned.toml"
    source.write_text(LEARNED)
    out = tmp_path / "trained.toml"
    assert main(["train", str(source), "--lr", "8/7", "--write", str(out)]) == 0
    written = load_example(str(out))
    step = R(8, 7) * R(147, 2048)  # 21/256
    assert written.embeddings == sympy.Matrix([[2 - step, -1 + step], [7, 9]])
    assert written.positional_embeddings == sympy.Matrix([[-step, step], [5, -5]])
    assert written.positional_encoding == "learned"
    t = train(derive(parse_example(LEARNED)), R(8, 7), 1)
    weights, irrational = rational_weights(t)
    assert irrational is None
    assert weights["embedding_table"] == written.embeddings
    assert weights["positional_embeddings"] == written.positional_embeddings
    assert written.layers[0].b_2 == weights["layer1.b_2"] == sympy.Matrix([[R(-3, 16),
                                                                              R(3, 16)]])


def _decoder_weights(example) -> dict[str, sympy.Matrix]:
    """Every decoder weight ``train`` names, each given new distinct rational values."""
    dec = example.decoder
    layer = dec.layers[0]
    counter = iter(range(1, 10 ** 6))

    def fresh(m: sympy.Matrix) -> sympy.Matrix:
        return sympy.Matrix(m.rows, m.cols, lambda i, j: R(next(counter), 7))

    weights = {"decoder.embedding_table": fresh(dec.embeddings),
               "W_vocab": fresh(dec.W_vocab),
               "decoder.layer1.self.W_O": fresh(layer.W_O_self),
               "decoder.layer1.cross.W_O": fresh(layer.W_O_cross),
               "decoder.layer1.W_1": fresh(layer.W_1), "decoder.layer1.b_2": fresh(layer.b_2),
               "decoder.layer1.add_norm3.gamma": fresh(layer.gamma_3),
               "embedding_table": fresh(example.embeddings)}
    for group, heads in (("self", layer.self_heads), ("cross", layer.cross_heads)):
        for k, head in enumerate(heads, start=1):
            for name in ("W_Q", "W_K", "W_V"):
                weights[f"decoder.layer1.{group}.head{k}.{name}"] = fresh(getattr(head, name))
    return weights


def test_decoder_weights_are_placed(tmp_path):
    example = load_example("encoder_decoder")
    weights = _decoder_weights(example)
    path = tmp_path / "written.toml"
    path.write_text(updated_example(example, weights))
    written = load_example(str(path))
    dec, layer = written.decoder, written.decoder.layers[0]
    assert dec.embeddings == weights["decoder.embedding_table"]
    assert written.embeddings == weights["embedding_table"]
    assert dec.W_vocab == weights["W_vocab"]
    assert layer.W_O_self == weights["decoder.layer1.self.W_O"]
    assert layer.W_O_cross == weights["decoder.layer1.cross.W_O"]
    assert layer.W_1 == weights["decoder.layer1.W_1"]
    assert layer.b_2 == weights["decoder.layer1.b_2"]
    assert layer.gamma_3 == weights["decoder.layer1.add_norm3.gamma"]
    for group, heads in (("self", layer.self_heads), ("cross", layer.cross_heads)):
        for k, head in enumerate(heads, start=1):
            for name in ("W_Q", "W_K", "W_V"):
                assert getattr(head, name) == weights[f"decoder.layer1.{group}.head{k}.{name}"]
    # what was not replaced is unchanged
    assert layer.W_2 == example.decoder.layers[0].W_2
    assert written.layers == example.layers


def test_every_trained_decoder_weight_has_a_place(tmp_path):
    # the names train gives encoder_decoder's weights all map to a key of the file
    from symformer.blocks.train import trained_weights

    source = tmp_path / "ce.toml"
    source.write_text(open(load_example("encoder_decoder").source).read()
                      + '\n[loss]\nkind = "cross_entropy"\ntargets = ["je", "pense"]\n')
    example = load_example(str(source))
    weights = {w.name: w.value for w in trained_weights(derive(example))}
    assert "decoder.embedding_table" in weights and "decoder.layer1.cross.W_O" in weights
    again = parse_example(updated_example(example, weights), source="again")
    for field in ("embeddings", "layers", "decoder", "lm_head"):
        assert getattr(again, field) == getattr(example, field), field
