"""``crosscheck EXAMPLE --torch --kv-cache``: an example file's PyTorch module run as
generation runs it (a prefill, then one token a call with its KV cache), against an
independent float64 forward written here from the example's weights (learned
positions, and RoPE: the cache's positions must continue after the prompt's).

The example is a small pre-norm decoder-only model (two heads, ReLU FFN, final
LayerNorm, an LM head) whose weights are multiples of 1/8 drawn here."""

from __future__ import annotations

import json

import numpy as np
import pytest

from symformer.cli import main

VOCAB = ["a", "b", "c", "d", "e", "f"]
D, DK, FF = 4, 2, 4


def _weights(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def w(*shape):
        return rng.integers(-8, 9, size=shape) / 8

    out = {"E": w(len(VOCAB), D), "P": w(8, D), "W_O": w(2 * DK, D), "b_O": w(D),
           "W_1": w(D, FF), "b_1": w(FF), "W_2": w(FF, D), "b_2": w(D),
           "W_vocab": w(D, len(VOCAB)) * 4}
    for h in (1, 2):
        for m in "QKV":
            out[f"W_{m}{h}"], out[f"b_{m}{h}"] = w(D, DK), w(DK)
    return out


def _toml(W: dict[str, np.ndarray], positions: str) -> str:
    def row(v):
        return "[" + ", ".join(repr(float(x)) for x in v) + "]"

    def mat(m):
        return "[" + ", ".join(row(r) for r in m) + "]"

    text = [f'title = "kv"\ntokens = ["a", "c", "b"]\nvocab = {json.dumps(VOCAB)}',
            f"embeddings = {mat(W['E'])}", f'positional_encoding = "{positions}"',
            'causal = true\nnorm = "pre"\nactivation = "relu"\neps = "1e-5"\n'
            "final_norm = true"]
    if positions == "learned":
        text.append(f"positional_embeddings = {mat(W['P'])}")
    text += [f"[lm_head]\nW_vocab = {mat(W['W_vocab'])}",
             "[[layer]]", *(f"{k} = {(mat if W[k].ndim == 2 else row)(W[k])}"
                            for k in ("W_O", "b_O", "W_1", "b_1", "W_2", "b_2"))]
    for h in (1, 2):
        text.append("[[layer.head]]")
        text += [f"{m} = {(mat if m.startswith('W') else row)(W[m + str(h)])}"
                 for m in ("W_Q", "b_Q", "W_K", "b_K", "W_V", "b_V")]
    return "\n".join(text) + "\n"


def _norm(x):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5)


def _rope(x):
    """Interleaved RoPE, base 10000: pair (2l, 2l+1) of position pos turned by
    pos * 10000^(-2l/d)."""
    n, d = x.shape
    angle = np.arange(n)[:, None] * 10000.0 ** (-2 * np.arange(d // 2) / d)
    a, b = x[:, 0::2], x[:, 1::2]
    out = np.empty_like(x)
    out[:, 0::2], out[:, 1::2] = a * np.cos(angle) - b * np.sin(angle), \
        a * np.sin(angle) + b * np.cos(angle)
    return out


def reference_logits(W, ids: list[int], positions: str) -> np.ndarray:
    """Every position's logits, float64, from the definitions (no cache, no symformer)."""
    n = len(ids)
    x = W["E"][ids] + (W["P"][:n] if positions == "learned" else 0)
    h = _norm(x)
    outs = []
    for k in (1, 2):
        q, kk, v = (h @ W[f"W_{m}{k}"] + W[f"b_{m}{k}"] for m in "QKV")
        if positions == "rope":
            q, kk = _rope(q), _rope(kk)
        s = q @ kk.T / np.sqrt(DK)
        s[np.triu(np.ones((n, n), bool), 1)] = -np.inf
        a = np.exp(s - s.max(1, keepdims=True))
        outs.append(a / a.sum(1, keepdims=True) @ v)
    x = x + np.concatenate(outs, 1) @ W["W_O"] + W["b_O"]
    x = x + np.maximum(_norm(x) @ W["W_1"] + W["b_1"], 0) @ W["W_2"] + W["b_2"]
    return _norm(x) @ W["W_vocab"]


@pytest.mark.parametrize("positions", ["learned", "rope"])
def test_the_modules_cached_path_against_an_independent_float64_forward(tmp_path, capsys,
                                                                        positions):
    torch = pytest.importorskip("torch")
    W = _weights(3)
    path = tmp_path / "kv.toml"
    path.write_text(_toml(W, positions), encoding="utf-8")
    assert main(["crosscheck", str(path), "--torch", "--kv-cache", "--steps", "3",
                 "--dtype", "float64", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    ids = [VOCAB.index(t) for t in doc["tokens"]]
    assert ids[:3] == [0, 2, 1]
    reference = reference_logits(W, ids, positions)
    for step in doc["steps"]:  # the exact greedy run is the float64 one here
        row = 3 + step["step"] - 2
        assert step["exact"] == [VOCAB[int(reference[row].argmax())]]
        assert not step["cached_flipped"]
    assert [VOCAB[int(reference[row].argmax())] for row in (2, 3)] == doc["tokens"][3:]
    cached = {r["stage"]: r for r in doc["cached"]}
    assert {"logits", "layer1.head1.K", "layer1.head2.output", "final_norm"} <= set(cached)
    assert all(r["rel_error"] < 1e-13 for r in doc["cached"])
    # the module's cached logits, call by call, against the reference
    from symformer.example import load_example
    from symformer.frameworks.torch_out import model_class

    model = model_class(load_example(str(path)))(dtype=torch.float64)
    cache: dict = {}
    rows = [model(ids[:3], cache=cache)["logits"]] + [model([t], cache=cache)["logits"]
                                                      for t in ids[3:]]
    got = torch.cat(rows).numpy()
    assert np.abs(got - reference).max() < 1e-12 * np.abs(reference).max()
    # in bfloat16 the reported drift is the cached path's distance to the reference
    assert main(["crosscheck", str(path), "--torch", "--kv-cache", "--steps", "3",
                 "--dtype", "bfloat16", "--json"]) in (0, 1)
    doc = json.loads(capsys.readouterr().out)
    model = model_class(load_example(str(path)))(dtype=torch.bfloat16)
    cache = {}
    with torch.no_grad():
        rows = [model(ids[:3], cache=cache)["logits"]] + [model([t], cache=cache)["logits"]
                                                          for t in ids[3:]]
    path_logits = torch.cat(rows).double().numpy()
    want = np.abs(path_logits - reference).max() / np.abs(reference).max()
    logits = {r["stage"]: r for r in doc["cached"]}["logits"]
    assert logits["rel_error"] == pytest.approx(want, rel=1e-6, abs=1e-12)
    for step in doc["steps"]:
        row = 3 + step["step"] - 2
        assert step["cached"] == VOCAB[int(path_logits[row].argmax())]
        assert step["cached_flipped"] == (step["cached"] not in step["exact"])


def test_the_refusals_are_one_line(capsys):
    pytest.importorskip("torch")
    for argv in (["crosscheck", "gpt2_style", "--kv-cache"],
                 ["crosscheck", "encoder_decoder", "--torch", "--kv-cache"]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and "--kv-cache" in err
