"""The pieces blocks are composed of: input rows, attention, feed-forward, normalisation.

Each function appends the stages of one piece to a :class:`Derivation` and returns
the name of its last stage.  Each stage gets its operation and, where the
operation plays a role (a projection making queries), the role's notation; the
operations own everything else.  Stage names are stable (users and tests address
stages by them); ``layer`` and ``head`` numbers are 1-based.
"""

from __future__ import annotations

from collections.abc import Callable

import sympy

from symformer.engine.graph import Derivation
from symformer.example.schema import Block, Head
from symformer.ops import (
    GELU,
    Add,
    Concat,
    DotScores,
    Embedding,
    Identity,
    Normalize,
    Notation,
    PositionalEncoding,
    Projection,
    ReLU,
    RowMean,
    RowVariance,
    ScaleMask,
    Softmax,
    WeightedSum,
)

#: The notation of each role an operation plays (one symbol per kind of vector).
INPUT = Notation("x", "x", "Input row (embedding + positional encoding)")
QUERY = Notation("q", "q", "Query")
KEY = Notation("k", "k", "Key")
VALUE = Notation("v", "v", "Value")
MULTI_HEAD = Notation("m", "m", "Multi-head output (after W_O)")
FFN_HIDDEN = Notation("h", "h", "FFN hidden layer")
FFN_OUTPUT = Notation("f", "f", "FFN output")
UNBIASED_VARIANCE = Notation("s^2", "s²", "Unbiased variance")

#: A sub-layer: reads one stage, returns the name of its output stage.
Sublayer = Callable[[str], str]


def input_stages(g: Derivation, prefix: str, tokens: tuple[str, ...], table: sympy.Matrix,
                 token_ids: tuple[int, ...], pe: str) -> str:
    """``PREFIXembeddings`` (rows of ``table``), ``PREFIXpositional_encoding``, their sum."""
    dims = tuple(f"d{j + 1}" for j in range(table.cols))
    e = g.add(f"{prefix}embeddings", "embeddings", Embedding(table, token_ids), (), tokens,
              dims)
    p = g.add(f"{prefix}positional_encoding", "positional_encoding",
              PositionalEncoding(len(tokens), table.cols, pe), (), tokens, dims)
    return g.add(f"{prefix}input", "input", Add(INPUT), (e, p), tokens, dims)


def wrap(g: Derivation, p: str, k: int, x: str, sublayer: Sublayer, block: Block,
         number: int) -> str:
    """Sub-layer ``k`` with its residual connection and LayerNorm.

    Post-norm ``LN(x + F(x))`` (the original paper, the post); pre-norm
    ``x + F(LN(x))`` (most modern decoders).  The stages are ``P.add_normK`` (with
    ``.sum`` for post-norm's residual sum) and, pre-norm, ``P.normK``.
    """
    if block.norm == "post":
        total = residual(g, f"{p}.add_norm{k}.sum", x, sublayer(x), number)
        return layer_norm(g, f"{p}.add_norm{k}", total, block, k, number)
    normed = layer_norm(g, f"{p}.norm{k}", x, block, k, number)
    return residual(g, f"{p}.add_norm{k}", x, sublayer(normed), number)


def multi_head_attention(g: Derivation, p: str, x: str, heads: tuple[Head, ...],
                         W_O: sympy.Matrix | None, number: int, *, causal: bool,
                         kv: str | None = None, head_prefix: str = "",
                         group: str = "attention") -> str:
    """Every head on ``x``, concatenated, then W_O (plain concatenation when W_O is None).

    ``kv`` takes keys and values from another stage (cross-attention);
    ``head_prefix``/``group`` name the stages (``decoder.layer1.self.head1.Q``,
    ``decoder.layer1.self.output``).
    """
    outputs = [attention_head(g, f"{p}.{head_prefix}head{k}", x, kv or x, head, causal,
                              number, k)
               for k, head in enumerate(heads, start=1)]
    rows = g[x].rows
    width = sum(g[h].shape[1] for h in outputs)
    concat = g.add(f"{p}.{group}.concat", "concat", Concat(), outputs, rows,
                   tuple(f"c{j + 1}" for j in range(width)), layer=number)
    op = (Identity(MULTI_HEAD, "no W_O: the concatenation is the output") if W_O is None
          else Projection(W_O, notation=MULTI_HEAD, weight="W_O"))
    return g.add(f"{p}.{group}.output", "attention_output", op, (concat,), rows,
                 g[x].cols, layer=number)


def attention_head(g: Derivation, p: str, x: str, kv: str, head: Head, causal: bool,
                   number: int, k: int) -> str:
    """Scaled dot-product attention of one head: Q, K, V, scores, weights, output."""
    queries, keys = g[x].rows, g[kv].rows
    where = {"layer": number, "head": k}

    def project(name: str, source: str, W: sympy.Matrix, notation: Notation) -> str:
        cols = tuple(f"{notation.text}{j + 1}" for j in range(W.cols))
        return g.add(f"{p}.{name}", name, Projection(W, notation=notation, weight=f"W_{name}"),
                     (source,), g[source].rows, cols, **where)

    Q = project("Q", x, head.W_Q, QUERY)                  # (n, d_k)
    K = project("K", kv, head.W_K, KEY)                   # (m, d_k)
    V = project("V", kv, head.W_V, VALUE)                 # (m, d_v)
    raw = g.add(f"{p}.raw_scores", "raw_scores", DotScores(), (Q, K), queries, keys, **where)
    masked = frozenset((i, j) for i in range(len(queries)) for j in range(len(keys))
                       if causal and j > i)
    scores = g.add(f"{p}.scores", "scores", ScaleMask(head.d_k, masked, g.example.mask_value),
                   (raw,), queries, keys, **where)
    weights = g.add(f"{p}.weights", "weights", Softmax(), (scores,), queries, keys, **where)
    cols = tuple(f"o{j + 1}" for j in range(head.d_v))
    return g.add(f"{p}.output", "head_output", WeightedSum(), (weights, V), queries, cols,
                 **where)


def feed_forward(g: Derivation, p: str, x: str, block: Block, number: int) -> str:
    """Position-wise FFN: hidden = x W_1 + b_1, activation, output = a W_2 + b_2."""
    rows = g[x].rows
    ff = tuple(f"ff{j + 1}" for j in range(block.d_ff))
    hidden = g.add(f"{p}.ffn.hidden", "ffn_hidden",
                   Projection(block.W_1, block.b_1, FFN_HIDDEN, "W_1", "b_1"), (x,), rows, ff,
                   layer=number)
    activation = {"relu": ReLU, "gelu": GELU}[block.activation]()
    act = g.add(f"{p}.ffn.activation", "ffn_activation", activation, (hidden,), rows, ff,
                layer=number)
    return g.add(f"{p}.ffn.output", "ffn_output",
                 Projection(block.W_2, block.b_2, FFN_OUTPUT, "W_2", "b_2"), (act,), rows,
                 g[x].cols, layer=number)


def residual(g: Derivation, name: str, x: str, sub: str, number: int) -> str:
    """The residual connection x + Sublayer(x)."""
    return g.add(name, "residual", Add(), (x, sub), g[x].rows, g[x].cols, layer=number)


def layer_norm(g: Derivation, name: str, x: str, block: Block, which: int, number: int) -> str:
    """LayerNorm of each row of ``x``, with its mean and variance as stages of their own."""
    rows = g[x].rows
    unbiased = block.layer_norm == "unbiased"
    mean = g.add(f"{name}.mean", "mean", RowMean(), (x,), rows, ("mean",), layer=number)
    var = g.add(f"{name}.variance", "variance",
                RowVariance(unbiased, UNBIASED_VARIANCE if unbiased else None), (x, mean),
                rows, ("variance",), layer=number)
    gamma, beta = getattr(block, f"gamma_{which}"), getattr(block, f"beta_{which}")
    return g.add(name, "layer_norm", Normalize(block.eps, gamma, beta, unbiased),
                 (x, mean, var), rows, g[x].cols, layer=number)
