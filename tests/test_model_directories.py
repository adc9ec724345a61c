"""Model directories from strangers: ``symformer import`` reads nothing outside the
directory, ends every malformed directory in one line naming the file and key, reads
no weight wrongly, drops none silently, and is bounded before it reads.

Every directory is built here (tests/model_dirs.py), one change from a valid one; the
expected outcome is exit 0 with the exact model or exit 2 with one line, never an
internal error (SYMFORMER_DEBUG=1 makes one fail the test with its traceback)."""

from __future__ import annotations

import json
import os
import pickle
import struct
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from model_dirs import (
    WORDS,
    gpt2_config,
    gpt2_dir,
    gpt2_tensors,
    llama_dir,
    safetensors_bytes,
)

from symformer.cli import main
from symformer.errors import InputError
from symformer.example.loader import load_example
from symformer.frameworks.hf_in import from_pretrained

SECRET = "root:x:0:0:secret-canary-line"


def run_import(capsys, folder: Path, out: Path, *extra: str) -> tuple[int, str]:
    status = main(["import", str(folder), "--tokens", "0,1,2", "--out", str(out), *extra])
    return status, capsys.readouterr().err


def refused(capsys, folder: Path, tmp_path: Path, *names: str) -> str:
    """Import ``folder``: exit 2, one line naming each of ``names``, nothing written."""
    out = tmp_path / "out.toml"
    status, err = run_import(capsys, folder, out)
    assert status == 2, err
    assert err.count("\n") == 1 and "internal error" not in err, err
    for name in names:
        assert name in err, (name, err)
    assert not out.exists()
    return err


def weight(value) -> Fraction:
    return Fraction(int(value.p), int(value.q))


# -- links --------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["vocab.txt", "vocab.json", "config.json",
                                  "model.safetensors", "tokenizer.json"])
def test_a_link_out_of_the_directory_is_refused(tmp_path, capsys, name) -> None:
    folder = gpt2_dir(tmp_path / "m")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    secret = outside / name
    if (folder / name).exists():  # the real file, moved out: only the link leads to it
        (folder / name).rename(secret)
    else:
        secret.write_text(SECRET + "\n")
    if name == "vocab.txt":
        secret.write_text(SECRET + "\n" + "\n".join(WORDS[1:]) + "\n")
    if name == "tokenizer.json":
        (folder / "vocab.json").unlink()
        secret.write_text(json.dumps({"model": {"vocab": {SECRET: 0}}}))
    (folder / name).symlink_to(secret)
    refused(capsys, folder, tmp_path, name, "outside the model directory")


def test_a_link_inside_the_directory_is_followed(tmp_path, capsys) -> None:
    folder = gpt2_dir(tmp_path / "m")
    (folder / "sub").mkdir()
    (folder / "vocab.json").rename(folder / "sub" / "words.json")
    (folder / "vocab.json").symlink_to("sub/words.json")
    out = tmp_path / "out.toml"
    assert run_import(capsys, folder, out)[0] == 0
    assert load_example(str(out)).tokens == ("the", "cat", "sat")


def _cache(tmp_path: Path, model: str = "models--org--tiny") -> Path:
    """The Hugging Face cache's layout: snapshots/REV/FILE -> ../../blobs/SHA."""
    plain = gpt2_dir(tmp_path / "plain")
    root = tmp_path / "hub" / model
    (root / "blobs").mkdir(parents=True)
    snapshot = root / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    for k, file in enumerate(sorted(os.listdir(plain))):
        blob = f"{k:040x}"
        (root / "blobs" / blob).write_bytes((plain / file).read_bytes())
        (snapshot / file).symlink_to(f"../../blobs/{blob}")
    return snapshot


def test_the_hugging_face_cache_layout_is_read(tmp_path, capsys) -> None:
    snapshot = _cache(tmp_path)
    example = from_pretrained(snapshot, [0, 1, 2])
    plain = from_pretrained(tmp_path / "plain", [0, 1, 2])
    assert example.embeddings == plain.embeddings and example.layers == plain.layers
    (tmp_path / "link").symlink_to(snapshot)  # a user's own link to the snapshot
    assert run_import(capsys, tmp_path / "link", tmp_path / "x.toml")[0] == 0


def test_the_cache_layout_does_not_open_other_folders(tmp_path, capsys) -> None:
    snapshot = _cache(tmp_path)
    other = _cache(tmp_path / "o", "models--org--other")
    (snapshot / "vocab.json").unlink()  # into another model's blobs: outside
    target = other.parent.parent / "blobs" / os.readlink(other / "vocab.json").split("/")[-1]
    (snapshot / "vocab.json").symlink_to(target)
    refused(capsys, snapshot, tmp_path, "vocab.json", "outside")
    (snapshot / "vocab.json").unlink()  # a blob that is itself a link out
    blobs = snapshot.parent.parent / "blobs"
    (blobs / "evil").symlink_to(tmp_path / "plain" / "vocab.json")
    (snapshot / "vocab.json").symlink_to("../../blobs/evil")
    refused(capsys, snapshot, tmp_path, "vocab.json", "outside")


@pytest.mark.parametrize("kind", ["broken", "loop", "fifo", "directory"])
def test_a_file_that_cannot_be_read_is_one_line(tmp_path, capsys, kind) -> None:
    folder = gpt2_dir(tmp_path / "m")
    (folder / "vocab.json").unlink()
    if kind == "broken":
        (folder / "vocab.json").symlink_to(folder / "missing.json")
    elif kind == "loop":
        (folder / "vocab.json").symlink_to("vocab.json")
    elif kind == "fifo":
        os.mkfifo(folder / "vocab.json")  # opening it for reading would block
    else:
        (folder / "vocab.json").mkdir()
    refused(capsys, folder, tmp_path, "vocab.json")


def test_pickles_are_never_opened(tmp_path, capsys) -> None:
    canary = tmp_path / "unpickled"

    class Evil:
        def __reduce__(self):
            return (Path.touch, (canary,))

    folder = gpt2_dir(tmp_path / "m")
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(Evil()))
    assert run_import(capsys, folder, tmp_path / "x.toml")[0] == 0
    (folder / "model.safetensors").unlink()
    refused(capsys, folder, tmp_path, "model.safetensors", "pickles")
    assert not canary.exists()


# -- the safetensors header -----------------------------------------------------------
def _valid_header() -> dict:
    blob = safetensors_bytes(gpt2_tensors())
    (length,) = struct.unpack("<Q", blob[:8])
    return json.loads(blob[8:8 + length])


def _with_header(header, data: bytes | None = None) -> bytes:
    """A file whose header is ``header`` (a JSON value, or raw bytes) over the valid
    file's data."""
    blob = safetensors_bytes(gpt2_tensors())
    (length,) = struct.unpack("<Q", blob[:8])
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + (blob[8 + length:] if data is None else data)


def _entry(change):
    header = _valid_header()
    change(header["transformer.wte.weight"], header)
    return header


HEADERS = {
    "a list": [1, 2], "a number": 5, "null": None, "a string": "x",
    "an entry that is a number": {"a": 1},
    "an entry that is a list": {"a": [1]},
    "dtype null": _entry(lambda e, h: e.update(dtype=None)),
    "an unknown dtype": _entry(lambda e, h: e.update(dtype="Q7")),
    "a negative shape": _entry(lambda e, h: e.update(shape=[-6, -4])),
    "a float shape": _entry(lambda e, h: e.update(shape=[6.0, 4])),
    "a nested shape": _entry(lambda e, h: e.update(shape=[[6], 4])),
    "a wrong shape": _entry(lambda e, h: e.update(shape=[4, 4])),
    "no offsets": _entry(lambda e, h: e.pop("data_offsets")),
    "float offsets": _entry(lambda e, h: e.update(data_offsets=[0.0, 96.0])),
    "three offsets": _entry(lambda e, h: e.update(data_offsets=[0, 48, 96])),
    "reversed offsets": _entry(lambda e, h: e.update(data_offsets=[96, 0])),
    "offsets past the end": _entry(lambda e, h: e.update(data_offsets=[0, 10**12])),
    "boolean offsets": _entry(lambda e, h: e.update(data_offsets=[False, True])),
    "an extra key": _entry(lambda e, h: e.update(extra=1)),
    "overlapping tensors": _entry(lambda e, h: h["transformer.wpe.weight"].update(
        data_offsets=[0, 64])),
    "a tensor missing (a hole)": _entry(lambda e, h: h.pop("transformer.wpe.weight")),
    "metadata a number": _entry(lambda e, h: h.update(__metadata__=5)),
    "metadata of numbers": _entry(lambda e, h: h.update(__metadata__={"format": 5})),
    "an empty tensor name": _entry(lambda e, h: h.update({"": h.pop(
        "transformer.wpe.weight")})),
}


@pytest.mark.parametrize("case", sorted(HEADERS))
def test_a_malformed_header_is_one_line(tmp_path, capsys, case) -> None:
    folder = gpt2_dir(tmp_path / "m", weights=_with_header(HEADERS[case]))
    refused(capsys, folder, tmp_path, "model.safetensors")


RAW = {
    "shorter than 8 bytes": b"\x01\x02",
    "a header longer than the file": struct.pack("<Q", 2**63) + b"{}",
    "a zero-length header": struct.pack("<Q", 0),
    "a header that is not UTF-8": _with_header(b'{"\xff": 1}'),
    "a header that is not JSON": _with_header(b"{not json"),
    "a repeated key": _with_header(b'{"a": {}, "a": {}}'),
    "NaN in the header": _with_header(b'{"__metadata__": {"x": NaN}}'),
    "deep nesting": _with_header(b"[" * 100_000 + b"]" * 100_000),
    "trailing bytes": _with_header(_valid_header(), safetensors_bytes(gpt2_tensors())[8:]),
}


@pytest.mark.parametrize("case", sorted(RAW))
def test_a_malformed_file_is_one_line(tmp_path, capsys, case) -> None:
    folder = gpt2_dir(tmp_path / "m", weights=RAW[case])
    refused(capsys, folder, tmp_path, "model.safetensors")


def test_bfloat16_overlap_is_refused_and_valid_bfloat16_is_exact(tmp_path, capsys) -> None:
    tensors = gpt2_tensors()
    blob = safetensors_bytes(tensors, dtype="BF16")
    (length,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + length])
    header["transformer.wpe.weight"]["data_offsets"] = header["transformer.wte.weight"][
        "data_offsets"][:1] + [header["transformer.wte.weight"]["data_offsets"][0] + 32]
    folder = gpt2_dir(tmp_path / "bad", weights=_with_header(header, blob[8 + length:]))
    refused(capsys, folder, tmp_path, "model.safetensors", "transformer.")
    good = from_pretrained(gpt2_dir(tmp_path / "good", weights=blob), [0, 1])
    wte = tensors["transformer.wte.weight"]
    upper = ((wte.view(np.uint32) >> 16) << 16).view(np.float32)  # bfloat16, independently
    assert weight(good.embeddings[5, 3]) == Fraction(float(upper[5, 3]))


# -- config.json --------------------------------------------------------------------
CONFIGS = {
    "a list": ([1], "config.json"), "a string": ("gpt2", "config.json"),
    "null": (None, "config.json"),
    "n_head 0": (gpt2_config(n_head=0), "n_head"),
    "n_head a string": (gpt2_config(n_head="x"), "n_head"),
    "n_head true": (gpt2_config(n_head=True), "n_head"),
    "n_head not dividing": (gpt2_config(n_head=3), "n_head"),
    "n_layer -1": (gpt2_config(n_layer=-1), "n_layer"),
    "n_layer 0": (gpt2_config(n_layer=0), "n_layer"),
    "n_layer x": (gpt2_config(n_layer="x"), "n_layer"),
    "n_layer 1.5": (gpt2_config(n_layer=1.5), "n_layer"),
    "n_layer [1]": (gpt2_config(n_layer=[1]), "n_layer"),
    "n_layer huge": (gpt2_config(n_layer=10**30), "n_layer"),
    "n_layer beyond the file": (gpt2_config(n_layer=2), "h.1."),
    "n_embd missing": ({k: v for k, v in gpt2_config().items() if k != "n_embd"}, "n_embd"),
    "n_embd not the tensors'": (gpt2_config(n_embd=8, n_head=2), "wte"),
    "n_inner not the tensors'": (gpt2_config(n_inner=7), "c_fc"),
    "an activation list": (gpt2_config(activation_function=["gelu"]), "activation_function"),
    "an unknown activation": (gpt2_config(activation_function="tanh"), "activation_function"),
    "architectures 5": (gpt2_config(architectures=5), "architectures"),
    "architectures [1, 2]": (gpt2_config(architectures=[1, 2]), "architectures"),
    "model_type missing": ({k: v for k, v in gpt2_config().items() if k != "model_type"},
                           "model_type"),
    "model_type 5": (gpt2_config(model_type=5), "model_type"),
    "eps a string": (gpt2_config(layer_norm_epsilon="small"), "layer_norm_epsilon"),
    "eps true": (gpt2_config(layer_norm_epsilon=True), "layer_norm_epsilon"),
    "tie a string": (gpt2_config(tie_word_embeddings="yes"), "tie_word_embeddings"),
    "scale_attn_weights a number": (gpt2_config(scale_attn_weights=2), "scale_attn_weights"),
}


@pytest.mark.parametrize("case", sorted(CONFIGS))
def test_a_malformed_config_is_one_line_naming_the_key(tmp_path, capsys, case) -> None:
    config, key = CONFIGS[case]
    folder = gpt2_dir(tmp_path / "m", config=config)
    refused(capsys, folder, tmp_path, key)


@pytest.mark.parametrize("text, key", [
    (b'{"model_type": "gpt2", "n_head": 2, "n_head": 1}', "n_head"),
    (b'{"model_type": "gpt2", "n_embd": NaN}', "NaN"),
    (b'[' * 5000 + b']' * 5000, "config.json"),
    (b'\xff\xfe', "config.json"),
])
def test_config_json_that_is_not_plain_json_is_one_line(tmp_path, capsys, text, key) -> None:
    folder = gpt2_dir(tmp_path / "m")
    (folder / "config.json").write_bytes(text)
    refused(capsys, folder, tmp_path, key)


@pytest.mark.parametrize("changes, key", [
    ({"rope_parameters": [1]}, "rope_parameters"),
    ({"rope_scaling": "linear"}, "rope_scaling"),
    ({"rope_scaling": {"rope_type": 5}}, "rope_type"),
    ({"rope_theta": "big"}, "rope_theta"),
    ({"num_key_value_heads": 0}, "num_key_value_heads"),
    ({"head_dim": [2]}, "head_dim"),
    ({"sliding_window": "x"}, "sliding_window"),
    ({"sliding_window": 2, "layer_types": ["sliding_attention", "full_attention"]},
     "layer_types"),
    ({"intermediate_size": 5}, "gate_proj"),
])
def test_a_malformed_llama_config_is_one_line(tmp_path, capsys, changes, key) -> None:
    refused(capsys, llama_dir(tmp_path / "m", **changes), tmp_path, key)


def test_a_sliding_window_longer_than_the_sentence_is_exact(tmp_path) -> None:
    plain = from_pretrained(llama_dir(tmp_path / "a"), [0, 1, 2])
    windowed = from_pretrained(llama_dir(tmp_path / "b", sliding_window=4096), [0, 1, 2])
    assert windowed.layers == plain.layers


def test_a_bert_config_without_heads_is_one_line(tmp_path, capsys) -> None:
    config = {"model_type": "bert", "hidden_size": 4, "num_hidden_layers": 1,
              "intermediate_size": 8, "hidden_act": "gelu"}
    refused(capsys, gpt2_dir(tmp_path / "m", config=config), tmp_path,
            "num_attention_heads")


# -- weights: none misread, none dropped silently ------------------------------------
def test_tensors_the_example_does_not_use_are_reported(tmp_path, capsys) -> None:
    tensors = gpt2_tensors(layers=2)
    tensors["transformer.h.0.attn.bias"] = np.ones((1, 1, 4, 4), np.float32)  # a buffer
    tensors["score.weight"] = np.ones((2, 4), np.float32)
    folder = gpt2_dir(tmp_path / "m", tensors=tensors)  # config: one layer
    out = tmp_path / "x.toml"
    status, err = run_import(capsys, folder, out)
    assert status == 0
    for name in ("transformer.h.1 (12 tensors)", "score", "transformer.h.0.attn.bias",
                 "13 tensors", "1 buffer"):
        assert name in err, (name, err)
    assert "(12 tensors), score;" in out.read_text().split("\n\n")[0]  # and in the comments
    with pytest.warns(UserWarning, match="transformer.h.1"):
        from_pretrained(folder, [0, 1])


def test_every_weight_is_read_exactly_with_shapes_checked(tmp_path) -> None:
    tensors = gpt2_tensors(seed=3)
    e = from_pretrained(gpt2_dir(tmp_path / "m", tensors=tensors), [0, 1])
    c_attn = tensors["transformer.h.0.attn.c_attn.weight"]
    assert weight(e.layers[0].heads[1].W_V[3, 1]) == Fraction(float(c_attn[3, 2 * 4 + 2 + 1]))
    wrong = dict(tensors)
    wrong["transformer.ln_f.bias"] = np.ones(5, np.float32)
    with pytest.raises(InputError, match="ln_f.bias has shape 5, expected 4"):
        from_pretrained(gpt2_dir(tmp_path / "w", tensors=wrong), [0, 1])


def test_an_integer_weight_the_example_needs_is_refused(tmp_path, capsys) -> None:
    tensors = gpt2_tensors()
    tensors["transformer.ln_f.bias"] = np.arange(4)  # int64
    refused(capsys, gpt2_dir(tmp_path / "m", tensors=tensors), tmp_path, "ln_f.bias", "I64")


@pytest.mark.parametrize("vocab, key", [
    ({"the": 0, "cat": True}, "cat"), ({"the": -1}, "the"), ({"the": "0"}, "the"),
    (["the", "cat"], "vocab.json"),
])
def test_a_vocabulary_that_misstates_ids_is_refused(tmp_path, capsys, vocab, key) -> None:
    refused(capsys, gpt2_dir(tmp_path / "m", vocab=vocab), tmp_path, "vocab.json", key)


def test_a_vocab_txt_that_is_not_text_is_refused(tmp_path, capsys) -> None:
    folder = gpt2_dir(tmp_path / "m")
    (folder / "vocab.txt").write_bytes(b"the\n\xff\xfe\n")
    refused(capsys, folder, tmp_path, "vocab.txt", "UTF-8")


# -- bounded before reading ------------------------------------------------------------
def test_the_import_is_refused_over_the_work_limit_before_reading(tmp_path, capsys,
                                                                   monkeypatch) -> None:
    from symformer.example import model_dir

    def never(self, key):
        raise AssertionError("a tensor was read")

    folder = gpt2_dir(tmp_path / "m")
    monkeypatch.setattr(model_dir.SafeTensors, "__getitem__", never)
    status, err = run_import(capsys, folder, tmp_path / "x.toml", "--max-work", "250001")
    assert status == 2 and "--max-work" in err and "weights" in err and err.count("\n") == 1
    with pytest.raises(InputError, match="operations"):
        from_pretrained(folder, [0], max_work=250001)


def test_a_model_too_large_for_an_example_file_is_refused_before_reading(
        tmp_path, capsys) -> None:
    tensors = gpt2_tensors()
    tensors["transformer.wte.weight"] = np.zeros((700_000, 4), np.float32)  # 2.8 M weights
    folder = gpt2_dir(tmp_path / "m", tensors=tensors)
    status, err = run_import(capsys, folder, tmp_path / "x.toml", "--max-work", "0",
                             "--weights", "inline")
    assert status == 2 and "8 MiB" in err and "--weights reference" in err \
        and err.count("\n") == 1
    # by default (auto) a model this large is written as references to its file
    status, err = run_import(capsys, folder, tmp_path / "x.toml", "--max-work", "0")
    text = (tmp_path / "x.toml").read_text()
    assert status == 0 and "\n[weights]\n" in text \
        and 'embeddings = {tensor = "transformer.wte.weight"}' in text


def test_an_example_over_the_file_limit_is_never_written(tmp_path, capsys,
                                                         monkeypatch) -> None:
    import symformer.example.loader as loader

    monkeypatch.setattr(loader, "MAX_FILE_BYTES", 4000)  # the built file is larger
    refused(capsys, gpt2_dir(tmp_path / "m"), tmp_path, "an example file may hold")


# -- any mutation: exit 0 or one line -------------------------------------------------
_JSON = st.recursive(st.none() | st.booleans() | st.integers(-3, 10**6) | st.floats()
                     | st.text(max_size=4), lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=6)


@settings(max_examples=40)
@given(key=st.sampled_from(sorted(_valid_header()["transformer.wte.weight"]) + ["entry"]),
       name=st.sampled_from(sorted(_valid_header())), value=_JSON)
def test_any_header_mutation_ends_in_a_model_or_one_line(tmp_path_factory, key, name,
                                                         value) -> None:
    import contextlib
    import io

    header = _valid_header()
    if key == "entry":
        header[name] = value
    else:
        header[name][key] = value
    folder = gpt2_dir(tmp_path_factory.mktemp("m"), weights=_with_header(header))
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = main(["import", str(folder), "--tokens", "0", "--out",
                       str(folder / "x.toml")])
    assert status == 0 or (status == 2 and err.getvalue().count("\n") == 1), err.getvalue()


@settings(max_examples=40)
@given(key=st.sampled_from(sorted(gpt2_config())), value=_JSON)
def test_any_config_mutation_ends_in_a_model_or_one_line(tmp_path_factory, key,
                                                         value) -> None:
    import contextlib
    import io

    folder = gpt2_dir(tmp_path_factory.mktemp("m"), config=gpt2_config(**{key: value}))
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = main(["import", str(folder), "--tokens", "0", "--out",
                       str(folder / "x.toml")])
    assert status == 0 or (status == 2 and err.getvalue().count("\n") == 1), err.getvalue()


def test_an_empty_embedding_table_is_one_line(tmp_path, capsys) -> None:
    tensors = gpt2_tensors()
    tensors["transformer.wte.weight"] = np.zeros((0, 4), np.float32)
    refused(capsys, gpt2_dir(tmp_path / "m", tensors=tensors), tmp_path, "no rows")


def test_a_masked_lm_head_has_no_next_token(tmp_path, capsys) -> None:
    import symformer

    text = (Path(symformer.__file__).parent / "examples" / "gpt2_style.toml").read_text()
    path = tmp_path / "masked.toml"
    path.write_text(text.replace("\n[lm_head]\n", "\n[lm_head]\nmasked = true\n", 1))
    g = symformer.derive(load_example(str(path)))
    assert "probabilities" in g and "next_token" not in g
    assert "next_token" in symformer.derive(load_example("gpt2_style"))
    assert main(["generate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "masked-LM" in err and err.count("\n") == 1


def test_the_first_layers_of_a_deep_model(tmp_path, capsys, monkeypatch) -> None:
    from symformer.example import model_dir

    folder = gpt2_dir(tmp_path / "m", tensors=gpt2_tensors(layers=3),
                      config=gpt2_config(n_layer=3))
    read: list[str] = []
    original = model_dir.SafeTensors.__getitem__
    monkeypatch.setattr(model_dir.SafeTensors, "__getitem__",
                        lambda self, key: read.append(key) or original(self, key))
    out = tmp_path / "x.toml"
    status, err = run_import(capsys, folder, out, "--layers", "0:2")
    assert status == 0 and "transformer.h.2 (12 tensors)" in err
    assert not any(".h.2." in k for k in read)  # the third block is never read
    example = load_example(str(out))
    assert len(example.layers) == 2 and "first 2 of 3 layers" in example.title
    full = from_pretrained(folder, [0, 1, 2])
    assert example.layers == full.layers[:2] and example.final_norm == full.final_norm
    assert "layer 2's output, not the model's" in out.read_text()
    status, err = run_import(capsys, folder, tmp_path / "y.toml", "--layers", "0:4")
    assert status == 2 and "has 3 layers" in err and err.count("\n") == 1
    for bad in ("1:3", "0:0", "x"):
        with pytest.raises(SystemExit) as exit_:
            run_import(capsys, folder, tmp_path / "y.toml", "--layers", bad)
        assert exit_.value.code == 2 and "--layers" in capsys.readouterr().err


def test_a_large_real_tokenizer_file_is_read(tmp_path, capsys) -> None:
    """Llama 3's tokenizer.json is 9 MB: vocabulary files may be larger than a
    configuration (64 MiB), and are still bounded."""
    folder = gpt2_dir(tmp_path / "m")
    words = {w: i for i, w in enumerate(WORDS)}
    (folder / "vocab.json").write_text(json.dumps(words) + " " * (9 * 2**20))
    assert run_import(capsys, folder, tmp_path / "x.toml")[0] == 0
    assert load_example(str(tmp_path / "x.toml")).tokens == ("the", "cat", "sat")
    (folder / "config.json").write_text(json.dumps(gpt2_config()) + " " * (9 * 2**20))
    refused(capsys, folder, tmp_path, "config.json", "8 MiB")
