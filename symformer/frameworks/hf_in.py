"""A Hugging Face model directory (``config.json`` + ``model.safetensors``) as an example.

No torch: the weights are read with ``safetensors``' NumPy loader (bfloat16 tensors,
which NumPy lacks, are widened to float32 bit for bit here), and every weight is kept
as the exact dyadic rational it is (:mod:`symformer.frameworks.weights`).  Numbers of
``config.json`` (``layer_norm_epsilon``, ``rope_theta``) are read from their JSON text
exactly: ``1e-05`` is 1/100000, the value the configuration states (PyTorch itself
adds the nearest float to it).

Supported: GPT-2 (``gpt2``), Llama-style decoders (``llama``, ``mistral``, ``qwen2``:
RMSNorm, rotary embeddings without scaling, SwiGLU, grouped-query attention), BERT
encoders (``bert``, ``roberta``, ``distilbert``: token types, the embedding LayerNorm,
the masked-LM head; :mod:`symformer.frameworks.hf_bert`).  What a
model has that symformer does not compute is refused with one line naming it.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from symformer.errors import InputError, NotSupportedError
from symformer.example.loader import MAX_FILE_BYTES, example_from_dict
from symformer.example.numbers import DecimalText
from symformer.example.schema import Example
from symformer.frameworks.hf_config import (
    config_number,
    has_tensor,
    hf_activation,
    refuse,
    tensor,
)
from symformer.frameworks.weights import example_text, printable, row, rows

#: The largest ``model.safetensors`` read, in bytes (exact examples of bigger models
#: would not derive in any time a user waits for anyway).
MAX_WEIGHT_BYTES = 256 * 2**20


def from_pretrained(directory: str | Path, tokens: Sequence[int | str],
                    segments: Sequence[int] | None = None) -> Example:
    """The exact example of a Hugging Face model directory, on the sentence ``tokens``
    (ids, or token strings of the vocabulary the directory carries); ``segments``: a
    BERT model's token types (``token_type_ids``; default all 0)."""
    data, _, source = pretrained_data(directory, tokens, segments)
    return example_from_dict(data, source)  # the same table the file holds, not re-read


def pretrained_text(directory: str | Path, tokens: Sequence[int | str],
                    segments: Sequence[int] | None = None) -> tuple[str, str]:
    """The example file's TOML text of a Hugging Face directory, and its source name."""
    data, comments, source = pretrained_data(directory, tokens, segments)
    return example_text(data, comments), source


def pretrained_data(directory: str | Path, tokens: Sequence[int | str],
                    segments: Sequence[int] | None = None
                    ) -> tuple[dict[str, Any], list[str], str]:
    """The example table of a Hugging Face directory, its provenance comments and its
    source name."""
    if segments is not None and len(segments) != len(tokens):
        raise InputError(f"segments: {len(segments)} token types for {len(tokens)} tokens")
    folder = Path(directory)
    config = read_config(folder)
    weights, dtypes = read_safetensors(folder / "model.safetensors")
    kind = config.get("model_type")
    if kind == "gpt2":
        data = _gpt2(config, weights)
    elif kind in ("llama", "mistral", "qwen2"):
        data = _llama(config, weights)
    elif kind in ("bert", "roberta", "distilbert"):
        from symformer.frameworks.hf_bert import bert_data  # it reads with this module

        data = bert_data(config, weights, len(tokens), segments, kind)
    else:
        raise NotSupportedError(f"{folder}: model_type {kind!r} is not supported (supported: "
                                f"gpt2, llama, mistral, qwen2, bert, roberta, distilbert)")
    vocab_size = len(data["embeddings"])
    vocab = read_vocab(folder, vocab_size)
    data = {"title": "", "tokens": pick_tokens(tokens, vocab, str(folder)), "vocab": vocab,
            **data}
    pad = config.get("pad_token_id")
    if kind == "roberta" and isinstance(pad, int) and 0 <= pad < vocab_size \
            and vocab[pad] in data["tokens"]:  # RoBERTa counts positions past padding
        raise NotSupportedError(f"{folder}: the padding token {vocab[pad]!r} in the sentence "
                                f"(RoBERTa's positions skip it) is not supported")
    architectures = ",".join(config.get("architectures") or [kind])
    dtype = "/".join(sorted(set(dtypes)))
    data["title"] = printable(f"{architectures} from {folder.name} ({dtype} weights, exact)")
    if segments is not None and "token_type_embeddings" not in data:
        raise NotSupportedError(f"{folder}: segments given, but model_type {kind!r} has no "
                                f"token types")
    comments = [
        f"Imported by `symformer import` from the Hugging Face directory {folder}",
        f"(class {architectures}, model_type {kind}, weights {dtype}).",
        "Every weight is the exact dyadic rational the file stores: a decimal where that",
        "is short, else \"p/2^k\". The configuration:",
        *(f"  {k} = {json.dumps(v, default=str)}" for k, v in sorted(config.items())
          if not isinstance(v, (dict, list)) or k in ("rope_scaling", "rope_parameters")),
    ]
    if kind in ("bert", "roberta", "distilbert"):
        left = sorted({k.removeprefix(f"{kind}.").split(".")[0] for k in weights}
                      - {"embeddings", "encoder", "transformer", "cls", "lm_head",
                         "vocab_transform", "vocab_layer_norm", "vocab_projector"})
        comments.append(("The masked-LM head is [lm_head] (its transform, then the "
                         "vocabulary)" if "lm_head" in data else "The example ends at the "
                         "encoder's output (last_hidden_state)")
                        + (f"; not imported: {', '.join(left)}" if left else "") + ".")
    return data, comments, str(folder)


def read_config(folder: Path) -> dict[str, Any]:
    """``config.json``, its numbers kept as their JSON text (read exactly later)."""
    path = folder / "config.json"
    if not path.is_file():
        raise InputError(f"{folder}: no config.json (expected a Hugging Face model directory)")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise InputError(f"{path}: larger than {MAX_FILE_BYTES // 2**20} MiB")
    try:
        return json.loads(path.read_text("utf-8"), parse_float=DecimalText)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a JSON configuration ({exc})") from None


_BF16 = "BF16"


def read_safetensors(path: Path) -> tuple[dict[str, np.ndarray], list[str]]:
    """Every tensor of a ``.safetensors`` file as a NumPy array, and the dtypes found.

    Floating-point tensors only (F64, F32, F16, BF16); bfloat16 is widened to float32
    exactly (its 16 bits are the upper half of a float32)."""
    if not path.is_file():
        raise InputError(f"{path.parent}: no model.safetensors (sharded or .bin weights are "
                         f"not read; save with safe_serialization=True)")
    if path.stat().st_size > MAX_WEIGHT_BYTES:
        raise NotSupportedError(f"{path}: larger than {MAX_WEIGHT_BYTES // 2**20} MiB; exact "
                                f"examples are for tiny models")
    with open(path, "rb") as handle:
        try:
            (length,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(min(length, MAX_FILE_BYTES)))
        except (struct.error, ValueError):
            raise InputError(f"{path}: not a safetensors file") from None
    entries = {k: v for k, v in header.items() if k != "__metadata__"}
    dtypes = sorted({v.get("dtype", "?") for v in entries.values()})
    bad = [d for d in dtypes if d not in ("F64", "F32", "F16", _BF16)]
    if bad:
        raise NotSupportedError(f"{path}: tensors of dtype {bad[0]} (only float weights "
                                f"are read)")
    if _BF16 not in dtypes:
        from safetensors.numpy import load_file
        return dict(load_file(str(path))), dtypes
    raw = path.read_bytes()[8 + length:]
    tensors = {}
    for name, info in entries.items():
        start, end = info["data_offsets"]
        if info["dtype"] == _BF16:
            bits = np.frombuffer(raw[start:end], dtype="<u2").astype(np.uint32) << 16
            tensors[name] = bits.view(np.float32).reshape(info["shape"])
        else:
            kind = {"F64": "<f8", "F32": "<f4", "F16": "<f2"}[info["dtype"]]
            tensors[name] = np.frombuffer(raw[start:end], dtype=kind).reshape(info["shape"])
    return tensors, dtypes


def read_vocab(folder: Path, size: int) -> list[str]:
    """Token names by id: ``vocab.txt`` (a token per line), ``vocab.json`` or
    ``tokenizer.json``'s model vocabulary, where the directory carries one; ``t17`` for
    an id it does not name (or names twice)."""
    names: dict[int, str] = {}
    txt = folder / "vocab.txt"  # BERT's WordPiece vocabulary: a token per line, id = line
    if txt.is_file() and txt.stat().st_size <= MAX_FILE_BYTES:
        try:
            names = {i: t for i, t in enumerate(txt.read_text("utf-8").splitlines())
                     if t.isprintable()}
        except UnicodeDecodeError:
            names = {}
    for file, pick in () if names else (("vocab.json", lambda d: d),
                       ("tokenizer.json", lambda d: d.get("model", {}).get("vocab"))):
        path = folder / file
        if path.is_file() and path.stat().st_size <= MAX_FILE_BYTES:
            try:
                table = pick(json.loads(path.read_text("utf-8")))
            except (ValueError, UnicodeDecodeError, AttributeError):
                continue
            if isinstance(table, dict):
                names = {i: t for t, i in table.items()
                         if isinstance(i, int) and isinstance(t, str) and t.isprintable()}
                break
    vocab = [names.get(i, f"t{i}") for i in range(size)]
    seen: set[str] = set()
    for i, name in enumerate(vocab):
        if name in seen:
            vocab[i] = f"t{i}"
        seen.add(vocab[i])
    return vocab


def pick_tokens(tokens: Sequence[int | str], vocab: list[str], where: str) -> list[str]:
    """The sentence as vocabulary names: ids index ``vocab``, strings must be in it."""
    if not tokens:
        raise InputError(f"{where}: give at least one token")
    out = []
    for position, token in enumerate(tokens):
        if isinstance(token, (int, np.integer)) and not isinstance(token, bool):
            if not 0 <= int(token) < len(vocab):
                raise InputError(f"{where}: token id {token} (position {position}) is not in "
                                 f"0..{len(vocab) - 1}")
            out.append(vocab[int(token)])
        elif isinstance(token, str) and token in vocab:
            out.append(token)
        else:
            raise InputError(f"{where}: token {token!r} (position {position}) is not in the "
                             f"vocabulary (give ids, or names such as {vocab[0]!r})")
    return out


def _gpt2(config: dict[str, Any], w: dict[str, np.ndarray]) -> dict[str, Any]:
    """GPT-2: learned positions, pre-LayerNorm, fused Conv1D c_attn, tied head."""
    refuse(config, {"scale_attn_by_inverse_layer_idx": "scaling attention by 1/layer",
                    "add_cross_attention": "cross-attention"})
    if config.get("scale_attn_weights") is False:
        raise NotSupportedError("config.json: scale_attn_weights = false is not supported")
    p = ("transformer.", "")
    d, n_head = int(config["n_embd"]), int(config["n_head"])
    hd = d // n_head
    data: dict[str, Any] = {
        "embeddings": rows(tensor(w, "wte.weight", p), "wte"),
        "positional_encoding": "learned",
        "positional_embeddings": rows(tensor(w, "wpe.weight", p), "wpe"),
        "causal": True, "norm": "pre", "layer_norm": "biased",
        "activation": hf_activation(config, "activation_function"),
        "eps": config_number(config, "layer_norm_epsilon", "1e-5"),
        "final_norm": True,
        "gamma_f": row(tensor(w, "ln_f.weight", p), "ln_f.weight"),
        "beta_f": row(tensor(w, "ln_f.bias", p), "ln_f.bias"),
    }
    data["lm_head"] = _lm_head(w, tensor(w, "wte.weight", p), config.get("tie_word_embeddings",
                                                                         True))
    layers = []
    for i in range(int(config["n_layer"])):
        b = f"h.{i}."
        W, bias = tensor(w, b + "attn.c_attn.weight", p), tensor(w, b + "attn.c_attn.bias", p)
        heads = []
        for h in range(n_head):
            head = {}
            for letter, part in (("Q", 0), ("K", 1), ("V", 2)):
                cols = slice(part * d + h * hd, part * d + (h + 1) * hd)
                head[f"W_{letter}"] = rows(W[:, cols], f"{b}attn.c_attn.weight")
                head[f"b_{letter}"] = row(bias[cols], f"{b}attn.c_attn.bias")
            heads.append(head)
        layers.append({
            "W_O": rows(tensor(w, b + "attn.c_proj.weight", p), f"{b}attn.c_proj.weight"),
            "b_O": row(tensor(w, b + "attn.c_proj.bias", p), f"{b}attn.c_proj.bias"),
            "W_1": rows(tensor(w, b + "mlp.c_fc.weight", p), f"{b}mlp.c_fc.weight"),
            "b_1": row(tensor(w, b + "mlp.c_fc.bias", p), f"{b}mlp.c_fc.bias"),
            "W_2": rows(tensor(w, b + "mlp.c_proj.weight", p), f"{b}mlp.c_proj.weight"),
            "b_2": row(tensor(w, b + "mlp.c_proj.bias", p), f"{b}mlp.c_proj.bias"),
            "gamma_1": row(tensor(w, b + "ln_1.weight", p), f"{b}ln_1.weight"),
            "beta_1": row(tensor(w, b + "ln_1.bias", p), f"{b}ln_1.bias"),
            "gamma_2": row(tensor(w, b + "ln_2.weight", p), f"{b}ln_2.weight"),
            "beta_2": row(tensor(w, b + "ln_2.bias", p), f"{b}ln_2.bias"),
            "head": heads,
        })
    data["layer"] = layers
    return data


def _lm_head(w: dict[str, np.ndarray], embeddings: np.ndarray, tied: bool) -> dict[str, Any]:
    head = w.get("lm_head.weight")
    if head is None or (tied and np.array_equal(head, embeddings)):
        return {"tied": True}
    return {"W_vocab": rows(np.asarray(head).T, "lm_head.weight")}


def _rope_theta(config: dict[str, Any]) -> Any:
    """The rotary base; any rotary scaling (not an exact re-indexing) is refused."""
    params = config.get("rope_parameters") or {}
    scaling = config.get("rope_scaling") or {}
    for table in (params, scaling):
        kind = table.get("rope_type", table.get("type", "default"))
        if kind != "default":
            raise NotSupportedError(f"config.json: rope scaling {kind!r} is not supported "
                                    f"(only plain rotary embeddings)")
    if config.get("partial_rotary_factor") not in (None, 1, DecimalText("1.0")):
        raise NotSupportedError("config.json: partial_rotary_factor (rotating part of each "
                                "head) is not supported")
    theta = params.get("rope_theta", config.get("rope_theta", 10000))
    return theta if isinstance(theta, (int, DecimalText)) else DecimalText(str(theta))


def _llama(config: dict[str, Any], w: dict[str, np.ndarray]) -> dict[str, Any]:
    """Llama, Mistral, Qwen2: RMSNorm, RoPE ("half"), SwiGLU, grouped-query attention."""
    refuse(config, {"num_local_experts": "a mixture of experts",
                    "num_experts": "a mixture of experts",
                    "attn_logit_softcapping": "attention logit soft-capping",
                    "final_logit_softcapping": "logit soft-capping",
                    "alibi": "ALiBi"})
    if config.get("sliding_window") and config.get("use_sliding_window", True):
        raise NotSupportedError(f"config.json: sliding_window = {config['sliding_window']}: "
                                f"sliding-window attention is not supported")
    p = ("model.", "")
    d, n_head = int(config["hidden_size"]), int(config["num_attention_heads"])
    n_kv = int(config.get("num_key_value_heads") or n_head)
    hd = int(config.get("head_dim") or d // n_head)
    if n_head % n_kv:
        raise InputError(f"config.json: {n_head} heads cannot share {n_kv} key/value heads")
    embed = tensor(w, "embed_tokens.weight", p)
    data: dict[str, Any] = {
        "embeddings": rows(embed, "embed_tokens"),
        "positional_encoding": "rope", "rope_style": "half",
        "positional_encoding_base": _rope_theta(config),
        "causal": True, "norm": "pre", "layer_norm": "rms",
        "activation": hf_activation(config, "hidden_act"),
        "eps": config_number(config, "rms_norm_eps", "1e-6"),
        "final_norm": True,
        "gamma_f": row(tensor(w, "norm.weight", p), "norm.weight"),
        "lm_head": _lm_head(w, embed, bool(config.get("tie_word_embeddings", False))),
    }
    layers = []
    for i in range(int(config["num_hidden_layers"])):
        b = f"layers.{i}."

        def lin(name: str, b: str = b) -> np.ndarray:  # nn.Linear stores W^T
            return np.asarray(tensor(w, f"{b}{name}.weight", p)).T

        def bias(name: str, b: str = b) -> np.ndarray | None:
            return tensor(w, f"{b}{name}.bias", p) if has_tensor(w, f"{b}{name}.bias", p) else None

        q, k, v = lin("self_attn.q_proj"), lin("self_attn.k_proj"), lin("self_attn.v_proj")
        bq, bk, bv = (bias(f"self_attn.{x}_proj") for x in "qkv")
        heads, kv_heads = [], []
        for h in range(n_head):
            cols = slice(h * hd, (h + 1) * hd)
            head = {"W_Q": rows(q[:, cols], f"{b}q_proj")}
            if bq is not None:
                head["b_Q"] = row(bq[cols], f"{b}q_proj.bias")
            heads.append(head)
        for h in range(n_kv):
            cols = slice(h * hd, (h + 1) * hd)
            kv = {"W_K": rows(k[:, cols], f"{b}k_proj"), "W_V": rows(v[:, cols], f"{b}v_proj")}
            if bk is not None:
                kv["b_K"] = row(bk[cols], f"{b}k_proj.bias")
            if bv is not None:
                kv["b_V"] = row(bv[cols], f"{b}v_proj.bias")
            kv_heads.append(kv)
        layer = {
            "W_O": rows(lin("self_attn.o_proj"), f"{b}o_proj"),
            "W_gate": rows(lin("mlp.gate_proj"), f"{b}gate_proj"),
            "W_1": rows(lin("mlp.up_proj"), f"{b}up_proj"),
            "W_2": rows(lin("mlp.down_proj"), f"{b}down_proj"),
            "gamma_1": row(tensor(w, b + "input_layernorm.weight", p), f"{b}input_layernorm"),
            "gamma_2": row(tensor(w, b + "post_attention_layernorm.weight", p),
                            f"{b}post_attention_layernorm"),
        }
        for key, name in (("b_O", "self_attn.o_proj"), ("b_gate", "mlp.gate_proj"),
                          ("b_1", "mlp.up_proj"), ("b_2", "mlp.down_proj")):
            value = bias(name)
            if value is not None:
                layer[key] = row(value, f"{b}{name}.bias")
        layer["kv_head"] = kv_heads
        layer["head"] = heads
        layers.append(layer)
    data["layer"] = layers
    return data

