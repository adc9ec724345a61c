"""An example's repr and notebook display: short, from its shapes, never its weights."""

from __future__ import annotations

import tomllib
from importlib.resources import files

import numpy as np
from model_dirs import gpt2_dir, gpt2_tensors

import symformer
from symformer.example.summary import weight_counts
from symformer.frameworks.hf_in import from_pretrained


def _numbers_in(value) -> int:
    """Every number under ``value`` of a TOML table, counted independently."""
    if isinstance(value, dict):
        return sum(_numbers_in(v) for v in value.values())
    if isinstance(value, list):
        return sum(_numbers_in(v) for v in value)
    return int(isinstance(value, (int, float)) and not isinstance(value, bool))


def test_the_weight_count_is_every_number_of_the_file() -> None:
    text = (files("symformer") / "examples" / "gpt2_style.toml").read_text()
    data = tomllib.loads(text)
    weights = {k: v for k, v in data.items() if k not in ("tokens", "vocab", "loss", "title")}
    counts = weight_counts(symformer.load_example("gpt2_style"))
    # the file's numbers, and the layers' default gamma = 1, beta = 0 it leaves out
    defaults = len(data["layer"]) * 4 * len(data["embeddings"][0])
    assert sum(counts.values()) == _numbers_in(weights) + defaults


def test_repr_is_one_short_line_even_for_a_wide_model(tmp_path) -> None:
    tensors = gpt2_tensors(d=64, vocab=200)
    tensors["transformer.wpe.weight"] = np.zeros((4, 64), np.float32)
    config = {"model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 1,
              "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05}
    e = from_pretrained(gpt2_dir(tmp_path / "m", tensors=tensors, config=config, vocab={}),
                        [0, 1, 2], max_work=0)
    text = repr(e)
    assert "\n" not in text and len(text) < 300, text
    assert "3 tokens ['t0', 't1', 't2']" in text and "d_model 64" in text
    assert "1 layer, 4 heads" in text and f"{200 * 64 + 4 * 64 + 2 * 64:,}" not in text
    total = sum(weight_counts(e).values())
    assert f"{total:,} exact numbers" in text
    assert total == sum(t.size for t in tensors.values())  # every tensor of the file


def test_the_notebook_display_escapes_what_it_shows() -> None:
    from dataclasses import replace

    e = replace(symformer.load_example(), title="<script>alert(1)</script>")
    page = e._repr_html_()
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "4 tokens" in page and "post-norm LayerNorm" in page
