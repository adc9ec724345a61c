"""An independent float64 forward pass for the blocks of issue 10, from the papers.

Written from the published formulas, not from symformer's operations: RoPE from the
RoFormer paper (complex rotation of pairs (2i, 2i+1)) and from Hugging Face's Llama
(``rotate_half``), RMSNorm from Zhang & Sennrich (2019), GELU's tanh form from
Hendrycks & Gimpel, SiLU/SwiGLU from Shazeer (2020), grouped-query attention from
Ainslie et al. (2023).  Reads the parsed example's numbers (as floats) and returns
every stage by symformer's stage name.
"""

from __future__ import annotations

import math

import numpy as np


def f(matrix) -> np.ndarray | None:
    """An exact SymPy matrix as a float64 array."""
    if matrix is None:
        return None
    return np.array([[float(v) for v in matrix.row(i)] for i in range(matrix.rows)])


def sinusoid(n, d, base):
    pe = np.zeros((n, d))
    for pos in range(n):
        for i in range(0, d, 2):
            pe[pos, i] = math.sin(pos / base ** (i / d))
            if i + 1 < d:
                pe[pos, i + 1] = math.cos(pos / base ** (i / d))
    return pe


def rope_roformer(x, base):
    """RoFormer eq. (13): pairs (x_{2i}, x_{2i+1}) as complex numbers times e^{i m theta_i}."""
    n, d = x.shape
    out = np.zeros_like(x)
    for m in range(n):
        for i in range(d // 2):
            theta = base ** (-2 * i / d)
            z = complex(x[m, 2 * i], x[m, 2 * i + 1]) * complex(math.cos(m * theta),
                                                                math.sin(m * theta))
            out[m, 2 * i], out[m, 2 * i + 1] = z.real, z.imag
    return out


def rope_hf(x, base):
    """Hugging Face Llama: q * cos + rotate_half(q) * sin, cos = cat(cos(m theta), same)."""
    n, d = x.shape
    inv_freq = 1.0 / (base ** (np.arange(0, d, 2) / d))
    freqs = np.outer(np.arange(n), inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)
    rotate_half = np.concatenate([-x[:, d // 2:], x[:, :d // 2]], axis=-1)
    return x * np.cos(emb) + rotate_half * np.sin(emb)


ACTIVATIONS = {
    "relu": lambda x: np.maximum(x, 0),
    "gelu": lambda x: np.array([[0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in r]
                                for r in x]),
    "gelu_tanh": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi)
                                                  * (x + 0.044715 * x ** 3))),
    "silu": lambda x: x / (1 + np.exp(-x)),
}


def softmax_rows(s):
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def norm(x, kind, eps, gamma, beta, name, out):
    g = f(gamma)
    if kind == "rms":
        ms = (x ** 2).mean(axis=1, keepdims=True)
        rms = np.sqrt(ms + eps)
        out[f"{name}.mean_square"], out[f"{name}.std"] = ms, rms
        y = x / rms * g
    else:
        if kind == "whole_matrix":
            mu = np.full((x.shape[0], 1), x.mean())
            var = np.full((x.shape[0], 1), ((x - x.mean()) ** 2).mean())
        else:
            mu = x.mean(axis=1, keepdims=True)
            var = x.var(axis=1, ddof=1 if kind == "unbiased" else 0, keepdims=True)
        if kind == "unbiased":
            std = np.sqrt(var)
            y = g * (x - mu) / (std + eps) + f(beta)
        else:
            std = np.sqrt(var + eps)
            y = g * (x - mu) / std + f(beta)
        out[f"{name}.mean"], out[f"{name}.variance"], out[f"{name}.std"] = mu, var, std
        # the output's own mean and biased variance (over the whole matrix for whole_matrix)
        if kind == "whole_matrix":
            out[f"{name}.output_mean"] = np.full((y.shape[0], 1), y.mean())
            out[f"{name}.output_variance"] = np.full((y.shape[0], 1), y.var())
        else:
            out[f"{name}.output_mean"] = y.mean(axis=1, keepdims=True)
            out[f"{name}.output_variance"] = y.var(axis=1, keepdims=True)
    out[name] = y
    return y


def bias(b, width):
    return np.zeros((1, width)) if b is None else f(b)


def attention(x, layer, example, causal, p, out):
    n = x.shape[0]
    rope = example.positional_encoding == "rope"
    base = float(example.positional_encoding_base)
    rot = rope_hf if layer.rope_style == "half" else rope_roformer
    shared = {}
    for k, kv in enumerate(layer.kv_heads):
        K = x @ f(kv.W_K) + bias(kv.b_K, kv.W_K.cols)
        out[f"{p}.kv_head{k + 1}.K"] = K
        if rope:
            K = out[f"{p}.kv_head{k + 1}.K_rot"] = rot(K, base)
        V = out[f"{p}.kv_head{k + 1}.V"] = x @ f(kv.W_V) + bias(kv.b_V, kv.W_V.cols)
        shared[k] = (K, V)
    heads = []
    for k, head in enumerate(layer.heads, start=1):
        h = f"{p}.head{k}"
        Q = out[f"{h}.Q"] = x @ f(head.W_Q) + bias(head.b_Q, head.W_Q.cols)
        if rope:
            Q = out[f"{h}.Q_rot"] = rot(Q, base)
        if layer.kv_heads:
            K, V = shared[head.kv_head]
        else:
            K = out[f"{h}.K"] = x @ f(head.W_K) + bias(head.b_K, head.W_K.cols)
            if rope:
                K = out[f"{h}.K_rot"] = rot(K, base)
            V = out[f"{h}.V"] = x @ f(head.W_V) + bias(head.b_V, head.W_V.cols)
        u = out[f"{h}.raw_scores"] = Q @ K.T
        if layer.scale is None:
            s = u / math.sqrt(Q.shape[1])
        else:
            s = u / float(layer.scale)
        if causal:
            s = np.where(np.triu(np.ones((n, n), bool), 1), -np.inf, s)
        out[f"{h}.scores"] = s
        a = out[f"{h}.weights"] = softmax_rows(s)
        heads.append(a @ V)
        out[f"{h}.output"] = heads[-1]
    c = out[f"{p}.attention.concat"] = np.concatenate(heads, axis=1)
    W_O = f(layer.W_O) if layer.W_O is not None else np.eye(c.shape[1])
    out[f"{p}.attention.output"] = c @ W_O + bias(layer.b_O, W_O.shape[1])
    return out[f"{p}.attention.output"]


def ffn(x, layer, p, out):
    hidden = x @ f(layer.W_1) + bias(layer.b_1, layer.W_1.cols)
    act = ACTIVATIONS[layer.activation]
    if layer.W_gate is not None:
        gate = out[f"{p}.ffn.gate"] = x @ f(layer.W_gate) + bias(layer.b_gate, layer.W_1.cols)
        out[f"{p}.ffn.gate_activation"] = act(gate)
        a = act(gate) * hidden
    else:
        a = act(hidden)
    out[f"{p}.ffn.hidden"], out[f"{p}.ffn.activation"] = hidden, a
    out[f"{p}.ffn.output"] = a @ f(layer.W_2) + bias(layer.b_2, layer.W_2.cols)
    return out[f"{p}.ffn.output"]


def sublayer(x, layer, k, p, fn, out):
    def ln(z, name):
        return norm(z, layer.layer_norm, float(layer.eps), getattr(layer, f"gamma_{k}"),
                    getattr(layer, f"beta_{k}"), name, out)

    if layer.norm == "post":
        y = fn(x)
        if layer.residual:
            y = out[f"{p}.add_norm{k}.sum"] = x + y
        return ln(y, f"{p}.add_norm{k}")
    inner = ln(x, f"{p}.norm{k}") if layer.norm == "pre" else x
    y = fn(inner)
    if layer.residual:
        y = out[f"{p}.add_norm{k}"] = x + y
    return y


def forward(example, causal: bool | None = None) -> dict[str, np.ndarray]:
    """Every stage of the example (an encoder stack, optionally a language model)."""
    causal = example.causal if causal is None else causal
    out: dict[str, np.ndarray] = {}
    n, d = len(example.tokens), example.d_model
    e = out["embeddings"] = f(example.embeddings)[list(example.token_ids)]
    kind = example.positional_encoding
    if kind == "sinusoidal":
        pe = sinusoid(n, d, float(example.positional_encoding_base))
    elif kind == "learned":
        pe = f(example.positional_embeddings)[:n]
    else:
        pe = np.zeros((n, d))
    out["positional_encoding"] = pe
    x = out["input"] = e + pe
    for number, layer in enumerate(example.layers, start=1):
        p = f"layer{number}"
        x = sublayer(x, layer, 1, p,
                     lambda z, L=layer, p=p: attention(z, L, example, causal, p, out), out)
        if layer.W_1 is not None:
            x = sublayer(x, layer, 2, p, lambda z, L=layer, p=p: ffn(z, L, p, out), out)
    fn = example.final_norm
    if fn is not None:
        x = norm(x, fn.layer_norm, float(fn.eps), fn.gamma_f, fn.beta_f, "final_norm", out)
    out["output"] = x
    if example.lm_head is not None:
        W = f(example.lm_head.W_vocab)
        logits = out["logits"] = x @ W + bias(example.lm_head.b_vocab, W.shape[1])
        out["probabilities"] = softmax_rows(logits)
        one_hot = np.zeros((1, W.shape[1]))
        one_hot[0, int(np.argmax(logits[-1]))] = 1
        out["next_token"] = one_hot
    return out
