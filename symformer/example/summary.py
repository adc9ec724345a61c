"""An example in a few words: its short ``repr`` and its notebook display.

An imported model holds millions of exact weights; printing them is never what a
notebook user wants.  :func:`summary_rows` says what the example is (sentence, shape,
conventions, how many weights of each kind) from its shapes alone, without looking
at a single weight, so that it costs nothing even for GPT-2 small.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from symformer.registry import norm_title

if TYPE_CHECKING:
    from symformer.example.schema import Example

#: Tokens shown before "…".
_SHOWN_TOKENS = 8


#: The example's fields that hold weights, and how the summary names them (the inputs
#: of a lesson that gives them, the loss's targets and the lesson stages are not
#: weights).
_WEIGHT_FIELDS = {"embeddings": "embeddings", "positional_embeddings": "positions",
                  "token_type_embeddings": "token types", "embedding_norm": "norms",
                  "layers": "blocks", "final_norm": "norms", "lm_head": "head",
                  "decoder": "decoder", "rope_theta": "positions",
                  "attention": "given Q, K, V", "head": "classifier head"}


def _numbers(value: object, seen: set[int]) -> int:
    """How many matrix entries ``value`` holds: a matrix, or dataclasses and tuples of
    them (a tied head's table is the embeddings', counted there)."""
    import dataclasses

    if id(value) in seen:
        return 0
    seen.add(id(value))
    if hasattr(value, "rows") and hasattr(value, "cols") and hasattr(value, "shape"):
        return value.rows * value.cols
    if isinstance(value, (tuple, list)):
        return sum(_numbers(v, seen) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(_numbers(getattr(value, f.name), seen) for f in dataclasses.fields(value)
                   if not (f.name == "W_vocab" and getattr(value, "tied", False)))
    return 0


def weight_counts(example: Example) -> dict[str, int]:
    """How many exact numbers each kind of weight holds (kinds with none left out)."""
    counts: dict[str, int] = {}
    seen: set[int] = set()
    for name, label in _WEIGHT_FIELDS.items():
        if name == "embeddings" and (example.given_inputs or example.positions_only):
            continue
        count = _numbers(getattr(example, name), seen)
        if count:
            counts[label] = counts.get(label, 0) + count
    return counts


def _tokens(example: Example) -> str:
    shown = ", ".join(repr(t) for t in example.tokens[:_SHOWN_TOKENS])
    more = len(example.tokens) - _SHOWN_TOKENS
    return (f"{len(example.tokens)} token{'s' if len(example.tokens) != 1 else ''} "
            f"[{shown}{f', … {more} more' if more > 0 else ''}]")


def _architecture(example: Example) -> str:
    layers = example.layers
    if example.attention is not None:
        return "one attention step on given Q, K, V"
    if example.objective is not None:
        names = ", ".join(n for n, _ in example.objective.starts)
        return f"an objective of {names} (an optimiser lesson)"
    if not layers:
        return "no layers"
    first = layers[0]
    heads = len(first.heads)
    parts = [f"{len(layers)} layer{'s' if len(layers) != 1 else ''}",
             f"{heads} head{'s' if heads != 1 else ''}" if heads else "no attention"]
    if first.kv_heads:
        parts.append(f"{len(first.kv_heads)} key/value head"
                     f"{'s' if len(first.kv_heads) != 1 else ''}")
    norm = {"biased": "LayerNorm", "unbiased": "LayerNorm (unbiased std)"}.get(
        first.layer_norm) or norm_title(first.layer_norm)  # another: as it declares it
    parts.append(f"{first.norm}-norm {norm}" if first.norm != "none" else "no norm")
    if first.W_1 is not None:
        gated = "gated " if first.W_gate is not None else ""
        parts.append(f"{gated}{first.activation} FFN {first.d_ff}")
    elif first.moe is not None:
        parts.append(f"{len(first.moe.experts)} {first.activation} experts, "
                     f"top-{first.moe.top_k}")
    if first.attention_dropout is not None or first.ffn_dropout is not None:
        parts.append("dropout with given masks")
    return ", ".join(parts)


def summary_rows(example: Example) -> list[tuple[str, str]]:
    """(what, value) rows describing ``example``, from its shapes only."""
    counts = weight_counts(example)
    rows = [("title", example.title or "(untitled)"),
            ("tokens", _tokens(example)),
            ("vocabulary", f"{len(example.vocab):,}"),
            ("d_model", str(example.d_model)),
            ("blocks", _architecture(example)),
            ("positions", example.positional_encoding),
            ("mask", "causal" if example.causal else "none")]
    if example.lm_head is not None:
        rows.append(("head", "tied to the embeddings" if example.lm_head.tied
                     else "its own vocabulary weights"))
    if example.head is not None:
        head = example.head
        rows.append(("head", f"{head.output} over {head.W_C.cols} output"
                     f"{'s' if head.W_C.cols != 1 else ''} (pooling: {head.pooling})"))
    if example.decoder is not None:
        rows.append(("decoder", "yes (encoder-decoder)"))
    if example.loss is not None:
        rows.append(("loss", example.loss.kind))
    rows.append(("weights", f"{sum(counts.values()):,} exact numbers ("
                 + ", ".join(f"{k} {v:,}" for k, v in counts.items()) + ")"))
    rows.append(("source", example.source))
    return rows


def example_repr(example: Example) -> str:
    """A one-line ``repr``: what the example is, never its weights."""
    fields = dict(summary_rows(example))
    return (f"<Example {fields['title']!r}: {fields['tokens']}, d_model {fields['d_model']}, "
            f"{fields['blocks']}, {fields['weights'].split(' (')[0]}>")


def example_html(example: Example) -> str:
    """A small HTML table for a notebook: the same rows as :func:`summary_rows`."""
    cells = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
                    f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
                    for k, v in summary_rows(example))
    return f"<table class='symformer-example'>{cells}</table>"
