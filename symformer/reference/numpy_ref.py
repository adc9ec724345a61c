"""The encoder and decoder in plain NumPy floats, one small function per formula.

Written independently of the exact engine (no SymPy, no balls), in the style of a
textbook: this module is the float reference ``symformer crosscheck`` compares
the certified values against, and the LaTeX export renders its functions with
latexify-py, so the formula functions are single expressions over math-like
names.  Shapes: n tokens, d = d_model, d_k per head, d_ff hidden.

Conventions (each selectable in :func:`forward`):

* positional encoding: sin on even dimensions 2i, cos on odd 2i+1, base 10000;
* mask: ``"-inf"`` (masked weights exactly 0) or a number such as ``"-1e9"``
  added to the masked scaled scores (tiny but non-zero weights);
* LayerNorm: ``"biased"`` = (x - mu) / sqrt(sigma2 + eps) with the biased
  variance (PyTorch, the blog post); ``"unbiased"`` = (x - mu) / (s + eps) with the
  unbiased standard deviation s (the Annotated Transformer); ``"whole_matrix"`` =
  the biased form with mean and variance over the whole matrix instead of per
  token (what ``x.mean()``/``x.var()`` without an axis compute, as a course's code does);
* placement: ``"post"`` = LN(x + Sublayer(x)); ``"pre"`` = x + Sublayer(LN(x)).

The decoder (an example's ``[decoder]`` table) applies the same conventions: its
self-attention is always causally masked (with the chosen mask), cross-attention
takes keys and values from the encoder's ``output``, and ``next_token`` is the
indicator of the last position's largest logit (1 for the argmax, 0 elsewhere).

The example's exact rationals become floats here and only here.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

MASKS = ("-inf", "-1e9")
LAYER_NORMS = ("biased", "unbiased", "whole_matrix")
NORMS = ("post", "pre")


# -- formulas (rendered as equations) -------------------------------------------------
def pe_even(pos, i, d_model):
    """PE[pos, 2i]: the sine of dimension 2i."""
    return np.sin(pos / 10000 ** (2 * i / d_model))


def pe_odd(pos, i, d_model):
    """PE[pos, 2i+1]: the cosine of dimension 2i+1."""
    return np.cos(pos / 10000 ** (2 * i / d_model))


def project(X, W):
    """Q = X W_Q (and K, V alike): (n, d) @ (d, d_k) -> (n, d_k)."""
    return X @ W


def raw_scores(Q, K):
    """Every query dotted with every key: (n, d_k) @ (d_k, n) -> (n, n)."""
    return Q @ K.T


def scores(Q, K, d_k):
    """Scaled dot-product scores Q K^T / sqrt(d_k): (n, n)."""
    return Q @ K.T / np.sqrt(d_k)


def causal_mask(n):
    """True above the diagonal: key j comes after query i, (n, n)."""
    return np.triu(np.ones((n, n), dtype=bool), k=1)


def masked_scores(S, M, m):
    """Masked entries replaced by m = -inf (exact zeros after softmax): (n, n)."""
    return np.where(M, m, S)


def offset_scores(S, M, m):
    """Masked entries shifted by a large negative m such as -1e9: (n, n)."""
    return S + M * m


def softmax(z):
    """Row-wise softmax; subtracting the row maximum changes nothing but overflow."""
    e = np.exp(z - np.max(z, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def attention(Q, K, V, d_k):
    """softmax(Q K^T / sqrt(d_k)) V: (n, d_v)."""
    return softmax(Q @ K.T / np.sqrt(d_k)) @ V


def cross_attention(X, memory, W_Q, W_K, W_V, d_k):
    """Queries from the decoder X (m, d), keys and values from the encoder memory (n, d)."""
    return attention(X @ W_Q, memory @ W_K, memory @ W_V, d_k)


def logits(x, W_vocab):
    """One score per vocabulary entry: (m, d) @ (d, |vocab|) -> (m, |vocab|)."""
    return x @ W_vocab


def argmax_indicator(z):
    """1 where the last row of z is largest (several 1s for a float tie), else 0: (1, |vocab|)."""
    return (z[-1:] == np.max(z[-1:], axis=-1, keepdims=True)).astype(z.dtype)


def concat(heads):
    """The heads' outputs side by side: h x (n, d_v) -> (n, h d_v)."""
    return np.concatenate(heads, axis=-1)


def concat_project(heads, W_O):
    """MultiHead = Concat(head_1, ..., head_h) W_O: (n, h d_v) @ (h d_v, d) -> (n, d)."""
    return np.concatenate(heads, axis=-1) @ W_O


def relu(x):
    """max(0, x), element-wise."""
    return np.maximum(0, x)


def gelu(x):
    """Exact GELU x/2 (1 + erf(x / sqrt 2)), element-wise."""
    return x / 2 * (1 + np.vectorize(math.erf, otypes=[x.dtype])(x / np.sqrt(x.dtype.type(2))))


def ffn(x, W_1, b_1, W_2, b_2):
    """ReLU feed-forward: max(0, x W_1 + b_1) W_2 + b_2, (n, d) -> (n, d_ff) -> (n, d)."""
    return relu(x @ W_1 + b_1) @ W_2 + b_2


def ffn_gelu(x, W_1, b_1, W_2, b_2):
    """GELU feed-forward: GELU(x W_1 + b_1) W_2 + b_2."""
    return gelu(x @ W_1 + b_1) @ W_2 + b_2


def mean(x):
    """Each token's mean over its d dimensions: (n, d) -> (n, 1)."""
    return np.mean(x, axis=-1, keepdims=True)


def variance(x):
    """Each token's biased variance, divided by d: (n, 1)."""
    return np.mean((x - mean(x)) ** 2, axis=-1, keepdims=True)


def unbiased_variance(x):
    """Each token's unbiased variance, divided by d - 1: (n, 1)."""
    return np.sum((x - mean(x)) ** 2, axis=-1, keepdims=True) / (x.shape[-1] - 1)


def layer_norm(x, gamma, beta, eps):
    """gamma (x - mu) / sqrt(sigma^2 + eps) + beta, per token (PyTorch, the post)."""
    return gamma * (x - mean(x)) / np.sqrt(variance(x) + eps) + beta


def layer_norm_unbiased(x, gamma, beta, eps):
    """gamma (x - mu) / (s + eps) + beta with the unbiased std s (Annotated Transformer)."""
    return gamma * (x - mean(x)) / (np.sqrt(unbiased_variance(x)) + eps) + beta


def whole_mean(x):
    """The mean of every entry of the matrix, as a column: (n, 1)."""
    return np.full((x.shape[0], 1), np.mean(x), dtype=x.dtype)


def whole_variance(x):
    """The biased variance of every entry of the matrix, as a column: (n, 1)."""
    return np.full((x.shape[0], 1), np.var(x), dtype=x.dtype)


def normalize(x, mu, sigma2, gamma, beta, eps):
    """LayerNorm's last step from given mu and sigma^2: gamma (x - mu)/sqrt(sigma^2+eps) + beta."""
    return gamma * (x - mu) / np.sqrt(sigma2 + eps) + beta


def add_norm(x, sublayer_out, gamma, beta, eps):
    """Post-norm Add & Norm: LayerNorm(x + Sublayer(x))."""
    return layer_norm(x + sublayer_out, gamma, beta, eps)


# -- the driver ------------------------------------------------------------------------
def to_array(matrix: Any, dtype: type = np.float64) -> np.ndarray:
    """An exact SymPy matrix (rationals, sin(1), ...) as a float array."""
    return np.array([[float(v) for v in matrix.row(i)] for i in range(matrix.rows)],
                    dtype=dtype)


def positional_encoding(n: int, d_model: int) -> np.ndarray:
    """The sinusoidal table (n, d_model): pe_even on columns 2i, pe_odd on 2i+1."""
    pe = np.zeros((n, d_model))
    for pos in range(n):
        for j in range(d_model):
            pe[pos, j] = (pe_even if j % 2 == 0 else pe_odd)(pos, j // 2, d_model)
    return pe


def forward(example: Any, causal: bool | None = None, dtype: type = np.float64,
            mask: str | None = None, layer_norm: str | None = None,
            norm: str | None = None) -> dict[str, np.ndarray]:
    """Every stage of the example in floats, under the engine's stage names.

    ``causal``, ``mask``, ``layer_norm`` and ``norm`` default to the example's own
    settings (``None``); give them to compute another convention.  ``mask`` is
    ``"-inf"`` or a negative number (text or float, e.g. ``"-1e9"``); ``layer_norm``
    one of :data:`LAYER_NORMS`; ``norm`` ``"post"`` or ``"pre"``.  The decoder, if
    the example has one, follows the same conventions (its self-attention is
    always causal; ``causal`` concerns the encoder).
    """
    out: dict[str, np.ndarray] = {}
    forward_into(out, example, causal, dtype, mask, layer_norm, norm)
    return out


def forward_into(out: dict[str, np.ndarray], example: Any, causal: bool | None = None,
                 dtype: type = np.float64, mask: str | None = None,
                 layer_norm: str | None = None, norm: str | None = None) -> None:
    """:func:`forward`, recording each stage in ``out`` as soon as it is computed.

    If something fails half-way, ``out`` keeps every stage computed before it (so
    a caller such as ``crosscheck`` can report the rest as not computed).
    """
    if mask is None:
        mask = "-inf" if example.mask_value is None else float(example.mask_value)
    m = -np.inf if str(mask).strip() == "-inf" else dtype(float(mask))
    causal = example.causal if causal is None else causal
    n = len(example.tokens)
    x = _input(out, "", example.embeddings, example.token_ids, example.d_model,
               example.positional_encoding, dtype)
    M = causal_mask(n) if causal else np.zeros((n, n), dtype=bool)
    for number, layer in enumerate(example.layers, start=1):
        p = f"layer{number}"
        sublayers = (
            lambda h, p=p, layer=layer: _attention(out, p, "head", "attention", h, h,
                                                   layer.heads, layer.W_O, M, m, dtype),
            lambda h, p=p, layer=layer: _ffn(out, p, h, layer, dtype),
        )
        x = _block(out, p, x, sublayers, layer, dtype, layer_norm or layer.layer_norm,
                   norm or layer.norm)
    out["output"] = x
    if example.decoder is not None:
        _decoder(out, example.decoder, x, m, dtype, layer_norm, norm)


def _input(out: dict, prefix: str, table: Any, token_ids: Any, d: int, pe: str,
           dtype: type) -> np.ndarray:
    """PREFIXembeddings, PREFIXpositional_encoding and their sum PREFIXinput."""
    n = len(token_ids)
    out[f"{prefix}embeddings"] = to_array(table, dtype)[list(token_ids)]
    if pe == "none":
        out[f"{prefix}positional_encoding"] = np.zeros((n, d), dtype=dtype)
    else:
        out[f"{prefix}positional_encoding"] = positional_encoding(n, d).astype(dtype)
    out[f"{prefix}input"] = out[f"{prefix}embeddings"] + out[f"{prefix}positional_encoding"]
    return out[f"{prefix}input"]


def _decoder(out: dict, dec: Any, memory: np.ndarray, m: Any, dtype: type,
             layer_norm: str | None, norm: str | None) -> None:
    """The decoder's stages: masked self-attention, cross-attention over ``memory``, FFN."""
    d = memory.shape[1]
    x = _input(out, "decoder.", dec.embeddings, dec.token_ids, d, dec.positional_encoding,
               dtype)
    n_target, n_source = len(dec.tokens), memory.shape[0]
    M_self = causal_mask(n_target)                             # always causal
    M_cross = np.zeros((n_target, n_source), dtype=bool)       # every source token
    for number, layer in enumerate(dec.layers, start=1):
        p = f"decoder.layer{number}"
        sublayers = (
            lambda h, p=p, layer=layer: _attention(out, p, "self.head", "self", h, h,
                                                   layer.self_heads, layer.W_O_self,
                                                   M_self, m, dtype),
            lambda h, p=p, layer=layer: _attention(out, p, "cross.head", "cross", h, memory,
                                                   layer.cross_heads, layer.W_O_cross,
                                                   M_cross, m, dtype),
            lambda h, p=p, layer=layer: _ffn(out, p, h, layer, dtype),
        )
        x = _block(out, p, x, sublayers, layer, dtype, layer_norm or layer.layer_norm,
                   norm or layer.norm)
    out["decoder.output"] = x
    if dec.W_vocab is not None:
        z = out["logits"] = logits(x, to_array(dec.W_vocab, dtype))
        out["probabilities"] = softmax(z)
        out["next_token"] = argmax_indicator(z)


def _block(out: dict, p: str, x: np.ndarray, sublayers: Any, layer: Any, dtype: type,
           ln: str, placement: str) -> np.ndarray:
    """One block: each sub-layer k wrapped as LN(x + F(x)) (post) or x + F(LN(x)) (pre)."""
    for k, sublayer in enumerate(sublayers, start=1):
        if placement == "post":
            total = _sum(out, f"{p}.add_norm{k}.sum", x, sublayer(x))
            x = _norm(out, f"{p}.add_norm{k}", total, layer, k, dtype, ln)
        else:
            normed = _norm(out, f"{p}.norm{k}", x, layer, k, dtype, ln)
            x = _sum(out, f"{p}.add_norm{k}", x, sublayer(normed))
    return x


def _sum(out: dict, name: str, x: np.ndarray, sub: np.ndarray) -> np.ndarray:
    out[name] = x + sub
    return out[name]


def _attention(out: dict, p: str, head_name: str, group: str, x: np.ndarray,
               memory: np.ndarray, heads: Any, W_O: Any, M: np.ndarray, m: Any,
               dtype: type) -> np.ndarray:
    """Every head (queries from x, keys and values from memory), concatenated, W_O."""
    outputs = []
    for k, head in enumerate(heads, start=1):
        h = f"{p}.{head_name}{k}"
        Q = out[f"{h}.Q"] = project(x, to_array(head.W_Q, dtype))
        K = out[f"{h}.K"] = project(memory, to_array(head.W_K, dtype))
        V = out[f"{h}.V"] = project(memory, to_array(head.W_V, dtype))
        out[f"{h}.raw_scores"] = raw_scores(Q, K)
        S = scores(Q, K, dtype(head.d_k))
        S = masked_scores(S, M, m) if np.isinf(m) else offset_scores(S, M, m)
        out[f"{h}.scores"] = S
        out[f"{h}.weights"] = softmax(S)
        out[f"{h}.output"] = out[f"{h}.weights"] @ V
        outputs.append(out[f"{h}.output"])
    out[f"{p}.{group}.concat"] = concat(outputs)
    if W_O is None:
        out[f"{p}.{group}.output"] = out[f"{p}.{group}.concat"]
    else:
        out[f"{p}.{group}.output"] = concat_project(outputs, to_array(W_O, dtype))
    return out[f"{p}.{group}.output"]


def _ffn(out: dict, p: str, x: np.ndarray, layer: Any, dtype: type) -> np.ndarray:
    W_1, b_1 = to_array(layer.W_1, dtype), to_array(layer.b_1, dtype)
    W_2, b_2 = to_array(layer.W_2, dtype), to_array(layer.b_2, dtype)
    h = out[f"{p}.ffn.hidden"] = x @ W_1 + b_1
    a = out[f"{p}.ffn.activation"] = relu(h) if layer.activation == "relu" else gelu(h)
    out[f"{p}.ffn.output"] = a @ W_2 + b_2
    return out[f"{p}.ffn.output"]


def _norm(out: dict, name: str, x: np.ndarray, layer: Any, which: int, dtype: type,
          ln: str) -> np.ndarray:
    """LayerNorm of ``x`` under convention ``ln``, recording NAME.mean and NAME.variance.

    ``which`` picks the block's gamma_k/beta_k (k = 1, 2, and 3 in a decoder block).
    """
    gamma = to_array(getattr(layer, f"gamma_{which}"), dtype)
    beta = to_array(getattr(layer, f"beta_{which}"), dtype)
    eps = dtype(float(layer.eps))
    if ln == "whole_matrix":
        mu, sigma2 = whole_mean(x), whole_variance(x)
    else:
        mu, sigma2 = mean(x), (unbiased_variance(x) if ln == "unbiased" else variance(x))
    out[f"{name}.mean"], out[f"{name}.variance"] = mu, sigma2
    out[f"{name}.std"] = np.sqrt(sigma2 + (0 if ln == "unbiased" else eps))  # sigma (issue 10)
    if ln == "unbiased":
        out[name] = gamma * (x - mu) / (np.sqrt(sigma2) + eps) + beta
    else:
        out[name] = normalize(x, mu, sigma2, gamma, beta, eps)
    return out[name]
