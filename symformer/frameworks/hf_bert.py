"""BERT-family encoders of a Hugging Face directory: BERT, RoBERTa, DistilBERT.

Word + learned position (+ token-type) embeddings, the embedding LayerNorm, post-LayerNorm
blocks with biases everywhere, no mask (attention mask all ones), and a masked-LM head
where the file has one (its transform, then the vocabulary projection, usually tied to
the word embeddings).  The three differ in tensor names (:class:`Names`), in RoBERTa's
positions (counted from ``pad_token_id`` + 1) and in DistilBERT's lack of token types.
Used by :mod:`symformer.frameworks.hf_in`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from symformer.errors import NotSupportedError
from symformer.example.literals import DecimalText
from symformer.frameworks.hf_config import (
    Config,
    has_tensor,
    hf_activation,
    hf_norm,
    kept_layers,
    missing_head,
    refuse,
    tensor,
    tie_embeddings,
)
from symformer.frameworks.weights import dyadic_row as row
from symformer.frameworks.weights import dyadic_rows as rows
from symformer.frameworks.weights import printable
from symformer.registry import framework_key


@dataclass(frozen=True)
class Names:
    """Where a model family keeps each tensor (``{}`` is the layer number) and each
    configuration number."""

    layer: str
    query: str
    key: str
    value: str
    out: str
    norm1: str
    ffn_in: str
    ffn_out: str
    norm2: str
    #: The masked-LM head: its transform's dense and norm, the vocabulary projection,
    #: and the names its output bias may have.
    head_dense: str
    head_norm: str
    head_decoder: str
    head_bias: tuple[str, ...]
    width: str = "hidden_size"
    heads: str = "num_attention_heads"
    depth: str = "num_hidden_layers"
    act: str = "hidden_act"
    ffn: str = "intermediate_size"
    eps: str | None = "layer_norm_eps"  # None: 1e-12 always (DistilBERT)


BERT = Names("encoder.layer.{}.", "attention.self.query", "attention.self.key",
             "attention.self.value", "attention.output.dense", "attention.output.LayerNorm",
             "intermediate.dense", "output.dense", "output.LayerNorm",
             "cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm",
             "cls.predictions.decoder", ("cls.predictions.bias", "cls.predictions.decoder.bias"))
FAMILY = {
    "bert": BERT,
    "roberta": replace(BERT, head_dense="lm_head.dense", head_norm="lm_head.layer_norm",
                       head_decoder="lm_head.decoder",
                       head_bias=("lm_head.bias", "lm_head.decoder.bias")),
    "distilbert": Names("transformer.layer.{}.", "attention.q_lin", "attention.k_lin",
                        "attention.v_lin", "attention.out_lin", "sa_layer_norm", "ffn.lin1",
                        "ffn.lin2", "output_layer_norm", "vocab_transform", "vocab_layer_norm",
                        "vocab_projector", ("vocab_projector.bias",), width="dim",
                        heads="n_heads", depth="n_layers", act="activation", ffn="hidden_dim",
                        eps=None),
}


def bert_data(config: Config, w: Mapping[str, np.ndarray], n_tokens: int,
              segments: Sequence[int] | None, kind: str, layers: int | None = None
              ) -> dict[str, Any]:
    """The example table of a BERT-family model (``kind``: bert, roberta, distilbert)."""
    names = FAMILY[kind]
    refuse(config, {"is_decoder": "BERT as a decoder (causal, cross-attention)",
                    "add_cross_attention": "cross-attention"})
    positional = config.text("position_embedding_type", "absolute")
    positional = framework_key("positional encoding", "hf", positional,
                               "config.json: position_embedding_type",
                               repr(printable(positional)[:40]))  # {"absolute": "learned"}
    p = (f"{kind}.", "")
    norm_key, norm_weights = hf_norm(kind)
    d, n_head = config.whole(names.width), config.whole(names.heads)
    hd = config.divides(names.width, d, names.heads, n_head)
    depth = kept_layers(config, names.depth, layers)
    shapes = Shapes(d, config.whole(names.ffn))
    word = tensor(w, "embeddings.word_embeddings.weight", p, (None, d))
    positions = tensor(w, "embeddings.position_embeddings.weight", p, (None, d))
    if kind == "roberta":  # position i is row pad_token_id + 1 + i (no padding read)
        positions = positions[config.whole("pad_token_id", 0, low=0, high=2**62) + 1:]
    data: dict[str, Any] = {
        "embeddings": rows(word, "word_embeddings"),
        "positional_encoding": positional,
        "positional_embeddings": rows(positions, "position_embeddings"),
        "causal": False, "norm": "post", "layer_norm": norm_key,
        "activation": hf_activation(config, names.act),
        "eps": config.number(names.eps, "1e-12") if names.eps else DecimalText("1e-12"),
        "embedding_norm": {
            "gamma": row(tensor(w, "embeddings.LayerNorm.weight", p, (d,)),
                         "embeddings.LayerNorm"),
            "beta": row(tensor(w, "embeddings.LayerNorm.bias", p, (d,)),
                        "embeddings.LayerNorm")},
    }
    if has_tensor(w, "embeddings.token_type_embeddings.weight", p):  # not DistilBERT
        data["token_type_embeddings"] = rows(
            tensor(w, "embeddings.token_type_embeddings.weight", p, (None, d)),
            "token_type_embeddings")
        data["segments"] = [int(s) for s in (segments or [0] * n_tokens)]
    data["layer"] = [_layer(w, names, names.layer.format(i), p, n_head, hd, shapes,
                            norm_weights) for i in range(depth)]
    head = _mlm_head(w, names, word, config)
    if head is not None:
        if kind == "roberta":  # RobertaLMHead applies the erf GELU whatever hidden_act says
            head["transform_activation"] = "gelu"
        data["lm_head"] = head
    return data


@dataclass(frozen=True)
class Shapes:
    """The widths a layer's tensors must have: the model's and the FFN's."""

    d: int
    d_ff: int

    def of(self, names: Names, name: str) -> tuple[int, ...]:
        """The shape of tensor ``name`` of a layer (``…weight`` or ``…bias``)."""
        module, _, part = name.rpartition(".")
        out = self.d_ff if module == names.ffn_in else self.d
        width = self.d_ff if module == names.ffn_out else self.d
        if module in (names.norm1, names.norm2) or part == "bias":
            return (out,)
        return (out, width)


def _layer(w: Mapping[str, np.ndarray], names: Names, b: str, p: tuple[str, ...],
           n_head: int, hd: int, shapes: Shapes, norm_weights: dict[str, str]
           ) -> dict[str, Any]:
    """One post-norm block: heads with biases, W_O, the FFN, two normalisations (their
    weights ``norm_weights``: the example's name -> the module's parameter)."""

    def get(name: str) -> np.ndarray:
        return tensor(w, f"{b}{name}", p, shapes.of(names, name))

    def lin(name: str) -> np.ndarray:  # nn.Linear stores W^T
        return np.asarray(get(f"{name}.weight")).T

    def vec(name: str) -> list[Any]:
        return row(get(name), f"{b}{name}")

    heads = []
    for h in range(n_head):
        cols = slice(h * hd, (h + 1) * hd)
        head = {}
        for letter, name in (("Q", names.query), ("K", names.key), ("V", names.value)):
            head[f"W_{letter}"] = rows(lin(name)[:, cols], f"{b}{name}")
            head[f"b_{letter}"] = row(get(f"{name}.bias")[cols], f"{b}{name}.bias")
        heads.append(head)
    layer = {"W_O": rows(lin(names.out), f"{b}{names.out}"), "b_O": vec(f"{names.out}.bias"),
             "W_1": rows(lin(names.ffn_in), f"{b}{names.ffn_in}"),
             "b_1": vec(f"{names.ffn_in}.bias"),
             "W_2": rows(lin(names.ffn_out), f"{b}{names.ffn_out}"),
             "b_2": vec(f"{names.ffn_out}.bias")}
    for k, norm in ((1, names.norm1), (2, names.norm2)):
        for name, attr in norm_weights.items():
            layer[f"{name}_{k}"] = vec(f"{norm}.{attr}")
    layer["head"] = heads
    return layer


def _mlm_head(w: Mapping[str, np.ndarray], names: Names, embeddings: np.ndarray,
              config: Config) -> dict[str, Any] | None:
    """The masked-LM head: dense, activation, LayerNorm (the transform), then the
    vocabulary projection, tied to the word embeddings where the file stores no other
    weight and the configuration ties them (refused untied without one); None without
    a head."""
    if f"{names.head_dense}.weight" not in w:
        return None
    dense, norm = names.head_dense, names.head_norm
    d = embeddings.shape[1]
    vocab = embeddings.shape[0]
    head: dict[str, Any] = {
        "W_transform": rows(np.asarray(tensor(w, f"{dense}.weight", ("",), (d, d))).T,
                            f"{dense}.weight"),
        "b_transform": row(tensor(w, f"{dense}.bias", ("",), (d,)), f"{dense}.bias"),
        "transform_norm": {
            "gamma": row(tensor(w, f"{norm}.weight", ("",), (d,)), f"{norm}.weight"),
            "beta": row(tensor(w, f"{norm}.bias", ("",), (d,)), f"{norm}.bias")},
        "masked": True,  # it predicts each position's own token: no next token
    }
    decoder = (tensor(w, f"{names.head_decoder}.weight", ("",), (vocab, d))
               if f"{names.head_decoder}.weight" in w else None)
    if decoder is None and not tie_embeddings(config, True):
        raise missing_head(w, f"{names.head_decoder}.weight", config)
    if decoder is None or np.array_equal(decoder, embeddings):
        head["tied"] = True
    else:
        head["W_vocab"] = rows(np.asarray(decoder).T, f"{names.head_decoder}.weight")
    biases = [tensor(w, k, ("",), (vocab,)) for k in names.head_bias if k in w]
    if any(not np.array_equal(b, biases[0]) for b in biases[1:]):
        raise NotSupportedError(f"{getattr(w, 'name', 'model.safetensors')}: "
                                f"{' and '.join(names.head_bias)} differ; "
                                f"the masked-LM head has one output bias")
    if biases:
        head["b_vocab"] = row(biases[0], names.head_bias[0])
    return head
