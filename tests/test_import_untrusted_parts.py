"""A model directory's head and tokenizer, from someone else (issue 36, attack 5 W1, H1,
T1, M10): an untied model without its head is refused (transformers would draw that
head at random, so no logits of it are the model's), and a ``tokenizer.json`` cannot
make a sentence unboundedly long or print the library's panic."""

from __future__ import annotations

import json

import numpy as np
import pytest
from model_dirs import VOCAB, gpt2_config, gpt2_dir, llama_dir, safetensors_bytes

from symformer.cli import main
from symformer.errors import InputError
from symformer.frameworks import from_pretrained
from symformer.frameworks.hf_bert import FAMILY, _mlm_head
from symformer.frameworks.hf_config import Config

WORDS = ["the", "cat", "sat", "on", "mat", "."]


def _refused(capsys, folder, *extra: str) -> str:
    status = main(["import", str(folder), "--tokens", "0,1,2", "--out",
                   str(folder.parent / "x.toml"), "--quiet", *extra])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1, err
    return err


def test_an_untied_gpt2_without_its_head_is_refused(tmp_path, capsys) -> None:
    folder = gpt2_dir(tmp_path / "m", config=gpt2_config(tie_word_embeddings=False))
    err = _refused(capsys, folder)
    assert "'lm_head.weight'" in err and "tie_word_embeddings = false" in err
    assert str(folder / "model.safetensors") in err  # the file named with its folder
    # tied (as stated, or by GPT-2's default) the embedding table is the head
    for config in (gpt2_config(), {k: v for k, v in gpt2_config().items()
                                   if k != "tie_word_embeddings"}):
        gpt2_dir(folder, config=config)
        assert from_pretrained(folder, [0, 1]).lm_head.tied


def test_an_untied_llama_without_its_head_is_refused(tmp_path, capsys) -> None:
    folder = llama_dir(tmp_path / "ll")
    example = from_pretrained(folder, [0, 1])
    assert not example.lm_head.tied  # its own head, read
    tensors = {k: v for k, v in _tensors(folder).items() if k != "lm_head.weight"}
    (folder / "model.safetensors").write_bytes(safetensors_bytes(tensors))
    err = _refused(capsys, folder)  # tie_word_embeddings = false, as llama_dir states
    assert "'lm_head.weight'" in err and "sets tie_word_embeddings = false" in err
    config = json.loads((folder / "config.json").read_text())
    del config["tie_word_embeddings"]  # Llama's default: untied
    (folder / "config.json").write_text(json.dumps(config))
    err = _refused(capsys, folder)
    assert "default for this model type" in err
    config["tie_word_embeddings"] = True
    (folder / "config.json").write_text(json.dumps(config))
    assert from_pretrained(folder, [0, 1]).lm_head.tied


def _tensors(folder) -> dict[str, np.ndarray]:
    from symformer.example.model_dir import ModelDir

    with ModelDir(folder).safetensors() as weights:
        return {k: np.asarray(weights[k]) for k in weights}


@pytest.mark.parametrize("kind", ["bert", "roberta", "distilbert"])
def test_a_masked_lm_head_untied_without_its_decoder_is_refused(kind) -> None:
    names, d = FAMILY[kind], 4
    rng = np.random.default_rng(0)
    embeddings = rng.normal(size=(VOCAB, d)).astype(np.float32)
    weights = {f"{names.head_dense}.weight": rng.normal(size=(d, d)).astype(np.float32),
               f"{names.head_dense}.bias": np.zeros(d, np.float32),
               f"{names.head_norm}.weight": np.ones(d, np.float32),
               f"{names.head_norm}.bias": np.zeros(d, np.float32)}
    with pytest.raises(InputError, match=f"'{names.head_decoder}.weight'"):
        _mlm_head(weights, names, embeddings,
                  Config({"tie_word_embeddings": False}, "config.json"))
    for config in ({}, {"tie_word_embeddings": True}):  # the family's default ties
        head = _mlm_head(weights, names, embeddings, Config(config, "config.json"))
        assert head["tied"] is True
    decoder = rng.normal(size=(VOCAB, d)).astype(np.float32)  # a head of its own: read
    weights[f"{names.head_decoder}.weight"] = decoder
    head = _mlm_head(weights, names, embeddings,
                     Config({"tie_word_embeddings": False}, "config.json"))
    assert np.array_equal(np.asarray(head["W_vocab"], dtype=np.float32), decoder.T)


# -- tokenizer.json ----------------------------------------------------------------
def _tokenizer_dir(folder, **changes) -> object:
    """A GPT-2 directory whose tokenizer.json is a word-level one with ``changes``."""
    pytest.importorskip("tokenizers")
    gpt2_dir(folder)
    spec = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
            "normalizer": None, "pre_tokenizer": {"type": "Whitespace"},
            "post_processor": None, "decoder": None,
            "model": {"type": "WordLevel", "vocab": {w: i for i, w in enumerate(WORDS)},
                      "unk_token": "the"}}
    spec.update(changes)
    (folder / "tokenizer.json").write_text(json.dumps(spec))
    return folder


def test_the_files_padding_and_truncation_are_not_applied(tmp_path) -> None:
    """As transformers' tokenizer(text): padding of 10^8 tokens (attack 5 H1) and a
    truncation to one token are the file's defaults for batches, not the sentence's."""
    folder = _tokenizer_dir(
        tmp_path / "m",
        padding={"strategy": {"Fixed": 100_000_000}, "direction": "Right",
                 "pad_to_multiple_of": None, "pad_id": 0, "pad_type_id": 0,
                 "pad_token": "the"},
        truncation={"direction": "Right", "max_length": 1, "strategy": "LongestFirst",
                    "stride": 0})
    assert from_pretrained(folder, text="cat sat").tokens == ("cat", "sat")


def _template(pieces: int, ids: int) -> dict:
    return {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "X", "type_id": 0}}] * pieces
            + [{"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}],
            "special_tokens": {"X": {"id": "X", "ids": [0] * ids, "tokens": ["the"] * ids}}}


@pytest.mark.parametrize("pieces, ids", [(1, 2_000), (1_001, 1)])
def test_a_template_adding_too_many_special_tokens_is_refused(tmp_path, capsys, pieces,
                                                              ids) -> None:
    folder = _tokenizer_dir(tmp_path / "m", post_processor=_template(pieces, ids))
    with pytest.raises(InputError, match=f"adds {pieces * ids:,} special tokens"):
        from_pretrained(folder, text="cat")
    folder = _tokenizer_dir(tmp_path / "ok", post_processor=_template(2, 1))
    assert from_pretrained(folder, text="cat").tokens == ("the", "the", "cat")


def test_a_normalizer_that_lengthens_the_text_without_bound_is_refused(tmp_path) -> None:
    grow = {"type": "Replace", "pattern": {"String": "a"}, "content": "a" * 10}
    folder = _tokenizer_dir(tmp_path / "m", normalizer={"type": "Sequence",
                                                        "normalizers": [grow] * 5})
    with pytest.raises(InputError, match="normalizer can make a text of 3 characters "
                                         "300,000 long"):
        from_pretrained(folder, text="cat")
    # a regular expression that may match nothing puts its content between characters
    insert = {"type": "Replace", "pattern": {"Regex": "x*"}, "content": "ab"}
    folder = _tokenizer_dir(tmp_path / "rx", normalizer={"type": "Sequence",
                                                         "normalizers": [insert] * 11})
    with pytest.raises(InputError, match="normalizer can make a text of 3 characters"):
        from_pretrained(folder, text="cat")
    # one character for one (Llama's " " -> "▁"), runs of spaces made one (T5's), and a
    # short Prepend are fine, however many
    usual = [{"type": "Prepend", "prepend": "▁"},
             *[{"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}] * 20,
             {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]
    folder = _tokenizer_dir(tmp_path / "ok", normalizer={"type": "Sequence",
                                                         "normalizers": usual},
                            pre_tokenizer={"type": "Split", "pattern": {"String": "▁"},
                                           "behavior": "Removed", "invert": False})
    assert from_pretrained(folder, text="cat sat").tokens == ("cat", "sat")


def test_a_panicking_tokenizer_is_one_line_on_stderr(tmp_path, capfd, monkeypatch) -> None:
    """The library's Rust panic (message and backtrace) never reaches the terminal."""
    monkeypatch.setenv("RUST_BACKTRACE", "1")
    folder = _tokenizer_dir(tmp_path / "m", normalizer={
        "type": "Precompiled", "precompiled_charsmap": "AAAA"})
    status = main(["import", str(folder), "--text", "the cat", "--out",
                   str(tmp_path / "x.toml")])
    err = capfd.readouterr().err
    assert status == 2 and err.count("\n") == 1 and "cannot be used" in err, err
    assert "panicked" not in err and "backtrace" not in err


def test_a_weights_mistake_names_the_directory(tmp_path, capsys) -> None:
    """Attack 5 M10: a non-finite weight or a wrong shape names the directory too."""
    from model_dirs import gpt2_tensors

    tensors = gpt2_tensors()
    tensors["transformer.wte.weight"][0, 0] = np.nan
    err = _refused(capsys, gpt2_dir(tmp_path / "nan", tensors=tensors))
    assert f"{tmp_path / 'nan'}: wte[0][0]: the weight nan is not finite" in err
    tensors["transformer.wte.weight"] = np.ones((), np.float32)
    err = _refused(capsys, gpt2_dir(tmp_path / "scalar", tensors=tensors))
    assert f"{tmp_path / 'scalar' / 'model.safetensors'}: transformer.wte.weight has shape " \
           f"scalar" in err


def test_vocab_txt_lines_are_read_as_transformers_reads_them(tmp_path) -> None:
    """A token holding U+2028 or \\x1c (``str.splitlines`` would split there) keeps its
    line's id: the ids are those of Python's text-mode readlines, as transformers'
    load_vocab reads them, so the sentence's embedding rows are the model's."""
    from model_dirs import gpt2_tensors

    words = ["[CLS]", "a\u2028b", "x\x1cy", "cat", "[SEP]", "sat"]
    folder = gpt2_dir(tmp_path / "m", tensors=gpt2_tensors(vocab=len(words)))
    (folder / "vocab.json").unlink()
    (folder / "vocab.txt").write_text("\n".join(words) + "\n", encoding="utf-8")
    with open(folder / "vocab.txt", encoding="utf-8") as handle:  # the reference reading
        ids = {line.rstrip("\n"): i for i, line in enumerate(handle.readlines())}
    example = from_pretrained(folder, [ids["cat"], ids["sat"]])
    assert example.tokens == ("cat", "sat")
    pytest.importorskip("tokenizers")
    assert from_pretrained(folder, text="cat sat").tokens == ("[CLS]", "cat", "sat", "[SEP]")


def _with_biases(folder, config_changes: dict, biases: bool) -> None:
    """``folder``'s Llama with ``config_changes`` and, when ``biases``, a bias for every
    projection stored."""
    config = json.loads((folder / "config.json").read_text())
    config.update(config_changes)
    (folder / "config.json").write_text(json.dumps(config))
    tensors = {k: v for k, v in _tensors(folder).items() if not k.endswith(".bias")}
    if biases:
        for name, value in list(tensors.items()):
            if name.endswith("_proj.weight"):
                tensors[name[:-len("weight")] + "bias"] = np.ones(value.shape[0], np.float32)
    (folder / "model.safetensors").write_bytes(safetensors_bytes(tensors))


@pytest.mark.parametrize("changes, expected", [
    ({}, ()),  # Llama: attention_bias and mlp_bias false by default
    ({"attention_bias": True}, ("q", "k", "v", "o")),
    ({"mlp_bias": True}, ("gate", "up", "down")),
    ({"model_type": "mistral"}, ()),  # Mistral: never
    ({"model_type": "qwen2"}, ("q", "k", "v")),  # Qwen2: query, key and value always
])
def test_a_llama_familys_biases_are_those_transformers_builds(tmp_path, capsys, changes,
                                                              expected) -> None:
    """A bias the model has is read (and refused when the file lacks it); one it has
    not is never read, only reported, as transformers ignores it."""
    folder = llama_dir(tmp_path / "ll")
    _with_biases(folder, changes, biases=True)
    with pytest.warns(UserWarning, match="not imported"):  # every case leaves some
        example = from_pretrained(folder, [0, 1])
    layer, head = example.layers[0], example.layers[0].heads[0]
    got = {"q": head.b_Q is not None, "k": example.layers[0].kv_heads[0].b_K is not None,
           "o": layer.b_O is not None}
    assert got == {k: k in expected for k in got}
    if expected:
        _with_biases(folder, {}, biases=False)
        err = _refused(capsys, folder)
        assert f"no tensor 'layers.0.{'mlp' if 'up' in expected else 'self_attn'}." in err
