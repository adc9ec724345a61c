"""Text in: a sentence tokenized by the model directory's own tokenizer.

``tokenizer.json`` is read with the ``tokenizers`` library (the one Hugging Face's fast
tokenizers are); without it, BERT's ``vocab.txt`` (WordPiece, lower-cased unless
``tokenizer_config.json`` says ``do_lower_case = false``) or GPT-2's ``vocab.json`` with
``merges.txt`` (byte-level BPE).  Every file is read through
:class:`~symformer.example.model_dir.ModelDir` (no link out of the directory, size
limits) and handed to the library as text, never as a path it would open itself.
Special tokens are added as the tokenizer's post-processor adds them (BERT's ``[CLS]``
… ``[SEP]``), as ``tokenizer(text)`` does in ``transformers``; like that call, the
file's padding and truncation are not applied (a ``"padding": {"Fixed": 100000000}``
would make a sentence of 10^8 tokens).

A ``tokenizer.json`` is untrusted too, and the library builds whatever it describes:
before it is used, what it can add to a sentence is bounded from its JSON (the
special tokens its post-processor adds, at most :data:`MAX_SPECIAL_TOKENS`; how much
its normalizer's ``Replace`` and ``Prepend`` rules can lengthen the text, at most
:data:`MAX_NORMALIZED_CHARS` characters), and an encoding of more than
:data:`MAX_TOKENS` tokens is refused before its ids are read.  The library's own
output on the standard error (a Rust panic's message and backtrace) is held back:
its failure is one line.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

from symformer.errors import InputError, NotSupportedError
from symformer.example.model_dir import MAX_VOCAB_BYTES, ModelDir, parse_json

#: The longest text tokenized (the example is for a sentence, not a document).
MAX_TEXT_CHARS = 10_000
#: The most tokens a sentence may have once tokenized (4 byte-level tokens a
#: character, and the special tokens).
MAX_TOKENS = 4 * MAX_TEXT_CHARS + 1_000
#: The most special tokens a post-processor may add to a sentence (BERT's: 2).
MAX_SPECIAL_TOKENS = 1_000
#: The longest text a normalizer may make of a sentence, as bounded from its rules.
MAX_NORMALIZED_CHARS = 100_000
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


def vocab_lines(text: str) -> list[str]:
    """The tokens of a ``vocab.txt``, one a line, as transformers reads them (Python's
    text mode, then ``rstrip("\\n")``): lines end at ``\\n``, ``\\r\\n`` or ``\\r`` only, so
    a token holding another line separator (``\\x1c``, ``\\x85``, U+2028) keeps its id.

    >>> vocab_lines("a\\x85b\\r\\nc\\n")
    ['a\\x85b', 'c']
    """
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def _tokenizer(folder: ModelDir, longest: int) -> Any:
    """The directory's tokenizer, from the first of its files that makes one
    (``longest``: the longest text it will tokenize, for the normalizer's bound)."""
    tokenizers = _library()
    data = folder.read_bytes("tokenizer.json", MAX_VOCAB_BYTES)
    if data is not None:
        name = folder.name("tokenizer.json")
        spec = parse_json(data, name, exact_decimals=False)
        if not isinstance(spec, dict):
            raise InputError(f"{name}: must be a JSON object (a tokenizer)")
        bounded(spec, name, longest)
        # as transformers' tokenizer(text) does: no padding, no truncation
        spec = {**spec, "padding": None, "truncation": None}
        return tokenizers.Tokenizer.from_str(json.dumps(spec))
    words = folder.read_bytes("vocab.txt", MAX_VOCAB_BYTES)
    if words is not None:
        config = folder.read_json("tokenizer_config.json")
        lower = config.get("do_lower_case", True) if isinstance(config, dict) else True
        if not isinstance(lower, bool):
            raise InputError(f"{folder.name('tokenizer_config.json')}: do_lower_case must be "
                             f"true or false")
        lines = vocab_lines(_decoded(words, folder.name("vocab.txt")))
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
        with _quiet_stderr():
            tokenizer = _tokenizer(folder, max(len(text) for text in texts))
            encodings = [tokenizer.encode(text) for text in texts]
    except (InputError, NotSupportedError):
        raise
    except BaseException as exc:  # the library's own errors, a Rust panic among them
        if isinstance(exc, (KeyboardInterrupt, SystemExit, MemoryError)):
            raise
        first = (str(exc).splitlines() or [type(exc).__name__])[0][:160]
        raise InputError(f"{folder.given}: its tokenizer cannot be used "
                         f"({first!r:.160})") from None
    for text, encoding in zip(texts, encodings):
        if len(encoding) > MAX_TOKENS:  # before its ids are made Python integers
            raise InputError(f"{folder.given}: the tokenizer makes {len(encoding):,} tokens "
                             f"of {text[:40]!r}, more than the {MAX_TOKENS:,} a sentence "
                             f"may have")
        if not len(encoding):
            raise InputError(f"{folder.given}: the tokenizer makes no token of "
                             f"{text[:40]!r}")
    return [(list(e.ids), list(e.tokens)) for e in encodings]


def bounded(spec: dict[str, Any], name: str, longest: int) -> None:
    """Refuse a ``tokenizer.json`` that could make a sentence of ``longest``
    characters too long: more than :data:`MAX_SPECIAL_TOKENS` special tokens added, or
    a normalizer that could lengthen it past :data:`MAX_NORMALIZED_CHARS`."""
    added = _special_tokens(spec.get("post_processor"))
    if added > MAX_SPECIAL_TOKENS:
        raise InputError(f"{name}: post_processor adds {added:,} special tokens to a "
                         f"sentence, more than the {MAX_SPECIAL_TOKENS:,} read")
    factor, extra = _growth(spec.get("normalizer"))
    if longest * factor + extra > MAX_NORMALIZED_CHARS:
        raise InputError(f"{name}: normalizer can make a text of {longest:,} characters "
                         f"{longest * factor + extra:,} long (its Replace and Prepend "
                         f"rules), more than the {MAX_NORMALIZED_CHARS:,} tokenized")


def _special_tokens(processor: Any) -> int:
    """An upper bound on the tokens ``processor`` (a post_processor's JSON) adds to one
    sentence."""
    if not isinstance(processor, dict):
        return 0
    kind = processor.get("type")
    if kind == "Sequence":
        parts = processor.get("processors")
        return sum(_special_tokens(p) for p in parts) if isinstance(parts, list) else 0
    if kind in ("BertProcessing", "RobertaProcessing"):
        return 2
    if kind != "TemplateProcessing":
        return 0
    specials = processor.get("special_tokens")
    sizes = {key: len(value.get("ids") or []) if isinstance(value, dict) else 0
             for key, value in specials.items()} if isinstance(specials, dict) else {}
    most = max(sizes.values(), default=0)
    total = 0
    for template in ("single", "pair"):
        pieces = processor.get(template)
        for piece in pieces if isinstance(pieces, list) else []:
            special = piece.get("SpecialToken") if isinstance(piece, dict) else None
            if isinstance(special, dict):
                total += sizes.get(special.get("id"), most)
    return total


def _growth(normalizer: Any) -> tuple[int, int]:
    """``(factor, extra)``: a normalizer (its JSON) makes a text of n characters at
    most ``n * factor + extra`` long (``Replace``: its content per character matched,
    one more where a regular expression may match nothing; ``Prepend``: its text)."""
    if not isinstance(normalizer, dict):
        return 1, 0
    kind = normalizer.get("type")
    if kind == "Sequence":
        factor, extra = 1, 0
        parts = normalizer.get("normalizers")
        for part in parts if isinstance(parts, list) else []:
            f, e = _growth(part)
            factor, extra = factor * f, extra * f + e
            if factor > MAX_NORMALIZED_CHARS:
                break
        return factor, extra
    if kind == "Prepend":
        text = normalizer.get("prepend")
        return 1, len(text) if isinstance(text, str) else 0
    if kind == "Replace":
        content = normalizer.get("content")
        pattern = normalizer.get("pattern")
        length = len(content) if isinstance(content, str) else 0
        matched = pattern.get("String") if isinstance(pattern, dict) else None
        if isinstance(matched, str) and matched:
            return max(1, math.ceil(length / len(matched))), 0
        regex = pattern.get("Regex") if isinstance(pattern, dict) else None
        if isinstance(regex, str) and not _may_match_nothing(regex):
            return max(1, length), 0  # each match takes a character at least
        return length + 1, length  # content may go between any two characters
    return 1, 0


#: What can make a regular expression match an empty string somewhere but not at the
#: start of an empty text: anchors and look-arounds.
_ZERO_WIDTH = ("(?=", "(?!", "(?<", "\\b", "\\B", "\\A", "\\Z", "\\z", "\\G", "^", "$")


def _may_match_nothing(regex: str) -> bool:
    """True unless ``regex`` surely matches at least one character each time (read
    with Python's syntax, which Oniguruma's extends; anything unsure is True)."""
    if any(mark in regex for mark in _ZERO_WIDTH):
        return True
    try:
        return re.fullmatch(f"(?:{regex})", "") is not None
    except (re.error, RecursionError, OverflowError):
        return True


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """The standard error (file descriptor 2) held back while the library runs: a
    Rust panic prints its message (and, with RUST_BACKTRACE, a backtrace) there before
    it is raised as an exception."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no standard error to hold back
        yield
        return
    try:
        with tempfile.TemporaryFile() as sink:
            os.dup2(sink.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved, 2)
    finally:
        os.close(saved)
