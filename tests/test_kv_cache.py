"""The KV cache: prefill then decode steps, proved equal to the uncached run.

The values are compared with an independent float64 cached decoder written here
(NumPy: keys and values appended row by row, one new query row), and the exact proof
is checked to fail where it must (a non-causal decoder, whose earlier rows change when
a token is appended, so no cache is valid).
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from symformer import load_example
from symformer.blocks.generate import generate, run_derivation
from symformer.blocks.kv_cache import _cache_step, cached_heads, prove_cache
from symformer.cli import main


@pytest.mark.parametrize("name", ["encoder_decoder", "gpt2_style", "llama_style",
                                  "decoding_lesson", "decoder_only_block"])
def test_cached_equals_uncached_is_proved_for_every_shipped_decoder(name):
    steps = generate(load_example(name), 2)
    run = run_derivation(steps, kv_cache=True)
    heads = cached_heads(run)
    assert heads
    proof = prove_cache(run, len(steps), heads)
    assert proof.equal and not proof.failed
    assert len(proof.proved) == len(heads) * len(steps)


def test_the_cache_grows_one_row_per_step_and_holds_the_full_passs_rows():
    steps = generate(load_example("gpt2_style"), 3)
    run = run_derivation(steps, kv_cache=True)
    for t, step in enumerate(steps, start=1):
        cache = run[f"step{t}.layer1.head1.K_cache"]
        assert cache.shape[0] == len(step.tokens)  # the prompt, then one row per step
        full = step.derivation["layer1.head1.K"].values(decimals=12)
        assert cache.values(decimals=12) == full
        new = run[f"step{t}.layer1.head1.output_new"].values(decimals=12)
        assert new == step.derivation["layer1.head1.output"].values(decimals=12)[-1:]


def _float_cached_head(X_steps, W_Q, W_K, W_V, b_Q, b_K, b_V):
    """A float64 KV-cached head: per step, the new row's query against the cache."""
    K, V, outputs = None, None, []
    for X in X_steps:
        rows = X if K is None else X[-1:]  # prefill: the prompt; then the new row only
        K = rows @ W_K + b_K if K is None else np.vstack([K, rows @ W_K + b_K])
        V = rows @ W_V + b_V if V is None else np.vstack([V, rows @ W_V + b_V])
        q = X[-1:] @ W_Q + b_Q
        s = q @ K.T / np.sqrt(W_K.shape[1])
        w = np.exp(s - s.max())
        outputs.append((w / w.sum()) @ V)
    return outputs


def test_the_new_query_row_matches_an_independent_float64_cache():
    example = load_example("gpt2_style")
    steps = generate(example, 3)
    run = run_derivation(steps, kv_cache=True)
    head = example.layers[0].heads[0]
    W = [np.array(m.tolist(), dtype=float) for m in (head.W_Q, head.W_K, head.W_V,
                                                     head.b_Q, head.b_K, head.b_V)]
    inputs = []
    for step in steps:  # the head's input rows as the full pass computes them
        g = step.derivation
        x = g[g["layer1.head1.Q"].inputs[0]]
        inputs.append(np.array([[float(v) for v in r] for r in x.values(decimals=15)]))
    for t, out in enumerate(_float_cached_head(inputs, *W), start=1):
        got = [float(v) for v in run[f"step{t}.layer1.head1.output_new"].values(decimals=12)[0]]
        assert np.allclose(got, out[0], atol=1e-9)


def test_a_non_causal_decoder_has_no_valid_cache_and_the_proof_says_so():
    """Two non-causal layers: layer 2's keys read layer 1's rows, which read the new
    token, so its cache is wrong; layer 1's keys read only the embeddings, so caching
    them is right (and proved), even without the mask."""
    example = load_example("encoder_decoder")
    decoder = example.decoder
    example = dataclasses.replace(example, decoder=dataclasses.replace(
        decoder, causal=False, layers=decoder.layers * 2))
    steps = generate(example, 2)
    run = run_derivation(steps)
    assert cached_heads(run) == []  # not offered
    heads = ["decoder.layer1.self.head1", "decoder.layer2.self.head1"]
    for t in (1, 2):  # forced
        for head in heads:
            _cache_step(run, t, head)
    proof = prove_cache(run, 2, heads)
    assert not proof.equal
    assert [f.split(":")[0] for f in proof.failed] == ["step 2, decoder.layer2.self.head1"]


def test_generate_kv_cache_prints_the_proof_and_the_growing_cache(capsys):
    assert main(["generate", "gpt2_style", "--steps", "2", "--kv-cache", "--stage",
                 "step*.layer1.head1.K_cache"]) == 0
    out = capsys.readouterr().out
    assert "proved: cached = uncached exactly" in out
    assert "step2.layer1.head1.K_cache  (4x2" in out
    assert main(["generate", "gpt2_style", "--steps", "2", "--kv-cache", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kv_cache"]["equal"] is True
