"""Decoders as people teach them: optional sub-layers, a memory of another width, no
residual, stop and forced tokens, a minimum length -- each shipped example checked
against an independent float64 computation written here, and bad tables refused."""

from __future__ import annotations

import json

import numpy as np

from symformer import derive, load_example, parse_example
from symformer.cli import main
from symformer.cli.generate import DEFAULT_EXAMPLE


def _floats(stage) -> np.ndarray:
    return np.array([[float(v) for v in row] for row in stage.values(decimals=15)])


def _softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_cross_attention_only_with_a_memory_of_another_width_matches_float64():
    example = load_example("cross_attention_decoder")
    g = derive(example)
    x = np.array([[1, 0, 1], [0, 2, 1], [1, 1, 0]], dtype=float)  # the source, width 3
    memory = x + _softmax(x @ x.T / np.sqrt(3)) @ (x / 2)  # W_Q = W_K = I, W_V = I/2
    assert np.allclose(_floats(g["output"]), memory, atol=1e-12)
    y = np.array([[1, 0]], dtype=float)  # "<s>", width 2, no positional encoding
    W_K = np.array([[1, 0], [0, 1], [1, 1]], dtype=float)
    W_V = np.array([[1, 0], [0, 1], [0, 0]], dtype=float)
    weights = _softmax(y @ (memory @ W_K).T / np.sqrt(2))  # W_Q = I
    z = weights @ (memory @ W_V)  # no residual, no LayerNorm, no FFN
    W_vocab = np.array([[0, 1, 0.5, -1, 1.5], [0, 0.5, 1, 2, -1]])
    assert np.allclose(_floats(g["probabilities"]), _softmax(z @ W_vocab), atol=1e-12)
    names = set(g.stages)
    assert "decoder.layer1.self.head1.Q" not in names and "decoder.layer1.ffn.hidden" \
        not in names and "decoder.layer1.add_norm2" not in names


def _norm(v: np.ndarray) -> np.ndarray:
    mu = v.mean(axis=-1, keepdims=True)
    return (v - mu) / np.sqrt(((v - mu) ** 2).mean(axis=-1, keepdims=True) + 1e-6)


def test_optional_sub_layers_layer_by_layer_match_float64():
    g = derive(load_example("decoder_only_block"))
    names = set(g.stages)
    assert not any(n.startswith("decoder.layer1.cross") for n in names)
    assert not any(n.startswith(("decoder.layer2.self", "decoder.layer2.ffn")) for n in names)
    x = _floats(g["decoder.input"])
    s = x @ x.T / np.sqrt(2)  # W_Q = W_K = W_V = I
    s[np.triu_indices(len(x), 1)] = -np.inf
    h = _norm(x + _softmax(s) @ x)
    W_1 = np.array([[1, 0, 1], [0, 1, -1]], dtype=float)
    W_2 = np.array([[0.5, 0], [0, 0.5], [0.5, -0.5]])
    h = _norm(h + np.maximum(h @ W_1, 0) @ W_2)  # no b_1, b_2
    assert np.allclose(_floats(g["decoder.layer1.add_norm3"]), h, atol=1e-9)
    memory = _floats(g["output"])
    out = _norm(h + _softmax(h @ memory.T / np.sqrt(2)) @ memory)  # cross alone
    assert np.allclose(_floats(g["decoder.output"]), out, atol=1e-9)


def test_stop_forced_and_minimum_length(capsys):
    assert main(["generate", "decoder_only_block", "--steps", "2", "--json"]) == 0
    steps = json.loads(capsys.readouterr().out)["steps"]
    assert steps[0]["next_token"] == "see"  # forced, though "." is the argmax
    assert main(["generate", "decoder_only_block", "--steps", "5", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["generated"][-1] == "."  # a stop token
    assert main(["generate", "decoding_lesson", "--steps", "3", "--min-new-tokens", "0",
                 "--greedy", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["generated"][-2:] == ["mat", "<EOS>"]
    assert main(["generate", "decoding_lesson", "--steps", "2", "--json"]) == 0
    generated = json.loads(capsys.readouterr().out)["generated"]
    assert "<EOS>" not in generated and len(generated) == 2  # masked for two steps


def _decoder_text(layer: str) -> str:
    text = DEFAULT_EXAMPLE.read_text()
    head, _, _ = text.partition("[[decoder.layer]]")
    return head + layer


def test_bad_decoder_layers_are_one_line_and_exit_2(tmp_path, capsys):
    cases = {
        "[[decoder.layer]]\nW_2 = [[1, 0, 0, 0]]\n": "W_2 is given without W_1",
        "[[decoder.layer]]\nresidual = 1\nW_1 = [[1], [1], [1], [1]]\nW_2 = [[1, 0, 0, 0]]\n":
            "residual must be true or false",
        "[[decoder.layer]]\n": "the layer has no sub-layer",
    }
    for layer, message in cases.items():
        path = tmp_path / "bad.toml"
        path.write_text(_decoder_text(layer))
        assert main(["derive", str(path)]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and "\n" not in err, err


def test_residual_false_drops_the_sum():
    text = _decoder_text("""[[decoder.layer]]
residual = false
[[decoder.layer.self_head]]
W_Q = [[1, 0], [0, 1], [0, 0], [0, 0]]
W_K = [[1, 0], [0, 1], [0, 0], [0, 0]]
W_V = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
""")
    g = derive(parse_example(text, "residual.toml"))
    assert "decoder.layer1.add_norm1.sum" not in g.stages
    assert _floats(g["decoder.layer1.add_norm1"]).shape == (2, 4)
