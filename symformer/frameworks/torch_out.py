"""An example as a small standalone PyTorch module file (``export --format torch``).

The file holds plain ``nn.Module`` code (the same for every example) and the example's
settings and weights as Python literals: each weight is the float64 nearest its exact
value (``repr`` of that double, which reads back as the same double), so a weight
imported from a float32/float64/bfloat16 model is exact.  No user text reaches the code
except as ``repr`` string literals.  Running the file prints the output (the logits of
a language model); ``Model()(...)`` returns every stage by the engine's stage names.
"""

from __future__ import annotations

import json
import os
import pprint
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from symformer.errors import NotSupportedError
from symformer.example.schema import Example
from symformer.lazy import sympy
from symformer.registry import refuse, torch_activations, torch_norms, torch_scores

#: Where the module's activation dispatch goes: one branch per activation with a PyTorch
#: form (its operation's ``torch_function``, code of the operation's module, never text
#: of the example).
_ACT = "    # ACTIVATIONS\n"
#: Where the normalisation dispatch goes: one branch per normalisation with a PyTorch
#: form (its operation's ``torch_norms``).
_NORM = "    # NORMALISATIONS\n"
#: Where the score-function dispatch goes: one branch per score function with a PyTorch
#: form (its operation's ``torch_scores``).
_SCORES = "    # SCORES\n"
#: Who refuses an example using a kind of step without a PyTorch form.
CONSUMER = "the PyTorch module (export --format torch, crosscheck --torch)"

_MODULE = '''
def read_weights(weights, source, path=None):
    """WEIGHTS, each reference to a tensor ({"tensor": ...}) read from the safetensors
    file ``source`` names (or ``path``), float64: the file is read once, and its bytes
    are parsed only when their SHA-256 is the recorded one."""
    if source is None:
        return weights
    import hashlib

    from safetensors.torch import load  # pip install safetensors

    path = path or source["file"]
    with open(path, "rb") as f:
        data = f.read()
    if hashlib.sha256(data).hexdigest() != source["sha256"]:
        raise ValueError(f"{path}: not the weights file this module was written for "
                         f"(its SHA-256 differs)")
    tensors, out = load(data), {}
    for name, w in weights.items():
        if not isinstance(w, dict):
            out[name] = w
            continue
        t = tensors[w["tensor"]].to(torch.float64)
        t = t.T if w["transpose"] else t
        columns = slice(*(w["columns"] or (0, t.shape[-1])))
        if t.dim() == 1:
            t = t[columns]
        else:
            t = t[slice(*(w["rows"] or (0, t.shape[0]))), columns]
            t = t[0] if w["vector"] and t.shape[0] == 1 else t
        out[name] = t.contiguous()  # laid out as a written weight is: the same sums
    return out


class Model(torch.nn.Module):
    """The example's forward pass; forward() returns its stages by symformer's names."""

    def __init__(self, dtype=torch.float64, weights_file=None):
        super().__init__()
        self.dtype = dtype
        self.config = CONFIG
        weights = read_weights(WEIGHTS, WEIGHTS_FILE, weights_file)
        self.w = {k: None if v is None else torch.as_tensor(v, dtype=torch.float64).to(dtype)
                  for k, v in weights.items()}
        self.cache, self.offset = None, 0  # forward(ids, cache): generation's KV cache

    def t(self, name):
        return self.w.get(name)

    def norm(self, x, kind, eps, gamma, beta, s=None, name=None):
        """x normalised; its statistics are the stages ``name.mean`` ... when named."""
        stats = {} if s is None else s
    # NORMALISATIONS
        raise ValueError(f"no PyTorch form for the normalisation {kind!r}")

    def named_norm(self, x, setting, gamma, beta, s, name):
        """x normalised as ``setting`` = (kind, eps) says: the stage ``name`` (no setting:
        x as it is)."""
        if setting is None:
            return x
        s[name] = self.norm(x, setting[0], setting[1], self.t(gamma), self.t(beta), s, name)
        return s[name]

    def scores(self, q, k, kind):
        """The raw scores of queries q against keys k, as the score function says."""
    # SCORES
        raise ValueError(f"no PyTorch form for the attention score function {kind!r}")

    def act(self, x, name):
    # ACTIVATIONS
        raise ValueError(f"no PyTorch function for the activation {name!r}")

    def rope(self, x, base, style):
        n, d = x.shape
        i = torch.arange(d // 2, dtype=torch.float64)
        theta = torch.tensor(base, dtype=torch.float64) ** (-2 * i / d)
        pos = torch.arange(self.offset, self.offset + n, dtype=torch.float64)
        angle = (pos[:, None] * theta).to(self.dtype)
        cos, sin = torch.cos(angle), torch.sin(angle)
        if style == "half":
            a, b = x[:, : d // 2], x[:, d // 2:]
            return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)
        a, b = x[:, 0::2], x[:, 1::2]
        return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).reshape(n, d)

    def positions(self, n, d, pe, base, learned=None):
        """The positional rows added to n embeddings of width d (None: nothing added)."""
        if pe == "learned":
            return self.t(learned)[self.offset:self.offset + n]
        if pe != "sinusoidal":
            return None
        pos = torch.arange(self.offset, self.offset + n, dtype=torch.float64)[:, None]
        j = torch.arange(d)
        angle = pos / torch.tensor(base, dtype=torch.float64) ** ((2 * (j // 2)).double() / d)
        return torch.where(j % 2 == 0, torch.sin(angle), torch.cos(angle)).to(self.dtype)

    def attend(self, h, kv, heads, L, causal, s, p, group, name):
        """Every head of h (queries) on kv (keys, values), concatenated, then W_O: the
        stage ``name``."""
        c, outs = self.config, []
        for k, H in enumerate(heads, 1):
            name_q = f"{p}.{group}head{k}"
            # grouped-query attention: K and V are the shared key/value head's stages
            name_kv = name_q if H["kv"] is None else f"{p}.kv_head{H['kv']}"
            q = h @ self.t(H["W_Q"])
            q = s[f"{name_q}.Q"] = q if H["b_Q"] is None else q + self.t(H["b_Q"])
            kk = kv @ self.t(H["W_K"])
            kk = s[f"{name_kv}.K"] = kk if H["b_K"] is None else kk + self.t(H["b_K"])
            v = kv @ self.t(H["W_V"])
            v = s[f"{name_kv}.V"] = v if H["b_V"] is None else v + self.t(H["b_V"])
            if L["rope"]:
                q = s[f"{name_q}.Q_rot"] = self.rope(q, c["base"], L["rope_style"])
                kk = s[f"{name_kv}.K_rot"] = self.rope(kk, c["base"], L["rope_style"])
            if self.cache is not None:  # the keys and values of the tokens before
                kk, v = self.cached(name_kv, kk, v)
            u = s[f"{name_q}.raw_scores"] = self.scores(q, kk, c["scores"])
            scale = L["scale"] if L["scale"] is not None else q.shape[1] ** 0.5
            u = u / scale
            if causal:
                late = u.shape[1] - u.shape[0]  # keys before the first query (a cache)
                above = torch.ones(u.shape[0], u.shape[1], dtype=torch.bool).triu(1 + late)
                if c.get("window") and not group:  # a sliding window: keys w back too
                    above |= torch.ones_like(above).tril(late - c["window"])
                u = (u.masked_fill(above, float("-inf")) if c["mask"] is None
                     else u + above * c["mask"])
            s[f"{name_q}.scores"] = u
            a = torch.softmax(u, dim=-1)
            s[f"{name_q}.weights"] = a
            outs.append(a @ v)
            s[f"{name_q}.output"] = outs[-1]
        o = s[f"{p}.{group or 'attention.'}concat"] = torch.cat(outs, dim=-1)
        if L["W_O"] is not None:
            o = o @ self.t(L["W_O"])
        if L["b_O"] is not None:
            o = o + self.t(L["b_O"])
        s[name] = o
        return o

    def cached(self, name, k, v):
        """The cache's keys and values of ``name`` with this call's rows appended (once a
        call: grouped-query heads share them)."""
        old = self.cache.get(name)
        if old is None or old[0].shape[0] < self.offset + k.shape[0]:
            self.cache[name] = (k, v) if old is None else (torch.cat((old[0], k)),
                                                           torch.cat((old[1], v)))
        return self.cache[name]

    def ffn(self, h, L, s, p):
        hidden = h @ self.t(L["W_1"])
        hidden = s[f"{p}.ffn.hidden"] = (hidden if L["b_1"] is None
                                         else hidden + self.t(L["b_1"]))
        if L["W_gate"] is not None:
            g = h @ self.t(L["W_gate"])
            g = s[f"{p}.ffn.gate"] = g if L["b_gate"] is None else g + self.t(L["b_gate"])
            s[f"{p}.ffn.gate_activation"] = self.act(g, L["activation"])
            a = s[f"{p}.ffn.activation"] = s[f"{p}.ffn.gate_activation"] * hidden
        else:
            a = s[f"{p}.ffn.activation"] = self.act(hidden, L["activation"])
        out = a @ self.t(L["W_2"])
        out = out if L["b_2"] is None else out + self.t(L["b_2"])
        s[f"{p}.ffn.output"] = out
        return out

    def moe(self, h, L, s, p):
        """A mixture of experts (its stages ``P.moe.*``): the router's softmax, the
        top-k experts by torch.topk, their gates and the gate-weighted sum."""
        M, q = L["moe"], f"{p}.moe"
        r = s[f"{q}.router_logits"] = h @ self.t(f"{q}.router")
        prob = s[f"{q}.router_probabilities"] = torch.softmax(r, dim=-1)
        k = M["top_k"]
        if k < r.shape[1]:  # the k-th largest score minus the (k+1)-th, per token
            top = torch.sort(r, dim=-1, descending=True).values
            s[f"{q}.margin"] = top[:, k - 1:k] - top[:, k:k + 1]
        mask = s[f"{q}.experts"] = torch.zeros_like(r).scatter(
            -1, torch.topk(r, k, dim=-1).indices, 1.0)
        kept = prob * mask
        g = s[f"{q}.gates"] = kept / kept.sum(-1, keepdim=True) if M["renormalize"] else kept
        out = 0
        for e, E in enumerate(M["experts"], 1):
            out = out + g[:, e - 1:e] * self.ffn(h, E, s, f"{q}.expert{e}")
        s[f"{q}.output"] = out
        return out

    def dropout(self, x, given, s, name):
        """x times the given 0/1 mask over 1 - p (the stage ``NAME.dropout``)."""
        if given is None:
            return x
        s[f"{name}.dropout"] = x * self.t(given["mask"]) / (1 - given["p"])
        return s[f"{name}.dropout"]

    def wrap(self, x, subs, L, s, p):
        """Each sub-layer (number k, function f) with its residual connection and norm
        (post, pre or none); a sub-layer the layer lacks is absent, the others keep
        their numbers (a decoder's add_norm2 is cross-attention's)."""
        for k, f in subs:
            gamma, beta = self.t(f"{p}.gamma_{k}"), self.t(f"{p}.beta_{k}")
            if L["norm"] == "post":
                out = f(x)
                total = s[f"{p}.add_norm{k}.sum"] = x + out if L["residual"] else out
                x = self.norm(total, L["layer_norm"], L["eps"], gamma, beta, s,
                              f"{p}.add_norm{k}")
                s[f"{p}.add_norm{k}"] = x
                continue
            h = x
            if L["norm"] == "pre":
                h = self.norm(x, L["layer_norm"], L["eps"], gamma, beta, s, f"{p}.norm{k}")
                s[f"{p}.norm{k}"] = h
            out = f(h)
            x = x + out if L["residual"] else out
            if L["residual"]:  # symformer names no stage for a bare sub-layer
                s[f"{p}.add_norm{k}"] = x
        return x

    def head(self, x, s, W, b):
        logits = x @ self.t(W)
        s["logits"] = logits if b is None or self.t(b) is None else logits + self.t(b)
        s["probabilities"] = torch.softmax(s["logits"], dim=-1)
        if not self.config["masked"]:  # the last position's argmax, one-hot
            last = s["logits"][-1:]
            s["next_token"] = (last == last.max()).to(last.dtype)

    def forward(self, ids=None, cache=None):
        """The stages of ``ids`` (default: the example's tokens).  With ``cache`` (a dict,
        empty at the prefill), as generation runs: ``ids`` are the tokens after those
        the cache holds, their keys and values are appended to it, and every stage has
        their rows only (a decoder-only model's)."""
        c, s = self.config, {}
        ids = torch.tensor(c["token_ids"] if ids is None else ids)
        n = len(ids)
        self.cache, self.offset = cache, 0 if cache is None else cache.get("length", 0)
        if cache is not None:
            cache["length"] = self.offset + n
        x = s["embeddings"] = self.t("embeddings")[ids]
        if c["segments"] is not None:  # BERT's token types (0 past the example's tokens)
            seg = torch.tensor((c["segments"] + [0] * n)[:n])
            s["token_type_embeddings"] = self.t("token_type_embeddings")[seg]
            x = s["typed_embeddings"] = x + s["token_type_embeddings"]
        pe = self.positions(n, x.shape[1], c["positional_encoding"], c["base"],
                            "positional_embeddings")
        s["positional_encoding"] = torch.zeros_like(x) if pe is None else pe  # RoPE: 0
        x = s["input"] = x if pe is None else x + pe
        x = self.named_norm(x, c["embedding_norm"], "gamma_e", "beta_e", s, "embedding_norm")
        for li, L in enumerate(c["layers"], 1):
            p = f"layer{li}"
            subs = [lambda h, L=L, p=p: self.dropout(self.attend(
                h, h, L["heads"], L, c["causal"], s, p, "", f"{p}.attention.output"),
                L["attention_dropout"], s, f"{p}.attention.output")] \
                if L["heads"] else []  # an FFN-only block: its Add & Norm is the first
            if L["W_1"] is not None:
                subs.append(lambda h, L=L, p=p: self.dropout(
                    self.ffn(h, L, s, p), L["ffn_dropout"], s, f"{p}.ffn.output"))
            elif L["moe"] is not None:  # a mixture of experts in the FFN's place
                subs.append(lambda h, L=L, p=p: self.dropout(
                    self.moe(h, L, s, p), L["ffn_dropout"], s, f"{p}.moe.output"))
            x = self.wrap(x, enumerate(subs, 1), L, s, p)
        x = s["output"] = self.named_norm(x, c["final_norm"], "gamma_f", "beta_f", s,
                                          "final_norm")
        if c["decoder"] is not None:
            return self.decode(x, s)
        if self.t("W_vocab") is not None:
            if c["transform"] is not None:  # BERT's masked-LM transform
                act, norm = c["transform"]
                x = s["lm_head.transform"] = x @ self.t("W_transform") + self.t("b_transform")
                x = s["lm_head.transform_activation"] = self.act(x, act)
                x = self.named_norm(x, norm, "gamma_t", "beta_t", s, "lm_head.transform_norm")
            self.head(x, s, "W_vocab", "b_vocab")
        if c["output_head"] is not None:
            self.classify(x, s, *c["output_head"])
        return s

    def classify(self, x, s, pooling, output):
        """A classification or regression head: pool, then x W_C + b_C, then softmax,
        sigmoid or nothing (symformer's head.pooled, head.logits, head.probabilities or
        head.output)."""
        if pooling != "none":
            x = s["head.pooled"] = {"first": x[:1], "last": x[-1:],
                                    "mean": x.mean(0, keepdim=True)}[pooling]
        z = x @ self.t("W_C")
        if self.t("b_C") is not None:
            z = z + self.t("b_C")
        if output == "identity":
            s["head.output"] = z
            return
        s["head.logits"] = z
        s["head.probabilities"] = torch.softmax(z, dim=-1) if output == "softmax" \
            else torch.sigmoid(z)

    def decode(self, memory, s):
        """The decoder: self-attention, cross-attention over the memory, FFN per block."""
        D = self.config["decoder"]
        ids = torch.tensor(D["token_ids"])
        x = s["decoder.embeddings"] = self.t("decoder.embeddings")[ids]
        pe = self.positions(len(ids), x.shape[1], D["positional_encoding"], 10000)
        if pe is not None:
            s["decoder.positional_encoding"] = pe
        x = s["decoder.input"] = x if pe is None else x + pe
        for li, L in enumerate(D["layers"], 1):
            p = f"decoder.layer{li}"
            subs = [(1, lambda h, L=L, p=p: self.attend(h, h, L["self_heads"], L["self"],
                                                        D["causal"], s, p, "self.",
                                                        f"{p}.self.output")),
                    (2, lambda h, L=L, p=p: self.attend(h, memory, L["cross_heads"],
                                                        L["cross"], False, s, p, "cross.",
                                                        f"{p}.cross.output")),
                    (3, lambda h, L=L, p=p: self.ffn(h, L, s, p))]
            present = (bool(L["self_heads"]), bool(L["cross_heads"]), L["W_1"] is not None)
            x = self.wrap(x, [sub for sub, there in zip(subs, present) if there], L, s, p)
        x = s["decoder.output"] = self.named_norm(x, D["final_norm"], "decoder.gamma_f",
                                                  "decoder.beta_f", s, "decoder.final_norm")
        if self.t("decoder.W_vocab") is not None:
            self.head(x, s, "decoder.W_vocab", None)
        return s


if __name__ == "__main__":
    torch.set_printoptions(precision=17)
    stages = Model()()
    print(TITLE)
    print(next(stages[k] for k in ("logits", "head.probabilities", "head.output", "output")
               if k in stages))
'''


def module_code() -> str:
    """The module's fixed code, its activation and normalisation dispatches built from
    the registered operations' PyTorch forms (``if name == "relu": return
    torch.relu(x)``; ``if kind == "rms":`` and the RMSNorm's statements)."""
    branches = "".join(f"        if name == {json.dumps(name)}:\n            return {function}\n"
                       for name, function in torch_activations().items())
    norms = "".join(f"        if kind == {json.dumps(key)}:\n"
                    + textwrap.indent(code, " " * 12)
                    for key, code in torch_norms().items())
    scores = "".join(f"        if kind == {json.dumps(key)}:\n            return {code}\n"
                     for key, code in torch_scores().items())
    return _MODULE.replace(_ACT, branches).replace(_NORM, norms).replace(_SCORES, scores)


def _norm_keys(example: Example) -> list[str]:
    """Every normalisation the example uses (its blocks', the final, embedding and
    prediction-head norms', the decoder's)."""
    blocks = [*example.layers, *(example.decoder.layers if example.decoder else ())]
    keys = [L.layer_norm for L in blocks if L.norm != "none"]
    head = example.lm_head
    others = (example.final_norm, example.embedding_norm,
              head.transform_norm if head is not None else None,
              example.decoder.final_norm if example.decoder is not None else None)
    return keys + [n.layer_norm for n in others if n is not None]


def to_torch(example: Example) -> str:
    """The text of a standalone PyTorch module file computing ``example`` in float64.

    An example whose weights are read from a safetensors file (``[weights] file``, an
    import with ``--weights reference``) gives a module that reads them from that file
    too, checked against its SHA-256 when the model is built (the weights it takes
    from no tensor as it is, written out); an example holding its weights gives them
    as literals."""
    config, weights = settings(example)
    source = weights_file(example)
    refs = {k: w.reference() for k, w in weights.items()} if source is not None else {}
    source = source if any(refs.values()) else None
    written = {k: refs.get(k) or w.array().tolist() for k, w in weights.items()}
    where = ("Every weight is the float64 nearest the example\'s exact value"
             if source is None else "The weights are read from the safetensors file "
             "WEIGHTS_FILE names (its SHA-256 checked; Model(weights_file=PATH) reads a "
             "copy elsewhere), the float64s of its floats")
    head = ('"""A symformer example as a standalone PyTorch module (symformer export '
            f'--format torch).\n\n{where}.  Run it: python model.py\n"""\n\nimport torch\n\n')
    return (head + f"TITLE = {example.title!r}\n\nCONFIG = {pprint.pformat(config, width=100)}\n"
            f"\nWEIGHTS_FILE = {pprint.pformat(source, width=100)}\n"
            f"\nWEIGHTS = {pprint.pformat(written, width=100)}\n" + module_code())


def model_class(example: Example) -> Any:
    """The ``Model`` class of :func:`to_torch`'s file, built in this process: only the
    fixed module code runs (the example's settings and weights are passed as objects,
    so no text of the example is ever executed)."""
    import torch

    config, weights = settings(example)
    namespace: dict[str, Any] = {"__name__": "symformer_torch_model", "torch": torch,
                                 "CONFIG": config, "WEIGHTS_FILE": None,
                                 "WEIGHTS": {k: w.array() for k, w in weights.items()},
                                 "TITLE": example.title}
    exec(compile(module_code(), "<symformer torch model>", "exec"), namespace)
    return namespace["Model"]


def settings(example: Example) -> tuple[dict[str, Any], dict[str, Weight]]:
    """The module's CONFIG and its weights by name (:class:`Weight`: each exact matrix,
    made float64 by :meth:`Weight.array` or referred to by :meth:`Weight.reference`)."""
    if example.rope_theta is not None or example.rope_angles is not None:
        raise NotSupportedError("the PyTorch module: RoPE with given angles (rope_theta, "
                                "rope_angles) is not supported")
    shape = ("an [attention] example (given Q, K, V)" if example.attention is not None
             else "ALiBi" if any(L.alibi_slopes for L in example.layers) else None)
    if shape is not None:
        raise NotSupportedError(f"the PyTorch module: {shape} is not supported yet")
    if example.attention_scores not in torch_scores():
        raise refuse("attention score function", example.attention_scores, CONSUMER,
                     "torch_scores (its PyTorch form)")
    supported = torch_activations()
    used = {L.activation for L in (*example.layers, *(
        example.decoder.layers if example.decoder is not None else ()))
        if L.W_1 is not None or L.moe is not None}
    used |= {e.activation for L in example.layers if L.moe is not None for e in L.moe.experts}
    if example.lm_head is not None and example.lm_head.W_transform is not None:
        used.add(example.lm_head.transform_activation)
    unknown = sorted(used - set(supported))
    if unknown:
        raise NotSupportedError(f"the PyTorch module: the activation {unknown[0]!r} has no "
                                f"PyTorch function here (supported: "
                                f"{', '.join(supported)})")
    unknown = sorted(set(_norm_keys(example)) - set(torch_norms()))
    if unknown:
        raise refuse("normalisation", unknown[0], CONSUMER, "torch_norms (its PyTorch form)")
    weights: dict[str, Any] = {"embeddings": Weight(example.embeddings)}
    if example.positional_embeddings is not None:
        weights["positional_embeddings"] = Weight(example.positional_embeddings)
    layers = []
    for li, L in enumerate(example.layers, 1):
        p = f"layer{li}"
        layer: dict[str, Any] = {"heads": _head_names(L.heads, f"{p}.", weights,
                                                      L.kv_heads or None)}
        layer.update(_weight_names(L, ("W_O", "b_O", "W_1", "b_1", "W_2", "b_2", "W_gate",
                                       "b_gate", "gamma_1", "beta_1", "gamma_2", "beta_2"),
                                   p, weights))
        layer.update(activation=L.activation, norm=L.norm, layer_norm=L.layer_norm,
                     eps=_float(L.eps), residual=L.residual,
                     scale=None if L.scale is None else _float(L.scale),
                     rope_style=L.rope_style, rope=example.positional_encoding == "rope",
                     moe=_moe(L.moe, f"{p}.moe", weights),
                     attention_dropout=_dropout(L.attention_dropout,
                                                f"{p}.attention_dropout", weights),
                     ffn_dropout=_dropout(L.ffn_dropout, f"{p}.ffn_dropout", weights))
        layers.append(layer)
    final = _norm_setting(example.final_norm, "gamma_f", "beta_f", weights)
    first = _norm_setting(example.embedding_norm, "gamma_e", "beta_e", weights)
    segments = None
    if example.token_type_embeddings is not None:
        segments = list(example.segments)
        weights["token_type_embeddings"] = Weight(example.token_type_embeddings)
    transform = None
    if example.lm_head is not None and example.lm_head.W_transform is not None:
        head = example.lm_head
        weights["W_transform"] = Weight(head.W_transform)
        weights["b_transform"] = Weight(head.b_transform, vector=True)
        transform = (head.transform_activation,
                     _norm_setting(head.transform_norm, "gamma_t", "beta_t", weights))
    if example.lm_head is not None:
        # tied: the embedding table's transpose (read from its tensor, transposed)
        weights["W_vocab"] = Weight(example.lm_head.W_vocab, transpose_of=(
            example.embeddings if example.lm_head.tied else None))
        if example.lm_head.b_vocab is not None:
            weights["b_vocab"] = Weight(example.lm_head.b_vocab, vector=True)
    output_head = None
    if example.head is not None:  # a classification or regression head, d -> C
        weights["W_C"] = Weight(example.head.W_C)
        if example.head.b_C is not None:
            weights["b_C"] = Weight(example.head.b_C, vector=True)
        output_head = (example.head.pooling, example.head.output)
    # the rows of the table (which may hold only the words the sentence uses)
    config = {"token_ids": list(example.embedding_ids), "tokens": list(example.tokens),
              "vocab": list(example.vocab),
              "positional_encoding": example.positional_encoding,
              "base": _float(example.positional_encoding_base), "causal": example.causal,
              "scores": example.attention_scores,
              "window": example.sliding_window,
              "mask": None if example.mask_value is None else _float(example.mask_value),
              "final_norm": final, "layers": layers, "segments": segments,
              "embedding_norm": first, "transform": transform,
              "masked": example.lm_head is not None and example.lm_head.masked,
              "output_head": output_head,
              "decoder": None if example.decoder is None else _decoder(example.decoder,
                                                                        weights)}
    return config, weights


def _head_names(heads: Any, prefix: str, weights: dict[str, Any], kv_heads: Any = None
                ) -> list[dict[str, Any]]:
    """Each head's weight names (None where it has none), its weights put in ``weights``;
    ``kv_heads``: the layer's shared key/value heads (grouped-query attention)."""
    out = []
    for k, H in enumerate(heads, 1):
        names = _weight_names(H, ("W_Q", "W_K", "W_V", "b_Q", "b_K", "b_V"),
                              f"{prefix}head{k}", weights)
        names["kv"] = None if kv_heads is None else H.kv_head + 1  # its key/value head
        out.append(names)
    return out


def _weight_names(owner: Any, keys: tuple[str, ...], prefix: str, weights: dict[str, Any]
                  ) -> dict[str, str | None]:
    """``PREFIX.KEY`` for each weight ``owner`` has (None for one it lacks); the weights
    (rows; a bias or norm weight as one row) put in ``weights``."""
    names: dict[str, str | None] = {}
    for key in keys:
        value = getattr(owner, key)
        names[key] = None if value is None else f"{prefix}.{key}"
        if value is not None:
            weights[f"{prefix}.{key}"] = Weight(value, vector=not key.startswith("W_"))
    return names


def _moe(moe: Any, prefix: str, weights: dict[str, Any]) -> dict[str, Any] | None:
    """A mixture of experts' settings (its router and experts' weights named)."""
    if moe is None:
        return None
    weights[f"{prefix}.router"] = Weight(moe.router)
    experts = []
    for e, expert in enumerate(moe.experts, 1):
        names = _weight_names(expert, ("W_1", "b_1", "W_2", "b_2"), f"{prefix}.expert{e}",
                              weights)
        experts.append({**names, "W_gate": None, "b_gate": None,
                        "activation": expert.activation})
    return {"top_k": moe.top_k, "renormalize": moe.renormalize, "experts": experts}


def _dropout(given: Any, prefix: str, weights: dict[str, Any]) -> dict[str, Any] | None:
    """Dropout with a given mask: the mask (a weight) and p as a float."""
    if given is None:
        return None
    weights[f"{prefix}.mask"] = Weight(sympy.Matrix([list(row) for row in given.mask]))
    return {"mask": f"{prefix}.mask", "p": _float(given.p)}


def _decoder(dec: Any, weights: dict[str, Any]) -> dict[str, Any]:
    """The ``[decoder]``'s settings (its weights put in ``weights``): blocks of
    self-attention, cross-attention over the encoder's output and an FFN, each optional
    (no heads: an empty list; no ``W_1``: None)."""
    weights["decoder.embeddings"] = Weight(dec.embeddings)
    if dec.W_vocab is not None:
        weights["decoder.W_vocab"] = Weight(dec.W_vocab)
    layers = []
    for li, L in enumerate(dec.layers, 1):
        p = f"decoder.layer{li}"
        layer: dict[str, Any] = _weight_names(
            L, ("W_1", "b_1", "W_2", "b_2", "W_gate", "b_gate", "gamma_1", "beta_1",
                "gamma_2", "beta_2", "gamma_3", "beta_3"), p, weights)
        layer.update(activation=L.activation, norm=L.norm, layer_norm=L.layer_norm,
                     eps=_float(L.eps), residual=L.residual)
        for group in ("self", "cross"):
            layer[f"{group}_heads"] = _head_names(getattr(L, f"{group}_heads"),
                                                  f"{p}.{group}.", weights)
            names = _weight_names(L, (f"W_O_{group}", f"b_O_{group}"), p, weights)
            layer[group] = {"W_O": names[f"W_O_{group}"], "b_O": names[f"b_O_{group}"],
                            "scale": None, "rope": False, "rope_style": "interleaved"}
        layers.append(layer)
    final = _norm_setting(dec.final_norm, "decoder.gamma_f", "decoder.beta_f", weights)
    return {"token_ids": list(dec.token_ids), "positional_encoding": dec.positional_encoding,
            "causal": dec.causal, "layers": layers, "final_norm": final}


def _norm_setting(norm: Any, gamma: str, beta: str, weights: dict[str, Any]
                  ) -> tuple[str, float] | None:
    """A norm outside the blocks (a FinalNorm) as (kind, eps), its gamma and beta put in
    ``weights`` under the given names; None for no norm."""
    if norm is None:
        return None
    weights[gamma] = Weight(norm.gamma_f, vector=True)
    weights[beta] = Weight(norm.beta_f, vector=True)
    return norm.layer_norm, _float(norm.eps)


def _float(value: Any) -> float:
    """The float64 nearest an exact rational (Python rounds p/q correctly)."""
    from fractions import Fraction

    from symformer.lazy import sympy

    q = sympy.Rational(value)
    return float(Fraction(int(q.p), int(q.q)))


def float_rows(matrix: Any, vector: bool = False) -> list[Any]:
    """An exact matrix as rows of the nearest float64s (one row: a list, if ``vector``)."""
    return Weight(matrix, vector).array().tolist()


@dataclass(frozen=True)
class Weight:
    """One weight of the module: an exact matrix (one row as a vector, if ``vector``);
    ``transpose_of``: the matrix it is the transpose of (a tied W_vocab: the embedding
    table's), so that it refers to that matrix's tensor."""

    matrix: Any
    vector: bool = False
    transpose_of: Any = None

    def array(self) -> np.ndarray:
        """The float64s nearest the exact values (a weight imported from a float32,
        float64 or bfloat16 file: exactly those floats)."""
        from symformer.example.dyadic import DyadicMatrix

        m = self.matrix
        if isinstance(m, DyadicMatrix) and m.fresh():  # floats already: exactly
            a = m.array.astype("float64")
        else:
            a = np.array([[_float(v) for v in m.row(i)] for i in range(m.rows)],
                         dtype="float64").reshape(m.rows, m.cols)
        return a[0] if self.vector and a.shape[0] == 1 else a

    def reference(self) -> dict[str, Any] | None:
        """Where the weight is in the example's weights file (``{"tensor": ...,
        "transpose": ..., "rows": [a, b], "columns": [a, b], "vector": ...}``: the
        tensor, transposed, then those rows and columns), None when it is not one
        tensor's part as it is (a written matrix, a view)."""
        from symformer.example.dyadic import DyadicMatrix

        m = self.matrix if self.transpose_of is None else self.transpose_of
        origin = getattr(m, "origin", None)
        if not (isinstance(m, DyadicMatrix) and m.fresh() and isinstance(origin, dict)
                and isinstance(origin.get("tensor"), str)):
            return None
        ref = {"tensor": origin["tensor"], "transpose": bool(origin.get("transpose")),
               "rows": origin.get("rows"), "columns": origin.get("columns"),
               "vector": self.vector}
        if self.transpose_of is not None:  # (T[r, c])^T = (T^T)[c, r]
            ref |= {"transpose": not ref["transpose"], "rows": ref["columns"],
                    "columns": ref["rows"]}
        return ref


def weights_file(example: Example) -> dict[str, str] | None:
    """The ``[weights]`` file the example's weights are read from, as ``{"file": its
    absolute path, "sha256": ...}``; None for an example that holds its weights."""
    from symformer.example.loader import read_text_file, read_toml

    source = example.source
    if not source or source.startswith("<") or not Path(source).is_file():
        return None
    table = read_toml(read_text_file(Path(source), "an example .toml file"),
                      source).get("weights")
    if not isinstance(table, dict):
        return None
    file = Path(table["file"])
    if not file.is_absolute():
        file = Path(source).parent / file
    return {"file": os.path.abspath(file), "sha256": table["sha256"]}
