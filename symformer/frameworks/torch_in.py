"""A PyTorch module (``nn.MultiheadAttention``, ``nn.TransformerEncoderLayer``) as an example.

The module's parameters become the exact dyadic rationals they are
(:mod:`symformer.frameworks.weights`); the input rows (``inputs``, n x d_model) become
the embeddings of tokens named ``x0``, ``x1``, ..., with no positional encoding, so the
example computes what ``module(inputs)`` computes.  ``layer_norm_eps`` is a Python
float: it is read as the decimal its shortest ``repr`` spells (``1e-05`` is 1/100000,
what the user typed), not as the binary double PyTorch adds.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from symformer.errors import InputError, NotSupportedError
from symformer.example.loader import example_from_dict, read_toml
from symformer.example.numbers import DecimalText
from symformer.example.schema import Example
from symformer.frameworks.weights import example_text, row, rows


def from_torch(module: Any, tokens: Any, causal: bool = False) -> Example:
    """The exact example of ``module`` applied to the rows of ``tokens`` (an n x d_model
    tensor or array; for a batch-first module, one sequence).  ``causal`` masks
    attention to earlier positions, as ``is_causal=True`` does in PyTorch."""
    text = torch_text(module, tokens, causal)
    return example_from_dict(read_toml(text, "<torch>"), "<torch>")


def torch_text(module: Any, tokens: Any, causal: bool = False) -> str:
    """The example file's TOML text of ``module`` on the input rows ``tokens``."""
    import torch

    if module.training and _has_dropout(module):
        raise NotSupportedError(f"{type(module).__name__}: dropout in train mode is not "
                                f"supported (call module.eval() first)")
    inputs = np.asarray(torch.as_tensor(tokens).detach().cpu().double().numpy())
    if inputs.ndim == 3 and inputs.shape[0 if getattr(module, "batch_first", False) else 1] == 1:
        inputs = inputs[0] if getattr(module, "batch_first", False) else inputs[:, 0]
    if inputs.ndim != 2:
        raise InputError(f"tokens: expected the input rows (n x d_model), found shape "
                         f"{tuple(inputs.shape)}")
    names = [f"x{i}" for i in range(inputs.shape[0])]
    data: dict[str, Any] = {"title": "", "tokens": names, "vocab": names,
                            "embeddings": rows(inputs, "tokens"),
                            "positional_encoding": "none", "causal": bool(causal)}
    kind = type(module).__name__
    if isinstance(module, torch.nn.MultiheadAttention):
        layer = _attention(module, "")
        data.update({"norm": "none", "residual": False, "layer": [layer]})
        config = {"embed_dim": module.embed_dim, "num_heads": module.num_heads,
                  "bias": module.in_proj_bias is not None}
    elif isinstance(module, torch.nn.TransformerEncoderLayer):
        data.update(_encoder_layer(module))
        config = {"d_model": module.linear1.in_features,
                  "nhead": module.self_attn.num_heads,
                  "dim_feedforward": module.linear1.out_features,
                  "activation": data["activation"], "norm_first": module.norm_first,
                  "layer_norm_eps": module.norm1.eps,
                  "batch_first": module.self_attn.batch_first}
    else:
        raise NotSupportedError(f"{kind}: not supported (supported: MultiheadAttention, "
                                f"TransformerEncoderLayer)")
    dtype = str(next(module.parameters()).dtype).removeprefix("torch.")
    data["title"] = f"torch.nn.{kind} ({dtype} weights, exact)"
    comments = [f"Imported by symformer.from_torch from torch.nn.{kind}, {dtype} weights:",
                "every weight is the exact dyadic rational the module holds (a decimal",
                "where that is short, else \"p/2^k\"); the inputs are the rows x0, x1, ...",
                "Configuration: " + ", ".join(f"{k}={v}" for k, v in config.items())]
    return example_text(data, comments)


def _has_dropout(module: Any) -> bool:
    import torch

    for m in module.modules():
        if isinstance(m, torch.nn.Dropout) and m.p > 0:
            return True
        if isinstance(m, torch.nn.MultiheadAttention) and m.dropout > 0:
            return True
    return False


def _attention(mha: Any, where: str) -> dict[str, Any]:
    """An ``nn.MultiheadAttention``'s heads and output projection as a ``[[layer]]``."""
    if not mha._qkv_same_embed_dim:
        raise NotSupportedError(f"{where}MultiheadAttention with kdim/vdim other than "
                                f"embed_dim is not supported")
    if mha.bias_k is not None or mha.add_zero_attn:
        raise NotSupportedError(f"{where}MultiheadAttention add_bias_kv/add_zero_attn is "
                                f"not supported")
    d, n = mha.embed_dim, mha.num_heads
    hd = d // n
    W = mha.in_proj_weight.detach().double().numpy()  # (3d, d): [W_Q; W_K; W_V]^T
    b = None if mha.in_proj_bias is None else mha.in_proj_bias.detach().double().numpy()
    heads = []
    for h in range(n):
        head = {}
        for letter, part in (("Q", 0), ("K", 1), ("V", 2)):
            sl = slice(part * d + h * hd, part * d + (h + 1) * hd)
            head[f"W_{letter}"] = rows(W[sl].T, f"{where}in_proj_weight")
            if b is not None:
                head[f"b_{letter}"] = row(b[sl], f"{where}in_proj_bias")
        heads.append(head)
    layer: dict[str, Any] = {"W_O": rows(mha.out_proj.weight.detach().double().numpy().T,
                                         f"{where}out_proj.weight")}
    if mha.out_proj.bias is not None:
        layer["b_O"] = row(mha.out_proj.bias.detach().double().numpy(),
                           f"{where}out_proj.bias")
    layer["head"] = heads
    return layer


def _encoder_layer(m: Any) -> dict[str, Any]:
    """``nn.TransformerEncoderLayer``: attention, FFN, two LayerNorms, post or pre norm."""
    import torch.nn.functional as F

    if m.activation is F.relu or getattr(m, "activation_relu_or_gelu", 0) == 1:
        activation = "relu"
    elif m.activation is F.gelu or getattr(m, "activation_relu_or_gelu", 0) == 2:
        activation = "gelu"
    else:
        raise NotSupportedError(f"TransformerEncoderLayer: activation {m.activation!r} is not "
                                f"supported (relu, gelu)")
    if m.norm1.eps != m.norm2.eps:
        raise NotSupportedError("TransformerEncoderLayer: norm1 and norm2 with different eps")
    layer = _attention(m.self_attn, "self_attn.")
    layer.update(_linear(m.linear1, "W_1", "b_1", "linear1"))
    layer.update(_linear(m.linear2, "W_2", "b_2", "linear2"))
    for k, norm in ((1, m.norm1), (2, m.norm2)):
        if norm.weight is not None:
            layer[f"gamma_{k}"] = row(norm.weight.detach().double().numpy(), f"norm{k}.weight")
        if norm.bias is not None:
            layer[f"beta_{k}"] = row(norm.bias.detach().double().numpy(), f"norm{k}.bias")
    layer["head"] = layer.pop("head")
    return {"norm": "pre" if m.norm_first else "post", "layer_norm": "biased",
            "activation": activation, "eps": DecimalText(repr(float(m.norm1.eps))),
            "layer": [layer]}


def _linear(linear: Any, w: str, b: str, where: str) -> dict[str, Any]:
    out = {w: rows(linear.weight.detach().double().numpy().T, f"{where}.weight")}
    if linear.bias is not None:
        out[b] = row(linear.bias.detach().double().numpy(), f"{where}.bias")
    return out
