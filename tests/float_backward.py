"""An independent float64 backward pass for the engine's tests.

Written from the textbook formulas (LayerNorm's input gradient in one piece, the
softmax Jacobian, the FFN and attention chain rule), not from symformer's
operations: plain NumPy on floats converted from the example's rationals.  It
returns the gradients under the engine's stage names (``grad.layer1.head1.scores``,
``grad.layer1.W_1``, ...) for an encoder example with an mse loss.
"""

from __future__ import annotations

from math import erf, exp, pi, sqrt

import numpy as np
from float_reference import as_float, float_forward


def float_backward(example, causal: bool = False) -> dict[str, np.ndarray]:
    """The loss (key ``loss``) and every gradient of an encoder example's mse loss."""
    out = float_forward(example, causal=causal)
    grads: dict[str, np.ndarray] = {}
    target = as_float(example.loss.target)
    z = out["output"]
    grads["loss"] = np.array([[np.mean((z - target) ** 2)]])
    g = 2 * (z - target) / z.size
    grads["grad.output"] = g
    for number in range(len(example.layers), 0, -1):
        g = _layer_backward(example.layers[number - 1], f"layer{number}", g, out, grads)
    grads["grad.input"] = g
    grads["grad.embeddings"] = g
    grads["grad.positional_encoding"] = g
    used = list(dict.fromkeys(example.token_ids))
    grads["grad.embedding_table"] = np.array(
        [g[[t == u for t in example.token_ids]].sum(axis=0) for u in used])
    return grads


def _put(grads: dict, name: str, value: np.ndarray) -> np.ndarray:
    grads[name] = value
    return value


def _layer_backward(layer, p: str, g: np.ndarray, out: dict, grads: dict) -> np.ndarray:
    """Gradient at the layer's input from the gradient at its output."""
    if layer.norm == "post":
        _put(grads, f"grad.{p}.add_norm2", g)
        g = _put(grads, f"grad.{p}.add_norm2.sum",
                 _ln_backward(layer, 2, f"{p}.add_norm2", out, g, grads))
        y = _put(grads, f"grad.{p}.add_norm1", g + _ffn_backward(layer, p, out, g, grads))
        g = _put(grads, f"grad.{p}.add_norm1.sum",
                 _ln_backward(layer, 1, f"{p}.add_norm1", out, y, grads))
        return g + _mha_backward(layer, p, out, g, grads)
    _put(grads, f"grad.{p}.add_norm2", g)
    f = _ffn_backward(layer, p, out, g, grads)
    _put(grads, f"grad.{p}.norm2", f)
    y = _put(grads, f"grad.{p}.add_norm1", g + _ln_backward(layer, 2, f"{p}.norm2", out, f,
                                                             grads))
    m = _mha_backward(layer, p, out, y, grads)
    _put(grads, f"grad.{p}.norm1", m)
    return y + _ln_backward(layer, 1, f"{p}.norm1", out, m, grads)


def _ln_backward(layer, which: int, name: str, out: dict, g: np.ndarray, grads: dict
                 ) -> np.ndarray:
    """dL/dx of y = gamma (x - mu) / D + beta, in one piece (the textbook formula)."""
    gamma = as_float(getattr(layer, f"gamma_{which}"))
    x_mu = out[f"{name}.mean"]
    c = _ln_input(out, name) - x_mu
    d = c.shape[1]
    eps = float(layer.eps)
    G = gamma * g
    if layer.layer_norm == "unbiased":
        s = np.sqrt(out[f"{name}.variance"])
        D = s + eps
        dx = (G - G.mean(axis=1, keepdims=True)) / D \
            - c * (G * c).sum(axis=1, keepdims=True) / (D ** 2 * s * (d - 1))
    else:
        D = np.sqrt(out[f"{name}.variance"] + eps)
        dx = (G - G.mean(axis=1, keepdims=True)) / D \
            - c * (G * c).sum(axis=1, keepdims=True) / (d * D ** 3)
    grads[f"grad.{name}.gamma"] = (g * c / D).sum(axis=0, keepdims=True)
    grads[f"grad.{name}.beta"] = g.sum(axis=0, keepdims=True)
    return dx


def _layer_input(out: dict, p: str) -> np.ndarray:
    number = int(p[5:])
    return out["input"] if number == 1 else out[f"layer{number - 1}.add_norm2"]


def _ln_input(out: dict, name: str) -> np.ndarray:
    """The LayerNorm's input: the residual sum (post-norm) or the sub-layer's input."""
    if f"{name}.sum" in out:
        return out[f"{name}.sum"]
    p, k = name.rsplit(".norm", 1)
    return _layer_input(out, p) if k == "1" else out[f"{p}.add_norm1"]


def _ffn_backward(layer, p: str, out: dict, g: np.ndarray, grads: dict) -> np.ndarray:
    W_1, W_2 = as_float(layer.W_1), as_float(layer.W_2)
    h, a = out[f"{p}.ffn.hidden"], out[f"{p}.ffn.activation"]
    grads[f"grad.{p}.ffn.output"] = g
    grads[f"grad.{p}.W_2"] = a.T @ g
    grads[f"grad.{p}.b_2"] = g.sum(axis=0, keepdims=True)
    da = _put(grads, f"grad.{p}.ffn.activation", g @ W_2.T)
    if layer.activation == "relu":
        slope = (h > 0).astype(float)
    else:
        slope = np.vectorize(lambda t: (1 + erf(t / sqrt(2))) / 2
                             + t * exp(-t * t / 2) / sqrt(2 * pi))(h)
    dh = _put(grads, f"grad.{p}.ffn.hidden", da * slope)
    source = out[f"{p}.add_norm1"] if layer.norm == "post" else out[f"{p}.norm2"]
    grads[f"grad.{p}.W_1"] = source.T @ dh
    grads[f"grad.{p}.b_1"] = dh.sum(axis=0, keepdims=True)
    return dh @ W_1.T


def _mha_backward(layer, p: str, out: dict, g: np.ndarray, grads: dict) -> np.ndarray:
    grads[f"grad.{p}.attention.output"] = g
    if layer.W_O is not None:
        grads[f"grad.{p}.W_O"] = out[f"{p}.attention.concat"].T @ g
        g = g @ as_float(layer.W_O).T
    grads[f"grad.{p}.attention.concat"] = g
    x = _layer_input(out, p) if layer.norm == "post" else out[f"{p}.norm1"]
    dx = np.zeros_like(x)
    start = 0
    for k, head in enumerate(layer.heads, start=1):
        h = f"{p}.head{k}"
        do = _put(grads, f"grad.{h}.output", g[:, start:start + head.d_v])
        start += head.d_v
        w, v = out[f"{h}.weights"], out[f"{h}.V"]
        dw = _put(grads, f"grad.{h}.weights", do @ v.T)
        dv = _put(grads, f"grad.{h}.V", w.T @ do)
        ds = _put(grads, f"grad.{h}.scores", w * (dw - (w * dw).sum(axis=1, keepdims=True)))
        du = _put(grads, f"grad.{h}.raw_scores", ds / np.sqrt(head.d_k))
        dq = _put(grads, f"grad.{h}.Q", du @ out[f"{h}.K"])
        dk = _put(grads, f"grad.{h}.K", du.T @ out[f"{h}.Q"])
        grads[f"grad.{h}.W_Q"], grads[f"grad.{h}.W_K"] = x.T @ dq, x.T @ dk
        grads[f"grad.{h}.W_V"] = x.T @ dv
        dx += dq @ as_float(head.W_Q).T + dk @ as_float(head.W_K).T + dv @ as_float(head.W_V).T
    return dx
