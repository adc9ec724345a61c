"""``from_torch``'s input checks and activations, against PyTorch's own forward pass.

A wrongly sized input is named as the input (its width and the module's d_model), never
as a weight; SiLU (``F.silu``, ``nn.SiLU``) and the tanh GELU
(``nn.GELU(approximate="tanh")``) import as the example's ``silu`` and ``gelu_tanh``, and
the certified output matches the module run in float64 (eval mode).
"""

from __future__ import annotations

import numpy as np
import pytest

import symformer
import symformer.frameworks.torch_in  # noqa: F401  (imports torch only when called)
from symformer.errors import InputError, NotSupportedError


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch", reason="from_torch needs PyTorch "
                                               "(pip install torch, the CPU wheel)")


def certified(g: symformer.Derivation, name: str) -> np.ndarray:
    return np.array([[float(b.mid()) for b in row] for row in g[name].balls(128)])


@pytest.mark.parametrize(("kind", "shape"), [("mha", (3, 9)), ("encoder", (3, 5)),
                                             ("batch", (1, 3, 6))])
def test_a_wrongly_sized_input_is_named_as_the_input(torch, kind, shape):
    torch.manual_seed(0)
    module = (torch.nn.MultiheadAttention(8, 2) if kind == "mha" else
              torch.nn.TransformerEncoderLayer(4, 2, 6, dropout=0.0, batch_first=True))
    width = 8 if kind == "mha" else 4
    with pytest.raises(InputError) as caught:
        symformer.from_torch(module.eval(), torch.zeros(*shape))
    message = str(caught.value)
    wide = shape[-1]
    assert message.startswith(f"tokens: the input rows are {wide} wide")
    assert f"d_model = {width}" in message and f"n x {width}" in message
    assert "W_Q" not in message and "\n" not in message


def test_a_decoder_names_its_memory_rows(torch):
    torch.manual_seed(0)
    decoder = torch.nn.TransformerDecoderLayer(4, 2, 6, dropout=0.0).eval()
    with pytest.raises(InputError, match=r"^memory: the input rows are 5 wide .*d_model = 4"):
        symformer.from_torch(decoder, torch.zeros(2, 4), memory=torch.zeros(3, 5))
    with pytest.raises(InputError, match=r"^tokens: the input rows are 3 wide"):
        symformer.from_torch(decoder, torch.zeros(2, 3), memory=torch.zeros(3, 4))
    encoder = torch.nn.TransformerEncoderLayer(6, 2, 6, dropout=0.0).eval()
    with pytest.raises(InputError, match=r"^memory: the input rows are 4 wide .*d_model = 6"):
        symformer.from_torch(decoder, torch.zeros(2, 4), memory=torch.zeros(3, 4),
                             encoder=encoder)


def activations(torch):
    F = torch.nn.functional
    return {"F.silu": (F.silu, "silu"), "nn.SiLU": (torch.nn.SiLU(), "silu"),
            "gelu_tanh": (torch.nn.GELU(approximate="tanh"), "gelu_tanh"),
            "nn.GELU": (torch.nn.GELU(), "gelu"), "nn.ReLU": (torch.nn.ReLU(), "relu")}


@pytest.mark.parametrize("name", ["F.silu", "nn.SiLU", "gelu_tanh", "nn.GELU", "nn.ReLU"])
def test_encoder_layer_activations_match_pytorch(torch, name):
    activation, expected = activations(torch)[name]
    torch.manual_seed(5)
    layer = torch.nn.TransformerEncoderLayer(4, 2, dim_feedforward=6, dropout=0.0,
                                             activation=activation, batch_first=True,
                                             layer_norm_eps=1e-5).eval()
    x = torch.randn(3, 4)
    example = symformer.from_torch(layer, x)
    assert example.layers[0].activation == expected
    layer = layer.double()
    # gradients on: PyTorch's fast path (eval under no_grad) computes the exact GELU for
    # GELU(approximate="tanh"), the module's own definition is the tanh one
    want = layer(x.double().unsqueeze(0))[0].detach().numpy()
    with torch.no_grad():
        hidden = layer.linear1(layer.norm1(x.double() + layer.self_attn(
            x.double(), x.double(), x.double(), need_weights=False)[0]))
        act = activation(hidden).numpy()
    text = symformer.frameworks.torch_in.torch_text(layer.float(), x)
    assert ("fast path" in text) == (expected == "gelu_tanh")
    g = symformer.derive(example)
    np.testing.assert_allclose(certified(g, "output"), want, rtol=0, atol=1e-12)
    np.testing.assert_allclose(certified(g, "layer1.ffn.activation"), act, rtol=0,
                               atol=1e-12)


def test_decoder_layer_takes_silu(torch):
    torch.manual_seed(7)
    layer = torch.nn.TransformerDecoderLayer(4, 2, dim_feedforward=6, dropout=0.0,
                                             activation=torch.nn.SiLU(),
                                             batch_first=True).eval()
    tgt, memory = torch.randn(2, 4), torch.randn(3, 4)
    example = symformer.from_torch(layer, tgt, memory=memory)
    layer = layer.double()
    with torch.no_grad():
        want = layer(tgt.double()[None], memory.double()[None])[0].numpy()
    g = symformer.derive(example)
    np.testing.assert_allclose(certified(g, "decoder.output"), want, rtol=0, atol=1e-12)


def test_other_activations_are_still_refused(torch):
    layer = torch.nn.TransformerEncoderLayer(4, 2, 6, dropout=0.0, activation=torch.tanh)
    with pytest.raises(NotSupportedError, match="activation .* is not supported .*silu"):
        symformer.from_torch(layer.eval(), torch.zeros(2, 4))
