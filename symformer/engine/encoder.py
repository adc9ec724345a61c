"""The encoder, stage by stage: the order of the block reads in :func:`encoder_block`.

Stage names are stable (users and tests address stages by them); ``layer`` and
``head`` numbers are 1-based.
"""

from __future__ import annotations

import os
import re

import sympy

from symformer.engine import ops
from symformer.engine.graph import Derivation
from symformer.errors import InputError
from symformer.example.schema import Example, Layer

#: Refuse runs whose estimated operation count exceeds this (about two seconds of
#: ball arithmetic per million operations); --max-work or SYMFORMER_MAX_WORK changes
#: it, and 0 turns the limit off.
DEFAULT_MAX_WORK = 5_000_000


def derive(example: Example, causal: bool | None = None,
           max_work: int | None = None) -> Derivation:
    """Push ``example`` through its encoder blocks; every stage exact.

    ``causal`` forces the causal mask on (True) or off (False); ``None`` uses the
    example's own setting.  ``max_work`` bounds the estimated operation count.
    """
    causal = example.causal if causal is None else causal
    check_size(example, max_work)
    g = Derivation(example, causal)
    tokens = example.tokens
    dims = tuple(f"d{j + 1}" for j in range(example.d_model))
    x = input_stages(g, "", tokens, example.embeddings, example.token_ids,
                     example.positional_encoding)
    for number, layer in enumerate(example.layers, start=1):
        x = encoder_block(g, number, x, layer)
    g.add("output", "output", ops.Identity(), (x,), tokens, dims)
    if example.decoder is not None:
        from symformer.engine.decoder import decoder_stages  # it builds on this module

        decoder_stages(g, memory="output")
    return g


def input_stages(g: Derivation, prefix: str, tokens: tuple[str, ...], table: sympy.Matrix,
                 token_ids: tuple[int, ...], pe: str) -> str:
    """``PREFIXembeddings`` (rows of ``table``), ``PREFIXpositional_encoding``, their sum."""
    dims = tuple(f"d{j + 1}" for j in range(table.cols))
    lookup = sympy.Matrix([list(table.row(t)) for t in token_ids])
    e = g.add(f"{prefix}embeddings", "embeddings", ops.Constant(lookup), (), tokens, dims)
    p = g.add(f"{prefix}positional_encoding", "positional_encoding",
              ops.Constant(positional_encoding(len(tokens), table.cols, pe)), (), tokens, dims)
    return g.add(f"{prefix}input", "input", ops.Add(), (e, p), tokens, dims)


def positional_encoding(seq_len: int, d_model: int, kind: str = "sinusoidal") -> sympy.Matrix:
    """Exact sinusoidal positional encoding (base 10000).

    PE[pos, 2i] = sin(pos / 10000^(2i/d)) and PE[pos, 2i+1] = cos(pos / 10000^(2i/d)),
    so dimensions 0, 2, ... (d1, d3 counting from 1) are sines.
    """
    if kind == "none":
        return sympy.zeros(seq_len, d_model)

    def entry(pos: int, j: int) -> sympy.Expr:
        angle = sympy.Integer(pos) * sympy.Integer(10000) ** sympy.Rational(-(j - j % 2), d_model)
        return sympy.sin(angle) if j % 2 == 0 else sympy.cos(angle)

    return sympy.Matrix(seq_len, d_model, entry)


def encoder_block(g: Derivation, number: int, x: str, layer: Layer) -> str:
    """One block: attention and FFN sub-layers, each wrapped in residual + LayerNorm."""
    p = f"layer{number}"
    if layer.norm == "post":  # LN(x + Sublayer(x)), the original paper and the post
        a = multi_head_attention(g, p, x, layer, number)
        y = add_norm(g, f"{p}.add_norm1", x, a, layer, 1, number)
        f = feed_forward(g, p, y, layer, number)
        return add_norm(g, f"{p}.add_norm2", y, f, layer, 2, number)
    # pre-norm: x + Sublayer(LN(x))
    n1 = layer_norm(g, f"{p}.norm1", x, layer, 1, number)
    y = residual(g, f"{p}.add_norm1", x, multi_head_attention(g, p, n1, layer, number), number)
    n2 = layer_norm(g, f"{p}.norm2", y, layer, 2, number)
    return residual(g, f"{p}.add_norm2", y, feed_forward(g, p, n2, layer, number), number)


def multi_head_attention(g: Derivation, p: str, x: str, layer: Layer, number: int, *,
                         heads: tuple | None = None, W_O: sympy.Matrix | None = None,
                         kv: str | None = None, causal: bool | None = None,
                         head_prefix: str = "", group: str = "attention") -> str:
    """Every head on ``x``, concatenated, then W_O (plain concatenation when W_O is None).

    The decoder reuses this: ``kv`` takes keys and values from another stage
    (cross-attention), ``head_prefix``/``group`` name the stages
    (``decoder.layer1.self.head1.Q``, ``decoder.layer1.self.output``).
    """
    causal = g.causal if causal is None else causal
    heads = layer.heads if heads is None else heads
    W_O = layer.W_O if W_O is None and group == "attention" else W_O
    outputs = [attention_head(g, f"{p}.{head_prefix}head{k}", x, kv or x, head, causal,
                              number, k)
               for k, head in enumerate(heads, start=1)]
    return _combine(g, p, x, outputs, W_O, number, group)


def _combine(g: Derivation, p: str, x: str, heads: list[str], W_O: sympy.Matrix | None,
             number: int, mha: str) -> str:
    rows = g[x].rows
    width = sum(g[h].shape[1] for h in heads)
    concat_cols = tuple(f"c{j + 1}" for j in range(width))
    concat = g.add(f"{p}.{mha}.concat", "concat", ops.Concat(), heads, rows, concat_cols,
                   layer=number)
    d = g[x].shape[1]
    op = ops.Identity() if W_O is None else ops.Affine(W_O)
    return g.add(f"{p}.{mha}.output", "attention_output", op, (concat,), rows,
                 tuple(f"d{j + 1}" for j in range(d)), layer=number)


def attention_head(g: Derivation, p: str, x: str, kv: str, head, causal: bool, number: int,
                   k: int) -> str:
    """Scaled dot-product attention of one head: Q, K, V, scores, weights, output."""
    queries, keys = g[x].rows, g[kv].rows
    where = {"layer": number, "head": k}

    def project(name: str, source: str, W: sympy.Matrix, letter: str) -> str:
        cols = tuple(f"{letter}{j + 1}" for j in range(W.cols))
        return g.add(f"{p}.{name}", name, ops.Affine(W), (source,), g[source].rows, cols, **where)

    Q = project("Q", x, head.W_Q, "q")
    K = project("K", kv, head.W_K, "k")
    V = project("V", kv, head.W_V, "v")
    raw = g.add(f"{p}.raw_scores", "raw_scores", ops.MatMul(transpose_b=True), (Q, K),
                queries, keys, **where)
    masked = frozenset((i, j) for i in range(len(queries)) for j in range(len(keys))
                       if causal and j > i)
    scores = g.add(f"{p}.scores", "scores",
                   ops.ScaleMask(head.d_k, masked, g.example.mask_value), (raw,),
                   queries, keys, **where)
    weights = g.add(f"{p}.weights", "weights", ops.Softmax(), (scores,), queries, keys, **where)
    cols = tuple(f"o{j + 1}" for j in range(head.d_v))
    return g.add(f"{p}.output", "head_output", ops.MatMul(), (weights, V), queries, cols,
                 **where)


def feed_forward(g: Derivation, p: str, x: str, layer: Layer, number: int) -> str:
    """Position-wise FFN: hidden = x W_1 + b_1, activation, output = a W_2 + b_2."""
    rows = g[x].rows
    ff = tuple(f"ff{j + 1}" for j in range(layer.d_ff))
    hidden = g.add(f"{p}.ffn.hidden", "ffn_hidden", ops.Affine(layer.W_1, layer.b_1), (x,),
                   rows, ff, layer=number)
    act = g.add(f"{p}.ffn.activation", "ffn_activation", ops.Activation(layer.activation),
                (hidden,), rows, ff, layer=number)
    return g.add(f"{p}.ffn.output", "ffn_output", ops.Affine(layer.W_2, layer.b_2), (act,),
                 rows, g[x].cols, layer=number)


def residual(g: Derivation, name: str, x: str, sub: str, number: int) -> str:
    """The residual connection x + Sublayer(x)."""
    return g.add(name, "residual", ops.Add(), (x, sub), g[x].rows, g[x].cols, layer=number)


def layer_norm(g: Derivation, name: str, x: str, layer: Layer, which: int, number: int) -> str:
    """LayerNorm of each row of ``x``, with its mean and variance as stages of their own."""
    rows = g[x].rows
    unbiased = layer.layer_norm == "unbiased"
    mean = g.add(f"{name}.mean", "mean", ops.RowMean(), (x,), rows, ("mean",), layer=number)
    var = g.add(f"{name}.variance", "variance", ops.RowVariance(unbiased), (x, mean), rows,
                ("variance",), layer=number)
    gamma, beta = getattr(layer, f"gamma_{which}"), getattr(layer, f"beta_{which}")
    return g.add(name, "layer_norm", ops.Normalize(layer.eps, gamma, beta, unbiased),
                 (x, mean, var), rows, g[x].cols, layer=number)


def add_norm(g: Derivation, name: str, x: str, sub: str, layer: Layer, which: int,
             number: int) -> str:
    """Post-norm Add & Norm: LayerNorm(x + Sublayer(x)); the sum is ``NAME.sum``."""
    total = residual(g, f"{name}.sum", x, sub, number)
    return layer_norm(g, name, total, layer, which, number)


def estimated_work(example: Example) -> int:
    """Multiply-adds of one forward pass: what a derivation's cost grows with."""
    n, d = len(example.tokens), example.d_model
    work = n * d
    for layer in example.layers:
        for h in layer.heads:
            work += n * d * (2 * h.d_k + h.d_v) + n * n * (h.d_k + h.d_v + 2)
        work += n * sum(h.d_v for h in layer.heads) * d + 2 * n * d * layer.d_ff + 8 * n * d
    if example.decoder is not None:
        work += example.decoder.estimated_work(n)
    return work


#: What one operation on SymPy expressions costs, in ball-arithmetic operations
#: (measured on the project's machine: about 200).
SYMBOLIC_COST = 200


def symbolic_work(example: Example) -> int:
    """The cost of the exact proofs ``prove`` makes, in ball-arithmetic operations.

    Every stage's local formulas (as many terms as the forward pass has operations)
    for the unmasked and the masked derivation, each softmax row's sum brought over
    a common denominator (about n^2 per row of n keys), each LayerNorm row's squared
    deviations (about d^2 per row), each at :data:`SYMBOLIC_COST`.
    """
    n, d = len(example.tokens), example.d_model
    terms = 2 * estimated_work(example)
    for layer in example.layers:
        terms += 2 * len(layer.heads) * n ** 3 + 2 * n * d * d
    if example.decoder is not None:
        m = len(example.decoder.tokens)
        for layer in example.decoder.layers:
            terms += len(layer.self_heads) * m ** 3 + len(layer.cross_heads) * m * n * n
            terms += 3 * m * d * d
    return SYMBOLIC_COST * terms


def work_limit(max_work: int | None = None) -> int:
    """The limit in force: ``max_work``, else SYMFORMER_MAX_WORK, else the default; 0 = none.

    Raises :class:`InputError` for a SYMFORMER_MAX_WORK that is not a whole number >= 0.
    """
    if max_work is not None:
        if max_work < 0:
            raise InputError(f"the work limit must be 0 (no limit) or more, found {max_work}")
        return max_work
    text = os.environ.get("SYMFORMER_MAX_WORK")
    if text is None:
        return DEFAULT_MAX_WORK
    value = parse_work_limit(text)
    if value is None:
        raise InputError(f"SYMFORMER_MAX_WORK={text!r}: expected a whole number of operations "
                         f"such as 20000000 (0 means no limit)")
    return value


def parse_work_limit(text: str) -> int | None:
    """A work limit written as ASCII digits (``_`` allowed between them), or None."""
    text = text.strip()
    if not re.fullmatch(r"[0-9](_?[0-9]){0,29}", text, re.ASCII):
        return None
    return int(text)


def check_size(example: Example, max_work: int | None, work: int | None = None,
               command: str = "") -> None:
    """Refuse examples whose derivation would not finish in reasonable time.

    ``work`` is the estimate of what the caller will do (default: one forward pass);
    ``command`` names it in the message.  A limit of 0 means no limit.
    """
    limit = work_limit(max_work)
    work = estimated_work(example) if work is None else work
    if limit and work > limit:
        doing = f"`symformer {command}` on this example" if command else "this example"
        raise InputError(
            f"{example.source}: {doing} needs about {work:,} operations, more than the "
            f"limit of {limit:,}; raise it with --max-work N (or SYMFORMER_MAX_WORK=N; 0 "
            f"means no limit) if you are prepared to wait"
        )
