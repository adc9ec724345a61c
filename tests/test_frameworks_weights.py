"""Exact dyadic weights: every finite float reads back as exactly itself (no torch)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from symformer.errors import InputError
from symformer.example.literals import exact_rational
from symformer.example.loader import parse_example
from symformer.frameworks.weights import MAX_DECIMAL_CHARS, example_text, number_text


def _read_back(value: float) -> Fraction:
    q = exact_rational(number_text(value, "w"), "w")
    return Fraction(int(q.p), int(q.q))


@given(st.floats(allow_nan=False, allow_infinity=False, width=32))
def test_float32_reads_back_bit_for_bit(x: float) -> None:
    assert _read_back(x) == Fraction(x)  # Fraction(float) is the float's exact value
    assert np.float32(float(_read_back(x))) == np.float32(x)


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e50, max_value=1e50))
def test_float64_reads_back_bit_for_bit(x: float) -> None:
    if x != 0 and abs(x) < 1e-50:
        return
    assert _read_back(x) == Fraction(x)


@given(st.integers(0, 2**16 - 1))
def test_bfloat16_reads_back_bit_for_bit(bits: int) -> None:
    x = float(np.array([bits << 16], dtype=np.uint32).view(np.float32)[0])
    if not math.isfinite(x) or (x != 0 and not 1e-100 <= abs(x) <= 1e100):
        return
    assert _read_back(x) == Fraction(x)


def test_written_forms() -> None:
    assert number_text(0.5, "w") == "0.5"
    assert number_text(-3.0, "w") == -3
    assert number_text(0.1, "w") == "3602879701896397/2^55"  # not "0.1": that is 1/10
    assert number_text(float(np.float32(0.1)), "w") == "13421773/2^27"
    assert number_text(2.0**-20, "w") == "0.00000095367431640625"
    assert number_text(2.0**-40, "w") == "1/2^40"  # its decimal has 40 digits
    assert len(number_text(2.0**-21, "w")) <= MAX_DECIMAL_CHARS


def test_out_of_range_and_not_finite_are_one_line_errors() -> None:
    with pytest.raises(InputError, match="not finite"):
        number_text(math.inf, "layer 1 W_Q[0][1]")
    with pytest.raises(InputError, match=r"out of the range"):
        number_text(1e-200, "w")


def test_example_text_is_loaded_exactly_and_comments_are_safe() -> None:
    data = {"title": "t\nx", "tokens": ["a"], "vocab": ["a"],
            "embeddings": [[number_text(0.1, "e"), number_text(0.25, "e")]],
            "positional_encoding": "none", "norm": "none", "residual": False,
            "layer": [{"head": [{"W_Q": [[1, 0], [0, 1]], "W_K": [[1, 0], [0, 1]],
                                 "W_V": [[1, 0], [0, 1]]}]}]}
    text = example_text(data, ["from a\nsneaky = 1 path"])
    assert "\nsneaky" not in text
    e = parse_example(text)
    assert Fraction(int(e.embeddings[0, 0].p), int(e.embeddings[0, 0].q)) == Fraction(0.1)
    assert e.embeddings[0, 1] * 4 == 1


def _gpt2_dir(folder, dtype: str = "F32") -> None:
    """A tiny GPT-2 directory written with NumPy only (no torch, no transformers)."""
    import json
    import struct

    rng = np.random.default_rng(0)
    d, v, n = 4, 6, 4
    shapes = {"wte.weight": (v, d), "wpe.weight": (n, d), "ln_f.weight": (d,),
              "ln_f.bias": (d,), "h.0.ln_1.weight": (d,), "h.0.ln_1.bias": (d,),
              "h.0.ln_2.weight": (d,), "h.0.ln_2.bias": (d,),
              "h.0.attn.c_attn.weight": (d, 3 * d), "h.0.attn.c_attn.bias": (3 * d,),
              "h.0.attn.c_proj.weight": (d, d), "h.0.attn.c_proj.bias": (d,),
              "h.0.mlp.c_fc.weight": (d, 4 * d), "h.0.mlp.c_fc.bias": (4 * d,),
              "h.0.mlp.c_proj.weight": (4 * d, d), "h.0.mlp.c_proj.bias": (d,)}
    tensors = {k: rng.normal(size=s).astype(np.float32) for k, s in shapes.items()}
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_embd": d,
        "n_head": 2, "n_layer": 1, "vocab_size": v, "n_positions": n,
        "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05}))
    (folder / "vocab.json").write_text(json.dumps({w: i for i, w in enumerate(
        ["the", "cat", "sat", "on", "mat", "."])}))
    if dtype == "F32":
        from safetensors.numpy import save_file
        save_file(tensors, str(folder / "model.safetensors"))
        return tensors
    header, blobs, offset = {}, [], 0  # bfloat16: the upper halves of float32 words
    for k, t in tensors.items():
        blob = (t.view(np.uint32) >> 16).astype("<u2").tobytes()
        header[k] = {"dtype": "BF16", "shape": list(t.shape),
                     "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
        tensors[k] = ((t.view(np.uint32) >> 16) << 16).view(np.float32)
    text = json.dumps(header).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(text)) + text
                                               + b"".join(blobs))
    return tensors


@pytest.mark.parametrize("dtype", ["F32", "BF16"])
def test_safetensors_directory_imports_without_torch(tmp_path, dtype) -> None:
    from symformer.frameworks import from_pretrained

    tensors = _gpt2_dir(tmp_path / "m", dtype)
    e = from_pretrained(tmp_path / "m", ["the", 1, "sat"])
    assert e.tokens == ("the", "cat", "sat") and e.lm_head.tied
    W = tensors["h.0.attn.c_attn.weight"]
    got = e.layers[0].heads[1].W_K  # columns d + 2 .. d + 4 of c_attn
    for i in range(4):
        for j in range(2):
            assert Fraction(int(got[i, j].p), int(got[i, j].q)) == Fraction(float(W[i, 4 + 2 + j]))
    assert e.layers[0].eps == Fraction(1, 100000)  # the configuration's decimal, exactly
    assert f"{dtype} weights" in e.title
    from symformer.frameworks.hf_in import pretrained_text

    text, source, unused = pretrained_text(tmp_path / "m", ["the", 1, "sat"])
    assert unused == ""
    again = parse_example(text, source)  # the file `symformer import` writes: the same
    assert again.embeddings == e.embeddings and again.layers == e.layers
    assert again.positional_embeddings == e.positional_embeddings
    assert again.final_norm == e.final_norm and again.title == e.title


def test_cli_import_refuses_in_one_line(tmp_path, capsys) -> None:
    from symformer.cli import main

    _gpt2_dir(tmp_path / "m")
    assert main(["import", str(tmp_path / "m"), "--tokens", "dog", "--out",
                 str(tmp_path / "x.toml")]) == 2
    err = capsys.readouterr().err
    assert "'dog'" in err and err.count("\n") == 1
    assert not (tmp_path / "x.toml").exists()
    assert main(["import", str(tmp_path / "m"), "--tokens", "0,1", "--out",
                 str(tmp_path / "x.toml")]) == 0


def test_torch_commands_say_what_to_install_without_torch(monkeypatch, capsys) -> None:
    import sys

    from symformer.cli import main

    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` fails
    assert main(["crosscheck", "gpt2_style", "--torch"]) == 2
    err = capsys.readouterr().err
    assert "pip install" in err and err.count("\n") == 1
