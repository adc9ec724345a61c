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
    memory = np.array([[1, 0, 1], [0, 2, 1], [1, 1, 0]], dtype=float)  # width 3, as given
    x = np.array([[1, 0]], dtype=float)  # "<s>", width 2, no positional encoding
    W_Q, W_K = np.eye(2), np.array([[1, 0], [0, 1], [1, 1]], dtype=float)
    W_V = np.array([[1, 0], [0, 1], [0, 0]], dtype=float)
    weights = _softmax((x @ W_Q) @ (memory @ W_K).T / np.sqrt(2))
    z = weights @ (memory @ W_V)  # no residual, no LayerNorm, no FFN
    W_vocab = np.array([[0, 1, 0.5, -1, 1.5], [0, 0.5, 1, 2, -1]])
    assert np.allclose(_floats(g["probabilities"]), _softmax(z @ W_vocab), atol=1e-12)
    names = set(g.stages)
    assert "decoder.layer1.self.head1.Q" not in names and "decoder.layer1.ffn.hidden" \
        not in names and "decoder.layer1.add_norm2" not in names


def test_a_decoder_only_block_with_a_bias_free_ffn_matches_float64():
    example = load_example("decoder_only_block")
    g = derive(example)
    assert not any(".cross." in name for name in g.stages)
    x = _floats(g["decoder.input"])
    s = x @ x.T / np.sqrt(2)  # W_Q = W_K = W_V = I
    s[np.triu_indices(len(x), 1)] = -np.inf
    h = x + _softmax(s) @ x

    def norm(v):
        mu = v.mean(axis=-1, keepdims=True)
        return (v - mu) / np.sqrt(((v - mu) ** 2).mean(axis=-1, keepdims=True) + 1e-6)
    h = norm(h)
    W_1 = np.array([[1, 0, 1], [0, 1, -1]], dtype=float)
    W_2 = np.array([[0.5, 0], [0, 0.5], [0.5, -0.5]])
    out = norm(h + np.maximum(h @ W_1, 0) @ W_2)
    assert np.allclose(_floats(g["decoder.output"]), out, atol=1e-9)


def test_stop_forced_and_minimum_length(capsys):
    assert main(["generate", "decoder_only_block", "--steps", "2", "--json"]) == 0
    steps = json.loads(capsys.readouterr().out)["steps"]
    assert steps[0]["next_token"] == "see"  # forced, though "I" is the argmax
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
