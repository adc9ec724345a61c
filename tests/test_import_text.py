"""Text in: ``symformer import DIR --text`` tokenizes with the directory's own tokenizer
(tokenizer.json, vocab.txt, vocab.json + merges.txt) and labels rows with its pieces."""

from __future__ import annotations

import json

import pytest
from model_dirs import gpt2_dir, gpt2_tensors

from symformer.cli import main
from symformer.errors import InputError
from symformer.example.loader import load_example
from symformer.frameworks import from_pretrained

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "##s", "."]


def _word_level(folder) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    tok = tokenizers.Tokenizer(WordLevel({w: i for i, w in enumerate(WORDS)},
                                         unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    (folder / "vocab.json").unlink()
    (folder / "tokenizer.json").write_text(tok.to_str())


def test_text_is_tokenized_by_tokenizer_json(tmp_path, capsys) -> None:
    folder = gpt2_dir(tmp_path / "m", tensors=gpt2_tensors(vocab=len(WORDS)))
    _word_level(folder)
    out = tmp_path / "x.toml"
    assert main(["import", str(folder), "--text", "the cat sat .", "--out", str(out)]) == 0
    example = load_example(str(out))
    assert example.tokens == ("the", "cat", "sat", ".")
    assert "The sentence is the text 'the cat sat .'" in out.read_text()
    assert from_pretrained(folder, text="cat sat").tokens == ("cat", "sat")


def test_text_through_vocab_txt_adds_the_special_tokens(tmp_path) -> None:
    pytest.importorskip("tokenizers")
    folder = gpt2_dir(tmp_path / "m", tensors=gpt2_tensors(vocab=len(WORDS)))
    (folder / "vocab.json").unlink()
    (folder / "vocab.txt").write_text("\n".join(WORDS) + "\n")
    example = from_pretrained(folder, text="Cats")  # lower-cased, WordPiece
    assert example.tokens == ("[CLS]", "cat", "##s", "[SEP]")
    (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
    assert from_pretrained(folder, text="The").tokens[1] == "[UNK]"


def test_text_through_byte_level_bpe(tmp_path) -> None:
    pytest.importorskip("tokenizers")
    vocab = {"t": 0, "h": 1, "e": 2, "th": 3, "the": 4, "Ġ": 5}
    folder = gpt2_dir(tmp_path / "m", vocab=vocab)
    (folder / "merges.txt").write_text("#version: 0.2\nt h\nth e\n")
    assert from_pretrained(folder, text="the").tokens == ("the",)


def test_text_mistakes_are_one_line(tmp_path, capsys) -> None:
    folder = gpt2_dir(tmp_path / "m")
    with pytest.raises(InputError, match="text="):
        from_pretrained(folder, "the cat")  # a string where token ids belong
    with pytest.raises(InputError, match="tokenizer.json, or vocab.txt"):
        from_pretrained(folder, text="the cat")  # vocab.json without merges.txt
    with pytest.raises(InputError, match="once"):
        from_pretrained(folder, [0], text="the")
    (folder / "tokenizer.json").write_text('{"model": {"type": "Nope"}}')
    pytest.importorskip("tokenizers")
    status = main(["import", str(folder), "--text", "the", "--out", str(tmp_path / "x.toml")])
    err = capsys.readouterr().err
    assert status == 2 and "cannot be used" in err and err.count("\n") == 1
    (folder / "tokenizer.json").unlink()
    (folder / "tokenizer.json").symlink_to(tmp_path / "elsewhere.json")
    (tmp_path / "elsewhere.json").write_text("{}")
    with pytest.raises(InputError, match="outside the model directory"):
        from_pretrained(folder, text="the")
