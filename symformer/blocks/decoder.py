"""The decoder: masked self-attention, cross-attention, feed-forward; then the next token.

A decoder block reads in :func:`decoder_block`: masked self-attention (causal
unless the ``[decoder]`` says ``causal = false``), cross-attention (queries from the
decoder, keys and values from the encoder's ``output``), feed-forward; each sub-layer
wrapped as in the encoder (:func:`~symformer.blocks.sublayers.wrap`).  With
``W_vocab`` the decoder ends in ``logits``, ``probabilities`` (softmax over the
vocabulary) and ``next_token`` (the exact argmax of the last position,
:mod:`symformer.engine.argmax`).
"""

from __future__ import annotations

from symformer.blocks.sublayers import (
    feed_forward,
    input_stages,
    layer_norm,
    lm_head,
    multi_head_attention,
    wrap,
)
from symformer.engine.graph import Derivation
from symformer.example.schema import DecoderLayer
from symformer.notation_types import Notation
from symformer.ops import Identity

OUTPUT = Notation(r"\bar{z}", "z\u0304", "Decoder output (not the encoder output z that "
                  "cross-attention reads)")


def decoder_stages(g: Derivation, memory: str = "output") -> str:
    """Append the decoder's stages to ``g``; cross-attention reads ``memory``.

    Returns the name of the last stage added.  Every stage added is marked
    ``side="decoder"``.
    """
    dec = g.example.decoder
    before = set(g.stages)
    tokens = dec.tokens
    x = input_stages(g, "decoder.", tokens, dec.embeddings, dec.token_ids,
                     dec.positional_encoding)
    for number, layer in enumerate(dec.layers, start=1):
        x = decoder_block(g, number, x, layer, memory)
    if dec.final_norm is not None:
        x = layer_norm(g, "decoder.final_norm", x, dec.final_norm, "f", 0)
    last = g.add("decoder.output", "output", Identity(OUTPUT, final=True), (x,), tokens, g[x].cols)
    if dec.W_vocab is not None:
        last = lm_head(g, last, dec.W_vocab, None, dec.vocab)
    for name in set(g.stages) - before:
        g.stages[name].side = "decoder"
    return last


def decoder_block(g: Derivation, number: int, x: str, layer: DecoderLayer, memory: str) -> str:
    """One block: masked self-attention, cross-attention over ``memory``, feed-forward;
    a sub-layer the layer does not have (no self or cross head, no ``W_1``) is skipped,
    the others keep their numbers (``add_norm2`` is cross-attention's)."""
    p = f"decoder.layer{number}"

    def self_attention(h: str) -> str:
        return multi_head_attention(g, p, h, layer.self_heads, layer.W_O_self, number,
                                    causal=g.example.decoder.causal, head_prefix="self.",
                                    group="self", b_O=layer.b_O_self)

    def cross_attention(h: str) -> str:
        return multi_head_attention(g, p, h, layer.cross_heads, layer.W_O_cross, number,
                                    causal=False, kv=memory, head_prefix="cross.",
                                    group="cross", b_O=layer.b_O_cross)

    def ffn(h: str) -> str:
        return feed_forward(g, p, h, layer, number)

    if layer.self_heads:
        x = wrap(g, p, 1, x, self_attention, layer, number)
    if layer.cross_heads:
        x = wrap(g, p, 2, x, cross_attention, layer, number)
    if layer.W_1 is not None:
        x = wrap(g, p, 3, x, ffn, layer, number)
    return x
