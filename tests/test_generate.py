"""``symformer generate``: greedy steps against a float64 greedy decoder, ties, stopping."""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
from test_decoder import TEXT, _with_vocab_columns
from test_decoder_float import float_decoder

from symformer import load_example, parse_example
from symformer.cli import main
from symformer.cli.generate import DEFAULT_EXAMPLE


def float_greedy(example, steps: int) -> list[tuple[list[str], np.ndarray]]:
    """Greedy decoding in float64: (target so far, last-position probabilities) per step."""
    out = []
    for _ in range(steps):
        probabilities = float_decoder(example)["probabilities"][-1]
        out.append((list(example.decoder.tokens), probabilities))
        token = example.decoder.vocab[int(np.argmax(probabilities))]
        if token == "</s>":
            break
        example = dataclasses.replace(example, decoder=dataclasses.replace(
            example.decoder, tokens=example.decoder.tokens + (token,)))
    return out


def test_json_steps_follow_the_float64_greedy_decoder(capsys):
    assert main(["generate", "--steps", "5", "--json", "--decimals", "10"]) == 0
    document = json.loads(capsys.readouterr().out)
    expected = float_greedy(load_example(DEFAULT_EXAMPLE), 5)
    assert len(document["steps"]) == len(expected)  # stopped at </s>, not after 5 steps
    assert document["generated"][-1] == "</s>"
    for step, (tokens, probabilities) in zip(document["steps"], expected):
        assert step["tokens"] == tokens
        got = np.array([float(p) for p in step["probabilities"]])
        assert np.abs(got - probabilities).max() <= 0.5e-10 + 1e-15
        assert step["next_token"] == document["vocab"][int(np.argmax(probabilities))]
        assert step["tie"] is None


def test_table_shows_each_step_and_the_sentence(capsys):
    assert main(["generate", str(DEFAULT_EXAMPLE), "--steps", "1", "--decimals", "4"]) == 0
    out = capsys.readouterr().out
    expected = float_greedy(load_example(DEFAULT_EXAMPLE), 1)[0][1]
    header = next(line for line in out.splitlines() if line.startswith("step"))
    assert header.split()[4:9] == ["<s>", "je", "pense", "comprends", "</s>"]
    row = next(line for line in out.splitlines() if line.strip().startswith("1 "))
    cells = row.split()
    assert [float(c) for c in cells[3:8]] == [round(p, 4) for p in expected]
    assert "generated: <s> je " in out


def test_an_exact_tie_is_reported_and_stops_generation(tmp_path, capsys):
    v, minus_v = ["-1", "1", "-1", "-1"], ["1", "-1", "1", "1"]
    text = _with_vocab_columns([["0"] * 4, v, v, minus_v, ["0"] * 4])
    assert float_decoder(parse_example(text))["logits"][-1][1] > 0
    path = tmp_path / "tie.toml"
    path.write_text(text, encoding="utf-8")
    assert main(["generate", str(path), "--steps", "3"]) == 0
    out = capsys.readouterr().out
    assert "tie between 'je', 'pense'" in out
    assert "stopped at step 1" in out
    assert main(["generate", str(path), "--json"]) == 0
    step = json.loads(capsys.readouterr().out)["steps"]
    assert len(step) == 1 and step[0]["next_token"] is None
    assert step[0]["tie"] == ["je", "pense"]


def test_an_example_without_decoder_is_refused(capsys):
    builtin = DEFAULT_EXAMPLE.parent.parent / "example" / "builtin.toml"
    assert main(["generate", str(builtin)]) == 2
    assert "needs a [decoder] table with W_vocab" in capsys.readouterr().err


def test_an_example_without_w_vocab_is_refused(tmp_path, capsys):
    path = tmp_path / "no_vocab.toml"
    path.write_text(re.sub(r"^W_vocab = \[\n.*?\n\]\n", "", TEXT, flags=re.S | re.M),
                    encoding="utf-8")
    assert main(["generate", str(path)]) == 2
    assert "W_vocab" in capsys.readouterr().err
    assert main(["derive", str(path), "--list"]) == 0
    assert "decoder.output" in capsys.readouterr().out
