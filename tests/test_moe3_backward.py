"""The gradient through a mixture of experts and dropout with given masks: ``moe_dropout``
with an mse loss, every weight's and the input's exact gradient against PyTorch's
autograd of a forward written here from the file's numbers (the top-k mask a constant,
as ``torch.topk``'s indices are)."""

from __future__ import annotations

import tomllib

import numpy as np
import pytest

from symformer import derive
from symformer.blocks.backward import with_gradients
from symformer.example.loader import packaged_examples, parse_example

TEXT = packaged_examples()["moe_dropout"].read_text(encoding="utf-8")
TARGET = [[1, -1], [0, 2], [3, 1]]


def _floats(stage) -> np.ndarray:
    return np.array([[float(v) for v in row] for row in stage.values(decimals=15)])


def test_gradients_match_pytorch_autograd():
    torch = pytest.importorskip("torch")
    data = tomllib.loads(TEXT)
    layer = data["layer"][0]

    def t(rows):
        return torch.tensor(rows, dtype=torch.float64, requires_grad=True)

    def fixed(rows):
        return torch.tensor(rows, dtype=torch.float64)

    x = fixed(data["embeddings"])
    head, moe = layer["head"][0], layer["moe"]
    W_Q, W_K, W_V, W_r = t(head["W_Q"]), t(head["W_K"]), t(head["W_V"]), t(moe["router"])
    experts = [{k: t(v if k.startswith("W") else [v]) for k, v in e.items()}
               for e in moe["expert"]]
    a = torch.softmax((x @ W_Q) @ (x @ W_K).T / 2 ** 0.5, dim=-1) @ (x @ W_V)
    x1 = x + a * fixed(layer["attention_dropout"]["mask"]) * 1.5  # p = 1/3
    r = x1 @ W_r
    p = torch.softmax(r, dim=-1)
    m = torch.zeros_like(r).scatter(-1, torch.topk(r, moe["top_k"], dim=-1).indices, 1.0)
    gates = p * m / (p * m).sum(-1, keepdim=True)
    y = 0
    for e, ex in enumerate(experts):
        h = torch.relu(x1 @ ex["W_1"] + ex.get("b_1", 0)) @ ex["W_2"] + ex.get("b_2", 0)
        y = y + gates[:, e:e + 1] * h
    out = x1 + y * fixed(layer["ffn_dropout"]["mask"]) * 2  # p = 1/2
    loss = ((out - fixed(TARGET)) ** 2).mean()
    loss.backward()

    example = parse_example(TEXT + f'\n[loss]\nkind = "mse"\ntarget = {TARGET}\n',
                            "moe_dropout.toml")
    g = with_gradients(derive(example))
    assert float(g["loss"].values(decimals=15)[0][0]) == pytest.approx(loss.item(), abs=1e-13)
    pairs = {"layer1.head1.W_Q": W_Q, "layer1.head1.W_K": W_K, "layer1.head1.W_V": W_V,
             "layer1.moe.W_router": W_r}
    for e, ex in enumerate(experts, 1):
        pairs |= {f"layer1.moe.expert{e}.{k}": v for k, v in ex.items()}
    assert np.abs(W_r.grad.numpy()).max() > 0.01  # the gates pass a gradient to the router
    for name, tensor in pairs.items():
        np.testing.assert_allclose(_floats(g[f"grad.{name}"]),
                                   tensor.grad.numpy().reshape(g[f"grad.{name}"].shape),
                                   rtol=0, atol=1e-12, err_msg=name)
