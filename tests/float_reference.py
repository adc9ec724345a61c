"""An independent float64 forward pass for the engine's tests.

Written from the textbook formulas, not from symformer's engine: plain NumPy on
floats converted from the example's rationals.  Returns the engine's stage names so
tests can compare entry by entry.
"""

from __future__ import annotations

from math import erf, sqrt

import numpy as np


def as_float(m) -> np.ndarray:
    return np.array([[float(v) for v in m.row(i)] for i in range(m.rows)], dtype=np.float64)


def float_forward(example, causal: bool = False) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    n, d = len(example.tokens), example.d_model
    table = as_float(example.embeddings)
    out["embeddings"] = table[list(example.token_ids)]
    pe = np.zeros((n, d))
    if example.positional_encoding == "sinusoidal":
        for pos in range(n):
            for j in range(d):
                rate = 10000.0 ** (-(j - j % 2) / d)
                pe[pos, j] = np.sin(pos * rate) if j % 2 == 0 else np.cos(pos * rate)
    elif example.positional_encoding == "learned":  # the table's first n rows
        pe = as_float(example.positional_embeddings)[:n]
    out["positional_encoding"] = pe
    x = out["embeddings"] + pe
    out["input"] = x
    future = np.triu(np.ones((n, n), dtype=bool), k=1)
    for number, layer in enumerate(example.layers, start=1):
        p = f"layer{number}"
        if layer.norm == "post":
            a = _mha(x, layer, p, causal, future, out)
            y = _ln(x + a, layer, 1, f"{p}.add_norm1", out)
            out[f"{p}.add_norm1.sum"] = x + a
            f = _ffn(y, layer, p, out)
            out[f"{p}.add_norm2.sum"] = y + f
            x = _ln(y + f, layer, 2, f"{p}.add_norm2", out)
        else:
            y = x + _mha(_ln(x, layer, 1, f"{p}.norm1", out), layer, p, causal, future, out)
            out[f"{p}.add_norm1"] = y
            x = y + _ffn(_ln(y, layer, 2, f"{p}.norm2", out), layer, p, out)
            out[f"{p}.add_norm2"] = x
    out["output"] = x
    return out


def _ln(z, layer, which, name, out):
    gamma = as_float(layer.gamma_1 if which == 1 else layer.gamma_2)
    beta = as_float(layer.beta_1 if which == 1 else layer.beta_2)
    eps = float(layer.eps)
    mu = z.mean(axis=1, keepdims=True)
    if layer.layer_norm == "unbiased":
        var = z.var(axis=1, ddof=1, keepdims=True)
        y = gamma * (z - mu) / (np.sqrt(var) + eps) + beta
    else:
        var = z.var(axis=1, keepdims=True)
        y = gamma * (z - mu) / np.sqrt(var + eps) + beta
    out[f"{name}.mean"], out[f"{name}.variance"], out[name] = mu, var, y
    out[f"{name}.std"] = np.sqrt(var) if layer.layer_norm == "unbiased" else np.sqrt(var + eps)
    out[f"{name}.output_mean"] = y.mean(axis=1, keepdims=True)  # the output's own
    out[f"{name}.output_variance"] = y.var(axis=1, keepdims=True)
    return y


def _mha(z, layer, p, causal, future, out):
    outs = []
    for k, head in enumerate(layer.heads, start=1):
        q, kk, v = z @ as_float(head.W_Q), z @ as_float(head.W_K), z @ as_float(head.W_V)
        raw = q @ kk.T
        s = raw / np.sqrt(head.d_k)
        if causal:
            s = np.where(future, -np.inf, s)
        e = np.exp(s - s.max(axis=1, keepdims=True))
        w = e / e.sum(axis=1, keepdims=True)
        h = f"{p}.head{k}"
        out[f"{h}.Q"], out[f"{h}.K"], out[f"{h}.V"] = q, kk, v
        out[f"{h}.raw_scores"], out[f"{h}.scores"], out[f"{h}.weights"] = raw, s, w
        out[f"{h}.output"] = w @ v
        outs.append(w @ v)
    c = np.concatenate(outs, axis=1)
    out[f"{p}.attention.concat"] = c
    a = c @ as_float(layer.W_O) if layer.W_O is not None else c
    out[f"{p}.attention.output"] = a
    return a


def _ffn(z, layer, p, out):
    hidden = z @ as_float(layer.W_1) + as_float(layer.b_1)
    if layer.activation == "relu":
        act = np.maximum(hidden, 0.0)
    else:
        act = np.vectorize(lambda t: 0.5 * t * (1 + erf(t / sqrt(2))))(hidden)
    f = act @ as_float(layer.W_2) + as_float(layer.b_2)
    out[f"{p}.ffn.hidden"], out[f"{p}.ffn.activation"], out[f"{p}.ffn.output"] = hidden, act, f
    return f
