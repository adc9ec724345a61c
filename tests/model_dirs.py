"""Hugging Face model directories built in the tests (NumPy only: no torch, no blobs in
the repository): a valid tiny GPT-2, Llama or BERT, and the safetensors writer that
hostile variants are made with."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np

D, VOCAB, POSITIONS = 4, 6, 4
WORDS = ["the", "cat", "sat", "on", "mat", "."]


def safetensors_bytes(tensors: dict[str, np.ndarray], header_extra: dict[str, Any] | None = None,
                      header: Any = None, dtype: str = "F32") -> bytes:
    """A safetensors file of ``tensors`` (float32, or bfloat16's upper halves), its
    header replaced by ``header`` or extended by ``header_extra`` when given."""
    table: dict[str, Any] = {}
    blobs, offset = [], 0
    for name, t in tensors.items():
        if t.dtype.kind == "f" and dtype == "BF16":
            blob = (np.asarray(t, np.float32).view(np.uint32) >> 16).astype("<u2").tobytes()
            kind = "BF16"
        elif t.dtype.kind == "f":
            blob, kind = np.asarray(t, "<f4").tobytes(), "F32"
        else:
            blob, kind = np.asarray(t, "<i8").tobytes(), "I64"
        table[name] = {"dtype": kind, "shape": list(t.shape),
                       "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    table.update(header_extra or {})
    text = json.dumps(table if header is None else header).encode()
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def gpt2_tensors(seed: int = 0, d: int = D, vocab: int = VOCAB, layers: int = 1
                 ) -> dict[str, np.ndarray]:
    """The tensors of a random GPT-2 (``transformer.`` names, float32)."""
    rng = np.random.default_rng(seed)
    shapes = {"wte.weight": (vocab, d), "wpe.weight": (POSITIONS, d), "ln_f.weight": (d,),
              "ln_f.bias": (d,)}
    for i in range(layers):
        b = f"h.{i}."
        shapes |= {b + "ln_1.weight": (d,), b + "ln_1.bias": (d,), b + "ln_2.weight": (d,),
                   b + "ln_2.bias": (d,), b + "attn.c_attn.weight": (d, 3 * d),
                   b + "attn.c_attn.bias": (3 * d,), b + "attn.c_proj.weight": (d, d),
                   b + "attn.c_proj.bias": (d,), b + "mlp.c_fc.weight": (d, 4 * d),
                   b + "mlp.c_fc.bias": (4 * d,), b + "mlp.c_proj.weight": (4 * d, d),
                   b + "mlp.c_proj.bias": (d,)}
    return {"transformer." + k: rng.normal(size=s).astype(np.float32)
            for k, s in shapes.items()}


def gpt2_config(**changes: Any) -> dict[str, Any]:
    """A GPT-2 config.json (as transformers writes one), with ``changes``."""
    config = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_embd": D,
              "n_head": 2, "n_layer": 1, "vocab_size": VOCAB, "n_positions": POSITIONS,
              "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05,
              "n_inner": None, "tie_word_embeddings": True}
    config.update(changes)
    return config


_DEFAULT = object()


def gpt2_dir(folder: Path, *, config: Any = _DEFAULT, tensors: dict[str, np.ndarray] | None = None,
             weights: bytes | None = None, vocab: Any = None, dtype: str = "F32") -> Path:
    """A tiny GPT-2 directory: config.json, model.safetensors and vocab.json, each
    replaceable (``config``: the JSON value; ``weights``: the file's bytes)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(gpt2_config() if config is _DEFAULT else config))
    if weights is None:
        weights = safetensors_bytes(gpt2_tensors() if tensors is None else tensors, dtype=dtype)
    (folder / "model.safetensors").write_bytes(weights)
    (folder / "vocab.json").write_text(json.dumps(
        {w: i for i, w in enumerate(WORDS)} if vocab is None else vocab))
    return folder


def llama_dir(folder: Path, **changes: Any) -> Path:
    """A tiny Llama with two query heads sharing one key/value head."""
    rng = np.random.default_rng(1)
    d, inner, hd = D, 6, 2
    shapes = {"model.embed_tokens.weight": (VOCAB, d), "model.norm.weight": (d,),
              "model.layers.0.input_layernorm.weight": (d,),
              "model.layers.0.post_attention_layernorm.weight": (d,),
              "model.layers.0.self_attn.q_proj.weight": (2 * hd, d),
              "model.layers.0.self_attn.k_proj.weight": (hd, d),
              "model.layers.0.self_attn.v_proj.weight": (hd, d),
              "model.layers.0.self_attn.o_proj.weight": (d, 2 * hd),
              "model.layers.0.mlp.gate_proj.weight": (inner, d),
              "model.layers.0.mlp.up_proj.weight": (inner, d),
              "model.layers.0.mlp.down_proj.weight": (d, inner),
              "lm_head.weight": (VOCAB, d)}
    tensors = {k: rng.normal(size=s).astype(np.float32) for k, s in shapes.items()}
    config = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": d,
              "intermediate_size": inner, "num_attention_heads": 2, "num_key_value_heads": 1,
              "num_hidden_layers": 1, "vocab_size": VOCAB, "hidden_act": "silu",
              "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "tie_word_embeddings": False,
              **changes}
    return gpt2_dir(folder, config=config, tensors=tensors)
