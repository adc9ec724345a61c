"""The optional ``[decoder]`` table: target tokens, their embeddings and the decoder blocks.

The keys follow the encoder's (see :mod:`symformer.example.loader`; both read their
fields with :mod:`symformer.example.fields`): a decoder block
has masked self-attention heads (``[[decoder.layer.self_head]]``; causal unless the
``[decoder]`` says ``causal = false``),
cross-attention heads (``[[decoder.layer.cross_head]]``: queries from the decoder,
keys and values from the encoder's ``output``, which may have another width: their
``W_K`` and ``W_V`` have its rows) and a feed-forward network, each
sub-layer wrapped in a residual connection and a LayerNorm.  Each sub-layer is
optional (no ``self_head``, no ``cross_head``: a decoder-only block; no ``W_1``: no
FFN), and ``residual = false`` drops the residual connections.  Conventions (``eps``,
``activation``, ``norm``, ``layer_norm``, ``positional_encoding``, ``residual``) default
to the encoder's and may be overridden for the whole decoder or for one layer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from symformer.errors import InputError
from symformer.example.fields import (
    Where,
    choice,
    head,
    matrix,
    no_unknown_keys,
    optional_vector,
    vector,
    vocab_and_tokens,
)
from symformer.example.literals import exact_scalar
from symformer.example.schema import (
    ACTIVATIONS,
    DECODER_POSITIONAL_ENCODINGS,
    LAYER_NORMS,
    NORM_PLACEMENTS,
    Decoder,
    DecoderLayer,
    FinalNorm,
    Head,
)
from symformer.lazy import sympy

#: Reads a table's ``final_norm``, ``gamma_f``, ``beta_f`` (the loader's reader).
FinalNormReader = Callable[[dict[str, Any], Where, int, dict[str, Any]], FinalNorm | None]

#: The end-of-sequence tokens: generation stops when one is the next token (a
#: ``[decoding]`` table's ``stop`` adds others), and ``min_new_tokens`` masks them.
END_TOKENS = ("</s>", "<eos>", "<EOS>", "<|endoftext|>", "[EOS]")

_DECODER_KEYS = {
    "tokens", "vocab", "embeddings", "W_vocab", "layer", "positional_encoding", "eps",
    "activation", "norm", "layer_norm", "causal", "final_norm", "gamma_f", "beta_f",
    "residual",
}
_LAYER_KEYS = {
    "self_head", "cross_head", "W_O_self", "W_O_cross", "b_O_self", "b_O_cross",
    "W_1", "b_1", "W_2", "b_2",
    "activation", "norm", "eps", "layer_norm", "residual",
    "gamma_1", "beta_1", "gamma_2", "beta_2", "gamma_3", "beta_3",
}


def parse_decoder(data: Any, here: Where, d_model: int, defaults: dict[str, Any],
                  positional_encoding: str, final_norm: FinalNormReader) -> Decoder:
    """Validate the ``[decoder]`` table; ``defaults`` are the encoder's conventions;
    ``final_norm`` reads ``final_norm``/``gamma_f``/``beta_f`` as the top level does."""
    if not isinstance(data, dict):
        raise InputError(f"{here}: must be a table")
    no_unknown_keys(data, _DECODER_KEYS, here)
    vocab, tokens = vocab_and_tokens(data, here, "decoder.vocab")
    d_memory = d_model  # the encoder's output: what cross-attention reads
    embeddings = matrix(data, "embeddings", here, rows=len(vocab))
    d_model = embeddings.cols  # the decoder's own width
    defaults = dict(defaults)
    defaults["residual"] = _flag(data, "residual", here, defaults.get("residual", True))
    if "eps" in data:
        defaults["eps"] = _eps(data, here)
    for key, options in (("activation", ACTIVATIONS), ("norm", NORM_PLACEMENTS),
                         ("layer_norm", LAYER_NORMS)):
        defaults[key] = choice(data, key, options, here, defaults[key])
    layers_data = data.get("layer")
    if not isinstance(layers_data, list) or not layers_data:
        raise InputError(f"{here}: expected at least one [[decoder.layer]] table")
    layers = tuple(_decoder_layer(layer, here.sub(f"layer {n}"), d_model, defaults, d_memory)
                   for n, layer in enumerate(layers_data, start=1))
    return Decoder(
        tokens=tuple(tokens),
        vocab=tuple(vocab),
        embeddings=embeddings,
        layers=layers,
        W_vocab=matrix(data, "W_vocab", here, rows=d_model, cols=len(vocab), required=False),
        positional_encoding=choice(data, "positional_encoding",
                                   DECODER_POSITIONAL_ENCODINGS, here, positional_encoding),
        causal=_causal(data, here),
        final_norm=final_norm(data, here, d_model, defaults),
    )


def _causal(data: dict[str, Any], here: Where) -> bool:
    return _flag(data, "causal", here, True)


def _flag(data: dict[str, Any], key: str, here: Where, default: bool) -> bool:
    value = data.get(key, default)
    if not isinstance(value, bool):
        raise InputError(f"{here}: {key} must be true or false, found {value!r}")
    return value


def _eps(data: dict[str, Any], here: Where) -> sympy.Rational:
    eps = exact_scalar(data["eps"], f"{here}: eps")
    if eps < 0:
        raise InputError(f"{here}: eps must not be negative, found {eps}")
    return eps


def _heads(data: dict[str, Any], key: str, here: Where, d_model: int,
           d_memory: int | None = None) -> tuple[Head, ...]:
    """The layer's ``key`` heads; none (no such sub-layer) when the key is absent."""
    heads_data = data.get(key, [])
    if not isinstance(heads_data, list):
        raise InputError(f"{here}: {key} must be [[decoder.layer.{key}]] tables")
    return tuple(head(h, here.sub(f"{key} {k}"), d_model, d_memory)
                 for k, h in enumerate(heads_data, start=1))


def _output_projection(data: dict[str, Any], key: str, here: Where, heads: tuple[Head, ...],
                       d_model: int) -> sympy.Matrix | None:
    if not heads:
        if key in data:
            raise InputError(f"{here}: {key} is given but the layer has no "
                             f"{key.split('_')[-1]}-attention head")
        return None
    width = sum(h.d_v for h in heads)
    W_O = matrix(data, key, here, rows=width, cols=d_model, required=False)
    if W_O is None and width != d_model:
        raise InputError(
            f"{here}: {key} is missing and the heads' value widths add up to {width}, not "
            f"d_model = {d_model}; give {key} ({width}x{d_model})"
        )
    return W_O


def _decoder_layer(data: Any, here: Where, d_model: int, defaults: dict[str, Any],
                   d_memory: int) -> DecoderLayer:
    if not isinstance(data, dict):
        raise InputError(f"{here}: must be a table")
    no_unknown_keys(data, _LAYER_KEYS, here)
    self_heads = _heads(data, "self_head", here, d_model)
    cross_heads = _heads(data, "cross_head", here, d_model, d_memory)
    W_1 = matrix(data, "W_1", here, rows=d_model, required=False)
    if W_1 is None:
        extra = [k for k in ("b_1", "W_2", "b_2") if k in data]
        if extra:
            raise InputError(f"{here}: {extra[0]} is given without W_1 (no FFN without W_1)")
    if not (self_heads or cross_heads or W_1 is not None):
        raise InputError(f"{here}: the layer has no sub-layer: give [[decoder.layer."
                         f"self_head]], [[decoder.layer.cross_head]] or W_1 (an FFN)")
    d_ff = 0 if W_1 is None else W_1.cols
    norms = {}
    for k in (1, 2, 3):
        norms[f"gamma_{k}"] = vector(data, f"gamma_{k}", here, d_model, default=1)
        norms[f"beta_{k}"] = vector(data, f"beta_{k}", here, d_model, default=0)
    return DecoderLayer(
        self_heads=self_heads,
        cross_heads=cross_heads,
        W_O_self=_output_projection(data, "W_O_self", here, self_heads, d_model),
        W_O_cross=_output_projection(data, "W_O_cross", here, cross_heads, d_model),
        b_O_self=optional_vector(data, "b_O_self", here, d_model),
        b_O_cross=optional_vector(data, "b_O_cross", here, d_model),
        W_1=W_1,
        b_1=optional_vector(data, "b_1", here, d_ff) if W_1 is not None else None,
        W_2=matrix(data, "W_2", here, rows=d_ff, cols=d_model) if W_1 is not None else None,
        b_2=optional_vector(data, "b_2", here, d_model) if W_1 is not None else None,
        residual=_flag(data, "residual", here, defaults["residual"]),
        activation=choice(data, "activation", ACTIVATIONS, here, defaults["activation"]),
        norm=choice(data, "norm", NORM_PLACEMENTS, here, defaults["norm"]),
        eps=_eps(data, here) if "eps" in data else defaults["eps"],
        layer_norm=choice(data, "layer_norm", LAYER_NORMS, here, defaults["layer_norm"]),
        **norms,
    )
