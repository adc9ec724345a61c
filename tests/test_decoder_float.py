"""The decoder against an independent float64 implementation, on random examples.

``float_decoder`` below is written from the textbook formulas (masked self-attention,
cross-attention over the encoder's output, feed-forward, Add & Norm) in plain NumPy;
it shares nothing with symformer's engine.  The encoder's output comes from the
independent float pass in ``float_reference.py``.
"""

from __future__ import annotations

from math import sqrt

import numpy as np
from float_reference import _ffn, as_float, float_forward
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symformer import derive
from symformer.example.loader import example_from_dict

TOLERANCE = 1e-12


def _sinusoid(n: int, d: int) -> np.ndarray:
    pe = np.zeros((n, d))
    for pos in range(n):
        for j in range(d):
            angle = pos / 10000.0 ** ((j - j % 2) / d)
            pe[pos, j] = np.sin(angle) if j % 2 == 0 else np.cos(angle)
    return pe


def _norm(z, layer, k, name, out):
    gamma = as_float(getattr(layer, f"gamma_{k}"))
    beta = as_float(getattr(layer, f"beta_{k}"))
    mu = z.mean(axis=1, keepdims=True)
    if layer.layer_norm == "unbiased":
        var = z.var(axis=1, ddof=1, keepdims=True)
        y = gamma * (z - mu) / (np.sqrt(var) + float(layer.eps)) + beta
    else:
        var = z.var(axis=1, keepdims=True)
        y = gamma * (z - mu) / np.sqrt(var + float(layer.eps)) + beta
    out[f"{name}.mean"], out[f"{name}.variance"], out[name] = mu, var, y
    out[f"{name}.std"] = (np.sqrt(var) if layer.layer_norm == "unbiased"
                          else np.sqrt(var + float(layer.eps)))
    out[f"{name}.output_mean"] = y.mean(axis=1, keepdims=True)  # the output's own
    out[f"{name}.output_variance"] = y.var(axis=1, keepdims=True)
    return y


def _attention(z, memory, heads, W_O, name, causal, out):
    results = []
    for k, head in enumerate(heads, start=1):
        q = z @ as_float(head.W_Q)
        key, value = memory @ as_float(head.W_K), memory @ as_float(head.W_V)
        raw = q @ key.T
        scores = raw / sqrt(head.d_k)
        if causal:  # position i sees positions 0..i
            scores = np.where(np.triu(np.ones(scores.shape, bool), k=1), -np.inf, scores)
        e = np.exp(scores - scores.max(axis=1, keepdims=True))
        weights = e / e.sum(axis=1, keepdims=True)
        h = f"{name}.head{k}"
        out[f"{h}.Q"], out[f"{h}.K"], out[f"{h}.V"] = q, key, value
        out[f"{h}.raw_scores"], out[f"{h}.scores"] = raw, scores
        out[f"{h}.weights"], out[f"{h}.output"] = weights, weights @ value
        results.append(weights @ value)
    concat = np.concatenate(results, axis=1)
    out[f"{name}.concat"] = concat
    out[f"{name}.output"] = concat if W_O is None else concat @ as_float(W_O)
    return out[f"{name}.output"]


def float_decoder(example) -> dict[str, np.ndarray]:
    """Every decoder stage in float64, keyed by symformer's stage names."""
    memory = float_forward(example, causal=example.causal)["output"]
    dec, out = example.decoder, {}
    n, d = len(dec.tokens), example.d_model
    x = as_float(dec.embeddings)[list(dec.token_ids)]
    if dec.positional_encoding == "sinusoidal":
        x = x + _sinusoid(n, d)
    out["decoder.input"] = x
    for number, layer in enumerate(dec.layers, start=1):
        p = f"decoder.layer{number}"
        sublayers = (
            lambda z, p=p, layer=layer: _attention(z, z, layer.self_heads, layer.W_O_self,
                                                    f"{p}.self", True, out),
            lambda z, p=p, layer=layer: _attention(z, memory, layer.cross_heads,
                                                    layer.W_O_cross, f"{p}.cross", False, out),
            lambda z, p=p, layer=layer: _ffn(z, layer, p, out),
        )
        for k, sublayer in enumerate(sublayers, start=1):
            if layer.norm == "post":
                total = x + sublayer(x)
                out[f"{p}.add_norm{k}.sum"] = total
                x = _norm(total, layer, k, f"{p}.add_norm{k}", out)
            else:
                x = x + sublayer(_norm(x, layer, k, f"{p}.norm{k}", out))
                out[f"{p}.add_norm{k}"] = x
    out["decoder.output"] = x
    if dec.W_vocab is not None:
        logits = x @ as_float(dec.W_vocab)
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        out["logits"], out["probabilities"] = logits, e / e.sum(axis=1, keepdims=True)
    return out


# -- random examples ---------------------------------------------------------------

@st.composite
def decoder_examples(draw):
    """A random encoder-decoder example with small rational weights (quarters)."""
    d = draw(st.sampled_from([2, 4]))
    quarter = st.integers(-4, 4).map(lambda k: f"{k}/4")

    def mat(rows: int, cols: int) -> list[list[str]]:
        return [[draw(quarter) for _ in range(cols)] for _ in range(rows)]

    def heads() -> list[dict]:
        d_k = draw(st.integers(1, 2))
        return [{"W_Q": mat(d, d_k), "W_K": mat(d, d_k), "W_V": mat(d, d_k)}
                for _ in range(draw(st.integers(1, 2)))]

    def ffn() -> dict:
        d_ff = draw(st.integers(1, 3))
        return {"W_1": mat(d, d_ff), "b_1": mat(1, d_ff)[0], "W_2": mat(d_ff, d),
                "b_2": mat(1, d)[0], "activation": draw(st.sampled_from(["relu", "gelu"]))}

    enc_heads = heads()
    self_heads, cross_heads = heads(), heads()
    target_vocab = ["<s>", "x", "y", "</s>"]
    return {
        "tokens": draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3)),
        "vocab": ["a", "b", "c"],
        "embeddings": mat(3, d),
        "eps": "1/10",  # keeps float64's LayerNorm well conditioned on near-constant rows
        "norm": draw(st.sampled_from(["post", "pre"])),
        "layer_norm": draw(st.sampled_from(["biased", "unbiased"])),
        "layer": [{"head": enc_heads,
                   "W_O": mat(sum(len(h["W_V"][0]) for h in enc_heads), d), **ffn()}],
        "decoder": {
            "tokens": ["<s>", *draw(st.lists(st.sampled_from(target_vocab), max_size=2))],
            "vocab": target_vocab,
            "embeddings": mat(4, d),
            "W_vocab": mat(d, 4),
            "layer": [{"self_head": self_heads, "cross_head": cross_heads,
                       "W_O_self": mat(sum(len(h["W_V"][0]) for h in self_heads), d),
                       "W_O_cross": mat(sum(len(h["W_V"][0]) for h in cross_heads), d),
                       "gamma_3": mat(1, d)[0], "beta_2": mat(1, d)[0], **ffn()}
                      for _ in range(draw(st.integers(1, 2)))],
        },
        "stages": {"output_moments": True},  # every LayerNorm output's mean and variance
    }


def _as_numbers(values: list[list[str]]) -> np.ndarray:
    return np.array([[float(v) for v in row] for row in values])


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(decoder_examples())
def test_every_decoder_stage_agrees_with_float64(data):
    example = example_from_dict(data, "<random>")
    g = derive(example)
    reference = float_decoder(example)
    decoder_stages = [s.name for s in g if s.side == "decoder" and s.name != "next_token"]
    assert set(decoder_stages) - {"decoder.embeddings", "decoder.positional_encoding"} \
        == set(reference)
    for name, expected in reference.items():
        got = _as_numbers(g[name].values(decimals=18))
        assert got.shape == expected.shape, name
        masked = np.isinf(expected)
        assert np.array_equal(masked, np.isinf(got)), name
        got, expected = got[~masked], expected[~masked]
        error = np.abs(got - expected)
        assert (error <= TOLERANCE * np.maximum(1.0, np.abs(expected))).all(), (name, got,
                                                                               expected)
    logits = reference["logits"][-1]
    top, second = np.sort(logits)[::-1][:2]
    if top - second > 1e-9:  # float64 can name the winner: the engine must agree
        assert g.next_token().token == example.decoder.vocab[int(np.argmax(logits))]
