"""An example as a small standalone PyTorch module file (``export --format torch``).

The file holds plain ``nn.Module`` code (the same for every example) and the example's
settings and weights as Python literals: each weight is the float64 nearest its exact
value (``repr`` of that double, which reads back as the same double), so a weight
imported from a float32/float64/bfloat16 model is exact.  No user text reaches the code
except as ``repr`` string literals.  Running the file prints the output (the logits of
a language model); ``Model()(...)`` returns every stage by the engine's stage names.
"""

from __future__ import annotations

import pprint
from typing import Any

from symformer.errors import NotSupportedError
from symformer.example.schema import Example

_MODULE = '''
class Model(torch.nn.Module):
    """The example's forward pass; forward() returns its stages by symformer's names."""

    def __init__(self, dtype=torch.float64):
        super().__init__()
        self.dtype = dtype
        self.config = CONFIG
        self.w = {k: None if v is None else torch.tensor(v, dtype=torch.float64).to(dtype)
                  for k, v in WEIGHTS.items()}

    def t(self, name):
        return self.w.get(name)

    def norm(self, x, kind, eps, gamma, beta):
        if kind == "rms":
            y = x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps)
            return y * gamma
        if kind == "whole_matrix":
            mu, var = x.mean(), ((x - x.mean()) ** 2).mean()
            return (x - mu) / torch.sqrt(var + eps) * gamma + beta
        mu = x.mean(-1, keepdim=True)
        if kind == "unbiased":
            return (x - mu) / (x.std(-1, unbiased=True, keepdim=True) + eps) * gamma + beta
        var = ((x - mu) ** 2).mean(-1, keepdim=True)
        return (x - mu) / torch.sqrt(var + eps) * gamma + beta

    def act(self, x, name):
        if name == "relu":
            return torch.relu(x)
        if name == "gelu":
            return torch.nn.functional.gelu(x)
        if name == "gelu_tanh":
            return torch.nn.functional.gelu(x, approximate="tanh")
        return torch.nn.functional.silu(x)

    def rope(self, x, base, style):
        n, d = x.shape
        i = torch.arange(d // 2, dtype=torch.float64)
        theta = torch.tensor(base, dtype=torch.float64) ** (-2 * i / d)
        angle = (torch.arange(n, dtype=torch.float64)[:, None] * theta).to(self.dtype)
        cos, sin = torch.cos(angle), torch.sin(angle)
        if style == "half":
            a, b = x[:, : d // 2], x[:, d // 2:]
            return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)
        a, b = x[:, 0::2], x[:, 1::2]
        return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).reshape(n, d)

    def forward(self, ids=None):
        c, s = self.config, {}
        ids = torch.tensor(c["token_ids"] if ids is None else ids)
        n = len(ids)
        x = self.t("embeddings")[ids]
        s["embeddings"] = x
        if c["segments"] is not None:  # BERT's token types (0 past the example's tokens)
            seg = torch.tensor((c["segments"] + [0] * n)[:n])
            s["token_type_embeddings"] = self.t("token_type_embeddings")[seg]
            x = s["typed_embeddings"] = x + s["token_type_embeddings"]
        if c["positional_encoding"] == "learned":
            x = x + self.t("positional_embeddings")[:n]
        elif c["positional_encoding"] == "sinusoidal":
            d = x.shape[1]
            pos = torch.arange(n, dtype=torch.float64)[:, None]
            j = torch.arange(d)
            angle = pos / torch.tensor(c["base"], dtype=torch.float64) ** (
                (2 * (j // 2)).double() / d)
            pe = torch.where(j % 2 == 0, torch.sin(angle), torch.cos(angle)).to(self.dtype)
            x = x + pe
        s["input"] = x
        if c["embedding_norm"] is not None:
            kind, eps = c["embedding_norm"]
            x = self.norm(x, kind, eps, self.t("gamma_e"), self.t("beta_e"))
            s["embedding_norm"] = x
        for li, L in enumerate(c["layers"], 1):
            p = f"layer{li}"

            def attention(h, L=L, p=p):
                outs = []
                for k, H in enumerate(L["heads"], 1):
                    q = h @ self.t(H["W_Q"])
                    q = q if H["b_Q"] is None else q + self.t(H["b_Q"])
                    kk = h @ self.t(H["W_K"])
                    kk = kk if H["b_K"] is None else kk + self.t(H["b_K"])
                    v = h @ self.t(H["W_V"])
                    v = v if H["b_V"] is None else v + self.t(H["b_V"])
                    if c["positional_encoding"] == "rope":
                        q = self.rope(q, c["base"], L["rope_style"])
                        kk = self.rope(kk, c["base"], L["rope_style"])
                    u = q @ kk.T
                    scale = L["scale"] if L["scale"] is not None else q.shape[1] ** 0.5
                    u = u / scale
                    if c["causal"]:
                        above = torch.ones(n, n, dtype=torch.bool).triu(1)
                        u = (u.masked_fill(above, float("-inf")) if c["mask"] is None
                             else u + above * c["mask"])
                    a = torch.softmax(u, dim=-1)
                    s[f"{p}.head{k}.weights"] = a
                    outs.append(a @ v)
                    s[f"{p}.head{k}.output"] = outs[-1]
                o = torch.cat(outs, dim=-1)
                if L["W_O"] is not None:
                    o = o @ self.t(L["W_O"])
                if L["b_O"] is not None:
                    o = o + self.t(L["b_O"])
                s[f"{p}.attention.output"] = o
                return o

            def ffn(h, L=L, p=p):
                hidden = h @ self.t(L["W_1"])
                hidden = hidden if L["b_1"] is None else hidden + self.t(L["b_1"])
                if L["W_gate"] is not None:
                    g = h @ self.t(L["W_gate"])
                    g = g if L["b_gate"] is None else g + self.t(L["b_gate"])
                    a = self.act(g, L["activation"]) * hidden
                else:
                    a = self.act(hidden, L["activation"])
                out = a @ self.t(L["W_2"])
                out = out if L["b_2"] is None else out + self.t(L["b_2"])
                s[f"{p}.ffn.output"] = out
                return out

            subs = [attention] + ([ffn] if L["W_1"] is not None else [])
            for k, f in enumerate(subs, 1):
                gamma, beta = self.t(f"{p}.gamma_{k}"), self.t(f"{p}.beta_{k}")
                if L["norm"] == "post":
                    out = f(x)
                    total = x + out if L["residual"] else out
                    x = self.norm(total, L["layer_norm"], L["eps"], gamma, beta)
                    s[f"{p}.add_norm{k}"] = x
                    continue
                h = x
                if L["norm"] == "pre":
                    h = self.norm(x, L["layer_norm"], L["eps"], gamma, beta)
                    s[f"{p}.norm{k}"] = h
                out = f(h)
                x = x + out if L["residual"] else out
                if L["residual"]:  # symformer names no stage for a bare sub-layer
                    s[f"{p}.add_norm{k}"] = x
        if c["final_norm"] is not None:
            kind, eps = c["final_norm"]
            x = self.norm(x, kind, eps, self.t("gamma_f"), self.t("beta_f"))
            s["final_norm"] = x
        s["output"] = x
        if self.t("W_vocab") is not None:
            if c["transform"] is not None:  # BERT's masked-LM transform
                act, norm = c["transform"]
                x = s["lm_head.transform"] = x @ self.t("W_transform") + self.t("b_transform")
                x = s["lm_head.transform_activation"] = self.act(x, act)
                if norm is not None:
                    x = self.norm(x, norm[0], norm[1], self.t("gamma_t"), self.t("beta_t"))
                    s["lm_head.transform_norm"] = x
            logits = x @ self.t("W_vocab")
            s["logits"] = logits if self.t("b_vocab") is None else logits + self.t("b_vocab")
            s["probabilities"] = torch.softmax(s["logits"], dim=-1)
        return s


if __name__ == "__main__":
    torch.set_printoptions(precision=17)
    stages = Model()()
    print(TITLE)
    print(stages.get("logits", stages["output"]))
'''


def to_torch(example: Example) -> str:
    """The text of a standalone PyTorch module file computing ``example`` in float64."""
    config, weights = settings(example)
    head = ('"""A symformer example as a standalone PyTorch module (symformer export '
            '--format torch).\n\nEvery weight is the float64 nearest the example\'s exact '
            'value.  Run it: python model.py\n"""\n\nimport torch\n\n')
    return (head + f"TITLE = {example.title!r}\n\nCONFIG = {pprint.pformat(config, width=100)}\n"
            f"\nWEIGHTS = {pprint.pformat(weights, width=100)}\n" + _MODULE)


def model_class(example: Example) -> Any:
    """The ``Model`` class of :func:`to_torch`'s file, built in this process: only the
    fixed module code runs (the example's settings and weights are passed as objects,
    so no text of the example is ever executed)."""
    import torch

    config, weights = settings(example)
    namespace: dict[str, Any] = {"__name__": "symformer_torch_model", "torch": torch,
                                 "CONFIG": config, "WEIGHTS": weights,
                                 "TITLE": example.title}
    exec(compile(_MODULE, "<symformer torch model>", "exec"), namespace)
    return namespace["Model"]


def settings(example: Example) -> tuple[dict[str, Any], dict[str, Any]]:
    """The module's CONFIG and WEIGHTS: the example's settings and float64 weights."""
    if example.decoder is not None:
        raise NotSupportedError("the PyTorch module: encoder-decoder examples are not "
                                "supported (encoders and decoder-only models are)")
    weights: dict[str, Any] = {"embeddings": float_rows(example.embeddings)}
    if example.positional_embeddings is not None:
        weights["positional_embeddings"] = float_rows(example.positional_embeddings)
    layers = []
    for li, L in enumerate(example.layers, 1):
        p = f"layer{li}"
        heads = []
        for k, H in enumerate(L.heads, 1):
            names = {}
            for key in ("W_Q", "W_K", "W_V", "b_Q", "b_K", "b_V"):
                value = getattr(H, key)
                names[key] = None if value is None else f"{p}.head{k}.{key}"
                if value is not None:
                    weights[names[key]] = float_rows(value, vector=key.startswith("b_"))
            heads.append(names)
        layer: dict[str, Any] = {"heads": heads}
        for key in ("W_O", "b_O", "W_1", "b_1", "W_2", "b_2", "W_gate", "b_gate",
                    "gamma_1", "beta_1", "gamma_2", "beta_2"):
            value = getattr(L, key)
            name = f"{p}.{key}"
            layer[key] = None if value is None else name
            if value is not None:
                weights[name] = float_rows(value, vector=not key.startswith("W_"))
        layer.update(activation=L.activation, norm=L.norm, layer_norm=L.layer_norm,
                     eps=_float(L.eps), residual=L.residual,
                     scale=None if L.scale is None else _float(L.scale),
                     rope_style=L.rope_style)
        layers.append(layer)
    final = None
    if example.final_norm is not None:
        final = (example.final_norm.layer_norm, _float(example.final_norm.eps))
        weights["gamma_f"] = float_rows(example.final_norm.gamma_f, vector=True)
        weights["beta_f"] = float_rows(example.final_norm.beta_f, vector=True)
    segments, first = None, None
    if example.token_type_embeddings is not None:
        segments = list(example.segments)
        weights["token_type_embeddings"] = float_rows(example.token_type_embeddings)
    if example.embedding_norm is not None:
        first = (example.embedding_norm.layer_norm, _float(example.embedding_norm.eps))
        weights["gamma_e"] = float_rows(example.embedding_norm.gamma_f, vector=True)
        weights["beta_e"] = float_rows(example.embedding_norm.beta_f, vector=True)
    transform = None
    if example.lm_head is not None and example.lm_head.W_transform is not None:
        head = example.lm_head
        weights["W_transform"] = float_rows(head.W_transform)
        weights["b_transform"] = float_rows(head.b_transform, vector=True)
        norm = None
        if head.transform_norm is not None:
            norm = (head.transform_norm.layer_norm, _float(head.transform_norm.eps))
            weights["gamma_t"] = float_rows(head.transform_norm.gamma_f, vector=True)
            weights["beta_t"] = float_rows(head.transform_norm.beta_f, vector=True)
        transform = (head.transform_activation, norm)
    if example.lm_head is not None:
        weights["W_vocab"] = float_rows(example.lm_head.W_vocab)
        if example.lm_head.b_vocab is not None:
            weights["b_vocab"] = float_rows(example.lm_head.b_vocab, vector=True)
    config = {"token_ids": list(example.token_ids), "tokens": list(example.tokens),
              "vocab": list(example.vocab),
              "positional_encoding": example.positional_encoding,
              "base": _float(example.positional_encoding_base), "causal": example.causal,
              "mask": None if example.mask_value is None else _float(example.mask_value),
              "final_norm": final, "layers": layers, "segments": segments,
              "embedding_norm": first, "transform": transform}
    return config, weights


def _float(value: Any) -> float:
    """The float64 nearest an exact rational (Python rounds p/q correctly)."""
    from fractions import Fraction

    from symformer.lazy import sympy

    q = sympy.Rational(value)
    return float(Fraction(int(q.p), int(q.q)))


def float_rows(matrix: Any, vector: bool = False) -> list[Any]:
    """An exact matrix as rows of the nearest float64s (one row: a list, if ``vector``)."""
    rows = [[_float(v) for v in matrix.row(i)] for i in range(matrix.rows)]
    return rows[0] if vector and len(rows) == 1 else rows
