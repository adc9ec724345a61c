"""The imports map a framework's kinds of step by what the operations declare.

A Hugging Face family's normalisation (the module class its blocks use: GPT-2's
``LayerNorm``, Llama's ``LlamaRMSNorm``) and its ``hidden_act``, and a PyTorch layer's
norm modules and activation, become the example's ``layer_norm`` and ``activation``
through one table built from the registry (``hf_modules``, ``torch_modules``,
``hf_names``, ``torch_names``); the weights read are those the normalisation declares
(``module_weights``).  A name no operation declares is refused in one line naming the
kind, the name and the consumer -- never imported as LayerNorm or as another activation.
Every model here is built locally (no hub).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from model_dirs import gpt2_dir, llama_dir

from symformer.cli import main
from symformer.errors import NotSupportedError
from symformer.frameworks import hf_config
from symformer.registry import framework_names, normalisation


def refused(capsys, folder: Path, tmp_path: Path) -> str:
    """Import ``folder``: exit 2, one line, nothing written; the line."""
    out = tmp_path / "out.toml"
    status = main(["import", str(folder), "--tokens", "0,1,2", "--out", str(out)])
    err = capsys.readouterr().err
    assert status == 2, err
    assert err.count("\n") == 1 and "internal error" not in err, err
    assert not out.exists()
    return err


def test_the_tables_are_the_declarations():
    """Hand-listed: what the shipped operations declare, and each family resolving."""
    assert framework_names("normalisation", "hf") == {
        "LayerNorm": "biased", "LlamaRMSNorm": "rms", "MistralRMSNorm": "rms",
        "Qwen2RMSNorm": "rms"}
    assert framework_names("normalisation", "torch") == {"LayerNorm": "biased"}
    assert framework_names("activation", "torch") == {
        "ReLU": "relu", "relu": "relu", "GELU(approximate='none')": "gelu", "gelu": "gelu",
        "GELU(approximate='tanh')": "gelu_tanh", "SiLU": "silu", "silu": "silu"}
    assert {f: hf_config.hf_norm(f) for f in ("gpt2", "llama", "bert")} == {
        "gpt2": ("biased", {"gamma": "weight", "beta": "bias"}),
        "llama": ("rms", {"gamma": "weight"}),
        "bert": ("biased", {"gamma": "weight", "beta": "bias"})}
    assert normalisation("rms").module_weights == {"gamma": "weight"}


def test_an_unknown_activation_in_a_config_is_one_line(tmp_path, capsys):
    err = refused(capsys, llama_dir(tmp_path / "m", hidden_act="quick_gelu"), tmp_path)
    assert "hidden_act: the activation \"quick_gelu\" is not supported" in err, err
    assert "hf_names" in err and "silu" in err


def test_a_normalisation_no_operation_declares_is_one_line(tmp_path, capsys, monkeypatch):
    """A family whose blocks use a module no normalisation declares (Gemma's RMSNorm
    scales by 1 + gamma): refused naming the module and the family, not read as RMSNorm."""
    monkeypatch.setitem(hf_config.FAMILY_NORMS, "llama", "GemmaRMSNorm")
    err = refused(capsys, llama_dir(tmp_path / "m"), tmp_path)
    assert "the Hugging Face import (model_type 'llama'): the normalisation GemmaRMSNorm " \
           "is not supported (no operation declares it in hf_modules" in err, err


def test_the_shipped_families_still_read_their_declared_weights(tmp_path):
    """GPT-2 reads gamma and beta of each LayerNorm, Llama only gamma of each RMSNorm,
    under the tensor names the family gives them."""
    from symformer.frameworks.hf_in import pretrained_data

    gpt2 = pretrained_data(gpt2_dir(tmp_path / "g"), [0, 1, 2])[0]
    llama = pretrained_data(llama_dir(tmp_path / "l"), [0, 1, 2])[0]
    assert (gpt2["layer_norm"], llama["layer_norm"]) == ("biased", "rms")
    assert {k for k in gpt2["layer"][0] if k[:4] in ("gamm", "beta")} == {
        "gamma_1", "beta_1", "gamma_2", "beta_2"}
    assert {k for k in llama["layer"][0] if k[:4] in ("gamm", "beta")} == {
        "gamma_1", "gamma_2"}
    assert "beta_f" in gpt2 and "beta_f" not in llama


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch", reason="from_torch needs PyTorch")


def test_a_torch_norm_no_operation_declares_is_refused(torch):
    from symformer import from_torch

    layer = torch.nn.TransformerEncoderLayer(4, 2, 6, dropout=0.0).eval()
    layer.norm1 = torch.nn.RMSNorm(4, eps=1e-5)
    with pytest.raises(NotSupportedError) as raised:
        from_torch(layer, torch.zeros(2, 4))
    message = str(raised.value)
    assert message.startswith("the PyTorch import (TransformerEncoderLayer.norm1): the "
                              "normalisation RMSNorm is not supported"), message
    assert "\n" not in message


def test_a_torch_activation_no_operation_declares_is_refused(torch):
    from symformer import from_torch

    layer = torch.nn.TransformerEncoderLayer(4, 2, 6, dropout=0.0,
                                             activation=torch.nn.Tanh()).eval()
    with pytest.raises(NotSupportedError, match=r"^the PyTorch import "
                       r"\(TransformerEncoderLayer\): the activation Tanh is not "
                       r"supported \(no operation declares it in torch_names"):
        from_torch(layer, torch.zeros(2, 4))


def test_bert_positions_are_mapped_by_their_declaration(tmp_path, capsys):
    """``position_embedding_type`` is read through what the positional encodings declare
    (``hf_positions``: ``absolute`` is the learned table); another value is refused in one
    line naming it."""
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")

    assert framework_names("positional encoding", "hf") == {"absolute": "learned"}
    torch.manual_seed(0)
    for kind, folder in (("absolute", tmp_path / "a"), ("relative_key", tmp_path / "r")):
        config = transformers.BertConfig(vocab_size=12, hidden_size=4, num_hidden_layers=1,
                                         num_attention_heads=2, intermediate_size=6,
                                         max_position_embeddings=8,
                                         position_embedding_type=kind)
        transformers.BertForMaskedLM(config).save_pretrained(folder)
    capsys.readouterr()  # transformers' own progress lines
    from symformer.frameworks.hf_in import pretrained_data

    assert pretrained_data(tmp_path / "a", [0, 1, 2])[0]["positional_encoding"] == "learned"
    err = refused(capsys, tmp_path / "r", tmp_path)
    assert "position_embedding_type: the positional encoding 'relative_key' is not " \
           "supported (no operation declares it in hf_positions; supported: absolute)" \
           in err, err
