"""``export --format torch`` of an example whose weights are a safetensors file's: the
module reads that file (its SHA-256 checked when the model is built) instead of holding
every weight as a Python literal, so it scales as the import does; its forward equals
the framework's (transformers' GPT-2 in float64) on a small GPT-2 built here."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest
from model_dirs import gpt2_config, gpt2_dir, gpt2_tensors

from symformer.cli import main


def _module(path: Path):
    """The written model.py, imported (test code running the file it wrote)."""
    spec = importlib.util.spec_from_file_location(f"model_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A 2-layer GPT-2 8 wide, imported by reference and exported (read only)."""
    pytest.importorskip("torch")
    pytest.importorskip("safetensors")
    tmp_path = tmp_path_factory.mktemp("reference")
    folder = gpt2_dir(tmp_path / "m", tensors=gpt2_tensors(seed=3, d=8, vocab=6, layers=2),
                      config=gpt2_config(n_embd=8, n_layer=2))
    example = tmp_path / "g.toml"
    assert main(["import", str(folder), "--tokens", "0,1,2,3", "--weights", "reference",
                 "--out", str(example)]) == 0
    assert main(["export", str(example), "--format", "torch", "--out",
                 str(tmp_path / "pt"), "--quiet"]) == 0
    return folder, example, tmp_path / "pt" / "model.py"


def test_the_module_reads_the_file_and_equals_transformers(exported):
    import torch
    transformers = pytest.importorskip("transformers")

    folder, _, path = exported
    text = path.read_text()
    assert "WEIGHTS_FILE = {'file': " in text and "'sha256': " in text
    assert "'tensor': 'transformer.h.1.mlp.c_fc.weight'" in text
    assert not any(len(line) > 200 for line in text.splitlines())  # no weight literals
    stages = _module(path).Model()()
    hf = transformers.GPT2LMHeadModel.from_pretrained(folder).double().eval()
    with torch.no_grad():
        expected = hf(torch.tensor([[0, 1, 2, 3]])).logits[0]
    assert stages["logits"].dtype == torch.float64
    assert torch.allclose(stages["logits"], expected, rtol=0, atol=1e-12), \
        (stages["logits"] - expected).abs().max()


def test_the_same_example_inline_gives_the_same_module_forward(exported, tmp_path, capsys):
    """--weights inline: the weights as literals, the forward bit for bit the same."""
    import torch

    folder, _, path = exported
    inline = tmp_path / "inline.toml"
    assert main(["import", str(folder), "--tokens", "0,1,2,3", "--weights", "inline",
                 "--out", str(inline)]) == 0
    assert main(["export", str(inline), "--format", "torch", "--out",
                 str(tmp_path / "inline"), "--quiet"]) == 0
    capsys.readouterr()
    written = (tmp_path / "inline" / "model.py").read_text()
    assert "WEIGHTS_FILE = None" in written
    a = _module(path).Model()()
    b = _module(tmp_path / "inline" / "model.py").Model()()
    assert set(a) == set(b) and all(torch.equal(a[k], b[k]) for k in a)


def test_a_copy_elsewhere_is_read_and_a_changed_one_refused(exported, tmp_path):
    import torch

    folder, _, path = exported
    copy = tmp_path / "elsewhere.safetensors"
    shutil.copyfile(folder / "model.safetensors", copy)
    module = _module(path)
    assert torch.equal(module.Model(weights_file=str(copy))()["logits"],
                       module.Model()()["logits"])
    data = bytearray(copy.read_bytes())
    data[-1] ^= 1  # one bit of the last weight
    copy.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="SHA-256"):
        module.Model(weights_file=str(copy))


def test_crosscheck_torch_reads_the_arrays_in_process(exported, capsys):
    _, example, _ = exported
    assert main(["crosscheck", str(example), "--torch"]) == 0
    assert "logits" in capsys.readouterr().out
