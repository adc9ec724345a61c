"""Text in: a sentence tokenized by the model directory's own tokenizer.

``tokenizer.json`` is read with the ``tokenizers`` library (the one Hugging Face's fast
tokenizers are); without it, BERT's ``vocab.txt`` (WordPiece, lower-cased unless
``tokenizer_config.json`` says ``do_lower_case = false``) or GPT-2's ``vocab.json`` with
``merges.txt`` (byte-level BPE).  Every file is read through
:class:`~symformer.example.model_dir.ModelDir` (no link out of the directory, size
limits) and handed to the library as text, never as a path it would open itself.
Special tokens are added as the tokenizer's post-processor adds them (BERT's ``[CLS]``
… ``[SEP]``), as ``tokenizer(text)`` does in ``transformers``.
"""

from __future__ import annotations

from typing import Any

from symformer.errors import InputError, NotSupportedError
from symformer.example.model_dir import MAX_VOCAB_BYTES, ModelDir

#: The longest text tokenized (the example is for a sentence, not a document).
MAX_TEXT_CHARS = 10_000
_HINT = "pip install tokenizers"


def _library() -> Any:
    try:
        import tokenizers
    except ImportError:
        raise NotSupportedError(f"--text needs the tokenizers library: {_HINT}") from None
    return tokenizers


def _decoded(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{name}: not UTF-8 text") from None


def _tokenizer(folder: ModelDir) -> Any:
    """The directory's tokenizer, from the first of its files that makes one."""
    tokenizers = _library()
    data = folder.read_bytes("tokenizer.json", MAX_VOCAB_BYTES)
    if data is not None:
        return tokenizers.Tokenizer.from_str(_decoded(data, folder.name("tokenizer.json")))
    words = folder.read_bytes("vocab.txt", MAX_VOCAB_BYTES)
    if words is not None:
        config = folder.read_json("tokenizer_config.json")
        lower = config.get("do_lower_case", True) if isinstance(config, dict) else True
        if not isinstance(lower, bool):
            raise InputError(f"{folder.name('tokenizer_config.json')}: do_lower_case must be "
                             f"true or false")
        lines = _decoded(words, folder.name("vocab.txt")).splitlines()
        vocab = {token: i for i, token in reversed(list(enumerate(lines)))}
        from tokenizers.implementations import BertWordPieceTokenizer

        return BertWordPieceTokenizer(vocab, lowercase=lower)
    table = folder.read_json("vocab.json", MAX_VOCAB_BYTES)
    merges = folder.read_bytes("merges.txt", MAX_VOCAB_BYTES)
    if table is not None and merges is not None:
        if not isinstance(table, dict) or not all(
                isinstance(i, int) and not isinstance(i, bool) for i in table.values()):
            raise InputError(f"{folder.name('vocab.json')}: must be a table of token to id")
        pairs = []
        for n, line in enumerate(_decoded(merges, folder.name("merges.txt")).splitlines()):
            if line.startswith("#version") or not line.strip():
                continue
            parts = line.split(" ")
            if len(parts) != 2:
                raise InputError(f"{folder.name('merges.txt')}: line {n + 1} is not two "
                                 f"tokens separated by a space")
            pairs.append((parts[0], parts[1]))
        from tokenizers.implementations import ByteLevelBPETokenizer

        return ByteLevelBPETokenizer(table, pairs)
    raise InputError(f"{folder.given}: text needs the directory's tokenizer (tokenizer.json, "
                     f"or vocab.txt, or vocab.json with merges.txt); give token ids instead")


def tokenize(directory: str | ModelDir, text: str) -> tuple[list[int], list[str]]:
    """The token ids of ``text`` and their pieces, by the directory's own tokenizer."""
    return tokenize_all(directory, [text])[0]


def tokenize_all(directory: str | ModelDir, texts: list[str]
                 ) -> list[tuple[list[int], list[str]]]:
    """Each text's token ids and pieces, the directory's tokenizer read once."""
    for text in texts:
        if not isinstance(text, str) or not text.strip():
            raise InputError("text: give a non-empty sentence to tokenize")
        if len(text) > MAX_TEXT_CHARS:
            raise InputError(f"text: {len(text):,} characters, more than the "
                             f"{MAX_TEXT_CHARS:,} tokenized at once")
    folder = directory if isinstance(directory, ModelDir) else ModelDir(directory)
    try:
        tokenizer = _tokenizer(folder)
        encodings = [tokenizer.encode(text) for text in texts]
    except (InputError, NotSupportedError):
        raise
    except BaseException as exc:  # the library's own errors, a Rust panic among them
        if isinstance(exc, (KeyboardInterrupt, SystemExit, MemoryError)):
            raise
        first = (str(exc).splitlines() or [type(exc).__name__])[0][:160]
        raise InputError(f"{folder.given}: its tokenizer cannot be used ({first})") from None
    for text, encoding in zip(texts, encodings):
        if not encoding.ids:
            raise InputError(f"{folder.given}: the tokenizer makes no token of "
                             f"{text[:40]!r}")
    return [(list(e.ids), list(e.tokens)) for e in encodings]
