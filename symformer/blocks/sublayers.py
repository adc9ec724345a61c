"""The pieces blocks are composed of: input rows, attention, feed-forward, normalisation.

Each function appends the stages of one piece to a :class:`Derivation` and returns
the name of its last stage.  Each stage gets its operation and, where the
operation plays a role (a projection making queries), the role's notation; the
operations own everything else.  Stage names are stable (users and tests address
stages by them); ``layer`` and ``head`` numbers are 1-based.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from symformer.engine.argmax import TieProver
from symformer.engine.graph import Derivation
from symformer.errors import InputError
from symformer.example.schema import Block, Head, KVHead
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops import (
    Add,
    ALiBi,
    ArgmaxIndicator,
    Concat,
    DotScores,
    Embedding,
    GatedProduct,
    Identity,
    LearnedPositional,
    Operation,
    Parameter,
    PositionalEncoding,
    Projection,
    RoPE,
    ScaleMask,
    Softmax,
    WeightedSum,
)

# a LayerNorm's output moments' notation (side_stages.py reads it from here)
from symformer.ops.normalize import OUTPUT_MEAN, OUTPUT_VARIANCE  # noqa: F401
from symformer.registry import activation as activation_op
from symformer.registry import normalisation, score_function

#: The notation of each role an operation plays (one symbol per kind of vector).
INPUT = Notation("x", "x", "Input row (embedding + positional encoding)")
GIVEN = Notation("e", "e", "Given input row (before the positional encoding)")
GIVEN_INPUT = Notation("x", "x", "Input row (as given)")
#: What the equation of a given matrix (input rows; Q, K, V) says after it.
GIVEN_REMARK = "as the example gives it"
QUERY = Notation("q", "q", "Query")
KEY = Notation("k", "k", "Key")
VALUE = Notation("v", "v", "Value")
MULTI_HEAD = Notation("m", "m", "Multi-head output")
FFN_HIDDEN = Notation("h", "h", "FFN hidden layer")
FFN_OUTPUT = Notation("f", "f", "FFN output")
QUERY_ROTATED = Notation(r"\tilde{q}", "q̃", "Rotated query (RoPE)")
KEY_ROTATED = Notation(r"\tilde{k}", "k̃", "Rotated key (RoPE)")
FFN_GATE = Notation("g", "g", "FFN gate")
FFN_GATE_ACTIVATION = Notation(r"\phi", "φ", "Activated gate")
TOKEN_TYPE = Notation(r"e^{\mathrm{seg}}", "e^seg", "Token-type (segment) embedding")
TYPED = Notation(r"\hat{e}", "ê", "Token embedding + token-type embedding")
TRANSFORM = Notation(r"\tilde{z}", "z̃", "Prediction-head transform")
LOGITS = Notation(r"\ell", "ℓ", "Logits (one score per vocabulary entry)")
PROBABILITIES = Notation("p", "p", "Next-token probabilities (softmax)")

#: A sub-layer: reads one stage, returns the name of its output stage.
Sublayer = Callable[[str], str]


def input_stages(g: Derivation, prefix: str, tokens: tuple[str, ...], table: sympy.Matrix,
                 token_ids: tuple[int, ...], pe: str, base: int | sympy.Rational = 10000,
                 learned: sympy.Matrix | None = None, given: bool | str = False,
                 types: tuple[sympy.Matrix, tuple[int, ...]] | None = None) -> str:
    """``PREFIXembeddings`` (rows of ``table``), ``PREFIXpositional_encoding``, their sum.

    ``pe = "learned"`` takes the rows of ``learned``; ``"rope"`` and ``"none"`` add zeros
    (RoPE rotates the queries and keys instead, :func:`attention_head`).  ``given``: the
    rows of ``table`` are the example's given inputs, one per token (no lookup); with no
    positional encoding they are ``PREFIXinput`` itself; ``given = "zeros"``: there are
    no rows, ``PREFIXpositional_encoding`` alone is the input.  ``types`` (a token-type
    table and each token's type, BERT's segments) adds the type's row:
    ``PREFIXtoken_type_embeddings`` and ``PREFIXtyped_embeddings``, the sum read next.
    """
    dims = tuple(f"d{j}" for j in range(table.cols))
    if given and pe == "none":  # the given rows are the input
        rows = Parameter(table, GIVEN_INPUT, GIVEN_REMARK, ("X", "X"), role="input")
        return g.add(f"{prefix}input", "input", rows, (), tokens, dims)
    if pe == "learned":
        if learned.rows < len(tokens):
            raise InputError(f"{g.example.source}: positional_embeddings has {learned.rows} "
                             f"rows, fewer than the {len(tokens)} tokens")
        op: Operation = LearnedPositional(learned, len(tokens))
    else:
        op = PositionalEncoding(len(tokens), table.cols, pe, base=base)
    if given == "zeros":  # no rows: the positional encoding alone is the input
        return g.add(f"{prefix}positional_encoding", "positional_encoding", op, (), tokens,
                     dims)
    lookup = (Parameter(table, GIVEN, GIVEN_REMARK, ("X", "X"), role="input") if given
              else Embedding(table, token_ids))
    e = g.add(f"{prefix}embeddings", "embeddings", lookup, (), tokens, dims)
    if types is not None:
        s = g.add(f"{prefix}token_type_embeddings", "embeddings",
                  Embedding(types[0], types[1], TOKEN_TYPE, of_types=True), (), tokens, dims)
        e = g.add(f"{prefix}typed_embeddings", "input", Add(TYPED), (e, s), tokens, dims)
    p = g.add(f"{prefix}positional_encoding", "positional_encoding", op, (), tokens, dims)
    return g.add(f"{prefix}input", "input", Add(INPUT), (e, p), tokens, dims)


def wrap(g: Derivation, p: str, k: int, x: str, sublayer: Sublayer, block: Block,
         number: int) -> str:
    """Sub-layer ``k`` with its residual connection and LayerNorm.

    Post-norm ``LN(x + F(x))`` (the original paper, the post); pre-norm
    ``x + F(LN(x))`` (most modern decoders); ``norm = "none"``: ``x + F(x)``.  The
    stages are ``P.add_normK`` (with ``.sum`` for post-norm's residual sum) and,
    pre-norm, ``P.normK``.  ``block.residual = False`` drops the ``x +``.
    """
    keep = getattr(block, "residual", True)
    if block.norm == "post":
        out = sublayer(x)
        total = residual(g, f"{p}.add_norm{k}.sum", x, out, number) if keep else out
        return layer_norm(g, f"{p}.add_norm{k}", total, block, k, number)
    if block.norm == "pre":
        x_in = layer_norm(g, f"{p}.norm{k}", x, block, k, number)
    else:
        x_in = x
    out = sublayer(x_in)
    return residual(g, f"{p}.add_norm{k}", x, out, number) if keep else out


def multi_head_attention(g: Derivation, p: str, x: str, heads: tuple[Head, ...],
                         W_O: sympy.Matrix | None, number: int, *, causal: bool,
                         kv: str | None = None, head_prefix: str = "",
                         group: str = "attention", block: Block | None = None,
                         b_O: sympy.Matrix | None = None,
                         kv_heads: tuple[KVHead, ...] = ()) -> str:
    """Every head on ``x``, concatenated, then W_O (plain concatenation when W_O is None).

    ``kv`` takes keys and values from another stage (cross-attention);
    ``head_prefix``/``group`` name the stages (``decoder.layer1.self.head1.Q``,
    ``decoder.layer1.self.output``).  ``block`` gives the scale and the RoPE style;
    ``kv_heads``: grouped-query attention, keys and values computed once per shared
    head (``P.kv_headK.K``, ``.V``).
    """
    rope = _rope(g, block) if kv is None else None
    shared = [kv_stages(g, f"{p}.kv_head{k}", x, head, rope, number)
              for k, head in enumerate(kv_heads, start=1)]
    outputs = [attention_head(g, f"{p}.{head_prefix}head{k}", x, kv or x, head, causal,
                              number, k, block=block, rope=rope,
                              shared=shared[head.kv_head] if shared else None)
               for k, head in enumerate(heads, start=1)]
    rows = g[x].rows
    width = sum(g[h].shape[1] for h in outputs)
    concat = g.add(f"{p}.{group}.concat", "concat", Concat(), outputs, rows,
                   tuple(f"c{j}" for j in range(width)), layer=number)
    if W_O is None and b_O is not None:
        W_O = sympy.eye(width)  # no W_O, a bias: plain concatenation plus b_O
    op = (Identity(MULTI_HEAD, "no W_O: the concatenation is the output",
                   sublayer_of="attention") if W_O is None
          else Projection(W_O, b_O, MULTI_HEAD, "W_O", "b_O", role="heads"))
    # no W_O and a concatenation of another width (allowed as the last layer's output,
    # used as it is): its own columns
    cols = g[x].cols if W_O is not None or width == len(g[x].cols) else g[concat].cols
    return g.add(f"{p}.{group}.output", "attention_output", op, (concat,), rows, cols,
                 layer=number)


def _rope(g: Derivation, block: Block | None) -> dict[str, Any] | None:
    """RoPE's settings (base, style, given frequencies or angles) when the example
    rotates queries and keys, else None."""
    example = g.example
    if block is None or getattr(example, "positional_encoding", None) != "rope":
        return None
    theta, angles = (getattr(example, key, None) for key in ("rope_theta", "rope_angles"))
    return {"base": example.positional_encoding_base, "style": block.rope_style,
            "thetas": None if theta is None else tuple(theta.sympy),
            "angles": None if angles is None else tuple(
                tuple(angles.sympy.row(m)) for m in range(angles.rows))}


#: A head's projections by the stage they give.
ROLES = {"Q": "queries", "K": "keys", "V": "values"}


def _project(g: Derivation, p: str, name: str, source: str, W: sympy.Matrix,
             b: sympy.Matrix | None, notation: Notation, where: dict[str, int]) -> str:
    cols = tuple(f"{notation.text}{j}" for j in range(W.cols))
    return g.add(f"{p}.{name}", name, Projection(W, b, notation, f"W_{name}", f"b_{name}",
                                            role=ROLES[name]),
                 (source,), g[source].rows, cols, **where)


def _rotate(g: Derivation, p: str, name: str, source: str, rope: dict[str, Any],
            notation: Notation, where: dict[str, int]) -> str:
    """``P.NAME_rot``: the stage rotated by RoPE, position by position."""
    n, d = g[source].shape
    return g.add(f"{p}.{name}_rot", f"{name}_rot", RoPE(n, d, notation=notation, **rope),
                 (source,), g[source].rows, g[source].cols, **where)


def kv_stages(g: Derivation, p: str, x: str, head: KVHead,
              rope: dict[str, Any] | None, number: int) -> tuple[str, str]:
    """A shared key/value head: ``P.K`` (rotated: ``P.K_rot``) and ``P.V``."""
    where = {"layer": number}
    K = _project(g, p, "K", x, head.W_K, head.b_K, KEY, where)
    if rope is not None:
        K = _rotate(g, p, "K", K, rope, KEY_ROTATED, where)
    return K, _project(g, p, "V", x, head.W_V, head.b_V, VALUE, where)


def attention_head(g: Derivation, p: str, x: str, kv: str, head: Head, causal: bool,
                   number: int, k: int, *, block: Block | None = None,
                   rope: dict[str, Any] | None = None,
                   shared: tuple[str, str] | None = None) -> str:
    """Scaled dot-product attention of one head: Q, K, V, scores, weights, output.

    ``rope`` rotates Q and K (``P.Q_rot``, ``P.K_rot``); ``shared`` gives the (K, V)
    stages of a shared key/value head instead of this head's own.
    """
    where = {"layer": number, "head": k}
    Q = _project(g, p, "Q", x, head.W_Q, head.b_Q, QUERY, where)              # (n, d_k)
    if rope is not None:
        Q = _rotate(g, p, "Q", Q, rope, QUERY_ROTATED, where)
    if shared is not None:
        K, V = shared
    else:
        K = _project(g, p, "K", kv, head.W_K, head.b_K, KEY, where)           # (m, d_k)
        if rope is not None:
            K = _rotate(g, p, "K", K, rope, KEY_ROTATED, where)
        V = _project(g, p, "V", kv, head.W_V, head.b_V, VALUE, where)         # (m, d_v)
    slopes = getattr(block, "alibi_slopes", None)
    return attend(g, f"{p}.", Q, K, V, causal, block.scale if block is not None else None,
                  slopes[k - 1] if slopes else None, where)


def attend(g: Derivation, p: str, Q: str, K: str, V: str, causal: bool,
           scale: sympy.Rational | None, slope: sympy.Rational | None,
           where: dict[str, int]) -> str:
    """Attention from the stages ``Q``, ``K``, ``V``: ``Praw_scores``, ``Pscores`` (scaled
    by ``scale``, None: sqrt(d_k); masked), ``Palibi_scores`` (with an ALiBi ``slope``),
    ``Pweights`` and ``Poutput``."""
    queries, keys = g[Q].rows, g[K].rows
    scores_op = DotScores() if g.example is None \
        else score_function(g.example.attention_scores)()  # Q K^T, or a declared one
    raw = g.add(f"{p}raw_scores", "raw_scores", scores_op, (Q, K), queries, keys, **where)
    window = g.example.sliding_window if causal and g.example is not None else None
    # the causal mask; a sliding window also masks the keys w or more positions back
    masked = frozenset((i, j) for i in range(len(queries)) for j in range(len(keys))
                       if causal and (j > i or (window is not None and i - j >= window)))
    scores = g.add(f"{p}scores", "scores",
                   ScaleMask(g[Q].shape[1], masked, g.example.mask_value, scale=scale),
                   (raw,), queries, keys, **where)
    if slope is not None:
        alibi = ALiBi(slope, masked, g.example.mask_value is None)
        scores = g.add(f"{p}alibi_scores", "scores", alibi, (scores,), queries, keys, **where)
    weights = g.add(f"{p}weights", "weights", Softmax(), (scores,), queries, keys, **where)
    cols = tuple(f"o{j}" for j in range(g[V].shape[1]))
    return g.add(f"{p}output", "head_output", WeightedSum(), (weights, V), queries, cols,
                 **where)


def feed_forward(g: Derivation, p: str, x: str, block: Block, number: int,
                 expert: int | None = None) -> str:
    """Position-wise FFN: hidden = x W_1 + b_1, activation, output = a W_2 + b_2.

    Gated (``W_gate``): gate = x W_gate + b_gate, activation = act(gate) * hidden.
    ``expert``: the e-th expert of a mixture, its symbols marked ``h^[e]``, ``f^[e]``.
    """
    rows = g[x].rows
    ff = tuple(f"ff{j}" for j in range(block.d_ff))
    act_op = activation_op(block.activation)
    mark = (lambda n: n) if expert is None else (lambda n: Notation(
        f"{n.latex}^{{[{expert}]}}", f"{n.text}^[{expert}]", f"{n.title} (expert {expert})"))
    activation = act_op() if expert is None else act_op(notation=mark(act_op.default_notation))
    gate = None
    if block.W_gate is not None:
        gate = g.add(f"{p}.ffn.gate", "ffn_gate",
                     Projection(block.W_gate, block.b_gate, FFN_GATE, "W_gate", "b_gate",
                                role="ffn_gate"),
                     (x,), rows, ff, layer=number)
    hidden = g.add(f"{p}.ffn.hidden", "ffn_hidden",
                   Projection(block.W_1, block.b_1, mark(FFN_HIDDEN), "W_1", "b_1",
                              role="ffn_hidden", weight_mark=str(expert or "")),
                   (x,), rows, ff, layer=number)
    if gate is None:
        act = g.add(f"{p}.ffn.activation", "ffn_activation", activation, (hidden,), rows, ff,
                    layer=number)
    else:
        # act(g) on its own, as lessons print it (a side stage: the product reads the gate)
        g.add(f"{p}.ffn.gate_activation", "ffn_gate_activation",
              activation_op(block.activation)(notation=FFN_GATE_ACTIVATION), (gate,), rows,
              ff, layer=number)
        act = g.add(f"{p}.ffn.activation", "ffn_activation", GatedProduct(activation),
                    (gate, hidden), rows, ff, layer=number)
    return g.add(f"{p}.ffn.output", "ffn_output",
                 Projection(block.W_2, block.b_2, mark(FFN_OUTPUT), "W_2", "b_2",
                            role="ffn_output", weight_mark=str(expert or "")),
                 (act,), rows, g[x].cols, layer=number)


def residual(g: Derivation, name: str, x: str, sub: str, number: int) -> str:
    """The residual connection x + Sublayer(x)."""
    return g.add(name, "residual", Add(residual=True), (x, sub), g[x].rows, g[x].cols,
                 layer=number)


def layer_norm(g: Derivation, name: str, x: str, block, which: int | str, number: int) -> str:
    """The normalisation of ``x`` that ``block.layer_norm`` names, its statistics as
    stages: the registered normalisation's own stages (:meth:`Operation.add_norm`:
    LayerNorm's ``NAME.mean``, ``NAME.variance``, ``NAME.std``, RMSNorm's
    ``NAME.mean_square`` and ``NAME.std``), the last one ``NAME``.
    ``gamma_WHICH``/``beta_WHICH`` of ``block`` scale and shift the result.
    """
    gamma, beta = getattr(block, f"gamma_{which}"), getattr(block, f"beta_{which}")
    return normalisation(block.layer_norm).add_norm(g, name, x, block.layer_norm, block.eps,
                                                    gamma, beta, number)


def prediction_transform(g: Derivation, x: str, head: Any) -> str:
    """BERT's masked-LM transform before the vocabulary projection:
    ``lm_head.transform`` = x W_transform + b_transform, ``lm_head.transform_activation``,
    then (with a ``transform_norm``) ``lm_head.transform_norm``."""
    rows, cols = g[x].rows, g[x].cols
    h = g.add("lm_head.transform", "ffn_hidden",
              Projection(head.W_transform, head.b_transform, TRANSFORM, "W_transform",
                         "b_transform", role="transform"), (x,), rows, cols)
    a = g.add("lm_head.transform_activation", "ffn_activation",
              activation_op(head.transform_activation)(), (h,), rows, cols)
    if head.transform_norm is None:
        return a
    return layer_norm(g, "lm_head.transform_norm", a, head.transform_norm, "f", 0)


def lm_head(g: Derivation, x: str, W: sympy.Matrix, b: sympy.Matrix | None,
            vocab: tuple[str, ...], masked: bool = False) -> str:
    """``logits`` = x W_vocab + b_vocab, ``probabilities``, ``next_token`` (exact argmax;
    not for a ``masked`` LM head, which predicts each position's own token)."""
    tokens = g[x].rows
    logits = g.add("logits", "logits", Projection(W, b, LOGITS, "W_vocab", "b_vocab",
                                                             columns="vocab", role="logits"), (x,),
                   tokens, vocab)
    probabilities = g.add("probabilities", "probabilities", Softmax(PROBABILITIES, "V"),
                          (logits,), tokens, vocab)
    if masked:
        return probabilities
    return g.add("next_token", "next_token", ArgmaxIndicator(TieProver(g, logits)),
                 (logits,), tokens[-1:], vocab)
