"""``export --format torch`` of decoders without every sub-layer (a decoder-only block, a
cross-attention-only layer, no FFN) and of an FFN-only encoder block: the written
module's forward against a float64 NumPy computation written here from the examples'
weights, and ``crosscheck --torch`` on every shipped decoder example."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from symformer import parse_example
from symformer.cli import main


def _softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _norm(v: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    mu = v.mean(axis=-1, keepdims=True)
    return (v - mu) / np.sqrt(((v - mu) ** 2).mean(axis=-1, keepdims=True) + eps)


def _sinusoid(n: int, d: int) -> np.ndarray:
    pos, j = np.arange(n)[:, None], np.arange(d)[None, :]
    angle = pos / 10000.0 ** (2 * (j // 2) / d)
    return np.where(j % 2 == 0, np.sin(angle), np.cos(angle))


def _exported(tmp_path, name: str):
    """The example's model.py, written by the CLI and imported (its stages by name)."""
    pytest.importorskip("torch")
    assert main(["export", name, "--format", "torch", "--out", str(tmp_path / name),
                 "--quiet"]) == 0
    spec = importlib.util.spec_from_file_location(f"model_{name}",
                                                  tmp_path / name / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {k: v.numpy() for k, v in module.Model()().items()}


def test_decoder_only_block_then_cross_attention_alone(tmp_path):
    """Layer 1: masked self-attention and a bias-free FFN (no cross head); layer 2:
    cross-attention alone; post-norm, sinusoidal positions."""
    s = _exported(tmp_path, "decoder_only_block")
    src = np.eye(2)
    memory = src + _softmax(src @ src.T / np.sqrt(2)) @ (src / 2)  # attention only
    emb = np.array([[1, 0], [0, 1], [1, 1], [-1, 1], [1, -1], [0, -1]], dtype=float)
    x = emb[[0, 1]] + _sinusoid(2, 2)
    scores = x @ x.T / np.sqrt(2)
    scores[np.triu_indices(2, 1)] = -np.inf
    h = _norm(x + _softmax(scores) @ x)
    W_1 = np.array([[1, 0, 1], [0, 1, -1]], dtype=float)
    W_2 = np.array([[0.5, 0], [0, 0.5], [0.5, -0.5]])
    h = _norm(h + np.maximum(h @ W_1, 0) @ W_2)
    out = _norm(h + _softmax(h @ memory.T / np.sqrt(2)) @ memory)
    W_vocab = np.array([[0, -1, 1, 0.5, 1, -1], [0, 1, 0.5, -1, 0, 1.5]])
    assert np.allclose(s["output"], memory, rtol=0, atol=1e-14)
    assert np.allclose(s["decoder.layer1.add_norm3"], h, rtol=0, atol=1e-13)
    assert np.allclose(s["decoder.output"], out, rtol=0, atol=1e-13)
    assert np.allclose(s["logits"], out @ W_vocab, rtol=0, atol=1e-13)
    assert not any(k.startswith(("decoder.layer1.cross", "decoder.layer2.self",
                                 "decoder.layer2.ffn", "decoder.layer1.add_norm2"))
                   for k in s)
    assert "decoder.layer2.add_norm2" in s  # cross-attention keeps its number


def test_cross_attention_only_with_a_memory_of_another_width(tmp_path):
    """No self-attention, no FFN, no residual, no LayerNorm; memory 3 wide, decoder 2."""
    s = _exported(tmp_path, "cross_attention_decoder")
    x = np.array([[1, 0, 1], [0, 2, 1], [1, 1, 0]], dtype=float)
    memory = x + _softmax(x @ x.T / np.sqrt(3)) @ (x / 2)
    y = np.array([[1, 0]], dtype=float)
    W_K = np.array([[1, 0], [0, 1], [1, 1]], dtype=float)
    W_V = np.array([[1, 0], [0, 1], [0, 0]], dtype=float)
    z = _softmax(y @ (memory @ W_K).T / np.sqrt(2)) @ (memory @ W_V)
    W_vocab = np.array([[0, 1, 0.5, -1, 1.5], [0, 0.5, 1, 2, -1]])
    assert np.allclose(s["decoder.output"], z, rtol=0, atol=1e-14)
    assert np.allclose(s["probabilities"], _softmax(z @ W_vocab), rtol=0, atol=1e-14)
    assert "decoder.layer1.add_norm2" not in s  # no residual: no stage for the sum


def test_an_ffn_only_encoder_block(tmp_path):
    """An attention block, then a block with no head (its Add & Norm is the first)."""
    torch = pytest.importorskip("torch")
    from symformer.frameworks.torch_out import model_class

    eye = "[[1, 0], [0, 1]]"
    example = parse_example(
        f'inputs = [[2, 0], [0, 1], [1, 1]]\nnorm = "post"\n[[layer]]\n[[layer.head]]\n'
        f"W_Q = {eye}\nW_K = {eye}\nW_V = [[1, 1], [0, 1]]\n"
        "[[layer]]\nW_1 = [[1, -1], [0, 1]]\nb_1 = [0.5, -0.5]\nW_2 = [[1, 0], [2, 1]]\n",
        "ffn_only.toml")
    s = {k: v.numpy() for k, v in model_class(example)(dtype=torch.float64)().items()}
    x = np.array([[2, 0], [0, 1], [1, 1]], dtype=float)
    h = _norm(x + _softmax(x @ x.T / np.sqrt(2)) @ x @ [[1, 1], [0, 1]])
    h = _norm(h + np.maximum(h @ [[1, -1], [0, 1]] + [0.5, -0.5], 0) @ [[1, 0], [2, 1]])
    assert np.allclose(s["layer2.add_norm1"], h, rtol=0, atol=1e-13)
    assert "layer2.add_norm2" not in s and "layer2.attention.output" not in s


@pytest.mark.parametrize("name", ["decoder_only_block", "cross_attention_decoder",
                                  "encoder_decoder", "decoding_lesson"])
def test_crosscheck_torch_on_every_shipped_decoder(name, capsys):
    pytest.importorskip("torch")
    assert main(["crosscheck", name, "--torch", "--tol", "1e-13"]) == 0
    out = capsys.readouterr().out
    assert "next_token" in out and "> tol" not in out
