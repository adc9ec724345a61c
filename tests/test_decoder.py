"""The decoder's stages: names, masking, what cross-attention reads, exact ties, bad tables."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from test_decoder_float import float_decoder

from symformer import derive, load_example, parse_example
from symformer.cli import main

EXAMPLE = Path(__file__).parent.parent / "symformer" / "examples" / "encoder_decoder.toml"
TEXT = EXAMPLE.read_text(encoding="utf-8")


def with_decoder(text: str = TEXT, **replace: str) -> str:
    """The packaged example with some decoder keys' values replaced (TOML text)."""
    for key, value in replace.items():
        multi_line = re.compile(rf"^{key} = \[\n.*?\n\]", re.S | re.M)
        one_line = re.compile(r'^tokens = \["<s>".*$' if key == "tokens" else rf"^{key} = .*$",
                              re.M)
        pattern = multi_line if multi_line.search(text) else one_line
        text, count = pattern.subn(f"{key} = {value}", text, count=1)
        assert count == 1, key
    return text


@pytest.fixture(scope="module")
def example():
    return load_example(EXAMPLE)


@pytest.fixture(scope="module")
def g(example):
    return derive(example)


def test_stage_names_follow_the_issue(g):
    names = [s.name for s in g if s.side == "decoder"]
    expected = ["decoder.embeddings", "decoder.positional_encoding", "decoder.input"]
    for kind in ("self", "cross"):
        for k in (1, 2):
            expected += [f"decoder.layer1.{kind}.head{k}.{part}" for part in
                         ("Q", "K", "V", "raw_scores", "scores", "weights", "output")]
    expected += ["decoder.layer1.self.output", "decoder.layer1.add_norm1",
                 "decoder.layer1.cross.output", "decoder.layer1.add_norm2",
                 "decoder.layer1.ffn.hidden", "decoder.layer1.ffn.activation",
                 "decoder.layer1.ffn.output", "decoder.layer1.add_norm3", "decoder.output",
                 "logits", "probabilities", "next_token"]
    assert set(expected) <= set(names)
    assert [s.name for s in g if s.side == "encoder"][-1] == "output"
    assert g["decoder.layer1.cross.head1.weights"].rows == ("<s>", "je")
    assert g["decoder.layer1.cross.head1.weights"].cols == g.example.tokens
    assert g["probabilities"].cols == ("<s>", "je", "pense", "comprends", "</s>")


def test_pre_norm_decoder_names_its_norms():
    g = derive(parse_example(TEXT.replace("[[decoder.layer]]", '[[decoder.layer]]\nnorm = "pre"')))
    for k in (1, 2, 3):
        assert g[f"decoder.layer1.norm{k}"].kind == "layer_norm"
        assert g[f"decoder.layer1.add_norm{k}"].kind == "residual"


def test_cross_attention_keys_and_values_read_only_the_encoder_output(g):
    for part in ("K", "V"):
        stage = g[f"decoder.layer1.cross.head1.{part}"]
        assert stage.inputs == ("output",)
        owners = {g.owner(s)[0] for s in stage.local.free_symbols}
        assert owners == {"output"}


def test_masked_self_attention_weights_are_exactly_zero_above_the_diagonal(g):
    for k in (1, 2):
        balls = g[f"decoder.layer1.self.head{k}.weights"].balls()
        for i, row in enumerate(balls):
            for j, w in enumerate(row):
                assert (w.is_exact() and w == 0) == (j > i)


def test_a_future_target_token_changes_nothing_before_it():
    three = lambda last: derive(parse_example(  # noqa: E731
        with_decoder(tokens=f'["<s>", "je", "{last}"]')))
    a, b = three("pense"), three("comprends")
    changed_rows = 0
    for stage in a:
        if stage.side != "decoder" or stage.name == "next_token":
            continue
        values_a, values_b = (x[stage.name].values(decimals=30) for x in (a, b))
        if stage.rows[0] == "<s>" and len(stage.rows) == 3:  # one row per target token
            if stage.cols == stage.rows:  # self-attention scores: masked pairs aside
                values_a, values_b = ([row[:i + 1] for i, row in enumerate(v)]
                                      for v in (values_a, values_b))
            assert values_a[:2] == values_b[:2], stage.name
            changed_rows += values_a[2] != values_b[2]
        else:  # cross-attention keys and values: one row per source token
            assert values_a == values_b, stage.name
    assert changed_rows > 10  # the last position did see the change


def test_logits_and_probabilities_match_float64(g, example):
    reference = float_decoder(example)
    for name in ("logits", "probabilities"):
        got = np.array([[float(v) for v in row] for row in g[name].values(decimals=18)])
        assert np.allclose(got, reference[name], rtol=0, atol=1e-12)
    expected = example.decoder.vocab[int(np.argmax(reference["logits"][-1]))]
    assert g.next_token().token == expected
    assert g["next_token"].values(decimals=0) == [
        ["1" if v == expected else "0" for v in example.decoder.vocab]]


# -- exact ties --------------------------------------------------------------------

def _with_vocab_columns(columns: list[list[str]]) -> str:
    rows = [list(r) for r in zip(*columns)]  # W_vocab is d_model x vocab
    return with_decoder(W_vocab="[" + ", ".join("[" + ", ".join(r) + "]" for r in rows) + "]")


def test_identical_columns_give_a_tie_never_broken():
    # "je" and "pense" share their W_vocab column, and win whenever that column's logit
    # is positive, which the float pass confirms.
    v = ["-1", "1", "-1", "-1"]
    minus_v = ["1", "-1", "1", "1"]
    text = _with_vocab_columns([["0"] * 4, v, v, minus_v, ["0"] * 4])
    example = parse_example(text)
    assert float_decoder(example)["logits"][-1][1] > 0
    g = derive(example)
    choice = g.next_token()
    assert choice.is_tie and choice.tokens == ("je", "pense") and choice.token is None
    assert str(choice) == "tie between 'je', 'pense'"
    assert g["next_token"].values(decimals=0) == [["0", "1", "1", "0", "0"]]


def test_a_tie_hidden_behind_a_layer_norm_is_proved():
    # Column "pense" = column "je" + (1, 1, 1, 1): the extra term is the row sum of a
    # LayerNorm output with beta = 0, exactly zero, though the formulas differ.
    je = ["-1", "0", "0", "0"]
    pense = ["0", "1", "1", "1"]
    example = parse_example(_with_vocab_columns([["0"] * 4, je, pense, ["0"] * 4,
                                                 ["0"] * 4]))
    assert float_decoder(example)["logits"][-1][1] > 0
    assert derive(example).next_token().tokens == ("je", "pense")


def test_a_near_tie_is_separated_not_called_a_tie():
    # "pense" = "je" + 1e-40 * (decoder output, dimension 3): no float64 sees the
    # difference, ball arithmetic at higher precision does; the sign comes from float64.
    column = ["-1", "1", "-1", "-1"]
    nudged = ["-1", "1", "-0.9999999999999999999999999999999999999999", "-1"]
    example = parse_example(_with_vocab_columns([["0"] * 4, column, nudged, ["0"] * 4,
                                                 ["0"] * 4]))
    output = float_decoder(example)["decoder.output"][-1]
    assert abs(output[2]) > 1e-3
    choice = derive(example).next_token()
    assert not choice.is_tie
    # logit(pense) - logit(je) = 1e-40 * output[2]
    assert choice.token == ("pense" if output[2] > 0 else "je")


# -- bad tables --------------------------------------------------------------------

@pytest.mark.parametrize("text, message", [
    (with_decoder(W_O_cross="[[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]]"),
     "decoder, layer 1: W_O_cross has shape 3x4, expected 4x4"),
    (with_decoder(tokens='["<s>", "tu"]'),
     "decoder: token 'tu' (position 1) is not in decoder.vocab"),
    (TEXT.replace("[[decoder.layer.cross_head]]", "[[decoder.layer.crosshead]]"),
     "decoder, layer 1: unknown key 'crosshead'"),
    (with_decoder(W_vocab="[[1, 0], [0, 1], [1, 1], [0, 0]]"),
     "decoder: W_vocab has shape 4x2, expected 4x5"),
    (TEXT.replace("W_V = [[0, 0], [0, 0], [0.5, 0], [0, 0.5]]\n\n[[decoder.layer.cross_head]]",
                  "W_V = [[0, 0], [0, 0], [0.5, 0]]\n\n[[decoder.layer.cross_head]]"),
     "decoder, layer 1, self_head 2: W_V has shape 3x2, expected 4x?"),
])
def test_bad_decoder_tables_exit_2_naming_the_problem(tmp_path, capsys, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    for command in (["derive", str(path), "--list"], ["generate", str(path)]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err
        assert err.count("\n") == 1
