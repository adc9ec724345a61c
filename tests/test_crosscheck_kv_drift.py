"""``crosscheck DIR --kv-cache``: a tiny GPT-2 and a tiny Llama built here (no hub) run
as generation runs them -- a prefill, then one token at a time with the cache -- in
bfloat16; the reported drift of the cached logits and each step's greedy token are
checked against this test's own run of transformers (float64 uncached as the
reference, bfloat16 with the cache as the path), and misuse is refused in one line."""

from __future__ import annotations

import inspect
import json

import numpy as np
import pytest
from model_dirs import gpt2_config, gpt2_dir, gpt2_tensors, llama_dir

from symformer.cli import main


def _gpt2(folder):
    tensors = gpt2_tensors(seed=1, d=8, vocab=6, layers=2)
    tensors["transformer.wpe.weight"] = np.random.default_rng(2).normal(
        size=(8, 8)).astype(np.float32)
    return gpt2_dir(folder, tensors=tensors,
                    config=gpt2_config(n_embd=8, n_layer=2, vocab_size=6, n_positions=8))


def _logits(folder, ids: list[int], prompt: int, dtype: str, cached: bool) -> np.ndarray:
    """transformers' logits of every position: one uncached forward, or a prefill of
    ``prompt`` tokens then one call a token with the cache."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    model = transformers.AutoModelForCausalLM.from_pretrained(
        folder, dtype=getattr(torch, dtype), local_files_only=True).eval()
    key = "cache" if "cache" in inspect.signature(model.forward).parameters \
        else "past_key_values"
    calls = [ids[:prompt]] + [[t] for t in ids[prompt:]] if cached else [ids]
    rows, past = [], None
    with torch.no_grad():
        for call in calls:
            out = model(torch.tensor([call]), **{key: past}, use_cache=cached)
            past = getattr(out, key) if cached else None
            rows.append(out.logits[0].double())
    return torch.cat(rows).numpy()


@pytest.mark.parametrize("build", [_gpt2, llama_dir], ids=["gpt2", "llama"])
def test_the_cached_drift_and_the_greedy_tokens_match_transformers(tmp_path, capsys, build):
    pytest.importorskip("torch")  # the model runs in PyTorch
    pytest.importorskip("transformers")
    folder = build(tmp_path / "m")
    assert main(["crosscheck", str(folder), "--tokens", "0,1,2", "--kv-cache", "--steps",
                 "3", "--dtype", "bfloat16", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    vocab = json.loads((folder / "vocab.json").read_text())
    ids = [vocab[t] for t in doc["tokens"]]
    reference = _logits(folder, ids, 3, "float64", cached=False)
    path = _logits(folder, ids, 3, "bfloat16", cached=True)
    logits = {r["stage"]: r for r in doc["cached"]}["logits"]
    want = np.abs(path - reference).max() / np.abs(reference).max()
    # the float64 reference is exact to ~1e-7 (transformers' Llama computes its RMSNorm
    # and rotary angles in float32 even in float64), the drift ~1e-2: well apart
    assert logits["rel_error"] == pytest.approx(want, rel=1e-3, abs=1e-9)
    assert logits["ulps"] == pytest.approx(want / 2 ** -7, rel=1e-3, abs=1e-7)
    names = {i: t for t, i in vocab.items()}
    assert len(doc["steps"]) == 3 and {r["stage"] for r in doc["uncached"]} == set(
        r["stage"] for r in doc["cached"]) >= {"logits", "final_norm", "layer1.norm1"}
    for step in doc["steps"]:
        row = 2 + step["step"] - 1
        assert step["cached"] == names[int(path[row].argmax())]
        assert step["exact"] == [names[int(reference[row].argmax())]]
        assert step["cached_flipped"] == (step["cached"] not in step["exact"])


def test_the_text_table_and_the_refusals(tmp_path, capsys):
    pytest.importorskip("torch")  # the model runs in PyTorch
    pytest.importorskip("transformers")
    folder = _gpt2(tmp_path / "m")
    assert main(["crosscheck", str(folder), "--tokens", "0,1", "--kv-cache", "--steps", "2",
                 "--dtype", "bfloat16"]) == 0
    out = capsys.readouterr().out
    assert "cached x eps" in out and "uncached x eps" in out and "step 2: exact" in out
    assert "greedy token flips at" in out
    for argv in (["crosscheck", "gpt2_style", "--kv-cache"],
                 ["crosscheck", str(folder), "--kv-cache", "--prompts", "p.txt"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "--kv-cache" in err
