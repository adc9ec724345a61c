"""A PyTorch module (attention, encoder and decoder layers) as an example.

The module's parameters become the exact dyadic rationals they are
(:mod:`symformer.frameworks.weights`); the input rows (``inputs``, n x d_model) become
the embeddings of tokens named ``x0``, ``x1``, ..., with no positional encoding, so the
example computes what ``module(inputs)`` computes.  A decoder layer's target rows are
the ``[decoder]``'s tokens ``y0``, ``y1``, ...; its memory is the encoder's output
(see :func:`from_torch`).  ``layer_norm_eps`` is a Python
float: it is read as the decimal its shortest ``repr`` spells (``1e-05`` is 1/100000,
what the user typed), not as the binary double PyTorch adds.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from symformer.errors import InputError, NotSupportedError
from symformer.example.literals import DecimalText
from symformer.example.loader import example_from_dict, read_toml
from symformer.example.schema import Example
from symformer.frameworks.weights import example_text, row, rows
from symformer.registry import framework_key, norm_module


def from_torch(module: Any, tokens: Any, causal: bool = False, memory: Any = None,
               encoder: Any = None) -> Example:
    """The exact example of ``module`` applied to the rows of ``tokens`` (an n x d_model
    tensor or array; for a batch-first module, one sequence).  ``causal`` masks
    attention to earlier positions, as ``is_causal=True`` does in PyTorch (a decoder's
    self-attention: ``tgt_is_causal`` / a causal ``tgt_mask``).

    A ``TransformerDecoderLayer`` (or ``TransformerDecoder``) reads ``memory``: the
    memory rows themselves, or, with ``encoder`` (a ``TransformerEncoderLayer`` or
    ``TransformerEncoder``), the source rows that ``encoder`` turns into the memory; a
    ``Transformer`` reads the source rows ``memory`` with its own encoder."""
    text = torch_text(module, tokens, causal, memory, encoder)
    return example_from_dict(read_toml(text, "<torch>"), "<torch>")


def _rows(module: Any, value: Any, what: str) -> np.ndarray:
    """One sequence's rows (n x d_model) of a tensor or array (a batch of one allowed),
    as wide as ``module`` reads them: a wrong width names the rows, not a weight."""
    import torch

    inputs = np.asarray(torch.as_tensor(value).detach().cpu().double().numpy())
    first = _batch_first(module)
    if inputs.ndim == 3 and inputs.shape[0 if first else 1] == 1:
        inputs = inputs[0] if first else inputs[:, 0]
    width = _width(module)
    if inputs.ndim != 2:
        raise InputError(f"{what}: expected the input rows (n x {width}), found shape "
                         f"{tuple(inputs.shape)}")
    if inputs.shape[1] != width:
        raise InputError(f"{what}: the input rows are {inputs.shape[1]} wide (shape "
                         f"{inputs.shape[0]}x{inputs.shape[1]}), but "
                         f"{type(module).__name__} reads rows of d_model = {width} "
                         f"(expected n x {width})")
    if inputs.shape[0] == 0:
        raise InputError(f"{what}: no input rows (shape 0x{width}); give at least one")
    return inputs


def _width(module: Any) -> int:
    """The width of the rows ``module`` reads: its attention's ``embed_dim``."""
    layer = _first_layer(module)
    return int(getattr(layer, "self_attn", layer).embed_dim)


def torch_text(module: Any, tokens: Any, causal: bool = False, memory: Any = None,
               encoder: Any = None) -> str:
    """The example file's TOML text of ``module`` on the input rows ``tokens``."""
    import torch

    for m in (module, encoder):
        if m is not None and m.training and _has_dropout(m):
            raise NotSupportedError(f"{type(m).__name__}: dropout in train mode is not "
                                    f"supported (call module.eval() first)")
    if isinstance(module, torch.nn.Transformer):  # its encoder makes the memory
        if encoder is not None:
            raise InputError("Transformer: it has its own encoder (give no encoder=)")
        return _decoder_text(module.decoder, tokens, causal, memory, module.encoder,
                             "Transformer")
    if isinstance(module, (torch.nn.TransformerDecoderLayer, torch.nn.TransformerDecoder)):
        return _decoder_text(module, tokens, causal, memory, encoder)
    if memory is not None or encoder is not None:
        raise InputError(f"{type(module).__name__}: memory and encoder are for a "
                         f"TransformerDecoderLayer")
    inputs = _rows(module, tokens, "tokens")
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
    elif isinstance(module, torch.nn.TransformerEncoder):
        data.update(_encoder(module))
        config = {"num_layers": len(module.layers),
                  "final norm": module.norm is not None}
    else:
        raise NotSupportedError(f"{kind}: not supported (supported: MultiheadAttention, "
                                f"TransformerEncoderLayer, TransformerEncoder, "
                                f"TransformerDecoderLayer, TransformerDecoder, Transformer)")
    dtype = str(next(module.parameters()).dtype).removeprefix("torch.")
    data["title"] = f"torch.nn.{kind} ({dtype} weights, exact)"
    comments = [f"Imported by symformer.from_torch from torch.nn.{kind}, {dtype} weights:",
                "every weight is the exact dyadic rational the module holds (a decimal",
                "where that is short, else \"p/2^k\"); the inputs are the rows x0, x1, ...",
                "Configuration: " + ", ".join(f"{k}={v}" for k, v in config.items()),
                *_fast_path_note(data)]
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
    if m.norm1.eps != m.norm2.eps:
        raise NotSupportedError("TransformerEncoderLayer: norm1 and norm2 with different eps")
    layer = _attention(m.self_attn, "self_attn.")
    layer.update(_linear(m.linear1, "W_1", "b_1", "linear1"))
    layer.update(_linear(m.linear2, "W_2", "b_2", "linear2"))
    key = _norm_key({"norm1": m.norm1, "norm2": m.norm2}, "TransformerEncoderLayer")
    for k, norm in ((1, m.norm1), (2, m.norm2)):
        layer.update(_norm_weights(norm, f"norm{k}", key, f"_{k}"))
    layer["head"] = layer.pop("head")
    return {"norm": "pre" if m.norm_first else "post", "layer_norm": key,
            "activation": _activation_name(m, "TransformerEncoderLayer"),
            "eps": DecimalText(repr(float(m.norm1.eps))), "layer": [layer]}


def _linear(linear: Any, w: str, b: str, where: str) -> dict[str, Any]:
    out = {w: rows(linear.weight.detach().double().numpy().T, f"{where}.weight")}
    if linear.bias is not None:
        out[b] = row(linear.bias.detach().double().numpy(), f"{where}.bias")
    return out


def _first_layer(module: Any) -> Any:
    """A stack's first layer (for ``batch_first``), else the module itself."""
    layers = getattr(module, "layers", None)
    return layers[0] if layers is not None and len(layers) else module


def _batch_first(module: Any) -> bool:
    layer = _first_layer(module)
    attention = getattr(layer, "self_attn", layer)
    return bool(getattr(attention, "batch_first", False))


def _encoder(m: Any) -> dict[str, Any]:
    """``TransformerEncoderLayer`` or ``TransformerEncoder`` (its layers and final norm)
    as the example's top-level keys and ``[[layer]]`` tables."""
    import torch

    if isinstance(m, torch.nn.TransformerEncoderLayer):
        return _encoder_layer(m)
    if not isinstance(m, torch.nn.TransformerEncoder):
        raise NotSupportedError(f"encoder: {type(m).__name__} is not supported "
                                f"(TransformerEncoderLayer, TransformerEncoder)")
    parts = [_encoder_layer(layer) for layer in m.layers]
    data = dict(parts[0])
    data["layer"] = []
    for part in parts:
        layer = dict(part["layer"][0])
        for key in ("norm", "layer_norm", "activation", "eps"):
            layer[key] = part[key]
        data["layer"].append(_heads_last(layer))
    if m.norm is not None:
        if m.norm.eps != m.layers[0].norm1.eps:
            raise NotSupportedError("TransformerEncoder: its final norm's eps differs from "
                                    "the layers'")
        data.update(_norm_weights(m.norm, "norm",
                                  _norm_key({"norm": m.norm}, "TransformerEncoder"), "_f"))
        data["final_norm"] = True
    return data


def _norm_key(norms: dict[str, Any], kind: str) -> str:
    """The example-file key of a layer's normalisation modules (by attribute name):
    what the normalisations declare of ``torch.nn``'s modules (``torch_modules``), one
    for them all; a module no normalisation declares is refused in one line."""
    import torch

    keys = set()
    for where, norm in norms.items():
        cls = type(norm)
        name = cls.__name__ if getattr(torch.nn, cls.__name__, None) is cls \
            else f"{cls.__module__}.{cls.__qualname__}"
        keys.add(framework_key("normalisation", "torch", name,
                               f"the PyTorch import ({kind}.{where})"))
    if len(keys) > 1:
        raise NotSupportedError(f"{kind}: {', '.join(norms)} are different normalisations "
                                f"({', '.join(sorted(keys))}); a layer has one")
    return keys.pop()


def _norm_weights(norm: Any, where: str, key: str, suffix: str) -> dict[str, Any]:
    """A normalisation module's weights under the example's names (``gamma`` +
    ``suffix``, ...), as the normalisation of ``key`` declares them (``module_weights``);
    a parameter the module lacks (``bias=False``) is left out."""
    out = {}
    for name, attr in norm_module(key, "the PyTorch import").module_weights.items():
        value = getattr(norm, attr, None)
        if value is not None:
            out[name + suffix] = row(value.detach().double().numpy(), f"{where}.{attr}")
    return out


def _heads_last(layer: dict[str, Any]) -> dict[str, Any]:
    """The same table with its sub-tables last (TOML writes them after the keys)."""
    return {**{k: v for k, v in layer.items() if not isinstance(v, list)
               or not v or not isinstance(v[0], dict)},
            **{k: v for k, v in layer.items() if isinstance(v, list) and v
               and isinstance(v[0], dict)}}


def _activation_name(m: Any, kind: str) -> str:
    """The example's name of a layer's activation: the activation declaring its PyTorch
    form (``torch_names``): a ``torch.nn`` module's class name (a GELU with its
    ``approximate``) or a ``torch.nn.functional`` function's name; any other form is
    refused in one line naming it."""
    import torch
    import torch.nn.functional as F

    act, cls = m.activation, type(m.activation)
    if getattr(torch.nn, cls.__name__, None) is cls:
        form = cls.__name__ + (f"(approximate={act.approximate!r})"
                               if isinstance(act, torch.nn.GELU) else "")
    elif getattr(F, getattr(act, "__name__", ""), None) is act:
        form = act.__name__
    else:
        form = repr(act)
    return framework_key("activation", "torch", form, f"the PyTorch import ({kind})")


def _fast_path_note(data: dict[str, Any]) -> list[str]:
    """A comment when an encoder layer's activation is the tanh GELU: PyTorch's
    inference fast path computes the exact GELU for it instead."""
    used = {data.get("activation")} | {layer.get("activation") for layer in data["layer"]}
    if "gelu_tanh" not in used:
        return []
    return ["Note: nn.GELU(approximate='tanh') is computed here as PyTorch computes it",
            "with gradients on; PyTorch's encoder fast path (eval mode under",
            "torch.no_grad) computes the exact GELU for it instead."]


def _decoder_layer(m: Any) -> dict[str, Any]:
    """``nn.TransformerDecoderLayer`` as a ``[[decoder.layer]]``: self-attention,
    cross-attention over the memory, FFN, three LayerNorms, post or pre norm."""
    eps = {m.norm1.eps, m.norm2.eps, m.norm3.eps}
    if len(eps) != 1:
        raise NotSupportedError("TransformerDecoderLayer: norm1, norm2, norm3 with "
                                "different eps")
    norm_key = _norm_key({"norm1": m.norm1, "norm2": m.norm2, "norm3": m.norm3},
                         "TransformerDecoderLayer")
    out: dict[str, Any] = {"norm": "pre" if m.norm_first else "post", "layer_norm": norm_key,
                           "activation": _activation_name(m, "TransformerDecoderLayer"),
                           "eps": DecimalText(repr(float(m.norm1.eps)))}
    for group, mha in (("self", m.self_attn), ("cross", m.multihead_attn)):
        layer = _attention(mha, f"{'self_attn' if group == 'self' else 'multihead_attn'}.")
        out[f"W_O_{group}"] = layer["W_O"]
        if "b_O" in layer:
            out[f"b_O_{group}"] = layer["b_O"]
        out[f"{group}_head"] = layer["head"]
    d_model, d_ff = m.linear1.in_features, m.linear1.out_features
    for key, linear, width in (("1", m.linear1, d_ff), ("2", m.linear2, d_model)):
        out.update(_linear(linear, f"W_{key}", f"b_{key}", f"linear{key}"))
        out.setdefault(f"b_{key}", [0] * width)  # bias=False: the decoder's b_k is zero
    for k, norm in ((1, m.norm1), (2, m.norm2), (3, m.norm3)):
        out.update(_norm_weights(norm, f"norm{k}", norm_key, f"_{k}"))
    return _heads_last(out)


def _decoder_text(module: Any, tokens: Any, causal: bool, memory: Any, encoder: Any,
                  kind: str = "") -> str:
    """A decoder layer (or stack, its final norm the ``[decoder]``'s) on target rows
    ``tokens`` over ``memory``: the example's encoder is ``encoder`` on the source rows
    ``memory``, or no layer at all (its output is then the memory rows as given)."""
    import torch

    if memory is None:
        raise InputError(f"{type(module).__name__}: give memory (the memory rows, or the "
                         f"source rows with encoder=)")
    layers = list(module.layers) if isinstance(module, torch.nn.TransformerDecoder) else [module]
    final = getattr(module, "norm", None)
    target = _rows(module, tokens, "tokens")
    source = _rows(module if encoder is None else encoder, memory, "memory")
    names = [f"y{i}" for i in range(target.shape[0])]
    sources = [f"m{i}" for i in range(source.shape[0])]
    data: dict[str, Any] = {"title": "", "tokens": sources, "vocab": sources,
                            "embeddings": rows(source, "memory"),
                            "positional_encoding": "none", "causal": False}
    if encoder is None:
        data["layer"] = []
    else:
        data.update(_encoder(encoder))
    data["decoder"] = {"tokens": names, "vocab": names, "embeddings": rows(target, "tokens"),
                       "positional_encoding": "none", "causal": bool(causal)}
    if final is not None:  # TransformerDecoder(norm=...): the decoder's final_norm
        key = _norm_key({"norm": final}, "TransformerDecoder")
        data["decoder"].update(_norm_weights(final, "decoder.norm", key, "_f"),
                               final_norm=True, eps=DecimalText(repr(float(final.eps))))
    data["decoder"]["layer"] = [_decoder_layer(layer) for layer in layers]
    kind = kind or type(module).__name__
    first = layers[0]
    dtype = str(next(module.parameters()).dtype).removeprefix("torch.")
    config = {"layers": len(layers), "d_model": first.linear1.in_features,
              "nhead": first.self_attn.num_heads,
              "dim_feedforward": first.linear1.out_features,
              "activation": _activation_name(first, kind), "norm_first": first.norm_first,
              "layer_norm_eps": first.norm1.eps, "batch_first": first.self_attn.batch_first,
              "causal self-attention": bool(causal),
              "encoder": "none" if encoder is None else type(encoder).__name__}
    data["title"] = f"torch.nn.{kind} ({dtype} weights, exact)"
    comments = [f"Imported by symformer.from_torch from torch.nn.{kind}, {dtype} weights:",
                "every weight is the exact dyadic rational the module holds (a decimal",
                "where that is short, else \"p/2^k\"). The decoder's inputs are the target",
                "rows y0, y1, ...; the encoder's tokens m0, m1, ... are "
                + ("the memory rows as given (no encoder layer: its output is the memory)."
                   if encoder is None else "the source rows the encoder turns into the memory."),
                "Configuration: " + ", ".join(f"{k}={v}" for k, v in config.items()),
                *_fast_path_note(data)]
    return example_text(data, comments)
