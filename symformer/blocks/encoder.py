"""The encoder: the order of a block reads in :func:`encoder_block`, in two lines."""

from __future__ import annotations

from symformer.blocks.cost import derivation_work
from symformer.blocks.decoder import decoder_stages
from symformer.blocks.dropout import ATTENTION_DROPPED, FFN_DROPPED, add_dropout
from symformer.blocks.given_attention import given_attention
from symformer.blocks.head import objective_stages, output_head
from symformer.blocks.moe import mixture_of_experts
from symformer.blocks.requested_stages import add_requested_stages
from symformer.blocks.sublayers import (
    feed_forward,
    input_stages,
    layer_norm,
    lm_head,
    multi_head_attention,
    prediction_transform,
    wrap,
)
from symformer.blocks.work import check_size
from symformer.engine.graph import Derivation
from symformer.errors import InputError
from symformer.example.schema import Example, GivenDropout, Layer
from symformer.notation_types import Notation
from symformer.ops import Identity

OUTPUT = Notation("z", "z", "Encoder output")
#: A decoder-only model's stack (causal, or read by an LM head) is a decoder's.
DECODER_ONLY_OUTPUT = Notation("z", "z", "Decoder output")


def derive(example: Example, causal: bool | None = None,
           max_work: int | None = None) -> Derivation:
    """Push ``example`` through its encoder blocks (and its decoder); every stage exact.

    ``causal`` forces the causal mask on (True) or off (False); ``None`` uses the
    example's own setting.  ``max_work`` bounds the estimated operation count.
    """
    causal = example.causal if causal is None else causal
    check_size(example, max_work, derivation_work(example))  # the derivation it runs
    g = Derivation(example, causal)
    if example.objective is not None:  # an optimiser lesson: f(theta, ...) is the loss
        objective_stages(g, example.objective)
        return g
    if example.attention is not None:
        given_attention(g, example.attention)
        add_requested_stages(g)  # e.g. the Jacobian of a row of the given attention's weights
        return g
    x = input_stages(g, "", example.tokens, example.embeddings,
                     () if example.given_inputs else example.embedding_ids,
                     example.positional_encoding, example.positional_encoding_base,
                     example.positional_embeddings,
                     given="zeros" if example.positions_only else example.given_inputs,
                     types=None if example.token_type_embeddings is None
                     else (example.token_type_embeddings, example.segments))
    if example.embedding_norm is not None:  # BERT's LayerNorm of the input rows
        x = layer_norm(g, "embedding_norm", x, example.embedding_norm, "f", 0)
    for number, layer in enumerate(example.layers, start=1):
        x = encoder_block(g, number, x, layer)
    if example.final_norm is not None:
        x = layer_norm(g, "final_norm", x, example.final_norm, "f", 0)
    decoder_only = example.decoder is None and (example.lm_head is not None or g.causal)
    out = g.add("output", "output",
                Identity(DECODER_ONLY_OUTPUT if decoder_only else OUTPUT, final=True),
                (x,), example.tokens, g[x].cols)
    if example.decoder is not None:
        decoder_stages(g, memory="output")
    if example.lm_head is not None:
        head = example.lm_head
        z = out if head.W_transform is None else prediction_transform(g, out, head)
        lm_head(g, z, head.W_vocab, head.b_vocab, example.vocab, head.masked)
    if example.head is not None:  # a classification or regression head, no vocabulary
        output_head(g, out, example.head)
    add_requested_stages(g)  # the [stages] table's Jacobians and products, if any
    return g


def encoder_block(g: Derivation, number: int, x: str, layer: Layer) -> str:
    """One block: x = wrap(attention)(x); x = wrap(ffn)(x) (post-, pre- or no norm).

    A block without ``W_1`` (or ``[layer.moe]``) has no feed-forward sub-layer; one
    without heads, no attention (its FFN's stages are ``P.ffn.*``, its Add & Norm
    ``P.add_norm1``).  A mixture of experts takes the FFN's place (``P.moe.*``); a
    sub-layer's dropout with a given mask follows its output (``STAGE.dropout``).
    """
    p = f"layer{number}"

    def attention(h: str) -> str:
        return _dropped(g, multi_head_attention(
            g, p, h, layer.heads, layer.W_O, number, causal=g.causal, block=layer,
            b_O=layer.b_O, kv_heads=layer.kv_heads), layer.attention_dropout,
            ATTENTION_DROPPED, f"layer {number}, attention_dropout")

    def ffn(h: str) -> str:
        out = (feed_forward(g, p, h, layer, number) if layer.moe is None
               else mixture_of_experts(g, p, h, layer.moe, number))
        return _dropped(g, out, layer.ffn_dropout, FFN_DROPPED, f"layer {number}, ffn_dropout")

    if not layer.heads:  # an FFN-only block: its Add & Norm is the first
        return wrap(g, p, 1, x, ffn, layer, number)
    x = wrap(g, p, 1, x, attention, layer, number)
    if layer.W_1 is None and layer.moe is None:
        return x
    return wrap(g, p, 2, x, ffn, layer, number)


def _dropped(g: Derivation, stage: str, dropout: GivenDropout | None,
             notation: Notation, key: str) -> str:
    """``stage``, or ``STAGE.dropout`` with the example's given mask (``key`` names it)."""
    if dropout is None:
        return stage
    if len(dropout.mask) != len(g[stage].rows):  # generate, the KV cache: more tokens
        raise InputError(f"{g.example.source}: {key}: the mask has a row for each of the "
                         f"example's {len(dropout.mask)} tokens, but this run has "
                         f"{len(g[stage].rows)} (a given mask cannot follow generated "
                         f"tokens)")
    return add_dropout(g, stage, dropout.mask, dropout.p, notation=notation)
