"""The encoder: the order of a block reads in :func:`encoder_block`, in two lines."""

from __future__ import annotations

import os

from symformer.blocks.decoder import decoder_stages
from symformer.blocks.sublayers import (
    feed_forward,
    input_stages,
    layer_norm,
    lm_head,
    multi_head_attention,
    wrap,
)
from symformer.engine.graph import Derivation
from symformer.errors import InputError
from symformer.example.schema import Example, Layer
from symformer.ops import Identity, Notation

OUTPUT = Notation("z", "z", "Encoder output")

#: Refuse derivations whose float operation count exceeds this (about a second of
#: ball arithmetic per million operations); SYMFORMER_MAX_WORK raises it.
DEFAULT_MAX_WORK = 5_000_000


def derive(example: Example, causal: bool | None = None,
           max_work: int | None = None) -> Derivation:
    """Push ``example`` through its encoder blocks (and its decoder); every stage exact.

    ``causal`` forces the causal mask on (True) or off (False); ``None`` uses the
    example's own setting.  ``max_work`` bounds the estimated operation count.
    """
    causal = example.causal if causal is None else causal
    check_size(example, max_work)
    g = Derivation(example, causal)
    x = input_stages(g, "", example.tokens, example.embeddings, example.token_ids,
                     example.positional_encoding, example.positional_encoding_base,
                     example.positional_embeddings)
    for number, layer in enumerate(example.layers, start=1):
        x = encoder_block(g, number, x, layer)
    if example.final_norm is not None:
        x = layer_norm(g, "final_norm", x, example.final_norm, "f", 0)
    out = g.add("output", "output", Identity(OUTPUT), (x,), example.tokens, g[x].cols)
    if example.decoder is not None:
        decoder_stages(g, memory="output")
    if example.lm_head is not None:
        lm_head(g, out, example.lm_head.W_vocab, example.lm_head.b_vocab, example.vocab)
    return g


def encoder_block(g: Derivation, number: int, x: str, layer: Layer) -> str:
    """One block: x = wrap(attention)(x); x = wrap(ffn)(x) (post-, pre- or no norm).

    A block without ``W_1`` has no feed-forward sub-layer.
    """
    p = f"layer{number}"

    def attention(h: str) -> str:
        return multi_head_attention(g, p, h, layer.heads, layer.W_O, number, causal=g.causal,
                                    block=layer, b_O=layer.b_O, kv_heads=layer.kv_heads)

    def ffn(h: str) -> str:
        return feed_forward(g, p, h, layer, number)

    x = wrap(g, p, 1, x, attention, layer, number)
    if layer.W_1 is None:
        return x
    return wrap(g, p, 2, x, ffn, layer, number)


def estimated_work(example: Example) -> int:
    """Multiply-adds of one forward pass: what a derivation's cost grows with."""
    n, d = len(example.tokens), example.d_model
    work = n * d
    for layer in example.layers:
        for h in layer.heads:
            work += n * d * (2 * h.d_k + h.d_v) + n * n * (h.d_k + h.d_v + 2)
        gated = 3 if layer.W_gate is not None else 2
        work += n * sum(h.d_v for h in layer.heads) * d + gated * n * d * layer.d_ff + 8 * n * d
    if example.lm_head is not None:
        work += n * d * len(example.vocab) + 2 * n * len(example.vocab)
    if example.decoder is not None:
        work += example.decoder.estimated_work(n)
    return work


def check_size(example: Example, max_work: int | None) -> None:
    """Refuse examples whose derivation would not finish in reasonable time."""
    limit = max_work or int(os.environ.get("SYMFORMER_MAX_WORK", DEFAULT_MAX_WORK))
    work = estimated_work(example)
    if work > limit:
        raise InputError(
            f"{example.source}: this example needs about {work:,} operations per "
            f"evaluation, more than the limit of {limit:,}; raise it with --max-work N "
            f"(or SYMFORMER_MAX_WORK=N) if you are prepared to wait"
        )
